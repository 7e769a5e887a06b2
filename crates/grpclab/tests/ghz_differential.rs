//! grpclab against the real ghz: the same command line run by both against one recording
//! server (common/recording.rs), and what each sent and printed compared.
//!
//! For each command line: the calls the server received (method, metadata, request bytes;
//! templated values compared by their shape where they are random), the calls per status each
//! tool reports, and its outputs' form (JSON keys and types, CSV columns, summary sections).
//! Latency figures are compared for shape only. Where grpclab differs from ghz on purpose,
//! docs/ghz-flags.md says so and names the test here that pins it.
//!
//! ghz comes from `bash peers/install.sh clients` (the Go module proxy); without it each test
//! says so and passes, except under CI (which installs it), where it fails.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::grpclab;
use common::recording::{Behaviour, RecordedCall, RecordingServer};
use prost_reflect::{DescriptorPool, DynamicMessage};

/// The scenario both tools call: grpc_bench's complex_proto Greeter.
fn proto() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/complex_proto/helloworld.proto")
}

const CALL: &str = "helloworld.Greeter.SayHello";

/// The ghz executable (see `common::go_tool`).
fn ghz() -> Option<PathBuf> {
    common::go_tool("ghz")
}

/// One tool's run: its exit, outputs, and the calls the server received.
struct Run {
    output: Output,
    calls: Vec<RecordedCall>,
}

impl Run {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.output.stdout)
            .unwrap_or_else(|err| panic!("not JSON ({err}): {}\n{}", self.stdout(), self.stderr()))
    }
}

/// The two runs of one command line.
struct Both {
    ghz: Run,
    grpclab: Run,
}

/// Runs `args` (everything after the program name; `{target}` is the server's address) with
/// ghz, then with `grpclab load`, against `server`, in `dir`. `None` when ghz is missing.
fn both_in(dir: &Path, server: &RecordingServer, args: &[&str]) -> Option<Both> {
    both_in_with(dir, server, args, &[])
}

/// [`both_in`], with `ours` added to grpclab's command line only (a grpclab flag that asks for
/// ghz's behaviour where grpclab's default differs, each listed in docs/ghz-flags.md).
fn both_in_with(
    dir: &Path,
    server: &RecordingServer,
    args: &[&str],
    ours: &[&str],
) -> Option<Both> {
    let ghz = ghz()?;
    let target = server.target();
    let args: Vec<String> = args
        .iter()
        .map(|a| a.replace("{target}", &target))
        .collect();
    server.take();
    let ghz_output = Command::new(ghz)
        .args(&args)
        .current_dir(dir)
        .output()
        .expect("run ghz");
    let ghz_calls = server.take();
    let grpclab_output = grpclab()
        .arg("load")
        .args(ours)
        .args(&args)
        .current_dir(dir)
        .output()
        .expect("run grpclab load");
    let grpclab_calls = server.take();
    Some(Both {
        ghz: Run {
            output: ghz_output,
            calls: ghz_calls,
        },
        grpclab: Run {
            output: grpclab_output,
            calls: grpclab_calls,
        },
    })
}

/// `both_in` with the proto and the call, in a scratch folder, plain text.
fn both(server: &RecordingServer, args: &[&str]) -> Option<Both> {
    both_at(tempfile::tempdir().unwrap().path(), server, args)
}

/// `both_in` with the proto and the call, in `dir` (where files named in `args` are), plain
/// text.
fn both_at(dir: &Path, server: &RecordingServer, args: &[&str]) -> Option<Both> {
    let proto = proto();
    let mut full = vec![
        "--insecure",
        "--proto",
        proto.to_str().unwrap(),
        "--call",
        CALL,
    ];
    full.extend_from_slice(args);
    full.push("{target}");
    both_in(dir, server, &full)
}

fn pool() -> DescriptorPool {
    pool_of(&proto())
}

