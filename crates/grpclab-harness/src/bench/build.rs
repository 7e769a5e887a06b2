//! Before an implementation starts: its toolchain check (`requires`), its placeholders, and
//! its build, run once per distinct input.
//!
//! grpc_bench rebuilds every server image for the scenario's `.proto`; so do suites here, but a
//! build whose inputs have not changed is not run again. The inputs are hashed: every file in
//! the workdir (but build outputs and dependency folders), the scenario's `.proto` files (not
//! its payload, which no build reads), the build command and the environment. The build
//! writes into `<workdir>/.build/<hash>` (scenarios sharing their .proto files share it) and
//! leaves a stamp there when it succeeds.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use grpclab_core::scenario::{BUILTIN, PAYLOAD_FILE};

use super::suite::ImplementationSpec;

/// Folders under a workdir that are outputs or downloaded dependencies, not inputs.
const NOT_INPUTS: [&str; 4] = [".build", "node_modules", "target", ".git"];
/// Input files hashed at most; past this the build runs every time (and says so).
const MAX_INPUT_FILES: usize = 10_000;
/// The stamp a finished build leaves in its folder.
const STAMP: &str = ".grpclab-built";

/// The values the placeholders of a suite entry take.
#[derive(Debug, Clone)]
pub struct Placeholders {
    /// `{port}`: known once the server is about to start.
    pub port: Option<u16>,
    /// `{threads}`.
    pub threads: usize,
    /// `{scenario_dir}`.
    pub scenario_dir: PathBuf,
    /// `{build_dir}`.
    pub build_dir: PathBuf,
    /// `{grpclab}`: this very binary, so a suite can list the built-in servers beside peers.
    pub grpclab: PathBuf,
    /// `{tls_cert}` and `{tls_key}`: under `bench --tls`.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// `{host}`: the address the server listens on (127.0.0.1; the server's address in its
    /// namespace across `--network`).
    pub host: String,
}

impl Placeholders {
    /// `text` with every placeholder replaced (`{port}` only once it is known).
    pub fn fill(&self, text: &str) -> String {
        let mut filled = text
            .replace("{threads}", &self.threads.to_string())
            .replace("{scenario_dir}", &self.scenario_dir.to_string_lossy())
            .replace("{build_dir}", &self.build_dir.to_string_lossy())
            .replace("{grpclab}", &self.grpclab.to_string_lossy())
            .replace("{host}", &self.host);
        if let Some(port) = self.port {
            filled = filled.replace("{port}", &port.to_string());
        }
        if let Some((cert, key)) = &self.tls {
            filled = filled
                .replace("{tls_cert}", &cert.to_string_lossy())
                .replace("{tls_key}", &key.to_string_lossy());
        }
        filled
    }

    /// The spec's environment with its values filled.
    pub fn env(&self, spec: &ImplementationSpec) -> BTreeMap<String, String> {
        spec.env
            .iter()
            .map(|(key, value)| (key.clone(), self.fill(value)))
            .collect()
    }
}

/// What became of the steps before starting.
#[derive(Debug)]
pub enum Prepared {
    /// Ready to start; `note` says whether the build ran or was cached.
    Ready {
        /// The placeholders' values (no port yet).
        placeholders: Placeholders,
        /// For the progress line.
        note: Option<String>,
    },
    /// The toolchain is missing: one SKIPPED row.
    Skipped(String),
    /// The build failed: the reason and its output's last lines.
    Failed(String, Vec<String>),
}

/// The folder holding the scenario's files for builds: a scenario folder as it is, a built-in
/// scenario written out under `under/scenarios/<name>`.
pub fn scenario_dir(scenario: &str, under: &Path) -> std::io::Result<PathBuf> {
    let given = Path::new(scenario);
    if given.is_dir() {
        return std::fs::canonicalize(given);
    }
    let builtin = BUILTIN.iter().find(|b| b.name == scenario).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no scenario '{scenario}'"),
        )
    })?;
    let dir = under.join("scenarios").join(builtin.name);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(builtin.proto_file), builtin.proto)?;
    std::fs::write(dir.join(PAYLOAD_FILE), builtin.payload)?;
    std::fs::canonicalize(dir)
}

