//! Registration: the ValidatingWebhookConfiguration and MutatingWebhookConfiguration
//! that send the API server's admission requests to this engine (one webhook per
//! validating or mutating binding, every field the binding declared), and the
//! `spec.conversion` of every CRD a conversion binding names. Written by the leader
//! with server-side apply (field manager `operon`): one idempotent request per object,
//! and webhooks of hooks that are gone disappear because this manager no longer
//! declares them.
//!
//! The API server reaches the engine through a Service (in a cluster) or a URL base
//! (`--webhook-url-base`, for an engine running outside it); either way with the CA
//! that signed the serving certificate as `caBundle`.

use ::kube::Client;
use ::kube::api::{Api, Patch, PatchParams};
use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use operon_cluster::kube::FIELD_MANAGER;
use operon_data::model::LabelSelector;
use operon_hooks::config::AdmissionBinding;
use operon_hooks::engine::LoadedHook;
use serde_json::{Value, json};

/// How the API server reaches a webhook server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientTarget {
    /// A Service in front of the engine's pods.
    Service {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its port.
        port: u16,
    },
    /// A URL base such as `https://127.0.0.1:9680`.
    Url(String),
}

/// Where the webhooks are and what the API server must trust.
#[derive(Debug, Clone)]
pub struct Registration {
    /// The ValidatingWebhookConfiguration's name.
    pub validating_configuration: String,
    /// The MutatingWebhookConfiguration's name (shell-operator uses one name for both).
    pub mutating_configuration: String,
    /// The admission server.
    pub admission: ClientTarget,
    /// The conversion server.
    pub conversion: ClientTarget,
    /// The CA bundle (PEM) of the admission server's certificate; empty when the
    /// admission configurations are not this engine's to write.
    pub admission_ca: Vec<u8>,
    /// The CA bundle (PEM) of the conversion server's certificate; empty when the CRDs'
    /// conversion is not this engine's to write.
    pub conversion_ca: Vec<u8>,
    /// Whether the ValidatingWebhookConfiguration also checks Operon's own resources
    /// ([`super::own`]).
    pub own_resources: bool,
}

/// The path of one binding's webhook (the hook's name percent-encoded).
pub(crate) fn path(prefix: &str, hook: &str, binding: &str) -> String {
    format!("/{prefix}/{}/{}", encode(hook), encode(binding))
}

pub(crate) fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

pub(crate) fn client_config(target: &ClientTarget, path: &str, ca: &[u8]) -> Value {
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca);
    match target {
        ClientTarget::Service {
            namespace,
            name,
            port,
        } => json!({"service": {"namespace": namespace, "name": name, "port": port, "path": path},
                    "caBundle": ca_bundle}),
        ClientTarget::Url(base) => json!({"url": format!("{}{path}", base.trim_end_matches('/')),
                                          "caBundle": ca_bundle}),
    }
}

fn selector(selector: &LabelSelector) -> Value {
    let labels: serde_json::Map<String, Value> = selector
        .match_labels
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let expressions: Vec<Value> = selector
        .match_expressions
        .iter()
        .map(|e| {
            let mut expression = json!({"key": e.key, "operator": format!("{:?}", e.operator)});
            if !e.values.is_empty() {
                expression["values"] = json!(e.values);
            }
            expression
        })
        .collect();
    let mut out = json!({});
    if !labels.is_empty() {
        out["matchLabels"] = Value::Object(labels);
    }
    if !expressions.is_empty() {
        out["matchExpressions"] = Value::Array(expressions);
    }
    out
}

fn webhook(hook: &str, binding: &AdmissionBinding, registration: &Registration) -> Value {
    let prefix = if binding.is_mutating() {
        "mutate"
    } else {
        "validate"
    };
    webhook_at(binding, &path(prefix, hook, &binding.name), registration)
}

