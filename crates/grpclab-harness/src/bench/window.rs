//! A row's measured window as its client gave it: grpclab's engine's result or ghz's run, turned
//! into the row's report and the figures the verdict weighs of the client.

use grpclab_results::model::{JsonReport, Report, RunOptions};

/// What drove a row's window: grpclab's engine, or ghz.
pub(super) enum Window {
    /// grpclab's load engine.
    Engine(Result<Box<grpclab_load::LoadResult>, grpclab_load::LoadError>),
    /// ghz (`--client ghz`).
    Ghz(Result<super::ghz_client::GhzRun, String>),
}

/// A window's figures, whichever client measured them: its report and what the verdict
/// needs of the client.
pub(super) struct WindowFigures {
    pub(super) report: JsonReport,
    pub(super) rps: f64,
    /// Failed calls the verdict weighs (ghz's close at the end left out).
    pub(super) errors: u64,
    pub(super) mean_latency_ns: f64,
    pub(super) send_lag_share: Option<f64>,
    pub(super) client_cpu_percent: Option<f64>,
}

impl Window {
    /// The report and the client's figures; `own_cpu_percent` is this process's CPU over the
    /// window (the engine's), ghz's own CPU is in its run.
    pub(super) fn figures(
        self,
        options: RunOptions,
        own_cpu_percent: Option<f64>,
        progress: &mut dyn FnMut(&str),
        name: &str,
    ) -> Result<WindowFigures, String> {
        match self {
            Window::Engine(outcome) => {
                let result = outcome.map_err(|err| format!("the load could not run: {err}"))?;
                let recorder = &result.recorder;
                let send_lag_share = grpclab_results::verdict::bound::send_lag_share(recorder);
                let mean_latency_ns = recorder.latency().mean();
                let rps = result.rps();
                let report_input = Report {
                    history: None,
                    options,
                    result: *result,
                    thresholds: Vec::new(),
                    bound_by: None,
                    sharding: None,
                };
                if let Some(note) = grpclab_results::export::starvation_note(&report_input.result) {
                    progress(&format!("{name}: {note}"));
                }
                Ok(WindowFigures {
                    errors: report_input.result.errors(),
                    report: JsonReport::from_report(&report_input),
                    rps,
                    mean_latency_ns,
                    send_lag_share,
                    client_cpu_percent: own_cpu_percent,
                })
            }
            Window::Ghz(run) => {
                let run = run?;
                let options = RunOptions {
                    transport: "ghz".to_owned(),
                    ..options
                };
                let report = super::ghz_client::report(&run.json, &options)?;
                if report.abandoned > 0 {
                    progress(&format!(
                        "{name}: ghz closed its connections at the end with {} calls in flight (its --duration-stop close): in its errors, left out of the verdict",
                        report.abandoned
                    ));
                }
                Ok(WindowFigures {
                    rps: report.measured_rps,
                    errors: report.errors.saturating_sub(report.abandoned),
                    mean_latency_ns: report.average as f64,
                    send_lag_share: None,
                    client_cpu_percent: run.cpu_percent(),
                    report,
                })
            }
        }
    }
}

impl WindowFigures {
    /// What the verdict weighs of the run: the row's settings, the cgroup's throttling and
    /// these figures (the server's CPU and memory are added once the window is judged).
    pub(super) fn evidence(
        &self,
        config: &super::config::BenchConfig,
        throttled_share: Option<f64>,
    ) -> grpclab_results::verdict::bound::BoundEvidence {
        grpclab_results::verdict::bound::BoundEvidence {
            server_cpu_quota: Some(config.server_cpus),
            throttled_share,
            server_memory_limit: Some(config.server_ram),
            client_cpu_percent: self.client_cpu_percent,
            client_threads: config.client_cpus,
            client: config.client.name().to_owned(),
            offered_rate: (config.qps > 0).then_some(config.qps as f64),
            rps: self.rps,
            send_lag_share: self.send_lag_share,
            streams: config.concurrency,
            mean_latency_ns: self.mean_latency_ns,
            calls: self.report.count,
            errors: self.errors,
            connections: config.connections,
            reconnects: self.report.reconnects,
            ..Default::default()
        }
    }
}
