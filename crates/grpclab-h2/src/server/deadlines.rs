//! `grpc-timeout` deadlines: the earliest one arms the connection's timer; calls past theirs
//! end DEADLINE_EXCEEDED (and their streams are reset once the client has half-closed).

use super::*;

/// Arms a lazily armed timer (one that is re-checked when it fires) to fire by `deadline`:
/// reset only when it is unarmed or would fire later, so a deadline that keeps moving later
/// (every read moves it) costs no timer work per turn.
pub(super) fn arm_no_later_than(
    timer: std::pin::Pin<&mut tokio::time::Sleep>,
    armed_at: &mut Option<Instant>,
    deadline: Instant,
) {
    if armed_at.is_none_or(|at| at > deadline) {
        timer.reset(deadline.into());
        *armed_at = Some(deadline);
    }
}

impl<S: Service> Connection<S> {
    pub(super) fn earliest_deadline(&self) -> Option<Instant> {
        self.streams
            .values()
            .filter_map(|s| match &s.state {
                StreamState::Receiving { deadline, .. } => *deadline,
                _ => None,
            })
            .chain(self.streaming.values().filter_map(|call| call.deadline))
            .min()
    }

    pub(super) fn expire_deadlines(&mut self, now: Instant) {
        let expired: Vec<u32> = self
            .streams
            .iter()
            .filter(|(_, s)| matches!(&s.state, StreamState::Receiving { deadline: Some(d), .. } if *d <= now))
            .map(|(id, _)| *id)
            .collect();
        let expired_streams: Vec<u32> = self
            .streaming
            .iter()
            .filter(|(_, call)| call.deadline.is_some_and(|d| d <= now))
            .map(|(id, _)| *id)
            .collect();
        for stream_id in expired_streams {
            let response = Response::Status {
                code: 4,
                message: Cow::Borrowed("deadline exceeded during the stream"),
            };
            let half_closed = self
                .streaming
                .get(&stream_id)
                .is_some_and(|call| call.half_closed);
            self.abort_stream(stream_id, response);
            // The call is over for both sides: a client still sending is told to stop
            // (abort_stream did, with NO_ERROR); one that has half-closed gets CANCEL, as for
            // unary calls (§8.1: the server may reset after its response).
            if half_closed {
                frame::write_rst_stream(&mut self.out, stream_id, code::CANCEL);
            }
        }
        for stream_id in expired {
            let Some(StreamState::Receiving { call, .. }) =
                self.streams.get(&stream_id).map(|stream| &stream.state)
            else {
                continue;
            };
            let response = self.service.deadline_exceeded(call);
            self.respond(stream_id, response);
            frame::write_rst_stream(&mut self.out, stream_id, code::CANCEL);
        }
    }
}
