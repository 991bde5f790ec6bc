//! The `oci://` modules of Operations and Hooks: pulled from their registry (only from
//! one the allow-list names), the manifest's and the layer's digests checked, the
//! component kept in a content-addressed [`BlobStore`] by its own digest, and found
//! again by its pinned reference (`oci://REGISTRY/REPOSITORY@sha256:...`) without the
//! network. A tag is resolved once by whoever starts the object (a Diagnosis, a Hook),
//! which records the pinned reference; everything after pulls by that digest. The
//! registry credentials come from the Secrets the object names (`imagePullSecrets`).
//! With a verification configuration, a manifest's cosign signatures must meet it
//! before its component is downloaded ([`super::verification`]); a manifest verified
//! once is not verified again.

use super::blobs::{BlobError, BlobStore};
use super::catalog::ModuleCatalog;
use super::oci::{self, OciClient, OciError, OciOptions};
use super::verification::{Report, VerificationConfig};
use k8s_openapi::api::core::v1::Secret;
use oci_client::secrets::RegistryAuth;
use operon_data::api::{Operation, SecretReference};
use operon_sandbox::ModuleDigest;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// Why an `oci://` module cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum OciModuleError {
    /// The registry is not on the allow-list.
    #[error(
        "{reference}: registry {registry} is not allowed: this engine pulls modules only from the registries its --allow-registry flags name ({allowed})"
    )]
    NotAllowed {
        /// The reference.
        reference: String,
        /// Its registry.
        registry: String,
        /// The allowed registries, for the message.
        allowed: String,
    },
    /// The registry refused or failed the pull.
    #[error(transparent)]
    Oci(#[from] OciError),
    /// The pulled bytes cannot be kept.
    #[error("{reference}: keeping the module: {source}")]
    Store {
        /// The reference.
        reference: String,
        /// Why.
        #[source]
        source: BlobError,
    },
    /// The module's signatures do not meet the verification configuration.
    #[error("{reference}: signature not verified: {report} (--module-verification {})", config.display())]
    SignatureNotVerified {
        /// The reference.
        reference: String,
        /// The verification configuration.
        config: PathBuf,
        /// What its signatures met and why they fell short.
        report: Box<Report>,
    },
    /// An addon-operator module source names a tag without a digest.
    #[error(
        "{reference}: not pinned: a module source names its version by digest (oci://REGISTRY/REPOSITORY[:TAG]@sha256:...), as nothing records what a tag resolved to; `operon module push DIR oci://...` prints the pinned reference"
    )]
    NotPinned {
        /// The reference.
        reference: String,
    },
    /// An addon-operator module's archive is refused or broken.
    #[error("{reference}: {source}")]
    Archive {
        /// The reference.
        reference: String,
        /// The entry and why.
        #[source]
        source: super::addon_archive::ArchiveError,
    },
    /// The cache directory modules are unpacked into cannot be written.
    #[error("{reference}: unpacking into {}: {source}", path.display())]
    Cache {
        /// The reference.
        reference: String,
        /// The cache directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A Secret named for the credentials cannot be used.
    #[error("{field}: Secret {namespace}/{name}: {reason}")]
    Credentials {
        /// The field naming it, e.g. `spec.imagePullSecrets[0]`.
        field: String,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Why.
        reason: String,
    },
}

