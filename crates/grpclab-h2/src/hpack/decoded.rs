//! What header blocks decoded to, kept for when the same bytes come again.
//!
//! Decoding a block depends only on its bytes and the dynamic table, and the decoder's
//! generation moves with every change to the table. So a block seen again at the generation
//! it was decoded at — and whose own decoding changed nothing in the table — decodes to the
//! same fields: what was made of it the first time can be used as it stands. gRPC peers send
//! the same few bytes of indexed fields on every call (a request's head, a response's head
//! and its trailers), so this skips HPACK and the field checks on the path every call takes.

/// The longest block kept: a peer's repeated block of indexed fields is a few dozen bytes;
/// longer blocks are decoded every time rather than held and compared.
pub const REUSABLE_BLOCK: usize = 256;

/// Up to `N` blocks and what each decoded to (`T`), replaced in turn.
#[derive(Debug)]
pub struct DecodedBlocks<T, const N: usize> {
    slots: [Option<Slot<T>>; N],
    next: usize,
}

#[derive(Debug)]
struct Slot<T> {
    /// False once forgotten; the buffer stays for the next block.
    live: bool,
    bytes: Vec<u8>,
    generation: u64,
    value: T,
}

impl<T: Copy, const N: usize> Default for DecodedBlocks<T, N> {
    fn default() -> Self {
        DecodedBlocks {
            slots: std::array::from_fn(|_| None),
            next: 0,
        }
    }
}

impl<T: Copy, const N: usize> DecodedBlocks<T, N> {
    /// What `block` decoded to, if it was kept at this `generation`.
    #[inline]
    pub fn find(&self, block: &[u8], generation: u64) -> Option<T> {
        self.slots.iter().flatten().find_map(|slot| {
            (slot.live && slot.generation == generation && slot.bytes == block)
                .then_some(slot.value)
        })
    }

    /// Keeps `block` and its `value`, if decoding it left the table's generation at `before`
    /// (`after` == `before`) and it is at most [`REUSABLE_BLOCK`] bytes; the oldest slot goes.
    pub fn remember(&mut self, block: &[u8], before: u64, after: u64, value: T) {
        if before != after || block.len() > REUSABLE_BLOCK || N == 0 {
            return;
        }
        let at = self.next % N;
        self.next = (at + 1) % N;
        match &mut self.slots[at] {
            // The slot's buffer is reused: no allocation once every slot has been filled.
            Some(slot) => {
                slot.live = true;
                slot.bytes.clear();
                slot.bytes.extend_from_slice(block);
                slot.generation = after;
                slot.value = value;
            }
            empty => {
                *empty = Some(Slot {
                    live: true,
                    bytes: block.to_vec(),
                    generation: after,
                    value,
                })
            }
        }
    }

    /// Forgets every block (for a holder whose decoded fields are about to change).
    pub fn forget(&mut self) {
        for slot in self.slots.iter_mut().flatten() {
            slot.live = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_found_only_at_its_generation_and_only_if_it_changed_nothing() {
        let mut blocks = DecodedBlocks::<u8, 2>::default();
        blocks.remember(b"ab", 3, 3, 1);
        assert_eq!(blocks.find(b"ab", 3), Some(1));
        assert_eq!(blocks.find(b"ab", 4), None);
        assert_eq!(blocks.find(b"abc", 3), None);
        // A block whose decoding changed the table is not kept.
        blocks.remember(b"cd", 3, 4, 2);
        assert_eq!(blocks.find(b"cd", 4), None);
        assert_eq!(blocks.find(b"cd", 3), None);
        // Two slots: the third block replaces the oldest.
        blocks.remember(b"cd", 3, 3, 2);
        blocks.remember(b"ef", 3, 3, 3);
        assert_eq!(blocks.find(b"ab", 3), None);
        assert_eq!(blocks.find(b"cd", 3), Some(2));
        assert_eq!(blocks.find(b"ef", 3), Some(3));
        blocks.forget();
        assert_eq!(blocks.find(b"cd", 3), None);
        // Too long to keep.
        blocks.remember(&[0; REUSABLE_BLOCK + 1], 3, 3, 4);
        assert_eq!(blocks.find(&[0; REUSABLE_BLOCK + 1], 3), None);
    }
}
