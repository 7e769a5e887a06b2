//! The HPACK encoder.

use bytes::Bytes;

use super::table::{find_static, DynamicTable};
use super::{encode_integer, huffman};

/// How a field may be indexed (RFC 7541 §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Indexing {
    /// Add it to the dynamic table: for values that repeat call after call.
    Incremental,
    /// Do not add it: for values that vary (a timeout, an error message).
    Without,
    /// Never add it, here or at any intermediary: for secrets.
    Never,
}

/// Encodes header blocks of one connection direction.
#[derive(Debug)]
pub struct Encoder {
    table: DynamicTable,
    /// A table size change to announce at the start of the next block.
    pending_size_update: Option<usize>,
    /// Bumped whenever the table changes: a block encoded without bumping it is made of
    /// references only, and stays valid (cacheable) until the next bump.
    generation: u64,
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder::new(4096)
    }
}

impl Encoder {
    /// An encoder whose table may hold `max_size` bytes (the peer's SETTINGS_HEADER_TABLE_SIZE,
    /// 4096 until it says otherwise).
    pub fn new(max_size: usize) -> Encoder {
        Encoder {
            table: DynamicTable::new(max_size),
            pending_size_update: None,
            generation: 0,
        }
    }

    /// The peer changed SETTINGS_HEADER_TABLE_SIZE: use at most `max_size`, and say so.
    pub fn set_max_size(&mut self, max_size: usize) {
        // Never grow past 4096: a bigger table buys nothing for gRPC's few headers.
        let max_size = max_size.min(4096);
        if max_size != self.table.max_size() {
            self.table.set_max_size(max_size);
            self.pending_size_update = Some(max_size);
            self.generation += 1;
        }
    }

    /// Changes whenever the dynamic table changes. A header block encoded while it stayed the
    /// same consists of table references only and may be reused verbatim until it changes.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Starts a header block (emits a pending table size update).
    pub fn begin_block(&mut self, out: &mut Vec<u8>) {
        if let Some(size) = self.pending_size_update.take() {
            encode_integer(size, 5, 0x20, out);
        }
    }

    /// Appends one field to the block being written.
    pub fn field(&mut self, name: &[u8], value: &[u8], indexing: Indexing, out: &mut Vec<u8>) {
        let (static_full, static_name) = find_static(name, value);
        let (dynamic_full, dynamic_name) = self.table.find(name, value);
        if indexing != Indexing::Never {
            if let Some(index) = static_full {
                encode_integer(index, 7, 0x80, out);
                return;
            }
            if let Some(position) = dynamic_full {
                encode_integer(62 + position, 7, 0x80, out);
                return;
            }
        }
        let name_index = static_name.or(dynamic_name.map(|position| 62 + position));
        let (prefix, flags) = match indexing {
            Indexing::Incremental => (6, 0x40),
            Indexing::Without => (4, 0x00),
            Indexing::Never => (4, 0x10),
        };
        match name_index {
            Some(index) => encode_integer(index, prefix, flags, out),
            None => {
                encode_integer(0, prefix, flags, out);
                string(name, out);
            }
        }
        string(value, out);
        if indexing == Indexing::Incremental {
            self.table
                .insert(Bytes::copy_from_slice(name), Bytes::copy_from_slice(value));
            self.generation += 1;
        }
    }
}

/// A field as a literal without indexing, its name and value as plain strings: for values that
/// differ call after call (per-call metadata). Why not [`Encoder::field`]: a table search
/// never hits for them and Huffman coding costs more CPU than the bytes it saves, on both
/// sides; and, not being indexed, it leaves the table (and every cached block) as it was.
pub fn literal_unindexed(name: &[u8], value: &[u8], out: &mut Vec<u8>) {
    out.push(0x00);
    encode_integer(name.len(), 7, 0x00, out);
    out.extend_from_slice(name);
    encode_integer(value.len(), 7, 0x00, out);
    out.extend_from_slice(value);
}

/// A string literal, Huffman-coded when that is shorter.
fn string(data: &[u8], out: &mut Vec<u8>) {
    let huffman_len = huffman::encoded_len(data);
    if huffman_len < data.len() {
        encode_integer(huffman_len, 7, 0x80, out);
        huffman::encode(data, out);
    } else {
        encode_integer(data.len(), 7, 0x00, out);
        out.extend_from_slice(data);
    }
}
