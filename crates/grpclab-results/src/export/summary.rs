//! The text summary (`-O summary`, the default): ghz's summary line for line
//! (printer/template.go's `defaultTmpl` and the helpers in printer/printer.go: units from
//! `formatNanoUnit`, the response-time histogram with `∎` bars, seven percentiles, status and
//! error tables aligned with spaces), then grpclab's extras in a section of their own, so a ghz
//! user's eye finds everything where it was.

use std::fmt::Write as _;

use super::{Exporter, RenderError};
use crate::model::Report;
use crate::model::{ghz_histogram, ghz_percentiles, saturating_ns, HistogramBucket, LatencyStats};
use grpclab_load::LoadResult;

/// Renders the ghz-style summary.
pub struct SummaryExporter;

impl Exporter for SummaryExporter {
    fn render(&self, report: &Report) -> Result<Vec<u8>, RenderError> {
        let mut out = ghz_summary(report)?;
        out.push_str(&extras(report)?);
        Ok(out.into_bytes())
    }
}

/// The part ghz prints, exactly as its template lays it out.
fn ghz_summary(report: &Report) -> Result<String, std::fmt::Error> {
    let result = &report.result;
    let ghz_latency = report.ghz_latency();
    let latency: &hdrhistogram::Histogram<u64> = &ghz_latency;
    let empty = latency.is_empty();
    let mut out = String::from("\nSummary:\n");
    if let Some(name) = report.options.name.as_deref().filter(|n| !n.is_empty()) {
        writeln!(out, "  Name:\t\t{name}")?;
    }
    writeln!(out, "  Count:\t{}", result.count())?;
    writeln!(
        out,
        "  Total:\t{}",
        nano_unit(saturating_ns(result.elapsed))
    )?;
    // Fastest and slowest are over successful calls: with none, there is nothing to show
    // (ghz prints 0 ns, which reads as a measurement).
    let (fastest, slowest) = if empty {
        ("–".to_owned(), "–".to_owned())
    } else {
        (nano_unit(latency.min()), nano_unit(latency.max()))
    };
    writeln!(out, "  Slowest:\t{slowest}")?;
    writeln!(out, "  Fastest:\t{fastest}")?;
    writeln!(
        out,
        "  Average:\t{}",
        nano_unit(result.mean_latency_all_ns())
    )?;
    writeln!(out, "  Requests/sec:\t{:4.2}", result.rps())?;
    out.push_str("\nResponse time histogram:\n");
    out.push_str(&histogram_bars(&ghz_histogram(latency)));
    out.push_str("\nLatency distribution:");
    for point in ghz_percentiles(latency) {
        write!(
            out,
            "\n  {} % in {} ",
            point.percentage,
            nano_unit(point.latency)
        )?;
    }
    out.push_str("\n\n");
    let statuses = result.status_counts();
    if !statuses.is_empty() {
        out.push_str("Status code distribution:\n");
        out.push_str(&aligned(statuses.iter().map(|(code, count)| {
            [format!("  [{}]", code.name()), format!("{count} responses")]
        })));
    }
    out.push('\n');
    if !result.error_counts().is_empty() {
        out.push_str("Error distribution:\n");
        out.push_str(&aligned(
            result
                .error_counts()
                .iter()
                .map(|(message, count)| [format!("  [{count}]"), message.clone()]),
        ));
    }
    out.push('\n');
    Ok(out)
}

