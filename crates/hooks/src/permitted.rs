//! What a Hook object may do, enforced: its declared `spec.permissions` checked against
//! the kubernetes bindings it watches (when it loads) and against each patch operation
//! it submits (when the engine applies it, through [`PermittedCluster`], a [`Cluster`]
//! that refuses what was not granted and passes the rest on).
//!
//! Kinds are compared as the cluster resolves them (group and kind; any version of a
//! group names the same objects, and `pods`, `po` and `Pod` the same kind). Namespaces:
//! a permission listing none covers the Hook's own namespace, `*` every namespace;
//! cluster-scoped kinds have none.

use super::config::KubernetesBinding;
use futures::future::BoxFuture;
use operon_cluster::{
    Cluster, ClusterError, EventStream, Listed, Resource, Selector, describe_ref, namespaced_name,
    split_api_version,
};
use operon_data::api::{HookPermissions, PatchOperationName};
use operon_data::model::{ObjectRef, PatchOperation};
use serde_json::Value;
use std::sync::Arc;

/// The namespace that stands for every namespace in a permission.
pub(crate) const ALL_NAMESPACES: &str = "*";

/// One kind a permission covers.
#[derive(Debug, Clone, PartialEq)]
struct Grant {
    /// `apiVersion` as written, for messages.
    api_version: String,
    /// Its group.
    group: String,
    /// The kind as written.
    kind: String,
    /// `None`: every namespace.
    namespaces: Option<Vec<String>>,
    /// For patch permissions, the operations allowed.
    operations: Vec<PatchOperationName>,
}

impl Grant {
    fn covers(&self, resource: &Resource) -> bool {
        self.group == resource.group && resource.answers_to(&self.kind, &[])
    }

    fn allows_namespace(&self, namespace: &str) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == namespace))
    }

    fn where_(&self) -> String {
        match &self.namespaces {
            None => "in every namespace".to_owned(),
            Some(names) => format!("in namespace {}", names.join(", ")),
        }
    }
}

/// A Hook object's permissions, ready to check.
#[derive(Debug, Clone, PartialEq)]
pub struct Permissions {
    /// The Hook, `namespace/name`, for messages.
    hook: String,
    watch: Vec<Grant>,
    patch: Vec<Grant>,
}

/// The shell-operator operation a patch operation is allowed by.
fn operation_name(operation: &PatchOperation) -> PatchOperationName {
    match operation {
        PatchOperation::Create(_) => PatchOperationName::Create,
        PatchOperation::CreateOrUpdate(_) => PatchOperationName::CreateOrUpdate,
        PatchOperation::CreateIfNotExists(_) => PatchOperationName::CreateIfNotExists,
        PatchOperation::Delete(_)
        | PatchOperation::DeleteInBackground(_)
        | PatchOperation::DeleteNonCascading(_) => PatchOperationName::Delete,
        PatchOperation::MergePatch(_) => PatchOperationName::MergePatch,
        PatchOperation::JsonPatch(_) => PatchOperationName::JsonPatch,
        PatchOperation::JqPatch(_) => PatchOperationName::JqPatch,
    }
}

/// The object a patch operation changes; for the create operations, read from the
/// object itself.
fn target(operation: &PatchOperation) -> Result<ObjectRef, ClusterError> {
    match operation {
        PatchOperation::Create(spec)
        | PatchOperation::CreateOrUpdate(spec)
        | PatchOperation::CreateIfNotExists(spec) => {
            let object: Value =
                serde_json::from_str(&spec.object).map_err(|e| ClusterError::Invalid {
                    what: format!("{} object", operation.name()),
                    reason: format!("not JSON: {e}"),
                })?;
            let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
            let (Some(kind), Some(name)) = (
                text("/kind"),
                text("/metadata/name").or(text("/metadata/generateName")),
            ) else {
                return Err(ClusterError::Invalid {
                    what: format!("{} object", operation.name()),
                    reason: "it has no kind or no metadata.name".to_owned(),
                });
            };
            Ok(ObjectRef {
                api_version: text("/apiVersion").map(str::to_owned),
                kind: kind.to_owned(),
                namespace: text("/metadata/namespace").map(str::to_owned),
                name: name.to_owned(),
            })
        }
        PatchOperation::Delete(target)
        | PatchOperation::DeleteInBackground(target)
        | PatchOperation::DeleteNonCascading(target) => Ok(target.clone()),
        PatchOperation::MergePatch(spec) | PatchOperation::JsonPatch(spec) => {
            Ok(spec.target.clone())
        }
        PatchOperation::JqPatch(spec) => Ok(spec.target.clone()),
    }
}

