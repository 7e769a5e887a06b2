//! A saved `load -O json` result read back into a [`Report`]: the figures from ghz's and
//! grpclab's fields, the exact parts (histograms, sums, per-second histograms) from
//! `hdrHistogram` and `mergeable`.

use grpclab_core::Code;
use grpclab_load::{decode_histogram, CallDetail, CallLog, EndReason, LoadResult, Recorder};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::Part;
use crate::InputError;
use grpclab_results::model::{JsonReport, LoadShape, Report, RunOptions, TlsOptions};

/// Reads one generator's (or an earlier merge's) JSON result.
pub fn read(path: &Path) -> Result<Part, InputError> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|err| InputError(format!("cannot read {source}: {err}")))?;
    // `load -O json` writes one document; a pod's log may carry other lines before it, so
    // the last line that parses is the result (kubectl logs ... > shard-0.json).
    let json: JsonReport = serde_json::from_str(&text)
        .or_else(|err| {
            text.lines()
                .rev()
                .find_map(|line| serde_json::from_str(line).ok())
                .ok_or(err)
        })
        .map_err(|err| {
            InputError(format!(
                "{source} is not a grpclab load result ({err}): give the files `grpclab load -O json` wrote"
            ))
        })?;
    part_of(source, json)
}

fn part_of(source: String, json: JsonReport) -> Result<Part, InputError> {
    let fail = |what: String| InputError(format!("{source}: {what}"));
    let (Some(sharding), Some(exact)) = (json.sharding.clone(), json.mergeable.clone()) else {
        return Err(fail("this result does not say which shard it is, nor keep what an exact merge needs: run each generator with --shard I/N (and --start-at) and -O json".to_owned()));
    };
    if sharding.generators.is_empty() {
        return Err(fail("its sharding lists no generator".to_owned()));
    }
    let histogram = |what: &str, text: &str| {
        decode_histogram(text).map_err(|err| fail(format!("{what}: {err}")))
    };
    let time = |what: &str, text: &str| {
        humantime::parse_rfc3339_weak(text)
            .map_err(|err| fail(format!("{what} '{text}' is not an RFC 3339 time: {err}")))
    };
    let window_start = time("mergeable.windowStart", &exact.window_start)?;
    let first_send = time("mergeable.firstSend", &exact.first_send)?;

    let options = run_options(&json);
    let mut recorder = Recorder::new(json.hdr_histogram.service_time.is_some(), options.details);
    recorder.set_latency(histogram(
        "hdrHistogram.latency",
        &json.hdr_histogram.latency,
    )?);
    if let Some(text) = &json.hdr_histogram.service_time {
        recorder.service_time = Some(histogram("hdrHistogram.serviceTime", text)?);
    }
    recorder.error_latency = histogram("mergeable.errorLatency", &exact.error_latency)?;
    recorder.retries = json.retries;
    if let Some(text) = &exact.send_lag {
        recorder.send_lag = Some(histogram("mergeable.sendLag", text)?);
    } else {
        // A shard from a build without it: the merge has no send lag rather than a wrong one.
        recorder.send_lag = None;
    }
    if let Some(text) = &exact.round_trip {
        recorder.round_trip = Some(histogram("mergeable.roundTrip", text)?);
    }
    if let Some(text) = &exact.message_gaps {
        recorder.message_gaps = Some(histogram("mergeable.messageGaps", text)?);
    }
    if let Some(text) = &exact.message_latency {
        recorder.message_latency = Some(histogram("mergeable.messageLatency", text)?);
    }
    recorder.messages_unstamped = json.messages_unstamped;
    recorder.stamps_ahead = json.stamps_ahead;
    for (name, count) in &json.status_code_distribution {
        let code = Code::from_name(name)
            .ok_or_else(|| fail(format!("unknown status '{name}' in statusCodeDistribution")))?;
        recorder.status[code as usize] += count;
    }
    if recorder.count() != json.count {
        return Err(fail(format!(
            "its statuses add up to {} calls but its count is {}: the file was changed or cut",
            recorder.count(),
            json.count
        )));
    }
    recorder.errors = json.error_distribution.clone();
    recorder.warmup_calls_in_window = json.warmup_calls_in_window;
    recorder.warmup_call_max_ns = json.warmup_call_slowest;
    recorder.all_latency_sum_ns = u128::from(exact.all_latency_sum_ns);
    recorder.messages_sent = json.messages_sent;
    recorder.messages_received = json.messages_received;
    recorder.per_second = json
        .per_second
        .iter()
        .map(|point| grpclab_load::SecondStats {
            count: point.count,
            errors: point.errors,
            latency_max_ns: point.slowest,
            in_flight_max: point.in_flight_max,
            ..Default::default()
        })
        .collect();
    for second in &exact.per_second {
        let index = usize::try_from(second.second).unwrap_or(usize::MAX);
        let Some(stats) = recorder.per_second.get_mut(index) else {
            return Err(fail(format!(
                "mergeable.perSecond has second {index}, past perSecond's {}",
                json.per_second.len()
            )));
        };
        stats.latency_sum_ns = second.latency_sum_ns;
        stats.messages_sent = second.messages_sent;
        stats.messages_received = second.messages_received;
        if let Some(text) = &second.latency {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text.trim())
                .map_err(|err| fail(format!("second {index}'s histogram: {err}")))?;
            recorder.add_second_histogram(index, bytes);
        }
    }
    // A method's or a flow's figures as its JSON entry gives them.
    let part_recorder = |what: String,
                         hdr: &str,
                         statuses: &BTreeMap<String, u64>,
                         errors: &BTreeMap<String, u64>,
                         unexpected: &BTreeMap<String, u64>|
     -> Result<Recorder, InputError> {
        let mut recorder = Recorder::new(false, None);
        recorder.set_latency(histogram(&format!("{what}.hdrHistogram"), hdr)?);
        for (name, count) in statuses {
            let code = Code::from_name(name)
                .ok_or_else(|| fail(format!("unknown status '{name}' in {what}'s statuses")))?;
            recorder.status[code as usize] += count;
        }
        recorder.errors = errors.clone();
        recorder.unexpected = unexpected.clone();
        Ok(recorder)
    };
    let mix = json.mix.as_ref();
    let methods = mix
        .iter()
        .flat_map(|mix| &mix.methods)
        .map(|method| {
            let mut recorder = part_recorder(
                format!("mix.methods[{}]", method.name),
                &method.hdr_histogram,
                &method.status_code_distribution,
                &method.error_distribution,
                &method.unexpected_distribution,
            )?;
            recorder.all_latency_sum_ns = u128::from(method.latency_sum);
            recorder.retries = method.retries;
            Ok(grpclab_load::MethodResult {
                name: method.name.clone(),
                weight: method.weight,
                recorder,
            })
        })
        .collect::<Result<Vec<_>, InputError>>()?;
    let flows = mix
        .iter()
        .flat_map(|mix| &mix.flows)
        .map(|flow| {
            Ok(grpclab_load::FlowResult {
                name: flow.name.clone(),
                weight: flow.weight,
                steps: flow.steps.clone(),
                recorder: part_recorder(
                    format!("mix.flows[{}]", flow.name),
                    &flow.hdr_histogram,
                    &flow.status_code_distribution,
                    &flow.error_distribution,
                    &flow.unexpected_distribution,
                )?,
            })
        })
        .collect::<Result<Vec<_>, InputError>>()?;
    let method_names: Vec<&str> = methods.iter().map(|m| m.name.as_str()).collect();
    if let Some(limit) = options.details {
        let mut calls = Vec::with_capacity(json.details.len());
        for call in &json.details {
            let ended = time("details[].timestamp", &call.timestamp)?;
            calls.push(CallDetail {
                ended_ns: u64::try_from(
                    ended
                        .duration_since(window_start)
                        .unwrap_or_default()
                        .as_nanos(),
                )
                .unwrap_or(u64::MAX),
                latency_ns: call.latency,
                code: Code::from_name(&call.status).unwrap_or(Code::Unknown),
                error: (!call.error.is_empty()).then(|| call.error.as_str().into()),
                messages_sent: 0,
                messages_received: 0,
                method: method_names
                    .iter()
                    .position(|name| *name == call.method)
                    .unwrap_or(0) as u32,
                flow_run: call.flow_run,
            });
        }
        recorder.details = Some(CallLog { limit, calls });
    }

    let result = LoadResult {
        started_at: window_start,
        elapsed: Duration::from_nanos(json.measured_window),
        whole_run: Duration::from_nanos(json.whole_run),
        end_reason: match json.end_reason.as_str() {
            "timeout" => EndReason::Timeout,
            "cancel" => EndReason::Cancel,
            _ => EndReason::Total,
        },
        recorder,
        reconnects: json.reconnects,
        planned_reconnects: json.planned_reconnects,
        abandoned: json.abandoned,
        ignored: json.ignored_in_flight,
        unsent: json.unsent,
        unsent_by_cause: grpclab_load::Unsent {
            never_taken: json.unsent_never_taken,
            stopped: json.unsent_stopped,
        },
        unaccounted: json.unaccounted,
        server_windows: json.server_windows.map(Into::into),
        window_waits: json.window_waits.map(Into::into).unwrap_or_default(),
        render_failures: json.render_failures,
        first_send,
        calls_by_address: json
            .options
            .addresses
            .iter()
            .map(|share| share.calls)
            .collect(),
        addresses: json
            .options
            .addresses
            .iter()
            .filter_map(|share| share.address.parse().ok())
            .collect(),
        methods,
        flows,
    };
    Ok(Part {
        source,
        settings: settings(&json),
        histogram_form: format!(
            "{}, {}",
            json.hdr_histogram.unit, json.hdr_histogram.encoding
        ),
        report: Report {
            history: None,
            options,
            result,
            thresholds: Vec::new(),
            bound_by: None,
            sharding: None,
        },
        sharding,
    })
}

