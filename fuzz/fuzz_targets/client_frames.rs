//! Fuzzes a client connection's handling of what a server sends, with calls in flight: any
//! bytes (after a valid preface or without one) must end every call exactly once, with a status
//! or as lost with the connection — never a panic, a hang or a call counted twice.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let fed = grpclab_h2::client::feed_client(data);
    assert_eq!(fed.started, fed.completed + fed.lost, "{fed:?}");
});
