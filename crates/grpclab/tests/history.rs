//! Results that outlive the run: every run stored (SQLite here; PostgreSQL when
//! `GRPCLAB_TEST_POSTGRES` names one, as .ci/run starts), listed with every figure equal to
//! the result's, set against the previous run of its configuration, drawn as trends,
//! imported from older results; a store that cannot be written costs one warning and
//! nothing else; a database password never shows anywhere.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{chromium, grpclab, Server, CHROMIUM_FLAGS};

/// `grpclab` with no history settings from the environment.
fn clean(mut command: Command) -> Command {
    command
        .env_remove("GRPCLAB_HISTORY")
        .env_remove("GRPCLAB_HISTORY_PASSWORD");
    command
}

/// A short load against `server`, stored in `store`, its JSON written to `out`.
fn load(server: &Server, store: &str, out: &Path, extra: &[&str]) -> Output {
    let mut command = clean(grpclab());
    command
        .args(["load", "--insecure", &server.target()])
        .args(["--scenario", "string_100B", "-n", "1500", "-c", "4"])
        .args(["--history", store, "-O", "json", "-o"])
        .arg(out)
        .args(extra);
    command.output().expect("run grpclab load")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("read JSON")).expect("parse JSON")
}

/// `grpclab history -O json` of `store`.
fn stored(store: &str, extra: &[&str]) -> Vec<serde_json::Value> {
    let output = clean(grpclab())
        .args(["history", "--history", store, "-O", "json"])
        .args(extra)
        .output()
        .expect("run grpclab history");
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).expect("history JSON")
}

fn percentile(report: &serde_json::Value, p: f64) -> u64 {
    report["latencyPercentiles"]
        .as_array()
        .expect("percentiles")
        .iter()
        .find(|point| point["percentage"].as_f64() == Some(p))
        .and_then(|point| point["latency"].as_u64())
        .expect("that percentile")
}

/// The stored figures of a load run equal its JSON's, field by field, exactly.
fn assert_figures_equal(run: &serde_json::Value, report: &serde_json::Value) {
    let figures = &run["figures"];
    assert_eq!(figures["calls"], report["count"], "{run:#}");
    assert_eq!(figures["errors"], report["errors"]);
    assert_eq!(figures["rps"], report["measuredRps"]);
    assert_eq!(figures["p50_ns"].as_u64(), Some(percentile(report, 50.0)));
    assert_eq!(figures["p90_ns"].as_u64(), Some(percentile(report, 90.0)));
    assert_eq!(figures["p99_ns"].as_u64(), Some(percentile(report, 99.0)));
    assert_eq!(figures["p999_ns"].as_u64(), Some(percentile(report, 99.9)));
    assert_eq!(run["status"], report["endReason"]);
}

/// A name no earlier test run used (a PostgreSQL store outlives a test run).
fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{what}-{}-{nanos}", std::process::id())
}

