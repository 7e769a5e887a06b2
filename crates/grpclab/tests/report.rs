//! `grpclab report` and `load -O html`: golden checks on a fixed bench results
//! folder (tests/fixtures/bench-report: a real three-server run and a row that failed to
//! start), a page from a real load run, bad inputs, and the pages opened in headless
//! chromium (screenshots kept under target/report-screenshots for a person to look at).

mod common;

use common::{chromium, grpclab, Server, CHROMIUM_FLAGS};
use std::path::{Path, PathBuf};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/bench-report");
const SWEEP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/sweep-report");
const COMPARE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/compare-report");

/// Renders `results` with `grpclab report` into a file in `dir`; returns the page.
fn report(results: &Path, dir: &Path, extra: &[&str]) -> String {
    let out = dir.join("page");
    let output = grpclab()
        .arg("report")
        .arg(results)
        .arg("-o")
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::read_to_string(out).unwrap()
}

/// Every `<svg>...</svg>` element of a page.
fn svgs(page: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = page;
    while let Some(start) = rest.find("<svg") {
        let end = rest[start..].find("</svg>").expect("a closed svg") + start + 6;
        found.push(&rest[start..end]);
        rest = &rest[end..];
    }
    found
}

/// The text of the `<td>` cells of the table rows that start with `first`.
fn row_after<'a>(page: &'a str, first: &str) -> Vec<&'a str> {
    let marker = format!(">{first}</td>");
    let start = page
        .find(&marker)
        .unwrap_or_else(|| panic!("a row {first}"));
    let row_end = page[start..].find("</tr>").unwrap() + start;
    page[start..row_end]
        .split("</td>")
        .filter_map(|cell| cell.rsplit('>').next())
        .filter(|text| !text.is_empty())
        .collect()
}

#[test]
fn a_bench_folder_becomes_one_self_contained_page() {
    let dir = tempfile::tempdir().unwrap();
    let page = report(Path::new(FIXTURE), dir.path(), &[]);
    // Every implementation, the failed one with its reason.
    for name in ["lab", "tonic-mt", "tonic-st", "broken"] {
        assert!(page.contains(&format!("<td>{name}</td>")), "{name} row");
    }
    assert!(page.contains("the server exited during start-up (exit code 3)"));
    for section in [
        "table",
        "throughput",
        "percentiles",
        "timeline",
        "usage",
        "errors",
        "allocations",
        "configuration",
    ] {
        assert!(
            page.contains(&format!("<section id=\"{section}\">")),
            "{section}"
        );
    }
    // Nothing from the network: no URL anywhere, no external script or stylesheet.
    assert!(!page.contains("http://") && !page.contains("https://"));
    assert!(!page.contains("<script src") && !page.contains("<link"));
    // Every chart's SVG parses (XML), and has a hover title per point or bar.
    let charts = svgs(&page);
    assert!(charts.len() >= 8, "{} charts", charts.len());
    for svg in &charts {
        let document = roxmltree::Document::parse(svg)
            .unwrap_or_else(|err| panic!("an SVG does not parse: {err}\n{}", &svg[..200]));
        assert!(
            document.descendants().any(|n| n.has_tag_name("title")),
            "hover titles"
        );
    }
    // The configuration, as bench.params holds it.
    assert!(page.contains("<dt>GRPC_REQUEST_SCENARIO</dt><dd>complex_proto</dd>"));
}

#[test]
fn the_percentile_curve_is_the_saved_histogram() {
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(Path::new(FIXTURE).join("lab.json")).unwrap())
            .unwrap();
    let encoded = record["load"]["hdrHistogram"]["latency"].as_str().unwrap();
    let histogram = grpclab_load::decode_histogram(encoded).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let page = report(Path::new(FIXTURE), dir.path(), &[]);
    let section = &page[page.find("<section id=\"percentiles\">").unwrap()..];
    let section = &section[..section.find("</section>").unwrap()];
    for (percentile, label) in [(50.0, "p50"), (99.0, "p99"), (99.99, "p99.99")] {
        let expected = histogram.value_at_quantile(percentile / 100.0) as f64 / 1e6;
        let shown = format!("{expected:.3} ms");
        // The numbers table: the row of this percentile holds lab's value (lab is the first
        // run, in file order).
        let row = row_after(section, label);
        assert_eq!(
            row.get(1).copied(),
            Some(shown.as_str()),
            "{label}: {row:?}"
        );
        // The chart's point, on hover.
        let title = format!(
            "<title>lab: {} at percentile {label}</title>",
            grpclab::report::charts::trim_number(expected)
        );
        assert!(section.contains(&title), "{title}");
    }
}

