//! ghz's call templates end to end: `grpclab load` with templated `-d` and `-m` against a
//! Greeter that records every request it receives, so each template value is checked where it
//! arrives.

mod common;

use common::grpclab;
use grpclab_server::pb::greeter_server::{Greeter, GreeterServer};
use grpclab_server::pb::{HelloReply, HelloRequest};
use std::sync::{Arc, Mutex};

/// What the recording Greeter saw: the request's `name`, `n`, `l`, `c1`, and the `x-call`
/// metadata value.
#[derive(Debug, Clone)]
struct Seen {
    name: String,
    n: i32,
    l: i64,
    c1: String,
    x_call: String,
    /// `x-request-id` and `x-n`, from per-call metadata templates.
    x_request_id: String,
    x_n: String,
    /// Constant fields beside the templated ones.
    f: f32,
    pets: Vec<String>,
}

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Seen>>>);

#[tonic::async_trait]
impl Greeter for Recorder {
    async fn say_hello(
        &self,
        request: tonic::Request<HelloRequest>,
    ) -> Result<tonic::Response<HelloReply>, tonic::Status> {
        let header = |name: &str| {
            request
                .metadata()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let (x_call, x_request_id, x_n) = (header("x-call"), header("x-request-id"), header("x-n"));
        let hello = request.into_inner().request.unwrap_or_default();
        let c1 = match &hello.choice {
            Some(grpclab_server::pb::hello::Choice::C1(text)) => text.clone(),
            _ => String::new(),
        };
        self.0.lock().unwrap().push(Seen {
            name: hello.name.clone(),
            n: hello.n,
            l: hello.l,
            c1,
            x_call,
            x_request_id,
            x_n,
            f: hello.f,
            pets: hello.pets.iter().map(|pet| pet.name.clone()).collect(),
        });
        Ok(tonic::Response::new(HelloReply {
            response: Some(hello),
        }))
    }
}

/// Serves the recording Greeter on a port of its own until the test ends.
fn recording_server() -> (String, Recorder, tokio::runtime::Runtime) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let recorder = Recorder::default();
    let service = GreeterServer::new(recorder.clone());
    runtime.spawn(async move {
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        let _ = tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(incoming)
            .await;
    });
    (addr.to_string(), recorder, runtime)
}

