//! `grpclab load --network SPEC --serve IMPL`: the run crosses an emulated network. The
//! server runs in a namespace of its own, the load in the client's (this process's thread
//! that runs it, and every thread that one starts), the link between them emulated by
//! grpclab-net; everything is removed afterwards, however the run ends.

use std::io::{BufRead, BufReader};
use std::process::{Child, ExitCode, Stdio};

use clap::ValueEnum;
use grpclab_core::InputError;
use grpclab_net::namespace::SERVER_ADDRESS;
use grpclab_net::{NetworkPair, NetworkSpec};

use crate::cli::args::LoadArgs;

/// Runs the load of `args` across `spec`'s network against the `--serve` server.
pub fn run(args: &LoadArgs, spec: NetworkSpec) -> anyhow::Result<ExitCode> {
    if !args.target.is_empty() {
        return Err(InputError(format!(
            "--network starts the server itself (--serve), inside its namespace: leave HOST:PORT ({}) out",
            args.target
        ))
        .into());
    }
    let Some(implementation) = args.serve else {
        return Err(InputError(
            "--network needs --serve IMPL: the built-in server to start in the server's namespace"
                .to_owned(),
        )
        .into());
    };
    let name = implementation
        .to_possible_value()
        .map_or_else(|| "lab".to_owned(), |value| value.get_name().to_owned());
    let NetworkSpec::Link(link) = spec else {
        // Loopback: the server beside the client, as any run without --network.
        let mut server = start_server(&name, None, "127.0.0.1")?;
        let mut args = args.clone();
        args.target = server.address.clone();
        eprintln!(
            "network: lo (loopback), server {name} at {}",
            server.address
        );
        let code = super::run_across(&args, None);
        say_peak_memory(&server);
        server.stop();
        return code;
    };
    let pair = NetworkPair::up(link).map_err(|err| InputError(err.0))?;
    let mut server = start_server(
        &name,
        Some(pair.server_namespace()),
        &SERVER_ADDRESS.to_string(),
    )?;
    eprintln!(
        "network: {spec}, each direction (emulated by grpclab between two network namespaces: this kernel has no sch_netem); server {name} at {} in {}, the load in {}",
        server.address,
        pair.server_namespace(),
        pair.client_namespace()
    );
    let mut args = args.clone();
    args.target = server.address.clone();
    let across = super::AcrossNetwork {
        pair: &pair,
        server_pid: server.child.id(),
    };
    let code = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                pair.enter_client().map_err(|err| InputError(err.0))?;
                let code = super::run_across(&args, Some(&across));
                // The server's own count, asked across the same link before it stops.
                match crate::cli::stats::fetch(&args.target, None) {
                    Ok(stats) => {
                        eprintln!("network: the server answered {} Greeter calls", stats.calls)
                    }
                    Err(InputError(why)) => {
                        eprintln!("network: the server's count is unknown: {why}")
                    }
                }
                code
            })
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the load's thread panicked")))
    });
    say_peak_memory(&server);
    server.stop();
    let counts = pair.down();
    say_counts(&counts);
    code
}

/// The server's peak resident memory (the kernel's VmHWM), one line.
fn say_peak_memory(server: &StartedServer) {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id()));
    let peak_kib = status.ok().and_then(|status| {
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
    });
    match peak_kib {
        Some(kib) => eprintln!(
            "network: the server's memory peaked at {:.1} MiB resident",
            kib as f64 / 1024.0
        ),
        None => eprintln!("network: the server's peak memory is unknown (it has ended)"),
    }
}

/// What the link did, one line per direction.
fn say_counts(counts: &[grpclab_net::link::DirectionCounts]) {
    for (direction, counts) in ["client → server", "server → client"].iter().zip(counts) {
        eprintln!(
            "network: {direction}: {} packets, {} lost, {} dropped by a full queue, {} delivered; the link's CPU {}",
            counts.packets,
            counts.lost,
            counts.overflowed,
            counts.delivered,
            grpclab_net::link::cpu_text(counts)
        );
    }
}

/// A built-in server started for the run.
struct StartedServer {
    child: Child,
    /// Where it listens, as `load` takes a target.
    address: String,
}

impl StartedServer {
    /// Ends it (SIGTERM, then waits).
    fn stop(&mut self) {
        grpclab_net::process::terminate(&mut self.child);
    }
}

impl Drop for StartedServer {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.stop();
        }
    }
}

/// Starts `grpclab serve --impl NAME` on `host` (inside `namespace`, when given) and waits
/// for its "listening on" line. The server dies with this process, however it ends
/// (PR_SET_PDEATHSIG).
fn start_server(
    name: &str,
    namespace: Option<&str>,
    host: &str,
) -> Result<StartedServer, InputError> {
    let exe = std::env::current_exe()
        .map_err(|err| InputError(format!("cannot find grpclab's own binary: {err}")))?;
    let mut command = grpclab_net::process::command_in(namespace, &exe);
    command
        .args(["serve", "--impl", name, "--host", host, "--port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|err| InputError(format!("cannot start the {name} server: {err}")))?;
    let Some(stderr) = child.stderr.take() else {
        return Err(InputError(format!(
            "the {name} server's stderr was not kept"
        )));
    };
    let mut lines = BufReader::new(stderr).lines();
    let mut said = Vec::new();
    let address = loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some((_, address)) = line.split_once("listening on ") {
                    break address.trim().to_owned();
                }
                said.push(line);
            }
            _ => {
                let _ = child.wait();
                return Err(InputError(format!(
                    "the {name} server ended before it listened: {}",
                    said.join(" / ")
                )));
            }
        }
    };
    // Its later lines are read and dropped, so a full pipe never stalls it.
    std::thread::spawn(move || lines.for_each(drop));
    Ok(StartedServer { child, address })
}
