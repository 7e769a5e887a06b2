//! Each run reports what the server's HTTP/2 frames allowed the client (`serverWindows` in
//! the JSON): its stream and connection windows, streams at once and frame size, read off
//! the wire by the engine, so a benchmark row lists the windows its server really used.

mod common;

use common::{load_report, Server};

/// `load -O json` against `server`: its `serverWindows`.
fn windows_of(server: &Server) -> serde_json::Value {
    let target = server.target();
    let (report, code, stderr) = load_report(&[
        &target,
        "--insecure",
        "--scenario",
        "string_10B",
        "-n",
        "50",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    report.expect("a JSON report")["serverWindows"].clone()
}

/// The most a server left its connection window open is its window less what was in flight
/// when it said so: within a few requests of `window`, never above it.
fn connection_window_is(seen: &serde_json::Value, window: u64) {
    let open = seen["connectionWindowLargest"]
        .as_u64()
        .expect("connectionWindowLargest");
    assert!(
        open <= window && open + 64 * 1024 > window,
        "{open} for {window}: {seen}"
    );
}

#[test]
fn the_servers_windows_are_read_off_its_frames() {
    // lab: 1 MiB a stream, 16 MiB a connection (its defaults), or the connection window asked.
    let lab = windows_of(&Server::start("lab"));
    assert_eq!(lab["streamWindowFirst"], 1 << 20, "{lab}");
    connection_window_is(&lab, 16 << 20);
    assert_eq!(lab["maxFrameSize"], 16_384, "{lab}");
    assert!(lab["maxConcurrentStreams"].as_u64().is_some(), "{lab}");
    let narrow = windows_of(&Server::start_with(&[
        "--impl",
        "lab",
        "--connection-window",
        "8388608",
    ]));
    connection_window_is(&narrow, 8 << 20);
    // lab's stream window as asked (HTTP/2's smallest here).
    let small = windows_of(&Server::start_with(&[
        "--impl",
        "lab",
        "--stream-window",
        "65535",
    ]));
    assert_eq!(small["streamWindowFirst"], 65_535, "{small}");
    // tonic-mt: hyper's 1 MiB for both.
    let tonic = windows_of(&Server::start("tonic-mt"));
    assert_eq!(tonic["streamWindowFirst"], 1 << 20, "{tonic}");
    connection_window_is(&tonic, 1 << 20);
    // Neither grows its stream window while the connection runs.
    for seen in [&lab, &narrow, &tonic] {
        assert_eq!(
            seen["streamWindowLargest"], seen["streamWindowFirst"],
            "{seen}"
        );
    }
}

/// A stream window HTTP/2 cannot advertise is one line, exit 2, before anything listens.
#[test]
fn a_stream_window_outside_http2s_range_is_refused_in_one_line() {
    for window in ["100", "2147483648"] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_grpclab"))
            .args([
                "serve",
                "--impl",
                "lab",
                "--port",
                "0",
                "--stream-window",
                window,
            ])
            .output()
            .expect("run grpclab serve");
        let said = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(2), "{window}: {said}");
        assert!(
            said.contains(&format!(
                "--stream-window {window} is outside what HTTP/2 allows"
            )),
            "{said}"
        );
        assert_eq!(said.trim().lines().count(), 1, "{said}");
    }
}
