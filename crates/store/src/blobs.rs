//! The content-addressed module store on disk: the bytes of every uploaded or fetched
//! module under `DIR/sha256/<hex>`, named by the sha256 of their content.
//!
//! A module is written to `DIR/incoming/` first, flushed to disk, then renamed into
//! place and the directory flushed, so a crash at any point leaves either the whole
//! module or none of it under its digest; what a crash leaves in `incoming/` is removed
//! when the store is opened. Reads check the digest again, so a blob damaged or altered
//! on disk is refused rather than run.

use operon_sandbox::ModuleDigest;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The largest module the store takes by default: the Python SDK's components are
/// about 18 MiB.
pub const DEFAULT_MAX_MODULE_BYTES: u64 = 64 * 1024 * 1024;

/// Why the store could not keep or give back a module.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// A file or directory of the store could not be read or written.
    #[error("module store {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The module is larger than the store takes.
    #[error("the module is {size} bytes, more than the limit of {limit} bytes")]
    TooLarge {
        /// Its size.
        size: u64,
        /// The store's limit.
        limit: u64,
    },
    /// The bytes do not have the digest they were given or stored under.
    #[error("the module's content has digest {actual}, not {expected}: refused")]
    DigestMismatch {
        /// The digest asked for.
        expected: ModuleDigest,
        /// The digest of the bytes.
        actual: ModuleDigest,
    },
}

/// One module kept in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBlob {
    /// Its digest.
    pub digest: ModuleDigest,
    /// Its size in bytes.
    pub size: u64,
    /// When it was written (its file's modification time).
    pub(crate) stored: SystemTime,
}

/// The module store in one directory. Cheap to clone; clones share the directory.
#[derive(Debug, Clone)]
pub struct BlobStore {
    root: PathBuf,
    max_bytes: u64,
}

impl BlobStore {
    /// Opens (creating it when missing) the store in `root`, taking modules of at most
    /// `max_bytes`, and removes what an interrupted write left behind.
    pub fn open(root: impl Into<PathBuf>, max_bytes: u64) -> Result<Self, BlobError> {
        let store = Self {
            root: root.into(),
            max_bytes,
        };
        for dir in [store.blobs_dir(), store.incoming_dir()] {
            std::fs::create_dir_all(&dir).map_err(|source| BlobError::Io { path: dir, source })?;
        }
        let incoming = store.incoming_dir();
        let entries = std::fs::read_dir(&incoming).map_err(|source| BlobError::Io {
            path: incoming.clone(),
            source,
        })?;
        for entry in entries.flatten() {
            // Only this process writes here, and it has not written anything yet.
            if let Err(e) = std::fs::remove_file(entry.path()) {
                tracing::warn!(file = %entry.path().display(), error = %e, "cannot remove a partial module");
            }
        }
        Ok(store)
    }