/// A sweep's page: req/s and p99 against the swept key, one line per implementation, the
/// points being the sweep's cells.
#[test]
fn a_sweep_draws_each_implementation_against_the_swept_key() {
    let dir = tempfile::tempdir().unwrap();
    let page = report(Path::new(SWEEP), dir.path(), &[]);
    let section = &page[page
        .find("<section id=\"sweep\">")
        .expect("a sweep section")..];
    let section = &section[..section.find("</section>").unwrap()];
    assert!(section.contains("<h2>Sweep over concurrency</h2>"));
    let matrix: serde_json::Value =
        serde_json::from_slice(&std::fs::read(Path::new(SWEEP).join("sweep.json")).unwrap())
            .unwrap();
    for cell in matrix["cells"].as_array().unwrap() {
        let implementation = cell["implementation"].as_str().unwrap();
        let value = cell["settings"][0][1].as_str().unwrap();
        let rps = cell["rps"].as_f64().unwrap();
        let title = format!("<title>{implementation}: {rps:.0} at concurrency {value}</title>");
        assert!(section.contains(&title), "{title}");
    }
    for svg in svgs(section) {
        roxmltree::Document::parse(svg).unwrap();
    }
}

/// A compare folder's page: the verdict in words, each ratio with its interval (the forest
/// plot's points are compare.json's numbers), and every round.
#[test]
fn a_comparison_shows_ratios_with_intervals_and_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let page = report(Path::new(COMPARE), dir.path(), &[]);
    let compare: serde_json::Value =
        serde_json::from_slice(&std::fs::read(Path::new(COMPARE).join("compare.json")).unwrap())
            .unwrap();
    let rps = &compare["comparisons"][0]["rps"];
    let (ratio, low, high) = (
        rps["ratio"].as_f64().unwrap(),
        rps["ratio_low"].as_f64().unwrap(),
        rps["ratio_high"].as_f64().unwrap(),
    );
    let words = match rps["verdict"].as_str().unwrap() {
        "faster" => "B is better",
        "slower" => "B is worse",
        _ => "no significant difference",
    };
    assert!(page.contains(&format!(
        "req/s (higher is better): {ratio:.3}× A, 99.9 % interval [{low:.3}, {high:.3}]: {words}"
    )));
    assert!(page.contains(&format!(
        "<title>B req/s: {ratio:.3} [{low:.3}, {high:.3}]</title>"
    )));
    for round in ["a-1", "a-2", "a-3", "b-1", "b-2", "b-3"] {
        assert!(page.contains(&format!("<td>{round}</td>")), "{round}");
    }
    assert!(!page.contains("http://") && !page.contains("https://"));
    for svg in svgs(&page) {
        roxmltree::Document::parse(svg).unwrap();
    }
}

/// Copies a fixture folder into `dir/name`.
fn copy_fixture(from: &str, dir: &Path, name: &str) -> PathBuf {
    let copy = dir.join(name);
    std::fs::create_dir(&copy).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, copy.join(path.file_name().unwrap())).unwrap();
    }
    copy
}

/// Profiles written by `--profile cpu|alloc` are linked by paths inside the folder (the
/// records hold absolute paths), and a profile note is shown.
#[test]
fn profiles_are_linked_inside_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let results = copy_fixture(FIXTURE, dir.path(), "results");
    let record_path = results.join("lab.json");
    let mut record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&record_path).unwrap()).unwrap();
    let inside = |file: &str| results.join(file).display().to_string();
    record["cpu_profile"] = serde_json::json!({
        "flamegraph": inside("lab.flamegraph.svg"),
        "top_file": inside("lab.top.txt"),
        "weight": 1000,
        "top": [],
    });
    record["profile_note"] = serde_json::json!("alloc: the server has no heap profiler");
    std::fs::write(&record_path, serde_json::to_vec(&record).unwrap()).unwrap();
    let page = report(&results, dir.path(), &[]);
    assert!(page.contains("<section id=\"profiles\">"));
    assert!(
        page.contains("<a href=\"lab.flamegraph.svg\">flamegraph</a>"),
        "relative link"
    );
    assert!(page.contains("<a href=\"lab.top.txt\">top functions</a>"));
    assert!(page.contains("alloc: the server has no heap profiler"));
}