impl Permissions {
    /// The permissions of the Hook `name` in `namespace`, or every problem of them (a
    /// malformed `apiVersion`, an empty kind or operation list): a permission that
    /// cannot be read grants nothing, and the Hook does not load.
    pub fn new(
        namespace: &str,
        name: &str,
        declared: &HookPermissions,
    ) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        let namespaces = |listed: &[String]| -> Option<Vec<String>> {
            if listed.iter().any(|n| n == ALL_NAMESPACES) {
                None
            } else if listed.is_empty() {
                Some(vec![namespace.to_owned()])
            } else {
                Some(listed.to_vec())
            }
        };
        let mut grant = |field: String, api_version: &str, kind: &str, listed: &[String]| {
            let group = match split_api_version(api_version) {
                Ok((group, _)) => group,
                Err(reason) => {
                    problems.push(format!("{field}.apiVersion: {reason}"));
                    String::new()
                }
            };
            if kind.trim().is_empty() {
                problems.push(format!("{field}.kind: empty"));
            }
            Grant {
                api_version: api_version.to_owned(),
                group,
                kind: kind.to_owned(),
                namespaces: namespaces(listed),
                operations: Vec::new(),
            }
        };
        let watch = declared
            .watch
            .iter()
            .enumerate()
            .map(|(i, w)| {
                grant(
                    format!("spec.permissions.watch[{i}]"),
                    &w.api_version,
                    &w.kind,
                    &w.namespaces,
                )
            })
            .collect();
        let patch = declared
            .patch
            .iter()
            .enumerate()
            .map(|(i, p)| Grant {
                operations: p.operations.clone(),
                ..grant(
                    format!("spec.permissions.patch[{i}]"),
                    &p.api_version,
                    &p.kind,
                    &p.namespaces,
                )
            })
            .collect();
        for (i, p) in declared.patch.iter().enumerate() {
            if p.operations.is_empty() {
                problems.push(format!(
                    "spec.permissions.patch[{i}].operations: empty (list the operations it grants)"
                ));
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Self {
            hook: format!("{namespace}/{name}"),
            watch,
            patch,
        })
    }

    /// Checks that the kubernetes binding `binding`, watching `resource`, stays within
    /// the watch permissions; the error names the binding and what is missing.
    pub fn check_watch(
        &self,
        binding: &KubernetesBinding,
        resource: &Resource,
    ) -> Result<(), String> {
        let what = format!("{}/{}", resource.api_version(), resource.kind);
        let grants: Vec<&Grant> = self.watch.iter().filter(|g| g.covers(resource)).collect();
        if grants.is_empty() {
            return Err(format!(
                "binding {:?} watches {what}, but spec.permissions.watch has no entry for {what}",
                binding.name
            ));
        }
        if !resource.namespaced || grants.iter().any(|g| g.namespaces.is_none()) {
            return Ok(());
        }
        let names = binding
            .namespace
            .as_ref()
            .and_then(|ns| ns.name_selector.as_ref());
        let Some(names) = names else {
            let granted: Vec<String> = grants.iter().map(|g| g.where_()).collect();
            return Err(format!(
                "binding {:?} watches {what} in every namespace{}, but spec.permissions.watch grants {what} {} only (list the namespaces in the binding or in spec.overrides.kubernetes[].namespaces, or grant \"*\")",
                binding.name,
                match binding
                    .namespace
                    .as_ref()
                    .and_then(|n| n.label_selector.as_ref())
                {
                    Some(_) => " its namespace label selector matches",
                    None => "",
                },
                granted.join(" and ")
            ));
        };
        for namespace in names {
            if !grants.iter().any(|g| g.allows_namespace(namespace)) {
                return Err(format!(
                    "binding {:?} watches {what} in namespace {namespace}, but spec.permissions.watch does not grant {what} in namespace {namespace}",
                    binding.name
                ));
            }
        }
        Ok(())
    }

