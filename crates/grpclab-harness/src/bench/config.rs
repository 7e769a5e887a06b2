//! The harness's settings: grpc_bench's environment variables, each also a flag (the flag
//! wins), with grpc_bench's defaults. Every invalid value is refused with its variable's (or
//! flag's) name and an example of a valid one.

use std::path::PathBuf;
use std::time::Duration;

/// Everything one `grpclab bench` run is configured with.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BenchConfig {
    /// GRPC_BENCHMARK_DURATION: the measured window.
    #[serde(serialize_with = "as_secs")]
    pub duration: Duration,
    /// GRPC_BENCHMARK_WARMUP: load before the window, not counted.
    #[serde(serialize_with = "as_secs")]
    pub warmup: Duration,
    /// GRPC_SERVER_CPUS: CPU quota of the server, in cores (fractions allowed, as docker --cpus).
    pub server_cpus: f64,
    /// GRPC_SERVER_RAM: memory limit of the server, in bytes.
    pub server_ram: u64,
    /// GRPC_CLIENT_CONNECTIONS.
    pub connections: usize,
    /// GRPC_CLIENT_CONCURRENCY: streams in flight.
    pub concurrency: usize,
    /// GRPC_CLIENT_QPS: total rate; 0 = closed loop.
    pub qps: u64,
    /// GRPC_CLIENT_CPUS: client threads (and cores).
    pub client_cpus: usize,
    /// GRPC_REQUEST_SCENARIO: a built-in scenario or a folder.
    pub scenario: String,
    /// How long a server has to become ready.
    #[serde(serialize_with = "as_secs")]
    pub ready_timeout: Duration,
    /// How long a server has to exit after SIGTERM before SIGKILL.
    #[serde(serialize_with = "as_secs")]
    pub stop_grace: Duration,
    /// Where result folders go.
    pub results_dir: PathBuf,
    /// `--tls`: servers serve TLS and the load speaks it.
    pub tls: bool,
    /// `--tls-cert` and `--tls-key`: the pair to use instead of a generated one.
    #[serde(skip)]
    pub tls_pair: Option<(PathBuf, PathBuf)>,
    /// `--client`: the load generator that drives each window.
    pub client: BenchClient,
    /// `--network`: the network a row's calls cross (loopback unless a row's network axis
    /// says otherwise).
    #[serde(serialize_with = "as_text")]
    pub network: grpclab_net::NetworkSpec,
    /// The wire protocol of a row's calls (`--sweep protocol=grpc,grpc-web,connect`): gRPC
    /// unless a row's protocol axis says otherwise; the others on the h2 crate's transport.
    #[serde(serialize_with = "protocol_name")]
    pub protocol: grpclab_core::protocol::Protocol,
}

fn protocol_name<S: serde::Serializer>(
    protocol: &grpclab_core::protocol::Protocol,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(protocol.name())
}

fn as_text<S: serde::Serializer>(
    network: &grpclab_net::NetworkSpec,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&network.to_string())
}

/// The load generator of a bench's windows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BenchClient {
    /// grpclab's own load engine: exact histograms, its CPU measured, every call accounted.
    #[default]
    Grpclab,
    /// ghz, as grpc_bench runs it (`--concurrency`, `--connections`, `--duration`, a warm-up
    /// run first): the table grpc_bench would have printed, with ghz's own figures.
    Ghz,
}

impl BenchClient {
    /// Its name in tables and verdicts.
    pub fn name(self) -> &'static str {
        match self {
            BenchClient::Grpclab => "grpclab",
            BenchClient::Ghz => "ghz",
        }
    }
}

fn as_secs<S: serde::Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&format!("{}s", duration.as_secs_f64()))
}

/// The most streams or connections a run may ask for: far beyond any server's limits, and
/// small enough that the client's per-stream state always fits in memory.
const MAX_STREAMS: usize = 1_000_000;
/// The most client threads a run may ask for.
const MAX_CLIENT_CPUS: usize = 1024;

fn whole_number_up_to(text: &str, max: usize) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(value) if value > max => Err(format!("must be at most {max}")),
        Ok(value) => Ok(value),
        Err(_) => Err("not a whole number".to_owned()),
    }
}

/// GRPC_CLIENT_CONNECTIONS and GRPC_CLIENT_CONCURRENCY: 1 to [`MAX_STREAMS`].
pub fn parse_streams(text: &str) -> Result<usize, String> {
    whole_number_up_to(text, MAX_STREAMS)
}

