//! `grpclab capacity`: how much traffic a server takes while its SLO holds. Closed-loop
//! latency at a fixed number of streams is mostly the client's own queue (Little's law), so
//! the honest answer is a search over *open-loop* rates ([`search`]): each probe offers one
//! rate (latency counted from each call's scheduled time) for long enough to measure the
//! SLO's figures, and is judged against every `--slo` threshold.
//!
//! The search is not fooled by the client: a probe that failed because calls left the client
//! late — while the server answered them quickly once sent — ends the search as the client's
//! limit (its CPU, or all its streams busy), not the server's. Every probe is kept, with the
//! server's CPU and memory when its process is known.

pub mod search;

use std::time::Duration;

use grpclab_load::CancellationToken;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use grpclab_results::verdict::threshold::{MethodFigures, RunFigures};
use grpclab_results::verdict::{Threshold, ThresholdVerdict};
use search::{Next, Search, SearchPlan};

/// A probe's verdict within this fraction of a limit is repeated (up to two more runs,
/// majority wins): one run's verdict there is as likely noise as not. A failure is repeated
/// however far past the limit it lands: one stall of the machine (a page fault storm, another
/// process's burst) can put a p99 anywhere, while nothing makes a loaded server look faster.
const NEAR_LIMIT: f64 = 0.10;

/// What the caller measured in one probe.
pub struct ProbeMeasure {
    /// The measured window.
    pub duration: Duration,
    /// Calls measured.
    pub calls: u64,
    /// Of them, failed.
    pub errors: u64,
    /// Calls per second over the window.
    pub rps: f64,
    /// Latency from each call's scheduled send time (successful calls), ns.
    pub latency: Histogram<u64>,
    /// Latency from each call's actual send (what the server took), ns; open loop only.
    pub service: Option<Histogram<u64>>,
    /// The client's CPU over the probe, as a share of its threads (1.0: all saturated).
    pub client_cpu_share: f64,
    /// The server's usage over the probe, when its process is known.
    pub server: Option<ServerUsage>,
    /// Each method of a mix (none otherwise), for SLOs on one method.
    pub methods: Vec<MethodMeasure>,
}

/// One method of a mix in a probe.
pub struct MethodMeasure {
    /// Its full name.
    pub name: String,
    /// Its calls measured.
    pub calls: u64,
    /// Of them, failed.
    pub errors: u64,
    /// Its calls per second over the window.
    pub rps: f64,
    /// Its successful calls' latency (from their scheduled send time), ns.
    pub latency: Histogram<u64>,
}

/// A server's CPU and memory over a probe.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ServerUsage {
    /// CPU in percent of one core.
    pub cpu_percent: f64,
    /// Resident memory at the probe's end, bytes.
    pub rss_bytes: u64,
}

/// One probe as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// The offered rate, req/s.
    pub rate: f64,
    /// The measured window, seconds.
    pub duration_s: f64,
    /// Calls measured.
    pub calls: u64,
    /// Calls per second completed.
    pub rps: f64,
    /// Median latency, ms (from the scheduled send).
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Failed share, percent.
    pub errors_percent: f64,
    /// The server's own p99 (from the actual send), ms.
    pub service_p99_ms: Option<f64>,
    /// How late calls left the client on average, ms (mean latency − mean service time).
    pub send_lag_ms: f64,
    /// The client's CPU, percent of its threads.
    pub client_cpu_percent: f64,
    /// The server's usage, if its process is known.
    pub server: Option<ServerUsage>,
    /// Each SLO threshold's verdict.
    pub verdicts: Vec<ThresholdVerdict>,
    /// Whether every threshold held.
    pub met_slo: bool,
    /// Whether this run repeated the previous rate (a verdict near a limit).
    pub repeat: bool,
    /// Why the client, not the server, set this probe's figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_limit: Option<String>,
}