/// The webhook of `binding`, served at `path` of the admission server.
pub(crate) fn webhook_at(
    binding: &AdmissionBinding,
    path: &str,
    registration: &Registration,
) -> Value {
    let rules: Vec<Value> = binding
        .rules
        .iter()
        .map(|r| {
            let mut rule = json!({"operations": r.operations, "apiGroups": r.api_groups,
                                  "apiVersions": r.api_versions, "resources": r.resources});
            if let Some(scope) = &r.scope {
                rule["scope"] = json!(scope);
            }
            rule
        })
        .collect();
    let mut webhook = json!({
        "name": binding.name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": binding.side_effects.as_str(),
        "failurePolicy": binding.failure_policy.as_str(),
        // shell-operator's choice: a request for an equivalent resource reached through
        // another group or version (e.g. deployments in extensions/v1beta1) is sent too.
        "matchPolicy": "Equivalent",
        "timeoutSeconds": binding.timeout_seconds,
        "rules": rules,
        "clientConfig": client_config(&registration.admission, path, &registration.admission_ca),
    });
    if let Some(labels) = &binding.label_selector {
        webhook["objectSelector"] = selector(labels);
    }
    if let Some(labels) = &binding.namespace_label_selector {
        webhook["namespaceSelector"] = selector(labels);
    }
    if !binding.match_conditions.is_empty() {
        webhook["matchConditions"] = binding
            .match_conditions
            .iter()
            .map(|c| json!({"name": c.name, "expression": c.expression}))
            .collect();
    }
    if let Some(policy) = binding.reinvocation_policy {
        webhook["reinvocationPolicy"] = json!(policy.as_str());
    }
    webhook
}

/// The configuration of `kind` (`ValidatingWebhookConfiguration` or
/// `MutatingWebhookConfiguration`) named `name` holding `webhooks`, or `None` when there
/// are none.
pub(crate) fn configuration(kind: &str, name: &str, webhooks: Vec<Value>) -> Option<Value> {
    (!webhooks.is_empty()).then(|| {
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "operon"}},
            "webhooks": webhooks,
        })
    })
}

/// The ValidatingWebhookConfiguration for `hooks` (and Operon's own resources when
/// the registration says so), or `None` when nothing validates.
pub(crate) fn validating_configuration(
    hooks: &[LoadedHook],
    registration: &Registration,
) -> Option<Value> {
    let own = registration.own_resources.then(|| {
        super::own::webhook(client_config(
            &registration.admission,
            super::own::PATH,
            &registration.admission_ca,
        ))
    });
    let webhooks = own
        .into_iter()
        .chain(hooks.iter().flat_map(|h| {
            (h.config.validating.iter()).map(|b| webhook(h.hook.name(), b, registration))
        }))
        .collect();
    configuration(
        "ValidatingWebhookConfiguration",
        &registration.validating_configuration,
        webhooks,
    )
}

/// The MutatingWebhookConfiguration for `hooks`, or `None` when no hook mutates. The API
/// server calls its webhooks in the order listed: hooks in name order (as they are
/// loaded), each hook's bindings in configuration order.
pub(crate) fn mutating_configuration(
    hooks: &[LoadedHook],
    registration: &Registration,
) -> Option<Value> {
    let webhooks = hooks
        .iter()
        .flat_map(|h| (h.config.mutating.iter()).map(|b| webhook(h.hook.name(), b, registration)))
        .collect();
    configuration(
        "MutatingWebhookConfiguration",
        &registration.mutating_configuration,
        webhooks,
    )
}

/// The `spec.conversion` each CRD named by a conversion binding gets: (CRD name,
/// patch), one per CRD however many hooks convert it (the server chains their rules).
pub(crate) fn conversion_patches(
    hooks: &[LoadedHook],
    registration: &Registration,
) -> Vec<(String, Value)> {
    let crds: std::collections::BTreeSet<&str> = hooks
        .iter()
        .flat_map(|h| h.config.conversions.iter().map(|b| b.crd_name.as_str()))
        .collect();
    crds.into_iter()
        .map(|crd| {
            let path = format!("/convert/{}", encode(crd));
            (crd.to_owned(), conversion_patch(crd, &path, registration))
        })
        .collect()
}

