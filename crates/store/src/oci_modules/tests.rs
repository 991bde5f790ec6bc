//! Pulls against a registry served in the test (`operon_tests::registry`: the
//! distribution API over plain HTTP, with HTTP Basic authentication), which can also
//! serve what a real registry never would: bytes that are not what their digest says.
//! And signed pulls: a module signed as cosign signs runs, one unsigned, tampered with
//! or signed by a stranger is refused before its bytes are downloaded.

use super::*;
use crate::keys::SigningKey;
use crate::oci::SignRequest;
use operon_tests::registry::{FakeRegistry, sha256 as sha};

const USER: &str = "alice:s3cr3t";

trait Publish {
    /// Publishes [`COMPONENT`] as the wasm artifact `team/triage:1.0`.
    fn publish_triage(&self) -> String;
}

impl Publish for FakeRegistry {
    fn publish_triage(&self) -> String {
        self.publish_wasm("team/triage", "1.0", COMPONENT)
    }
}

struct Setup {
    registry: Arc<FakeRegistry>,
    host: String,
    modules: OciModules,
    _dir: tempfile::TempDir,
}

async fn setup(allowed: AllowList) -> Setup {
    setup_verifying(allowed, None).await
}

async fn setup_verifying(
    allowed: AllowList,
    verification: Option<Arc<VerificationConfig>>,
) -> Setup {
    let registry = FakeRegistry::new(Some(USER));
    let host = registry.serve().await;
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
    let mut modules = OciModules::new(blobs, options, allowed);
    if let Some(verification) = verification {
        modules = modules.with_verification(verification);
    }
    Setup {
        registry,
        host,
        modules,
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
    let (manifests, blobs) = (s.registry.manifest_gets(), s.registry.blob_gets());
    assert_eq!(blobs, 1, "the layer is downloaded once");

    // The pinned reference needs no registry; the tag is resolved again, but bytes
    // the store holds are not downloaded again.
    assert_eq!(
        s.modules.resolve(&pinned, &alice()).await.unwrap(),
        resolved
    );
    assert_eq!(s.registry.manifest_gets(), manifests);
    assert_eq!(s.modules.resolve(&tag, &alice()).await.unwrap(), resolved);
    assert_eq!(s.registry.manifest_gets(), manifests + 1);
    assert_eq!(s.registry.blob_gets(), blobs);

    // The tag moves; the pin still names the old bytes.
    s.registry
        .publish_wasm("team/triage", "1.0", b"\0asm\x0d\x00\x01\x00 version two");
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
        .replace_blob(&sha(COMPONENT), b"\0asm\x0d\x00\x01\x00 tampered");
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
    assert_eq!(s.registry.manifest_gets(), 0);
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

/// A verification configuration requiring a signature by `key`, in `dir`.
fn requiring(dir: &std::path::Path, key: &SigningKey) -> Arc<VerificationConfig> {
    let pem: String = (key.public_key().to_pem().lines())
        .map(|l| format!("      {l}\n"))
        .collect();
    let path = dir.join("verification.yaml");
    std::fs::write(
        &path,
        format!("apiVersion: v1\nallOf:\n  - kind: pubKey\n    owner: release\n    key: |\n{pem}"),
    )
    .unwrap();
    Arc::new(VerificationConfig::load(&path).unwrap())
}

fn client(host: &str) -> OciClient {
    OciClient::new(&OciOptions {
        extra_ca_pem: Vec::new(),
        plain_http: vec![host.to_owned()],
    })
}

#[tokio::test]
async fn a_signed_module_is_pulled_and_an_unsigned_or_tampered_one_refused() {
    let config_dir = tempfile::tempdir().unwrap();
    let (key, _) = SigningKey::generate().unwrap();
    let (stranger, _) = SigningKey::generate().unwrap();
    let verification = requiring(config_dir.path(), &key);
    let s = setup_verifying(AllowList::default(), Some(verification)).await;
    let manifest = s.registry.publish_triage();
    let tag = format!("oci://{}/team/triage:1.0", s.host);

    // Unsigned: refused before the component is downloaded; a signature may come.
    let error = s.modules.resolve(&tag, &alice()).await.unwrap_err();
    assert_eq!(error.reason(), "SignatureNotVerified", "{error}");
    assert!(error.may_resolve());
    assert_eq!(
        error.to_string(),
        format!(
            "{tag}: signature not verified: manifest {manifest} has no signature (no cosign signature under its sha256-….sig tag) (--module-verification {})",
            config_dir.path().join("verification.yaml").display()
        )
    );
    assert_eq!(s.registry.blob_gets(), 0);

    // Signed by someone else: refused for good.
    let (signed, added) = client(&s.host)
        .sign(&tag, &stranger, &SignRequest::default(), &alice())
        .await
        .unwrap();
    assert!(added);
    let hex = manifest.strip_prefix("sha256:").unwrap();
    assert_eq!(
        signed.signature_reference,
        format!("oci://{}/team/triage:sha256-{hex}.sig", s.host)
    );
    let error = s.modules.resolve(&tag, &alice()).await.unwrap_err();
    assert_eq!(error.reason(), "SignatureNotVerified");
    assert!(!error.may_resolve());
    assert!(
        error.to_string().contains(&format!(
            "manifest {manifest} (1 signature): allOf[0] (pubKey ECDSA P-256, owner release) is not met (signature 1 (sha256:"
        )) && error.to_string().contains(": it is not signed with this key)"),
        "{error}"
    );

    // Signed with the key, beside the stranger's signature: pulled and kept.
    let (signed, added) = client(&s.host)
        .sign(&tag, &key, &SignRequest::default(), &alice())
        .await
        .unwrap();
    assert!(added);
    assert_eq!(signed.signatures.len(), 2);
    let before = s.registry.blob_gets();
    let resolved = s.modules.resolve(&tag, &alice()).await.unwrap();
    assert_eq!(resolved.digest, ModuleDigest::of(COMPONENT));
    assert_eq!(
        s.registry.blob_gets(),
        before + 3,
        "two payloads and the component"
    );
    // Signing again adds no layer.
    let (_, added) = client(&s.host)
        .sign(&tag, &key, &SignRequest::default(), &alice())
        .await
        .unwrap();
    assert!(!added);

    // The tag moved to other bytes, and the signatures were copied beside them: they
    // name the old manifest.
    let moved = s
        .registry
        .publish_wasm("team/triage", "1.0", b"\0asm\x0d\x00\x01\x00 tampered");
    let signatures = s
        .registry
        .manifest(&format!("team/triage:sha256-{hex}.sig"))
        .unwrap();
    let moved_hex = moved.strip_prefix("sha256:").unwrap();
    s.registry.put_manifest(
        "team/triage",
        &format!("sha256-{moved_hex}.sig"),
        &signatures,
    );
    let error = s.modules.resolve(&tag, &alice()).await.unwrap_err();
    assert_eq!(error.reason(), "SignatureNotVerified");
    assert!(
        error
            .to_string()
            .contains(&format!("it signs manifest {manifest}, not this one")),
        "{error}"
    );
    // The pinned reference of the verified manifest still resolves.
    assert_eq!(
        s.modules.resolve(&resolved.pinned, &alice()).await.unwrap(),
        resolved
    );
}

/// What `sign` pushes is cosign's layout: an OCI manifest under `sha256-<hex>.sig` whose
/// layer is the simple-signing payload with the signature annotation.
#[tokio::test]
async fn a_signature_is_pushed_in_cosigns_layout() {
    let s = setup(AllowList::default()).await;
    let manifest = s.registry.publish_triage();
    let (key, _) = SigningKey::generate().unwrap();
    let tag = format!("oci://{}/team/triage:1.0", s.host);
    let request = SignRequest {
        annotations: [("env".to_owned(), "prod".to_owned())].into(),
        ..SignRequest::default()
    };
    client(&s.host)
        .sign(&tag, &key, &request, &alice())
        .await
        .unwrap();
    let hex = manifest.strip_prefix("sha256:").unwrap();
    let pushed: serde_json::Value = serde_json::from_slice(
        &s.registry
            .manifest(&format!("team/triage:sha256-{hex}.sig"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        pushed["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(
        pushed["config"]["mediaType"],
        "application/vnd.oci.image.config.v1+json"
    );
    let layer = &pushed["layers"][0];
    assert_eq!(
        layer["mediaType"],
        "application/vnd.dev.cosign.simplesigning.v1+json"
    );
    let payload = s.registry.blob(layer["digest"].as_str().unwrap()).unwrap();
    assert_eq!(
        String::from_utf8(payload.clone()).unwrap(),
        format!(
            r#"{{"critical":{{"identity":{{"docker-reference":"{}/team/triage"}},"image":{{"docker-manifest-digest":"{manifest}"}},"type":"cosign container image signature"}},"optional":{{"env":"prod"}}}}"#,
            s.host
        )
    );
    use base64::Engine as _;
    let signature = base64::engine::general_purpose::STANDARD
        .decode(
            layer["annotations"]["dev.cosignproject.cosign/signature"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
    assert!(key.public_key().verify(&payload, &signature));
    let config = s
        .registry
        .blob(pushed["config"]["digest"].as_str().unwrap())
        .unwrap();
    let config: serde_json::Value = serde_json::from_slice(&config).unwrap();
    assert_eq!(config["rootfs"]["diff_ids"][0], layer["digest"]);
}

#[tokio::test]
async fn a_certificate_is_attached_only_for_its_own_key() {
    use operon_tests::signing::{LeafSpec, SigningPki};
    let pki = SigningPki::new();
    let leaf = pki.issue(&LeafSpec::new(
        "release@example.com",
        "https://accounts.example.com",
    ));
    let config_dir = tempfile::tempdir().unwrap();
    std::fs::write(config_dir.path().join("fulcio.pem"), pki.root_pem()).unwrap();
    let path = config_dir.path().join("verification.yaml");
    std::fs::write(
        &path,
        "apiVersion: v1\ntrustRoot: {certificateAuthorities: fulcio.pem}\nallOf:\n  - kind: genericIssuer\n    issuer: https://accounts.example.com\n    subject: {equal: release@example.com}\n",
    )
    .unwrap();
    let verification = Arc::new(VerificationConfig::load(&path).unwrap());
    let s = setup_verifying(AllowList::default(), Some(verification)).await;
    s.registry.publish_triage();
    let tag = format!("oci://{}/team/triage:1.0", s.host);
    let key = SigningKey::from_pem(&leaf.key_pem).unwrap();
    let (other, _) = SigningKey::generate().unwrap();
    let request = SignRequest {
        certificate: Some(leaf.cert_pem.clone()),
        chain: Some(leaf.chain_pem.clone()),
        ..SignRequest::default()
    };
    let error = client(&s.host)
        .sign(&tag, &other, &request, &alice())
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "the certificate: it certifies another key than the signing key"
    );
    client(&s.host)
        .sign(&tag, &key, &request, &alice())
        .await
        .unwrap();
    let resolved = s.modules.resolve(&tag, &alice()).await.unwrap();
    assert_eq!(resolved.digest, ModuleDigest::of(COMPONENT));
}
