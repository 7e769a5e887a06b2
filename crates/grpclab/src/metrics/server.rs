//! The `/metrics` endpoint: hyper's HTTP/1 server on a thread of its own with a one-thread
//! runtime, so scrapes never run on (or wake) the load engine's threads. It lives as long
//! as the [`MetricsServer`] handle; dropping it stops the server.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};

use super::LiveMetrics;
use crate::InputError;

/// A running metrics endpoint.
pub struct MetricsServer {
    address: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `address` (port 0: any free port) and serves `metrics` at `/metrics`. A port in
    /// use, or an address not of this machine, is the user's to fix: an error, before the
    /// run starts.
    pub fn start(
        address: SocketAddr,
        metrics: Arc<LiveMetrics>,
    ) -> Result<MetricsServer, InputError> {
        let listener = std::net::TcpListener::bind(address).map_err(|err| {
            InputError(format!(
                "--metrics-addr {address}: cannot listen there ({err}); give a free port of this machine, or port 0 for any"
            ))
        })?;
        let bound = listener
            .local_addr()
            .map_err(|err| InputError(format!("--metrics-addr {address}: {err}")))?;
        listener
            .set_nonblocking(true)
            .map_err(|err| InputError(format!("--metrics-addr {address}: {err}")))?;
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("grpclab-metrics".to_owned())
            .spawn(move || serve(listener, metrics, stopped))
            .map_err(|err| InputError(format!("cannot start the metrics thread: {err}")))?;
        Ok(MetricsServer {
            address: bound,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Where it listens (the port chosen, for port 0).
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(
    listener: std::net::TcpListener,
    metrics: Arc<LiveMetrics>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    runtime.block_on(async move {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            return;
        };
        loop {
            let accepted = tokio::select! {
                _ = &mut stopped => break,
                accepted = listener.accept() => accepted,
            };
            let Ok((stream, _)) = accepted else {
                continue;
            };
            let metrics = Arc::clone(&metrics);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let metrics = Arc::clone(&metrics);
                    async move { Ok::<_, Infallible>(respond(&request, &metrics)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
}

fn respond(request: &Request<Incoming>, metrics: &Arc<LiveMetrics>) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, content_type: &str, body: String| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        if let Ok(value) = content_type.parse() {
            response
                .headers_mut()
                .insert(hyper::header::CONTENT_TYPE, value);
        }
        response
    };
    match (request.method(), request.uri().path()) {
        (&hyper::Method::GET, "/metrics") => reply(
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.encode(),
        ),
        (&hyper::Method::GET, _) => reply(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "grpclab serves its live metrics at /metrics\n".to_owned(),
        ),
        _ => reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            "GET /metrics\n".to_owned(),
        ),
    }
}
