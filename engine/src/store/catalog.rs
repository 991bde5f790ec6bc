//! What this engine knows of the cluster's modules: the digest each Module name points
//! to (kept in step with the Module objects by [`super::replica`]) and the store of the
//! bytes it holds. [`super::ModuleLocator`] resolves names and digests through it.

use super::blobs::BlobStore;
use crate::sandbox::ModuleDigest;
use std::collections::HashMap;
use std::sync::RwLock;

/// Module names → digests, beside the store holding the bytes.
#[derive(Debug)]
pub struct ModuleCatalog {
    blobs: BlobStore,
    names: RwLock<HashMap<String, ModuleDigest>>,
}

impl ModuleCatalog {
    /// A catalog with no names yet over `blobs`.
    pub fn new(blobs: BlobStore) -> Self {
        Self {
            blobs,
            names: RwLock::default(),
        }
    }

    /// The store of module bytes.
    pub fn blobs(&self) -> &BlobStore {
        &self.blobs
    }

    /// The digest the Module `name` points to.
    pub fn digest_of(&self, name: &str) -> Option<ModuleDigest> {
        self.read().get(name).copied()
    }

    /// Records that `name` points to `digest`.
    pub fn set(&self, name: &str, digest: ModuleDigest) {
        self.write().insert(name.to_owned(), digest);
    }

    /// Forgets `name`.
    pub fn remove(&self, name: &str) {
        self.write().remove(name);
    }

    /// Replaces every name at once (after a list of the Module objects).
    pub fn replace(&self, names: impl IntoIterator<Item = (String, ModuleDigest)>) {
        *self.write() = names.into_iter().collect();
    }

    /// Every name and its digest, by name.
    pub fn names(&self) -> Vec<(String, ModuleDigest)> {
        let mut names: Vec<_> = self.read().iter().map(|(n, d)| (n.clone(), *d)).collect();
        names.sort();
        names
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, ModuleDigest>> {
        // Writers replace whole entries, so a poisoned lock still guards a whole map.
        self.names.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, ModuleDigest>> {
        self.names.write().unwrap_or_else(|e| e.into_inner())
    }
}