/// One line when no call of a run succeeded: how many failed, with which status most, the
/// error seen most (the reply's own words come before any guess), and what that status
/// usually means here; `None` when any call succeeded (or none ended).
pub fn nothing_succeeded(result: &grpclab_load::LoadResult) -> Option<String> {
    if result.count() == 0 || result.ok() > 0 {
        return None;
    }
    let (code, count) = result
        .status_counts()
        .into_iter()
        .max_by_key(|(_, count)| *count)?;
    let hint = match code {
        grpclab_core::Code::Unimplemented => {
            "the server does not serve this method: check --call (grpclab's built-in servers serve helloworld.Greeter.SayHello, whose request wraps the scenario's message in `request`: -d '{\"request\":{...}}')"
        }
        grpclab_core::Code::Unavailable => {
            "the server could not be reached, or went away mid-run"
        }
        grpclab_core::Code::DeadlineExceeded => "every call outlived its deadline (-t)",
        grpclab_core::Code::Unauthenticated | grpclab_core::Code::PermissionDenied => {
            "the server wants credentials: -m/--metadata, or --cert and --key"
        }
        grpclab_core::Code::InvalidArgument | grpclab_core::Code::Internal => {
            "if the server refused the request, check -d/--data against the method's input type (grpclab's built-in servers, like grpc_bench's, serve helloworld.Greeter whose HelloRequest wraps the scenario's message in field 1, `request`, where ghz's example helloworld.proto has a string: add --scenario complex_proto, or use the scenario's .proto, with -d '{\"request\":{\"name\":\"Joe\"}}')"
        }
        _ => "see the error distribution",
    };
    let most_often = result
        .error_counts()
        .iter()
        .max_by_key(|(_, count)| **count)
        .map(|(message, _)| format!("; most often \"{}\"", shortened(message)))
        .unwrap_or_default();
    Some(format!(
        "no call succeeded: all {} failed ({count} {}){most_often}: {hint}",
        result.count(),
        code.name()
    ))
}

/// An error message cut to a line's worth (at a character boundary), marked when cut.
fn shortened(message: &str) -> String {
    const MOST: usize = 200;
    match message.char_indices().nth(MOST) {
        Some((end, _)) => format!("{}…", &message[..end]),
        None => message.to_owned(),
    }
}

