//! A map keyed by stream id. Stream ids are small, unique, odd integers chosen by the peer's
//! own counter: a multiplicative (Fibonacci) hash spreads them well, at a fraction of SipHash's
//! cost on a path taken several times per call. HashDoS is not a concern: a peer can only
//! open streams with increasing ids, bounded by SETTINGS_MAX_CONCURRENT_STREAMS.

use hashbrown::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Hashes one `u32` stream id.
#[derive(Default)]
pub(crate) struct StreamIdHasher(u64);

impl Hasher for StreamIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not used for u32 keys; kept correct for any other input.
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u32(&mut self, id: u32) {
        self.0 = u64::from(id).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A map from stream id to `V`.
pub(crate) type StreamMap<V> = HashMap<u32, V, BuildHasherDefault<StreamIdHasher>>;
