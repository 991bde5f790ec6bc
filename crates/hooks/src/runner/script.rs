//! shell-operator hooks directories, run unchanged in the script sandbox.
//!
//! [`discover`] follows shell-operator's rules: every executable file under the
//! directory is a hook; hidden entries, `lib/` directories and `.yaml`, `.json`, `.md`
//! and `.txt` files are skipped; paths are sorted. A [`ScriptHook`] is a
//! [`Hook`]: `configure` runs the hook with `--config` and parses its
//! YAML or JSON; `handle` writes the binding contexts to `$BINDING_CONTEXT_PATH`, runs the
//! hook, and reads its patch, metrics and response files back into the same typed values
//! a wasm hook returns. The files live in the run's private directory and are gone with
//! it. Unlike shell-operator, a hook gets no environment but the contract's variables
//! and a declared allow-list, and every run has a deadline.

use super::{ConfigureError, Hook, HookError, HookRun, cluster_access};
use crate::shell_operator::files::{
    ADMISSION_RESPONSE, BINDING_CONTEXT, CONVERSION_RESPONSE, HookFile, HookFileError,
    KUBERNETES_PATCH, METRICS, OUTPUT_FILES, VALIDATING_RESPONSE,
};
use crate::shell_operator::{self, patches, responses};
use futures::future::BoxFuture;
use operon_data::model::{
    ConfigVersion, HookConfig, HookInput, HookOutput, MetricOperation, PatchOperation,
};
use operon_script::{
    Limits, OutputMode, RunDir, RunStatus, SandboxError, SandboxRequest, ScriptSandbox,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Why a hooks directory could not be read.
#[derive(Debug, thiserror::Error)]
#[error("hooks directory {path}: {source}")]
pub struct DiscoveryError {
    /// The path that could not be read.
    pub(crate) path: PathBuf,
    /// The underlying error.
    #[source]
    pub(crate) source: std::io::Error,
}

/// Why a script hook's run failed, as the hook contract reports it
/// ([`HookError::Script`]).
#[derive(Debug, thiserror::Error)]
pub enum ScriptHookError {
    /// The run directory or its files could not be prepared.
    #[error(transparent)]
    Prepare(#[from] SandboxError),
    /// The sandbox could not start the hook.
    #[error("hook {hook}: {source}")]
    Start {
        /// The hook's name.
        hook: String,
        /// Why.
        #[source]
        source: SandboxError,
    },
    /// The hook exited non-zero, was killed or timed out.
    #[error("hook {hook} failed ({status}){tail}")]
    Failed {
        /// The hook's name.
        hook: String,
        /// How it ended.
        status: RunStatus,
        /// `": <last line of stderr>"`, or empty.
        tail: String,
    },
    /// A file the hook wrote cannot be read.
    #[error("hook {hook}: {source}")]
    File {
        /// The hook's name.
        hook: String,
        /// Which file, which line, why.
        #[source]
        source: HookFileError,
    },
}

impl ScriptHookError {
    /// Whether the hook was killed at its deadline or its output bound, limits a run
    /// with fewer binding contexts may stay within.
    pub(crate) fn is_limit(&self) -> bool {
        matches!(
            self,
            Self::Failed {
                status: RunStatus::TimedOut | RunStatus::OutputExceeded,
                ..
            }
        )
    }
}

/// File extensions shell-operator never treats as hooks.
const SKIPPED_EXTENSIONS: [&str; 4] = ["yaml", "json", "md", "txt"];

/// The hooks under `dir`, sorted, as absolute paths.
pub fn discover(dir: &Path) -> Result<Vec<PathBuf>, DiscoveryError> {
    let mut hooks = Vec::new();
    walk(dir, &mut hooks)?;
    hooks.sort();
    Ok(hooks)
}

fn walk(dir: &Path, hooks: &mut Vec<PathBuf>) -> Result<(), DiscoveryError> {
    use std::os::unix::fs::PermissionsExt as _;
    let err = |source| DiscoveryError {
        path: dir.to_owned(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(err)? {
        let entry = entry.map_err(err)?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        // Symlinks count as what they point to, as in shell-operator.
        let Ok(metadata) = std::fs::metadata(&path) else {
            continue;
        };
        if metadata.is_dir() {
            if name != "lib" {
                walk(&path, hooks)?;
            }
            continue;
        }
        let skipped = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| SKIPPED_EXTENSIONS.contains(&e));
        if metadata.is_file() && !skipped && metadata.permissions().mode() & 0o111 != 0 {
            hooks.push(path);
        }
    }
    Ok(())
}

/// How script hooks run, besides the sandbox's own settings.
#[derive(Debug, Clone)]
pub struct ScriptHookSettings {
    /// Variables the hook may see besides the contract's (its declared allow-list).
    pub(crate) env: Vec<(String, String)>,
    /// Whether the hook may use the network (it needs it to call kubectl itself).
    pub network: bool,
    /// Paths the hook may read besides the hooks directory and the system's.
    pub read_only: Vec<PathBuf>,
    /// Whether the hook was given cluster access
    /// ([`ClusterAccess`](super::cluster_access::ClusterAccess)).
    pub cluster_access: bool,
    /// Limits, when the hook overrides the sandbox's.
    pub(crate) limits: Option<Limits>,
    /// Per-hook strict mode; `None` uses the sandbox's.
    pub(crate) strict: Option<bool>,
    /// Bytes of stdout and of stderr kept; more kills the run.
    pub(crate) output_limit: usize,
    /// Bytes each output file may hold.
    pub(crate) file_limit: u64,
    /// The deadline of `--config`.
    pub(crate) config_timeout: Duration,
}

impl ScriptHookSettings {
    /// Gives the hook the network, the credentials of `access` (read-only) and its
    /// in-cluster variables.
    pub fn grant_cluster_access(&mut self, access: &cluster_access::ClusterAccess) {
        self.network = true;
        self.cluster_access = true;
        self.read_only.push(access.credentials().to_owned());
        self.env.extend(access.env().iter().cloned());
    }
}

impl Default for ScriptHookSettings {
    fn default() -> Self {
        Self {
            env: Vec::new(),
            network: false,
            read_only: Vec::new(),
            cluster_access: false,
            limits: None,
            strict: None,
            output_limit: 1 << 20,
            file_limit: 16 << 20,
            config_timeout: Duration::from_secs(10),
        }
    }
}

/// Files a caller adds to one run besides shell-operator's: inputs written before the
/// run, and outputs created empty and read back after a successful one (addon-operator's
/// values files are such a set).
#[derive(Debug, Clone, Default)]
pub struct ExtraFiles {
    /// Files written before the run, each named to the hook by its variable.
    pub inputs: Vec<(HookFile, Vec<u8>)>,
    /// Files created empty before the run and read back after it, in this order.
    pub outputs: Vec<HookFile>,
}

/// A shell-operator hook: an executable in a hooks directory.
#[derive(Debug, Clone)]
pub struct ScriptHook {
    /// The path relative to the hooks directory, shell-operator's hook name.
    name: String,
    /// The executable.
    path: PathBuf,
    /// The hooks directory, readable by the hook (its `lib/` lives there).
    hooks_dir: PathBuf,
    sandbox: ScriptSandbox,
    settings: ScriptHookSettings,
    /// The format of the configuration it printed, which decides the shape of the
    /// binding contexts it is given; shared by clones, which are the same hook.
    version: Arc<Mutex<ConfigVersion>>,
}

impl ScriptHook {
    /// The hook at `path` inside `hooks_dir`.
    pub fn new(sandbox: ScriptSandbox, hooks_dir: &Path, path: &Path) -> Self {
        let name = path
            .strip_prefix(hooks_dir)
            .unwrap_or(path)
            .display()
            .to_string();
        Self {
            name,
            path: path.to_owned(),
            hooks_dir: hooks_dir.to_owned(),
            sandbox,
            settings: ScriptHookSettings::default(),
            version: Arc::default(),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &ScriptHookSettings {
        &self.settings
    }

    /// Replaces the settings.
    pub fn with_settings(mut self, settings: ScriptHookSettings) -> Self {
        self.settings = settings;
        self
    }

    fn request(&self, timeout: Duration) -> SandboxRequest {
        let mut request = SandboxRequest::new(self.name.clone(), self.path.clone());
        // shell-operator runs hooks from their own directory.
        request.cwd = self.path.parent().map(Path::to_owned);
        request.read_only = vec![self.hooks_dir.clone()];
        request
            .read_only
            .extend(self.settings.read_only.iter().cloned());
        request.env = self.settings.env.clone();
        request.network = self.settings.network;
        request.timeout = timeout;
        request.output = OutputMode::Separate;
        request.output_limit = self.settings.output_limit;
        request.limits = self.settings.limits.clone();
        request.strict = self.settings.strict;
        request
    }

    async fn configure_once(&self) -> Result<HookConfig, HookError> {
        self.configure_with(|text| Ok(text.to_owned())).await
    }

    /// Asks the hook for its configuration, passing what it printed through `filter`
    /// before it is read: a caller that knows keys shell-operator does not (an
    /// addon-operator hook's `beforeHelm`, say) takes them out there.
    pub async fn configure_with(
        &self,
        filter: impl FnOnce(&str) -> Result<String, Box<dyn std::error::Error + Send + Sync>> + Send,
    ) -> Result<HookConfig, HookError> {
        let failed = |reason: ConfigureError| HookError::Configure {
            hook: self.name.clone(),
            reason: Arc::new(reason),
        };
        let run = self
            .sandbox
            .prepare()
            .map_err(|e| failed(ConfigureError::Sandbox(e)))?;
        let mut request = self.request(self.settings.config_timeout);
        request.args = vec!["--config".to_owned()];
        let outcome = self
            .sandbox
            .run(&run, &request)
            .await
            .map_err(|e| failed(ConfigureError::Sandbox(e)))?;
        if !outcome.status.success() {
            return Err(failed(ConfigureError::Failed {
                status: outcome.status,
                tail: tail(&outcome.stderr),
            }));
        }
        let text = filter(&String::from_utf8_lossy(&outcome.stdout))
            .map_err(|e| failed(ConfigureError::Filter(e)))?;
        let parsed = shell_operator::config::parse_with_warnings(&self.name, &text)
            .map_err(|problems| failed(ConfigureError::Invalid { problems }))?;
        for warning in &parsed.warnings {
            tracing::warn!(hook = %self.name, "{warning}");
        }
        *self.version.lock().unwrap_or_else(PoisonError::into_inner) = parsed.config.version;
        Ok(parsed.config)
    }

    async fn handle_once(&self, input: &HookInput, timeout: Duration) -> HookRun {
        self.handle_with_files(input, timeout, &ExtraFiles::default())
            .await
            .0
    }

    /// Runs the hook once as [`Hook::handle`] does, with `extra` files besides
    /// shell-operator's; returns the contents of `extra.outputs`, in order, when the run
    /// succeeded (nothing otherwise).
    pub async fn handle_with_files(
        &self,
        input: &HookInput,
        timeout: Duration,
        extra: &ExtraFiles,
    ) -> (HookRun, Vec<Vec<u8>>) {
        let started = Instant::now();
        let mut run = HookRun {
            outcome: Err(HookError::Run(String::new())),
            patches: Vec::new(),
            metrics: Vec::new(),
            logs: Vec::new(),
            stdout: String::new(),
            stderr: String::new(),
            elapsed: Duration::ZERO,
        };
        let mut outputs = Vec::new();
        let result = self
            .handle_in_sandbox(input, timeout, &mut run, extra, &mut outputs)
            .await;
        run.outcome = result.map_err(|error| HookError::Script {
            error: Arc::new(error),
            cluster_hint: !self.settings.cluster_access
                && cluster_access::looks_like_a_cluster_call(&run.stderr),
        });
        run.elapsed = started.elapsed();
        if run.outcome.is_err() {
            outputs.clear();
        }
        (run, outputs)
    }

    async fn handle_in_sandbox(
        &self,
        input: &HookInput,
        timeout: Duration,
        out: &mut HookRun,
        extra: &ExtraFiles,
        extra_outputs: &mut Vec<Vec<u8>>,
    ) -> Result<HookOutput, ScriptHookError> {
        let dir = self.sandbox.prepare()?;
        let version = *self.version.lock().unwrap_or_else(PoisonError::into_inner);
        let mut request = self.request(timeout);
        // The run's span is current here (the engine instruments the run with it).
        if let Some(traceparent) = operon_runner::trace::traceparent() {
            let variable = operon_runner::trace::TRACEPARENT_ENV.to_owned();
            request.env.push((variable, traceparent));
        }
        let context_path = dir.write_file(BINDING_CONTEXT.file, false, |file| {
            shell_operator::context::write_for(version, &input.binding_contexts, file)
        })?;
        request.env.push((
            BINDING_CONTEXT.variable.to_owned(),
            context_path.display().to_string(),
        ));
        for file in OUTPUT_FILES {
            let path = dir.create_file(file.file, b"", false)?;
            request
                .env
                .push((file.variable.to_owned(), path.display().to_string()));
        }
        for (file, contents) in &extra.inputs {
            let path = dir.create_file(file.file, contents, false)?;
            request
                .env
                .push((file.variable.to_owned(), path.display().to_string()));
        }
        for file in &extra.outputs {
            let path = dir.create_file(file.file, b"", false)?;
            request
                .env
                .push((file.variable.to_owned(), path.display().to_string()));
        }
        let outcome =
            self.sandbox
                .run(&dir, &request)
                .await
                .map_err(|source| ScriptHookError::Start {
                    hook: self.name.clone(),
                    source,
                })?;
        out.stdout = String::from_utf8_lossy(&outcome.stdout).into_owned();
        out.stderr = String::from_utf8_lossy(&outcome.stderr).into_owned();

        let files = self.read_files(&dir);
        if outcome.status != RunStatus::Exited(0) {
            // Reported so that users can see what a failed run tried to do; the engine
            // applies nothing from a failed run.
            if let Ok((patches, metrics, _)) = files {
                out.patches = patches;
                out.metrics = metrics;
            }
            return Err(ScriptHookError::Failed {
                hook: self.name.clone(),
                status: outcome.status,
                tail: tail(&outcome.stderr),
            });
        }
        let (patches, metrics, output) = files.map_err(|source| ScriptHookError::File {
            hook: self.name.clone(),
            source,
        })?;
        out.patches = patches;
        out.metrics = metrics;
        for file in &extra.outputs {
            let bytes = dir
                .read_file(file.file, self.settings.file_limit)
                .map_err(|e| ScriptHookError::File {
                    hook: self.name.clone(),
                    source: HookFileError {
                        variable: file.variable,
                        file: file.file,
                        line: 1,
                        reason: e.to_string(),
                    },
                })?;
            extra_outputs.push(bytes);
        }
        Ok(output)
    }

    #[allow(
        clippy::type_complexity,
        reason = "a private triple, named where destructured"
    )]
    fn read_files(
        &self,
        dir: &RunDir,
    ) -> Result<(Vec<PatchOperation>, Vec<MetricOperation>, HookOutput), HookFileError> {
        let read = |file: HookFile| -> Result<String, HookFileError> {
            let bytes = dir
                .read_file(file.file, self.settings.file_limit)
                .map_err(|e| HookFileError {
                    variable: file.variable,
                    file: file.file,
                    line: 1,
                    reason: e.to_string(),
                })?;
            String::from_utf8(bytes).map_err(|e| HookFileError {
                variable: file.variable,
                file: file.file,
                line: 1,
                reason: format!("not UTF-8: {e}"),
            })
        };
        let patches = patches::parse(&read(KUBERNETES_PATCH)?)?;
        let metrics = shell_operator::metrics::parse(&read(METRICS)?)?;
        // The newer variable wins when a hook writes both.
        let validating =
            match responses::parse_validating(ADMISSION_RESPONSE, &read(ADMISSION_RESPONSE)?)? {
                Some(response) => Some(response),
                None => {
                    responses::parse_validating(VALIDATING_RESPONSE, &read(VALIDATING_RESPONSE)?)?
                }
            };
        let conversion = responses::parse_conversion(&read(CONVERSION_RESPONSE)?)?;
        Ok((
            patches,
            metrics,
            HookOutput {
                validating,
                conversion,
            },
        ))
    }
}

/// `": <last non-empty line>"` of a stream, for failure messages.
fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| format!(": {}", l.trim()))
        .unwrap_or_default()
}

impl Hook for ScriptHook {
    fn name(&self) -> &str {
        &self.name
    }

    fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
        Box::pin(self.configure_once())
    }

    fn handle(&self, input: HookInput, timeout: Duration) -> BoxFuture<'_, (HookRun, HookInput)> {
        Box::pin(async move {
            let run = self.handle_once(&input, timeout).await;
            (run, input)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn touch(path: &Path, mode: u32) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn discovery_follows_shell_operator_rules() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        touch(&d.join("b-hook.sh"), 0o755);
        touch(&d.join("a/nested.py"), 0o700);
        touch(&d.join("a/lib/helper.sh"), 0o755);
        touch(&d.join("lib/common.sh"), 0o755);
        touch(&d.join(".hidden.sh"), 0o755);
        touch(&d.join(".git/hook"), 0o755);
        touch(&d.join("config.yaml"), 0o755);
        touch(&d.join("values.json"), 0o755);
        touch(&d.join("README.md"), 0o755);
        touch(&d.join("notes.txt"), 0o755);
        touch(&d.join("not-executable.sh"), 0o644);
        let found: Vec<_> = discover(d)
            .unwrap()
            .iter()
            .map(|p| p.strip_prefix(d).unwrap().display().to_string())
            .collect();
        assert_eq!(found, ["a/nested.py", "b-hook.sh"]);
    }

    #[test]
    fn tails_are_the_last_non_empty_line() {
        assert_eq!(tail(b"one\ntwo\n\n"), ": two");
        assert_eq!(tail(b""), "");
    }
}
