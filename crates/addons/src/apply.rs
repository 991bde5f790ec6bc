//! Applying a module's objects and keeping its release record. Against an API server
//! objects go in by server-side apply with field manager `operon` (forced, as the
//! owner of the module's objects); against the local cluster, which keeps no field
//! managers, by `CreateOrUpdate`. Each module's applied set is recorded in a ConfigMap
//! `operon-module-NAME` (the object list and a checksum), so that objects dropped from
//! a chart are deleted and a disabled module's objects go with it, as `helm upgrade`
//! and `helm uninstall` do with their release Secrets.

use super::AddonError;
use super::values::checksum;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use operon_cluster::kube::FIELD_MANAGER;
use operon_cluster::{Cluster, Resource, Selector};
use operon_data::model::{CreateSpec, ObjectRef, PatchOperation};
use operon_data::model::{LabelOperator, LabelRequirement, LabelSelector};
use serde_json::{Value, json};
use std::sync::Arc;

/// The label of release records, whose value is the module.
pub(crate) const RELEASE_LABEL: &str = "operon.dev/module-release";

/// Helm's install order for the kinds that others depend on; the rest follow.
const FIRST_KINDS: [&str; 12] = [
    "Namespace",
    "CustomResourceDefinition",
    "ServiceAccount",
    "Secret",
    "ConfigMap",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "DaemonSet",
    "Deployment",
];

/// Why objects could not be applied, read or deleted.
///
/// The cluster's and the client's errors are boxed, as they are large, and handed out
/// unboxed by [`Error::source`](std::error::Error::source), so that a downcast finds
/// their type.
#[derive(Debug)]
pub enum ApplyError {
    /// The cluster failed or refused the operation.
    Cluster(Box<operon_cluster::ClusterError>),
    /// The API server failed or refused a server-side apply.
    Client(Box<kube::Error>),
    /// A release record's object list is not JSON.
    Record(serde_json::Error),
    /// The module's files hold something that is not applied as it is (why, in words).
    Refused(String),
}

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Cluster(e) => e.fmt(f),
            Self::Client(e) => e.fmt(f),
            Self::Record(e) => e.fmt(f),
            Self::Refused(reason) => f.write_str(reason),
        }
    }
}

impl std::error::Error for ApplyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Cluster(e) => Some(&**e),
            Self::Client(e) => Some(&**e),
            Self::Record(e) => Some(e),
            Self::Refused(_) => None,
        }
    }
}

impl From<operon_cluster::ClusterError> for ApplyError {
    fn from(error: operon_cluster::ClusterError) -> Self {
        Self::Cluster(Box::new(error))
    }
}

/// How [`AddonError::Apply`] names its step: `"STEP: "`, or nothing.
pub(crate) fn step_prefix(step: &str) -> String {
    if step.is_empty() {
        String::new()
    } else {
        format!("{step}: ")
    }
}

/// A failure of `module`'s `step` (empty when the error says it all).
pub(crate) fn failed(
    module: &str,
    step: impl Into<String>,
    source: impl Into<ApplyError>,
) -> AddonError {
    AddonError::Apply {
        module: module.to_owned(),
        step: step.into(),
        source: source.into(),
    }
}

/// What a module applied last time.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Release {
    /// The objects, by identity.
    pub(crate) objects: Vec<ObjectRef>,
    /// The checksum of what was applied.
    pub(crate) checksum: String,
}

/// What one apply did.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ApplyReport {
    /// Objects applied.
    pub(crate) applied: Vec<ObjectRef>,
    /// Objects of the previous release that are no longer rendered, deleted.
    pub(crate) deleted: Vec<ObjectRef>,
    /// Nothing changed: same checksum and every object present, so nothing was sent.
    pub(crate) unchanged: bool,
}

/// Writes modules' objects to a cluster.
#[derive(Clone)]
pub struct ObjectWriter {
    cluster: Arc<dyn Cluster>,
    /// Server-side apply through this client; `None` for the local cluster.
    client: Option<kube::Client>,
    /// Where release records live and namespaced objects without a namespace go.
    pub namespace: String,
}

impl ObjectWriter {
    /// A writer over `cluster`, applying server-side through `client` when given.
    pub fn new(cluster: Arc<dyn Cluster>, client: Option<kube::Client>, namespace: &str) -> Self {
        Self {
            cluster,
            client,
            namespace: namespace.to_owned(),
        }
    }

