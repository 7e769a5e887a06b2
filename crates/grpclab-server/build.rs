//! Generates the tonic services for the scenarios' `helloworld.proto` and grpclab's admin
//! `Stats` service.
//!
//! protox compiles the files in-process, so building grpclab needs no protoc. The complex
//! schema is a superset of the string scenarios' (field numbers agree), so one generated
//! server serves every built-in scenario.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        ("../../scenarios/complex_proto", "helloworld.proto"),
        ("proto", "admin.proto"),
    ];
    for (dir, file) in protos {
        println!("cargo:rerun-if-changed={dir}/{file}");
        let descriptors = protox::compile([format!("{dir}/{file}")], [dir])?;
        tonic_prost_build::configure()
            .build_client(true)
            .build_server(true)
            .compile_fds(descriptors)?;
    }
    Ok(())
}
