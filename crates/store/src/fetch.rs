//! Fetching a module's bytes by digest from a replica of `operon serve` that holds
//! them (`GET <url>/v1/modules/by-digest/<hex>`, over HTTPS, with this process's
//! bearer token), and keeping them only when their sha256 is the digest asked for.
//! A CA read from a file is read again when it changes, so a rotated CA needs no
//! restart, and a file that is not there yet (a Secret volume the kubelet fills once
//! the Secret exists) is waited for: fetches fail, saying so, until it arrives.

use super::blobs::{BlobError, BlobStore};
use http_body_util::{BodyExt as _, Empty, Limited};
use operon_data::api::ModuleSource;
use operon_sandbox::ModuleDigest;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one fetch may take, connection and body included.
const FETCH_TIMEOUT: Duration = Duration::from_secs(120);

/// How often a CA file is read again while fetches succeed: a renewed CA (a rotated
/// Secret the kubelet rewrites in the pod, cert-manager) is trusted within this time,
/// and at once when a TLS handshake fails.
pub(crate) const CA_RECHECK: Duration = Duration::from_secs(60);

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
    trust: Arc<Trust>,
    token: Token,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("ca", &self.trust.path)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

/// The CA a fetcher trusts, and the file it is read again from.
struct Trust {
    /// The CA's file, or what names CA bytes given once (for messages).
    path: PathBuf,
    /// Whether `path` is read again (false for bytes given once).
    reload: bool,
    /// How long a successful read is trusted before the file is read again.
    recheck: Duration,
    state: Mutex<TrustState>,
}

struct TrustState {
    /// `None` until the file first held a usable CA.
    tls: Option<Arc<rustls::ClientConfig>>,
    /// The PEM `tls` was built from: a rewrite with the same content changes nothing.
    pem: Vec<u8>,
    /// When the file was last read.
    checked: tokio::time::Instant,
    /// Why the file's current content is not used, logged once per reason rather than
    /// at every fetch while it stays broken.
    refused: Option<String>,
}

impl Trust {
    /// The client configuration to fetch with, after reading the file again when
    /// `recheck` has passed, `now` is set (a failed handshake) or no CA was usable yet;
    /// the reason when there is none yet.
    fn current(&self, now: bool) -> Result<Arc<rustls::ClientConfig>, String> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let waiting = state.tls.is_none();
        if !self.reload || (!now && !waiting && state.checked.elapsed() < self.recheck) {
            return state.usable();
        }
        state.checked = tokio::time::Instant::now();
        let read = std::fs::read(&self.path)
            .map_err(|e| e.to_string())
            .and_then(|pem| {
                if state.tls.is_some() && pem == state.pem {
                    return Ok(None);
                }
                let tls = client_config(&pem)?;
                Ok(Some((pem, tls)))
            });
        match read {
            Ok(None) => state.refused = None,
            Ok(Some((pem, tls))) => {
                if waiting {
                    tracing::info!(path = %self.path.display(),
                        "the module API's CA arrived: modules are fetched from now on");
                } else {
                    tracing::info!(path = %self.path.display(),
                        "the module API's CA changed: module fetches trust the new one");
                }
                state.pem = pem;
                state.tls = Some(tls);
                state.refused = None;
            }
            Err(reason) => {
                if state.refused.as_ref() != Some(&reason) {
                    if waiting {
                        tracing::warn!(path = %self.path.display(), %reason,
                            "no usable module API CA yet: module fetches wait for the file");
                    } else {
                        tracing::warn!(path = %self.path.display(), %reason,
                            "cannot use the module API's CA file as it is now: module fetches keep trusting the last good CA");
                    }
                    state.refused = Some(reason);
                }
            }
        }
        state.usable()
    }
}

impl TrustState {
    fn usable(&self) -> Result<Arc<rustls::ClientConfig>, String> {
        self.tls.clone().ok_or_else(|| {
            let why = self.refused.as_deref().unwrap_or("not read yet");
            format!("no usable CA yet ({why})")
        })
    }
}

/// A TLS client configuration trusting the certificates in `pem`, every one of which
/// must parse; at least one is needed.
pub fn client_config(pem: &[u8]) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| e.to_string())?;
        roots.add(cert).map_err(|e| e.to_string())?;
    }
    if roots.is_empty() {
        return Err("no PEM certificate in it".to_owned());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(tls))
}

/// How one attempt at a fetch failed.
enum Failure {
    /// The TLS handshake: the CA may have been rotated.
    Handshake(FetchError),
    /// Anything else.
    Other(FetchError),
}

