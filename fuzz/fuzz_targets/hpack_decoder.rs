//! Fuzzes the HPACK decoder: any header block decodes or fails with an error, never panics;
//! two blocks in a row exercise the dynamic table.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut decoder = grpclab_h2::hpack::Decoder::new(4096);
    let (first, second) = data.split_at(data.len() / 2);
    if decoder.decode(first, |_, _| {}).is_ok() {
        let _ = decoder.decode(second, |_, _| {});
    }
});
