//! Fetching a module's bytes by digest from a replica of `operon serve` that holds
//! them (`GET <url>/v1/modules/by-digest/<hex>`, over HTTPS, with this process's
//! bearer token), and keeping them only when their sha256 is the digest asked for.

use super::blobs::{BlobError, BlobStore};
use crate::api::ModuleSource;
use crate::sandbox::ModuleDigest;
use http_body_util::{BodyExt as _, Empty, Limited};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How long one fetch may take, connection and body included.
const FETCH_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The source's URL is not `https://HOST:PORT`.
    #[error("module source {url:?} is not an https://HOST[:PORT] URL")]
    BadUrl {
        /// The URL.
        url: String,
    },
    /// The bearer token could not be read.
    #[error("cannot read the bearer token {}: {source}", path.display())]
    Token {
        /// The token file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The CA bundle could not be read or holds no certificate.
    #[error("cannot use the CA bundle {}: {reason}", path.display())]
    Ca {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Connecting, the TLS handshake or the request failed.
    #[error("fetching {digest} from {url}: {reason}")]
    Transport {
        /// The source.
        url: String,
        /// The digest.
        digest: ModuleDigest,
        /// What failed.
        reason: String,
    },
    /// The source answered with an error.
    #[error("fetching {digest} from {url}: HTTP {status}: {body}")]
    Status {
        /// The source.
        url: String,
        /// The digest.
        digest: ModuleDigest,
        /// The HTTP status.
        status: u16,
        /// The start of its answer.
        body: String,
    },
    /// The bytes were refused (wrong digest, too large) or could not be kept.
    #[error("module {digest} from {url}: {source}")]
    Store {
        /// The source.
        url: String,
        /// The digest.
        digest: ModuleDigest,
        /// Why.
        #[source]
        source: Box<BlobError>,
    },
}

/// Where this process's bearer token comes from.
#[derive(Debug, Clone)]
pub enum Token {
    /// A file read at every fetch (a projected ServiceAccount token is rotated).
    File(PathBuf),
    /// A fixed token.
    Static(String),
}

impl Token {
    /// The token in-cluster processes have.
    pub fn service_account() -> Self {
        Token::File(PathBuf::from(
            "/var/run/secrets/kubernetes.io/serviceaccount/token",
        ))
    }

    fn read(&self) -> Result<String, FetchError> {
        match self {
            Token::Static(token) => Ok(token.clone()),
            Token::File(path) => std::fs::read_to_string(path)
                .map(|t| t.trim().to_owned())
                .map_err(|source| FetchError::Token {
                    path: path.clone(),
                    source,
                }),
        }
    }
}

/// Fetches modules from replicas.
#[derive(Clone)]
pub struct Fetcher {
    tls: Arc<rustls::ClientConfig>,
    token: Token,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl Fetcher {
    /// A fetcher trusting the certificates in `ca_pem` and sending `token`.
    pub fn new(ca_pem: &[u8], ca_path: PathBuf, token: Token) -> Result<Self, FetchError> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            let cert = cert.map_err(|e| FetchError::Ca {
                path: ca_path.clone(),
                reason: e.to_string(),
            })?;
            roots.add(cert).map_err(|e| FetchError::Ca {
                path: ca_path.clone(),
                reason: e.to_string(),
            })?;
        }
        if roots.is_empty() {
            return Err(FetchError::Ca {
                path: ca_path,
                reason: "no PEM certificate in it".to_owned(),
            });
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| FetchError::Ca {
                path: ca_path,
                reason: e.to_string(),
            })?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self {
            tls: Arc::new(tls),
            token,
        })
    }

    /// Fetches `digest` from `source` into `store`, refusing bytes of another digest or
    /// over the store's limit (checked from `Content-Length` and while reading).
    pub async fn fetch(
        &self,
        source: &ModuleSource,
        digest: &ModuleDigest,
        store: &BlobStore,
    ) -> Result<(), FetchError> {
        let url = source.url.trim_end_matches('/').to_owned();
        let transport = |reason: String| FetchError::Transport {
            url: url.clone(),
            digest: *digest,
            reason,
        };
        let (host, port) =
            host_port(&url).ok_or_else(|| FetchError::BadUrl { url: url.clone() })?;
        let name = source.server_name.clone().unwrap_or_else(|| host.clone());
        let server_name = ServerName::try_from(name.clone())
            .map_err(|e| transport(format!("server name {name:?}: {e}")))?;
        let token = self.token.read()?;
        let path = format!("/v1/modules/by-digest/{}", hex::encode(digest.as_bytes()));
        let limit = store.max_bytes() as usize;
        let connector = tokio_rustls::TlsConnector::from(self.tls.clone());
        let exchange = async {
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
                .await
                .map_err(|e| transport(format!("connecting: {e}")))?;
            let tls = connector
                .connect(server_name, tcp)
                .await
                .map_err(|e| transport(format!("TLS: {e}")))?;
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                    .await
                    .map_err(|e| transport(format!("HTTP: {e}")))?;
            tokio::spawn(connection);
            let request = http::Request::get(&path)
                .header(http::header::HOST, format!("{name}:{port}"))
                .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
                .body(Empty::<bytes::Bytes>::new())
                .map_err(|e| transport(e.to_string()))?;
            let response = sender
                .send_request(request)
                .await
                .map_err(|e| transport(format!("HTTP: {e}")))?;
            let status = response.status();
            let declared = response
                .headers()
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
            if status.is_success()
                && let Some(size) = declared
            {
                store.check_size(size).map_err(|source| FetchError::Store {
                    url: url.clone(),
                    digest: *digest,
                    source: Box::new(source),
                })?;
            }
            let body = Limited::new(response.into_body(), limit.saturating_add(1))
                .collect()
                .await
                .map_err(|e| transport(format!("reading the body: {e}")))?
                .to_bytes();
            if !status.is_success() {
                return Err(FetchError::Status {
                    url: url.clone(),
                    digest: *digest,
                    status: status.as_u16(),
                    body: String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned(),
                });
            }
            Ok(body)
        };
        let body = tokio::time::timeout(FETCH_TIMEOUT, exchange)
            .await
            .map_err(|_| transport(format!("no answer within {FETCH_TIMEOUT:?}")))??;
        store
            .put_verified(digest, &body)
            .map_err(|source| FetchError::Store {
                url,
                digest: *digest,
                source: Box::new(source),
            })
    }
}

/// `HOST` and `PORT` of `https://HOST[:PORT][/...]` (443 by default).
pub fn host_port(url: &str) -> Option<(String, u16)> {
    let authority = url.strip_prefix("https://")?.split('/').next()?;
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (host, rest) = v6.split_once(']')?;
            (host, rest.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => 443,
    };
    (!host.is_empty()).then(|| (host.to_owned(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_host_and_port() {
        assert_eq!(
            host_port("https://10.0.0.1:9443"),
            Some(("10.0.0.1".into(), 9443))
        );
        assert_eq!(
            host_port("https://operon.svc/"),
            Some(("operon.svc".into(), 443))
        );
        assert_eq!(host_port("https://[::1]:9443"), Some(("::1".into(), 9443)));
        assert_eq!(host_port("http://x:1"), None);
        assert_eq!(host_port("https://:1"), None);
    }

    #[test]
    fn a_ca_bundle_without_certificates_is_refused() {
        let err = Fetcher::new(b"junk", "ca.crt".into(), Token::Static("t".into())).unwrap_err();
        assert!(err.to_string().contains("ca.crt"), "{err}");
    }
}
