//! The idiomatic tonic server: generated service, `tonic::transport::Server`, `tcp_nodelay`.
//! Deliberately unoptimised: it is the baseline, written the way grpc_bench's `rust_tonic_*`
//! entries and most tonic users write it.

use std::future::Future;
use tokio::net::TcpListener;
use tonic::{Request, Response, Status};

use crate::pb::greeter_server::{Greeter, GreeterServer};
use crate::pb::{HelloReply, HelloRequest};
use crate::ServeError;

/// `Greeter.SayHello`: the reply carries the request's `Hello` back, decoded and re-encoded.
#[derive(Debug, Default, Clone, Copy)]
pub struct EchoGreeter;

#[tonic::async_trait]
impl Greeter for EchoGreeter {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        Ok(Response::new(HelloReply {
            response: request.into_inner().request,
        }))
    }
}

/// Serves `EchoGreeter` on `listener` until `shutdown` resolves, then lets in-flight calls finish.
pub async fn run(
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        .add_service(GreeterServer::new(EchoGreeter))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
        .map_err(|err| ServeError::Serve(err.to_string()))
}