    /// Whether objects go in by server-side apply (an API server), not to the local
    /// cluster.
    pub(crate) fn server_side(&self) -> bool {
        self.client.is_some()
    }

    /// The API server's Kubernetes version, which module requirements are checked
    /// against; the local cluster's is [`LOCAL_KUBERNETES_VERSION`].
    ///
    /// [`LOCAL_KUBERNETES_VERSION`]: super::requirements::LOCAL_KUBERNETES_VERSION
    pub(crate) async fn kubernetes_version(&self) -> Result<semver::Version, String> {
        let Some(client) = &self.client else {
            return super::requirements::parse_version(
                super::requirements::LOCAL_KUBERNETES_VERSION,
            );
        };
        let info = client
            .apiserver_version()
            .await
            .map_err(|e| format!("asking the API server: {e}"))?;
        super::requirements::parse_version(&info.git_version)
    }

    /// The cluster written to.
    pub(crate) fn cluster(&self) -> &Arc<dyn Cluster> {
        &self.cluster
    }

    /// The name of `module`'s release record.
    pub(crate) fn record_name(module: &str) -> String {
        format!("operon-module-{module}")
    }

    /// `module`'s release, if it has one.
    pub(crate) async fn release(&self, module: &str) -> Result<Option<Release>, AddonError> {
        let resource = self
            .cluster
            .resolve(Some("v1"), "ConfigMap")
            .await
            .map_err(|e| failed(module, "", e))?;
        let record = self
            .cluster
            .get(&resource, Some(&self.namespace), &Self::record_name(module))
            .await
            .map_err(|e| failed(module, "", e))?;
        let Some(record) = record else {
            return Ok(None);
        };
        let objects = record
            .pointer("/data/objects")
            .and_then(Value::as_str)
            .unwrap_or("[]");
        let objects: Vec<Value> = serde_json::from_str(objects)
            .map_err(|e| failed(module, "release record: objects", ApplyError::Record(e)))?;
        let objects = objects
            .iter()
            .map(|o| ObjectRef {
                api_version: o["apiVersion"].as_str().map(str::to_owned),
                kind: o["kind"].as_str().unwrap_or_default().to_owned(),
                namespace: o["namespace"].as_str().map(str::to_owned),
                name: o["name"].as_str().unwrap_or_default().to_owned(),
            })
            .collect();
        Ok(Some(Release {
            objects,
            checksum: record
                .pointer("/data/checksum")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        }))
    }