/// grpclab's extras, after ghz's sections.
fn extras(report: &Report) -> Result<String, std::fmt::Error> {
    let result = &report.result;
    let mut out = String::from("grpclab:\n");
    if let Some(line) = nothing_succeeded(result) {
        writeln!(out, "  {line}")?;
    }
    if let Some(bound) = &report.bound_by {
        writeln!(out, "  Bound by:\t{} ({})", bound.word(), bound.evidence)?;
    }
    for verdict in &report.thresholds {
        writeln!(
            out,
            "  Threshold {}:\t{} ({})",
            verdict.expression,
            if verdict.passed { "passed" } else { "FAILED" },
            verdict.actual
        )?;
    }
    if result.whole_run != result.elapsed {
        writeln!(
            out,
            "  Warmup:\t{} before the measured window (Count, Total and Requests/sec above are the window's)",
            nano_unit(saturating_ns(
                result.whole_run.saturating_sub(result.elapsed)
            ))
        )?;
    }
    let latency = LatencyStats::of(result.latency());
    let lines = |stats: &LatencyStats| -> Result<String, std::fmt::Error> {
        let mut lines = String::new();
        for point in &stats.latency_distribution {
            write!(
                lines,
                "\n    {} % in {}",
                point.percentage,
                precise(point.latency)
            )?;
        }
        Ok(lines)
    };
    if !latency.latency_distribution.is_empty() {
        writeln!(
            out,
            "  Latency distribution, to the tail and finer than ghz's units:{}",
            lines(&latency)?
        )?;
    }
    if let Some(service) = result.service_time().map(LatencyStats::of) {
        writeln!(
            out,
            "  Open loop: latency above counts from each call's scheduled send time (coordinated\n  omission corrected). Service time counts from the actual send (uncorrected):{}",
            lines(&service)?
        )?;
    }
    if let Some(lag) = result.send_lag().filter(|lag| !lag.is_empty()) {
        writeln!(
            out,
            "  Send lag (scheduled send time to actual send, successful calls; the client's own delay):\tp50 {}, p99 {}, p99.9 {}, max {}",
            precise(lag.value_at_quantile(0.5)),
            precise(lag.value_at_quantile(0.99)),
            precise(lag.value_at_quantile(0.999)),
            precise(lag.max())
        )?;
    }
    stream_lines(&mut out, result, &lines)?;
    if result.ok() > 0 && result.errors() > 0 {
        writeln!(
            out,
            "  Average of the successful calls:\t{} (ghz's average above includes the failed ones)",
            nano_unit(latency.average)
        )?;
    }
    // A flow's steps are methods of their own, after the plain ones.
    let plain = &result.methods[..result.first_step()];
    let weights: u64 = plain
        .iter()
        .map(|m| u64::from(m.weight))
        .chain(result.flows.iter().map(|f| u64::from(f.weight)))
        .sum();
    if !plain.is_empty() {
        writeln!(
            out,
            "  Methods (mix seed {}; calls abandoned at the end are in no method's count):",
            report.options.mix_seed.unwrap_or_default()
        )?;
        let width = plain.iter().map(|m| m.name.len()).max().unwrap_or(0);
        for method in plain {
            let stats = LatencyStats::of(method.recorder.latency());
            let at = |p: f64| stats.at(p).map_or_else(|| "-".to_owned(), precise);
            writeln!(
                out,
                "    {:width$}  weight {} ({:.1} %), {} calls ({:.1} %), {:.1} req/s, p50 {}, p90 {}, p99 {}, {} errors",
                method.name,
                method.weight,
                100.0 * f64::from(method.weight) / weights.max(1) as f64,
                method.count(),
                100.0 * method.count() as f64 / result.count().max(1) as f64,
                method.rps(result.elapsed),
                at(50.0),
                at(90.0),
                at(99.0),
                method.errors()
            )?;
            if method.recorder.retries > 0 {
                writeln!(
                    out,
                    "    {:width$}  {} extra attempts (retried or hedged): {:.3} attempts per call",
                    "",
                    method.recorder.retries,
                    attempts_per_call(method.recorder.retries, method.count())
                )?;
            }
        }
    }
    if result.recorder.retries > 0 {
        writeln!(
            out,
            "  Retries:\t{} attempts beyond calls' first (retried or hedged): {:.3} attempts per call (the server was sent {} calls for {})",
            result.recorder.retries,
            attempts_per_call(result.recorder.retries, result.count()),
            result.count() + result.recorder.retries,
            result.count()
        )?;
    }
    if !result.flows.is_empty() {
        flow_lines(&mut out, result, weights, report.options.mix_seed)?;
    }
    let shares = crate::model::AddressShare::of(&report.options, result);
    if !shares.is_empty() {
        let listed: Vec<String> = shares
            .iter()
            .map(|share| {
                format!(
                    "{} ({} conn, {} calls)",
                    share.address, share.connections, share.calls
                )
            })
            .collect();
        writeln!(
            out,
            "  Addresses ({}):\t{}",
            report.options.lb_strategy,
            listed.join(", ")
        )?;
    }
    accounting_lines(&mut out, result)?;
    if let Some(log) = result.details() {
        writeln!(
            out,
            "  Details:\t{} of {} calls listed (the first that ended; --details N)",
            log.calls.len(),
            result.count()
        )?;
    }
    if let Some(note) = starvation_note(result) {
        writeln!(out, "  {note}")?;
    }
    if let Some(sharding) = &report.sharding {
        sharding_lines(&mut out, sharding)?;
    }
    Ok(out)
}

