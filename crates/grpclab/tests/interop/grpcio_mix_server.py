"""A grpcio server with two unary methods of one service, `mix.v1.Shop/Browse` and
`mix.v1.Shop/Buy`, each echoing its request's bytes (generic handlers: no generated code),
for grpclab's workload mixes. It counts the calls of each method and keeps the values of the
`x-kind` and `x-n` metadata and the request sizes (bytes) each method received. Prints its
port, serves until its standard input closes, then writes {"Browse": {"calls": N, "x-kind":
[...], "x-n": [...], "sizes": [...]}, ...} as JSON to OUT.

Usage: grpcio_mix_server.py OUT
"""
import json
import sys
import threading
from concurrent import futures

import grpc

SEEN = {"Browse": {"calls": 0, "x-kind": [], "x-n": [], "sizes": []},
        "Buy": {"calls": 0, "x-kind": [], "x-n": [], "sizes": []}}
LOCK = threading.Lock()


def handler(name):
    def serve(request, context):
        with LOCK:
            seen = SEEN[name]
            seen["calls"] += 1
            seen["sizes"].append(len(request))
            for key, value in context.invocation_metadata():
                if key in ("x-kind", "x-n"):
                    seen[key].append(value)
        return request
    return grpc.unary_unary_rpc_method_handler(
        serve, request_deserializer=None, response_serializer=None)


def main():
    out = sys.argv[1]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "mix.v1.Shop", {"Browse": handler("Browse"), "Buy": handler("Buy")}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    sys.stdin.read()
    server.stop(0)
    with LOCK, open(out, "w") as file:
        json.dump(SEEN, file)


if __name__ == "__main__":
    main()
