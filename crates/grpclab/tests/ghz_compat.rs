//! `grpclab load -O json` decodes into ghz's report type.
//!
//! [`GhzReport`] is written from ghz's runner `Report`, `Options`, `LatencyDistribution`,
//! `Bucket` and `ResultDetail` types (runner/reporter.go) with Go's decoding rules in Rust
//! terms: every field required (so a missing one fails), integers where Go has `int`, `uint`
//! or `time.Duration` (so `10.0` fails where Go's decoder fails), `float64` where Go has it,
//! RFC 3339 strings where Go has `time.Time`. Fields ghz does not know are ignored, as Go's
//! decoder ignores them: that is where grpclab's extras live.

use std::collections::BTreeMap;
use std::process::Output;

use serde::Deserialize;

mod common;

use common::{grpclab, Server};

#[derive(Debug, Deserialize)]
#[allow(dead_code)] // The fields exist to be decoded: their presence and types are the test.
struct GhzReport {
    // `omitempty` in ghz: absent when not set, and Go's decoder leaves the field empty.
    #[serde(default)]
    name: String,
    #[serde(rename = "endReason")]
    end_reason: String,
    options: GhzOptions,
    date: String,
    count: u64,
    total: i64,
    average: i64,
    fastest: i64,
    slowest: i64,
    rps: f64,
    #[serde(rename = "errorDistribution")]
    error_distribution: BTreeMap<String, i64>,
    #[serde(rename = "statusCodeDistribution")]
    status_code_distribution: BTreeMap<String, i64>,
    #[serde(rename = "latencyDistribution")]
    latency_distribution: Vec<GhzLatency>,
    histogram: Vec<GhzBucket>,
    details: Vec<GhzDetail>,
    #[serde(default)]
    tags: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct GhzOptions {
    call: String,
    host: String,
    proto: String,
    protoset: String,
    #[serde(rename = "import-paths")]
    import_paths: Vec<String>,
    #[serde(rename = "enable-compression")]
    enable_compression: bool,
    cacert: String,
    cert: String,
    key: String,
    cname: String,
    #[serde(rename = "skipTLS")]
    skip_tls: bool,
    insecure: bool,
    authority: String,
    rps: u64,
    #[serde(rename = "load-schedule")]
    load_schedule: String,
    #[serde(rename = "load-start")]
    load_start: u64,
    #[serde(rename = "load-end")]
    load_end: u64,
    #[serde(rename = "load-step")]
    load_step: i64,
    #[serde(rename = "load-step-duration")]
    load_step_duration: i64,
    #[serde(rename = "load-max-duration")]
    load_max_duration: i64,
    concurrency: u64,
    #[serde(rename = "concurrency-schedule")]
    concurrency_schedule: String,
    #[serde(rename = "concurrency-start")]
    concurrency_start: u64,
    #[serde(rename = "concurrency-end")]
    concurrency_end: u64,
    #[serde(rename = "concurrency-step")]
    concurrency_step: i64,
    #[serde(rename = "concurrency-step-duration")]
    concurrency_step_duration: i64,
    #[serde(rename = "concurrency-max-duration")]
    concurrency_max_duration: i64,
    total: u64,
    #[serde(rename = "async")]
    async_: bool,
    connections: u64,
    duration: i64,
    timeout: i64,
    #[serde(rename = "dial-timeout")]
    dial_timeout: i64,
    keepalive: i64,
    data: serde_json::Value,
    binary: bool,
    metadata: Option<BTreeMap<String, String>>,
    #[serde(rename = "CPUs")]
    cpus: i64,
    name: String,
    #[serde(rename = "skipFirst")]
    skip_first: u64,
}

#[derive(Debug, Deserialize)]
struct GhzLatency {
    percentage: i64,
    latency: i64,
}

#[derive(Debug, Deserialize)]
struct GhzBucket {
    mark: f64,
    count: i64,
    frequency: f64,
}

#[derive(Debug, Deserialize)]
struct GhzDetail {
    timestamp: String,
    latency: i64,
    error: String,
    status: String,
}

fn load(args: &[&str]) -> Output {
    let output = grpclab()
        .arg("load")
        .arg("--insecure")
        .args(args)
        .output()
        .expect("run grpclab");
    assert!(
        common::finished(&output),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn decode(output: &Output) -> GhzReport {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "does not decode as ghz's report: {err}\n{}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

fn rfc3339(text: &str) -> std::time::SystemTime {
    humantime::parse_rfc3339(text).unwrap_or_else(|err| panic!("'{text}' is not RFC 3339: {err}"))
}

#[test]
fn json_and_pretty_decode_into_ghz_report_type() {
    let server = Server::start("tonic-st");
    let target = server.target();
    let before = std::time::SystemTime::now();
    let output = load(&[
        &target,
        "--scenario",
        "complex_proto",
        "-n",
        "300",
        "-c",
        "4",
        "--name",
        "nightly",
        "--tags",
        r#"{"env":"ci"}"#,
        "-m",
        r#"{"x-run":"1"}"#,
        "--details",
        "-O",
        "json",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).lines().count(),
        1,
        "ghz's json is one line"
    );
    let report = decode(&output);
    assert_eq!(report.name, "nightly");
    assert_eq!(report.tags["env"], "ci");
    assert_eq!(report.end_reason, "normal");
    assert_eq!(report.count, 300);
    assert_eq!(report.status_code_distribution["OK"], 300);
    assert!(report.error_distribution.is_empty());
    assert_eq!(report.options.total, 300);
    assert_eq!(report.options.concurrency, 4);
    assert!(report.options.insecure);
    assert_eq!(report.options.metadata.as_ref().unwrap()["x-run"], "1");
    assert_eq!(report.options.name, "nightly");
    // `date` is when the run ended.
    let date = rfc3339(&report.date);
    assert!(date + std::time::Duration::from_secs(1) >= before);
    // ghz's figures and their relations.
    assert!(report.fastest > 0 && report.fastest <= report.slowest);
    assert!(report.average >= report.fastest && report.average <= report.slowest);
    let expected_rps = report.count as f64 / (report.total as f64 / 1e9);
    assert!((report.rps - expected_rps).abs() / expected_rps < 1e-6);
    let percentages: Vec<i64> = report
        .latency_distribution
        .iter()
        .map(|p| p.percentage)
        .collect();
    assert_eq!(percentages, [10, 25, 50, 75, 90, 95, 99]);
    assert!(report
        .latency_distribution
        .windows(2)
        .all(|w| w[0].latency <= w[1].latency));
    assert_eq!(report.histogram.len(), 11);
    assert_eq!(report.histogram.iter().map(|b| b.count).sum::<i64>(), 300);
    let frequencies: f64 = report.histogram.iter().map(|b| b.frequency).sum();
    assert!((frequencies - 1.0).abs() < 1e-9);
    assert!((report.histogram[0].mark * 1e9 - report.fastest as f64).abs() < 1.0);
    // Every call listed, in the order they ended, each within the run.
    assert_eq!(report.details.len(), 300);
    let mut previous = std::time::UNIX_EPOCH;
    for detail in &report.details {
        let at = rfc3339(&detail.timestamp);
        assert!(at >= previous, "in order");
        previous = at;
        assert_eq!(detail.status, "OK");
        assert_eq!(detail.error, "");
        assert!(detail.latency >= report.fastest && detail.latency <= report.slowest + 1);
    }

    let pretty = load(&[
        &target,
        "--scenario",
        "string_100B",
        "-n",
        "20",
        "-O",
        "pretty",
    ]);
    let text = String::from_utf8_lossy(&pretty.stdout);
    assert!(
        text.starts_with("{\n  \""),
        "indented by two spaces: {text}"
    );
    let report = decode(&pretty);
    assert!(report.details.is_empty(), "details are opt-in");
    assert_eq!(report.count, 20);
}

#[test]
fn failed_calls_read_as_ghz_writes_them() {
    let server = Server::start("tonic-st");
    let target = server.target();
    // A 1 µs deadline: every call ends DeadlineExceeded on the client's side. (No schema
    // flag: the descriptors come by reflection.)
    let output = load(&[
        &target,
        "--call",
        "helloworld.Greeter.SayHello",
        "-n",
        "40",
        "-c",
        "2",
        "-t",
        "1us",
        "--details=10",
        "-O",
        "json",
    ]);
    let report = decode(&output);
    assert_eq!(report.count, 40);
    assert_eq!(report.status_code_distribution["DeadlineExceeded"], 40);
    let (message, count) = report.error_distribution.iter().next().unwrap();
    assert!(
        message.starts_with("rpc error: code = DeadlineExceeded desc = "),
        "grpc-go's error text: {message}"
    );
    assert_eq!(*count, 40);
    // ghz: no successful call, so no percentiles and no histogram; the average is over all.
    assert!(report.latency_distribution.is_empty());
    assert!(report.histogram.is_empty());
    assert_eq!((report.fastest, report.slowest), (0, 0));
    assert!(report.average > 0, "ghz's average counts failed calls");
    assert_eq!(report.details.len(), 10, "--details=10");
    assert!(report
        .details
        .iter()
        .all(|d| d.status == "DeadlineExceeded" && d.error == *message));
    let extras: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        extras["detailsKept"],
        serde_json::json!({"kept": 10, "of": 40, "which": "first"}),
        "the output says the list is partial"
    );

    // ghz's --count-errors: the failed calls count in the latency figures too.
    let output = load(&[
        &target,
        "--call",
        "helloworld.Greeter.SayHello",
        "-n",
        "40",
        "-c",
        "2",
        "-t",
        "1us",
        "--count-errors",
        "-O",
        "json",
    ]);
    let report = decode(&output);
    assert_eq!(report.status_code_distribution["DeadlineExceeded"], 40);
    assert_eq!(report.latency_distribution.len(), 7);
    assert!(report.fastest > 0 && report.fastest <= report.slowest);
    assert_eq!(report.histogram.iter().map(|b| b.count).sum::<i64>(), 40);

    // A timed run ends with ghz's `timeout`.
    let output = load(&[
        &target,
        "--scenario",
        "complex_proto",
        "-z",
        "300ms",
        "-c",
        "2",
        "-O",
        "json",
    ]);
    let report = decode(&output);
    assert_eq!(report.end_reason, "timeout");
    assert_eq!(report.options.duration, 300_000_000);
    assert_eq!(report.options.total, 0);
}

/// Splits an InfluxDB line at its unescaped spaces: (measurement+tags, fields, timestamp).
fn influx_parts(line: &str) -> (String, String, u128) {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut escaped = false;
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '\\' if !escaped => {
                escaped = true;
                current.push(c);
                continue;
            }
            '"' if !escaped => quoted = !quoted,
            ' ' if !escaped && !quoted => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        escaped = false;
        current.push(c);
    }
    parts.push(current);
    assert_eq!(
        parts.len(),
        3,
        "not measurement,tags fields timestamp: {line}"
    );
    (
        parts[0].clone(),
        parts[1].clone(),
        parts[2]
            .parse()
            .unwrap_or_else(|_| panic!("timestamp in {line}")),
    )
}

fn field(fields: &str, name: &str) -> String {
    fields
        .split(',')
        .find_map(|pair| pair.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no field {name} in {fields}"))
        .to_owned()
}

#[test]
fn influx_and_prometheus_outputs_read_as_ghz_writes_them() {
    let server = Server::start("tonic-st");
    let target = server.target();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let base = [
        "--scenario",
        "complex_proto",
        "-n",
        "120",
        "-c",
        "4",
        "--name",
        "nightly run",
    ];

    let summary = load(&[&[target.as_str()][..], &base, &["-O", "influx-summary"]].concat());
    let text = String::from_utf8(summary.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    let (head, fields, timestamp) = influx_parts(lines[0]);
    assert!(
        head.starts_with("ghz_run,name=\"nightly\\ run\",call=\"helloworld.Greeter.SayHello\""),
        "{head}"
    );
    assert!(head.contains("n=120,c=4,rps=0,"), "{head}");
    assert!(head.ends_with("errors=0,has_errors=false"), "{head}");
    assert_eq!(field(&fields, "count"), "120");
    assert_eq!(field(&fields, "errors"), "0");
    assert!(
        field(&fields, "rps").split_once('.').unwrap().1.len() == 2,
        "{fields}"
    );
    for name in ["total", "average", "fastest", "slowest", "median", "p95"] {
        assert!(
            field(&fields, name).parse::<u64>().unwrap() > 0,
            "{name} in {fields}"
        );
    }
    assert!(timestamp >= now, "the run's end, in Unix nanoseconds");

    let details = load(&[&[target.as_str()][..], &base, &["-O", "influx-details"]].concat());
    let text = String::from_utf8(details.stdout).unwrap();
    assert_eq!(text.lines().count(), 120, "one line per call");
    for line in text.lines() {
        let (head, fields, timestamp) = influx_parts(line);
        assert!(
            head.starts_with("ghz_detail,") && head.ends_with(",hasError=false"),
            "{head}"
        );
        assert!(
            !head.contains("has_errors"),
            "details carry no run error tags"
        );
        assert!(field(&fields, "latency").parse::<u64>().unwrap() > 0);
        assert_eq!(field(&fields, "status"), "\"OK\"");
        assert_eq!(field(&fields, "error"), "\"\"");
        assert!(timestamp >= now);
    }

    let prometheus = load(&[&[target.as_str()][..], &base, &["-O", "prometheus"]].concat());
    let text = String::from_utf8(prometheus.stdout).unwrap();
    let mut samples: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = series.split_once('{').unwrap();
        assert!(labels.ends_with('}'), "{line}");
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value in {line}"));
        samples
            .entry(name.to_owned())
            .or_default()
            .push((labels.to_owned(), value));
        assert!(
            labels.contains("name=\"nightly run\"") && labels.contains("end_reason=\"normal\"")
        );
    }
    assert_eq!(samples["ghz_run_count"][0].1, 120.0);
    assert_eq!(samples["ghz_run_errors"][0].1, 0.0);
    let buckets: Vec<f64> = samples["ghz_run_histogram_bucket"]
        .iter()
        .map(|(_, v)| *v)
        .collect();
    assert!(
        buckets.windows(2).all(|w| w[0] <= w[1]),
        "cumulative: {buckets:?}"
    );
    assert_eq!(*buckets.last().unwrap(), 120.0, "+Inf holds every call");
    assert_eq!(samples["ghz_run_histogram_count"][0].1, 120.0);
    let quantiles: Vec<&str> = samples["ghz_run_latency"]
        .iter()
        .map(|(labels, _)| labels.rsplit_once("quantile=").unwrap().1)
        .collect();
    assert_eq!(
        quantiles,
        [
            "\"0.1\"}",
            "\"0.25\"}",
            "\"0.5\"}",
            "\"0.75\"}",
            "\"0.9\"}",
            "\"0.95\"}",
            "\"0.99\"}"
        ]
    );
    for line in text.lines().filter(|l| l.starts_with("# TYPE")) {
        assert!(
            ["gauge", "histogram", "summary"].contains(&line.rsplit(' ').next().unwrap()),
            "{line}"
        );
    }
}
