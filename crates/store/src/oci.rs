//! Modules as OCI artifacts. Wasm modules in the CNCF layout that `wkg` and `oras`
//! write: a manifest whose config has media type `application/vnd.wasm.config.v0+json`
//! and whose one layer is the component, `application/wasm`. addon-operator modules
//! ([`ArtifactKind::AddonModule`]): one layer, a tar (gzip or not) of the module
//! directory, under Operon's config media type or as a one-layer container image (the
//! way Deckhouse ships its modules). Pushing either to a registry, pulling one by tag or
//! digest (its size bounded before the download, the layer's and a pinned manifest's
//! digests verified), and a registry's credentials from a docker `config.json`, the
//! usual way.

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::errors::OciDistributionError;
pub use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest as _, Sha256};
use std::path::{Path, PathBuf};

/// The media type of a wasm artifact's config (CNCF wasm OCI artifact layout).
pub(crate) const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The media type of its one layer, the component.
pub(crate) const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The media type of an addon-operator module artifact's config (Operon's).
pub const ADDON_CONFIG_MEDIA_TYPE: &str = "application/vnd.operon.addon.config.v1+json";
/// The media type of its one layer as `operon module push DIR` writes it.
pub const ADDON_LAYER_MEDIA_TYPE: &str = "application/vnd.operon.addon.layer.v1.tar+gzip";
/// Configs an addon module artifact may have: Operon's, or a container image's (a
/// module built `FROM scratch` as Deckhouse builds its module images).
const ADDON_CONFIG_MEDIA_TYPES: &[&str] = &[
    ADDON_CONFIG_MEDIA_TYPE,
    "application/vnd.oci.image.config.v1+json",
    "application/vnd.docker.container.image.v1+json",
];
/// Layers an addon module artifact may have: tars, gzipped or not.
const ADDON_LAYER_MEDIA_TYPES: &[&str] = &[
    ADDON_LAYER_MEDIA_TYPE,
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
];

/// What an artifact must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArtifactKind {
    /// A wasm component (the CNCF wasm layout).
    Wasm,
    /// An addon-operator module: one tar layer of the module directory.
    AddonModule,
    /// Either (what signing and verifying accept).
    Any,
}

impl ArtifactKind {
    /// Why an artifact of `config` and `layers` (media types) is not of this kind.
    fn refuses(self, config: &str, layers: &[&str]) -> Option<String> {
        let wasm = || -> Option<String> {
            if config != WASM_CONFIG_MEDIA_TYPE {
                return Some(format!(
                    "its config is {config}, not {WASM_CONFIG_MEDIA_TYPE}"
                ));
            }
            match layers {
                [WASM_LAYER_MEDIA_TYPE] => None,
                [other] => Some(format!("its layer is {other}, not {WASM_LAYER_MEDIA_TYPE}")),
                _ => Some(format!("it has {} layers, not one", layers.len())),
            }
        };
        let addon = || -> Option<String> {
            if !ADDON_CONFIG_MEDIA_TYPES.contains(&config) {
                return Some(format!(
                    "its config is {config}, not {ADDON_CONFIG_MEDIA_TYPE} or an image config"
                ));
            }
            match layers {
                [layer] if ADDON_LAYER_MEDIA_TYPES.contains(layer) => None,
                [other] => Some(format!(
                    "its layer is {other}, not a tar ({})",
                    ADDON_LAYER_MEDIA_TYPES.join(", ")
                )),
                _ => Some(format!(
                    "it has {} layers, not one tar of the module directory",
                    layers.len()
                )),
            }
        };
        match self {
            Self::Wasm => wasm(),
            Self::AddonModule => addon(),
            Self::Any => match config {
                WASM_CONFIG_MEDIA_TYPE => wasm(),
                _ => addon().map(|reason| {
                    format!("neither a wasm module nor an addon-operator module: {reason}")
                }),
            },
        }
    }
}

impl std::fmt::Display for ArtifactKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Wasm => "a wasm module artifact",
            Self::AddonModule => "an addon-operator module artifact",
            Self::Any => "a module artifact",
        })
    }
}

/// The scheme of a module reference that names an OCI artifact.
pub const SCHEME: &str = "oci://";

