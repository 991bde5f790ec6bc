//! Module digests and the on-disk cache of compiled components.
//!
//! Compiling a component takes tens of milliseconds; loading a precompiled one takes
//! well under one. Artifacts are keyed by the module's sha256 digest plus a hash of the
//! engine configuration, and every artifact carries an HMAC made with a key that only
//! this cache holds, so the engine never deserializes native code it did not write
//! itself (deserializing is `unsafe`: a forged artifact would run as host code).

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest as _, Sha256};
use std::fmt;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The sha256 digest of a module's bytes: its identity everywhere in Operon.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModuleDigest([u8; 32]);

impl ModuleDigest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// Parses `sha256:<64 hex digits>`.
    pub fn parse(text: &str) -> Option<Self> {
        let hex_part = text.strip_prefix("sha256:")?;
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex_part, &mut out).ok()?;
        Some(Self(out))
    }

    /// The raw digest bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for ModuleDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", hex::encode(self.0))
    }
}

impl fmt::Debug for ModuleDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Why the artifact cache could not be opened. The sandbox then compiles every module
/// at load instead; nothing else is affected.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The directory or its key could not be created or read.
    #[error("artifact cache {path}: {source}")]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The key file is readable by other users, so artifacts signed with it prove nothing.
    #[error(
        "artifact cache key {path} is accessible by other users (mode {mode:o}); remove it or `chmod 600` it"
    )]
    KeyExposed {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The key file has the wrong size.
    #[error("artifact cache key {path} is corrupt; remove it to start a new cache")]
    KeyCorrupt {
        /// The key file.
        path: PathBuf,
    },
}

type HmacSha256 = Hmac<Sha256>;
const KEY_FILE: &str = "artifact.key";
const MAC_LEN: usize = 32;

/// A directory of compiled components, each signed with the cache's own key.
pub struct ArtifactCache {
    dir: PathBuf,
    key: [u8; 32],
    /// Hash of everything besides the module that changes the compiled code.
    config_tag: [u8; 32],
}

impl fmt::Debug for ArtifactCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArtifactCache")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// Feeds `Hash` output into sha256 so the engine's compatibility hash is stable
/// across processes (std's `DefaultHasher` is randomly keyed per process).
struct Sha256Hasher(Sha256);

impl std::hash::Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        // Only `write` is used; the digest is taken from the inner state.
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> CacheError + '_ {
    move |source| CacheError::Io {
        path: path.to_owned(),
        source,
    }
}

