//! An entry point for fuzzing the client: a connection with calls in flight fed whatever a
//! server might send. Not part of the engine's API: built only with the `fuzzing` feature,
//! which the fuzz targets and this crate's own tests turn on.

use super::*;

/// Hands out `left` calls, then stops; counts how they end.
struct CountingSource {
    left: usize,
    started: usize,
    completed: usize,
}

impl CallSource for CountingSource {
    fn next_call(&mut self, _: Instant, _: &mut TurnClock, _: usize, _: usize) -> NextCall {
        if self.left == 0 {
            return NextCall::Stop;
        }
        self.left -= 1;
        self.started += 1;
        NextCall::Send {
            // A framed two-byte message.
            body: Bytes::from_static(&[0, 0, 0, 0, 2, 8, 1]),
            token: CallToken {
                intended: None,
                measured: true,
                // Two methods in turn: each has its own cached header block.
                method: (self.started % 2) as u32,
                flow: 0,
            },
            headers: None,
        }
    }

    fn completed(&mut self, _: CallToken, _: Instant, _: CallEnd, _: Instant) {
        self.completed += 1;
    }

    fn keeps_reply(&self, _token: &CallToken) -> bool {
        true
    }
}

/// What one fed connection did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FedClient {
    /// Calls the source handed out.
    pub started: usize,
    /// Calls that ended with a status (reported to the source once each).
    pub completed: usize,
    /// Calls still in flight or unsent when the input ran out or the connection failed.
    pub lost: usize,
    /// The connection error the input caused, if any.
    pub error: Option<ConnectionError>,
}

/// Feeds `data` to a client connection as what a server sent, with calls in flight, and
/// reports how every call ended. The first byte picks the shape: bit 0 prepends a valid server
/// preface (an empty SETTINGS and the ACK of ours) so calls are written before the rest
/// arrives; bit 1 makes the calls bidi ping-pong streams (three messages each) instead of unary
/// calls, bit 2 ends them at their second reply, bit 3 reads a stamp from every reply, bit 4
/// cancels them at the next turn; the rest is the server's bytes, fed in two pieces split where the second byte says.
/// For fuzzing and robustness tests: whatever the input, every call must end exactly once
/// (`started == completed + lost`), and nothing may panic or loop.
pub fn feed_client(data: &[u8]) -> FedClient {
    let (shape, rest) = data.split_first().map_or((0, data), |(s, r)| (*s, r));
    let (split, server) = rest.split_first().map_or((0, rest), |(s, r)| (*s, r));
    let mut source = CountingSource {
        left: 8,
        started: 0,
        completed: 0,
    };
    let template = RequestTemplate {
        kept_headers: Vec::new(),
        authority: "localhost".to_owned(),
        methods: vec![
            MethodHead::path("/helloworld.Greeter/SayHello"),
            MethodHead::path("/grpclab.Mix/Other"),
        ],
        headers: Vec::new(),
        timeout: None,
        first_stream_id: 1,
        max_reply_message: Some(1 << 16),
        keepalive: None,
        stream: (shape & 2 != 0).then(|| StreamSpec {
            messages: vec![Bytes::from_static(&[0, 0, 0, 0, 2, 8, 1])],
            count: 3,
            duration: None,
            interval: None,
            ping_pong: true,
            messages_from: MessagesFrom::Spec,
            // Some fed streams end at their second reply, the client's cancel.
            receive_limit: (shape & 4 != 0).then_some(2),
            // Some read a stamp out of every reply, whatever bytes the replies hold.
            // Some cancel every call at the next turn, as a time-bounded server stream does.
            receive_for: (shape & 16 != 0).then_some(Duration::ZERO),
            stamp: (shape & 8 != 0).then_some(super::StampField {
                number: 3,
                encoding: super::StampEncoding::Fixed64,
            }),
        }),
    };
    let mut connection = Connection::new(&mut source, std::rc::Rc::new(template), 4);
    let mut input = Vec::new();
    if shape & 1 != 0 {
        frame::write_settings(&mut input, &[]);
        frame::write_settings_ack(&mut input);
    }
    let now = Instant::now();
    let mut error = None;
    let split = usize::from(split).min(server.len());
    for piece in [&input[..], &server[..split], &server[split..]] {
        connection.start_calls(now, 0);
        connection.pump_streams(usize::MAX);
        let mut buf = BytesMut::from(piece);
        if let Err(err) = connection.on_bytes(&mut buf, now) {
            error = Some(err);
            break;
        }
        // What the connection wrote is not read back: a server would, and its answers
        // cannot change what the client does with the next bytes.
        connection.out.clear();
    }
    if error.is_none() {
        // Slots the last piece freed take new calls, which the lost connection then ends.
        connection.start_calls(now, 0);
    }
    let (_, lost) = connection.lost(ConnectionEnd::Lost("the input ended".to_owned()));
    let lost = lost.len();
    drop(connection);
    FedClient {
        started: source.started,
        completed: source.completed,
        lost,
        error,
    }
}
