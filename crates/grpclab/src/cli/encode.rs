//! `grpclab encode`: write a scenario's request as one framed gRPC message, so other clients
//! (h2load's `-d`, curl) can send exactly the bytes grpclab sends.

use super::args::EncodeArgs;
use super::load::load_scenario;
use crate::InputError;

/// `grpclab encode`: writes the framed request and says how many bytes.
pub fn run(args: &EncodeArgs) -> anyhow::Result<std::process::ExitCode> {
    let written = execute(args)?;
    let _ = std::io::Write::write_fmt(
        &mut std::io::stderr(),
        format_args!("wrote {written} bytes to {}\n", args.output.display()),
    );
    Ok(std::process::ExitCode::SUCCESS)
}

/// Encodes and writes the request; returns how many bytes were written.
pub fn execute(args: &EncodeArgs) -> Result<usize, InputError> {
    // No server to ask by reflection: with no schema flag, the default scenario.
    let scenario = load_scenario(&args.scenario, None)?.scenario;
    let requests = scenario.requests();
    let request = requests.get(args.index).ok_or_else(|| {
        InputError(format!(
            "--index {} is out of range: the payload holds {} request(s)",
            args.index,
            requests.len()
        ))
    })?;
    std::fs::write(&args.output, request).map_err(|err| {
        InputError(format!(
            "-o/--output: cannot write {}: {err}",
            args.output.display()
        ))
    })?;
    Ok(request.len())
}
