//! One invocation's shared parts, made once by the verb that runs: the cancel token Ctrl-C
//! and SIGTERM trip, the history recorder `--history` chose, the live metrics endpoint
//! `--metrics-addr` asked for, and the progress line on stderr.

use std::io::Write;

use grpclab_load::CancellationToken;
use grpclab_store::Recorder;

use super::args::{HistoryFlagArgs, MetricsArgs};
use super::live_metrics::Endpoint;
use crate::InputError;

/// What one invocation of a verb shares between its stages.
pub struct Session {
    /// Cancelled on Ctrl-C (SIGINT) or SIGTERM, or when stderr closes under a progress line:
    /// a run stops, drains and still writes its results.
    pub cancel: CancellationToken,
    /// Where finished runs are stored (off with `--no-history`, for a shard, or for a verb
    /// that stores nothing).
    pub history: Recorder,
    /// `--metrics-addr`'s endpoint, serving while the run goes.
    pub metrics: Option<Endpoint>,
}

impl Session {
    /// Starts a session: the store `history` names (`None`: store nothing), the metrics
    /// endpoint `metrics` asks for, and the signal watch. A malformed store location or an
    /// address that cannot be bound is the user's input: one line, nothing started.
    pub fn start(
        history: Option<&HistoryFlagArgs>,
        metrics: Option<&MetricsArgs>,
    ) -> Result<Session, InputError> {
        let history = match history {
            Some(flags) => super::history::recorder(flags)?,
            None => Recorder::off(),
        };
        let metrics = match metrics {
            Some(args) => super::live_metrics::start(args)?,
            None => None,
        };
        let cancel = CancellationToken::new();
        cancel_on_signals(&cancel);
        Ok(Session {
            cancel,
            history,
            metrics,
        })
    }

    /// Prints a progress line on stderr. When stderr is closed (`grpclab bench 2>&1 | head
    /// -1`), the run ends as after Ctrl-C: what was measured is written, nothing panics.
    pub fn progress_line(&self) -> impl FnMut(&str) + '_ {
        progress_line(&self.cancel)
    }

    /// The run is over: the metrics endpoint serves the final figures until one scrape has
    /// read them (at most `--metrics-linger`), then stops.
    pub fn end_metrics(&mut self) {
        if let Some(endpoint) = self.metrics.take() {
            endpoint.end();
        }
    }
}

/// Prints a progress line on stderr; when stderr is closed, cancels `cancel` (see
/// [`Session::progress_line`]), for a caller holding the session's parts apart.
pub fn progress_line(cancel: &CancellationToken) -> impl FnMut(&str) + '_ {
    move |line| {
        if writeln!(std::io::stderr(), "{line}").is_err() {
            cancel.cancel();
        }
    }
}

/// Cancels `token` on Ctrl-C (SIGINT) or SIGTERM, so a run stops, drains and still writes its
/// results.
fn cancel_on_signals(token: &CancellationToken) {
    let token = token.clone();
    let _ = std::thread::Builder::new()
        .name("grpclab-signals".to_owned())
        .spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                grpclab_server::shutdown_signal().await;
                token.cancel();
            });
        });
}
