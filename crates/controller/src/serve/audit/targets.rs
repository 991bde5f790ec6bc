//! Which existing objects an audit sends to a validating binding: the API server's own
//! matching of a webhook's `rules`, `namespaceSelector` and `objectSelector`, applied to
//! objects listed through the [`Cluster`] instead of to requests.
//!
//! An audit asks "would this object be admitted now?", which is the question of a
//! `CREATE`: only rules whose operations include `CREATE` (or `*`) are audited
//! (Kubewarden's audit scanner takes `CREATE` only). A rule with `*` in its groups,
//! versions or resources is left out (Kubewarden's too): the audit lists objects by
//! resource, and a wildcard would mean every resource of the cluster. Subresources (`pods/status`) are left out:
//! objects are listed through their main resource. The API server never calls webhooks
//! for the `admissionregistration.k8s.io` resources, so neither does an audit.

use operon_cluster::{Cluster, ClusterError, Resource, Selector};
use operon_data::model::{LabelSelector, WebhookRule};
use operon_hooks::config::AdmissionBinding;
use serde_json::Value;
use std::collections::BTreeSet;

/// The operation of every audit review.
pub const AUDITED_OPERATION: &str = "CREATE";

/// The group whose resources never reach admission webhooks.
const NEVER_SENT_GROUP: &str = "admissionregistration.k8s.io";

/// One resource a binding's rules name, as the rules spell it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RuleResource {
    /// The API group, empty for the core group.
    pub group: String,
    /// The version.
    pub version: String,
    /// The resource (plural, lowercase).
    pub resource: String,
    /// The rule's `scope`.
    pub scope: RuleScope,
}

impl RuleResource {
    /// `apiVersion` as objects spell it.
    pub fn api_version(&self) -> String {
        match self.group.as_str() {
            "" => self.version.clone(),
            group => format!("{group}/{}", self.version),
        }
    }
}

/// A rule's `scope`: which objects of its resources it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RuleScope {
    /// `*` or no scope: both.
    Any,
    /// Only namespaced resources.
    Namespaced,
    /// Only cluster-scoped resources.
    Cluster,
}

impl RuleScope {
    fn of(rule: &WebhookRule) -> Self {
        match rule.scope.as_deref() {
            Some("Namespaced") => Self::Namespaced,
            Some("Cluster") => Self::Cluster,
            _ => Self::Any,
        }
    }

    /// Whether a resource with this scope is matched.
    pub fn admits(self, namespaced: bool) -> bool {
        match self {
            Self::Any => true,
            Self::Namespaced => namespaced,
            Self::Cluster => !namespaced,
        }
    }
}

/// Why a rule, or a part of one, is not audited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeftOut {
    /// The rule matches no `CREATE`.
    #[error(
        "rules[{rule}]: its operations {operations:?} do not include CREATE, the operation an audit reviews"
    )]
    NoCreate {
        /// The rule's index.
        rule: usize,
        /// Its operations.
        operations: Vec<String>,
    },
    /// The rule names every group, version or resource.
    #[error(
        "rules[{rule}]: {field} holds \"*\"; an audit lists objects by resource, so name the groups, versions and resources to audit"
    )]
    Wildcard {
        /// The rule's index.
        rule: usize,
        /// `apiGroups`, `apiVersions` or `resources`.
        field: &'static str,
    },
    /// A subresource (`pods/status`): objects are listed through their resource.
    #[error(
        "rules[{rule}]: {resource:?} is a subresource; objects are audited through their resource"
    )]
    Subresource {
        /// The rule's index.
        rule: usize,
        /// The resource as written.
        resource: String,
    },
    /// The API server never sends this resource to webhooks.
    #[error("rules[{rule}]: {resource} never reaches admission webhooks")]
    NeverSent {
        /// The rule's index.
        rule: usize,
        /// `resource.group`.
        resource: String,
    },
}

/// What an audit takes of a binding's rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditedRules {
    /// The resources to list, each once (the first version a rule names for a group
    /// and resource: the API server sends an object once however many versions match).
    pub resources: Vec<RuleResource>,
    /// What is left out, and why.
    pub left_out: Vec<LeftOut>,
}

