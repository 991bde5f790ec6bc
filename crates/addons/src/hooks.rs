//! Global and module hooks run the addon-operator way: shell-operator executables whose
//! `--config` may also declare `beforeAll`/`afterAll` (global) or
//! `beforeHelm`/`afterHelm`/`beforeDeleteHelm`/`afterDeleteHelm` (module) with an
//! order, and which read `$VALUES_PATH` and `$CONFIG_VALUES_PATH` and write JSON
//! patches to `$VALUES_JSON_PATCH_PATH` and `$CONFIG_VALUES_JSON_PATCH_PATH`. They run
//! in the script sandbox through the hook engine's [`ScriptHook`]; the rest of their
//! configuration is shell-operator's and is read by its reader.
//!
//! Wasm hooks (`*.wasm` components of the `hook` world, `operon:engine@0.3.0` or later
//! for values) run in the wasm sandbox: they declare their lifecycle bindings in their
//! configuration and read and patch the same values through the WIT `values`
//! interface, so both kinds give the task queue the same patches.

use super::AddonError;
use super::values::parse_patch_file;
use operon_data::model::{HookConfig, HookInput};
use operon_hooks::HookRun;
use operon_hooks::load::{hook_files, is_wasm};
use operon_hooks::runner::{ExtraFiles, ScriptHook};
use operon_hooks::shell_operator::files::HookFile;
use operon_sandbox::{CallLimits, EngineError, HookModule, HookValues, Sandbox, SandboxConfig};
use operon_script::ScriptSandbox;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// `$VALUES_PATH`: the values the hook sees (read-only by contract).
pub(crate) const VALUES: HookFile = HookFile {
    variable: "VALUES_PATH",
    file: "values.json",
};
/// `$CONFIG_VALUES_PATH`: the config values the hook sees.
pub(crate) const CONFIG_VALUES: HookFile = HookFile {
    variable: "CONFIG_VALUES_PATH",
    file: "config-values.json",
};
/// `$VALUES_JSON_PATCH_PATH`: JSON patches of the memory values.
pub(crate) const VALUES_PATCH: HookFile = HookFile {
    variable: "VALUES_JSON_PATCH_PATH",
    file: "values-json-patch.json",
};
/// `$CONFIG_VALUES_JSON_PATCH_PATH`: JSON patches of the config values (the ConfigMap).
pub(crate) const CONFIG_VALUES_PATCH: HookFile = HookFile {
    variable: "CONFIG_VALUES_JSON_PATCH_PATH",
    file: "config-values-json-patch.json",
};

/// addon-operator's lifecycle bindings, beyond shell-operator's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lifecycle {
    /// `onStartup` (global and module hooks).
    OnStartup,
    /// `beforeAll` (global hooks): before the modules converge.
    BeforeAll,
    /// `afterAll` (global hooks): after they converged.
    AfterAll,
    /// `beforeHelm` (module hooks): before the module's objects are rendered.
    BeforeHelm,
    /// `afterHelm`: after they are applied.
    AfterHelm,
    /// `beforeDeleteHelm`: before a disabled module's objects are deleted.
    BeforeDeleteHelm,
    /// `afterDeleteHelm`: after they are deleted.
    AfterDeleteHelm,
}

impl Lifecycle {
    /// The binding's name in a configuration and in binding contexts.
    pub fn name(self) -> &'static str {
        match self {
            Self::OnStartup => "onStartup",
            Self::BeforeAll => "beforeAll",
            Self::AfterAll => "afterAll",
            Self::BeforeHelm => "beforeHelm",
            Self::AfterHelm => "afterHelm",
            Self::BeforeDeleteHelm => "beforeDeleteHelm",
            Self::AfterDeleteHelm => "afterDeleteHelm",
        }
    }

    /// The binding named `name` (as a configuration writes it), beyond `onStartup`.
    fn named(name: &str) -> Option<Self> {
        Self::GLOBAL_ONLY
            .into_iter()
            .chain(Self::MODULE_ONLY)
            .find(|b| b.name() == name)
    }

    const GLOBAL_ONLY: [Self; 2] = [Self::BeforeAll, Self::AfterAll];
    const MODULE_ONLY: [Self; 4] = [
        Self::BeforeHelm,
        Self::AfterHelm,
        Self::BeforeDeleteHelm,
        Self::AfterDeleteHelm,
    ];
}