/// A streaming run's lines: messages each way, ping-pong round trips, the gaps between
/// replies, and each reply's latency from the server's stamp.
fn stream_lines(
    out: &mut String,
    result: &LoadResult,
    lines: &dyn Fn(&LatencyStats) -> Result<String, std::fmt::Error>,
) -> std::fmt::Result {
    let (sent, received) = result.messages();
    if sent + received > 0 {
        let seconds = result.elapsed.as_secs_f64().max(1e-9);
        writeln!(
            out,
            "  Stream messages:\t{sent} sent ({:.2}/s), {received} received ({:.2}/s)",
            sent as f64 / seconds,
            received as f64 / seconds
        )?;
    }
    if let Some(round_trip) = result.round_trip().map(LatencyStats::of) {
        writeln!(
            out,
            "  Ping-pong round trips (a request until its reply), average {}:{}",
            precise(round_trip.average),
            lines(&round_trip)?
        )?;
    }
    if let Some(gaps) = result.message_gaps() {
        let stats = LatencyStats::of(gaps);
        writeln!(
            out,
            "  Between two replies of a stream ({} gaps; 0 for replies read together), average {}:{}",
            gaps.len(),
            precise(stats.average),
            lines(&stats)?
        )?;
    }
    if let Some(stamped) = result.message_latency() {
        let unstamped = result.recorder.messages_unstamped;
        if stamped.is_empty() {
            writeln!(
                out,
                "  Reply latency from the server's stamps: none of the {unstamped} replies carried a stamp in the --stream-stamp field (grpclab's servers fill sent_unix_nanos in Feed replies when the request sets \"stamp\": true)"
            )?;
        } else {
            let stats = LatencyStats::of(stamped);
            writeln!(
                out,
                "  Each reply from the server's stamp to its arrival ({} replies{}), average {}:{}",
                stamped.len(),
                if unstamped > 0 {
                    format!("; {unstamped} more carried no stamp")
                } else {
                    String::new()
                },
                precise(stats.average),
                lines(&stats)?
            )?;
        }
        if result.recorder.stamps_ahead > 0 {
            writeln!(
                out,
                "  {} stamps were later than their reply's arrival (counted as 0): the server's clock is ahead of this one's",
                result.recorder.stamps_ahead
            )?;
        }
    }
    Ok(())
}

/// Where calls went besides the figures: reconnections, calls abandoned, left out, never
/// sent or unaccounted for, and payload templates that failed to render.
fn accounting_lines(out: &mut String, result: &LoadResult) -> std::fmt::Result {
    if result.reconnects > 0 {
        writeln!(out, "  Reconnections:\t{}", result.reconnects)?;
    }
    if result.planned_reconnects > 0 {
        writeln!(
            out,
            "  Planned new connections (stream ids ran out; --http1: streams ended early):\t{}",
            result.planned_reconnects
        )?;
    }
    if result.abandoned > 0 {
        writeln!(
            out,
            "  Abandoned at the end (counted as Canceled):\t{}",
            result.abandoned
        )?;
    }
    if result.ignored > 0 {
        writeln!(
            out,
            "  In flight at the end, ignored (--duration-stop ignore):\t{}",
            result.ignored
        )?;
    }
    if result.unsent > 0 {
        writeln!(
            out,
            "  Due in the window but never sent (the client or its connections fell behind the rate):\t{} ({} never taken, {} given back at the stop)",
            result.unsent, result.unsent_by_cause.never_taken, result.unsent_by_cause.stopped
        )?;
    }
    if result.unaccounted > 0 {
        writeln!(
            out,
            "  WARNING: calls taken from the schedule and never accounted for (a grpclab bug; please report it):\t{}",
            result.unaccounted
        )?;
    }
    if result.render_failures > 0 {
        writeln!(
            out,
            "  Templated requests that failed to render (sent as call 0's):\t{}",
            result.render_failures
        )?;
    }
    Ok(())
}

