#!/usr/bin/env python3
"""Python grpcio-reflection (v1alpha) as a reflection client of grpclab's servers (run by
tests/interop.rs).

Usage: grpcio_reflection_client.py HOST:PORT

Lists the services, then builds descriptors from what the server sends: the streaming echo's
service and its PingPong method's types, and the Greeter's request type. Prints one JSON
object; exits non-zero if a lookup fails.
"""
import json
import sys

import grpc
from google.protobuf import descriptor_pool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)


def main():
    channel = grpc.insecure_channel(sys.argv[1])
    database = ProtoReflectionDescriptorDatabase(channel)
    pool = descriptor_pool.DescriptorPool(database)
    echo = pool.FindServiceByName("grpclab.streaming.v1.StreamingEcho")
    ping_pong = echo.FindMethodByName("PingPong")
    hello = pool.FindMessageTypeByName("helloworld.HelloRequest")
    print(json.dumps({
        "services": sorted(database.get_services()),
        "ping_pong": [ping_pong.input_type.full_name, ping_pong.output_type.full_name,
                      ping_pong.client_streaming, ping_pong.server_streaming],
        "hello_fields": [field.name for field in hello.fields],
    }))


if __name__ == "__main__":
    main()