impl ArtifactCache {
    /// Opens (creating if needed) the cache in `dir` for artifacts of `engine`.
    pub(crate) fn open(dir: &Path, engine: &wasmtime::Engine) -> Result<Self, CacheError> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io_err(dir))?;
        let key_path = dir.join(KEY_FILE);
        let key = match fs::File::options()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&key_path)
        {
            Ok(mut file) => {
                let mut key = [0u8; 32];
                getrandom::fill(&mut key).map_err(|e| CacheError::Io {
                    path: key_path.clone(),
                    source: std::io::Error::other(e.to_string()),
                })?;
                file.write_all(&key).map_err(io_err(&key_path))?;
                key
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let meta = fs::metadata(&key_path).map_err(io_err(&key_path))?;
                let mode = meta.permissions().mode() & 0o777;
                if mode & 0o077 != 0 {
                    return Err(CacheError::KeyExposed {
                        path: key_path,
                        mode,
                    });
                }
                let bytes = fs::read(&key_path).map_err(io_err(&key_path))?;
                bytes
                    .try_into()
                    .map_err(|_| CacheError::KeyCorrupt { path: key_path })?
            }
            Err(e) => return Err(io_err(&key_path)(e)),
        };
        let mut hasher = Sha256Hasher(Sha256::new());
        std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut hasher);
        hasher.0.update(env!("CARGO_PKG_VERSION").as_bytes());
        Ok(Self {
            dir: dir.to_owned(),
            key,
            config_tag: hasher.0.finalize().into(),
        })
    }

    fn path_for(&self, digest: &ModuleDigest) -> PathBuf {
        let mut h = Sha256::new();
        h.update(digest.as_bytes());
        h.update(self.config_tag);
        self.dir
            .join(format!("{}.cwasm", hex::encode(h.finalize())))
    }

    fn mac(&self, artifact: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("HMAC accepts any key length");
        mac.update(&self.config_tag);
        mac.update(artifact);
        mac
    }

    /// Returns the verified artifact for `digest`, or `None` when there is none or it
    /// fails verification (a bad one is removed so it is rewritten).
    pub(crate) fn get(&self, digest: &ModuleDigest) -> Option<Vec<u8>> {
        let path = self.path_for(digest);
        let mut bytes = fs::read(&path).ok()?;
        if bytes.len() < MAC_LEN {
            let _ = fs::remove_file(&path);
            return None;
        }
        let artifact = bytes.split_off(MAC_LEN);
        if self.mac(&artifact).verify_slice(&bytes).is_err() {
            tracing::warn!(path = %path.display(), %digest, "discarding a cached artifact that this engine did not write");
            let _ = fs::remove_file(&path);
            return None;
        }
        Some(artifact)
    }

    /// Stores `artifact` for `digest`, atomically. Failures are logged and ignored: the
    /// cache only saves time.
    pub(crate) fn put(&self, digest: &ModuleDigest, artifact: &[u8]) {
        let path = self.path_for(digest);
        let result = (|| {
            let mut tmp = tempfile::NamedTempFile::new_in(&self.dir)?;
            tmp.write_all(&self.mac(artifact).finalize().into_bytes())?;
            tmp.write_all(artifact)?;
            tmp.persist(&path).map_err(|e| e.error)?;
            Ok::<_, std::io::Error>(())
        })();
        if let Err(e) = result {
            tracing::warn!(path = %path.display(), error = %e, "could not cache a compiled component");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_round_trips_through_text() {
        let d = ModuleDigest::of(b"abc");
        assert_eq!(
            d.to_string(),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(ModuleDigest::parse(&d.to_string()), Some(d));
        assert_eq!(ModuleDigest::parse("sha256:zz"), None);
        assert_eq!(ModuleDigest::parse("md5:00"), None);
    }

    #[test]
    fn only_artifacts_signed_with_this_key_are_returned() {
        let dir = tempfile::tempdir().unwrap();
        let engine = wasmtime::Engine::default();
        let cache = ArtifactCache::open(dir.path(), &engine).unwrap();
        let digest = ModuleDigest::of(b"module");
        assert!(cache.get(&digest).is_none());
        cache.put(&digest, b"compiled");
        assert_eq!(cache.get(&digest).as_deref(), Some(&b"compiled"[..]));

        // Another cache (another key) cannot vouch for this artifact.
        let path = cache.path_for(&digest);
        let forged = tempfile::tempdir().unwrap();
        let other = ArtifactCache::open(forged.path(), &engine).unwrap();
        other.put(&digest, b"evil");
        fs::copy(other.path_for(&digest), &path).unwrap();
        assert!(cache.get(&digest).is_none());
        assert!(!path.exists(), "a forged artifact is removed");

        // A reopened cache keeps its key.
        cache.put(&digest, b"compiled");
        let reopened = ArtifactCache::open(dir.path(), &engine).unwrap();
        assert_eq!(reopened.get(&digest).as_deref(), Some(&b"compiled"[..]));
    }

    #[test]
    fn exposed_key_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let engine = wasmtime::Engine::default();
        ArtifactCache::open(dir.path(), &engine).unwrap();
        fs::set_permissions(dir.path().join(KEY_FILE), fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            ArtifactCache::open(dir.path(), &engine),
            Err(CacheError::KeyExposed { .. })
        ));
    }
}
