//! `grpclab compare`'s arguments, resolved into a typed comparison.

use super::args::CompareArgs;
use super::bench::bench_config;
use crate::InputError;
use grpclab_harness::compare::{CompareOptions, PreparedCompare};

/// Validates `grpclab compare`'s arguments into a comparison ready to run.
pub fn prepare(args: &CompareArgs) -> Result<PreparedCompare, InputError> {
    let config = bench_config(&args.settings)?;
    let baseline = args
        .baseline
        .as_deref()
        .map(|text| {
            super::history::baseline_source(
                text,
                &args.history.store,
                &grpclab_harness::compare::baseline::RunSettings::of(&config),
            )
        })
        .transpose()?;
    let suite = grpclab_harness::bench::suite_of(args.settings.suite.as_deref())?;
    let options = CompareOptions {
        rounds: args.rounds,
        confidence: args.confidence,
        baseline,
        save_baseline: args.save_baseline.clone(),
        fail_if: args.fail_if.clone(),
    };
    grpclab_harness::compare::prepare(config, &suite, &args.sides, options)
}
