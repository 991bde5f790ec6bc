//! The webhooks that come and go with their owner while `operon serve` runs: a Hook
//! object's, and an addon-operator module's (or the global hooks'). Each owner gets its
//! own ValidatingWebhookConfiguration and MutatingWebhookConfiguration, named from the
//! owner so that two never share one (`operon-hook.NAMESPACE.NAME`: a namespace holds
//! no dot; `operon-module.MODULE`), labelled with the owner's kind and served under the
//! owner's path prefix of the admission server (`/hook-object/NAMESPACE/NAME/`,
//! `/module/MODULE/`). A CRD has one conversion webhook: the first owner converting it
//! (modules before Hook objects, then by name) gets it, the others are told whose it is.
//!
//! [`WebhookRegistry`] holds what every owner wants registered; the leader writes it with
//! server-side apply (field manager `operon`) and deletes the configurations of owners
//! that are gone or have no webhook any more ([`keep_registered`]). An owner still
//! loading keeps what it had: its webhooks stay in force (with their failure policy)
//! rather than open while a new version loads; and nothing of a kind of owner is
//! deleted before every owner of that kind is known (the first list of Hooks, the
//! modules' startup convergence).

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
use operon_cluster::kube::FIELD_MANAGER;
use operon_hooks::config::AdmissionBinding;
use serde_json::{Value, json};
use sha2::Digest as _;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Where the admission server serves Hook objects' webhooks.
pub(crate) const HOOK_OBJECT_PREFIX: &str = "hook-object";
/// Where it serves modules' webhooks.
pub(crate) const MODULE_PREFIX: &str = "module";
/// The label that marks the configurations of owners, with the owner's kind (`Hook`,
/// `Module`), to list them.
pub(crate) const LABEL: &str = "operon.dev/webhooks-of";
/// The annotation naming the Hook (`namespace/name`) a configuration belongs to.
pub(crate) const HOOK_ANNOTATION: &str = "operon.dev/hook";
/// The annotation naming the module a configuration belongs to.
pub(crate) const MODULE_ANNOTATION: &str = "operon.dev/module";
/// The label every Namespace carries with its own name (Kubernetes 1.21 and later).
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// How often the leader checks that the configurations are still as written (someone
/// may delete one).
const REPAIR: Duration = Duration::from_secs(60);
/// How long a failed registration waits before it is tried again.
const RETRY: Duration = Duration::from_secs(5);

/// Who a set of webhooks belongs to. Modules sort first: a CRD both convert is the
/// module's (installed by the cluster's operator, where a Hook object is any team's).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Owner {
    /// An addon-operator module (`global` for the global hooks).
    Module(String),
    /// A Hook object: its namespace and name.
    Hook(String, String),
}

/// The kinds of owner, as their configurations' [`LABEL`] names them.
pub(crate) const OWNER_KINDS: [&str; 2] = ["Hook", "Module"];

impl From<(String, String)> for Owner {
    fn from((namespace, name): (String, String)) -> Self {
        Owner::Hook(namespace, name)
    }
}

impl From<&(String, String)> for Owner {
    fn from(key: &(String, String)) -> Self {
        Owner::Hook(key.0.clone(), key.1.clone())
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Owner::Module(module) if module == GLOBAL => f.write_str("the global hooks"),
            Owner::Module(module) => write!(f, "module {module}"),
            Owner::Hook(namespace, name) => write!(f, "Hook {namespace}/{name}"),
        }
    }
}

/// The owner name of addon-operator's global hooks (no module may take it: it is the
/// values' `global` section).
pub(crate) const GLOBAL: &str = "global";