/// The search's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CapacityReport {
    /// The server, as given.
    pub target: String,
    /// The SLO's thresholds, as typed.
    pub slo: Vec<String>,
    /// How long each probe ran, in words.
    pub probe_rule: String,
    /// The highest rate that met the SLO, req/s.
    pub capacity_rps: Option<f64>,
    /// The lowest rate that broke it: the capacity lies in [capacity_rps, this).
    pub lowest_failing_rps: Option<f64>,
    /// The lowest rate whose p99 was more than twice the lowest rate's: where queueing
    /// starts to show.
    pub knee_rps: Option<f64>,
    /// Why the search stopped.
    pub stopped_because: String,
    /// The search ended at the client's limit, not the server's: the capacity is at least
    /// `capacity_rps`.
    pub client_bound: bool,
    /// The server's CPU and memory in the probe at the capacity.
    pub server_at_capacity: Option<ServerUsage>,
    /// Every probe, in the order run.
    pub probes: Vec<Probe>,
    /// A probe that could not run, if one stopped the search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What the search needs besides the probes.
pub struct CapacitySettings {
    /// The server, as given.
    pub target: String,
    /// The SLO.
    pub slo: Vec<Threshold>,
    /// How the rate moves; `start` 0 means: from a short closed-loop run's throughput.
    pub plan: SearchPlan,
    /// Shortest probe window.
    pub min_probe: Duration,
    /// Longest probe window (a probe that needs more calls is cut here, and says so).
    pub max_probe: Duration,
    /// Warm-up before each probe's window.
    pub warmup: Duration,
    /// The client's streams (for the concurrency check).
    pub concurrency: usize,
    /// A mix's methods with their share of its calls (by weight; empty for one method): an
    /// SLO on one method needs its calls, so the run needs that many over the share.
    pub method_shares: Vec<(String, f64)>,
}

impl CapacitySettings {
    /// The most calls any threshold of the SLO needs, over the whole run.
    fn calls_needed(&self) -> u64 {
        self.slo
            .iter()
            .map(|threshold| {
                let share = threshold
                    .method()
                    .and_then(|name| self.method_shares.iter().find(|(n, _)| n == name))
                    .map_or(1.0, |(_, share)| share.max(1e-6));
                (threshold.calls_needed() as f64 / share).ceil() as u64
            })
            .max()
            .unwrap_or(1_000)
    }

    /// A probe's window at `rate`: long enough for the calls needed, within the bounds.
    fn window(&self, rate: f64) -> Duration {
        let wanted = Duration::from_secs_f64(self.calls_needed() as f64 / rate.max(1e-3));
        wanted.clamp(self.min_probe, self.max_probe)
    }

    fn rule(&self) -> String {
        format!(
            "each probe measures at least {} calls (100 beyond the SLO's highest percentile, or 10 failures at its error limit), in {} to {} s, after a {} s warm-up",
            self.calls_needed(),
            self.min_probe.as_secs_f64(),
            self.max_probe.as_secs_f64(),
            self.warmup.as_secs_f64()
        )
    }
}

/// A rate to probe: `None` is a closed loop (the first, throughput-finding run).
pub type Measure<'a> = dyn FnMut(Option<f64>, Duration, Duration) -> Result<ProbeMeasure, grpclab_load::LoadError>
    + 'a;

fn ms(ns: f64) -> f64 {
    ns / 1e6
}

