//! Cosign's signature format for OCI artifacts, both ways: the "simple signing" payload
//! a signature covers, the signature layer that carries it with its annotations, and the
//! image manifest under the tag `sha256-<hex>.sig` beside the signed manifest in the same
//! repository. This is the layout every cosign 2 release writes, and cosign 3 with
//! `--new-bundle-format=false`; cosign 3 verifies it either way. Nothing here checks a
//! signature ([`super::verification`] does) or talks to a registry ([`super::oci`]).

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;

/// The media type of a signature layer, whose blob is the payload.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 signature over the payload's bytes.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The layer annotation holding a keyless signature's certificate (PEM).
pub const CERTIFICATE_ANNOTATION: &str = "dev.sigstore.cosign/certificate";
/// The layer annotation holding the certificate's issuers (PEM, intermediates then root).
pub const CHAIN_ANNOTATION: &str = "dev.sigstore.cosign/chain";
/// The layer annotation holding a Rekor bundle: the transparency log's signed timestamp.
pub const BUNDLE_ANNOTATION: &str = "dev.sigstore.cosign/bundle";
/// `critical.type` of every cosign payload.
pub const SIGNATURE_TYPE: &str = "cosign container image signature";
/// The signature manifest's media type (cosign writes OCI manifests).
pub(crate) const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// Its config's media type.
pub(crate) const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";

/// The tag the signatures of the manifest `digest` (`sha256:<hex>`) live under:
/// `sha256-<hex>.sig`. `None` for anything but a sha256 digest.
pub fn signature_tag(manifest_digest: &str) -> Option<String> {
    let hex = manifest_digest.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| format!("sha256-{hex}.sig"))
}

/// The simple-signing payload of a cosign signature, as `cosign sign` marshals it (Go's
/// field order, `optional` null when there are no annotations).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Payload {
    /// What is signed.
    pub critical: Critical,
    /// The annotations given at signing (`cosign sign -a KEY=VALUE`).
    pub optional: Option<BTreeMap<String, serde_json::Value>>,
}

/// The signed claims.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Critical {
    /// The repository signed.
    pub identity: Identity,
    /// The manifest signed.
    pub image: Image,
    /// Always [`SIGNATURE_TYPE`].
    #[serde(rename = "type")]
    pub type_: String,
}

/// `critical.identity`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Identity {
    /// `REGISTRY/REPOSITORY` at signing. Cosign does not compare it when verifying (a
    /// signed artifact copied to another registry keeps its signatures), and neither
    /// does Operon.
    #[serde(rename = "docker-reference")]
    pub docker_reference: String,
}

/// `critical.image`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Image {
    /// The manifest digest the signature is for: the claim every verification checks.
    #[serde(rename = "docker-manifest-digest")]
    pub docker_manifest_digest: String,
}

impl Payload {
    /// The payload signing `manifest_digest` of `repository` (`REGISTRY/REPOSITORY`)
    /// with `annotations`.
    pub fn new(
        repository: &str,
        manifest_digest: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Self {
        let optional = (!annotations.is_empty()).then(|| {
            annotations
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect()
        });
        Self {
            critical: Critical {
                identity: Identity {
                    docker_reference: repository.to_owned(),
                },
                image: Image {
                    docker_manifest_digest: manifest_digest.to_owned(),
                },
                type_: SIGNATURE_TYPE.to_owned(),
            },
            optional,
        }
    }

    /// The bytes that are signed and stored as the layer's blob.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Reads a layer's blob; the error says what is wrong with it.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let payload: Self =
            serde_json::from_slice(bytes).map_err(|e| format!("its payload is not JSON: {e}"))?;
        if payload.critical.type_ != SIGNATURE_TYPE {
            return Err(format!(
                "its payload is of type {:?}, not {SIGNATURE_TYPE:?}",
                payload.critical.type_
            ));
        }
        Ok(payload)
    }

    /// Whether every annotation of `wanted` is in the payload with that value (what
    /// `cosign verify -a` and a verification requirement's `annotations` check).
    pub fn has_annotations(&self, wanted: &BTreeMap<String, String>) -> bool {
        wanted.iter().all(|(key, value)| {
            self.optional
                .as_ref()
                .and_then(|optional| optional.get(key))
                .and_then(serde_json::Value::as_str)
                == Some(value.as_str())
        })
    }
}

/// One signature of an artifact, as read from its signature manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// The layer's digest, which names the signature in reports.
    pub layer_digest: String,
    /// The payload's bytes (the layer's blob), exactly as signed.
    pub payload: Vec<u8>,
    /// The layer's annotations: the signature, and a keyless one's certificate, chain
    /// and bundle (others are kept, so that adding a signature loses none).
    pub annotations: BTreeMap<String, String>,
    /// Why the layer could not be read (its payload was not downloaded).
    pub problem: Option<String>,
}

