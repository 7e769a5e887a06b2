//! The HPACK decoder.

use bytes::Bytes;

use super::table::{DynamicTable, STATIC};
use super::{decode_integer, huffman, HpackError};

/// Largest decoded header list accepted (names + values + 32 per field): far above what a gRPC
/// request carries, and a bound on what a peer can make us hold.
pub const MAX_HEADER_LIST: usize = 256 * 1024;

/// Decodes header blocks of one connection direction; keeps the dynamic table between blocks.
#[derive(Debug)]
pub struct Decoder {
    table: DynamicTable,
    /// The SETTINGS_HEADER_TABLE_SIZE we advertised: the most a size update may ask for.
    protocol_max: usize,
    name_scratch: Vec<u8>,
    value_scratch: Vec<u8>,
    /// Counts changes to the dynamic table (insertions, size updates). Decoding a block
    /// depends only on the block's bytes and the table, so two equal blocks decoded at the
    /// same generation give the same fields: a caller may reuse what it made of the first.
    generation: u64,
}

/// Where a field's name comes from, resolved without copying.
enum Name {
    Static(usize),
    /// Position in the dynamic table.
    Dynamic(usize),
    Literal,
}

impl Decoder {
    /// A decoder whose table may grow to `protocol_max` bytes (our SETTINGS_HEADER_TABLE_SIZE).
    pub fn new(protocol_max: usize) -> Decoder {
        Decoder {
            table: DynamicTable::new(protocol_max),
            protocol_max,
            name_scratch: Vec::new(),
            value_scratch: Vec::new(),
            generation: 0,
        }
    }

    /// The dynamic table (for tests and diagnostics).
    pub fn table(&self) -> &DynamicTable {
        &self.table
    }

    /// The dynamic table's generation: it moves whenever a decoded block changes the table.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Resolves an index (RFC 7541 §2.3.3) to a table position, without copying anything.
    fn resolve(&self, index: usize) -> Result<Name, HpackError> {
        match index {
            0 => Err(HpackError::InvalidIndex(0)),
            1..=61 => Ok(Name::Static(index - 1)),
            _ if index - 62 < self.table.len() => Ok(Name::Dynamic(index - 62)),
            _ => Err(HpackError::InvalidIndex(index)),
        }
    }

    /// A resolved entry's name and value, borrowed from the tables.
    fn entry(&self, name: &Name) -> (&[u8], &[u8]) {
        match name {
            Name::Static(i) => (STATIC[*i].0.as_bytes(), STATIC[*i].1.as_bytes()),
            Name::Dynamic(position) => self
                .table
                .get(*position)
                .map_or((&[][..], &[][..]), |(n, v)| (n.as_ref(), v.as_ref())),
            Name::Literal => (&[], &[]),
        }
    }

    /// Reads a string literal (RFC 7541 §5.2) into `scratch`, returning its range there.
    fn read_string(block: &[u8], at: &mut usize, scratch: &mut Vec<u8>) -> Result<(), HpackError> {
        let huffman_coded = block.get(*at).ok_or(HpackError::Truncated)? & 0x80 != 0;
        let len = decode_integer(block, at, 7)?;
        let end = at.checked_add(len).ok_or(HpackError::Truncated)?;
        let raw = block.get(*at..end).ok_or(HpackError::Truncated)?;
        *at = end;
        scratch.clear();
        if huffman_coded {
            huffman::decode(raw, scratch)
        } else {
            scratch.extend_from_slice(raw);
            Ok(())
        }
    }

    /// Decodes one header block, calling `field(name, value)` for each field in order.
    pub fn decode(
        &mut self,
        block: &[u8],
        mut field: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        let mut at = 0;
        let mut list_size = 0usize;
        let mut fields_seen = false;
        while at < block.len() {
            let first = block[at];
            if first & 0x80 != 0 {
                // Indexed header field (§6.1): borrowed from the tables, no copy.
                let index = decode_integer(block, &mut at, 7)?;
                let name = self.resolve(index)?;
                let (name_bytes, value_bytes) = self.entry(&name);
                list_size += name_bytes.len() + value_bytes.len() + 32;
                if list_size > MAX_HEADER_LIST {
                    return Err(HpackError::HeaderListTooLarge(MAX_HEADER_LIST));
                }
                field(name_bytes, value_bytes);
                fields_seen = true;
                continue;
            }
            if first & 0xe0 == 0x20 {
                // Dynamic table size update (§6.3): only before the first field.
                let size = decode_integer(block, &mut at, 5)?;
                if fields_seen || size > self.protocol_max {
                    return Err(HpackError::InvalidTableSizeUpdate);
                }
                self.table.set_max_size(size);
                self.generation += 1;
                continue;
            }
            // Literal: with incremental indexing (01, 6-bit), without (0000), never (0001).
            let (prefix, index_it) = if first & 0xc0 == 0x40 {
                (6, true)
            } else {
                (4, false)
            };
            let name_index = decode_integer(block, &mut at, prefix)?;
            let name = if name_index == 0 {
                Self::read_string(block, &mut at, &mut self.name_scratch)?;
                Name::Literal
            } else {
                self.resolve(name_index)?
            };
            Self::read_string(block, &mut at, &mut self.value_scratch)?;
            let name_bytes: &[u8] = match &name {
                Name::Literal => &self.name_scratch,
                resolved => self.entry(resolved).0,
            };
            list_size += name_bytes.len() + self.value_scratch.len() + 32;
            if list_size > MAX_HEADER_LIST {
                return Err(HpackError::HeaderListTooLarge(MAX_HEADER_LIST));
            }
            field(name_bytes, &self.value_scratch);
            fields_seen = true;
            if index_it {
                let name = Bytes::copy_from_slice(name_bytes);
                let value = Bytes::copy_from_slice(&self.value_scratch);
                self.table.insert(name, value);
                self.generation += 1;
            }
        }
        Ok(())
    }
}
