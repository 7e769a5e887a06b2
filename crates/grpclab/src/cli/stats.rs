//! `grpclab stats [--insecure] HOST:PORT`: read a server's admin counters (`grpclab.admin.v1.Stats/Get`)
//! and print them as JSON, for scripts that compute allocations per call over a window.

use grpclab_server::pb_admin::StatsReply;
use serde::Serialize;

use crate::InputError;

/// The counters, as printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Heap allocations since the server started.
    pub allocations: u64,
    /// Bytes allocated since the server started.
    pub allocated_bytes: u64,
    /// Greeter calls served since the server started.
    pub calls: u64,
    /// Whether the allocation figures were counted.
    pub counting: bool,
    /// The server implementation.
    pub implementation: String,
}

impl From<StatsReply> for Stats {
    fn from(reply: StatsReply) -> Stats {
        Stats {
            allocations: reply.allocations,
            allocated_bytes: reply.allocated_bytes,
            calls: reply.calls,
            counting: reply.counting,
            implementation: reply.implementation,
        }
    }
}

/// `grpclab stats`: a server's counters as JSON on standard output.
pub fn run(args: &super::args::StatsArgs) -> anyhow::Result<std::process::ExitCode> {
    let stats = fetch_for(args)?;
    println!("{}", serde_json::to_string_pretty(&stats)?);
    Ok(std::process::ExitCode::SUCCESS)
}

/// Calls `Stats/Get` on the server `grpclab stats` names: over TLS unless `--insecure`, as
/// every command that dials (`load`, ghz).
pub fn fetch_for(args: &super::args::StatsArgs) -> Result<Stats, InputError> {
    if args.insecure {
        return fetch(&args.target, None).map_err(|InputError(message)| {
            InputError(format!(
                "{message} (asked in plaintext: if it serves TLS, drop --insecure)"
            ))
        });
    }
    let settings = grpclab_core::tls::ClientTls {
        ca_cert: args.cacert.clone(),
        cert: None,
        key: None,
        server_name: args.cname.clone(),
        skip_verify: args.skip_tls,
    };
    let tls = grpclab_core::tls::TlsClient::for_target(&settings, &args.target)
        .map_err(|err| InputError(err.to_string()))?;
    fetch(&args.target, Some(&tls)).map_err(|InputError(message)| {
        if message.contains("--insecure") {
            InputError(message)
        } else {
            InputError(format!(
                "{message} (asked in TLS: if it serves plaintext h2c, add --insecure)"
            ))
        }
    })
}

/// Calls `Stats/Get` on `target` (HOST:PORT), plaintext or over `tls`.
pub fn fetch(
    target: &str,
    tls: Option<&grpclab_core::tls::TlsClient>,
) -> Result<Stats, InputError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| InputError(format!("cannot start a runtime: {err}")))?;
    runtime
        .block_on(grpclab_server::stats::fetch(target, tls))
        .map(Stats::from)
        .map_err(InputError)
}
