//! From a Hook object to a hook the engine can run: its module found in the module
//! store, loaded as a wasm hook, its declared configuration overridden by
//! `spec.overrides`, checked, and its bindings held against `spec.permissions`.
//! Every refusal carries a reason (for the `Loaded` condition) and a message naming
//! the field or binding at fault.

use futures::future::BoxFuture;
use kube::ResourceExt as _;
use operon_cluster::Cluster;
use operon_data::api::{Hook, HookBindingStatus, HookOverrides};
use operon_data::model::{
    HookConfig, HookInput, HookSettings, LabelOperator, LabelRequirement, LabelSelector,
    NamespaceSelector,
};
use operon_hooks::engine::LoadedHook;
use operon_hooks::load::{self, HookLoadError, HookLoader};
use operon_hooks::permitted::{Permissions, PermittedCluster, hook_name};
use operon_hooks::runner::job::{self, JobHook, JobOwner};
use operon_hooks::{HookError, HookRun};
use operon_runner::context::Platform;
use operon_runner::job::HOOK_UID_LABEL;
use operon_runner::offload::OffloadTarget;
use operon_sandbox::ModuleDigest;
use operon_store::oci_modules::{self, OciModuleError};
use operon_store::{ModuleError, ModuleLocator};
use std::sync::Arc;
use std::time::Duration;

/// Why a Hook object does not load: the `Loaded` condition's reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// CamelCase, e.g. `BindingNotPermitted`.
    pub reason: &'static str,
    /// What is wrong, naming the field or binding.
    pub message: String,
}

