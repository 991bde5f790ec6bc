//! What this engine knows of the cluster's modules: the digest each Module name points
//! to (kept in step with the Module objects by [`super::replica`]) and the store of the
//! bytes it holds. [`super::ModuleLocator`] resolves names and digests through it.

use super::blobs::BlobStore;
use operon_sandbox::ModuleDigest;
use std::collections::{HashMap, HashSet};
use std::sync::RwLock;

/// Module names → digests, beside the store holding the bytes.
#[derive(Debug)]
pub struct ModuleCatalog {
    blobs: BlobStore,
    names: RwLock<HashMap<String, ModuleDigest>>,
    /// Digests held for `oci://` references of Operations and Hooks, which no Module
    /// names but which must outlive the garbage collection of the store.
    retained: RwLock<HashSet<ModuleDigest>>,
    /// Counts changes of the names, so that what follows a name (a Hook object) learns
    /// that it points to new bytes without polling.
    changes: tokio::sync::watch::Sender<u64>,
}

impl ModuleCatalog {
    /// A catalog with no names yet over `blobs`.
    pub fn new(blobs: BlobStore) -> Self {
        Self {
            blobs,
            names: RwLock::default(),
            retained: RwLock::default(),
            changes: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Wakes up whenever a name is added, removed or pointed to other bytes.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The store of module bytes.
    pub fn blobs(&self) -> &BlobStore {
        &self.blobs
    }

    /// The digest the Module `name` points to.
    pub(crate) fn digest_of(&self, name: &str) -> Option<ModuleDigest> {
        self.read().get(name).copied()
    }

    /// Records that `name` points to `digest`.
    pub fn set(&self, name: &str, digest: ModuleDigest) {
        let before = self.write().insert(name.to_owned(), digest);
        if before != Some(digest) {
            self.changed();
        }
    }

    /// Forgets `name`.
    pub fn remove(&self, name: &str) {
        if self.write().remove(name).is_some() {
            self.changed();
        }
    }

    /// Replaces every name at once (after a list of the Module objects).
    pub(crate) fn replace(&self, names: impl IntoIterator<Item = (String, ModuleDigest)>) {
        let names: HashMap<String, ModuleDigest> = names.into_iter().collect();
        let mut current = self.write();
        if *current != names {
            *current = names;
            drop(current);
            self.changed();
        }
    }

    /// Keeps `digest` out of the store's garbage collection (an `oci://` module pulled
    /// into it).
    pub(crate) fn retain(&self, digest: ModuleDigest) {
        self.retained
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(digest);
    }

    /// The digests kept by [`Self::retain`].
    pub(crate) fn retained(&self) -> HashSet<ModuleDigest> {
        self.retained
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Every name and its digest, by name.
    pub(crate) fn names(&self) -> Vec<(String, ModuleDigest)> {
        let mut names: Vec<_> = self.read().iter().map(|(n, d)| (n.clone(), *d)).collect();
        names.sort();
        names
    }

    #[cfg(test)]
    pub(crate) fn change_count(&self) -> u64 {
        *self.changes.borrow()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, ModuleDigest>> {
        // Writers replace whole entries, so a poisoned lock still guards a whole map.
        self.names.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, ModuleDigest>> {
        self.names.write().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_real_changes_wake_followers() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = ModuleCatalog::new(BlobStore::open(dir.path(), 1024).unwrap());
        let (a, b) = (ModuleDigest::of(b"a"), ModuleDigest::of(b"b"));
        catalog.set("m", a);
        catalog.set("m", a);
        assert_eq!(catalog.change_count(), 1);
        catalog.replace([("m".to_owned(), a)]);
        assert_eq!(
            catalog.change_count(),
            1,
            "the same names again change nothing"
        );
        catalog.replace([("m".to_owned(), b)]);
        catalog.remove("m");
        catalog.remove("m");
        assert_eq!(catalog.change_count(), 3);
    }
}
