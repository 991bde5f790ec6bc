//! Finding the module file an Operation's `wasm.module` names: in the cluster's module
//! store (through the [`ModuleCatalog`] of Module objects) when there is one, in a
//! modules directory, beside the manifest, or among the `oci://` modules pulled
//! ([`OciModules`]).

use super::catalog::ModuleCatalog;
use super::oci_modules::OciModules;
use operon_sandbox::ModuleDigest;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

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
    /// The Module names a digest this engine's store does not hold yet (it is being
    /// fetched from a replica that holds it).
    #[error(
        "module {reference:?} is {digest}, which this engine's module store does not hold yet; it is fetched from a replica that holds it (see the Module's status.sources)"
    )]
    NotInStore {
        /// The reference as written.
        reference: String,
        /// The digest wanted.
        digest: ModuleDigest,
    },
    /// An object of the cluster (a Hook) names a file: only names and digests mean the
    /// same on every replica.
    #[error(
        "module {reference:?} is a file path; name a Module (operon module push) or a sha256: digest"
    )]
    PathNotAllowed {
        /// The reference as written.
        reference: String,
    },
    /// No Module has the name (and there is no modules directory to look in).
    #[error("no Module is named {reference:?} (push one with `operon module push`)")]
    NoModule {
        /// The name.
        reference: String,
    },
    /// An `oci://` reference not pulled into this engine's store (a tag is resolved,
    /// and its bytes pulled, when the Diagnosis or Hook naming it starts).
    #[error(
        "module {reference:?} has not been pulled here: an oci:// module is pulled, and a tag pinned to a digest, when the Diagnosis or Hook that runs it starts"
    )]
    NotPulled {
        /// The reference as written.
        reference: String,
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
/// (the Module object of that name in the cluster, then `<name>.wasm` in the modules
/// directory, then beside the manifest), or a digest (`sha256:...`: the module store's
/// blob, then the module in the modules directory with that content). A digest pins
/// the bytes; a name follows its Module.
#[derive(Debug, Clone, Default)]
pub struct ModuleLocator {
    /// Where named and digest-addressed modules live.
    dir: Option<PathBuf>,
    /// The cluster's Modules and this engine's store of their bytes.
    catalog: Option<Arc<ModuleCatalog>>,
    /// The modules of `dir` by digest, read and hashed at the first digest lookup and
    /// kept: a set naming many modules by digest must not read the directory each time.
    digests: OnceLock<HashMap<ModuleDigest, PathBuf>>,
    /// The `oci://` modules pulled so far.
    oci: Option<Arc<OciModules>>,
}

impl ModuleLocator {
    /// A locator looking in `dir` (and beside manifests).
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self {
            dir,
            catalog: None,
            digests: OnceLock::new(),
            oci: None,
        }
    }

    /// This locator, finding pinned `oci://` references among the modules `oci` pulled.
    pub fn with_oci(mut self, oci: Arc<OciModules>) -> Self {
        self.oci = Some(oci);
        self
    }

    /// Where `oci://` modules are pulled to, when they may be.
    pub fn oci(&self) -> Option<&Arc<OciModules>> {
        self.oci.as_ref()
    }

    fn locate_oci(&self, reference: &str) -> Result<PathBuf, ModuleError> {
        self.oci
            .as_ref()
            .and_then(|oci| oci.path(reference))
            .ok_or_else(|| ModuleError::NotPulled {
                reference: reference.to_owned(),
            })
    }

    /// This locator, looking first in the cluster's Modules and the module store.
    pub fn with_catalog(mut self, catalog: Arc<ModuleCatalog>) -> Self {
        self.catalog = Some(catalog);
        self
    }

    /// The file `reference` names, for an object read from a file in `base_dir`.
    pub fn locate(&self, reference: &str, base_dir: &Path) -> Result<PathBuf, ModuleError> {
        if super::oci::is_oci(reference) {
            return self.locate_oci(reference);
        }
        if let Some(wanted) = ModuleDigest::parse(reference) {
            if let Some(catalog) = &self.catalog {
                let path = catalog.blobs().path(&wanted);
                if path.is_file() {
                    return Ok(path);
                }
                if self.dir.is_none() {
                    return Err(ModuleError::NotInStore {
                        reference: reference.to_owned(),
                        digest: wanted,
                    });
                }
            }
            return self.by_digest(reference, wanted);
        }
        let is_name = !reference.contains('/') && !reference.ends_with(".wasm");
        if let Some(catalog) = self.catalog.as_ref().filter(|_| is_name)
            && let Some(digest) = catalog.digest_of(reference)
        {
            let path = catalog.blobs().path(&digest);
            return match path.is_file() {
                true => Ok(path),
                false => Err(ModuleError::NotInStore {
                    reference: reference.to_owned(),
                    digest,
                }),
            };
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
            // Cargo names a crate's artifact with underscores (`log-triage` builds
            // `log_triage.wasm`), so a target directory serves as the modules directory.
            let file = format!("{reference}.wasm");
            let built = format!("{}.wasm", reference.replace('-', "_"));
            let mut files = vec![file];
            if files[0] != built {
                files.push(built);
            }
            let mut candidates: Vec<PathBuf> = Vec::new();
            for file in &files {
                candidates.extend(self.dir.as_deref().map(|d| d.join(file)));
            }
            candidates.extend(files.iter().map(|file| base_dir.join(file)));
            candidates
        };
        match candidates.iter().find(|p| p.is_file()) {
            Some(found) => Ok(found.clone()),
            None => Err(ModuleError::NotFound {
                reference: reference.to_owned(),
                tried: candidates,
            }),
        }
    }

    /// The file a module name or `sha256:` digest names, never looking beside a
    /// manifest: how objects of the cluster (Hooks) name modules. A name is the Module
    /// of that name, else `<name>.wasm` in the modules directory; a path is refused.
    pub fn locate_named(&self, reference: &str) -> Result<PathBuf, ModuleError> {
        if super::oci::is_oci(reference) {
            return self.locate_oci(reference);
        }
        if reference.contains('/') || reference.ends_with(".wasm") {
            return Err(ModuleError::PathNotAllowed {
                reference: reference.to_owned(),
            });
        }
        if let Some(dir) = &self.dir {
            // The base directory is the modules directory: nothing beside a manifest.
            return self.locate(reference, dir);
        }
        if ModuleDigest::parse(reference).is_some() {
            return self.locate(reference, Path::new(""));
        }
        let Some(catalog) = &self.catalog else {
            return Err(ModuleError::NoModule {
                reference: reference.to_owned(),
            });
        };
        let digest = catalog
            .digest_of(reference)
            .ok_or_else(|| ModuleError::NoModule {
                reference: reference.to_owned(),
            })?;
        let path = catalog.blobs().path(&digest);
        match path.is_file() {
            true => Ok(path),
            false => Err(ModuleError::NotInStore {
                reference: reference.to_owned(),
                digest,
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
    fn a_name_finds_the_module_cargo_built() {
        let modules = tempfile::tempdir().unwrap();
        std::fs::write(modules.path().join("log_triage.wasm"), b"built").unwrap();
        let locator = ModuleLocator::new(Some(modules.path().to_owned()));
        assert_eq!(
            locator.locate("log-triage", Path::new("/nowhere")).unwrap(),
            modules.path().join("log_triage.wasm")
        );
        // The name as written comes first.
        std::fs::write(modules.path().join("log-triage.wasm"), b"named").unwrap();
        assert_eq!(
            locator.locate("log-triage", Path::new("/nowhere")).unwrap(),
            modules.path().join("log-triage.wasm")
        );
        let err = locator
            .locate("disk-pressure", Path::new("/m"))
            .unwrap_err();
        let tried = format!(
            "{0}/disk-pressure.wasm, {0}/disk_pressure.wasm, /m/disk-pressure.wasm, /m/disk_pressure.wasm",
            modules.path().display()
        );
        assert_eq!(
            err.to_string(),
            format!("module \"disk-pressure\" not found (looked for {tried})")
        );
    }

    #[test]
    fn names_follow_their_module_and_digests_pin() {
        let store = tempfile::tempdir().unwrap();
        let manifests = tempfile::tempdir().unwrap();
        let blobs = super::super::BlobStore::open(store.path(), 1024).unwrap();
        let catalog = Arc::new(ModuleCatalog::new(blobs.clone()));
        let locator = ModuleLocator::new(None).with_catalog(catalog.clone());
        let v1 = blobs.put(b"v1").unwrap();
        let v2 = ModuleDigest::of(b"v2");
        catalog.set("probe", v1);
        assert_eq!(
            locator.locate("probe", manifests.path()).unwrap(),
            blobs.path(&v1)
        );
        // The Module now names bytes this engine has not fetched yet.
        catalog.set("probe", v2);
        let err = locator.locate("probe", manifests.path()).unwrap_err();
        assert!(matches!(err, ModuleError::NotInStore { .. }), "{err}");
        assert!(err.to_string().contains(&v2.to_string()), "{err}");
        // A digest stays pinned to its bytes whatever the name says.
        assert_eq!(
            locator.locate(&v1.to_string(), manifests.path()).unwrap(),
            blobs.path(&v1)
        );
        blobs.put(b"v2").unwrap();
        assert_eq!(
            locator.locate("probe", manifests.path()).unwrap(),
            blobs.path(&v2)
        );
        // A name no Module has is still looked for beside the manifest.
        std::fs::write(manifests.path().join("local.wasm"), b"local").unwrap();
        assert_eq!(
            locator.locate("local", manifests.path()).unwrap(),
            manifests.path().join("local.wasm")
        );
        catalog.remove("probe");
        assert!(matches!(
            locator.locate("probe", manifests.path()),
            Err(ModuleError::NotFound { .. })
        ));
    }

    #[test]
    fn objects_of_the_cluster_name_modules_never_paths() {
        let store = tempfile::tempdir().unwrap();
        let blobs = super::super::BlobStore::open(store.path(), 1024).unwrap();
        let catalog = Arc::new(ModuleCatalog::new(blobs.clone()));
        let locator = ModuleLocator::new(None).with_catalog(catalog.clone());
        let v1 = blobs.put(b"v1").unwrap();
        catalog.set("labeler", v1);
        assert_eq!(locator.locate_named("labeler").unwrap(), blobs.path(&v1));
        assert_eq!(
            locator.locate_named(&v1.to_string()).unwrap(),
            blobs.path(&v1)
        );
        for path in ["./labeler.wasm", "/etc/passwd", "labeler.wasm"] {
            let err = locator.locate_named(path).unwrap_err();
            assert!(matches!(err, ModuleError::PathNotAllowed { .. }), "{err}");
        }
        let err = locator.locate_named("missing").unwrap_err();
        assert_eq!(
            err.to_string(),
            "no Module is named \"missing\" (push one with `operon module push`)"
        );
        // A modules directory (operon hook test --modules) holds `<name>.wasm`.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("local.wasm"), b"local").unwrap();
        let local = ModuleLocator::new(Some(dir.path().to_owned()));
        assert_eq!(
            local.locate_named("local").unwrap(),
            dir.path().join("local.wasm")
        );
        let digest = ModuleDigest::of(b"local").to_string();
        assert_eq!(
            local.locate_named(&digest).unwrap(),
            dir.path().join("local.wasm")
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
