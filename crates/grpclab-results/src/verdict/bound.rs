//! "Bound by": what limited a run's figures — the server's CPU (its quota saturated, the
//! cgroup throttling it), the client (its CPU saturated, or its schedule behind), the network
//! (an emulated link at its rate or its own CPU, or the server's HTTP/2 windows holding the
//! requests to a few round trips each while both CPUs idle), the closed
//! loop's concurrency (neither side saturated: latency ≈ streams / throughput, so more streams
//! would have given more), the server's memory (near its limit, or OOM-killed), the
//! connections (what held connections cost: memory near the limit with thousands held, or
//! connections the server closed or refused at its cap or descriptor limit), errors, the
//! offered rate (an open loop the server kept up with), or nothing found. One pure function
//! over the evidence, which the verdict repeats in figures so a reader can check it.

use serde::{Deserialize, Serialize};

/// Past this share of a resource, it is taken to be the limit.
const SATURATED: f64 = 0.90;

/// What limited a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BoundKind {
    /// The server's CPU quota.
    ServerCpu,
    /// The load generator.
    Client,
    /// The closed loop's number of streams.
    Concurrency,
    /// The server's memory limit.
    ServerMemory,
    /// The connections: thousands held with the server's memory near its limit, or
    /// connections the server closed or refused (its connection cap, its descriptor limit).
    Connections,
    /// Failed calls.
    Errors,
    /// The network between client and server: its link's rate or cost, or flow-control
    /// windows smaller than what its round trip needs.
    Network,
    /// An open loop's offered rate, met.
    OfferedRate,
    /// The server or the network, as far as the client can tell (`load` cannot see the
    /// server's CPU).
    ServerOrNetwork,
    /// No resource was near its limit.
    NothingFound,
}

impl BoundKind {
    /// The table's short word.
    pub fn word(self) -> &'static str {
        match self {
            BoundKind::ServerCpu => "server cpu",
            BoundKind::Client => "client",
            BoundKind::Concurrency => "concurrency",
            BoundKind::ServerMemory => "server memory",
            BoundKind::Connections => "connections/memory",
            BoundKind::Errors => "errors",
            BoundKind::Network => "network",
            BoundKind::OfferedRate => "offered rate",
            BoundKind::ServerOrNetwork => "server/network",
            BoundKind::NothingFound => "nothing found",
        }
    }
}

/// The verdict with the figures that decided it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    /// What limited the run.
    pub kind: BoundKind,
    /// The figures that decided it, in words.
    pub evidence: String,
    /// The load generator blamed, when the bound is a client other than grpclab's own
    /// (`ghz`); omitted otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

impl Bound {
    /// The table's short words: the kind's, with the client's name where it is the bound
    /// and not grpclab ("client (ghz)").
    pub fn word(&self) -> String {
        match (&self.client, self.kind) {
            (Some(client), BoundKind::Client) => format!("client ({client})"),
            _ => self.kind.word().to_owned(),
        }
    }
}

/// What a run measured about its limits. Server fields are `None` where the server is not
/// the caller's to watch (`load`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BoundEvidence {
    /// The server's mean CPU over the window, percent of one core.
    pub server_cpu_percent: Option<f64>,
    /// The server's CPU quota, cores.
    pub server_cpu_quota: Option<f64>,
    /// The share of the cgroup's scheduling periods in which it was throttled.
    pub throttled_share: Option<f64>,
    /// The server's highest resident memory, bytes.
    pub server_memory_peak: Option<u64>,
    /// Its memory limit, bytes.
    pub server_memory_limit: Option<u64>,
    /// The server was OOM-killed.
    pub oom_killed: bool,
    /// The client's CPU over the run, percent of one core.
    pub client_cpu_percent: Option<f64>,
    /// The client's threads (cores it may use).
    pub client_threads: usize,
    /// The load generator, when it is not grpclab's own (`ghz`): named in a verdict that
    /// blames the client. Empty: grpclab.
    pub client: String,
    /// An open loop's offered rate, req/s (`None`: closed loop).
    pub offered_rate: Option<f64>,
    /// Calls per second completed.
    pub rps: f64,
    /// Open loop: the share of the mean latency spent before sending (schedule lag).
    pub send_lag_share: Option<f64>,
    /// Streams in flight (closed loop: all of them, all the time).
    pub streams: usize,
    /// Mean latency, ns.
    pub mean_latency_ns: f64,
    /// Calls measured.
    pub calls: u64,
    /// Of them, failed.
    pub errors: u64,
    /// Connections the run asked for (0: not known).
    pub connections: usize,
    /// Connections lost and opened again during the run (the server closed them).
    pub reconnects: u64,
    /// The network crossed, when it is not loopback (`--network`).
    pub network: Option<NetworkEvidence>,
}

