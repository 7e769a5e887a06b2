//! Ending streams and connections: RST_STREAM with a bounded memory of the streams we reset
//! (frames the peer sent before it saw the reset are ignored, RFC 9113 §5.1), GOAWAY, a
//! connection error, and closing after a GOAWAY so the peer reads it.

use super::*;

/// How many stream ids reset by us are remembered, so frames the peer sent before it saw the
/// reset are ignored (RFC 9113 §5.1) instead of answered with STREAM_CLOSED.
pub(super) const RESET_MEMORY: usize = 4096;

/// The streams we reset (refused or failed), newest last, at most [`RESET_MEMORY`].
#[derive(Debug, Default)]
pub(super) struct ResetMemory {
    ids: std::collections::HashSet<u32>,
    order: VecDeque<u32>,
}

impl ResetMemory {
    /// Remembers `stream_id`, forgetting the oldest past [`RESET_MEMORY`].
    pub(super) fn remember(&mut self, stream_id: u32) {
        if self.ids.insert(stream_id) {
            self.order.push_back(stream_id);
            if self.order.len() > RESET_MEMORY {
                if let Some(oldest) = self.order.pop_front() {
                    self.ids.remove(&oldest);
                }
            }
        }
    }

    /// Whether we reset `stream_id` (and still remember it).
    #[inline]
    pub(super) fn contains(&self, stream_id: u32) -> bool {
        self.ids.contains(&stream_id)
    }
}

impl<S: Service> Connection<S> {
    /// Remembers a stream we reset, so its late frames are ignored.
    pub(super) fn remember_reset(&mut self, stream_id: u32) {
        self.resets.remember(stream_id);
    }

    pub(super) fn reset(&mut self, stream_id: u32, error: u32) {
        frame::write_rst_stream(&mut self.out, stream_id, error);
        self.drop_stream(stream_id);
        self.blocked.retain(|s| *s != stream_id);
        self.remember_reset(stream_id);
    }

    /// GOAWAY: no new streams; in-flight ones finish.
    pub(super) fn go_away(&mut self, error: u32, debug: &[u8]) {
        if !self.going_away {
            frame::write_goaway(&mut self.out, self.last_stream, error, debug);
            self.going_away = true;
        }
    }

    /// A connection error: GOAWAY with its code; nothing more is read.
    pub(super) fn fail(&mut self, error: ConnectionError) {
        self.going_away = false;
        self.go_away(error.code, error.reason.as_bytes());
        self.streams.clear();
        self.streaming.clear();
        self.busy.clear();
        self.blocked.clear();
    }
}

/// How long a connection that failed with GOAWAY keeps discarding what the peer still sends.
pub(super) const ERROR_LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// Closes a connection after its GOAWAY is written. Closing a socket with unread bytes makes
/// the kernel send RST, and a peer that gets RST may lose the GOAWAY still in its receive
/// buffer — a flooding client would see "connection reset" instead of ENHANCE_YOUR_CALM. So:
/// half-close our side (FIN after the GOAWAY), then discard what arrives until the peer
/// closes too, for at most [`ERROR_LINGER`].
pub(super) async fn close_after_error(mut socket: Socket) {
    let _ = socket.flush();
    let stream = socket.into_stream();
    stream.shutdown_write();
    // Its scratch is on the heap, and only here: an array would sit in every connection's
    // future.
    let _ = tokio::time::timeout(ERROR_LINGER, stream.discard_until_closed()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_resets_are_forgotten_past_the_memory() {
        let mut resets = ResetMemory::default();
        for id in (1..).step_by(2).take(RESET_MEMORY + 1) {
            resets.remember(id);
        }
        assert!(!resets.contains(1), "the oldest is forgotten");
        assert!(resets.contains(3));
        resets.remember(3);
        assert_eq!(
            resets.order.len(),
            RESET_MEMORY,
            "a repeat is remembered once"
        );
    }
}
