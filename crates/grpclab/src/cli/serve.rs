//! `grpclab serve`: run a built-in server until SIGTERM or Ctrl-C.

use grpclab_core::tls::ServerTls;
use grpclab_server::lab::{Codec, LabConfig, Placement, Transport};
use grpclab_server::{Implementation, ServeConfig};
use std::io::Write;
use std::net::SocketAddr;

use super::args::{CodecArg, ImplementationArg, PlacementArg, ServeArgs, TransportArg};
use crate::InputError;

/// `grpclab serve`: validates, then serves until stopped.
pub fn run(args: &ServeArgs) -> anyhow::Result<std::process::ExitCode> {
    execute(&prepare(args)?)?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// Validates the flags into a server configuration.
pub fn prepare(args: &ServeArgs) -> Result<ServeConfig, InputError> {
    let implementation = match args.implementation {
        ImplementationArg::TonicMt => Implementation::TonicMt,
        ImplementationArg::TonicSt => Implementation::TonicSt,
        ImplementationArg::Lab => Implementation::Lab,
    };
    if args.unix.is_some() && (implementation != Implementation::Lab || args.tls_cert.is_some()) {
        return Err(InputError(
            "--unix: only lab listens on a unix socket, in plaintext: use --impl lab, without --tls-cert".to_owned(),
        ));
    }
    if args.grpc_web
        && implementation == Implementation::Lab
        && matches!(args.transport, TransportArg::H2)
    {
        return Err(InputError(
            "--grpc-web: lab serves gRPC-Web on its own engine only; drop --transport h2"
                .to_owned(),
        ));
    }
    let threads = args.threads.unwrap_or(1);
    if threads == 0 {
        return Err(InputError(
            "--threads (or GRPC_SERVER_CPUS) must be at least 1".to_owned(),
        ));
    }
    let placement = match args.decode {
        PlacementArg::Inline => Placement::Inline,
        PlacementArg::Task => Placement::Task,
        PlacementArg::Pool => Placement::Pool,
        PlacementArg::Adaptive => Placement::Adaptive,
    };
    let transport = match args.transport {
        TransportArg::Engine => Transport::Engine,
        TransportArg::H2 => Transport::H2,
    };
    if args.pool_threads == 0 || args.pool_queue == 0 {
        return Err(InputError(
            "--pool-threads and --pool-queue must be at least 1".to_owned(),
        ));
    }
    if args.max_concurrent_streams == 0 {
        return Err(InputError(
            "--max-concurrent-streams must be at least 1".to_owned(),
        ));
    }
    if args.max_connections == 0 {
        return Err(InputError(
            "--max-connections must be at least 1".to_owned(),
        ));
    }
    let max_connections = within_descriptor_limit(args.max_connections);
    if !(65_535..=0x7fff_ffff).contains(&args.connection_window) {
        return Err(InputError(format!(
            "--connection-window {} is outside what HTTP/2 allows (65535 to 2147483647 bytes)",
            args.connection_window
        )));
    }
    if !(65_535..=0x7fff_ffff).contains(&args.stream_window) {
        return Err(InputError(format!(
            "--stream-window {} is outside what HTTP/2 allows (65535 to 2147483647 bytes)",
            args.stream_window
        )));
    }
    if args.max_message_bytes > u32::MAX as usize {
        return Err(InputError(format!(
            "--max-message-bytes {} is larger than a gRPC message can be ({} bytes)",
            args.max_message_bytes,
            u32::MAX
        )));
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(ServerTls {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: args.tls_client_ca.clone(),
        }),
        _ => None,
    };
    // Build the configuration now, so a bad file is a one-line error before anything starts.
    let lab_tls = match &tls {
        Some(tls) => Some(tls.config().map_err(|err| InputError(err.to_string()))?),
        None => None,
    };
    Ok(ServeConfig {
        implementation,
        tls,
        addr: SocketAddr::new(args.host, args.port),
        unix: args.unix.clone(),
        grpc_web: args.grpc_web,
        threads,
        lab: LabConfig {
            transport,
            placement,
            codec: match args.codec {
                CodecArg::View => Codec::View,
                CodecArg::Prost => Codec::Prost,
            },
            pool_threads: args.pool_threads,
            pool_queue: args.pool_queue,
            offload_above: args.offload_above,
            max_message_bytes: args.max_message_bytes,
            max_concurrent_streams: args.max_concurrent_streams,
            connection_window: args.connection_window,
            stream_window: args.stream_window,
            max_connections,
            idle_timeout: Some(args.idle_timeout).filter(|t| !t.is_zero()),
            keepalive_interval: Some(args.keepalive).filter(|t| !t.is_zero()),
            keepalive_timeout: args.keepalive_timeout,
            handler_delay: args.handler_delay,
            handler_spin: args.handler_spin,
            tls: lab_tls,
            grpc_web: args.grpc_web,
        },
    })
}

/// Serves until SIGTERM/Ctrl-C. Prints `listening on ADDR` on stderr once ready, so scripts
/// and the harness can wait for it.
pub fn execute(config: &ServeConfig) -> anyhow::Result<()> {
    grpclab_server::serve(config, |addr| {
        let mut stderr = std::io::stderr();
        let _ = writeln!(
            stderr,
            "grpclab serve: {}{} listening on {addr}",
            config.implementation.name(),
            if config.tls.is_some() { " (TLS)" } else { "" }
        );
        let _ = stderr.flush();
    })?;
    Ok(())
}

/// `--max-connections` as this process can hold them (the soft descriptor limit was raised to
/// the hard one at start): lowered, said in one line, where even that is short, so the accept
/// loop never meets "Too many open files".
fn within_descriptor_limit(wanted: usize) -> usize {
    let Some(limit) = grpclab_core::descriptors::OpenFilesLimit::current() else {
        return wanted;
    };
    let fit = limit.connections() as usize;
    if wanted <= fit {
        return wanted;
    }
    eprintln!(
        "serve: --max-connections {wanted} is more than this process may hold ({} descriptors, RLIMIT_NOFILE; hard limit {}): it accepts at most {fit} connections at once",
        limit.soft, limit.hard
    );
    fit
}