fn pool_of(proto: &Path) -> DescriptorPool {
    let files = protox::compile([proto], [proto.parent().unwrap()]).expect("compile proto");
    DescriptorPool::from_file_descriptor_set(files).expect("descriptor pool")
}

/// A request message as JSON text (proto3's JSON mapping), for comparing and for reading
/// rendered template values.
fn request_json(pool: &DescriptorPool, bytes: &[u8]) -> serde_json::Value {
    message_json(pool, "helloworld.HelloRequest", bytes)
}

fn message_json(pool: &DescriptorPool, name: &str, bytes: &[u8]) -> serde_json::Value {
    let descriptor = pool.get_message_by_name(name).expect("message type");
    let message = DynamicMessage::decode(descriptor, bytes).expect("a request message");
    serde_json::to_value(&message).expect("JSON")
}

/// What a run sent, as a sorted list of (path, metadata, messages of type `input` in `pool` as
/// JSON), with `normalize` applied to every string in the messages and metadata values (to
/// turn random values into their shape).
fn sent_as(
    run: &Run,
    pool: &DescriptorPool,
    input: &str,
    normalize: &dyn Fn(&str) -> String,
) -> Vec<String> {
    let mut calls: Vec<String> = run
        .calls
        .iter()
        .map(|call| {
            let metadata: Vec<String> = call
                .metadata
                .iter()
                .map(|(k, v)| format!("{k}={}", normalize(&String::from_utf8_lossy(v))))
                .collect();
            let messages: Vec<String> = call
                .messages
                .iter()
                .map(|m| normalize(&message_json(pool, input, m).to_string()))
                .collect();
            format!(
                "{} {:?} timeout={} {}",
                call.path,
                metadata,
                call.timeout.is_some(),
                messages.join(" | ")
            )
        })
        .collect();
    calls.sort();
    calls
}

/// Both tools sent the same calls (after `normalize`), each succeeded, and each reports the
/// calls the server saw.
fn assert_same_calls(both: &Both, normalize: &dyn Fn(&str) -> String) {
    assert_same_calls_as(both, &pool(), "helloworld.HelloRequest", normalize);
}

fn assert_same_calls_as(
    both: &Both,
    pool: &DescriptorPool,
    input: &str,
    normalize: &dyn Fn(&str) -> String,
) {
    assert!(
        both.ghz.output.status.success(),
        "ghz failed: {}",
        both.ghz.stderr()
    );
    assert!(
        both.grpclab.output.status.success(),
        "grpclab failed: {}",
        both.grpclab.stderr()
    );
    let (ghz, ours) = (
        sent_as(&both.ghz, pool, input, normalize),
        sent_as(&both.grpclab, pool, input, normalize),
    );
    assert_eq!(ghz.len(), ours.len(), "calls received: ghz vs grpclab");
    for (a, b) in ghz.iter().zip(&ours) {
        assert_eq!(a, b, "a call as ghz sent it (left) and grpclab (right)");
    }
}

fn identity(text: &str) -> String {
    text.to_owned()
}

/// The calls per status in a JSON report.
fn statuses(report: &serde_json::Value) -> BTreeMap<String, u64> {
    report["statusCodeDistribution"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

/// A JSON value's form: objects keep their keys, with each value's form; arrays the form of
/// their first element; scalars their type's name (numbers: "number", as Go's decoder and
/// serde_json both read int or float there, integers checked apart by ghz_compat.rs).
fn shape(value: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Null => Value::from("null"),
        Value::Bool(_) => Value::from("bool"),
        Value::Number(_) => Value::from("number"),
        Value::String(_) => Value::from("string"),
        Value::Array(items) => Value::Array(items.first().map(shape).into_iter().collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), shape(v))).collect())
        }
    }
}

