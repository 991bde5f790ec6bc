//! Writing an audit's reports to the API server: server-side apply with field manager
//! `operon` (forced: Operon alone writes reports it names), then every report labelled
//! as Operon's that this audit did not write is deleted (its object is gone, or no
//! binding reviews it any more).
//!
//! A report whose results did not change keeps the `timestamp` of each result (when it
//! was first found) and is not written again, so an audit of a cluster where nothing
//! changed writes nothing.

use super::report::{API_VERSION, CLUSTER_POLICY_REPORT, MANAGED_BY, POLICY_REPORT, Report};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt as _};
use operon_cluster::kube::FIELD_MANAGER;
use serde_json::Value;
use std::collections::BTreeMap;

/// The group both report kinds are in.
const GROUP: &str = "wgpolicyk8s.io";
/// The version Operon writes.
const VERSION: &str = "v1alpha2";
/// How many reports one list request asks for.
const PAGE: u32 = 500;

/// Why reports could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Discovery of `wgpolicyk8s.io/v1alpha2` failed.
    #[error("cannot tell whether the {API_VERSION} CRDs are installed")]
    Discovery(#[source] kube::Error),
    /// Operon's reports of one kind could not be listed, so stale ones cannot be told.
    #[error("cannot list Operon's {kind}s")]
    List {
        /// `PolicyReport` or `ClusterPolicyReport`.
        kind: &'static str,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// A report that could not be written or deleted; the others still were.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {kind} {name}")]
pub struct ReportWriteError {
    /// `apply` or `delete`.
    pub action: &'static str,
    /// `PolicyReport` or `ClusterPolicyReport`.
    pub kind: &'static str,
    /// `namespace/name`, or `name`.
    pub name: String,
    /// Why.
    #[source]
    pub source: kube::Error,
}

/// What writing an audit's reports did.
#[derive(Debug, Default)]
pub struct Synced {
    /// Reports applied (new or changed).
    pub written: usize,
    /// Reports already as this audit found.
    pub unchanged: usize,
    /// Stale reports deleted.
    pub deleted: usize,
    /// Reports that could not be written or deleted.
    pub failed: Vec<ReportWriteError>,
}

/// Operon's PolicyReports and ClusterPolicyReports on an API server.
#[derive(Clone)]
pub struct ReportStore {
    client: Client,
}

impl std::fmt::Debug for ReportStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReportStore").finish_non_exhaustive()
    }
}

