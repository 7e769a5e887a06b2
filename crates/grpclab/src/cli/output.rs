//! Where a command's output goes: a file, or standard output.

use std::io::Write;
use std::path::Path;

use anyhow::Context as _;

/// Writes to the file, or standard output. If the file cannot be written, the output still goes
/// to standard output, so a finished run is never lost.
pub(crate) fn write_output(path: Option<&Path>, bytes: &[u8]) -> anyhow::Result<()> {
    match path {
        None => std::io::stdout()
            .write_all(bytes)
            .context("cannot write to standard output"),
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