/// Why the client, not the server, made a failed probe fail: calls left late (most of the
/// latency was spent before sending) while the server's own time stayed near what it was at
/// the lowest rate.
pub fn client_limit(
    measure: &ProbeMeasure,
    baseline_service_mean_ns: Option<f64>,
    concurrency: usize,
) -> Option<String> {
    let service = measure.service.as_ref()?;
    if measure.latency.is_empty() || service.is_empty() {
        return None;
    }
    let (latency_mean, service_mean) = (measure.latency.mean(), service.mean());
    let lag = latency_mean - service_mean;
    if lag <= 0.5 * latency_mean {
        return None;
    }
    // The server queueing (its own time several times its unloaded time) is the server's
    // limit even when the client's streams fill up behind it.
    if let Some(baseline) = baseline_service_mean_ns {
        if service_mean > 3.0 * baseline.max(1.0) {
            return None;
        }
    }
    // Little's law: streams busy = completions per second × seconds per call. The client's
    // own time around each call (building, sending, reading) keeps a stream from the next
    // call too, unseen by the service time, so below 90 % the streams may still be the
    // limit: both figures are given.
    let streams_busy = measure.rps * service_mean / 1e9;
    let busy_percent = 100.0 * streams_busy / concurrency.max(1) as f64;
    if busy_percent >= 90.0 {
        return Some(format!(
            "concurrency: the client's {concurrency} streams were busy {busy_percent:.0} % of the time ({:.0} req/s × {:.3} ms per call), so calls waited in the client for a free stream; raise -c",
            measure.rps,
            ms(service_mean)
        ));
    }
    Some(format!(
        "the client: calls left {:.3} ms late on average while the server answered in {:.3} ms (its {concurrency} streams busy {busy_percent:.0} % of the time, its CPU {:.0} % of its threads); raise -c or --cpus, or load from another machine",
        ms(lag),
        ms(service_mean),
        measure.client_cpu_share * 100.0
    ))
}

/// Runs the search: each probe through `measure`, a line per probe through `progress`.
/// Returns whatever was learned, also when a probe fails or the run is cancelled.
pub fn run(
    settings: &CapacitySettings,
    measure: &mut Measure<'_>,
    progress: &mut dyn FnMut(&str),
    cancel: &CancellationToken,
) -> CapacityReport {
    let mut report = CapacityReport {
        target: settings.target.clone(),
        slo: settings.slo.iter().map(|t| t.expression.clone()).collect(),
        probe_rule: settings.rule(),
        capacity_rps: None,
        lowest_failing_rps: None,
        knee_rps: None,
        stopped_because: String::new(),
        client_bound: false,
        server_at_capacity: None,
        probes: Vec::new(),
        error: None,
    };
    let mut plan = settings.plan;
    if plan.start <= 0.0 {
        // The closed loop's throughput bounds what the open loop can reach; half of it is
        // a start one doubling away from the answer.
        progress("finding a starting rate: 2 s closed loop");
        match measure(None, Duration::from_secs(2), settings.warmup) {
            Ok(found) if found.rps > 0.0 => plan.start = (found.rps / 2.0).max(plan.floor),
            Ok(_) => {
                report.error = Some("the closed-loop run completed no call".to_owned());
                report.stopped_because = "the server completed no call".to_owned();
                return report;
            }
            Err(err) => {
                report.error = Some(format!("{err:#}"));
                report.stopped_because = "the first run failed".to_owned();
                return report;
            }
        }
    }
    let mut search = Search::new(plan);
    let mut rate = search.first();
    let mut baseline_service: Option<f64> = None;
    let mut server_by_rate: Vec<(f64, Option<ServerUsage>)> = Vec::new();
    let mut client_failures: Vec<(f64, String)> = Vec::new();
    let stop = loop {
        // One verdict per rate: a run, and up to two more when it fails or lands near a limit.
        let mut met_votes = 0;
        let mut runs = 0;
        // Why the client was the limit, if every failing run of this rate said it was.
        let mut client_limited = None;
        let mut server_failed = false;
        while runs < 3 {
            if cancel.is_cancelled() {
                report.error = Some("interrupted (Ctrl-C)".to_owned());
                break;
            }
            let window = settings.window(rate);
            progress(&format!(
                "probe {}: {rate:.0} req/s for {:.1} s",
                report.probes.len() + 1,
                window.as_secs_f64()
            ));
            let measured = match measure(Some(rate), window, settings.warmup) {
                Ok(measured) => measured,
                Err(err) => {
                    report.error = Some(format!("probe at {rate:.0} req/s: {err:#}"));
                    break;
                }
            };
            if baseline_service.is_none() {
                baseline_service = measured.service.as_ref().map(|h| h.mean());
            }
            let (probe, near) = judge_probe(settings, rate, &measured, baseline_service, runs > 0);
            let (met, limit) = (probe.met_slo, probe.client_limit.clone());
            progress(&probe_line(settings, &probe, near));
            server_by_rate.push((rate, measured.server));
            report.probes.push(probe);
            runs += 1;
            met_votes += usize::from(met);
            match limit {
                Some(why) => client_limited = Some(why),
                None if !met => server_failed = true,
                None => {}
            }
            // Decided: a first run that passed away from every limit, or two runs that agree.
            let decided =
                (runs == 1 && met && !near) || (runs >= 2 && (met_votes == runs || met_votes == 0));
            if decided || runs == 3 {
                break;
            }
        }
        if report.error.is_some() {
            break None;
        }
        // A probe the client failed is a failure of the search all the same (nothing above
        // it can be measured with this client), remembered so the answer says whose limit
        // it found.
        let met = met_votes * 2 > runs;
        if let (false, false, Some(why)) = (met, server_failed, client_limited) {
            client_failures.push((rate, why));
        }
        match search.record(rate, met) {
            Next::Probe(next) => rate = next,
            Next::Stop(stop) => break Some(stop.describe(&plan)),
        }
    };
    report.stopped_because = stop.unwrap_or_else(|| {
        format!(
            "stopped early: {}",
            report.error.as_deref().unwrap_or("unknown")
        )
    });
    // Whose limit the lowest failure was: the client's makes the capacity a lower bound.
    if let Some(fail) = search.lowest_fail {
        if let Some((rate, why)) = client_failures.iter().find(|(rate, _)| *rate == fail) {
            report.client_bound = true;
            report.stopped_because = format!(
                "{}; but the lowest failing rate ({rate:.0} req/s) was the client's limit, not the server's: {why}",
                report.stopped_because
            );
        }
    }
    report.capacity_rps = search.highest_pass;
    report.lowest_failing_rps = search.lowest_fail;
    report.server_at_capacity = search.highest_pass.and_then(|capacity| {
        server_by_rate
            .iter()
            .rev()
            .find(|(rate, _)| *rate == capacity)
            .and_then(|(_, usage)| *usage)
    });
    report.knee_rps = knee(&report.probes);
    report
}