/// Every key of ghz's `theirs` is in `ours` with the same form (ours may have more: grpclab's
/// extras). Returns the differences as `path: ghz form vs grpclab form` lines.
fn missing_from(theirs: &serde_json::Value, ours: &serde_json::Value, path: &str) -> Vec<String> {
    use serde_json::Value;
    match (theirs, ours) {
        (Value::Object(a), Value::Object(b)) => a
            .iter()
            .flat_map(|(k, v)| match b.get(k) {
                Some(w) => missing_from(v, w, &format!("{path}.{k}")),
                None => vec![format!("{path}.{k}: missing (ghz: {v})")],
            })
            .collect(),
        (Value::Array(a), Value::Array(b)) => match (a.first(), b.first()) {
            (Some(v), Some(w)) => missing_from(v, w, &format!("{path}[0]")),
            (Some(v), None) => vec![format!("{path}: empty (ghz: [{v}])")],
            _ => Vec::new(),
        },
        (a, b) if a == b => Vec::new(),
        (a, b) => vec![format!("{path}: ghz {a} vs grpclab {b}")],
    }
}

/// Differences in `-O json` kept on purpose, each listed in docs/ghz-flags.md: grpclab lists
/// each call in `details` only with `--details` (ghz always does: a run of millions of calls
/// would hold them all in memory and write them all).
const KEPT_IN_JSON: &[&str] = &[".details: empty"];

const HELLO: &str =
    r#"{"request":{"name":"Joe","n":7,"d":2.5,"pets":[{"name":"Bof","color":"RED"}]}}"#;

#[test]
fn plain_calls_carry_the_same_bytes_and_counts() {
    let server = RecordingServer::start(Behaviour::default());
    for args in [
        vec!["-n", "200", "-c", "10", "-d", HELLO],
        vec!["-n", "60", "-c", "6", "--connections", "3", "-d", HELLO],
        vec![
            "-n",
            "30",
            "-c",
            "1",
            "-d",
            r#"[{"request":{"name":"a"}},{"request":{"name":"b"}},{"request":{"name":"c"}}]"#,
        ],
        vec!["-n", "50", "-c", "5", "--rps", "500", "-d", HELLO],
        vec![
            "-n",
            "40",
            "-c",
            "2",
            "-m",
            r#"{"x-user":"ann","x-trace":"t-1"}"#,
            "-d",
            HELLO,
        ],
        vec!["-n", "20", "-c", "2", "-t", "5s", "-d", HELLO],
        // Binary metadata: ghz (grpc-go) sends a `-bin` value's bytes base64-encoded.
        vec![
            "-n",
            "10",
            "-c",
            "1",
            "-m",
            r#"{"trace-bin":"AAEC"}"#,
            "-d",
            HELLO,
        ],
    ] {
        let Some(both) = both(&server, &args) else {
            return;
        };
        assert_same_calls(&both, &identity);
        assert_eq!(both.ghz.calls.len(), both.grpclab.calls.len(), "{args:?}");
    }
}

#[test]
fn json_reports_have_ghz_keys_types_and_counts() {
    let server = RecordingServer::start(Behaviour {
        fail_every: Some((4, 14)),
        ..Behaviour::default()
    });
    for args in [
        vec!["-n", "100", "-c", "4", "-d", HELLO, "-O", "json"],
        // One at a time, so the first ten to end are the first ten the server failed or not.
        vec![
            "-n",
            "100",
            "-c",
            "1",
            "-d",
            HELLO,
            "-O",
            "json",
            "--skipFirst",
            "10",
        ],
        vec![
            "-n",
            "100",
            "-c",
            "4",
            "-d",
            HELLO,
            "-O",
            "json",
            "--count-errors",
        ],
        vec![
            "-n",
            "100",
            "-c",
            "4",
            "-d",
            HELLO,
            "-O",
            "pretty",
            "--name",
            "run one",
            "--tags",
            r#"{"env":"test"}"#,
        ],
    ] {
        let Some(both) = both(&server, &args) else {
            return;
        };
        let (theirs, ours) = (both.ghz.json(), both.grpclab.json());
        assert_eq!(statuses(&theirs), statuses(&ours), "{args:?}");
        assert_eq!(theirs["count"], ours["count"], "{args:?}");
        let differences: Vec<String> = missing_from(&shape(&theirs), &shape(&ours), "")
            .into_iter()
            .filter(|difference| !KEPT_IN_JSON.iter().any(|kept| difference.starts_with(kept)))
            .collect();
        assert!(
            differences.is_empty(),
            "{args:?}: grpclab's JSON differs from ghz's:\n{}",
            differences.join("\n")
        );
    }
}

