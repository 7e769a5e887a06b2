//! A header block equal to an earlier one is answered as decoding it would be. Our engine uses
//! the fields of a repeated block as they stand, which is right only while the HPACK dynamic
//! table is unchanged: an index names whatever entry the table holds when the block is decoded
//! (RFC 7541 §2.3.3). These tests send the same bytes before and after the table changes, over
//! a raw socket, and check each call is routed by the table of its own moment.

use crate::common::frame::*;
use crate::common::*;
use grpclab_server::lab::LabConfig;

const SAY_HELLO: &str = "/helloworld.Greeter/SayHello";
const NO_SUCH_METHOD: &str = "/helloworld.Greeter/NoSuchMethod";

/// A literal with a name from the static table, as RFC 7541 §6.2.2 (`prefix` 0x00: without
/// indexing) or §6.2.1 (`prefix` 0x40: with incremental indexing; the field enters the
/// dynamic table at index 62 and pushes older entries up).
fn literal(prefix: u8, static_name: u8, value: &str) -> Vec<u8> {
    let mut bytes = vec![prefix | static_name, value.len() as u8];
    bytes.extend_from_slice(value.as_bytes());
    bytes
}

/// The fields every request here carries besides `:path`: :authority and content-type as
/// literals without indexing, so only `:path` ever enters the table.
fn rest_of_request() -> Vec<u8> {
    let mut block = literal(0x00, 1, "localhost"); // :authority
    block.extend_from_slice(&[0x0f, 0x10, 16]); // content-type (static 31 = 15 + 16)
    block.extend_from_slice(b"application/grpc");
    block
}

/// `:method POST`, `:scheme http`, then `:path` inserted into the dynamic table.
fn block_inserting_path(path: &str) -> Vec<u8> {
    let mut block = vec![0x83, 0x86];
    block.extend_from_slice(&literal(0x40, 4, path)); // :path (static 4), indexed
    block.extend_from_slice(&rest_of_request());
    block
}

/// `:method POST`, `:scheme http`, then `:path` as dynamic index 62: the newest entry.
fn block_with_newest_path() -> Vec<u8> {
    let mut block = vec![0x83, 0x86, 0x80 | 62];
    block.extend_from_slice(&rest_of_request());
    block
}

/// Sends one call on `stream` with this header block and the complex_proto request; returns
/// whether it was answered with a message (DATA before the trailers) rather than with a
/// trailers-only error such as UNIMPLEMENTED.
fn answered_with_a_message(connection: &mut RawConnection, stream: u32, block: &[u8]) -> bool {
    connection.send(HEADERS, END_HEADERS, stream, block);
    connection.send(DATA, END_STREAM, stream, &complex_request());
    let mut data_seen = false;
    loop {
        let frame = connection
            .read_frame()
            .unwrap_or_else(|| panic!("stream {stream}: the connection ended before its answer"));
        assert_ne!(frame.kind, GOAWAY, "stream {stream}: the connection failed");
        if frame.stream != stream {
            continue;
        }
        assert_ne!(frame.kind, RST_STREAM, "stream {stream} was reset");
        if frame.kind == DATA && !frame.payload.is_empty() {
            data_seen = true;
        }
        if frame.flags & END_STREAM != 0 {
            return data_seen;
        }
    }
}

/// Sends one call on `stream` with this header block; the RST_STREAM code it was answered
/// with, or `None` when it was answered otherwise (or the connection failed).
fn reset_code(connection: &mut RawConnection, stream: u32, block: &[u8]) -> Option<u32> {
    connection.send(HEADERS, END_HEADERS, stream, block);
    connection.send(DATA, END_STREAM, stream, &complex_request());
    loop {
        let frame = connection.read_frame().expect("the connection ended");
        if frame.stream == stream && frame.kind == RST_STREAM {
            return Some(u32::from_be_bytes(frame.payload[..4].try_into().ok()?));
        }
        if frame.kind == GOAWAY || (frame.stream == stream && frame.flags & END_STREAM != 0) {
            return None;
        }
    }
}

#[test]
fn a_repeated_block_follows_the_table_of_its_own_moment() {
    each_lab_transport(LabConfig::default(), |name, server| {
        let mut connection = RawConnection::open(server.addr);
        let repeated = block_with_newest_path();
        // Index 62 is SayHello: the repeated block calls it, the second time from reuse.
        assert!(answered_with_a_message(
            &mut connection,
            1,
            &block_inserting_path(SAY_HELLO)
        ));
        assert!(
            answered_with_a_message(&mut connection, 3, &repeated),
            "{name}"
        );
        assert!(
            answered_with_a_message(&mut connection, 5, &repeated),
            "{name}"
        );
        // A new entry at 62: the same bytes now name a method that does not exist.
        assert!(
            !answered_with_a_message(&mut connection, 7, &block_inserting_path(NO_SUCH_METHOD)),
            "{name}: an unknown method was answered with a message"
        );
        assert!(
            !answered_with_a_message(&mut connection, 9, &repeated),
            "{name}: a repeated block was answered from a table that has changed since"
        );
        assert!(
            !answered_with_a_message(&mut connection, 11, &repeated),
            "{name}"
        );
        // And back: SayHello enters again, and the same bytes call it again.
        assert!(answered_with_a_message(
            &mut connection,
            13,
            &block_inserting_path(SAY_HELLO)
        ));
        assert!(
            answered_with_a_message(&mut connection, 15, &repeated),
            "{name}"
        );
        // A block whose own fields call SayHello (its :path a literal) while it puts another
        // field at 62: the repeated block now names no :path at all. The fields held are
        // the valid SayHello call's, so only a server that knows the repeated block must be
        // decoded again (the table moved under it) refuses it.
        let mut moving = vec![0x83, 0x86];
        moving.extend_from_slice(&literal(0x00, 4, SAY_HELLO));
        moving.extend_from_slice(&rest_of_request());
        moving.extend_from_slice(&[0x40, 5]);
        moving.extend_from_slice(b"x-tag");
        moving.extend_from_slice(&[1, b'1']);
        assert!(
            answered_with_a_message(&mut connection, 17, &moving),
            "{name}"
        );
        assert_eq!(
            reset_code(&mut connection, 19, &repeated),
            Some(PROTOCOL_ERROR),
            "{name}: a repeated block was read with the fields of the block before it"
        );
    });
}

#[test]
fn a_repeated_block_that_changes_the_table_itself_is_decoded_again() {
    each_lab_transport(LabConfig::default(), |name, server| {
        let mut connection = RawConnection::open(server.addr);
        assert!(answered_with_a_message(
            &mut connection,
            1,
            &block_inserting_path(SAY_HELLO)
        ));
        // `:path` from index 62, then a new field indexed: decoding this block pushes the
        // path to 63 and puts `x-tag: 1` at 62. The same bytes a second time read `x-tag`
        // where the path was: a request without :path, malformed (RFC 9113 §8.3.1).
        let mut changing = block_with_newest_path();
        changing.extend_from_slice(&[0x40, 5]);
        changing.extend_from_slice(b"x-tag");
        changing.extend_from_slice(&[1, b'1']);
        assert!(
            answered_with_a_message(&mut connection, 3, &changing),
            "{name}"
        );
        assert_eq!(
            reset_code(&mut connection, 5, &changing),
            Some(PROTOCOL_ERROR),
            "{name}: the second copy of a table-changing block was not decoded again"
        );
    });
}