/// The server-side apply patch that points CRD `crd`'s conversion at `path` of the
/// conversion server.
pub(crate) fn conversion_patch(crd: &str, path: &str, registration: &Registration) -> Value {
    let config = client_config(&registration.conversion, path, &registration.conversion_ca);
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd},
        "spec": {"conversion": {"strategy": "Webhook", "webhook": {
            "clientConfig": config, "conversionReviewVersions": ["v1"]}}},
    })
}

/// Where CRD `crd`'s conversion webhook is served: its Service path or its URL.
pub(crate) fn conversion_target(crd: &CustomResourceDefinition) -> Option<String> {
    let config = crd
        .spec
        .conversion
        .as_ref()?
        .webhook
        .as_ref()?
        .client_config
        .as_ref()?;
    config
        .service
        .as_ref()
        .and_then(|s| s.path.clone())
        .or_else(|| config.url.clone())
}

/// A client and what to register with it.
#[derive(Clone)]
pub struct Registrar {
    client: Client,
    registration: Registration,
    self_signed: Option<SelfSignedCa>,
}

/// A CA bundle that changes while the engine runs (the self-signed one), and which
/// servers it stands for.
#[derive(Clone)]
pub struct SelfSignedCa {
    /// The current bundle (PEM).
    pub bundle: tokio::sync::watch::Receiver<Vec<u8>>,
    /// Whether the admission server serves the self-signed certificate.
    pub admission: bool,
    /// Whether the conversion server does.
    pub conversion: bool,
}

impl Registrar {
    /// Registers through `client`.
    pub fn new(client: Client, registration: Registration) -> Self {
        Self {
            client,
            registration,
            self_signed: None,
        }
    }

    /// The same registrar, with the CA of the servers `ca` stands for taken from it at
    /// every registration.
    pub fn with_self_signed(mut self, ca: SelfSignedCa) -> Self {
        self.self_signed = Some(ca);
        self
    }

    /// The client.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// The self-signed CA bundle, which changes at each rotation; `None` when the
    /// servers' certificates come from elsewhere.
    pub(crate) fn ca_changes(&self) -> Option<tokio::sync::watch::Receiver<Vec<u8>>> {
        self.self_signed.as_ref().map(|ca| ca.bundle.clone())
    }

    /// What is registered now: the registration with the current self-signed CA.
    pub(crate) fn registration(&self) -> Registration {
        let mut registration = self.registration.clone();
        if let Some(ca) = &self.self_signed {
            let bundle = ca.bundle.borrow().clone();
            if ca.admission {
                registration.admission_ca = bundle.clone();
            }
            if ca.conversion {
                registration.conversion_ca = bundle;
            }
        }
        registration
    }

    /// Keeps `hooks` registered after the first registration ended with `first`: while
    /// that failed in a way that may pass, it is tried again (2 s, doubling to 30 s),
    /// then every CA rotation registers them again
    /// ([`Self::follow_ca`]), until `stopped` turns true. `registered` is called once
    /// the admission webhooks are in place ([`RegisterError::in_place`]).
    pub(crate) async fn keep_registered(
        &self,
        hooks: &[LoadedHook],
        first: Result<(), RegisterError>,
        mut stopped: tokio::sync::watch::Receiver<bool>,
        registered: impl Fn(),
    ) {
        if let Err(e) = first {
            tracing::warn!(error = %e, retry_in_s = 2, "the webhooks are not all registered yet");
            let done = self
                .register_until_done(hooks, &mut stopped, &e, &registered)
                .await;
            if let Err(e) = done {
                tracing::error!(error = %e, "the webhooks cannot be registered");
                return;
            }
        }
        self.follow_ca(hooks, stopped).await;
    }

