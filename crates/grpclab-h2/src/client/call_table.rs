//! The calls in flight on one client connection, by stream id.
//!
//! The client picks its stream ids itself, in order (1, 3, 5, …), and holds at most `slots`
//! calls at once: a call's id picks its place directly, `(id / 2) mod capacity`, in a table of
//! twice the next power of two above `slots`. A place still taken by an older call (one that
//! outlived `capacity` newer ones) sends the new call to a small map beside it. Why not a hash
//! map alone: a call is inserted, looked up a few times and removed on every call, and a
//! hash map's probing and its moves of a ~200-byte value cost ~170 instructions per call
//! (7 % of the client's) where this costs a mask and a compare.

use crate::stream_map::StreamMap;

/// The most places a table has (a power of two).
const MAX_PLACES: usize = 4096;

/// Calls by stream id (see the module's doc).
pub(crate) struct CallTable<V> {
    /// `(id, call)` at `(id / 2) & mask`; empty until the first call (a held, idle
    /// connection costs nothing here).
    places: Vec<Option<(u32, V)>>,
    mask: usize,
    /// Calls whose place was taken when they started.
    overflow: StreamMap<V>,
    len: usize,
}

impl<V> CallTable<V> {
    /// A table for at most `slots` calls at once (more still fit, in the overflow).
    pub(crate) fn new(slots: usize) -> CallTable<V> {
        // At most MAX_PLACES places (~800 KiB of calls): a connection asked for more streams
        // than that (servers commonly allow 100 to 1,000) keeps the rest in the overflow.
        let capacity = slots
            .max(1)
            .next_power_of_two()
            .saturating_mul(2)
            .min(MAX_PLACES);
        CallTable {
            places: Vec::new(),
            mask: capacity - 1,
            overflow: StreamMap::default(),
            len: 0,
        }
    }

    #[inline]
    fn place(&self, id: u32) -> usize {
        (id as usize >> 1) & self.mask
    }

    /// Calls held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether no call is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds the call of stream `id`, an id not held (ids are never reused on a connection).
    #[inline]
    pub(crate) fn insert(&mut self, id: u32, call: V) {
        if self.places.is_empty() {
            self.places.resize_with(self.mask + 1, || None);
        }
        let place = self.place(id);
        match &mut self.places[place] {
            free @ None => *free = Some((id, call)),
            Some(_) => {
                self.overflow.insert(id, call);
            }
        }
        self.len += 1;
    }

    /// The call of stream `id`, if held.
    #[inline]
    pub(crate) fn get(&self, id: u32) -> Option<&V> {
        match self.places.get(self.place(id)) {
            Some(Some((held, call))) if *held == id => Some(call),
            _ if self.overflow.is_empty() => None,
            _ => self.overflow.get(&id),
        }
    }

    /// The call of stream `id`, if held, to change.
    #[inline]
    pub(crate) fn get_mut(&mut self, id: u32) -> Option<&mut V> {
        let place = self.place(id);
        match self.places.get_mut(place) {
            Some(Some((held, call))) if *held == id => Some(call),
            _ if self.overflow.is_empty() => None,
            _ => self.overflow.get_mut(&id),
        }
    }

    /// Drops the call of stream `id` where it lies, if held (no move out: a finished call's
    /// caller reads what it needs through [`CallTable::get_mut`] first). Returns whether one was.
    /// Always inlined: every call ends here, and left to itself the compiler's choice flips
    /// with unrelated changes to its callers (~30 instructions a call when it is not).
    #[inline(always)]
    pub(crate) fn discard(&mut self, id: u32) -> bool {
        let place = self.place(id);
        let found = match self.places.get_mut(place) {
            Some(slot @ Some(_)) if slot.as_ref().is_some_and(|(held, _)| *held == id) => {
                *slot = None;
                true
            }
            _ if self.overflow.is_empty() => false,
            _ => self.overflow.remove(&id).is_some(),
        };
        if found {
            self.len -= 1;
        }
        found
    }

    /// Every call held, with its stream id, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &V)> {
        self.places
            .iter()
            .flatten()
            .map(|(id, call)| (*id, call))
            .chain(self.overflow.iter().map(|(id, call)| (*id, call)))
    }

    /// Every call held, with its stream id, to change.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut V)> {
        self.places
            .iter_mut()
            .flatten()
            .map(|(id, call)| (*id, call))
            .chain(self.overflow.iter_mut().map(|(id, call)| (*id, call)))
    }

    /// Every call held.
    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, call)| call)
    }

    /// Every call held, to change.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.iter_mut().map(|(_, call)| call)
    }

    /// The stream ids held.
    pub(crate) fn ids(&self) -> Vec<u32> {
        self.iter().map(|(id, _)| id).collect()
    }

    /// Takes every call out.
    pub(crate) fn drain(&mut self) -> Vec<(u32, V)> {
        let mut calls: Vec<(u32, V)> = self.places.iter_mut().filter_map(Option::take).collect();
        calls.extend(self.overflow.drain());
        self.len = 0;
        calls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_still_taken_sends_the_call_beside_and_every_call_is_found() {
        // Two slots: four places. Stream 1 outlives the next four calls, so stream 9 (place
        // (9 / 2) & 3 = 0, stream 1's) goes to the overflow.
        let mut table = CallTable::new(2);
        table.insert(1, "one");
        for id in [3u32, 5, 7] {
            table.insert(id, "short");
            assert_eq!(table.get(id), Some(&"short"));
            assert!(table.discard(id));
        }
        table.insert(9, "nine");
        assert_eq!(table.len(), 2);
        assert_eq!(table.get(1), Some(&"one"));
        assert_eq!(table.get(9), Some(&"nine"));
        assert_eq!(
            table.get(17),
            None,
            "an id never inserted, on a taken place"
        );
        assert_eq!(table.get(4), None, "an even id, as a server could send");
        let mut ids = table.ids();
        ids.sort_unstable();
        assert_eq!(ids, [1, 9]);
        assert_eq!(table.get(1), Some(&"one"));
        assert!(table.discard(1));
        assert!(!table.discard(1));
        *table.get_mut(9).expect("held") = "changed";
        let mut left = table.drain();
        left.sort_unstable();
        assert_eq!(left, [(9, "changed")]);
        assert!(table.is_empty());
        assert_eq!(table.get(9), None);
    }

    #[test]
    fn more_calls_than_places_live_in_the_overflow() {
        let mut table = CallTable::new(100_000);
        assert_eq!(table.mask + 1, MAX_PLACES);
        let ids: Vec<u32> = (0..10_000u32).map(|k| 1 + 2 * k).collect();
        for &id in &ids {
            table.insert(id, id);
        }
        assert_eq!(table.len(), 10_000);
        assert_eq!(table.overflow.len(), 10_000 - MAX_PLACES);
        assert!(ids.iter().all(|id| table.get(*id) == Some(id)));
        for &id in &ids {
            assert_eq!(table.get(id), Some(&id));
            assert!(table.discard(id));
        }
        assert!(table.is_empty());
    }

    #[test]
    fn ids_past_the_table_wrap_around_it() {
        let mut table = CallTable::new(100);
        for round in 0..10u32 {
            let ids: Vec<u32> = (0..100).map(|k| 1 + 2 * (round * 100 + k)).collect();
            for &id in &ids {
                table.insert(id, id);
            }
            assert_eq!(table.len(), 100);
            for &id in ids.iter().rev() {
                assert_eq!(table.get(id), Some(&id));
                assert!(table.discard(id));
            }
        }
        assert!(table.is_empty() && table.overflow.is_empty());
    }
}
