//! `grpclab serve`: run a built-in server until SIGTERM or Ctrl-C.

use grpclab_server::{Implementation, ServeConfig};
use std::io::Write;
use std::net::SocketAddr;

use crate::cli::ServeArgs;
use crate::InputError;

/// Validates the flags into a server configuration.
pub fn prepare(args: &ServeArgs) -> Result<ServeConfig, InputError> {
    let implementation = Implementation::from_name(&args.implementation).ok_or_else(|| {
        let names: Vec<&str> = Implementation::ALL.iter().map(|(name, _)| *name).collect();
        InputError(format!(
            "--impl: unknown server '{}'; the built-in servers are {}",
            args.implementation,
            names.join(", ")
        ))
    })?;
    let threads = args.threads.unwrap_or(1);
    if threads == 0 {
        return Err(InputError(
            "--threads (or GRPC_SERVER_CPUS) must be at least 1".to_owned(),
        ));
    }
    Ok(ServeConfig {
        implementation,
        addr: SocketAddr::new(args.host, args.port),
        threads,
    })
}

/// Serves until SIGTERM/Ctrl-C. Prints `listening on ADDR` on stderr once ready, so scripts
/// and the harness can wait for it.
pub fn execute(config: &ServeConfig) -> anyhow::Result<()> {
    grpclab_server::serve(config, |addr| {
        let mut stderr = std::io::stderr();
        let _ = writeln!(
            stderr,
            "grpclab serve: {} listening on {addr}",
            config.implementation.name()
        );
        let _ = stderr.flush();
    })?;
    Ok(())
}