/// What went wrong with an OCI registry, by reference.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The reference does not parse.
    #[error(
        "{reference}: not an OCI reference (oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]): {reason}"
    )]
    BadReference {
        /// The reference as given.
        reference: String,
        /// Why.
        reason: String,
    },
    /// No manifest under that tag or digest.
    #[error("{reference}: not found in the registry (no such repository, tag or digest)")]
    NotFound {
        /// The reference.
        reference: String,
    },
    /// The registry refused the credentials (or asked for some).
    #[error(
        "{reference}: the registry refused access ({detail}); give credentials in a docker config.json (--docker-config, $DOCKER_CONFIG)"
    )]
    Unauthorized {
        /// The reference.
        reference: String,
        /// The registry's words.
        detail: String,
    },
    /// The artifact is not of the kind asked for.
    #[error("{reference}: not {kind}: {reason}")]
    WrongMediaType {
        /// The reference.
        reference: String,
        /// What was asked for.
        kind: ArtifactKind,
        /// What was found instead.
        reason: String,
    },
    /// Bytes of another digest than the one asked for or announced.
    #[error("{reference}: digest mismatch: expected {expected}, got {actual}")]
    DigestMismatch {
        /// The reference.
        reference: String,
        /// The digest asked for or announced.
        expected: String,
        /// The digest of what arrived.
        actual: String,
    },
    /// The module is larger than the limit.
    #[error("{reference}: the module is {size} bytes, over the limit of {limit}")]
    TooLarge {
        /// The reference.
        reference: String,
        /// Its announced size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The credentials file cannot be read.
    #[error("{path}: {reason}")]
    Credentials {
        /// The docker config.json.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Anything else the registry or the network said.
    #[error("{reference}: {reason}")]
    Registry {
        /// The reference.
        reference: String,
        /// Why.
        reason: String,
    },
}

/// A module pulled from a registry.
#[derive(Debug, Clone)]
pub struct PulledModule {
    /// The component's bytes.
    pub bytes: Vec<u8>,
    /// The manifest's digest (`sha256:...`): what pins this version.
    pub manifest_digest: String,
    /// The layer's digest, the component's own `sha256:` digest.
    pub layer_digest: String,
}

/// A module pushed to a registry.
#[derive(Debug, Clone)]
pub struct PushedModule {
    /// The manifest's digest (`sha256:...`).
    pub manifest_digest: String,
    /// The layer's digest.
    pub layer_digest: String,
}

/// A registry client for wasm artifacts.
pub struct OciClient {
    client: Client,
}

impl std::fmt::Debug for OciClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OciClient")
    }
}

/// How to reach registries.
#[derive(Debug, Clone, Default)]
pub struct OciOptions {
    /// PEM certificates trusted besides the system's (a private registry's CA).
    pub extra_ca_pem: Vec<Vec<u8>>,
    /// Registries (`host:port`) reached over plain HTTP (a local one on loopback).
    pub plain_http: Vec<String>,
}