/// What a run across a network measured of it: the link over the run's load, and the
/// server's HTTP/2 windows as its frames set them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetworkEvidence {
    /// The network's spec, as given (`delay=10ms,loss=0.1%`).
    pub spec: String,
    /// Its round trip, ns: twice the one-way delay.
    pub round_trip_ns: f64,
    /// Its rate, bits per second each way (`None`: unlimited).
    pub rate_bits: Option<u64>,
    /// Over the load: seconds, and per direction (client → server, server → client) the
    /// bytes the link delivered and the CPU its thread spent, seconds.
    pub elapsed_s: f64,
    /// Bytes delivered per direction over `elapsed_s`.
    pub bytes: [u64; 2],
    /// The link's CPU per direction over `elapsed_s`, seconds.
    pub link_cpu_s: [f64; 2],
    /// One request message's bytes (mean over the requests sent).
    pub request_bytes: f64,
    /// The largest stream window the server advertised, bytes (`None`: not read).
    pub stream_window: Option<u32>,
    /// The most the server left its connection window open, bytes.
    pub connection_window: Option<u32>,
    /// How the server's windows held the requests back, as the engine measured it (`None`:
    /// not measured, as on the h2 crate's transport or under ghz).
    pub window_waits: Option<WindowWaitEvidence>,
}

/// The waits for the server's windows over a run, from the engine's measure.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WindowWaitEvidence {
    /// Requests that waited with the connection window spent.
    pub connection: u64,
    /// Requests that waited for their stream's window only.
    pub stream: u64,
    /// The share of the connections' time in which some request waited for window.
    pub share: f64,
}

impl WindowWaitEvidence {
    /// From a run's waits, over `connections` held for `whole_run`.
    pub fn of(
        waits: &grpclab_load::WindowWaits,
        connections: usize,
        whole_run: std::time::Duration,
    ) -> WindowWaitEvidence {
        WindowWaitEvidence {
            connection: waits.connection,
            stream: waits.stream,
            share: waits.waited.as_secs_f64()
                / (connections.max(1) as f64 * whole_run.as_secs_f64().max(1e-9)),
        }
    }
}

impl NetworkEvidence {
    /// The link itself as the limit: its rate used up, or its thread's core.
    fn link_limit(&self) -> Option<String> {
        let seconds = self.elapsed_s.max(1e-9);
        if let Some(rate) = self.rate_bits {
            let bits_per_s = self.bytes.map(|bytes| bytes as f64 * 8.0 / seconds);
            let (carried, direction) = busier(bits_per_s);
            let share = carried / rate as f64;
            if share >= SATURATED {
                return Some(format!(
                    "the link ({}) carried {:.1} Mbit/s {direction}, {:.0} % of its rate",
                    self.spec,
                    carried / 1e6,
                    share * 100.0
                ));
            }
        }
        let (share, direction) = busier(self.link_cpu_s.map(|cpu| cpu / seconds));
        (share >= SATURATED).then(|| {
            format!(
                "the emulated link ({}) spent {:.0} % of a core carrying {direction}: grpclab's emulation is the limit, not the server or the client (a larger mtu carries more per packet)",
                self.spec,
                share * 100.0
            )
        })
    }