/// A generator among several, or their merge: which shards, the rates, the start skew and
/// the clocks, then one line per generator.
fn sharding_lines(
    out: &mut String,
    sharding: &crate::generator::Sharding,
) -> Result<(), std::fmt::Error> {
    let held = sharding.held();
    let shards = if held.len() as u64 == sharding.of {
        format!("all {} of {}", held.len(), sharding.of)
    } else {
        let list: Vec<String> = held.iter().map(|s| s.to_string()).collect();
        format!("{} of {} ({})", list.join(", "), sharding.of, held.len())
    };
    writeln!(out, "  Shards:	{shards}")?;
    if let Some(facts) = &sharding.merge {
        writeln!(
            out,
            "  Merged rate:	{:.2} req/s (the sum of the generators' rates); {:.2} req/s over the {} they all measured ({} calls)",
            facts.sum_of_rates,
            facts.shared_window_rps,
            nano_unit(facts.shared_window),
            facts.shared_window_calls
        )?;
        writeln!(
            out,
            "  Start skew:	{} (first sends, latest minus earliest); clock error {}",
            nano_unit(facts.start_skew),
            match facts.worst_clock_error_us {
                Some(us) => format!("at most {}", nano_unit(us.saturating_mul(1_000))),
                None => "unknown (a clock not synchronised)".to_owned(),
            }
        )?;
        for warning in &facts.warnings {
            writeln!(out, "  Warning:	{warning}")?;
        }
    }
    for generator in &sharding.generators {
        writeln!(
            out,
            "  Shard {}:	{} · {} calls, {:.2} req/s · -c {} over {} connection(s) · first send {}",
            generator.shard,
            generator.host,
            generator.count,
            generator.measured_rps,
            generator.concurrency,
            generator.connections,
            generator.first_send
        )?;
    }
    Ok(())
}

/// ghz's histogram lines: the mark in ms with three decimals, the count in brackets, both
/// padded to the widest, and up to 40 `∎` scaled to the fullest bucket (rounded).
fn histogram_bars(buckets: &[HistogramBucket]) -> String {
    let mark = |b: &HistogramBucket| format!("{:.3}", b.mark * 1000.0);
    let max_mark = buckets.iter().map(|b| b.mark).fold(0.0, f64::max);
    let max_count = buckets.iter().map(|b| b.count).max().unwrap_or(0);
    let mark_width = format!("{:.3}", max_mark * 1000.0).len();
    let count_width = max_count.to_string().len();
    let mut out = String::new();
    for bucket in buckets {
        let bars = (bucket.count * 40 + max_count / 2)
            .checked_div(max_count)
            .unwrap_or(0);
        let count = bucket.count.to_string();
        out.push_str(&format!(
            "  {:<mark_width$} [{count}]{} |{}\n",
            mark(bucket),
            " ".repeat(count_width - count.len()),
            "∎".repeat(bars as usize)
        ));
    }
    out
}

/// Rows of two cells, aligned the way Go's tabwriter aligns ghz's status and error tables
/// (both cells end with a tab; each column is as wide as its widest cell plus 3 spaces).
fn aligned(rows: impl Iterator<Item = [String; 2]>) -> String {
    let rows: Vec<[String; 2]> = rows.collect();
    let width = |column: usize| {
        rows.iter()
            .map(|row| row[column].chars().count())
            .max()
            .unwrap_or(0)
            + 3
    };
    let (first, second) = (width(0), width(1));
    let mut out = String::new();
    for [a, b] in &rows {
        out.push_str(a);
        out.push_str(&" ".repeat(first - a.chars().count()));
        out.push_str(b);
        out.push_str(&" ".repeat(second - b.chars().count()));
        out.push('\n');
    }
    out
}

/// When calls sent during the warmup outlasted every measured call, says so: the percentiles
/// leave them out, and a server that starves some streams can look fast without this line.
pub fn starvation_note(result: &grpclab_load::LoadResult) -> Option<String> {
    let (calls, slowest_ns) = result.warmup_calls_in_window();
    let measured_slowest = result.latency().max();
    (calls > 0 && slowest_ns > measured_slowest).then(|| {
        format!(
            "NOTE: {calls} calls sent during the warmup ended in the measured window; the slowest took {}, longer than any measured call ({}). They are not in the figures above: the server may be keeping some streams waiting (a longer warmup or window shows it).",
            nano_unit(slowest_ns),
            nano_unit(measured_slowest)
        )
    })
}

