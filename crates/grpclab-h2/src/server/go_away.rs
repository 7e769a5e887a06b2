//! Ending streams and connections: RST_STREAM with a bounded memory of the streams we reset
//! (frames the peer sent before it saw the reset are ignored, RFC 9113 §5.1), GOAWAY, a
//! connection error, and closing after a GOAWAY so the peer reads it.

use super::*;

/// How many stream ids reset by us are remembered, so frames the peer sent before it saw the
/// reset are ignored (RFC 9113 §5.1) instead of answered with STREAM_CLOSED.
pub(super) const RESET_MEMORY: usize = 4096;

impl<S: Service> Connection<S> {
    /// Remembers a stream we reset, so its late frames are ignored.
    pub(super) fn remember_reset(&mut self, stream_id: u32) {
        if self.reset_ids.insert(stream_id) {
            self.reset_order.push_back(stream_id);
            if self.reset_order.len() > RESET_MEMORY {
                if let Some(oldest) = self.reset_order.pop_front() {
                    self.reset_ids.remove(&oldest);
                }
            }
        }
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
