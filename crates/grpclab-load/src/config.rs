//! What a load run does: the target, the call, the requests, and how hard and how long to push.

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Checks a reply message (without its gRPC prefix); `Err` carries why it is wrong.
pub type ReplyValidator =
    Arc<dyn Fn(&[u8]) -> Result<(), grpclab_core::scenario::ReplyError> + Send + Sync>;

/// Renders a call's payload (ghz's call templates): the call's number and worker, the
/// thread's generator and a reused text buffer in; the framed messages (uncompressed) out —
/// one, or an array's elements in order. A unary call takes element `number % len`; a
/// streaming call sends them in order (rendered once per call, or once per message with
/// `--stream-dynamic-messages`).
pub type RequestRenderer = Arc<
    dyn Fn(
            &grpclab_core::template::CallContext<'_>,
            &mut grpclab_core::template::Random,
            &mut String,
        ) -> Result<Vec<bytes::Bytes>, String>
        + Send
        + Sync,
>;

/// One method a run calls, with what its calls send.
#[derive(Clone)]
pub struct CallMethod {
    /// The method's full name as reported (`package.Service.Method`).
    pub name: String,
    /// The `:path` of its calls, `/package.Service/Method`.
    pub path: String,
    /// Framed requests (gRPC prefix included), sent round-robin. At least one.
    pub requests: Vec<Bytes>,
    /// Headers of this method's calls only (a workload's per-method metadata), sent after
    /// [`LoadConfig::metadata`] and cached with them.
    pub metadata: Vec<(HeaderName, HeaderValue)>,
    /// Metadata whose values vary per call (ghz's `-m` templates: `{{.UUID}}`, ...): rendered
    /// for each call with the same request number as its payload, sent after the rest as
    /// literals without indexing (the rest of the header block stays cached). Values are
    /// checked before the run (call 0's rendering must be a valid header value); the actions
    /// only ever add letters, digits and `-:.TZ`.
    pub metadata_templates: Vec<(HeaderName, grpclab_core::template::Template)>,
    /// Per-call requests from a template (`-d` with `{{.RequestNumber}}` ...); `None` sends
    /// `requests` round-robin (the constant path, untouched by templates). A call whose
    /// rendering fails is sent with `requests[0]` (call 0's rendering, checked before the run)
    /// and counted in the result's `render_failures`.
    pub renderer: Option<RequestRenderer>,
    /// Its share of a mix's calls, against the other methods' weights (at least 1).
    pub weight: u32,
    /// Its retry policy (a workload entry's `retry`), if it has one.
    pub retry: Option<crate::retry::RetryPolicy>,
    /// Its hedging policy (a workload entry's `hedging`), if it has one; never with `retry`.
    pub hedging: Option<crate::retry::HedgingPolicy>,
}

impl CallMethod {
    /// A method at `path` sending `requests`, named after its path, weight 1.
    pub fn new(path: &str, requests: Vec<Bytes>) -> CallMethod {
        CallMethod {
            name: path.trim_start_matches('/').replace('/', "."),
            path: path.to_owned(),
            requests,
            metadata: Vec::new(),
            metadata_templates: Vec::new(),
            renderer: None,
            weight: 1,
            retry: None,
            hedging: None,
        }
    }

    /// Whether its calls render anything per call (a payload or metadata template).
    pub fn templated(&self) -> bool {
        self.renderer.is_some() || !self.metadata_templates.is_empty()
    }
}

impl std::fmt::Debug for CallMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallMethod")
            .field("path", &self.path)
            .field("requests", &self.requests.len())
            .field("metadata", &self.metadata.len())
            .field("metadata_templates", &self.metadata_templates.len())
            .field("templated", &self.renderer.is_some())
            .field("weight", &self.weight)
            .finish()
    }
}

/// What happens to calls still in flight when a timed run (`-z`) ends (ghz's
/// `--duration-stop`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DurationStop {
    /// They may finish within the drain limit ([`crate::drain_limit`]); the rest are counted
    /// as Canceled. grpclab's default.
    #[default]
    Wait,
    /// They are given up at once and counted as Canceled (ghz's default).
    Close,
    /// They are given up at once and left out of the results (counted apart as `ignored`).
    Ignore,
}

/// How requests are paced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pacing {
    /// Each stream sends its next request as soon as the previous one completes.
    ClosedLoop,
    /// Requests are scheduled at a fixed total rate (requests per second). Latency counts from
    /// the scheduled time, so a stalled server cannot hide its stall (coordinated omission).
    OpenLoop {
        /// requests per second, over all streams and threads
        rate: f64,
    },
    /// Open loop with a rate that changes in steps (ghz's `step` and `line` load schedules):
    /// `start` req/s, then `step` more (or fewer) every `step_duration`, until the rate
    /// reaches `end` or `max_duration` has passed since the run began; then it holds.
    Steps {
        /// The first rate, req/s (> 0).
        start: f64,
        /// The change per step, req/s (negative steps down; then `end` is required).
        step: f64,
        /// How long each rate holds (1 s for ghz's `line`).
        step_duration: Duration,
        /// The rate to stop changing at.
        end: Option<f64>,
        /// How long to keep changing the rate, from the run's start.
        max_duration: Option<Duration>,
    },
}

