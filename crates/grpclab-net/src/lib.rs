//! Networks beyond loopback for grpclab: a server's and a client's network namespaces,
//! joined by a link with delay, jitter, loss, a rate and an MTU (`--network`).
//!
//! - [`spec`]: the `--network` settings (`delay=20ms,loss=0.1%,...` or `lo`);
//! - [`namespace`]: the namespace pair, its addresses and its removal (also of pairs a
//!   killed process left);
//! - [`tun`]: a TUN device made inside a namespace;
//! - [`process`]: servers started inside a namespace, ending with their starter;
//! - [`link`]: the link's emulation between the two devices (this kernel has no sch_netem).

pub mod link;
pub mod namespace;
pub mod process;
pub mod spec;
pub mod tun;

pub use namespace::NetworkPair;
pub use spec::{LinkSpec, NetworkSpec};

/// What went wrong making or running a network: one line, saying what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NetError(pub String);