/// The store tests, against one store (a SQLite file or a PostgreSQL URL).
fn a_store_keeps_every_run(store: &str) {
    let server = Server::start("lab");
    let dir = tempfile::tempdir().unwrap();
    // A run, then history finds it with every figure equal to the result JSON. The name
    // makes its configuration new to this store.
    let name = unique("keep");
    let named = ["--name", name.as_str()];
    let first = dir.path().join("first.json");
    let output = load(&server, store, &first, &named);
    assert!(output.status.success(), "{}", stderr(&output));
    let report = json(&first);
    let note = &report["history"];
    let id = note["id"]
        .as_i64()
        .expect("the JSON says where it was stored");
    assert!(
        note["against"].is_null(),
        "the first of its configuration: {note:#}"
    );
    let runs = stored(store, &["--impl", &name]);
    let run = runs
        .iter()
        .find(|run| run["id"].as_i64() == Some(id))
        .expect("the run is listed");
    assert_figures_equal(run, &report);
    assert_eq!(run["command"], "load");
    assert_eq!(run["implementation"], name);
    assert_eq!(run["target"], server.target());
    assert_eq!(run["scenario"], "string_100B");

    // The next runs of the same configuration are each set against the one before; a run
    // with other settings is the first of its own.
    let mut previous = id;
    for n in 0..3 {
        let out = dir.path().join(format!("again-{n}.json"));
        let output = load(&server, store, &out, &named);
        assert!(output.status.success(), "{}", stderr(&output));
        let again = json(&out);
        let against = &again["history"]["against"];
        assert_eq!(against["id"].as_i64(), Some(previous), "{again:#}");
        let rps = against["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|change| change["metric"] == "req/s")
            .expect("req/s compared");
        assert_eq!(rps["now"], again["measuredRps"]);
        // With three earlier runs the spread is known and a verdict given.
        if n == 2 {
            assert!(rps["beyond"].is_boolean(), "{rps:#}");
        } else {
            assert!(rps["beyond"].is_null(), "{rps:#}");
        }
        let line = stderr(&output);
        assert!(
            line.contains(&format!("against run {previous}")),
            "stderr says so: {line}"
        );
        previous = again["history"]["id"].as_i64().unwrap();
    }
    let other = dir.path().join("other.json");
    let output = load(&server, store, &other, &["--name", &name, "-c", "2"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(json(&other)["history"]["against"].is_null());

    // Two runs at once both land.
    let spawn = |name: &str| {
        let mut command = clean(grpclab());
        command
            .args(["load", "--insecure", &server.target()])
            .args(["--scenario", "string_100B", "-n", "3000", "-c", "4"])
            .args(["--history", store, "--name", name, "-O", "json", "-o"])
            .arg(dir.path().join(format!("{name}.json")))
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn")
    };
    let names = [unique("at-once-a"), unique("at-once-b")];
    let (a, b) = (spawn(&names[0]), spawn(&names[1]));
    for child in [a, b] {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
    }
    for name in &names {
        let runs = stored(store, &["--impl", name]);
        assert_eq!(runs.len(), 1, "{name}: {runs:#?}");
        assert_figures_equal(&runs[0], &json(&dir.path().join(format!("{name}.json"))));
    }

    // Any stored run renders again as `report` renders its JSON.
    let page = dir.path().join("show.html");
    let output = clean(grpclab())
        .args(["history", "show", &id.to_string(), "--history", store, "-o"])
        .arg(&page)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<svg"), "charts drawn again");
    assert!(html.contains(&report["count"].to_string()), "its calls");
    let output = clean(grpclab())
        .args(["history", "show", "999999", "--history", store])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no run 999999"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn sqlite_keeps_every_run_with_its_figures() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("nested/history.sqlite");
    a_store_keeps_every_run(store.to_str().unwrap());
}

/// The PostgreSQL under test: .ci/run starts one and sets `GRPCLAB_TEST_POSTGRES`.
fn postgres() -> Option<String> {
    match std::env::var("GRPCLAB_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI starts a PostgreSQL server and sets GRPCLAB_TEST_POSTGRES (.ci/run)"
            );
            eprintln!("SKIPPED: no GRPCLAB_TEST_POSTGRES (a postgres:// URL with a password)");
            None
        }
    }
}

#[test]
fn postgres_keeps_every_run_with_its_figures() {
    let Some(url) = postgres() else {
        return;
    };
    a_store_keeps_every_run(&url);
}

/// The password of a PostgreSQL store never appears in what a run prints or writes: stdout,
/// stderr, the result, its page, the stored rows; not even when the password is wrong.
#[test]
fn a_database_password_never_leaks() {
    let Some(url) = postgres() else {
        return;
    };
    let (without, password) = split_password(&url);
    assert!(password.len() >= 8, "the test password is distinctive");
    let server = Server::start("lab");
    let dir = tempfile::tempdir().unwrap();
    let mut everything = String::new();
    // In the URL; in a password file; in the environment; and a wrong one in the URL.
    let password_file = dir.path().join("pw");
    std::fs::write(&password_file, format!("{password}\n")).unwrap();
    let wrong = url.replace(&password, &format!("{password}-wrong"));
    type Case<'a> = (Vec<String>, Vec<(&'a str, String)>);
    let cases: Vec<Case> = vec![
        (vec!["--history".into(), url.clone()], vec![]),
        (
            vec![
                "--history".into(),
                without.clone(),
                "--history-password-file".into(),
                password_file.display().to_string(),
            ],
            vec![],
        ),
        (
            vec!["--history".into(), without.clone()],
            vec![("GRPCLAB_HISTORY_PASSWORD", password.clone())],
        ),
        (vec!["--history".into(), wrong], vec![]),
    ];
    for (index, (flags, env)) in cases.iter().enumerate() {
        let out = dir.path().join(format!("run-{index}.json"));
        let page = dir.path().join(format!("run-{index}.html"));
        let mut command = clean(grpclab());
        command
            .args(["load", "--insecure", &server.target()])
            .args(["--scenario", "string_100B", "-n", "500"])
            .args(flags)
            .args(["-O", "json", "-o"])
            .arg(&out)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
        let output = command.output().unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        if index == 3 {
            // A wrong password: one warning, naming the store without any password.
            let warnings: Vec<&str> = std::str::from_utf8(&output.stderr)
                .unwrap()
                .lines()
                .filter(|line| line.contains("WARNING"))
                .collect();
            assert_eq!(warnings.len(), 1, "{warnings:?}");
            assert!(warnings[0].contains("not stored"), "{}", warnings[0]);
        } else {
            assert!(json(&out)["history"]["id"].is_i64(), "stored");
        }
        let render = clean(grpclab())
            .args(["report"])
            .arg(&out)
            .arg("-o")
            .arg(&page)
            .output()
            .unwrap();
        assert!(render.status.success());
        everything.push_str(&String::from_utf8_lossy(&output.stdout));
        everything.push_str(&String::from_utf8_lossy(&output.stderr));
        everything.push_str(&std::fs::read_to_string(&out).unwrap());
        everything.push_str(&std::fs::read_to_string(&page).unwrap());
    }
    let listed = clean(grpclab())
        .args([
            "history",
            "--history",
            &url,
            "-O",
            "json",
            "--limit",
            "100000",
        ])
        .output()
        .unwrap();
    assert!(listed.status.success());
    everything.push_str(&String::from_utf8_lossy(&listed.stdout));
    everything.push_str(&String::from_utf8_lossy(&listed.stderr));
    // A wrong URL's error, and the history command's errors, say no password either.
    let refused = clean(grpclab())
        .args(["history", "--history"])
        .arg(url.replace(&password, &format!("{password}-nope")))
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    everything.push_str(&String::from_utf8_lossy(&refused.stderr));
    assert!(
        !everything.contains(&password),
        "the password appeared in what grpclab printed or wrote"
    );
}