impl Owner {
    /// The kind, as the configurations' [`LABEL`] says it.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Owner::Module(_) => "Module",
            Owner::Hook(..) => "Hook",
        }
    }

    /// The path of the owner's binding on its webhook server: `prefix` is `validate`
    /// or `mutate` (on the admission server) or `convert` (on the conversion server,
    /// with the CRD's name for the binding).
    pub(crate) fn path(&self, prefix: &str, binding: &str) -> String {
        match self {
            Owner::Hook(namespace, name) => format!(
                "/{HOOK_OBJECT_PREFIX}/{}/{}/{prefix}/{}",
                encode(namespace),
                encode(name),
                encode(binding)
            ),
            Owner::Module(module) => {
                format!(
                    "/{MODULE_PREFIX}/{}/{prefix}/{}",
                    encode(module),
                    encode(binding)
                )
            }
        }
    }

    /// The name of the owner's configurations: `operon-hook.NAMESPACE.NAME` or
    /// `operon-module.MODULE`, cut and ended with a digest of the name when it would
    /// pass the 253 characters of an object name.
    pub(crate) fn configuration_name(&self) -> String {
        const MAX: usize = operon_data::conventions::names::MAX_SUBDOMAIN;
        let (plain, distinct) = match self {
            Owner::Hook(namespace, name) => (format!("operon-hook.{namespace}.{name}"), name),
            Owner::Module(module) => (format!("operon-module.{module}"), module),
        };
        if plain.len() <= MAX {
            return plain;
        }
        let digest = hex::encode(sha2::Sha256::digest(distinct.as_bytes()));
        let suffix = &digest[..16];
        // Names are ASCII (DNS subdomains): cutting at a byte is cutting at a character.
        // The digest is a label of its own, so no label passes its 63 characters.
        let room = MAX - suffix.len() - 1;
        let cut = plain[..room].trim_end_matches(['.', '-']);
        format!("{cut}.{suffix}")
    }

    /// The annotation naming the owner on its configurations.
    fn annotation(&self) -> (&'static str, String) {
        match self {
            Owner::Hook(namespace, name) => (HOOK_ANNOTATION, format!("{namespace}/{name}")),
            Owner::Module(module) => (MODULE_ANNOTATION, module.clone()),
        }
    }
}

/// One admission binding of an owner, with the namespaces it may intercept.
#[derive(Debug, Clone)]
pub(crate) struct AdmissionWebhook {
    pub(crate) binding: AdmissionBinding,
    /// `None`: every namespace its rules reach.
    pub(crate) namespaces: Option<Vec<String>>,
}

/// An owner's webhooks.
#[derive(Debug, Clone, Default)]
pub struct OwnedWebhooks {
    pub(crate) validating: Vec<AdmissionWebhook>,
    pub(crate) mutating: Vec<AdmissionWebhook>,
    /// The CustomResourceDefinitions its conversion bindings convert.
    pub(crate) conversions: Vec<String>,
}

