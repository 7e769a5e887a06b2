//! Generates the tonic service for the scenarios' `helloworld.proto`.
//!
//! protox compiles the file in-process, so building grpclab needs no protoc. The complex
//! schema is a superset of the string scenarios' (field numbers agree), so one generated
//! server serves every built-in scenario.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "../../scenarios/complex_proto/helloworld.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["../../scenarios/complex_proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
