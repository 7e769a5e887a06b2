//! tonic channels for grpclab's own side calls (the admin RPCs, server reflection), plaintext
//! or over TLS with the same rustls settings as the load itself (`--cacert`, `--cname`,
//! `--skipTLS`, client certificates), which tonic's own TLS options cannot all express.

use grpclab_core::tls::TlsClient;
use std::net::SocketAddr;
use std::time::Duration;

/// A channel to `target`, opened within `connect_timeout`; over TLS when `tls` is given. The
/// error says in one line what failed.
pub async fn connect(
    target: SocketAddr,
    connect_timeout: Duration,
    tls: Option<&TlsClient>,
) -> Result<tonic::transport::Channel, String> {
    // The scheme only names the `:scheme` pseudo-header here: the connector below decides
    // whether the bytes are encrypted.
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{target}"))
        .map_err(|err| format!("'{target}' is not HOST:PORT: {err}"))?
        .connect_timeout(connect_timeout);
    let Some(tls) = tls else {
        return endpoint.connect().await.map_err(|err| {
            format!(
                "cannot connect to {target}: {}",
                describe_transport_error(&err)
            )
        });
    };
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::clone(&tls.config));
    let server_name = tls.server_name.clone();
    let connect = tower::service_fn(move |_: tonic::codegen::http::Uri| {
        let connector = connector.clone();
        let server_name = server_name.clone();
        async move {
            let tcp = tokio::net::TcpStream::connect(target).await?;
            let _ = tcp.set_nodelay(true);
            let stream = connector.connect(server_name, tcp).await.map_err(|err| {
                std::io::Error::other(grpclab_core::tls::explain_handshake_error(&err))
            })?;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
        }
    });
    endpoint
        .connect_with_connector(connect)
        .await
        .map_err(|err| {
            format!(
                "cannot connect to {target}: {}",
                describe_transport_error(&err)
            )
        })
}

/// tonic's transport errors say "transport error" on top; the causes below are what helps
/// (each said once: hyper's layers repeat one another).
fn describe_transport_error(err: &tonic::transport::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts
            .iter()
            .any(|part| part.contains(&text) || text.contains(part.as_str()))
        {
            parts.push(text);
        } else if let Some(last) = parts.last_mut() {
            // Keep the more specific of two wordings of one cause.
            if text.len() > last.len() && text.contains(last.as_str()) {
                *last = text;
            }
        }
        source = cause.source();
    }
    if parts.is_empty() {
        err.to_string()
    } else {
        parts.join(": ")
    }
}