/// The resources `binding`'s rules audit, and what they leave out.
pub fn audited_rules(binding: &AdmissionBinding) -> AuditedRules {
    let mut audited = AuditedRules::default();
    for (index, rule) in binding.rules.iter().enumerate() {
        if !rule
            .operations
            .iter()
            .any(|o| o == AUDITED_OPERATION || o == "*")
        {
            audited.left_out.push(LeftOut::NoCreate {
                rule: index,
                operations: rule.operations.clone(),
            });
            continue;
        }
        let wildcard = [
            ("apiGroups", &rule.api_groups),
            ("apiVersions", &rule.api_versions),
            ("resources", &rule.resources),
        ]
        .into_iter()
        .find(|(_, values)| values.iter().any(|v| v == "*" || v.starts_with("*/")));
        if let Some((field, _)) = wildcard {
            audited
                .left_out
                .push(LeftOut::Wildcard { rule: index, field });
            continue;
        }
        let scope = RuleScope::of(rule);
        for resource in &rule.resources {
            if resource.contains('/') {
                audited.left_out.push(LeftOut::Subresource {
                    rule: index,
                    resource: resource.clone(),
                });
                continue;
            }
            for group in &rule.api_groups {
                if group == NEVER_SENT_GROUP {
                    audited.left_out.push(LeftOut::NeverSent {
                        rule: index,
                        resource: format!("{resource}.{group}"),
                    });
                    continue;
                }
                for version in &rule.api_versions {
                    let seen = audited
                        .resources
                        .iter()
                        .any(|r| r.group == *group && r.resource == *resource);
                    if !seen {
                        audited.resources.push(RuleResource {
                            group: group.clone(),
                            version: version.clone(),
                            resource: resource.clone(),
                            scope,
                        });
                    }
                }
            }
        }
    }
    audited
}

