//! Flow control both ways (RFC 9113 §6.9): the peer's WINDOW_UPDATE frames, our
//! WINDOW_UPDATEs batched at half a window, and response data sent as the stream and
//! connection windows and the write backlog allow (streams blocked on a window wait in
//! `blocked`, never holding up the others).

use super::*;
use crate::flow::{self, WindowError};

impl<S: Service> Connection<S> {
    pub(super) fn on_window_update(
        &mut self,
        header: Header,
        payload: &[u8],
    ) -> Result<(), ConnectionError> {
        let increment = frame::parse_window_update(payload)?;
        if header.stream == 0 {
            self.conn_send_window
                .grow_connection(increment, "connection window exceeds 2^31-1")?;
        } else {
            if header.stream > self.last_stream {
                return Err(connection_error(
                    code::PROTOCOL_ERROR,
                    "WINDOW_UPDATE on an idle stream",
                ));
            }
            if let Some(stream) = self.streams.get_mut(&header.stream) {
                // The stream's window is its offset from the peer's initial window.
                let window = stream.send_window_offset + self.peer_initial_window;
                match flow::grown(window, increment) {
                    Ok(window) => stream.send_window_offset = window - self.peer_initial_window,
                    Err(WindowError::ZeroIncrement) => {
                        self.reset(header.stream, code::PROTOCOL_ERROR);
                        return Ok(());
                    }
                    Err(WindowError::Overflow) => {
                        self.reset(header.stream, code::FLOW_CONTROL_ERROR);
                        return Ok(());
                    }
                }
                self.max_send_offset = self.max_send_offset.max(stream.send_window_offset);
            } else if !self.resets.contains(header.stream) {
                // Window for a closed stream (not one that crossed our reset): nothing to
                // send with it.
                self.spend_flood_credit()?;
            }
        }
        self.send_blocked();
        Ok(())
    }

    /// Returns released connection window once half of it is released, or as soon as anything
    /// is released while the client is down to less than half.
    pub(super) fn flush_window_updates(&mut self) {
        let half = self.conn_window_target / 2;
        if self.conn_recv_unacked >= half
            || (self.conn_recv_unacked > 0 && self.conn_recv_window < i64::from(half))
        {
            frame::write_window_update(&mut self.out, 0, self.conn_recv_unacked);
            self.conn_recv_window += i64::from(self.conn_recv_unacked);
            self.conn_recv_unacked = 0;
        }
    }

    /// Bodies still arriving can deadlock the budget: when the client's window cannot finish
    /// any of them and no call will give window back, no stream can progress. Refuse the
    /// newest unfinished bodies (REFUSED_STREAM: never processed, safe to retry, RFC 9113
    /// §8.7) until the client can finish one. Runs only when the client is nearly out of
    /// window and nothing is running, so the happy path pays one comparison.
    pub(super) fn relieve_stall(&mut self) {
        loop {
            let credit = self.conn_recv_window + i64::from(self.conn_recv_unacked);
            let one_message = i64::try_from(self.service.max_message_bytes()).unwrap_or(i64::MAX);
            if credit >= one_message.saturating_add(5) {
                return;
            }
            let mut receiving = 0usize;
            let mut smallest_need = i64::MAX;
            let mut newest = 0u32;
            for (id, stream) in self.streams.iter() {
                // Window held by a request the service has (or whose answer waits to be
                // written) comes back without the client's help: not a stall.
                if stream.held > 0 && !matches!(stream.state, StreamState::Receiving { .. }) {
                    return;
                }
                if let StreamState::Receiving { body, .. } = &stream.state {
                    receiving += 1;
                    let need = match body.prefix_length() {
                        Some(declared) => declared as i64 + 5 - body.len() as i64,
                        None => 5 - body.len() as i64,
                    };
                    smallest_need = smallest_need.min(need.max(1));
                    newest = newest.max(*id);
                }
            }
            if receiving < 2 || credit >= smallest_need {
                return;
            }
            self.reset(newest, code::REFUSED_STREAM);
        }
    }

    /// Sends as much of a stream's pending data as the windows allow, then its trailers (or,
    /// for a reply without trailers, with END_STREAM on its last DATA).
    pub(super) fn send_stream(&mut self, stream_id: u32) -> bool {
        let max_frame = self.peer_max_frame;
        let Some(stream) = self.streams.get_mut(&stream_id) else {
            return true;
        };
        let StreamState::Sending { data, trailers } = &mut stream.state else {
            if let StreamState::Streaming = stream.state {
                self.drive_stream(stream_id);
                // Blocked again (window or backlog): it is back in `blocked`.
                return !self.blocked.contains(&stream_id);
            }
            return true;
        };
        let trailers = *trailers;
        if data.is_empty() && !trailers {
            frame::write_data(&mut self.out, stream_id, &[], true);
        }
        while !data.is_empty() {
            let allowed = flow::sendable(
                self.conn_send_window,
                stream.send_window_offset + self.peer_initial_window,
                max_frame,
            );
            if allowed == 0 {
                if !self.blocked.contains(&stream_id) {
                    self.blocked.push_back(stream_id);
                }
                return false;
            }
            let chunk = data.split_to(allowed.min(data.len()));
            let last = data.is_empty() && !trailers;
            frame::write_data(&mut self.out, stream_id, &chunk, last);
            self.conn_send_window.spend(chunk.len());
            stream.send_window_offset -= chunk.len() as i64;
        }
        if trailers {
            self.status_block(0, "", StatusPlace::Trailers);
            self.end_with_headers(stream_id);
        } else {
            self.finish_stream(stream_id);
        }
        true
    }

    /// Resumes streams waiting for window, in order. A stream blocked on its own window goes
    /// to the back and the others still get their turn (a client that stalls one stream stalls
    /// only that stream); the walk stops when the connection's window or the write backlog is
    /// spent.
    pub(super) fn send_blocked(&mut self) {
        for _ in 0..self.blocked.len() {
            if self.conn_send_window.available() <= 0 {
                return;
            }
            let Some(stream_id) = self.blocked.pop_front() else {
                return;
            };
            self.send_stream(stream_id);
        }
    }
}