    /// The server's windows as the limit of a closed loop: the requests in flight on a
    /// connection over a round trip fill its connection window, or each request needs
    /// several round trips of its stream window and they make the latency.
    fn window_limit(&self, rps: f64, connections: usize, mean_latency_ns: f64) -> Option<String> {
        if let Some(waits) = self.window_waits {
            // Measured where requests block: it decides, whatever the arithmetic below says.
            return (waits.share >= WINDOW_WAITED).then(|| {
                format!(
                    "window-limited: some request waited for the server's window {:.0} % of each connection's time ({} waits with its connection window spent, {} for a stream's window; round trip {:.1} ms)",
                    waits.share * 100.0,
                    waits.connection,
                    waits.stream,
                    self.round_trip_ns / 1e6
                )
            });
        }
        if self.round_trip_ns <= 0.0 || self.request_bytes <= 0.0 {
            return None;
        }
        let kib = |bytes: f64| bytes / 1024.0;
        let rtt_ms = self.round_trip_ns / 1e6;
        if let Some(window) = self.connection_window.filter(|w| *w > 0) {
            let per_round_trip =
                rps / connections.max(1) as f64 * self.request_bytes * self.round_trip_ns / 1e9;
            if per_round_trip >= WINDOW_FULL * f64::from(window) {
                return Some(format!(
                    "window-limited: {:.0} KiB of requests crossed each connection per round trip ({rtt_ms:.1} ms), against the {:.0} KiB the server's connection window allowed",
                    kib(per_round_trip),
                    kib(f64::from(window))
                ));
            }
        }
        if let Some(window) = self.stream_window.filter(|w| *w > 0) {
            let round_trips = (self.request_bytes / f64::from(window)).ceil();
            if round_trips >= 2.0
                && mean_latency_ns >= WINDOW_FULL * round_trips * self.round_trip_ns
            {
                return Some(format!(
                    "window-limited: a request of {:.0} KiB needs {round_trips:.0} round trips ({rtt_ms:.1} ms each) of the server's {:.0} KiB stream window, and the mean latency is {:.1} ms",
                    kib(self.request_bytes),
                    kib(f64::from(window)),
                    mean_latency_ns / 1e6
                ));
            }
        }
        None
    }
}

/// The larger of a figure's two directions ([client → server, server → client]), with the
/// direction's name.
fn busier(per_direction: [f64; 2]) -> (f64, &'static str) {
    if per_direction[0] >= per_direction[1] {
        (per_direction[0], "client → server")
    } else {
        (per_direction[1], "server → client")
    }
}

/// Past this share of a window per round trip, the window is taken to be the limit (window
/// updates come back a round trip after the data, plus the server's reading).
const WINDOW_FULL: f64 = 0.80;

/// Past this share of its time with a request waiting for window, a connection is taken to
/// be held by the server's windows.
const WINDOW_WAITED: f64 = 0.50;

/// Connections held from which memory per connection is the question rather than the
/// server's own footprint.
const MANY_CONNECTIONS: usize = 1_000;

/// An open loop's share of the mean latency spent before sending (latency from the scheduled
/// time minus the service time from the actual send); `None` for a closed loop.
pub fn send_lag_share(recorder: &grpclab_load::Recorder) -> Option<f64> {
    let service = recorder.service_time.as_ref()?;
    if service.is_empty() || recorder.latency().is_empty() {
        return None;
    }
    let latency = recorder.latency().mean();
    Some(((latency - service.mean()) / latency.max(1e-9)).max(0.0))
}

/// " (ghz)" after "the client" for a client other than grpclab.
fn client_named(client: &str) -> String {
    if client.is_empty() || client == "grpclab" {
        String::new()
    } else {
        format!(" ({client})")
    }
}

