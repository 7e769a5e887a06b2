//! Streaming gRPC calls over an h2 sender (`--transport h2`, the reference; our engine streams
//! in `grpclab_h2::client`): client streaming, server streaming, and bidi ping-pong.
//!
//! A call's messages are the run's requests in order (ghz's data array), cycled up to
//! `--stream-call-count` messages, or for as long as `--stream-call-duration` allows, with
//! `--stream-interval` between sends. Memory stays bounded whatever a stream's length: a
//! message is written only once the stream's send window has room for it (h2 would buffer
//! it otherwise), and received data is counted and released as it arrives, never kept.

use std::time::{Duration, Instant};

use bytes::Bytes;
use grpclab_core::Code;
use h2::client::SendRequest;
use h2::{RecvStream, SendStream};
use http::StatusCode;

use grpclab_core::protocol::{stream_reply_content_type_fits, Protocol};
use grpclab_core::streamed_reply::StreamedReply;
use grpclab_h2::client::MessageCounter;

use super::unary::{failure_from_h2, status_from, CallTemplate};
use super::web::{described, with_details};
use crate::config::{CallShape, StreamSettings};
use crate::outcome::CallFailure;

/// What one streaming call did, for the recorder.
#[derive(Debug, Default)]
pub(crate) struct StreamTally {
    /// Request messages written.
    pub sent: u64,
    /// Reply messages received whole.
    pub received: u64,
    /// Streams that are not ping-pong: when the last whole reply arrived, the time between
    /// two replies read apart, and how many replies came right behind another in one read (0
    /// apart); recorded after the call.
    pub last_reply: Option<Instant>,
    pub gaps: Vec<Duration>,
    pub together: u64,
    /// Whether gaps are kept (every shape but bidi ping-pong).
    pub keep_gaps: bool,
    /// `--stream-stamp`: each reply's arrival (nanoseconds since the Unix epoch) and the stamp
    /// it carried; recorded after the call.
    pub stamps: Vec<(u64, Option<u64>)>,
}

/// Writes one framed message, waiting for send window as it goes (in pieces when the window
/// is smaller than the message).
async fn send_message(
    body: &mut SendStream<Bytes>,
    mut message: Bytes,
    end: bool,
) -> Result<(), CallFailure> {
    if message.is_empty() {
        return body.send_data(message, end).map_err(failure_from_h2);
    }
    while !message.is_empty() {
        body.reserve_capacity(message.len());
        let granted = loop {
            match std::future::poll_fn(|cx| body.poll_capacity(cx)).await {
                Some(Ok(0)) => continue,
                Some(Ok(n)) => break n,
                Some(Err(err)) => return Err(failure_from_h2(err)),
                None => {
                    return Err(CallFailure::new(
                        Code::Unavailable,
                        "the stream closed while sending",
                    ))
                }
            }
        };
        let piece = message.split_to(granted.min(message.len()));
        body.send_data(piece, end && message.is_empty())
            .map_err(failure_from_h2)?;
    }
    Ok(())
}

/// A reply's messages counted as they arrive: gRPC's frames, or a gRPC-Web or Connect
/// server stream's, whose last frame says how the call ended.
pub(crate) enum Replies {
    Grpc(MessageCounter),
    Web(Box<StreamedReply>),
}

impl Replies {
    /// The counter for a gRPC-Web or Connect stream in `protocol` (`None` for gRPC).
    pub(crate) fn web(protocol: Protocol) -> Option<Replies> {
        StreamedReply::new(protocol).map(|reader| Replies::Web(Box::new(reader)))
    }

    /// Feeds a chunk; how many messages it completed.
    fn feed(&mut self, chunk: &[u8]) -> Result<u64, CallFailure> {
        match self {
            Replies::Grpc(counter) => Ok(counter.feed(chunk)),
            Replies::Web(reader) => reader
                .feed(chunk)
                .map_err(|err| CallFailure::new(Code::Internal, format!("stream reply: {err}"))),
        }
    }

    /// The stamps of the messages the last feed completed (gRPC's counter only).
    fn stamps(&self) -> Option<&[Option<u64>]> {
        match self {
            Replies::Grpc(counter) => counter.stamps(),
            Replies::Web(_) => None,
        }
    }
}