impl Pacing {
    /// Whether calls are sent on a schedule (latency counts from each call's intended time).
    pub fn is_open_loop(&self) -> bool {
        !matches!(self, Pacing::ClosedLoop)
    }
}

/// ghz's `step` and `line` concurrency schedules: how many streams may have a call in flight
/// as the run goes — `start`, then `step` more (or fewer) every `step_duration` (a second for
/// `line`), until `end` or until `max_duration` has passed since the run began; then it holds.
/// The run opens the schedule's peak of streams ([`LoadConfig::validate`] sets
/// `concurrency` to it); the streams beyond the current value wait, spread over the
/// connections as `concurrency` is. Works with every pacing: in an open loop the schedule
/// limits how many calls are in flight, and a call that waits for a stream still counts its
/// latency from its intended time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConcurrencySteps {
    /// Streams at the start (0 allowed: nothing is sent until the first step).
    pub start: usize,
    /// The change per step (negative steps down; then `end` is required).
    pub step: i64,
    /// How long each value holds.
    pub step_duration: Duration,
    /// The value to stop changing at.
    pub end: Option<usize>,
    /// How long to keep changing, from the run's start (warmup included).
    pub max_duration: Option<Duration>,
}

/// How long a connection may take to open before the run reports it unreachable, unless
/// [`LoadConfig::connect_timeout`] says otherwise: ghz's default for `--connect-timeout`.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How late past `--start-at` a generator may still start, unless told otherwise.
pub const DEFAULT_START_TOLERANCE: Duration = Duration::from_millis(500);

/// Streams a run may keep at once, `-c` or a concurrency schedule's peak (each is a slot the
/// engine keeps: `-c 100000000` once asked for 26 GB and aborted).
pub const MAX_SCHEDULED_STREAMS: usize = 100_000;

/// The most methods one mix takes: each has its own figures in every client thread, so a
/// mix is meant for a handful (a workload's few calls), not for every method of a service.
pub const MAX_METHODS: usize = 64;

impl ConcurrencySteps {
    pub(crate) fn staircase(&self, run: Option<Duration>) -> crate::staircase::Staircase {
        let limit = match (self.max_duration, run) {
            (Some(max), Some(run)) => Some(max.min(run)),
            (max, run) => max.or(run),
        };
        crate::staircase::Staircase::new(
            self.start as f64,
            self.step as f64,
            self.step_duration,
            self.end.map(|end| end as f64),
            limit,
        )
    }

    /// The most streams the schedule asks for in a run of `run` (from its start, warmup
    /// included; `None`: no known length); `None` when it would grow without bound.
    pub fn peak(&self, run: Option<Duration>) -> Option<usize> {
        if self.step > 0 && self.end.is_none() && self.max_duration.is_none() && run.is_none() {
            return None;
        }
        Some(self.staircase(run).peak().max(0.0) as usize)
    }
}

/// One generator's part of a run that several generators share (`--shard I/N`): generator
/// `index` of `of`. Integer totals split so the parts always add up to the total (k6's
/// execution-segment rounding, [`Shard::share`]); in an open loop the generator takes every
/// `of`-th call of the one global schedule, starting at call `index`, each at its global
/// intended time, so the generators' calls together are exactly one generator's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This generator, from 0.
    pub index: u64,
    /// How many generators share the run (at least 1).
    pub of: u64,
}

impl Shard {
    /// Parses `I/N` (0 <= I < N).
    pub fn parse(text: &str) -> Result<Shard, String> {
        let usage =
            || format!("'{text}' is not a shard: give I/N, generator I (from 0) of N, e.g. 0/4");
        let (index, of) = text.trim().split_once('/').ok_or_else(usage)?;
        let index: u64 = index.trim().parse().map_err(|_| usage())?;
        let of: u64 = of.trim().parse().map_err(|_| usage())?;
        if of == 0 {
            return Err(format!("shard '{text}': N must be at least 1"));
        }
        if index >= of {
            return Err(format!(
                "shard '{text}': I counts from 0 and must be below N (the last of {of} is {}/{of})",
                of - 1
            ));
        }
        Ok(Shard { index, of })
    }

    /// This generator's part of an integer `total`: round(total·(I+1)/N) − round(total·I/N),
    /// rounding halves up. The parts of all N generators add up to `total` exactly, and
    /// differ by at most one.
    pub fn share(&self, total: u64) -> u64 {
        let upto = |k: u64| -> u64 {
            // round(total * k / of) in integers: floor((2 * total * k + of) / (2 * of)).
            let wide = (2 * u128::from(total) * u128::from(k) + u128::from(self.of))
                / (2 * u128::from(self.of));
            u64::try_from(wide).unwrap_or(u64::MAX)
        };
        upto(self.index + 1) - upto(self.index)
    }

    /// The `local`-th call this generator sends, as a number in the run's one global
    /// sequence (open-loop slots, template request numbers): unique across generators.
    pub fn global(&self, local: u64) -> u64 {
        local.saturating_mul(self.of).saturating_add(self.index)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.of)
    }
}

