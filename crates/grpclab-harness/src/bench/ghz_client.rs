//! `bench --client ghz`: a row's window driven by ghz as grpc_bench drives it — a warm-up run
//! of GRPC_BENCHMARK_WARMUP whose output is dropped, then the measured run of
//! GRPC_BENCHMARK_DURATION with `--concurrency`, `--connections`, `--rps` (the total rate;
//! grpc_bench's old ghz took a per-worker `--qps`) and `--cpus` = GRPC_CLIENT_CPUS — so a user
//! sees what grpc_bench would have printed for each row. ghz runs on the client's cores (it
//! inherits the pinned thread's affinity) and sends the scenario's first request as binary
//! (`-B`) against its schema as a protoset, so it makes the same calls as grpclab's engine.
//!
//! Its JSON report becomes the row's [`JsonReport`] (ghz's fields as ghz gave them; the window
//! is ghz's `total`; no HDR histogram: latency figures are ghz's seven percentiles), and its
//! CPU, read from this process's reaped children, is the client's CPU in the row's verdict.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use grpclab_core::Scenario;
use grpclab_load::CancellationToken;

use grpclab_results::model::{
    GhzLatencyPoint, HistogramBucket, JsonOptions, JsonReport, LatencyPoint, RunOptions,
};

/// How long past its `-z` a ghz run may go before it is killed (its own drain is 5 s at most).
const OVERRUN: Duration = Duration::from_secs(30);

/// ghz on this machine: on the PATH, else in `$(go env GOPATH)/bin` or `~/go/bin` where
/// `go install` puts it.
pub(crate) fn find() -> Result<PathBuf, String> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("ghz"))
            .find(|candidate| candidate.is_file())
    });
    let gopath = || {
        Command::new("go")
            .args(["env", "GOPATH"])
            .stderr(Stdio::null())
            .output()
            .ok()
            .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
            .filter(|dir| !dir.as_os_str().is_empty())
            .map(|dir| dir.join("bin").join("ghz"))
            .filter(|candidate| candidate.is_file())
    };
    let home = || {
        std::env::var_os("HOME")
            .map(|home| Path::new(&home).join("go").join("bin").join("ghz"))
            .filter(|candidate| candidate.is_file())
    };
    on_path.or_else(gopath).or_else(home).ok_or_else(|| {
        "ghz is not installed: `bash peers/install.sh clients` (go install of ghz v0.121.0), or put ghz on the PATH".to_owned()
    })
}

/// The client as the run's parameters name it: `ghz v0.121.0 (/root/go/bin/ghz)`, or why ghz
/// is missing.
pub fn describe(client: super::config::BenchClient) -> String {
    let binary = match find() {
        Ok(binary) => binary,
        Err(missing) => return format!("{} ({missing})", client.name()),
    };
    // A `go install`ed ghz says "dev" to --version; its module version is in its build info.
    let module = Command::new("go")
        .args(["version", "-m"])
        .arg(&binary)
        .stderr(Stdio::null())
        .output()
        .ok()
        .and_then(|out| {
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .find_map(|line| {
                    let mut fields = line.split_whitespace();
                    (fields.next() == Some("mod") && fields.next() == Some("github.com/bojand/ghz"))
                        .then(|| fields.next().map(str::to_owned))
                        .flatten()
                })
        });
    let version = module.unwrap_or_else(|| "version unknown".to_owned());
    format!("{} {version} ({})", client.name(), binary.display())
}

/// What ghz needs for a row: its binary, the target and the files it reads.
pub struct GhzPlan {
    /// The ghz binary.
    pub binary: PathBuf,
    /// `127.0.0.1:PORT`.
    pub target: String,
    /// The schema as a protoset (`--protoset`).
    pub protoset: PathBuf,
    /// The request as serialized protobuf, unframed (`-B`).
    pub payload: PathBuf,
    /// `package.Service.Method`.
    pub call: String,
    /// GRPC_CLIENT_CONCURRENCY.
    pub concurrency: usize,
    /// GRPC_CLIENT_CONNECTIONS.
    pub connections: usize,
    /// GRPC_CLIENT_QPS (total; 0 = none).
    pub qps: u64,
    /// GRPC_CLIENT_CPUS (ghz's `--cpus`, GOMAXPROCS).
    pub cpus: usize,
    /// `--tls`: the certificate ghz trusts, for `localhost`.
    pub cacert: Option<PathBuf>,
}