/// GRPC_CLIENT_CPUS: 1 to [`MAX_CLIENT_CPUS`] threads (more than the machine's cores is
/// allowed, and reported as oversubscribed).
pub fn parse_client_cpus(text: &str) -> Result<usize, String> {
    whole_number_up_to(text, MAX_CLIENT_CPUS)
}

/// GRPC_CLIENT_QPS: a whole number of requests per second, 0 = unlimited.
pub fn parse_qps(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(value) if value > 1_000_000_000 => Err("must be at most 1000000000".to_owned()),
        Ok(value) => Ok(value),
        Err(_) => Err("not a whole number of requests per second (0 = unlimited)".to_owned()),
    }
}

/// Parses a memory size as docker does: a number with an optional b, k, m or g suffix.
pub fn parse_memory(text: &str) -> Result<u64, String> {
    let lower = text.to_ascii_lowercase();
    let (digits, multiplier) = match lower.chars().last() {
        Some('b') => (&lower[..lower.len() - 1], 1u64),
        Some('k') => (&lower[..lower.len() - 1], 1 << 10),
        Some('m') => (&lower[..lower.len() - 1], 1 << 20),
        Some('g') => (&lower[..lower.len() - 1], 1 << 30),
        _ => (lower.as_str(), 1),
    };
    let value: u64 = digits
        .parse()
        .map_err(|_| "not a size (a number with an optional b, k, m or g suffix)".to_owned())?;
    let bytes = value
        .checked_mul(multiplier)
        .ok_or_else(|| "too large".to_owned())?;
    if bytes < 4 << 20 {
        return Err("below 4m, too little for any server".to_owned());
    }
    Ok(bytes)
}

/// GRPC_SERVER_CPUS: a CPU quota in cores, from 0.01 to the cores this process may use.
pub fn parse_cpus(text: &str) -> Result<f64, String> {
    parse_cpus_within(text, super::limits::available_cores().len())
}

fn parse_cpus_within(text: &str, cores: usize) -> Result<f64, String> {
    let cpus: f64 = text
        .parse()
        .map_err(|_| "not a number of cores".to_owned())?;
    if !(cpus.is_finite() && cpus >= 0.01) {
        return Err("must be at least 0.01 cores".to_owned());
    }
    if cpus > cores as f64 {
        return Err(format!(
            "more than the {cores} core(s) this machine lets grpclab use"
        ));
    }
    Ok(cpus)
}

/// A duration as the settings take it (`20s`, `1m30s`, `500ms`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    grpclab_core::duration::parse_duration(text)
}

impl BenchConfig {
    /// The settings as grpc_bench's variables, for `bench.params`.
    pub fn as_variables(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "GRPC_BENCHMARK_DURATION",
                format!("{}s", self.duration.as_secs_f64()),
            ),
            (
                "GRPC_BENCHMARK_WARMUP",
                format!("{}s", self.warmup.as_secs_f64()),
            ),
            ("GRPC_SERVER_CPUS", self.server_cpus.to_string()),
            ("GRPC_SERVER_RAM", format!("{}m", self.server_ram >> 20)),
            ("GRPC_CLIENT_CONNECTIONS", self.connections.to_string()),
            ("GRPC_CLIENT_CONCURRENCY", self.concurrency.to_string()),
            ("GRPC_CLIENT_QPS", self.qps.to_string()),
            ("GRPC_CLIENT_CPUS", self.client_cpus.to_string()),
            ("GRPC_REQUEST_SCENARIO", self.scenario.clone()),
        ]
    }

    /// Server threads: the CPU quota rounded up (a 0.5-core server still needs a thread).
    pub fn server_threads(&self) -> usize {
        self.server_cpus.ceil().max(1.0) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_parse_like_docker() {
        assert_eq!(parse_memory("512m"), Ok(512 << 20));
        assert_eq!(parse_memory("1g"), Ok(1 << 30));
        assert_eq!(parse_memory("8388608"), Ok(8 << 20));
        assert!(parse_memory("lots").is_err());
        assert!(parse_memory("1k").unwrap_err().contains("below"));
    }

    #[test]
    fn cpus_may_be_fractional_but_positive() {
        assert_eq!(parse_cpus("0.5"), Ok(0.5));
        assert!(parse_cpus("0").is_err());
        assert!(parse_cpus("two").is_err());
        for absurd in ["1e9", "1e20", "inf", "NaN", "-1"] {
            assert!(parse_cpus(absurd).is_err(), "{absurd}");
        }
        assert!(parse_cpus_within("3", 2).unwrap_err().contains("2 core(s)"));
        assert_eq!(parse_cpus_within("2", 2), Ok(2.0));
    }
}
