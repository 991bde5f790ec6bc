//! The webhook server's certificate, reloaded when its files change: a certificate
//! renewed by cert-manager or a rotated Secret volume is picked up without a restart
//! (shell-operator reads it once at start). New TLS handshakes get the new certificate;
//! connections already open keep theirs, so no request fails during the swap. A file
//! that does not parse, or a key that does not match the certificate (a renewal caught
//! half-written), keeps the current certificate and is retried at the next look.

use rustls::crypto::ring::sign::any_supported_type;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
use std::hash::{Hash as _, Hasher as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// Where a server's certificate and key are, and the CA of the clients it accepts.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The certificate chain (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// When set, clients must present a certificate signed by this CA (PEM).
    pub client_ca: Option<PathBuf>,
}

/// Why a certificate could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file holds no usable PEM of the expected kind, or the key is unusable.
    #[error("{path}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

fn invalid(path: &Path, reason: impl std::fmt::Display) -> TlsError {
    TlsError::Invalid {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

fn certificates(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(path, format!("not a PEM certificate: {e}")))?;
    if certs.is_empty() {
        return Err(invalid(path, "holds no certificate"));
    }
    Ok(certs)
}

/// Parses a certificate chain and its key into what rustls serves.
fn certified_key(files: &TlsFiles, cert: &[u8], key: &[u8]) -> Result<CertifiedKey, TlsError> {
    let chain = certificates(&files.cert, cert)?;
    let key = PrivateKeyDer::from_pem_slice(key)
        .map_err(|e| invalid(&files.key, format!("not a PEM private key: {e}")))?;
    let signing = any_supported_type(&key).map_err(|e| invalid(&files.key, e))?;
    let certified = CertifiedKey::new(chain, signing);
    certified.keys_match().map_err(|e| {
        invalid(
            &files.key,
            format!("does not match {}: {e}", files.cert.display()),
        )
    })?;
    Ok(certified)
}

/// A server certificate that follows its files.
#[derive(Debug)]
pub struct ReloadingCert {
    files: TlsFiles,
    current: RwLock<Arc<CertifiedKey>>,
    /// A hash of the file contents in use, to notice a change.
    loaded: Mutex<u64>,
}

fn fingerprint(cert: &[u8], key: &[u8]) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    cert.hash(&mut hasher);
    key.hash(&mut hasher);
    hasher.finish()
}

impl ReloadingCert {
    /// Loads the files; fails if they are not a usable certificate and key.
    pub fn load(files: TlsFiles) -> Result<Arc<Self>, TlsError> {
        let cert = read(&files.cert)?;
        let key = read(&files.key)?;
        let certified = certified_key(&files, &cert, &key)?;
        Ok(Arc::new(Self {
            current: RwLock::new(Arc::new(certified)),
            loaded: Mutex::new(fingerprint(&cert, &key)),
            files,
        }))
    }

    /// Reads the files again and swaps the certificate if they changed; `Ok(true)`
    /// when it was swapped.
    pub(crate) fn reload(&self) -> Result<bool, TlsError> {
        let cert = read(&self.files.cert)?;
        let key = read(&self.files.key)?;
        let print = fingerprint(&cert, &key);
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        if *loaded == print {
            return Ok(false);
        }
        let certified = certified_key(&self.files, &cert, &key)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(certified);
        *loaded = print;
        Ok(true)
    }

    /// Looks at the files every `interval` until the returned task is aborted.
    pub(crate) fn watch(self: &Arc<Self>, interval: Duration) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut failing = false;
            loop {
                tokio::time::sleep(interval).await;
                match this.reload() {
                    Ok(true) => {
                        failing = false;
                        tracing::info!(cert = %this.files.cert.display(), "webhook certificate reloaded");
                    }
                    Ok(false) => failing = false,
                    // Logged once per failing stretch, not at every look.
                    Err(e) if !failing => {
                        failing = true;
                        tracing::error!(error = %e, "cannot reload the webhook certificate; still serving the previous one");
                    }
                    Err(_) => {}
                }
            }
        })
    }

    /// The TLS configuration of a server using this certificate (HTTP/1.1; client
    /// certificates required when the files name a client CA).
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<ServerConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)
            .map_err(|e| invalid(&self.files.cert, e))?;
        let builder = match &self.files.client_ca {
            None => builder.with_no_client_auth(),
            Some(path) => {
                let mut roots = RootCertStore::empty();
                for cert in certificates(path, &read(path)?)? {
                    roots.add(cert).map_err(|e| invalid(path, e))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .build()
                        .map_err(|e| invalid(path, e))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }
}
