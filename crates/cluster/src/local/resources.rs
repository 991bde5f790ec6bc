//! The resource types the local cluster knows: a built-in table of common kinds, kinds
//! registered from CustomResourceDefinitions in fixtures, and kinds guessed from
//! fixture objects.

pub(super) use crate::split_api_version;
use crate::{ClusterError, Resource};
use serde_json::Value;

/// A resource type with what the API server would know about it beyond [`Resource`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ResourceInfo {
    /// The resource as callers see it.
    pub(crate) resource: Resource,
    /// Short names accepted by `resolve` (`po`, `deploy`...), lowercase.
    pub(crate) short_names: Vec<String>,
    /// Whether the type has a `status` subresource: writes to the main resource then
    /// leave `.status` alone, and only `subresource: status` writes change it.
    pub(crate) status_subresource: bool,
}

impl ResourceInfo {
    fn new(
        api_version: &str,
        kind: &str,
        plural: &str,
        short_names: &[&str],
        namespaced: bool,
        status_subresource: bool,
    ) -> Self {
        let (group, version) = split_api_version(api_version).unwrap_or_default();
        ResourceInfo {
            resource: Resource {
                group,
                version,
                kind: kind.to_owned(),
                plural: plural.to_owned(),
                namespaced,
            },
            short_names: short_names.iter().map(|s| (*s).to_owned()).collect(),
            status_subresource,
        }
    }

    /// A kind seen only in a fixture object: the plural is guessed, and a status
    /// subresource is assumed because custom resources nearly always enable it.
    pub(super) fn guessed(api_version: &str, kind: &str, namespaced: bool) -> Result<Self, String> {
        let (group, version) = split_api_version(api_version)?;
        Ok(ResourceInfo {
            resource: Resource {
                group,
                version,
                kind: kind.to_owned(),
                plural: guess_plural(kind),
                namespaced,
            },
            short_names: Vec::new(),
            status_subresource: true,
        })
    }

    /// Whether `name` (a kind, plural or short name, any case) names this type.
    pub(super) fn is_named(&self, name: &str) -> bool {
        self.resource.answers_to(name, &self.short_names)
    }

    /// Whether this is the type of `resource` (the plural and scope are not compared:
    /// callers may build a `Resource` by hand).
    pub(super) fn is(&self, resource: &Resource) -> bool {
        self.resource.kind == resource.kind
            && self.resource.group == resource.group
            && self.resource.version == resource.version
    }

    /// Whether this is the type of an object with this `apiVersion` and `kind`.
    pub(super) fn is_type_of(&self, api_version: &str, kind: &str) -> bool {
        self.resource.kind == kind && api_version_is(&self.resource, api_version)
    }
}

/// Whether `api_version` (`v1`, `apps/v1`) is the one of `resource`, without allocating.
pub(super) fn api_version_is(resource: &Resource, api_version: &str) -> bool {
    match api_version.split_once('/') {
        Some((group, version)) => resource.group == group && resource.version == version,
        None => resource.group.is_empty() && resource.version == api_version,
    }
}

/// Splits `apps/v1` into (`apps`, `v1`) and `v1` into (``, `v1`).
/// The lowercase plural of a kind, with English rules good enough for Kubernetes kinds
/// (`Ingress` → `ingresses`, `NetworkPolicy` → `networkpolicies`).
pub(super) fn guess_plural(kind: &str) -> String {
    let singular = kind.to_ascii_lowercase();
    let consonant_y = singular.len() >= 2
        && singular.ends_with('y')
        && !matches!(
            singular.as_bytes()[singular.len() - 2],
            b'a' | b'e' | b'i' | b'o' | b'u'
        );
    if consonant_y {
        format!("{}ies", &singular[..singular.len() - 1])
    } else if ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|end| singular.ends_with(end))
    {
        format!("{singular}es")
    } else {
        format!("{singular}s")
    }
}

/// apiVersion, kind, plural, short names, namespaced, status subresource.
type Row = (
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
    bool,
    bool,
);

