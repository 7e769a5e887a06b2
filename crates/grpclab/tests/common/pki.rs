//! Certificates made in the test (rcgen): a CA, leaves it signs (for `localhost` and
//! 127.0.0.1), an expired leaf, a second CA nobody trusts. Written as PEM into a folder.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use std::path::{Path, PathBuf};

/// A CA able to sign leaves, with its certificate written to `ca.pem`.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    pub cert: PathBuf,
}

/// A certificate and key written as PEM files.
pub struct Pair {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// What `openssl req -x509 -subj /CN=localhost -addext subjectAltName=...` makes: a
/// self-signed certificate for `localhost` and 127.0.0.1 that is also a CA (basicConstraints
/// CA:TRUE), and its key — the certificate ghz accepts as both `--cacert` and the server's.
#[allow(dead_code)]
pub fn self_signed_ca_server(dir: &Path) -> Pair {
    let mut params =
        CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let pair = Pair {
        cert: dir.join("self-signed.pem"),
        key: dir.join("self-signed.key"),
    };
    std::fs::write(&pair.cert, cert.pem()).unwrap();
    std::fs::write(&pair.key, key.serialize_pem()).unwrap();
    pair
}

impl TestCa {
    pub fn new(dir: &Path, name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("grpclab test CA {name}"));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let cert = dir.join(format!("{name}-ca.pem"));
        std::fs::write(&cert, issuer.pem()).unwrap();
        TestCa { issuer, cert }
    }

    /// A leaf for `localhost` and 127.0.0.1, valid now (or expired since 2020 when `expired`).
    pub fn leaf(&self, dir: &Path, name: &str, expired: bool) -> Pair {
        self.leaf_for(dir, name, expired, &[])
    }

    /// A server's leaf: its extended key usage is serverAuth only, so it cannot serve as a
    /// client certificate.
    #[allow(dead_code)]
    pub fn server_only_leaf(&self, dir: &Path, name: &str) -> Pair {
        self.leaf_for(
            dir,
            name,
            false,
            &[rcgen::ExtendedKeyUsagePurpose::ServerAuth],
        )
    }

    fn leaf_for(
        &self,
        dir: &Path,
        name: &str,
        expired: bool,
        usages: &[rcgen::ExtendedKeyUsagePurpose],
    ) -> Pair {
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, name.to_owned());
        params.extended_key_usages = usages.to_vec();
        if expired {
            params.not_before = rcgen::date_time_ymd(2019, 1, 1);
            params.not_after = rcgen::date_time_ymd(2020, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let pair = Pair {
            cert: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}.key")),
        };
        std::fs::write(&pair.cert, cert.pem()).unwrap();
        std::fs::write(&pair.key, key.serialize_pem()).unwrap();
        pair
    }
}
