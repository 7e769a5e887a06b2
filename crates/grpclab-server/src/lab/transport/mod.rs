//! The two HTTP/2 transports `lab` runs on, behind the same gRPC layer ([`super::grpc`]) and
//! the same placements ([`super::placement`]):
//!
//! - [`engine`]: grpclab's own HTTP/2 engine (`grpclab_h2::server`), the default: a task per
//!   connection that reads everything there is, runs the calls and writes once.
//! - [`h2`]: the h2 crate, the reference (`--transport h2`): a task per stream. A reference,
//!   not a hardened server: the engine's flood budgets and limits are not all kept there.

pub(super) mod engine;
pub(super) mod h2;
