//! A throwaway PKI for tests and benchmarks of TLS servers: a CA, server certificates
//! for 127.0.0.1 it signs (written as files, renewable in place), and a client that
//! trusts it.

use std::path::PathBuf;
use std::sync::Arc;

/// A CA and a directory for the server certificate it issues.
pub struct TestPki {
    ca: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
    dir: tempfile::TempDir,
}

/// Where the issued certificate and key are.
pub struct Issued {
    /// `tls.crt` (PEM).
    pub cert: PathBuf,
    /// `tls.key` (PEM).
    pub key: PathBuf,
}

impl TestPki {
    /// A fresh CA.
    ///
    /// # Panics
    ///
    /// If a key or the temporary directory cannot be made.
    pub fn new() -> Self {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "operon test CA");
        let ca = rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap())
            .unwrap();
        Self {
            ca,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// Writes a fresh server certificate for 127.0.0.1 (serial `serial`) and its key,
    /// replacing earlier ones the way a Secret volume does: written aside, then renamed
    /// over the files.
    ///
    /// # Panics
    ///
    /// If the files cannot be written.
    pub fn issue(&self, serial: u64) -> Issued {
        let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        params.serial_number = Some(rcgen::SerialNumber::from(serial));
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        let issued = Issued {
            cert: self.dir.path().join("tls.crt"),
            key: self.dir.path().join("tls.key"),
        };
        std::fs::write(self.dir.path().join("tls.crt.new"), cert.pem()).unwrap();
        std::fs::write(self.dir.path().join("tls.key.new"), key.serialize_pem()).unwrap();
        std::fs::rename(self.dir.path().join("tls.key.new"), &issued.key).unwrap();
        std::fs::rename(self.dir.path().join("tls.crt.new"), &issued.cert).unwrap();
        issued
    }

    /// A TLS client that trusts this CA.
    ///
    /// # Panics
    ///
    /// If rustls refuses the CA certificate.
    pub fn connector(&self) -> tokio_rustls::TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        tokio_rustls::TlsConnector::from(Arc::new(config))
    }
}

impl Default for TestPki {
    fn default() -> Self {
        Self::new()
    }
}

/// A CA's PEM, and a TLS server configuration for 127.0.0.1 signed by it, for tests
/// whose server runs in process (module fetches, the module API).
///
/// # Panics
///
/// If a key cannot be made.
pub fn ca_and_server() -> (String, Arc<rustls::ServerConfig>) {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca =
        rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap()).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        )
        .unwrap();
    (ca.pem(), Arc::new(config))
}