/// A streaming reply's body as an HTTP version delivers it: HTTP/2's stream (h2), or an
/// HTTP/1.1 body (hyper, `--http1`).
pub(crate) trait ReplyBody {
    /// The next piece of data (HTTP/2: its flow-control credit given back), `None` at the
    /// body's end.
    async fn chunk(&mut self) -> Option<Result<Bytes, CallFailure>>;
    /// The HTTP trailers after the body, if any (read once the body has ended).
    async fn trailers(&mut self) -> Result<Option<http::HeaderMap>, CallFailure>;
}

impl ReplyBody for RecvStream {
    async fn chunk(&mut self) -> Option<Result<Bytes, CallFailure>> {
        let chunk = self.data().await?;
        Some(chunk.map_err(failure_from_h2).inspect(|chunk| {
            let _ = self.flow_control().release_capacity(chunk.len());
        }))
    }

    async fn trailers(&mut self) -> Result<Option<http::HeaderMap>, CallFailure> {
        RecvStream::trailers(self).await.map_err(failure_from_h2)
    }
}

impl<T: ReplyBody> ReplyBody for &mut T {
    async fn chunk(&mut self) -> Option<Result<Bytes, CallFailure>> {
        (**self).chunk().await
    }

    async fn trailers(&mut self) -> Result<Option<http::HeaderMap>, CallFailure> {
        (**self).trailers().await
    }
}

/// Reads reply data until `want` more messages are whole (or the stream ends: `false`).
async fn receive_messages(
    reply: &mut impl ReplyBody,
    counter: &mut Replies,
    want: u64,
    tally: &mut StreamTally,
) -> Result<bool, CallFailure> {
    let mut got = 0;
    while got < want {
        let Some(chunk) = reply.chunk().await else {
            return Ok(false);
        };
        let chunk = chunk?;
        let whole = counter.feed(&chunk)?;
        got += whole;
        tally.received += whole;
        if let Some(stamps) = counter.stamps().filter(|_| whole > 0) {
            let arrived = grpclab_core::clock::unix_nanos_now();
            tally
                .stamps
                .extend(stamps.iter().map(|stamp| (arrived, *stamp)));
        }
        if whole > 0 && tally.keep_gaps {
            let now = Instant::now();
            if let Some(last) = tally.last_reply {
                tally.gaps.push(now.saturating_duration_since(last));
            }
            tally.together += whole - 1;
            tally.last_reply = Some(now);
        }
    }
    Ok(true)
}

/// Reads what is left (counting messages) and the call's status: from the HTTP/2 trailers
/// (gRPC), or from the body's last frame (gRPC-Web, Connect).
async fn finish(
    mut reply: impl ReplyBody,
    counter: &mut Replies,
    tally: &mut StreamTally,
) -> Result<(), CallFailure> {
    receive_messages(&mut reply, counter, u64::MAX, tally).await?;
    let counter = match counter {
        Replies::Grpc(counter) => counter,
        Replies::Web(reader) => {
            // HTTP trailers beside the body's own, if any: read to the stream's end.
            reply.trailers().await?;
            let status = reader
                .finish()
                .map_err(|err| CallFailure::new(Code::Internal, format!("stream reply: {err}")))?;
            if status.code == Code::Ok {
                return Ok(());
            }
            // gRPC-Web's grpc-message is percent-encoded, as gRPC's; Connect's JSON is not.
            let message = match reader.protocol() {
                Protocol::Connect => status.message,
                _ => grpclab_h2::grpc::percent_decode(status.message.as_bytes()),
            };
            return Err(CallFailure::new(
                status.code,
                with_details(&message, status.details),
            ));
        }
    };
    if counter.in_message() {
        return Err(CallFailure::new(
            Code::Internal,
            "the stream ended inside a message",
        ));
    }
    match reply.trailers().await? {
        Some(trailers) => status_from(&trailers),
        None => Err(CallFailure::new(
            Code::Internal,
            "the server ended the stream without trailers (no grpc-status)",
        )),
    }
}

