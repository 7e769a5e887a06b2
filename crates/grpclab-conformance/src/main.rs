//! `grpclab-conformance-client`: grpclab's wire-protocol code (grpclab-core's `protocol.rs`:
//! content types, request bodies, gRPC-Web's trailer frame, Connect's error JSON) as the
//! client under test of Connect's conformance suite (`connectconformance --mode client`).
//!
//! The runner writes size-delimited `ClientCompatRequest`s to stdin; each is one call to its
//! reference server, made here and described back on stdout as a `ClientCompatResponse`
//! (headers, reply payloads, error with details, trailers). The suite's own `.proto` files
//! are read at start from the directory given (the conformance Go module's `proto/`), so
//! nothing of theirs is copied here.
//!
//! Usage: `grpclab-conformance-client PROTO_DIR` (see `peers/connect_conformance/run.sh`).

mod call;
mod spec;

use std::io::{Read, Write};

fn main() {
    let Some(proto_dir) = std::env::args().nth(1) else {
        eprintln!("grpclab-conformance-client: give the conformance suite's proto directory (connectrpc.com/conformance's proto/), e.g. $(go env GOMODCACHE)/connectrpc.com/conformance@v1.0.7/proto");
        std::process::exit(2);
    };
    let schema = match spec::Schema::compile(&proto_dir) {
        Ok(schema) => schema,
        Err(err) => {
            eprintln!("grpclab-conformance-client: {err}");
            std::process::exit(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("grpclab-conformance-client: cannot start a runtime: {err}");
            std::process::exit(1);
        }
    };
    let mut stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    loop {
        let request = match read_delimited(&mut stdin) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return,
            Err(err) => {
                eprintln!("grpclab-conformance-client: reading stdin: {err}");
                std::process::exit(1);
            }
        };
        let response = runtime.block_on(schema.answer(&request));
        if let Err(err) = write_delimited(&mut stdout, &response) {
            eprintln!("grpclab-conformance-client: writing stdout: {err}");
            std::process::exit(1);
        }
    }
}

/// One message behind its 4-byte big-endian length; `None` at the end of input.
fn read_delimited(input: &mut impl Read) -> std::io::Result<Option<Vec<u8>>> {
    let mut length = [0u8; 4];
    match input.read_exact(&mut length) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(err) => return Err(err),
    }
    let mut message = vec![0u8; u32::from_be_bytes(length) as usize];
    input.read_exact(&mut message)?;
    Ok(Some(message))
}

/// Writes `message` behind its 4-byte big-endian length, flushed.
fn write_delimited(output: &mut impl Write, message: &[u8]) -> std::io::Result<()> {
    let length =
        u32::try_from(message.len()).map_err(|_| std::io::Error::other("a response over 4 GiB"))?;
    output.write_all(&length.to_be_bytes())?;
    output.write_all(message)?;
    output.flush()
}
