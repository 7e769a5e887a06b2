//! Where `grpclab load` gets the call's schema: from the server by
//! reflection when no schema flag is given (as ghz), from `--protoset`, and clear errors when
//! there is none to be had. Real servers over loopback; the grpcio (v1alpha) peer is in
//! interop.rs.

use std::process::Output;

use prost::Message as _;

mod common;

use common::{grpclab, Server};

fn load(args: &[&str]) -> Output {
    grpclab()
        .arg("load")
        .arg("--insecure")
        .args(args)
        .output()
        .expect("run grpclab")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn report(output: &Output) -> serde_json::Value {
    assert!(output.status.success(), "{}", stderr(output));
    serde_json::from_slice(&output.stdout).expect("JSON")
}

/// One line on stderr naming the problem and the way out, exit code 2, nothing on stdout.
fn assert_input_error(output: &Output, needles: &[&str]) {
    let text = stderr(output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(output.stdout.is_empty());
    assert_eq!(text.trim_end().lines().count(), 1, "{text}");
    for needle in needles {
        assert!(text.contains(needle), "'{needle}' not in: {text}");
    }
}

const PAYLOAD: &str = r#"{"request":{"name":"reflected","n":7,"pets":[{"name":"rex"}]}}"#;

#[test]
fn reflection_supplies_the_schema_when_no_schema_flag_is_given() {
    // tonic's reflection service, and lab's own (served on its engine).
    for implementation in ["tonic-st", "lab"] {
        reflection_supplies_the_schema_on(&Server::start(implementation));
    }
    // A streaming method's schema from lab's reflection: the call streams.
    let lab = Server::start("lab");
    let output = load(&[
        &lab.target(),
        "--call",
        "grpclab.streaming.v1.StreamingEcho.PingPong",
        "-d",
        r#"{"payload":"YQ=="}"#,
        "-n",
        "20",
        "--stream-call-count",
        "3",
        "-O",
        "json",
    ]);
    let report = report(&output);
    assert_eq!(report["statusCodeDistribution"]["OK"], 20, "{report}");
    assert_eq!(report["messagesReceived"], 60, "{report}");
}

fn reflection_supplies_the_schema_on(server: &Server) {
    let target = server.target();
    let output = load(&[
        &target,
        "--call",
        "helloworld.Greeter.SayHello",
        "-d",
        PAYLOAD,
        "--validate",
        "-n",
        "100",
        "-O",
        "json",
    ]);
    let report = report(&output);
    assert_eq!(report["statusCodeDistribution"]["OK"], 100, "{report}");
    assert_eq!(
        report["options"]["scenario"],
        "reflection (grpc.reflection.v1)"
    );
    // ghz's form of the call works too.
    let output = load(&[
        &target,
        "--call",
        "helloworld.Greeter/SayHello",
        "-n",
        "5",
        "-O",
        "json",
    ]);
    assert_eq!(self::report(&output)["count"], 5);
    // Binary metadata (a `-bin` key) goes on the reflection requests as on the calls (it was
    // refused: "bad metadata key ... is the server up?").
    let output = load(&[
        &target,
        "--call",
        "helloworld.Greeter.SayHello",
        "-m",
        r#"{"trace-bin":"AAEC","x-user":"ann"}"#,
        "-n",
        "5",
        "-O",
        "json",
    ]);
    assert_eq!(self::report(&output)["statusCodeDistribution"]["OK"], 5);

    // A payload that does not fit the reflected schema is an input error naming the field.
    assert_input_error(
        &load(&[
            &target,
            "--call",
            "helloworld.Greeter.SayHello",
            "-d",
            r#"{"request":{"nmae":"x"}}"#,
        ]),
        &["helloworld.HelloRequest", "nmae"],
    );
}

#[test]
fn without_reflection_or_a_call_the_error_says_what_to_give() {
    let tonic = Server::start("tonic-st");
    // No --call: the services the server lists, and the other ways.
    assert_input_error(
        &load(&[&tonic.target(), "-n", "5"]),
        &["--call", "helloworld.Greeter", "--scenario", "--proto"],
    );
    // A service the server does not have.
    assert_input_error(
        &load(&[&tonic.target(), "--call", "shop.Cart.Add", "-n", "5"]),
        &["no service 'shop.Cart'", "helloworld.Greeter"],
    );
    // lab on the h2 crate offers no reflection (nor any streaming call): say so, and how to
    // give the schema instead.
    let lab = Server::start_with(&["--impl", "lab", "--transport", "h2", "--threads", "1"]);
    assert_input_error(
        &load(&[
            &lab.target(),
            "--call",
            "helloworld.Greeter.SayHello",
            "-n",
            "5",
        ]),
        &[
            "does not offer server reflection",
            "--proto",
            "--protoset",
            "--scenario",
        ],
    );
    // Nobody there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    assert_input_error(
        &load(&[&format!("127.0.0.1:{port}"), "--call", "a.B.C", "-n", "5"]),
        &["cannot ask", "reflection"],
    );
    // --reflect-metadata must be a JSON object of strings.
    assert_input_error(
        &load(&[
            &lab.target(),
            "--reflect-metadata",
            "[1]",
            "--call",
            "a.B.C",
        ]),
        &["--reflect-metadata", "JSON object"],
    );
}

#[test]
fn a_protoset_defines_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/complex_proto");
    let set = protox::compile([format!("{scenario}/helloworld.proto")], [scenario]).unwrap();
    let protoset = dir.path().join("helloworld.protoset");
    std::fs::write(&protoset, set.encode_to_vec()).unwrap();
    let server = Server::start_with(&["--impl", "lab", "--threads", "1"]);
    let output = load(&[
        &server.target(),
        "--protoset",
        protoset.to_str().unwrap(),
        "--call",
        "helloworld.Greeter.SayHello",
        "-d",
        PAYLOAD,
        "--validate",
        "-n",
        "50",
        "-O",
        "json",
    ]);
    let report = report(&output);
    assert_eq!(report["statusCodeDistribution"]["OK"], 50, "{report}");

    let garbage = dir.path().join("garbage.protoset");
    std::fs::write(&garbage, b"\x0a\xff\xff\xff not a descriptor set").unwrap();
    assert_input_error(
        &load(&[&server.target(), "--protoset", garbage.to_str().unwrap()]),
        &["garbage.protoset", "not a usable FileDescriptorSet"],
    );
    assert_input_error(
        &load(&[&server.target(), "--protoset", "/nonexistent.protoset"]),
        &["--protoset", "cannot read"],
    );
}