/// The part of a run's totals one shard runs (see [`LoadConfig::share`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardShare {
    /// Streams in flight (of `-c`, or of a concurrency schedule's peak).
    pub concurrency: usize,
    /// Connections (of `--connections`).
    pub connections: usize,
    /// Measured calls (of `-n`), when the run counts calls.
    pub total: Option<u64>,
}

/// The shape of the called method (from its descriptor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CallShape {
    /// One request, one reply.
    #[default]
    Unary,
    /// A stream of requests, one reply.
    ClientStreaming,
    /// One request, a stream of replies.
    ServerStreaming,
    /// Streams both ways; grpclab drives it as ping-pong (a request, its reply, the next).
    Bidi,
}

impl CallShape {
    /// The shape of a method that streams its requests and/or its replies.
    pub fn of(client_streaming: bool, server_streaming: bool) -> CallShape {
        match (client_streaming, server_streaming) {
            (false, false) => CallShape::Unary,
            (true, false) => CallShape::ClientStreaming,
            (false, true) => CallShape::ServerStreaming,
            (true, true) => CallShape::Bidi,
        }
    }
}

/// ghz's stream settings: how many messages a streaming call sends and how fast.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamSettings {
    /// `--stream-call-count`: messages per call (cycling the data array); default: the array
    /// once. Server streams (ghz's meaning): the replies after which the client cancels the
    /// stream, the call counting as OK; default: the server ends it.
    pub call_count: Option<usize>,
    /// `--stream-call-duration`: stop sending after this long. Server streams (ghz's meaning):
    /// the client cancels each call this long after it started, the call counting as OK.
    pub call_duration: Option<Duration>,
    /// `--stream-interval`: the pause between two sends.
    pub interval: Option<Duration>,
    /// `--stream-dynamic-messages`: with a call template, render it again for every message
    /// (message `k` is element `k % len` of that rendering); otherwise once per call.
    pub dynamic_messages: bool,
    /// `--stream-independent`: bidi calls send and receive independently, as ghz's do (the
    /// sends paced by `interval`, the half-close after the last, the call ending with the
    /// server's trailers); otherwise strict ping-pong (each send waits for the previous
    /// message's reply).
    pub independent: bool,
    /// `--stream-stamp`: the reply field holding the time the server produced each reply;
    /// each reply's latency is then recorded against the client's clock on arrival
    /// ([`crate::Recorder::message_latency`]). Streams with replies to read (server
    /// streaming, bidi).
    pub stamp: Option<grpclab_h2::client::StampField>,
}

/// Which HTTP/2 implementation carries the calls: grpclab's own engine (`Lab`, the default)
/// or the h2 crate (`H2`, the reference).
pub use grpclab_h2::Transport;

/// How a run's connections are spread over the target's addresses: gRPC's load-balancing
/// policies of the same names (ghz's `--lb-strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Balance {
    /// Every connection to one address.
    #[default]
    PickFirst,
    /// Connection `i` to address `i mod n`.
    RoundRobin,
}

