//! `grpclab bench`'s flags and grpc_bench's environment variables, resolved into the
//! harness's typed settings ([`BenchConfig`], [`BenchRequest`]).

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use super::exit::{harness_error, verdict_exit};
use super::session::{progress_line, Session};
use std::time::Duration;

use super::args::{BenchArgs, BenchSettings, ProfileKind};
use crate::InputError;
use grpclab_harness::bench::config::{
    parse_client_cpus, parse_cpus, parse_duration, parse_memory, parse_qps, parse_streams,
    BenchClient, BenchConfig,
};
use grpclab_harness::bench::profile::CallGraph;
use grpclab_harness::bench::{BenchRequest, PreparedBench};

/// `grpclab bench`: prepares, runs every row in a session (store, metrics, Ctrl-C), shows
/// the live view on a terminal, prints the table and says how it ended.
pub fn run(args: &BenchArgs) -> anyhow::Result<ExitCode> {
    let prepared = prepare(args)?;
    let Session {
        cancel,
        mut history,
        metrics: endpoint,
    } = Session::start(Some(&args.history), Some(&args.metrics))?;
    let metrics = endpoint.as_ref().map(|e| std::sync::Arc::clone(&e.metrics));
    let live = !args.no_tui && std::io::stderr().is_terminal();
    let view = if live {
        crate::live::LiveView::start("grpclab bench".to_owned())
            .ok()
            .map(std::cell::RefCell::new)
    } else {
        None
    };
    // Each row, once written: stored (its note beside the results, for the page),
    // and its live metrics set to the final figures.
    let mut notes: crate::report::Notes = Vec::new();
    let mut row_written =
        |dir: &std::path::Path,
         params: &[(String, String)],
         row: &grpclab_harness::bench::runner::ImplResult| {
            if let (Some(metrics), Some(load)) = (&metrics, &row.load) {
                metrics.finish_saved(&row.name, load);
            }
            if let Some(note) = super::history::store_bench_row(&mut history, dir, params, row) {
                notes.push((row.name.clone(), note));
                if let Err(err) = crate::report::write_notes(dir, &notes) {
                    let _ = writeln!(
                        std::io::stderr(),
                        "WARNING: cannot write {}: {err}",
                        crate::report::HISTORY_FILE
                    );
                }
            }
        };
    let outcome = match &view {
        Some(view) => {
            let mut lines = |line: &str| view.borrow_mut().log(line);
            let mut show = |row: &str, snapshot: &grpclab_load::ProgressSnapshot| {
                if let Some(metrics) = &metrics {
                    metrics.update(row, snapshot);
                }
                view.borrow_mut().update(snapshot)
            };
            grpclab_harness::bench::execute(
                prepared,
                &cancel,
                grpclab_harness::bench::BenchHooks {
                    progress: &mut lines,
                    snapshots: Some(&mut show),
                    row_written: &mut row_written,
                    after_write: &super::report::write_page,
                },
            )
        }
        None => {
            let mut to_metrics = |row: &str, snapshot: &grpclab_load::ProgressSnapshot| {
                if let Some(metrics) = &metrics {
                    metrics.update(row, snapshot);
                }
            };
            grpclab_harness::bench::execute(
                prepared,
                &cancel,
                grpclab_harness::bench::BenchHooks {
                    progress: &mut progress_line(&cancel),
                    // Snapshots cost the run a little (each second's histogram handed
                    // over): asked for only when something shows them.
                    snapshots: if metrics.is_some() {
                        Some(&mut to_metrics)
                    } else {
                        None
                    },
                    row_written: &mut row_written,
                    after_write: &super::report::write_page,
                },
            )
        }
    };
    if let Some(view) = view {
        // The lines shown in the view stay on the terminal after it closes.
        for line in view.into_inner().finish() {
            let _ = writeln!(std::io::stderr(), "{line}");
        }
    }
    if let Some(endpoint) = endpoint {
        endpoint.end();
    }
    let outcome = outcome.map_err(harness_error)?;
    // Results are on disk already; a closed stdout or stderr only loses the echo.
    let _ = writeln!(std::io::stdout(), "{}", outcome.table);
    let _ = writeln!(std::io::stderr(), "results: {}", outcome.dir.display());
    let page = outcome.dir.join(crate::report::REPORT_FILE);
    if page.is_file() {
        let _ = writeln!(std::io::stderr(), "report: {}", page.display());
    }
    if outcome.any_failed() || cancel.is_cancelled() {
        return Ok(ExitCode::from(crate::EXIT_FAILURE));
    }
    Ok(verdict_exit(
        "row thresholds failed",
        &outcome.thresholds_failed(),
    ))
}

