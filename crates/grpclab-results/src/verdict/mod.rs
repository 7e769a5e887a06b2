//! Verdicts on measured runs: yes/no answers a run's numbers are checked against.
//!
//! [`threshold`]: k6-style pass/fail conditions on one run (`p99<=10ms`, `errors<=0.1%`,
//! `rps>=5000`), each judged against the run's own figures; `load --threshold` turns a failed
//! one into its own exit code ([`EXIT_THRESHOLD`]), with the results written as usual.
//!
//! [`bound`]: what limited a run (server CPU, client, concurrency, memory, errors, the offered
//! rate), decided from the figures it measured and shown with them.
//!
//! [`previous`]: a stored run against the previous run of its configuration, and whether
//! each change is beyond that configuration's usual spread.

pub mod bound;
pub mod previous;
pub mod threshold;

pub use threshold::{Threshold, ThresholdVerdict};

/// Exit code of a run that finished and wrote its results, but failed a `--threshold`.
pub const EXIT_THRESHOLD: u8 = 3;