/// The role whose password holds every character that ends a URL's part (.ci/run's
/// scripts/test-postgres.sh makes it): `(host:port, password)`.
fn postgres_odd() -> Option<(String, String)> {
    let url = postgres()?;
    let password = std::env::var("GRPCLAB_TEST_POSTGRES_ODD_PASSWORD")
        .expect("scripts/test-postgres.sh sets GRPCLAB_TEST_POSTGRES_ODD_PASSWORD beside GRPCLAB_TEST_POSTGRES");
    let (_, rest) = url.rsplit_once('@').expect("user@host");
    let host_port = rest.split('/').next().expect("host:port").to_owned();
    Some((host_port, password))
}

fn percent_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A password holding `/ @ ? = &` and a space, given in every form the driver reads (the
/// URL's user part percent-encoded, `?password=`, a key=value string, a password file, the
/// environment), stores every run and appears nowhere; the raw form, which cannot connect
/// as meant, is refused in one line that does not quote it. And the form that leaked
/// before: `?password=` on the main role, whose result named the store with it.
#[test]
fn a_password_with_url_delimiters_never_leaks() {
    let Some((host_port, password)) = postgres_odd() else {
        return;
    };
    let main_url = postgres().expect("checked above");
    let (main_without, main_password) = split_password(&main_url);
    let (host, port) = host_port.rsplit_once(':').expect("host:port");
    let user = "grpclab_test_odd";
    let encoded = percent_encoded(&password);
    let quoted = password.replace('\\', "\\\\").replace('\'', "\\'");
    let dir = tempfile::tempdir().unwrap();
    let password_file = dir.path().join("pw");
    std::fs::write(&password_file, format!("{password}\nnot the password\n")).unwrap();
    let without = format!("postgres://{user}@{host_port}/{user}");
    type Case = (String, Vec<String>, Vec<(&'static str, String)>);
    let cases: Vec<Case> = vec![
        (
            format!("postgres://{user}:{encoded}@{host_port}/{user}"),
            vec![],
            vec![],
        ),
        (format!("{without}?password={encoded}"), vec![], vec![]),
        (
            format!("host={host} port={port} user={user} dbname={user} password='{quoted}'"),
            vec![],
            vec![],
        ),
        (
            without.clone(),
            vec![
                "--history-password-file".into(),
                password_file.display().to_string(),
            ],
            vec![],
        ),
        (
            without.clone(),
            vec![],
            vec![("GRPCLAB_HISTORY_PASSWORD", password.clone())],
        ),
        (
            format!(
                "{main_without}?password={}",
                percent_encoded(&main_password)
            ),
            vec![],
            vec![],
        ),
    ];
    let server = Server::start("lab");
    let mut everything = String::new();
    // The odd role's database may hold runs of earlier test runs: count what this one adds.
    let runs_in_odd_store = || {
        let listed = clean(grpclab())
            .args(["history", "--history", &cases[1].0, "-O", "json"])
            .args(["--limit", "100000"])
            .output()
            .unwrap();
        assert!(listed.status.success(), "{}", stderr(&listed));
        (
            serde_json::from_slice::<Vec<serde_json::Value>>(&listed.stdout)
                .expect("history JSON")
                .len(),
            listed,
        )
    };
    let (before, _) = runs_in_odd_store();
    for (index, (location, flags, env)) in cases.iter().enumerate() {
        let out = dir.path().join(format!("run-{index}.json"));
        let output = clean(grpclab())
            .args(["load", "--insecure", &server.target()])
            .args(["--scenario", "string_100B", "-n", "200"])
            .args(["--history", location])
            .args(flags)
            .args(["-O", "json", "-o"])
            .arg(&out)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .unwrap();
        assert!(output.status.success(), "case {index}: {}", stderr(&output));
        let report = json(&out);
        assert!(
            report["history"]["id"].is_i64(),
            "case {index} stored: {}",
            stderr(&output)
        );
        let store = report["history"]["store"]
            .as_str()
            .expect("the store named");
        assert!(store.starts_with("postgres://grpclab_test"), "{store}");
        everything.push_str(&String::from_utf8_lossy(&output.stdout));
        everything.push_str(&String::from_utf8_lossy(&output.stderr));
        everything.push_str(&std::fs::read_to_string(&out).unwrap());
    }
    // The raw password in the user part: the driver would read it only up to its '@'.
    let raw = clean(grpclab())
        .args(["history", "--history"])
        .arg(format!("postgres://{user}:{password}@{host_port}/{user}"))
        .output()
        .unwrap();
    assert_eq!(raw.status.code(), Some(2), "{}", stderr(&raw));
    let raw_error = stderr(&raw);
    assert_eq!(raw_error.trim().lines().count(), 1, "{raw_error}");
    assert!(raw_error.contains("%40"), "{raw_error}");
    everything.push_str(&raw_error);
    let (after, listed) = runs_in_odd_store();
    assert_eq!(
        after - before,
        5,
        "every run stored in the odd role's database"
    );
    everything.push_str(&String::from_utf8_lossy(&listed.stdout));
    everything.push_str(&String::from_utf8_lossy(&listed.stderr));
    // The password's random tail is what no other text holds.
    let tail = password.rsplit(' ').next().expect("a tail");
    for secret in [tail, &encoded, &main_password] {
        assert!(
            !everything.contains(secret),
            "a password appeared in what grpclab printed or wrote"
        );
    }
}

/// The CLI's view of a store: `grpclab history -O json` against `location`.
fn history_json(location: &str) -> Output {
    clean(grpclab())
        .args(["history", "--history", location, "-O", "json"])
        .output()
        .unwrap()
}

/// TLS to PostgreSQL as `sslmode` asks, against a role the server accepts over TLS only
/// (scripts/test-postgres.sh: its own CA and certificate for 127.0.0.1 and localhost):
/// plaintext is refused and said so; prefer (the default), require and verify-full with the
/// CA connect; verify-full without the CA, or to a name the certificate lacks, is refused
/// with what to do.
#[test]
fn tls_to_postgres_as_sslmode_asks() {
    if postgres().is_none() {
        return;
    }
    let url = std::env::var("GRPCLAB_TEST_POSTGRES_TLS")
        .expect("scripts/test-postgres.sh sets GRPCLAB_TEST_POSTGRES_TLS");
    let ca = std::env::var("GRPCLAB_TEST_POSTGRES_CA")
        .expect("scripts/test-postgres.sh sets GRPCLAB_TEST_POSTGRES_CA");
    let (_, password) = split_password(&url);
    let ca_param = percent_encoded(&ca);
    for location in [
        url.clone(),
        format!("{url}?sslmode=prefer"),
        format!("{url}?sslmode=require"),
        format!("{url}?sslmode=verify-full&sslrootcert={ca_param}"),
        format!(
            "{}?sslmode=verify-full&sslrootcert={ca_param}",
            url.replace("127.0.0.1", "localhost")
        ),
    ] {
        let output = history_json(&location);
        assert!(output.status.success(), "{}", stderr(&output));
        assert!(!stderr(&output).contains(&password));
    }
    for (location, says) in [
        (format!("{url}?sslmode=disable"), "only over TLS"),
        (
            format!("{url}?sslmode=verify-full"),
            "not signed by a trusted root",
        ),
        (
            format!("{url}?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem"),
            "/nonexistent/ca.pem",
        ),
    ] {
        let output = history_json(&location);
        let error = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{location}: {error}");
        assert!(error.contains(says), "{location}: {error}");
        assert_eq!(error.trim().lines().count(), 1, "{error}");
        assert!(!error.contains(&password), "{error}");
    }
}

/// `postgres://user:password@rest` → (`postgres://user@rest`, password).
fn split_password(url: &str) -> (String, String) {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let (userinfo, host) = rest.split_once('@').expect("user@host");
    let (user, password) = userinfo.split_once(':').expect("user:password");
    (format!("{scheme}://{user}@{host}"), password.to_owned())
}

/// A store written by a newer grpclab (its schema past the versions this one knows) is
/// refused in one line and never written to: a run still succeeds with one warning, and
/// `grpclab history` exits 2.
#[test]
fn a_store_from_a_newer_grpclab_is_refused_and_left_alone() {
    let server = Server::start("lab");
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("history.sqlite");
    let store = store.to_str().unwrap();
    let first = load(&server, store, &dir.path().join("first.json"), &[]);
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(stored(store, &[]).len(), 1);
    let newest: i64 = {
        let connection = rusqlite::Connection::open(store).unwrap();
        connection
            .execute(
                "INSERT INTO grpclab_migrations (version, applied_at) VALUES (99, 'later')",
                [],
            )
            .unwrap();
        connection
            .query_row("SELECT MAX(version) FROM grpclab_migrations", [], |row| {
                row.get(0)
            })
            .unwrap()
    };
    assert_eq!(newest, 99);
    let out = dir.path().join("second.json");
    let second = load(&server, store, &out, &[]);
    assert!(second.status.success(), "{}", stderr(&second));
    let text = stderr(&second);
    let warnings: Vec<&str> = text.lines().filter(|l| l.contains("WARNING")).collect();
    assert_eq!(warnings.len(), 1, "{text}");
    assert!(warnings[0].contains("newer grpclab"), "{}", warnings[0]);
    assert!(
        json(&out)["count"].as_u64().is_some(),
        "the result is written"
    );
    let listed = clean(grpclab())
        .args(["history", "--history", store, "-O", "json"])
        .output()
        .unwrap();
    assert_eq!(listed.status.code(), Some(2), "{}", stderr(&listed));
    assert_eq!(
        stderr(&listed).trim().lines().count(),
        1,
        "{}",
        stderr(&listed)
    );
    assert!(
        stderr(&listed).contains("newer grpclab"),
        "{}",
        stderr(&listed)
    );
    let connection = rusqlite::Connection::open(store).unwrap();
    let runs: i64 = connection
        .query_row("SELECT COUNT(*) FROM runs", [], |row| row.get(0))
        .unwrap();
    assert_eq!(runs, 1, "nothing written to the newer store");
}

/// A store that cannot be written (its folder is a file; a full disk; a PostgreSQL that is
/// down) gives one warning; the run succeeds and its results are written.
#[test]
fn a_store_that_cannot_be_written_costs_one_warning() {
    let server = Server::start("lab");
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, "not a folder").unwrap();
    let under_a_file = blocker.join("history.sqlite");
    let stores = [
        under_a_file.display().to_string(),
        // Writes to /dev/full fail with ENOSPC: a full disk.
        "/dev/full".to_owned(),
        // Nothing listens on port 1.
        "postgres://grpclab:secret-pw@127.0.0.1:1/grpclab".to_owned(),
    ];
    for (index, store) in stores.iter().enumerate() {
        let out = dir.path().join(format!("run-{index}.json"));
        let output = load(&server, store, &out, &[]);
        assert!(output.status.success(), "{store}: {}", stderr(&output));
        let text = stderr(&output);
        let warnings: Vec<&str> = text.lines().filter(|l| l.contains("history")).collect();
        assert_eq!(warnings.len(), 1, "{store}: one line: {text}");
        assert!(
            warnings[0].starts_with("WARNING: runs are not stored in history"),
            "{}",
            warnings[0]
        );
        assert!(!text.contains("secret-pw"), "{text}");
        let report = json(&out);
        assert!(report["count"].as_u64() > Some(0), "results written");
        assert!(
            report.get("history").is_none(),
            "not stored: nothing claimed"
        );
    }
}

/// A run killed mid-window leaves the store as it was (every earlier run readable, the
/// file consistent); one interrupted with Ctrl-C is stored as it ended.
#[test]
fn an_interrupted_run_leaves_a_consistent_store() {
    let server = Server::start("lab");
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("h.sqlite");
    let store = store.to_str().unwrap();
    let output = load(&server, store, &dir.path().join("first.json"), &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    for signal in ["KILL", "INT"] {
        let out = dir.path().join(format!("{signal}.json"));
        let mut child = clean(grpclab())
            .args(["load", "--insecure", &server.target()])
            .args(["--scenario", "string_100B", "-z", "60s", "-c", "4"])
            .args(["--history", store, "--metrics-addr", "127.0.0.1:0"])
            .args(["-O", "json", "-o"])
            .arg(&out)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Mid-window: the live metrics show calls completed.
        let address = metrics_address(&mut child);
        loop {
            let text = scrape(&address).expect("the endpoint answers during the run");
            if ok_calls(&text) > 0 {
                break;
            }
        }
        common::signal(child.id(), signal);
        let output = child.wait_with_output().unwrap();
        let runs = stored(store, &[]);
        if signal == "KILL" {
            assert!(!output.status.success());
            assert_eq!(runs.len(), 1, "only the first run: {runs:#?}");
        } else {
            assert!(output.status.success(), "{}", stderr(&output));
            assert_eq!(runs.len(), 2, "{runs:#?}");
            assert_figures_equal(&runs[1], &json(&out));
            assert_eq!(runs[1]["status"], "cancel");
        }
        let connection = rusqlite::Connection::open(store).unwrap();
        let check: String = connection
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .unwrap();
        assert_eq!(check, "ok");
    }
}

/// The address a run printed its metrics at ("metrics: http://ADDR/metrics").
fn metrics_address(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let stderr = child.stderr.take().expect("stderr piped");
    let mut lines = std::io::BufReader::new(stderr).lines();
    let address = loop {
        let line = lines
            .next()
            .expect("a metrics line before the end")
            .expect("read stderr");
        if let Some(rest) = line.strip_prefix("metrics: http://") {
            break rest.trim_end_matches("/metrics").to_owned();
        }
    };
    // Keep draining, so the run never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
    address
}

/// One GET /metrics over a plain socket (HTTP/1.1, connection closed after).
fn scrape(address: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).ok()?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // hyper may send the body chunked.
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut rest = body;
        while let Some((size, tail)) = rest.split_once("\r\n") {
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            if size == 0 {
                break;
            }
            out.push_str(&tail[..size]);
            rest = &tail[size + 2..];
        }
        return Some(out);
    }
    Some(body.to_owned())
}

/// The value of a sample line `name{labels} value` (the first whose text starts so).
fn sample(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|line| line.starts_with(prefix))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

fn ok_calls(text: &str) -> u64 {
    sample(text, "grpclab_calls_total{row=\"load\",status=\"OK\"}").unwrap_or(0.0) as u64
}

/// Scraped during a run, the counters only grow, and at the end equal the result's.
/// The metrics endpoint has no authentication: on an address beyond loopback, the run says
/// so in one warning line; on loopback, nothing.
#[test]
fn a_metrics_endpoint_beyond_loopback_is_warned_about() {
    let server = Server::start("lab");
    for (address, warned) in [
        ("0.0.0.0:0", true),
        ("127.0.0.1:0", false),
        ("[::1]:0", false),
    ] {
        let output = clean(grpclab())
            .args(["load", "--insecure", &server.target()])
            .args(["--scenario", "string_100B", "-n", "100", "--no-history"])
            .args(["--metrics-addr", address, "-O", "json"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        let text = stderr(&output);
        let warnings: Vec<&str> = text
            .lines()
            .filter(|line| line.contains("no authentication"))
            .collect();
        assert_eq!(warnings.len(), usize::from(warned), "{address}: {text}");
    }
}

#[test]
fn live_metrics_only_grow_and_end_equal_to_the_result() {
    let server = Server::start("lab");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let mut child = clean(grpclab())
        .args(["load", "--insecure", &server.target()])
        .args(["--scenario", "string_100B", "-z", "3s", "--rps", "2000"])
        // Warmup calls are not the window's: the counters start after it.
        .args(["--warmup", "1s"])
        .args(["--metrics-addr", "127.0.0.1:0", "--metrics-linger", "120s"])
        .args(["--no-history", "-O", "json", "-o"])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let address = metrics_address(&mut child);
    let mut scrapes: Vec<String> = Vec::new();
    loop {
        let Some(text) = scrape(&address) else {
            panic!("the endpoint went away before a scrape read the final figures");
        };
        let finished = sample(&text, "grpclab_row_finished{row=\"load\"}") == Some(1.0);
        scrapes.push(text);
        if finished {
            break;
        }
    }
    let status = child.wait().unwrap();
    assert!(status.success());
    assert!(scrapes.len() >= 2, "scraped during the run too");
    let counters = [
        "grpclab_calls_total{row=\"load\",status=\"OK\"}",
        "grpclab_call_latency_seconds_count{row=\"load\"}",
        "grpclab_call_latency_seconds_bucket{le=\"0.001\",row=\"load\"}",
    ];
    for counter in counters {
        let values: Vec<f64> = scrapes
            .iter()
            .map(|text| sample(text, counter).unwrap_or(0.0))
            .collect();
        assert!(
            values.windows(2).all(|pair| pair[0] <= pair[1]),
            "{counter} went down: {values:?}"
        );
    }
    let last = scrapes.last().unwrap();
    let report = json(&out);
    assert_eq!(ok_calls(last), report["ok"].as_u64().unwrap(), "{last}");
    assert_eq!(
        sample(last, "grpclab_call_latency_seconds_count{row=\"load\"}").map(|v| v as u64),
        report["ok"].as_u64()
    );
    assert_eq!(
        sample(last, "grpclab_offered_rate{row=\"load\"}"),
        Some(2000.0)
    );
    assert_eq!(
        sample(last, "grpclab_in_flight_calls{row=\"load\"}"),
        Some(0.0)
    );
    // A port already taken is refused before the run, in one line.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let output = clean(grpclab())
        .args([
            "load",
            "--insecure",
            &server.target(),
            "--scenario",
            "string_100B",
        ])
        .args(["-n", "10", "--no-history", "--metrics-addr"])
        .arg(taken.local_addr().unwrap().to_string())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("--metrics-addr"), "{text}");
}

/// The trend page: rendered in headless chromium with no console output, a chart per
/// figure, and its numbers equal to the stored rows.
#[test]
fn the_trend_page_shows_the_stored_figures() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI installs chromium (.ci/run)"
        );
        eprintln!("SKIPPED: no chromium here (apt-get install chromium)");
        return;
    };
    let server = Server::start("lab");
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("h.sqlite");
    let store = store.to_str().unwrap();
    for (index, concurrency) in ["4", "4", "4", "8", "8"].iter().enumerate() {
        let out = dir.path().join(format!("run-{index}.json"));
        let output = load(&server, store, &out, &["-c", concurrency]);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let page = dir.path().join("trend.html");
    let output = clean(grpclab())
        .args(["history", "trend", "--history", store, "-o"])
        .arg(&page)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let dom = Command::new(browser)
        .args(CHROMIUM_FLAGS)
        .arg("--dump-dom")
        .arg(&page)
        .output()
        .unwrap();
    assert!(dom.status.success());
    let console: Vec<String> = String::from_utf8_lossy(&dom.stderr)
        .lines()
        .filter(|line| line.contains("CONSOLE"))
        .map(str::to_owned)
        .collect();
    assert!(console.is_empty(), "{console:#?}");
    let rendered = String::from_utf8_lossy(&dom.stdout);
    // req/s and p99 (load runs measure no server CPU).
    assert_eq!(rendered.matches("<svg").count(), 2, "two charts");
    for run in stored(store, &[]) {
        let rps = run["figures"]["rps"].as_f64().unwrap();
        let p99 = run["figures"]["p99_ns"].as_f64().unwrap() / 1e6;
        for number in [format!("{rps:.0}"), format!("{p99:.3} ms")] {
            assert!(
                rendered.contains(&format!(">{number}<")),
                "run {} shows {number}",
                run["id"]
            );
        }
    }
    let shots = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let shot = shots.join("history-trend.png");
    let status = Command::new(browser)
        .args(CHROMIUM_FLAGS)
        .arg("--window-size=1200,1600")
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&page)
        .output()
        .unwrap();
    assert!(status.status.success());
    assert!(
        std::fs::metadata(&shot).unwrap().len() > 10_000,
        "a picture"
    );
}