impl OciModuleError {
    /// A short CamelCase reason, for conditions and the pull error counter.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotAllowed { .. } => "RegistryNotAllowed",
            Self::Oci(OciError::NotFound { .. }) => "ModuleNotFound",
            Self::Oci(OciError::Unauthorized { .. }) => "RegistryUnauthorized",
            Self::Oci(OciError::WrongMediaType {
                kind: oci::ArtifactKind::Wasm,
                ..
            }) => "NotAWasmArtifact",
            Self::Oci(OciError::WrongMediaType { .. }) => "WrongArtifactType",
            Self::Oci(OciError::DigestMismatch { .. }) => "DigestMismatch",
            Self::Oci(OciError::TooLarge { .. }) => "ModuleTooLarge",
            Self::Oci(OciError::BadReference { .. }) => "InvalidModuleReference",
            Self::Oci(_) => "RegistryError",
            Self::Store { .. } | Self::Cache { .. } => "ModuleStoreError",
            Self::NotPinned { .. } => "ModuleNotPinned",
            Self::Archive { .. } => "UnsafeModuleArchive",
            Self::Credentials { .. } => "PullSecretInvalid",
            Self::SignatureNotVerified { .. } => "SignatureNotVerified",
        }
    }

    /// Whether trying again later may succeed (the registry was down, a tag, a
    /// Secret or a signature may be pushed): everything but a malformed reference, a
    /// registry off the allow-list, bytes that are not what they claim and signatures
    /// that do not verify.
    pub fn may_resolve(&self) -> bool {
        match self {
            Self::SignatureNotVerified { report, .. } => report.signatures.is_empty(),
            _ => !matches!(
                self,
                Self::NotAllowed { .. }
                    | Self::NotPinned { .. }
                    | Self::Archive { .. }
                    | Self::Oci(
                        OciError::BadReference { .. }
                            | OciError::DigestMismatch { .. }
                            | OciError::TooLarge { .. }
                    )
            ),
        }
    }
}

/// The registries modules may come from: `host[:port]` entries, or `*` for any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList(Vec<String>);

impl AllowList {
    /// A list of `host[:port]` (or `*`).
    pub fn new(registries: impl IntoIterator<Item = String>) -> Self {
        Self(registries.into_iter().collect())
    }

    /// Any registry.
    pub fn any() -> Self {
        Self(vec!["*".to_owned()])
    }

    /// Whether `registry` (as an `oci://` reference names it) is on the list.
    pub(crate) fn permits(&self, registry: &str) -> bool {
        self.0
            .iter()
            .any(|allowed| allowed == "*" || allowed.eq_ignore_ascii_case(registry))
    }

    fn describe(&self) -> String {
        match self.0.is_empty() {
            true => "none".to_owned(),
            false => self.0.join(", "),
        }
    }
}

/// An `oci://` module resolved and held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The reference pinned to the manifest's digest.
    pub pinned: String,
    /// The component's digest (the layer's), under which the store keeps it.
    pub digest: ModuleDigest,
}

/// Pulls and keeps `oci://` modules.
#[derive(Debug)]
pub struct OciModules {
    options: OciOptions,
    allowed: AllowList,
    blobs: BlobStore,
    /// The Module catalog sharing `blobs`, told which digests are held for `oci://`
    /// references so that its garbage collection keeps them.
    catalog: Option<Arc<ModuleCatalog>>,
    /// Pinned reference → the component's digest.
    pins: RwLock<HashMap<String, ModuleDigest>>,
    /// What a manifest's signatures must meet, when anything.
    verification: Option<Arc<VerificationConfig>>,
    /// The manifests whose signatures met it.
    verified: RwLock<HashSet<String>>,
}

impl OciModules {
    /// Modules from the registries `allowed` lets, kept in `blobs`.
    pub fn new(blobs: BlobStore, options: OciOptions, allowed: AllowList) -> Self {
        Self {
            options,
            allowed,
            blobs,
            catalog: None,
            pins: RwLock::default(),
            verification: None,
            verified: RwLock::default(),
        }
    }

    /// Keeps the modules in the store of `catalog` (so that the module API serves them
    /// by digest to offloaded steps) and retained by its garbage collection.
    pub fn sharing(options: OciOptions, allowed: AllowList, catalog: Arc<ModuleCatalog>) -> Self {
        Self {
            options,
            allowed,
            blobs: catalog.blobs().clone(),
            catalog: Some(catalog),
            pins: RwLock::default(),
            verification: None,
            verified: RwLock::default(),
        }
    }