/// A complete description of one load run. Build it, [`validate`](LoadConfig::validate) it,
/// pass it to [`run`](crate::run).
#[derive(Clone)]
pub struct LoadConfig {
    /// The server's address (with several, the first, or the first that accepted a
    /// connection: gRPC's pick_first).
    pub target: SocketAddr,
    /// Every address the target resolved to, in order (`target` among them).
    pub addresses: Vec<SocketAddr>,
    /// A name resolved again whenever a connection is re-made (`dns:` targets and host
    /// names; `None` for addresses given as such): a connection then dials the address the
    /// name has now (see `address_index` for which).
    pub naming: Option<crate::naming::Naming>,
    /// A unix socket every connection dials instead of `target` (gRPC's `unix:PATH` and
    /// `unix:///PATH`; plaintext). `target` and `addresses` then only name the run.
    pub unix: Option<std::path::PathBuf>,
    /// How connections are spread over `addresses`.
    pub balance: Balance,
    /// The `:authority` to send (what the user typed as `HOST:PORT`).
    pub authority: String,
    /// The methods called: one, or a mix whose calls each pick one by weight (see
    /// [`CallMethod`] and `mix_seed`). At least one.
    pub methods: Vec<CallMethod>,
    /// Request headers of every call (`-m`); a method adds its own
    /// ([`CallMethod::metadata`]).
    pub metadata: Vec<(HeaderName, HeaderValue)>,
    /// A mix: which method each call takes is drawn from this seed and the call's number
    /// among the run's measured (or warmup) calls, so a run of `-n` calls with one seed
    /// makes the same number of calls of each method every time, whichever thread sends
    /// them.
    pub mix_seed: u64,
    /// A workload's flows (chained calls, see [`crate::flow`]): each a weighted entry of the
    /// mix beside the plain methods; their steps call the methods at the end of `methods`
    /// (one method per step, after the plain ones). One ticket of the schedule starts a
    /// flow, which holds its stream until its last step ends.
    pub flows: Vec<crate::flow::FlowPlan>,
    /// Streams in flight at once, spread evenly over the connections.
    pub concurrency: usize,
    /// HTTP/2 connections.
    pub connections: usize,
    /// How requests are paced.
    pub pacing: Pacing,
    /// Stop after this long (measured window, warmup excluded).
    pub duration: Option<Duration>,
    /// Stop after this many measured calls.
    pub total: Option<u64>,
    /// Calls before the measured window starts; sent, not counted.
    pub warmup: Duration,
    /// Per-call deadline, sent as `grpc-timeout` and enforced by the client.
    pub timeout: Option<Duration>,
    /// Client threads, each with its own single-threaded runtime and connections.
    pub threads: usize,
    /// How long opening a connection may take (`--connect-timeout`, ghz's default 10 s).
    pub connect_timeout: Duration,
    /// `--validate`: checks each reply; a failing reply counts as an error.
    pub validator: Option<ReplyValidator>,
    /// The HTTP/2 implementation.
    pub transport: Transport,
    /// The wire protocol each call speaks (gRPC unless `--protocol`; the others on the h2
    /// transport only).
    pub protocol: grpclab_core::protocol::Protocol,
    /// How messages are encoded (`--codec`: JSON on the h2 transport only; the requests are
    /// then JSON already, and the validator reads JSON replies).
    pub codec: grpclab_core::protocol::Codec,
    /// `--http1`: gRPC-Web or Connect over HTTP/1.1, one request in flight per connection
    /// (on the h2 transport's side of the seam, with hyper's HTTP/1.1 client).
    pub http1: bool,
    /// `--connect-get`: Connect unary calls go as HTTP GET, the message in the URL's query
    /// (Connect's form for methods without side effects).
    pub connect_get: bool,
    /// `--skipFirst`: leave the first this many measured calls to end out of the results (the
    /// count excludes them; the run's `-n` budget includes them, as in ghz).
    pub skip_first: u64,
    /// `--details`: keep the first this many measured calls one by one (ghz's per-call
    /// `details`); `None` keeps only the aggregates (bounded memory whatever the run's length).
    pub details: Option<usize>,
    /// Our engine only: the first stream id of every connection (1). Tests set it near 2^31
    /// to reach stream-id exhaustion (and the planned reconnect) without 2^30 calls.
    pub first_stream_id: u32,
    /// TLS (ALPN h2) on every connection; `None` is plaintext h2c. The library's default is
    /// plaintext (the harness runs it against its own servers); `grpclab load`'s is TLS, as
    /// ghz's (see `grpclab`'s `cli/load.rs`).
    pub tls: Option<grpclab_core::tls::TlsClient>,
    /// `-e`: send requests gzip-compressed (`grpc-encoding: gzip`; the engine compresses each
    /// distinct request once, before the run) and accept gzip replies
    /// (`grpc-accept-encoding: gzip`).
    pub gzip: bool,
    /// ghz's `--max-recv-message-size`: a reply message larger than this ends its call with
    /// RESOURCE_EXHAUSTED. `None`: no limit.
    pub max_recv_message_bytes: Option<usize>,
    /// `--duration-stop`: calls in flight at the end of a timed run (`-n` runs always wait).
    pub duration_stop: DurationStop,
    /// `--concurrency-schedule step|line`: how many of the streams may be busy as the run
    /// goes; `None`: all `concurrency` of them, all the time.
    pub concurrency_steps: Option<ConcurrencySteps>,
    /// ghz's `--keepalive`: PING the server when a connection with calls in flight has heard
    /// nothing for this long, and give the connection up (its calls Unavailable, then a
    /// reconnect) when nothing arrives within as long again. `None`: no PINGs.
    pub keepalive: Option<Duration>,
    /// A live view is watching: progress snapshots carry the last whole second's latency
    /// percentiles (each client thread hands over one small histogram a second).
    pub live_latency: bool,
    /// The called method's shape; streaming shapes send `requests` in order within a call.
    pub shape: CallShape,
    /// Streaming calls: ghz's `--stream-*` settings.
    pub stream: StreamSettings,
    /// `--shard I/N`: this generator's part of a run several share. The totals above
    /// (`concurrency`, `connections`, `total`, the rate) stay the whole run's; [`crate::run`]
    /// runs this generator's [`LoadConfig::share`] of them.
    pub shard: Option<Shard>,
    /// `--start-at`: the wall-clock time the run (its warmup, then its window) starts at, so
    /// generators on several machines share one clock. `None`: as soon as the connections
    /// are open.
    pub start_at: Option<std::time::SystemTime>,
    /// How late past `start_at` a generator may still start (its schedule keeps the shared
    /// start, so the calls it missed count as late); later, the run is refused
    /// ([`crate::LoadError::Late`]).
    pub start_tolerance: Duration,
    /// What ghz's `.WorkerID` renders in front of `g{worker}c{connection}`: the run's name
    /// and `:` (`--name`), as ghz does; empty without one.
    pub worker_prefix: String,
}