#[test]
fn deadlines_count_the_same_calls_as_deadline_exceeded() {
    let server = RecordingServer::start(Behaviour {
        stall_on: Some((b"slow".to_vec(), Duration::from_millis(400))),
        ..Behaviour::default()
    });
    let data = r#"[{"request":{"name":"slow"}},{"request":{"name":"fast"}}]"#;
    let Some(both) = both(
        &server,
        &[
            "-n", "20", "-c", "2", "-t", "100ms", "-d", data, "-O", "json",
        ],
    ) else {
        return;
    };
    let (theirs, ours) = (both.ghz.json(), both.grpclab.json());
    assert_eq!(
        statuses(&theirs).get("DeadlineExceeded"),
        Some(&10),
        "{theirs}"
    );
    assert_eq!(statuses(&theirs), statuses(&ours));
}

#[test]
fn csv_and_summary_have_ghz_columns_and_sections() {
    let server = RecordingServer::start(Behaviour {
        fail_every: Some((5, 2)),
        ..Behaviour::default()
    });
    let Some(csv) = both(&server, &["-n", "50", "-c", "2", "-d", HELLO, "-O", "csv"]) else {
        return;
    };
    let header = |run: &Run| {
        run.stdout()
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(header(&csv.ghz), header(&csv.grpclab));
    let rows = |run: &Run| run.stdout().lines().filter(|l| l.contains(",")).count();
    assert_eq!(rows(&csv.ghz), rows(&csv.grpclab));
    let Some(summary) = both(&server, &["-n", "50", "-c", "2", "-d", HELLO]) else {
        return;
    };
    // Section headings: lines that start at column 0 and end with ':'.
    let sections = |run: &Run| -> Vec<String> {
        run.stdout()
            .lines()
            .filter(|l| !l.starts_with(' ') && l.trim_end().ends_with(':'))
            .map(str::to_owned)
            .collect()
    };
    // ghz's sections, in its order; grpclab's own come after them ("grpclab:": the measured
    // window, what bound the run, docs/ghz-flags.md).
    let (theirs, ours) = (sections(&summary.ghz), sections(&summary.grpclab));
    assert_eq!(theirs, ours[..theirs.len().min(ours.len())], "{ours:?}");
    assert!(
        ours[theirs.len()..].iter().all(|s| s == "grpclab:"),
        "{ours:?}"
    );
    // The summary's labels under "Summary:".
    let labels = |run: &Run| -> Vec<String> {
        run.stdout()
            .lines()
            .skip_while(|l| !l.starts_with("Summary:"))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .filter_map(|l| l.split(':').next().map(|s| s.trim().to_owned()))
            .collect()
    };
    assert_eq!(labels(&summary.ghz), labels(&summary.grpclab));
}

/// Values a template renders at random, as their form: a UUID, a run of letters and digits.
fn random_shapes(text: &str) -> String {
    let mut out = String::new();
    for word in text.split_inclusive(|c: char| !c.is_ascii_alphanumeric() && c != '-') {
        let (body, end) = match word.char_indices().last() {
            Some((i, c)) if !c.is_ascii_alphanumeric() && c != '-' => (&word[..i], &word[i..]),
            _ => (word, ""),
        };
        let is_uuid = body.len() == 36
            && body.char_indices().all(|(i, c)| {
                if [8, 13, 18, 23].contains(&i) {
                    c == '-'
                } else {
                    c.is_ascii_hexdigit()
                }
            });
        if is_uuid {
            out.push_str("<uuid>");
        } else if let Some(rest) = body.strip_prefix("rnd") {
            out.push_str(&format!(
                "rnd<{}>",
                if (2..=16).contains(&rest.len()) {
                    "2-16".to_owned()
                } else {
                    rest.len().to_string()
                }
            ));
        } else {
            out.push_str(body);
        }
        out.push_str(end);
    }
    out
}

#[test]
fn templates_render_the_same_values() {
    let server = RecordingServer::start(Behaviour::default());
    let data = r#"{"request":{"name":"{{.RequestNumber}} {{.FullyQualifiedName}} {{.MethodName}} {{.ServiceName}} {{.InputName}} {{.OutputName}}","c1":"{{.UUID}} {{newUUID}} rnd{{randomString 8}} rnd{{randomString 0}}"}}"#;
    let Some(both) = both(
        &server,
        &[
            "-n",
            "40",
            "-c",
            "4",
            "-d",
            data,
            "-m",
            r#"{"x-n":"{{.RequestNumber}}","x-id":"{{.UUID}}"}"#,
        ],
    ) else {
        return;
    };
    assert_same_calls(&both, &random_shapes);
}

#[test]
fn worker_ids_name_the_same_workers() {
    let server = RecordingServer::start(Behaviour::default());
    let data = r#"{"request":{"name":"{{.WorkerID}}"}}"#;
    for args in [
        vec!["-n", "40", "-c", "4", "-d", data],
        vec!["-n", "40", "-c", "4", "--connections", "2", "-d", data],
        vec!["-n", "40", "-c", "2", "--name", "box", "-d", data],
    ] {
        let Some(both) = both(&server, &args) else {
            return;
        };
        let pool = pool();
        let workers = |run: &Run| -> std::collections::BTreeSet<String> {
            run.calls
                .iter()
                .map(|c| request_json(&pool, &c.messages[0])["request"]["name"].to_string())
                .collect()
        };
        assert_eq!(workers(&both.ghz), workers(&both.grpclab), "{args:?}");
    }
}

#[test]
fn binary_payloads_are_sent_as_given() {
    // HelloRequest { request: Hello { name: "Bin" } }, serialized by hand.
    let message: &[u8] = &[0x0a, 0x05, 0x0a, 0x03, b'B', b'i', b'n'];
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("one.bin"), message).unwrap();
    let server = RecordingServer::start(Behaviour::default());
    let Some(both) = both_at(dir.path(), &server, &["-n", "10", "-B", "one.bin"]) else {
        return;
    };
    assert_same_calls(&both, &identity);
    assert!(both
        .ghz
        .calls
        .iter()
        .all(|c| c.messages == [message.to_vec()]));
}