#[test]
fn templates_produce_the_values_they_name() {
    let (target, recorder, _runtime) = recording_server();
    let data = r#"{"request": {
        "name": "{{.MethodName}}/{{.ServiceName}}/{{.InputName}} #{{.RequestNumber}} by {{.WorkerID}}",
        "n": {{randomInt 10 20}},
        "l": {{.TimestampUnixMilli}},
        "c1": "{{randomString 6}} {{.UUID}} {{.Timestamp}}",
        "f": 2.5,
        "pets": [{"name": "Bof"}, {"name": "Kim"}]
    }}"#;
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for transport in ["lab", "h2"] {
        recorder.0.lock().unwrap().clear();
        let output = grpclab()
            .args(["load", "--insecure", &target, "--scenario", "complex_proto"])
            .args(["-d", data, "-m", r#"{"x-call": "{{.FullyQualifiedName}}"}"#])
            .args([
                "-n",
                "300",
                "-c",
                "4",
                "--cpus",
                "2",
                "--transport",
                transport,
            ])
            .args(["-O", "json"])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(report["statusCodeDistribution"]["OK"], 300, "{report}");
        let seen = recorder.0.lock().unwrap().clone();
        assert_eq!(seen.len(), 300);
        let mut numbers = Vec::new();
        let mut uuids = std::collections::HashSet::new();
        for call in &seen {
            let (head, worker) = call.name.split_once(" by ").unwrap();
            let (names, number) = head.split_once(" #").unwrap();
            assert_eq!(names, "SayHello/Greeter/HelloRequest", "ghz's short names");
            numbers.push(number.parse::<u64>().unwrap());
            // ghz's worker ids: one per -c worker, on connection 0 (the only one).
            assert!(
                ["g0c0", "g1c0", "g2c0", "g3c0"].contains(&worker),
                "{worker}"
            );
            assert!((10..20).contains(&call.n), "{}", call.n);
            assert!(call.l >= before, "{} < {before}", call.l);
            let parts: Vec<&str> = call.c1.split(' ').collect();
            assert_eq!(parts.len(), 3, "{}", call.c1);
            assert_eq!(parts[0].len(), 6);
            assert!(parts[0].bytes().all(|b| b.is_ascii_alphanumeric()));
            assert_eq!(parts[1].len(), 36);
            uuids.insert(parts[1].to_owned());
            assert!(
                parts[2].ends_with('Z') && parts[2].contains('T'),
                "{}",
                parts[2]
            );
            assert_eq!(call.x_call, "helloworld.Greeter.SayHello");
            // Encoded once, sent with every call's varying fields.
            assert_eq!(call.f, 2.5);
            assert_eq!(call.pets, ["Bof", "Kim"]);
        }
        // Every request number once, from 0: one count for the run, across threads.
        numbers.sort_unstable();
        assert_eq!(numbers, (0..300).collect::<Vec<u64>>(), "{transport}");
        assert_eq!(uuids.len(), 300, "UUIDs repeat");
    }
}

/// ghz's per-call metadata: each call's headers rendered with that call's number (the same as
/// its payload's), on both transports (streaming calls: interop.rs).
#[test]
fn metadata_templates_render_per_call_with_the_payloads_number() {
    let (target, recorder, _runtime) = recording_server();
    let metadata = r#"{"x-request-id": "{{.UUID}}", "x-n": "n{{.RequestNumber}}", "x-call": "{{.MethodName}}"}"#;
    for (transport, data) in [
        (
            "lab",
            Some(r#"{"request": {"name": "n{{.RequestNumber}}", "b": true}}"#),
        ),
        (
            "h2",
            Some(r#"{"request": {"name": "n{{.RequestNumber}}", "b": true}}"#),
        ),
        // Metadata alone templated: the payload stays constant, numbers still count.
        ("lab", None),
    ] {
        recorder.0.lock().unwrap().clear();
        let mut command = grpclab();
        command
            .args(["load", "--insecure", &target, "--scenario", "complex_proto"])
            .args(["-m", metadata, "-n", "200", "-c", "8", "--cpus", "2"])
            .args(["--transport", transport, "-O", "json"]);
        if let Some(data) = data {
            command.args(["-d", data]);
        }
        let output = command.output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let seen = recorder.0.lock().unwrap().clone();
        assert_eq!(seen.len(), 200, "{transport}");
        let mut numbers: Vec<u64> = Vec::new();
        let mut ids = std::collections::HashSet::new();
        for call in &seen {
            assert_eq!(call.x_call, "SayHello");
            assert_eq!(call.x_request_id.len(), 36, "{}", call.x_request_id);
            ids.insert(call.x_request_id.clone());
            if data.is_some() {
                assert_eq!(call.x_n, call.name, "one number per call");
            }
            numbers.push(call.x_n.trim_start_matches('n').parse().unwrap());
        }
        numbers.sort_unstable();
        assert_eq!(
            numbers,
            (0..200).collect::<Vec<u64>>(),
            "{transport} {data:?}"
        );
        assert_eq!(ids.len(), 200, "request ids repeat");
    }
}

#[test]
fn bad_templates_are_one_line_before_anything_runs() {
    let (target, recorder, _runtime) = recording_server();
    for (flag, value, needle) in [
        (
            "-d",
            r#"{"request": {"name": "{{.Nope}}"}}"#,
            "unknown template action",
        ),
        (
            "-d",
            r#"{"request": {"n": "{{randomInt 9 1}}"}}"#,
            "MIN < MAX",
        ),
        // Renders to JSON that does not fit the message: found on call 0, not per call.
        (
            "-d",
            r#"{"request": {"n": "{{.WorkerID}}"}}"#,
            "does not fit helloworld.HelloRequest",
        ),
        // A per-call value whose literal text no header can carry, a bad name, a reserved one.
        (
            "-m",
            "{\"x-call\": \"a\\u0001{{.RequestNumber}}\"}",
            "characters a header cannot carry",
        ),
        (
            "-m",
            r#"{"x call": "{{.UUID}}"}"#,
            "not a valid header name",
        ),
        (
            "-m",
            r#"{"grpc-timeout": "{{.RequestNumber}}"}"#,
            "set by grpclab itself",
        ),
    ] {
        let output = grpclab()
            .args([
                "load",
                "--insecure",
                &target,
                "--scenario",
                "complex_proto",
                "-n",
                "5",
            ])
            .args([flag, value])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{value}: {stderr}");
        assert!(stderr.contains(needle), "{value}: {stderr}");
    }
    assert!(recorder.0.lock().unwrap().is_empty(), "nothing was sent");
}