    /// These modules, each pulled only when its manifest's signatures meet
    /// `verification`.
    pub fn with_verification(mut self, verification: Arc<VerificationConfig>) -> Self {
        self.verification = Some(verification);
        self
    }

    /// Checks the registry of `reference` against the allow-list.
    pub fn check_allowed(&self, reference: &str) -> Result<(), OciModuleError> {
        let registry = oci::registry_of(reference)?;
        if self.allowed.permits(&registry) {
            return Ok(());
        }
        Err(OciModuleError::NotAllowed {
            reference: reference.to_owned(),
            registry,
            allowed: self.allowed.describe(),
        })
    }

    /// Resolves `reference` (a tag, or a pinned digest) and holds its component: from
    /// this store when the pinned reference was pulled before, else from the registry
    /// with `auth` (a fresh client each time: the token one object's credentials earned
    /// serves no other object).
    pub async fn resolve(
        &self,
        reference: &str,
        auth: &RegistryAuth,
    ) -> Result<Resolved, OciModuleError> {
        self.check_allowed(reference)?;
        if let Some(digest) = self.held(reference) {
            return Ok(Resolved {
                pinned: reference.to_owned(),
                digest,
            });
        }
        let outcome = self.pull(reference, auth).await;
        if let Err(e) = &outcome {
            record_pull_error(e);
        }
        outcome
    }

    async fn pull(&self, reference: &str, auth: &RegistryAuth) -> Result<Resolved, OciModuleError> {
        let client = OciClient::new(&self.options);
        let artifact = client
            .resolve(
                reference,
                auth,
                self.blobs.max_bytes(),
                oci::ArtifactKind::Wasm,
            )
            .await?;
        self.verify(&client, &artifact, reference, auth).await?;
        let digest = ModuleDigest::parse(artifact.layer_digest()).ok_or_else(|| {
            OciError::WrongMediaType {
                reference: reference.to_owned(),
                kind: oci::ArtifactKind::Wasm,
                reason: format!(
                    "its layer's digest {} is not a sha256 digest",
                    artifact.layer_digest()
                ),
            }
        })?;
        if !self.blobs.contains(&digest) {
            let bytes = client.layer(&artifact).await?;
            self.blobs
                .put_verified(&digest, &bytes)
                .map_err(|source| OciModuleError::Store {
                    reference: reference.to_owned(),
                    source,
                })?;
            tracing::info!(module = %reference, pinned = %artifact.pinned(), %digest,
                bytes = bytes.len(), "module pulled");
        }
        let pinned = artifact.pinned();
        self.hold(&pinned, digest);
        Ok(Resolved { pinned, digest })
    }

    /// How registries are reached.
    pub(crate) fn options(&self) -> &OciOptions {
        &self.options
    }

    /// Checks the signatures of `artifact` against the verification configuration
    /// (once per manifest), before anything of it is downloaded.
    pub(crate) async fn verify(
        &self,
        client: &OciClient,
        artifact: &oci::Artifact,
        reference: &str,
        auth: &RegistryAuth,
    ) -> Result<(), OciModuleError> {
        let Some(verification) = &self.verification else {
            return Ok(());
        };
        let digest = &artifact.manifest_digest;
        let known = |verified: &HashSet<String>| verified.contains(digest);
        if known(&self.verified.read().unwrap_or_else(|e| e.into_inner())) {
            return Ok(());
        }
        let signed = client.signatures(artifact, auth).await?;
        let report = verification.verify(digest, &signed.signatures, jiff::Timestamp::now());
        if !report.verified() {
            return Err(OciModuleError::SignatureNotVerified {
                reference: reference.to_owned(),
                config: verification.path().to_owned(),
                report: Box::new(report),
            });
        }
        let met: Vec<&str> = (report.requirements.iter())
            .filter(|r| !r.met_by.is_empty())
            .map(|r| r.requirement.as_str())
            .collect();
        tracing::info!(module = %reference, manifest = %digest, signatures = report.signatures.len(),
            met = %met.join("; "), "module signature verified");
        self.verified
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(digest.clone());
        Ok(())
    }