/// Decides what bound the run: memory, then errors, then the server's CPU, then the client,
/// then the pacing (an open loop met, or a closed loop's streams).
pub fn bound_by(e: &BoundEvidence) -> Bound {
    let named = (!e.client.is_empty() && e.client != "grpclab").then(|| e.client.clone());
    let bound = |kind, evidence: String| Bound {
        kind,
        evidence,
        client: named.clone().filter(|_| kind == BoundKind::Client),
    };
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    if e.oom_killed {
        return bound(
            BoundKind::ServerMemory,
            "the server was OOM-killed at its memory limit".to_owned(),
        );
    }
    if let (Some(peak), Some(limit)) = (e.server_memory_peak, e.server_memory_limit) {
        if limit > 0 && peak as f64 >= SATURATED * limit as f64 && e.connections >= MANY_CONNECTIONS
        {
            return bound(
                BoundKind::Connections,
                format!(
                    "memory peaked at {:.0} MiB of its {:.0} MiB limit holding {} connections ({:.1} KiB each at most)",
                    mib(peak),
                    mib(limit),
                    e.connections,
                    peak as f64 / 1024.0 / e.connections as f64
                ),
            );
        }
        if limit > 0 && peak as f64 >= SATURATED * limit as f64 {
            return bound(
                BoundKind::ServerMemory,
                format!(
                    "memory peaked at {:.0} MiB of its {:.0} MiB limit",
                    mib(peak),
                    mib(limit)
                ),
            );
        }
    }
    if e.reconnects > 0 && e.connections > 0 {
        // The server closed connections the client held (its cap or its descriptor limit
        // closes them as they are accepted); their calls failed, which `errors` would blame.
        return bound(
            BoundKind::Connections,
            format!(
                "the server closed connections: {} reconnection(s) over the {} asked for (a connection cap such as lab's --max-connections, or a descriptor limit); {} of {} calls failed",
                e.reconnects, e.connections, e.errors, e.calls
            ),
        );
    }
    if e.calls > 0 && e.errors as f64 > 0.01 * e.calls as f64 {
        return bound(
            BoundKind::Errors,
            format!(
                "{:.1} % of the calls failed ({} of {})",
                100.0 * e.errors as f64 / e.calls as f64,
                e.errors,
                e.calls
            ),
        );
    }
    if let (Some(cpu), Some(quota)) = (e.server_cpu_percent, e.server_cpu_quota) {
        let share = cpu / (quota * 100.0);
        let throttled = e.throttled_share.filter(|t| *t > 0.10);
        if share >= SATURATED || (throttled.is_some() && share >= 0.75) {
            let mut evidence = format!(
                "the server used {cpu:.0} % of a core against a quota of {quota} ({:.0} % of it)",
                share * 100.0
            );
            if let Some(t) = e.throttled_share {
                evidence.push_str(&format!(
                    "; throttled in {:.0} % of its scheduling periods",
                    t * 100.0
                ));
            }
            return bound(BoundKind::ServerCpu, evidence);
        }
    }
    if let Some(limit) = e.network.as_ref().and_then(NetworkEvidence::link_limit) {
        return bound(BoundKind::Network, limit);
    }
    if let Some(cpu) = e.client_cpu_percent {
        let threads = e.client_threads.max(1) as f64;
        if cpu >= SATURATED * 100.0 * threads {
            return bound(
                BoundKind::Client,
                format!(
                    "the client{} used {cpu:.0} % of a core on {} thread(s) ({:.0} % of them)",
                    client_named(&e.client),
                    e.client_threads,
                    cpu / threads
                ),
            );
        }
    }
    if let Some(rate) = e.offered_rate {
        let lag = e.send_lag_share.unwrap_or(0.0);
        if e.rps < 0.95 * rate && lag > 0.5 {
            return bound(
                BoundKind::Client,
                format!(
                    "the schedule fell behind: {:.0} of {rate:.0} req/s done, {:.0} % of the latency spent before sending",
                    e.rps,
                    lag * 100.0
                ),
            );
        }
        if e.rps >= 0.95 * rate {
            return bound(
                BoundKind::OfferedRate,
                format!(
                    "the server kept up with the offered {rate:.0} req/s ({:.0} done)",
                    e.rps
                ),
            );
        }
    } else if e.streams > 0 && e.rps > 0.0 {
        if let Some(limit) = e
            .network
            .as_ref()
            .and_then(|n| n.window_limit(e.rps, e.connections, e.mean_latency_ns))
        {
            return bound(BoundKind::Network, limit);
        }
        // Little's law: streams = throughput × latency in a closed loop, always; what it
        // shows here is that neither side was saturated, so the streams set the pace.
        let little = e.rps * e.mean_latency_ns / 1e9;
        let sides = match (e.server_cpu_percent, e.server_cpu_quota) {
            (Some(cpu), Some(quota)) => format!(
                "the server at {:.0} % of its quota",
                100.0 * cpu / (quota * 100.0)
            ),
            _ => {
                return bound(
                    BoundKind::ServerOrNetwork,
                    format!(
                        "the client had CPU to spare ({:.0} % of a core on {} thread(s)); the server's CPU is not visible from the client (bench or capacity --server-pid show it)",
                        e.client_cpu_percent.unwrap_or(0.0),
                        e.client_threads
                    ),
                )
            }
        };
        let mut evidence = format!(
            "{} streams in a closed loop, {sides} and the client at {:.0} % of its threads: latency ≈ streams / throughput ({} / {:.0} req/s = {:.3} ms), so more streams would have given more",
            e.streams,
            e.client_cpu_percent.unwrap_or(0.0) / e.client_threads.max(1) as f64,
            e.streams,
            e.rps,
            little / e.rps.max(1e-9) * 1e3
        );
        if let Some(network) = e.network.as_ref().filter(|n| n.round_trip_ns > 0.0) {
            evidence.push_str(&format!(
                "; the link's round trip ({:.1} ms) is {:.0} % of that latency",
                network.round_trip_ns / 1e6,
                100.0 * network.round_trip_ns / e.mean_latency_ns.max(1e-9)
            ));
        }
        return bound(BoundKind::Concurrency, evidence);
    }
    bound(
        BoundKind::NothingFound,
        "no resource measured was near its limit".to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed_loop() -> BoundEvidence {
        BoundEvidence {
            server_cpu_percent: Some(30.0),
            server_cpu_quota: Some(1.0),
            throttled_share: Some(0.0),
            server_memory_peak: Some(20 << 20),
            server_memory_limit: Some(512 << 20),
            oom_killed: false,
            client_cpu_percent: Some(40.0),
            client_threads: 1,
            client: String::new(),
            offered_rate: None,
            rps: 10_000.0,
            send_lag_share: None,
            streams: 50,
            mean_latency_ns: 5e6,
            calls: 100_000,
            errors: 0,
            connections: 50,
            reconnects: 0,
            network: None,
        }
    }

    /// A closed loop of 4 streams on one connection across a 20 ms round trip, sending
    /// 166,000-byte requests, both CPUs idle.
    fn across_a_link() -> BoundEvidence {
        BoundEvidence {
            streams: 4,
            connections: 1,
            rps: 20.0,
            mean_latency_ns: 200e6,
            network: Some(NetworkEvidence {
                spec: "delay=10ms".to_owned(),
                round_trip_ns: 20e6,
                rate_bits: None,
                elapsed_s: 10.0,
                bytes: [33_200_000, 33_200_000],
                link_cpu_s: [0.5, 0.5],
                request_bytes: 166_000.0,
                stream_window: Some(1 << 20),
                connection_window: Some(65_535),
                window_waits: None,
            }),
            ..closed_loop()
        }
    }

    fn with_network(e: &BoundEvidence, change: impl FnOnce(&mut NetworkEvidence)) -> BoundEvidence {
        let mut e = e.clone();
        if let Some(network) = e.network.as_mut() {
            change(network);
        }
        e
    }

    #[test]
    fn a_network_is_named_where_its_windows_or_its_link_bound_the_run() {
        // 20 req/s × 166,000 B × 20 ms = 66,400 B a round trip against a 64 KiB window.
        let verdict = bound_by(&across_a_link());
        assert_eq!(
            (verdict.kind, verdict.word()),
            (BoundKind::Network, "network".to_owned())
        );
        assert!(
            verdict.evidence.contains("65 KiB of requests crossed each connection per round trip (20.0 ms), against the 64 KiB the server's connection window allowed"),
            "{}",
            verdict.evidence
        );
        // Half that rate leaves the connection window half used: the streams bound it.
        let half = BoundEvidence {
            rps: 10.0,
            ..across_a_link()
        };
        assert_eq!(bound_by(&half).kind, BoundKind::Concurrency);

        // The stream window: 166,000 B in 64 KiB windows is 3 round trips, 60 ms of the
        // mean's 70 ms.
        let stream = with_network(
            &BoundEvidence {
                rps: 4.0 / 0.070,
                mean_latency_ns: 70e6,
                ..across_a_link()
            },
            |n| {
                n.stream_window = Some(65_535);
                n.connection_window = Some(16 << 20);
            },
        );
        let verdict = bound_by(&stream);
        assert_eq!(verdict.kind, BoundKind::Network);
        assert!(
            verdict.evidence.contains("needs 3 round trips (20.0 ms each) of the server's 64 KiB stream window, and the mean latency is 70.0 ms"),
            "{}",
            verdict.evidence
        );
        // A mean well under those 3 round trips: not the windows (the round trip is named).
        let quick = BoundEvidence {
            rps: 4.0 / 0.030,
            mean_latency_ns: 30e6,
            ..stream.clone()
        };
        let verdict = bound_by(&quick);
        assert_eq!(verdict.kind, BoundKind::Concurrency);
        assert!(
            verdict
                .evidence
                .ends_with("the link's round trip (20.0 ms) is 67 % of that latency"),
            "{}",
            verdict.evidence
        );

        // The link's rate: 1.2 MB in a second is 9.6 Mbit/s of a 10 Mbit/s link.
        let rate = with_network(&half, |n| {
            n.rate_bits = Some(10_000_000);
            n.elapsed_s = 1.0;
            n.bytes = [100_000, 1_200_000];
        });
        let verdict = bound_by(&rate);
        assert_eq!(verdict.kind, BoundKind::Network);
        assert!(
            verdict
                .evidence
                .contains("carried 9.6 Mbit/s server → client, 96 % of its rate"),
            "{}",
            verdict.evidence
        );
        // The link's own thread at 95 % of a core.
        let busy = with_network(&half, |n| n.link_cpu_s = [9.5, 2.0]);
        let verdict = bound_by(&busy);
        assert_eq!(verdict.kind, BoundKind::Network);
        assert!(
            verdict
                .evidence
                .contains("spent 95 % of a core carrying client → server"),
            "{}",
            verdict.evidence
        );
        // A saturated server comes first: the windows never starved it.
        let server = BoundEvidence {
            server_cpu_percent: Some(99.0),
            ..across_a_link()
        };
        assert_eq!(bound_by(&server).kind, BoundKind::ServerCpu);
        // Measured waits decide over the arithmetic: waiting 87 % of the time is the windows
        // even where the advertised windows look ample; 10 % is not, even where they look
        // full.
        let waited = with_network(&half, |n| {
            n.window_waits = Some(WindowWaitEvidence {
                connection: 120,
                stream: 30,
                share: 0.87,
            })
        });
        let verdict = bound_by(&waited);
        assert_eq!(verdict.kind, BoundKind::Network);
        assert!(
            verdict.evidence.contains("waited for the server's window 87 % of each connection's time (120 waits with its connection window spent, 30 for a stream's window"),
            "{}",
            verdict.evidence
        );
        let rarely = with_network(&across_a_link(), |n| {
            n.window_waits = Some(WindowWaitEvidence {
                share: 0.10,
                ..WindowWaitEvidence::default()
            })
        });
        assert_eq!(bound_by(&rarely).kind, BoundKind::Concurrency);
        let of = WindowWaitEvidence::of(
            &grpclab_load::WindowWaits {
                connection: 3,
                stream: 4,
                waited: std::time::Duration::from_secs(3),
            },
            2,
            std::time::Duration::from_secs(2),
        );
        assert_eq!((of.connection, of.stream, of.share), (3, 4, 0.75));
        // Loopback: no network evidence, no network verdict.
        let loopback = BoundEvidence {
            network: None,
            ..across_a_link()
        };
        assert_eq!(bound_by(&loopback).kind, BoundKind::Concurrency);
    }

    #[test]
    fn each_limit_is_named_with_its_figures() {
        let quota = BoundEvidence {
            server_cpu_percent: Some(49.0),
            server_cpu_quota: Some(0.5),
            throttled_share: Some(0.6),
            ..closed_loop()
        };
        let verdict = bound_by(&quota);
        assert_eq!(verdict.kind, BoundKind::ServerCpu);
        assert!(
            verdict.evidence.contains("quota of 0.5 (98 % of it)"),
            "{}",
            verdict.evidence
        );
        assert!(
            verdict.evidence.contains("throttled in 60 %"),
            "{}",
            verdict.evidence
        );

        let client = BoundEvidence {
            client_cpu_percent: Some(97.0),
            ..closed_loop()
        };
        let verdict = bound_by(&client);
        assert_eq!(
            (verdict.kind, verdict.word()),
            (BoundKind::Client, "client".to_owned())
        );
        // Another load generator is named where it is the bound, and only there.
        let ghz = BoundEvidence {
            client: "ghz".to_owned(),
            ..client
        };
        let verdict = bound_by(&ghz);
        assert_eq!(verdict.word(), "client (ghz)");
        assert!(
            verdict.evidence.starts_with("the client (ghz) used 97 %"),
            "{}",
            verdict.evidence
        );
        let server = BoundEvidence {
            client: "ghz".to_owned(),
            server_cpu_percent: Some(99.0),
            ..closed_loop()
        };
        assert_eq!(bound_by(&server).word(), "server cpu");
        assert_eq!(bound_by(&server).client, None);

        let behind = BoundEvidence {
            offered_rate: Some(50_000.0),
            rps: 30_000.0,
            send_lag_share: Some(0.9),
            ..closed_loop()
        };
        let verdict = bound_by(&behind);
        assert_eq!(verdict.kind, BoundKind::Client);
        assert!(verdict.evidence.contains("the schedule fell behind"));

        let met = BoundEvidence {
            offered_rate: Some(10_000.0),
            ..closed_loop()
        };
        assert_eq!(bound_by(&met).kind, BoundKind::OfferedRate);

        let verdict = bound_by(&closed_loop());
        assert_eq!(verdict.kind, BoundKind::Concurrency);
        assert!(
            verdict.evidence.contains("50 streams"),
            "{}",
            verdict.evidence
        );

        let memory = BoundEvidence {
            server_memory_peak: Some(500 << 20),
            ..closed_loop()
        };
        assert_eq!(bound_by(&memory).kind, BoundKind::ServerMemory);
        let oom = BoundEvidence {
            oom_killed: true,
            ..closed_loop()
        };
        assert_eq!(bound_by(&oom).kind, BoundKind::ServerMemory);

        let crowded = BoundEvidence {
            server_memory_peak: Some(500 << 20),
            connections: 20_000,
            ..closed_loop()
        };
        let verdict = bound_by(&crowded);
        assert_eq!(verdict.kind, BoundKind::Connections);
        assert_eq!(verdict.word(), "connections/memory");
        assert!(
            verdict
                .evidence
                .contains("holding 20000 connections (25.6 KiB each at most)"),
            "{}",
            verdict.evidence
        );
        let closed = BoundEvidence {
            reconnects: 40,
            errors: 3_000,
            ..closed_loop()
        };
        let verdict = bound_by(&closed);
        assert_eq!(
            verdict.kind,
            BoundKind::Connections,
            "not errors: their cause"
        );
        assert!(
            verdict
                .evidence
                .contains("40 reconnection(s) over the 50 asked for"),
            "{}",
            verdict.evidence
        );

        let failing = BoundEvidence {
            errors: 5_000,
            ..closed_loop()
        };
        assert_eq!(bound_by(&failing).kind, BoundKind::Errors);

        // From the client alone: the server cannot be judged.
        let blind = BoundEvidence {
            server_cpu_percent: None,
            server_cpu_quota: None,
            ..closed_loop()
        };
        assert_eq!(bound_by(&blind).kind, BoundKind::ServerOrNetwork);
    }
}
