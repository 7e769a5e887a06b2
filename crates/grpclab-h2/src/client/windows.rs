//! What the server's side of a connection allowed this client, as its frames said: its
//! SETTINGS (stream window, streams at once, frame size) and the connection window it
//! granted. A run reports the largest over its connections, so each benchmark row lists the
//! windows its server really used, not the ones its documentation states.

/// The server's flow-control allowances, as observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerWindows {
    /// SETTINGS_INITIAL_WINDOW_SIZE in the server's first SETTINGS (65,535 when absent).
    pub stream_window_first: u32,
    /// The largest it advertised later (a window that grows while the connection runs:
    /// BDP probing, as grpc-go does).
    pub stream_window_largest: u32,
    /// The most the server left its connection window open: its window less what was in
    /// flight when it last raised it (65,535 until it grants more).
    pub connection_window_largest: u32,
    /// SETTINGS_MAX_CONCURRENT_STREAMS, if the server set one.
    pub max_concurrent_streams: Option<u32>,
    /// SETTINGS_MAX_FRAME_SIZE (16,384 when absent).
    pub max_frame_size: u32,
}

impl Default for PeerWindows {
    /// RFC 9113's defaults, before any SETTINGS.
    fn default() -> Self {
        PeerWindows {
            stream_window_first: crate::frame::DEFAULT_WINDOW,
            stream_window_largest: crate::frame::DEFAULT_WINDOW,
            connection_window_largest: crate::frame::DEFAULT_WINDOW,
            max_concurrent_streams: None,
            max_frame_size: crate::frame::DEFAULT_MAX_FRAME_SIZE,
        }
    }
}

impl PeerWindows {
    /// Another connection's (or thread's, or shard's) observations beside these: the largest
    /// of each, the fewest streams at once.
    pub fn merge(&mut self, other: &PeerWindows) {
        self.stream_window_first = self.stream_window_first.max(other.stream_window_first);
        self.stream_window_largest = self.stream_window_largest.max(other.stream_window_largest);
        self.connection_window_largest = self
            .connection_window_largest
            .max(other.connection_window_largest);
        self.max_concurrent_streams =
            match (self.max_concurrent_streams, other.max_concurrent_streams) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        self.max_frame_size = self.max_frame_size.max(other.max_frame_size);
    }

    /// Whether the stream window grew after the first SETTINGS.
    pub fn stream_window_grew(&self) -> bool {
        self.stream_window_largest > self.stream_window_first
    }
}

/// How the server's windows held this client's requests back: each time a request's body
/// had to wait for window (the connection's, or its stream's), and the time some request
/// on a connection was waiting, summed over connections. Measured where a request blocks,
/// so a run whose windows never bind pays nothing for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowWaits {
    /// Requests that waited with the connection window spent.
    pub connection: u64,
    /// Requests that waited for their own stream's window only.
    pub stream: u64,
    /// Time some request on a connection waited for window, summed over connections.
    pub waited: std::time::Duration,
}

impl WindowWaits {
    /// Adds another connection's (or thread's, or shard's) waits.
    pub fn add(&mut self, other: &WindowWaits) {
        self.connection += other.connection;
        self.stream += other.stream;
        self.waited += other.waited;
    }

    /// Whether nothing waited.
    pub fn is_empty(&self) -> bool {
        self.connection == 0 && self.stream == 0 && self.waited.is_zero()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_keeps_the_largest_windows_and_the_fewest_streams() {
        let mut a = PeerWindows {
            stream_window_first: 65_535,
            stream_window_largest: 1 << 20,
            connection_window_largest: 1 << 20,
            max_concurrent_streams: Some(100),
            max_frame_size: 16_384,
        };
        let b = PeerWindows {
            connection_window_largest: 16 << 20,
            max_concurrent_streams: Some(50),
            ..PeerWindows::default()
        };
        a.merge(&b);
        assert_eq!(a.stream_window_largest, 1 << 20);
        assert_eq!(a.connection_window_largest, 16 << 20);
        assert_eq!(a.max_concurrent_streams, Some(50));
        assert!(a.stream_window_grew());
        assert!(!PeerWindows::default().stream_window_grew());
    }
}
