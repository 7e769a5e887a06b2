//! TLS settings shared by grpclab's clients and servers: PEM files in, rustls configurations
//! out (ring as the crypto provider, ALPN `h2` as gRPC requires), and self-signed pairs for
//! runs that need TLS but were given no certificate.
//!
//! Every failure here is a [`TlsError`] whose text names the flag and the file at fault and
//! says what to do, so the CLI can print it as one line.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The ALPN protocol id of HTTP/2 over TLS (RFC 9113 §3.2), the only one gRPC speaks.
pub const ALPN_H2: &[u8] = b"h2";

/// A TLS setting that cannot be used, with what to do about it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TlsError(String);

impl TlsError {
    fn new(message: impl Into<String>) -> TlsError {
        TlsError(message.into())
    }
}

/// How a client verifies the server and proves who it is (ghz's `--cacert`, `--cert`,
/// `--key`, `--cname`, `--skipTLS`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTls {
    /// Trust these roots (PEM) instead of the system's.
    pub ca_cert: Option<PathBuf>,
    /// The client certificate chain for mutual TLS (PEM); needs `key`.
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub key: Option<PathBuf>,
    /// The name sent as SNI and verified in the server's certificate, instead of the
    /// target's host.
    pub server_name: Option<String>,
    /// Accept any server certificate (no verification at all).
    pub skip_verify: bool,
}

impl ClientTls {
    /// The rustls client configuration these settings describe.
    pub fn config(&self) -> Result<Arc<ClientConfig>, TlsError> {
        self.config_noting(None)
    }

    /// [`ClientTls::config`]; without a client certificate, `requested` (when given) is set
    /// once a server asks for one — so a server that then hangs up can be told apart from
    /// one that went away (BoringSSL-based servers close the connection after a TLS 1.3
    /// handshake without an alert).
    pub fn config_noting(
        &self,
        requested: Option<Arc<AtomicBool>>,
    ) -> Result<Arc<ClientConfig>, TlsError> {
        let provider = provider();
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::new(format!("TLS setup failed: {e}")))?;
        let builder = if self.skip_verify {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
        } else {
            builder.with_root_certificates(self.roots()?)
        };
        let mut config = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => builder
                .with_client_auth_cert(read_certs("--cert", cert)?, read_key("--key", key)?)
                .map_err(|e| {
                    TlsError::new(format!(
                        "--cert {} / --key {}: the key does not fit the certificate or cannot be used ({e})",
                        cert.display(),
                        key.display()
                    ))
                })?,
            (Some(_), None) => {
                return Err(TlsError::new(
                    "--cert needs --key: give the client certificate's private key (PEM) too",
                ))
            }
            (None, Some(_)) => {
                return Err(TlsError::new(
                    "--key needs --cert: give the client certificate (PEM) too",
                ))
            }
            (None, None) => match requested {
                Some(requested) => {
                    builder.with_client_cert_resolver(Arc::new(NoteCertificateRequest(requested)))
                }
                None => builder.with_no_client_auth(),
            },
        };
        config.alpn_protocols = vec![ALPN_H2.to_vec()];
        Ok(Arc::new(config))
    }

    /// The name to send as SNI and to verify: `--cname` when given, else the target's host.
    pub fn server_name(&self, host: &str) -> Result<ServerName<'static>, TlsError> {
        let name = self.server_name.as_deref().unwrap_or(host);
        let name = name.trim_start_matches('[').trim_end_matches(']');
        ServerName::try_from(name.to_owned()).map_err(|_| {
            TlsError::new(format!(
                "'{name}' is not a valid TLS server name; give the name in the server's certificate with --cname"
            ))
        })
    }

    fn roots(&self) -> Result<RootCertStore, TlsError> {
        root_store("--cacert", self.ca_cert.as_deref())
    }
}

/// What a client needs to open TLS connections: the configuration and the name to ask for
/// (SNI) and verify.
#[derive(Debug, Clone)]
pub struct TlsClient {
    /// The rustls configuration (roots, client certificate, ALPN h2).
    pub config: Arc<ClientConfig>,
    /// The server name sent and verified.
    pub server_name: ServerName<'static>,
    /// Set once a server asked for a client certificate we did not have (never set when
    /// `--cert` is given).
    pub certificate_requested: Arc<AtomicBool>,
}

