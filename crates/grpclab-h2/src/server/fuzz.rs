//! An entry point for fuzzing and robustness tests: a connection fed raw bytes with a service
//! that answers every call at once. Not part of the engine's API: built only with the
//! `fuzzing` feature, which the fuzz targets and this crate's own tests turn on.

use super::*;

/// A service that answers every call at once with its own body, for [`feed_server`]; calls
/// whose path starts with `/s` stream, echoing each message as it comes.
struct EchoService;

impl Service for EchoService {
    /// Whether the call streams.
    type Call = bool;
    type Stream = ();

    fn accept(&mut self, head: &RequestHead<'_>, _: Instant) -> Result<bool, Response> {
        if head.path.is_empty() {
            return Err(Response::Http(404));
        }
        Ok(head.path.starts_with(b"/s"))
    }

    fn open_stream(&mut self, streaming: &bool) -> Option<()> {
        streaming.then_some(())
    }

    fn on_message(
        &mut self,
        _: &bool,
        _: &mut (),
        message: Bytes,
        out: &mut StreamOut<'_>,
    ) -> Step {
        out.buffer().extend_from_slice(&message);
        Step::Done
    }

    fn deadline(&self, _: &bool) -> Option<Instant> {
        None
    }

    fn max_message_bytes(&self) -> usize {
        1 << 20
    }

    fn too_large(&self, _: &bool, _: usize) -> Response {
        Response::Status {
            code: 8,
            message: Cow::Borrowed("too large"),
        }
    }

    fn deadline_exceeded(&self, _: &bool) -> Response {
        Response::Status {
            code: 4,
            message: Cow::Borrowed("deadline"),
        }
    }

    fn call(
        &mut self,
        _: bool,
        body: Bytes,
        mut reply: CallReply<'_>,
        _: Instant,
    ) -> Dispatch<bool> {
        // Both ways of answering at once: bodies of even length written into the
        // connection's buffer, the rest handed over as bytes.
        if body.len().is_multiple_of(2) {
            reply.message_buffer().extend_from_slice(&body);
            return Dispatch::Written;
        }
        Dispatch::Respond(Response::Message(body))
    }
}

/// Feeds `data` to a server connection as what a client sent after the connection preface,
/// with a service that answers every call at once, and returns what the connection would
/// write. For fuzzing and robustness tests: whatever the input, the connection must answer
/// with frames or a GOAWAY — never panic, never loop.
#[doc(hidden)]
pub fn feed_server(data: &[u8]) -> Vec<u8> {
    let mut connection = Connection::new(EchoService, ServerSettings::default());
    connection.start();
    let mut buf = BytesMut::with_capacity(frame::PREFACE.len() + data.len());
    buf.extend_from_slice(frame::PREFACE);
    buf.extend_from_slice(data);
    if let Err(error) = connection.on_bytes(&mut buf) {
        connection.fail(error);
    }
    connection.out
}
