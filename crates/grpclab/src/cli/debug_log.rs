//! `--debug FILE` (ghz's debug log): the load engine's `tracing` events — resolution,
//! connections made, ended and re-made, failed attempts, GOAWAYs and resets — as JSON lines in
//! a file. Nothing is recorded without the flag: the events sit on connection and failure
//! paths, never on a call's happy path, and with no subscriber each is one cached check.

use std::path::Path;
use std::sync::Mutex;

use tracing::level_filters::LevelFilter;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;

use crate::InputError;

/// Starts writing grpclab's debug events to `path` (created, or emptied). A process takes
/// one log: a second call (capacity's probes prepare one run each) keeps the first.
pub fn install(path: &Path) -> Result<(), InputError> {
    let file = std::fs::File::create(path).map_err(|err| {
        InputError(format!(
            "--debug {}: cannot write the log there ({err}); give a path in a folder that exists and is writable",
            path.display()
        ))
    })?;
    // Our crates at debug; the h2 crate (under --transport h2) logs every frame at debug, so
    // only its warnings and errors are kept.
    let filter = Targets::new()
        .with_target("grpclab", LevelFilter::DEBUG)
        .with_target("h2", LevelFilter::WARN);
    let layer = tracing_subscriber::fmt::layer()
        .json()
        .with_ansi(false)
        .with_target(true)
        // One write per event, in the order they happen; events are rare (connections and
        // failures), so no buffering to lose if the process is killed.
        .with_writer(Mutex::new(file));
    let subscriber = tracing_subscriber::registry().with(layer).with(filter);
    let _ = tracing::subscriber::set_global_default(subscriber);
    Ok(())
}
