//! The pieces every part of grpclab shares.
//!
//! - [`scenario`]: a benchmark scenario — a `.proto` compiled at run time with protox (no protoc),
//!   the method to call, and request payloads encoded once from JSON ([`Scenario`]). The
//!   grpc_bench scenarios are built in ([`scenario::BUILTIN`]); a user's own is a folder or flags.
//! - [`framing`]: gRPC's length-prefixed message framing and the `grpc-timeout` header.
//! - [`protocol`]: the wire protocols (gRPC, gRPC-Web, Connect): request content types and
//!   bodies, unary replies read; [`streamed_reply`]: a gRPC-Web or Connect server stream's
//!   body read as it arrives.
//! - [`status`]: gRPC status codes ([`Code`]) with the names ghz reports.
//! - [`template`]: ghz's call templates (`{{.RequestNumber}}`, `{{randomInt 1 10}}`, ...).
//! - [`payload_template`]: a templated JSON payload encoded part by part (only what varies,
//!   per call).
//! - [`tls`]: TLS settings (PEM files to rustls configurations, ALPN h2, self-signed pairs).
//! - [`clock`]: the wall clock in nanoseconds since the Unix epoch, as message stamps carry it.
//! - [`input`]: [`InputError`], what the user asked for and why it cannot be done (exit 2).
//! - [`descriptors`]: the descriptor limit (RLIMIT_NOFILE) that caps a process's connections.
//! - [`duration`]: parsing the human durations that flags take (`20s`, `500ms`, `1m`).
//! - [`field_path`]: a reply field named by a path (`user.id`, `items[0].sku`), read from the
//!   wire bytes by a scan (flows' extracts and expectations).
//!
//! ```
//! let scenario = grpclab_core::Scenario::builtin("complex_proto").unwrap();
//! assert_eq!(scenario.path(), "/helloworld.Greeter/SayHello");
//! // 78 bytes of protobuf behind gRPC's 5-byte prefix.
//! assert_eq!(scenario.requests()[0].len(), 83);
//! ```
#![deny(missing_docs)]

pub mod clock;
pub mod descriptors;
pub mod duration;
pub mod field_path;
pub mod framing;
pub mod input;
pub mod payload_template;
pub mod protocol;
pub mod scenario;
pub mod status;
pub mod streamed_reply;
pub mod template;
pub mod tls;

pub use input::InputError;
pub use scenario::{Scenario, ScenarioError};
pub use status::Code;