/// One probe's run judged: its figures against the SLO, whether it landed near a limit, and
/// whether the client (not the server) was the limit when it failed.
fn judge_probe(
    settings: &CapacitySettings,
    rate: f64,
    measured: &ProbeMeasure,
    baseline_service: Option<f64>,
    repeat: bool,
) -> (Probe, bool) {
    let methods: Vec<MethodFigures<'_>> = measured
        .methods
        .iter()
        .map(|method| {
            MethodFigures::new(
                &method.name,
                &method.latency,
                method.calls,
                method.errors,
                method.rps,
            )
        })
        .collect();
    let figures = RunFigures {
        latency: &measured.latency,
        count: measured.calls,
        errors: measured.errors,
        rps: measured.rps,
        methods: &methods,
    };
    let verdicts: Vec<ThresholdVerdict> = settings.slo.iter().map(|t| t.judge(&figures)).collect();
    let met = verdicts.iter().all(|v| v.passed);
    let near = settings
        .slo
        .iter()
        .any(|t| t.near_limit(&figures, NEAR_LIMIT));
    let limit = if met {
        None
    } else {
        client_limit(measured, baseline_service, settings.concurrency)
    };
    let quantile = |q: f64| {
        if measured.latency.is_empty() {
            0.0
        } else {
            ms(measured.latency.value_at_quantile(q) as f64)
        }
    };
    let lag = match &measured.service {
        Some(service) if !service.is_empty() && !measured.latency.is_empty() => {
            ms((measured.latency.mean() - service.mean()).max(0.0))
        }
        _ => 0.0,
    };
    let probe = Probe {
        rate,
        duration_s: measured.duration.as_secs_f64(),
        calls: measured.calls,
        rps: measured.rps,
        p50_ms: quantile(0.5),
        p99_ms: quantile(0.99),
        errors_percent: if measured.calls > 0 {
            100.0 * measured.errors as f64 / measured.calls as f64
        } else {
            0.0
        },
        service_p99_ms: measured
            .service
            .as_ref()
            .filter(|h| !h.is_empty())
            .map(|h| ms(h.value_at_quantile(0.99) as f64)),
        send_lag_ms: lag,
        client_cpu_percent: measured.client_cpu_share * 100.0,
        server: measured.server,
        verdicts,
        met_slo: met,
        repeat,
        client_limit: limit.clone(),
    };
    (probe, near)
}

