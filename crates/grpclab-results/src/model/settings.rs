//! A run's settings as its JSON document reports them ([`JsonOptions`]): ghz's names, then
//! grpclab's own.

use grpclab_load::LoadResult;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

use super::*;

/// The run's settings: ghz's `Options` field for field (names as ghz spells them), then
/// grpclab's own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JsonOptions {
    /// `package.Service.Method`.
    pub call: String,
    /// The server, as given.
    pub host: String,
    /// The .proto file, if one was given.
    pub proto: String,
    /// The protoset file (grpclab does not read protosets yet: always empty).
    pub protoset: String,
    /// Import paths of the .proto.
    #[serde(rename = "import-paths")]
    pub import_paths: Vec<String>,
    /// Request compression (not supported yet: false).
    #[serde(rename = "enable-compression")]
    pub enable_compression: bool,
    /// `--cacert`.
    pub cacert: String,
    /// TLS client certificate.
    pub cert: String,
    /// TLS client key.
    pub key: String,
    /// TLS server name.
    pub cname: String,
    /// TLS verification skipped.
    #[serde(rename = "skipTLS")]
    pub skip_tls: bool,
    /// `--insecure`: plaintext h2c.
    pub insecure: bool,
    /// The `:authority` sent.
    pub authority: String,
    /// ghz's `--lb-strategy`; omitted with one address.
    #[serde(
        rename = "lb-strategy",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub lb_strategy: String,
    /// grpclab: every address the target resolved to, with the connections each got (in
    /// connection order, as `--lb-strategy` spread them); omitted with one address.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<AddressShare>,
    /// The open-loop rate rounded to an integer, as ghz's type holds it; 0 = closed loop.
    /// The exact rate is `rate`.
    pub rps: u64,
    /// Rate schedule: `const`.
    #[serde(rename = "load-schedule")]
    pub load_schedule: String,
    /// Schedule start rate.
    #[serde(rename = "load-start")]
    pub load_start: u64,
    /// Schedule end rate.
    #[serde(rename = "load-end")]
    pub load_end: u64,
    /// Schedule step.
    #[serde(rename = "load-step")]
    pub load_step: i64,
    /// Schedule step duration (ns).
    #[serde(rename = "load-step-duration")]
    pub load_step_duration: u64,
    /// Schedule maximum duration (ns).
    #[serde(rename = "load-max-duration")]
    pub load_max_duration: u64,
    /// Streams in flight.
    pub concurrency: u64,
    /// Concurrency schedule: `const`.
    #[serde(rename = "concurrency-schedule")]
    pub concurrency_schedule: String,
    /// Concurrency schedule start.
    #[serde(rename = "concurrency-start")]
    pub concurrency_start: u64,
    /// Concurrency schedule end.
    #[serde(rename = "concurrency-end")]
    pub concurrency_end: u64,
    /// Concurrency schedule step.
    #[serde(rename = "concurrency-step")]
    pub concurrency_step: i64,
    /// Concurrency schedule step duration (ns).
    #[serde(rename = "concurrency-step-duration")]
    pub concurrency_step_duration: u64,
    /// Concurrency schedule maximum duration (ns).
    #[serde(rename = "concurrency-max-duration")]
    pub concurrency_max_duration: u64,
    /// `-n`, or 0 when the run was timed.
    pub total: u64,
    /// ghz's async mode: calls sent on a rate's schedule whatever is in flight, which is what
    /// grpclab's open loop (`rps` above 0) always does.
    #[serde(rename = "async")]
    pub async_: bool,
    /// HTTP/2 connections.
    pub connections: u64,
    /// `-z` in nanoseconds, or 0.
    pub duration: u64,
    /// Per-call deadline in nanoseconds, or 0 for none.
    pub timeout: u64,
    /// Connect timeout in nanoseconds.
    #[serde(rename = "dial-timeout")]
    pub dial_timeout: u64,
    /// Client keepalive pings (none): 0.
    pub keepalive: u64,
    /// The request payload as given (`-d`/`-D`), or null for a scenario's own.
    pub data: serde_json::Value,
    /// Whether the payload came as serialized protobuf (`-b`/`-B`).
    pub binary: bool,
    /// Request metadata (`-m`), or null.
    pub metadata: Option<BTreeMap<String, String>>,
    /// Client threads.
    #[serde(rename = "CPUs")]
    pub cpus: u64,
    /// `--name`.
    pub name: String,
    /// `--skipFirst`: calls left out at the start (grpclab's `warmup` skips by time).
    #[serde(rename = "skipFirst")]
    pub skip_first: u64,
    /// grpclab: the scenario or .proto the call came from.
    pub scenario: String,
    /// grpclab: distinct requests sent round-robin.
    #[serde(rename = "distinctRequests")]
    pub distinct_requests: usize,
    /// grpclab: the exact open-loop rate (req/s); 0 = closed loop.
    pub rate: f64,
    /// grpclab: warmup in nanoseconds (calls sent, not measured).
    pub warmup: u64,
    /// grpclab: whether replies were validated.
    pub validate: bool,
    /// grpclab: the HTTP/2 implementation (`lab` or `h2`).
    pub transport: String,
    /// grpclab: `--details` (calls listed one by one), or null.
    #[serde(rename = "detailsLimit")]
    pub details_limit: Option<usize>,
    /// `--count-errors`: failed calls count in the latency figures.
    #[serde(rename = "count-errors", default)]
    pub count_errors: bool,
    /// grpclab: the streaming flags as given (`call-count=5 interval=10ms independent ...`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stream: String,
    /// grpclab: a fingerprint of what the calls send (payloads, headers, a mix's methods and
    /// weights), so `grpclab merge` can tell generators of one run from others.
    #[serde(
        rename = "requestsDigest",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub requests_digest: String,
    /// grpclab: `--network`, the network the calls crossed (`delay=10ms,loss=0.1%`, or `lo`);
    /// omitted when not given.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub network: String,
    /// grpclab: `--protocol` when not gRPC (`grpc-web`, `grpc-web-text`, `connect`, and
    /// `connect (GET)` with `--connect-get`); omitted for gRPC.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    /// grpclab: `--codec` when not proto (`json`); omitted for proto.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub codec: String,
}