/// A duration with four significant digits or so: µs with one decimal under a millisecond, ms
/// with three decimals under a second, then s (ghz's units round sub-millisecond latencies to
/// 10 µs).
fn precise(nanos: u64) -> String {
    if nanos < 1_000_000 {
        format!("{:.1} µs", nanos as f64 / 1e3)
    } else if nanos < 1_000_000_000 {
        format!("{:.3} ms", nanos as f64 / 1e6)
    } else {
        format!("{:.3} s", nanos as f64 / 1e9)
    }
}

/// A duration as ghz's `formatNanoUnit` writes it: whole nanoseconds under 10 µs, then
/// milliseconds under a second, then seconds, with two decimals.
fn nano_unit(nanos: u64) -> String {
    if nanos < 10_000 {
        format!("{nanos} ns")
    } else if nanos < 1_000_000_000 {
        format!("{:4.2} ms", nanos as f64 / 1e6)
    } else {
        format!("{:4.2} s", nanos as f64 / 1e9)
    }
}

/// Each flow's figures (its runs: count, rate, latency from start to last step, passed,
/// errors, unexpected replies) and under it each step's, with the first unexpected replies.
/// Attempts per call, the retry policy's amplification: `(calls + retries) / calls`.
fn attempts_per_call(retries: u64, calls: u64) -> f64 {
    (calls + retries) as f64 / calls.max(1) as f64
}

