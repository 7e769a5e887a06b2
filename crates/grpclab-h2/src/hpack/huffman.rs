//! HPACK's Huffman coding (RFC 7541 §5.2): encoding by bit packing, decoding by walking a
//! binary tree built once from the code table.

use std::sync::OnceLock;

use super::huffman_table::CODES;
use super::HpackError;

/// Bytes `data` takes Huffman-encoded.
pub fn encoded_len(data: &[u8]) -> usize {
    let bits: usize = data.iter().map(|&b| CODES[b as usize].1 as usize).sum();
    bits.div_ceil(8)
}

/// Appends the Huffman encoding of `data` to `out`, padded with the EOS prefix (1 bits).
pub fn encode(data: &[u8], out: &mut Vec<u8>) {
    let mut accumulator: u64 = 0;
    let mut bits: u32 = 0;
    for &byte in data {
        let (code, len) = CODES[byte as usize];
        accumulator = (accumulator << len) | u64::from(code);
        bits += u32::from(len);
        while bits >= 8 {
            bits -= 8;
            out.push((accumulator >> bits) as u8);
        }
    }
    if bits > 0 {
        let pad = 8 - bits;
        out.push(((accumulator << pad) | ((1 << pad) - 1)) as u8);
    }
}

/// A node of the decoding tree: children for bit 0 and bit 1. A child below `LEAF` is another
/// node's index; `LEAF + symbol` is a leaf.
type Node = [u16; 2];
const LEAF: u16 = 0x8000;
const EMPTY: u16 = u16::MAX;

fn tree() -> &'static Vec<Node> {
    static TREE: OnceLock<Vec<Node>> = OnceLock::new();
    TREE.get_or_init(|| {
        let mut nodes: Vec<Node> = vec![[EMPTY, EMPTY]];
        for (symbol, &(code, len)) in CODES.iter().enumerate() {
            let mut node = 0usize;
            for position in (0..len).rev() {
                let bit = ((code >> position) & 1) as usize;
                if position == 0 {
                    nodes[node][bit] = LEAF + symbol as u16;
                } else {
                    if nodes[node][bit] == EMPTY {
                        nodes.push([EMPTY, EMPTY]);
                        nodes[node][bit] = (nodes.len() - 1) as u16;
                    }
                    node = nodes[node][bit] as usize;
                }
            }
        }
        nodes
    })
}

/// Appends the decoding of Huffman-encoded `data` to `out`.
pub fn decode(data: &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
    let nodes = tree();
    let mut node = 0usize;
    // Bits read since the last symbol, and whether all were 1s (a valid padding so far).
    let mut pending_bits = 0u32;
    let mut pending_all_ones = true;
    for &byte in data {
        for position in (0..8).rev() {
            let bit = ((byte >> position) & 1) as usize;
            pending_bits += 1;
            pending_all_ones &= bit == 1;
            let next = nodes[node][bit];
            if next == EMPTY {
                return Err(HpackError::Huffman);
            }
            if next >= LEAF {
                let symbol = next - LEAF;
                if symbol == 256 {
                    // EOS inside a string is an error (RFC 7541 §5.2).
                    return Err(HpackError::Huffman);
                }
                out.push(symbol as u8);
                node = 0;
                pending_bits = 0;
                pending_all_ones = true;
            } else {
                node = next as usize;
            }
        }
    }
    // Padding: fewer than 8 bits, all 1s (the most significant bits of EOS).
    if pending_bits > 7 || !pending_all_ones {
        return Err(HpackError::Huffman);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_byte() {
        let data: Vec<u8> = (0..=255).collect();
        let mut encoded = Vec::new();
        encode(&data, &mut encoded);
        assert_eq!(encoded.len(), encoded_len(&data));
        let mut decoded = Vec::new();
        decode(&encoded, &mut decoded).unwrap();
        assert_eq!(decoded, data);
    }

    #[test]
    fn rfc_7541_c_4_1_www_example_com() {
        let mut encoded = Vec::new();
        encode(b"www.example.com", &mut encoded);
        assert_eq!(
            encoded,
            [0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff]
        );
    }

    #[test]
    fn bad_padding_is_refused() {
        // 'a' is 00011 (5 bits); padding with 0s instead of 1s.
        assert_eq!(
            decode(&[0b0001_1000], &mut Vec::new()),
            Err(HpackError::Huffman)
        );
        // A full byte of 1s as padding is more than 7 bits.
        assert_eq!(
            decode(&[0b0001_1111, 0xff], &mut Vec::new()),
            Err(HpackError::Huffman)
        );
        assert_eq!(decode(&[0b0001_1111], &mut Vec::new()), Ok(()));
    }
}