impl GhzPlan {
    /// Writes the scenario's schema and first request into `dir` for ghz to read.
    pub fn prepare(
        binary: PathBuf,
        target: String,
        scenario: &Scenario,
        dir: &Path,
        config: &super::config::BenchConfig,
        cacert: Option<PathBuf>,
    ) -> Result<GhzPlan, String> {
        let request = scenario
            .requests()
            .first()
            .ok_or_else(|| format!("scenario '{}' has no request", scenario.name()))?;
        let message = grpclab_core::framing::unframe_single(request)
            .map_err(|err| format!("scenario '{}': its request: {err}", scenario.name()))?;
        std::fs::create_dir_all(dir)
            .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
        let write = |name: &str, bytes: &[u8]| {
            let path = dir.join(name);
            std::fs::write(&path, bytes)
                .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
            Ok::<_, String>(path)
        };
        let method = scenario.method();
        Ok(GhzPlan {
            binary,
            target,
            protoset: write("scenario.protoset", &method.parent_pool().encode_to_vec())?,
            payload: write("request.bin", message)?,
            call: method.full_name().to_owned(),
            concurrency: config.concurrency,
            connections: config.connections,
            qps: config.qps,
            cpus: config.client_cpus,
            cacert,
        })
    }

    /// ghz's arguments for a run of `duration`.
    pub fn args(&self, duration: Duration) -> Vec<String> {
        let mut args = vec![
            format!("--protoset={}", self.protoset.display()),
            format!("--call={}", self.call),
            format!("--concurrency={}", self.concurrency),
            format!("--connections={}", self.connections),
            format!("--duration={}ms", duration.as_millis().max(1)),
            format!("--cpus={}", self.cpus),
            format!("--binary-file={}", self.payload.display()),
            "--format=json".to_owned(),
        ];
        if self.qps > 0 {
            args.push(format!("--rps={}", self.qps));
        }
        match &self.cacert {
            Some(cert) => {
                args.push(format!("--cacert={}", cert.display()));
                args.push("--cname=localhost".to_owned());
            }
            None => args.push("--insecure".to_owned()),
        }
        args.push(self.target.clone());
        args
    }

    /// Runs ghz for `duration` and returns its JSON report and the CPU seconds it used. Ctrl-C
    /// (`cancel`) interrupts it as a terminal would (ghz then reports the calls made so far).
    pub(crate) fn run(
        &self,
        duration: Duration,
        cancel: &CancellationToken,
    ) -> Result<GhzRun, String> {
        let children_before = super::sampler::reaped_children_cpu();
        let started = Instant::now();
        let mut child = Command::new(&self.binary)
            .args(self.args(duration))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|err| format!("cannot start {}: {err}", self.binary.display()))?;
        let stdout = child.stdout.take().map(drain);
        let stderr = child.stderr.take().map(drain);
        let mut interrupted = false;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => {}
                Err(err) => return Err(format!("cannot wait for ghz: {err}")),
            }
            if cancel.is_cancelled() && !interrupted {
                interrupted = true;
                super::process::signal_each(&[child.id()], libc::SIGINT);
            }
            if started.elapsed() > duration + OVERRUN {
                // Killed and reaped: nothing of ghz outlives the row.
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "ghz did not end within {}s of its {}s run; killed",
                    OVERRUN.as_secs(),
                    duration.as_secs_f64()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let cpu_seconds = match (children_before, super::sampler::reaped_children_cpu()) {
            (Some(before), Some(after)) => Some((after - before).max(0.0)),
            _ => None,
        };
        let wall = started.elapsed();
        let stdout = stdout.and_then(|t| t.join().ok()).unwrap_or_default();
        let stderr = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
        if !status.success() && stdout.trim().is_empty() {
            let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
            return Err(format!(
                "ghz failed ({status}): {}",
                last.unwrap_or("it printed nothing")
            ));
        }
        Ok(GhzRun {
            json: stdout,
            cpu_seconds,
            wall,
        })
    }
}