#[test]
fn data_and_metadata_files_are_read_the_same() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data.json"), HELLO).unwrap();
    std::fs::write(dir.path().join("md.json"), r#"{"x-from":"file"}"#).unwrap();
    let server = RecordingServer::start(Behaviour::default());
    let args = ["-n", "10", "-D", "data.json", "-M", "md.json"];
    let Some(both) = both_at(dir.path(), &server, &args) else {
        return;
    };
    assert_same_calls(&both, &identity);
    assert_eq!(both.grpclab.calls.len(), 10);
}

/// Rates, ramps and concurrency schedules send the same calls: `-n` bounds each, so the
/// counts are exact whatever the timing.
#[test]
fn paced_and_scheduled_runs_send_the_same_calls() {
    let server = RecordingServer::start(Behaviour::default());
    for args in [
        vec!["--rps", "200", "-n", "50", "-c", "5", "-d", HELLO],
        vec![
            "--load-schedule",
            "step",
            "--load-start",
            "100",
            "--load-step",
            "100",
            "--load-end",
            "300",
            "--load-step-duration",
            "200ms",
            "-n",
            "60",
            "-c",
            "5",
            "-d",
            HELLO,
        ],
        vec![
            "--load-schedule",
            "line",
            "--load-start",
            "100",
            "--load-step",
            "50",
            "--load-end",
            "200",
            "-n",
            "40",
            "-c",
            "4",
            "-d",
            HELLO,
        ],
        vec![
            "--concurrency-schedule",
            "step",
            "--concurrency-start",
            "1",
            "--concurrency-step",
            "1",
            "--concurrency-end",
            "4",
            "--concurrency-step-duration",
            "100ms",
            // Paced so the run outlasts its schedule (4 steps of 100 ms): ghz v0.121.0 panics
            // ("send on closed channel", load/worker_ticker.go) when a run ends while its
            // concurrency schedule still ticks. grpclab ends cleanly either way.
            "--rps",
            "100",
            "-n",
            "60",
            "-d",
            HELLO,
        ],
    ] {
        let Some(both) = both(&server, &args) else {
            return;
        };
        assert_same_calls(&both, &identity);
        let total = args[args.iter().position(|a| *a == "-n").unwrap() + 1];
        assert_eq!(
            both.grpclab.calls.len(),
            total.parse::<usize>().unwrap(),
            "{args:?}"
        );
    }
}

