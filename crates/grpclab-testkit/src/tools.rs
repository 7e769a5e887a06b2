//! The outside programs some tests drive: Go load generators (ghz, fortio) and a headless
//! browser. Missing, a test says so and skips — except under CI, which installs them.

use std::process::Command;

/// A load generator written in Go (ghz, fortio): on PATH, or where `go install` puts it.
/// Missing, it says so and gives `None` — except under CI, which installs them
/// (`bash peers/install.sh clients`), where it fails.
pub fn go_tool(name: &str) -> Option<std::path::PathBuf> {
    let on_path = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from);
    let gopath = || {
        Command::new("go")
            .args(["env", "GOPATH"])
            .output()
            .ok()
            .map(|o| {
                std::path::Path::new(String::from_utf8_lossy(&o.stdout).trim())
                    .join("bin")
                    .join(name)
            })
            .filter(|p| p.is_file())
    };
    let found = on_path.or_else(gopath);
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI installs {name} (bash peers/install.sh clients)"
        );
        eprintln!("{name} is not installed (bash peers/install.sh clients): skipped");
    }
    found
}

/// The headless browser tests open pages in, if one is installed.
pub fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| {
            std::process::Command::new(name)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

/// Headless, no sandbox (root in CI), logging the console to stderr, no network of its own.
pub const CHROMIUM_FLAGS: [&str; 11] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
];
