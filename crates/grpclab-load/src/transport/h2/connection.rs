//! One HTTP/2 connection to the target, kept alive for the streams that share it.
//!
//! A driver task owns the connection: it runs h2's connection future, and when the connection
//! is lost (the server died, sent GOAWAY, reset the socket) it reconnects with exponential
//! backoff. It publishes the current state through a `watch` channel; each stream keeps its
//! own handle to the h2 sender and only looks at the channel again after a failure, so the
//! steady state costs the streams nothing.

use bytes::Bytes;
use h2::client::{Connection, SendRequest};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpStream;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::LoadConfig;
use crate::transport::dial::{
    connect_tcp, connect_unix, peer_name, tls_handshake, INITIAL_BACKOFF, MAX_BACKOFF,
};
use crate::transport::resolve::redial_target;
use grpclab_h2::client::ConnectionEnd;
use tokio_util::either::Either;

/// The socket under an h2 connection: plaintext TCP or TLS over it, or a unix socket.
pub(crate) type Io = tokio_util::either::Either<
    tokio_util::either::Either<TcpStream, tokio_rustls::client::TlsStream<TcpStream>>,
    tokio::net::UnixStream,
>;

/// Stream flow-control window we grant the server: replies up to 1 MiB need no WINDOW_UPDATE
/// round trip.
const STREAM_WINDOW: u32 = 1 << 20;
/// Connection flow-control window we grant the server.
const CONNECTION_WINDOW: u32 = 16 << 20;

/// What the streams of one connection see.
#[derive(Clone)]
pub(crate) struct ConnectionState {
    /// Bumped every time the connection goes down or comes back.
    pub generation: u64,
    /// The sender while connected.
    pub sender: Option<SendRequest<Bytes>>,
    /// Why the connection is down, while it is.
    pub down_reason: String,
    /// The id (`Shared::address_id`) of the address the connection was last made to.
    pub address: usize,
}

/// Opens the run's unix socket, or a TCP connection (TCP_NODELAY) to `target` with TLS when
/// configured, and performs the HTTP/2 handshake.
pub(crate) async fn connect(
    config: &LoadConfig,
    target: SocketAddr,
) -> Result<(SendRequest<Bytes>, Connection<Io, Bytes>), String> {
    let timeout = config.connect_timeout;
    let io = match (&config.unix, &config.tls) {
        (Some(path), _) => Io::Right(connect_unix(path, timeout).await?),
        (None, None) => Io::Left(Either::Left(connect_tcp(target, timeout).await?)),
        (None, Some(tls)) => {
            let tcp = connect_tcp(target, timeout).await?;
            Io::Left(Either::Right(tls_handshake(tcp, tls, timeout).await?))
        }
    };
    h2::client::Builder::new()
        // Until the server's SETTINGS arrives, one stream at a time (h2 assumes 100): the
        // first batch then never exceeds a lower SETTINGS_MAX_CONCURRENT_STREAMS, as on our
        // engine, which opens no stream before the server's SETTINGS.
        .initial_max_send_streams(1)
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .handshake(io)
        .await
        .map_err(|err| format!("HTTP/2 handshake with {target} failed: {err}"))
}

/// Watches a new connection: one PING at once, whose answer (`served` set) shows the server
/// read our preface and serves the connection (h2 does not say when the server's SETTINGS
/// arrived); then `--keepalive`, a PING every `interval` while the connection is up, each to
/// be answered within `interval` (h2 does not say when bytes last arrived, so unlike our
/// engine it pings busy connections too). Returns why the connection is taken as dead; never
/// returns without a PING handle or an interval.
async fn watch_connection(
    ping_pong: Option<h2::PingPong>,
    interval: Option<Duration>,
    served: &std::cell::Cell<bool>,
) -> String {
    let Some(mut ping_pong) = ping_pong else {
        return std::future::pending().await;
    };
    // Each PING is answered within the interval, or the connection is taken as dead (the
    // first too: a server that stalls from the start).
    loop {
        let pong = ping_pong.ping(h2::Ping::opaque());
        let answer = match interval {
            Some(interval) => tokio::time::timeout(interval, pong).await,
            None => Ok(pong.await),
        };
        match answer {
            Ok(Ok(_pong)) => served.set(true),
            // The connection itself failed: its own future reports why.
            Ok(Err(_)) => return std::future::pending().await,
            Err(_) => {
                let interval = interval.unwrap_or_default();
                return format!(
                    "keepalive: no PING answer from the server within {interval:?} (--keepalive); the connection is taken as dead"
                );
            }
        }
        // Without --keepalive, the first answer was all there was to learn.
        let Some(interval) = interval else {
            return std::future::pending().await;
        };
        tokio::time::sleep(interval).await;
    }
}

