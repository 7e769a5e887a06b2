//! grpclab's entry point: parse → prepare (validate) → execute → report. `main` only prints
//! the error and chooses the exit code.

use clap::Parser;
use grpclab::cli::{Cli, Command};
use grpclab::{
    bench, compare, encode_cmd, load_cmd, serve_cmd, stats_cmd, InputError, EXIT_FAILURE,
    EXIT_INPUT,
};
use grpclab_load::CancellationToken;
use std::process::ExitCode;

/// Counts heap allocations per thread, so servers can report allocations per call through
/// their admin RPC (a plain load and store per allocation; see `alloc_count`).
#[global_allocator]
static ALLOCATOR: grpclab_server::alloc_count::CountingAllocator =
    grpclab_server::alloc_count::CountingAllocator;

fn main() -> ExitCode {
    grpclab_server::alloc_count::mark_installed();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            if err.downcast_ref::<InputError>().is_some() {
                ExitCode::from(EXIT_INPUT)
            } else {
                ExitCode::from(EXIT_FAILURE)
            }
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Bench(args) => {
            let prepared = bench::prepare(&args)?;
            let cancel = CancellationToken::new();
            cancel_on_ctrl_c(&cancel);
            let outcome = bench::execute(prepared, &cancel, &mut |line| eprintln!("{line}"))?;
            println!("{}", outcome.table);
            eprintln!("results: {}", outcome.dir.display());
            Ok(if outcome.any_failed() || cancel.is_cancelled() {
                ExitCode::from(EXIT_FAILURE)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Compare(args) => {
            let prepared = compare::prepare(&args)?;
            let cancel = CancellationToken::new();
            cancel_on_ctrl_c(&cancel);
            let (report, dir) =
                compare::execute(prepared, &cancel, &mut |line| eprintln!("{line}"))?;
            match args.format {
                grpclab::cli::CompareFormat::Text => print!("{}", compare::render(&report)),
                grpclab::cli::CompareFormat::Json => {
                    println!("{}", serde_json::to_string_pretty(&report)?)
                }
            }
            eprintln!("results: {}", dir.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Load(args) => {
            let prepared = load_cmd::prepare(&args)?;
            let cancel = CancellationToken::new();
            cancel_on_ctrl_c(&cancel);
            load_cmd::execute(prepared, &cancel)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Encode(args) => {
            let written = encode_cmd::execute(&args)?;
            eprintln!("wrote {written} bytes to {}", args.output.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Stats(args) => {
            let stats = stats_cmd::fetch(&args.target)?;
            println!("{}", serde_json::to_string_pretty(&stats)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve(args) => {
            let config = serve_cmd::prepare(&args)?;
            serve_cmd::execute(&config)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Cancels `token` on Ctrl-C (SIGINT) or SIGTERM, so a run stops, drains and still writes its
/// results.
fn cancel_on_ctrl_c(token: &CancellationToken) {
    let token = token.clone();
    let _ = std::thread::Builder::new()
        .name("grpclab-signals".to_owned())
        .spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                grpclab_server::shutdown_signal().await;
                token.cancel();
            });
        });
}
