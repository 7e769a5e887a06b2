//! The grpclab load engine: drives unary gRPC calls at a server and measures them exactly.
//!
//! - [`LoadConfig`]: target, call, framed requests, concurrency, connections, pacing
//!   ([`Pacing::ClosedLoop`] or [`Pacing::OpenLoop`] at a rate), duration or total, warmup,
//!   timeout, client threads, optional reply validation.
//! - [`run`]: runs it on `threads` client threads — each a current-thread tokio runtime that
//!   owns its HTTP/2 connections — and returns a [`LoadResult`]. The connections speak
//!   grpclab's own HTTP/2 engine ([`Transport::Lab`], default: the connection task runs its
//!   calls itself) or the h2 crate ([`Transport::H2`]: a task per stream; the reference).
//! - [`LoadResult`]: merged HdrHistograms (nanoseconds, 1 µs to 60 s, 3 significant digits),
//!   counts per gRPC status, error messages, a per-second series; [`encode_histogram`] writes
//!   a histogram in HdrHistogram's standard serialized form so runs merge exactly.
//!
//! Measuring never prints: progress goes to a callback, results to the caller's exporters.
//!
//! Cost: each distinct request is encoded once by the caller and shared by reference; streams
//! hold their own connection handle, and recorders are per thread. The transport sits behind
//! [`call`](crate) and [`connection`](crate) so a faster HTTP/2 engine can replace h2.
#![deny(missing_docs)]

mod call;
pub mod config;
mod connection;
mod engine;
mod lab_transport;
pub mod progress;
pub mod recorder;
pub mod result;
mod schedule;
mod streaming;

pub use config::{
    CallShape, ConcurrencySteps, ConfigError, DurationStop, LoadConfig, Pacing, ReplyValidator,
    RequestRenderer, StreamSettings, Transport,
};
pub use engine::{drain_limit, run, LoadError};
pub use lab_transport::CONNECT_TIMEOUT;
pub use progress::{ProgressSnapshot, ProgressTarget, SecondLatency};
pub use recorder::{error_key, CallDetail, CallLog, Recorder, SecondStats};
pub use result::{decode_histogram, encode_histogram, EndReason, LoadResult};
pub use tokio_util::sync::CancellationToken;