/// Whose hook it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Owner {
    /// A global hook: sees and patches `global`.
    Global,
    /// A hook of the module with this values key: sees `global` and its section,
    /// patches its section.
    Module(String),
}

/// One hook of a module or of the global hooks directory.
#[derive(Debug, Clone)]
pub(crate) struct AddonHook {
    /// The hook's name: `global/PATH` or `MODULE/PATH` (the path relative to its
    /// hooks directory), as addon-operator names hooks in logs.
    pub(crate) name: String,
    /// Its lifecycle bindings with their order.
    pub(crate) lifecycle: Vec<(Lifecycle, f64)>,
    /// The rest of its configuration (kubernetes and schedule bindings, settings).
    pub(crate) config: HookConfig,
    program: Program,
}

/// What runs a hook.
#[derive(Debug, Clone)]
enum Program {
    /// An executable in the script sandbox, with values files.
    Script(ScriptHook),
    /// A component in the wasm sandbox, with the `values` interface.
    Wasm {
        sandbox: Sandbox,
        module: HookModule,
    },
}

impl AddonHook {
    /// The hook's order for `binding`, when it has that binding.
    pub(crate) fn order(&self, binding: Lifecycle) -> Option<f64> {
        self.lifecycle
            .iter()
            .find(|(b, _)| *b == binding)
            .map(|(_, o)| *o)
    }

    /// [`run_input`](Self::run_input) for a lifecycle binding (the operator's main
    /// queue), with what the hook printed logged. Kubernetes and schedule bindings run
    /// through the hook engine, which logs theirs.
    pub(crate) async fn run_lifecycle(
        &self,
        input: &HookInput,
        values: &Value,
        config_values: &Value,
        timeout: Duration,
    ) -> (HookRun, Result<Patches, AddonError>) {
        let ran = self.run_input(input, values, config_values, timeout).await;
        ran.0.log_output(operon_runner::output_log::Source::Hook {
            hook: &self.name,
            binding: input
                .binding_contexts
                .first()
                .map_or("", |c| c.binding.as_str()),
            queue: "main",
        });
        ran
    }

    /// Runs the hook once with `input` (any binding contexts) and the values files;
    /// the run, and its memory and config values patches (empty unless it succeeded).
    pub(crate) async fn run_input(
        &self,
        input: &HookInput,
        values: &Value,
        config_values: &Value,
        timeout: Duration,
    ) -> (HookRun, Result<Patches, AddonError>) {
        let script = match &self.program {
            Program::Script(script) => script,
            Program::Wasm { sandbox, module } => {
                return self
                    .run_wasm(sandbox, module, input, values, config_values, timeout)
                    .await;
            }
        };
        let extra = ExtraFiles {
            inputs: vec![
                (VALUES, values.to_string().into_bytes()),
                (CONFIG_VALUES, config_values.to_string().into_bytes()),
            ],
            outputs: vec![VALUES_PATCH, CONFIG_VALUES_PATCH],
        };
        let (run, outputs) = script.handle_with_files(input, timeout, &extra).await;
        let read =
            |i: usize, file: HookFile| -> Result<Vec<json_patch::PatchOperation>, AddonError> {
                let text = String::from_utf8_lossy(outputs.get(i).map_or(&[][..], Vec::as_slice));
                parse_patch_file(&text).map_err(|source| AddonError::ValuesPatchFile {
                    hook: self.name.clone(),
                    variable: file.variable,
                    source,
                })
            };
        let patches = read(0, VALUES_PATCH).and_then(|v| Ok((v, read(1, CONFIG_VALUES_PATCH)?)));
        (run, patches)
    }

