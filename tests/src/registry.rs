//! An OCI registry served in the test (the distribution API over plain HTTP on loopback,
//! with HTTP Basic authentication when given credentials): manifests and blobs read by
//! tag or digest, and pushed (blob uploads, chunked or whole, and manifests). It can
//! also serve what a real registry never would: bytes that are not what their digest
//! says, and manifests changed behind a client's back.

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use sha2::{Digest as _, Sha256};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The media type of the manifests it publishes.
pub const MANIFEST_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// A wasm artifact's config media type (CNCF layout).
pub const WASM_CONFIG_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// A wasm artifact's layer media type.
pub const WASM_LAYER_TYPE: &str = "application/wasm";

/// The registry's contents and counters.
#[derive(Default)]
pub struct FakeRegistry {
    /// `USER:PASSWORD` it demands, if any.
    credentials: Option<String>,
    /// `repository:tag` or `repository@digest` → manifest bytes.
    manifests: Mutex<HashMap<String, Vec<u8>>>,
    /// Digest → bytes (served as they are, whatever their digest).
    blobs: Mutex<HashMap<String, Vec<u8>>>,
    /// Upload session → the bytes received so far.
    uploads: Mutex<HashMap<String, Vec<u8>>>,
    next_upload: AtomicUsize,
    blob_gets: AtomicUsize,
    manifest_gets: AtomicUsize,
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

impl FakeRegistry {
    /// An empty registry demanding `credentials` (`USER:PASSWORD`), or none.
    pub fn new(credentials: Option<&str>) -> Arc<Self> {
        Arc::new(Self {
            credentials: credentials.map(str::to_owned),
            ..Self::default()
        })
    }

    /// Serves it on loopback until the runtime ends; its `host:port`.
    ///
    /// # Panics
    ///
    /// If no port can be bound.
    pub async fn serve(self: &Arc<Self>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let registry = self.clone();
        let app = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let registry = registry.clone();
                async move { registry.answer(&method, &uri, &headers, body) }
            },
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        address
    }