#[test]
fn markdown_and_the_default_output_file() {
    let dir = tempfile::tempdir().unwrap();
    let md = report(Path::new(FIXTURE), dir.path(), &["--format", "md"]);
    assert!(md.contains("| name "), "{md}");
    assert!(md.contains("## Latency percentiles"));
    assert!(md.contains("| p99.99 |"));
    // Without -o, a folder gets report.html inside it.
    let copy = copy_fixture(FIXTURE, dir.path(), "results");
    let output = grpclab().arg("report").arg(&copy).output().unwrap();
    assert!(output.status.success());
    assert!(copy.join("report.html").is_file());
    assert!(String::from_utf8_lossy(&output.stderr).contains("report.html"));
}

#[test]
fn what_is_not_a_results_folder_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let not_json = dir.path().join("notes.txt");
    std::fs::write(&not_json, "hello").unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let missing = dir.path().join("missing");
    for (path, needle) in [
        (&not_json, "is not a grpclab load report"),
        (&empty, "holds no bench.params or compare.json"),
        (&missing, "cannot read"),
    ] {
        let output = grpclab().arg("report").arg(path).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{path:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(needle), "{stderr}");
    }
}

/// `load -O html` writes one run's page; `grpclab report` renders the same page from the
/// run's `-O json`.
#[test]
fn a_load_run_has_its_own_page() {
    let server = Server::start("lab");
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("run.html");
    let json = dir.path().join("run.json");
    for (format, path) in [("html", &html), ("json", &json)] {
        let output = grpclab()
            .args(["load", "--insecure", &server.target(), "--scenario"])
            .args(["complex_proto", "-n", "3000", "-c", "20", "--name", "smoke"])
            .args(["-O", format, "-o"])
            .arg(path)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<title>grpclab load: smoke</title>"));
    for section in ["summary", "percentiles", "histogram", "timeline", "errors"] {
        assert!(
            page.contains(&format!("<section id=\"{section}\">")),
            "{section}"
        );
    }
    assert!(page.contains("<td>calls</td><td class=\"num\" data-sort=\"3000\">3000</td>"));
    assert!(!page.contains("http://") && !page.contains("https://"));
    let from_json = report(&json, dir.path(), &[]);
    assert!(from_json.contains("<title>grpclab load: smoke</title>"));
    assert_eq!(svgs(&from_json).len(), svgs(&page).len());
    // Without -o, the page beside run.json is never the one `load -O html` wrote: the next
    // free name is taken, and said.
    let written = std::fs::read(&html).unwrap();
    let output = grpclab().arg("report").arg(&json).output().unwrap();
    assert!(output.status.success());
    assert_eq!(std::fs::read(&html).unwrap(), written, "run.html kept");
    assert!(dir.path().join("run-1.html").is_file());
    assert!(String::from_utf8_lossy(&output.stderr).contains("run-1.html"));
}

/// Where the screenshots go: target/report-screenshots.
fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/report-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The rendered DOM of `page` in headless chromium, and every line its console printed (our
/// pages print nothing: any line is a failure).
fn dump_dom(browser: &str, page: &Path) -> (String, Vec<String>) {
    let dom = std::process::Command::new(browser)
        .args(CHROMIUM_FLAGS)
        .arg("--dump-dom")
        .arg(page)
        .output()
        .unwrap();
    assert!(
        dom.status.success(),
        "chromium failed on {}",
        page.display()
    );
    let console = String::from_utf8_lossy(&dom.stderr)
        .lines()
        .filter(|line| line.contains("CONSOLE"))
        .map(str::to_owned)
        .collect();
    (String::from_utf8_lossy(&dom.stdout).into_owned(), console)
}

/// The console check can fail: a page that throws, and one that logs an error, are caught.
#[test]
fn the_console_check_catches_a_page_with_an_error() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI installs chromium (.ci/run)"
        );
        eprintln!("SKIPPED: no chromium here (apt-get install chromium)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (name, script) in [
        ("throws", "null.sort();"),
        ("logs", "console.error('a deliberate error');"),
    ] {
        let page = dir.path().join(format!("{name}.html"));
        std::fs::write(
            &page,
            format!("<!doctype html><html><body><p>x</p><script>{script}</script></body></html>"),
        )
        .unwrap();
        let (rendered, console) = dump_dom(browser, &page);
        assert!(rendered.contains("<p>x</p>"), "{name}: {rendered}");
        assert!(!console.is_empty(), "{name}: the console check saw nothing");
    }
}

