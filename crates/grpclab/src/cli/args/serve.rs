//! `grpclab serve` and `grpclab stats`: the built-in servers' flags.

use clap::{Args, ValueEnum};
use std::path::PathBuf;

use super::TransportArg;

use crate::cli::values::{parse_duration, parse_duration_or_zero};

/// `grpclab serve --impl` values: the built-in servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImplementationArg {
    /// tonic on a multi-thread runtime.
    TonicMt,
    /// tonic on a current-thread runtime.
    TonicSt,
    /// grpclab's own server.
    Lab,
}

/// `grpclab serve --codec` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CodecArg {
    /// lab's zero-allocation codec.
    View,
    /// prost's generated structs.
    Prost,
}

/// `grpclab serve --decode` values: where a call's decode, handling and encode run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlacementArg {
    /// On the I/O thread.
    Inline,
    /// A task per call.
    Task,
    /// A bounded thread pool.
    Pool,
    /// Large requests to an idle pool worker when a core is spare; else inline.
    Adaptive,
}

/// `grpclab serve --impl NAME [--port P] [--threads N]`
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Which server: tonic-mt (tonic, multi-thread runtime), tonic-st (tonic, current-thread
    /// runtime) or lab (grpclab's own).
    #[arg(long = "impl", value_enum, value_name = "NAME", default_value_t = ImplementationArg::TonicMt)]
    pub implementation: ImplementationArg,

    /// Port to listen on (0 picks a free one; the address is printed once ready).
    #[arg(long, default_value_t = 50051)]
    pub port: u16,

    /// Serve TLS (ALPN h2) with this certificate chain (PEM) instead of plaintext h2c; needs
    /// --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Mutual TLS: require client certificates signed by this CA (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,

    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: std::net::IpAddr,

    /// lab only: listen on this unix socket instead of --host/--port (plaintext; a stale
    /// socket left by a dead server is replaced). Load it with `grpclab load --insecure
    /// unix:PATH`.
    #[arg(long, value_name = "PATH")]
    pub unix: Option<PathBuf>,

    /// Serve gRPC-Web too. tonic-mt and tonic-st: binary and text, over HTTP/1.1 and
    /// HTTP/2, through tonic-web's layer, as tonic users add it. lab: binary gRPC-Web's unary
    /// calls over HTTP/2, on its own engine. Off, the baseline is unchanged.
    #[arg(long)]
    pub grpc_web: bool,

    /// Worker threads (tonic-mt's runtime workers, lab's I/O threads). Default:
    /// GRPC_SERVER_CPUS, else 1.
    #[arg(long, env = "GRPC_SERVER_CPUS", value_name = "N")]
    pub threads: Option<usize>,

    /// lab: the HTTP/2 implementation under the gRPC layer: lab (grpclab's own engine) or h2
    /// (the h2 crate, as tonic uses it: the reference).
    #[arg(long, value_enum, default_value_t = TransportArg::Engine, value_name = "TRANSPORT")]
    pub transport: TransportArg,

    /// lab: where a call's decode/handle/encode runs: inline (on the I/O thread), task (a task
    /// per call), pool (a bounded thread pool), adaptive (requests over --offload-above bytes go
    /// to an idle pool worker when the process has a core beyond its I/O threads; else inline).
    #[arg(long, value_enum, default_value_t = PlacementArg::Inline, value_name = "PLACEMENT")]
    pub decode: PlacementArg,

    /// lab: how a Greeter request is decoded and its reply encoded: view (lab's own
    /// zero-allocation codec, in place) or prost (the generated structs, owned strings and
    /// vectors, as a typical service: what our engine gives a service written the usual way).
    #[arg(long, value_enum, default_value_t = CodecArg::View, value_name = "CODEC")]
    pub codec: CodecArg,

    /// lab: threads of the decode pool (pool and adaptive placements).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub pool_threads: usize,

    /// lab: calls the pool's queue holds; when full, calls wait in their connection.
    #[arg(long, default_value_t = grpclab_server::lab::DEFAULT_POOL_QUEUE, value_name = "N")]
    pub pool_queue: usize,

    /// lab, adaptive placement: request bodies larger than this many bytes may go to the pool
    /// (when a worker is idle and a core is spare).
    #[arg(long, default_value_t = grpclab_server::lab::DEFAULT_OFFLOAD_ABOVE, value_name = "BYTES")]
    pub offload_above: usize,

    /// lab, for experiments: sleep this long in every call's handler (e.g. 1ms), to make a
    /// deliberately slower server.
    #[arg(long, hide = true, value_parser = parse_duration)]
    pub handler_delay: Option<std::time::Duration>,

    /// lab, for experiments: keep the CPU busy this long in every unary call's handler (e.g.
    /// 100ns), a known per-call cost (benches/gate_power.py).
    #[arg(long, hide = true, value_parser = parse_duration)]
    pub handler_spin: Option<std::time::Duration>,

    /// lab: largest request message accepted; larger ones get RESOURCE_EXHAUSTED unread.
    #[arg(long, default_value_t = grpclab_server::lab::DEFAULT_MAX_MESSAGE_BYTES, value_name = "BYTES")]
    pub max_message_bytes: usize,

    /// lab: SETTINGS_MAX_CONCURRENT_STREAMS advertised and enforced per connection.
    #[arg(long, default_value_t = grpclab_server::lab::DEFAULT_MAX_CONCURRENT_STREAMS, value_name = "N")]
    pub max_concurrent_streams: u32,

    /// lab: the connection window, which is also the most request-body bytes one connection
    /// may hold (arriving, or not yet answered); bodies that cannot all fit are refused with
    /// REFUSED_STREAM (safe to retry). Raised to fit one --max-message-bytes message.
    #[arg(long, default_value_t = grpclab_server::lab::DEFAULT_CONNECTION_WINDOW, value_name = "BYTES")]
    pub connection_window: u32,

    /// lab: SETTINGS_INITIAL_WINDOW_SIZE, how much of its body each request may send before
    /// the server acknowledges any of it (a request larger than this needs more than one
    /// round trip).
    #[arg(long, default_value_t = grpclab_server::lab::DEFAULT_STREAM_WINDOW, value_name = "BYTES")]
    pub stream_window: u32,

    /// lab: connections open at once; more are closed as soon as they are accepted, with a
    /// log line at most once a second (keep it below the process's descriptor limit).
    #[arg(long, default_value_t = grpclab_server::lab::DEFAULT_MAX_CONNECTIONS, value_name = "N")]
    pub max_connections: usize,

    /// lab (its own transport): close a connection with no open stream after it has sent
    /// nothing for this long, with GOAWAY(NO_ERROR); 0s keeps idle connections forever.
    #[arg(long, default_value = "5m", value_name = "DURATION", value_parser = parse_duration_or_zero)]
    pub idle_timeout: std::time::Duration,

    /// lab (its own transport): PING a connection with open streams once its client has
    /// sent nothing for this long; 0s sends none.
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = parse_duration_or_zero)]
    pub keepalive: std::time::Duration,

    /// lab (its own transport): drop a connection, and its calls, when its client stays silent
    /// this long after a keepalive PING.
    #[arg(long, default_value = "20s", value_name = "DURATION", value_parser = parse_duration)]
    pub keepalive_timeout: std::time::Duration,
}

/// `grpclab stats HOST:PORT`
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The server, as HOST:PORT.
    #[arg(value_name = "HOST:PORT")]
    pub target: String,

    /// Plaintext HTTP/2 (h2c), no TLS. Without it, as `load` (and ghz), stats speaks TLS and
    /// verifies the server against the system's roots (or --cacert).
    #[arg(long, conflicts_with_all = ["tls", "cacert", "cname", "skip_tls"])]
    pub insecure: bool,

    /// TLS (the default; kept so older command lines still work).
    #[arg(long, hide = true)]
    pub tls: bool,

    /// TLS: trust this CA certificate (PEM) instead of the system's roots.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// TLS: the name to verify in the server's certificate (and send as SNI).
    #[arg(long, value_name = "NAME")]
    pub cname: Option<String>,

    /// TLS without verifying the server's certificate.
    #[arg(long = "skipTLS")]
    pub skip_tls: bool,
}