    /// Publishes `layer` under `repository:tag` with the given media types; the
    /// manifest's digest.
    pub fn publish(
        &self,
        repository: &str,
        tag: &str,
        layer: &[u8],
        config_type: &str,
        layer_type: &str,
    ) -> String {
        let config = br#"{"architecture":"wasm","os":"wasip2"}"#;
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {"mediaType": config_type, "digest": sha256(config), "size": config.len()},
            "layers": [{"mediaType": layer_type, "digest": sha256(layer), "size": layer.len()}],
        }))
        .unwrap();
        self.put_blob(config);
        self.put_blob(layer);
        self.put_manifest(repository, tag, &manifest)
    }

    /// Publishes the component `wasm` as a wasm artifact under `repository:tag`.
    pub fn publish_wasm(&self, repository: &str, tag: &str, wasm: &[u8]) -> String {
        self.publish(repository, tag, wasm, WASM_CONFIG_TYPE, WASM_LAYER_TYPE)
    }

    /// Stores `manifest` under `repository:tag` (and its digest); its digest.
    pub fn put_manifest(&self, repository: &str, tag: &str, manifest: &[u8]) -> String {
        let digest = sha256(manifest);
        let mut manifests = self.manifests.lock().unwrap();
        manifests.insert(format!("{repository}:{tag}"), manifest.to_vec());
        manifests.insert(format!("{repository}@{digest}"), manifest.to_vec());
        digest
    }

    /// The manifest under `repository:tag` or `repository@digest`.
    pub fn manifest(&self, key: &str) -> Option<Vec<u8>> {
        self.manifests.lock().unwrap().get(key).cloned()
    }

    /// Stores `bytes` under their digest.
    pub fn put_blob(&self, bytes: &[u8]) {
        self.blobs
            .lock()
            .unwrap()
            .insert(sha256(bytes), bytes.to_vec());
    }

    /// Serves `bytes` for `digest`, whatever their own digest.
    pub fn replace_blob(&self, digest: &str, bytes: &[u8]) {
        self.blobs
            .lock()
            .unwrap()
            .insert(digest.to_owned(), bytes.to_vec());
    }

    /// The blob of `digest`.
    pub fn blob(&self, digest: &str) -> Option<Vec<u8>> {
        self.blobs.lock().unwrap().get(digest).cloned()
    }

    /// Blob downloads so far.
    pub fn blob_gets(&self) -> usize {
        self.blob_gets.load(Ordering::SeqCst)
    }

    /// Manifest reads so far.
    pub fn manifest_gets(&self) -> usize {
        self.manifest_gets.load(Ordering::SeqCst)
    }

    fn answer(&self, method: &Method, uri: &Uri, headers: &HeaderMap, body: Bytes) -> Response {
        if let Some(credentials) = &self.credentials {
            let expected = format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(credentials)
            );
            if headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                != Some(&expected)
            {
                return (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, "Basic realm=\"test\"")],
                    r#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#,
                )
                    .into_response();
            }
        }
        let rest = uri.path().strip_prefix("/v2/").unwrap_or_default();
        if rest.is_empty() {
            return StatusCode::OK.into_response();
        }
        let unknown = |code: &str| {
            (
                StatusCode::NOT_FOUND,
                format!(r#"{{"errors":[{{"code":"{code}","message":"unknown"}}]}}"#),
            )
                .into_response()
        };
        let digest_query = uri.query().and_then(|q| {
            q.split('&')
                .find_map(|pair| pair.strip_prefix("digest="))
                .map(|d| d.replace("%3A", ":").replace("%3a", ":"))
        });
        if let Some((repository, session)) = rest.split_once("/blobs/uploads/") {
            return self.upload(method, repository, session, digest_query, body);
        }
        if let Some((repository, reference)) = rest.split_once("/manifests/") {
            let separator = if reference.starts_with("sha256:") {
                '@'
            } else {
                ':'
            };
            let key = format!("{repository}{separator}{reference}");
            if method == Method::PUT {
                let digest = sha256(&body);
                let mut manifests = self.manifests.lock().unwrap();
                manifests.insert(key, body.to_vec());
                manifests.insert(format!("{repository}@{digest}"), body.to_vec());
                return (
                    StatusCode::CREATED,
                    [
                        (
                            header::LOCATION,
                            format!("/v2/{repository}/manifests/{digest}"),
                        ),
                        (
                            header::HeaderName::from_static("docker-content-digest"),
                            digest,
                        ),
                    ],
                )
                    .into_response();
            }
            self.manifest_gets.fetch_add(1, Ordering::SeqCst);
            let Some(manifest) = self.manifest(&key) else {
                return unknown("MANIFEST_UNKNOWN");
            };
            let media_type = serde_json::from_slice::<serde_json::Value>(&manifest)
                .ok()
                .and_then(|m| m["mediaType"].as_str().map(str::to_owned))
                .unwrap_or_else(|| MANIFEST_TYPE.to_owned());
            let body = if method == Method::HEAD {
                Vec::new()
            } else {
                manifest.clone()
            };
            return (
                [
                    (header::CONTENT_TYPE, media_type),
                    (
                        header::HeaderName::from_static("docker-content-digest"),
                        sha256(&manifest),
                    ),
                ],
                body,
            )
                .into_response();
        }
        if let Some((_, digest)) = rest.split_once("/blobs/") {
            if method == Method::GET {
                self.blob_gets.fetch_add(1, Ordering::SeqCst);
            }
            return match self.blob(digest) {
                Some(bytes) if method == Method::HEAD => {
                    ([(header::CONTENT_LENGTH, bytes.len())], ()).into_response()
                }
                Some(bytes) => bytes.into_response(),
                None => unknown("BLOB_UNKNOWN"),
            };
        }
        unknown("NAME_UNKNOWN")
    }

    /// A blob upload: POST opens a session, PATCH adds a chunk, PUT (with the digest)
    /// closes it, with a last chunk or none.
    fn upload(
        &self,
        method: &Method,
        repository: &str,
        session: &str,
        digest: Option<String>,
        body: Bytes,
    ) -> Response {
        let location = |id: &str| format!("/v2/{repository}/blobs/uploads/{id}");
        let mut uploads = self.uploads.lock().unwrap();
        match *method {
            Method::POST => {
                let id = self.next_upload.fetch_add(1, Ordering::SeqCst).to_string();
                uploads.insert(id.clone(), Vec::new());
                (StatusCode::ACCEPTED, [(header::LOCATION, location(&id))]).into_response()
            }
            Method::PATCH => {
                let Some(received) = uploads.get_mut(session) else {
                    return StatusCode::NOT_FOUND.into_response();
                };
                received.extend_from_slice(&body);
                let range = format!("0-{}", received.len().saturating_sub(1));
                (
                    StatusCode::ACCEPTED,
                    [
                        (header::LOCATION, location(session)),
                        (header::RANGE, range),
                    ],
                )
                    .into_response()
            }
            Method::PUT => {
                let Some(mut received) = uploads.remove(session) else {
                    return StatusCode::NOT_FOUND.into_response();
                };
                received.extend_from_slice(&body);
                let actual = sha256(&received);
                if digest.as_deref() != Some(actual.as_str()) {
                    return (
                        StatusCode::BAD_REQUEST,
                        r#"{"errors":[{"code":"DIGEST_INVALID","message":"digest mismatch"}]}"#,
                    )
                        .into_response();
                }
                self.blobs.lock().unwrap().insert(actual.clone(), received);
                (
                    StatusCode::CREATED,
                    [(header::LOCATION, format!("/v2/{repository}/blobs/{actual}"))],
                )
                    .into_response()
            }
            _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
        }
    }
}
