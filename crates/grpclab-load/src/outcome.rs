//! How a call ended, in gRPC terms: what both transports report to the thread that records
//! it. Below the transports and the run loop; depends on nothing of this crate.

use grpclab_core::Code;

/// How a call ended, when it did not end with OK.
#[derive(Debug)]
pub(crate) struct CallFailure {
    pub code: Code,
    pub message: String,
    /// The failure concerns the whole connection (I/O error, GOAWAY), not just this stream:
    /// the stream must wait for the connection driver to reconnect.
    pub connection_lost: bool,
}

impl CallFailure {
    pub(crate) fn new(code: Code, message: impl Into<String>) -> CallFailure {
        CallFailure {
            code,
            message: message.into(),
            connection_lost: false,
        }
    }

    /// A call with a retry policy whose deadline came before attempt `attempt` could go.
    pub(crate) fn deadline_before_attempt(attempt: u32) -> CallFailure {
        CallFailure::new(
            Code::DeadlineExceeded,
            format!("{DEADLINE_MESSAGE} (before attempt {attempt})"),
        )
    }

    /// A call with a retry policy whose last of `attempts` attempts answered after the
    /// call's deadline (each attempt had the whole timeout of its own).
    pub(crate) fn deadline_over_attempts(attempts: u32) -> CallFailure {
        CallFailure::new(
            Code::DeadlineExceeded,
            format!("{DEADLINE_MESSAGE} (over {attempts} attempts)"),
        )
    }
}

/// The most a compressed reply may inflate to before it is refused (when validating).
pub(crate) const REPLY_INFLATE_LIMIT: usize = 64 << 20;

/// What a call that lost its connection without a known reason reports.
pub(crate) const CONNECTION_LOST: &str = "connection lost";

/// How a call that outlived its deadline (`-t`) is described.
pub(crate) const DEADLINE_MESSAGE: &str = "deadline exceeded (client side)";
