//! `Hook`: a hook run in the cluster from an uploaded module (namespaced). The spec
//! names the module (a Module name, which follows the Module, or a `sha256:` digest,
//! which pins), overrides some of what the hook declares, and grants what the hook may
//! do: the kinds it may watch and the patch operations it may apply, on which kinds and
//! namespaces. The status shows the digest loaded, the bindings, the last run and the
//! last error, with `Loaded` and `Ready` conditions.

use super::condition::Condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A Hook: the module `spec.module` run by the hook engine of `operon serve` (its
/// leader), with `spec.permissions` bounding what it may watch and patch.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "operon.dev",
    version = "v1alpha1",
    kind = "Hook",
    plural = "hooks",
    shortname = "hk",
    namespaced,
    status = "HookStatus",
    printcolumn = r#"{"name":"Module","type":"string","jsonPath":".spec.module"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Last-Run","type":"date","jsonPath":".status.lastRun.time"}"#,
    printcolumn = r#"{"name":"Outcome","type":"string","jsonPath":".status.lastRun.outcome"}"#,
    printcolumn = r#"{"name":"Digest","type":"string","priority":1,"jsonPath":".status.digest"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct HookSpec {
    /// The module: the name of a Module (the hook is reloaded when the Module points to
    /// new bytes), `sha256:<64 hex digits>` (pinned), or an OCI artifact,
    /// `oci://REGISTRY/REPOSITORY@sha256:<hex>` or `...:TAG` (a tag is resolved when the
    /// Hook loads and stays pinned, in `status.pinnedModule`, until the spec changes). It
    /// must be of the `hook` world.
    #[schemars(length(min = 1))]
    pub module: String,
    /// For an `oci://` module: Secrets of type `kubernetes.io/dockerconfigjson` (or
    /// `kubernetes.io/dockercfg`) in the Hook's namespace holding the registry's
    /// credentials, tried in order. The engine needs `get` on them (a Role in that
    /// namespace bound to its ServiceAccount).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<super::SecretReference>,
    /// Changes to what the hook declares, made without rebuilding it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overrides: Option<HookOverrides>,
    /// What the hook may watch and patch. A binding outside `watch` keeps the hook from
    /// loading; a patch outside `patch` fails the run that submitted it.
    #[serde(default)]
    pub permissions: HookPermissions,
    /// Where each run happens: `Sandbox` (default), in the engine's wasm sandbox, or
    /// `Job`, a Kubernetes Job of Operon's image in the Hook's namespace that fetches
    /// the module by digest from the module API and runs it on the run's binding
    /// contexts, for hooks that need minutes of CPU or more memory than the engine
    /// grants. The engine still watches, queues, and applies the run's patches under
    /// `permissions`; a run's binding contexts must fit in a ConfigMap (1 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_on: Option<super::WasmRunOn>,
    /// The Job's settings when `runOn` is `Job` (`onDiagnosisNode` does not apply: a
    /// Hook is about no node). Its ServiceAccount fetches the module, so it needs `get`
    /// on `modules.operon.dev` (the ClusterRole `operon-module-reader`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<super::WasmJob>,
    /// Runs this Hook as the shadow of the live hook of that name (as `operon debug
    /// hook list` shows it: `pods.sh` for a hook of the hooks directory, `Hook/NS/NAME`
    /// for a Hook object): it gets the live hook's inputs (its queue runs and reviews)
    /// instead of its own bindings', and its patches and answers are compared with the
    /// live hook's and never applied. Its permissions must cover the live hook's
    /// bindings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow_of: Option<String>,
}

impl HookSpec {
    /// Whether each run is a Job.
    pub fn offloaded(&self) -> bool {
        self.run_on == Some(super::WasmRunOn::Job)
    }
}

/// Overrides of a hook's declared configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookOverrides {
    /// The queue of every schedule and kubernetes binding (unless a binding's own
    /// override names another).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// The budget of one run, e.g. `30s` (the hook's `settings.timeout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// The least time between two runs, e.g. `5s` (shell-operator's
    /// `settings.executionMinInterval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_min_interval: Option<String>,
    /// Runs allowed back to back before `executionMinInterval` applies
    /// (`settings.executionBurst`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub execution_burst: Option<u32>,
    /// Overrides of schedule bindings, by binding name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedule: Vec<ScheduleOverride>,
    /// Overrides of kubernetes bindings, by binding name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kubernetes: Vec<KubernetesOverride>,
    /// The enforcement of every validating and mutating binding (unless a binding's own
    /// override says another): `Deny`, `Warn` (allowed, the denial shown as a warning)
    /// or `DryRun` (allowed, the answer only logged and counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforcement: Option<crate::model::Enforcement>,
    /// Overrides of kubernetesValidating bindings, by binding name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validating: Vec<AdmissionOverride>,
    /// Overrides of kubernetesMutating bindings, by binding name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mutating: Vec<AdmissionOverride>,
}