    /// After a registration of `hooks` failed with `first`, in a way that may pass (the
    /// API server away, a CRD a conversion binding names not created yet), tries again
    /// after 2 s, then after doubling pauses up to 30 s, warning when the reason changes,
    /// and calling `registered` after each attempt that left the admission webhooks in
    /// place. Returns the error that cannot pass, or `Ok` once registered or when
    /// `stopped` turns true.
    async fn register_until_done(
        &self,
        hooks: &[LoadedHook],
        stopped: &mut tokio::sync::watch::Receiver<bool>,
        first: &RegisterError,
        registered: &impl Fn(),
    ) -> Result<(), RegisterError> {
        let mut pause = std::time::Duration::from_secs(2);
        // A CRD may be missing for days: the same reason is said once, not every 30 s,
        // and the admission configurations, once in place, are written again only for a
        // new CA bundle (a rotation), not at every try.
        let mut said = first.to_string();
        let mut admission_written = first.in_place().then(|| self.registration().admission_ca);
        loop {
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                _ = stopped.wait_for(|s| *s) => return Ok(()),
            }
            let mut registration = self.registration();
            let admission_ca = registration.admission_ca.clone();
            if admission_written.as_ref() == Some(&admission_ca) {
                registration.admission_ca.clear();
            }
            match register(&self.client, hooks, &registration).await {
                Ok(()) => {
                    tracing::info!("the webhooks are registered");
                    registered();
                    return Ok(());
                }
                Err(e) if !e.may_pass() => return Err(e),
                Err(e) => {
                    if e.in_place() {
                        admission_written = Some(admission_ca);
                        registered();
                    }
                    pause = (pause * 2).min(std::time::Duration::from_secs(30));
                    let reason = e.to_string();
                    if reason != said {
                        tracing::warn!(error = %e, retry_every_s_at_most = 30, "the webhooks are not all registered yet");
                        said = reason;
                    }
                }
            }
        }
    }

    /// Registers `hooks` again whenever the self-signed CA bundle changes (a CA
    /// rotation), until `stopped` turns true; a failed registration is retried every
    /// 30 s until it succeeds. Without a self-signed CA it returns at once.
    pub(crate) async fn follow_ca(
        &self,
        hooks: &[LoadedHook],
        mut stopped: tokio::sync::watch::Receiver<bool>,
    ) {
        let Some(ca) = &self.self_signed else {
            return;
        };
        let mut bundle = ca.bundle.clone();
        bundle.mark_unchanged();
        loop {
            tokio::select! {
                changed = bundle.changed() => if changed.is_err() { return },
                _ = stopped.wait_for(|s| *s) => return,
            }
            bundle.mark_unchanged();
            tracing::info!("the self-signed CA bundle changed: registering the webhooks again");
            while let Err(e) = register(&self.client, hooks, &self.registration()).await {
                tracing::warn!(error = %e, "registering the new CA bundle failed; retrying in 30 s");
                tokio::select! {
                    () = tokio::time::sleep(std::time::Duration::from_secs(30)) => {}
                    _ = stopped.wait_for(|s| *s) => return,
                }
            }
        }
    }
}

/// Why registering failed.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// The API server refused a write or a read.
    #[error("registering {what}: {source}")]
    Api {
        /// What was being written.
        what: String,
        /// The server's answer.
        #[source]
        source: ::kube::Error,
    },
    /// A binding declares `matchConditions`, which the API server does not know (they
    /// arrived in Kubernetes 1.28): it would refuse the whole configuration with "field
    /// not declared in schema", and dropping them would send the hook requests it asked
    /// not to get.
    #[error(
        "hook {hook} binding {binding:?} declares matchConditions, which this API server \
         ({version}) does not support (Kubernetes 1.28 and later evaluate them): remove them \
         from the binding or upgrade the cluster"
    )]
    MatchConditionsUnsupported {
        /// The hook.
        hook: String,
        /// The binding.
        binding: String,
        /// The server's version.
        version: String,
    },
    /// CustomResourceDefinitions that conversion bindings name do not exist (yet): the
    /// rest is registered, and these are once they are created.
    #[error("CustomResourceDefinitions named by conversion bindings do not exist: {}", crds.join(", "))]
    CrdsMissing {
        /// Their names.
        crds: Vec<String>,
    },
}