/// The progress line of a judged probe.
fn probe_line(settings: &CapacitySettings, probe: &Probe, near: bool) -> String {
    // An SLO on one method of a mix reads figures the line's (the whole mix's) are
    // not: its own are said beside the verdict.
    let methods_read: Vec<String> = settings
        .slo
        .iter()
        .zip(&probe.verdicts)
        .filter(|(threshold, _)| threshold.method().is_some())
        .map(|(_, verdict)| format!("{} read {}", verdict.expression, verdict.actual))
        .collect();
    format!(
        "  {:.0} req/s done, p50 {:.3} ms, p99 {:.3} ms, errors {:.3} %: {}{}{}",
        probe.rps,
        probe.p50_ms,
        probe.p99_ms,
        probe.errors_percent,
        if probe.met_slo {
            "meets the SLO"
        } else {
            "breaks the SLO"
        },
        if methods_read.is_empty() {
            String::new()
        } else {
            format!(" ({})", methods_read.join("; "))
        },
        if near { " (near a limit)" } else { "" }
    )
}

/// The lowest rate whose p99 is more than twice the lowest rate's.
fn knee(probes: &[Probe]) -> Option<f64> {
    let mut by_rate: Vec<&Probe> = probes.iter().filter(|p| p.calls > 0).collect();
    by_rate.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    let reference = by_rate.first()?.p99_ms;
    by_rate
        .iter()
        .find(|p| p.p99_ms > 2.0 * reference)
        .map(|p| p.rate)
}