/// An override of one validating or mutating binding.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionOverride {
    /// The binding's name, as the hook declares it.
    pub name: String,
    /// Its enforcement: `Deny`, `Warn` or `DryRun`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforcement: Option<crate::model::Enforcement>,
}

/// An override of one schedule binding.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleOverride {
    /// The binding's name, as the hook declares it.
    pub name: String,
    /// Its crontab instead of the declared one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crontab: Option<String>,
    /// Its queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Whether a failed run is counted and not retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_failure: Option<bool>,
}

/// An override of one kubernetes binding.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesOverride {
    /// The binding's name, as the hook declares it.
    pub name: String,
    /// Watch only these namespaces (the binding's `namespace.nameSelector.matchNames`),
    /// e.g. to keep a hook declared for every namespace within the ones it may watch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
    /// Its queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Whether a failed run is counted and not retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_failure: Option<bool>,
}

/// What a hook may do. Namespaces: none listed means the Hook's own namespace, `*`
/// every namespace; they do not apply to cluster-scoped kinds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookPermissions {
    /// The kinds its kubernetes bindings may watch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watch: Vec<WatchPermission>,
    /// The patch operations it may apply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patch: Vec<PatchPermission>,
}

/// Permission to watch one kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WatchPermission {
    /// The kind's `apiVersion`, e.g. `v1` or `apps/v1` (any version of the group is
    /// accepted: they are the same objects).
    pub api_version: String,
    /// The kind, e.g. `Pod`.
    pub kind: String,
    /// The namespaces (none: the Hook's own; `*`: every namespace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
}

/// Permission to apply some patch operations to one kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatchPermission {
    /// The kind's `apiVersion`, e.g. `v1` or `apps/v1`.
    pub api_version: String,
    /// The kind, e.g. `ConfigMap`.
    pub kind: String,
    /// The namespaces (none: the Hook's own; `*`: every namespace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// The operations allowed.
    #[schemars(length(min = 1))]
    pub operations: Vec<PatchOperationName>,
}

/// A patch operation, in shell-operator's spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum PatchOperationName {
    /// `Create`.
    Create,
    /// `CreateOrUpdate`.
    CreateOrUpdate,
    /// `CreateIfNotExists`.
    CreateIfNotExists,
    /// `Delete`, and its `DeleteInBackground` and `DeleteNonCascading` forms.
    Delete,
    /// `MergePatch`.
    MergePatch,
    /// `JSONPatch`.
    #[serde(rename = "JSONPatch")]
    JsonPatch,
    /// `JQPatch`.
    #[serde(rename = "JQPatch")]
    JqPatch,
}

impl PatchOperationName {
    /// The name as written in the spec.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "Create",
            Self::CreateOrUpdate => "CreateOrUpdate",
            Self::CreateIfNotExists => "CreateIfNotExists",
            Self::Delete => "Delete",
            Self::MergePatch => "MergePatch",
            Self::JsonPatch => "JSONPatch",
            Self::JqPatch => "JQPatch",
        }
    }
}

/// What the engine made of a Hook.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookStatus {
    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The digest of the module loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// For an `oci://` module, the reference it was pulled by, pinned to its manifest's
    /// digest (`oci://REGISTRY/REPOSITORY@sha256:...`): a tag is resolved once, for the
    /// spec of `observedGeneration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_module: Option<String>,
    /// The bindings the hook runs with (after overrides).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bindings: Vec<HookBindingStatus>,
    /// The last run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<HookRunStatus>,
    /// The last error: of loading the hook, or of its last failed run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The last failed runs, oldest first, at most five: what `kubectl describe hook`
    /// shows of a hook that fails now and then. A success leaves them (they change on
    /// failures only); the `Ready` condition says how the hook runs now.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_failures: Vec<HookFailure>,
    /// For a shadow (`spec.shadowOf`), how its runs compare with the live hook's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<HookShadowStatus>,
    /// `Loaded` (the module loaded, its configuration is valid and within the
    /// permissions) and `Ready` (its bindings are watched and its last run succeeded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// How a shadow Hook's runs compare with its live hook's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookShadowStatus {
    /// The live hook.
    pub live: String,
    /// Runs compared.
    pub runs: u64,
    /// Runs whose patches or answers differed from the live hook's.
    pub diverged: u64,
    /// The last run that differed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_divergence: Option<HookDivergence>,
}

