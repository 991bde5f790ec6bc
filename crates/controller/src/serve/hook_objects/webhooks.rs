//! The webhooks of Hook objects. What a validating or mutating binding may intercept is
//! bounded by the Hook's `spec.permissions.watch` (`plan`): a webhook sees every
//! object it intercepts, so it may only name kinds the Hook may read, and for a kind
//! granted in some namespaces only, its webhook is registered with a `namespaceSelector`
//! that keeps the API server from sending it the others. A conversion binding converts
//! every object of its CustomResourceDefinition, so its kind must be granted in every
//! namespace; a CRD has one conversion webhook, so one Hook (the first by namespace and
//! name) gets it and the others are told whose it is.
//!
//! Each Hook with such bindings gets its own ValidatingWebhookConfiguration and
//! MutatingWebhookConfiguration, named from its namespace and name (a namespace holds no
//! dot, so two Hooks never share a name) and served under `/hook-object/NAMESPACE/NAME/`
//! of the admission server. `WebhookRegistry` holds what every Hook wants registered;
//! the leader writes it with server-side apply (field manager `operon`) and deletes the
//! configurations of Hooks that are gone, refused or without webhook bindings any more
//! (`keep_registered`). A Hook still loading keeps what it had: its webhooks stay in
//! force (with their failure policy) rather than open while a new version loads. Every
//! replica serves the webhooks: followers load each Hook and watch its bindings without
//! running it.

use super::Key;
use super::prepare::Refusal;
use crate::serve::webhook::register::{
    RegisterError, Registrar, Registration, configuration, conversion_patch, conversion_target,
    encode, webhook_at,
};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt as _};
use operon_cluster::Cluster;
use operon_cluster::kube::FIELD_MANAGER;
use operon_hooks::hooks::config::{AdmissionBinding, ConversionBinding};
use operon_hooks::hooks::permitted::Permissions;
use serde_json::{Value, json};
use sha2::Digest as _;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Where the admission server serves Hook objects' webhooks.
pub(crate) const PATH_PREFIX: &str = "hook-object";
/// The label that marks the configurations of Hook objects, to list them.
pub(crate) const LABEL: &str = "operon.dev/webhooks-of";
/// The annotation naming the Hook (`namespace/name`) a configuration belongs to.
pub(crate) const HOOK_ANNOTATION: &str = "operon.dev/hook";
/// The label every Namespace carries with its own name (Kubernetes 1.21 and later).
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// How often the leader checks that the configurations are still as written (someone
/// may delete one).
const REPAIR: Duration = Duration::from_secs(60);
/// How long a failed registration waits before it is tried again.
const RETRY: Duration = Duration::from_secs(5);

/// One admission binding of a Hook, with the namespaces it may intercept.
#[derive(Debug, Clone)]
pub(crate) struct AdmissionWebhook {
    pub(crate) binding: AdmissionBinding,
    /// `None`: every namespace its rules reach.
    pub(crate) namespaces: Option<Vec<String>>,
}

/// A Hook's webhooks.
#[derive(Debug, Clone, Default)]
pub struct HookWebhooks {
    pub(crate) validating: Vec<AdmissionWebhook>,
    pub(crate) mutating: Vec<AdmissionWebhook>,
    /// The CustomResourceDefinitions its conversion bindings convert.
    pub(crate) conversions: Vec<String>,
}

impl HookWebhooks {
    /// Whether the Hook has no webhook binding.
    pub fn is_empty(&self) -> bool {
        self.validating.is_empty() && self.mutating.is_empty() && self.conversions.is_empty()
    }

    /// Whether it has validating or mutating bindings.
    pub(crate) fn admits(&self) -> bool {
        !self.validating.is_empty() || !self.mutating.is_empty()
    }

    /// The admission bindings, for messages.
    pub(crate) fn names(&self) -> Vec<&str> {
        (self.validating.iter().chain(&self.mutating))
            .map(|w| w.binding.name.as_str())
            .collect()
    }
}