impl RegisterError {
    /// Whether trying again later may succeed: the API server was away or refused for a
    /// while, or a CRD is not there yet. A binding this server cannot serve stays so.
    pub(crate) fn may_pass(&self) -> bool {
        !matches!(self, Self::MatchConditionsUnsupported { .. })
    }

    /// Whether everything but conversion webhooks of CRDs not created yet is
    /// registered. Such a CRD may never come, so readiness does not wait for it.
    pub(crate) fn in_place(&self) -> bool {
        matches!(self, Self::CrdsMissing { .. })
    }
}

/// The oldest Kubernetes minor version that evaluates `matchConditions`.
const MATCH_CONDITIONS_SINCE: u32 = 28;

/// Refuses bindings with `matchConditions` when the API server is older than 1.28.
async fn check_match_conditions(
    client: &Client,
    hooks: &[LoadedHook],
) -> Result<(), RegisterError> {
    let Some((hook, binding)) = hooks.iter().find_map(|h| {
        (h.config.validating.iter().chain(&h.config.mutating))
            .find(|b| !b.match_conditions.is_empty())
            .map(|b| (h.hook.name(), b.name.as_str()))
    }) else {
        return Ok(());
    };
    let info = client
        .apiserver_version()
        .await
        .map_err(|source| RegisterError::Api {
            what: "the API server's version (GET /version)".to_owned(),
            source,
        })?;
    // Minor versions look like "24" or, from some distributions, "24+".
    let minor: Option<u32> = info.minor.trim_end_matches('+').parse().ok();
    if info.major == "1" && minor.is_some_and(|m| m < MATCH_CONDITIONS_SINCE) {
        return Err(RegisterError::MatchConditionsUnsupported {
            hook: hook.to_owned(),
            binding: binding.to_owned(),
            version: info.git_version,
        });
    }
    Ok(())
}

/// Applies `desired` as the configuration `name` of type `K`, or deletes it when
/// `desired` is `None` (no hook has such bindings any more).
async fn apply_or_delete<K>(
    client: &Client,
    name: &str,
    desired: Option<Value>,
) -> Result<(), RegisterError>
where
    K: ::kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::all(client.clone());
    let kind = K::kind(&K::DynamicType::default()).into_owned();
    let error = |source| RegisterError::Api {
        what: format!("{kind} {name}"),
        source,
    };
    match desired {
        Some(desired) => {
            let params = PatchParams::apply(FIELD_MANAGER).force();
            api.patch(name, &params, &Patch::Apply(&desired))
                .await
                .map_err(error)?;
            tracing::info!(configuration = %name, kind = %kind, "admission webhooks registered");
        }
        None => match api.delete(name, &Default::default()).await {
            Ok(_) => {
                tracing::info!(configuration = %name, kind = %kind, "no such binding any more: configuration deleted")
            }
            Err(::kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => return Err(error(e)),
        },
    }
    Ok(())
}

