//! The schedule flags: ghz's step and line schedules for the rate and for concurrency, as
//! the engine's pacing and as the report lists them; the streaming flags as given.

use grpclab_load::{ConcurrencySteps, LoadConfig, Pacing};
use std::io::Write;

use super::DEFAULT_DETAILS;
use crate::cli::args::{LoadArgs, OutputFormat, ScheduleShape};
use crate::InputError;

/// ghz's step and line schedules as [`Pacing::Steps`]; each missing or misplaced flag named.
pub(super) fn load_steps(args: &LoadArgs) -> Result<Pacing, InputError> {
    let schedule = args.load_schedule.name();
    if args.rps != 0.0 {
        return Err(InputError(format!(
            "--rps is the const schedule's rate; with --load-schedule {schedule} give --load-start (and --load-step)"
        )));
    }
    let start = args.load_start.ok_or_else(|| {
        InputError(format!(
            "--load-schedule {schedule} needs --load-start, the first rate in req/s"
        ))
    })?;
    let step = args.load_step.ok_or_else(|| {
        InputError(format!(
            "--load-schedule {schedule} needs --load-step, the rate change per step in req/s"
        ))
    })?;
    let step_duration = match (schedule, args.load_step_duration) {
        ("line", None) => std::time::Duration::from_secs(1),
        ("line", Some(_)) => return Err(InputError(
            "--load-schedule line changes the rate every second; --load-step-duration is for step"
                .to_owned(),
        )),
        (_, Some(duration)) => duration,
        (_, None) => return Err(InputError(
            "--load-schedule step needs --load-step-duration, how long each rate holds (e.g. 5s)"
                .to_owned(),
        )),
    };
    Ok(Pacing::Steps {
        start,
        step,
        step_duration,
        end: args.load_end,
        max_duration: args.load_max_duration,
    })
}

/// ghz's step and line concurrency schedules as [`ConcurrencySteps`]; `None` for const.
pub(super) fn concurrency_steps(args: &LoadArgs) -> Result<Option<ConcurrencySteps>, InputError> {
    let schedule = args.concurrency_schedule.name();
    let step_duration = match (schedule, args.concurrency_step_duration) {
        ("const", _) => return Ok(None),
        ("line", None) => std::time::Duration::from_secs(1),
        ("line", Some(_)) => return Err(InputError(
            "--concurrency-schedule line changes the concurrency every second; --concurrency-step-duration is for step"
                .to_owned(),
        )),
        (_, Some(duration)) => duration,
        (_, None) => return Err(InputError(
            "--concurrency-schedule step needs --concurrency-step-duration, how long each concurrency holds (e.g. 5s)"
                .to_owned(),
        )),
    };
    Ok(Some(ConcurrencySteps {
        start: args.concurrency_start,
        step: args.concurrency_step,
        step_duration,
        end: args.concurrency_end,
        max_duration: args.concurrency_max_duration,
    }))
}

/// ghz's load-schedule settings for the report, read back from the pacing they became.
pub(super) fn load_shape(
    schedule: ScheduleShape,
    pacing: Pacing,
) -> grpclab_results::model::LoadShape {
    match pacing {
        Pacing::Steps {
            start,
            step,
            step_duration,
            end,
            max_duration,
        } => grpclab_results::model::LoadShape {
            schedule: schedule.name().to_owned(),
            start,
            end: end.unwrap_or(0.0),
            step,
            step_duration,
            max_duration: max_duration.unwrap_or_default(),
        },
        Pacing::ClosedLoop | Pacing::OpenLoop { .. } => {
            grpclab_results::model::LoadShape::default()
        }
    }
}

/// The streaming flags as given, in one canonical line (`call-count=5 interval=10ms ...`), for
/// the result's options: generators of one run have the same.
pub(super) fn stream_flags(args: &LoadArgs) -> String {
    let mut flags = Vec::new();
    if let Some(count) = args.stream_call_count {
        flags.push(format!("call-count={count}"));
    }
    if let Some(duration) = args.stream_call_duration {
        flags.push(format!(
            "call-duration={}",
            humantime::format_duration(duration)
        ));
    }
    if let Some(interval) = args.stream_interval {
        flags.push(format!("interval={}", humantime::format_duration(interval)));
    }
    if args.stream_dynamic_messages {
        flags.push("dynamic-messages".to_owned());
    }
    if args.stream_independent {
        flags.push("independent".to_owned());
    }
    if let Some(stamp) = &args.stream_stamp {
        flags.push(format!("stamp={stamp}"));
    }
    flags.join(" ")
}

/// The run's schedule and end from the flags: streams and connections, closed or open loop
/// (ghz's step and line schedules), duration or count (ghz's meanings of -z, -n and -x),
/// warmup, timeouts, `--details`, client threads.
pub(super) fn apply_schedule(args: &LoadArgs, config: &mut LoadConfig) -> Result<(), InputError> {
    config.concurrency = args.concurrency;
    config.concurrency_steps = concurrency_steps(args)?;
    config.connections = args.connections;
    config.pacing = if args.rps < 0.0 || !args.rps.is_finite() {
        return Err(InputError(format!(
            "--rps {} is not a rate; give requests per second, or 0 for a closed loop",
            args.rps
        )));
    } else if args.load_schedule != ScheduleShape::Const {
        load_steps(args)?
    } else if args.rps == 0.0 {
        Pacing::ClosedLoop
    } else {
        Pacing::OpenLoop { rate: args.rps }
    };
    // ghz's meanings: -z runs for its duration and ignores -n; -n runs N calls, cut short
    // by -x if given.
    if args.duration.is_some() && args.max_duration.is_some() {
        return Err(InputError(
            "-x/--max-duration caps an -n run; with -z the duration already decides: give one of them"
                .to_owned(),
        ));
    }
    if let (Some(total), Some(_)) = (args.total, args.duration) {
        // Best effort: a closed stderr must not stop the run.
        let _ = writeln!(
            std::io::stderr(),
            "grpclab load: -n {total} is ignored because -z is set (as in ghz); -n with -x stops at whichever comes first"
        );
    }
    (config.duration, config.total) = match args.duration {
        Some(duration) => (Some(duration), None),
        None => (args.max_duration, Some(args.total.unwrap_or(200))),
    };
    config.warmup = args.warmup;
    config.connect_timeout = args.connect_timeout;
    config.keepalive = (!args.keepalive.is_zero()).then_some(args.keepalive);
    config.skip_first = args.skip_first;
    // ghz's CSV lists every call: -O csv keeps calls one by one even without --details.
    config.details = args.details.or(match args.format {
        OutputFormat::Csv | OutputFormat::InfluxDetails => Some(DEFAULT_DETAILS),
        _ => None,
    });
    if config.details == Some(0) {
        return Err(InputError(
            "--details=0 lists no call; give --details=N with N at least 1, or leave it out"
                .to_owned(),
        ));
    }
    config.timeout = (!args.timeout.is_zero()).then_some(args.timeout);
    config.threads = args
        .cpus
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if let Some(cpus) = args.cpus.filter(|cpus| *cpus > args.connections) {
        // Each client thread owns whole connections: more threads than connections would idle.
        let _ = writeln!(
            std::io::stderr(),
            "grpclab load: --cpus {cpus} runs {} client thread(s): each owns whole connections, and there are --connections {}; raise --connections to use more CPUs",
            args.connections, args.connections
        );
    }
    Ok(())
}