fn flow_lines(
    out: &mut String,
    result: &grpclab_load::LoadResult,
    weights: u64,
    seed: Option<u64>,
) -> std::fmt::Result {
    writeln!(
        out,
        "  Flows (mix seed {}; latency from a flow's start to its last step's end):",
        seed.unwrap_or_default()
    )?;
    let mut steps = result.methods[result.first_step()..].iter();
    for flow in &result.flows {
        let stats = LatencyStats::of(flow.recorder.latency());
        let at = |p: f64| stats.at(p).map_or_else(|| "-".to_owned(), precise);
        writeln!(
            out,
            "    {}  weight {} ({:.1} %), {} flows, {:.1} flows/s, p50 {}, p90 {}, p99 {}, {} passed, {} errors, {} unexpected",
            flow.name,
            flow.weight,
            100.0 * f64::from(flow.weight) / weights.max(1) as f64,
            flow.count(),
            flow.rps(result.elapsed),
            at(50.0),
            at(90.0),
            at(99.0),
            flow.passed(),
            flow.errors(),
            flow.recorder.unexpected_count()
        )?;
        let width = flow.steps.iter().map(String::len).max().unwrap_or(0);
        for _ in &flow.steps {
            let Some(step) = steps.next() else { break };
            let stats = LatencyStats::of(step.recorder.latency());
            let at = |p: f64| stats.at(p).map_or_else(|| "-".to_owned(), precise);
            writeln!(
                out,
                "      step {:width$}  {} calls, p50 {}, p90 {}, p99 {}, {} errors, {} unexpected",
                step.name,
                step.count(),
                at(50.0),
                at(90.0),
                at(99.0),
                step.errors(),
                step.recorder.unexpected_count()
            )?;
            // The commonest reasons, then how many more (the map keeps the first distinct
            // ones; a reason that names a value is distinct per call).
            let mut examples: Vec<(&String, &u64)> = step
                .recorder
                .unexpected
                .iter()
                .filter(|(reason, _)| reason.as_str() != grpclab_load::recorder::OTHER_ERRORS)
                .collect();
            examples.sort_by(|a, b| b.1.cmp(a.1));
            let shown: u64 = examples.iter().take(3).map(|(_, count)| **count).sum();
            for (reason, count) in examples.into_iter().take(3) {
                writeln!(out, "        [{count}] {reason}")?;
            }
            let more = step.recorder.unexpected_count() - shown;
            if more > 0 {
                writeln!(out, "        [{more}] more, for other reasons")?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{extras, nano_unit, precise, starvation_note, SummaryExporter};
    use crate::export::Exporter;
    use crate::model::{Report, RunOptions};
    use grpclab_core::Code;
    use grpclab_load::{EndReason, LoadResult, Recorder};
    use std::time::Duration;

    fn result_of(recorder: Recorder, whole_run: Duration, elapsed: Duration) -> LoadResult {
        LoadResult {
            started_at: std::time::SystemTime::UNIX_EPOCH,
            first_send: std::time::SystemTime::UNIX_EPOCH,
            elapsed,
            whole_run,
            end_reason: EndReason::Total,
            recorder,
            reconnects: 0,
            planned_reconnects: 0,
            abandoned: 0,
            unsent: 0,
            unsent_by_cause: grpclab_load::Unsent::default(),
            unaccounted: 0,
            render_failures: 0,
            calls_by_address: Vec::new(),
            addresses: Vec::new(),
            methods: Vec::new(),
            flows: Vec::new(),
            ignored: 0,
            server_windows: None,
            window_waits: Default::default(),
        }
    }

    /// The expected text follows ghz's template (printer/template.go) and helpers by hand:
    /// tab after each summary label, `formatNanoUnit` units, 11 histogram marks from the
    /// fastest to the slowest call (ms, three decimals, padded to the widest) with bars scaled
    /// to 40 for the fullest, `N % in X ` lines with their trailing space, and tabwriter
    /// tables (padding 3, both cells padded). The HdrHistogram holds 1 ms as 999,936 ns and
    /// 11 ms as 10,993,664..11,001,855 ns, which is where the marks' last digits come from.
    #[test]
    fn the_summary_matches_ghz_line_for_line() {
        let mut recorder = Recorder::new(false, None);
        let ms = Duration::from_millis;
        for latency in [1, 1, 1, 2, 2, 2, 2, 2, 5, 11] {
            recorder.record_ok(ms(latency), ms(latency), ms(100));
        }
        recorder.record_error(Code::Unavailable, "connection refused", ms(4), ms(200));
        recorder.record_error(Code::Unavailable, "connection refused", ms(4), ms(200));
        recorder.record_error(Code::Internal, "boom", ms(3), ms(300));
        let report = Report {
            history: None,
            options: RunOptions {
                name: Some("golden".to_owned()),
                ..RunOptions::default()
            },
            result: result_of(recorder, ms(500), ms(500)),
            thresholds: Vec::new(),
            bound_by: None,
            sharding: None,
        };
        let text = String::from_utf8(SummaryExporter.render(&report).unwrap()).unwrap();
        let expected = "
Summary:
  Name:\t\tgolden
  Count:\t13
  Total:\t500.00 ms
  Slowest:\t11.00 ms
  Fastest:\t1.00 ms
  Average:\t3.08 ms
  Requests/sec:\t26.00

Response time histogram:
  1.000  [3] |∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎
  2.000  [5] |∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎
  3.000  [0] |
  4.001  [0] |
  5.001  [1] |∎∎∎∎∎∎∎∎
  6.001  [0] |
  7.001  [0] |
  8.001  [0] |
  9.001  [0] |
  10.002 [0] |
  11.002 [1] |∎∎∎∎∎∎∎∎

Latency distribution:
  10 % in 1.00 ms 
  25 % in 1.00 ms 
  50 % in 2.00 ms 
  75 % in 2.00 ms 
  90 % in 5.00 ms 
  95 % in 11.00 ms 
  99 % in 11.00 ms 

Status code distribution:
  [OK]            10 responses   
  [Internal]      1 responses    
  [Unavailable]   2 responses    

Error distribution:
  [1]   rpc error: code = Internal desc = boom                    
  [2]   rpc error: code = Unavailable desc = connection refused   

grpclab:
  Latency distribution, to the tail and finer than ghz's units:
    10 % in 1.000 ms
    25 % in 1.000 ms
    50 % in 2.001 ms
    75 % in 2.001 ms
    90 % in 5.001 ms
    95 % in 11.002 ms
    99 % in 11.002 ms
    99.9 % in 11.002 ms
    99.99 % in 11.002 ms
  Average of the successful calls:\t2.90 ms (ghz's average above includes the failed ones)
";
        if text != expected {
            for (line, (got, want)) in text.lines().zip(expected.lines()).enumerate() {
                assert_eq!(got, want, "line {line}");
            }
            assert_eq!(text, expected);
        }
    }

    #[test]
    fn without_a_successful_call_the_sections_are_empty_as_in_ghz() {
        let mut recorder = Recorder::new(false, None);
        recorder.record_error(
            Code::Unavailable,
            "",
            Duration::from_millis(1),
            Duration::ZERO,
        );
        let report = Report {
            history: None,
            options: RunOptions::default(),
            result: result_of(recorder, Duration::from_secs(1), Duration::from_secs(1)),
            thresholds: Vec::new(),
            bound_by: None,
            sharding: None,
        };
        let text = String::from_utf8(SummaryExporter.render(&report).unwrap()).unwrap();
        assert!(
            text.contains("Response time histogram:\n\nLatency distribution:\n\nStatus code"),
            "{text}"
        );
        assert!(
            text.contains("  [1]   rpc error: code = Unavailable desc =    \n"),
            "{text}"
        );
        assert!(!text.contains("Name:"), "{text}");
    }

    #[test]
    fn warmup_calls_slower_than_every_measured_call_get_a_note() {
        let mut recorder = Recorder::new(false, None);
        recorder.record_ok(Duration::from_millis(2), Duration::ZERO, Duration::ZERO);
        recorder.record_warmup_call_in_window(Duration::from_millis(1));
        let mut result = result_of(recorder, Duration::from_secs(1), Duration::from_secs(1));
        assert_eq!(
            starvation_note(&result),
            None,
            "faster than the measured calls"
        );
        result
            .recorder
            .record_warmup_call_in_window(Duration::from_millis(1500));
        let note = starvation_note(&result).unwrap();
        assert!(note.contains("2 calls sent during the warmup"), "{note}");
        assert!(note.contains("1.50 s"), "{note}");
    }

    #[test]
    fn calls_an_open_loop_never_sent_are_said_and_exported() {
        let mut recorder = Recorder::new(true, None);
        recorder.record_ok(Duration::from_millis(2), Duration::ZERO, Duration::ZERO);
        let mut result = result_of(recorder, Duration::from_secs(1), Duration::from_secs(1));
        let report = |result: &LoadResult| Report {
            history: None,
            options: RunOptions::default(),
            result: result.clone(),
            thresholds: Vec::new(),
            bound_by: None,
            sharding: None,
        };
        let text = extras(&report(&result)).unwrap();
        assert!(!text.contains("never sent"), "{text}");
        result.unsent = 198;
        let text = extras(&report(&result)).unwrap();
        assert!(
            text.contains("Due in the window but never sent") && text.contains("198"),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_slice(
            &crate::export::json::JsonExporter
                .render(&report(&result))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(json["unsent"], 198);
    }

    #[test]
    fn durations_take_ghz_units() {
        assert_eq!(nano_unit(999), "999 ns");
        assert_eq!(nano_unit(9_999), "9999 ns");
        assert_eq!(nano_unit(10_000), "0.01 ms");
        assert_eq!(nano_unit(26_430_000), "26.43 ms");
        assert_eq!(nano_unit(2_060_000_000), "2.06 s");
        assert_eq!(precise(101_234), "101.2 µs");
        assert_eq!(precise(26_430_500), "26.430 ms");
    }
}
