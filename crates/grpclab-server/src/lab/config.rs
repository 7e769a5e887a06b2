//! The `lab` server's settings and their defaults: read by the accept loop, the workers and
//! both transports, so they live below all of them.

use std::sync::Arc;

use super::placement::Placement;

/// Default `--max-message-bytes`: 4 MiB, as grpc-go and grpc-java.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 << 20;
/// Default `--max-concurrent-streams` advertised per connection.
pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 1000;

/// The default cap on open connections (`--max-connections`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

/// The default connection window, and request-body budget, per connection: 16 MiB.
pub const DEFAULT_CONNECTION_WINDOW: u32 = 16 << 20;

/// The default stream window (SETTINGS_INITIAL_WINDOW_SIZE): 1 MiB.
pub const DEFAULT_STREAM_WINDOW: u32 = 1 << 20;
/// Default `--offload-above` for the adaptive placement, in bytes of request body.
///
/// Measured (`benches/placement.py`, BENCHMARKS.md): the pool hop costs 2.7-4.3 µs of server
/// CPU per call (complex_proto 5.2 → 7.9 µs, string_10kB 14.7 → 18.9 µs), while decoding
/// large_complex (166 KB, 6000 pets) takes about 760 µs — a stall of that length on the I/O
/// thread holds up every other stream there. Complex messages decode at roughly 4.5 ns per
/// byte, so at 16 KiB a decode takes ~70 µs, over ten times the hop; strings up to 16 KiB
/// decode in a memcpy and stay inline. The decode-placement study
/// (docs/studies/decode-placement.md) found the hop costing a third of small messages'
/// throughput, and offloading large ones paying only where the worker has its own core.
pub const DEFAULT_OFFLOAD_ABOVE: usize = 16 * 1024;
/// Default `--pool-queue`: jobs waiting for a pool thread.
pub const DEFAULT_POOL_QUEUE: usize = 1024;
/// Which HTTP/2 implementation carries the calls: grpclab's own engine (`Lab`, the default)
/// or the h2 crate (`H2`, the reference).
pub use grpclab_h2::Transport;

/// How Greeter requests are decoded (`serve --codec`): defined beside the handlers that use it.
pub use super::grpc::Codec;

/// The `lab` server's settings.
#[derive(Debug, Clone)]
pub struct LabConfig {
    /// Which HTTP/2 implementation to use.
    pub transport: Transport,
    /// Where decode/handle/encode runs.
    pub placement: Placement,
    /// How unary Greeter requests are decoded and replies encoded.
    pub codec: Codec,
    /// Worker threads of the pool (pool and adaptive placements).
    pub pool_threads: usize,
    /// Jobs the pool's queue holds before calls wait in their connection.
    pub pool_queue: usize,
    /// Adaptive placement: requests larger than this many bytes may go to the pool (when a
    /// worker is idle and a core is spare; see `placement`).
    pub offload_above: usize,
    /// Largest request message accepted; larger ones get RESOURCE_EXHAUSTED unread.
    pub max_message_bytes: usize,
    /// SETTINGS_MAX_CONCURRENT_STREAMS advertised (and enforced) per connection.
    pub max_concurrent_streams: u32,
    /// The connection-level receive window, which is also the most request-body bytes a
    /// connection holds (arriving, being served, or answered and the answer not yet written):
    /// a request's window goes back once its answer is written; bodies that cannot all fit are
    /// refused with REFUSED_STREAM. Raised to fit one message of `max_message_bytes` if
    /// smaller. Our engine only; on the h2 transport it caps bodies in progress.
    pub connection_window: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE advertised: how much of its body each request may send
    /// before the server acknowledges any of it.
    pub stream_window: u32,
    /// Open connections beyond this are closed as soon as they are accepted, with a log line
    /// (at most one a second): memory and descriptors stay bounded whatever clients do.
    pub max_connections: usize,
    /// Our engine: a connection with no stream that sends nothing for this long gets
    /// GOAWAY(NO_ERROR) and is closed (`None`: never).
    pub idle_timeout: Option<std::time::Duration>,
    /// Our engine: a connection with open streams whose peer has sent nothing for this long
    /// gets a PING (`None`: never).
    pub keepalive_interval: Option<std::time::Duration>,
    /// Our engine: a peer silent this long after a keepalive PING is dropped as dead.
    pub keepalive_timeout: std::time::Duration,
    /// For experiments (`--handler-delay`): sleep this long in every call's handler, making a
    /// deliberately slower server (e.g. to check that `grpclab compare` sees it).
    pub handler_delay: Option<std::time::Duration>,
    /// For experiments (`--handler-spin`): keep the CPU busy this long in every unary call's
    /// handler, a known per-call cost added to the server (how `benches/gate_power.py`
    /// injects slowdowns the gate must find).
    pub handler_spin: Option<std::time::Duration>,
    /// Serve TLS (ALPN h2) with this configuration instead of plaintext h2c.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Our engine: serve gRPC-Web's binary form (`application/grpc-web+proto`) over HTTP/2
    /// beside gRPC (`serve --grpc-web`); otherwise such calls get HTTP 415.
    pub grpc_web: bool,
}

impl Default for LabConfig {
    fn default() -> LabConfig {
        LabConfig {
            transport: Transport::Engine,
            placement: Placement::Inline,
            codec: Codec::View,
            pool_threads: 1,
            pool_queue: DEFAULT_POOL_QUEUE,
            offload_above: DEFAULT_OFFLOAD_ABOVE,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_concurrent_streams: DEFAULT_MAX_CONCURRENT_STREAMS,
            connection_window: DEFAULT_CONNECTION_WINDOW,
            stream_window: DEFAULT_STREAM_WINDOW,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle_timeout: Some(grpclab_h2::server::DEFAULT_IDLE_TIMEOUT),
            keepalive_interval: Some(grpclab_h2::server::DEFAULT_KEEPALIVE_INTERVAL),
            keepalive_timeout: grpclab_h2::server::DEFAULT_KEEPALIVE_TIMEOUT,
            handler_delay: None,
            handler_spin: None,
            tls: None,
            grpc_web: false,
        }
    }
}
