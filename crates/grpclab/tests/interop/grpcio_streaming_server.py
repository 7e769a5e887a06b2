"""The streaming echo service written the way a Python user writes it (grpcio, stubs from
grpcio-tools): the peer for grpclab's streaming client (issue 17). Prints its port, serves
until its standard input closes.

Usage: grpcio_streaming_server.py PROTO_DIR   (PROTO_DIR holds streaming.proto)

Behaviour, so a client's accounting can be checked exactly:
- PingPong echoes each request, in order, with its sequence number; a request whose payload
  is b"abort" ends the call with ABORTED ("told to abort") instead of a reply, one whose
  payload is b"cancel" cancels the call (the server resets the stream);
- Feed sends `count` replies; a count above 1000 sends 10 replies, then ends with
  RESOURCE_EXHAUSTED ("at most 1000 replies");
- Upload counts messages and bytes; with PAYLOAD_LOG set in its environment, each Upload call
  also appends one line to that file: its payloads, hex, comma-separated (so a test can see
  what a client's templates rendered), after "VALUE|" when the call carried an x-n header.
"""
import os
import sys
import tempfile
import threading
from concurrent import futures

import grpc
import grpc_tools
from grpc_tools import protoc


def main():
    proto_dir = sys.argv[1]
    out = tempfile.mkdtemp()
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    status = protoc.main(["protoc", f"-I{proto_dir}", f"-I{well_known}", f"--python_out={out}",
                          f"--grpc_python_out={out}", os.path.join(proto_dir, "streaming.proto")])
    if status != 0:
        sys.exit(f"protoc failed ({status})")
    sys.path.insert(0, out)
    import streaming_pb2
    import streaming_pb2_grpc
    log_path = os.environ.get("PAYLOAD_LOG")
    log_lock = threading.Lock()

    class Echo(streaming_pb2_grpc.StreamingEchoServicer):
        def PingPong(self, requests, context):
            for sequence, request in enumerate(requests):
                if request.payload == b"abort":
                    context.abort(grpc.StatusCode.ABORTED, "told to abort")
                if request.payload == b"cancel":
                    context.cancel()
                    return
                yield streaming_pb2.EchoReply(payload=request.payload, sequence=sequence)

        def Feed(self, request, context):
            if request.count > 1000:
                for sequence in range(10):
                    yield streaming_pb2.EchoReply(payload=request.payload, sequence=sequence)
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "at most 1000 replies")
            for sequence in range(request.count):
                yield streaming_pb2.EchoReply(payload=request.payload, sequence=sequence)

        def Upload(self, requests, context):
            messages = size = 0
            payloads = []
            for request in requests:
                messages += 1
                size += len(request.payload)
                payloads.append(request.payload.hex())
            if log_path:
                x_n = dict(context.invocation_metadata()).get("x-n")
                prefix = f"{x_n}|" if x_n is not None else ""
                with log_lock, open(log_path, "a") as log:
                    log.write(prefix + ",".join(payloads) + "\n")
            return streaming_pb2.UploadSummary(messages=messages, bytes=size)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    streaming_pb2_grpc.add_StreamingEchoServicer_to_server(Echo(), server)
    # LISTEN=unix:PATH listens on a unix socket instead (and prints 0 for the port).
    listen = os.environ.get("LISTEN")
    port = server.add_insecure_port(listen) if listen else server.add_insecure_port("127.0.0.1:0")
    if listen:
        port = 0
    server.start()
    print(port, flush=True)
    threading.Thread(target=lambda: (sys.stdin.read(), server.stop(0)), daemon=True).start()
    server.wait_for_termination()


if __name__ == "__main__":
    main()