impl OciClient {
    /// A client trusting the system's CAs and `options.extra_ca_pem`.
    pub fn new(options: &OciOptions) -> Self {
        // reqwest's rustls takes the process' provider: the engine's is ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let protocol = if options.plain_http.is_empty() {
            ClientProtocol::Https
        } else {
            ClientProtocol::HttpsExcept(options.plain_http.clone())
        };
        let client = Client::new(ClientConfig {
            protocol,
            extra_root_certificates: options
                .extra_ca_pem
                .iter()
                .map(|pem| oci_client::client::Certificate {
                    encoding: oci_client::client::CertificateEncoding::Pem,
                    data: pem.clone(),
                })
                .collect(),
            ..ClientConfig::default()
        });
        Self { client }
    }

    /// Pushes `component` to `reference` (which names a tag) as a wasm artifact.
    pub async fn push(
        &self,
        reference: &str,
        component: &[u8],
        auth: &RegistryAuth,
    ) -> Result<PushedModule, OciError> {
        let config = serde_json::json!({
            "created": jiff::Timestamp::now().to_string(),
            "architecture": "wasm",
            "os": "wasip2",
            "layerDigests": [sha256(component)],
        });
        self.push_layer(
            reference,
            component,
            WASM_LAYER_MEDIA_TYPE,
            (&config, WASM_CONFIG_MEDIA_TYPE),
            auth,
        )
        .await
    }

    /// Pushes `archive` (a gzipped tar of an addon-operator module directory, as
    /// [`super::addon_archive::pack`] makes it) to `reference` (which names a tag).
    pub async fn push_addon(
        &self,
        reference: &str,
        archive: &[u8],
        module: &str,
        auth: &RegistryAuth,
    ) -> Result<PushedModule, OciError> {
        let config = serde_json::json!({
            "created": jiff::Timestamp::now().to_string(),
            "module": module,
            "layerDigests": [sha256(archive)],
        });
        self.push_layer(
            reference,
            archive,
            ADDON_LAYER_MEDIA_TYPE,
            (&config, ADDON_CONFIG_MEDIA_TYPE),
            auth,
        )
        .await
    }

    async fn push_layer(
        &self,
        reference: &str,
        layer: &[u8],
        layer_media_type: &str,
        (config, config_media_type): (&serde_json::Value, &str),
        auth: &RegistryAuth,
    ) -> Result<PushedModule, OciError> {
        let parsed = parse(reference)?;
        let layer_digest = sha256(layer);
        let layers = [ImageLayer::new(
            layer.to_vec(),
            layer_media_type.to_owned(),
            None,
        )];
        let config = Config::new(
            serde_json::to_vec(config).unwrap_or_default(),
            config_media_type.to_owned(),
            None,
        );
        self.client
            .push(&parsed, &layers, config, auth, None)
            .await
            .map_err(|e| classify(reference, e))?;
        // The digest the registry serves the tag under, which pins this version.
        let manifest_digest = self
            .client
            .fetch_manifest_digest(&parsed, auth)
            .await
            .map_err(|e| classify(reference, e))?;
        Ok(PushedModule {
            manifest_digest,
            layer_digest,
        })
    }

    /// Pulls the wasm artifact `reference` names: a tag, or a `@sha256:` digest that the
    /// manifest must have. The layer's size is checked against `limit` before it is
    /// downloaded, and its bytes against its digest.
    pub async fn pull(
        &self,
        reference: &str,
        auth: &RegistryAuth,
        limit: u64,
    ) -> Result<PulledModule, OciError> {
        let artifact = self
            .resolve(reference, auth, limit, ArtifactKind::Wasm)
            .await?;
        let bytes = self.layer(&artifact).await?;
        Ok(PulledModule {
            bytes,
            manifest_digest: artifact.manifest_digest,
            layer_digest: artifact.layer.digest,
        })
    }

    /// Reads and checks the manifest `reference` names (a tag, or a `@sha256:` digest
    /// the manifest must have): an artifact of `kind` of one layer no larger than
    /// `limit`. Nothing of the layer is downloaded yet.
    pub(crate) async fn resolve(
        &self,
        reference: &str,
        auth: &RegistryAuth,
        limit: u64,
        kind: ArtifactKind,
    ) -> Result<Artifact, OciError> {
        let parsed = parse(reference)?;
        let (manifest, manifest_digest) = self
            .client
            .pull_image_manifest(&parsed, auth)
            .await
            .map_err(|e| classify(reference, e))?;
        if let Some(pinned) = parsed.digest()
            && pinned != manifest_digest
        {
            return Err(OciError::DigestMismatch {
                reference: reference.to_owned(),
                expected: pinned.to_owned(),
                actual: manifest_digest,
            });
        }
        let layer_types: Vec<&str> = (manifest.layers.iter())
            .map(|layer| layer.media_type.as_str())
            .collect();
        if let Some(reason) = kind.refuses(&manifest.config.media_type, &layer_types) {
            return Err(OciError::WrongMediaType {
                reference: reference.to_owned(),
                kind,
                reason,
            });
        }
        let [layer] = manifest.layers.as_slice() else {
            unreachable!("every kind has one layer");
        };
        let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if size > limit {
            return Err(OciError::TooLarge {
                reference: reference.to_owned(),
                size,
                limit,
            });
        }
        Ok(Artifact {
            reference: reference.to_owned(),
            parsed,
            manifest_digest,
            layer: layer.clone(),
        })
    }

    /// Downloads the layer of `artifact` (as resolved by this client, which holds the
    /// registry's token) and checks its bytes against its digest.
    pub(crate) async fn layer(&self, artifact: &Artifact) -> Result<Vec<u8>, OciError> {
        let reference = &artifact.reference;
        let mut bytes = Vec::with_capacity(usize::try_from(artifact.layer.size).unwrap_or(0));
        self.client
            .pull_blob(&artifact.parsed, &artifact.layer, &mut bytes)
            .await
            .map_err(|e| classify(reference, e))?;
        let actual = sha256(&bytes);
        if actual != artifact.layer.digest {
            return Err(OciError::DigestMismatch {
                reference: reference.to_owned(),
                expected: artifact.layer.digest.clone(),
                actual,
            });
        }
        Ok(bytes)
    }
}