impl TlsClient {
    /// The client for `settings`, connecting to `host` (the target's host, used as the
    /// server name unless `--cname` says otherwise).
    pub fn new(settings: &ClientTls, host: &str) -> Result<TlsClient, TlsError> {
        let certificate_requested = Arc::new(AtomicBool::new(false));
        Ok(TlsClient {
            config: settings.config_noting(Some(Arc::clone(&certificate_requested)))?,
            server_name: settings.server_name(host)?,
            certificate_requested,
        })
    }

    /// The client for `settings`, connecting to `target` as the user typed it (`HOST:PORT`):
    /// its host is the server name unless `--cname` says otherwise.
    pub fn for_target(settings: &ClientTls, target: &str) -> Result<TlsClient, TlsError> {
        let host = target.rsplit_once(':').map_or(target, |(host, _)| host);
        TlsClient::new(settings, host)
    }
}

/// A client without a certificate that notes whether a server asked for one.
#[derive(Debug)]
struct NoteCertificateRequest(Arc<AtomicBool>);

impl rustls::client::ResolvesClientCert for NoteCertificateRequest {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        self.0.store(true, Ordering::Relaxed);
        // None: the handshake goes on without client authentication, as with no resolver.
        None
    }

    fn has_certs(&self) -> bool {
        false
    }
}

/// A server's certificate, key and (for mutual TLS) the CA its clients must be signed by
/// (`grpclab serve --tls-cert --tls-key --tls-client-ca`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTls {
    /// The certificate chain (PEM), leaf first.
    pub cert: PathBuf,
    /// The private key (PEM).
    pub key: PathBuf,
    /// Require client certificates signed by these roots (PEM).
    pub client_ca: Option<PathBuf>,
}

impl ServerTls {
    /// The rustls server configuration these settings describe, offering ALPN `h2` only.
    pub fn config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let provider = provider();
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::new(format!("TLS setup failed: {e}")))?;
        let builder = match &self.client_ca {
            Some(path) => {
                let mut roots = RootCertStore::empty();
                for cert in read_certs("--tls-client-ca", path)? {
                    roots.add(cert).map_err(|e| {
                        TlsError::new(format!(
                            "--tls-client-ca {}: a certificate in it cannot be used as a root ({e})",
                            path.display()
                        ))
                    })?;
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .map_err(|e| TlsError::new(format!("--tls-client-ca {}: {e}", path.display())))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(
                read_certs("--tls-cert", &self.cert)?,
                read_key("--tls-key", &self.key)?,
            )
            .map_err(|e| {
                TlsError::new(format!(
                    "--tls-cert {} / --tls-key {}: the key does not fit the certificate or cannot be used ({e})",
                    self.cert.display(),
                    self.key.display()
                ))
            })?;
        config.alpn_protocols = vec![ALPN_H2.to_vec()];
        Ok(Arc::new(config))
    }
}

/// The roots a server certificate is checked against: the PEM file `path` (named `flag` in
/// errors), else the system's.
pub fn root_store(flag: &str, path: Option<&Path>) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    match path {
        Some(path) => {
            for cert in read_certs(flag, path)? {
                roots.add(cert).map_err(|e| {
                    TlsError::new(format!(
                        "{flag} {}: a certificate in it cannot be used as a root ({e})",
                        path.display()
                    ))
                })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _ignored) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                let otherwise = if flag == "--cacert" {
                    ", or --skipTLS to skip verification, or --insecure for plaintext"
                } else {
                    ""
                };
                return Err(TlsError::new(format!(
                    "TLS needs root certificates and the system has none (install Debian's ca-certificates); \
                     or give the server's CA with {flag} FILE{otherwise}"
                )));
            }
        }
    }
    Ok(roots)
}

