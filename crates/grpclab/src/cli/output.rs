//! Where a command's output goes: a file, or standard output.

use std::io::Write;
use std::path::Path;

use anyhow::Context as _;

/// Writes to the file, or standard output. If the file cannot be written, the output still goes
/// to standard output, so a finished run is never lost.
pub(crate) fn write_output(path: Option<&Path>, bytes: &[u8]) -> anyhow::Result<()> {
    match path {
        // A reader that left early (`| head`) has all it wanted: end quietly, as ghz and
        // coreutils do.
        None => match std::io::stdout().write_all(bytes) {
            Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            written => written.context("cannot write to standard output"),
        },
        Some(path) => {
            if let Err(err) = std::fs::write(path, bytes) {
                let _ = std::io::stdout().write_all(bytes);
                anyhow::bail!(
                    "cannot write {}: {err}; the results were printed to standard output instead",
                    path.display()
                );
            }
            Ok(())
        }
    }
}

/// Refuses, before a run, an output file that could not be written after it: the folder
/// missing, or the file not writable. A path that does not exist yet is left so (the probe
/// file is removed).
pub(crate) fn check_writable(path: &Path, flag: &str) -> Result<(), crate::InputError> {
    let existed = path.exists();
    let opened = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path);
    match opened {
        Ok(_) => {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Err(err) => Err(crate::InputError(format!(
            "{flag} {}: cannot be written ({err}): give a path in a folder that exists and you may write to",
            path.display()
        ))),
    }
}