    /// [`Self::run_input`] of a wasm hook: the values through the `values` interface,
    /// the patches it submitted there (kept only when the run succeeded, as a shell
    /// hook's files are read only then).
    async fn run_wasm(
        &self,
        sandbox: &Sandbox,
        module: &HookModule,
        input: &HookInput,
        values: &Value,
        config_values: &Value,
        timeout: Duration,
    ) -> (HookRun, Result<Patches, AddonError>) {
        let given = HookValues {
            values: values.to_string(),
            config_values: config_values.to_string(),
        };
        let limits = CallLimits {
            timeout,
            ..CallLimits::default()
        };
        let mut report = sandbox
            .handle_hook_with_values(module, input, Some(given), &limits)
            .await;
        let values = std::mem::take(&mut report.values_patches);
        let patches = match &report.outcome {
            Ok(_) => (values.values, values.config_values),
            Err(_) => (Vec::new(), Vec::new()),
        };
        (HookRun::from(report), Ok(patches))
    }
}

/// The wasm sandbox module hooks run in, started at the first wasm hook and shared by
/// every operator of the process.
pub(super) fn wasm_sandbox() -> Result<Sandbox, AddonError> {
    static SANDBOX: std::sync::OnceLock<Result<Sandbox, EngineError>> = std::sync::OnceLock::new();
    SANDBOX
        .get_or_init(|| {
            Sandbox::new(SandboxConfig {
                cache_dir: operon_sandbox::default_cache_dir(),
                ..SandboxConfig::default()
            })
        })
        .clone()
        .map_err(AddonError::WasmSandbox)
}

/// A run's memory values patches and config values patches.
pub(crate) type Patches = (
    Vec<json_patch::PatchOperation>,
    Vec<json_patch::PatchOperation>,
);

/// What a successful lifecycle run gave.
#[derive(Debug)]
pub(crate) struct HookOutcome {
    /// The run (stdout, stderr, kubernetes patches, metrics).
    pub(crate) run: HookRun,
    /// Patches of the memory values.
    pub(crate) values_patch: Vec<json_patch::PatchOperation>,
    /// Patches of the config values.
    pub(crate) config_patch: Vec<json_patch::PatchOperation>,
}