/// A verifier that accepts any server certificate but still checks the handshake's
/// signatures (the peer holds the key of the certificate it showed): TLS that encrypts
/// without verifying, as `--skipTLS` and libpq's `sslmode=require` ask.
pub fn accept_any_certificate() -> Arc<dyn ServerCertVerifier> {
    Arc::new(NoVerification(provider()))
}

/// The crypto provider every grpclab TLS configuration uses (ring).
pub fn crypto_provider() -> Arc<CryptoProvider> {
    provider()
}

/// A self-signed certificate and its key, in PEM.
#[derive(Debug, Clone)]
pub struct SelfSigned {
    /// The certificate (also the root a client trusts).
    pub cert_pem: String,
    /// Its private key.
    pub key_pem: String,
}

impl SelfSigned {
    /// A new self-signed certificate valid for `localhost`, `127.0.0.1` and `::1`.
    pub fn for_loopback() -> Result<SelfSigned, TlsError> {
        let names = vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ];
        let certified = rcgen::generate_simple_self_signed(names).map_err(|e| {
            TlsError::new(format!("generating a self-signed certificate failed: {e}"))
        })?;
        Ok(SelfSigned {
            cert_pem: certified.cert.pem(),
            key_pem: certified.signing_key.serialize_pem(),
        })
    }

    /// Writes `cert.pem` and `key.pem` into `dir` and returns the server settings using them.
    pub fn write_to(&self, dir: &Path) -> Result<ServerTls, TlsError> {
        let cert = dir.join("cert.pem");
        let key = dir.join("key.pem");
        for (path, text) in [(&cert, &self.cert_pem), (&key, &self.key_pem)] {
            std::fs::write(path, text)
                .map_err(|e| TlsError::new(format!("cannot write {}: {e}", path.display())))?;
        }
        Ok(ServerTls {
            cert,
            key,
            client_ca: None,
        })
    }
}

/// Whether `bytes` (the first bytes a peer sent) look like a TLS record — a handshake or an
/// alert, TLS 1.0 to 1.3 record versions — rather than HTTP/2: how a plaintext peer learns
/// that the other side speaks TLS.
pub fn looks_like_tls(bytes: &[u8]) -> bool {
    matches!(bytes, [0x15 | 0x16, 0x03, 0x00..=0x04, ..])
}

/// The one crypto provider grpclab uses (ring), chosen explicitly so that no process-wide
/// default has to be installed.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_certs(flag: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let text = read_file(flag, path)?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            TlsError::new(format!(
                "{flag} {}: not a readable PEM certificate file ({e})",
                path.display()
            ))
        })?;
    if certs.is_empty() {
        return Err(TlsError::new(format!(
            "{flag} {}: no certificate in it (expected a PEM block '-----BEGIN CERTIFICATE-----')",
            path.display()
        )));
    }
    Ok(certs)
}

fn read_key(flag: &str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let text = read_file(flag, path)?;
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| {
        TlsError::new(format!(
            "{flag} {}: no usable private key in it (expected a PEM block '-----BEGIN PRIVATE KEY-----', RSA or EC; {e})",
            path.display()
        ))
    })
}

fn read_file(flag: &str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path)
        .map_err(|e| TlsError::new(format!("{flag} {}: cannot read it: {e}", path.display())))
}

/// `--skipTLS`: accepts any certificate, but still checks the handshake's signatures (the
/// peer must hold the key of the certificate it showed), so the session is encrypted to
/// whoever answered.
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Says in one line why a TLS handshake failed (the I/O error tokio-rustls returned), and what
/// to do about it.
pub fn explain_handshake_error(error: &std::io::Error) -> String {
    if let Some(tls) = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        return explain_tls_error(tls);
    }
    match error.kind() {
        std::io::ErrorKind::UnexpectedEof
        | std::io::ErrorKind::ConnectionReset
        | std::io::ErrorKind::BrokenPipe => format!(
            "the server closed the connection during the TLS handshake ({error}): if it speaks plaintext HTTP/2, use --insecure; if it requires a client certificate, give --cert and --key"
        ),
        _ => format!("TLS handshake failed: {error}"),
    }
}

