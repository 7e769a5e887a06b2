//! A run's results as every part of grpclab speaks them, and the exporters that render them.
//!
//! Rooms, top to bottom; a module imports only from the ones below it:
//!
//! 1. [`export`]: one exporter per `load -O` format behind [`export::Exporter`] (ghz's JSON,
//!    CSV, the summary, InfluxDB lines, Prometheus text). Exporters render a finished
//!    [`model::Report`]; they never measure.
//! 2. [`verdict`]: thresholds (`--threshold`), what bound a run, a run against its previous
//!    ones: judgements made from figures, printed by exporters and pages.
//! 3. [`model`]: a finished run with its settings ([`model::Report`]) and the document it is
//!    saved as ([`model::JsonReport`]): what load, bench, compare, capacity, merge and the
//!    store read and write. Nothing imports an exporter to get data.
//! 4. [`generator`]: one load generator among several (`--shard`, `--start-at`): facts the
//!    JSON carries and `merge` judges.
//!
//! The load engine (`grpclab-load`) measures; the harness, the store and the pages in the
//! `grpclab` crate read and write what this crate defines.
#![deny(missing_docs)]

pub mod export;
pub mod generator;
pub mod model;
pub mod verdict;
