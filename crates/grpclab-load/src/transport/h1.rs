//! gRPC-Web and Connect over HTTP/1.1 (`--http1`), as browsers send them: each connection
//! of the run is a keep-alive HTTP/1.1 connection (hyper's client) with one request in flight
//! at a time, and the streams it carries (`-c` over `--connections`) take turns on it in the
//! order they asked (tokio's fair mutex), as a browser's requests queue for its connections
//! to an origin. A call's latency counts from when it asked for its turn.
//!
//! Requests carry the protocol's headers and body as on HTTP/2; replies are read whole and
//! judged by the same code (`h2::judge`). A connection found closed is made again by the
//! stream whose turn it is, and counted as a reconnection.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use grpclab_core::Code;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use tokio::task::JoinHandle;

use super::dial::connect_tcp;
use super::h2::{
    call_template, judge, record_call, until_intended, wait_for_turn, within_deadline,
    CallTemplate, StreamSlot,
};
use super::Reconnects;
use crate::config::LoadConfig;
use crate::outcome::{CallFailure, CONNECTION_LOST};
use crate::schedule::Ticket;
use crate::thread::ThreadState;

/// One HTTP/1.1 connection's sender.
type Sender = SendRequest<Full<Bytes>>;

/// One thread's HTTP/1.1 connections, opened before the run starts.
pub(crate) struct Connections {
    template: Rc<CallTemplate>,
    open: Vec<(usize, Sender)>,
}

/// Opens this thread's connections (`indexes`) before the run starts.
pub(crate) async fn open(
    config: &LoadConfig,
    indexes: impl Iterator<Item = usize>,
) -> Result<Connections, String> {
    let template = Rc::new(call_template(config)?);
    let mut open = Vec::new();
    for index in indexes {
        open.push((index, connect(config, config.target_for(index)).await?));
    }
    Ok(Connections { template, open })
}

