//! Which modules are enabled, as addon-operator decides: the `<moduleKey>Enabled`
//! flags of the common `values.yaml`, the module's `values.yaml`, global hooks and the
//! ConfigMap, or in its place the module's ModuleConfig (`spec.enabled`), later sources
//! winning (no flag means disabled), then, for a module the flags enable,
//! its `enabled` program, run in the script sandbox with `$VALUES_PATH`,
//! `$CONFIG_VALUES_PATH` (`global.enabledModules` lists the modules enabled before it)
//! and `$MODULE_ENABLED_RESULT`, where it writes `true` or `false`. The program can
//! only disable. An `enabled` file that is a wasm component runs in the wasm sandbox
//! instead (the `module-enabled` world of `operon:engine@0.3.0`): it reads the same
//! values through the `values` interface, may not patch them, and returns the decision
//! with its reason.

use super::AddonError;
use super::config::ConfigValues;
use super::hooks::{CONFIG_VALUES, VALUES};
use super::layout::{Layout, ModuleDir};
use operon_hooks::shell_operator::files::HookFile;
use operon_script::{OutputMode, SandboxRequest, ScriptSandbox};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// `$MODULE_ENABLED_RESULT`.
pub(crate) const ENABLED_RESULT: HookFile = HookFile {
    variable: "MODULE_ENABLED_RESULT",
    file: "module-enabled-result",
};
/// `$MODULE_ENABLED_REASON`: why the program disabled the module, optional.
pub(crate) const ENABLED_REASON: HookFile = HookFile {
    variable: "MODULE_ENABLED_REASON",
    file: "module-enabled-reason",
};

/// How a module's state was decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// No source enables it.
    NoFlag,
    /// A flag disables it; the source that said so last.
    DisabledBy(String),
    /// The flags enable it and its `enabled` program agreed (or there is none).
    Enabled,
    /// Its `enabled` program said false, with the reason it gave.
    DisabledByScript(Option<String>),
    /// The flags enable it but its `module.yaml` requirements are not met, one reason
    /// each (checked before its `enabled` program, which then does not run).
    Unmet(Vec<String>),
}

impl Decision {
    /// Whether the module runs.
    pub(crate) fn enabled(&self) -> bool {
        *self == Self::Enabled
    }

    /// `enabled`, or `disabled` with the reason, as discovery reports it.
    pub(crate) fn describe(&self, module: &ModuleDir) -> String {
        match self {
            Self::Enabled => "enabled".to_owned(),
            Self::NoFlag => format!("disabled (no {} flag)", module.enabled_key()),
            Self::DisabledBy(source) => format!("disabled by {source}"),
            Self::DisabledByScript(reason) => format!(
                "disabled by its enabled script{}",
                reason
                    .as_ref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            ),
            Self::Unmet(reasons) => {
                format!("disabled by its requirements ({})", reasons.join(", "))
            }
        }
    }
}

/// The merged flag of `module`: `None` when no source names it. Sources in
/// addon-operator's extender order, later ones winning: `modules/values.yaml`, the
/// module's `values.yaml`, flags global hooks set (`dynamic`), the ConfigMap or the
/// module's ModuleConfig (Deckhouse's kube config extender reads the one in place of the
/// other).
pub(crate) fn flag(
    layout: &Layout,
    module: &ModuleDir,
    dynamic: &BTreeMap<String, bool>,
    config: &ConfigValues,
) -> Option<(bool, String)> {
    let key = module.enabled_key();
    let mut result = None;
    if let Some(b) = layout.common_values.get(&key).and_then(Value::as_bool) {
        result = Some((b, "modules/values.yaml".to_owned()));
    }
    if let Some(b) = module.static_values.get(&key).and_then(Value::as_bool) {
        result = Some((b, "the module's values.yaml".to_owned()));
    }
    if let Some(b) = dynamic.get(&module.values_key) {
        result = Some((*b, "a global hook".to_owned()));
    }
    if let Some(b) = config.enabled.get(&module.values_key) {
        let source = match config.governed.get(&module.values_key) {
            Some(name) => format!("ModuleConfig {name}"),
            None => "the ConfigMap".to_owned(),
        };
        result = Some((*b, source));
    }
    result
}