/// One run of a shadow that differed from its live hook's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookDivergence {
    /// When it ended.
    pub time: Time,
    /// The binding of its first binding context.
    pub binding: String,
    /// What it concerned (`Pod demo/web`, `CREATE Pod demo/api`).
    pub object: String,
    /// What differed, one line each (cut at 1 KiB).
    pub differences: Vec<String>,
}

/// One binding of a loaded hook.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookBindingStatus {
    /// Its name.
    pub name: String,
    /// `onStartup`, `schedule` or `kubernetes`.
    #[serde(rename = "type")]
    pub type_: String,
    /// What a kubernetes binding watches: `apiVersion/kind` as resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watches: Option<String>,
    /// The namespaces a kubernetes binding watches (none: every namespace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// A schedule binding's crontab.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crontab: Option<String>,
    /// The queue its runs go to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
}

/// One run of a hook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookRunStatus {
    /// When it ended.
    pub time: Time,
    /// The binding of its first binding context.
    pub binding: String,
    /// How it ended.
    pub outcome: HookRunOutcome,
    /// How long the hook ran, in milliseconds.
    pub duration_ms: u64,
    /// How many patch operations it submitted.
    pub patches: u32,
}

/// One failed run of a hook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookFailure {
    /// When it ended.
    pub time: Time,
    /// The bindings of its binding contexts.
    pub binding: String,
    /// What started it (`Added Pod demo/web-1`, `schedule`, `Synchronization (3
    /// objects)`...).
    pub trigger: String,
    /// `Failed` (retried) or `AllowedFailure` (on a binding with `allowFailure`).
    pub outcome: HookRunOutcome,
    /// Why it failed (cut at 1 KiB).
    pub error: String,
    /// A script hook's exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

impl HookFailure {
    /// How many failures a Hook's status keeps (`status.lastFailures` says five).
    pub const KEPT: usize = 5;
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum HookRunOutcome {
    /// The hook succeeded and its patches and metrics were applied.
    Succeeded,
    /// The hook or applying what it submitted failed; the run is retried.
    Failed,
    /// It failed on a binding with `allowFailure`: counted, not retried.
    AllowedFailure,
}

impl HookRunOutcome {
    /// The outcome as it is written in the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
            Self::AllowedFailure => "AllowedFailure",
        }
    }
}

/// The operation names [`PatchOperationName`] reads, as written in a spec.
const OPERATION_NAMES: [&str; 7] = [
    "Create",
    "CreateOrUpdate",
    "CreateIfNotExists",
    "Delete",
    "MergePatch",
    "JSONPatch",
    "JQPatch",
];

/// Every problem of a Hook's spec that shows without its module, as `(field, reason)`:
/// the form of `spec.module`, permissions that cannot be read (a malformed
/// `apiVersion`, an empty kind or namespace, a patch grant without operations or with
/// an operation of no known name) and overrides that cannot apply to any hook
/// (durations and crontabs that do not parse, a binding named twice or not at all).
/// Whether an override's binding exists is the module's to say: the engine reports it
/// in the `Loaded` condition. Works on the JSON tree, so that one field of the wrong
/// type does not hide the others' problems.
pub fn spec_problems(object: &serde_json::Value) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    let Some(spec) = object.get("spec") else {
        return problems;
    };
    if let Some(module) = spec.get("module").and_then(|v| v.as_str())
        && let Some(reason) = module_reference_problem(module)
    {
        problems.push(("spec.module".to_owned(), reason));
    }
    let permissions = spec.get("permissions");
    for list in ["watch", "patch"] {
        for (i, grant) in items(permissions.and_then(|p| p.get(list))) {
            let at = format!("spec.permissions.{list}[{i}]");
            grant_problems(&at, grant, list == "patch", &mut problems);
        }
    }
    if let Some(overrides) = spec.get("overrides") {
        override_problems(overrides, &mut problems);
    }
    job_problems(spec, &mut problems);
    if let Some(live) = spec.get("shadowOf") {
        match live.as_str() {
            Some(name) if !name.trim().is_empty() => {
                if spec.get("runOn").and_then(|v| v.as_str()) == Some("Job") {
                    problems.push((
                        "spec.shadowOf".to_owned(),
                        "a shadow runs in the engine's sandbox beside its live hook: it cannot have runOn: Job".to_owned(),
                    ));
                }
            }
            _ => problems.push((
                "spec.shadowOf".to_owned(),
                "must name the live hook (as `operon debug hook list` shows it)".to_owned(),
            )),
        }
    }
    problems
}

