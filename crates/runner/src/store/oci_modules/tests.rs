//! Pulls against a registry served in the test (the distribution API's read side over
//! plain HTTP, with HTTP Basic authentication), which can also serve what a real
//! registry never would: bytes that are not what their digest says.

use super::*;
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest as _, Sha256};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

const MANIFEST_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
const USER: &str = "alice:s3cr3t";

#[derive(Default)]
struct Registry {
    /// `repository:tag` or `repository@digest` → manifest bytes.
    manifests: Mutex<HashMap<String, Vec<u8>>>,
    /// Digest → bytes (served as they are, whatever their digest).
    blobs: Mutex<HashMap<String, Vec<u8>>>,
    blob_gets: AtomicUsize,
    manifest_gets: AtomicUsize,
}

fn sha(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

impl Registry {
    /// Publishes `layer` under `repository:tag` with the given media types; returns
    /// the manifest's digest.
    fn publish(
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
            "config": {"mediaType": config_type, "digest": sha(config), "size": config.len()},
            "layers": [{"mediaType": layer_type, "digest": sha(layer), "size": layer.len()}],
        }))
        .unwrap();
        let digest = sha(&manifest);
        let mut blobs = self.blobs.lock().unwrap();
        blobs.insert(sha(config), config.to_vec());
        blobs.insert(sha(layer), layer.to_vec());
        let mut manifests = self.manifests.lock().unwrap();
        manifests.insert(format!("{repository}:{tag}"), manifest.clone());
        manifests.insert(format!("{repository}@{digest}"), manifest);
        digest
    }

    /// Publishes [`COMPONENT`] as the wasm artifact `team/triage:1.0`.
    fn publish_triage(&self) -> String {
        self.publish(
            "team/triage",
            "1.0",
            COMPONENT,
            oci::WASM_CONFIG_MEDIA_TYPE,
            oci::WASM_LAYER_MEDIA_TYPE,
        )
    }

    fn answer(&self, method: &Method, path: &str, headers: &HeaderMap) -> Response {
        let expected = {
            use base64::Engine as _;
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(USER)
            )
        };
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
        let rest = path.strip_prefix("/v2/").unwrap_or_default();
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
        if let Some((repository, reference)) = rest.split_once("/manifests/") {
            self.manifest_gets.fetch_add(1, Ordering::SeqCst);
            let separator = if reference.starts_with("sha256:") {
                '@'
            } else {
                ':'
            };
            let manifests = self.manifests.lock().unwrap();
            let Some(manifest) = manifests.get(&format!("{repository}{separator}{reference}"))
            else {
                return unknown("MANIFEST_UNKNOWN");
            };
            let body = if method == Method::HEAD {
                Vec::new()
            } else {
                manifest.clone()
            };
            return (
                [
                    (header::CONTENT_TYPE, MANIFEST_TYPE.to_owned()),
                    (
                        header::HeaderName::from_static("docker-content-digest"),
                        sha(manifest),
                    ),
                ],
                body,
            )
                .into_response();
        }
        if let Some((_, digest)) = rest.split_once("/blobs/") {
            self.blob_gets.fetch_add(1, Ordering::SeqCst);
            return match self.blobs.lock().unwrap().get(digest) {
                Some(bytes) => bytes.clone().into_response(),
                None => unknown("BLOB_UNKNOWN"),
            };
        }
        unknown("NAME_UNKNOWN")
    }
}