    fn hold(&self, pinned: &str, digest: ModuleDigest) {
        self.pins
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(pinned.to_owned(), digest);
        if let Some(catalog) = &self.catalog {
            catalog.retain(digest);
        }
    }

    /// The digest of a pinned reference pulled before, when the store still holds it.
    fn held(&self, pinned: &str) -> Option<ModuleDigest> {
        let digest = *self
            .pins
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(pinned)?;
        self.blobs.contains(&digest).then_some(digest)
    }

    /// The file of a pinned reference pulled before.
    pub(crate) fn path(&self, pinned: &str) -> Option<PathBuf> {
        self.held(pinned).map(|digest| self.blobs.path(&digest))
    }
}

/// The credentials for the registry of `reference` from the Secrets `secrets` of
/// `namespace` (`field` names the list, for errors): the first Secret with an entry
/// for the registry wins; anonymous when none has one. A Secret that is missing,
/// unreadable or of another type is an error naming it.
pub async fn secret_auth(
    client: &kube::Client,
    namespace: &str,
    field: &str,
    secrets: &[SecretReference],
    reference: &str,
) -> Result<RegistryAuth, OciModuleError> {
    let registry = oci::registry_of(reference)?;
    let api: kube::Api<Secret> = kube::Api::namespaced(client.clone(), namespace);
    for (i, secret) in secrets.iter().enumerate() {
        let bad = |reason: String| OciModuleError::Credentials {
            field: format!("{field}[{i}]"),
            namespace: namespace.to_owned(),
            name: secret.name.clone(),
            reason,
        };
        let found = match api.get_opt(&secret.name).await {
            Ok(found) => found,
            Err(kube::Error::Api(e)) if e.code == 403 => {
                return Err(bad(format!(
                    "the engine may not read it ({}); grant its ServiceAccount get on this Secret",
                    e.message
                )));
            }
            Err(e) => return Err(bad(e.to_string())),
        };
        let found = found.ok_or_else(|| bad("not found".to_owned()))?;
        if let Some(auth) = auth_in_secret(&found, &registry).map_err(bad)? {
            return Ok(auth);
        }
    }
    Ok(RegistryAuth::Anonymous)
}

/// The credentials `secret` holds for `registry`, if any: a
/// `kubernetes.io/dockerconfigjson` Secret's `.dockerconfigjson`, or a
/// `kubernetes.io/dockercfg` Secret's `.dockercfg`.
pub(crate) fn auth_in_secret(
    secret: &Secret,
    registry: &str,
) -> Result<Option<RegistryAuth>, String> {
    let type_ = secret.type_.as_deref().unwrap_or("Opaque");
    let (key, whole_config) = match type_ {
        "kubernetes.io/dockerconfigjson" => (".dockerconfigjson", true),
        "kubernetes.io/dockercfg" => (".dockercfg", false),
        other => {
            return Err(format!(
                "is of type {other}, not kubernetes.io/dockerconfigjson (kubectl create secret docker-registry makes one)"
            ));
        }
    };
    let data = secret
        .data
        .as_ref()
        .and_then(|data| data.get(key))
        .ok_or_else(|| format!("has no {key}"))?;
    let text = std::str::from_utf8(&data.0).map_err(|_| format!("{key} is not UTF-8"))?;
    let auth = match whole_config {
        true => oci::docker_config_auth(text, registry),
        false => serde_json::from_str(text)
            .map_err(|e| format!("not JSON: {e}"))
            .and_then(|auths| oci::auths_entry_auth(&auths, registry)),
    }
    .map_err(|reason| format!("{key}: {reason}"))?;
    Ok(match auth {
        RegistryAuth::Anonymous => None,
        auth => Some(auth),
    })
}