/// `spec.job` is used only with `runOn: Job`, where a Hook's runs are Jobs of
/// Operon's image: its settings are checked as an offloaded step's are, and
/// `onDiagnosisNode`, which needs a Diagnosis, is refused.
fn job_problems(spec: &serde_json::Value, problems: &mut Vec<(String, String)>) {
    let Some(job) = spec.get("job") else {
        return;
    };
    if spec.get("runOn").and_then(|v| v.as_str()) != Some("Job") {
        problems.push((
            "spec.job".to_owned(),
            "is only used with runOn: Job; set runOn: Job or remove it".to_owned(),
        ));
        return;
    }
    // A job that does not deserialize is reported by the typed check.
    let Ok(job) = serde_json::from_value::<super::WasmJob>(job.clone()) else {
        return;
    };
    if job.on_diagnosis_node {
        problems.push((
            "spec.job.onDiagnosisNode".to_owned(),
            "a Hook is about no node, so its Jobs cannot follow one; use nodeSelector".to_owned(),
        ));
    }
    let processor = super::WasmProcessor {
        module: String::new(),
        image_pull_secrets: Vec::new(),
        config: Default::default(),
        read_only_paths: Vec::new(),
        run_on: Some(super::WasmRunOn::Job),
        job: Some(job),
    };
    for (field, reason) in processor
        .job_processor("operon", Vec::new(), Vec::new())
        .problems()
    {
        problems.push((format!("spec.job.{field}"), reason));
    }
}

fn items(list: Option<&serde_json::Value>) -> impl Iterator<Item = (usize, &serde_json::Value)> {
    list.and_then(|l| l.as_array())
        .into_iter()
        .flatten()
        .enumerate()
}

fn module_reference_problem(module: &str) -> Option<String> {
    if module.is_empty() {
        return Some("empty: name a Module, or pin its bytes with sha256:<64 hex digits>".into());
    }
    if module.starts_with("oci://") {
        return super::oci_reference_problem(module).map(|reason| format!("{module}: {reason}"));
    }
    if let Some(hex) = module.strip_prefix("sha256:") {
        let ok = hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        return (!ok).then(|| {
            format!("{module:?} is not a digest: sha256: is followed by 64 lowercase hex digits")
        });
    }
    if module.contains('/') || module.ends_with(".wasm") {
        return Some(format!(
            "{module:?} is a path: a Hook runs a module of the module store; name its Module \
             or its sha256: digest (`operon module push` uploads a file)"
        ));
    }
    (!crate::conventions::names::is_dns_subdomain(module)).then(|| {
        format!(
            "{module:?} is not a Module name (lowercase letters, digits, '-' and '.', starting \
             and ending with a letter or digit, at most 253 characters) nor a sha256: digest"
        )
    })
}

fn grant_problems(
    at: &str,
    grant: &serde_json::Value,
    patch: bool,
    problems: &mut Vec<(String, String)>,
) {
    if let Some(api_version) = grant.get("apiVersion").and_then(|v| v.as_str())
        && let Err(reason) = crate::model::split_api_version(api_version)
    {
        problems.push((format!("{at}.apiVersion"), reason));
    }
    if let Some(kind) = grant.get("kind").and_then(|v| v.as_str())
        && kind.trim().is_empty()
    {
        problems.push((format!("{at}.kind"), "empty: name a kind, e.g. Pod".into()));
    }
    for (j, namespace) in items(grant.get("namespaces")) {
        if namespace.as_str().is_some_and(|n| n.trim().is_empty()) {
            problems.push((
                format!("{at}.namespaces[{j}]"),
                "empty: name a namespace, or * for every namespace".into(),
            ));
        }
    }
    if !patch {
        return;
    }
    match grant.get("operations").and_then(|v| v.as_array()) {
        Some(operations) if operations.is_empty() => problems.push((
            format!("{at}.operations"),
            "empty: list the operations it grants".into(),
        )),
        Some(operations) => {
            for (j, name) in operations.iter().enumerate() {
                if let Some(name) = name.as_str().filter(|n| !OPERATION_NAMES.contains(n)) {
                    problems.push((
                        format!("{at}.operations[{j}]"),
                        format!(
                            "unknown operation {name:?}; expected one of {}",
                            OPERATION_NAMES.join(", ")
                        ),
                    ));
                }
            }
        }
        None => {}
    }
}

