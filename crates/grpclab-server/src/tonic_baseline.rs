//! The idiomatic tonic server: generated service, `tonic::transport::Server`, `tcp_nodelay`.
//! Deliberately unoptimised: it is the baseline, written the way grpc_bench's `rust_tonic_*`
//! entries and most tonic users write it.

use std::future::Future;
use tokio::net::TcpListener;
use tonic::{Request, Response, Status};

use crate::error::ServeError;
use crate::proto::pb::greeter_server::{Greeter, GreeterServer};
use crate::proto::pb::{HelloReply, HelloRequest};
use crate::proto::pb_admin::heap_profile_server::{HeapProfile, HeapProfileServer};
use crate::proto::pb_admin::stats_server::{Stats, StatsServer};
use crate::proto::pb_admin::{
    HeapProfileReply, HeapProfileStartRequest, HeapProfileStopRequest, StatsReply, StatsRequest,
};
use crate::proto::pb_streaming::streaming_echo_server::{StreamingEcho, StreamingEchoServer};
use crate::proto::pb_streaming::{EchoReply, EchoRequest, FeedRequest, UploadSummary};
use crate::stats::{count_call, snapshot};

/// `Greeter.SayHello`: the reply carries the request's `Hello` back, decoded and re-encoded.
#[derive(Debug, Default, Clone, Copy)]
pub struct EchoGreeter;

#[tonic::async_trait]
impl Greeter for EchoGreeter {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let reply = HelloReply {
            response: request.into_inner().request,
        };
        count_call();
        Ok(Response::new(reply))
    }
}

/// `grpc.health.v1.Health`, on tonic-health's generated trait: Check answers as
/// [`crate::health::check`] says and counts as a call; Watch is not served (see
/// [`crate::health`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingHealth;

#[tonic::async_trait]
impl tonic_health::pb::health_server::Health for CountingHealth {
    async fn check(
        &self,
        request: Request<crate::health::HealthCheckRequest>,
    ) -> Result<Response<crate::health::HealthCheckResponse>, Status> {
        let reply = crate::health::check(&request.into_inner().service)
            .map_err(|(code, message)| Status::new(tonic::Code::from(code as i32), message))?;
        count_call();
        Ok(Response::new(reply))
    }

    type WatchStream = std::pin::Pin<
        Box<
            dyn tokio_stream::Stream<Item = Result<crate::health::HealthCheckResponse, Status>>
                + Send,
        >,
    >;

    async fn watch(
        &self,
        _request: Request<crate::health::HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        Err(Status::unimplemented(
            "grpc.health.v1.Health/Watch is not served: statuses here never change; call Check",
        ))
    }
}

/// The streaming echo service, written the way tonic users write streams: a mapped inbound
/// stream for ping-pong, an iterator stream for the feed, a loop over `message()` for the
/// upload. Every message served counts as a call in the admin counters.
#[derive(Debug, Default, Clone, Copy)]
pub struct StreamingEchoService;

/// A stream of replies, as tonic's generated trait wants it.
type ReplyStream =
    std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<EchoReply, Status>> + Send>>;

#[tonic::async_trait]
impl StreamingEcho for StreamingEchoService {
    type PingPongStream = ReplyStream;
    type FeedStream = ReplyStream;

    async fn ping_pong(
        &self,
        request: Request<tonic::Streaming<EchoRequest>>,
    ) -> Result<Response<Self::PingPongStream>, Status> {
        use tokio_stream::StreamExt as _;
        let mut sequence = 0u64;
        let replies = request.into_inner().map(move |request| {
            let request = request?;
            count_call();
            sequence += 1;
            Ok(EchoReply {
                payload: request.payload,
                sequence: sequence - 1,
                sent_unix_nanos: 0,
            })
        });
        Ok(Response::new(Box::pin(replies)))
    }

    async fn feed(
        &self,
        request: Request<FeedRequest>,
    ) -> Result<Response<Self::FeedStream>, Status> {
        let FeedRequest {
            count,
            payload,
            stamp,
        } = request.into_inner();
        count_call();
        // The stream is polled as tonic encodes: each reply is stamped as it is produced.
        let replies = tokio_stream::iter((0..u64::from(count)).map(move |sequence| {
            Ok(EchoReply {
                payload: payload.clone(),
                sequence,
                sent_unix_nanos: if stamp {
                    grpclab_core::clock::unix_nanos_now()
                } else {
                    0
                },
            })
        }));
        Ok(Response::new(Box::pin(replies)))
    }

    async fn upload(
        &self,
        request: Request<tonic::Streaming<EchoRequest>>,
    ) -> Result<Response<UploadSummary>, Status> {
        let mut inbound = request.into_inner();
        let mut summary = UploadSummary::default();
        while let Some(message) = inbound.message().await? {
            count_call();
            summary.messages += 1;
            summary.bytes += message.payload.len() as u64;
        }
        Ok(Response::new(summary))
    }
}

/// The admin `Stats` service: the process's allocation and call counters.
#[derive(Debug, Clone, Copy)]
pub struct AdminStats {
    implementation: &'static str,
}

#[tonic::async_trait]
impl Stats for AdminStats {
    async fn get(&self, _: Request<StatsRequest>) -> Result<Response<StatsReply>, Status> {
        Ok(Response::new(snapshot(self.implementation)))
    }
}