/// Checks every webhook binding of a Hook against its watch permissions (resolving the
/// granted kinds through `cluster`) and says where each validating and mutating one may
/// intercept: the intersection of what its rules' kinds are granted.
pub(crate) async fn plan(
    permissions: &Permissions,
    cluster: &dyn Cluster,
    validating: &[AdmissionBinding],
    mutating: &[AdmissionBinding],
    conversions: &[ConversionBinding],
) -> Result<HookWebhooks, Refusal> {
    let mut planned = HookWebhooks::default();
    for conversion in conversions {
        let (plural, group) = conversion
            .crd_name
            .split_once('.')
            .unwrap_or((conversion.crd_name.as_str(), ""));
        let granted = permissions
            .check_intercept(cluster, &conversion.name, group, plural)
            .await
            .map_err(|m| Refusal::new("WebhookNotPermitted", m))?;
        if granted.is_some() {
            return Err(Refusal::new(
                "WebhookNotPermitted",
                format!(
                    "binding {:?} converts every object of {}, but spec.permissions.watch grants its kind in some namespaces only (a conversion webhook sees them all: grant \"*\")",
                    conversion.name, conversion.crd_name
                ),
            ));
        }
        if !planned.conversions.contains(&conversion.crd_name) {
            planned.conversions.push(conversion.crd_name.clone());
        }
    }
    for (bindings, out) in [
        (validating, &mut planned.validating),
        (mutating, &mut planned.mutating),
    ] {
        for binding in bindings {
            let mut namespaces: Option<Vec<String>> = None;
            for rule in &binding.rules {
                for group in &rule.api_groups {
                    for resource in &rule.resources {
                        let granted = permissions
                            .check_intercept(cluster, &binding.name, group, resource)
                            .await
                            .map_err(|m| Refusal::new("WebhookNotPermitted", m))?;
                        namespaces = intersect(namespaces, granted);
                    }
                }
            }
            if namespaces.as_ref().is_some_and(Vec::is_empty) {
                return Err(Refusal::new(
                    "WebhookNotPermitted",
                    format!(
                        "binding {:?} intercepts kinds that spec.permissions.watch grants in no common namespace: give them one, or split the binding",
                        binding.name
                    ),
                ));
            }
            out.push(AdmissionWebhook {
                binding: binding.clone(),
                namespaces,
            });
        }
    }
    Ok(planned)
}

fn intersect(a: Option<Vec<String>>, b: Option<Vec<String>>) -> Option<Vec<String>> {
    match (a, b) {
        (None, other) | (other, None) => other,
        (Some(a), Some(b)) => Some(a.into_iter().filter(|n| b.contains(n)).collect()),
    }
}

/// The path of a Hook's binding on its webhook server: `prefix` is `validate` or
/// `mutate` (on the admission server) or `convert` (on the conversion server, with the
/// CRD's name for the binding).
pub(crate) fn path(namespace: &str, name: &str, prefix: &str, binding: &str) -> String {
    format!(
        "/{PATH_PREFIX}/{}/{}/{prefix}/{}",
        encode(namespace),
        encode(name),
        encode(binding)
    )
}

/// The name of the configurations of Hook `name` in `namespace`:
/// `operon-hook.NAMESPACE.NAME`, cut and ended with a digest of the name when it would
/// pass the 253 characters of an object name.
pub(crate) fn configuration_name(namespace: &str, name: &str) -> String {
    const MAX: usize = 253;
    let plain = format!("operon-hook.{namespace}.{name}");
    if plain.len() <= MAX {
        return plain;
    }
    let digest = hex::encode(sha2::Sha256::digest(name.as_bytes()));
    let suffix = &digest[..16];
    // Names are ASCII (DNS subdomains): cutting at a byte is cutting at a character.
    // The digest is a label of its own, so no label passes its 63 characters.
    let room = MAX - suffix.len() - 1;
    let cut = plain[..room].trim_end_matches(['.', '-']);
    format!("{cut}.{suffix}")
}

