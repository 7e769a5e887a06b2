//! Garbage in, no panic out: thousands of random and mutated inputs through the server
//! connection's frame handling, the client connection's (every call still ends exactly once)
//! and the HPACK decoder, deterministic (a fixed-seed generator), bounded, on stable Rust. The
//! cargo-fuzz targets under `fuzz/` explore further.

use grpclab_h2::client::feed_client;
use grpclab_h2::frame::{self, flags, kind};
use grpclab_h2::hpack::Decoder;
use grpclab_h2::server::feed_server;

use crate::common::Rng;

/// A valid opening: SETTINGS, then a request (HEADERS + DATA) on stream 1.
fn valid_input() -> Vec<u8> {
    let mut out = Vec::new();
    frame::write_settings(&mut out, &[]);
    let block = [
        0x83, 0x86, 0x04, 0x02, b'/', b'x', 0x0f, 0x10, 0x10, b'a', b'p', b'p', b'l', b'i', b'c',
        b'a', b't', b'i', b'o', b'n', b'/', b'g', b'r', b'p', b'c',
    ];
    frame::write_headers(&mut out, 1, &block, false, 16_384);
    frame::write_data(&mut out, 1, b"\0\0\0\0\x03abc", true);
    frame::write_header(&mut out, 8, kind::PING, 0, 0);
    out.extend_from_slice(b"pingpong");
    frame::write_header(&mut out, 0, kind::SETTINGS, flags::ACK, 0);
    out
}

#[test]
fn the_valid_input_gets_a_reply() {
    let out = feed_server(&valid_input());
    // SETTINGS, WINDOW_UPDATE, SETTINGS ACK, then HEADERS + DATA + trailers, PING ACK.
    let mut at = 0;
    let mut kinds = Vec::new();
    while at + 9 <= out.len() {
        let header = frame::Header::parse(out[at..at + 9].try_into().unwrap());
        kinds.push(header.kind);
        at += 9 + header.length as usize;
    }
    assert!(kinds.contains(&kind::DATA), "{kinds:?}");
    assert!(kinds.contains(&kind::PING), "{kinds:?}");
    assert!(!kinds.contains(&kind::GOAWAY), "{kinds:?}");
}

/// Up to five random edits (a byte changed, the rest cut, a byte inserted, a piece repeated) at
/// positions from `keep` on: the first `keep` bytes stay as they are.
fn mutate(rng: &mut Rng, input: &mut Vec<u8>, keep: usize) {
    for _ in 0..rng.below(6) {
        if input.len() <= keep {
            break;
        }
        let at = keep + rng.below(input.len() - keep);
        match rng.below(4) {
            0 => input[at] = rng.next() as u8,
            1 => input.truncate(at),
            2 => input.insert(at, rng.next() as u8),
            _ => {
                let end = (at + rng.below(16)).min(input.len());
                let piece = input[at..end].to_vec();
                input.splice(at..at, piece);
            }
        }
    }
}

/// A header field as a literal without indexing, new name (RFC 7541 §6.2.2).
fn literal(name: &str, value: &str) -> Vec<u8> {
    let mut bytes = vec![0x00, name.len() as u8];
    bytes.extend_from_slice(name.as_bytes());
    bytes.push(value.len() as u8);
    bytes.extend_from_slice(value.as_bytes());
    bytes
}

/// What a server answers the client's first four unary calls (streams 1, 3, 5, 7): headers,
/// a reply, `grpc-status: 0`; for `feed_client`, behind its shape byte (a valid preface
/// first) and split byte.
fn valid_server_input() -> Vec<u8> {
    let mut out = vec![1, 0];
    let head = [
        literal(":status", "200"),
        literal("content-type", "application/grpc"),
    ]
    .concat();
    let trailers = literal("grpc-status", "0");
    for stream in [1, 3, 5, 7] {
        frame::write_headers(&mut out, stream, &head, false, 16_384);
        frame::write_data(&mut out, stream, b"\0\0\0\0\x03abc", false);
        frame::write_headers(&mut out, stream, &trailers, true, 16_384);
    }
    out
}

#[test]
fn the_client_completes_answered_calls_and_loses_the_rest() {
    let fed = feed_client(&valid_server_input());
    // Four slots: four calls answered; four more started once they ended, never answered.
    assert_eq!(fed.error, None, "{fed:?}");
    assert_eq!((fed.started, fed.completed, fed.lost), (8, 4, 4), "{fed:?}");
    // Without the server's preface no call is written, so none can end but as lost.
    let mut no_preface = valid_server_input();
    no_preface[0] = 0;
    let fed = feed_client(&no_preface);
    assert_eq!(fed.completed, 0, "{fed:?}");
    assert_eq!(fed.started, fed.lost, "{fed:?}");
}

/// Whatever a server sends, every call the client started ends exactly once: with a status
/// (reported to its source) or as lost with the connection.
#[test]
fn the_client_ends_every_call_exactly_once_whatever_the_server_sends() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let valid = valid_server_input();
    for round in 0..20_000 {
        let mut input = if round % 4 == 0 {
            (0..rng.below(200))
                .map(|_| rng.next() as u8)
                .collect::<Vec<u8>>()
        } else {
            valid.clone()
        };
        if round % 2 == 1 && !input.is_empty() {
            // Ping-pong streams half the time.
            input[0] |= 2;
        }
        mutate(&mut rng, &mut input, 2);
        let fed = feed_client(&input);
        assert_eq!(
            fed.started,
            fed.completed + fed.lost,
            "{fed:?} on {input:02x?}"
        );
    }
}

#[test]
fn mutated_and_random_inputs_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let valid = valid_input();
    for round in 0..20_000 {
        let mut input = if round % 4 == 0 {
            (0..rng.below(200))
                .map(|_| rng.next() as u8)
                .collect::<Vec<u8>>()
        } else {
            valid.clone()
        };
        mutate(&mut rng, &mut input, 0);
        let _ = feed_server(&input);
        let _ = Decoder::new(4096).decode(&input, |_, _| {});
    }
}

/// Inputs that once crashed a fuzz target (minimised by `scripts/fuzz_long.sh` into
/// `fuzz/regressions/<target>/`) are replayed on every test run.
#[test]
fn fuzz_regressions_replay_without_panic() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions");
    let mut replayed = 0;
    for (target, replay) in [
        (
            "server_frames",
            (|data: &[u8]| drop(feed_server(data))) as fn(&[u8]),
        ),
        ("client_frames", |data: &[u8]| {
            let fed = feed_client(data);
            assert_eq!(fed.started, fed.completed + fed.lost, "{fed:?}");
        }),
        // As the target does: two blocks in a row, through one dynamic table.
        ("hpack_decoder", |data: &[u8]| {
            let mut decoder = Decoder::new(4096);
            let (first, second) = data.split_at(data.len() / 2);
            if decoder.decode(first, |_, _| {}).is_ok() {
                let _ = decoder.decode(second, |_, _| {});
            }
        }),
    ] {
        let Ok(entries) = std::fs::read_dir(root.join(target)) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let data = std::fs::read(entry.path()).unwrap();
            replay(&data);
            replayed += 1;
        }
    }
    eprintln!("{replayed} regression input(s) replayed");
}