/// Writes the configurations for `hooks`: the ValidatingWebhookConfiguration and the
/// MutatingWebhookConfiguration (each deleted when no hook has such bindings any more)
/// and each conversion CRD's `spec.conversion`.
pub(crate) async fn register(
    client: &Client,
    hooks: &[LoadedHook],
    registration: &Registration,
) -> Result<(), RegisterError> {
    // Without a CA the API server could not trust the server: such a registration was
    // not asked for (only the other server's CA was given).
    if !registration.admission_ca.is_empty() {
        check_match_conditions(client, hooks).await?;
        apply_or_delete::<ValidatingWebhookConfiguration>(
            client,
            &registration.validating_configuration,
            validating_configuration(hooks, registration),
        )
        .await?;
        apply_or_delete::<MutatingWebhookConfiguration>(
            client,
            &registration.mutating_configuration,
            mutating_configuration(hooks, registration),
        )
        .await?;
    }
    if registration.conversion_ca.is_empty() {
        return Ok(());
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let error = |what: String| move |source| RegisterError::Api { what, source };
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let desired = conversion_patches(hooks, registration);
    let mut missing = Vec::new();
    for (crd, patch) in &desired {
        match crds.patch(crd, &params, &Patch::Apply(patch)).await {
            Ok(_) => tracing::info!(crd = %crd, "conversion webhook registered"),
            // Applying to a CRD that does not exist tries to create one from the
            // conversion alone, which the API server refuses as invalid.
            Err(::kube::Error::Api(s))
                if (s.code == 422 || s.code == 404)
                    && crds
                        .get_opt(crd)
                        .await
                        .map_err(error(format!("CustomResourceDefinition {crd}")))?
                        .is_none() =>
            {
                tracing::debug!(crd = %crd,
                    "the CustomResourceDefinition a conversion binding names does not exist: its conversion webhook is registered once it does");
                missing.push(crd.clone());
            }
            Err(e) => return Err(error(format!("the conversion webhook of CRD {crd}"))(e)),
        }
    }
    release_stale_conversions(&crds, &desired).await?;
    if missing.is_empty() {
        Ok(())
    } else {
        Err(RegisterError::CrdsMissing { crds: missing })
    }
}

/// Whether this engine's field manager applied `spec.conversion` of `crd`.
fn conversion_applied_by_operon(crd: &CustomResourceDefinition) -> bool {
    (crd.metadata.managed_fields.iter().flatten()).any(|entry| {
        entry.manager.as_deref() == Some(FIELD_MANAGER)
            && entry.operation.as_deref() == Some("Apply")
            && entry
                .fields_v1
                .as_ref()
                .and_then(|f| f.0.pointer("/f:spec/f:conversion"))
                .is_some()
    })
}

/// Gives back `spec.conversion` of every CRD this engine registered a conversion webhook
/// for and no hook converts any more: applying the CRD with nothing but its name drops
/// the fields this manager owned, and the API server sets the conversion back to
/// `strategy: None`. Needs `list` on CRDs; without it the stale webhooks are left and a
/// warning says so (registration itself does not need it).
async fn release_stale_conversions(
    crds: &Api<CustomResourceDefinition>,
    desired: &[(String, Value)],
) -> Result<(), RegisterError> {
    let all = match crds.list(&Default::default()).await {
        Ok(all) => all,
        Err(::kube::Error::Api(s)) if s.code == 403 => {
            tracing::warn!(
                "cannot list CustomResourceDefinitions (forbidden): conversion webhooks of hooks that are gone are not removed"
            );
            return Ok(());
        }
        Err(source) => {
            return Err(RegisterError::Api {
                what: "the list of CustomResourceDefinitions".to_owned(),
                source,
            });
        }
    };
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for crd in all.items {
        let Some(name) = crd.metadata.name.clone() else {
            continue;
        };
        // A Hook object's or a module's conversion is the owned webhooks' registry's
        // to release.
        let of_hook_object = conversion_target(&crd)
            .is_some_and(|target| super::owned::conversion_owner(&target).is_some());
        if desired.iter().any(|(d, _)| *d == name)
            || of_hook_object
            || !conversion_applied_by_operon(&crd)
        {
            continue;
        }
        let release = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
        });
        crds.patch(&name, &params, &Patch::Apply(&release))
            .await
            .map_err(|source| RegisterError::Api {
                what: format!("the stale conversion webhook of CRD {name}"),
                source,
            })?;
        tracing::info!(crd = %name, "no hook converts it any more: conversion webhook removed");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
