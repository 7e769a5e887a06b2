//! The run's settings as its report lists them ([`RunOptions`]): ghz's options by their
//! names, then grpclab's.

use std::collections::BTreeMap;
use std::path::Path;

use grpclab_load::LoadConfig;
use grpclab_results::model::{RunOptions, TlsOptions};

use super::scenario::{first_request_json, LoadedScenario};
use super::schedule::{load_shape, stream_flags};
use crate::cli::args::{LbStrategy, LoadArgs};
use crate::InputError;

/// What the report says the run was made with: the flags as given beside the settings
/// `prepare` resolved them to (`config`).
pub(super) fn run_options(
    args: &LoadArgs,
    config: &LoadConfig,
    loaded: &LoadedScenario,
    metadata_map: Option<BTreeMap<String, String>>,
) -> Result<RunOptions, InputError> {
    let scenario = &loaded.scenario;
    Ok(RunOptions {
        name: args.name.clone(),
        tags: super::parse_string_map("--tags", args.tags.as_deref())?.unwrap_or_default(),
        host: args.target.clone(),
        authority: config.authority.clone(),
        addresses: if config.addresses.len() > 1 {
            config.addresses.iter().map(ToString::to_string).collect()
        } else {
            Vec::new()
        },
        lb_strategy: if config.addresses.len() > 1 {
            match args.lb_strategy {
                LbStrategy::PickFirst => "pick_first",
                LbStrategy::RoundRobin => "round_robin",
            }
            .to_owned()
        } else {
            String::new()
        },
        call: scenario.method().full_name().to_owned(),
        scenario: loaded.label.clone(),
        proto: args
            .scenario
            .proto
            .as_ref()
            .map(|p| p.display().to_string()),
        // ghz lists the folders it looks in, the .proto's own first.
        import_paths: match &args.scenario.proto {
            Some(proto) => grpclab_core::scenario::import_paths(
                std::slice::from_ref(proto),
                &args.scenario.import_paths,
            )
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
            None => Vec::new(),
        },
        // The payload as the user gave it (a template as written); without one, the request
        // sent (a scenario's own, as JSON), as ghz always lists it. `None` for a binary
        // payload or a mix.
        data: loaded
            .payload
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
            .or_else(
                || match args.scenario.binary || args.scenario.binary_file.is_some() {
                    true => None,
                    false => first_request_json(scenario),
                },
            ),
        binary: args.scenario.binary || args.scenario.binary_file.is_some(),
        metadata: metadata_map,
        distinct_requests: config.methods.iter().map(|m| m.requests.len()).sum(),
        mix_seed: (config.methods.len() > 1).then_some(config.mix_seed),
        concurrency: config.concurrency,
        connections: config.connections,
        rps: args.rps,
        duration: config.duration,
        total: config.total,
        warmup: config.warmup,
        timeout: config.timeout,
        dial_timeout: config.connect_timeout,
        keepalive: config.keepalive.unwrap_or_default(),
        cpus: config.threads,
        validate: args.validate,
        transport: if args.http1 {
            "http1".to_owned()
        } else {
            args.transport.name().to_owned()
        },
        details: config.details,
        count_errors: args.count_errors,
        stream: stream_flags(args),
        requests_digest: config.requests_digest(),
        network: args
            .network
            .map(|spec| spec.to_string())
            .unwrap_or_default(),
        protocol: match args.protocol.protocol() {
            grpclab_core::protocol::Protocol::Grpc => String::new(),
            other if args.connect_get => format!("{other} (GET)"),
            other => other.name().to_owned(),
        },
        codec: match args.codec {
            crate::cli::args::WireCodecArg::Proto => String::new(),
            crate::cli::args::WireCodecArg::Json => "json".to_owned(),
        },
        skip_first: args.skip_first,
        load: load_shape(args.load_schedule, config.pacing),
        concurrency_shape: config
            .concurrency_steps
            .map(|steps| grpclab_results::model::LoadShape {
                schedule: args.concurrency_schedule.name().to_owned(),
                start: steps.start as f64,
                end: steps.end.unwrap_or(0) as f64,
                step: steps.step as f64,
                step_duration: steps.step_duration,
                max_duration: steps.max_duration.unwrap_or_default(),
            })
            .unwrap_or_default(),
        compression: args.enable_compression,
        tls: TlsOptions {
            insecure: args.insecure,
            cacert: path_text(args.cacert.as_deref()),
            cert: path_text(args.cert.as_deref()),
            key: path_text(args.key.as_deref()),
            cname: args.cname.clone().unwrap_or_default(),
            skip_verify: args.skip_tls,
        },
    })
}

fn path_text(path: Option<&Path>) -> String {
    path.map(|p| p.display().to_string()).unwrap_or_default()
}
