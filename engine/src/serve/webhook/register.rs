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

use crate::cluster::kube::FIELD_MANAGER;
use crate::hooks::config::AdmissionBinding;
use crate::hooks::engine::LoadedHook;
use crate::model::LabelSelector;
use ::kube::Client;
use ::kube::api::{Api, Patch, PatchParams};
use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
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
}

/// The path of one binding's webhook (the hook's name percent-encoded).
pub fn path(prefix: &str, hook: &str, binding: &str) -> String {
    format!("/{prefix}/{}/{}", encode(hook), encode(binding))
}

fn encode(segment: &str) -> String {
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

fn client_config(target: &ClientTarget, path: &str, ca: &[u8]) -> Value {
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
    let prefix = if binding.is_mutating() {
        "mutate"
    } else {
        "validate"
    };
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
        "clientConfig": client_config(
            &registration.admission,
            &path(prefix, hook, &binding.name),
            &registration.admission_ca,
        ),
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
fn configuration(kind: &str, name: &str, webhooks: Vec<Value>) -> Option<Value> {
    (!webhooks.is_empty()).then(|| {
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "operon"}},
            "webhooks": webhooks,
        })
    })
}

/// The ValidatingWebhookConfiguration for `hooks`, or `None` when no hook validates.
pub fn validating_configuration(
    hooks: &[LoadedHook],
    registration: &Registration,
) -> Option<Value> {
    let webhooks = hooks
        .iter()
        .flat_map(|h| (h.config.validating.iter()).map(|b| webhook(h.hook.name(), b, registration)))
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
pub fn mutating_configuration(hooks: &[LoadedHook], registration: &Registration) -> Option<Value> {
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
pub fn conversion_patches(
    hooks: &[LoadedHook],
    registration: &Registration,
) -> Vec<(String, Value)> {
    let crds: std::collections::BTreeSet<&str> = hooks
        .iter()
        .flat_map(|h| h.config.conversions.iter().map(|b| b.crd_name.as_str()))
        .collect();
    crds.into_iter()
        .map(|crd| {
            let config = client_config(
                &registration.conversion,
                &format!("/convert/{}", encode(crd)),
                &registration.conversion_ca,
            );
            let patch = json!({
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": crd},
                "spec": {"conversion": {"strategy": "Webhook", "webhook": {
                    "clientConfig": config, "conversionReviewVersions": ["v1"]}}},
            });
            (crd.to_owned(), patch)
        })
        .collect()
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
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// What is registered now: the registration with the current self-signed CA.
    pub fn registration(&self) -> Registration {
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

    /// Registers `hooks` again whenever the self-signed CA bundle changes (a CA
    /// rotation), until `stopped` turns true; a failed registration is retried every
    /// 30 s until it succeeds. Without a self-signed CA it returns at once.
    pub async fn follow_ca(
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
pub async fn register(
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
    for (crd, patch) in &desired {
        crds.patch(crd, &params, &Patch::Apply(patch))
            .await
            .map_err(error(format!("the conversion webhook of CRD {crd}")))?;
        tracing::info!(crd = %crd, "conversion webhook registered");
    }
    release_stale_conversions(&crds, &desired).await
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
        if desired.iter().any(|(d, _)| *d == name) || !conversion_applied_by_operon(&crd) {
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
mod tests {
    use super::*;
    use crate::hooks::config::{self, ValidConfig};
    use crate::hooks::{Hook, HookError, HookRun};
    use crate::model::{
        AdmissionBindingConfig, ConversionBindingConfig, ConversionRule, HookConfig, HookInput,
        MatchCondition, WebhookRule,
    };
    use futures::future::BoxFuture;
    use http_body_util::BodyExt as _;
    use std::sync::Arc;
    use std::time::Duration;

    struct Declares(HookConfig);

    impl Hook for Declares {
        fn name(&self) -> &str {
            "policies/images.sh"
        }
        fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
            Box::pin(async move { Ok(self.0.clone()) })
        }
        fn handle(&self, _: HookInput, _: Duration) -> BoxFuture<'_, (HookRun, HookInput)> {
            unreachable!("registration never runs a hook")
        }
    }

    fn hooks(validating: bool) -> Vec<LoadedHook> {
        let mut raw = HookConfig::default();
        if validating {
            raw.kubernetes_validating = vec![AdmissionBindingConfig {
                name: "images.operon.dev".into(),
                rules: vec![WebhookRule {
                    operations: vec!["CREATE".into(), "UPDATE".into()],
                    api_groups: vec![String::new()],
                    api_versions: vec!["v1".into()],
                    resources: vec!["pods".into()],
                    scope: Some("Namespaced".into()),
                }],
                failure_policy: Some("Ignore".into()),
                label_selector: Some(LabelSelector {
                    match_labels: vec![("team".into(), "a".into())],
                    match_expressions: vec![],
                }),
                namespace: None,
                timeout_seconds: Some(5),
                ..AdmissionBindingConfig::default()
            }];
            raw.kubernetes_mutating = vec![AdmissionBindingConfig {
                name: "defaults.operon.dev".into(),
                rules: vec![WebhookRule {
                    operations: vec!["CREATE".into()],
                    api_groups: vec!["apps".into()],
                    api_versions: vec!["v1".into()],
                    resources: vec!["deployments".into()],
                    scope: None,
                }],
                side_effects: Some("NoneOnDryRun".into()),
                match_conditions: vec![MatchCondition {
                    name: "not-system".into(),
                    expression: "!request.namespace.startsWith('kube-')".into(),
                }],
                reinvocation_policy: Some("IfNeeded".into()),
                ..AdmissionBindingConfig::default()
            }];
        }
        raw.kubernetes_conversion = vec![ConversionBindingConfig {
            name: "widgets".into(),
            crd_name: "widgets.example.com".into(),
            conversions: vec![ConversionRule {
                from_version: "example.com/v1".into(),
                to_version: "example.com/v2".into(),
            }],
            group: None,
            include_snapshots_from: vec![],
        }];
        let config: ValidConfig =
            config::validate("policies/images.sh", &raw, &config::any_kind).unwrap();
        vec![LoadedHook {
            hook: Arc::new(Declares(raw)),
            config,
        }]
    }

    fn registration() -> Registration {
        Registration {
            validating_configuration: "operon-hooks".into(),
            mutating_configuration: "operon-mutating".into(),
            admission: ClientTarget::Service {
                namespace: "operon".into(),
                name: "operon-webhooks".into(),
                port: 443,
            },
            conversion: ClientTarget::Url("https://127.0.0.1:9681/".into()),
            admission_ca: b"CA1".to_vec(),
            conversion_ca: b"CA2".to_vec(),
        }
    }

    #[test]
    fn one_webhook_per_validating_binding_with_its_fields() {
        let desired = validating_configuration(&hooks(true), &registration()).unwrap();
        assert_eq!(
            desired["webhooks"],
            json!([{
                "name": "images.operon.dev",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Ignore",
                "matchPolicy": "Equivalent",
                "timeoutSeconds": 5,
                "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""],
                           "apiVersions": ["v1"], "resources": ["pods"], "scope": "Namespaced"}],
                "objectSelector": {"matchLabels": {"team": "a"}},
                "clientConfig": {"service": {"namespace": "operon", "name": "operon-webhooks", "port": 443,
                                             "path": "/validate/policies%2Fimages.sh/images.operon.dev"},
                                 "caBundle": "Q0Ex"},
            }])
        );
        assert!(validating_configuration(&hooks(false), &registration()).is_none());
        let mutating = mutating_configuration(&hooks(true), &registration()).unwrap();
        assert_eq!(mutating["kind"], "MutatingWebhookConfiguration");
        assert_eq!(mutating["metadata"]["name"], "operon-mutating");
        assert_eq!(
            mutating["webhooks"],
            json!([{
                "name": "defaults.operon.dev",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "NoneOnDryRun",
                "failurePolicy": "Fail",
                "matchPolicy": "Equivalent",
                "timeoutSeconds": 10,
                "rules": [{"operations": ["CREATE"], "apiGroups": ["apps"],
                           "apiVersions": ["v1"], "resources": ["deployments"]}],
                "matchConditions": [{"name": "not-system",
                                     "expression": "!request.namespace.startsWith('kube-')"}],
                "reinvocationPolicy": "IfNeeded",
                "clientConfig": {"service": {"namespace": "operon", "name": "operon-webhooks", "port": 443,
                                             "path": "/mutate/policies%2Fimages.sh/defaults.operon.dev"},
                                 "caBundle": "Q0Ex"},
            }])
        );
        assert!(mutating_configuration(&hooks(false), &registration()).is_none());
        let patches = conversion_patches(&hooks(false), &registration());
        assert_eq!(patches[0].0, "widgets.example.com");
        assert_eq!(
            patches[0].1["spec"]["conversion"]["webhook"]["clientConfig"],
            json!({"url": "https://127.0.0.1:9681/convert/widgets.example.com", "caBundle": "Q0Ey"})
        );
    }

    type Seen = Vec<(String, String, Option<String>, bytes::Bytes)>;

    /// CRDs as the API server lists them: one this engine converts, one whose
    /// conversion it registered earlier for a hook that is gone, one whose conversion
    /// another manager set.
    fn crd_list() -> Value {
        let crd = |name: &str, manager: &str, conversion: bool| {
            let fields = if conversion {
                json!({"f:spec": {"f:conversion": {"f:strategy": {}, "f:webhook": {}}}})
            } else {
                json!({"f:metadata": {"f:labels": {}}})
            };
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                   "metadata": {"name": name, "managedFields": [
                       {"manager": manager, "operation": "Apply", "apiVersion": "apiextensions.k8s.io/v1",
                        "fieldsType": "FieldsV1", "fieldsV1": fields}]},
                   "spec": {"group": "example.com", "scope": "Namespaced",
                            "names": {"plural": "x", "kind": "X"}, "versions": []}})
        };
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinitionList",
               "metadata": {}, "items": [
                   crd("widgets.example.com", "operon", true),
                   crd("gadgets.example.com", "operon", true),
                   crd("labelled.example.com", "operon", false),
                   crd("foreign.example.com", "kubectl", true)]})
    }

    /// A mock API server answering `requests` requests (GET /version as Kubernetes
    /// 1.`minor`, 404 to deletes, 200 otherwise); returns what it saw.
    fn mock_server(requests: usize, minor: u32) -> (Client, tokio::task::JoinHandle<Seen>) {
        let (service, mut handle) = tower_test::mock::pair::<
            http::Request<::kube::client::Body>,
            http::Response<::kube::client::Body>,
        >();
        let client = Client::new(service, "default");
        let server = tokio::spawn(async move {
            let mut seen = Vec::new();
            for _ in 0..requests {
                let (request, respond) = handle.next_request().await.unwrap();
                let (parts, body) = request.into_parts();
                let body = body.collect().await.unwrap().to_bytes();
                let content_type = parts
                    .headers
                    .get("content-type")
                    .map(|v| v.to_str().unwrap().to_owned());
                let (status, answer) = if parts.uri.path() == "/version" {
                    (
                        200,
                        json!({"major": "1", "minor": minor.to_string(),
                               "gitVersion": format!("v1.{minor}.0"), "gitCommit": "",
                               "gitTreeState": "clean", "buildDate": "", "goVersion": "",
                               "compiler": "gc", "platform": "linux/amd64"}),
                    )
                } else if parts.method == "GET"
                    && parts.uri.path() == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
                {
                    (200, crd_list())
                } else if parts.method == "DELETE" {
                    (
                        404,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                 "code": 404, "reason": "NotFound", "message": "not found"}),
                    )
                } else {
                    (200, json!({"metadata": {"name": "x"}}))
                };
                seen.push((
                    parts.method.to_string(),
                    parts.uri.to_string(),
                    content_type,
                    body,
                ));
                respond.send_response(
                    http::Response::builder()
                        .status(status)
                        .header("content-type", "application/json")
                        .body(::kube::client::Body::from(
                            serde_json::to_vec(&answer).unwrap(),
                        ))
                        .unwrap(),
                );
            }
            seen
        });
        (client, server)
    }

    #[tokio::test]
    async fn match_conditions_are_refused_before_kubernetes_1_28_naming_the_binding() {
        let (client, server) = mock_server(1, 24);
        let error = register(&client, &hooks(true), &registration())
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "hook policies/images.sh binding \"defaults.operon.dev\" declares matchConditions, \
             which this API server (v1.24.0) does not support (Kubernetes 1.28 and later evaluate \
             them): remove them from the binding or upgrade the cluster"
        );
        let seen = server.await.unwrap();
        assert_eq!(
            (seen[0].0.as_str(), seen[0].1.as_str()),
            ("GET", "/version")
        );
    }

    #[tokio::test]
    async fn the_configurations_are_applied_server_side_and_stale_ones_removed() {
        let (client, server) = mock_server(11, 30);
        register(&client, &hooks(true), &registration())
            .await
            .unwrap();
        register(&client, &hooks(false), &registration())
            .await
            .unwrap();
        let seen = server.await.unwrap();
        let apply = "application/apply-patch+yaml";
        // matchConditions need Kubernetes 1.28: the version is asked first.
        assert_eq!(
            (seen[0].0.as_str(), seen[0].1.as_str()),
            ("GET", "/version")
        );
        assert_eq!(
            (seen[1].0.as_str(), seen[1].1.as_str(), seen[1].2.as_deref()),
            (
                "PATCH",
                "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/operon-hooks?&force=true&fieldManager=operon",
                Some(apply)
            )
        );
        let body: Value = serde_json::from_slice(&seen[1].3).unwrap();
        assert_eq!(
            body,
            validating_configuration(&hooks(true), &registration()).unwrap()
        );
        assert_eq!(
            (seen[2].0.as_str(), seen[2].1.as_str(), seen[2].2.as_deref()),
            (
                "PATCH",
                "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/operon-mutating?&force=true&fieldManager=operon",
                Some(apply)
            )
        );
        let body: Value = serde_json::from_slice(&seen[2].3).unwrap();
        assert_eq!(
            body,
            mutating_configuration(&hooks(true), &registration()).unwrap()
        );
        let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
        assert_eq!(
            (seen[3].0.as_str(), seen[3].1.as_str()),
            (
                "PATCH",
                format!("{crds}/widgets.example.com?&force=true&fieldManager=operon").as_str()
            )
        );
        // The conversion this engine applied for a hook that is gone is given back:
        // only what this manager applied, only for CRDs no hook converts.
        assert_eq!(
            (seen[4].0.as_str(), seen[4].1.as_str()),
            ("GET", format!("{crds}?").as_str())
        );
        assert_eq!(
            (seen[5].0.as_str(), seen[5].1.as_str(), seen[5].2.as_deref()),
            (
                "PATCH",
                format!("{crds}/gadgets.example.com?&force=true&fieldManager=operon").as_str(),
                Some(apply)
            )
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&seen[5].3).unwrap(),
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                   "metadata": {"name": "gadgets.example.com"}})
        );
        // The hook set without admission bindings: both configurations go.
        assert_eq!(
            (seen[6].0.as_str(), seen[6].1.as_str()),
            (
                "DELETE",
                "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/operon-hooks?"
            )
        );
        assert_eq!(
            (seen[7].0.as_str(), seen[7].1.as_str()),
            (
                "DELETE",
                "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/operon-mutating?"
            )
        );
        assert_eq!(seen[8].0, "PATCH");
        assert_eq!(seen[9].0, "GET");
        assert!(
            seen[10].1.contains("/gadgets.example.com?"),
            "{}",
            seen[10].1
        );
    }
}