/// `-z` ends both by time and ignores `-n`; both say why the run ended alike.
#[test]
fn timed_runs_end_alike() {
    let server = RecordingServer::start(Behaviour::default());
    for args in [
        vec!["-z", "1s", "-c", "4", "-d", HELLO, "-O", "json"],
        vec!["-z", "1s", "-n", "5", "-c", "2", "-d", HELLO, "-O", "json"],
    ] {
        let Some(both) = both(&server, &args) else {
            return;
        };
        let (theirs, ours) = (both.ghz.json(), both.grpclab.json());
        assert_eq!(theirs["endReason"], ours["endReason"], "{args:?}");
        for (tool, report) in [("ghz", &theirs), ("grpclab", &ours)] {
            // -z runs for its duration whatever -n says.
            assert!(
                report["count"].as_u64().unwrap() > 5,
                "{tool} {args:?}: {report}"
            );
            // The statuses of the calls in flight at the end are a race (ghz, closing its
            // connections, counted some Unavailable here); the rest are OK.
            assert!(statuses(report)["OK"] > 5, "{tool} {args:?}: {report}");
        }
    }
}

/// `--protoset`: a compiled descriptor set instead of the .proto.
#[test]
fn a_protoset_defines_the_call_alike() {
    let dir = tempfile::tempdir().unwrap();
    let set = protox::compile([proto()], [proto().parent().unwrap()]).unwrap();
    std::fs::write(
        dir.path().join("greeter.protoset"),
        prost::Message::encode_to_vec(&set),
    )
    .unwrap();
    let server = RecordingServer::start(Behaviour::default());
    let Some(both) = both_in(
        dir.path(),
        &server,
        &[
            "--insecure",
            "--protoset",
            "greeter.protoset",
            "--call",
            CALL,
            "-n",
            "10",
            "-d",
            HELLO,
            "{target}",
        ],
    ) else {
        return;
    };
    assert_same_calls(&both, &identity);
    assert_eq!(both.grpclab.calls.len(), 10);
}

/// One InfluxDB line's form: its measurement, tag keys and field keys (values and the
/// timestamp left out).
fn influx_shape(line: &str) -> String {
    // measurement[,tag=v...] field=v[,field=v...] timestamp; a space inside a value is
    // escaped in tags and quoted in string fields.
    let mut parts = Vec::new();
    let (mut current, mut quoted, mut escaped) = (String::new(), false, false);
    for c in line.chars() {
        match c {
            _ if escaped => {
                current.push(c);
                escaped = false;
            }
            '\\' => {
                current.push(c);
                escaped = true;
            }
            '"' => {
                current.push(c);
                quoted = !quoted;
            }
            ' ' if !quoted => parts.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    parts.push(current);
    let keys = |text: &str| -> Vec<String> {
        let mut keys: Vec<String> = text
            .split(',')
            .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.to_owned()))
            .collect();
        keys.sort();
        keys
    };
    let head = parts.first().cloned().unwrap_or_default();
    let (measurement, tags) = head.split_once(',').unwrap_or((&head, ""));
    let fields = parts.get(1).cloned().unwrap_or_default();
    format!(
        "{measurement} tags={:?} fields={:?}",
        keys(tags),
        keys(&fields)
    )
}