/// How a server stream's replies are read once its head has come: to the end, or (ghz's
/// `--stream-call-count`, `--stream-call-duration`) until enough replies are whole or the
/// time is up.
pub(crate) struct ServerStream<'a> {
    pub shape: CallShape,
    pub settings: &'a StreamSettings,
    /// When the call started (`--stream-call-duration` counts from it).
    pub started: Instant,
    /// The run's stop, which ends a stream bounded by time.
    pub stop: &'a tokio_util::sync::CancellationToken,
}

impl ServerStream<'_> {
    /// Reads `reply` (a unary call's reply too), counting its messages into `tally`, and
    /// returns the call's outcome.
    pub(crate) async fn read(
        &self,
        mut reply: impl ReplyBody,
        counter: &mut Replies,
        tally: &mut StreamTally,
    ) -> Result<(), CallFailure> {
        let settings = self.settings;
        let bounded = settings.call_count.is_some() || settings.call_duration.is_some();
        if self.shape == CallShape::ServerStreaming && bounded {
            // Once that many replies are whole, or the time is up (or the run stops), the
            // client cancels the rest (HTTP/2: dropping the stream sends RST_STREAM CANCEL;
            // HTTP/1.1: the connection closes) and the call is a success, with the replies
            // whole by then.
            let limit = settings.call_count.map_or(u64::MAX, |count| count as u64);
            let receiving = receive_messages(&mut reply, counter, limit, tally);
            let received = match settings.call_duration {
                Some(duration) => {
                    let until = tokio::time::Instant::from_std(self.started + duration);
                    tokio::select! {
                        received = receiving => Some(received?),
                        _ = tokio::time::sleep_until(until) => None,
                        _ = self.stop.cancelled() => None,
                    }
                }
                None => Some(receiving.await?),
            };
            match received {
                // The server ended the stream first: its trailers say how.
                Some(false) => {}
                Some(true) => {
                    tally.received = tally.received.min(limit);
                    tally.stamps.truncate(limit as usize);
                    return Ok(());
                }
                None => return Ok(()),
            }
        }
        finish(reply, counter, tally).await
    }
}

/// Awaits the response head; `Some(reply)` for a stream to read, or the call's end. A
/// gRPC-Web or Connect stream's content type is checked (gRPC's is not, as before).
async fn response_head(
    response: h2::client::ResponseFuture,
    template: &CallTemplate,
) -> Result<RecvStream, CallFailure> {
    let response = response.await.map_err(failure_from_h2)?;
    let (head, reply) = response.into_parts();
    check_head(&head, template)?;
    Ok(reply)
}

/// Whether a streaming reply's head lets its body be read: HTTP 200, no Trailers-Only
/// failure, and (gRPC-Web, Connect) the protocol's stream content type.
pub(crate) fn check_head(
    head: &http::response::Parts,
    template: &CallTemplate,
) -> Result<(), CallFailure> {
    if head.status != StatusCode::OK {
        return Err(CallFailure::new(
            Code::from_http_status(head.status.as_u16()),
            format!("HTTP status {}", head.status.as_u16()),
        ));
    }
    if head.headers.contains_key("grpc-status") && template.protocol != Protocol::Connect {
        // Trailers-Only: the call ended at once (typically an error).
        status_from(&head.headers)?;
    }
    if template.protocol != Protocol::Grpc {
        let content_type = head
            .headers
            .get(http::header::CONTENT_TYPE)
            .map(|value| value.as_bytes());
        if !stream_reply_content_type_fits(template.protocol, template.codec, content_type) {
            return Err(CallFailure::new(
                Code::Unknown,
                format!(
                    "the reply's content-type is {}, not {}",
                    described(content_type),
                    template.protocol.stream_content_type_with(template.codec)
                ),
            ));
        }
    }
    Ok(())
}

/// What a streaming call sends: its shape, ghz's stream settings, and the messages (the
/// data array, sent in order from the first in every call, cycled).
pub(crate) struct StreamPlan<'a> {
    pub shape: CallShape,
    pub settings: &'a StreamSettings,
    pub messages: &'a [Bytes],
    /// `--stream-dynamic-messages` with a template: message `k` rendered anew (instead of
    /// `messages`).
    pub dynamic: Option<&'a dyn Fn(u64) -> Bytes>,
    /// Open loop: the call's intended send time. Each ping-pong round trip then counts from
    /// the earlier of its message's intended time (the call's for the first; the previous
    /// reply's arrival plus the interval for the others) and its actual send, as open-loop
    /// calls do (coordinated omission).
    pub intended: Option<Instant>,
    /// The run's stop (its duration ended, or Ctrl-C): a call bounded by time
    /// (`--stream-call-duration`) sends nothing more and half-closes, so it ends promptly with
    /// its messages counted; a call bounded by a count finishes its plan.
    pub stop: &'a tokio_util::sync::CancellationToken,
    /// The call's own headers (metadata templates).
    pub headers: &'a grpclab_h2::client::CallHeaders,
}