/// An artifact's manifest, read and checked: what its one layer is.
#[derive(Debug, Clone)]
pub(crate) struct Artifact {
    reference: String,
    parsed: Reference,
    /// The manifest's digest (`sha256:...`): what pins this version.
    pub(crate) manifest_digest: String,
    layer: oci_client::manifest::OciDescriptor,
}

impl Artifact {
    /// The layer's digest, which is the component's own `sha256:` digest.
    pub(crate) fn layer_digest(&self) -> &str {
        &self.layer.digest
    }

    /// The reference pinned to this manifest: `oci://REGISTRY/REPOSITORY@sha256:...`,
    /// which names these bytes for good.
    pub(crate) fn pinned(&self) -> String {
        format!(
            "{SCHEME}{}/{}@{}",
            self.parsed.registry(),
            self.parsed.repository(),
            self.manifest_digest
        )
    }
}

/// Whether a module reference names an OCI artifact.
pub fn is_oci(reference: &str) -> bool {
    reference.starts_with(SCHEME)
}

/// `oci://REGISTRY/REPOSITORY` of a reference, without its tag or digest.
pub fn repository_of(reference: &str) -> &str {
    let unpinned = reference.split('@').next().unwrap_or(reference);
    match unpinned.rsplit_once(':') {
        Some((repository, tag)) if !tag.contains('/') => repository,
        _ => unpinned,
    }
}

/// The registry (`host[:port]`) of an `oci://` reference.
pub fn registry_of(reference: &str) -> Result<String, OciError> {
    Ok(parse(reference)?.registry().to_owned())
}