/// The webhook of `webhook`, kept to its namespaces by its `namespaceSelector` (added
/// to what the binding selects: the API server ANDs the requirements).
fn registered_webhook(
    webhook: &AdmissionWebhook,
    path: &str,
    registration: &Registration,
) -> Value {
    let mut out = webhook_at(&webhook.binding, path, registration);
    if let Some(namespaces) = &webhook.namespaces {
        let selector = out
            .as_object_mut()
            .expect("a webhook is an object")
            .entry("namespaceSelector")
            .or_insert_with(|| json!({}));
        let requirement =
            json!({"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": namespaces});
        match selector.get_mut("matchExpressions") {
            Some(Value::Array(expressions)) => expressions.push(requirement),
            _ => selector["matchExpressions"] = json!([requirement]),
        }
    }
    out
}

/// The ValidatingWebhookConfiguration and MutatingWebhookConfiguration of Hook `key`,
/// each `None` when it has no such binding.
pub(crate) fn configurations(
    key: &Key,
    webhooks: &HookWebhooks,
    registration: &Registration,
) -> (Option<Value>, Option<Value>) {
    let (namespace, name) = (key.0.as_str(), key.1.as_str());
    let configuration_name = configuration_name(namespace, name);
    let build = |kind: &str, prefix: &str, list: &[AdmissionWebhook]| {
        let webhooks = list
            .iter()
            .map(|w| {
                registered_webhook(
                    w,
                    &path(namespace, name, prefix, &w.binding.name),
                    registration,
                )
            })
            .collect();
        configuration(kind, &configuration_name, webhooks).map(|mut c| {
            c["metadata"]["labels"][LABEL] = json!("Hook");
            c["metadata"]["annotations"] = json!({HOOK_ANNOTATION: format!("{namespace}/{name}")});
            c
        })
    };
    (
        build(
            "ValidatingWebhookConfiguration",
            "validate",
            &webhooks.validating,
        ),
        build("MutatingWebhookConfiguration", "mutate", &webhooks.mutating),
    )
}

/// What a Hook wants registered.
#[derive(Debug, Clone)]
enum Desired {
    /// It is loading: what it had stays.
    Loading,
    /// It runs with these webhooks (possibly none).
    Serving(Arc<HookWebhooks>),
}

#[derive(Debug, Clone, Default)]
struct Desires {
    /// Whether every Hook of the first list is known: before that, a configuration
    /// without a Hook may belong to one not listed yet.
    synced: bool,
    hooks: BTreeMap<Key, Desired>,
}

/// What each Hook wants registered, and how its last registration went; clones share
/// them.
#[derive(Debug, Clone, Default)]
pub(crate) struct WebhookRegistry {
    desired: Arc<watch::Sender<Desires>>,
    /// The last registration's outcome for each Hook with webhooks (`Err`: why not).
    outcomes: Arc<watch::Sender<HashMap<Key, Result<(), String>>>>,
}

impl WebhookRegistry {
    /// Hook `key` is loading: its configurations stay as they are.
    pub(crate) fn loading(&self, key: &Key) {
        self.desired.send_if_modified(|d| {
            let previous = d.hooks.insert(key.clone(), Desired::Loading);
            !matches!(previous, Some(Desired::Loading))
        });
    }

    /// Hook `key` runs with `webhooks`.
    pub(crate) fn serving(&self, key: &Key, webhooks: HookWebhooks) {
        self.desired.send_modify(|d| {
            d.hooks
                .insert(key.clone(), Desired::Serving(Arc::new(webhooks)));
        });
    }

    /// Hook `key` is gone or does not load: its configurations go.
    pub(crate) fn forget(&self, key: &Key) {
        self.desired
            .send_if_modified(|d| d.hooks.remove(key).is_some());
        self.outcomes.send_if_modified(|o| o.remove(key).is_some());
    }

    /// Every Hook of the first list is known.
    pub(crate) fn synced(&self) {
        self.desired
            .send_if_modified(|d| !std::mem::replace(&mut d.synced, true));
    }