    /// The modules that have a release record in the namespace.
    pub(crate) async fn released_modules(&self) -> Result<Vec<String>, AddonError> {
        let failed = |e| failed("", "listing release records", e);
        let resource = self
            .cluster
            .resolve(Some("v1"), "ConfigMap")
            .await
            .map_err(failed)?;
        let selector = Selector {
            namespaces: Some(vec![self.namespace.clone()]),
            labels: Some(LabelSelector {
                match_labels: Vec::new(),
                match_expressions: vec![LabelRequirement {
                    key: RELEASE_LABEL.to_owned(),
                    operator: LabelOperator::Exists,
                    values: Vec::new(),
                }],
            }),
            ..Selector::default()
        };
        // The list is what is needed; the watch that comes with it is dropped at once.
        let (records, _) = self
            .cluster
            .list_and_watch(&resource, &selector)
            .await
            .map_err(failed)?;
        let mut names: Vec<String> = records
            .into_iter()
            .filter_map(|r| {
                r.pointer("/data/module")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Puts namespaced objects without a namespace into the release namespace and
    /// orders them for applying; returns them with their resources.
    pub async fn prepare(
        &self,
        module: &str,
        objects: Vec<Value>,
    ) -> Result<Vec<(Resource, Value)>, AddonError> {
        let mut out = Vec::with_capacity(objects.len());
        for mut object in objects {
            let api_version = object["apiVersion"].as_str().unwrap_or_default().to_owned();
            let kind = object["kind"].as_str().unwrap_or_default().to_owned();
            let resource = self
                .cluster
                .resolve(Some(&api_version), &kind)
                .await
                .map_err(|e| failed(module, format!("{kind} {}", object["metadata"]["name"]), e))?;
            if resource.namespaced && object.pointer("/metadata/namespace").is_none() {
                object["metadata"]["namespace"] = json!(self.namespace);
            }
            out.push((resource, object));
        }
        out.sort_by_key(|(r, _)| {
            FIRST_KINDS
                .iter()
                .position(|k| *k == r.kind)
                .unwrap_or(FIRST_KINDS.len())
        });
        Ok(out)
    }

    /// Applies `objects` as `module`'s release, deletes what the previous release
    /// had and this one lacks, and records the new release. Sends nothing when the
    /// checksum is the recorded one and every object is present.
    pub(crate) async fn apply(
        &self,
        module: &str,
        objects: Vec<Value>,
    ) -> Result<ApplyReport, AddonError> {
        let prepared = self.prepare(module, objects).await?;
        let sum = checksum(&Value::Array(
            prepared.iter().map(|(_, o)| o.clone()).collect(),
        ));
        let previous = self.release(module).await?.unwrap_or_default();
        let refs: Vec<ObjectRef> = prepared.iter().map(|(r, o)| object_ref(r, o)).collect();
        if previous.checksum == sum
            && previous.objects == refs
            && self.all_present(&prepared).await?
        {
            return Ok(ApplyReport {
                unchanged: true,
                ..ApplyReport::default()
            });
        }
        for (resource, object) in &prepared {
            self.apply_one(resource, object).await.map_err(|e| {
                let step = format!("apply {}", describe(&object_ref(resource, object)));
                failed(module, step, e)
            })?;
        }
        let mut deleted = Vec::new();
        for old in previous.objects.iter().filter(|o| !refs.contains(o)) {
            self.delete(old)
                .await
                .map_err(|e| failed(module, format!("delete {}", describe(old)), e))?;
            deleted.push(old.clone());
        }
        self.write_record(module, &refs, &sum)
            .await
            .map_err(|e| failed(module, "", e))?;
        Ok(ApplyReport {
            applied: refs,
            deleted,
            unchanged: false,
        })
    }

    /// What applying `objects` as `module`'s release would do, one line per object:
    /// `+ create`, `~ update` with the paths that differ, `= unchanged`, and `- delete`
    /// for what the previous release has and this one lacks. Changes nothing.
    pub async fn diff(&self, module: &str, objects: Vec<Value>) -> Result<Vec<String>, AddonError> {
        let prepared = self.prepare(module, objects).await?;
        let mut lines = Vec::new();
        let mut refs = Vec::new();
        for (resource, object) in &prepared {
            let r = object_ref(resource, object);
            let live = self
                .cluster
                .get(resource, r.namespace.as_deref(), &r.name)
                .await
                .map_err(|e| failed(module, format!("get {}", describe(&r)), e))?;
            lines.push(match live {
                None => format!("+ create {}", describe(&r)),
                Some(live) => {
                    let mut changed = Vec::new();
                    differences(object, &live, "", &mut changed);
                    if changed.is_empty() {
                        format!("= unchanged {}", describe(&r))
                    } else {
                        format!("~ update {}: {}", describe(&r), changed.join(", "))
                    }
                }
            });
            refs.push(r);
        }
        if let Some(release) = self.release(module).await? {
            for old in release.objects.iter().filter(|o| !refs.contains(o)) {
                lines.push(format!("- delete {}", describe(old)));
            }
        }
        Ok(lines)
    }

    /// Deletes every object of `module`'s release and the record; returns what was
    /// deleted.
    pub(crate) async fn uninstall(&self, module: &str) -> Result<Vec<ObjectRef>, AddonError> {
        let Some(release) = self.release(module).await? else {
            return Ok(Vec::new());
        };
        for object in release.objects.iter().rev() {
            self.delete(object)
                .await
                .map_err(|e| failed(module, format!("delete {}", describe(object)), e))?;
        }
        let record = ObjectRef {
            api_version: Some("v1".to_owned()),
            kind: "ConfigMap".to_owned(),
            namespace: Some(self.namespace.clone()),
            name: Self::record_name(module),
        };
        self.delete(&record)
            .await
            .map_err(|e| failed(module, "", e))?;
        Ok(release.objects)
    }

    async fn all_present(&self, prepared: &[(Resource, Value)]) -> Result<bool, AddonError> {
        for (resource, object) in prepared {
            let r = object_ref(resource, object);
            let found = self
                .cluster
                .get(resource, r.namespace.as_deref(), &r.name)
                .await
                .map_err(|e| failed("", "", e))?;
            if found.is_none() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    pub(super) async fn apply_one(
        &self,
        resource: &Resource,
        object: &Value,
    ) -> Result<(), ApplyError> {
        let Some(client) = &self.client else {
            let op = PatchOperation::CreateOrUpdate(CreateSpec {
                object: object.to_string(),
                subresource: None,
            });
            return Ok(self.cluster.apply(&op).await?);
        };
        let gvk = GroupVersionKind::gvk(&resource.group, &resource.version, &resource.kind);
        let api_resource = ApiResource::from_gvk_with_plural(&gvk, &resource.plural);
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let api: kube::Api<DynamicObject> = match object.pointer("/metadata/namespace") {
            Some(Value::String(ns)) if resource.namespaced => {
                kube::Api::namespaced_with(client.clone(), ns, &api_resource)
            }
            _ => kube::Api::all_with(client.clone(), &api_resource),
        };
        let params = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(name, &params, &Patch::Apply(object))
            .await
            .map(|_| ())
            .map_err(|e| ApplyError::Client(Box::new(e)))
    }

    async fn delete(&self, target: &ObjectRef) -> Result<(), ApplyError> {
        // A missing object counts as deleted (as the cluster's delete operations have it).
        Ok(self
            .cluster
            .apply(&PatchOperation::DeleteInBackground(target.clone()))
            .await?)
    }

    async fn write_record(
        &self,
        module: &str,
        refs: &[ObjectRef],
        sum: &str,
    ) -> Result<(), ApplyError> {
        let list: Vec<Value> = refs
            .iter()
            .map(|r| {
                json!({"apiVersion": r.api_version, "kind": r.kind,
                       "namespace": r.namespace, "name": r.name})
            })
            .collect();
        let record = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": Self::record_name(module),
                "namespace": self.namespace,
                "labels": {
                    "app.kubernetes.io/managed-by": "operon",
                    RELEASE_LABEL: module,
                },
            },
            "data": {
                "module": module,
                "objects": Value::Array(list).to_string(),
                "checksum": sum,
            },
        });
        let resource = self.cluster.resolve(Some("v1"), "ConfigMap").await?;
        self.apply_one(&resource, &record).await
    }
}

/// The identity of `object` of `resource`.
pub(crate) fn object_ref(resource: &Resource, object: &Value) -> ObjectRef {
    ObjectRef {
        api_version: Some(resource.api_version()),
        kind: resource.kind.clone(),
        namespace: object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|_| resource.namespaced)
            .map(str::to_owned),
        name: object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    }
}

/// `Kind namespace/name`.
pub(crate) fn describe(r: &ObjectRef) -> String {
    match &r.namespace {
        Some(ns) => format!("{} {ns}/{}", r.kind, r.name),
        None => format!("{} {}", r.kind, r.name),
    }
}

/// The paths where `desired` differs from `live` (fields `live` has and `desired` does
/// not mention are not differences: they belong to other managers or the server).
pub(crate) fn differences(desired: &Value, live: &Value, pointer: &str, out: &mut Vec<String>) {
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => {
            for (key, value) in d {
                let child = format!("{pointer}/{key}");
                match l.get(key) {
                    Some(live_value) => differences(value, live_value, &child, out),
                    None => out.push(child),
                }
            }
        }
        (d, l) if d != l => out.push(if pointer.is_empty() {
            "/".to_owned()
        } else {
            pointer.to_owned()
        }),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_ignore_what_others_own() {
        let desired = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k": "v"}});
        let live = json!({"metadata": {"name": "a", "uid": "u", "labels": {"x": "2"}},
                          "data": {"k": "v", "other": "o"}});
        let mut out = Vec::new();
        differences(&desired, &live, "", &mut out);
        assert_eq!(out, ["/metadata/labels/x"]);
    }

    #[tokio::test]
    async fn a_failed_step_keeps_the_clusters_error() {
        let cluster = Arc::new(operon_cluster::local::LocalCluster::new());
        let writer = ObjectWriter::new(cluster, None, "ops");
        let object = json!({"apiVersion": "example.com/v1", "kind": "Gadget",
                            "metadata": {"name": "g"}});
        let error = writer.prepare("echo", vec![object]).await.unwrap_err();
        let AddonError::Apply { source, .. } = &error else {
            panic!("{error:?}")
        };
        let ApplyError::Cluster(cause) = source else {
            panic!("{source:?}")
        };
        assert_eq!(
            error.to_string(),
            format!("module echo: Gadget \"g\": {cause}")
        );
        // The chain reaches the cluster's error itself.
        let chain: Vec<&dyn std::error::Error> =
            std::iter::successors(std::error::Error::source(&error), |e| e.source()).collect();
        assert!(chain[0].is::<ApplyError>());
        assert!(chain[1].is::<operon_cluster::ClusterError>());
    }
}