/// The settings that make two results parts of one run: the target, the call and its
/// payload, and the whole run's totals (each generator's options hold the totals; its
/// part is in `sharding`).
fn settings(json: &JsonReport) -> Vec<(&'static str, String)> {
    let o = &json.options;
    vec![
        ("the target (host)", o.host.clone()),
        ("the call", o.call.clone()),
        ("the scenario", o.scenario.clone()),
        ("the .proto", o.proto.clone()),
        ("the payload (-d)", o.data.to_string()),
        ("the rate (--rps)", o.rate.to_string()),
        ("the load schedule", o.load_schedule.clone()),
        (
            "the load schedule's steps",
            format!(
                "{} {} {} {} {}",
                o.load_start, o.load_end, o.load_step, o.load_step_duration, o.load_max_duration
            ),
        ),
        ("-c", o.concurrency.to_string()),
        ("the concurrency schedule", o.concurrency_schedule.clone()),
        ("--connections", o.connections.to_string()),
        ("-n", o.total.to_string()),
        ("-z", format_ns(o.duration)),
        ("--warmup", format_ns(o.warmup)),
        ("-t", format_ns(o.timeout)),
        ("--count-errors", o.count_errors.to_string()),
        (
            "the metadata (-m)",
            serde_json::to_string(&o.metadata).unwrap_or_default(),
        ),
        ("-b (binary payload)", o.binary.to_string()),
        (
            "the mix seed",
            json.mix
                .as_ref()
                .map(|mix| mix.seed.to_string())
                .unwrap_or_default(),
        ),
        (
            "the mix's methods and weights",
            json.mix
                .as_ref()
                .map(|mix| {
                    mix.methods
                        .iter()
                        .map(|method| format!("{}={}", method.name, method.weight))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default(),
        ),
        ("the streaming flags", o.stream.clone()),
        ("the network (--network)", o.network.clone()),
        ("the protocol (--protocol)", o.protocol.clone()),
        ("the codec (--codec)", o.codec.clone()),
        (
            "what the calls send (payloads, metadata, workload entries)",
            o.requests_digest.clone(),
        ),
    ]
}

fn format_ns(ns: u64) -> String {
    humantime::format_duration(Duration::from_nanos(ns)).to_string()
}

/// The run's settings back from ghz's options and grpclab's beside them.
fn run_options(json: &JsonReport) -> RunOptions {
    let o = &json.options;
    let duration = |ns: u64| (ns > 0).then(|| Duration::from_nanos(ns));
    RunOptions {
        tls: TlsOptions {
            insecure: o.insecure,
            cacert: o.cacert.clone(),
            cert: o.cert.clone(),
            key: o.key.clone(),
            cname: o.cname.clone(),
            skip_verify: o.skip_tls,
        },
        compression: o.enable_compression,
        name: (!json.name.is_empty()).then(|| json.name.clone()),
        tags: json.tags.clone(),
        host: o.host.clone(),
        authority: o.authority.clone(),
        addresses: o
            .addresses
            .iter()
            .map(|share| share.address.clone())
            .collect(),
        lb_strategy: o.lb_strategy.clone(),
        call: o.call.clone(),
        scenario: o.scenario.clone(),
        proto: (!o.proto.is_empty()).then(|| o.proto.clone()),
        import_paths: o.import_paths.clone(),
        data: (!o.data.is_null()).then(|| o.data.clone()),
        binary: o.binary,
        metadata: o.metadata.clone(),
        distinct_requests: o.distinct_requests,
        mix_seed: json.mix.as_ref().map(|mix| mix.seed),
        concurrency: o.concurrency as usize,
        connections: o.connections as usize,
        rps: o.rate,
        duration: duration(o.duration),
        total: (o.total > 0).then_some(o.total),
        warmup: Duration::from_nanos(o.warmup),
        timeout: duration(o.timeout),
        dial_timeout: Duration::from_nanos(o.dial_timeout),
        keepalive: Duration::from_nanos(o.keepalive),
        network: o.network.clone(),
        protocol: o.protocol.clone(),
        codec: o.codec.clone(),
        cpus: o.cpus as usize,
        validate: o.validate,
        transport: o.transport.clone(),
        details: o.details_limit,
        count_errors: o.count_errors,
        stream: o.stream.clone(),
        requests_digest: o.requests_digest.clone(),
        skip_first: o.skip_first,
        load: shape(
            &o.load_schedule,
            [o.load_start, o.load_end],
            o.load_step,
            [o.load_step_duration, o.load_max_duration],
        ),
        concurrency_shape: shape(
            &o.concurrency_schedule,
            [o.concurrency_start, o.concurrency_end],
            o.concurrency_step,
            [o.concurrency_step_duration, o.concurrency_max_duration],
        ),
    }
}

/// A load or concurrency schedule back from ghz's option fields: its name, start and end,
/// step, and step and maximum durations (ns).
fn shape(schedule: &str, [start, end]: [u64; 2], step: i64, [each, max]: [u64; 2]) -> LoadShape {
    LoadShape {
        schedule: schedule.to_owned(),
        start: start as f64,
        end: end as f64,
        step: step as f64,
        step_duration: Duration::from_nanos(each),
        max_duration: Duration::from_nanos(max),
    }
}