/// The kinds every local cluster starts with, preferred versions first.
pub(super) fn builtin() -> Vec<ResourceInfo> {
    const NS: bool = true;
    const CLUSTER: bool = false;
    const STATUS: bool = true;
    const NO_STATUS: bool = false;
    let rows: &[Row] = &[
        ("v1", "Pod", "pods", &["po"], NS, STATUS),
        ("v1", "Service", "services", &["svc"], NS, STATUS),
        ("v1", "ConfigMap", "configmaps", &["cm"], NS, NO_STATUS),
        ("v1", "Secret", "secrets", &[], NS, NO_STATUS),
        ("v1", "Namespace", "namespaces", &["ns"], CLUSTER, STATUS),
        ("v1", "Node", "nodes", &["no"], CLUSTER, STATUS),
        ("v1", "Event", "events", &["ev"], NS, NO_STATUS),
        (
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            &["sa"],
            NS,
            NO_STATUS,
        ),
        ("v1", "Endpoints", "endpoints", &["ep"], NS, NO_STATUS),
        (
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            &["pvc"],
            NS,
            STATUS,
        ),
        (
            "v1",
            "PersistentVolume",
            "persistentvolumes",
            &["pv"],
            CLUSTER,
            STATUS,
        ),
        (
            "apps/v1",
            "Deployment",
            "deployments",
            &["deploy"],
            NS,
            STATUS,
        ),
        ("apps/v1", "DaemonSet", "daemonsets", &["ds"], NS, STATUS),
        (
            "apps/v1",
            "StatefulSet",
            "statefulsets",
            &["sts"],
            NS,
            STATUS,
        ),
        ("apps/v1", "ReplicaSet", "replicasets", &["rs"], NS, STATUS),
        ("batch/v1", "Job", "jobs", &[], NS, STATUS),
        ("batch/v1", "CronJob", "cronjobs", &["cj"], NS, STATUS),
        (
            "networking.k8s.io/v1",
            "Ingress",
            "ingresses",
            &["ing"],
            NS,
            STATUS,
        ),
        (
            "coordination.k8s.io/v1",
            "Lease",
            "leases",
            &[],
            NS,
            NO_STATUS,
        ),
        (
            "rbac.authorization.k8s.io/v1",
            "Role",
            "roles",
            &[],
            NS,
            NO_STATUS,
        ),
        (
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            "clusterroles",
            &[],
            CLUSTER,
            NO_STATUS,
        ),
        (
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            "rolebindings",
            &[],
            NS,
            NO_STATUS,
        ),
        (
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
            &[],
            CLUSTER,
            NO_STATUS,
        ),
        (
            "v1",
            "ReplicationController",
            "replicationcontrollers",
            &["rc"],
            NS,
            STATUS,
        ),
        (
            "v1",
            "LimitRange",
            "limitranges",
            &["limits"],
            NS,
            NO_STATUS,
        ),
        (
            "v1",
            "ResourceQuota",
            "resourcequotas",
            &["quota"],
            NS,
            STATUS,
        ),
        ("v1", "PodTemplate", "podtemplates", &[], NS, NO_STATUS),
        (
            "apps/v1",
            "ControllerRevision",
            "controllerrevisions",
            &[],
            NS,
            NO_STATUS,
        ),
        (
            "networking.k8s.io/v1",
            "NetworkPolicy",
            "networkpolicies",
            &["netpol"],
            NS,
            NO_STATUS,
        ),
        (
            "networking.k8s.io/v1",
            "IngressClass",
            "ingressclasses",
            &[],
            CLUSTER,
            NO_STATUS,
        ),
        (
            "policy/v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            &["pdb"],
            NS,
            STATUS,
        ),
        // After core/v1's Event, which `Event` without an apiVersion means (as kubectl).
        (
            "events.k8s.io/v1",
            "Event",
            "events",
            &["ev"],
            NS,
            NO_STATUS,
        ),
        (
            "discovery.k8s.io/v1",
            "EndpointSlice",
            "endpointslices",
            &[],
            NS,
            NO_STATUS,
        ),
        (
            "autoscaling/v2",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            &["hpa"],
            NS,
            STATUS,
        ),
        (
            "storage.k8s.io/v1",
            "StorageClass",
            "storageclasses",
            &["sc"],
            CLUSTER,
            NO_STATUS,
        ),
        (
            "scheduling.k8s.io/v1",
            "PriorityClass",
            "priorityclasses",
            &["pc"],
            CLUSTER,
            NO_STATUS,
        ),
        (
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            &[],
            CLUSTER,
            NO_STATUS,
        ),
        (
            "admissionregistration.k8s.io/v1",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            &[],
            CLUSTER,
            NO_STATUS,
        ),
        (
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            &["crd", "crds"],
            CLUSTER,
            STATUS,
        ),
        // Operon's own kinds, as declared by `operon_data::api`.
        (
            "operon.dev/v1alpha1",
            "Operation",
            "operations",
            &["op"],
            CLUSTER,
            NO_STATUS,
        ),
        (
            "operon.dev/v1alpha1",
            "OperationSet",
            "operationsets",
            &["opset"],
            CLUSTER,
            STATUS,
        ),
        (
            "operon.dev/v1alpha1",
            "Diagnosis",
            "diagnoses",
            &["diag"],
            NS,
            STATUS,
        ),
        (
            "operon.dev/v1alpha1",
            "Trigger",
            "triggers",
            &["trig"],
            CLUSTER,
            STATUS,
        ),
    ];
    rows.iter()
        .map(|(api_version, kind, plural, short, namespaced, status)| {
            ResourceInfo::new(api_version, kind, plural, short, *namespaced, *status)
        })
        .collect()
}