impl Refusal {
    pub(crate) fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

/// Where the runs of Hooks with `runOn: Job` go: the engine's offload target (its
/// image and module API), with the client that creates the Jobs.
#[derive(Clone)]
pub struct HookOffload {
    /// The image and module API the Jobs use.
    pub target: OffloadTarget,
    /// Creates and watches the Jobs.
    pub client: kube::Client,
    /// The platform the runs report in their runner context.
    pub platform: Platform,
}

/// A Hook object ready to run.
pub struct Prepared {
    /// The hook and its checked configuration.
    pub loaded: LoadedHook,
    /// Its configuration as declared, with the overrides applied.
    pub declared: HookConfig,
    /// The digest of its module.
    pub(crate) digest: ModuleDigest,
    /// Its bindings, for the status.
    pub bindings: Vec<HookBindingStatus>,
    /// The cluster its engine talks to: patches outside the permissions are refused.
    pub cluster: Arc<dyn Cluster>,
    /// Its admission webhooks, each kept to what its permissions let it read.
    pub webhooks: crate::serve::webhook::owned::OwnedWebhooks,
    /// Its permissions, checked.
    pub permissions: Arc<Permissions>,
}

/// The name a Hook object's hook runs under (in logs and metrics): `Hook/ns/name`.
pub(crate) fn run_name(hook: &Hook) -> String {
    run_name_of(&hook.namespace().unwrap_or_default(), &hook.name_any())
}

/// [`run_name`] of the Hook `name` in `namespace`.
pub(crate) fn run_name_of(namespace: &str, name: &str) -> String {
    format!("Hook/{}", hook_name(namespace, name))
}

/// The namespace and name of the Hook whose hook runs under `run_name` (the inverse
/// of [`run_name`]); `None` for a name of another source.
pub(crate) fn hook_of_run_name(run_name: &str) -> Option<(String, String)> {
    let (namespace, name) = run_name.strip_prefix("Hook/")?.split_once('/')?;
    Some((namespace.to_owned(), name.to_owned()))
}

/// Where `spec.module` of `hook` is, or why it cannot be found.
pub(crate) fn locate(locator: &ModuleLocator, hook: &Hook) -> Result<std::path::PathBuf, Refusal> {
    locator.locate_named(&hook.spec.module).map_err(|e| {
        let reason = match e {
            ModuleError::NotInStore { .. } => "ModuleNotInStore",
            ModuleError::PathNotAllowed { .. } => "InvalidModuleReference",
            _ => "ModuleNotFound",
        };
        Refusal::new(reason, format!("spec.module: {e}"))
    })
}

/// Pulls the `oci://` module of `hook` with the credentials of its
/// `spec.imagePullSecrets`: what its status pinned for this generation of its spec,
/// else `spec.module` itself (a tag is resolved now). The file and the pinned
/// reference, or why not and whether trying again may help.
pub(crate) async fn pull_oci(
    client: &kube::Client,
    locator: &ModuleLocator,
    hook: &Hook,
) -> Result<(std::path::PathBuf, String), (Refusal, bool)> {
    let refused = |e: OciModuleError| {
        let retry = e.may_resolve();
        (Refusal::new(e.reason(), format!("spec.module: {e}")), retry)
    };
    let Some(oci) = locator.oci() else {
        return Err((
            Refusal::new(
                "RegistryNotAllowed",
                format!(
                    "spec.module: {}: this engine pulls no oci:// module (start it with --allow-registry)",
                    hook.spec.module
                ),
            ),
            false,
        ));
    };
    let status = hook.status.as_ref();
    let pinned = status
        .filter(|s| {
            s.observed_generation.is_some() && s.observed_generation == hook.metadata.generation
        })
        .and_then(|s| s.pinned_module.as_deref());
    let wanted = oci_modules::wanted(&hook.spec.module, pinned);
    oci.check_allowed(wanted).map_err(refused)?;
    let namespace = hook.namespace().unwrap_or_default();
    let auth = oci_modules::secret_auth(
        client,
        &namespace,
        "spec.imagePullSecrets",
        &hook.spec.image_pull_secrets,
        wanted,
    )
    .await
    .map_err(refused)?;
    let resolved = oci.resolve(wanted, &auth).await.map_err(refused)?;
    let path = locator.locate_named(&resolved.pinned).map_err(|e| {
        (
            Refusal::new("ModuleNotFound", format!("spec.module: {e}")),
            true,
        )
    })?;
    Ok((path, resolved.pinned))
}

/// Loads `hook`'s module from `path` and checks it against its spec. A Hook with
/// `runOn: Job` runs in Jobs of `offload`, and is refused without it.
pub async fn prepare(
    hook: &Hook,
    path: &std::path::Path,
    loader: &HookLoader,
    cluster: Arc<dyn Cluster>,
    offload: Option<&HookOffload>,
) -> Result<Prepared, Refusal> {
    let namespace = hook.namespace().unwrap_or_default();
    let bytes = tokio::fs::read(path).await.map_err(|e| {
        Refusal::new(
            "ModuleNotFound",
            format!("spec.module: cannot read {}: {e}", path.display()),
        )
    })?;
    let digest = ModuleDigest::of(&bytes);
    drop(bytes);
    let module = loader.wasm_hook(run_name(hook), path).map_err(|e| {
        Refusal::new(
            "NotAHook",
            format!("spec.module {}: {}", hook.spec.module, chain(&e)),
        )
    })?;
    let module = match hook.spec.offloaded() {
        true => offloaded(hook, module, &digest, loader, offload)?,
        false => module,
    };
    let declared = module.configure().await.map_err(|e| {
        Refusal::new(
            "ConfigureFailed",
            format!("the hook's configure failed: {e}"),
        )
    })?;
    let mut config = declared;
    if let Some(overrides) = &hook.spec.overrides {
        apply_overrides(&mut config, overrides)
            .map_err(|problems| Refusal::new("InvalidOverride", problems.join("; ")))?;
    }
    if hook.spec.offloaded() {
        leave_out_own_runs(&mut config, &hook.uid().unwrap_or_default());
    }
    let permissions = Permissions::new(&namespace, &hook.name_any(), &hook.spec.permissions)
        .map(Arc::new)
        .map_err(|problems| Refusal::new("InvalidPermissions", problems.join("; ")))?;
    let permitted: Arc<dyn Cluster> = Arc::new(PermittedCluster::new(cluster, permissions.clone()));
    let configured = Arc::new(Configured {
        inner: module,
        config: config.clone(),
    });
    let (loaded, _) = load::configure(configured, permitted.as_ref())
        .await
        .map_err(|e| match e {
            HookLoadError::Invalid { problems, .. } => Refusal::new(
                "InvalidConfiguration",
                problems
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            other => Refusal::new("InvalidConfiguration", chain(&other)),
        })?;
    let webhooks = super::webhooks::plan(
        &permissions,
        permitted.as_ref(),
        &loaded.config.validating,
        &loaded.config.mutating,
        &loaded.config.conversions,
    )
    .await?;
    let mut bindings = Vec::new();
    if loaded.config.on_startup.is_some() {
        bindings.push(HookBindingStatus {
            name: "onStartup".into(),
            type_: "onStartup".into(),
            ..HookBindingStatus::default()
        });
    }
    for (binding, declared) in loaded.config.schedules.iter().zip(&config.schedule) {
        bindings.push(HookBindingStatus {
            name: binding.name.clone(),
            type_: "schedule".into(),
            crontab: Some(declared.crontab.clone()),
            queue: Some(binding.queue.clone()),
            ..HookBindingStatus::default()
        });
    }
    for binding in &loaded.config.kubernetes {
        let resource = permitted
            .resolve(binding.api_version.as_deref(), &binding.kind)
            .await
            .map_err(|e| {
                Refusal::new(
                    "InvalidConfiguration",
                    format!("binding {:?}: {e}", binding.name),
                )
            })?;
        permissions
            .check_watch(binding, &resource)
            .map_err(|message| Refusal::new("BindingNotPermitted", message))?;
        bindings.push(HookBindingStatus {
            name: binding.name.clone(),
            type_: "kubernetes".into(),
            watches: Some(format!("{}/{}", resource.api_version(), resource.kind)),
            namespaces: binding
                .namespace
                .as_ref()
                .and_then(|n| n.name_selector.clone())
                .unwrap_or_default(),
            queue: Some(binding.queue.clone()),
            ..HookBindingStatus::default()
        });
    }
    for (type_, list) in [
        ("validating", &webhooks.validating),
        ("mutating", &webhooks.mutating),
    ] {
        for webhook in list {
            bindings.push(HookBindingStatus {
                name: webhook.binding.name.clone(),
                type_: type_.into(),
                namespaces: webhook.namespaces.clone().unwrap_or_default(),
                ..HookBindingStatus::default()
            });
        }
    }
    for crd in &webhooks.conversions {
        bindings.push(HookBindingStatus {
            name: crd.clone(),
            type_: "conversion".into(),
            ..HookBindingStatus::default()
        });
    }
    Ok(Prepared {
        loaded,
        declared: config,
        digest,
        bindings,
        cluster: permitted,
        webhooks,
        permissions,
    })
}

/// `module`, whose runs go to Jobs of `offload`: configured here, run there.
fn offloaded(
    hook: &Hook,
    module: Arc<dyn operon_hooks::Hook>,
    digest: &ModuleDigest,
    loader: &HookLoader,
    offload: Option<&HookOffload>,
) -> Result<Arc<dyn operon_hooks::Hook>, Refusal> {
    let offload = offload.ok_or_else(|| {
        Refusal::new(
            "CannotOffload",
            "spec.runOn is Job but this engine cannot create such Jobs: `operon serve` needs its module API and the engine's image (--image, env OPERON_IMAGE)",
        )
    })?;
    if let Some(catalog) = &offload.target.catalog
        && !catalog.blobs().contains(digest)
    {
        return Err(Refusal::new(
            "ModuleNotServed",
            format!(
                "spec.runOn is Job but module {:?} ({digest}) is not in the module store the module API serves, so a Job could not fetch it: upload it with `operon module push`",
                hook.spec.module
            ),
        ));
    }
    let runner = job::job_runner(
        &offload.target,
        Some(offload.client.clone()),
        &run_name(hook),
        &hook.spec.job.clone().unwrap_or_default(),
        digest,
        loader.limits(),
        offload.platform.clone(),
    );
    let owner = JobOwner {
        namespace: hook.namespace().unwrap_or_default(),
        name: hook.name_any(),
        uid: hook.uid().unwrap_or_default(),
    };
    Ok(Arc::new(JobHook::new(module, runner, owner)))
}

/// Makes every kubernetes binding of an offloaded hook leave out the objects its own
/// runs create (labelled with the Hook's `uid`), so a hook watching Pods, Jobs or
/// ConfigMaps of its namespace does not run again on each run's Job. The API server
/// filters them: `NotIn` also matches objects without the label.
fn leave_out_own_runs(config: &mut HookConfig, uid: &str) {
    if uid.is_empty() {
        return;
    }
    for binding in &mut config.kubernetes {
        binding
            .label_selector
            .get_or_insert_with(LabelSelector::default)
            .match_expressions
            .push(LabelRequirement {
                key: HOOK_UID_LABEL.to_owned(),
                operator: LabelOperator::NotIn,
                values: vec![uid.to_owned()],
            });
    }
}

/// An error and its causes on one line (a cause its error already prints is skipped).
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}

fn duration(field: &str, text: &str) -> Result<u64, String> {
    humantime::parse_duration(text)
        .map(|d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .map_err(|e| format!("spec.overrides.{field}: {text:?} is not a duration ({e})"))
}

/// Applies `overrides` to what the hook declared; every problem is reported.
pub(crate) fn apply_overrides(
    config: &mut HookConfig,
    overrides: &HookOverrides,
) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    if let Some(queue) = &overrides.queue {
        for binding in &mut config.schedule {
            binding.queue = Some(queue.clone());
        }
        for binding in &mut config.kubernetes {
            binding.queue = Some(queue.clone());
        }
    }
    let settings = config.settings.get_or_insert_with(HookSettings::default);
    if let Some(text) = &overrides.timeout {
        match duration("timeout", text) {
            Ok(ms) => settings.timeout_ms = Some(ms),
            Err(e) => problems.push(e),
        }
    }
    if let Some(text) = &overrides.execution_min_interval {
        match duration("executionMinInterval", text) {
            Ok(ms) => settings.execution_min_interval_ms = Some(ms),
            Err(e) => problems.push(e),
        }
    }
    if let Some(burst) = overrides.execution_burst {
        settings.execution_burst = Some(burst);
    }
    for (i, o) in overrides.schedule.iter().enumerate() {
        let names: Vec<&str> = config.schedule.iter().map(|b| b.name.as_str()).collect();
        let names = names.join(", ");
        let Some(binding) = config.schedule.iter_mut().find(|b| b.name == o.name) else {
            problems.push(format!(
                "spec.overrides.schedule[{i}].name: the hook has no schedule binding {:?} (it has: {names})",
                o.name
            ));
            continue;
        };
        if let Some(crontab) = &o.crontab {
            binding.crontab = crontab.clone();
        }
        if let Some(queue) = &o.queue {
            binding.queue = Some(queue.clone());
        }
        if let Some(allow) = o.allow_failure {
            binding.allow_failure = allow;
        }
    }
    for (i, o) in overrides.kubernetes.iter().enumerate() {
        let names: Vec<&str> = config.kubernetes.iter().map(|b| b.name.as_str()).collect();
        let names = names.join(", ");
        let Some(binding) = config.kubernetes.iter_mut().find(|b| b.name == o.name) else {
            problems.push(format!(
                "spec.overrides.kubernetes[{i}].name: the hook has no kubernetes binding {:?} (it has: {names})",
                o.name
            ));
            continue;
        };
        if let Some(namespaces) = &o.namespaces {
            binding.namespace = Some(NamespaceSelector {
                name_selector: Some(namespaces.clone()),
                label_selector: None,
            });
        }
        if let Some(queue) = &o.queue {
            binding.queue = Some(queue.clone());
        }
        if let Some(allow) = o.allow_failure {
            binding.allow_failure = allow;
        }
    }
    apply_enforcement(config, overrides, &mut problems);
    match problems.is_empty() {
        true => Ok(()),
        false => Err(problems),
    }
}

/// `spec.overrides.enforcement` on every admission binding, then each binding's own
/// (`spec.overrides.validating[i]`, `.mutating[i]`), which wins.
fn apply_enforcement(
    config: &mut HookConfig,
    overrides: &HookOverrides,
    problems: &mut Vec<String>,
) {
    if let Some(enforcement) = overrides.enforcement {
        for binding in
            (config.kubernetes_validating.iter_mut()).chain(&mut config.kubernetes_mutating)
        {
            binding.enforcement = Some(enforcement.as_str().to_owned());
        }
    }
    for (list, section, bindings) in [
        ("validating", "kubernetesValidating", &overrides.validating),
        ("mutating", "kubernetesMutating", &overrides.mutating),
    ] {
        let declared = match list {
            "validating" => &mut config.kubernetes_validating,
            _ => &mut config.kubernetes_mutating,
        };
        for (i, o) in bindings.iter().enumerate() {
            let names: Vec<&str> = declared.iter().map(|b| b.name.as_str()).collect();
            let names = names.join(", ");
            let Some(binding) = declared.iter_mut().find(|b| b.name == o.name) else {
                problems.push(format!(
                    "spec.overrides.{list}[{i}].name: the hook has no {section} binding {:?} (it has: {names})",
                    o.name
                ));
                continue;
            };
            if let Some(enforcement) = o.enforcement {
                binding.enforcement = Some(enforcement.as_str().to_owned());
            }
        }
    }
}

/// A hook whose configuration is the one given (its declared one, overridden).
struct Configured {
    inner: Arc<dyn operon_hooks::Hook>,
    config: HookConfig,
}

impl operon_hooks::Hook for Configured {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
        Box::pin(async move { Ok(self.config.clone()) })
    }

