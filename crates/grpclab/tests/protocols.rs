//! `load --protocol`: gRPC-Web (binary and text) and Connect, unary calls and server
//! streams, over real sockets. Against tonic-web (`serve --grpc-web`) and connect-go: every
//! call and reply counted as gRPC counts them, every code mapped back. Against a scripted
//! server: each status found where its protocol keeps it, and each malformed answer or
//! stream one clear outcome.

mod common;

use common::scripted::{ScriptedReply, ScriptedServer};
use common::{grpclab, load_report, Server};

/// A gRPC frame: flag, length, payload.
fn frame(flag: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![flag];
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// `load TARGET --protocol P --transport h2 -O json`: `n` calls, 4 at a time, of what
/// `call` names (a scenario, or a .proto, method and data): the report, exit code, stderr.
fn load_in(
    target: &str,
    protocol: &str,
    n: u64,
    call: &[&str],
    extra: &[&str],
) -> (serde_json::Value, Option<i32>, String) {
    let n = n.to_string();
    let mut args = vec![target, "--insecure"];
    args.extend_from_slice(call);
    args.extend_from_slice(&[
        "--transport",
        "h2",
        "--protocol",
        protocol,
        "-n",
        &n,
        "-c",
        "4",
    ]);
    args.extend_from_slice(extra);
    let (report, code, stderr) = load_report(&args);
    (
        report.unwrap_or_else(|| panic!("{protocol} {call:?}: no JSON report: {stderr}")),
        code,
        stderr,
    )
}

/// [`load_in`] for string_10B's unary calls.
fn load_as(
    target: &str,
    protocol: &str,
    n: u64,
    extra: &[&str],
) -> (serde_json::Value, Option<i32>, String) {
    load_in(target, protocol, n, &["--scenario", "string_10B"], extra)
}

/// The streaming echo's .proto: its Feed is a server stream.
const STREAMING_PROTO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../scenarios/streaming/streaming.proto"
);

/// [`load_in`] for the streaming echo's Feed with `data`.
fn feed_as(
    target: &str,
    protocol: &str,
    data: &str,
    n: u64,
    extra: &[&str],
) -> (serde_json::Value, Option<i32>, String) {
    let call = [
        "--proto",
        STREAMING_PROTO,
        "--call",
        "grpclab.streaming.v1.StreamingEcho.Feed",
        "-d",
        data,
    ];
    load_in(target, protocol, n, &call, extra)
}

/// A Feed of 50 replies to each of 300 calls in `protocol`: every call OK, every reply
/// counted, one gap per reply after each call's first.
fn every_reply_counted(target: &str, protocol: &str) {
    every_reply_counted_with(target, protocol, &[]);
}

/// [`every_reply_counted`] with `extra` flags.
fn every_reply_counted_with(target: &str, protocol: &str, extra: &[&str]) {
    let (report, code, stderr) = feed_as(
        target,
        protocol,
        r#"{"count":50,"payload":"aGVsbG8="}"#,
        300,
        extra,
    );
    assert_eq!(code, Some(0), "{protocol}: {stderr}");
    assert_eq!(
        report["statusCodeDistribution"]["OK"], 300,
        "{protocol}: {report}"
    );
    assert_eq!(
        (&report["messagesSent"], &report["messagesReceived"]),
        (&300.into(), &15000.into()),
        "{protocol}"
    );
    assert_eq!(report["messageGaps"]["count"], 15000 - 300, "{protocol}");
    // ghz's --stream-call-count: each stream cancelled after 9 replies, a success.
    let (report, _, stderr) = feed_as(
        target,
        protocol,
        r#"{"count":50}"#,
        40,
        &[extra, &["--stream-call-count", "9"]].concat(),
    );
    assert_eq!(
        report["statusCodeDistribution"]["OK"], 40,
        "{protocol}: {stderr}"
    );
    assert_eq!(report["messagesReceived"], 360, "{protocol}");
}

