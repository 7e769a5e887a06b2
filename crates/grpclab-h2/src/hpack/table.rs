//! The HPACK static table (RFC 7541 Appendix A) and the dynamic table (§2.3.2, §4).

use bytes::Bytes;
use std::collections::VecDeque;

/// RFC 7541 Appendix A: index 1..=61.
pub const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Per-entry overhead counted in the table size (RFC 7541 §4.1).
pub const ENTRY_OVERHEAD: usize = 32;

/// The dynamic table: newest entry first (index 62 is the front).
#[derive(Debug, Clone, Default)]
pub struct DynamicTable {
    entries: VecDeque<(Bytes, Bytes)>,
    size: usize,
    max_size: usize,
}

impl DynamicTable {
    /// An empty table of at most `max_size` bytes.
    pub fn new(max_size: usize) -> DynamicTable {
        DynamicTable {
            entries: VecDeque::new(),
            size: 0,
            max_size,
        }
    }

    /// The table's current size by RFC 7541's accounting.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The current maximum size.
    pub fn max_size(&self) -> usize {
        self.max_size
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry at dynamic position `position` (0 = newest).
    pub fn get(&self, position: usize) -> Option<&(Bytes, Bytes)> {
        self.entries.get(position)
    }

    /// Changes the maximum size, evicting as needed.
    pub fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
        self.evict_to(max_size);
    }

    /// Adds an entry at the front, evicting old ones; an entry larger than the table empties
    /// it and is not added (§4.4).
    pub fn insert(&mut self, name: Bytes, value: Bytes) {
        let entry_size = name.len() + value.len() + ENTRY_OVERHEAD;
        if entry_size > self.max_size {
            self.entries.clear();
            self.size = 0;
            return;
        }
        self.evict_to(self.max_size - entry_size);
        self.size += entry_size;
        self.entries.push_front((name, value));
    }

    fn evict_to(&mut self, limit: usize) {
        while self.size > limit {
            match self.entries.pop_back() {
                Some((name, value)) => self.size -= name.len() + value.len() + ENTRY_OVERHEAD,
                None => {
                    self.size = 0;
                    break;
                }
            }
        }
    }

    /// Finds `(name, value)`: the dynamic position of a full match, else of a name match.
    pub fn find(&self, name: &[u8], value: &[u8]) -> (Option<usize>, Option<usize>) {
        let mut name_match = None;
        for (position, (entry_name, entry_value)) in self.entries.iter().enumerate() {
            if entry_name.as_ref() == name {
                if entry_value.as_ref() == value {
                    return (Some(position), Some(position));
                }
                name_match = name_match.or(Some(position));
            }
        }
        (None, name_match)
    }
}

/// Finds `(name, value)` in the static table: the 1-based index of a full match, else of the
/// first name match.
pub fn find_static(name: &[u8], value: &[u8]) -> (Option<usize>, Option<usize>) {
    let mut name_match = None;
    for (index, (entry_name, entry_value)) in STATIC.iter().enumerate() {
        if entry_name.as_bytes() == name {
            if entry_value.as_bytes() == value {
                return (Some(index + 1), Some(index + 1));
            }
            name_match = name_match.or(Some(index + 1));
        }
    }
    (None, name_match)
}