/// Runs `connection` (connection `index` of the run, made to `target`) and replaces it when
/// lost, until `stop` is cancelled and the last stream using it has finished. Counts
/// successful reconnections in `reconnects`.
pub(crate) async fn drive(
    index: usize,
    mut target: SocketAddr,
    shared: std::sync::Arc<crate::thread::Shared>,
    first: Connection<Io, Bytes>,
    state: watch::Sender<ConnectionState>,
    stop: CancellationToken,
    reconnects: std::rc::Rc<std::cell::Cell<u64>>,
) {
    let config = &shared.config;
    let mut connection = Some(first);
    // The pause before the next attempt: none right after losing a connection (a server that
    // sent GOAWAY for a restart is usually back at once), then exponential while attempts fail.
    let mut backoff = Duration::ZERO;
    loop {
        if let Some(mut live) = connection.take() {
            let ping_pong = live.ping_pong();
            let served = std::cell::Cell::new(false);
            let outcome = tokio::select! {
                outcome = &mut live => outcome.map_err(|err| describe_connection_error(&err)),
                dead = watch_connection(ping_pong, config.keepalive, &served) => Err(dead),
                _ = stop.cancelled() => {
                    // Let the in-flight calls finish: drop our own sender handle so the
                    // connection closes once the streams drop theirs, and keep driving it.
                    state.send_modify(|s| s.sender = None);
                    let _ = live.await;
                    return;
                }
            };
            let mut reason = match outcome {
                Ok(()) => "the server closed the connection".to_owned(),
                Err(reason) => reason,
            };
            if !served.get() {
                reason = ConnectionEnd::ClosedBeforeSettings(reason).to_string();
            }
            tracing::debug!(peer = %peer_name(config, target), %reason, "connection ended");
            // Say why first, then drop the connection (which fails the streams still on it):
            // a stream that sees a bare "connection lost" reads the reason from the state.
            publish_down(&state, reason);
            drop(live);
            // Closed unserved: the next attempt waits, as after a failed connect.
            backoff = if served.get() {
                Duration::ZERO
            } else {
                (backoff * 2).clamp(INITIAL_BACKOFF, MAX_BACKOFF)
            };
        }
        if !backoff.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = stop.cancelled() => return,
            }
        } else if stop.is_cancelled() {
            return;
        }
        // A name is resolved again: the connection follows the addresses it has now.
        target = redial_target(config, index, target).await;
        match connect(config, target).await {
            Ok((sender, live)) => {
                tracing::debug!(peer = %peer_name(config, target), "reconnected");
                reconnects.set(reconnects.get() + 1);
                let address = shared.address_id(target);
                state.send_modify(|s| {
                    s.generation += 1;
                    s.sender = Some(sender);
                    s.down_reason.clear();
                    s.address = address;
                });
                connection = Some(live);
            }
            Err(reason) => {
                backoff = (backoff * 2).clamp(INITIAL_BACKOFF, MAX_BACKOFF);
                tracing::debug!(
                    peer = %peer_name(config, target),
                    %reason,
                    retry_in_ms = backoff.as_millis() as u64,
                    "reconnect failed"
                );
                publish_down(&state, reason);
            }
        }
    }
}

fn publish_down(state: &watch::Sender<ConnectionState>, reason: String) {
    state.send_modify(|s| {
        s.generation += 1;
        s.sender = None;
        s.down_reason = reason;
    });
}

fn describe_connection_error(err: &h2::Error) -> String {
    if err.is_go_away() && err.is_remote() {
        format!("the server sent GOAWAY ({err})")
    } else if err.is_go_away() {
        format!("the client closed the connection: the server broke the protocol ({err})")
    } else {
        format!("connection lost: {err}")
    }
}
