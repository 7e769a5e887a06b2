//! `grpclab merge`: the results of several generators that shared one run (`load --shard
//! I/N`, `--start-at`) added into one result, exactly: histograms added (a p99 of several
//! generators is the p99 of all their calls, never an average of p99s), statuses, errors,
//! bytes and messages summed, the per-second series aligned by wall-clock second. The merged
//! result is itself a load result: it is exported as `load` exports one, merges again (with
//! `--partial`, in a tree), and `grpclab report` renders it.
//!
//! Two steps: [`read`] turns a saved JSON result back into a [`Report`] (the figures and
//! the exact parts `mergeable` keeps); [`merge`] checks that the results belong together
//! (one target, call, scenario, settings, histogram form and shard count; every shard
//! once) and adds them.

mod read;

pub use read::read;

use grpclab_load::{EndReason, LoadResult, Recorder};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use crate::InputError;
use grpclab_results::generator::{MergeFacts, Sharding};
use grpclab_results::model::Report;

/// One result to merge: where it came from (for messages) and what it holds.
#[derive(Debug, Clone)]
pub struct Part {
    /// The file it was read from.
    pub source: String,
    /// The result (its `sharding` is in the field below, not in the report).
    pub report: Report,
    /// Which shards it holds and its generators' facts.
    pub sharding: Sharding,
    /// Its settings as saved, compared field by field with the other parts'.
    pub settings: Vec<(&'static str, String)>,
    /// Its histograms' form (unit, encoding and bounds).
    pub histogram_form: String,
}

/// Adds `parts` into one result. Refuses (one line naming the files and what differs)
/// parts of different runs, a shard given twice, and — unless `partial` — a missing shard.
pub fn merge(parts: Vec<Part>, partial: bool) -> Result<Report, InputError> {
    let Some(first) = parts.first() else {
        return Err(InputError(
            "nothing to merge: give the JSON results of the generators (load -O json --shard I/N)"
                .to_owned(),
        ));
    };
    check_same_run(&parts)?;
    let of = first.sharding.of;
    check_shards(&parts, of, partial)?;

    // The merged window starts with the earliest generator's; each generator's seconds are
    // placed by their wall-clock start (with a shared --start-at, all at offset 0).
    let starts: Vec<SystemTime> = parts.iter().map(|p| p.report.result.started_at).collect();
    let base = starts
        .iter()
        .min()
        .copied()
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let ends: Vec<SystemTime> = parts
        .iter()
        .map(|p| p.report.result.started_at + p.report.result.elapsed)
        .collect();
    let end = ends.iter().max().copied().unwrap_or(base);
    let first_send = parts
        .iter()
        .map(|p| p.report.result.first_send)
        .min()
        .unwrap_or(base);

    let open_loop = parts
        .iter()
        .any(|p| p.report.result.service_time().is_some());
    let details = first.report.options.details;
    let mut recorder = Recorder::new(open_loop, details);
    let mut totals = Totals::default();
    let mut methods = first.report.result.methods.clone();
    for method in &mut methods {
        method.recorder = grpclab_load::Recorder::new(false, None);
    }
    let mut flows = first.report.result.flows.clone();
    for flow in &mut flows {
        flow.recorder = grpclab_load::Recorder::new(false, None);
    }
    for (part, start) in parts.iter().zip(&starts) {
        let theirs = &part.report.result.methods;
        if theirs.len() != methods.len()
            || theirs.iter().zip(&methods).any(|(a, b)| a.name != b.name)
        {
            return Err(InputError(format!(
                "{} ran another mix of methods than {}: merge the parts of one run",
                part.source, first.source
            )));
        }
        for (total, method) in methods.iter_mut().zip(theirs) {
            total.recorder.merge(&method.recorder);
        }
        let their_flows = &part.report.result.flows;
        if their_flows.len() != flows.len()
            || their_flows
                .iter()
                .zip(&flows)
                .any(|(a, b)| a.name != b.name)
        {
            return Err(InputError(format!(
                "{} ran other flows than {}: merge the parts of one run",
                part.source, first.source
            )));
        }
        for (total, flow) in flows.iter_mut().zip(their_flows) {
            total.recorder.merge(&flow.recorder);
        }
        let offset = seconds_between(base, *start);
        recorder.merge(&shifted(
            &part.report.result.recorder,
            offset,
            since(base, *start),
        ));
        totals.add(&part.report.result);
    }
    recorder.finish_seconds(true);

    let mut generators: Vec<_> = parts
        .iter()
        .flat_map(|p| p.sharding.generators.clone())
        .collect();
    generators.sort_by_key(|g| g.shard);
    let facts = facts(&parts, &generators, &recorder, base, &starts, &ends);

    let mut options = first.report.options.clone();
    options.cpus = parts.iter().map(|p| p.report.options.cpus).sum();
    let result = LoadResult {
        started_at: base,
        elapsed: since(base, end),
        // The warmup is one setting for every shard: the whole run is the window plus it.
        whole_run: since(base, end) + options.warmup,
        end_reason: totals.end_reason.unwrap_or(EndReason::Total),
        recorder,
        reconnects: totals.reconnects,
        planned_reconnects: totals.planned_reconnects,
        abandoned: totals.abandoned,
        ignored: totals.ignored,
        unsent: totals.unsent,
        unsent_by_cause: totals.unsent_by_cause,
        unaccounted: totals.unaccounted,
        render_failures: totals.render_failures,
        first_send,
        calls_by_address: totals.calls_by_address,
        addresses: first.report.result.addresses.clone(),
        methods,
        flows,
        server_windows: totals.server_windows,
        window_waits: totals.window_waits,
    };
    Ok(Report {
        history: None,
        options,
        result,
        thresholds: Vec::new(),
        bound_by: None,
        sharding: Some(Sharding {
            of,
            generators,
            merge: Some(facts),
        }),
    })
}

/// The counters that add up across generators, and how the run ended.
#[derive(Default)]
struct Totals {
    reconnects: u64,
    planned_reconnects: u64,
    abandoned: u64,
    ignored: u64,
    unsent: u64,
    unsent_by_cause: grpclab_load::Unsent,
    unaccounted: u64,
    render_failures: u64,
    /// Per address, summed element by element (every shard names the same addresses: the
    /// settings are checked to be the same).
    calls_by_address: Vec<u64>,
    end_reason: Option<EndReason>,
    /// What the server's frames allowed each generator, the largest of each.
    server_windows: Option<grpclab_load::PeerWindows>,
    /// How the servers' windows held each generator's requests back, summed.
    window_waits: grpclab_load::WindowWaits,
}

impl Totals {
    fn add(&mut self, result: &LoadResult) {
        self.reconnects += result.reconnects;
        self.planned_reconnects += result.planned_reconnects;
        self.abandoned += result.abandoned;
        self.ignored += result.ignored;
        self.unsent += result.unsent;
        self.unsent_by_cause.never_taken += result.unsent_by_cause.never_taken;
        self.unsent_by_cause.stopped += result.unsent_by_cause.stopped;
        self.unaccounted += result.unaccounted;
        self.render_failures += result.render_failures;
        if let Some(theirs) = &result.server_windows {
            self.server_windows.get_or_insert(*theirs).merge(theirs);
        }
        self.window_waits.add(&result.window_waits);
        if self.calls_by_address.len() < result.calls_by_address.len() {
            self.calls_by_address
                .resize(result.calls_by_address.len(), 0);
        }
        for (total, calls) in self
            .calls_by_address
            .iter_mut()
            .zip(&result.calls_by_address)
        {
            *total += calls;
        }
        // One generator stopped early (Ctrl-C) makes the whole run cut short.
        self.end_reason = match (self.end_reason, result.end_reason) {
            (Some(EndReason::Cancel), _) | (_, EndReason::Cancel) => Some(EndReason::Cancel),
            (Some(reason), _) => Some(reason),
            (None, reason) => Some(reason),
        };
    }
}

/// Every part must come from the same run: the same settings, histograms of one form and
/// the same number of shards.
fn check_same_run(parts: &[Part]) -> Result<(), InputError> {
    let first = &parts[0];
    for part in &parts[1..] {
        for ((name, mine), (_, theirs)) in first.settings.iter().zip(&part.settings) {
            if mine != theirs && !SHOWN_AS_DIFFERENT.contains(name) {
                return Err(InputError(format!(
                    "{} and {} are not shards of one run: {name} is {} in one and {} in the other; merge only the results of one `load --shard I/N` command line",
                    first.source,
                    part.source,
                    shown(mine),
                    shown(theirs)
                )));
            }
        }
        for ((name, mine), (_, theirs)) in first.settings.iter().zip(&part.settings) {
            if mine != theirs && SHOWN_AS_DIFFERENT.contains(name) {
                return Err(InputError(format!(
                    "{} and {} are not shards of one run: {name} differs; merge only the results of one `load --shard I/N` command line",
                    first.source, part.source
                )));
            }
        }
        if first.histogram_form != part.histogram_form {
            return Err(InputError(format!(
                "{} and {} hold histograms of different forms ({} vs {}): they cannot be added exactly",
                first.source, part.source, first.histogram_form, part.histogram_form
            )));
        }
        let (a, b) = (first.sharding.of, part.sharding.of);
        if a != b {
            return Err(InputError(format!(
                "{} is a shard of {a} generators but {} of {b}: merge the shards of one run",
                first.source, part.source
            )));
        }
    }
    Ok(())
}

/// Settings whose values are not printed when they differ: headers may carry tokens, and a
/// fingerprint says nothing to a person.
const SHOWN_AS_DIFFERENT: [&str; 2] = [
    "the metadata (-m)",
    "what the calls send (payloads, metadata, workload entries)",
];

fn shown(value: &str) -> String {
    if value.is_empty() {
        "(none)".to_owned()
    } else {
        value.to_owned()
    }
}

/// Each shard exactly once; all of them unless `partial`.
fn check_shards(parts: &[Part], of: u64, partial: bool) -> Result<(), InputError> {
    let mut seen: BTreeMap<u64, &str> = BTreeMap::new();
    for part in parts {
        for shard in part.sharding.held() {
            if shard >= of {
                return Err(InputError(format!(
                    "{} holds shard {shard} of {of}, which does not exist (shards count from 0)",
                    part.source
                )));
            }
            if let Some(other) = seen.insert(shard, &part.source) {
                return Err(InputError(format!(
                    "shard {shard}/{of} is in both {other} and {}: a shard's calls would count twice; give each shard once",
                    part.source
                )));
            }
        }
    }
    let missing: Vec<String> = (0..of)
        .filter(|shard| !seen.contains_key(shard))
        .map(|shard| format!("{shard}/{of}"))
        .collect();
    if !missing.is_empty() && !partial {
        return Err(InputError(format!(
            "shard(s) {} missing: the merge would describe part of the run as all of it; give every shard's result, or --partial to merge these into one that merges again",
            missing.join(", ")
        )));
    }
    Ok(())
}

/// Whole seconds from `base` to `at` (rounded: generators that started within half a
/// second of each other share their seconds).
fn seconds_between(base: SystemTime, at: SystemTime) -> usize {
    since(base, at).as_secs_f64().round() as usize
}

fn since(earlier: SystemTime, later: SystemTime) -> Duration {
    later.duration_since(earlier).unwrap_or_default()
}

/// A generator's recordings with its seconds moved `offset` seconds later and its call
/// details' end times moved by `shift` (both from the merged window's start).
fn shifted(recorder: &Recorder, offset: usize, shift: Duration) -> Recorder {
    let mut moved = recorder.clone();
    if offset > 0 {
        let mut seconds = vec![grpclab_load::SecondStats::default(); offset];
        seconds.extend_from_slice(&recorder.per_second);
        moved.per_second = seconds;
    }
    let histograms: Vec<(usize, Vec<u8>)> = recorder.finished_seconds().to_vec();
    moved.clear_second_histograms();
    for (second, bytes) in histograms {
        moved.add_second_histogram(second + offset, bytes);
    }
    if let Some(log) = &mut moved.details {
        let shift = u64::try_from(shift.as_nanos()).unwrap_or(u64::MAX);
        for call in &mut log.calls {
            call.ended_ns = call.ended_ns.saturating_add(shift);
        }
    }
    moved
}

/// What the merge found: rates, the shared window, start skew, clocks.
fn facts(
    parts: &[Part],
    generators: &[grpclab_results::generator::GeneratorRun],
    merged: &Recorder,
    base: SystemTime,
    starts: &[SystemTime],
    ends: &[SystemTime],
) -> MergeFacts {
    let mut warnings = Vec::new();
    let sum_of_rates = parts.iter().map(|p| p.report.result.rps()).sum();
    let latest_start = starts.iter().max().copied().unwrap_or(base);
    let earliest_end = ends.iter().min().copied().unwrap_or(base);
    let shared_window = since(latest_start, earliest_end);
    if shared_window.is_zero() && parts.len() > 1 {
        warnings.push("the generators' windows do not overlap: they did not load the server at the same time (give them one --start-at)".to_owned());
    }
    // The whole merged seconds inside the shared window.
    let first_second = since(base, latest_start).as_secs_f64().ceil() as usize;
    let last_second = since(base, earliest_end).as_secs_f64().floor() as usize;
    let (calls, seconds) = (first_second..last_second)
        .filter_map(|second| merged.per_second.get(second))
        .fold((0u64, 0u64), |(calls, seconds), stats| {
            (calls + stats.count, seconds + 1)
        });
    let first_sends: Vec<SystemTime> = generators
        .iter()
        .filter_map(|g| humantime::parse_rfc3339_weak(&g.first_send).ok())
        .collect();
    let start_skew = match (first_sends.iter().min(), first_sends.iter().max()) {
        (Some(min), Some(max)) => since(*min, *max),
        _ => Duration::ZERO,
    };
    let unsynchronized: Vec<String> = generators
        .iter()
        .filter(|g| g.clock.bound_us().is_none())
        .map(|g| format!("{} (shard {})", g.host, g.shard))
        .collect();
    let worst_clock_error_us = if unsynchronized.is_empty() {
        generators.iter().filter_map(|g| g.clock.bound_us()).max()
    } else {
        warnings.push(format!(
            "clock not known to be synchronised on {}: the start skew is measured by those clocks, so it bounds nothing",
            unsynchronized.join(", ")
        ));
        None
    };
    MergeFacts {
        sum_of_rates,
        shared_window: u64::try_from(shared_window.as_nanos()).unwrap_or(u64::MAX),
        shared_window_calls: calls,
        shared_window_rps: if seconds > 0 {
            calls as f64 / seconds as f64
        } else {
            0.0
        },
        start_skew: u64::try_from(start_skew.as_nanos()).unwrap_or(u64::MAX),
        worst_clock_error_us,
        unsynchronized,
        warnings,
    }
}