/// Checks the toolchain and builds (or finds the cached build) for `scenario_dir`.
pub fn prepare(
    spec: &ImplementationSpec,
    scenario_name: &str,
    scenario_dir: &Path,
    threads: usize,
    progress: &mut dyn FnMut(&str),
) -> Prepared {
    let workdir = spec.workdir.clone().unwrap_or_else(|| PathBuf::from("."));
    let mut placeholders = Placeholders {
        port: None,
        threads,
        scenario_dir: scenario_dir.to_path_buf(),
        build_dir: workdir.join(".build").join("none"),
        grpclab: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("grpclab")),
        host: "127.0.0.1".to_owned(),
        tls: None,
    };
    if let Some(check) = &spec.requires {
        let found = std::process::Command::new("sh")
            .arg("-c")
            .arg(check)
            .current_dir(&workdir)
            .envs(placeholders.env(spec))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !found {
            let install = spec
                .install
                .as_deref()
                .map_or_else(String::new, |how| format!("; install it with: {how}"));
            return Prepared::Skipped(format!("toolchain missing (`{check}` failed){install}"));
        }
    }
    let Some(command) = &spec.build else {
        return Prepared::Ready {
            placeholders,
            note: None,
        };
    };
    let (hash, complete) = input_hash(spec, command, &workdir, scenario_dir);
    // Named by its inputs alone: scenarios with the same .proto files (complex_proto and
    // large_complex; the string_* family) share one build.
    placeholders.build_dir = workdir.join(".build").join(format!("{hash:016x}"));
    let stamp = placeholders.build_dir.join(STAMP);
    let cached = |placeholders: Placeholders| Prepared::Ready {
        note: Some(format!(
            "build cached ({})",
            placeholders.build_dir.display()
        )),
        placeholders,
    };
    if complete && stamp.is_file() {
        return cached(placeholders);
    }
    // Two harnesses building the same input take turns: otherwise one may start a server whose
    // binary the other is still writing (exec fails with "Text file busy"). The second one in
    // finds the first one's stamp.
    let _lock = match BuildLock::take(&placeholders.build_dir.with_extension("lock")) {
        Ok(lock) => lock,
        Err(err) => {
            return Prepared::Failed(
                format!(
                    "cannot lock {}: {err}",
                    placeholders.build_dir.with_extension("lock").display()
                ),
                Vec::new(),
            )
        }
    };
    if complete && stamp.is_file() {
        return cached(placeholders);
    }
    progress(&format!(
        "{}: building for {scenario_name} (once per distinct input)",
        spec.name
    ));
    if let Err(err) = std::fs::create_dir_all(&placeholders.build_dir) {
        return Prepared::Failed(
            format!("cannot create {}: {err}", placeholders.build_dir.display()),
            Vec::new(),
        );
    }
    if let Err((reason, tail)) = run_build(
        &placeholders.fill(command),
        &workdir,
        &placeholders.env(spec),
    ) {
        return Prepared::Failed(reason, tail);
    }
    // A stamp that cannot be written only costs a rebuild next time.
    let _ = std::fs::write(&stamp, command);
    let note = if complete {
        format!("built into {}", placeholders.build_dir.display())
    } else {
        format!(
            "built (more than {MAX_INPUT_FILES} files in {}: not cached)",
            workdir.display()
        )
    };
    Prepared::Ready {
        placeholders,
        note: Some(note),
    }
}

/// An exclusive lock on a file beside a build folder, held until dropped (closing the file
/// releases it).
struct BuildLock(#[allow(dead_code)] std::fs::File);

impl BuildLock {
    /// Waits until the lock at `path` (created if missing) is ours.
    fn take(path: &Path) -> std::io::Result<BuildLock> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        // SAFETY: flock takes a descriptor this `File` owns and keeps open for as long as the
        // lock is held; it only blocks until the lock is granted and touches no memory of ours.
        let rc = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&file), libc::LOCK_EX) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(BuildLock(file))
    }
}

/// Runs a build command; the error carries the reason and its output's tail.
fn run_build(
    command: &str,
    workdir: &Path,
    env: &BTreeMap<String, String>,
) -> Result<(), (String, Vec<String>)> {
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .envs(env)
        .current_dir(workdir)
        .output()
        .map_err(|err| (format!("cannot run the build command: {err}"), Vec::new()))?;
    if output.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&output.stderr).into_owned()
        + &String::from_utf8_lossy(&output.stdout);
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let tail = lines[lines.len().saturating_sub(20)..].to_vec();
    Err((
        format!(
            "build failed ({})",
            super::process::describe_exit(output.status)
        ),
        tail,
    ))
}

/// A hash of everything a build reads, and whether every input file was hashed: the build
/// command, its environment, the workdir's files and the scenario's `.proto` files. The
/// scenario's payload is not an input: a build compiles the schema, and the payload goes out
/// with the load at run time.
fn input_hash(
    spec: &ImplementationSpec,
    command: &str,
    workdir: &Path,
    scenario_dir: &Path,
) -> (u64, bool) {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    command.hash(&mut hasher);
    spec.env.hash(&mut hasher);
    let mut complete = true;
    for root in [workdir, scenario_dir] {
        let mut files = Vec::new();
        complete &= collect_files(root, root, &mut files);
        if root == scenario_dir {
            files.retain(|file| file.extension().is_some_and(|ext| ext == "proto"));
        }
        files.sort();
        for relative in files {
            relative.hash(&mut hasher);
            // An unreadable file hashes as absent: the build will say what is wrong with it.
            std::fs::read(root.join(&relative))
                .unwrap_or_default()
                .hash(&mut hasher);
        }
    }
    (hasher.finish(), complete)
}