/// Each line form and how many lines have it.
fn influx_shapes(text: &str) -> BTreeMap<String, usize> {
    let mut shapes = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        *shapes.entry(influx_shape(line)).or_insert(0) += 1;
    }
    shapes
}

/// `-O influx-summary`, `influx-details` and `prometheus`: the same lines (measurements, tags
/// and fields; metric names and types), as many of each.
#[test]
fn influx_and_prometheus_outputs_have_ghz_lines() {
    let server = RecordingServer::start(Behaviour {
        fail_every: Some((5, 2)),
        ..Behaviour::default()
    });
    for format in ["influx-summary", "influx-details"] {
        let Some(both) = both(&server, &["-n", "40", "-c", "1", "-d", HELLO, "-O", format]) else {
            return;
        };
        assert_eq!(
            influx_shapes(&both.ghz.stdout()),
            influx_shapes(&both.grpclab.stdout()),
            "{format}:\nghz:\n{}\ngrpclab:\n{}",
            both.ghz.stdout(),
            both.grpclab.stdout()
        );
    }
    let Some(both) = both(
        &server,
        &["-n", "40", "-c", "1", "-d", HELLO, "-O", "prometheus"],
    ) else {
        return;
    };
    let metrics = |run: &Run| -> Vec<String> {
        let mut names: Vec<String> = run
            .stdout()
            .lines()
            .filter(|l| l.starts_with("# TYPE "))
            .map(str::to_owned)
            .collect();
        names.sort();
        names
    };
    assert_eq!(metrics(&both.ghz), metrics(&both.grpclab));
}

fn streaming_proto() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/streaming/streaming.proto")
}