    /// Where an admission webhook of this Hook may intercept `resource` (plural, a
    /// subresource such as `pods/status` counting as its resource) of API group `group`:
    /// only what a watch permission lets it read, since a webhook sees every object it
    /// intercepts. `Ok(None)` for every namespace (or a cluster-scoped kind),
    /// `Ok(Some(names))` for those namespaces only; the error names the binding and what
    /// is missing. A wildcard group or resource is refused: it would intercept kinds
    /// nothing grants.
    pub async fn check_intercept(
        &self,
        cluster: &dyn Cluster,
        binding: &str,
        group: &str,
        resource: &str,
    ) -> Result<Option<Vec<String>>, String> {
        let what = if group.is_empty() {
            resource.to_owned()
        } else {
            format!("{resource}.{group}")
        };
        let plural = resource.split('/').next().unwrap_or_default();
        if group == "*" || plural == "*" {
            return Err(format!(
                "binding {binding:?} intercepts {what}: a Hook's webhook names its groups and resources (a wildcard would intercept kinds spec.permissions.watch does not grant)"
            ));
        }
        let mut namespaces: Option<Vec<String>> = Some(Vec::new());
        let mut covered = false;
        for grant in self.watch.iter().filter(|g| g.group == group) {
            let Ok(resolved) = cluster.resolve(Some(&grant.api_version), &grant.kind).await else {
                continue;
            };
            if !resolved.plural.eq_ignore_ascii_case(plural) {
                continue;
            }
            covered = true;
            match (&grant.namespaces, &mut namespaces) {
                _ if !resolved.namespaced => namespaces = None,
                (None, _) => namespaces = None,
                (Some(names), Some(all)) => all.extend(names.iter().cloned()),
                (Some(_), None) => {}
            }
        }
        if !covered {
            return Err(format!(
                "binding {binding:?} intercepts {what}, but spec.permissions.watch has no entry for its kind (a webhook sees the objects it intercepts: grant their watch)"
            ));
        }
        Ok(namespaces.map(|mut names| {
            names.sort();
            names.dedup();
            names
        }))
    }

    /// Checks that `operation`, on an object of `resource` in `namespace` (as the
    /// cluster defaults it), is granted; the error names the missing permission.
    pub(crate) fn check_patch(
        &self,
        operation: &PatchOperation,
        target: &ObjectRef,
        resource: &Resource,
        namespace: Option<&str>,
    ) -> Result<(), ClusterError> {
        let wanted = operation_name(operation);
        let allowed = self.patch.iter().any(|g| {
            g.covers(resource)
                && g.operations.contains(&wanted)
                && namespace.is_none_or(|ns| g.allows_namespace(ns))
        });
        if allowed {
            return Ok(());
        }
        let what = format!("{}/{}", resource.api_version(), resource.kind);
        let place = namespace
            .map(|ns| format!(" in namespace {ns}"))
            .unwrap_or_default();
        let object = describe_ref(&ObjectRef {
            namespace: namespace.map(str::to_owned),
            ..target.clone()
        });
        Err(ClusterError::NotPermitted {
            subject: format!("Hook {}", self.hook),
            operation: operation.name().to_owned(),
            object,
            reason: format!(
                "spec.permissions.patch does not grant {} on {what}{place}",
                wanted.as_str()
            ),
        })
    }
}

/// A [`Cluster`] that applies only the patch operations `permissions` grant.
pub struct PermittedCluster {
    inner: Arc<dyn Cluster>,
    permissions: Arc<Permissions>,
}

