//! Generates the tonic services for the scenarios' `helloworld.proto`, the streaming echo
//! service (`scenarios/streaming/streaming.proto`), the session service for flows
//! (`scenarios/session/session.proto`) and grpclab's admin services.
//!
//! protox compiles the files in-process, so building grpclab needs no protoc. The complex
//! schema is a superset of the string scenarios' (field numbers agree), so one generated
//! server serves every built-in scenario. Each file's `FileDescriptorSet` is also written to
//! `OUT_DIR/<package>.fds.bin` for the reflection service.

use prost::Message as _;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        (
            "../../scenarios/complex_proto",
            "helloworld.proto",
            "helloworld",
        ),
        ("proto", "admin.proto", "grpclab.admin.v1"),
        (
            "../../scenarios/streaming",
            "streaming.proto",
            "grpclab.streaming.v1",
        ),
        (
            "../../scenarios/session",
            "session.proto",
            "grpclab.session.v1",
        ),
    ];
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    for (dir, file, package) in protos {
        println!("cargo:rerun-if-changed={dir}/{file}");
        let descriptors = protox::compile([format!("{dir}/{file}")], [dir])?;
        std::fs::write(
            out_dir.join(format!("{package}.fds.bin")),
            descriptors.encode_to_vec(),
        )?;
        tonic_prost_build::configure()
            .build_client(true)
            .build_server(true)
            .compile_fds(descriptors)?;
    }
    Ok(())
}
