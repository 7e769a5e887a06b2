//! `grpclab load --config FILE` (ghz's config file): JSON or TOML, keys as ghz names them, the
//! command line overriding the file, and one line for what cannot be used.

mod common;

use common::{grpclab, Server};

fn json_report(output: &std::process::Output) -> serde_json::Value {
    assert!(
        common::finished(output),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn a_config_file_sets_the_run_and_flags_override_it() {
    let server = Server::start("tonic-st");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ghz.json");
    std::fs::write(
        &json,
        format!(
            r#"{{"host": "{}", "insecure": true, "scenario": "complex_proto", "total": 30,
                "concurrency": 3, "name": "from config", "tags": {{"env": "ci"}},
                "metadata": {{"x-from": "config"}}, "timeout": "5s", "format": "json",
                "data": {{"request": {{"name": "n{{{{.RequestNumber}}}}"}}}}}}"#,
            server.target()
        ),
    )
    .unwrap();
    let report = json_report(
        &grpclab()
            .args(["load", "--config"])
            .arg(&json)
            .output()
            .unwrap(),
    );
    assert_eq!(report["count"], 30);
    assert_eq!(report["name"], "from config");
    assert_eq!(report["tags"]["env"], "ci");
    assert_eq!(report["options"]["concurrency"], 3);
    assert_eq!(report["options"]["metadata"]["x-from"], "config");
    assert_eq!(report["options"]["timeout"], 5_000_000_000u64);
    assert_eq!(report["statusCodeDistribution"]["OK"], 30);

    // The command line wins over the file, the server included.
    let other = Server::start("lab");
    let report = json_report(
        &grpclab()
            .args(["load", "--config"])
            .arg(&json)
            .args(["-n", "12", "--name", "from flags", &other.target()])
            .output()
            .unwrap(),
    );
    assert_eq!(report["count"], 12);
    assert_eq!(report["name"], "from flags");
    assert_eq!(report["options"]["host"], other.target());

    // TOML, by its extension.
    let toml = dir.path().join("ghz.toml");
    std::fs::write(
        &toml,
        format!(
            "host = \"{}\"\ninsecure = true\nscenario = \"complex_proto\"\ntotal = 7\nformat = \"json\"\n",
            server.target()
        ),
    )
    .unwrap();
    let report = json_report(
        &grpclab()
            .args(["load", "--config"])
            .arg(&toml)
            .output()
            .unwrap(),
    );
    assert_eq!(report["count"], 7);
}

#[test]
fn config_files_that_cannot_be_used_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("missing.json", None, "cannot read"),
        ("broken.json", Some("{\"total\": "), "not valid JSON"),
        ("broken.toml", Some("total = = 3"), "not valid TOML"),
        ("list.json", Some("[1, 2]"), "expected an object"),
        (
            "async.json",
            Some("{\"async\": true}"),
            "--async sends calls on a rate's schedule",
        ),
        (
            "templates.json",
            Some("{\"disable-template-data\": true}"),
            "--disable-template-data is a ghz flag grpclab does not take",
        ),
        (
            "debug.json",
            Some("{\"debug\": \"/nonexistent-folder/ghz.log\"}"),
            "cannot write the log there",
        ),
        (
            "nohost.json",
            Some("{\"insecure\": true}"),
            "say which server",
        ),
    ];
    for (name, text, needle) in cases {
        let path = dir.path().join(name);
        if let Some(text) = text {
            std::fs::write(&path, text).unwrap();
        }
        let output = grpclab()
            .args(["load", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(needle), "{name}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
    }
}

/// ghz's own documented config example (www/docs/usage.md, with its proto path pointed at a
/// real file) loads and runs as written, its per-call metadata templates included.
#[test]
fn ghzs_documented_config_example_loads_and_runs() {
    let server = Server::start("lab");
    let dir = tempfile::tempdir().unwrap();
    let proto = dir.path().join("greeter.proto");
    std::fs::write(
        &proto,
        "syntax = \"proto3\";\npackage helloworld;\nmessage HelloRequest { string name = 1; }\nmessage HelloReply { string message = 1; }\nservice Greeter { rpc SayHello(HelloRequest) returns (HelloReply); }\n",
    )
    .unwrap();
    let example = |metadata: &str| {
        format!(
            r#"{{
    "proto": "{}",
    "call": "helloworld.Greeter.SayHello",
    "total": 2000,
    "concurrency": 50,
    "data": {{
        "name": "Joe"
    }},
    "metadata": {metadata},
    "import-paths": [
        "{}"
    ],
    "max-duration": "10s",
    "host": "{}",
    "insecure": true
}}"#,
            proto.display(),
            dir.path().display(),
            server.target()
        )
    };
    let config = dir.path().join("ghz.json");
    // It runs as written: 2000 calls, 50 at a time (lab's Greeter takes another HelloRequest,
    // so the calls fail; what is checked is that every key was taken), with and without the
    // per-call metadata.
    for metadata in [
        r#"{"foo": "bar", "trace_id": "{{.RequestNumber}}", "timestamp": "{{.TimestampUnix}}"}"#,
        r#"{"foo": "bar"}"#,
    ] {
        std::fs::write(&config, example(metadata)).unwrap();
        let output = grpclab()
            .args(["load", "--config"])
            .arg(&config)
            .args(["-O", "json", "--no-history"])
            .output()
            .unwrap();
        let report = json_report(&output);
        assert_eq!(report["count"], 2000, "{metadata}");
        assert_eq!(report["options"]["concurrency"], 50);
    }
}
