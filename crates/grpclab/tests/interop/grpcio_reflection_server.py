"""A Greeter written the way a Python user writes one (grpcio, stubs from grpcio-tools, server
reflection from grpcio-reflection, which speaks only grpc.reflection.v1alpha): the peer for
grpclab's reflection client. Prints its port, serves until its standard input closes.

Usage: grpcio_reflection_server.py PROTO_DIR [CERT.pem KEY.pem [CLIENT_CA.pem]]
       (PROTO_DIR holds helloworld.proto; with CERT and KEY it serves TLS, grpcio's own stack;
       with CLIENT_CA it requires client certificates signed by that CA: mutual TLS)
"""
import os
import sys
import tempfile
from concurrent import futures

import grpc
import grpc_tools
from grpc_tools import protoc
from grpc_reflection.v1alpha import reflection


def main():
    proto_dir = sys.argv[1]
    out = tempfile.mkdtemp()
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    status = protoc.main(["protoc", f"-I{proto_dir}", f"-I{well_known}", f"--python_out={out}",
                          f"--grpc_python_out={out}", os.path.join(proto_dir, "helloworld.proto")])
    if status != 0:
        sys.exit(f"protoc failed ({status})")
    sys.path.insert(0, out)
    import helloworld_pb2
    import helloworld_pb2_grpc

    class Greeter(helloworld_pb2_grpc.GreeterServicer):
        def SayHello(self, request, context):
            return helloworld_pb2.HelloReply(response=request.request)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    helloworld_pb2_grpc.add_GreeterServicer_to_server(Greeter(), server)
    services = (helloworld_pb2.DESCRIPTOR.services_by_name["Greeter"].full_name, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(services, server)
    if len(sys.argv) > 3:
        with open(sys.argv[2], "rb") as cert, open(sys.argv[3], "rb") as key:
            pair = (key.read(), cert.read())
        if len(sys.argv) > 4:
            with open(sys.argv[4], "rb") as client_ca:
                credentials = grpc.ssl_server_credentials(
                    [pair], root_certificates=client_ca.read(), require_client_auth=True)
        else:
            credentials = grpc.ssl_server_credentials([pair])
        port = server.add_secure_port("127.0.0.1:0", credentials)
    else:
        port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    sys.stdin.read()
    server.stop(0)


if __name__ == "__main__":
    main()