/// The pause before message `sent` (none before the first): `--stream-interval`, cut short
/// when `stop` (if given) fires. Timed by the call's `pacer` (microseconds), else by tokio's
/// timer (a millisecond tick late).
async fn pause(
    settings: &StreamSettings,
    sent: u64,
    pacer: &mut Option<grpclab_h2::client::Pacer>,
    stop: Option<&tokio_util::sync::CancellationToken>,
) {
    if let (true, Some(interval)) = (sent > 0, settings.interval) {
        let wait = async {
            let mut paced = false;
            if let Some(pacer) = pacer.as_mut() {
                paced = pacer.set(Some(Instant::now() + interval)).is_ok()
                    && pacer.fired().await.is_ok();
            }
            if !paced {
                tokio::time::sleep(interval).await;
            }
        };
        match stop {
            Some(stop) => tokio::select! {
                _ = wait => {}
                _ = stop.cancelled() => {}
            },
            None => wait.await,
        }
    }
}

/// The reply stream of a bidi call: the one already read from, else the response's, once
/// its head arrives.
async fn opened(
    reply: Option<RecvStream>,
    response: Option<h2::client::ResponseFuture>,
    template: &CallTemplate,
) -> Result<RecvStream, CallFailure> {
    match (reply, response) {
        (Some(stream), _) => Ok(stream),
        (None, Some(head)) => response_head(head, template).await,
        (None, None) => Err(CallFailure::new(Code::Internal, "no response")),
    }
}