impl std::fmt::Debug for LoadConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadConfig")
            .field("target", &self.target)
            .field("methods", &self.methods)
            .field("concurrency", &self.concurrency)
            .field("connections", &self.connections)
            .field("pacing", &self.pacing)
            .field("duration", &self.duration)
            .field("total", &self.total)
            .field("warmup", &self.warmup)
            .field("timeout", &self.timeout)
            .field("threads", &self.threads)
            .field("validate", &self.validator.is_some())
            .field("transport", &self.transport)
            .field("details", &self.details)
            .field("tls", &self.tls.is_some())
            .field("gzip", &self.gzip)
            .field("concurrency_steps", &self.concurrency_steps)
            .field("keepalive", &self.keepalive)
            .finish()
    }
}

/// A configuration that cannot run; the message names the flag and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// The rule every count of connections and streams keeps, wherever it is given (flags,
/// grpc_bench's variables, a sweep): each connection carries at least one stream, so there
/// are no more connections than streams. `names` are how the user gave the two counts.
pub fn connections_fit(
    connections: usize,
    concurrency: usize,
    names: [&str; 2],
) -> Result<(), ConfigError> {
    if connections > concurrency {
        let [connections_name, concurrency_name] = names;
        return Err(ConfigError(format!(
            "{connections_name} ({connections}) is more than {concurrency_name} ({concurrency}): each connection needs at least one stream; lower {connections_name} or raise {concurrency_name}"
        )));
    }
    Ok(())
}

impl LoadConfig {
    /// A fingerprint of what the calls send: each method's name, path, weight, requests
    /// (call 0's rendering for a template), headers and header templates' names, and the
    /// run's own headers (FNV-1a, 64 bits, as hex). Generators of one run have the same;
    /// `grpclab merge` refuses results whose fingerprints differ.
    pub fn requests_digest(&self) -> String {
        let mut hash = Fnv::default();
        for (name, value) in &self.metadata {
            hash.field(name.as_str().as_bytes());
            hash.field(value.as_bytes());
        }
        for method in &self.methods {
            hash.field(method.name.as_bytes());
            hash.field(method.path.as_bytes());
            hash.field(&method.weight.to_le_bytes());
            hash.field(&[u8::from(method.renderer.is_some())]);
            for request in &method.requests {
                hash.field(request);
            }
            for (name, value) in &method.metadata {
                hash.field(name.as_str().as_bytes());
                hash.field(value.as_bytes());
            }
            for (name, _) in &method.metadata_templates {
                hash.field(name.as_str().as_bytes());
            }
        }
        format!("{:016x}", hash.0)
    }

    /// Which of `addresses` connection `connection` dials (0 under pick_first: the chosen
    /// address comes first).
    pub fn address_index(&self, connection: usize) -> usize {
        match self.balance {
            Balance::RoundRobin if !self.addresses.is_empty() => connection % self.addresses.len(),
            _ => 0,
        }
    }

    /// The address connection `connection` dials.
    pub fn target_for(&self, connection: usize) -> SocketAddr {
        match self.balance {
            Balance::RoundRobin if !self.addresses.is_empty() => {
                self.addresses[connection % self.addresses.len()]
            }
            _ => self.target,
        }
    }

    /// How many streams connection `connection` carries: `concurrency` spread evenly.
    pub(crate) fn streams_on(&self, connection: usize) -> usize {
        let base = self.concurrency / self.connections;
        base + usize::from(connection < self.concurrency % self.connections)
    }

    /// What happens to calls in flight at the end: `duration_stop` for a timed run; an `-n`
    /// run always waits (its calls end by their own deadlines).
    pub fn end_of_run(&self) -> DurationStop {
        if self.duration.is_some() {
            self.duration_stop
        } else {
            DurationStop::Wait
        }
    }

    /// A closed-loop configuration with ghz's defaults (50 streams over 1 connection, 200 calls,
    /// 20 s timeout) for `path` on `target`.
    pub fn new(target: SocketAddr, path: &str, requests: Vec<Bytes>) -> LoadConfig {
        LoadConfig {
            target,
            addresses: vec![target],
            unix: None,
            naming: None,
            balance: Balance::PickFirst,
            authority: target.to_string(),
            methods: vec![CallMethod::new(path, requests)],
            metadata: Vec::new(),
            mix_seed: 0,
            flows: Vec::new(),
            concurrency: 50,
            connections: 1,
            pacing: Pacing::ClosedLoop,
            duration: None,
            total: Some(200),
            warmup: Duration::ZERO,
            timeout: Some(Duration::from_secs(20)),
            threads: 1,
            connect_timeout: CONNECT_TIMEOUT,
            validator: None,
            transport: Transport::Engine,
            protocol: grpclab_core::protocol::Protocol::Grpc,
            codec: grpclab_core::protocol::Codec::Proto,
            http1: false,
            connect_get: false,
            details: None,
            skip_first: 0,
            first_stream_id: 1,
            tls: None,
            gzip: false,
            max_recv_message_bytes: None,
            duration_stop: DurationStop::Wait,
            concurrency_steps: None,
            keepalive: None,
            live_latency: false,
            shape: CallShape::Unary,
            stream: StreamSettings::default(),
            shard: None,
            start_at: None,
            start_tolerance: DEFAULT_START_TOLERANCE,
            worker_prefix: String::new(),
        }
    }