    fn handle(&self, input: HookInput, timeout: Duration) -> BoxFuture<'_, (HookRun, HookInput)> {
        self.inner.handle(input, timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use operon_data::api::AdmissionOverride;
    use operon_data::model::{AdmissionBindingConfig, Enforcement};

    fn admission(name: &str, enforcement: Option<&str>) -> AdmissionBindingConfig {
        AdmissionBindingConfig {
            name: name.into(),
            enforcement: enforcement.map(Into::into),
            ..AdmissionBindingConfig::default()
        }
    }

    #[test]
    fn enforcement_is_overridden_hook_wide_then_per_binding() {
        let mut config = HookConfig {
            kubernetes_validating: vec![
                admission("a.example.com", Some("Deny")),
                admission("b.example.com", None),
            ],
            kubernetes_mutating: vec![admission("m.example.com", None)],
            ..HookConfig::default()
        };
        let overrides = HookOverrides {
            enforcement: Some(Enforcement::DryRun),
            validating: vec![AdmissionOverride {
                name: "b.example.com".into(),
                enforcement: Some(Enforcement::Warn),
            }],
            ..HookOverrides::default()
        };
        apply_overrides(&mut config, &overrides).unwrap();
        let enforcement = |b: &AdmissionBindingConfig| b.enforcement.clone().unwrap();
        assert_eq!(enforcement(&config.kubernetes_validating[0]), "DryRun");
        assert_eq!(enforcement(&config.kubernetes_validating[1]), "Warn");
        assert_eq!(enforcement(&config.kubernetes_mutating[0]), "DryRun");

        let overrides = HookOverrides {
            mutating: vec![AdmissionOverride {
                name: "a.example.com".into(),
                enforcement: Some(Enforcement::Warn),
            }],
            ..HookOverrides::default()
        };
        assert_eq!(
            apply_overrides(&mut config, &overrides).unwrap_err(),
            [
                "spec.overrides.mutating[0].name: the hook has no kubernetesMutating binding \"a.example.com\" (it has: m.example.com)"
            ]
        );
    }
}