impl From<FetchError> for Failure {
    fn from(error: FetchError) -> Self {
        Failure::Other(error)
    }
}

impl Fetcher {
    /// A fetcher trusting the certificates in `ca_pem` (named `ca_path` in messages)
    /// for as long as it lives, and sending `token`.
    pub fn new(ca_pem: &[u8], ca_path: PathBuf, token: Token) -> Result<Self, FetchError> {
        Self::build(ca_pem.to_vec(), ca_path, false, token)
    }

    /// A fetcher trusting the CA in the file `path`, read again when it changes: every
    /// minute, and at once when a TLS handshake fails (the fetch is then tried
    /// again if the CA changed). A rewrite that cannot be read or holds no certificate
    /// is logged and the last good CA kept. A file that is missing or holds no usable CA
    /// yet is waited for: it is read again at every fetch until it does, and each
    /// fetch meanwhile fails with [`FetchError::Ca`] (an agent started before the
    /// webhook certificate's Secret existed fetches once the kubelet writes it).
    pub fn from_ca_file(path: PathBuf, token: Token) -> Self {
        let fetcher = Self::with_state(
            path,
            true,
            token,
            TrustState {
                tls: None,
                pem: Vec::new(),
                checked: tokio::time::Instant::now(),
                refused: None,
            },
        );
        // Read now, so that a CA already there is logged as nothing new.
        let _ = fetcher.trust.current(true);
        fetcher
    }

    fn build(pem: Vec<u8>, path: PathBuf, reload: bool, token: Token) -> Result<Self, FetchError> {
        let tls = client_config(&pem).map_err(|reason| FetchError::Ca {
            path: path.clone(),
            reason,
        })?;
        let state = TrustState {
            tls: Some(tls),
            pem,
            checked: tokio::time::Instant::now(),
            refused: None,
        };
        Ok(Self::with_state(path, reload, token, state))
    }

    fn with_state(path: PathBuf, reload: bool, token: Token, state: TrustState) -> Self {
        Self {
            trust: Arc::new(Trust {
                path,
                reload,
                recheck: CA_RECHECK,
                state: Mutex::new(state),
            }),
            token,
        }
    }

    /// The CA's file, when it is read again as it changes.
    #[cfg(test)]
    pub(crate) fn ca_file(&self) -> Option<&std::path::Path> {
        self.trust.reload.then_some(self.trust.path.as_path())
    }

    /// Fetches `digest` from `source` into `store`, refusing bytes of another digest or
    /// over the store's limit (checked from `Content-Length` and while reading). Each
    /// failure counts in `operon_module_fetch_errors_total`.
    pub async fn fetch(
        &self,
        source: &ModuleSource,
        digest: &ModuleDigest,
        store: &BlobStore,
    ) -> Result<(), FetchError> {
        let fetched = self.fetch_once(source, digest, store).await;
        if fetched.is_err() {
            fetch_errors_total().inc();
        }
        fetched
    }

    async fn fetch_once(
        &self,
        source: &ModuleSource,
        digest: &ModuleDigest,
        store: &BlobStore,
    ) -> Result<(), FetchError> {
        let url = source.url.trim_end_matches('/').to_owned();
        let no_ca = |reason| FetchError::Ca {
            path: self.trust.path.clone(),
            reason,
        };
        let tls = self.trust.current(false).map_err(no_ca)?;
        let body = match self.attempt(tls.clone(), source, &url, digest, store).await {
            Ok(body) => body,
            // A server whose certificate this CA no longer verifies may have one of a
            // rotated CA that the file already holds. The attempt is repeated whenever
            // the CA now trusted is another than the one it used, even when a
            // concurrent fetch was the one to read the file.
            Err(Failure::Handshake(error)) => {
                let now = self.trust.current(true).map_err(no_ca)?;
                if Arc::ptr_eq(&now, &tls) {
                    return Err(error);
                }
                self.attempt(now, source, &url, digest, store)
                    .await
                    .map_err(|(Failure::Handshake(e) | Failure::Other(e))| e)?
            }
            Err(Failure::Other(error)) => return Err(error),
        };
        store
            .put_verified(digest, &body)
            .map_err(|source| FetchError::Store {
                url,
                digest: *digest,
                source: Box::new(source),
            })
    }