    /// The largest module taken, in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The directory the store lives in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn blobs_dir(&self) -> PathBuf {
        self.root.join("sha256")
    }

    fn incoming_dir(&self) -> PathBuf {
        self.root.join("incoming")
    }

    /// Where the module with `digest` is (or would be) kept.
    pub(crate) fn path(&self, digest: &ModuleDigest) -> PathBuf {
        self.blobs_dir().join(hex::encode(digest.as_bytes()))
    }

    /// Whether the store holds `digest`.
    pub fn contains(&self, digest: &ModuleDigest) -> bool {
        self.path(digest).is_file()
    }

    /// Keeps `bytes` and returns their digest. Keeping bytes already there is a no-op;
    /// two writers of the same bytes at once both succeed (the rename is atomic and the
    /// content is the same).
    pub fn put(&self, bytes: &[u8]) -> Result<ModuleDigest, BlobError> {
        self.check_size(bytes.len() as u64)?;
        let digest = ModuleDigest::of(bytes);
        self.write(&digest, bytes)?;
        Ok(digest)
    }

    /// Keeps `bytes` if their digest is `expected` (bytes fetched from a peer).
    pub(crate) fn put_verified(
        &self,
        expected: &ModuleDigest,
        bytes: &[u8],
    ) -> Result<(), BlobError> {
        self.check_size(bytes.len() as u64)?;
        let actual = ModuleDigest::of(bytes);
        if actual != *expected {
            return Err(BlobError::DigestMismatch {
                expected: *expected,
                actual,
            });
        }
        self.write(expected, bytes)
    }

    /// Refuses a size over the limit.
    pub(crate) fn check_size(&self, size: u64) -> Result<(), BlobError> {
        if size > self.max_bytes {
            return Err(BlobError::TooLarge {
                size,
                limit: self.max_bytes,
            });
        }
        Ok(())
    }

    fn write(&self, digest: &ModuleDigest, bytes: &[u8]) -> Result<(), BlobError> {
        let target = self.path(digest);
        if target.is_file() {
            return Ok(());
        }
        let incoming = self.incoming_dir();
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| BlobError::Io { path, source }
        };
        let mut file = tempfile::NamedTempFile::new_in(&incoming).map_err(io(&incoming))?;
        file.write_all(bytes).map_err(io(file.path()))?;
        file.as_file().sync_all().map_err(io(file.path()))?;
        file.persist(&target).map_err(|e| BlobError::Io {
            path: target.clone(),
            source: e.error,
        })?;
        // The rename is durable only once the directory entry is on disk.
        let dir = self.blobs_dir();
        std::fs::File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&dir))?;
        Ok(())
    }

    /// The bytes of `digest`, checked against it; `None` when the store lacks it.
    pub fn get(&self, digest: &ModuleDigest) -> Result<Option<Vec<u8>>, BlobError> {
        let path = self.path(digest);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(BlobError::Io { path, source }),
        };
        let actual = ModuleDigest::of(&bytes);
        if actual != *digest {
            return Err(BlobError::DigestMismatch {
                expected: *digest,
                actual,
            });
        }
        Ok(Some(bytes))
    }

    /// Removes `digest`; whether it was there.
    pub(crate) fn remove(&self, digest: &ModuleDigest) -> Result<bool, BlobError> {
        let path = self.path(digest);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(BlobError::Io { path, source }),
        }
    }

    /// Every module kept, by digest order.
    pub fn list(&self) -> Result<Vec<StoredBlob>, BlobError> {
        let dir = self.blobs_dir();
        let entries = std::fs::read_dir(&dir).map_err(|source| BlobError::Io {
            path: dir.clone(),
            source,
        })?;
        let mut blobs: Vec<StoredBlob> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name();
                let digest = ModuleDigest::parse(&format!("sha256:{}", name.to_str()?))?;
                let meta = entry.metadata().ok()?;
                Some(StoredBlob {
                    digest,
                    size: meta.len(),
                    stored: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                })
            })
            .collect();
        blobs.sort_by_key(|b| b.digest);
        Ok(blobs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_are_kept_under_their_digest_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path(), 1024).unwrap();
        let digest = store.put(b"\0asm module").unwrap();
        assert_eq!(digest, ModuleDigest::of(b"\0asm module"));
        assert!(store.contains(&digest));
        assert_eq!(store.get(&digest).unwrap().unwrap(), b"\0asm module");
        // Keeping it again changes nothing.
        assert_eq!(store.put(b"\0asm module").unwrap(), digest);
        assert_eq!(store.list().unwrap().len(), 1);
        assert_eq!(store.list().unwrap()[0].size, 11);
        assert!(store.remove(&digest).unwrap());
        assert!(!store.remove(&digest).unwrap());
        assert_eq!(store.get(&digest).unwrap(), None);
    }

    #[test]
    fn oversize_modules_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path(), 4).unwrap();
        let err = store.put(b"12345").unwrap_err();
        assert!(
            matches!(err, BlobError::TooLarge { size: 5, limit: 4 }),
            "{err}"
        );
        assert!(store.list().unwrap().is_empty());
    }

    #[test]
    fn fetched_bytes_must_have_the_digest_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path(), 1024).unwrap();
        let wanted = ModuleDigest::of(b"good");
        let err = store.put_verified(&wanted, b"tampered").unwrap_err();
        assert!(matches!(err, BlobError::DigestMismatch { .. }), "{err}");
        assert!(!store.contains(&wanted));
        store.put_verified(&wanted, b"good").unwrap();
        assert!(store.contains(&wanted));
    }

    #[test]
    fn a_blob_altered_on_disk_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path(), 1024).unwrap();
        let digest = store.put(b"original").unwrap();
        std::fs::write(store.path(&digest), b"altered!").unwrap();
        assert!(matches!(
            store.get(&digest),
            Err(BlobError::DigestMismatch { .. })
        ));
    }

    #[test]
    fn a_crash_between_write_and_rename_leaves_no_module() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path(), 1024).unwrap();
        // What a process killed after writing, before renaming, leaves behind.
        let partial = dir.path().join("incoming").join(".tmpXYZ");
        std::fs::write(&partial, b"half a mod").unwrap();
        assert!(store.list().unwrap().is_empty());
        let reopened = BlobStore::open(dir.path(), 1024).unwrap();
        assert!(!partial.exists(), "the partial file is removed at open");
        assert!(reopened.list().unwrap().is_empty());
        let digest = reopened.put(b"whole").unwrap();
        assert_eq!(reopened.list().unwrap()[0].digest, digest);
    }

    #[test]
    fn concurrent_writers_of_the_same_module_both_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::open(dir.path(), 1 << 20).unwrap();
        let bytes = vec![7u8; 512 * 1024];
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let store = store.clone();
                let bytes = bytes.clone();
                std::thread::spawn(move || store.put(&bytes).unwrap())
            })
            .collect();
        let digests: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(digests.iter().all(|d| *d == digests[0]));
        assert_eq!(store.get(&digests[0]).unwrap().unwrap(), bytes);
        assert_eq!(
            std::fs::read_dir(dir.path().join("incoming"))
                .unwrap()
                .count(),
            0
        );
    }
}