    /// The namespaces each validating binding of Hook `key` is kept to, by binding
    /// (those its permissions limit), as its webhook is registered; `None` while the
    /// Hook is not serving.
    pub(crate) fn namespace_limits(&self, key: &Key) -> Option<BTreeMap<String, Vec<String>>> {
        match self.desired.borrow().hooks.get(key) {
            Some(Desired::Serving(webhooks)) => Some(
                (webhooks.validating.iter())
                    .filter_map(|w| Some((w.binding.name.clone(), w.namespaces.clone()?)))
                    .collect(),
            ),
            _ => None,
        }
    }

    /// Follows how the registrations of Hook `key` went.
    pub(crate) fn outcomes(&self) -> watch::Receiver<HashMap<Key, Result<(), String>>> {
        self.outcomes.subscribe()
    }
}

/// Keeps the configurations of every Hook as `registry` wants them, through
/// `registrar`'s client, with its current CA bundle: at each change, each CA rotation
/// and every [`REPAIR`]. Runs until dropped; only the leader runs it.
pub(crate) async fn keep_registered(registry: WebhookRegistry, registrar: Registrar) {
    let mut desired = registry.desired.subscribe();
    desired.mark_changed();
    let mut ca = registrar.ca_changes();
    let mut applied: HashMap<String, Value> = HashMap::new();
    // The first pass scans anyway: the first repair is one period away.
    let mut repair = tokio::time::interval_at(tokio::time::Instant::now() + REPAIR, REPAIR);
    let mut retry = false;
    // Configurations of Hooks that went while no leader ran are looked for at the first
    // pass and at each repair.
    let mut scan = true;
    loop {
        let ca_changed = async {
            let rotated = match ca.as_mut() {
                Some(ca) => ca.changed().await.is_ok(),
                None => false,
            };
            if !rotated {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            changed = desired.changed() => if changed.is_err() { return },
            () = ca_changed => {}
            _ = repair.tick() => scan = true,
            () = tokio::time::sleep(RETRY), if retry => {}
        }
        let desires = desired.borrow_and_update().clone();
        if !desires.synced {
            continue;
        }
        let registration = registrar.registration();
        let (outcomes, failed) = reconcile(
            registrar.client(),
            &registration,
            &desires,
            &mut applied,
            scan,
        )
        .await;
        scan = false;
        retry = failed;
        registry.outcomes.send_if_modified(|current| {
            let changed = *current != outcomes;
            *current = outcomes;
            changed
        });
    }
}

/// One pass: applies what is wanted and not in place, deletes what nobody wants. The
/// outcome for each Hook with webhooks, and whether anything failed.
async fn reconcile(
    client: &Client,
    registration: &Registration,
    desires: &Desires,
    applied: &mut HashMap<String, Value>,
    scan: bool,
) -> (HashMap<Key, Result<(), String>>, bool) {
    let mut validating = BTreeMap::new();
    let mut mutating = BTreeMap::new();
    let mut keep = HashSet::new();
    let mut owners = HashMap::new();
    let mut outcomes = HashMap::new();
    for (key, desired) in &desires.hooks {
        let name = configuration_name(&key.0, &key.1);
        match desired {
            Desired::Loading => {
                keep.insert(name);
            }
            Desired::Serving(webhooks) => {
                if !webhooks.is_empty() {
                    outcomes.insert(key.clone(), Ok(()));
                }
                let (v, m) = configurations(key, webhooks, registration);
                if let Some(v) = v {
                    validating.insert(name.clone(), v);
                }
                if let Some(m) = m {
                    mutating.insert(name.clone(), m);
                }
                owners.insert(name, key.clone());
            }
        }
    }
    let mut failures =
        reconcile_kind::<ValidatingWebhookConfiguration>(client, &validating, &keep, applied).await;
    failures.extend(
        reconcile_kind::<MutatingWebhookConfiguration>(client, &mutating, &keep, applied).await,
    );
    let (conversions, refused) = conversions(desires, registration);
    for (key, reason) in refused {
        outcomes.insert(key, Err(reason));
    }
    let loading: HashSet<Key> = (desires.hooks.iter())
        .filter(|(_, d)| matches!(d, Desired::Loading))
        .map(|(k, _)| k.clone())
        .collect();
    // Without a CA for the conversion server this engine registers no conversion.
    let converted = if registration.conversion_ca.is_empty() {
        Vec::new()
    } else {
        reconcile_conversions(client, &conversions, &loading, applied, scan).await
    };
    let mut failed = !failures.is_empty();
    for (crd, error) in converted {
        failed = true;
        tracing::warn!(crd = %crd, error = %error, "a Hook's conversion webhook is not registered");
        if let Some((key, _)) = conversions.get(&crd) {
            outcomes.insert(key.clone(), Err(error.to_string()));
        }
    }
    for (name, error) in failures {
        tracing::warn!(configuration = %name, error = %error, "a Hook's webhooks are not registered");
        if let Some(key) = owners.get(&name) {
            outcomes.insert(key.clone(), Err(error.to_string()));
        }
    }
    (outcomes, failed)
}

/// Each CRD a Hook converts, with its Hook and the patch pointing the CRD at it.
type Conversions = BTreeMap<String, (Key, Value)>;

/// The conversion each CRD gets: (its Hook, the patch). A CRD has one conversion
/// webhook: the first Hook (by namespace and name) gets it; the others, and Hooks whose
/// conversion this engine cannot register (no CA for its conversion server), are
/// returned with the reason.
fn conversions(
    desires: &Desires,
    registration: &Registration,
) -> (Conversions, Vec<(Key, String)>) {
    let mut wanted = Conversions::new();
    let mut refused = Vec::new();
    for (key, desired) in &desires.hooks {
        let Desired::Serving(webhooks) = desired else {
            continue;
        };
        for crd in &webhooks.conversions {
            if registration.conversion_ca.is_empty() {
                refused.push((
                    key.clone(),
                    format!("this engine registers no conversion webhook (give the conversion server a CA: --conversion-webhook-ca, --webhook-cert-dir or --webhook-self-signed), so {crd} is not converted through this Hook"),
                ));
                continue;
            }
            match wanted.get(crd) {
                Some((owner, _)) => refused.push((
                    key.clone(),
                    format!(
                        "CustomResourceDefinition {crd} has one conversion webhook, and Hook {}/{} has it",
                        owner.0, owner.1
                    ),
                )),
                None => {
                    let path = path(&key.0, &key.1, "convert", crd);
                    let patch = conversion_patch(crd, &path, registration);
                    wanted.insert(crd.clone(), (key.clone(), patch));
                }
            }
        }
    }
    (wanted, refused)
}

/// The Hook whose conversion path `target` (a path or URL) is.
fn conversion_owner(target: &str) -> Option<Key> {
    let rest = target.split(&format!("/{PATH_PREFIX}/")).nth(1)?;
    let mut parts = rest.split('/');
    let (namespace, name, convert) = (parts.next()?, parts.next()?, parts.next()?);
    (convert == "convert").then(|| (namespace.to_owned(), name.to_owned()))
}

/// Points each CRD of `desired` at its Hook (when not already), and gives back the
/// conversion of CRDs a Hook had and none has now (unless that Hook is `loading`):
/// those this registry wrote, and with `scan`, every CRD whose conversion a Hook
/// object had (one gone while no leader ran). The failures, by CRD.
async fn reconcile_conversions(
    client: &Client,
    desired: &Conversions,
    loading: &HashSet<Key>,
    applied: &mut HashMap<String, Value>,
    scan: bool,
) -> Vec<(String, RegisterError)> {
    const PREFIX: &str = "CustomResourceDefinition/";
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let error = |crd: &str| {
        let what = format!("the conversion webhook of CRD {crd}");
        move |source| RegisterError::Api { what, source }
    };
    let mut failures = Vec::new();
    for (crd, (_, patch)) in desired {
        let cached = format!("{PREFIX}{crd}");
        if !scan && applied.get(&cached) == Some(patch) {
            continue;
        }
        match api.patch(crd, &params, &Patch::Apply(patch)).await {
            Ok(_) => {
                tracing::info!(crd = %crd, "a Hook's conversion webhook registered");
                applied.insert(cached, patch.clone());
            }
            Err(e) => {
                applied.remove(&cached);
                failures.push((crd.clone(), error(crd)(e)));
            }
        }
    }
    let owner_of = |patch: &Value| {
        let config = patch.pointer("/spec/conversion/webhook/clientConfig")?;
        let target = (config
            .pointer("/service/path")
            .or_else(|| config.get("url")))?
        .as_str()?;
        conversion_owner(target)
    };
    let mut stale: Vec<String> = (applied.iter())
        .filter_map(|(k, patch)| Some((k.strip_prefix(PREFIX)?, owner_of(patch)?)))
        .filter(|(crd, owner)| !desired.contains_key(*crd) && !loading.contains(owner))
        .map(|(crd, _)| crd.to_owned())
        .collect();
    if scan {
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                for crd in list.items {
                    let name = crd.name_any();
                    let owner = conversion_target(&crd).and_then(|t| conversion_owner(&t));
                    if let Some(owner) = owner
                        && !desired.contains_key(&name)
                        && !loading.contains(&owner)
                        && !stale.contains(&name)
                    {
                        stale.push(name);
                    }
                }
            }
            // Without list, only what this registry wrote is given back.
            Err(kube::Error::Api(s)) if s.code == 403 => {}
            Err(e) => failures.push((String::new(), error("list")(e))),
        }
    }
    for crd in stale {
        let release = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": crd},
        });
        match api.patch(&crd, &params, &Patch::Apply(&release)).await {
            Ok(_) => {
                tracing::info!(crd = %crd, "no Hook converts it any more: conversion webhook removed");
                applied.remove(&format!("{PREFIX}{crd}"));
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                applied.remove(&format!("{PREFIX}{crd}"));
            }
            Err(e) => failures.push((crd.clone(), error(&crd)(e))),
        }
    }
    failures
}