    /// The part of the run's totals this generator runs: all of them without a shard;
    /// with one, its [`Shard::share`] of the streams (or of a concurrency schedule's peak),
    /// the connections and `-n`. Fails when a share would be zero (a generator with
    /// nothing to do is a mistake in the totals, not a silent idle pod).
    pub fn share(&self) -> Result<ShardShare, ConfigError> {
        let Some(shard) = self.shard else {
            return Ok(ShardShare {
                concurrency: self.concurrency,
                connections: self.connections,
                total: self.total,
            });
        };
        let part = |total: u64, flag: &str| -> Result<u64, ConfigError> {
            match shard.share(total) {
                0 => Err(ConfigError(format!(
                    "{flag} {total} split over {} generators leaves generator {shard} none; give {flag} at least {} or fewer shards",
                    shard.of, shard.of
                ))),
                part => Ok(part),
            }
        };
        let concurrency = part(self.concurrency as u64, "-c/--concurrency")? as usize;
        let connections = part(self.connections as u64, "--connections")? as usize;
        let total = match self.total {
            Some(total) => Some(part(total, "-n/--total")?),
            None => None,
        };
        if connections > concurrency {
            return Err(ConfigError(format!(
                "generator {shard} gets {connections} connection(s) for {concurrency} stream(s): each connection needs a stream; raise -c or lower --connections"
            )));
        }
        Ok(ShardShare {
            concurrency,
            connections,
            total,
        })
    }

    /// This generator's own configuration: its [`LoadConfig::share`] of the totals (call
    /// after [`LoadConfig::validate`]). The shard stays set: the schedule takes its calls
    /// from the global sequence by it.
    pub(crate) fn into_share(mut self) -> Result<LoadConfig, ConfigError> {
        let share = self.share()?;
        self.concurrency = share.concurrency;
        self.connections = share.connections;
        self.total = share.total;
        self.threads = self.threads.min(self.connections);
        Ok(self)
    }

    /// The weights of the mix's entries: the plain methods', then the flows'.
    pub(crate) fn entry_weights(&self) -> Vec<u32> {
        self.methods[..self.plain_methods()]
            .iter()
            .map(|method| method.weight)
            .chain(self.flows.iter().map(|flow| flow.weight))
            .collect()
    }

