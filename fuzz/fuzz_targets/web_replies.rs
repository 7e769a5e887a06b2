//! Fuzzes the gRPC-Web and Connect reply decoders (`grpclab_core::protocol`): any bytes, as a
//! binary body, a base64 text body and a Connect error body, are read or refused with a
//! reason, never a panic; a body read has its message frames inside it; and a body framed
//! from the input (a message, then a trailer frame) reads back to that message. The streamed
//! reader (`grpclab_core::streamed_reply`) takes the same bytes in every protocol, split
//! where the first byte says: read or refused, never a panic, and it counts what the whole
//! decoder finds.
#![no_main]

use grpclab_core::protocol::{decode_connect_error, decode_grpc_web, Protocol};
use grpclab_core::streamed_reply::StreamedReply;
use libfuzzer_sys::fuzz_target;

fn frame(flag: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![flag];
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

fuzz_target!(|data: &[u8]| {
    for text in [false, true] {
        match decode_grpc_web(data, text) {
            Ok(reply) => {
                for range in &reply.messages {
                    assert!(range.end <= reply.body.len() && range.start + 5 <= range.end);
                }
            }
            Err(err) => assert!(!err.0.is_empty()),
        }
    }
    let split = data.first().map_or(0, |b| usize::from(*b)).min(data.len());
    for protocol in [Protocol::GrpcWeb, Protocol::GrpcWebText, Protocol::Connect] {
        let Some(mut reader) = StreamedReply::new(protocol) else {
            continue;
        };
        let read = reader
            .feed(&data[..split])
            .and_then(|_| reader.feed(&data[split..]))
            .and_then(|_| reader.finish());
        if protocol != Protocol::Connect {
            let whole = decode_grpc_web(data, protocol == Protocol::GrpcWebText);
            if let (Ok(status), Ok(reply)) = (&read, &whole) {
                assert_eq!(reader.messages(), reply.messages.len() as u64);
                assert_eq!(status.code, reply.code);
            }
        }
        if let Err(err) = read {
            assert!(!err.0.is_empty());
        }
    }
    let status = data.first().map_or(500, |b| 400 + u16::from(*b));
    let failure = decode_connect_error(status, data);
    assert!(failure.code != grpclab_core::Code::Ok);
    let body = [frame(0, data), frame(0x80, b"grpc-status: 0\r\n")].concat();
    let reply = decode_grpc_web(&body, false).expect("a well-framed body reads");
    assert_eq!(reply.messages.len(), 1);
    assert_eq!(&reply.body[reply.messages[0].start + 5..reply.messages[0].end], data);
});