/// Applies each of `desired` (by name) that is missing or changed, and deletes the
/// Hook objects' configurations of kind `K` neither desired nor kept. The failures, by
/// configuration name (an empty name: the list failed).
async fn reconcile_kind<K>(
    client: &Client,
    desired: &BTreeMap<String, Value>,
    keep: &HashSet<String>,
    applied: &mut HashMap<String, Value>,
) -> Vec<(String, RegisterError)>
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::all(client.clone());
    let kind = K::kind(&K::DynamicType::default()).into_owned();
    let error = |name: &str| {
        let what = format!("{kind} {name}");
        move |source| RegisterError::Api { what, source }
    };
    let mut failures = Vec::new();
    let listed = match api
        .list_metadata(&ListParams::default().labels(&format!("{LABEL}=Hook")))
        .await
    {
        Ok(list) => list
            .items
            .iter()
            .map(|o| o.name_any())
            .collect::<HashSet<_>>(),
        Err(e) => {
            failures.push((String::new(), error("list")(e)));
            return failures;
        }
    };
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for (name, configuration) in desired {
        let key = format!("{kind}/{name}");
        if listed.contains(name) && applied.get(&key) == Some(configuration) {
            continue;
        }
        match api.patch(name, &params, &Patch::Apply(configuration)).await {
            Ok(_) => {
                tracing::info!(configuration = %name, kind = %kind, "a Hook's admission webhooks registered");
                applied.insert(key, configuration.clone());
            }
            Err(e) => {
                applied.remove(&key);
                failures.push((name.clone(), error(name)(e)));
            }
        }
    }
    for name in listed {
        if desired.contains_key(&name) || keep.contains(&name) {
            continue;
        }
        applied.remove(&format!("{kind}/{name}"));
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                tracing::info!(configuration = %name, kind = %kind, "a Hook's admission webhooks removed")
            }
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => failures.push((name.clone(), error(&name)(e))),
        }
    }
    failures
}

#[cfg(test)]
mod tests;