/// [`explain_tls_error`] for a client that may have had no certificate to give:
/// `sent_none` (the server asked for one and we had none) turns a refusal of "our
/// certificate" into what it is — the server requires one (grpc-go's crypto/tls answers an
/// empty certificate with `bad_certificate`, others with `certificate_required` or
/// `handshake_failure`).
pub fn explain_client_tls_error(error: &rustls::Error, sent_none: bool) -> String {
    use rustls::{AlertDescription, Error};
    match error {
        Error::AlertReceived(
            AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateRequired
            | AlertDescription::HandshakeFailure
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateUnknown
            | AlertDescription::AccessDenied,
        ) if sent_none => format!(
            "the server requires a client certificate and we had none to give ({error}): give one with --cert and --key (mutual TLS)"
        ),
        _ => explain_tls_error(error),
    }
}

/// Says in one line why a TLS handshake or session failed, and what to do about it.
pub fn explain_tls_error(error: &rustls::Error) -> String {
    use rustls::{AlertDescription, CertificateError, Error};
    match error {
        Error::InvalidCertificate(CertificateError::NotValidForName)
        | Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. }) => {
            "the server's certificate is not valid for the name we asked for: give the name it holds with --cname NAME (or --skipTLS to skip verification)".to_owned()
        }
        Error::InvalidCertificate(CertificateError::Expired)
        | Error::InvalidCertificate(CertificateError::ExpiredContext { .. }) => {
            "the server's certificate has expired: renew it on the server (or --skipTLS to skip verification)".to_owned()
        }
        Error::InvalidCertificate(CertificateError::NotValidYet)
        | Error::InvalidCertificate(CertificateError::NotValidYetContext { .. }) => {
            "the server's certificate is not valid yet (check both clocks), or --skipTLS to skip verification".to_owned()
        }
        Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
            "the server's certificate is signed by a CA we do not trust: give that CA with --cacert FILE (or --skipTLS to skip verification)".to_owned()
        }
        Error::InvalidCertificate(CertificateError::Other(other))
            if format!("{other:?}").contains("CaUsedAsEndEntity") =>
        {
            "the server's certificate is a CA certificate (basicConstraints CA:TRUE, as `openssl req -x509` makes by default) used as the server's own, which TLS verifiers refuse: issue the server a leaf certificate signed by that CA (or --skipTLS to skip verification)".to_owned()
        }
        Error::InvalidCertificate(other) => {
            format!("the server's certificate was refused ({other:?}): check --cacert and --cname, or --skipTLS to skip verification")
        }
        Error::AlertReceived(AlertDescription::CertificateRequired)
        | Error::AlertReceived(AlertDescription::HandshakeFailure) => {
            format!("the server refused the handshake ({error}): if it requires a client certificate, give one with --cert and --key")
        }
        Error::AlertReceived(AlertDescription::BadCertificate)
        | Error::AlertReceived(AlertDescription::UnknownCA) => {
            format!("the server refused our client certificate (--cert; {error}): it must be signed by a CA the server trusts")
        }
        Error::AlertReceived(AlertDescription::UnsupportedCertificate)
        | Error::AlertReceived(AlertDescription::CertificateUnknown)
        | Error::AlertReceived(AlertDescription::CertificateExpired)
        | Error::AlertReceived(AlertDescription::CertificateRevoked) => {
            format!("the server refused our client certificate (--cert; {error}): it must be a client certificate (extendedKeyUsage clientAuth; a server's certificate is refused), valid now, signed by a CA the server trusts")
        }
        Error::InvalidMessage(_) | Error::InappropriateMessage { .. } => {
            "the server did not answer in TLS: it speaks plaintext HTTP/2 (h2c); use --insecure".to_owned()
        }
        Error::NoApplicationProtocol => {
            "the server does not offer HTTP/2 over TLS (ALPN h2), which gRPC requires".to_owned()
        }
        Error::AlertReceived(AlertDescription::NoApplicationProtocol) => {
            format!("the server speaks none of the application protocols offered over TLS ({error}; ALPN: load offers h2, or http/1.1 alone with --http1): leave out --http1 for a server that serves HTTP/2 only")
        }
        other => format!("TLS failed: {other}"),
    }
}
