//! Why a built-in server could not start or stopped.

use std::net::SocketAddr;

/// Errors that end a server.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    // `reason` is not the error's `source`: the message already holds it, and a chain
    // printer would say it twice.
    #[error("cannot listen on {addr}: {reason} (is another server on that port? pick another with --port)")]
    Bind {
        /// the address
        addr: SocketAddr,
        /// why
        reason: std::io::Error,
    },
    /// The unix socket could not be bound.
    #[error("cannot listen on unix:{}: {reason}", path.display())]
    BindUnix {
        /// the socket's path
        path: std::path::PathBuf,
        /// why, with what to do about it
        reason: String,
    },
    /// The runtime could not be built.
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    /// The TLS files could not be used.
    #[error("{0}")]
    Tls(String),
    /// The server failed while serving.
    #[error("server failed: {0}")]
    Serve(String),
}
