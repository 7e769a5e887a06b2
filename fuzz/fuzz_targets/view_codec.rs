//! Fuzzes lab's view codecs against prost: any bytes, taken as a message and as a program for
//! the structured generator (groups, packed and wrong-typed fields, overlong varints,
//! duplicate and unknown fields), get the same accept or reject and the same reply bytes
//! from both (`grpclab_server::lab::codec_check`).
#![no_main]

use grpclab_server::lab::codec_check::{assert_agrees_with_prost, structured_request};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    assert_agrees_with_prost(data);
    assert_agrees_with_prost(&structured_request(data));
});
