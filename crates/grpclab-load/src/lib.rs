//! The grpclab load engine: drives unary gRPC calls at a server and measures them exactly.
//!
//! - [`LoadConfig`]: target, call, framed requests, concurrency, connections, pacing
//!   ([`Pacing::ClosedLoop`] or [`Pacing::OpenLoop`] at a rate), duration or total, warmup,
//!   timeout, client threads, optional reply validation.
//! - [`run`]: runs it on `threads` client threads — each a current-thread tokio runtime that
//!   owns its HTTP/2 connections — and returns a [`LoadResult`]. The connections speak
//!   grpclab's own HTTP/2 engine ([`Transport::Engine`], default: the connection task runs its
//!   calls itself) or the h2 crate ([`Transport::H2`]: a task per stream; the reference).
//! - [`LoadResult`]: merged HdrHistograms (nanoseconds, 1 µs to 60 s, 3 significant digits),
//!   counts per gRPC status, error messages, a per-second series; [`encode_histogram`] writes
//!   a histogram in HdrHistogram's standard serialized form so runs merge exactly.
//!
//! Measuring never prints: progress goes to a callback, results to the caller's exporters.
//!
//! Cost: each distinct request is encoded once by the caller and shared by reference; streams
//! hold their own connection handle, and recorders are per thread.
//!
//! Layers, top to bottom (a module imports only from below it): `run` (the controller and
//! client threads) → `transport` (the seam: `engine` and `h2`, with `dial` and `resolve`
//! beneath both) → `thread` (tickets, bodies, recording) → `schedule` → `config`, `staircase`,
//! `recorder`, `progress`, `result`, `outcome`, `target` (a target parsed, resolved and probed
//! once before a run) → `naming`.
#![deny(missing_docs)]

pub mod config;
pub mod flow;
pub mod naming;
mod outcome;
pub mod progress;
pub mod recorder;
pub mod result;
pub mod retry;
mod run;
mod schedule;
mod staircase;
pub mod target;
mod thread;
mod transport;

pub use config::{
    Balance, CallMethod, CallShape, ConcurrencySteps, ConfigError, DurationStop, LoadConfig,
    Pacing, ReplyValidator, RequestRenderer, Shard, ShardShare, StreamSettings, Transport,
    CONNECT_TIMEOUT, DEFAULT_START_TOLERANCE, MAX_METHODS, MAX_SCHEDULED_STREAMS,
};
pub use grpclab_h2::client::{PeerWindows, WindowWaits};
pub use naming::Naming;
pub use progress::{
    LatencyBuckets, ProgressSnapshot, ProgressTarget, SecondLatency, LATENCY_BUCKET_BOUNDS_NS,
};
pub use recorder::{error_key, CallDetail, CallLog, Recorder, SecondStats};
pub use result::{
    decode_histogram, encode_histogram, EndReason, FlowResult, LoadResult, MethodResult, Scope,
    Unsent,
};
pub use run::{drain_limit, run, LoadError};
pub use target::{Target, TargetError};
pub use tokio_util::sync::CancellationToken;