/// Results measured before the store: a load JSON, ghz's JSON, a bench folder and a compare
/// folder are imported once (a second import stores nothing again).
#[test]
fn older_results_are_imported_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("h.sqlite");
    let store = store.to_str().unwrap();
    let ghz = dir.path().join("ghz.json");
    std::fs::write(&ghz, GHZ_REPORT).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let import = |paths: &[&Path]| {
        let output = clean(grpclab())
            .args(["history", "import", "--history", store])
            .args(paths)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let bench = fixtures.join("bench-report");
    let compare = fixtures.join("compare-report");
    let said = import(&[&ghz, &bench, &compare]);
    let runs = stored(store, &[]);
    let bench_rows = std::fs::read_dir(&bench)
        .unwrap()
        .filter_map(|entry| entry.ok())
        .filter(|entry| {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            entry.path().extension().is_some_and(|e| e == "json")
                && serde_json::from_str::<serde_json::Value>(&text)
                    .is_ok_and(|v| v.get("status").is_some() && v.get("command").is_some())
        })
        .count();
    // This fixture is an older report with no rounds kept: A and each compared side.
    let compared = json(&compare.join("compare.json"));
    let compare_sides = compared["sides"].as_array().map_or_else(
        || compared["comparisons"].as_array().unwrap().len() + 1,
        Vec::len,
    );
    assert_eq!(runs.len(), 1 + bench_rows + compare_sides, "{said}");
    assert!(
        said.contains(&format!("imported {} runs", runs.len())),
        "{said}"
    );
    let ghz_run = runs
        .iter()
        .find(|run| run["command"] == "ghz")
        .expect("ghz");
    assert_eq!(ghz_run["figures"]["calls"], 200);
    assert_eq!(ghz_run["figures"]["errors"], 2);
    assert_eq!(ghz_run["figures"]["p99_ns"], 9_851_213);
    assert_eq!(ghz_run["started_at"], "2019-04-10T17:21:02.519Z");
    assert_eq!(ghz_run["target"], "0.0.0.0:50051");
    // Again: nothing new.
    let again = import(&[&ghz, &bench, &compare]);
    assert!(again.contains("imported 0 runs"), "{again}");
    assert!(
        again.contains(&format!("{} already stored", runs.len())),
        "{again}"
    );
    assert_eq!(stored(store, &[]).len(), runs.len());
    // Something that is not a result is refused by name, and nothing is stored.
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{\"hello\": 1}").unwrap();
    let output = clean(grpclab())
        .args(["history", "import", "--history", store])
        .arg(&ghz)
        .arg(&junk)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("junk.json"), "{}", stderr(&output));
}

