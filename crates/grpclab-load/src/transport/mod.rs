//! The seam between the run loop and HTTP/2: one interface, two transports.
//!
//! - [`engine`]: grpclab's own HTTP/2 engine (`grpclab_h2::client`, `--transport lab`, the
//!   default): one task per connection runs that connection's calls itself.
//! - [`h2`]: the h2 crate (`--transport h2`, the reference): a task per stream slot.
//! - [`h1`]: gRPC-Web and Connect over HTTP/1.1 (`--http1`, hyper's client): a stream slot
//!   takes its turn on its connection, one request in flight each, as browsers send them.
//!
//! The run loop (`run.rs`) sees only [`Connections`]: open a thread's connections before the
//! run starts (an error aborts the run before anything is measured), then start them once the
//! schedule exists. Both transports take tickets from and record into the same
//! [`ThreadState`], dial through [`dial`], and report the same [`CallFailure`](crate::outcome)
//! outcomes, so a figure never depends on which transport produced it except through the
//! transport's own cost.
//!
//! The h2-crate reference stays in the default build: it is the yardstick every engine
//! figure is checked against (`--transport h2` beside the default in tests and benchmarks),
//! and a feature flag would let the two drift apart unnoticed.

mod dial;
mod engine;
mod flow_runs;
mod h1;
mod h2;
pub(crate) mod resolve;

use std::cell::Cell;
use std::rc::Rc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{LoadConfig, Transport};
use crate::thread::ThreadState;

/// Where a thread's connections count their new connections.
#[derive(Clone, Default)]
pub(crate) struct Reconnects {
    /// After losing a connection.
    pub(crate) unplanned: Rc<Cell<u64>>,
    /// After using every stream id of a connection (no call failed; our engine only).
    pub(crate) planned: Rc<Cell<u64>>,
}

/// One client thread's connections, open and waiting for the run to start.
pub(crate) enum Connections {
    /// On grpclab's engine.
    Engine(Vec<(usize, grpclab_h2::Socket)>),
    /// On the h2 crate.
    H2(h2::Connections),
    /// HTTP/1.1 (gRPC-Web and Connect).
    H1(h1::Connections),
}

impl Connections {
    /// Opens the connections numbered `indexes` on the configured transport; the error is one
    /// line saying what to check.
    pub(crate) async fn open(
        config: &LoadConfig,
        indexes: impl Iterator<Item = usize>,
    ) -> Result<Connections, String> {
        match config.transport {
            Transport::Engine => engine::open(config, indexes).await.map(Connections::Engine),
            Transport::H2 if config.http1 => h1::open(config, indexes).await.map(Connections::H1),
            Transport::H2 => h2::open(config, indexes).await.map(Connections::H2),
        }
    }

    /// Starts the calls: returns the tasks that end when this thread's share of the run is
    /// done. `drivers_stop` ends the h2 crate's connection drivers after the drain.
    pub(crate) fn start(
        self,
        thread: &Rc<ThreadState>,
        reconnects: &Reconnects,
        drivers_stop: &CancellationToken,
    ) -> Vec<JoinHandle<()>> {
        match self {
            Connections::Engine(open) => engine::start(open, thread, reconnects),
            Connections::H2(open) => h2::start(open, thread, reconnects, drivers_stop),
            Connections::H1(open) => h1::start(open, thread, reconnects),
        }
    }
}
