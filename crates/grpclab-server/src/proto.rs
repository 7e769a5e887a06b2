//! The protobuf types and tonic services generated at build time (`build.rs`, protox: no
//! protoc), with each file's descriptors for server reflection.

/// The scenarios' protobuf types and tonic service, generated at build time from
/// `scenarios/complex_proto/helloworld.proto`.
#[allow(missing_docs, clippy::all)]
pub mod pb {
    tonic::include_proto!("helloworld");

    /// `helloworld.proto` as an encoded `FileDescriptorSet`, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/helloworld.fds.bin"));
}

/// The streaming echo service (`scenarios/streaming/streaming.proto`): bidi ping-pong,
/// server streaming, client streaming.
#[allow(missing_docs, clippy::all)]
pub mod pb_streaming {
    tonic::include_proto!("grpclab.streaming.v1");

    /// `streaming.proto` as an encoded `FileDescriptorSet`, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/grpclab.streaming.v1.fds.bin"));
}

/// The session service for flows (`scenarios/session/session.proto`): login, list, get.
#[allow(missing_docs, clippy::all)]
pub mod pb_session {
    tonic::include_proto!("grpclab.session.v1");

    /// `session.proto` as an encoded `FileDescriptorSet`, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/grpclab.session.v1.fds.bin"));
}

/// grpclab's admin service (`grpclab.admin.v1.Stats`), generated from `proto/admin.proto`.
#[allow(missing_docs, clippy::all)]
pub mod pb_admin {
    tonic::include_proto!("grpclab.admin.v1");

    /// `admin.proto` as an encoded `FileDescriptorSet`, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/grpclab.admin.v1.fds.bin"));
}