/// Adds the files under `dir` (paths relative to `root`) to `files`; false when there were
/// more than [`MAX_INPUT_FILES`].
fn collect_files(root: &Path, dir: &Path, files: &mut Vec<PathBuf>) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return true;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            let name = entry.file_name();
            if NOT_INPUTS.iter().any(|skip| name == *skip) {
                continue;
            }
            if !collect_files(root, &path, files) {
                return false;
            }
        } else if kind.is_file() {
            if files.len() >= MAX_INPUT_FILES {
                return false;
            }
            if let Ok(relative) = path.strip_prefix(root) {
                files.push(relative.to_path_buf());
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(workdir: &Path, build: &str) -> ImplementationSpec {
        ImplementationSpec {
            name: "peer".to_owned(),
            command: "exec {build_dir}/server {port}".to_owned(),
            build: Some(build.to_owned()),
            requires: None,
            install: None,
            workdir: Some(workdir.to_path_buf()),
            ready: Default::default(),
            env: BTreeMap::from([("THREADS".to_owned(), "{threads}".to_owned())]),
            tls: None,
            no_tls: None,
        }
    }

    #[test]
    fn a_build_runs_once_per_distinct_input() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("peer");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(work.join("main.src"), "v1").unwrap();
        let scenario = scenario_dir("string_10B", dir.path()).unwrap();
        assert!(scenario.join("helloworld.proto").is_file());
        // The build counts its runs in a file outside the workdir (not an input).
        let counter = dir.path().join("runs");
        let build = format!(
            "echo run >> {} && echo $THREADS > {{build_dir}}/threads",
            counter.display()
        );
        let spec = spec(&work, &build);
        let runs = || {
            std::fs::read_to_string(&counter)
                .unwrap_or_default()
                .lines()
                .count()
        };
        let build_dir = |prepared: Prepared| match prepared {
            Prepared::Ready { placeholders, .. } => placeholders.build_dir,
            other => panic!("{other:?}"),
        };
        let first = build_dir(prepare(&spec, "string_10B", &scenario, 3, &mut |_| {}));
        assert_eq!(runs(), 1);
        assert_eq!(
            std::fs::read_to_string(first.join("threads"))
                .unwrap()
                .trim(),
            "3"
        );
        let again = build_dir(prepare(&spec, "string_10B", &scenario, 3, &mut |_| {}));
        assert_eq!((runs(), &again), (1, &first), "cached");
        std::fs::write(work.join("main.src"), "v2").unwrap();
        let changed = build_dir(prepare(&spec, "string_10B", &scenario, 3, &mut |_| {}));
        assert_eq!(runs(), 2, "a changed source rebuilds");
        assert_ne!(changed, first);
        // string_1kB has string_10B's .proto and another payload: the same build.
        let same_proto = scenario_dir("string_1kB", dir.path()).unwrap();
        let shared = build_dir(prepare(&spec, "string_1kB", &same_proto, 3, &mut |_| {}));
        assert_eq!(
            (runs(), &shared),
            (2, &changed),
            "the payload is no build input"
        );
        let other_scenario = scenario_dir("complex_proto", dir.path()).unwrap();
        build_dir(prepare(
            &spec,
            "complex_proto",
            &other_scenario,
            3,
            &mut |_| {},
        ));
        assert_eq!(runs(), 3, "another scenario's proto is another build");
        build_dir(prepare(&spec, "string_10B", &scenario, 3, &mut |_| {}));
        assert_eq!(runs(), 3, "both stay cached side by side");
    }

    #[test]
    fn a_missing_toolchain_skips_and_a_failing_build_fails() {
        let dir = tempfile::tempdir().unwrap();
        let scenario = scenario_dir("complex_proto", dir.path()).unwrap();
        let mut skipped = spec(dir.path(), "true");
        skipped.requires = Some("command -v no-such-compiler-xyz".to_owned());
        skipped.install = Some("apt-get install xyz".to_owned());
        match prepare(&skipped, "complex_proto", &scenario, 1, &mut |_| {}) {
            Prepared::Skipped(reason) => {
                assert!(reason.contains("no-such-compiler-xyz"), "{reason}");
                assert!(reason.contains("apt-get install xyz"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        let failing = spec(dir.path(), "echo 'error: no main' >&2; exit 3");
        match prepare(&failing, "complex_proto", &scenario, 1, &mut |_| {}) {
            Prepared::Failed(reason, tail) => {
                assert!(reason.contains("build failed"), "{reason}");
                assert_eq!(tail, ["error: no main"]);
            }
            other => panic!("{other:?}"),
        }
        let placeholders = Placeholders {
            port: Some(8080),
            threads: 2,
            scenario_dir: "/s".into(),
            build_dir: "/b".into(),
            grpclab: "/g".into(),
            tls: Some(("/c.pem".into(), "/k.pem".into())),
            host: "198.18.0.1".into(),
        };
        assert_eq!(
            placeholders.fill(
                "{build_dir}/x {port} {threads} {scenario_dir} {grpclab} {tls_cert} {tls_key} {host}"
            ),
            "/b/x 8080 2 /s /g /c.pem /k.pem 198.18.0.1"
        );
    }
}
