//! Reviews a follower cannot answer, sent on to the leader. addon-operator's modules
//! run on the leader only (their hooks read values the leader computes), so a
//! follower that the Service hands a review of a module's webhook passes it to the
//! leader's admission server: the address the leader advertises on its Lease
//! ([`super::super::lease`]), over TLS checked against the admission server's CA and
//! the name its certificate carries (the webhook Service's). A forwarded request is
//! marked, and a replica never forwards a marked one again: with the Lease changing
//! hands, two replicas that each think the other leads answer 503 rather than loop, and
//! the API server applies the webhook's failure policy.

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt as _, Full, Limited};
use rustls::pki_types::ServerName;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// The header that marks a forwarded review (its value: the forwarding replica).
pub(crate) const FORWARDED_BY: &str = "x-operon-forwarded-by";

/// Where the leader's admission server is, as it advertises it on the Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderAddress {
    /// Its base URL, e.g. `https://10.244.1.7:9680`.
    pub url: String,
    /// The name its certificate is checked against, when not the URL's host.
    pub server_name: Option<String>,
}

/// The CA the leader's certificate is checked against: the admission server's.
#[derive(Debug, Clone)]
pub enum LeaderTrust {
    /// Kept current by this process (the self-signed CA, renewed in place).
    Live(watch::Receiver<Vec<u8>>),
    /// A PEM file (`--validating-webhook-ca`, `ca.crt` of the certificate directory),
    /// read again when its content changes.
    File(PathBuf),
}

/// Why a review could not be forwarded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ForwardError {
    /// No leader advertises an address.
    #[error(
        "no leader is known to forward to (it advertises no address on its Lease: give it $POD_IP)"
    )]
    NoLeader,
    /// The leader's URL is not `https://HOST:PORT`.
    #[error("the leader's address {0:?} is not an https://HOST:PORT URL")]
    BadUrl(String),
    /// The CA to check the leader with is not usable.
    #[error("the admission server's CA cannot be used to reach the leader: {0}")]
    Trust(String),
    /// Connecting, TLS or HTTP failed.
    #[error("forwarding to the leader at {url}: {reason}")]
    Transport { url: String, reason: String },
}

/// Sends reviews on to the leader.
#[derive(Debug)]
pub struct Forwarder {
    leader: watch::Receiver<Option<LeaderAddress>>,
    trust: LeaderTrust,
    /// This replica's name, for the [`FORWARDED_BY`] mark.
    identity: String,
    /// The TLS configuration of the last CA read, with the PEM it came from.
    tls: Mutex<Option<(Vec<u8>, Arc<rustls::ClientConfig>)>>,
}

/// How long the leader has to answer (the API server waits 10 s by default, and the
/// leader's own hook timeout is below that).
const FORWARD_TIMEOUT: Duration = Duration::from_secs(9);

impl Forwarder {
    /// Forwards to the leader `leader` names, trusting `trust`; `identity` names this
    /// replica in the mark.
    pub fn new(
        leader: watch::Receiver<Option<LeaderAddress>>,
        trust: LeaderTrust,
        identity: String,
    ) -> Self {
        Self {
            leader,
            trust,
            identity,
            tls: Mutex::new(None),
        }
    }

    /// The client configuration for the CA as it is now.
    fn client_config(&self) -> Result<Arc<rustls::ClientConfig>, ForwardError> {
        let pem = match &self.trust {
            LeaderTrust::Live(ca) => ca.borrow().clone(),
            LeaderTrust::File(path) => std::fs::read(path)
                .map_err(|e| ForwardError::Trust(format!("{}: {e}", path.display())))?,
        };
        let mut cached = self.tls.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((seen, tls)) = cached.as_ref()
            && *seen == pem
        {
            return Ok(tls.clone());
        }
        let tls = operon_store::fetch::client_config(&pem).map_err(ForwardError::Trust)?;
        *cached = Some((pem, tls.clone()));
        Ok(tls)
    }

    /// Sends the review `body` that arrived at `path` to the leader, and gives back its
    /// answer as it came (status, content type and body).
    pub(crate) async fn forward(&self, path: &str, body: Bytes) -> Result<Response, ForwardError> {
        let leader = self.leader.borrow().clone().ok_or(ForwardError::NoLeader)?;
        let url = leader.url.trim_end_matches('/').to_owned();
        let (host, port) = operon_store::fetch::host_port(&url)
            .filter(|_| url.starts_with("https://"))
            .ok_or_else(|| ForwardError::BadUrl(url.clone()))?;
        let name = leader.server_name.clone().unwrap_or_else(|| host.clone());
        let transport = |reason: String| ForwardError::Transport {
            url: url.clone(),
            reason,
        };
        let server_name = ServerName::try_from(name.clone())
            .map_err(|e| transport(format!("server name {name:?}: {e}")))?;
        let connector = tokio_rustls::TlsConnector::from(self.client_config()?);
        let exchange = async {
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
                .await
                .map_err(|e| transport(format!("connecting: {e}")))?;
            let _ = tcp.set_nodelay(true);
            let tls = connector
                .connect(server_name, tcp)
                .await
                .map_err(|e| transport(format!("TLS: {e}")))?;
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                    .await
                    .map_err(|e| transport(format!("HTTP: {e}")))?;
            tokio::spawn(connection);
            let request = http::Request::post(path)
                .header(header::HOST, format!("{name}:{port}"))
                .header(header::CONTENT_TYPE, "application/json")
                .header(FORWARDED_BY, &self.identity)
                .body(Full::new(body))
                .map_err(|e| transport(e.to_string()))?;
            let response = sender
                .send_request(request)
                .await
                .map_err(|e| transport(format!("HTTP: {e}")))?;
            let status = response.status();
            let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
            let body = Limited::new(response.into_body(), super::MAX_BODY)
                .collect()
                .await
                .map_err(|e| transport(format!("reading the answer: {e}")))?
                .to_bytes();
            let mut answer = (status, body).into_response();
            if let Some(content_type) = content_type {
                answer
                    .headers_mut()
                    .insert(header::CONTENT_TYPE, content_type);
            }
            Ok(answer)
        };
        tokio::time::timeout(FORWARD_TIMEOUT, exchange)
            .await
            .map_err(|_| transport(format!("no answer within {FORWARD_TIMEOUT:?}")))?
    }
}

/// Whether `headers` mark a review another replica forwarded.
pub(crate) fn was_forwarded(headers: &HeaderMap) -> bool {
    headers.contains_key(FORWARDED_BY)
}

/// The refusal of a review that cannot be forwarded: 503, so that the API server
/// applies the webhook's failure policy.
pub(crate) fn unavailable(error: &ForwardError) -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, error.to_string()).into_response()
}
