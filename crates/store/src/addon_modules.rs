//! addon-operator modules from `oci://` references (`--module-source`): pulled under
//! the rules of the `oci://` wasm modules of [`super::oci_modules`] (the same
//! allow-list, registry options, verification configuration and cache of verified
//! manifests), then unpacked ([`super::addon_archive`]) into a cache directory, one
//! directory per layer digest, which the addon loader reads as it reads a module
//! directory.
//!
//! Unlike an Operation's or a Hook's module, a module source must be pinned by
//! digest (`oci://REGISTRY/REPOSITORY[:TAG]@sha256:...`): no object records what a
//! tag resolved to, so every restart, and every replica, could run another version.

use super::addon_archive::{self, Limits};
use super::oci::{self, ArtifactKind, OciClient, OciError};
use super::oci_modules::{OciModuleError, OciModules};
use oci_client::secrets::RegistryAuth;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The largest module archive downloaded (before it is unpacked).
pub const DEFAULT_MAX_ARCHIVE_BYTES: u64 = 64 << 20;

/// An addon-operator module pulled and unpacked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PulledAddon {
    /// The reference as given.
    pub reference: String,
    /// The reference pinned to the manifest's digest.
    pub pinned: String,
    /// The layer's digest, which names the unpacked directory.
    pub layer_digest: String,
    /// The module directory.
    pub path: PathBuf,
}

/// Pulls addon-operator modules into a cache directory.
#[derive(Debug, Clone)]
pub struct AddonModules {
    oci: Arc<OciModules>,
    root: PathBuf,
    max_archive_bytes: u64,
    limits: Limits,
}

impl AddonModules {
    /// Modules pulled as `oci` pulls wasm modules, unpacked under `root` (made when
    /// missing).
    pub fn new(oci: Arc<OciModules>, root: PathBuf) -> Self {
        Self {
            oci,
            root,
            max_archive_bytes: DEFAULT_MAX_ARCHIVE_BYTES,
            limits: Limits::default(),
        }
    }

    /// These modules, with other bounds on the archive and on what it unpacks to.
    pub fn with_limits(mut self, max_archive_bytes: u64, limits: Limits) -> Self {
        self.max_archive_bytes = max_archive_bytes;
        self.limits = limits;
        self
    }

    /// Where modules are unpacked.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Checks what can be checked of `reference` without the network: that it is
    /// pinned by digest and its registry on the allow-list.
    pub fn check(&self, reference: &str) -> Result<(), OciModuleError> {
        if !oci::is_oci(reference) || !reference.contains("@sha256:") {
            // A malformed reference says so first.
            oci::registry_of(reference)?;
            return Err(OciModuleError::NotPinned {
                reference: reference.to_owned(),
            });
        }
        self.oci.check_allowed(reference)
    }

    /// Pulls the module `reference` names with `auth`, unless its layer is unpacked
    /// already: its manifest is read (and its signatures checked) each time, so that a
    /// module whose signature is no longer accepted is refused.
    pub async fn pull(
        &self,
        reference: &str,
        auth: &RegistryAuth,
    ) -> Result<PulledAddon, OciModuleError> {
        let outcome = self.pull_unrecorded(reference, auth).await;
        if let Err(e) = &outcome {
            super::oci_modules::record_pull_error(e);
        }
        outcome
    }

    async fn pull_unrecorded(
        &self,
        reference: &str,
        auth: &RegistryAuth,
    ) -> Result<PulledAddon, OciModuleError> {
        self.check(reference)?;
        let client = OciClient::new(self.oci.options());
        let artifact = client
            .resolve(
                reference,
                auth,
                self.max_archive_bytes,
                ArtifactKind::AddonModule,
            )
            .await?;
        self.oci.verify(&client, &artifact, reference, auth).await?;
        let layer_digest = artifact.layer_digest().to_owned();
        let hex = layer_digest
            .strip_prefix("sha256:")
            .filter(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| OciError::WrongMediaType {
                reference: reference.to_owned(),
                kind: ArtifactKind::AddonModule,
                reason: format!("its layer's digest {layer_digest} is not a sha256 digest"),
            })?
            .to_ascii_lowercase();
        let path = self.root.join(&hex);
        let pulled = PulledAddon {
            reference: reference.to_owned(),
            pinned: artifact.pinned(),
            layer_digest: layer_digest.clone(),
            path: path.clone(),
        };
        if path.is_dir() {
            return Ok(pulled);
        }
        let bytes = client.layer(&artifact).await?;
        let store = |source| OciModuleError::Cache {
            reference: reference.to_owned(),
            path: self.root.clone(),
            source,
        };
        std::fs::create_dir_all(&self.root).map_err(store)?;
        // Unpacked beside its place and renamed into it: a directory named by a
        // digest is always whole, whoever crashed while unpacking.
        let partial = tempfile::Builder::new()
            .prefix(&format!(".partial-{hex}-"))
            .tempdir_in(&self.root)
            .map_err(store)?;
        let unpacked = partial.path().join("module");
        addon_archive::unpack(&bytes, &unpacked, &self.limits).map_err(|source| {
            OciModuleError::Archive {
                reference: reference.to_owned(),
                source,
            }
        })?;
        match std::fs::rename(&unpacked, &path) {
            Ok(()) => {}
            // Another pull of the same layer finished first.
            Err(_) if path.is_dir() => {}
            Err(e) => return Err(store(e)),
        }
        tracing::info!(module = %reference, pinned = %pulled.pinned, layer = %layer_digest,
            bytes = bytes.len(), path = %path.display(), "addon module pulled");
        Ok(pulled)
    }
}

#[cfg(test)]
mod tests;
