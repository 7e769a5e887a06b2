//! `grpclab load --config FILE` (ghz's config file): JSON or TOML, keys as ghz names them, the
//! command line overriding the file, and one line for what cannot be used.

mod common;

use common::{grpclab, Server};

fn json_report(output: &std::process::Output) -> serde_json::Value {
    assert!(
        output.status.success(),
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
            "later.json",
            Some("{\"async\": true}"),
            "'async' is a ghz setting",
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
