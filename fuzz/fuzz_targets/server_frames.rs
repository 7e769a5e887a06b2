//! Fuzzes a server connection's frame handling: any bytes after the preface must end in
//! frames or a GOAWAY, never a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = grpclab_h2::server::feed_server(data);
});