/// `rule`'s resource as the cluster serves it; `None` when the cluster does not serve
/// it (the API server then never sends such a request either) or its scope is not the
/// rule's. Resolving accepts kinds and short names, the API server's rules only the
/// plural: a rule naming `Pod` matches nothing.
pub async fn resolve(
    cluster: &dyn Cluster,
    rule: &RuleResource,
) -> Result<Option<Resource>, ClusterError> {
    let api_version = rule.api_version();
    match cluster.resolve(Some(&api_version), &rule.resource).await {
        Ok(resource)
            if resource.plural == rule.resource && rule.scope.admits(resource.namespaced) =>
        {
            Ok(Some(resource))
        }
        Ok(_) | Err(ClusterError::UnknownKind { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// How a binding picks the objects of one resource: the selector to list with, and for
/// namespaced resources the namespaces' labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// What the list asks the cluster for (the `objectSelector`; for Namespaces the
    /// `namespaceSelector` too, which the API server matches against a Namespace's own
    /// labels).
    pub selector: Selector,
    /// The `namespaceSelector`, for objects of a namespaced resource: only objects in a
    /// namespace whose labels match are sent.
    pub namespaces: Option<LabelSelector>,
}

/// How `binding` picks the objects of `resource`. A cluster-scoped object other than a
/// Namespace is never filtered by the `namespaceSelector`, as on the API server.
pub fn selection(binding: &AdmissionBinding, resource: &Resource) -> Selection {
    let objects = binding.label_selector.clone();
    let namespaces = binding.namespace_label_selector.clone();
    let is_namespace = resource.group.is_empty() && resource.plural == "namespaces";
    match (resource.namespaced, is_namespace) {
        (true, _) => Selection {
            selector: Selector {
                labels: objects,
                ..Selector::default()
            },
            namespaces,
        },
        (false, true) => Selection {
            selector: Selector {
                labels: both(objects, namespaces),
                ..Selector::default()
            },
            namespaces: None,
        },
        (false, false) => Selection {
            selector: Selector {
                labels: objects,
                ..Selector::default()
            },
            namespaces: None,
        },
    }
}

/// One selector that every object matching both matches: requirements are ANDed.
fn both(a: Option<LabelSelector>, b: Option<LabelSelector>) -> Option<LabelSelector> {
    match (a, b) {
        (Some(mut a), Some(b)) => {
            a.match_labels.extend(b.match_labels);
            a.match_expressions.extend(b.match_expressions);
            Some(a)
        }
        (a, b) => a.or(b),
    }
}

/// The objects of `resource` that `selection` picks, sorted by namespace then name,
/// decoded one at a time as they are taken.
pub async fn objects(
    cluster: &dyn Cluster,
    resource: &Resource,
    selection: &Selection,
) -> Result<impl Iterator<Item = Value> + Send + use<>, ClusterError> {
    let namespaces = match &selection.namespaces {
        Some(labels) => Some(namespaces_matching(cluster, labels).await?),
        None => None,
    };
    // One list of every namespace, filtered here: a list per matching namespace would
    // open as many watches on a real API server.
    let (listed, _events) = cluster
        .list_and_watch(resource, &selection.selector)
        .await?;
    Ok(listed.into_iter().filter(move |object| {
        namespaces.as_ref().is_none_or(|names| {
            let (namespace, _) = operon_cluster::namespace_and_name(object);
            names.contains(namespace)
        })
    }))
}

/// The names of the namespaces whose labels match `labels`.
async fn namespaces_matching(
    cluster: &dyn Cluster,
    labels: &LabelSelector,
) -> Result<BTreeSet<String>, ClusterError> {
    let resource = cluster.resolve(Some("v1"), "namespaces").await?;
    let selector = Selector {
        labels: Some(labels.clone()),
        ..Selector::default()
    };
    let (listed, _events) = cluster.list_and_watch(&resource, &selector).await?;
    Ok(listed
        .into_iter()
        .map(|namespace| operon_cluster::namespace_and_name(&namespace).1.to_owned())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use operon_cluster::local::LocalCluster;
    use operon_data::model::{
        AdmissionBindingConfig, HookConfig, LabelOperator, LabelRequirement, NamespaceSelector,
    };
    use operon_hooks::config;

    fn rule(
        operations: &[&str],
        groups: &[&str],
        versions: &[&str],
        resources: &[&str],
    ) -> WebhookRule {
        let strings = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect();
        WebhookRule {
            operations: strings(operations),
            api_groups: strings(groups),
            api_versions: strings(versions),
            resources: strings(resources),
            scope: None,
        }
    }

    /// The validated binding of a hook declaring `binding` alone.
    fn binding(binding: AdmissionBindingConfig) -> AdmissionBinding {
        let raw = HookConfig {
            kubernetes_validating: vec![binding],
            ..HookConfig::default()
        };
        let valid = config::validate("policies.sh", &raw, &config::any_kind).unwrap();
        valid.validating[0].clone()
    }

    fn with_rules(rules: Vec<WebhookRule>) -> AdmissionBinding {
        binding(AdmissionBindingConfig {
            name: "policy.example.com".into(),
            rules,
            ..AdmissionBindingConfig::default()
        })
    }

    fn resource(group: &str, version: &str, resource: &str, scope: RuleScope) -> RuleResource {
        RuleResource {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            scope,
        }
    }

    #[test]
    fn rules_with_create_are_audited_each_resource_once() {
        let mut namespaced = rule(
            &["CREATE", "UPDATE"],
            &["", "apps"],
            &["v1"],
            &["pods", "deployments"],
        );
        namespaced.scope = Some("Namespaced".into());
        let audited = audited_rules(&with_rules(vec![
            namespaced,
            // `*` includes CREATE; a second version of a resource already listed adds nothing.
            rule(
                &["*"],
                &["apps"],
                &["v1beta1"],
                &["deployments", "statefulsets"],
            ),
        ]));
        assert_eq!(
            audited.resources,
            vec![
                resource("", "v1", "pods", RuleScope::Namespaced),
                resource("apps", "v1", "pods", RuleScope::Namespaced),
                resource("", "v1", "deployments", RuleScope::Namespaced),
                resource("apps", "v1", "deployments", RuleScope::Namespaced),
                resource("apps", "v1beta1", "statefulsets", RuleScope::Any),
            ]
        );
        assert!(audited.left_out.is_empty());
        assert_eq!(audited.resources[3].api_version(), "apps/v1");
        assert_eq!(audited.resources[0].api_version(), "v1");
    }

    #[test]
    fn what_an_audit_cannot_review_is_left_out_with_the_reason() {
        let audited = audited_rules(&with_rules(vec![
            rule(&["UPDATE", "DELETE"], &[""], &["v1"], &["pods"]),
            rule(&["CREATE"], &["*"], &["v1"], &["pods"]),
            rule(&["CREATE"], &[""], &["*"], &["pods"]),
            rule(&["CREATE"], &[""], &["v1"], &["*/scale"]),
            rule(&["CREATE"], &[""], &["v1"], &["pods/status", "configmaps"]),
            rule(
                &["CREATE"],
                &["admissionregistration.k8s.io"],
                &["v1"],
                &["validatingwebhookconfigurations"],
            ),
        ]));
        assert_eq!(
            audited.resources,
            vec![resource("", "v1", "configmaps", RuleScope::Any)]
        );
        assert_eq!(
            audited.left_out,
            vec![
                LeftOut::NoCreate {
                    rule: 0,
                    operations: vec!["UPDATE".into(), "DELETE".into()]
                },
                LeftOut::Wildcard {
                    rule: 1,
                    field: "apiGroups"
                },
                LeftOut::Wildcard {
                    rule: 2,
                    field: "apiVersions"
                },
                LeftOut::Wildcard {
                    rule: 3,
                    field: "resources"
                },
                LeftOut::Subresource {
                    rule: 4,
                    resource: "pods/status".into()
                },
                LeftOut::NeverSent {
                    rule: 5,
                    resource: "validatingwebhookconfigurations.admissionregistration.k8s.io".into()
                },
            ]
        );
        assert_eq!(
            audited.left_out[0].to_string(),
            "rules[0]: its operations [\"UPDATE\", \"DELETE\"] do not include CREATE, the operation an audit reviews"
        );
    }

    #[tokio::test]
    async fn rules_resolve_by_plural_at_their_scope_only() {
        let cluster = LocalCluster::new();
        let pods = resolve(&cluster, &resource("", "v1", "pods", RuleScope::Any))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((pods.kind.as_str(), pods.namespaced), ("Pod", true));
        for unmatched in [
            // The API server matches the plural only.
            resource("", "v1", "Pod", RuleScope::Any),
            resource("", "v1", "po", RuleScope::Any),
            resource("", "v1", "pods", RuleScope::Cluster),
            resource("", "v1", "namespaces", RuleScope::Namespaced),
            resource("", "v1", "widgets", RuleScope::Any),
            resource("example.com", "v1", "widgets", RuleScope::Any),
        ] {
            assert_eq!(
                resolve(&cluster, &unmatched).await.unwrap(),
                None,
                "{unmatched:?}"
            );
        }
    }

    fn selector(labels: &[(&str, &str)]) -> LabelSelector {
        LabelSelector {
            match_labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            match_expressions: vec![],
        }
    }

    fn selective() -> AdmissionBinding {
        binding(AdmissionBindingConfig {
            name: "policy.example.com".into(),
            rules: vec![rule(
                &["CREATE"],
                &[""],
                &["v1"],
                &["pods", "namespaces", "nodes"],
            )],
            label_selector: Some(selector(&[("checked", "yes")])),
            namespace: Some(NamespaceSelector {
                name_selector: None,
                label_selector: Some(LabelSelector {
                    match_labels: vec![],
                    match_expressions: vec![LabelRequirement {
                        key: "audit".into(),
                        operator: LabelOperator::In,
                        values: vec!["on".into()],
                    }],
                }),
            }),
            ..AdmissionBindingConfig::default()
        })
    }

    const OBJECTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: on, labels: {audit: "on", checked: "yes"}}
---
apiVersion: v1
kind: Namespace
metadata: {name: off, labels: {checked: "yes"}}
---
apiVersion: v1
kind: Namespace
metadata: {name: unchecked, labels: {audit: "on"}}
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: on, labels: {checked: "yes"}}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: on}
---
apiVersion: v1
kind: Pod
metadata: {name: c, namespace: off, labels: {checked: "yes"}}
---
apiVersion: v1
kind: Pod
metadata: {name: d, namespace: unchecked, labels: {checked: "yes"}}
---
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {checked: "yes"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
"#;

    async fn names(cluster: &LocalCluster, binding: &AdmissionBinding, kind: &str) -> Vec<String> {
        let resource = cluster.resolve(Some("v1"), kind).unwrap();
        let selection = selection(binding, &resource);
        objects(cluster, &resource, &selection)
            .await
            .unwrap()
            .map(|o| {
                let (namespace, name) = operon_cluster::namespace_and_name(&o);
                operon_cluster::namespaced_name(Some(namespace).filter(|n| !n.is_empty()), name)
            })
            .collect()
    }

    #[tokio::test]
    async fn selectors_pick_objects_as_the_api_server_sends_them() {
        let cluster = LocalCluster::new();
        cluster.load_yaml(OBJECTS, "objects").unwrap();
        let binding = selective();
        // Pods: their namespace's labels and their own.
        assert_eq!(
            names(&cluster, &binding, "Pod").await,
            ["on/a", "unchecked/d"]
        );
        // A Namespace is matched by both selectors, on its own labels.
        assert_eq!(names(&cluster, &binding, "Namespace").await, ["on"]);
        // Other cluster-scoped objects: the objectSelector only.
        assert_eq!(names(&cluster, &binding, "Node").await, ["n1"]);
        // Without selectors, everything.
        let all = with_rules(vec![rule(&["CREATE"], &[""], &["v1"], &["pods"])]);
        assert_eq!(
            names(&cluster, &all, "Pod").await,
            ["off/c", "on/a", "on/b", "unchecked/d"]
        );
        let pods = cluster.resolve(Some("v1"), "Pod").unwrap();
        assert_eq!(
            selection(&all, &pods),
            Selection {
                selector: Selector::default(),
                namespaces: None
            }
        );
    }
}