/// Streaming calls: client streams send the data array in order, cycled to
/// `--stream-call-count`; server streams send their one request; bidirectional streams the
/// same as client streams.
#[test]
fn streaming_calls_send_the_same_messages() {
    let server = RecordingServer::start(Behaviour::default());
    let proto = streaming_proto();
    let pool = pool_of(&proto);
    let data = r#"[{"payload":"YQ=="},{"payload":"Yg=="}]"#;
    // grpclab drives a bidirectional stream as ping-pong (a message, its reply, the next);
    // --stream-independent drives it as ghz does (sends paced, replies read as they come).
    // This server answers once the requests end, so ping-pong would wait for its deadline.
    let independent = ["--stream-independent"];
    let none: [&str; 0] = [];
    for (method, input, extra, ours) in [
        (
            "Upload",
            "grpclab.streaming.v1.EchoRequest",
            vec!["-d", data],
            &none[..],
        ),
        (
            "Upload",
            "grpclab.streaming.v1.EchoRequest",
            vec!["-d", data, "--stream-call-count", "5"],
            &none[..],
        ),
        (
            "PingPong",
            "grpclab.streaming.v1.EchoRequest",
            vec!["-d", data, "--stream-call-count", "3"],
            &independent[..],
        ),
        (
            "Feed",
            "grpclab.streaming.v1.FeedRequest",
            vec!["-d", r#"{"count":2}"#],
            &none[..],
        ),
    ] {
        let call = format!("grpclab.streaming.v1.StreamingEcho.{method}");
        let mut args = vec![
            "--insecure",
            "--proto",
            proto.to_str().unwrap(),
            "--call",
            &call,
            "-n",
            "6",
            "-c",
            "2",
        ];
        args.extend_from_slice(&extra);
        args.push("{target}");
        let dir = tempfile::tempdir().unwrap();
        let Some(both) = both_in_with(dir.path(), &server, &args, ours) else {
            return;
        };
        assert_same_calls_as(&both, &pool, input, &identity);
        assert_eq!(both.grpclab.calls.len(), 6, "{method} {extra:?}");
    }
}

/// TLS as ghz speaks it: `--cacert` against a server whose certificate a CA signed, then
/// mutual TLS with `--cert`/`--key`: both tools send the same calls, and in mutual TLS present
/// the same client certificate on every call. A server signed by a CA the client was not
/// given, and a mutual-TLS server reached without a client certificate, get no call from
/// either, and neither reports one as OK.
#[test]
fn tls_and_mutual_tls_send_the_same_calls() {
    use common::pki::TestCa;
    use grpclab_core::tls::ServerTls;
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "differential");
    let server_pair = ca.leaf(dir.path(), "server", false);
    let client_pair = ca.leaf(dir.path(), "client", false);
    let settings = |client_ca: Option<&Path>| ServerTls {
        cert: server_pair.cert.clone(),
        key: server_pair.key.clone(),
        client_ca: client_ca.map(Path::to_path_buf),
    };
    let proto = proto();
    let cacert = ca.cert.to_str().unwrap().to_owned();
    let args = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = ["--proto", proto.to_str().unwrap(), "--call", CALL]
            .iter()
            .chain(["-n", "10", "-c", "2", "-d", HELLO].iter())
            .chain(extra.iter())
            .map(|a| a.to_string())
            .collect();
        args.push("{target}".to_owned());
        args
    };
    let run = |server: &RecordingServer, args: &[String]| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        both_in(dir.path(), server, &args)
    };

    let tls = RecordingServer::start_tls(Behaviour::default(), &settings(None));
    let Some(both) = run(&tls, &args(&["--cacert", &cacert])) else {
        return;
    };
    assert_same_calls(&both, &identity);
    assert_eq!(both.grpclab.calls.len(), 10);
    assert!(both
        .ghz
        .calls
        .iter()
        .chain(&both.grpclab.calls)
        .all(|call| call.client_certificate.is_none()));

    let mutual = RecordingServer::start_tls(Behaviour::default(), &settings(Some(&ca.cert)));
    let (cert, key) = (
        client_pair.cert.to_str().unwrap(),
        client_pair.key.to_str().unwrap(),
    );
    let both = run(
        &mutual,
        &args(&["--cacert", &cacert, "--cert", cert, "--key", key]),
    )
    .expect("ghz");
    assert_same_calls(&both, &identity);
    let presented: std::collections::BTreeSet<_> = both
        .ghz
        .calls
        .iter()
        .chain(&both.grpclab.calls)
        .map(|call| call.client_certificate.clone())
        .collect();
    assert_eq!(
        presented.len(),
        1,
        "one certificate, the same from both tools"
    );
    assert!(presented.iter().all(Option::is_some));

    // The unhappy paths: nothing reaches the server, nothing is reported OK.
    let other = TestCa::new(dir.path(), "other");
    for (server, extra) in [
        (&tls, vec!["--cacert", other.cert.to_str().unwrap()]),
        (&mutual, vec!["--cacert", cacert.as_str()]),
    ] {
        let both = run(server, &args(&extra)).expect("ghz");
        assert!(
            both.ghz.calls.is_empty() && both.grpclab.calls.is_empty(),
            "{extra:?}"
        );
        assert!(!both.grpclab.output.status.success(), "{extra:?}");
        for (tool, output) in [("ghz", &both.ghz.output), ("grpclab", &both.grpclab.output)] {
            let text = String::from_utf8_lossy(&output.stdout);
            assert!(
                !text.contains("[OK]"),
                "{tool} reported an OK call with {extra:?}: {text}"
            );
        }
    }
}
