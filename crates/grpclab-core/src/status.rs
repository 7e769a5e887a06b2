//! gRPC status codes, named as ghz (and Go's `codes` package) name them, so that a ghz user reads
//! the same words in our status code distribution.

use std::fmt;

/// A gRPC status code (the `grpc-status` trailer), per the gRPC status code specification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Code {
    /// Not an error.
    Ok = 0,
    /// The operation was cancelled, typically by the caller.
    Canceled = 1,
    /// An unknown error, or a status the client could not interpret.
    Unknown = 2,
    /// The client specified an invalid argument.
    InvalidArgument = 3,
    /// The deadline expired before the operation could complete.
    DeadlineExceeded = 4,
    /// Some requested entity was not found.
    NotFound = 5,
    /// The entity the client tried to create already exists.
    AlreadyExists = 6,
    /// The caller lacks permission.
    PermissionDenied = 7,
    /// Some resource has been exhausted (a quota, a message size limit, memory).
    ResourceExhausted = 8,
    /// The system is not in a state required for the operation.
    FailedPrecondition = 9,
    /// The operation was aborted (a concurrency conflict).
    Aborted = 10,
    /// The operation was attempted past the valid range.
    OutOfRange = 11,
    /// The operation is not implemented or not supported.
    Unimplemented = 12,
    /// An internal error: an invariant of the underlying system broke.
    Internal = 13,
    /// The service is currently unavailable (connection refused or lost, GOAWAY).
    Unavailable = 14,
    /// Unrecoverable data loss or corruption.
    DataLoss = 15,
    /// The request lacks valid authentication credentials.
    Unauthenticated = 16,
}

impl Code {
    /// How many codes there are: a `[T; Code::COUNT]` indexed by `code as usize` holds one per code.
    pub const COUNT: usize = 17;

    /// Every code, in numeric order.
    pub const ALL: [Code; Code::COUNT] = [
        Code::Ok,
        Code::Canceled,
        Code::Unknown,
        Code::InvalidArgument,
        Code::DeadlineExceeded,
        Code::NotFound,
        Code::AlreadyExists,
        Code::PermissionDenied,
        Code::ResourceExhausted,
        Code::FailedPrecondition,
        Code::Aborted,
        Code::OutOfRange,
        Code::Unimplemented,
        Code::Internal,
        Code::Unavailable,
        Code::DataLoss,
        Code::Unauthenticated,
    ];

    /// The code with this number; numbers outside 0..=16 are `Unknown`, as the spec asks clients
    /// to treat them.
    pub fn from_u32(value: u32) -> Code {
        Code::ALL
            .get(value as usize)
            .copied()
            .unwrap_or(Code::Unknown)
    }

    /// Parses the value of a `grpc-status` header (ASCII decimal). Anything else is `Unknown`.
    pub fn from_header(value: &[u8]) -> Code {
        if value.is_empty() || value.len() > 3 || !value.iter().all(u8::is_ascii_digit) {
            return Code::Unknown;
        }
        let number = value
            .iter()
            .fold(0u32, |acc, digit| acc * 10 + u32::from(digit - b'0'));
        Code::from_u32(number)
    }

    /// The gRPC status a client must infer from a non-200 HTTP status when the server sent no
    /// `grpc-status` ("HTTP to gRPC Status Code Mapping" in the gRPC documentation).
    pub fn from_http_status(status: u16) -> Code {
        match status {
            400 => Code::Internal,
            401 => Code::Unauthenticated,
            403 => Code::PermissionDenied,
            404 => Code::Unimplemented,
            429 | 502 | 503 | 504 => Code::Unavailable,
            _ => Code::Unknown,
        }
    }

    /// The name ghz and Go use for this code, e.g. `DeadlineExceeded`.
    pub fn name(self) -> &'static str {
        match self {
            Code::Ok => "OK",
            Code::Canceled => "Canceled",
            Code::Unknown => "Unknown",
            Code::InvalidArgument => "InvalidArgument",
            Code::DeadlineExceeded => "DeadlineExceeded",
            Code::NotFound => "NotFound",
            Code::AlreadyExists => "AlreadyExists",
            Code::PermissionDenied => "PermissionDenied",
            Code::ResourceExhausted => "ResourceExhausted",
            Code::FailedPrecondition => "FailedPrecondition",
            Code::Aborted => "Aborted",
            Code::OutOfRange => "OutOfRange",
            Code::Unimplemented => "Unimplemented",
            Code::Internal => "Internal",
            Code::Unavailable => "Unavailable",
            Code::DataLoss => "DataLoss",
            Code::Unauthenticated => "Unauthenticated",
        }
    }

    /// The code whose [`name`](Code::name) this is.
    pub fn from_name(name: &str) -> Option<Code> {
        Code::ALL.iter().copied().find(|code| code.name() == name)
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names_round_trip() {
        for (number, code) in Code::ALL.iter().enumerate() {
            assert_eq!(*code as usize, number);
            assert_eq!(Code::from_u32(number as u32), *code);
            assert_eq!(Code::from_name(code.name()), Some(*code));
        }
        assert_eq!(Code::from_u32(17), Code::Unknown);
    }

    #[test]
    fn header_values_parse_strictly() {
        assert_eq!(Code::from_header(b"0"), Code::Ok);
        assert_eq!(Code::from_header(b"14"), Code::Unavailable);
        assert_eq!(Code::from_header(b"1x"), Code::Unknown);
        assert_eq!(Code::from_header(b""), Code::Unknown);
        assert_eq!(Code::from_header(b"99999"), Code::Unknown);
    }

    #[test]
    fn http_statuses_map_per_spec() {
        assert_eq!(Code::from_http_status(404), Code::Unimplemented);
        assert_eq!(Code::from_http_status(503), Code::Unavailable);
        assert_eq!(Code::from_http_status(500), Code::Unknown);
    }
}
