//! Finding the module file an Operation's `wasm.module` names.

use crate::sandbox::ModuleDigest;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Why a module reference does not lead to a file.
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    /// A digest was given but no modules directory to look in.
    #[error(
        "module {reference} is a digest; give a modules directory (--modules DIR) to say where modules are"
    )]
    DigestWithoutDirectory {
        /// The reference as written.
        reference: String,
    },
    /// The modules directory could not be listed.
    #[error("cannot read {}: {source}", dir.display())]
    ReadDirectory {
        /// The directory.
        dir: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// No module in the directory has the digest.
    #[error("no module in {} has digest {reference}", dir.display())]
    NoSuchDigest {
        /// The digest as written.
        reference: String,
        /// The directory searched.
        dir: PathBuf,
    },
    /// No candidate file exists.
    #[error("module {reference:?} not found (looked for {})", tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    NotFound {
        /// The reference as written.
        reference: String,
        /// Every path tried, in order.
        tried: Vec<PathBuf>,
    },
}

/// Resolves module references: a path (relative to the manifest that names it), a name
/// (`<name>.wasm` in the modules directory, then beside the manifest), or a digest
/// (`sha256:...`, the module in the modules directory with that content).
#[derive(Debug, Clone, Default)]
pub struct ModuleLocator {
    /// Where named and digest-addressed modules live.
    dir: Option<PathBuf>,
    /// The modules of `dir` by digest, read and hashed at the first digest lookup and
    /// kept: a set naming many modules by digest must not read the directory each time.
    digests: OnceLock<HashMap<ModuleDigest, PathBuf>>,
}

impl ModuleLocator {
    /// A locator looking in `dir` (and beside manifests).
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self {
            dir,
            digests: OnceLock::new(),
        }
    }

    /// The file `reference` names, for an object read from a file in `base_dir`.
    pub fn locate(&self, reference: &str, base_dir: &Path) -> Result<PathBuf, ModuleError> {
        if let Some(wanted) = ModuleDigest::parse(reference) {
            return self.by_digest(reference, wanted);
        }
        let candidates: Vec<PathBuf> = if reference.contains('/') || reference.ends_with(".wasm") {
            // A path is relative to the manifest; the modules directory may hold the same
            // file name (e.g. modules built elsewhere).
            let file = Path::new(reference).file_name().map(PathBuf::from);
            [base_dir.join(reference)]
                .into_iter()
                .chain(self.dir.as_deref().zip(file).map(|(d, f)| d.join(f)))
                .collect()
        } else {
            let file = format!("{reference}.wasm");
            self.dir
                .as_deref()
                .map(|d| d.join(&file))
                .into_iter()
                .chain([base_dir.join(&file)])
                .collect()
        };
        match candidates.iter().find(|p| p.is_file()) {
            Some(found) => Ok(found.clone()),
            None => Err(ModuleError::NotFound {
                reference: reference.to_owned(),
                tried: candidates,
            }),
        }
    }

    fn by_digest(&self, reference: &str, wanted: ModuleDigest) -> Result<PathBuf, ModuleError> {
        let dir = self
            .dir
            .as_deref()
            .ok_or_else(|| ModuleError::DigestWithoutDirectory {
                reference: reference.to_owned(),
            })?;
        let digests = match self.digests.get() {
            Some(digests) => digests,
            None => {
                let index = Self::index(dir)?;
                self.digests.get_or_init(|| index)
            }
        };
        digests
            .get(&wanted)
            .cloned()
            .ok_or_else(|| ModuleError::NoSuchDigest {
                reference: reference.to_owned(),
                dir: dir.to_owned(),
            })
    }

    /// Every `*.wasm` file of `dir` by the digest of its content; the first file read
    /// wins when two have the same content.
    fn index(dir: &Path) -> Result<HashMap<ModuleDigest, PathBuf>, ModuleError> {
        let entries = std::fs::read_dir(dir).map_err(|source| ModuleError::ReadDirectory {
            dir: dir.to_owned(),
            source,
        })?;
        let mut index = HashMap::new();
        for path in entries.flatten().map(|entry| entry.path()) {
            if path.extension().is_some_and(|e| e == "wasm")
                && let Ok(bytes) = std::fs::read(&path)
            {
                index.entry(ModuleDigest::of(&bytes)).or_insert(path);
            }
        }
        Ok(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_paths_and_digests_are_found() {
        let modules = tempfile::tempdir().unwrap();
        let manifests = tempfile::tempdir().unwrap();
        std::fs::write(modules.path().join("probe.wasm"), b"probe").unwrap();
        std::fs::write(manifests.path().join("local.wasm"), b"local").unwrap();
        let locator = ModuleLocator::new(Some(modules.path().to_owned()));
        assert_eq!(
            locator.locate("probe", manifests.path()).unwrap(),
            modules.path().join("probe.wasm")
        );
        assert_eq!(
            locator.locate("local", manifests.path()).unwrap(),
            manifests.path().join("local.wasm")
        );
        assert_eq!(
            locator.locate("./local.wasm", manifests.path()).unwrap(),
            manifests.path().join("./local.wasm")
        );
        let digest = ModuleDigest::of(b"probe").to_string();
        assert_eq!(
            locator.locate(&digest, manifests.path()).unwrap(),
            modules.path().join("probe.wasm")
        );
    }

    #[test]
    fn failures_say_what_was_tried() {
        let manifests = tempfile::tempdir().unwrap();
        let locator = ModuleLocator::new(None);
        let err = locator.locate("missing", manifests.path()).unwrap_err();
        assert!(err.to_string().contains("missing.wasm"), "{err}");
        let digest = ModuleDigest::of(b"x").to_string();
        assert!(matches!(
            locator.locate(&digest, manifests.path()),
            Err(ModuleError::DigestWithoutDirectory { .. })
        ));
    }
}