    /// One request for `digest`'s bytes, trusting `tls`.
    async fn attempt(
        &self,
        tls: Arc<rustls::ClientConfig>,
        source: &ModuleSource,
        url: &str,
        digest: &ModuleDigest,
        store: &BlobStore,
    ) -> Result<bytes::Bytes, Failure> {
        let transport = |reason: String| FetchError::Transport {
            url: url.to_owned(),
            digest: *digest,
            reason,
        };
        let (host, port) = host_port(url).ok_or_else(|| FetchError::BadUrl {
            url: url.to_owned(),
        })?;
        let name = source.server_name.clone().unwrap_or_else(|| host.clone());
        let server_name = ServerName::try_from(name.clone())
            .map_err(|e| transport(format!("server name {name:?}: {e}")))?;
        let token = self.token.read()?;
        let path = format!("/v1/modules/by-digest/{}", hex::encode(digest.as_bytes()));
        let limit = store.max_bytes() as usize;
        let connector = tokio_rustls::TlsConnector::from(tls);
        let exchange = async {
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
                .await
                .map_err(|e| transport(format!("connecting: {e}")))?;
            let tls = connector
                .connect(server_name, tcp)
                .await
                .map_err(|e| Failure::Handshake(transport(format!("TLS: {e}"))))?;
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
                    url: url.to_owned(),
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
                    url: url.to_owned(),
                    digest: *digest,
                    status: status.as_u16(),
                    body: String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned(),
                }
                .into());
            }
            Ok(body)
        };
        tokio::time::timeout(FETCH_TIMEOUT, exchange)
            .await
            .map_err(|_| transport(format!("no answer within {FETCH_TIMEOUT:?}")))?
    }
}

fn fetch_errors_total() -> &'static prometheus::IntCounter {
    static COUNTER: std::sync::OnceLock<prometheus::IntCounter> = std::sync::OnceLock::new();
    COUNTER.get_or_init(|| {
        prometheus::IntCounter::new(
            "operon_module_fetch_errors_total",
            "Failed fetches of a module from the module API (an agent or an offloaded step following uploaded modules).",
        )
        .expect("static metric definition is valid")
    })
}

/// The fetcher's collectors, one per metric family.
pub fn collectors() -> Vec<Box<dyn prometheus::core::Collector>> {
    vec![Box::new(fetch_errors_total().clone())]
}

