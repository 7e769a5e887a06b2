//! HPACK (RFC 7541): header compression for HTTP/2.
//!
//! - [`Decoder`]: static and dynamic tables, Huffman, table size updates; every malformed
//!   block is an [`HpackError`] (a connection error of type COMPRESSION_ERROR).
//! - [`DecodedBlocks`]: what a repeated block decoded to, reused while the table is unchanged.
//! - [`Encoder`]: indexes what the caller marks as repeating (gRPC's constant headers), so
//!   after the first call a header block is a few bytes; varying values (`grpc-timeout`,
//!   `grpc-message`) go without indexing and never churn the table. Literals are
//!   Huffman-coded when that is shorter.

mod decoded;
mod decoder;
mod encoder;
pub mod huffman;
mod huffman_table;
pub mod table;

pub use decoded::{DecodedBlocks, REUSABLE_BLOCK};
pub use decoder::{Decoder, MAX_HEADER_LIST};

/// The largest header block (HEADERS plus CONTINUATIONs) a connection buffers.
pub fn decoder_max_block() -> usize {
    MAX_HEADER_LIST
}
pub use encoder::{literal_unindexed, Encoder, Indexing};

/// A header block that is made of table references only, kept to be written again verbatim
/// while the encoder's table stays the same: after the first call, encoding gRPC's constant
/// headers costs a copy of a few bytes instead of table searches.
#[derive(Debug, Default, Clone)]
pub struct CachedBlock {
    block: Vec<u8>,
    generation: Option<u64>,
}

impl CachedBlock {
    /// The block, appended to `out`: from the cache when still valid, else encoded by `encode`
    /// (into `out`, via the encoder) and cached when it changed nothing in the table.
    ///
    /// The hit (a copy of the cached bytes) is every call's path and small enough to inline
    /// into each caller; the miss is out of line, so the compiler's inlining budget for the
    /// caller (a connection's whole turn) is not spent on it.
    #[inline]
    pub fn write(
        &mut self,
        encoder: &mut Encoder,
        out: &mut Vec<u8>,
        encode: impl FnOnce(&mut Encoder, &mut Vec<u8>),
    ) {
        if self.generation == Some(encoder.generation()) {
            out.extend_from_slice(&self.block);
            return;
        }
        self.encode_and_cache(encoder, out, encode);
    }

    /// The cached block, if it is still valid for `encoder`'s table (a caller may write it
    /// straight where it goes, without a scratch copy); `None`: encode it with [`Self::write`].
    #[inline]
    pub fn cached(&self, encoder: &Encoder) -> Option<&[u8]> {
        (self.generation == Some(encoder.generation())).then_some(self.block.as_slice())
    }

    /// The miss: encodes the block and caches it when it changed nothing in the table.
    #[inline(never)]
    #[cold]
    fn encode_and_cache(
        &mut self,
        encoder: &mut Encoder,
        out: &mut Vec<u8>,
        encode: impl FnOnce(&mut Encoder, &mut Vec<u8>),
    ) {
        let before = encoder.generation();
        let start = out.len();
        encoder.begin_block(out);
        encode(encoder, out);
        if encoder.generation() == before {
            self.block.clear();
            self.block.extend_from_slice(&out[start..]);
            self.generation = Some(before);
        } else {
            self.generation = None;
        }
    }
}

/// Why a header block could not be decoded (RFC 7541 §2.3.3, §4.2, §5.1, §5.2, §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HpackError {
    /// An index of 0, or past the end of the static and dynamic tables.
    #[error("HPACK index {0} is not in the tables")]
    InvalidIndex(usize),
    /// The block ended inside an integer or a string.
    #[error("HPACK block ends mid-field")]
    Truncated,
    /// An integer does not fit (more than 2^32).
    #[error("HPACK integer overflows")]
    IntegerOverflow,
    /// Bad Huffman code, EOS inside a string, or bad padding.
    #[error("invalid Huffman-coded string")]
    Huffman,
    /// A dynamic table size update above the limit, or after the first field.
    #[error("invalid dynamic table size update")]
    InvalidTableSizeUpdate,
    /// The decoded header list is larger than this decoder accepts.
    #[error("header list larger than {0} bytes")]
    HeaderListTooLarge(usize),
}

/// Decodes an integer with an `prefix`-bit prefix (RFC 7541 §5.1) from `block[*at..]`.
pub(crate) fn decode_integer(
    block: &[u8],
    at: &mut usize,
    prefix: u8,
) -> Result<usize, HpackError> {
    let mask = (1u16 << prefix) as usize - 1;
    let first = *block.get(*at).ok_or(HpackError::Truncated)? as usize & mask;
    *at += 1;
    if first < mask {
        return Ok(first);
    }
    let mut value = mask;
    let mut shift = 0u32;
    loop {
        let byte = *block.get(*at).ok_or(HpackError::Truncated)?;
        *at += 1;
        if shift > 28 {
            return Err(HpackError::IntegerOverflow);
        }
        value = value
            .checked_add(((byte & 0x7f) as usize) << shift)
            .ok_or(HpackError::IntegerOverflow)?;
        if value > u32::MAX as usize {
            return Err(HpackError::IntegerOverflow);
        }
        shift += 7;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
}

/// Encodes `value` with a `prefix`-bit prefix, OR-ing `flags` into the first byte.
pub(crate) fn encode_integer(value: usize, prefix: u8, flags: u8, out: &mut Vec<u8>) {
    let mask = (1usize << prefix) - 1;
    if value < mask {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask as u8);
    let mut rest = value - mask;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
}

#[cfg(test)]
mod tests;