/// Which report: kind, namespace, name.
type Key = (&'static str, Option<String>, String);

fn api_resource(kind: &'static str) -> ApiResource {
    ApiResource {
        group: GROUP.to_owned(),
        version: VERSION.to_owned(),
        api_version: API_VERSION.to_owned(),
        kind: kind.to_owned(),
        plural: match kind {
            CLUSTER_POLICY_REPORT => "clusterpolicyreports",
            _ => "policyreports",
        }
        .to_owned(),
    }
}

impl ReportStore {
    /// Reports written through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    /// Whether the API server serves both report kinds (their CRDs are installed).
    pub async fn installed(&self) -> Result<bool, StoreError> {
        match self.client.list_api_group_resources(API_VERSION).await {
            Ok(list) => Ok(["policyreports", "clusterpolicyreports"]
                .iter()
                .all(|plural| list.resources.iter().any(|r| r.name == *plural))),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
            Err(e) => Err(StoreError::Discovery(e)),
        }
    }

    fn api(&self, kind: &'static str, namespace: Option<&str>) -> Api<DynamicObject> {
        let resource = api_resource(kind);
        match namespace {
            Some(namespace) => Api::namespaced_with(self.client.clone(), namespace, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        }
    }

    /// Operon's reports of `kind`, in every namespace.
    async fn existing(&self, kind: &'static str) -> Result<BTreeMap<Key, Value>, StoreError> {
        let api = self.api(kind, None);
        let mut params = ListParams::default()
            .labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1))
            .limit(PAGE);
        let mut found = BTreeMap::new();
        loop {
            let page = api
                .list(&params)
                .await
                .map_err(|source| StoreError::List { kind, source })?;
            for report in page.items {
                let key = (kind, report.namespace(), report.name_any());
                let value = serde_json::to_value(&report).unwrap_or(Value::Null);
                found.insert(key, value);
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(next) => params = params.continue_token(&next),
                None => break,
            }
        }
        Ok(found)
    }

    /// Writes `reports` and, with `delete_stale`, deletes Operon's reports that are not
    /// among them. An audit that could not list every resource it reviews passes
    /// `false`: the reports of objects it did not see are not stale.
    pub async fn sync(&self, reports: &[Report], delete_stale: bool) -> Result<Synced, StoreError> {
        let mut existing = self.existing(POLICY_REPORT).await?;
        existing.extend(self.existing(CLUSTER_POLICY_REPORT).await?);
        let mut synced = Synced::default();
        let params = PatchParams::apply(FIELD_MANAGER).force();
        for report in reports {
            let kind = report.kind;
            let key: Key = (
                kind,
                report.namespace().map(str::to_owned),
                report.name().to_owned(),
            );
            let mut desired = report.to_value();
            if let Some(current) = existing.remove(&key) {
                keep_timestamps(&mut desired, &current);
                if same_content(&desired, &current) {
                    synced.unchanged += 1;
                    continue;
                }
            }
            let api = self.api(kind, report.namespace());
            match api
                .patch(report.name(), &params, &Patch::Apply(&desired))
                .await
            {
                Ok(_) => synced.written += 1,
                Err(source) => synced.failed.push(ReportWriteError {
                    action: "apply",
                    kind,
                    name: describe(&key),
                    source,
                }),
            }
        }
        if !delete_stale {
            return Ok(synced);
        }
        for (key, stale) in existing {
            let api = self.api(key.0, key.1.as_deref());
            let mut params = DeleteParams::default();
            // The report this audit read, not one that took its name since.
            if let Some(uid) = stale.pointer("/metadata/uid").and_then(Value::as_str) {
                params = params.preconditions(kube::api::Preconditions {
                    uid: Some(uid.to_owned()),
                    resource_version: None,
                });
            }
            match api.delete(&key.2, &params).await {
                Ok(_) => synced.deleted += 1,
                // Gone already: its object's owner reference took it.
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(source) => synced.failed.push(ReportWriteError {
                    action: "delete",
                    kind: key.0,
                    name: describe(&key),
                    source,
                }),
            }
        }
        Ok(synced)
    }
}

fn describe(key: &Key) -> String {
    operon_cluster::namespaced_name(key.1.as_deref(), &key.2)
}

/// Gives each result of `desired` the timestamp of the result of `current` that says
/// the same (same hook, binding and engine, same everything else): a result keeps the
/// time it was first found.
fn keep_timestamps(desired: &mut Value, current: &Value) {
    let Some(current) = current.get("results").and_then(Value::as_array) else {
        return;
    };
    let Some(results) = desired.get_mut("results").and_then(Value::as_array_mut) else {
        return;
    };
    for result in results {
        let found = current.iter().find(|old| same_but_time(result, old));
        if let Some(time) = found.and_then(|old| old.get("timestamp")) {
            result["timestamp"] = time.clone();
        }
    }
}

fn same_but_time(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return false;
    };
    let keys = |map: &serde_json::Map<String, Value>| {
        map.keys()
            .filter(|k| *k != "timestamp")
            .cloned()
            .collect::<Vec<_>>()
    };
    keys(a) == keys(b) && keys(a).iter().all(|k| a.get(k) == b.get(k))
}

/// Whether `current` holds what Operon writes of `desired`: its scope, summary and
/// results, its owner and Operon's label (other fields and labels are not Operon's).
fn same_content(desired: &Value, current: &Value) -> bool {
    let label = format!("/metadata/labels/{}", MANAGED_BY.0.replace('/', "~1"));
    [
        "/scope",
        "/summary",
        "/results",
        "/metadata/ownerReferences",
    ]
    .iter()
    .chain(std::iter::once(&label.as_str()))
    .all(|pointer| desired.pointer(pointer) == current.pointer(pointer))
}
