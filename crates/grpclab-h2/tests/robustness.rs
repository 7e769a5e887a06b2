//! Garbage in, no panic out: thousands of random and mutated inputs through the server
//! connection's frame handling and the HPACK decoder, deterministic (a fixed-seed generator),
//! bounded, on stable Rust. The cargo-fuzz targets under `fuzz/` explore further.

use grpclab_h2::frame::{self, flags, kind};
use grpclab_h2::hpack::Decoder;
use grpclab_h2::server::feed_server;

mod common;

use common::Rng;

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
        for _ in 0..rng.below(6) {
            if input.is_empty() {
                break;
            }
            let at = rng.below(input.len());
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