impl PermittedCluster {
    /// `inner`, bounded by `permissions`.
    pub fn new(inner: Arc<dyn Cluster>, permissions: Arc<Permissions>) -> Self {
        Self { inner, permissions }
    }

    async fn check(&self, operation: &PatchOperation) -> Result<(), ClusterError> {
        let target = target(operation)?;
        let resource = self
            .inner
            .resolve(target.api_version.as_deref(), &target.kind)
            .await?;
        // The namespace the write goes to, as both clusters default it.
        let namespace = resource.namespaced.then(|| {
            target
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or("default")
        });
        self.permissions
            .check_patch(operation, &target, &resource, namespace)
    }
}

impl Cluster for PermittedCluster {
    fn resolve<'a>(
        &'a self,
        api_version: Option<&'a str>,
        kind: &'a str,
    ) -> BoxFuture<'a, Result<Resource, ClusterError>> {
        self.inner.resolve(api_version, kind)
    }

    // The watches are the hook's bindings, checked with `check_watch` before the engine
    // starts; they do not change while it runs.
    fn list_and_watch<'a>(
        &'a self,
        resource: &'a Resource,
        selector: &'a Selector,
    ) -> BoxFuture<'a, Result<(Listed, EventStream), ClusterError>> {
        self.inner.list_and_watch(resource, selector)
    }

    fn get<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, ClusterError>> {
        self.inner.get(resource, namespace, name)
    }

    fn apply<'a>(
        &'a self,
        operation: &'a PatchOperation,
    ) -> BoxFuture<'a, Result<(), ClusterError>> {
        Box::pin(async move {
            if let Err(refused) = self.check(operation).await {
                tracing::warn!(error = %refused, "a hook's patch operation was refused");
                return Err(refused);
            }
            self.inner.apply(operation).await
        })
    }
}