/// `load` with `args` against nothing: refused in one line saying `says`, exit 2.
fn refused(args: &[&str], says: &str) {
    let out = grpclab()
        .args(["load", "127.0.0.1:1", "--insecure"])
        .args(args)
        .output()
        .expect("run grpclab load");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(says), "{args:?}: {stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

/// The only error line of a report: (status name, count, message).
fn only_error(report: &serde_json::Value) -> (String, u64, String) {
    let statuses = report["statusCodeDistribution"]
        .as_object()
        .expect("statusCodeDistribution");
    assert_eq!(statuses.len(), 1, "{statuses:?}");
    let (status, count) = statuses.iter().next().unwrap();
    let errors = report["errorDistribution"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let message = errors.keys().next().cloned().unwrap_or_default();
    (status.clone(), count.as_u64().unwrap_or(0), message)
}

#[test]
fn grpc_web_and_its_text_form_count_every_call_as_grpc_does() {
    let server = Server::start_with(&["--impl", "tonic-mt", "--grpc-web"]);
    let target = server.target();
    let mut served_before = server.stats()["calls"].as_u64().unwrap_or(0);
    for protocol in ["grpc", "grpc-web", "grpc-web-text"] {
        let (report, code, stderr) = load_as(&target, protocol, 300, &["--validate"]);
        assert_eq!(code, Some(0), "{protocol}: {stderr}");
        assert_eq!(report["count"], 300, "{protocol}: {report}");
        assert_eq!(report["statusCodeDistribution"]["OK"], 300, "{protocol}");
        // The JSON names a protocol other than gRPC.
        let named = report["options"]["protocol"].as_str().unwrap_or("grpc");
        assert_eq!(named, protocol);
        // The server answered each call once: what the client counted is what was served.
        let served = server.stats()["calls"].as_u64().unwrap_or(0);
        assert_eq!(served - served_before, 300, "{protocol}");
        // A server stream, its replies counted as gRPC counts them.
        every_reply_counted(&target, protocol);
        served_before = server.stats()["calls"].as_u64().unwrap_or(0);
    }
}

/// lab does not serve gRPC-Web: it refuses each such call with HTTP 415 (one clear outcome),
/// not a gRPC reply whose status a gRPC-Web client never finds.
#[test]
fn lab_refuses_grpc_web_calls_with_415() {
    let server = Server::start_with(&["--impl", "lab"]);
    let (report, code, stderr) = load_as(&server.target(), "grpc-web", 8, &[]);
    each_of_8_failed_alike(
        "grpc-web",
        (&report, code, &stderr),
        "Unknown",
        "HTTP status 415",
    );
}

/// 8 gRPC-Web calls of a method the server does not have (`x.Y.Z`, from a .proto written
/// for it): each UNIMPLEMENTED, naming the method.
fn each_unknown_method_call_is_unimplemented(target: &str, extra: &[&str]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let proto = dir.path().join("unknown.proto");
    std::fs::write(
        &proto,
        "syntax = \"proto3\"; package x; message M {} service Y { rpc Z(M) returns (M); }",
    )
    .expect("write the .proto");
    let proto = proto.to_string_lossy();
    let (report, code, stderr) = load_in(
        target,
        "grpc-web",
        8,
        &["--proto", &proto, "--call", "x.Y.Z", "-d", "{}"],
        extra,
    );
    each_of_8_failed_alike(
        "grpc-web",
        (&report, code, &stderr),
        "Unimplemented",
        "unknown method /x.Y/Z",
    );
}

/// lab with `--grpc-web` serves gRPC-Web's binary form on its own engine: every call
/// counted as gRPC counts it, on each path a reply takes (written in place; built by prost;
/// larger than one frame, so it waits for window and its last DATA ends the stream; from the
/// decode pool; under gzip, answered uncompressed).
#[test]
fn lab_serves_grpc_web_calls_as_it_serves_grpc() {
    let paths: [(&[&str], &str, &[&str]); 5] = [
        (&[], "string_10B", &[]),
        (&["--codec", "prost"], "complex_proto", &[]),
        (&[], "large_complex", &[]),
        (&["--decode", "pool"], "string_1kB", &[]),
        (&[], "string_100B", &["-e"]),
    ];
    for (serve, scenario, load) in paths {
        let mut args = vec!["--impl", "lab", "--grpc-web"];
        args.extend_from_slice(serve);
        let server = Server::start_with(&args);
        let target = server.target();
        let mut served_before = server.stats()["calls"].as_u64().unwrap_or(0);
        for protocol in ["grpc", "grpc-web"] {
            // A reply that never ends fails its call in 10 s rather than hanging the run.
            let mut extra = vec!["--validate", "-t", "10s"];
            extra.extend_from_slice(load);
            let call = ["--scenario", scenario];
            let (report, code, stderr) = load_in(&target, protocol, 200, &call, &extra);
            let case = format!("{protocol} {scenario} {serve:?} {load:?}");
            assert_eq!(code, Some(0), "{case}: {stderr}");
            assert_eq!(
                report["statusCodeDistribution"]["OK"], 200,
                "{case}: {report}"
            );
            let served = server.stats()["calls"].as_u64().unwrap_or(0);
            assert_eq!(served - served_before, 200, "{case}");
            served_before = served;
        }
    }
}

/// lab's refusals of a gRPC-Web call are gRPC-Web statuses its client reads: an unknown
/// method, a server stream (not served over gRPC-Web), a message over the limit, a deadline
/// passed; its text form is refused with 415 as gRPC-Web is without `--grpc-web`.
#[test]
fn lab_answers_grpc_web_errors_in_grpc_web() {
    let server =
        Server::start_with(&["--impl", "lab", "--grpc-web", "--max-message-bytes", "1000"]);
    let target = server.target();
    let (report, code, stderr) = feed_as(&target, "grpc-web", r#"{"count":3}"#, 8, &[]);
    each_of_8_failed_alike(
        "grpc-web",
        (&report, code, &stderr),
        "Unimplemented",
        "lab serves gRPC-Web's unary calls only",
    );
    let (report, code, stderr) =
        load_in(&target, "grpc-web", 8, &["--scenario", "string_10kB"], &[]);
    each_of_8_failed_alike(
        "grpc-web",
        (&report, code, &stderr),
        "ResourceExhausted",
        "larger than the server's limit of 1000",
    );
    let (report, code, stderr) = load_as(&target, "grpc-web-text", 8, &[]);
    each_of_8_failed_alike(
        "grpc-web-text",
        (&report, code, &stderr),
        "Unknown",
        "HTTP status 415",
    );
    each_unknown_method_call_is_unimplemented(&target, &[]);
}

/// What lab's gRPC-Web replies are on the wire, read by the h2 crate (a client apart from
/// grpclab's): gRPC-Web's content type, the message and then the trailer frame in the body,
/// no HTTP trailers; an error trailers-only, with gRPC-Web's content type too.
#[test]
fn lab_grpc_web_replies_carry_their_status_in_the_body() {
    use grpclab_testkit::h2_call::{raw_call, RawCall};
    let server = Server::start_with(&["--impl", "lab", "--grpc-web"]);
    let web_call = |path| RawCall {
        path,
        headers: vec![
            ("content-type", "application/grpc-web+proto"),
            ("x-grpc-web", "1"),
        ],
        // A HelloRequest whose `request` field is empty: its reply is empty too.
        body: Some(bytes::Bytes::from_static(b"\0\0\0\0\0")),
        keep_open: false,
    };
    let reply = raw_call(server.addr, web_call("/helloworld.Greeter/SayHello"));
    assert_eq!(reply.http_status, 200);
    assert_eq!(reply.headers["content-type"], "application/grpc-web+proto");
    assert!(reply.trailers.is_none(), "{:?}", reply.trailers);
    let mut expected = frame(0, b"");
    expected.extend_from_slice(&frame(0x80, b"grpc-status:0\r\n"));
    assert_eq!(reply.body, expected);
    let refused = raw_call(server.addr, web_call("/x.Y/Z"));
    assert_eq!(
        refused.headers["content-type"],
        "application/grpc-web+proto"
    );
    assert_eq!(refused.grpc_status(), Some(12), "{:?}", refused.headers);
    assert!(refused.body.is_empty());
}

/// `serve --impl lab --transport h2 --grpc-web`: refused in one line (gRPC-Web is served on
/// lab's own engine only).
#[test]
fn lab_on_the_h2_crate_refuses_grpc_web_in_one_line() {
    let out = grpclab()
        .args(["serve", "--impl", "lab", "--transport", "h2", "--grpc-web"])
        .output()
        .expect("run grpclab serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("drop --transport h2"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[test]
fn a_grpc_web_status_is_read_from_its_trailer_frame_or_its_headers() {
    // A message, then the trailer frame: NotFound with a percent-encoded message.
    let server = ScriptedServer::start(ScriptedReply {
        status: 200,
        headers: vec![("content-type", "application/grpc-web+proto".to_owned())],
        body: [
            frame(0, b""),
            frame(0x80, b"grpc-status: 5\r\ngrpc-message: gone%21\r\n"),
        ]
        .concat(),
        trailers: None,
    });
    let (report, _, stderr) = load_as(&server.target(), "grpc-web", 20, &[]);
    assert_eq!(server.received(), 20, "{stderr}");
    let (status, count, message) = only_error(&report);
    assert_eq!((status.as_str(), count), ("NotFound", 20));
    assert!(message.contains("gone!"), "{message}");
    // The request went as gRPC-Web goes.
    let headers = server.last_headers();
    assert!(headers.contains(&("content-type".into(), "application/grpc-web+proto".into())));
    assert!(headers.contains(&("x-grpc-web".into(), "1".into())));
    assert!(!headers.iter().any(|(name, _)| name == "te"), "{headers:?}");

    // Trailers-Only: the status in the headers, no body.
    let server = ScriptedServer::start(ScriptedReply {
        status: 200,
        headers: vec![
            ("content-type", "application/grpc-web+proto".to_owned()),
            ("grpc-status", "7".to_owned()),
            ("grpc-message", "no".to_owned()),
        ],
        body: Vec::new(),
        trailers: None,
    });
    let (report, _, _) = load_as(&server.target(), "grpc-web", 10, &[]);
    let (status, count, _) = only_error(&report);
    assert_eq!((status.as_str(), count), ("PermissionDenied", 10));
}

#[test]
fn a_connect_error_is_read_from_its_json_with_its_details() {
    let server = ScriptedServer::start(ScriptedReply {
        status: 404,
        headers: vec![("content-type", "application/json".to_owned())],
        body:
            br#"{"code":"not_found","message":"no such item","details":[{"type":"x","value":""}]}"#
                .to_vec(),
        trailers: None,
    });
    let (report, _, stderr) = load_as(&server.target(), "connect", 12, &["-t", "2s"]);
    assert_eq!(server.received(), 12, "{stderr}");
    let (status, count, message) = only_error(&report);
    assert_eq!((status.as_str(), count), ("NotFound", 12));
    assert!(
        message.contains("no such item (1 error detail)"),
        "{message}"
    );
    // Connect's request: its content type and version, its deadline in milliseconds.
    let headers = server.last_headers();
    for expected in [
        ("content-type", "application/proto"),
        ("connect-protocol-version", "1"),
        ("connect-timeout-ms", "2000"),
    ] {
        assert!(
            headers.contains(&(expected.0.into(), expected.1.into())),
            "{expected:?} in {headers:?}"
        );
    }
    // A 200 with the bare message is OK.
    let server = ScriptedServer::start(ScriptedReply {
        status: 200,
        headers: vec![("content-type", "application/proto".to_owned())],
        body: Vec::new(),
        trailers: None,
    });
    let (report, code, stderr) = load_as(&server.target(), "connect", 12, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(report["statusCodeDistribution"]["OK"], 12, "{report}");
}

/// A server that breaks the protocol gets one clear outcome per call, never a panic, and
/// every call is accounted for.
/// A run of 8 calls against a lying server: no panic, all 8 counted, each ended with
/// `code_name` and a message saying `says`.
fn each_of_8_failed_alike(
    protocol: &str,
    (report, code, stderr): (&serde_json::Value, Option<i32>, &str),
    code_name: &str,
    says: &str,
) {
    assert_ne!(code, Some(101), "{protocol}: a panic: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(report["count"], 8, "{protocol}: {report}");
    let (status, count, message) = only_error(report);
    assert_eq!(
        (status.as_str(), count),
        (code_name, 8),
        "{protocol}: {message}"
    );
    assert!(
        message.contains(says),
        "{protocol}: {message} (wanted {says:?})"
    );
    // The line saying nothing succeeded quotes the reply's own error before any hint.
    let quoted: String = message.chars().take(60).collect();
    assert!(
        stderr.contains(&format!("failed (8 {code_name}); most often \"{quoted}")),
        "{protocol}: {stderr}"
    );
}

#[test]
fn each_malformed_answer_is_one_clear_outcome() {
    let cases: Vec<(&str, ScriptedReply, &str, &str)> = vec![
        (
            "grpc-web",
            ScriptedReply {
                status: 200,
                headers: vec![("content-type", "application/grpc-web+proto".to_owned())],
                body: frame(0, b""),
                trailers: None,
            },
            "Internal",
            "without its trailer frame",
        ),
        (
            "grpc-web-text",
            ScriptedReply {
                status: 200,
                headers: vec![("content-type", "application/grpc-web-text+proto".to_owned())],
                body: b"not base64!".to_vec(),
                trailers: None,
            },
            "Internal",
            "base64",
        ),
        (
            "grpc-web",
            ScriptedReply {
                status: 200,
                headers: vec![("content-type", "text/html".to_owned())],
                body: b"<html></html>".to_vec(),
                trailers: None,
            },
            "Unknown",
            "content-type is \"text/html\"",
        ),
        (
            "connect",
            ScriptedReply {
                status: 503,
                headers: vec![("content-type", "application/json".to_owned())],
                body: br#"{"message":"busy"}"#.to_vec(),
                trailers: None,
            },
            "Unavailable",
            "without a known code (none): busy",
        ),
        (
            "connect",
            ScriptedReply {
                status: 200,
                headers: vec![("content-type", "application/grpc".to_owned())],
                body: frame(0, b""),
                trailers: Some(vec![("grpc-status", "0".to_owned())]),
            },
            "Unknown",
            "not Connect's application/proto",
        ),
    ];
    for (protocol, reply, code_name, says) in cases {
        let server = ScriptedServer::start(reply);
        let (report, code, stderr) = load_as(&server.target(), protocol, 8, &[]);
        each_of_8_failed_alike(protocol, (&report, code, &stderr), code_name, says);
        assert_eq!(server.received(), 8, "{protocol}");
    }
}

#[test]
fn a_protocol_the_run_cannot_speak_is_refused_in_one_line() {
    for (args, says) in [
        (
            &["--scenario", "string_10B", "--protocol", "grpc-web"][..],
            "--protocol grpc-web runs on the h2 crate's transport so far: add --transport h2",
        ),
        (
            &[
                "--scenario",
                "streaming_ping_pong",
                "--protocol",
                "grpc-web",
                "--transport",
                "h2",
            ][..],
            "streams requests; gRPC-Web carries unary and server-streaming calls only",
        ),
        (
            &[
                "--scenario",
                "client_stream_1kB",
                "--protocol",
                "connect",
                "--transport",
                "h2",
                "--http1",
            ][..],
            "streams requests, which go over HTTP/2 here: leave --http1 out",
        ),
        (
            &[
                "--proto",
                STREAMING_PROTO,
                "--call",
                "grpclab.streaming.v1.StreamingEcho.Feed",
                "--protocol",
                "grpc-web",
                "--transport",
                "h2",
                "--stream-stamp",
                "sent_unix_nanos",
            ][..],
            "--stream-stamp reads gRPC's frames",
        ),
    ] {
        refused(args, says);
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("lab.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
    let out = grpclab()
        .args(["load", &format!("unix:{}", socket.display()), "--insecure"])
        .args(["--scenario", "string_10B", "--transport", "h2"])
        .args(["--protocol", "connect", "--http1"])
        .output()
        .expect("run grpclab load");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--http1 dials TCP so far"), "{stderr}");
}

/// A server stream that breaks its protocol: one clear outcome per call, its replies up to
/// the break still counted.
#[test]
fn each_malformed_stream_is_one_clear_outcome() {
    let web = |body: Vec<u8>| ScriptedReply {
        status: 200,
        headers: vec![("content-type", "application/grpc-web+proto".to_owned())],
        body,
        trailers: None,
    };
    let connect = |content_type: &str, body: Vec<u8>| ScriptedReply {
        status: 200,
        headers: vec![("content-type", content_type.to_owned())],
        body,
        trailers: None,
    };
    let cases: Vec<(&str, ScriptedReply, &str, &str, u64)> = vec![
        (
            "grpc-web",
            web([frame(0, b""), frame(0, b"")].concat()),
            "Internal",
            "without its trailer frame",
            2,
        ),
        (
            "grpc-web",
            web([frame(0x80, b"grpc-status: 0\r\n"), frame(0, b"")].concat()),
            "Internal",
            "bytes after the trailer frame",
            0,
        ),
        (
            "connect",
            connect("application/connect+proto", frame(0, b"")),
            "Internal",
            "without its end-stream message",
            1,
        ),
        (
            "connect",
            connect(
                "application/connect+proto",
                [
                    frame(0, b""),
                    frame(2, br#"{"error":{"code":"no_such_code"}}"#),
                ]
                .concat(),
            ),
            "Unknown",
            "without a known code (\"no_such_code\")",
            1,
        ),
        (
            "connect",
            connect("application/connect+proto", frame(2, b"not json")),
            "Internal",
            "end-stream message is not JSON",
            0,
        ),
        (
            "connect",
            connect("application/proto", frame(2, b"{}")),
            "Unknown",
            "not application/connect+proto",
            0,
        ),
    ];
    for (protocol, reply, code_name, says, replies) in cases {
        let server = ScriptedServer::start(reply);
        let (report, code, stderr) = feed_as(&server.target(), protocol, "{}", 8, &[]);
        each_of_8_failed_alike(protocol, (&report, code, &stderr), code_name, says);
        assert_eq!(
            report["messagesReceived"],
            8 * replies,
            "{protocol}: {says}"
        );
        assert_eq!(server.received(), 8, "{protocol}");
    }
}

/// 3 calls that asked connect-go for code `number` (x-want-code) all ended with it, with
/// the handler's message (and in Connect its error detail).
fn asked_code_came_back(protocol: &str, number: u32, report: &serde_json::Value, stderr: &str) {
    let (status, count, message) = only_error(report);
    let expected = grpclab_core::Code::from_u32(number).name();
    assert_eq!(
        (status.as_str(), count),
        (expected, 3),
        "{protocol} code {number}: {message} {stderr}"
    );
    assert!(
        message.contains(&format!("asked for code {number}")),
        "{protocol}: {message}"
    );
    if protocol == "connect" {
        assert!(message.contains("(1 error detail)"), "{message}");
    }
}

/// A peer built with Go from `peers/DIR` (its `build.sh`, given `build_args` and then the
/// build folder) and listening on a free loopback port until dropped; `None` (the test
/// skipped) where a tool it needs is missing, never on CI.
struct GoPeer {
    child: std::process::Child,
    target: String,
    _build: tempfile::TempDir,
}

impl GoPeer {
    /// Builds the peer, then starts what `command` makes of the build folder and a port.
    fn start(
        dir: &str,
        build_args: &[std::path::PathBuf],
        tools: &[&str],
        command: impl FnOnce(&std::path::Path, u16) -> std::process::Command,
    ) -> Option<GoPeer> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let has = |tool: &&str| {
            std::process::Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .output()
                .is_ok_and(|out| out.status.success())
        };
        if !tools.iter().all(has) {
            assert!(
                std::env::var_os("CI").is_none(),
                "{tools:?} are installed on CI (peers/install.sh go)"
            );
            eprintln!("SKIPPED: one of {tools:?} is missing here (bash peers/install.sh go)");
            return None;
        }
        let build = tempfile::tempdir().expect("build folder");
        let built = std::process::Command::new("./build.sh")
            .args(build_args)
            .arg(build.path())
            .current_dir(root.join("peers").join(dir))
            .output()
            .expect("run the peer's build.sh");
        assert!(
            built.status.success(),
            "peers/{dir} build failed: {}",
            String::from_utf8_lossy(&built.stderr)
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = command(build.path(), port)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the peer");
        let target = format!("127.0.0.1:{port}");
        // Listening once a connection is accepted (it starts in milliseconds; the loop
        // ends on its own if it never does).
        let mut tries = 0;
        while std::net::TcpStream::connect(&target).is_err() {
            tries += 1;
            assert!(tries < 500, "peers/{dir} never listened on {target}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Some(GoPeer {
            child,
            target,
            _build: build,
        })
    }
}

impl Drop for GoPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The connect-go peer (peers/connect_go), built for string_10B.
fn connect_go() -> Option<GoPeer> {
    connect_go_serving(None)
}

/// The connect-go peer serving TLS with `pair` (Go's net/http offers h2 and http/1.1).
fn connect_go_tls(pair: &common::pki::Pair) -> Option<GoPeer> {
    connect_go_serving(Some(pair))
}

/// The connect-go peer, in plaintext or (given a certificate and key) TLS.
fn connect_go_serving(tls: Option<&common::pki::Pair>) -> Option<GoPeer> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    GoPeer::start(
        "connect_go",
        &[root.join("scenarios/string_10B")],
        &["go", "protoc"],
        |build, port| {
            let mut command = std::process::Command::new(build.join("server"));
            command
                .arg(port.to_string())
                .env("GRPC_SERVER_HOST", "127.0.0.1");
            if let Some(pair) = tls {
                command.arg(&pair.cert).arg(&pair.key);
            }
            command
        },
    )
}

/// grpcwebproxy (peers/grpcwebproxy, the role Envoy's grpc_web filter plays) in front of
/// the gRPC server at `backend`, on loopback.
fn grpcwebproxy(backend: &str) -> Option<GoPeer> {
    GoPeer::start("grpcwebproxy", &[], &["go"], |build, port| {
        let mut command = std::process::Command::new(build.join("bin/grpcwebproxy"));
        command.args([
            &format!("--backend_addr={backend}"),
            "--run_tls_server=false",
            "--server_bind_address=127.0.0.1",
            &format!("--server_http_debug_port={port}"),
            "--allow_all_origins",
        ]);
        command
    })
}

/// Through grpcwebproxy (gRPC-Web over HTTP/1.1 to it, gRPC from it to lab): every call of
/// each gRPC-Web form counted as lab served it, and lab's status for an unknown method
/// comes back through the proxy's trailer frame.
#[test]
fn through_grpcwebproxy_every_call_reaches_lab_and_its_status_comes_back() {
    let lab = Server::start_with(&["--impl", "lab"]);
    let Some(proxy) = grpcwebproxy(&lab.target()) else {
        return;
    };
    let http1 = ["--http1", "--connections", "4", "--validate"];
    let mut served_before = lab.stats()["calls"].as_u64().unwrap_or(0);
    for protocol in ["grpc-web", "grpc-web-text"] {
        let (report, code, stderr) = load_as(&proxy.target, protocol, 300, &http1);
        assert_eq!(code, Some(0), "{protocol}: {stderr}");
        assert_eq!(
            report["statusCodeDistribution"]["OK"], 300,
            "{protocol}: {report}"
        );
        let served = lab.stats()["calls"].as_u64().unwrap_or(0);
        assert_eq!(served - served_before, 300, "{protocol}");
        served_before = served;
    }
    each_unknown_method_call_is_unimplemented(&proxy.target, &["--http1"]);
}

/// connect-go serves gRPC, gRPC-Web and Connect from one handler: each protocol gets every
/// call answered, and each gRPC code the handler returns comes back as itself, with its
/// message (and, in Connect, its error detail counted). gRPC-Web's text form is one clear
/// outcome: connect-go does not speak it (415).
#[test]
fn against_connect_go_every_protocol_counts_calls_and_maps_every_code() {
    let Some(peer) = connect_go() else {
        return;
    };
    for protocol in ["grpc", "grpc-web", "connect"] {
        let (report, code, stderr) = load_as(&peer.target, protocol, 200, &["--validate"]);
        assert_eq!(code, Some(0), "{protocol}: {stderr}");
        assert_eq!(
            report["statusCodeDistribution"]["OK"], 200,
            "{protocol}: {report}"
        );
        for number in 1..=16u32 {
            let metadata = format!(r#"{{"x-want-code":"{number}"}}"#);
            let (report, _, stderr) = load_as(&peer.target, protocol, 3, &["-m", &metadata]);
            asked_code_came_back(protocol, number, &report, &stderr);
        }
    }
    // Protobuf's JSON mapping in each protocol, every reply checked against the method.
    for protocol in ["grpc", "grpc-web", "connect"] {
        let (report, code, stderr) = load_as(
            &peer.target,
            protocol,
            100,
            &["--codec", "json", "--validate"],
        );
        assert_eq!(code, Some(0), "{protocol} json: {stderr}");
        assert_eq!(
            report["statusCodeDistribution"]["OK"], 100,
            "{protocol} json"
        );
    }
    // Over HTTP/1.1 too (Go's net/http serves both): 4 streams taking turns on 2 connections.
    for protocol in ["grpc-web", "connect"] {
        let (report, code, stderr) = load_as(
            &peer.target,
            protocol,
            100,
            &["--http1", "--connections", "2", "--validate"],
        );
        assert_eq!(code, Some(0), "{protocol} http1: {stderr}");
        assert_eq!(
            report["statusCodeDistribution"]["OK"], 100,
            "{protocol} http1"
        );
        let (report, _, _) = load_as(
            &peer.target,
            protocol,
            3,
            &["--http1", "-m", r#"{"x-want-code":"7"}"#],
        );
        assert_eq!(
            only_error(&report).0,
            "PermissionDenied",
            "{protocol} http1"
        );
    }
    let (report, _, _) = load_as(&peer.target, "grpc-web-text", 5, &[]);
    let (status, count, message) = only_error(&report);
    assert_eq!((status.as_str(), count), ("Unknown", 5));
    assert!(message.contains("HTTP status 415"), "{message}");
}

/// Server streams against connect-go's Feed in each protocol: every reply counted as gRPC
/// counts them, and a stream that fails after its replies keeps them counted and ends with
/// its code, from HTTP/2 trailers (gRPC), the trailer frame (gRPC-Web) or the end-stream
/// message with its error detail (Connect).
#[test]
fn against_connect_go_server_streams_count_every_reply_in_each_protocol() {
    let Some(peer) = connect_go() else {
        return;
    };
    for protocol in ["grpc", "grpc-web", "connect"] {
        every_reply_counted(&peer.target, protocol);
        for number in 1..=16u32 {
            let metadata = format!(r#"{{"x-want-code":"{number}"}}"#);
            let (report, _, stderr) = feed_as(
                &peer.target,
                protocol,
                r#"{"count":3}"#,
                3,
                &["-m", &metadata],
            );
            asked_code_came_back(protocol, number, &report, &stderr);
            assert_eq!(report["messagesReceived"], 9, "{protocol} code {number}");
        }
        // In JSON (`application/grpc+json`, `grpc-web+json`, `connect+json`): the request
        // in protobuf's JSON mapping, each reply counted, a status read as in proto.
        let (report, code, stderr) = feed_as(
            &peer.target,
            protocol,
            r#"{"count":50,"payload":"aGVsbG8="}"#,
            100,
            &["--codec", "json"],
        );
        assert_eq!(code, Some(0), "{protocol} json: {stderr}");
        assert_eq!(
            report["statusCodeDistribution"]["OK"], 100,
            "{protocol} json"
        );
        assert_eq!(report["messagesReceived"], 5000, "{protocol} json");
        let (report, _, stderr) = feed_as(
            &peer.target,
            protocol,
            r#"{"count":3}"#,
            3,
            &["--codec", "json", "-m", r#"{"x-want-code":"5"}"#],
        );
        asked_code_came_back(protocol, 5, &report, &stderr);
        assert_eq!(report["messagesReceived"], 9, "{protocol} json code 5");
    }
}

/// `-e` (gzip) in each protocol against connect-go, each in its own headers: unary calls
/// (validated) and server streams counted, and failures read from compressed replies: a
/// gRPC-Web trailer frame connect-go compresses (0x81), Connect's gzip error JSON and its
/// compressed end-stream message.
#[test]
fn against_connect_go_gzip_goes_in_each_protocols_own_headers() {
    let Some(peer) = connect_go() else {
        return;
    };
    for protocol in ["grpc", "grpc-web", "connect"] {
        let (report, code, stderr) = load_as(&peer.target, protocol, 100, &["-e", "--validate"]);
        assert_eq!(code, Some(0), "{protocol} -e: {stderr}");
        assert_eq!(report["statusCodeDistribution"]["OK"], 100, "{protocol}");
        let (report, _, stderr) = load_as(
            &peer.target,
            protocol,
            3,
            &["-e", "-m", r#"{"x-want-code":"10"}"#],
        );
        asked_code_came_back(protocol, 10, &report, &stderr);
        let (report, code, stderr) = feed_as(
            &peer.target,
            protocol,
            r#"{"count":5,"payload":"aGVsbG8="}"#,
            40,
            &["-e"],
        );
        assert_eq!(code, Some(0), "{protocol} -e feed: {stderr}");
        assert_eq!(report["messagesReceived"], 200, "{protocol}");
        let (report, _, stderr) = feed_as(
            &peer.target,
            protocol,
            r#"{"count":5}"#,
            3,
            &["-e", "-m", r#"{"x-want-code":"10"}"#],
        );
        asked_code_came_back(protocol, 10, &report, &stderr);
    }
}

/// Connect's compression is HTTP's: `-e` sends the gzip message as the whole body under
/// `content-encoding: gzip` (no gRPC prefix), and a gzip reply is inflated before it is
/// judged; an encoding the call did not accept is one clear outcome.
#[test]
fn a_connect_call_compresses_in_content_encoding() {
    use std::io::Read;
    let gzip = |bytes: &[u8]| {
        let mut out = Vec::new();
        flate2::read::GzEncoder::new(bytes, flate2::Compression::default())
            .read_to_end(&mut out)
            .unwrap();
        out
    };
    let server = ScriptedServer::start(ScriptedReply {
        status: 409,
        headers: vec![
            ("content-type", "application/json".to_owned()),
            ("content-encoding", "gzip".to_owned()),
        ],
        body: gzip(br#"{"code":"aborted","message":"try again"}"#),
        trailers: None,
    });
    let (report, _, stderr) = load_as(&server.target(), "connect", 6, &["-e"]);
    let (status, count, message) = only_error(&report);
    assert_eq!((status.as_str(), count), ("Aborted", 6), "{stderr}");
    assert!(message.contains("try again"), "{message}");
    let headers = server.last_headers();
    for expected in [("content-encoding", "gzip"), ("accept-encoding", "gzip")] {
        assert!(
            headers.contains(&(expected.0.into(), expected.1.into())),
            "{expected:?} in {headers:?}"
        );
    }
    let mut sent = Vec::new();
    flate2::read::GzDecoder::new(server.last_body().as_slice())
        .read_to_end(&mut sent)
        .expect("the body is one gzip stream, with no gRPC prefix");
    let scenario = grpclab_core::Scenario::builtin("string_10B").unwrap();
    assert_eq!(sent, scenario.requests()[0][5..]);
    // A reply in an encoding the call did not ask for.
    let (report, _, _) = load_as(&server.target(), "connect", 4, &[]);
    let (status, count, message) = only_error(&report);
    assert_eq!((status.as_str(), count), ("Internal", 4));
    assert!(
        message.contains("content-encoding is \"gzip\""),
        "{message}"
    );
}

/// `--codec json`: the request goes as protobuf's JSON mapping under the protocol's JSON
/// content type, and `--validate` reads the reply as JSON: a reply that is not the method's
/// message in JSON fails each call in one line.
#[test]
fn json_requests_are_the_json_mapping_and_json_replies_are_checked() {
    let server = ScriptedServer::start(ScriptedReply {
        status: 200,
        headers: vec![("content-type", "application/json".to_owned())],
        body: br#"{"response":{"name":"grpclab-gr"}}"#.to_vec(),
        trailers: None,
    });
    let (report, code, stderr) = load_as(
        &server.target(),
        "connect",
        10,
        &["--codec", "json", "--validate"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(report["statusCodeDistribution"]["OK"], 10, "{report}");
    assert_eq!(report["options"]["codec"], "json", "{report}");
    let body: serde_json::Value =
        serde_json::from_slice(&server.last_body()).expect("the request body is JSON");
    assert_eq!(body, serde_json::json!({"request": {"name": "grpclab-gr"}}));
    assert!(server
        .last_headers()
        .contains(&("content-type".into(), "application/json".into())));

    let liar = ScriptedServer::start(ScriptedReply {
        status: 200,
        headers: vec![("content-type", "application/json".to_owned())],
        body: br#"{"response": 7}"#.to_vec(),
        trailers: None,
    });
    let (report, _, _) = load_as(
        &liar.target(),
        "connect",
        6,
        &["--codec", "json", "--validate"],
    );
    let (status, count, message) = only_error(&report);
    assert_eq!((status.as_str(), count), ("Internal", 6));
    assert!(message.contains("not its JSON mapping"), "{message}");

    for (args, says) in [
        (
            &["--codec", "json"][..],
            "--codec json runs on the h2 crate's transport so far",
        ),
        (
            &[
                "--codec",
                "json",
                "--transport",
                "h2",
                "-d",
                r#"{"request":{"name":"{{.RequestNumber}}"}}"#,
            ][..],
            "a workload or a payload template cannot use it yet",
        ),
    ] {
        let args = [&["--scenario", "string_10B"][..], args].concat();
        refused(&args, says);
    }
    refused(
        &[
            "--proto",
            STREAMING_PROTO,
            "--call",
            "grpclab.streaming.v1.StreamingEcho.Upload",
            "-d",
            "{}",
            "--codec",
            "json",
            "--transport",
            "h2",
        ],
        "JSON goes in unary calls and server streams only so far",
    );
}

/// `--http1`: gRPC-Web (binary and text) and Connect over HTTP/1.1 keep-alive connections,
/// against tonic-web (which accepts HTTP/1.1 with --grpc-web): every call counted as the
/// server counts it, 8 streams taking turns on 2 connections, none made again.
#[test]
fn over_http1_every_call_is_counted_on_the_connections_asked_for() {
    let server = Server::start_with(&["--impl", "tonic-mt", "--grpc-web"]);
    let target = server.target();
    let mut served_before = server.stats()["calls"].as_u64().unwrap_or(0);
    for protocol in ["grpc-web", "grpc-web-text"] {
        let (report, code, stderr) = load_as(
            &target,
            protocol,
            300,
            &["--http1", "-c", "8", "--connections", "2", "--validate"],
        );
        assert_eq!(code, Some(0), "{protocol}: {stderr}");
        assert_eq!(
            report["statusCodeDistribution"]["OK"], 300,
            "{protocol}: {report}"
        );
        assert_eq!(report["options"]["transport"], "http1", "{protocol}");
        assert_eq!(report["reconnects"], 0, "{protocol}: {report}");
        let served = server.stats()["calls"].as_u64().unwrap_or(0);
        assert_eq!(served - served_before, 300, "{protocol}");
        served_before = served;
    }
    refused(
        &["--scenario", "string_10B", "--transport", "h2", "--http1"],
        "--http1: gRPC needs HTTP/2",
    );
}

/// A server that closes its HTTP/1.1 connection after every reply (`connection: close`):
/// the next call on that connection makes it again, each remade connection is counted, and
/// no call is lost.
#[test]
fn over_http1_a_connection_the_server_closes_is_made_again_for_the_next_call() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let target = listener.local_addr().expect("address").to_string();
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = std::sync::Arc::clone(&answered);
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(mut socket) = socket else { return };
            // One request (its head, then its content-length of body), one reply, closed.
            let mut request = Vec::new();
            let mut buffer = [0u8; 4096];
            let body_start = loop {
                let Ok(n) = socket.read(&mut buffer) else {
                    break None;
                };
                if n == 0 {
                    break None;
                }
                request.extend_from_slice(&buffer[..n]);
                if let Some(at) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                    break Some(at + 4);
                }
            };
            let Some(body_start) = body_start else {
                continue;
            };
            let head = String::from_utf8_lossy(&request[..body_start]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or(0);
            while request.len() < body_start + length {
                let Ok(n) = socket.read(&mut buffer) else {
                    break;
                };
                if n == 0 {
                    break;
                }
                request.extend_from_slice(&buffer[..n]);
            }
            let _ = socket.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/proto\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let (report, code, stderr) = load_as(
        &target,
        "connect",
        20,
        &["--http1", "-c", "2", "--connections", "1"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(report["statusCodeDistribution"]["OK"], 20, "{report}");
    assert_eq!(
        answered.load(std::sync::atomic::Ordering::SeqCst),
        20,
        "{report}"
    );
    // Every call after the first found its connection closed and made it again.
    assert_eq!(report["reconnects"], 19, "{report}");
}

/// `--connect-get`: each unary Connect call goes as GET, its message in the query (unpadded
/// base64url; gzip bytes named in `compression` under `-e`), with no body and no content
/// type; a server that takes no GET for the method (405) is one line saying what to do.
#[test]
fn connect_get_sends_each_message_in_its_query() {
    use base64::Engine;
    use std::io::Read;
    let server = ScriptedServer::start(ScriptedReply {
        status: 200,
        headers: vec![("content-type", "application/proto".to_owned())],
        body: Vec::new(),
        trailers: None,
    });
    let scenario = grpclab_core::Scenario::builtin("string_10B").unwrap();
    let message = &scenario.requests()[0][5..];
    let query_of = |server: &ScriptedServer| {
        let (method, path) = server.last_request_line();
        assert_eq!(method, "GET", "{path}");
        let (path, query) = path.split_once('?').expect("a query");
        assert_eq!(path, "/helloworld.Greeter/SayHello");
        assert!(server.last_body().is_empty());
        let headers = server.last_headers();
        assert!(
            !headers.iter().any(|(name, _)| name == "content-type"
                || name == "content-encoding"
                || name == "connect-protocol-version"),
            "{headers:?}"
        );
        let parameters: Vec<(String, String)> = query
            .split('&')
            .map(|pair| {
                let (name, value) = pair.split_once('=').expect("name=value");
                (name.to_owned(), value.to_owned())
            })
            .collect();
        let sent = parameters
            .iter()
            .find(|(name, _)| name == "message")
            .map(|(_, value)| {
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(value)
                    .expect("unpadded base64url")
            })
            .expect("a message parameter");
        (parameters, sent)
    };
    let (report, code, stderr) = load_as(&server.target(), "connect", 10, &["--connect-get"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(report["statusCodeDistribution"]["OK"], 10, "{report}");
    assert_eq!(report["options"]["protocol"], "connect (GET)", "{report}");
    let (parameters, sent) = query_of(&server);
    assert_eq!(sent, message);
    let names: Vec<&str> = parameters.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["connect", "base64", "encoding", "message"]);
    assert_eq!(parameters[0].1, "v1");
    assert_eq!(parameters[2].1, "proto");

    let (report, code, stderr) = load_as(&server.target(), "connect", 4, &["--connect-get", "-e"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(report["statusCodeDistribution"]["OK"], 4, "{report}");
    let (parameters, sent) = query_of(&server);
    assert!(
        parameters.contains(&("compression".into(), "gzip".into())),
        "{parameters:?}"
    );
    let mut inflated = Vec::new();
    flate2::read::GzDecoder::new(sent.as_slice())
        .read_to_end(&mut inflated)
        .expect("the message is one gzip stream");
    assert_eq!(inflated, message);

    let refuses = ScriptedServer::start(ScriptedReply {
        status: 405,
        headers: vec![("allow", "POST".to_owned())],
        body: Vec::new(),
        trailers: None,
    });
    let (report, _, _) = load_as(&refuses.target(), "connect", 5, &["--connect-get"]);
    let (_, count, message) = only_error(&report);
    assert_eq!(count, 5);
    assert!(message.contains("leave out --connect-get"), "{message}");

    for (args, says) in [
        (
            &["--scenario", "string_10B", "--connect-get"][..],
            "--connect-get sends Connect's GET: add --protocol connect",
        ),
        (
            &[
                "--proto",
                STREAMING_PROTO,
                "--call",
                "grpclab.streaming.v1.StreamingEcho.Feed",
                "--protocol",
                "connect",
                "--transport",
                "h2",
                "--connect-get",
            ][..],
            "Connect sends GET for unary calls only",
        ),
    ] {
        refused(args, says);
    }
}

/// Against connect-go, whose SayHello takes GET: every GET call answered over HTTP/2 and
/// HTTP/1.1, in proto and JSON, compressed or not, and a code the handler returns comes
/// back as itself with its detail.
#[test]
fn against_connect_go_get_calls_are_answered_as_posts_are() {
    let Some(peer) = connect_go() else {
        return;
    };
    for extra in [
        &[][..],
        &["--http1", "--connections", "2"][..],
        &["--codec", "json"][..],
        &["-e"][..],
        &["--http1", "-e", "--codec", "json"][..],
    ] {
        let args = [&["--connect-get", "--validate"][..], extra].concat();
        let (report, code, stderr) = load_as(&peer.target, "connect", 200, &args);
        assert_eq!(code, Some(0), "{extra:?}: {stderr}");
        assert_eq!(
            report["statusCodeDistribution"]["OK"], 200,
            "{extra:?}: {report}"
        );
        let args = [
            &["--connect-get", "-m", r#"{"x-want-code":"7"}"#][..],
            extra,
        ]
        .concat();
        let (report, _, stderr) = load_as(&peer.target, "connect", 3, &args);
        asked_code_came_back("connect", 7, &report, &stderr);
    }
}

/// `--http1` over TLS: the client offers HTTP/1.1 alone (ALPN http/1.1) and verifies the
/// server against `--cacert`. connect-go answers every call of each protocol over it, GET
/// too; a server that speaks only HTTP/2 over TLS (lab) refuses the run in one line, and an
/// untrusted certificate is one line too.
#[test]
fn over_http1_tls_offers_http1_alone_and_verifies_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let ca = common::pki::TestCa::new(dir.path(), "main");
    let pair = ca.leaf(dir.path(), "server", false);
    let cacert = ca.cert.to_str().unwrap().to_owned();
    let lab = Server::start_tls(&["--impl", "lab"], &pair);
    let out = grpclab()
        .args([
            "load",
            &lab.target(),
            "--cacert",
            &cacert,
            "--cname",
            "localhost",
        ])
        .args([
            "--scenario",
            "string_10B",
            "--transport",
            "h2",
            "--protocol",
            "grpc-web",
        ])
        .args(["--http1", "-n", "5"])
        .output()
        .expect("run grpclab load");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("leave out --http1"), "{stderr}");

    let Some(peer) = connect_go_tls(&pair) else {
        return;
    };
    let tls = ["--cacert", &cacert, "--cname", "localhost"];
    for protocol in ["grpc-web", "connect"] {
        let load = |extra: &[&str]| {
            let mut args = vec![peer.target.as_str(), "--scenario", "string_10B"];
            args.extend_from_slice(&tls);
            args.extend_from_slice(&[
                "--transport",
                "h2",
                "--protocol",
                protocol,
                "--http1",
                "--connections",
                "2",
                "-c",
                "4",
                "--validate",
            ]);
            args.extend_from_slice(extra);
            load_report(&args)
        };
        let (report, code, stderr) = load(&["-n", "200"]);
        let report = report.unwrap_or_else(|| panic!("{protocol}: {stderr}"));
        assert_eq!(code, Some(0), "{protocol}: {stderr}");
        assert_eq!(
            report["statusCodeDistribution"]["OK"], 200,
            "{protocol}: {report}"
        );
        assert_eq!(report["reconnects"], 0, "{protocol}: {report}");
        if protocol == "connect" {
            let (report, code, stderr) = load(&["-n", "50", "--connect-get"]);
            assert_eq!(code, Some(0), "connect GET: {stderr}");
            assert_eq!(report.unwrap()["statusCodeDistribution"]["OK"], 50);
        }
    }
    // A certificate from a CA the client does not trust.
    let other = common::pki::TestCa::new(dir.path(), "other");
    let out = grpclab()
        .args([
            "load",
            &peer.target,
            "--cacert",
            other.cert.to_str().unwrap(),
        ])
        .args(["--cname", "localhost", "--scenario", "string_10B"])
        .args([
            "--transport",
            "h2",
            "--protocol",
            "connect",
            "--http1",
            "-n",
            "5",
        ])
        .output()
        .expect("run grpclab load");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("certificate"), "{stderr}");
}

/// Server streams over HTTP/1.1 (`--http1`), each stream holding its connection until its
/// last reply: against connect-go (gRPC-Web and Connect) and tonic-web every reply counted
/// as over HTTP/2, and a code after the replies read from the body's last frame. A stream
/// the client ends early (`--stream-call-count`) closes its connection, which the next call
/// makes again: counted as planned, never as a failure.
#[test]
fn over_http1_server_streams_count_every_reply() {
    let http1 = ["--http1", "--connections", "2"];
    if let Some(peer) = connect_go() {
        for protocol in ["grpc-web", "connect"] {
            every_reply_counted_with(&peer.target, protocol, &http1);
            let (report, _, stderr) = feed_as(
                &peer.target,
                protocol,
                r#"{"count":3}"#,
                3,
                &[&http1[..], &["-m", r#"{"x-want-code":"9"}"#]].concat(),
            );
            asked_code_came_back(protocol, 9, &report, &stderr);
            assert_eq!(report["messagesReceived"], 9, "{protocol}");
            let (report, code, stderr) = feed_as(
                &peer.target,
                protocol,
                r#"{"count":50}"#,
                30,
                &[&http1[..], &["--stream-call-count", "9", "-c", "2"]].concat(),
            );
            assert_eq!(code, Some(0), "{protocol}: {stderr}");
            assert_eq!(report["messagesReceived"], 270, "{protocol}");
            // Every stream closed its connection; the last on each of the 2 was not
            // made again.
            assert_eq!(report["reconnects"], 0, "{protocol}: {report}");
            assert_eq!(report["plannedReconnects"], 28, "{protocol}: {report}");
        }
    }
    let server = Server::start_with(&["--impl", "tonic-mt", "--grpc-web"]);
    for protocol in ["grpc-web", "grpc-web-text"] {
        every_reply_counted_with(&server.target(), protocol, &http1);
    }
}

/// [`load_in`] for one of the streaming echo's methods with `data`.
fn echo_as(
    target: &str,
    protocol: &str,
    method: &str,
    data: &str,
    n: u64,
    extra: &[&str],
) -> (serde_json::Value, Option<i32>, String) {
    let call = format!("grpclab.streaming.v1.StreamingEcho.{method}");
    let call = ["--proto", STREAMING_PROTO, "--call", &call, "-d", data];
    load_in(target, protocol, n, &call, extra)
}

/// Connect's client and bidi streams against connect-go, in gRPC beside them: every request
/// sent in its envelope (`application/connect+proto`), the half-close its end, every reply
/// counted, and a code the handler returns after reading the requests read from the
/// end-stream message with its detail.
#[test]
fn against_connect_go_client_and_bidi_streams_count_every_message() {
    let Some(peer) = connect_go() else {
        return;
    };
    let payload = r#"{"payload":"aGVsbG8="}"#;
    for protocol in ["grpc", "connect"] {
        for extra in [&[][..], &["-e"][..]] {
            let count = [&["--stream-call-count", "20"][..], extra].concat();
            let (report, code, stderr) =
                echo_as(&peer.target, protocol, "Upload", payload, 100, &count);
            assert_eq!(code, Some(0), "{protocol} {extra:?}: {stderr}");
            assert_eq!(report["statusCodeDistribution"]["OK"], 100, "{report}");
            assert_eq!(
                (&report["messagesSent"], &report["messagesReceived"]),
                (&2000.into(), &100.into()),
                "{protocol} {extra:?}"
            );
            let (report, code, stderr) =
                echo_as(&peer.target, protocol, "PingPong", payload, 100, &count);
            assert_eq!(code, Some(0), "{protocol} {extra:?}: {stderr}");
            assert_eq!(report["statusCodeDistribution"]["OK"], 100, "{report}");
            assert_eq!(
                (&report["messagesSent"], &report["messagesReceived"]),
                (&2000.into(), &2000.into()),
                "{protocol} {extra:?}"
            );
            assert!(report["roundTrip"]["fastest"].as_u64().unwrap_or(0) > 0);
        }
        for method in ["Upload", "PingPong"] {
            let (report, _, stderr) = echo_as(
                &peer.target,
                protocol,
                method,
                payload,
                3,
                &["--stream-call-count", "4", "-m", r#"{"x-want-code":"8"}"#],
            );
            asked_code_came_back(protocol, 8, &report, &stderr);
            assert_eq!(report["messagesSent"], 12, "{protocol} {method}");
        }
    }
}

/// A gRPC-Web run is a run like any other: its shards merge to their sum with the protocol
/// kept (a gRPC part beside them is refused, naming the protocol), a threshold it misses sets
/// the exit code with its results kept, and `capacity` searches in it (lab without
/// `--grpc-web` refuses every call, so the search cannot have spoken gRPC).
#[test]
fn grpc_web_runs_merge_gate_and_search_capacity_as_grpc_does() {
    let server = Server::start_with(&["--impl", "lab", "--grpc-web"]);
    let target = server.target();
    let dir = tempfile::tempdir().unwrap();
    let web = [
        target.as_str(),
        "--insecure",
        "--no-history",
        "--scenario",
        "string_10B",
        "--transport",
        "h2",
        "--protocol",
        "grpc-web",
        "-n",
        "300",
        "-c",
        "4",
        "--connections",
        "2",
    ];
    let (parts, merged) = common::run_shards_and_merge(&web, 2, dir.path());
    assert_eq!(merged["count"], 300, "{merged}");
    assert_eq!(merged["statusCodeDistribution"]["OK"], 300, "{merged}");
    assert_eq!(merged["options"]["protocol"], "grpc-web", "{merged}");

    let grpc_part = dir.path().join("grpc.json");
    // The second shard of the same run, in gRPC.
    let grpc: Vec<&str> = web
        .iter()
        .copied()
        .filter(|arg| *arg != "--protocol" && *arg != "grpc-web")
        .collect();
    let out = grpclab()
        .arg("load")
        .args(grpc)
        .args(["--shard", "1/2", "-O", "json", "-o"])
        .arg(&grpc_part)
        .output()
        .expect("run grpclab load");
    assert!(out.status.success());
    let out = grpclab()
        .arg("merge")
        .arg(&parts[0])
        .arg(&grpc_part)
        .output()
        .expect("run grpclab merge");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("the protocol (--protocol)"), "{stderr}");

    let gated = dir.path().join("gated.json");
    let out = grpclab()
        .arg("load")
        .args(web)
        .args(["--threshold", "p99<=1ns", "-O", "json", "-o"])
        .arg(&gated)
        .output()
        .expect("run grpclab load");
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kept: serde_json::Value = serde_json::from_slice(&std::fs::read(&gated).unwrap()).unwrap();
    assert_eq!(kept["statusCodeDistribution"]["OK"], 300, "{kept}");

    let capacity = |target: &str| {
        grpclab()
            .args(["capacity", "--insecure", target, "--scenario", "string_10B"])
            .args([
                "--transport",
                "h2",
                "--protocol",
                "grpc-web",
                "--slo",
                "errors<=0%",
            ])
            .args([
                "--start-rps",
                "200",
                "--max-rps",
                "400",
                "--probe-min",
                "1s",
            ])
            .args(["--probe-max", "2s", "--warmup", "300ms", "-O", "json"])
            .output()
            .expect("run grpclab capacity")
    };
    let out = capacity(&target);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let found: serde_json::Value = serde_json::from_slice(&out.stdout).expect("capacity JSON");
    assert!(
        found["capacity_rps"].as_f64().unwrap_or(0.0) >= 200.0,
        "{found:#}"
    );
    let plain = Server::start_with(&["--impl", "lab"]);
    let out = capacity(&plain.target());
    let found: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert!(
        found["capacity_rps"].as_f64().unwrap_or(0.0) < 200.0,
        "every call refused (415), yet: {found:#}"
    );
}

/// Over HTTP/1.1 a call that passes its deadline leaves its connection with a reply still
/// owed: the next call on it must not wait behind that reply (or fail on the closing
/// connection), but make the connection again. A server that never answers the first request
/// of each connection and answers the rest at once: with one connection and --timeout, every
/// call is accounted for, one DeadlineExceeded per stalled connection and the others OK.
#[test]
fn over_http1_a_call_past_its_deadline_does_not_hold_up_the_next() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let target = listener.local_addr().expect("address").to_string();
    let connections = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = std::sync::Arc::clone(&connections);
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(mut socket) = socket else { return };
            let first = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
            std::thread::spawn(move || {
                let mut buffer = [0u8; 4096];
                let mut request = Vec::new();
                loop {
                    let Ok(n) = socket.read(&mut buffer) else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buffer[..n]);
                    // Requests here are small: each read ends one (head and body).
                    if first {
                        // The first connection stalls: read on, never answer.
                        continue;
                    }
                    request.clear();
                    let reply = b"HTTP/1.1 200 OK\r\ncontent-type: application/proto\r\ncontent-length: 0\r\n\r\n";
                    if socket.write_all(reply).is_err() {
                        return;
                    }
                }
            });
        }
    });
    let (report, _, stderr) = load_as(
        &target,
        "connect",
        10,
        &[
            "--http1",
            "-c",
            "1",
            "--connections",
            "1",
            "--timeout",
            "300ms",
        ],
    );
    let statuses = &report["statusCodeDistribution"];
    assert_eq!(statuses["DeadlineExceeded"], 1, "{stderr}: {report}");
    assert_eq!(statuses["OK"], 9, "{stderr}: {report}");
    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 2);
    // The client gave the stalled connection up: planned, not blamed on the server.
    assert_eq!(
        (&report["reconnects"], &report["plannedReconnects"]),
        (&0.into(), &1.into()),
        "{report}"
    );
}
