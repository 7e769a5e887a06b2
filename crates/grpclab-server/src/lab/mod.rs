//! `lab`: grpclab's own gRPC server, the one made fast — correct and generic first.
//!
//! Two layers, so the transport can be swapped without touching gRPC:
//! - [`grpc`]: routes, header checks, message limits, decode → handle → encode, statuses.
//! - the transport, chosen by [`Transport`]: `transport/engine.rs` on grpclab's own HTTP/2
//!   engine (`grpclab-h2`, the default), or `transport/h2.rs` on the h2 crate (the reference).
//! - [`config`]: the server's settings and their defaults, below both.
//!
//! Threading: `threads` worker threads, each a current-thread tokio runtime. One listener
//! accepts and hands connections round-robin to the workers, which own them for life (no
//! work stealing, no cross-thread wakes on the I/O path). Where a call's decode runs is the
//! [`Placement`]; the pool, when used, has its own `pool_threads`.

#[cfg(any(test, feature = "fuzzing"))]
pub mod codec_check;
pub mod config;
mod fast_codec;
pub mod grpc;
pub mod placement;
mod reflection;
mod stream_codec;
mod transport;

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use config::{
    Codec, LabConfig, Transport, DEFAULT_CONNECTION_WINDOW, DEFAULT_MAX_CONCURRENT_STREAMS,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_OFFLOAD_ABOVE, DEFAULT_POOL_QUEUE,
    DEFAULT_STREAM_WINDOW,
};
pub use placement::Placement;

use crate::error::ServeError;
use placement::{Pool, PoolSender};
use transport::engine::{EngineResponder, LabService};
use transport::h2::{serve_connection, H2Responder};