/// Validates `grpclab bench`'s arguments into a bench ready to run.
pub fn prepare(args: &BenchArgs) -> Result<PreparedBench, InputError> {
    prepare_in(args, &|name| std::env::var(name))
}

/// [`prepare`] with the environment variables read from `env`.
fn prepare_in(args: &BenchArgs, env: Environment<'_>) -> Result<PreparedBench, InputError> {
    let profile_cpu = if args.profile.contains(&ProfileKind::CpuDwarf) {
        Some(CallGraph::Dwarf)
    } else if args.profile.contains(&ProfileKind::Cpu) {
        Some(CallGraph::FramePointers)
    } else {
        None
    };
    let workload = match &args.workload {
        Some(path) => Some(grpclab_harness::workload::from_file(path)?),
        None => None,
    };
    // A threshold on one entry of the mix goes by the entry's name, or its method's; a
    // flow's step by its name or `step:NAME`, a flow by `flow:NAME`.
    let mut names: Vec<String> = workload
        .iter()
        .flat_map(|mix| &mix.calls)
        .map(grpclab_harness::workload::MixCall::label)
        .collect();
    for flow in workload.iter().flat_map(|mix| &mix.flows) {
        for step in &flow.steps {
            names.push(step.name.clone());
            names.push(format!("step:{}", step.name));
        }
        names.push(format!("flow:{}", flow.name));
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut config = bench_config_in(&args.settings, env)?;
    config.client = args.client.into();
    if config.client != BenchClient::Grpclab {
        let client = config.client.name();
        let refused = if workload.is_some() {
            Some("--workload (a mix of methods is grpclab's)")
        } else if !args.capacity.is_empty() {
            Some("--capacity (its probes are grpclab's open loops)")
        } else if !args.thresholds.is_empty() {
            Some("--threshold (judged on grpclab's exact histogram; ghz reports seven percentiles)")
        } else {
            None
        };
        if let Some(flag) = refused {
            return Err(InputError(format!(
                "--client {client} cannot run with {flag}: drop one of the two"
            )));
        }
    }
    grpclab_harness::bench::prepare(BenchRequest {
        config,
        suite: grpclab_harness::bench::suite_of(args.settings.suite.as_deref())?,
        implementations: &args.implementations,
        sweep: &args.sweep,
        networks: &args.network,
        profile_cpu,
        profile_alloc: args.profile.contains(&ProfileKind::Alloc),
        thresholds: args
            .thresholds
            .iter()
            .map(|text| {
                let mut threshold = grpclab_results::verdict::Threshold::parse(text)?;
                threshold.resolve_method(&names, "--threshold")?;
                Ok::<_, crate::InputError>(threshold)
            })
            .collect::<Result<Vec<_>, _>>()?,
        capacity: capacity_plan(args)?,
        workload,
    })
}

/// Where settings' environment variables are read: the process's, or a test's.
type Environment<'a> = &'a dyn Fn(&str) -> Result<String, std::env::VarError>;

/// One setting: the flag if given, else the environment variable, else the default.
fn setting<T>(
    env: Environment<'_>,
    flag_value: Option<&str>,
    flag: &str,
    variable: &str,
    default: &str,
    example: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<T, InputError> {
    let (source, text) = match (flag_value, env(variable)) {
        (Some(value), _) => (flag.to_owned(), value.to_owned()),
        (None, Ok(value)) => (variable.to_owned(), value),
        (None, Err(std::env::VarError::NotUnicode(_))) => {
            return Err(InputError(format!("{variable} is not valid UTF-8")))
        }
        (None, Err(std::env::VarError::NotPresent)) => {
            return parse(default)
                .map_err(|e| InputError(format!("built-in default of {variable} is invalid: {e}")))
        }
    };
    parse(text.trim()).map_err(|reason| {
        InputError(format!(
            "{source}='{text}' is invalid: {reason}; e.g. {variable}={example}"
        ))
    })
}

/// The bench settings: each flag if given, else its grpc_bench environment variable, else the
/// default.
pub fn bench_config(args: &BenchSettings) -> Result<BenchConfig, InputError> {
    bench_config_in(args, &|name| std::env::var(name))
}

/// [`bench_config`] with the environment variables read from `env`.
fn bench_config_in(args: &BenchSettings, env: Environment<'_>) -> Result<BenchConfig, InputError> {
    let duration = setting(
        env,
        args.duration.as_deref(),
        "--duration",
        "GRPC_BENCHMARK_DURATION",
        "20s",
        "20s",
        parse_duration,
    )?;
    if duration.is_zero() {
        return Err(InputError(
            "GRPC_BENCHMARK_DURATION must be longer than 0s".to_owned(),
        ));
    }
    let config = BenchConfig {
        duration,
        warmup: setting(
            env,
            args.warmup.as_deref(),
            "--warmup",
            "GRPC_BENCHMARK_WARMUP",
            "5s",
            "5s",
            |t| {
                if t.trim() == "0" {
                    Ok(Duration::ZERO)
                } else {
                    parse_duration(t)
                }
            },
        )?,
        server_cpus: setting(
            env,
            args.server_cpus.as_deref(),
            "--server-cpus",
            "GRPC_SERVER_CPUS",
            "1",
            "1",
            parse_cpus,
        )?,
        server_ram: setting(
            env,
            args.server_ram.as_deref(),
            "--server-ram",
            "GRPC_SERVER_RAM",
            "512m",
            "512m",
            parse_memory,
        )?,
        connections: setting(
            env,
            args.connections.as_deref(),
            "--connections",
            "GRPC_CLIENT_CONNECTIONS",
            "50",
            "50",
            parse_streams,
        )?,
        concurrency: setting(
            env,
            args.concurrency.as_deref(),
            "--concurrency",
            "GRPC_CLIENT_CONCURRENCY",
            "1000",
            "1000",
            parse_streams,
        )?,
        qps: setting(
            env,
            args.qps.as_deref(),
            "--qps",
            "GRPC_CLIENT_QPS",
            "0",
            "0",
            parse_qps,
        )?,
        client_cpus: setting(
            env,
            args.client_cpus.as_deref(),
            "--client-cpus",
            "GRPC_CLIENT_CPUS",
            "1",
            "1",
            parse_client_cpus,
        )?,
        scenario: setting(
            env,
            args.scenario.as_deref(),
            "--scenario",
            "GRPC_REQUEST_SCENARIO",
            "complex_proto",
            "complex_proto",
            |t| {
                if t.is_empty() {
                    Err("empty".to_owned())
                } else {
                    Ok(t.to_owned())
                }
            },
        )?,
        ready_timeout: args.ready_timeout,
        stop_grace: args.stop_grace,
        results_dir: args.results_dir.clone(),
        tls: args.tls,
        tls_pair: args.tls_cert.clone().zip(args.tls_key.clone()),
        client: grpclab_harness::bench::config::BenchClient::default(),
        network: grpclab_net::NetworkSpec::Loopback,
        protocol: grpclab_core::protocol::Protocol::Grpc,
    };
    grpclab_load::config::connections_fit(
        config.connections,
        config.concurrency,
        ["GRPC_CLIENT_CONNECTIONS", "GRPC_CLIENT_CONCURRENCY"],
    )
    .map_err(|err| InputError(err.to_string()))?;
    Ok(config)
}

/// `--capacity SLO ...`: the plan every row's search follows, `None` without the flag.
fn capacity_plan(
    args: &BenchArgs,
) -> Result<Option<grpclab_harness::bench::runner::CapacityPlan>, crate::InputError> {
    if args.capacity.is_empty() {
        return Ok(None);
    }
    let min_probe = std::time::Duration::from_secs(2);
    if args.capacity_probe_max < min_probe {
        return Err(crate::InputError(format!(
            "--capacity-probe-max {:?}: at least 2s (probes run 2 s at the least)",
            args.capacity_probe_max
        )));
    }
    let slo = args
        .capacity
        .iter()
        .map(|text| {
            let mut threshold = grpclab_results::verdict::Threshold::parse(text).map_err(|err| {
                crate::InputError(err.0.replacen("--threshold", "--capacity", 1))
            })?;
            threshold.resolve_method(&[], "--capacity")?;
            if threshold.is_throughput() {
                return Err(crate::InputError(format!(
                    "--capacity '{text}': the throughput is what the search finds, not a service level; give latency or errors, e.g. 'p99<=10ms'"
                )));
            }
            Ok(threshold)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(grpclab_harness::bench::runner::CapacityPlan {
        slo,
        min_probe,
        max_probe: args.capacity_probe_max,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::{Cli, Command};
    use clap::Parser;

    fn prepare_from(args: &[&str]) -> Option<Result<PreparedBench, InputError>> {
        let mut argv = vec!["grpclab", "bench"];
        argv.extend_from_slice(args);
        // A value clap refuses never reaches our parsers (clap exits 2 itself).
        let cli = Cli::try_parse_from(argv).ok()?;
        let Command::Bench(bench) = cli.command else {
            return None;
        };
        Some(prepare(&bench))
    }

    /// As [`prepare_from`], with the process environment replaced by `env` (a variable and
    /// its value; every other variable absent).
    fn prepare_with_env(
        args: &[&str],
        env: (&str, &str),
    ) -> Option<Result<PreparedBench, InputError>> {
        let mut argv = vec!["grpclab", "bench"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_from(argv).ok()?;
        let Command::Bench(bench) = cli.command else {
            return None;
        };
        let lookup = |name: &str| {
            if name == env.0 {
                Ok(env.1.to_owned())
            } else {
                Err(std::env::VarError::NotPresent)
            }
        };
        Some(prepare_in(&bench, &lookup))
    }

    /// `--client ghz` takes grpc_bench's settings and runs; what only grpclab's engine can do
    /// (a mix, a capacity search, thresholds on its histogram, streaming calls) is refused in
    /// one line naming both flags.
    #[test]
    fn client_ghz_refuses_what_only_grpclabs_engine_runs() {
        let prepared = prepare_from(&["lab", "--client", "ghz"]).unwrap().unwrap();
        assert_eq!(prepared.config.client, BenchClient::Ghz);
        assert_eq!(prepared.runs[0].config.client, BenchClient::Ghz);
        let plain = prepare_from(&["lab"]).unwrap().unwrap();
        assert_eq!(plain.config.client, BenchClient::Grpclab);
        for (extra, named) in [
            (&["--capacity", "p99<=10ms"][..], "--capacity"),
            (&["--threshold", "p99<=10ms"][..], "--threshold"),
            (
                &["--scenario", "server_stream_1kB"][..],
                "grpc_bench's client runs unary calls",
            ),
        ] {
            let mut args = vec!["lab", "--client", "ghz"];
            args.extend_from_slice(extra);
            let Some(Err(err)) = prepare_from(&args) else {
                panic!("{args:?} was accepted");
            };
            assert!(err.0.contains(named), "{args:?}: {}", err.0);
            assert!(err.0.contains("--client ghz"), "{args:?}: {}", err.0);
        }
        assert!(
            prepare_from(&["lab", "--client", "k6"]).is_none(),
            "clap refuses k6"
        );
    }

    /// A swept concurrency below the run's connections (the default 50) runs that cell with
    /// one connection per stream and says so; connections swept above concurrency are refused
    /// with what to do.
    #[test]
    fn a_swept_concurrency_below_the_connections_caps_them_and_says_so() {
        let lookup = |_: &str| Err(std::env::VarError::NotPresent);
        let cli = Cli::try_parse_from(["grpclab", "bench", "lab", "--sweep", "concurrency=10,100"])
            .unwrap();
        let Command::Bench(bench) = cli.command else {
            unreachable!()
        };
        let prepared = prepare_in(&bench, &lookup).unwrap();
        let connections: Vec<usize> = prepared.runs.iter().map(|r| r.config.connections).collect();
        assert_eq!(connections, [10, 50]);
        assert_eq!(prepared.notes.len(), 1, "{:?}", prepared.notes);
        assert!(
            prepared.notes[0].contains("'lab concurrency=10' ran 10 connections, not 50"),
            "{:?}",
            prepared.notes
        );
        let cli = Cli::try_parse_from([
            "grpclab",
            "bench",
            "lab",
            "--sweep",
            "connections=200",
            "--sweep",
            "concurrency=100",
        ])
        .unwrap();
        let Command::Bench(bench) = cli.command else {
            unreachable!()
        };
        let err = prepare_in(&bench, &lookup).err().unwrap().0;
        assert!(
            err.contains("sweep connections no higher than concurrency"),
            "{err}"
        );
    }

    /// `grpclab bench` never panics on a value a user can type: every flag and
    /// sweep value is accepted or refused with a message naming it.
    #[test]
    fn every_typed_value_is_accepted_or_refused_by_name_never_a_panic() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let values = crate::cli::typed_values(&mut seed);
        let flags = [
            ("--duration", "GRPC_BENCHMARK_DURATION"),
            ("--warmup", "GRPC_BENCHMARK_WARMUP"),
            ("--server-cpus", "GRPC_SERVER_CPUS"),
            ("--server-ram", "GRPC_SERVER_RAM"),
            ("--connections", "GRPC_CLIENT_CONNECTIONS"),
            ("--concurrency", "GRPC_CLIENT_CONCURRENCY"),
            ("--qps", "GRPC_CLIENT_QPS"),
            ("--client-cpus", "GRPC_CLIENT_CPUS"),
        ];
        let sweep_keys = [
            "concurrency",
            "connections",
            "qps",
            "server_cpus",
            "client_cpus",
        ];
        for value in &values {
            for (flag, variable) in flags {
                let flag_and_value = format!("{flag}={value}");
                let outcome = std::panic::catch_unwind(|| prepare_from(&[&flag_and_value]));
                let Ok(outcome) = outcome else {
                    panic!("{flag_and_value} panicked");
                };
                if let Some(Err(err)) = outcome {
                    assert!(
                        err.0.contains(flag) || err.0.contains(variable),
                        "{flag_and_value}: {}",
                        err.0
                    );
                }
            }
            for key in sweep_keys {
                let sweep = format!("{key}={value}");
                let outcome = std::panic::catch_unwind(|| {
                    prepare_from(&["--concurrency=1000000", "--sweep", &sweep])
                });
                let Ok(outcome) = outcome else {
                    panic!("--sweep {sweep} panicked");
                };
                if let Some(Err(err)) = outcome {
                    assert!(err.0.contains("--sweep"), "--sweep {sweep}: {}", err.0);
                }
            }
        }
        // The same values from the environment: accepted, or refused naming the variable.
        for value in &values {
            for (flag, variable) in flags {
                let outcome =
                    std::panic::catch_unwind(|| prepare_with_env(&[], (variable, value.as_str())));
                let Ok(outcome) = outcome else {
                    panic!("{variable}={value} panicked");
                };
                if let Some(Err(err)) = outcome {
                    assert!(
                        err.0.contains(variable) || err.0.contains(flag),
                        "{variable}={value}: {}",
                        err.0
                    );
                }
            }
        }
        // Absurd values that once got through, refused.
        for absurd in ["1e9", "1e20", "inf", "NaN"] {
            let sweep = format!("server_cpus={absurd}");
            let outcome = prepare_from(&["--sweep", &sweep]).expect("clap accepts it");
            assert!(outcome.is_err(), "--sweep {sweep} was accepted");
            let flag = format!("--server-cpus={absurd}");
            let outcome = prepare_from(&[&flag]).expect("clap accepts it");
            assert!(outcome.is_err(), "{flag} was accepted");
        }
    }
}