/// ghz's JSON report (`ghz -O json`) as ghz 0.x writes it: Go durations in nanoseconds, the
/// date with a UTC offset.
const GHZ_REPORT: &str = r#"{
  "name": "",
  "endReason": "normal",
  "options": {
    "host": "0.0.0.0:50051",
    "proto": "greeter.proto",
    "call": "helloworld.Greeter.SayHello",
    "insecure": true,
    "total": 200,
    "concurrency": 50,
    "connections": 1,
    "data": {"name": "Bob"},
    "CPUs": 8
  },
  "date": "2019-04-10T13:21:03.519935-04:00",
  "count": 200,
  "total": 1000000000,
  "average": 4230000,
  "fastest": 212000,
  "slowest": 10200000,
  "rps": 200.0,
  "errorDistribution": {"rpc error: code = Unavailable desc = transport is closing": 2},
  "statusCodeDistribution": {"OK": 198, "Unavailable": 2},
  "latencyDistribution": [
    {"percentage": 10, "latency": 1029000},
    {"percentage": 25, "latency": 2040000},
    {"percentage": 50, "latency": 4100000},
    {"percentage": 75, "latency": 6050000},
    {"percentage": 90, "latency": 8110000},
    {"percentage": 95, "latency": 9000000},
    {"percentage": 99, "latency": 9851213}
  ],
  "histogram": [{"mark": 0.0002, "count": 1, "frequency": 0.005}],
  "details": []
}"#;

