//! `--metrics-addr` and `--metrics-linger` for `load` and `bench`: the endpoint started
//! before the run, said on stderr, and ended after it.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use super::args::MetricsArgs;
use crate::metrics::server::MetricsServer;
use crate::metrics::LiveMetrics;
use crate::InputError;

/// A live metrics endpoint for one run.
pub struct Endpoint {
    /// What the run writes into.
    pub metrics: Arc<LiveMetrics>,
    server: MetricsServer,
    linger: Duration,
}

/// Starts the endpoint the flags ask for (none without `--metrics-addr`).
pub fn start(args: &MetricsArgs) -> Result<Option<Endpoint>, InputError> {
    let Some(address) = args.metrics_addr else {
        return Ok(None);
    };
    let metrics = LiveMetrics::new();
    let server = MetricsServer::start(address, Arc::clone(&metrics))?;
    let _ = writeln!(
        std::io::stderr(),
        "metrics: http://{}/metrics",
        server.address()
    );
    if !address.ip().is_loopback() {
        let _ = writeln!(
            std::io::stderr(),
            "WARNING: --metrics-addr {address} is reachable beyond this machine and the endpoint has no authentication: anyone who reaches it reads the run's metrics (bind 127.0.0.1 unless a scraper elsewhere needs it)"
        );
    }
    Ok(Some(Endpoint {
        metrics,
        server,
        linger: args.metrics_linger,
    }))
}

impl Endpoint {
    /// The run is over and every row's figures are final: serve them until one scrape has
    /// read them (at most `--metrics-linger`), then stop.
    pub fn end(self) {
        if !self.linger.is_zero() {
            let _ = self.metrics.wait_for_final_scrape(self.linger);
        }
        drop(self.server);
    }
}