/// One ghz run's output.
pub struct GhzRun {
    /// What ghz printed (`--format=json`).
    pub json: String,
    /// ghz's CPU seconds, user and system.
    pub cpu_seconds: Option<f64>,
    /// From its start to its exit.
    pub wall: Duration,
}

impl GhzRun {
    /// ghz's CPU over its run, percent of one core.
    pub fn cpu_percent(&self) -> Option<f64> {
        self.cpu_seconds
            .map(|cpu| 100.0 * cpu / self.wall.as_secs_f64().max(1e-9))
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// The error texts of calls cut by ghz closing its connections at the end of a timed run.
const CLOSED_AT_END: &[&str] = &[
    "use of closed network connection",
    "the client connection is closing",
    "code = Canceled",
];

/// The part of ghz's JSON report a row keeps.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct GhzJson {
    #[serde(default)]
    date: String,
    #[serde(default)]
    end_reason: String,
    count: u64,
    total: u64,
    average: u64,
    fastest: u64,
    slowest: u64,
    rps: f64,
    #[serde(default)]
    error_distribution: Option<BTreeMap<String, u64>>,
    #[serde(default)]
    status_code_distribution: Option<BTreeMap<String, u64>>,
    #[serde(default)]
    latency_distribution: Option<Vec<GhzLatencyPoint>>,
    #[serde(default)]
    histogram: Option<Vec<HistogramBucket>>,
}

/// ghz's JSON report as a row's report: ghz's figures unchanged, the measured window its
/// `total`, the percentiles its seven, errors every call whose status is not OK.
pub(crate) fn report(json: &str, options: &RunOptions) -> Result<JsonReport, String> {
    let ghz: GhzJson = serde_json::from_str(json).map_err(|err| {
        let start: String = json.chars().take(120).collect();
        format!("ghz's report is not the JSON expected ({err}): {start}")
    })?;
    let statuses = ghz.status_code_distribution.unwrap_or_default();
    let failures = ghz.error_distribution.unwrap_or_default();
    // ghz's default `--duration-stop close` closes its connections at the end of `-z`: the
    // calls then in flight fail with these texts. They are ghz's figures and stay in them;
    // counted apart as `abandoned`, so a verdict on errors is not about the run's end.
    let abandoned = failures
        .iter()
        .filter(|(text, _)| CLOSED_AT_END.iter().any(|cut| text.contains(cut)))
        .map(|(_, count)| count)
        .sum::<u64>()
        .min(options.concurrency as u64);
    let ok = statuses.get("OK").copied().unwrap_or(0);
    let points = ghz.latency_distribution.unwrap_or_default();
    Ok(JsonReport {
        name: options.name.clone().unwrap_or_default(),
        end_reason: ghz.end_reason,
        options: JsonOptions::from_settings(options),
        date: ghz.date,
        count: ghz.count,
        total: ghz.total,
        average: ghz.average,
        fastest: ghz.fastest,
        slowest: ghz.slowest,
        rps: ghz.rps,
        error_distribution: failures,
        abandoned,
        latency_percentiles: points
            .iter()
            .map(|point| LatencyPoint {
                percentage: f64::from(point.percentage),
                latency: point.latency,
            })
            .collect(),
        latency_distribution: points,
        histogram: ghz.histogram.unwrap_or_default(),
        measured_window: ghz.total,
        whole_run: ghz.total,
        measured_rps: ghz.rps,
        ok,
        errors: ghz.count.saturating_sub(ok),
        status_code_distribution: statuses,
        ..JsonReport::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report as ghz v0.121.0 prints it (trimmed to the fields read) becomes the row's
    /// figures: OK calls and errors from the status counts, the seven percentiles readable by
    /// the table.
    #[test]
    fn ghz_json_becomes_the_rows_figures() {
        let json = r#"{"date":"2026-12-05T03:00:00Z","endReason":"timeout","options":{},
            "count":1010,"total":1000000000,"average":2000000,"fastest":100000,
            "slowest":9000000,"rps":1010.0,
            "errorDistribution":{"rpc error: code = Canceled desc = grpc: the client connection is closing":10},
            "statusCodeDistribution":{"OK":1000,"Canceled":10},
            "latencyDistribution":[{"percentage":10,"latency":1000000},{"percentage":90,"latency":3000000},
              {"percentage":95,"latency":4000000},{"percentage":99,"latency":5000000}],
            "histogram":[{"mark":0.0001,"count":1000,"frequency":1}],"details":null}"#;
        let options = RunOptions {
            name: Some("lab".to_owned()),
            transport: "ghz".to_owned(),
            concurrency: 50,
            ..RunOptions::default()
        };
        let row = report(json, &options).unwrap();
        assert_eq!((row.count, row.ok, row.errors), (1010, 1000, 10));
        // Cut by ghz's close at the end, at most one per stream.
        assert_eq!(row.abandoned, 10);
        let fewer_streams = RunOptions {
            concurrency: 4,
            ..options.clone()
        };
        assert_eq!(report(json, &fewer_streams).unwrap().abandoned, 4);
        assert_eq!(row.percentile(99.0), Some(5_000_000));
        assert_eq!(row.measured_window, 1_000_000_000);
        assert_eq!(row.options.transport, "ghz");
        assert_eq!(row.name, "lab");
        // Nothing to decode: the row has no HDR histogram, and says so by having none.
        assert!(row.latency_histogram().is_none());
    }

    #[test]
    fn output_that_is_not_ghz_json_is_one_line() {
        let err = report("panic: send on closed channel", &RunOptions::default()).unwrap_err();
        assert!(
            err.starts_with("ghz's report is not the JSON expected"),
            "{err}"
        );
        assert!(err.contains("panic: send on closed channel"), "{err}");
    }

    #[test]
    fn ghz_gets_grpc_bench_settings() {
        let plan = GhzPlan {
            binary: PathBuf::from("ghz"),
            target: "127.0.0.1:50051".to_owned(),
            protoset: PathBuf::from("/s/scenario.protoset"),
            payload: PathBuf::from("/s/request.bin"),
            call: "helloworld.Greeter.SayHello".to_owned(),
            concurrency: 1000,
            connections: 50,
            qps: 0,
            cpus: 1,
            cacert: None,
        };
        let args = plan.args(Duration::from_secs(20));
        for expected in [
            "--concurrency=1000",
            "--connections=50",
            "--duration=20000ms",
            "--cpus=1",
            "--insecure",
            "--binary-file=/s/request.bin",
            "--call=helloworld.Greeter.SayHello",
        ] {
            assert!(args.iter().any(|a| a == expected), "{expected} in {args:?}");
        }
        assert!(!args.iter().any(|a| a.starts_with("--rps")), "{args:?}");
        assert_eq!(args.last().map(String::as_str), Some("127.0.0.1:50051"));
        let paced = GhzPlan {
            qps: 5000,
            cacert: Some(PathBuf::from("/t/cert.pem")),
            ..plan
        };
        let args = paced.args(Duration::from_secs(1));
        assert!(args.iter().any(|a| a == "--rps=5000"), "{args:?}");
        assert!(args.iter().any(|a| a == "--cacert=/t/cert.pem"), "{args:?}");
        assert!(!args.iter().any(|a| a == "--insecure"), "{args:?}");
    }
}
