//! grpclab's built-in gRPC servers, the implementations `grpclab serve` runs and `grpclab bench`
//! measures.
//!
//! - [`tonic_baseline`]: idiomatic tonic, as grpc_bench's `rust_tonic_mt` and `rust_tonic_st`
//!   write it. Every claim about a faster server is measured against it.
//! - [`lab`]: our own server, with its decode placement a setting.
//! - [`channel`]: tonic channels (plaintext or TLS) for the admin RPCs and reflection.
//! - [`alloc_count`] and [`stats`]: a counting global allocator and the admin RPC
//!   (`grpclab.admin.v1.Stats/Get`) both servers expose on their own port.
//! - [`health`]: gRPC's health checking protocol (`grpc.health.v1.Health/Check`), served by
//!   both, each check counted as a call.
//! - [`heap_profile`]: allocation sites over a window (dhat), driven through the admin service
//!   `grpclab.admin.v1.HeapProfile`.
//!
//! Every server implements the scenarios' `helloworld.Greeter/SayHello` generically: decode the
//! request, build the reply from it, encode the reply — never echo raw bytes, never assume
//! requests are identical (grpc_bench's rules).
#![deny(missing_docs)]

pub mod alloc_count;
pub mod channel;
pub mod health;
pub mod heap_profile;
pub mod lab;
pub mod session;
pub mod stats;
pub mod tonic_baseline;

mod error;
mod proto;

pub use error::ServeError;
pub use proto::{pb, pb_admin, pb_streaming};

use std::net::SocketAddr;

/// Which built-in server to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Implementation {
    /// tonic on a multi-thread runtime with `threads` workers (grpc_bench's `rust_tonic_mt`).
    TonicMt,
    /// tonic on a current-thread runtime (grpc_bench's `rust_tonic_st`).
    TonicSt,
    /// grpclab's own server.
    Lab,
}

impl Implementation {
    /// Every built-in implementation with its command-line name.
    pub const ALL: [(&'static str, Implementation); 3] = [
        ("tonic-mt", Implementation::TonicMt),
        ("tonic-st", Implementation::TonicSt),
        ("lab", Implementation::Lab),
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        Implementation::ALL
            .iter()
            .find(|(_, implementation)| *implementation == self)
            .map_or("?", |(name, _)| name)
    }
}

/// How to run a built-in server.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Which server.
    pub implementation: Implementation,
    /// Where to listen.
    pub addr: SocketAddr,
    /// lab only: listen on this unix socket instead of `addr` (plaintext).
    pub unix: Option<std::path::PathBuf>,
    /// Worker threads (tonic-mt's runtime workers; lab's I/O threads).
    pub threads: usize,
    /// The lab server's settings (ignored by the tonic servers).
    pub lab: lab::LabConfig,
    /// Serve TLS with these files instead of plaintext h2c. The tonic servers read them with
    /// tonic's own `ServerTlsConfig` (as tonic users do); lab takes the rustls configuration
    /// built from them in `lab.tls`.
    pub tls: Option<grpclab_core::tls::ServerTls>,
    /// The tonic servers: serve gRPC-Web too, through tonic-web's layer (lab: `lab.grpc_web`).
    pub grpc_web: bool,
}

/// Runs a built-in server until SIGTERM or Ctrl-C, then drains in-flight calls and returns.
/// `on_ready` is called with where it listens (`IP:PORT`, or `unix:PATH`) once the server
/// accepts connections.
pub fn serve(config: &ServeConfig, on_ready: impl FnOnce(String)) -> Result<(), ServeError> {
    if let Some(path) = &config.unix {
        if config.implementation != Implementation::Lab || config.tls.is_some() {
            return Err(ServeError::BindUnix {
                path: path.clone(),
                reason: "only lab listens on a unix socket, in plaintext: use --impl lab without --tls-cert".to_owned(),
            });
        }
        let listener = lab::bind_unix(path)?;
        let shutdown = tokio_util::sync::CancellationToken::new();
        cancel_on_signal(shutdown.clone())?;
        on_ready(format!("unix:{}", path.display()));
        let result = lab::run(
            lab::Listener::Unix(listener),
            config.threads,
            config.lab.clone(),
            shutdown,
        );
        // The socket file outlives its listener: remove it, as servers that made one do.
        let _ = std::fs::remove_file(path);
        return result;
    }
    if config.implementation == Implementation::Lab {
        let listener = lab::bind(config.addr)?;
        let local = listener.local_addr().map_err(|reason| ServeError::Bind {
            addr: config.addr,
            reason,
        })?;
        let shutdown = tokio_util::sync::CancellationToken::new();
        cancel_on_signal(shutdown.clone())?;
        on_ready(local.to_string());
        return lab::run(listener, config.threads, config.lab.clone(), shutdown);
    }
    let runtime = match config.implementation {
        Implementation::TonicSt => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        _ => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.threads.max(1))
            .enable_all()
            .build(),
    }
    .map_err(ServeError::Runtime)?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(config.addr)
            .await
            .map_err(|reason| ServeError::Bind {
                addr: config.addr,
                reason,
            })?;
        let local = listener.local_addr().map_err(|reason| ServeError::Bind {
            addr: config.addr,
            reason,
        })?;
        on_ready(local.to_string());
        tonic_baseline::run(
            listener,
            config.implementation.name(),
            config.tls.as_ref(),
            config.grpc_web,
            shutdown_signal(),
        )
        .await
    })
}

/// Cancels `token` on SIGTERM or Ctrl-C, from a small thread of its own.
fn cancel_on_signal(token: tokio_util::sync::CancellationToken) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    // Register the handlers before returning, so a signal right after start-up is not lost.
    let signals = runtime.block_on(async { Signals::register() });
    std::thread::Builder::new()
        .name("grpclab-signals".to_owned())
        .spawn(move || {
            runtime.block_on(signals.wait());
            token.cancel();
        })
        .map_err(ServeError::Runtime)?;
    Ok(())
}

/// SIGTERM and SIGINT handlers, registered.
struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn register() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Signals {
                term: signal(SignalKind::terminate()).ok(),
                int: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    async fn wait(mut self) {
        #[cfg(unix)]
        {
            let term = async {
                match &mut self.term {
                    Some(term) => {
                        term.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let int = async {
                match &mut self.int {
                    Some(int) => {
                        int.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = term => {}
                _ = int => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