/// Serves `registry` on loopback; its `host:port`.
async fn serve(registry: Arc<Registry>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let app = axum::Router::new().fallback(
        move |method: Method, uri: Uri, headers: HeaderMap, _body: Bytes| {
            let registry = registry.clone();
            async move { registry.answer(&method, uri.path(), &headers) }
        },
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    address
}

struct Setup {
    registry: Arc<Registry>,
    host: String,
    modules: OciModules,
    _dir: tempfile::TempDir,
}

async fn setup(allowed: AllowList) -> Setup {
    let registry = Arc::new(Registry::default());
    let host = serve(registry.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let blobs = BlobStore::open(dir.path(), 1 << 20).unwrap();
    let options = OciOptions {
        extra_ca_pem: Vec::new(),
        plain_http: vec![host.clone()],
    };
    let allowed = match allowed == AllowList::default() {
        true => AllowList::new([host.clone()]),
        false => allowed,
    };
    Setup {
        registry,
        host,
        modules: OciModules::new(blobs, options, allowed),
        _dir: dir,
    }
}

fn alice() -> RegistryAuth {
    let (user, password) = USER.split_once(':').unwrap();
    RegistryAuth::Basic(user.to_owned(), password.to_owned())
}

const COMPONENT: &[u8] = b"\0asm\x0d\x00\x01\x00 not really a component, but bytes";

#[tokio::test]
async fn a_tag_is_pinned_and_its_bytes_kept_by_their_digest() {
    let s = setup(AllowList::default()).await;
    let manifest = s.registry.publish_triage();
    let tag = format!("oci://{}/team/triage:1.0", s.host);
    let resolved = s.modules.resolve(&tag, &alice()).await.unwrap();
    let pinned = format!("oci://{}/team/triage@{manifest}", s.host);
    assert_eq!(resolved.pinned, pinned);
    assert_eq!(resolved.digest, ModuleDigest::of(COMPONENT));
    assert_eq!(
        std::fs::read(s.modules.path(&pinned).unwrap()).unwrap(),
        COMPONENT
    );
    assert_eq!(s.modules.path(&tag), None, "a tag is never held: it moves");
    let (manifests, blobs) = (
        s.registry.manifest_gets.load(Ordering::SeqCst),
        s.registry.blob_gets.load(Ordering::SeqCst),
    );
    assert_eq!(blobs, 1, "the layer is downloaded once");

    // The pinned reference needs no registry; the tag is resolved again, but bytes
    // the store holds are not downloaded again.
    assert_eq!(
        s.modules.resolve(&pinned, &alice()).await.unwrap(),
        resolved
    );
    assert_eq!(s.registry.manifest_gets.load(Ordering::SeqCst), manifests);
    assert_eq!(s.modules.resolve(&tag, &alice()).await.unwrap(), resolved);
    assert_eq!(
        s.registry.manifest_gets.load(Ordering::SeqCst),
        manifests + 1
    );
    assert_eq!(s.registry.blob_gets.load(Ordering::SeqCst), blobs);

    // The tag moves; the pin still names the old bytes.
    s.registry.publish(
        "team/triage",
        "1.0",
        b"\0asm\x0d\x00\x01\x00 version two",
        oci::WASM_CONFIG_MEDIA_TYPE,
        oci::WASM_LAYER_MEDIA_TYPE,
    );
    let moved = s.modules.resolve(&tag, &alice()).await.unwrap();
    assert_ne!(moved.pinned, pinned);
    assert_eq!(
        s.modules.resolve(&pinned, &alice()).await.unwrap(),
        resolved
    );
}

#[tokio::test]
async fn each_refusal_names_the_reference_and_its_reason() {
    let s = setup(AllowList::default()).await;
    let host = &s.host;
    s.registry.publish(
        "team/image",
        "1",
        b"a container layer",
        "application/vnd.oci.image.config.v1+json",
        "application/vnd.oci.image.layer.v1.tar+gzip",
    );
    s.registry.publish_triage();
    let cases: Vec<(String, RegistryAuth, &str, &str)> = vec![
        (
            format!("oci://{host}/team/triage:2.0"),
            alice(),
            "ModuleNotFound",
            "not found in the registry",
        ),
        (
            format!("oci://{host}/team/triage:1.0"),
            RegistryAuth::Anonymous,
            "RegistryUnauthorized",
            "the registry refused access",
        ),
        (
            format!("oci://{host}/team/triage:1.0"),
            RegistryAuth::Basic("alice".to_owned(), "wrong".to_owned()),
            "RegistryUnauthorized",
            "the registry refused access",
        ),
        (
            format!("oci://{host}/team/image:1"),
            alice(),
            "NotAWasmArtifact",
            "not a wasm module artifact: its config is application/vnd.oci.image.config.v1+json",
        ),
        (
            format!("oci://{host}/team/triage@sha256:{}", "0".repeat(64)),
            alice(),
            "ModuleNotFound",
            "not found in the registry",
        ),
    ];
    for (reference, auth, reason, words) in cases {
        let error = s.modules.resolve(&reference, &auth).await.unwrap_err();
        assert_eq!(error.reason(), reason, "{reference}: {error}");
        let message = error.to_string();
        assert!(
            message.starts_with(&reference) && message.contains(words),
            "{message}"
        );
    }
}

#[tokio::test]
async fn bytes_that_are_not_what_their_digest_says_are_refused() {
    let s = setup(AllowList::default()).await;
    s.registry.publish_triage();
    // The registry swaps the layer's bytes.
    s.registry
        .blobs
        .lock()
        .unwrap()
        .insert(sha(COMPONENT), b"\0asm\x0d\x00\x01\x00 tampered".to_vec());
    let reference = format!("oci://{}/team/triage:1.0", s.host);
    let error = s.modules.resolve(&reference, &alice()).await.unwrap_err();
    assert_eq!(error.reason(), "DigestMismatch", "{error}");
    assert!(!error.may_resolve());
    assert!(
        error
            .to_string()
            .contains(&format!("digest mismatch: expected {}", sha(COMPONENT))),
        "{error}"
    );
    assert!(!s.modules.blobs.contains(&ModuleDigest::of(COMPONENT)));
}

#[tokio::test]
async fn only_allowed_registries_are_asked() {
    let s = setup(AllowList::new(["registry.example.com".to_owned()])).await;
    s.registry.publish_triage();
    let reference = format!("oci://{}/team/triage:1.0", s.host);
    let error = s.modules.resolve(&reference, &alice()).await.unwrap_err();
    assert_eq!(error.reason(), "RegistryNotAllowed");
    assert_eq!(
        error.to_string(),
        format!(
            "{reference}: registry {} is not allowed: this engine pulls modules only from the registries its --allow-registry flags name (registry.example.com)",
            s.host
        )
    );
    assert_eq!(s.registry.manifest_gets.load(Ordering::SeqCst), 0);
    assert!(AllowList::any().permits("ghcr.io"));
    assert!(!AllowList::default().permits("ghcr.io"));
}

#[test]
fn credentials_come_from_docker_registry_secrets() {
    use k8s_openapi::ByteString;
    let secret = |type_: &str, key: &str, text: &str| Secret {
        type_: Some(type_.to_owned()),
        data: Some([(key.to_owned(), ByteString(text.as_bytes().to_vec()))].into()),
        ..Secret::default()
    };
    let json = r#"{"auths":{"ghcr.io":{"username":"bob","password":"pw"}}}"#;
    let found = auth_in_secret(
        &secret("kubernetes.io/dockerconfigjson", ".dockerconfigjson", json),
        "ghcr.io",
    )
    .unwrap();
    assert!(matches!(found, Some(RegistryAuth::Basic(u, p)) if u == "bob" && p == "pw"));
    let none = auth_in_secret(
        &secret("kubernetes.io/dockerconfigjson", ".dockerconfigjson", json),
        "quay.io",
    )
    .unwrap();
    assert!(none.is_none());
    let legacy = auth_in_secret(
        &secret(
            "kubernetes.io/dockercfg",
            ".dockercfg",
            r#"{"quay.io":{"auth":"YWxpY2U6czNjcjN0"}}"#,
        ),
        "quay.io",
    )
    .unwrap();
    assert!(matches!(legacy, Some(RegistryAuth::Basic(u, _)) if u == "alice"));
    let opaque = auth_in_secret(&secret("Opaque", "token", "x"), "ghcr.io").unwrap_err();
    assert!(opaque.starts_with("is of type Opaque, not kubernetes.io/dockerconfigjson"));
    let broken = auth_in_secret(
        &secret("kubernetes.io/dockerconfigjson", ".dockerconfigjson", "{"),
        "ghcr.io",
    )
    .unwrap_err();
    assert!(
        broken.starts_with(".dockerconfigjson: not JSON"),
        "{broken}"
    );
}

#[test]
fn a_recorded_pin_stands_for_a_tag_of_its_repository() {
    let pinned = format!("oci://ghcr.io:443/team/triage@sha256:{}", "a".repeat(64));
    let tag = "oci://ghcr.io:443/team/triage:1.0";
    assert_eq!(wanted(tag, Some(&pinned)), pinned);
    assert_eq!(
        wanted("oci://ghcr.io:443/team/triage", Some(&pinned)),
        pinned
    );
    assert_eq!(
        wanted("oci://ghcr.io:443/team/other:1.0", Some(&pinned)),
        "oci://ghcr.io:443/team/other:1.0"
    );
    let digest = format!("oci://ghcr.io:443/team/triage@sha256:{}", "b".repeat(64));
    assert_eq!(
        wanted(&digest, Some(&pinned)),
        digest,
        "a digest pins itself"
    );
    assert_eq!(wanted(tag, None), tag);
}
