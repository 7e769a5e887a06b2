//! Control frames both sides read alike (RFC 9113 §6.5, §6.7, §6.8): SETTINGS, PING and
//! GOAWAY belong to the connection (on a stream, a PROTOCOL_ERROR), a SETTINGS
//! acknowledgement carries nothing (FRAME_SIZE_ERROR), a peer's settings are checked and the
//! last value of each one in a frame wins, and a GOAWAY's last stream id may only go down.
//! What a change means for a side's streams (the server's window offsets, the client's
//! windows, its stream limit) and what a flood costs stay with that side's connection.

use crate::frame::{self, code, connection_error, flags, setting, ConnectionError, Header};

/// What a peer's SETTINGS frame changes: each setting's last value in the frame, if any.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SettingsChange {
    /// SETTINGS_HEADER_TABLE_SIZE: the largest HPACK table our encoder may use.
    pub header_table_size: Option<u32>,
    /// SETTINGS_MAX_CONCURRENT_STREAMS: how many streams we may open.
    pub max_concurrent_streams: Option<u32>,
    /// SETTINGS_INITIAL_WINDOW_SIZE: every stream's send window, open ones shifted (§6.9.2).
    pub initial_window_size: Option<u32>,
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame payload we may send.
    pub max_frame_size: Option<u32>,
}

/// Reads a SETTINGS frame: `Ok(None)` for an acknowledgement, the change otherwise. A frame on
/// a stream, an acknowledgement with a payload, a bad length or an out-of-range value is a
/// connection error.
pub fn read_settings(
    header: &Header,
    payload: &[u8],
) -> Result<Option<SettingsChange>, ConnectionError> {
    if header.stream != 0 {
        return Err(connection_error(
            code::PROTOCOL_ERROR,
            "SETTINGS on a stream",
        ));
    }
    if header.has(flags::ACK) {
        if !payload.is_empty() {
            return Err(connection_error(
                code::FRAME_SIZE_ERROR,
                "SETTINGS ACK with a payload",
            ));
        }
        return Ok(None);
    }
    // They apply in order, so a frame repeating an entry thousands of times costs what one
    // entry does.
    let mut change = SettingsChange::default();
    for (id, value) in frame::parse_settings(payload)? {
        match id {
            setting::HEADER_TABLE_SIZE => change.header_table_size = Some(value),
            setting::MAX_CONCURRENT_STREAMS => change.max_concurrent_streams = Some(value),
            setting::INITIAL_WINDOW_SIZE => change.initial_window_size = Some(value),
            setting::MAX_FRAME_SIZE => change.max_frame_size = Some(value),
            _ => {}
        }
    }
    Ok(Some(change))
}

/// Reads a PING frame: the 8 bytes to echo when it asks for an answer, `None` for an
/// acknowledgement. On a stream or not 8 bytes long, a connection error.
pub fn read_ping<'a>(
    header: &Header,
    payload: &'a [u8],
) -> Result<Option<&'a [u8]>, ConnectionError> {
    if header.stream != 0 {
        return Err(connection_error(code::PROTOCOL_ERROR, "PING on a stream"));
    }
    frame::check_ping(payload)?;
    Ok((!header.has(flags::ACK)).then_some(payload))
}

/// A peer's GOAWAY: the last stream it processed or may process, and why it is going.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoAway {
    /// Streams above it were never processed (safe to retry).
    pub last_stream: u32,
    /// Its error code (NO_ERROR for a graceful shutdown).
    pub code: u32,
}

/// Reads a GOAWAY frame after the `earlier` one, if any: on a stream, shorter than 8 bytes or
/// raising the last stream id (§6.8: it may only go down), a connection error.
pub fn read_goaway(
    header: &Header,
    payload: &[u8],
    earlier: Option<GoAway>,
) -> Result<GoAway, ConnectionError> {
    if header.stream != 0 {
        return Err(connection_error(code::PROTOCOL_ERROR, "GOAWAY on a stream"));
    }
    let (last_stream, code) = frame::parse_goaway(payload)?;
    if earlier.is_some_and(|earlier| last_stream > earlier.last_stream) {
        return Err(connection_error(
            code::PROTOCOL_ERROR,
            "a second GOAWAY raised the last stream id",
        ));
    }
    Ok(GoAway { last_stream, code })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::kind;

    fn header(kind: u8, flags: u8, stream: u32, length: usize) -> Header {
        Header {
            length: length as u32,
            kind,
            flags,
            stream,
        }
    }

    #[test]
    fn settings_keep_each_last_value_and_acks_are_empty() {
        let payload = [0, 4, 0, 0, 0, 9, 0, 4, 0, 0, 0, 7, 0, 3, 0, 0, 0, 2];
        let change = read_settings(&header(kind::SETTINGS, 0, 0, 18), &payload)
            .unwrap()
            .unwrap();
        assert_eq!(change.initial_window_size, Some(7));
        assert_eq!(change.max_concurrent_streams, Some(2));
        assert_eq!(change.max_frame_size, None);
        assert_eq!(
            read_settings(&header(kind::SETTINGS, flags::ACK, 0, 0), &[]),
            Ok(None)
        );
        let code_of = |h: Header, p: &[u8]| read_settings(&h, p).unwrap_err().code;
        assert_eq!(
            code_of(header(kind::SETTINGS, flags::ACK, 0, 6), &payload[..6]),
            code::FRAME_SIZE_ERROR
        );
        assert_eq!(
            code_of(header(kind::SETTINGS, 0, 3, 0), &[]),
            code::PROTOCOL_ERROR
        );
    }

    #[test]
    fn pings_and_goaways_belong_to_the_connection() {
        assert_eq!(
            read_ping(&header(kind::PING, 0, 0, 8), b"12345678"),
            Ok(Some(&b"12345678"[..]))
        );
        assert_eq!(
            read_ping(&header(kind::PING, flags::ACK, 0, 8), b"12345678"),
            Ok(None)
        );
        assert!(read_ping(&header(kind::PING, 0, 1, 8), b"12345678").is_err());
        let goaway = |last: u32| [&last.to_be_bytes()[..], &[0, 0, 0, 2]].concat();
        let first = read_goaway(&header(kind::GOAWAY, 0, 0, 8), &goaway(9), None).unwrap();
        assert_eq!(
            first,
            GoAway {
                last_stream: 9,
                code: 2
            }
        );
        assert!(read_goaway(&header(kind::GOAWAY, 0, 0, 8), &goaway(7), Some(first)).is_ok());
        assert!(read_goaway(&header(kind::GOAWAY, 0, 0, 8), &goaway(11), Some(first)).is_err());
        assert!(read_goaway(&header(kind::GOAWAY, 0, 1, 8), &goaway(1), None).is_err());
    }
}
