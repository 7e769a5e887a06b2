//! rust_ntex_grpc: the Greeter on ntex-grpc (ntex's own HTTP/2, ntex-h2), written as the
//! crate's README writes a server; one ntex worker (thread) per server CPU.
//! Usage: server PORT THREADS [CERT KEY]   (with CERT and KEY, PEM files: TLS, ALPN h2)
use std::sync::Arc;

use ntex::io::Io;
use ntex::service::service as chain;
use ntex::{server::Server, ServiceFactory, SharedCfg};
use ntex_grpc::server;
use ntex_tls::rustls::TlsAcceptor;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;

mod helloworld;
use crate::helloworld::{HelloReply, HelloRequest};

#[derive(Clone)]
struct GreeterServer;

#[server(crate::helloworld::Greeter)]
impl GreeterServer {
    #[method(SayHello)]
    async fn say_hello(&self, request: HelloRequest) -> HelloReply {
        HelloReply { response: request.request }
    }
}

// ntex-grpc makes one service per connection.
impl ServiceFactory<(), server::ServerRequest> for GreeterServer {
    type Res = server::ServerResponse;
    type Error = server::ServerError;
    type Service = GreeterServer;
    type InitError = std::convert::Infallible;

    async fn create(&self, _: &()) -> Result<Self::Service, Self::InitError> {
        Ok(self.clone())
    }
}

#[ntex::main]
async fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || std::io::Error::other("usage: server PORT THREADS [CERT KEY]");
    let port: u16 = args.first().and_then(|a| a.parse().ok()).ok_or_else(usage)?;
    let threads: usize = args.get(1).and_then(|a| a.parse().ok()).ok_or_else(usage)?;
    let address = format!("127.0.0.1:{port}");
    let builder = Server::builder();
    let builder = match (args.get(2), args.get(3)) {
        (Some(cert), Some(key)) => {
            let tls = Arc::new(tls_config(cert, key)?);
            builder.bind("greeter", address, SharedCfg::new("GRPC"), async move |_| {
                chain::<_, (), Io>(TlsAcceptor::new(tls.clone()))
                    .map_err(|e| -> Box<dyn std::error::Error> { Box::new(e) })
                    .and_then(server::GrpcServer::new(GreeterServer))
            })?
        }
        _ => builder.bind("greeter", address, SharedCfg::new("GRPC"), async |_| {
            server::GrpcServer::new(GreeterServer)
        })?,
    };
    builder.workers(threads).run().await
}

/// A rustls configuration serving `cert` with `key` (PEM files), offering HTTP/2 by ALPN.
fn tls_config(cert: &str, key: &str) -> std::io::Result<ServerConfig> {
    let bad = |what: &str, path: &str, e: &dyn std::fmt::Display| {
        std::io::Error::other(format!("cannot read the TLS {what} {path}: {e}"))
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| bad("certificate", cert, &e))?;
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| bad("key", key, &e))?;
    // ring: builds from crates.io alone (aws-lc-rs needs cmake and a C toolchain's extras).
    #[allow(deprecated)]
    let provider = rustls::crypto::ring::default_provider();
    let mut config = ServerConfig::builder_with_provider(Arc::new(provider))
    .with_safe_default_protocol_versions()
    .map_err(|e| bad("configuration", cert, &e))?
    .with_no_client_auth()
    .with_single_cert(chain, key_der)
    .map_err(|e| bad("certificate", cert, &e))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}