impl Signature {
    /// A new signature: `signature` (base64) over `payload`, with a keyless
    /// signature's `certificate` and `chain` (PEM).
    pub fn new(
        payload: Vec<u8>,
        signature: String,
        certificate: Option<String>,
        chain: Option<String>,
    ) -> Self {
        let mut annotations = BTreeMap::from([(SIGNATURE_ANNOTATION.to_owned(), signature)]);
        annotations.extend(certificate.map(|c| (CERTIFICATE_ANNOTATION.to_owned(), c)));
        annotations.extend(chain.map(|c| (CHAIN_ANNOTATION.to_owned(), c)));
        Self {
            layer_digest: sha256(&payload),
            payload,
            annotations,
            problem: None,
        }
    }

    fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.get(key).map(String::as_str)
    }

    /// The base64 signature over the payload.
    pub fn signature(&self) -> Option<&str> {
        self.annotation(SIGNATURE_ANNOTATION)
    }

    /// A keyless signature's certificate (PEM).
    pub fn certificate(&self) -> Option<&str> {
        self.annotation(CERTIFICATE_ANNOTATION)
    }

    /// Its issuers (PEM).
    pub fn chain(&self) -> Option<&str> {
        self.annotation(CHAIN_ANNOTATION)
    }

    /// Its Rekor bundle (JSON).
    pub fn bundle(&self) -> Option<&str> {
        self.annotation(BUNDLE_ANNOTATION)
    }
}

/// The config blob of a signature manifest with layers of `layer_digests`: an empty
/// image's config, as cosign writes it, listing the layers as its file system.
pub(crate) fn config(layer_digests: &[String]) -> Vec<u8> {
    const ZERO_TIME: &str = "0001-01-01T00:00:00Z";
    let history: Vec<_> = layer_digests
        .iter()
        .map(|_| serde_json::json!({"created": ZERO_TIME}))
        .collect();
    serde_json::to_vec(&serde_json::json!({
        "architecture": "",
        "config": {},
        "created": ZERO_TIME,
        "history": history,
        "os": "",
        "rootfs": {"type": "layers", "diff_ids": layer_digests},
    }))
    .unwrap_or_default()
}

/// `sha256:<hex>` of `bytes`.
pub(crate) fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_is_marshalled_as_cosign_marshals_it() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        let payload = Payload::new("registry.example.com/ops/triage", &digest, &BTreeMap::new());
        assert_eq!(
            String::from_utf8(payload.to_bytes()).unwrap(),
            format!(
                r#"{{"critical":{{"identity":{{"docker-reference":"registry.example.com/ops/triage"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":null}}"#
            )
        );
        let annotated = Payload::new(
            "r.io/a",
            &digest,
            &[("env".to_owned(), "prod".to_owned())].into(),
        );
        assert!(
            String::from_utf8(annotated.to_bytes())
                .unwrap()
                .ends_with(r#""optional":{"env":"prod"}}"#)
        );
        assert!(annotated.has_annotations(&[("env".to_owned(), "prod".to_owned())].into()));
        assert!(!annotated.has_annotations(&[("env".to_owned(), "dev".to_owned())].into()));
        assert!(!payload.has_annotations(&[("env".to_owned(), "prod".to_owned())].into()));
        assert!(payload.has_annotations(&BTreeMap::new()));
        assert_eq!(Payload::parse(&annotated.to_bytes()).unwrap(), annotated);
    }

    #[test]
    fn a_payload_of_another_type_or_no_json_is_refused() {
        let other = br#"{"critical":{"identity":{"docker-reference":"r/a"},"image":{"docker-manifest-digest":"sha256:00"},"type":"atomic container signature"},"optional":null}"#;
        assert_eq!(
            Payload::parse(other).unwrap_err(),
            r#"its payload is of type "atomic container signature", not "cosign container image signature""#
        );
        assert!(
            Payload::parse(b"nope")
                .unwrap_err()
                .starts_with("its payload is not JSON")
        );
    }

    #[test]
    fn signatures_live_under_the_digests_tag() {
        let hex = "0123456789abcdef".repeat(4);
        assert_eq!(
            signature_tag(&format!("sha256:{hex}")).unwrap(),
            format!("sha256-{hex}.sig")
        );
        assert_eq!(signature_tag("sha256:abc"), None);
        assert_eq!(signature_tag(&format!("sha512:{hex}")), None);
    }
}