fn override_problems(overrides: &serde_json::Value, problems: &mut Vec<(String, String)>) {
    for field in ["timeout", "executionMinInterval"] {
        if let Some(text) = overrides.get(field).and_then(|v| v.as_str())
            && let Err(e) = humantime::parse_duration(text)
        {
            problems.push((
                format!("spec.overrides.{field}"),
                format!("{text:?} is not a duration, e.g. 30s or 1m30s ({e})"),
            ));
        }
    }
    if let Some(queue) = overrides.get("queue").and_then(|v| v.as_str())
        && queue.trim().is_empty()
    {
        problems.push(("spec.overrides.queue".into(), "empty: name a queue".into()));
    }
    for list in ["schedule", "kubernetes", "validating", "mutating"] {
        let mut seen: Vec<(&str, usize)> = Vec::new();
        for (i, binding) in items(overrides.get(list)) {
            let at = format!("spec.overrides.{list}[{i}]");
            if let Some(name) = binding.get("name").and_then(|v| v.as_str()) {
                if name.is_empty() {
                    problems.push((
                        format!("{at}.name"),
                        format!("empty: name the {list} binding it overrides"),
                    ));
                } else if let Some((_, first)) = seen.iter().find(|(n, _)| *n == name) {
                    problems.push((
                        format!("{at}.name"),
                        format!(
                            "the binding {name:?} is overridden already by \
                             spec.overrides.{list}[{first}]: merge the two"
                        ),
                    ));
                } else {
                    seen.push((name, i));
                }
            }
            if let Some(queue) = binding.get("queue").and_then(|v| v.as_str())
                && queue.trim().is_empty()
            {
                problems.push((format!("{at}.queue"), "empty: name a queue".into()));
            }
            if let Some(crontab) = binding.get("crontab").and_then(|v| v.as_str())
                && let Err(e) = crate::schedule::Schedule::parse(crontab)
            {
                problems.push((format!("{at}.crontab"), format!("{crontab:?}: {e}")));
            }
            for (j, namespace) in items(binding.get("namespaces")) {
                if namespace.as_str().is_some_and(|n| n.trim().is_empty()) {
                    problems.push((
                        format!("{at}.namespaces[{j}]"),
                        "empty: name a namespace".into(),
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt as _;

    #[test]
    fn the_crd_is_namespaced_with_a_status_and_printer_columns() {
        let crd = Hook::crd();
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.plural, "hooks");
        let version = &crd.spec.versions[0];
        assert!(version.subresources.as_ref().unwrap().status.is_some());
        let columns: Vec<String> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(
            columns,
            [
                "Module", "Ready", "Reason", "Last-Run", "Outcome", "Digest", "Age"
            ]
            .map(String::from)
        );
    }

    #[test]
    fn permissions_read_shell_operator_operation_names() {
        let spec: HookSpec = serde_json::from_value(serde_json::json!({
            "module": "pod-labeler",
            "permissions": {
                "watch": [{"apiVersion": "v1", "kind": "Pod"}],
                "patch": [{"apiVersion": "v1", "kind": "Pod", "namespaces": ["*"],
                           "operations": ["MergePatch", "JSONPatch", "JQPatch", "Delete"]}],
            },
        }))
        .unwrap();
        assert_eq!(
            spec.permissions.patch[0].operations,
            [
                PatchOperationName::MergePatch,
                PatchOperationName::JsonPatch,
                PatchOperationName::JqPatch,
                PatchOperationName::Delete
            ]
        );
        assert!(spec.permissions.watch[0].namespaces.is_empty());
    }

    #[test]
    fn job_settings_need_run_on_job_and_no_diagnosis_node() {
        let problems = |spec: serde_json::Value| {
            spec_problems(&serde_json::json!({"spec": spec}))
                .into_iter()
                .map(|(field, _)| field)
                .collect::<Vec<_>>()
        };
        let ok = serde_json::json!({"module": "heavy", "runOn": "Job",
            "job": {"serviceAccountName": "hook-runner", "nodeSelector": {"pool": "batch"}}});
        assert!(problems(ok.clone()).is_empty());
        let spec: HookSpec = serde_json::from_value(ok).unwrap();
        assert!(spec.offloaded());
        assert_eq!(
            problems(serde_json::json!({"module": "heavy", "job": {}})),
            ["spec.job"]
        );
        assert_eq!(
            problems(serde_json::json!({"module": "heavy", "runOn": "Job",
                "job": {"onDiagnosisNode": true, "imagePullPolicy": "Sometimes",
                        "serviceAccountName": "Not_A_Name"}})),
            [
                "spec.job.onDiagnosisNode",
                "spec.job.serviceAccountName",
                "spec.job.imagePullPolicy"
            ]
        );
    }
}
