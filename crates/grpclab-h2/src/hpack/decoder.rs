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
}

enum Name {
    Static(usize),
    Dynamic(Bytes),
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
        }
    }

    /// The dynamic table (for tests and diagnostics).
    pub fn table(&self) -> &DynamicTable {
        &self.table
    }

    fn entry(&self, index: usize) -> Result<(Name, Option<Bytes>), HpackError> {
        match index {
            0 => Err(HpackError::InvalidIndex(0)),
            1..=61 => Ok((Name::Static(index - 1), None)),
            _ => {
                let (name, value) = self
                    .table
                    .get(index - 62)
                    .ok_or(HpackError::InvalidIndex(index))?;
                Ok((Name::Dynamic(name.clone()), Some(value.clone())))
            }
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
                // Indexed header field (§6.1).
                let index = decode_integer(block, &mut at, 7)?;
                let (name, value) = self.entry(index)?;
                let (name_bytes, value_bytes): (&[u8], &[u8]) = match (&name, &value) {
                    (Name::Static(i), _) => (STATIC[*i].0.as_bytes(), STATIC[*i].1.as_bytes()),
                    (Name::Dynamic(n), Some(v)) => (n, v),
                    _ => return Err(HpackError::InvalidIndex(index)),
                };
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
                self.entry(name_index)?.0
            };
            Self::read_string(block, &mut at, &mut self.value_scratch)?;
            let name_bytes: &[u8] = match &name {
                Name::Static(i) => STATIC[*i].0.as_bytes(),
                Name::Dynamic(n) => n,
                Name::Literal => &self.name_scratch,
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
            }
        }
        Ok(())
    }
}