/// An `oci://` module of an Operation that cannot be pinned.
#[derive(Debug, thiserror::Error)]
#[error("Operation {operation}: spec.processor.wasm.module: {error}")]
pub struct PinError {
    /// The Operation.
    pub(crate) operation: String,
    /// Why: typed, but no source, as it is in the message (a printed chain shows it
    /// once).
    pub error: OciModuleError,
}

/// Pins the `oci://` modules of `operations` and pulls them: each one's `wasm.module`
/// becomes its pinned reference. `pins` (Operation name → pinned reference: a
/// Diagnosis' `status.pinnedModules`) decides what a tag means when it names the same
/// repository, and receives the tags resolved now; `auth` gives the credentials for an
/// Operation and the reference pulled.
pub async fn pin_operations<'a, A, F>(
    oci: &OciModules,
    operations: impl IntoIterator<Item = &'a mut Operation>,
    pins: &mut BTreeMap<String, String>,
    auth: A,
) -> Result<(), PinError>
where
    A: Fn(&Operation, String) -> F,
    F: Future<Output = Result<RegistryAuth, OciModuleError>>,
{
    for operation in operations {
        let name = operation.metadata.name.clone().unwrap_or_default();
        let Some(reference) = operation
            .spec
            .processor
            .wasm
            .as_ref()
            .map(|wasm| wasm.module.clone())
            .filter(|module| oci::is_oci(module))
        else {
            continue;
        };
        let is_tag = !reference.contains('@');
        let wanted = wanted(&reference, pins.get(&name).map(String::as_str)).to_owned();
        let failed = |error| PinError {
            operation: name.clone(),
            error,
        };
        // Refused before its Secrets are read.
        oci.check_allowed(&wanted).map_err(failed)?;
        let credentials = auth(operation, wanted.clone()).await.map_err(failed)?;
        let resolved = oci.resolve(&wanted, &credentials).await.map_err(failed)?;
        if is_tag {
            pins.insert(name.clone(), resolved.pinned.clone());
        }
        if let Some(wasm) = operation.spec.processor.wasm.as_mut() {
            wasm.module = resolved.pinned;
        }
    }
    Ok(())
}

/// What to pull for `reference`: `pinned` (what an earlier resolution of it
/// recorded) when `reference` is a tag and `pinned` is of the same repository, else
/// `reference` itself.
pub fn wanted<'a>(reference: &'a str, pinned: Option<&'a str>) -> &'a str {
    match pinned {
        Some(pinned)
            if !reference.contains('@')
                && pinned.contains('@')
                && oci::repository_of(pinned) == oci::repository_of(reference) =>
        {
            pinned
        }
        _ => reference,
    }
}

/// Counts a failed pull by its reason.
pub(crate) fn record_pull_error(error: &OciModuleError) {
    pull_errors_total()
        .with_label_values(&[error.reason()])
        .inc();
}

fn pull_errors_total() -> &'static prometheus::IntCounterVec {
    static COUNTER: std::sync::OnceLock<prometheus::IntCounterVec> = std::sync::OnceLock::new();
    COUNTER.get_or_init(|| {
        prometheus::IntCounterVec::new(
            prometheus::Opts::new(
                "operon_module_pull_errors_total",
                "Failed pulls of an oci:// module (wasm or addon-operator) from its registry, by reason.",
            ),
            &["reason"],
        )
        .expect("static metric definition is valid")
    })
}

/// The collectors of the pulls' metrics.
pub fn collectors() -> Vec<Box<dyn prometheus::core::Collector>> {
    vec![Box::new(pull_errors_total().clone())]
}

/// Registers the pulls' metrics in `registry` (once per registry).
pub fn register_metrics(registry: &prometheus::Registry) -> Result<(), prometheus::Error> {
    for collector in collectors() {
        registry.register(collector)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