/// `compare --baseline last` takes the newest stored compare with these settings; an id that
/// is not a compare side, or none at all, is refused in one line.
#[test]
fn a_stored_compare_is_a_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("h.sqlite");
    let store = store.to_str().unwrap();
    let compare = |args: &[&str]| {
        let mut command = clean(grpclab());
        command
            .arg("compare")
            .args(args)
            .args(["--rounds", "3", "--duration", "1s", "--warmup", "0s"])
            .args(["--connections", "1", "--concurrency", "4", "-O", "json"])
            .args(["--history", store, "--results-dir"])
            .arg(dir.path().join("results"));
        for (key, _) in std::env::vars() {
            if key.starts_with("GRPC_") {
                command.env_remove(key);
            }
        }
        command.output().unwrap()
    };
    // Nothing stored yet.
    let output = compare(&["--baseline", "last", "tonic-st"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(stderr(&output).lines().count(), 1, "{}", stderr(&output));
    let output = compare(&["lab", "tonic-st"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let first: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let sides = stored(store, &["--command", "compare"]);
    assert_eq!(sides.len(), 2);
    assert_eq!(sides[0]["implementation"], "lab");
    let output = compare(&["--baseline", "last", "tonic-st"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let second: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    // A is the stored lab rounds, exactly.
    assert_eq!(second["sides"][0]["rps"], first["sides"][0]["rps"]);
    assert!(
        second["baseline_file"]
            .as_str()
            .is_some_and(|source| source.contains(&format!("history run {}", sides[0]["id"]))),
        "{second:#}"
    );
    // By id: side B of the first comparison.
    let id = sides[1]["id"].to_string();
    let output = compare(&["--baseline", &id, "lab"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let third: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(third["sides"][0]["rps"], first["sides"][1]["rps"]);
    // Each folder's page says how each side compares with its previous run.
    assert!(dir.path().join("results").is_dir());
}

/// In a bench, each row has its own label; when the run ends every row's counters equal
/// that row's result, and each row is stored with its figures.
#[test]
fn bench_rows_are_labelled_live_and_stored() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("h.sqlite");
    let store = store.to_str().unwrap();
    let results = dir.path().join("results");
    let mut command = clean(grpclab());
    command
        .args(["bench", "lab", "tonic-st", "--no-tui"])
        .args(["--duration", "2s", "--warmup", "1s"])
        .args(["--connections", "2", "--concurrency", "20"])
        .args(["--metrics-addr", "127.0.0.1:0", "--metrics-linger", "120s"])
        .args(["--history", store, "--results-dir"])
        .arg(&results)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (key, _) in std::env::vars() {
        if key.starts_with("GRPC_") {
            command.env_remove(key);
        }
    }
    let mut child = command.spawn().unwrap();
    let address = metrics_address(&mut child);
    let finished = |text: &str, row: &str| {
        sample(text, &format!("grpclab_row_finished{{row=\"{row}\"}}")) == Some(1.0)
    };
    let last = loop {
        let text = scrape(&address).expect("the endpoint answers until a scrape read the end");
        if finished(&text, "lab") && finished(&text, "tonic-st") {
            break text;
        }
    };
    assert!(child.wait().unwrap().success());
    let folder = std::fs::read_dir(&results)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    for row in ["lab", "tonic-st"] {
        let record = json(&folder.join(format!("{row}.json")));
        let load = &record["load"];
        let ok = sample(
            &last,
            &format!("grpclab_calls_total{{row=\"{row}\",status=\"OK\"}}"),
        );
        assert_eq!(ok.map(|v| v as u64), load["ok"].as_u64(), "{row}: {last}");
        let runs = stored(store, &["--impl", row]);
        assert_eq!(runs.len(), 1, "{row}");
        assert_figures_equal_bench(&runs[0], load);
        assert!(runs[0]["figures"]["cpu_ns_per_call"].as_f64() > Some(0.0));
    }
    let notes = json(&folder.join("history.json"));
    assert_eq!(notes.as_array().map(Vec::len), Some(2), "{notes:#}");
}

/// A bench row's stored figures equal its load's (a row's status is ok, not an end reason).
fn assert_figures_equal_bench(run: &serde_json::Value, load: &serde_json::Value) {
    let figures = &run["figures"];
    assert_eq!(figures["calls"], load["count"], "{run:#}");
    assert_eq!(figures["rps"], load["measuredRps"]);
    assert_eq!(figures["p99_ns"].as_u64(), Some(percentile(load, 99.0)));
    assert_eq!(run["status"], "ok");
}
