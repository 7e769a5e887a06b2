#!/usr/bin/env python3
"""Python grpcio as a streaming client of grpclab's servers (issue 17; run by tests/interop.rs).

Usage: grpcio_streaming_client.py HOST:PORT

Calls grpclab.streaming.v1.StreamingEcho with messages encoded by hand (no generated code):
- PingPong, strictly: send one, read its reply, 200 times: payload echoed, sequence 0..199;
  then 2,000 messages sent without waiting: 2,000 replies, in order;
- Feed: count=500 → 500 replies, sequence 0..499, each with the payload;
- Upload: 300 messages → one summary: messages=300, bytes = their payloads' sum;
- a PingPong cancelled mid-stream ends CANCELLED on our side and the channel still works.
Prints one line per check; exits non-zero on the first failure.
"""
import queue
import sys

import grpc

SERVICE = "/grpclab.streaming.v1.StreamingEcho/"


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def read_varint(data, at):
    shift = value = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def fields(data):
    """Field number -> value (varint or bytes) of a protobuf message."""
    out, at = {}, 0
    while at < len(data):
        key, at = read_varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            out[number], at = read_varint(data, at)
        elif wire == 2:
            length, at = read_varint(data, at)
            out[number] = data[at:at + length]
            at += length
        else:
            raise ValueError(f"unexpected wire type {wire}")
    return out


def echo_request(payload):
    return b"\x0a" + varint(len(payload)) + payload


def check(ok, what):
    if not ok:
        print(f"FAIL {what}")
        sys.exit(1)
    print(f"ok   {what}")


def main():
    target = sys.argv[1]
    identity = lambda b: b
    with grpc.insecure_channel(target) as channel:
        ping_pong = channel.stream_stream(SERVICE + "PingPong", request_serializer=identity,
                                          response_deserializer=identity)
        feed = channel.unary_stream(SERVICE + "Feed", request_serializer=identity,
                                    response_deserializer=identity)
        upload = channel.stream_unary(SERVICE + "Upload", request_serializer=identity,
                                      response_deserializer=identity)

        # Strict ping-pong: the next request goes only after the previous reply.
        outbox = queue.Queue()

        def requests():
            while True:
                item = outbox.get()
                if item is None:
                    return
                yield item

        outbox.put(echo_request(b"ping-0"))
        replies = ping_pong(requests(), timeout=30)
        good = True
        for i, reply in enumerate(replies):
            got = fields(reply)
            good &= got.get(1) == f"ping-{i}".encode() and got.get(2, 0) == i
            if i + 1 == 200:
                outbox.put(None)
            else:
                outbox.put(echo_request(f"ping-{i + 1}".encode()))
        check(good and i == 199, "PingPong: 200 strict round trips, payloads and sequence in order")

        burst = [echo_request(f"m{i}".encode() * 10) for i in range(2000)]
        got = [fields(r) for r in ping_pong(iter(burst), timeout=30)]
        check(len(got) == 2000 and all(g.get(1) == f"m{i}".encode() * 10 and g.get(2, 0) == i
                                       for i, g in enumerate(got)),
              "PingPong: 2000 pipelined messages, 2000 replies in order")

        payload = b"x" * 1024
        request = b"\x08" + varint(500) + b"\x12" + varint(len(payload)) + payload
        got = [fields(r) for r in feed(request, timeout=30)]
        check(len(got) == 500 and all(g.get(1) == payload and g.get(2, 0) == i
                                      for i, g in enumerate(got)),
              "Feed: 500 replies with the payload, sequence 0..499")

        sizes = [(i % 50) + 1 for i in range(300)]
        summary = fields(upload(iter(echo_request(b"u" * n) for n in sizes), timeout=30))
        check(summary.get(1, 0) == 300 and summary.get(2, 0) == sum(sizes),
              "Upload: 300 messages counted with their bytes")

        call = ping_pong(iter(burst), timeout=30)
        next(call)
        call.cancel()
        try:
            for _ in call:
                pass
            cancelled = False
        except grpc.RpcError as err:
            cancelled = err.code() == grpc.StatusCode.CANCELLED
        check(cancelled, "PingPong cancelled mid-stream ends CANCELLED")
        got = [fields(r) for r in ping_pong(iter(burst[:10]), timeout=30)]
        check(len(got) == 10, "the channel still works after the cancel")


if __name__ == "__main__":
    main()