/// A TCP connection (TCP_NODELAY) to `target` with HTTP/1.1 over it; its connection task runs
/// on this thread until the connection closes.
async fn connect(config: &LoadConfig, target: std::net::SocketAddr) -> Result<Sender, String> {
    let tcp = connect_tcp(target, config.connect_timeout).await?;
    let (sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .map_err(|err| format!("HTTP/1.1 with {target} failed: {err}"))?;
    tokio::task::spawn_local(async move {
        // Its end (the server closed it, or it broke) shows to the next call as a closed
        // sender.
        let _ = connection.await;
    });
    Ok(sender)
}

/// A connection the streams take turns on, and what it needs to be made again.
struct Turns {
    index: usize,
    sender: tokio::sync::Mutex<Option<Sender>>,
    address: usize,
    reconnects: Rc<Cell<u64>>,
}

/// Starts a task per stream slot, each taking turns on its connection.
pub(crate) fn start(
    connections: Connections,
    thread: &Rc<ThreadState>,
    reconnects: &Reconnects,
) -> Vec<JoinHandle<()>> {
    let config = &thread.shared.config;
    let mut streams = Vec::new();
    for (index, sender) in connections.open {
        let turns = Rc::new(Turns {
            index,
            sender: tokio::sync::Mutex::new(Some(sender)),
            address: config.address_index(index),
            reconnects: Rc::clone(&reconnects.unplanned),
        });
        for slot in 0..config.streams_on(index) {
            streams.push(tokio::task::spawn_local(stream_loop(
                Rc::clone(thread),
                Rc::clone(&connections.template),
                Rc::clone(&turns),
                StreamSlot {
                    connection: index,
                    index: slot,
                },
            )));
        }
    }
    streams
}

/// One stream slot: take a ticket, (open loop: wait for its time), wait for the connection's
/// turn, call, record, repeat.
async fn stream_loop(
    thread: Rc<ThreadState>,
    template: Rc<CallTemplate>,
    turns: Rc<Turns>,
    slot: StreamSlot,
) {
    let mut scratch = Vec::new();
    let stop = thread.schedule.stop_token().clone();
    let timeout = thread.shared.config.timeout;
    loop {
        // A concurrency schedule lets the first few streams of each connection run.
        if stop.is_cancelled() || !wait_for_turn(&thread, slot, &stop).await {
            return;
        }
        let Ticket::Send { intended, measured } = thread.take_ticket(Instant::now) else {
            return;
        };
        if !until_intended(intended, &stop).await {
            thread.drop_ticket(measured);
            return;
        }
        thread.ticket_due(intended, measured);
        let method = thread.choose_method(measured);
        let number = thread.call_number();
        let headers = thread
            .call_headers(method, number, &[])
            .map_or_else(Vec::new, |headers| *headers);
        let body = thread.next_body(method, number);
        let sent = Instant::now();
        let call = one_call(
            &thread,
            &template,
            &turns,
            (method, body, &headers),
            &mut scratch,
        );
        let outcome = within_deadline(timeout, call).await;
        record_call(
            &thread,
            &outcome,
            (intended, sent, measured),
            turns.address,
            method,
        );
    }
}

/// One call on its connection's turn: the connection made again first if it has closed.
async fn one_call(
    thread: &ThreadState,
    template: &CallTemplate,
    turns: &Turns,
    (method, body, headers): (u32, Bytes, &grpclab_h2::client::CallHeaders),
    scratch: &mut Vec<u8>,
) -> Result<(), CallFailure> {
    let request_body = template
        .protocol
        .request_body(&body)
        .map_err(|err| CallFailure::new(Code::Internal, err.0))?;
    let mut turn = turns.sender.lock().await;
    if turn.as_ref().is_none_or(Sender::is_closed) {
        *turn = None;
        let config = &thread.shared.config;
        let sender = connect(config, config.target_for(turns.index))
            .await
            .map_err(|reason| CallFailure {
                code: Code::Unavailable,
                message: reason,
                connection_lost: true,
            })?;
        turns.reconnects.set(turns.reconnects.get() + 1);
        *turn = Some(sender);
    }
    let Some(sender) = turn.as_mut() else {
        return Err(lost(None));
    };
    sender.ready().await.map_err(|err| lost(Some(&err)))?;
    let response = sender
        .send_request(request(template, method, headers, request_body))
        .await
        .map_err(|err| lost(Some(&err)))?;
    let (head, reply) = response.into_parts();
    let collected = reply.collect().await.map_err(|err| lost(Some(&err)))?;
    // The turn ends with the reply read: the next stream may send.
    drop(turn);
    let trailers = collected.trailers().cloned();
    scratch.clear();
    scratch.extend_from_slice(&collected.to_bytes());
    judge(template, method, (&head, trailers.as_ref()), scratch, None)
}

/// The HTTP/1.1 request for `method`: the template's headers, `Host` from its authority, the
/// path in origin form, and the protocol's body.
fn request(
    template: &CallTemplate,
    method: u32,
    headers: &grpclab_h2::client::CallHeaders,
    body: Bytes,
) -> http::Request<Full<Bytes>> {
    let (mut parts, ()) = template.request(method, headers).into_parts();
    if let Some(authority) = parts.uri.authority().cloned() {
        if let Ok(host) = http::HeaderValue::from_str(authority.as_str()) {
            parts.headers.insert(http::header::HOST, host);
        }
    }
    if let Some(path) = parts.uri.path_and_query().cloned() {
        parts.uri = http::Uri::from(path);
    }
    http::Request::from_parts(parts, Full::new(body))
}

/// A call whose connection broke under it: Unavailable, as a lost HTTP/2 connection is.
fn lost(err: Option<&hyper::Error>) -> CallFailure {
    CallFailure {
        code: Code::Unavailable,
        message: match err {
            Some(err) if !err.is_closed() && !err.is_incomplete_message() => {
                format!("HTTP/1.1: {err}")
            }
            _ => CONNECTION_LOST.to_owned(),
        },
        connection_lost: true,
    }
}
