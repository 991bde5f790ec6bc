//! The local API's TLS: a CA made at start, a serving certificate for 127.0.0.1 and
//! `localhost` signed by it, the kubeconfig (with the CA and the token) a client uses,
//! and the accept loop.

use super::LocalApiError;
use axum::Router;
use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType,
};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The kubeconfig's file name in the API's directory.
pub(super) const KUBECONFIG: &str = "kubeconfig";

/// A fresh CA and the serving certificate it signed.
pub(super) struct Material {
    pub(super) ca_pem: String,
    cert_der: CertificateDer<'static>,
    key_der: Vec<u8>,
}

impl Material {
    pub(super) fn new() -> Result<Self, LocalApiError> {
        let make = || -> Result<Material, rcgen::Error> {
            let ca_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
            let mut ca = CertificateParams::default();
            ca.distinguished_name
                .push(DnType::CommonName, "operon-local-api-ca");
            ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
            ca.key_usages = vec![
                KeyUsagePurpose::KeyCertSign,
                KeyUsagePurpose::CrlSign,
                KeyUsagePurpose::DigitalSignature,
            ];
            let ca_pem = ca.self_signed(&ca_key)?.pem();
            let issuer = Issuer::new(ca, ca_key);
            let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
            let mut leaf = CertificateParams::new(vec!["localhost".to_owned()])?;
            leaf.subject_alt_names
                .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
            leaf.distinguished_name
                .push(DnType::CommonName, "operon-local-api");
            leaf.is_ca = IsCa::ExplicitNoCa;
            leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
            let cert = leaf.signed_by(&key, &issuer)?;
            Ok(Material {
                ca_pem,
                cert_der: cert.der().clone(),
                key_der: key.serialize_der(),
            })
        };
        make().map_err(LocalApiError::Certificate)
    }

    pub(super) fn server_config(&self) -> Result<Arc<ServerConfig>, LocalApiError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(LocalApiError::Tls)?
            .with_no_client_auth()
            .with_single_cert(
                vec![self.cert_der.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone())),
            )
            .map_err(LocalApiError::Tls)?;
        Ok(Arc::new(config))
    }
}

/// Writes `kubeconfig`, `token` and `ca.crt` into `dir` (the last two as a pod's
/// ServiceAccount directory holds them, for clients that read files).
pub(super) fn write_kubeconfig(
    dir: &Path,
    address: SocketAddr,
    token: &str,
    ca_pem: &str,
) -> Result<(), LocalApiError> {
    let ca_data = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: operon-local\n  cluster:\n    \
         server: https://{address}\n    certificate-authority-data: {ca_data}\n\
         users:\n- name: operon-hook\n  user:\n    token: {token}\n\
         contexts:\n- name: operon-local\n  context:\n    cluster: operon-local\n    \
         user: operon-hook\n    namespace: default\ncurrent-context: operon-local\n"
    );
    for (name, text) in [
        (KUBECONFIG, kubeconfig.as_str()),
        ("token", token),
        ("ca.crt", ca_pem),
        ("namespace", "default"),
    ] {
        std::fs::write(dir.join(name), text).map_err(|source| LocalApiError::Kubeconfig {
            dir: dir.to_owned(),
            source,
        })?;
    }
    Ok(())
}

/// Accepts TLS connections and serves `router` on each until the task is aborted.
pub(super) async fn serve(
    listener: tokio::net::TcpListener,
    config: Arc<ServerConfig>,
    router: Router,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors, say: try again shortly rather than spin.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let acceptor = acceptor.clone();
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let Ok(Ok(tls)) =
                tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await
            else {
                return;
            };
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(tls), service);
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "local API connection ended with an error");
            }
        });
    }
}
