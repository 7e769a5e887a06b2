//! Dialing a target, for both transports: TCP with TCP_NODELAY, then TLS when configured,
//! each error one line that says what to check; and the reconnection backoff both use.

use grpclab_core::tls::TlsClient;
use std::time::Duration;
use tokio::net::TcpStream;

/// "Too many open files" (Linux's EMFILE): the process is at its descriptor limit, which no
/// server can be blamed for.
const EMFILE: i32 = 24;

/// First pause after a failed reconnection attempt; doubles up to [`MAX_BACKOFF`].
pub(crate) const INITIAL_BACKOFF: Duration = Duration::from_millis(50);
/// Longest pause between reconnection attempts.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// Opens a TCP connection with TCP_NODELAY (both transports use it): without it, Nagle's
/// algorithm holds small frames back, which a latency benchmark must not allow.
pub(crate) async fn connect_tcp(
    target: std::net::SocketAddr,
    timeout: Duration,
) -> Result<TcpStream, String> {
    let tcp = tokio::time::timeout(timeout, TcpStream::connect(target))
        .await
        .map_err(|_| {
            format!("connecting to {target} timed out after {timeout:?} (--connect-timeout); is the server running and listening there?")
        })?
        .map_err(|err| {
            if err.raw_os_error() == Some(EMFILE) {
                format!("cannot open a socket to {target}: this process holds all the descriptors it may (RLIMIT_NOFILE); use fewer --connections or raise the limit (ulimit -n)")
            } else {
                format!("cannot connect to {target}: {err}; is the server running and listening there?")
            }
        })?;
    tcp.set_nodelay(true)
        .map_err(|err| format!("cannot set TCP_NODELAY on {target}: {err}"))?;
    Ok(tcp)
}

/// Where a connection goes, for the debug log: the unix socket when the run has one, else
/// `target`.
pub(crate) fn peer_name(
    config: &crate::config::LoadConfig,
    target: std::net::SocketAddr,
) -> String {
    match &config.unix {
        Some(path) => format!("unix:{}", path.display()),
        None => target.to_string(),
    }
}

/// Opens a connection to a unix socket (no TCP_NODELAY there: a unix socket has no Nagle).
pub(crate) async fn connect_unix(
    path: &std::path::Path,
    timeout: Duration,
) -> Result<tokio::net::UnixStream, String> {
    let shown = path.display();
    tokio::time::timeout(timeout, tokio::net::UnixStream::connect(path))
        .await
        .map_err(|_| {
            format!("connecting to unix:{shown} timed out after {timeout:?} (--connect-timeout); is the server listening there?")
        })?
        .map_err(|err| format!("cannot connect to unix:{shown}: {err}; is the server running and listening on that socket?"))
}

/// Runs the client side of a TLS handshake on `tcp` (within `timeout`); the error says in one
/// line what went wrong and which flag fixes it.
pub(crate) async fn tls_handshake(
    tcp: TcpStream,
    tls: &TlsClient,
    timeout: Duration,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
    let target = tcp
        .peer_addr()
        .map_or_else(|_| "the server".to_owned(), |addr| addr.to_string());
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::clone(&tls.config));
    let mut stream = tokio::time::timeout(timeout, connector.connect(tls.server_name.clone(), tcp))
        .await
        .map_err(|_| {
            format!(
                "the TLS handshake with {target} timed out after {timeout:?} (--connect-timeout): \
                 does the server speak TLS on that port? (--insecure for plaintext)"
            )
        })?
        .map_err(|err| {
            format!(
                "{target}: {}",
                grpclab_core::tls::explain_handshake_error(&err)
            )
        })?;
    let (tcp, session) = stream.get_mut();
    let verdict = grpclab_h2::await_tls13_verdict(tcp, session, timeout.min(CLIENT_VERDICT_WAIT))
        .await
        .map_err(|err| {
            let sent_none = tls
                .certificate_requested
                .load(std::sync::atomic::Ordering::Relaxed);
            format!(
                "{target}: {}",
                grpclab_core::tls::explain_client_tls_error(&err, sent_none)
            )
        })?;
    // BoringSSL-based servers (grpcio, grpc-go's peers in C) that require a certificate we
    // did not give hang up after the handshake without an alert: say why.
    if verdict == grpclab_h2::Tls13Verdict::Closed
        && tls
            .certificate_requested
            .load(std::sync::atomic::Ordering::Relaxed)
    {
        return Err(format!(
            "{target}: the server asked for a client certificate and closed the connection when none was given: give one with --cert and --key (mutual TLS)"
        ));
    }
    let (_, session) = stream.get_ref();
    if let Some(protocol) = session.alpn_protocol() {
        // The one protocol offered: h2, or http/1.1 for `--http1`.
        let offered = tls.config.alpn_protocols.first().map(Vec::as_slice);
        if Some(protocol) != offered {
            let wanted = match offered {
                Some(grpclab_core::tls::ALPN_H2) | None => "HTTP/2 (ALPN h2) as gRPC requires",
                Some(_) => "HTTP/1.1 (ALPN http/1.1) as --http1 asks",
            };
            return Err(format!(
                "{target} chose the application protocol '{}' over TLS, not {wanted}",
                String::from_utf8_lossy(protocol)
            ));
        }
    }
    Ok(stream)
}

/// How long a TLS 1.3 client waits after its handshake for the server's first record.
const CLIENT_VERDICT_WAIT: Duration = Duration::from_secs(1);