fn parse(reference: &str) -> Result<Reference, OciError> {
    let bad = |reason: String| OciError::BadReference {
        reference: reference.to_owned(),
        reason,
    };
    let rest = reference
        .strip_prefix(SCHEME)
        .ok_or_else(|| bad(format!("it does not start with {SCHEME}")))?;
    // Without a registry host the reference would silently mean Docker Hub.
    let host = rest.split('/').next().unwrap_or_default();
    if !rest.contains('/') || !(host.contains('.') || host.contains(':') || host == "localhost") {
        return Err(bad(format!(
            "{host:?} is not a registry host (name one: oci://registry.example.com/...)"
        )));
    }
    rest.parse::<Reference>().map_err(|e| bad(e.to_string()))
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn classify(reference: &str, error: OciDistributionError) -> OciError {
    let reference = reference.to_owned();
    match error {
        OciDistributionError::ImageManifestNotFoundError(_) => OciError::NotFound { reference },
        OciDistributionError::DigestError(oci_client::errors::DigestError::VerificationError {
            expected,
            actual,
        }) => OciError::DigestMismatch {
            reference,
            expected,
            actual,
        },
        OciDistributionError::UnauthorizedError { url } => OciError::Unauthorized {
            reference,
            detail: format!("401 from {url}"),
        },
        OciDistributionError::AuthenticationFailure(detail) => {
            OciError::Unauthorized { reference, detail }
        }
        OciDistributionError::RegistryError { envelope, .. }
            if envelope.errors.iter().any(|e| {
                matches!(
                    e.code,
                    oci_client::errors::OciErrorCode::ManifestUnknown
                        | oci_client::errors::OciErrorCode::NameUnknown
                )
            }) =>
        {
            OciError::NotFound { reference }
        }
        OciDistributionError::RegistryError { envelope, .. }
            if envelope.errors.iter().any(|e| {
                matches!(
                    e.code,
                    oci_client::errors::OciErrorCode::Unauthorized
                        | oci_client::errors::OciErrorCode::Denied
                )
            }) =>
        {
            OciError::Unauthorized {
                reference,
                detail: envelope.to_string(),
            }
        }
        OciDistributionError::ServerError { code: 404, .. } => OciError::NotFound { reference },
        OciDistributionError::ServerError {
            code: 401 | 403,
            message,
            ..
        } => OciError::Unauthorized {
            reference,
            detail: message,
        },
        other => {
            // reqwest's message names the URL only; the cause (TLS, DNS, refused) is
            // further down the chain.
            let mut reason = other.to_string();
            let mut source = std::error::Error::source(&other);
            while let Some(cause) = source {
                reason.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            OciError::Registry { reference, reason }
        }
    }
}

/// The credentials for `registry` in a docker `config.json` (`auths.<registry>.auth`, or
/// its `username` and `password`); anonymous when the file or the entry is missing.
/// `path` defaults to `$DOCKER_CONFIG/config.json`, then `~/.docker/config.json`.
pub fn docker_auth(path: Option<&Path>, registry: &str) -> Result<RegistryAuth, OciError> {
    let path = match path {
        Some(path) => path.to_owned(),
        None => match std::env::var_os("DOCKER_CONFIG") {
            Some(dir) => PathBuf::from(dir).join("config.json"),
            None => match std::env::var_os("HOME") {
                Some(home) => PathBuf::from(home).join(".docker/config.json"),
                None => return Ok(RegistryAuth::Anonymous),
            },
        },
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RegistryAuth::Anonymous),
        Err(e) => {
            return Err(OciError::Credentials {
                path,
                reason: e.to_string(),
            });
        }
    };
    docker_config_auth(&text, registry).map_err(|reason| OciError::Credentials { path, reason })
}

/// The credentials for `registry` in the text of a docker `config.json` (or of a
/// `kubernetes.io/dockerconfigjson` Secret's `.dockerconfigjson`): `auths.<registry>`'s
/// `auth`, or its `username` and `password`, or its `identitytoken`; anonymous when
/// no entry names the registry. The error says what is wrong with the text.
pub(crate) fn docker_config_auth(text: &str, registry: &str) -> Result<RegistryAuth, String> {
    let config: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    auths_entry_auth(&config["auths"], registry)
}

/// The same lookup in an `auths` object (a `kubernetes.io/dockercfg` Secret's
/// `.dockercfg` is that object alone).
pub(crate) fn auths_entry_auth(
    auths: &serde_json::Value,
    registry: &str,
) -> Result<RegistryAuth, String> {
    let auths = auths.as_object();
    // Docker keys Docker Hub and some registries by URL, others by host.
    let entry = auths.and_then(|auths| {
        auths.iter().find_map(|(key, entry)| {
            let host = key
                .trim_start_matches("https://")
                .trim_start_matches("http://")
                .split('/')
                .next()
                .unwrap_or_default();
            (host == registry).then_some(entry)
        })
    });
    let Some(entry) = entry else {
        return Ok(RegistryAuth::Anonymous);
    };
    if let Some(encoded) = entry["auth"].as_str().filter(|a| !a.is_empty()) {
        use base64::Engine as _;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|e| format!("auths.{registry}.auth is not base64: {e}"))?;
        let decoded = String::from_utf8(decoded)
            .map_err(|_| format!("auths.{registry}.auth is not UTF-8"))?;
        let (user, password) = decoded
            .split_once(':')
            .ok_or_else(|| format!("auths.{registry}.auth is not USER:PASSWORD"))?;
        return Ok(RegistryAuth::Basic(user.to_owned(), password.to_owned()));
    }
    match (entry["username"].as_str(), entry["password"].as_str()) {
        (Some(user), Some(password)) => {
            Ok(RegistryAuth::Basic(user.to_owned(), password.to_owned()))
        }
        _ => match entry["identitytoken"].as_str() {
            Some(token) => Ok(RegistryAuth::Bearer(token.to_owned())),
            None => Ok(RegistryAuth::Anonymous),
        },
    }
}

mod signatures;
#[cfg(test)]
mod tests;

pub use signatures::{SignError, SignRequest, SignedArtifact};