impl JsonOptions {
    /// ghz's options for a run made with `options` (its `result` for the calls per address).
    pub fn from_run(options: &RunOptions, result: &LoadResult) -> JsonOptions {
        JsonOptions {
            addresses: AddressShare::of(options, result),
            ..JsonOptions::from_settings(options)
        }
    }

    /// ghz's options for a run with `options` made by another client (no addresses).
    pub fn from_settings(options: &RunOptions) -> JsonOptions {
        let nanos = |d: Option<Duration>| d.map_or(0, saturating_ns);
        JsonOptions {
            call: options.call.clone(),
            host: options.host.clone(),
            proto: options.proto.clone().unwrap_or_default(),
            protoset: String::new(),
            import_paths: options.import_paths.clone(),
            enable_compression: options.compression,
            cacert: options.tls.cacert.clone(),
            cert: options.tls.cert.clone(),
            key: options.tls.key.clone(),
            cname: options.tls.cname.clone(),
            skip_tls: options.tls.skip_verify,
            insecure: options.tls.insecure,
            authority: if options.authority.is_empty() {
                options.host.clone()
            } else {
                options.authority.clone()
            },
            lb_strategy: options.lb_strategy.clone(),
            addresses: Vec::new(),
            rps: options.rps.round() as u64,
            load_schedule: if options.load.schedule.is_empty() {
                "const".to_owned()
            } else {
                options.load.schedule.clone()
            },
            load_start: options.load.start.round() as u64,
            load_end: options.load.end.round() as u64,
            load_step: options.load.step.round() as i64,
            load_step_duration: saturating_ns(options.load.step_duration),
            load_max_duration: saturating_ns(options.load.max_duration),
            concurrency: options.concurrency as u64,
            concurrency_schedule: if options.concurrency_shape.schedule.is_empty() {
                "const".to_owned()
            } else {
                options.concurrency_shape.schedule.clone()
            },
            concurrency_start: options.concurrency_shape.start as u64,
            concurrency_end: options.concurrency_shape.end as u64,
            concurrency_step: options.concurrency_shape.step as i64,
            concurrency_step_duration: saturating_ns(options.concurrency_shape.step_duration),
            concurrency_max_duration: saturating_ns(options.concurrency_shape.max_duration),
            total: options.total.unwrap_or(0),
            async_: options.rps > 0.0,
            connections: options.connections as u64,
            duration: nanos(options.duration),
            timeout: nanos(options.timeout),
            dial_timeout: saturating_ns(options.dial_timeout),
            keepalive: saturating_ns(options.keepalive),
            data: options.data.clone().unwrap_or(serde_json::Value::Null),
            binary: options.binary,
            metadata: options.metadata.clone(),
            cpus: options.cpus as u64,
            name: options.name.clone().unwrap_or_default(),
            skip_first: options.skip_first,
            scenario: options.scenario.clone(),
            distinct_requests: options.distinct_requests,
            rate: options.rps,
            warmup: saturating_ns(options.warmup),
            validate: options.validate,
            transport: options.transport.clone(),
            details_limit: options.details,
            count_errors: options.count_errors,
            stream: options.stream.clone(),
            requests_digest: options.requests_digest.clone(),
            network: options.network.clone(),
            protocol: options.protocol.clone(),
            codec: options.codec.clone(),
        }
    }
}