/// Each kind of page in a real browser: the rendered DOM has the charts and rows, the
/// console prints nothing, and a screenshot is kept for a person to look at.
#[test]
fn the_pages_render_in_headless_chromium() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI installs chromium (.ci/run)"
        );
        eprintln!("SKIPPED: no chromium here (apt-get install chromium)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let bench_page = dir.path().join("bench.html");
    std::fs::write(&bench_page, report(Path::new(FIXTURE), dir.path(), &[])).unwrap();
    let server = Server::start("lab");
    // A 2-second run (a line through its seconds), a run shorter than a second (its only
    // second as a table: once three empty frames), and a run in which every call failed.
    let load_page = dir.path().join("load.html");
    let short_page = dir.path().join("short.html");
    let failed_page = dir.path().join("failed.html");
    let proto = common::unserved_service_proto(dir.path());
    for (page, args) in [
        (
            &load_page,
            &["--scenario", "complex_proto", "-z", "2s", "-c", "8"][..],
        ),
        (&short_page, &["--scenario", "complex_proto", "-n", "2000"]),
        (
            &failed_page,
            &[
                "--proto",
                proto.to_str().unwrap(),
                "--call",
                "my.pkg.Svc.Method",
                "-d",
                r#"{"name":"Joe"}"#,
                "-n",
                "500",
            ],
        ),
    ] {
        let output = grpclab()
            .args(["load", "--insecure", &server.target()])
            .args(args)
            .args(["-O", "html", "-o"])
            .arg(page)
            .output()
            .unwrap();
        assert!(common::finished(&output), "{args:?}");
    }
    let shots = screenshot_dir();
    let sweep_page = dir.path().join("sweep.html");
    std::fs::write(&sweep_page, report(Path::new(SWEEP), dir.path(), &[])).unwrap();
    let compare_page = dir.path().join("compare.html");
    std::fs::write(&compare_page, report(Path::new(COMPARE), dir.path(), &[])).unwrap();
    for (kind, page, rows, charts) in [
        (
            "bench",
            &bench_page,
            &["lab", "tonic-mt", "tonic-st", "broken"][..],
            4,
        ),
        ("load", &load_page, &["calls", "OK"][..], 5),
        ("load-short", &short_page, &["calls", "run"][..], 2),
        ("load-failed", &failed_page, &["fastest", "–"][..], 0),
        ("sweep", &sweep_page, &["lab concurrency=1000"][..], 4),
        ("compare", &compare_page, &["a-1", "b-3"][..], 1),
    ] {
        let (rendered, console) = dump_dom(browser, page);
        assert!(console.is_empty(), "{kind}: the console said: {console:#?}");
        assert!(
            rendered.matches("<svg").count() >= charts,
            "{kind}: charts in the rendered DOM"
        );
        match kind {
            "load-short" => assert!(rendered.contains("no line through it to draw"), "{kind}"),
            "load-failed" => assert!(rendered.contains("No call succeeded: all 500 failed")),
            _ => {}
        }
        for row in rows {
            assert!(
                rendered.contains(&format!("<td>{row}</td>")),
                "{kind}: {row}"
            );
        }
        let shot = shots.join(format!("{kind}.png"));
        let _ = std::fs::remove_file(&shot);
        let taken = std::process::Command::new(browser)
            .args(CHROMIUM_FLAGS)
            .arg("--window-size=1200,3000")
            .arg(format!("--screenshot={}", shot.display()))
            .arg(page)
            .output()
            .unwrap();
        assert!(taken.status.success(), "{kind}: screenshot");
        assert!(
            std::fs::metadata(&shot).is_ok_and(|m| m.len() > 10_000),
            "{kind}: a screenshot with something in it"
        );
    }
}
