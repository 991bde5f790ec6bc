//! The cosign signatures beside a module artifact (wasm or addon-operator): read from, and added to, the image
//! manifest tagged `sha256-<hex>.sig` in the artifact's own repository (one layer per
//! signature, [`super::super::cosign`]'s format). Each payload's size is bounded before
//! it is downloaded and its bytes checked against its digest.

use super::super::cosign::{self, Payload, Signature};
use super::super::keys::{KeyError, SigningKey};
use super::{Artifact, OciClient, OciError, SCHEME, classify};
use base64::Engine as _;
use oci_client::Reference;
use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use std::collections::BTreeMap;

/// The largest signature payload read (cosign's are a few hundred bytes).
const MAX_PAYLOAD_BYTES: i64 = 64 * 1024;
/// The most signatures one manifest is read with.
const MAX_SIGNATURES: usize = 64;

/// An artifact and its signatures.
#[derive(Debug, Clone)]
pub struct SignedArtifact {
    /// The reference pinned to its manifest (`oci://…@sha256:…`).
    pub pinned: String,
    /// Its manifest's digest, which the signatures must name.
    pub manifest_digest: String,
    /// Where its signatures are: `oci://…:sha256-<hex>.sig`.
    pub signature_reference: String,
    /// Its signatures, in the signature manifest's order.
    pub signatures: Vec<Signature>,
}

/// What `operon module sign` gives besides the key.
#[derive(Debug, Clone, Default)]
pub struct SignRequest {
    /// Annotations signed into the payload (`optional`), as `cosign sign -a` does.
    pub annotations: BTreeMap<String, String>,
    /// A certificate for the key (PEM), attached for keyless-style verification.
    pub certificate: Option<String>,
    /// Its issuers (PEM), attached with it.
    pub chain: Option<String>,
}

/// Why a module cannot be signed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The registry refused or failed.
    #[error(transparent)]
    Oci(#[from] OciError),
    /// The key cannot sign (the reason is in the message, so it is no source).
    #[error("the signing key: {0}")]
    Key(KeyError),
    /// The certificate given is not the key's.
    #[error("the certificate: {0}")]
    Certificate(String),
}

impl OciClient {
    /// Resolves `reference` (a wasm artifact) and reads its signatures.
    pub async fn signatures_of(
        &self,
        reference: &str,
        auth: &RegistryAuth,
    ) -> Result<SignedArtifact, OciError> {
        let artifact = self
            .resolve(reference, auth, u64::MAX, super::ArtifactKind::Any)
            .await?;
        self.signatures(&artifact, auth).await
    }

    /// The signatures of `artifact`, as resolved by this client: none when there is
    /// no signature manifest for it.
    pub(crate) async fn signatures(
        &self,
        artifact: &Artifact,
        auth: &RegistryAuth,
    ) -> Result<SignedArtifact, OciError> {
        let (parsed, signature_reference) = signature_reference(artifact)?;
        let layers = self
            .signature_layers(&parsed, &signature_reference, auth)
            .await?;
        Ok(SignedArtifact {
            pinned: artifact.pinned(),
            manifest_digest: artifact.manifest_digest.clone(),
            signature_reference,
            signatures: signatures_in(&layers),
        })
    }