/// The report as text: the answer first, then every probe.
pub fn render(report: &CapacityReport) -> String {
    let mut out = format!(
        "Capacity of {} at SLO {}\n",
        report.target,
        report.slo.join(", ")
    );
    match (report.capacity_rps, report.lowest_failing_rps) {
        (Some(pass), Some(fail)) if !report.client_bound => out.push_str(&format!(
            "  Capacity:\t{pass:.0} req/s (met the SLO; {fail:.0} req/s did not: the capacity lies in [{pass:.0}, {fail:.0}))\n"
        )),
        (Some(pass), _) if report.client_bound => out.push_str(&format!(
            "  Capacity:\tat least {pass:.0} req/s (the client's limit was reached first)\n"
        )),
        (None, _) if report.client_bound => out.push_str(
            "  Capacity:\tnot measured: the client could not offer even the lowest rate tried\n",
        ),
        (Some(pass), None) => out.push_str(&format!("  Capacity:\tat least {pass:.0} req/s\n")),
        (None, _) => out.push_str("  Capacity:\tnone found: no rate tried met the SLO\n"),
        (Some(pass), Some(_)) => out.push_str(&format!("  Capacity:\t{pass:.0} req/s\n")),
    }
    if let Some(knee) = report.knee_rps {
        out.push_str(&format!(
            "  Knee:\t\t{knee:.0} req/s (the lowest rate whose p99 was over twice the lowest rate's)\n"
        ));
    }
    if let Some(server) = report.server_at_capacity {
        out.push_str(&format!(
            "  Server at capacity:\tCPU {:.0} % of a core, memory {:.1} MiB\n",
            server.cpu_percent,
            server.rss_bytes as f64 / (1024.0 * 1024.0)
        ));
    }
    out.push_str(&format!("  Stopped:\t{}\n", report.stopped_because));
    if let Some(error) = &report.error {
        out.push_str(&format!("  Error:\t\t{error}\n"));
    }
    out.push_str(&format!("  Probes:\t{}\n\n", report.probe_rule));
    out.push_str(&format!(
        "{:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {:>8}  {}\n",
        "offered",
        "done/s",
        "p50 ms",
        "p99 ms",
        "errors",
        "lag ms",
        "client cpu",
        "server",
        "verdict"
    ));
    for probe in &report.probes {
        let server = probe
            .server
            .map_or_else(|| "-".to_owned(), |s| format!("{:.0}%", s.cpu_percent));
        let verdict = if let Some(limit) = &probe.client_limit {
            format!("client-bound: {limit}")
        } else if probe.met_slo {
            "meets".to_owned()
        } else {
            let broken: Vec<String> = probe
                .verdicts
                .iter()
                .filter(|v| !v.passed)
                .map(|v| format!("{} ({})", v.expression, v.actual))
                .collect();
            format!("breaks {}", broken.join(", "))
        };
        out.push_str(&format!(
            "{:>10.0} {:>10.0} {:>10.3} {:>10.3} {:>8.3}% {:>9.3} {:>9.0}% {:>8}  {}{}\n",
            probe.rate,
            probe.rps,
            probe.p50_ms,
            probe.p99_ms,
            probe.errors_percent,
            probe.send_lag_ms,
            probe.client_cpu_percent,
            server,
            if probe.repeat { "(repeat) " } else { "" },
            verdict
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values_ns: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        for v in values_ns {
            h.record(*v).unwrap();
        }
        h
    }

    /// A simulated single-queue server with a 1 ms service time and deterministic arrivals:
    /// latency flat at 1 ms below 1,000 req/s, then the queue grows through the window.
    fn simulated(rate: Option<f64>, window: Duration) -> ProbeMeasure {
        let rate = rate.unwrap_or(1000.0);
        let calls = (rate * window.as_secs_f64()) as u64;
        let service_ns = 1_000_000u64;
        let latencies: Vec<u64> = if rate <= 1000.0 {
            vec![service_ns; 200]
        } else {
            // Backlog grows by (rate - 1000) calls per second: the last call waits longest.
            let growth = (rate - 1000.0) / 1000.0;
            (0..200)
                .map(|i| {
                    service_ns + (growth * window.as_secs_f64() * 1e9 * i as f64 / 200.0) as u64
                })
                .collect()
        };
        ProbeMeasure {
            duration: window,
            calls,
            errors: 0,
            rps: rate.min(1000.0),
            latency: histogram(&latencies),
            service: Some(histogram(&latencies)),
            client_cpu_share: 0.1,
            server: Some(ServerUsage {
                cpu_percent: rate.min(1000.0) / 10.0,
                rss_bytes: 10 << 20,
            }),
            methods: Vec::new(),
        }
    }

    fn settings(slo: &str) -> CapacitySettings {
        CapacitySettings {
            target: "sim".to_owned(),
            slo: vec![Threshold::parse(slo).unwrap()],
            plan: SearchPlan {
                start: 0.0,
                max: 1.0e6,
                floor: 1.0,
                growth: 2.0,
                precision: 0.05,
                max_probes: 30,
            },
            min_probe: Duration::from_secs(1),
            max_probe: Duration::from_secs(20),
            warmup: Duration::from_secs(1),
            concurrency: 100,
            method_shares: Vec::new(),
        }
    }

    #[test]
    fn the_cliff_of_a_single_queue_is_found() {
        let mut measure =
            |rate: Option<f64>, window: Duration, _warmup: Duration| Ok(simulated(rate, window));
        let report = run(
            &settings("p99<=10ms"),
            &mut measure,
            &mut |_| {},
            &CancellationToken::new(),
        );
        let capacity = report.capacity_rps.unwrap();
        assert!((950.0..=1000.0).contains(&capacity), "{report:#?}");
        assert!(
            report.stopped_because.starts_with("converged"),
            "{}",
            report.stopped_because
        );
        assert!(!report.client_bound);
        assert_eq!(report.server_at_capacity.unwrap().rss_bytes, 10 << 20);
        // p99 is flat until the cliff: the knee is past the capacity.
        assert!(report.knee_rps.unwrap() > capacity);
        let text = render(&report);
        assert!(text.contains("Capacity:\t"), "{text}");
        assert!(text.contains("lies in ["), "{text}");
        // Each probe ran long enough for 10,000 calls beyond... 100 calls past the p99.
        assert!(
            report.probe_rule.contains("at least 10000 calls"),
            "{}",
            report.probe_rule
        );
        for probe in &report.probes {
            assert!(
                probe.duration_s >= 10_000.0 / probe.rate - 1e-9
                    || probe.duration_s >= 20.0 - 1e-9
                    || probe.duration_s >= 1.0
            );
        }
    }

    #[test]
    fn one_stall_does_not_set_the_capacity() {
        // A single queue with its cliff at 1,000 req/s, whose first probe at 800 req/s (and
        // only that one) met a 200 ms stall: a p99 far past the limit, not near it. One such
        // run must not end the search below the cliff.
        let mut stalls_left = 1;
        let mut measure = |rate: Option<f64>, window: Duration, _warmup: Duration| {
            let mut measured = simulated(rate, window);
            if rate == Some(800.0) && stalls_left > 0 {
                stalls_left -= 1;
                measured.latency = histogram(&[200_000_000; 100]);
            }
            Ok(measured)
        };
        let mut settings = settings("p99<=10ms");
        settings.plan.start = 400.0;
        let report = run(
            &settings,
            &mut measure,
            &mut |_| {},
            &CancellationToken::new(),
        );
        let capacity = report.capacity_rps.unwrap();
        assert!((950.0..=1000.0).contains(&capacity), "{report:#?}");
        // The stalled run is in the report, and so is the run that confirmed or overruled it.
        let at_800: Vec<&Probe> = report.probes.iter().filter(|p| p.rate == 800.0).collect();
        assert_eq!(at_800.len(), 3, "{report:#?}");
        assert!(!at_800[0].met_slo && at_800[1].met_slo && at_800[1].repeat);
    }

    #[test]
    fn a_methods_slo_finds_the_rate_that_method_can_take() {
        // A mix: 98 % fast calls (1 ms whatever the rate) and 2 % slow ones whose latency
        // climbs to 20 ms past 300 req/s. The whole mix's p90 never notices; the slow
        // method's own p99 does.
        let mut measure = |rate: Option<f64>, window: Duration, _warmup: Duration| {
            let rate = rate.unwrap_or(1_000.0);
            let slow_ns = if rate <= 300.0 { 2_000_000 } else { 20_000_000 };
            let fast = histogram(&[1_000_000; 98]);
            let slow = histogram(&[slow_ns; 2]);
            let mut all = fast.clone();
            let _ = all.add(&slow);
            let method = |name: &str, latency: Histogram<u64>, share: f64| MethodMeasure {
                name: name.to_owned(),
                calls: (20_000.0 * share) as u64,
                errors: 0,
                rps: rate * share,
                latency,
            };
            Ok(ProbeMeasure {
                duration: window,
                calls: 20_000,
                errors: 0,
                rps: rate,
                latency: all,
                service: None,
                client_cpu_share: 0.1,
                server: None,
                methods: vec![
                    method("pkg.Svc.Fast", fast, 0.98),
                    method("pkg.Svc.Slow", slow, 0.02),
                ],
            })
        };
        let mut search = |slo: &str| {
            let mut settings = settings(slo);
            settings.plan.max = 1_000.0;
            settings.method_shares = vec![
                ("pkg.Svc.Fast".to_owned(), 0.98),
                ("pkg.Svc.Slow".to_owned(), 0.02),
            ];
            for threshold in &mut settings.slo {
                threshold
                    .resolve_method(&["pkg.Svc.Fast", "pkg.Svc.Slow"], "--slo")
                    .unwrap();
            }
            let mut lines = Vec::new();
            let report = run(
                &settings,
                &mut measure,
                &mut |line| lines.push(line.to_owned()),
                &CancellationToken::new(),
            );
            (report, lines)
        };
        let (whole, _) = search("p90<=10ms");
        assert!(whole.capacity_rps.unwrap() >= 950.0, "{whole:#?}");
        let (slow, lines) = search("Slow:p99<=10ms");
        // Each probe's line says what the method's own p99 read.
        assert!(
            lines
                .iter()
                .any(|line| line.contains("breaks the SLO (Slow:p99<=10ms read 20.")),
            "{lines:#?}"
        );
        let capacity = slow.capacity_rps.unwrap();
        assert!((280.0..=300.0).contains(&capacity), "{slow:#?}");
        assert!(
            render(&slow).contains("Slow:p99<=10ms"),
            "{}",
            render(&slow)
        );
        // Its p99 needs 10,000 of its own calls: 500,000 of a mix it has 2 % of.
        assert!(
            slow.probe_rule.contains("at least 500000 calls"),
            "{}",
            slow.probe_rule
        );
    }

    #[test]
    fn a_client_that_cannot_send_ends_the_search_as_its_own_limit() {
        // Below 5,000 req/s all is well; above, calls leave the client late while the server
        // still answers in 0.1 ms.
        let mut measure = |rate: Option<f64>, window: Duration, _warmup: Duration| {
            let rate = rate.unwrap_or(5_000.0);
            let service = histogram(&[100_000; 100]);
            let latency = if rate <= 5_000.0 {
                histogram(&[100_000; 100])
            } else {
                histogram(&[50_000_000; 100])
            };
            Ok(ProbeMeasure {
                duration: window,
                calls: 10_000,
                errors: 0,
                rps: rate.min(5_000.0),
                latency,
                service: Some(service),
                client_cpu_share: if rate > 5_000.0 { 0.99 } else { 0.5 },
                server: None,
                methods: Vec::new(),
            })
        };
        let report = run(
            &settings("p99<=10ms"),
            &mut measure,
            &mut |_| {},
            &CancellationToken::new(),
        );
        assert!(report.client_bound, "{report:#?}");
        assert!(
            report
                .stopped_because
                .contains("was the client's limit, not the server's"),
            "{}",
            report.stopped_because
        );
        // The search went on below the client's limit: the capacity is a lower bound near it.
        let capacity = report.capacity_rps.unwrap();
        assert!((4_700.0..=5_000.0).contains(&capacity), "{report:#?}");
        let limited = report
            .probes
            .iter()
            .find_map(|p| p.client_limit.as_deref())
            .unwrap();
        assert!(limited.contains("its CPU 99 % of its threads"), "{limited}");
        assert!(render(&report).contains("at least"), "{}", render(&report));
    }

    #[test]
    fn streams_that_run_out_are_named() {
        let measure = ProbeMeasure {
            duration: Duration::from_secs(1),
            calls: 10_000,
            errors: 0,
            rps: 10_000.0,
            latency: histogram(&[20_000_000; 10]),
            // 10,000 req/s × 1 ms = 10 streams busy, all of -c 10.
            service: Some(histogram(&[1_000_000; 10])),
            client_cpu_share: 0.2,
            server: None,
            methods: Vec::new(),
        };
        let why = client_limit(&measure, Some(1_000_000.0), 10).unwrap();
        assert!(
            why.starts_with("concurrency: the client's 10 streams were busy 100 %"),
            "{why}"
        );
        // A server whose own time tripled is the server's limit.
        assert_eq!(client_limit(&measure, Some(200_000.0), 10), None);
    }

    #[test]
    fn a_failing_probe_is_reported_with_what_came_before() {
        let mut calls = 0;
        let mut measure = |rate: Option<f64>, window: Duration, _warmup: Duration| {
            calls += 1;
            if calls == 3 {
                return Err(grpclab_load::LoadError::Connect(
                    "connection refused".to_owned(),
                ));
            }
            Ok(simulated(rate, window))
        };
        let report = run(
            &settings("p99<=10ms"),
            &mut measure,
            &mut |_| {},
            &CancellationToken::new(),
        );
        assert_eq!(report.probes.len(), 1, "{report:#?}");
        assert!(report
            .error
            .as_deref()
            .unwrap()
            .contains("connection refused"));
        assert!(report.stopped_because.starts_with("stopped early"));
    }
}