/// Loads and configures every hook of `dir` for `owner`, named with `prefix`.
pub(crate) async fn load_dir(
    sandbox: &ScriptSandbox,
    dir: &Path,
    owner: Owner,
    prefix: &str,
) -> Result<Vec<AddonHook>, AddonError> {
    let dir = std::path::absolute(dir).map_err(|source| AddonError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let files = match hook_files(&dir) {
        Ok(files) => files,
        // A hooks directory with no hook is allowed, as in addon-operator.
        Err(operon_hooks::load::HookLoadError::NoHooks { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(AddonError::HookFiles(e)),
    };
    let mut hooks = Vec::new();
    for file in files {
        let relative = file
            .strip_prefix(&dir)
            .unwrap_or(&file)
            .display()
            .to_string();
        let name = format!("{prefix}/{relative}");
        let program = if is_wasm(&file) {
            let sandbox = wasm_sandbox()?;
            let module = sandbox
                .load_hook_file(&file)
                .map_err(|source| AddonError::HookLoad {
                    hook: name.clone(),
                    source,
                })?;
            Program::Wasm { sandbox, module }
        } else {
            Program::Script(ScriptHook::new(sandbox.clone(), &dir, &file))
        };
        hooks.push(configure(name, owner.clone(), program).await?);
    }
    Ok(hooks)
}

async fn configure(name: String, owner: Owner, program: Program) -> Result<AddonHook, AddonError> {
    let mut lifecycle = Vec::new();
    let config = match &program {
        Program::Script(script) => script
            .configure_with(|text| Ok(split_lifecycle(text, &mut lifecycle)?))
            .await
            .map_err(|source| AddonError::HookConfigure {
                hook: name.clone(),
                source,
            })?,
        Program::Wasm { sandbox, module } => {
            let report = sandbox
                .configure_addon_hook(module, &name, &CallLimits::default())
                .await;
            let (config, declared) =
                report
                    .outcome
                    .map_err(|source| AddonError::WasmHookConfigure {
                        hook: name.clone(),
                        source,
                    })?;
            for (binding, order) in declared {
                let binding = Lifecycle::named(&binding).ok_or_else(|| {
                    AddonError::Hook(format!("hook {name}: unknown lifecycle binding {binding}"))
                })?;
                lifecycle.push((binding, order));
            }
            config
        }
    };
    if let Some(order) = config.on_startup {
        lifecycle.push((Lifecycle::OnStartup, f64::from(order)));
    }
    let refused: &[Lifecycle] = match owner {
        Owner::Global => &Lifecycle::MODULE_ONLY,
        Owner::Module(_) => &Lifecycle::GLOBAL_ONLY,
    };
    if let Some((binding, _)) = lifecycle.iter().find(|(b, _)| refused.contains(b)) {
        let whose = if owner == Owner::Global {
            "a global hook"
        } else {
            "a module hook"
        };
        return Err(AddonError::Hook(format!(
            "hook {name}: {} is not a binding of {whose}",
            binding.name()
        )));
    }
    Ok(AddonHook {
        name,
        lifecycle,
        config,
        program,
    })
}

/// Why a hook's `--config` text has lifecycle keys that cannot be taken out.
#[derive(Debug, thiserror::Error)]
enum LifecycleKeysError {
    /// The text starts as JSON but is not.
    #[error("not valid JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// The text is not YAML.
    #[error("not valid YAML: {0}")]
    Yaml(#[source] yaml_serde::Error),
    /// A lifecycle key's value is not a number.
    #[error("{binding}: {value} is not an order number")]
    Order {
        /// The key.
        binding: &'static str,
        /// Its value.
        value: Value,
    },
}

/// Takes addon-operator's lifecycle keys out of a `--config` text (YAML or JSON), each
/// an order number, and returns the rest as JSON for shell-operator's reader.
fn split_lifecycle(
    text: &str,
    out: &mut Vec<(Lifecycle, f64)>,
) -> Result<String, LifecycleKeysError> {
    let mut document: Value = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(LifecycleKeysError::Json)?
    } else {
        yaml_serde::from_str(text).map_err(LifecycleKeysError::Yaml)?
    };
    let Value::Object(map) = &mut document else {
        return Ok(text.to_owned());
    };
    for binding in Lifecycle::GLOBAL_ONLY
        .into_iter()
        .chain(Lifecycle::MODULE_ONLY)
    {
        if let Some(value) = map.remove(binding.name()) {
            let order = match &value {
                Value::Number(n) => n.as_f64(),
                Value::String(s) => s.parse().ok(),
                _ => None,
            }
            .ok_or_else(|| LifecycleKeysError::Order {
                binding: binding.name(),
                value: value.clone(),
            })?;
            out.push((binding, order));
        }
    }
    Ok(document.to_string())
}

/// The hooks with `binding`, by order then name (addon-operator's order).
pub(crate) fn with_binding(hooks: &[AddonHook], binding: Lifecycle) -> Vec<&AddonHook> {
    let mut found: Vec<(&AddonHook, f64)> = hooks
        .iter()
        .filter_map(|h| h.order(binding).map(|o| (h, o)))
        .collect();
    found.sort_by(|(a, x), (b, y)| x.total_cmp(y).then_with(|| a.name.cmp(&b.name)));
    found.into_iter().map(|(h, _)| h).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_keys_are_split_off() {
        let mut found = Vec::new();
        let rest = split_lifecycle(
            "configVersion: v1\nbeforeHelm: 10\nafterAll: '5'\n",
            &mut found,
        )
        .unwrap();
        assert_eq!(rest, r#"{"configVersion":"v1"}"#);
        assert_eq!(
            found,
            [(Lifecycle::AfterAll, 5.0), (Lifecycle::BeforeHelm, 10.0)]
        );
        let err = split_lifecycle(r#"{"afterHelm": true}"#, &mut found).unwrap_err();
        assert_eq!(err.to_string(), "afterHelm: true is not an order number");
    }
}