    /// The response header and trailer names flow steps extract, each once (lowercase).
    pub(crate) fn kept_reply_headers(&self) -> Vec<Bytes> {
        let mut names: Vec<Bytes> = Vec::new();
        let steps = self.flows.iter().flat_map(|flow| &flow.steps);
        for extract in steps.flat_map(|step| &step.extracts) {
            if let crate::flow::Extractor::Header(name) | crate::flow::Extractor::Trailer(name) =
                &extract.from
            {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
        }
        names
    }

    /// The methods a plain call of the mix may draw: those before the flows' steps.
    pub fn plain_methods(&self) -> usize {
        self.flows
            .iter()
            .flat_map(|flow| &flow.steps)
            .map(|step| step.method as usize)
            .min()
            .unwrap_or(self.methods.len())
    }

    /// By method: what the engine asks of a flow step calling it (all false for a plain
    /// method); both transports read it.
    pub fn step_traits(&self) -> Vec<crate::flow::StepTraits> {
        let mut traits = vec![crate::flow::StepTraits::default(); self.methods.len()];
        for step in self.flows.iter().flat_map(|flow| &flow.steps) {
            let retried = self
                .methods
                .get(step.method as usize)
                .is_some_and(|own| own.retry.is_some() || own.hedging.is_some());
            if let Some(place) = traits.get_mut(step.method as usize) {
                *place = crate::flow::StepTraits {
                    reads_reply: step.reads_reply(),
                    passes_on_ok: !step.reads_reply()
                        && step.expect.status == grpclab_core::Code::Ok
                        && !retried,
                    streams: step.streams,
                };
            }
        }
        traits
    }

    /// Flows: steps name methods after the plain ones, one each; the run can carry them.
    fn validate_flows(&self) -> Result<(), ConfigError> {
        if self.flows.is_empty() {
            return Ok(());
        }
        let fail = |message: String| Err(ConfigError(message));
        let plain = self.plain_methods();
        let mut seen = vec![false; self.methods.len()];
        for flow in &self.flows {
            if flow.steps.is_empty() {
                return fail(format!("flow '{}' has no steps", flow.name));
            }
            for step in &flow.steps {
                let method = step.method as usize;
                if method < plain || method >= self.methods.len() || seen[method] {
                    return fail(format!(
                        "flow '{}': step '{}' must call a method of its own after the plain ones",
                        flow.name, step.name
                    ));
                }
                seen[method] = true;
            }
        }
        if self.shape != CallShape::Unary {
            return fail("flow steps are unary calls".to_owned());
        }
        if self.skip_first > 0 {
            return fail(
                "--skipFirst counts calls, and a flow is several: drop it (use --warmup)"
                    .to_owned(),
            );
        }
        if self.validator.is_some() {
            return fail(
                "--validate checks one method's replies; a flow's steps check theirs with expect"
                    .to_owned(),
            );
        }
        Ok(())
    }

    /// Retry and hedging policies: sound, one per method, and where they run (unary calls).
    fn validate_retries(&self) -> Result<(), ConfigError> {
        for method in &self.methods {
            let fail = |reason: &str| Err(ConfigError(format!("{}: {reason}", method.name)));
            if method.retry.is_some() && method.hedging.is_some() {
                return fail("a method has a retry policy or a hedging policy, not both (as in gRPC's service config)");
            }
            let (kind, checked) = match (&method.retry, &method.hedging) {
                (Some(policy), _) => ("retry", policy.check()),
                (_, Some(policy)) => ("hedging", policy.check()),
                _ => continue,
            };
            if let Err(reason) = checked {
                return fail(&format!("{kind}: {reason}"));
            }
            if self.shape != CallShape::Unary {
                return fail(&format!("{kind}: only unary calls are retried or hedged"));
            }
        }
        Ok(())
    }

    /// Checks that the run can start, and clamps `threads` to the connections (a thread without
    /// a connection would only idle).
    pub fn validate(&mut self) -> Result<(), ConfigError> {
        let fail = |message: &str| Err(ConfigError(message.to_owned()));
        if self.methods.iter().any(|method| method.requests.is_empty()) {
            return fail("no requests to send: give a payload with -d/--data or -D/--data-file");
        }
        self.validate_flows()?;
        self.validate_retries()?;
        if let Some(steps) = self.concurrency_steps {
            self.concurrency = self.scheduled_peak(steps)?;
        }
        if self.concurrency == 0 {
            return fail("-c/--concurrency must be at least 1");
        }
        if self.connections == 0 {
            return fail("--connections must be at least 1");
        }
        connections_fit(
            self.connections,
            self.concurrency,
            ["--connections", "-c/--concurrency"],
        )?;
        // Every connection is a socket: past the descriptor limit the run would fail mid-way
        // with "Too many open files" (the binary raised the soft limit to the hard one at start).
        if let Some(limit) = grpclab_core::descriptors::OpenFilesLimit::current() {
            limit
                .check(self.connections, "--connections")
                .map_err(|err| ConfigError(err.0))?;
        }
        if self.threads == 0 {
            return fail("--cpus must be at least 1");
        }
        if self.keepalive == Some(Duration::ZERO) {
            self.keepalive = None;
        }
        if self.connect_timeout.is_zero() {
            return fail("--connect-timeout must be longer than zero");
        }
        if let Pacing::OpenLoop { rate } = self.pacing {
            if !(rate.is_finite() && rate > 0.0) {
                return fail("--rps must be a positive number (0 means unlimited: a closed loop)");
            }
        }
        if let Pacing::Steps {
            start,
            step,
            step_duration,
            end,
            ..
        } = self.pacing
        {
            if !(start.is_finite() && start > 0.0) {
                return fail("--load-start must be a positive rate (req/s)");
            }
            if !step.is_finite() || step == 0.0 {
                return fail("--load-step must be a non-zero rate change (req/s per step)");
            }
            if step_duration.is_zero() {
                return fail("--load-step-duration must be longer than zero");
            }
            match end {
                None if step < 0.0 => {
                    return fail("a falling schedule (--load-step below 0) needs --load-end above 0, where it stops");
                }
                Some(end) if !(end.is_finite() && end > 0.0) => {
                    return fail("--load-end must be a positive rate (req/s)");
                }
                _ => {}
            }
        }
        if self.duration.is_none() && self.total.is_none() {
            return fail("say when to stop: -z/--duration or -n/--total");
        }
        if self.duration == Some(Duration::ZERO) {
            return fail("-z/--duration must be longer than zero");
        }
        if self.total == Some(0) {
            return fail("-n/--total must be at least 1");
        }
        if self.total.is_some_and(|total| self.skip_first >= total) {
            return Err(ConfigError(format!(
                "--skipFirst {} leaves none of the -n {} calls to report; give fewer",
                self.skip_first,
                self.total.unwrap_or(0)
            )));
        }
        if self.timeout == Some(Duration::ZERO) {
            self.timeout = None;
        }
        if self.methods.is_empty() {
            return fail("no method to call: give --call");
        }
        if self.methods.len() > MAX_METHODS {
            return Err(ConfigError(format!(
                "a mix of {} methods is more than the {MAX_METHODS} grpclab runs; merge some",
                self.methods.len()
            )));
        }
        for method in &self.methods {
            if !method.path.starts_with('/') {
                return Err(ConfigError(format!(
                    "call path '{}' must start with '/'",
                    method.path
                )));
            }
            if method.weight == 0 {
                return Err(ConfigError(format!(
                    "{} has weight 0: a method in a mix needs a weight of at least 1 (leave it out to call it never)",
                    method.name
                )));
            }
        }
        if self.methods.len() > 1 && self.shape != CallShape::Unary {
            return fail(
                "a mix of methods takes unary methods only; run a streaming method on its own",
            );
        }
        self.threads = self.threads.min(self.connections);
        self.share()?;
        if self.shape != CallShape::Unary && self.stream.call_count == Some(0) {
            return fail("--stream-call-count must be at least 1");
        }
        Ok(())
    }

    /// Checks a concurrency schedule and returns the streams it needs at most.
    fn scheduled_peak(&self, steps: ConcurrencySteps) -> Result<usize, ConfigError> {
        let fail = |message: String| Err(ConfigError(message));
        if steps.step == 0 {
            return fail(
                "--concurrency-step must be a non-zero change in streams per step".to_owned(),
            );
        }
        if steps.step_duration.is_zero() {
            return fail("--concurrency-step-duration must be longer than zero".to_owned());
        }
        match steps.end {
            None if steps.step < 0 => {
                return fail("a falling concurrency schedule (--concurrency-step below 0) needs --concurrency-end, at least 1, where it stops".to_owned());
            }
            Some(0) if steps.step < 0 => {
                return fail(
                    "--concurrency-end 0 would stop every stream; give at least 1".to_owned(),
                );
            }
            Some(end) if steps.step > 0 && end < steps.start => {
                return fail(format!("--concurrency-end {end} is below --concurrency-start {} while --concurrency-step rises; give a negative step to fall, or a higher end", steps.start));
            }
            _ => {}
        }
        let run = self.duration.map(|duration| duration + self.warmup);
        let Some(peak) = steps.peak(run) else {
            return fail("a rising concurrency schedule without --concurrency-end grows for ever: give --concurrency-end, --concurrency-max-duration, or a run length (-z, or -x with -n)".to_owned());
        };
        if peak > MAX_SCHEDULED_STREAMS {
            return fail(format!("the concurrency schedule reaches {peak} streams, more than the {MAX_SCHEDULED_STREAMS} grpclab keeps; lower --concurrency-step or set --concurrency-end"));
        }
        if peak == 0 {
            return fail("the concurrency schedule never allows a call (--concurrency-start 0 and no step within the run); raise --concurrency-start".to_owned());
        }
        Ok(peak)
    }
}

/// FNV-1a over length-prefixed fields (so `ab`,`c` and `a`,`bc` differ).
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn field(&mut self, bytes: &[u8]) {
        for byte in (bytes.len() as u64).to_le_bytes().iter().chain(bytes) {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_to_the_total_and_differ_by_at_most_one() {
        for of in 1..=12u64 {
            for total in [0u64, 1, 2, 3, 7, 10, 50, 99, 1000, 1001] {
                let parts: Vec<u64> = (0..of)
                    .map(|index| Shard { index, of }.share(total))
                    .collect();
                assert_eq!(
                    parts.iter().sum::<u64>(),
                    total,
                    "{total} over {of}: {parts:?}"
                );
                let (min, max) = (parts.iter().min().unwrap(), parts.iter().max().unwrap());
                assert!(max - min <= 1, "{total} over {of}: {parts:?}");
            }
        }
        // k6's example: 10 VUs over three segments of a third: 3, 4, 3.
        let parts: Vec<u64> = (0..3)
            .map(|index| Shard { index, of: 3 }.share(10))
            .collect();
        assert_eq!(parts, [3, 4, 3]);
    }

    #[test]
    fn shards_parse_and_refuse_what_is_not_one() {
        assert_eq!(Shard::parse("2/4"), Ok(Shard { index: 2, of: 4 }));
        assert_eq!(Shard::parse(" 0 / 1 "), Ok(Shard { index: 0, of: 1 }));
        for bad in ["4/4", "1/0", "-1/4", "a/b", "3", "", "1/2/3"] {
            assert!(Shard::parse(bad).is_err(), "{bad} parsed");
        }
        // Global numbers are unique across shards: local k of shard i is k*N + i.
        let mut seen = std::collections::BTreeSet::new();
        for index in 0..3 {
            for local in 0..100 {
                assert!(seen.insert(Shard { index, of: 3 }.global(local)));
            }
        }
        assert_eq!(seen.len(), 300);
        assert_eq!(seen.iter().max(), Some(&299));
    }

    #[test]
    fn a_share_of_nothing_is_refused_with_the_flag_named() {
        let mut config =
            LoadConfig::new("127.0.0.1:1".parse().unwrap(), "/a.B/C", vec![Bytes::new()]);
        config.concurrency = 3;
        config.connections = 1;
        // Shard 2 of 4 gets round(3 * 3 / 4) - round(3 * 2 / 4) = 2 - 2 = 0 streams, and
        // round(3 / 4) - round(2 / 4) = 1 - 1 = 0 of one connection.
        config.shard = Some(Shard { index: 2, of: 4 });
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains("-c/--concurrency 3"), "{err}");
        config.concurrency = 4;
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains("--connections 1"), "{err}");
        config.connections = 4;
        config.concurrency = 8;
        config.total = Some(4);
        assert!(config.validate().is_ok());
        let share = config.share().unwrap();
        assert_eq!(
            (share.concurrency, share.connections, share.total),
            (2, 1, Some(1))
        );
    }
}