/// Registers the fetcher's metrics in `registry` (once per registry).
pub fn register_metrics(registry: &prometheus::Registry) -> Result<(), prometheus::Error> {
    for collector in collectors() {
        registry.register(collector)?;
    }
    Ok(())
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
    use operon_tests::pki::ca_and_server;
    use std::path::Path;

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

    #[tokio::test]
    async fn a_ca_file_that_arrives_later_is_waited_for() {
        let (ca, tls) = ca_and_server();
        let good = replica(tls, MODULE).await;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.crt");
        // The recheck period must not delay the first usable CA.
        let fetcher = fetcher_of(&path, CA_RECHECK);
        let err = fetch(&fetcher, &good).await.unwrap_err();
        assert!(
            err.to_string().starts_with(&format!(
                "cannot use the CA bundle {}: no usable CA yet (",
                path.display()
            )),
            "{err}"
        );
        // Written empty first, as a volume may be, then with the CA.
        std::fs::write(&path, "").unwrap();
        let err = fetch(&fetcher, &good).await.unwrap_err();
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
        std::fs::write(&path, &ca).unwrap();
        fetch(&fetcher, &good).await.unwrap();
        assert!(fetcher.trust.state.lock().unwrap().refused.is_none());
    }

    /// A replica on a local port answering every request with `module`, over TLS with
    /// `tls`; its URL.
    async fn replica(tls: Arc<rustls::ServerConfig>, module: &'static [u8]) -> String {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let acceptor = tokio_rustls::TlsAcceptor::from(tls);
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A client that does not trust the certificate ends here.
                    let Ok(mut stream) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !request.ends_with(b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        module.len()
                    );
                    let _ = stream.write_all(head.as_bytes()).await;
                    let _ = stream.write_all(module).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        url
    }

    const MODULE: &[u8] = b"\0asm\x0d\0\x01\0a module";

    fn source(url: &str) -> ModuleSource {
        ModuleSource {
            replica: "operon-0".into(),
            url: url.to_owned(),
            server_name: None,
            digest: ModuleDigest::of(MODULE).to_string(),
        }
    }

    /// Fetches [`MODULE`] from `url` into a fresh store.
    async fn fetch(fetcher: &Fetcher, url: &str) -> Result<(), FetchError> {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path(), 1 << 20).unwrap();
        let digest = ModuleDigest::of(MODULE);
        fetcher.fetch(&source(url), &digest, &store).await?;
        assert_eq!(store.get(&digest).unwrap().unwrap(), MODULE);
        Ok(())
    }

    fn is_tls_failure(result: Result<(), FetchError>) -> bool {
        matches!(&result, Err(FetchError::Transport { reason, .. }) if reason.starts_with("TLS: "))
    }

    /// A fetcher of the CA file `path`, read again after `recheck`.
    fn fetcher_of(path: &Path, recheck: Duration) -> Fetcher {
        let mut fetcher = Fetcher::from_ca_file(path.to_owned(), Token::Static("t".into()));
        Arc::get_mut(&mut fetcher.trust).unwrap().recheck = recheck;
        fetcher
    }

    #[tokio::test]
    async fn a_rotated_ca_is_trusted_at_the_next_fetch() {
        let (old_ca, old_tls) = ca_and_server();
        let (new_ca, new_tls) = ca_and_server();
        let (old, new) = (
            replica(old_tls, MODULE).await,
            replica(new_tls, MODULE).await,
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.crt");
        std::fs::write(&path, &old_ca).unwrap();
        let fetcher = fetcher_of(&path, CA_RECHECK);
        assert_eq!(fetcher.ca_file(), Some(path.as_path()));
        fetch(&fetcher, &old).await.unwrap();
        assert!(is_tls_failure(fetch(&fetcher, &new).await));

        // Rotated: a replica with a certificate of the new CA fails the handshake, which
        // reads the file again within the minute, and the fetch is tried again.
        std::fs::write(&path, &new_ca).unwrap();
        fetch(&fetcher, &new).await.unwrap();
        assert!(is_tls_failure(fetch(&fetcher, &old).await));

        // A CA given as bytes is never read again.
        let fixed =
            Fetcher::new(old_ca.as_bytes(), path.clone(), Token::Static("t".into())).unwrap();
        assert_eq!(fixed.ca_file(), None);
        assert!(is_tls_failure(fetch(&fixed, &new).await));
    }

    #[tokio::test]
    async fn the_ca_file_is_read_again_only_after_the_recheck_period() {
        let (old_ca, old_tls) = ca_and_server();
        let (new_ca, _) = ca_and_server();
        let old = replica(old_tls, MODULE).await;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.crt");
        std::fs::write(&path, &old_ca).unwrap();

        // Within the period, successful fetches do not read the file.
        let patient = fetcher_of(&path, CA_RECHECK);
        fetch(&patient, &old).await.unwrap();
        std::fs::write(&path, &new_ca).unwrap();
        fetch(&patient, &old).await.unwrap();

        // Once it passed, the next fetch trusts what the file holds now.
        let eager = fetcher_of(&path, Duration::ZERO);
        std::fs::write(&path, &old_ca).unwrap();
        fetch(&eager, &old).await.unwrap();
        std::fs::write(&path, &new_ca).unwrap();
        assert!(is_tls_failure(fetch(&eager, &old).await));
    }

    #[tokio::test]
    async fn a_broken_rewrite_of_the_ca_file_keeps_the_last_good_ca() {
        let (ca, tls) = ca_and_server();
        let (_, other_tls) = ca_and_server();
        let (good, other) = (replica(tls, MODULE).await, replica(other_tls, MODULE).await);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.crt");
        std::fs::write(&path, &ca).unwrap();
        let fetcher = fetcher_of(&path, Duration::ZERO);
        fetch(&fetcher, &good).await.unwrap();

        // Not PEM, a certificate that does not parse, half a rewrite, no file: each is
        // refused and the CA read last still verifies the replica.
        let truncated = &ca[..ca.len() / 2];
        let broken = "-----BEGIN CERTIFICATE-----\nbm90IGRlcg==\n-----END CERTIFICATE-----\n";
        for content in ["garbage", broken, truncated] {
            std::fs::write(&path, content).unwrap();
            fetch(&fetcher, &good).await.unwrap();
            // A failed handshake reads it again and still keeps the good CA.
            assert!(is_tls_failure(fetch(&fetcher, &other).await));
            fetch(&fetcher, &good).await.unwrap();
            let state = fetcher.trust.state.lock().unwrap();
            assert!(state.refused.is_some(), "{content:?} was taken");
            assert_eq!(state.pem, ca.as_bytes());
        }
        std::fs::remove_file(&path).unwrap();
        fetch(&fetcher, &good).await.unwrap();

        // Repaired: used again, and no refusal is remembered.
        std::fs::write(&path, &ca).unwrap();
        fetch(&fetcher, &good).await.unwrap();
        assert!(fetcher.trust.state.lock().unwrap().refused.is_none());
    }
}