    /// The layers of the signature manifest `parsed` (none when there is none), each
    /// with its blob unless it is over [`MAX_PAYLOAD_BYTES`].
    async fn signature_layers(
        &self,
        parsed: &Reference,
        reference: &str,
        auth: &RegistryAuth,
    ) -> Result<Vec<(OciDescriptor, Option<Vec<u8>>)>, OciError> {
        let manifest = match self
            .client
            .pull_image_manifest(parsed, auth)
            .await
            .map_err(|e| classify(reference, e))
        {
            Ok((manifest, _)) => manifest,
            Err(OciError::NotFound { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        if manifest.layers.len() > MAX_SIGNATURES {
            return Err(OciError::Registry {
                reference: reference.to_owned(),
                reason: format!(
                    "the signature manifest has {} layers, over the {MAX_SIGNATURES} read",
                    manifest.layers.len()
                ),
            });
        }
        let mut layers = Vec::new();
        for descriptor in manifest.layers {
            if !(0..=MAX_PAYLOAD_BYTES).contains(&descriptor.size) {
                layers.push((descriptor, None));
                continue;
            }
            let mut bytes = Vec::new();
            self.client
                .pull_blob(parsed, &descriptor, &mut bytes)
                .await
                .map_err(|e| classify(reference, e))?;
            let actual = cosign::sha256(&bytes);
            if actual != descriptor.digest {
                return Err(OciError::DigestMismatch {
                    reference: reference.to_owned(),
                    expected: descriptor.digest,
                    actual,
                });
            }
            layers.push((descriptor, Some(bytes)));
        }
        Ok(layers)
    }

    /// Signs the wasm artifact `reference` with `key` as cosign does, and pushes the
    /// signature beside it (added to the signatures already there, unless it is one
    /// of them). What it is signed as, and whether a layer was added.
    pub async fn sign(
        &self,
        reference: &str,
        key: &SigningKey,
        request: &SignRequest,
        auth: &RegistryAuth,
    ) -> Result<(SignedArtifact, bool), SignError> {
        if let Some(certificate) = &request.certificate {
            let certified = certificate_key(certificate).map_err(SignError::Certificate)?;
            if certified != key.public_key().spki() {
                return Err(SignError::Certificate(
                    "it certifies another key than the signing key".to_owned(),
                ));
            }
        }
        let artifact = self
            .resolve(reference, auth, u64::MAX, super::ArtifactKind::Any)
            .await?;
        let repository = format!(
            "{}/{}",
            artifact.parsed.registry(),
            artifact.parsed.repository()
        );
        let payload =
            Payload::new(&repository, &artifact.manifest_digest, &request.annotations).to_bytes();
        let signed = key.sign(&payload).map_err(SignError::Key)?;
        let signature = Signature::new(
            payload,
            base64::engine::general_purpose::STANDARD.encode(signed),
            request.certificate.clone(),
            request.chain.clone(),
        );
        let (parsed, signature_reference) = signature_reference(&artifact)?;
        let existing = self
            .signature_layers(&parsed, &signature_reference, auth)
            .await?;
        let mut signed = SignedArtifact {
            pinned: artifact.pinned(),
            manifest_digest: artifact.manifest_digest.clone(),
            signature_reference: signature_reference.clone(),
            signatures: signatures_in(&existing),
        };
        // As cosign does: the same payload (and certificate) already signed by this
        // key is not signed again (ECDSA signatures differ each time).
        let duplicate = signed.signatures.iter().any(|existing| {
            existing.payload == signature.payload
                && existing.certificate() == signature.certificate()
                && existing
                    .signature()
                    .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
                    .is_some_and(|bytes| key.public_key().verify(&existing.payload, &bytes))
        });
        if duplicate {
            return Ok((signed, false));
        }
        let mut layers = Vec::new();
        for (descriptor, blob) in existing {
            let Some(blob) = blob else {
                return Err(SignError::Oci(OciError::Registry {
                    reference: signature_reference,
                    reason: format!(
                        "layer {} is {} bytes, too large to carry over",
                        descriptor.digest, descriptor.size
                    ),
                }));
            };
            layers.push(ImageLayer::new(
                blob,
                descriptor.media_type,
                descriptor.annotations,
            ));
        }
        layers.push(ImageLayer::new(
            signature.payload.clone(),
            cosign::SIMPLE_SIGNING_MEDIA_TYPE.to_owned(),
            Some(signature.annotations.clone()),
        ));
        let digests: Vec<String> = layers.iter().map(|l| cosign::sha256(&l.data)).collect();
        let config = Config::new(
            cosign::config(&digests),
            cosign::CONFIG_MEDIA_TYPE.to_owned(),
            None,
        );
        let mut manifest = OciImageManifest::build(&layers, &config, None);
        manifest.media_type = Some(cosign::MANIFEST_MEDIA_TYPE.to_owned());
        let failed = |e| classify(&signature_reference, e);
        let blobs = layers
            .iter()
            .map(|l| &l.data)
            .zip(&digests)
            .chain([(&config.data, &manifest.config.digest)]);
        for (data, digest) in blobs {
            if !self
                .client
                .blob_exists(&parsed, digest)
                .await
                .map_err(failed)?
            {
                self.client
                    .push_blob(&parsed, data.clone(), digest)
                    .await
                    .map_err(failed)?;
            }
        }
        // Serialised as plain JSON: the client's canonical form leaves the newlines of
        // a certificate annotation unescaped, which no registry parses.
        let body = serde_json::to_vec(&manifest).map_err(|e| OciError::Registry {
            reference: signature_reference.clone(),
            reason: e.to_string(),
        })?;
        let content_type = http::HeaderValue::from_static(cosign::MANIFEST_MEDIA_TYPE);
        self.client
            .push_manifest_raw(&parsed, body, content_type)
            .await
            .map_err(failed)?;
        signed.signatures.push(signature);
        Ok((signed, true))
    }
}

/// The signatures among the layers of a signature manifest.
fn signatures_in(layers: &[(OciDescriptor, Option<Vec<u8>>)]) -> Vec<Signature> {
    layers
        .iter()
        .filter(|(descriptor, _)| descriptor.media_type == cosign::SIMPLE_SIGNING_MEDIA_TYPE)
        .map(|(descriptor, payload)| Signature {
            layer_digest: descriptor.digest.clone(),
            payload: payload.clone().unwrap_or_default(),
            annotations: descriptor.annotations.clone().unwrap_or_default(),
            problem: payload.is_none().then(|| {
                format!(
                    "its payload is {} bytes, over the {MAX_PAYLOAD_BYTES} a signature's may have",
                    descriptor.size
                )
            }),
        })
        .collect()
}

/// The signature manifest's reference for `artifact`, parsed and as `oci://…` text.
fn signature_reference(artifact: &Artifact) -> Result<(Reference, String), OciError> {
    let tag =
        cosign::signature_tag(&artifact.manifest_digest).ok_or_else(|| OciError::Registry {
            reference: artifact.reference.clone(),
            reason: format!(
                "its manifest digest {} is not sha256: cosign signatures name sha256 digests",
                artifact.manifest_digest
            ),
        })?;
    let (registry, repository) = (artifact.parsed.registry(), artifact.parsed.repository());
    Ok((
        Reference::with_tag(registry.to_owned(), repository.to_owned(), tag.clone()),
        format!("{SCHEME}{registry}/{repository}:{tag}"),
    ))
}

/// The SubjectPublicKeyInfo of the first certificate of `pem_text`.
fn certificate_key(pem_text: &str) -> Result<Vec<u8>, String> {
    let block = pem::parse_many(pem_text)
        .map_err(|e| e.to_string())?
        .into_iter()
        .find(|b| b.tag() == "CERTIFICATE")
        .ok_or("no PEM CERTIFICATE block")?;
    let (_, cert) =
        x509_parser::parse_x509_certificate(block.contents()).map_err(|e| e.to_string())?;
    Ok(cert.public_key().raw.to_vec())
}