/// Runs `module`'s `enabled` program with `values` and `config_values` (whole
/// documents). `Ok(None)` when the module has no program.
pub(crate) async fn run_script(
    sandbox: &ScriptSandbox,
    module: &ModuleDir,
    values: &Value,
    config_values: &Value,
    timeout: Duration,
) -> Result<Option<(bool, Option<String>)>, AddonError> {
    let Some(program) = &module.enabled_script else {
        return Ok(None);
    };
    let failed = |reason: String| AddonError::Enabled {
        module: module.name.clone(),
        reason,
        cause: None,
    };
    let caused = |cause: Box<dyn std::error::Error + Send + Sync>| AddonError::Enabled {
        module: module.name.clone(),
        reason: cause.to_string(),
        cause: Some(cause),
    };
    if operon_hooks::load::is_wasm(program) {
        return run_wasm(module, program, values, config_values, timeout)
            .await
            .map(Some)
            .map_err(failed);
    }
    let program = std::path::absolute(program).map_err(|e| caused(e.into()))?;
    let module_dir = std::path::absolute(&module.path).map_err(|e| caused(e.into()))?;
    let dir = sandbox.prepare().map_err(|e| caused(e.into()))?;
    let mut request = SandboxRequest::new(format!("{}/enabled", module.name), &program);
    request.cwd = Some(module_dir.clone());
    request.read_only = vec![module_dir];
    request.timeout = timeout;
    request.output = OutputMode::Separate;
    for (file, contents) in [
        (VALUES, values.to_string()),
        (CONFIG_VALUES, config_values.to_string()),
        (ENABLED_RESULT, String::new()),
        (ENABLED_REASON, String::new()),
    ] {
        let path = dir
            .create_file(file.file, contents.as_bytes(), false)
            .map_err(|e| caused(e.into()))?;
        request
            .env
            .push((file.variable.to_owned(), path.display().to_string()));
    }
    let outcome = sandbox
        .run(&dir, &request)
        .await
        .map_err(|e| caused(e.into()))?;
    if !outcome.status.success() {
        let stderr = String::from_utf8_lossy(&outcome.stderr);
        let last = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(failed(format!("{} {}", outcome.status, last.trim())));
    }
    let read = |file: HookFile| {
        dir.read_file(file.file, 64 << 10)
            .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
            .map_err(|e| caused(e.into()))
    };
    let result = read(ENABLED_RESULT)?;
    let reason = Some(read(ENABLED_REASON)?).filter(|r| !r.is_empty());
    match result.as_str() {
        "true" => Ok(Some((true, None))),
        "false" => Ok(Some((false, reason))),
        "" => Err(failed(format!(
            "wrote nothing to ${}: expected true or false",
            ENABLED_RESULT.variable
        ))),
        other => Err(failed(format!(
            "wrote {other:?} to ${}: expected true or false",
            ENABLED_RESULT.variable
        ))),
    }
}

/// [`run_script`] of an `enabled` component, in the wasm sandbox module hooks share.
async fn run_wasm(
    module: &ModuleDir,
    program: &std::path::Path,
    values: &Value,
    config_values: &Value,
    timeout: Duration,
) -> Result<(bool, Option<String>), String> {
    let sandbox = super::hooks::wasm_sandbox().map_err(|e| e.to_string())?;
    let component = sandbox
        .load_enabled_file(program)
        .map_err(|e| e.to_string())?;
    let given = operon_sandbox::HookValues {
        values: values.to_string(),
        config_values: config_values.to_string(),
    };
    let limits = operon_sandbox::CallLimits {
        timeout,
        ..operon_sandbox::CallLimits::default()
    };
    let report = sandbox
        .run_enabled(
            &component,
            &format!("{}/enabled", module.name),
            given,
            &limits,
        )
        .await;
    for record in &report.logs {
        tracing::info!(module = %module.name, level = ?record.level, fields = ?record.fields, "enabled: {}", record.message);
    }
    report.outcome.map_err(|e| e.to_string())
}
