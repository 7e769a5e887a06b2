//! Control frames read alike by both sides (RFC 9113 §6.5, §6.7, §6.8, §6.9.2): SETTINGS,
//! PING and GOAWAY belong to the connection, an acknowledgement carries nothing, the last
//! stream id of a GOAWAY may only go down, and a new initial window may not push an open
//! stream's window past 2^31-1. The server's side is in grpclab-server's rfc9113 tests; here
//! the client, fed a server's bytes with its calls in flight.

use grpclab_h2::client::feed_client;
use grpclab_h2::frame::{code, kind, setting, MAX_WINDOW};
use grpclab_testkit::raw::frame;

/// A server's bytes after the valid preface `feed_client` prepends (shape bit 0), calls on
/// streams 1, 3, ... in flight: what connection error they cause, if any.
fn client_error_on(server: &[u8]) -> Option<u32> {
    let mut input = vec![1, 0];
    input.extend_from_slice(server);
    let fed = feed_client(&input);
    assert_eq!(
        fed.started,
        fed.completed + fed.lost,
        "every call ends once"
    );
    fed.error.map(|error| error.code)
}

fn settings(entries: &[(u16, u32)]) -> Vec<u8> {
    let payload: Vec<u8> = entries
        .iter()
        .flat_map(|(id, value)| [&id.to_be_bytes()[..], &value.to_be_bytes()[..]].concat())
        .collect();
    frame(kind::SETTINGS, 0, 0, &payload)
}

#[test]
fn connection_frames_on_a_stream_end_the_connection() {
    assert_eq!(
        client_error_on(&frame(kind::SETTINGS, 0, 1, &[])),
        Some(code::PROTOCOL_ERROR)
    );
    assert_eq!(
        client_error_on(&frame(kind::PING, 0, 1, b"pingpong")),
        Some(code::PROTOCOL_ERROR)
    );
    assert_eq!(
        client_error_on(&frame(kind::GOAWAY, 0, 1, &[0, 0, 0, 1, 0, 0, 0, 0])),
        Some(code::PROTOCOL_ERROR)
    );
    // The same frames on stream 0 are fine.
    assert_eq!(client_error_on(&settings(&[])), None);
    assert_eq!(client_error_on(&frame(kind::PING, 0, 0, b"pingpong")), None);
}

#[test]
fn a_settings_acknowledgement_carries_nothing() {
    assert_eq!(
        client_error_on(&frame(kind::SETTINGS, 0x1, 0, &[0, 4, 0, 0, 0, 1])),
        Some(code::FRAME_SIZE_ERROR)
    );
}

#[test]
fn a_goaway_may_only_lower_its_last_stream() {
    let goaway = |last: u32| {
        frame(
            kind::GOAWAY,
            0,
            0,
            &[&last.to_be_bytes()[..], &[0; 4]].concat(),
        )
    };
    assert_eq!(client_error_on(&[goaway(15), goaway(3)].concat()), None);
    assert_eq!(
        client_error_on(&[goaway(3), goaway(15)].concat()),
        Some(code::PROTOCOL_ERROR)
    );
}

#[test]
fn a_new_initial_window_may_not_overflow_an_open_stream() {
    // Stream 1's window raised to within 100 bytes of 2^31-1 (65,535 granted, less what its
    // request spent), then the initial window raised by 200: past the maximum.
    let raise = MAX_WINDOW - 65_535 - 100;
    let update = frame(kind::WINDOW_UPDATE, 0, 1, &raise.to_be_bytes());
    let wider = settings(&[(setting::INITIAL_WINDOW_SIZE, 65_535 + 200)]);
    assert_eq!(
        client_error_on(&[update.clone(), wider].concat()),
        Some(code::FLOW_CONTROL_ERROR)
    );
    // Raised by less than the room left: accepted.
    let narrow = settings(&[(setting::INITIAL_WINDOW_SIZE, 65_535 + 50)]);
    assert_eq!(client_error_on(&[update, narrow].concat()), None);
}