/// The resource types a CustomResourceDefinition declares, one per version (both the
/// `apiextensions.k8s.io/v1` and the older `v1beta1` layouts).
pub(super) fn from_crd(crd: &Value) -> Result<Vec<ResourceInfo>, String> {
    let spec = crd
        .get("spec")
        .ok_or("CustomResourceDefinition has no spec")?;
    let text = |pointer: &str| spec.pointer(pointer).and_then(Value::as_str);
    let group = text("/group").ok_or("spec.group is missing")?;
    let kind = text("/names/kind").ok_or("spec.names.kind is missing")?;
    let plural = text("/names/plural")
        .map(str::to_ascii_lowercase)
        .unwrap_or_else(|| guess_plural(kind));
    let namespaced = match text("/scope").unwrap_or("Namespaced") {
        "Namespaced" => true,
        "Cluster" => false,
        other => {
            return Err(format!(
                "spec.scope {other:?} is neither Namespaced nor Cluster"
            ));
        }
    };
    let short_names: Vec<String> = spec
        .pointer("/names/shortNames")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_ascii_lowercase)
                .collect()
        })
        .unwrap_or_default();
    let legacy_status = spec.pointer("/subresources/status").is_some();
    let mut versions: Vec<(String, bool)> = spec
        .get("versions")
        .and_then(Value::as_array)
        .map(|versions| {
            versions
                .iter()
                .filter(|v| v.get("served").and_then(Value::as_bool) != Some(false))
                .filter_map(|v| {
                    let name = v.get("name").and_then(Value::as_str)?;
                    let status = legacy_status || v.pointer("/subresources/status").is_some();
                    Some((name.to_owned(), status))
                })
                .collect()
        })
        .unwrap_or_default();
    if versions.is_empty() {
        let version = text("/version").ok_or("spec.versions is missing or empty")?;
        versions.push((version.to_owned(), legacy_status));
    }
    Ok(versions
        .into_iter()
        .map(|(version, status_subresource)| ResourceInfo {
            resource: Resource {
                group: group.to_owned(),
                version,
                kind: kind.to_owned(),
                plural: plural.clone(),
                namespaced,
            },
            short_names: short_names.clone(),
            status_subresource,
        })
        .collect())
}

/// Picks the entry `api_version`/`kind` names, preferring earlier entries (built-in
/// and preferred versions come first).
pub(super) fn resolve<'a>(
    entries: impl IntoIterator<Item = (usize, &'a ResourceInfo)>,
    api_version: Option<&str>,
    kind: &str,
) -> Result<usize, ClusterError> {
    let mut named = entries.into_iter().filter(|(_, info)| info.is_named(kind));
    let found = match api_version {
        None => named.next(),
        Some(api_version) => named.find(|(_, info)| api_version_is(&info.resource, api_version)),
    };
    found
        .map(|(index, _)| index)
        .ok_or_else(|| ClusterError::UnknownKind {
            kind: kind.to_owned(),
            api_version: api_version.map(str::to_owned),
        })
}