/// The admin `HeapProfile` service: allocation sites over a window (see `heap_profile`).
#[derive(Debug, Clone, Copy)]
pub struct AdminHeapProfile;

#[tonic::async_trait]
impl HeapProfile for AdminHeapProfile {
    async fn start(
        &self,
        request: Request<HeapProfileStartRequest>,
    ) -> Result<Response<HeapProfileReply>, Status> {
        let path = request.into_inner().path;
        crate::heap_profile::start(&path)
            .map_err(|err| Status::failed_precondition(err.to_string()))?;
        Ok(Response::new(HeapProfileReply { path }))
    }

    async fn stop(
        &self,
        _: Request<HeapProfileStopRequest>,
    ) -> Result<Response<HeapProfileReply>, Status> {
        let path = crate::heap_profile::stop()
            .map_err(|err| Status::failed_precondition(err.to_string()))?;
        Ok(Response::new(HeapProfileReply { path }))
    }
}

/// The session service for flows (see [`crate::session`]) as a tonic service.
#[derive(Debug, Clone, Copy)]
pub struct SessionService;

fn session_status((code, message): crate::session::Refusal) -> Status {
    Status::new(tonic::Code::from_i32(code as i32), message)
}

#[tonic::async_trait]
impl crate::proto::pb_session::sessions_server::Sessions for SessionService {
    async fn login(
        &self,
        request: Request<crate::session::LoginRequest>,
    ) -> Result<Response<crate::session::LoginReply>, Status> {
        crate::session::login(request.get_ref())
            .map(Response::new)
            .map_err(session_status)
    }

    async fn list(
        &self,
        request: Request<crate::session::ListRequest>,
    ) -> Result<Response<crate::session::ListReply>, Status> {
        crate::session::list(request.get_ref())
            .map(Response::new)
            .map_err(session_status)
    }

    async fn get(
        &self,
        request: Request<crate::session::GetRequest>,
    ) -> Result<Response<crate::session::Item>, Status> {
        crate::session::get(request.get_ref())
            .map(Response::new)
            .map_err(session_status)
    }
}

/// Serves `EchoGreeter` (and the admin `Stats` service, reporting `implementation`,
/// `HeapProfile`, and server reflection v1 and v1alpha describing them all) on `listener`
/// until `shutdown` resolves, then lets in-flight calls finish. With `grpc_web`, gRPC-Web
/// too (binary and text, over HTTP/1.1 and HTTP/2), as tonic users add it: tonic-web's layer.
pub async fn run(
    listener: TcpListener,
    implementation: &'static str,
    tls: Option<&grpclab_core::tls::ServerTls>,
    grpc_web: bool,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    // Reflection as tonic users add it: tonic-reflection's service over the compiled
    // descriptors, both versions (clients such as grpcurl and ghz still ask v1alpha first or
    // only).
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(crate::proto::pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(crate::proto::pb_admin::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(crate::proto::pb_streaming::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(crate::proto::pb_session::FILE_DESCRIPTOR_SET)
    };
    let reflection_v1 = reflection()
        .build_v1()
        .map_err(|err| ServeError::Serve(format!("reflection: {err}")))?;
    let reflection_v1alpha = reflection()
        .build_v1alpha()
        .map_err(|err| ServeError::Serve(format!("reflection: {err}")))?;
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        builder = builder
            .tls_config(tonic_tls_config(tls)?)
            .map_err(|err| ServeError::Tls(format!("TLS: {err}")))?;
    }
    builder
        .accept_http1(grpc_web)
        .layer(tower::util::option_layer(
            grpc_web.then(tonic_web::GrpcWebLayer::new),
        ))
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        // gzip as tonic users enable it: accepted, and used for replies to clients that
        // accept it.
        .add_service(
            GreeterServer::new(EchoGreeter)
                .accept_compressed(tonic::codec::CompressionEncoding::Gzip)
                .send_compressed(tonic::codec::CompressionEncoding::Gzip),
        )
        .add_service(StreamingEchoServer::new(StreamingEchoService))
        .add_service(crate::proto::pb_session::sessions_server::SessionsServer::new(SessionService))
        .add_service(tonic_health::pb::health_server::HealthServer::new(
            CountingHealth,
        ))
        .add_service(StatsServer::new(AdminStats { implementation }))
        .add_service(HeapProfileServer::new(AdminHeapProfile))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
        .map_err(|err| ServeError::Serve(err.to_string()))
}

/// tonic's own TLS configuration from the PEM files, as tonic users write it.
fn tonic_tls_config(
    tls: &grpclab_core::tls::ServerTls,
) -> Result<tonic::transport::ServerTlsConfig, ServeError> {
    let read = |flag: &str, path: &std::path::Path| {
        std::fs::read(path).map_err(|err| {
            ServeError::Tls(format!("{flag} {}: cannot read it: {err}", path.display()))
        })
    };
    let identity = tonic::transport::Identity::from_pem(
        read("--tls-cert", &tls.cert)?,
        read("--tls-key", &tls.key)?,
    );
    let mut config = tonic::transport::ServerTlsConfig::new().identity(identity);
    if let Some(ca) = &tls.client_ca {
        config = config.client_ca_root(tonic::transport::Certificate::from_pem(read(
            "--tls-client-ca",
            ca,
        )?));
    }
    Ok(config)
}
