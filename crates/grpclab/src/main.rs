//! grpclab's entry point: parse → prepare (validate) → execute → report. `main` only prints
//! the error and chooses the exit code.

use clap::Parser;
use grpclab::cli::{self, Cli, Command};
use grpclab::{InputError, EXIT_FAILURE, EXIT_INPUT};
use std::io::Write;
use std::process::ExitCode;

/// Counts heap allocations per thread, so servers can report allocations per call through
/// their admin RPC (a plain load and store per allocation; see `alloc_count`).
#[global_allocator]
static ALLOCATOR: grpclab_server::alloc_count::CountingAllocator =
    grpclab_server::alloc_count::CountingAllocator;

fn main() -> ExitCode {
    grpclab_server::alloc_count::mark_installed();
    // Once per process: every verb may hold many sockets (load's connections, serve's), and a
    // shell's soft limit is often far below the hard one.
    let _ = grpclab_core::descriptors::OpenFilesLimit::raise_to_hard();
    let mut cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
            match cli::missing_verb_hint(&argv, err.kind()) {
                Some(hint) => {
                    let _ = writeln!(std::io::stderr(), "error: {hint}");
                    return ExitCode::from(EXIT_INPUT);
                }
                None => err.exit(),
            }
        }
    };
    // ghz's --config: the file's settings become flags in front of the command line's, and
    // the command line is parsed again (later flags win).
    if let Command::Load(args) = &cli.command {
        if let Some(path) = &args.config {
            let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
            match cli::config_file::expand(&argv, path, !args.target.is_empty()) {
                Ok(expanded) => cli = Cli::parse_from(expanded),
                Err(err) => {
                    let _ = writeln!(std::io::stderr(), "error: {err}");
                    return ExitCode::from(EXIT_INPUT);
                }
            }
        }
    }
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "error: {err:#}");
            if err.downcast_ref::<InputError>().is_some() {
                ExitCode::from(EXIT_INPUT)
            } else if err.downcast_ref::<grpclab::LateStart>().is_some() {
                ExitCode::from(grpclab::EXIT_LATE_START)
            } else {
                ExitCode::from(EXIT_FAILURE)
            }
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Bench(args) => cli::bench::run(&args),
        Command::Compare(args) => cli::compare::run(&args),
        Command::Capacity(args) => cli::capacity::run(&args),
        Command::Load(args) => cli::load::run(&args),
        Command::Merge(args) => cli::merge::run(&args),
        Command::Report(args) => cli::report::run(&args),
        Command::History(args) => cli::history::run(&args),
        Command::Serve(args) => cli::serve::run(&args),
        Command::Stats(args) => cli::stats::run(&args),
        Command::Encode(args) => cli::encode::run(&args),
        Command::Completions(args) => cli::completions(args.shell),
        Command::Man => cli::man(),
    }
}
