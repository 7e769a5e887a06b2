//! A problem with what the user asked for, shared by every crate that reads a flag, a file
//! or a target: the command line prints it as one line and exits with code 2.

/// A problem with what the user asked for (a flag, a file, a payload, an unreachable target):
/// printed as one line, exit code 2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);
