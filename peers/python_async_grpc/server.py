"""python_async_grpc: the Greeter on grpcio's asyncio server, written the plain way.

Usage: server.py PORT STUBS_DIR [CERT KEY]   (STUBS_DIR holds helloworld_pb2*.py from build.sh;
with CERT and KEY, PEM files: TLS)
"""
import asyncio
import sys


async def serve(port, stubs, tls):
    sys.path.insert(0, stubs)
    import grpc
    import helloworld_pb2
    import helloworld_pb2_grpc

    class Greeter(helloworld_pb2_grpc.GreeterServicer):
        async def SayHello(self, request, context):
            return helloworld_pb2.HelloReply(response=request.request)

    server = grpc.aio.server()
    helloworld_pb2_grpc.add_GreeterServicer_to_server(Greeter(), server)
    if tls:
        cert, key = (open(path, "rb").read() for path in tls)
        credentials = grpc.ssl_server_credentials([(key, cert)])
        server.add_secure_port(f"127.0.0.1:{port}", credentials)
    else:
        server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], sys.argv[2], sys.argv[3:5] if len(sys.argv) >= 5 else None))