/// `namespace/name` of a Hook object, for names and messages.
pub fn hook_name(namespace: &str, name: &str) -> String {
    namespaced_name(Some(namespace), name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use operon_cluster::local::LocalCluster;
    use operon_data::api::{PatchPermission, WatchPermission};
    use operon_data::model::{CreateSpec, PatchSpec};

    fn permissions() -> Permissions {
        Permissions::new(
            "demo",
            "labeler",
            &HookPermissions {
                watch: vec![WatchPermission {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    namespaces: vec![],
                }],
                patch: vec![PatchPermission {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                    namespaces: vec!["demo".into(), "other".into()],
                    operations: vec![PatchOperationName::MergePatch, PatchOperationName::Delete],
                }],
            },
        )
        .unwrap()
    }

    fn merge(kind: &str, namespace: Option<&str>) -> PatchOperation {
        PatchOperation::MergePatch(PatchSpec {
            target: ObjectRef {
                api_version: Some("v1".into()),
                kind: kind.into(),
                namespace: namespace.map(str::to_owned),
                name: "x".into(),
            },
            patch: "{}".into(),
            subresource: None,
            ignore_missing_object: true,
        })
    }

    #[tokio::test]
    async fn patches_outside_the_grants_are_refused_naming_the_permission() {
        let cluster = PermittedCluster::new(Arc::new(LocalCluster::new()), Arc::new(permissions()));
        cluster
            .apply(&merge("ConfigMap", Some("demo")))
            .await
            .unwrap();
        cluster
            .apply(&merge("configmaps", Some("other")))
            .await
            .unwrap();
        let err = cluster
            .apply(&merge("ConfigMap", Some("kube-system")))
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "not permitted: Hook demo/labeler may not MergePatch ConfigMap kube-system/x: spec.permissions.patch does not grant MergePatch on v1/ConfigMap in namespace kube-system"
        );
        // No namespace: the write would go to `default`.
        let err = cluster.apply(&merge("ConfigMap", None)).await.unwrap_err();
        assert!(err.to_string().contains("in namespace default"), "{err}");
        let err = cluster
            .apply(&merge("Pod", Some("demo")))
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("does not grant MergePatch on v1/Pod in namespace demo"),
            "{err}"
        );
        let create = PatchOperation::Create(CreateSpec {
            object: r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"demo"}}"#.into(),
            subresource: None,
        });
        let err = cluster.apply(&create).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("does not grant Create on v1/ConfigMap"),
            "{err}"
        );
        let delete = PatchOperation::DeleteInBackground(ObjectRef {
            api_version: None,
            kind: "ConfigMap".into(),
            namespace: Some("demo".into()),
            name: "gone".into(),
        });
        // Allowed by `Delete` (a missing object is no error, as in shell-operator).
        cluster.apply(&delete).await.unwrap();
        let elsewhere = PatchOperation::DeleteNonCascading(ObjectRef {
            api_version: None,
            kind: "ConfigMap".into(),
            namespace: Some("kube-system".into()),
            name: "coredns".into(),
        });
        let err = cluster.apply(&elsewhere).await.unwrap_err();
        assert!(
            err.to_string().contains(
                "may not DeleteNonCascading ConfigMap kube-system/coredns: spec.permissions.patch does not grant Delete on v1/ConfigMap in namespace kube-system"
            ),
            "{err}"
        );
    }

    #[test]
    fn unreadable_permissions_grant_nothing_and_say_why() {
        let declared = HookPermissions {
            watch: vec![WatchPermission {
                api_version: "apps/v1/extra".into(),
                kind: "Deployment".into(),
                namespaces: vec![],
            }],
            patch: vec![PatchPermission {
                api_version: "v1".into(),
                kind: "".into(),
                namespaces: vec![],
                operations: vec![],
            }],
        };
        let problems = Permissions::new("demo", "h", &declared).unwrap_err();
        assert_eq!(
            problems,
            [
                "spec.permissions.watch[0].apiVersion: apiVersion \"apps/v1/extra\" is not of the form `version` or `group/version`",
                "spec.permissions.patch[0].kind: empty",
                "spec.permissions.patch[0].operations: empty (list the operations it grants)",
            ]
        );
    }

    #[tokio::test]
    async fn watches_need_their_kind_and_namespaces() {
        use crate::config::validate;
        use operon_data::model::{HookConfig, KubernetesBindingConfig, NamespaceSelector};
        let cluster = LocalCluster::new();
        let pods = Cluster::resolve(&cluster, Some("v1"), "Pod").await.unwrap();
        let nodes = Cluster::resolve(&cluster, Some("v1"), "Node")
            .await
            .unwrap();
        let binding = |namespaces: Option<Vec<&str>>| {
            let declared = HookConfig {
                kubernetes: vec![KubernetesBindingConfig {
                    name: "pods".into(),
                    kind: "Pod".into(),
                    namespace: namespaces.map(|names| NamespaceSelector {
                        name_selector: Some(names.into_iter().map(str::to_owned).collect()),
                        label_selector: None,
                    }),
                    ..KubernetesBindingConfig::default()
                }],
                ..HookConfig::default()
            };
            validate("h", &declared, &|_, _| Ok(()))
                .unwrap()
                .kubernetes
                .remove(0)
        };
        let permissions = permissions();
        permissions
            .check_watch(&binding(Some(vec!["demo"])), &pods)
            .unwrap();
        let err = permissions.check_watch(&binding(None), &pods).unwrap_err();
        assert!(err.contains("in every namespace"), "{err}");
        assert!(err.contains("in namespace demo only"), "{err}");
        let err = permissions
            .check_watch(&binding(Some(vec!["demo", "prod"])), &pods)
            .unwrap_err();
        assert!(
            err.contains("does not grant v1/Pod in namespace prod"),
            "{err}"
        );
        let err = permissions
            .check_watch(&binding(Some(vec!["demo"])), &nodes)
            .unwrap_err();
        assert!(
            err.contains("binding \"pods\" watches v1/Node, but spec.permissions.watch has no entry for v1/Node"),
            "{err}"
        );
    }
}