impl OwnedWebhooks {
    /// Whether the owner has no webhook binding.
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

/// The ValidatingWebhookConfiguration and MutatingWebhookConfiguration of `owner`,
/// each `None` when it has no such binding.
pub(crate) fn configurations(
    owner: &Owner,
    webhooks: &OwnedWebhooks,
    registration: &Registration,
) -> (Option<Value>, Option<Value>) {
    let configuration_name = owner.configuration_name();
    let (annotation, named) = owner.annotation();
    let build = |kind: &str, prefix: &str, list: &[AdmissionWebhook]| {
        let webhooks = list
            .iter()
            .map(|w| registered_webhook(w, &owner.path(prefix, &w.binding.name), registration))
            .collect();
        configuration(kind, &configuration_name, webhooks).map(|mut c| {
            c["metadata"]["labels"][LABEL] = json!(owner.kind());
            c["metadata"]["annotations"] = json!({annotation: named});
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

/// What an owner wants registered.
#[derive(Debug, Clone)]
enum Desired {
    /// It is loading: what it had stays.
    Loading,
    /// It runs with these webhooks (possibly none).
    Serving(Arc<OwnedWebhooks>),
}

#[derive(Debug, Clone, Default)]
struct Desires {
    /// The kinds of owner ([`Owner::kind`]) whose every owner is known: before that, a
    /// configuration of that kind without an owner may belong to one not known yet.
    synced: BTreeSet<&'static str>,
    hooks: BTreeMap<Owner, Desired>,
}

/// What each owner wants registered, and how its last registration went; clones share
/// them.
#[derive(Debug, Clone, Default)]
pub(crate) struct WebhookRegistry {
    desired: Arc<watch::Sender<Desires>>,
    /// The last registration's outcome for each Hook with webhooks (`Err`: why not).
    outcomes: Arc<watch::Sender<HashMap<Owner, Result<(), String>>>>,
}

impl WebhookRegistry {
    /// `key` is loading: its configurations stay as they are.
    pub(crate) fn loading(&self, key: &Owner) {
        self.desired.send_if_modified(|d| {
            let previous = d.hooks.insert(key.clone(), Desired::Loading);
            !matches!(previous, Some(Desired::Loading))
        });
    }

    /// `key` runs with `webhooks`.
    pub(crate) fn serving(&self, key: &Owner, webhooks: OwnedWebhooks) {
        self.desired.send_modify(|d| {
            d.hooks
                .insert(key.clone(), Desired::Serving(Arc::new(webhooks)));
        });
    }

    /// `key` is gone or does not load: its configurations go.
    pub(crate) fn forget(&self, key: &Owner) {
        self.desired
            .send_if_modified(|d| d.hooks.remove(key).is_some());
        self.outcomes.send_if_modified(|o| o.remove(key).is_some());
    }

    /// Every owner of kind `kind` ([`Owner::kind`]) is known: configurations of that
    /// kind that no owner wants may go.
    pub(crate) fn synced(&self, kind: &'static str) {
        self.desired.send_if_modified(|d| d.synced.insert(kind));
    }

    /// Whether every owner of kind `kind` is known.
    #[cfg(test)]
    pub(crate) fn is_synced(&self, kind: &str) -> bool {
        self.desired.borrow().synced.contains(kind)
    }

    /// The namespaces each validating binding of `key` is kept to, by binding
    /// (those its permissions limit), as its webhook is registered; `None` while the
    /// Hook is not serving.
    pub(crate) fn namespace_limits(&self, key: &Owner) -> Option<BTreeMap<String, Vec<String>>> {
        match self.desired.borrow().hooks.get(key) {
            Some(Desired::Serving(webhooks)) => Some(
                (webhooks.validating.iter())
                    .filter_map(|w| Some((w.binding.name.clone(), w.namespaces.clone()?)))
                    .collect(),
            ),
            _ => None,
        }
    }

    /// Follows how the registrations of each owner went.
    pub(crate) fn outcomes(&self) -> watch::Receiver<HashMap<Owner, Result<(), String>>> {
        self.outcomes.subscribe()
    }
}

/// Keeps the configurations of every owner as `registry` wants them, through
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
    // Configurations of owners that went while no leader ran are looked for at the
    // first pass and at each repair.
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
        if desires.synced.is_empty() && desires.hooks.is_empty() {
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

/// One pass: applies what is wanted and not in place, deletes what nobody wants (of
/// the kinds of owner all known). The outcome for each owner with webhooks, and
/// whether anything failed.
async fn reconcile(
    client: &Client,
    registration: &Registration,
    desires: &Desires,
    applied: &mut HashMap<String, Value>,
    scan: bool,
) -> (HashMap<Owner, Result<(), String>>, bool) {
    let mut validating = BTreeMap::new();
    let mut mutating = BTreeMap::new();
    let mut keep = HashSet::new();
    let mut owners = HashMap::new();
    let mut outcomes = HashMap::new();
    for (key, desired) in &desires.hooks {
        let name = key.configuration_name();
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
    let synced = &desires.synced;
    let mut failures = reconcile_kind::<ValidatingWebhookConfiguration>(
        client,
        &validating,
        &keep,
        synced,
        applied,
    )
    .await;
    failures.extend(
        reconcile_kind::<MutatingWebhookConfiguration>(client, &mutating, &keep, synced, applied)
            .await,
    );
    let (conversions, refused) = conversions(desires, registration);
    for (key, reason) in refused {
        outcomes.insert(key, Err(reason));
    }
    let loading: HashSet<Owner> = (desires.hooks.iter())
        .filter(|(_, d)| matches!(d, Desired::Loading))
        .map(|(k, _)| k.clone())
        .collect();
    // Without a CA for the conversion server this engine registers no conversion.
    let converted = if registration.conversion_ca.is_empty() {
        Vec::new()
    } else {
        reconcile_conversions(client, &conversions, &loading, synced, applied, scan).await
    };
    let mut failed = !failures.is_empty();
    for (crd, error) in converted {
        failed = true;
        tracing::warn!(crd = %crd, error = %error, "a conversion webhook is not registered");
        if let Some((key, _)) = conversions.get(&crd) {
            outcomes.insert(key.clone(), Err(error.to_string()));
        }
    }
    for (name, error) in failures {
        tracing::warn!(configuration = %name, error = %error, "admission webhooks are not registered");
        if let Some(key) = owners.get(&name) {
            outcomes.insert(key.clone(), Err(error.to_string()));
        }
    }
    (outcomes, failed)
}

/// Each CRD an owner converts, with its owner and the patch pointing the CRD at it.
type Conversions = BTreeMap<String, (Owner, Value)>;

/// The conversion each CRD gets: (its owner, the patch). A CRD has one conversion
/// webhook: the first owner (modules first, then Hooks by namespace and name) gets it;
/// the others, and owners whose conversion this engine cannot register (no CA for its
/// conversion server), are returned with the reason.
fn conversions(
    desires: &Desires,
    registration: &Registration,
) -> (Conversions, Vec<(Owner, String)>) {
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
                    format!("this engine registers no conversion webhook (give the conversion server a CA: --conversion-webhook-ca, --webhook-cert-dir or --webhook-self-signed), so {crd} is not converted through {key}"),
                ));
                continue;
            }
            match wanted.get(crd) {
                Some((owner, _)) => refused.push((
                    key.clone(),
                    format!(
                        "CustomResourceDefinition {crd} has one conversion webhook, and {owner} has it"
                    ),
                )),
                None => {
                    let path = key.path("convert", crd);
                    let patch = conversion_patch(crd, &path, registration);
                    wanted.insert(crd.clone(), (key.clone(), patch));
                }
            }
        }
    }
    (wanted, refused)
}

/// The owner whose conversion path `target` (a path or URL) is.
pub(crate) fn conversion_owner(target: &str) -> Option<Owner> {
    if let Some(rest) = target.split(&format!("/{HOOK_OBJECT_PREFIX}/")).nth(1) {
        let mut parts = rest.split('/');
        let (namespace, name, convert) = (parts.next()?, parts.next()?, parts.next()?);
        return (convert == "convert").then(|| Owner::Hook(namespace.to_owned(), name.to_owned()));
    }
    let rest = target.split(&format!("/{MODULE_PREFIX}/")).nth(1)?;
    let mut parts = rest.split('/');
    let (module, convert) = (parts.next()?, parts.next()?);
    (convert == "convert").then(|| Owner::Module(module.to_owned()))
}

/// Points each CRD of `desired` at its owner (when not already), and gives back the
/// conversion of CRDs an owner had and none has now (unless that owner is `loading`,
/// or not every owner of its kind is known yet, `synced`): those this registry wrote,
/// and with `scan`, every CRD whose conversion an owner had (one gone while no leader
/// ran). The failures, by CRD.
async fn reconcile_conversions(
    client: &Client,
    desired: &Conversions,
    loading: &HashSet<Owner>,
    synced: &BTreeSet<&'static str>,
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
                tracing::info!(crd = %crd, owner = %desired[crd].0, "conversion webhook registered");
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
        .filter(|(crd, owner)| {
            !desired.contains_key(*crd) && !loading.contains(owner) && synced.contains(owner.kind())
        })
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
                        && synced.contains(owner.kind())
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
                tracing::info!(crd = %crd, "no owner converts it any more: conversion webhook removed");
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
/// owners' configurations of kind `K` neither desired nor kept, of the kinds of owner
/// all known (`synced`). The failures, by configuration name (an empty name: the list
/// failed).
async fn reconcile_kind<K>(
    client: &Client,
    desired: &BTreeMap<String, Value>,
    keep: &HashSet<String>,
    synced: &BTreeSet<&'static str>,
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
    let selector = format!("{LABEL} in ({})", OWNER_KINDS.join(","));
    let listed = match api
        .list_metadata(&ListParams::default().labels(&selector))
        .await
    {
        Ok(list) => (list.items.iter())
            .map(|o| {
                let kind = o.labels().get(LABEL).cloned().unwrap_or_default();
                (o.name_any(), kind)
            })
            .collect::<HashMap<_, _>>(),
        Err(e) => {
            failures.push((String::new(), error("list")(e)));
            return failures;
        }
    };
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for (name, configuration) in desired {
        let key = format!("{kind}/{name}");
        if listed.contains_key(name) && applied.get(&key) == Some(configuration) {
            continue;
        }
        match api.patch(name, &params, &Patch::Apply(configuration)).await {
            Ok(_) => {
                tracing::info!(configuration = %name, kind = %kind, "admission webhooks registered");
                applied.insert(key, configuration.clone());
            }
            Err(e) => {
                applied.remove(&key);
                failures.push((name.clone(), error(name)(e)));
            }
        }
    }
    for (name, owner_kind) in listed {
        if desired.contains_key(&name)
            || keep.contains(&name)
            || !synced.contains(owner_kind.as_str())
        {
            continue;
        }
        applied.remove(&format!("{kind}/{name}"));
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                tracing::info!(configuration = %name, kind = %kind, "admission webhooks removed")
            }
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => failures.push((name.clone(), error(&name)(e))),
        }
    }
    failures
}
