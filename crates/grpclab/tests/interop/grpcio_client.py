#!/usr/bin/env python3
"""Python grpcio as a client of grpclab's servers (interop test, run by tests/interop.rs).

Usage: grpcio_client.py HOST:PORT REQUEST_FILE [MAX_MESSAGE_BYTES]
                         [--gzip] [--ca CA.pem [--client-cert CERT.pem --client-key KEY.pem]]

With --gzip every call is sent gzip-compressed (grpcio's own compression).
With --ca the channel is TLS (grpcio's own TLS stack, BoringSSL), trusting CA.pem and
verifying the name `localhost`; with --client-cert/--client-key it presents that certificate.

REQUEST_FILE holds a framed helloworld.HelloRequest (`grpclab encode`). grpcio sends the raw
message bytes (no generated code needed); the server decodes, re-encodes and replies, and since
HelloReply and HelloRequest share their layout the reply must equal the request byte for byte.
Checks: echo, many calls on one channel, UNIMPLEMENTED for an unknown method, DEADLINE_EXCEEDED
honoured when the deadline is already past, and RESOURCE_EXHAUSTED over MAX_MESSAGE_BYTES.
Prints one line per check; exits non-zero on the first failure.
"""
import argparse

import grpc


def read(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("target")
    parser.add_argument("request_file")
    parser.add_argument("max_message", nargs="?", type=int)
    parser.add_argument("--gzip", action="store_true")
    parser.add_argument("--ca")
    parser.add_argument("--client-cert")
    parser.add_argument("--client-key")
    args = parser.parse_args()
    target, max_message = args.target, args.max_message
    message = read(args.request_file)[5:]
    compression = grpc.Compression.Gzip if args.gzip else grpc.Compression.NoCompression
    if args.ca:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=read(args.ca),
            private_key=read(args.client_key) if args.client_key else None,
            certificate_chain=read(args.client_cert) if args.client_cert else None,
        )
        channel = grpc.secure_channel(target, credentials, compression=compression,
                                      options=[("grpc.ssl_target_name_override", "localhost")])
    else:
        channel = grpc.insecure_channel(target, compression=compression)
    grpc.channel_ready_future(channel).result(timeout=10)
    say_hello = channel.unary_unary("/helloworld.Greeter/SayHello")

    reply = say_hello(message, timeout=10)
    assert reply == message, f"echo differs: {reply!r} != {message!r}"
    print("ok echo")

    for _ in range(200):
        assert say_hello(message, timeout=10) == message
    print("ok 200 calls on one channel")

    try:
        channel.unary_unary("/helloworld.Greeter/SayBye")(message, timeout=10)
        raise AssertionError("unknown method succeeded")
    except grpc.RpcError as err:
        assert err.code() == grpc.StatusCode.UNIMPLEMENTED, err
    print("ok unimplemented")

    if max_message is not None:
        try:
            say_hello(b"\x0a" + bytes([0x80, 0x80, 0x04]) + b"\x00" * 65536 * 2, timeout=10)
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, err
            print("ok resource exhausted")
        else:
            raise AssertionError("an oversized message succeeded")

    channel.close()


if __name__ == "__main__":
    main()
