//! Addon modules' `enabled` programs as components of the `module-enabled` world
//! (`operon:engine@0.3.0`): loading one and calling its `enabled` export with the values
//! addon-operator's `enabled` script reads, read-only.
//!
//! They are kept apart from the module registry and [`super::World`] (which name what a
//! Module object may hold): an `enabled` program lives in a modules directory and runs
//! once per discovery, so it is compiled (or read from the artifact cache) when loaded.

use super::bindings::module_enabled::ModuleEnabledPre;
use super::cache::ModuleDigest;
use super::error::{CallError, LoadError};
use super::exports::Phase;
use super::host::CallState;
use super::host::values::HookValues;
use super::limits::CallLimits;
use super::{CallReport, Sandbox, module};
use std::path::Path;

/// The world's name, as errors give it.
const WORLD: &str = "module-enabled";

/// An `enabled` program ready to be called.
#[derive(Clone)]
pub struct EnabledModule {
    digest: ModuleDigest,
    pre: ModuleEnabledPre<CallState>,
}

impl std::fmt::Debug for EnabledModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnabledModule")
            .field("digest", &self.digest)
            .finish()
    }
}

/// What a call that patched values is told: addon-operator's `enabled` scripts get
/// `$VALUES_PATH` and `$CONFIG_VALUES_PATH` only.
const NO_PATCHES: &str =
    "an enabled program may not patch values (only hooks may): it reads them and decides";

impl Sandbox {
    /// Loads an `enabled` program from a file.
    pub fn load_enabled_file(&self, path: &Path) -> Result<EnabledModule, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
            path: path.to_owned(),
            source,
        })?;
        self.load_enabled(&path.display().to_string(), &bytes)
    }

    /// Loads an `enabled` program; `name` is used in error messages only. A component of
    /// another world (a hook, an operation) is refused, naming the missing export.
    pub(crate) fn load_enabled(
        &self,
        name: &str,
        bytes: &[u8],
    ) -> Result<EnabledModule, LoadError> {
        let digest = ModuleDigest::of(bytes);
        let component = module::checked_component(&self.inner, name, &digest, bytes)?;
        let pre =
            self.inner
                .linker
                .instantiate_pre(&component)
                .map_err(|e| LoadError::Incompatible {
                    name: name.to_owned(),
                    reason: format!("{e:#}"),
                })?;
        let pre = ModuleEnabledPre::new(pre).map_err(|e| LoadError::MissingExport {
            name: name.to_owned(),
            world: WORLD,
            reason: format!("{e:#}"),
            macro_name: "module_enabled",
        })?;
        Ok(EnabledModule { digest, pre })
    }

    /// Calls the program's `enabled` export in a fresh store with `values` to read:
    /// whether the module runs and, when not, the reason the program gave. A program
    /// that submits a values patch fails.
    pub async fn run_enabled(
        &self,
        module: &EnabledModule,
        run: &str,
        values: HookValues,
        limits: &CallLimits,
    ) -> CallReport<(bool, Option<String>)> {
        let pre = &module.pre;
        let mut report = self
            .call_with(run, limits, Some(values), async |store| {
                let guest = pre
                    .instantiate_async(&mut *store)
                    .await
                    .map_err(Phase::Start)?;
                let result = guest.call_enabled(&mut *store).await.map_err(Phase::Call)?;
                Ok(result.map(|r| (r.enabled, r.reason.filter(|_| !r.enabled))))
            })
            .await;
        let patched = &report.values_patches;
        if report.outcome.is_ok()
            && !(patched.values.is_empty() && patched.config_values.is_empty())
        {
            report.outcome = Err(CallError::Failed(NO_PATCHES.to_owned()));
        }
        report
    }
}