/// One streaming call; `round_trip` receives each bidi round trip (reply k against request
/// k's send time).
pub(crate) async fn streaming_call(
    sender: &mut SendRequest<Bytes>,
    template: &CallTemplate,
    plan: &StreamPlan<'_>,
    tally: &mut StreamTally,
    round_trip: &mut dyn FnMut(Duration),
) -> Result<(), CallFailure> {
    let StreamPlan {
        shape,
        settings,
        messages,
        dynamic,
        intended,
        stop,
        headers,
    } = *plan;
    std::future::poll_fn(|cx| sender.poll_ready(cx))
        .await
        .map_err(failure_from_h2)?;
    let (response, mut body) = sender
        // Streaming calls are never in a mix: the run's one method.
        .send_request(template.request(0, headers), false)
        .map_err(failure_from_h2)?;
    let mut index = 0usize;
    // Paced sends wait on a timer of their own (see `grpclab_h2::client::Pacer`).
    let mut pacer = settings
        .interval
        .and_then(|_| grpclab_h2::client::Pacer::new().ok());
    let mut next = || {
        let message = match dynamic {
            Some(render) => render(index as u64),
            None => messages[index % messages.len()].clone(),
        };
        index += 1;
        message
    };
    let mut counter = match (Replies::web(template.protocol), settings.stamp) {
        (Some(web), _) => web,
        // Client streaming has one reply: its latency is the call's.
        (None, Some(field)) if shape != CallShape::ClientStreaming => {
            Replies::Grpc(MessageCounter::stamped(field))
        }
        (None, _) => Replies::Grpc(MessageCounter::default()),
    };
    let started = Instant::now();
    // How many messages this call sends: --stream-call-count, else the data array once
    // (ghz); a duration alone sends until it passes.
    let count = settings.call_count.unwrap_or(match settings.call_duration {
        Some(_) => usize::MAX,
        None => messages.len(),
    });
    // Only a plan bounded by time ends early at the run's stop.
    let ends_at_stop = settings.call_duration.is_some();
    let stopped = || ends_at_stop && stop.is_cancelled();
    // What cuts a pause short: the run's stop, for calls that end with it.
    let paused_until = ends_at_stop.then_some(stop);
    let more = |sent: u64| {
        (sent as usize) < count
            && !stopped()
            && settings
                .call_duration
                .is_none_or(|limit| started.elapsed() < limit)
    };
    match shape {
        CallShape::Unary | CallShape::ServerStreaming => {
            // gRPC-Web's text form is base64; the others' request is gRPC's frame.
            let request = template
                .protocol
                .stream_request_body(&next())
                .map_err(|err| CallFailure::new(Code::Internal, err.0))?;
            send_message(&mut body, request, true).await?;
            tally.sent += 1;
            let reply = response_head(response, template).await?;
            let reading = ServerStream {
                shape,
                settings,
                started,
                stop,
            };
            reading.read(reply, &mut counter, tally).await
        }
        CallShape::ClientStreaming => {
            let mut sending = Ok(());
            while sending.is_ok() && more(tally.sent) {
                pause(settings, tally.sent, &mut pacer, paused_until).await;
                if stopped() {
                    break;
                }
                sending = send_message(&mut body, next(), false).await;
                if sending.is_ok() {
                    tally.sent += 1;
                }
            }
            if sending.is_ok() {
                sending = send_message(&mut body, Bytes::new(), true).await;
            }
            // A server that ends the call while we send (an error status) makes the send
            // fail; its status is the call's outcome, not the failed send.
            let ended = async {
                let reply = response_head(response, template).await?;
                finish(reply, &mut counter, tally).await
            };
            match (sending, ended.await) {
                (_, Err(status)) => Err(status),
                (Err(send), Ok(())) => Err(send),
                (Ok(()), Ok(())) => Ok(()),
            }
        }
        CallShape::Bidi if settings.independent => {
            // As ghz: the sends go at their own pace while the replies are read as they come;
            // the call ends with the server's trailers.
            let mut sent = 0u64;
            let sending = async {
                let mut sending = Ok(());
                while sending.is_ok() && more(sent) {
                    pause(settings, sent, &mut pacer, paused_until).await;
                    if stopped() {
                        break;
                    }
                    sending = send_message(&mut body, next(), false).await;
                    if sending.is_ok() {
                        sent += 1;
                    }
                }
                if sending.is_ok() {
                    sending = send_message(&mut body, Bytes::new(), true).await;
                }
                sending
            };
            let receiving = async {
                let reply = response_head(response, template).await?;
                finish(reply, &mut counter, tally).await
            };
            let (sending, ended) = tokio::join!(sending, receiving);
            tally.sent += sent;
            match (sending, ended) {
                // The server's status is the call's outcome, not a send it made fail.
                (_, Err(status)) => Err(status),
                (Err(send), Ok(())) => Err(send),
                (Ok(()), Ok(())) => Ok(()),
            }
        }
        CallShape::Bidi => {
            // Ping-pong: a request, then its reply, then the next request.
            let mut response = Some(response);
            let mut reply: Option<RecvStream> = None;
            let mut server_ended = false;
            let mut planned = intended;
            while more(tally.sent) {
                pause(settings, tally.sent, &mut pacer, paused_until).await;
                if stopped() {
                    break;
                }
                let now = Instant::now();
                let sent_at = planned.take().map_or(now, |at| at.min(now));
                if let Err(send) = send_message(&mut body, next(), false).await {
                    // The server may have ended the call meanwhile: its status wins.
                    let stream = opened(reply.take(), response.take(), template).await?;
                    return finish(stream, &mut counter, tally).await.and(Err(send));
                }
                tally.sent += 1;
                if let Some(head) = response.take() {
                    reply = Some(response_head(head, template).await?);
                }
                let Some(stream) = reply.as_mut() else {
                    break;
                };
                if !receive_messages(stream, &mut counter, 1, tally).await? {
                    // The server ended its side early: its trailers say how.
                    server_ended = true;
                    break;
                }
                round_trip(sent_at.elapsed());
                if intended.is_some() {
                    planned = Some(Instant::now() + settings.interval.unwrap_or_default());
                }
            }
            if !server_ended {
                send_message(&mut body, Bytes::new(), true).await?;
            }
            let stream = opened(reply, response, template).await?;
            finish(stream, &mut counter, tally).await
        }
    }
}
