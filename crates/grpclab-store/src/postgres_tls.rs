//! TLS to a PostgreSQL store, as libpq's `sslmode` asks: `disable` (plaintext), `prefer` (TLS
//! when the server offers it), `require` (TLS or nothing; the certificate not verified, as
//! libpq does without a root file), `verify-full` (the certificate checked against
//! `sslrootcert` or the system's roots, and the host name against it). rustls through
//! tokio-postgres-rustls.

use grpclab_core::tls;
use rustls::ClientConfig;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::location::{PostgresTarget, SslMode};

/// The connector for `target`'s `sslmode`.
pub fn connector(target: &PostgresTarget) -> Result<MakeRustlsConnect, String> {
    let builder = ClientConfig::builder_with_provider(tls::crypto_provider())
        .with_safe_default_protocol_versions()
        .map_err(|err| format!("TLS setup failed: {err}"))?;
    let config = match target.ssl_mode {
        SslMode::VerifyFull => {
            let roots = tls::root_store("sslrootcert", target.root_cert.as_deref())
                .map_err(|err| err.to_string())?;
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        // Plaintext never reaches the connector (the driver is told `disable`); `prefer`
        // and `require` encrypt without verifying, as libpq does without a root file.
        SslMode::Disable | SslMode::Prefer | SslMode::Require => builder
            .dangerous()
            .with_custom_certificate_verifier(tls::accept_any_certificate())
            .with_no_client_auth(),
    };
    Ok(MakeRustlsConnect::new(config))
}

/// The driver's connection error in one line, with what to do when it is about TLS.
pub fn explain(target: &PostgresTarget, err: &postgres::Error) -> String {
    let message = postgres_message(err);
    let lower = message.to_ascii_lowercase();
    let hint = if lower.contains("server does not support tls") {
        Some("the server does not offer TLS: use sslmode=prefer or disable, or turn ssl on in postgresql.conf")
    } else if lower.contains("pg_hba.conf") && lower.contains("no encryption") {
        Some("the server accepts this user only over TLS: use sslmode=require or verify-full (the default, prefer, uses TLS when the server offers it)")
    } else if target.ssl_mode == SslMode::VerifyFull
        && (lower.contains("unknownissuer") || lower.contains("unknown issuer"))
    {
        Some("the server's certificate is not signed by a trusted root: give its CA with sslrootcert=FILE")
    } else if target.ssl_mode == SslMode::VerifyFull && lower.contains("notvalidforname") {
        Some(
            "the server's certificate does not name the host connected to: connect by a name in it",
        )
    } else {
        None
    };
    match hint {
        Some(hint) => format!("{message}; {hint}"),
        None => message,
    }
}

/// The server's own words when it gave some (`password authentication failed ...`), else
/// the driver's.
pub(super) fn postgres_message(err: &postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => {
            let mut message = err.to_string();
            let mut source = std::error::Error::source(err);
            while let Some(cause) = source {
                message.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            message
        }
    }
}