/// How long in-flight calls may take to finish after SIGTERM.
const DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Where lab accepts connections: a TCP port, or a unix socket (plaintext, as beside a
/// sidecar).
#[derive(Debug)]
pub enum Listener {
    /// A bound TCP listener.
    Tcp(std::net::TcpListener),
    /// A bound unix-socket listener.
    Unix(std::os::unix::net::UnixListener),
}

impl From<std::net::TcpListener> for Listener {
    fn from(listener: std::net::TcpListener) -> Listener {
        Listener::Tcp(listener)
    }
}

/// A connection the accept loop deals to a worker.
enum Accepted {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

/// Runs the lab server on `listener` with `threads` I/O threads until `shutdown` is
/// cancelled, then drains in-flight calls (at most 10 s) and returns.
pub fn run(
    listener: impl Into<Listener>,
    threads: usize,
    config: LabConfig,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let listener = listener.into();
    match &listener {
        Listener::Tcp(tcp) => tcp.set_nonblocking(true),
        Listener::Unix(unix) => unix.set_nonblocking(true),
    }
    .map_err(ServeError::Runtime)?;
    let config = Arc::new(config);
    let uses_pool = config.placement.uses_pool();
    let pools = Pools {
        h2: if uses_pool && config.transport == Transport::H2 {
            Some(Pool::start(config.pool_threads, config.pool_queue).map_err(ServeError::Runtime)?)
        } else {
            None
        },
        own: if uses_pool && config.transport == Transport::Engine {
            Some(Pool::start(config.pool_threads, config.pool_queue).map_err(ServeError::Runtime)?)
        } else {
            None
        },
    };
    let threads = threads.max(1);
    let spare_cores = placement::spare_cores(threads);
    let mut inboxes = Vec::with_capacity(threads);
    let mut workers = Vec::with_capacity(threads);
    let open_connections = Arc::new(AtomicUsize::new(0));
    // The workers' own stop, given only once the listener is closed: a client told GOAWAY
    // that reconnects then is refused, never accepted into a backlog that is about to be
    // reset or handed to a worker that no longer takes connections.
    let draining = CancellationToken::new();
    for index in 0..threads {
        let (inbox, connections) = mpsc::unbounded_channel::<Accepted>();
        inboxes.push(inbox);
        let config = Arc::clone(&config);
        let senders = PoolSenders {
            h2: pools.h2.as_ref().map(|pool| pool.sender(spare_cores)),
            own: pools.own.as_ref().map(|pool| pool.sender(spare_cores)),
        };
        let shutdown = draining.clone();
        let open = Arc::clone(&open_connections);
        let worker = std::thread::Builder::new()
            .name(format!("grpclab-lab-{index}"))
            .spawn(move || worker(connections, config, senders, open, shutdown))
            .map_err(ServeError::Runtime)?;
        workers.push(worker);
    }
    let cap = ConnectionCap {
        open: Arc::clone(&open_connections),
        max: config.max_connections,
    };
    // Returns with the listener closed.
    let accept_result = accept_loop(listener, inboxes, cap, shutdown.clone());
    // However accepting ended, stop the workers too.
    draining.cancel();
    let mut result = accept_result;
    for worker in workers {
        match worker.join() {
            Ok(Ok(())) => {}
            Ok(Err(err)) => result = result.and(Err(err)),
            Err(_) => {
                result = result.and(Err(ServeError::Serve(
                    "a worker thread panicked".to_owned(),
                )))
            }
        }
    }
    if let Some(pool) = pools.h2 {
        pool.join();
    }
    if let Some(pool) = pools.own {
        pool.join();
    }
    result
}

/// The decode pool, typed by the transport whose responses it sends.
struct Pools {
    h2: Option<Pool<H2Responder>>,
    own: Option<Pool<EngineResponder>>,
}

/// Handles to [`Pools`] for a worker.
struct PoolSenders {
    h2: Option<PoolSender<H2Responder>>,
    own: Option<PoolSender<EngineResponder>>,
}

/// The open-connection count the accept loop checks against `--max-connections`.
struct ConnectionCap {
    /// Connections open now: counted up by the accept loop, down by [`OpenConnection`].
    open: Arc<AtomicUsize>,
    max: usize,
}

/// Held by a connection's task: the connection counts as open until it is dropped.
struct OpenConnection(Arc<AtomicUsize>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Accepts connections and deals them round-robin to the workers; past the cap, closes them
/// at once and says so (at most once a second, with how many were closed).
fn accept_loop(
    listener: Listener,
    inboxes: Vec<mpsc::UnboundedSender<Accepted>>,
    cap: ConnectionCap,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    runtime.block_on(async move {
        let listener = match listener {
            Listener::Tcp(tcp) => {
                AsyncListener::Tcp(tokio::net::TcpListener::from_std(tcp).map_err(ServeError::Runtime)?)
            }
            Listener::Unix(unix) => AsyncListener::Unix(
                tokio::net::UnixListener::from_std(unix).map_err(ServeError::Runtime)?,
            ),
        };
        let mut next = 0usize;
        let mut closed_at_cap = 0u64;
        let mut last_cap_line: Option<std::time::Instant> = None;
        loop {
            let accepted = tokio::select! {
                // Shutdown first: no connection is taken once it has begun.
                biased;
                _ = shutdown.cancelled() => return Ok(()),
                accepted = listener.accept() => accepted,
            };
            let connection = match accepted {
                Ok(connection) => connection,
                // Running out of file descriptors or a connection reset before accept: keep
                // serving the others.
                Err(_) => {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    continue;
                }
            };
            if cap.open.load(Ordering::Relaxed) >= cap.max {
                drop(connection);
                closed_at_cap += 1;
                if last_cap_line.is_none_or(|at| at.elapsed() >= std::time::Duration::from_secs(1)) {
                    // A closed stderr must not stop the server: the line is best effort.
                    let _ = writeln!(
                        std::io::stderr(),
                        "lab: {} connections open, the cap (--max-connections); closed {closed_at_cap} new connection(s)",
                        cap.max
                    );
                    last_cap_line = Some(std::time::Instant::now());
                    closed_at_cap = 0;
                }
                continue;
            }
            cap.open.fetch_add(1, Ordering::Relaxed);
            // Dealt to a worker as a std socket (each worker has its own runtime).
            let connection = match connection {
                AsyncAccepted::Tcp(tcp) => {
                    let _ = tcp.set_nodelay(true);
                    tcp.into_std().map(Accepted::Tcp)
                }
                AsyncAccepted::Unix(unix) => unix.into_std().map(Accepted::Unix),
            };
            let Ok(connection) = connection else {
                cap.open.fetch_sub(1, Ordering::Relaxed);
                continue;
            };
            if inboxes[next % inboxes.len()].send(connection).is_err() {
                // A worker stops taking connections once shutdown begins; a client that
                // reconnected at that moment (after our GOAWAY) is simply not served. Only a
                // worker gone while the server runs is a failure.
                if shutdown.is_cancelled() {
                    return Ok(());
                }
                return Err(ServeError::Serve("a worker thread stopped".to_owned()));
            }
            next = next.wrapping_add(1);
        }
    })
}

/// The accept loop's listener, on its runtime.
enum AsyncListener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

enum AsyncAccepted {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

impl AsyncListener {
    async fn accept(&self) -> std::io::Result<AsyncAccepted> {
        match self {
            AsyncListener::Tcp(tcp) => tcp.accept().await.map(|(s, _)| AsyncAccepted::Tcp(s)),
            AsyncListener::Unix(unix) => unix.accept().await.map(|(s, _)| AsyncAccepted::Unix(s)),
        }
    }
}

/// One I/O thread: owns the connections dealt to it until shutdown, then drains them.
fn worker(
    mut connections: mpsc::UnboundedReceiver<Accepted>,
    config: Arc<LabConfig>,
    pools: PoolSenders,
    open_connections: Arc<AtomicUsize>,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    let tls = config.tls.clone().map(tokio_rustls::TlsAcceptor::from);
    runtime.block_on(async move {
        let tracker = TaskTracker::new();
        loop {
            let accepted = tokio::select! {
                accepted = connections.recv() => accepted,
                _ = shutdown.cancelled() => None,
            };
            let Some(accepted) = accepted else { break };
            // Counted by the accept loop; uncounted when the connection's task ends.
            let open = OpenConnection(Arc::clone(&open_connections));
            let tcp = match accepted {
                Accepted::Tcp(tcp) => tcp,
                Accepted::Unix(unix) => {
                    if let Ok(unix) = tokio::net::UnixStream::from_std(unix) {
                        serve_plaintext(unix, &config, &pools, &shutdown, &tracker, open);
                    }
                    continue;
                }
            };
            let Ok(tcp) = tokio::net::TcpStream::from_std(tcp) else {
                continue;
            };
            let Some(acceptor) = tls.clone() else {
                serve_plaintext(tcp, &config, &pools, &shutdown, &tracker, open);
                continue;
            };
            let shutdown = shutdown.clone();
            match config.transport {
                Transport::H2 => {
                    let config = Arc::clone(&config);
                    let pool = pools.h2.clone();
                    tracker.spawn(async move {
                        if let Some(stream) = tls_handshake(&acceptor, tcp).await {
                            serve_connection(stream, config, pool, shutdown).await;
                        }
                        drop(open);
                    });
                }
                Transport::Engine => {
                    let settings = engine_settings(&config);
                    let service = LabService::new(Arc::clone(&config), pools.own.clone());
                    tracker.spawn(async move {
                        if let Some(stream) = tls_handshake(&acceptor, tcp).await {
                            let (tcp, session) = stream.into_inner();
                            let socket = grpclab_h2::Socket::with_tls(tcp, session);
                            grpclab_h2::server::serve_connection(
                                socket, settings, service, shutdown,
                            )
                            .await;
                        }
                        drop(open);
                    });
                }
            }
        }
        drop(pools);
        tracker.close();
        // Connections got GOAWAY from the shutdown token; give their calls time to finish.
        let _ = tokio::time::timeout(DRAIN_LIMIT, tracker.wait()).await;
        Ok(())
    })
}

/// Serves a plaintext connection (TCP without TLS, or a unix socket) on the worker's tracker,
/// with whichever HTTP/2 transport lab runs.
fn serve_plaintext<S>(
    stream: S,
    config: &Arc<LabConfig>,
    pools: &PoolSenders,
    shutdown: &CancellationToken,
    tracker: &TaskTracker,
    open: OpenConnection,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    grpclab_h2::Socket: From<S>,
{
    let shutdown = shutdown.clone();
    match config.transport {
        Transport::H2 => {
            let config = Arc::clone(config);
            let pool = pools.h2.clone();
            tracker.spawn(async move {
                serve_connection(stream, config, pool, shutdown).await;
                drop(open);
            });
        }
        Transport::Engine => {
            let settings = engine_settings(config);
            let service = LabService::new(Arc::clone(config), pools.own.clone());
            tracker.spawn(async move {
                let socket = grpclab_h2::Socket::from(stream);
                grpclab_h2::server::serve_connection(socket, settings, service, shutdown).await;
                drop(open);
            });
        }
    }
}

/// Our engine's settings from lab's configuration.
fn engine_settings(config: &LabConfig) -> grpclab_h2::server::ServerSettings {
    grpclab_h2::server::ServerSettings {
        max_concurrent_streams: config.max_concurrent_streams,
        connection_window: config.connection_window,
        initial_window_size: config.stream_window,
        idle_timeout: config.idle_timeout,
        keepalive_interval: config.keepalive_interval,
        keepalive_timeout: config.keepalive_timeout,
        accept_encoding: Some(grpc::ACCEPT_ENCODING),
    }
}

/// How long a client may take to finish its TLS handshake: one that never does would hold a
/// connection slot for ever.
const TLS_HANDSHAKE_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs the server side of a TLS handshake on a new connection. A client that fails it (a
/// plaintext client, a certificate we refuse) was already answered with rustls's alert; it
/// is dropped here and touches nothing else.
async fn tls_handshake(
    acceptor: &tokio_rustls::TlsAcceptor,
    tcp: tokio::net::TcpStream,
) -> Option<tokio_rustls::server::TlsStream<tokio::net::TcpStream>> {
    match tokio::time::timeout(TLS_HANDSHAKE_LIMIT, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => Some(stream),
        _ => None,
    }
}

/// Binds a unix socket at `path` for the lab server (a stale socket left by a dead server is
/// replaced; a live one, or a file that is not a socket, is an error).
pub fn bind_unix(path: &std::path::Path) -> Result<std::os::unix::net::UnixListener, ServeError> {
    use std::os::unix::fs::FileTypeExt;
    let fail = |reason: String| ServeError::BindUnix {
        path: path.to_owned(),
        reason,
    };
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(fail(
                "a file that is not a socket is there; give another path".to_owned(),
            ));
        }
        // A socket nobody accepts on is a dead server's: take its place. A live one is kept.
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(fail(
                "another server is listening there; stop it or give another path".to_owned(),
            ));
        }
        std::fs::remove_file(path)
            .map_err(|err| fail(format!("cannot remove the stale socket: {err}")))?;
    }
    std::os::unix::net::UnixListener::bind(path)
        .map_err(|err| fail(format!("{err}; is the folder there and writable?")))
}

/// The accept queue lab asks for (the kernel caps it at net.core.somaxconn, 4096 on these
/// machines). The standard library's `bind` asks for 128: a client opening thousands of
/// connections at once overflowed it, and every dropped handshake cost its client a SYN
/// retransmission a second or more later (19,000 connections took 17 s to open).
pub const LISTEN_BACKLOG: i32 = 65_535;

/// Binds `addr` for the lab server, listening with [`LISTEN_BACKLOG`] (and SO_REUSEADDR, as
/// the standard library's `bind` sets it).
pub fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, ServeError> {
    use socket2::{Domain, Protocol, Socket, Type};
    let fail = |reason| ServeError::Bind { addr, reason };
    let socket =
        Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP)).map_err(fail)?;
    socket.set_reuse_address(true).map_err(fail)?;
    socket.bind(&addr.into()).map_err(fail)?;
    socket.listen(LISTEN_BACKLOG).map_err(fail)?;
    Ok(socket.into())
}
