//! Module sources: addon-operator modules from `oci://` references
//! (`--module-source`, `OPERON_MODULE_SOURCES`), as Deckhouse's ModuleSource ships
//! modules. Each is pulled by [`AddonModules`] (pinned by digest, from an allowed
//! registry, its signatures verified when the engine verifies modules, unpacked
//! safely into the cache) with the credentials [`ModuleSources`] is given, and then
//! read as a module directory ([`super::layout::Layout::read_with_sources`]). A
//! source that cannot be had is left out and reported; the other modules run.
//!
//! They are a list of their own rather than entries of `MODULES_DIR`: addon-operator
//! splits `MODULES_DIR` at every `:`, and a reference has several
//! (`oci://host:5000/repo:tag@sha256:...`).

use super::AddonError;
use super::layout::{SourceModule, UnavailableModule};
use futures::future::BoxFuture;
use operon_store::addon_modules::AddonModules;
use operon_store::oci::{self, RegistryAuth};
use operon_store::oci_modules::OciModuleError;
use std::path::Path;
use std::sync::Arc;

/// The credentials for a reference's registry.
pub type AuthFor =
    Arc<dyn Fn(String) -> BoxFuture<'static, Result<RegistryAuth, OciModuleError>> + Send + Sync>;

/// The module sources of an engine and how to pull them.
#[derive(Clone)]
pub struct ModuleSources {
    references: Vec<String>,
    modules: AddonModules,
    auth: AuthFor,
}

impl std::fmt::Debug for ModuleSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleSources")
            .field("references", &self.references)
            .field("root", &self.modules.root())
            .finish_non_exhaustive()
    }
}

impl ModuleSources {
    /// `references`, pulled by `modules` with the credentials `auth` gives.
    pub fn new(references: Vec<String>, modules: AddonModules, auth: AuthFor) -> Self {
        Self {
            references,
            modules,
            auth,
        }
    }

    /// The references, in their order.
    pub fn references(&self) -> &[String] {
        &self.references
    }

    /// Checks every reference without the network (pinned by digest, its registry
    /// allowed): a list that can never work stops the engine at start.
    pub fn check(&self) -> Result<(), AddonError> {
        for reference in &self.references {
            self.modules
                .check(reference)
                .map_err(|source| AddonError::ModuleSource {
                    source: Box::new(source),
                })?;
        }
        Ok(())
    }

    /// Pulls every source, in order: the modules unpacked, and the sources that could
    /// not be had with the reason (each logged).
    pub async fn pull(&self) -> (Vec<SourceModule>, Vec<UnavailableModule>) {
        let mut pulled = Vec::new();
        let mut unavailable = Vec::new();
        for reference in &self.references {
            let outcome = match (self.auth)(reference.clone()).await {
                Ok(auth) => self.modules.pull(reference, &auth).await,
                Err(e) => Err(e),
            };
            match outcome {
                Ok(module) => pulled.push(SourceModule {
                    reference: reference.clone(),
                    path: module.path,
                }),
                Err(e) => {
                    tracing::warn!(module = %reference, reason = e.reason(), error = %e,
                        "module source unavailable; the other modules run without it");
                    unavailable.push(UnavailableModule {
                        reference: reference.clone(),
                        name: suggested_name(reference),
                        reason: e.reason(),
                        message: e.to_string(),
                    });
                }
            }
        }
        (pulled, unavailable)
    }
}

/// The name of the module unpacked at `dir` from `reference`: its `module.yaml`'s
/// `name` when it has one (Deckhouse's definition), else the name `reference`
/// suggests.
pub(crate) fn module_name(dir: &Path, reference: &str) -> String {
    let from_definition = std::fs::read_to_string(dir.join("module.yaml"))
        .ok()
        .and_then(|text| super::layout::parse_yaml_mapping(&text).ok())
        .and_then(|yaml| yaml.get("name")?.as_str().map(str::to_owned))
        .filter(|name| !name.trim().is_empty());
    from_definition.unwrap_or_else(|| suggested_name(reference))
}

/// The last segment of the reference's repository (`oci://r.example.com/mods/echo:1@…`
/// → `echo`): Deckhouse publishes module `NAME` as `REPO/NAME`.
pub fn suggested_name(reference: &str) -> String {
    let repository = oci::repository_of(reference);
    repository
        .rsplit('/')
        .next()
        .unwrap_or(repository)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_suggests_its_repository_s_last_segment() {
        let digest = format!("sha256:{}", "a".repeat(64));
        for reference in [
            format!("oci://r.example.com:5000/mods/echo:1.0@{digest}"),
            format!("oci://r.example.com/echo@{digest}"),
            "oci://localhost:5000/team/mods/echo:1.0".to_owned(),
        ] {
            assert_eq!(suggested_name(&reference), "echo", "{reference}");
        }
    }

    #[test]
    fn module_yaml_names_a_pulled_module() {
        let dir = tempfile::tempdir().unwrap();
        let reference = "oci://r.example.com/mods/from-repo@sha256:00";
        assert_eq!(module_name(dir.path(), reference), "from-repo");
        std::fs::write(dir.path().join("module.yaml"), "name: echo\nweight: 5\n").unwrap();
        assert_eq!(module_name(dir.path(), reference), "echo");
    }
}
