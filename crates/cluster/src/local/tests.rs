//! Tests of the local cluster: fixtures, resolution, selectors, watches and every
//! patch operation, through the `Cluster` trait where the hook engine uses it.

use super::selector::field_value;
use super::*;
use crate::Event;
use futures::executor::block_on;
use operon_data::model::{
    FieldOperator, FieldRequirement, LabelOperator, LabelRequirement, LabelSelector,
};
use operon_data::model::{JqPatchSpec, PatchSpec};
use serde_json::json;

const FIXTURES: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: web-2
  namespace: prod
  labels: {app: web, tier: front}
spec:
  nodeName: node-a
status:
  phase: Running
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  labels: {app: web}
status:
  phase: Pending
---
apiVersion: v1
kind: Pod
metadata:
  name: db-1
  namespace: prod
  labels: {app: db}
status:
  phase: Running
---
apiVersion: v1
kind: Namespace
metadata:
  name: prod
  namespace: ignored
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: prod
data:
  mode: fast
"#;

fn cluster() -> LocalCluster {
    let cluster = LocalCluster::new();
    assert_eq!(cluster.load_yaml(FIXTURES, "fixtures.yaml"), Ok(5));
    cluster
}

fn resource(cluster: &LocalCluster, kind: &str) -> Resource {
    cluster.resolve(None, kind).expect("known kind")
}

fn get(cluster: &LocalCluster, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
    let resource = resource(cluster, kind);
    block_on(cluster.get(&resource, namespace, name)).expect("get")
}

fn list(cluster: &LocalCluster, kind: &str, selector: &Selector) -> (Vec<String>, EventStream) {
    let resource = resource(cluster, kind);
    let (objects, events) =
        block_on(cluster.list_and_watch(&resource, selector)).expect("list_and_watch");
    (objects.into_iter().map(|o| key_of(&o)).collect(), events)
}

fn key_of(object: &Value) -> String {
    let text = |field: &str| {
        object["metadata"][field]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    match text("namespace").as_str() {
        "" => text("name"),
        ns => format!("{ns}/{}", text("name")),
    }
}

fn drain(events: &mut EventStream) -> Vec<(WatchEvent, String)> {
    std::iter::from_fn(|| events.try_recv().ok())
        .map(|event| (event.kind, key_of(&event.object)))
        .collect()
}

fn apply(cluster: &LocalCluster, operation: PatchOperation) -> Result<(), ClusterError> {
    block_on(cluster.apply(&operation))
}

fn target(kind: &str, namespace: Option<&str>, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: None,
        kind: kind.to_owned(),
        namespace: namespace.map(str::to_owned),
        name: name.to_owned(),
    }
}

fn create_spec(object: Value) -> CreateSpec {
    CreateSpec {
        object: object.to_string(),
        subresource: None,
    }
}

fn patch_spec(target: ObjectRef, patch: Value) -> PatchSpec {
    PatchSpec {
        target,
        patch: patch.to_string(),
        subresource: None,
        ignore_missing_object: false,
    }
}

fn jq_spec(target: ObjectRef, filter: &str) -> JqPatchSpec {
    JqPatchSpec {
        target,
        jq_filter: filter.to_owned(),
        subresource: None,
        ignore_missing_object: false,
    }
}

fn web2() -> ObjectRef {
    target("Pod", Some("prod"), "web-2")
}

fn web2_now(cluster: &LocalCluster) -> Value {
    get(cluster, "Pod", Some("prod"), "web-2").expect("web-2 exists")
}

fn labels(pairs: &[(&str, &str)], expressions: Vec<LabelRequirement>) -> Selector {
    Selector {
        labels: Some(LabelSelector {
            match_labels: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            match_expressions: expressions,
        }),
        ..Selector::default()
    }
}

fn requirement(key: &str, operator: LabelOperator, values: &[&str]) -> LabelRequirement {
    LabelRequirement {
        key: key.to_owned(),
        operator,
        values: values.iter().map(|v| (*v).to_owned()).collect(),
    }
}

fn field(field: &str, operator: FieldOperator, value: &str) -> Selector {
    Selector {
        fields: vec![FieldRequirement {
            field: field.to_owned(),
            operator,
            value: value.to_owned(),
        }],
        ..Selector::default()
    }
}

fn resource_version(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .expect("resourceVersion")
}

// ---------------------------------------------------------------- fixtures

#[test]
fn cluster_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<LocalCluster>();
}

#[test]
fn load_multi_document_yaml_with_defaults() {
    let cluster = cluster();
    let pod = get(&cluster, "Pod", Some("default"), "web-1").expect("defaulted namespace");
    assert_eq!(pod["metadata"]["namespace"], "default");
    let uid = pod["metadata"]["uid"].as_str().expect("uid");
    assert_eq!(uid.len(), 36);
    assert_eq!(uid.as_bytes()[14], b'4', "version 4 UUID: {uid}");
    let created = pod["metadata"]["creationTimestamp"]
        .as_str()
        .expect("timestamp");
    assert!(created.parse::<jiff::Timestamp>().is_ok(), "{created}");
    assert!(created.ends_with('Z'));
    // Cluster-scoped objects lose a namespace they should not have.
    let namespace = get(&cluster, "Namespace", None, "prod").expect("namespace");
    assert!(namespace["metadata"].get("namespace").is_none());
    // Every object got its own resourceVersion.
    let mut versions: Vec<u64> = cluster.objects().iter().map(resource_version).collect();
    versions.sort_unstable();
    assert_eq!(versions, vec![1, 2, 3, 4, 5]);
    assert_eq!(cluster.resource_version(), 5);
}

#[test]
fn load_keeps_given_uid_and_creation_timestamp() {
    let cluster = LocalCluster::new();
    let yaml = r#"{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "a",
        "uid": "fixed-uid", "creationTimestamp": "2020-01-01T00:00:00Z", "resourceVersion": "999"}}"#;
    assert_eq!(cluster.load_yaml(yaml, "inline"), Ok(1));
    let secret = get(&cluster, "Secret", Some("a"), "s").expect("secret");
    assert_eq!(secret["metadata"]["uid"], "fixed-uid");
    assert_eq!(
        secret["metadata"]["creationTimestamp"],
        "2020-01-01T00:00:00Z"
    );
    assert_eq!(
        secret["metadata"]["resourceVersion"], "1",
        "the server owns it"
    );
}

#[test]
fn load_expands_lists() {
    let cluster = LocalCluster::new();
    let yaml = r#"
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
- {apiVersion: apps/v1, kind: Deployment, metadata: {name: d, namespace: x}}
---
apiVersion: v1
kind: PodList
metadata: {resourceVersion: "10"}
items:
- metadata: {name: p1, namespace: x}
- metadata: {name: p2, namespace: x}
"#;
    assert_eq!(cluster.load_yaml(yaml, "lists.yaml"), Ok(4));
    assert!(get(&cluster, "cm", Some("default"), "a").is_some());
    assert!(get(&cluster, "deploy", Some("x"), "d").is_some());
    let p2 = get(&cluster, "po", Some("x"), "p2").expect("typed list item");
    assert_eq!(p2["kind"], "Pod");
    assert_eq!(p2["apiVersion"], "v1");
}

#[test]
fn load_reports_every_missing_field_and_loads_nothing() {
    let cluster = LocalCluster::new();
    let yaml = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: fine}
---
kind: ConfigMap
metadata: {name: no-api-version}
---
apiVersion: v1
metadata: {name: no-kind}
---
apiVersion: v1
kind: ConfigMap
metadata: {namespace: x}
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap}
---
- just a list
"#;
    let errors = cluster.load_yaml(yaml, "bad.yaml").unwrap_err();
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        vec![
            "bad.yaml#2: apiVersion is missing",
            "bad.yaml#3: kind is missing",
            "bad.yaml#4: metadata.name is missing",
            "bad.yaml#5 items[0]: metadata.name is missing",
            "bad.yaml#6: expected an object, got an array",
        ]
    );
    assert!(cluster.objects().is_empty(), "nothing loaded");
    assert_eq!(cluster.resource_version(), 0);
}

#[test]
fn load_reports_invalid_yaml_duplicates_and_misspelled_kinds() {
    let cluster = LocalCluster::new();
    let errors = cluster
        .load_yaml("apiVersion: v1\nkind: [unclosed\n", "broken.yaml")
        .unwrap_err();
    assert!(
        matches!(&errors[..], [FixtureError::Yaml { location, .. }] if location.document == 1),
        "{errors:?}"
    );

    let yaml = r#"
{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
---
{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: default}}
---
{apiVersion: v1, kind: pod, metadata: {name: lower}}
---
{apiVersion: v2, kind: Pod, metadata: {name: other-version}}
---
{apiVersion: a/b/c, kind: Thing, metadata: {name: bad-version}}
"#;
    let errors = cluster.load_yaml(yaml, "f.yaml").unwrap_err();
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    assert_eq!(
        messages[0],
        "f.yaml#2: duplicate ConfigMap default/a, first defined at f.yaml#1"
    );
    assert_eq!(
        messages[1],
        "f.yaml#3: invalid pod object: kind \"pod\" must be written \"Pod\""
    );
    assert!(messages[2].starts_with("f.yaml#5: invalid Thing object: apiVersion \"a/b/c\""));
    assert!(cluster.objects().is_empty());
}

#[test]
fn load_registers_unknown_kinds_from_their_objects() {
    let cluster = LocalCluster::new();
    let yaml = r#"
{apiVersion: example.com/v1, kind: Widget, metadata: {name: w1}}
---
{apiVersion: example.com/v1, kind: Widget, metadata: {name: w2, namespace: team}}
---
{apiVersion: example.com/v1, kind: NetworkPolicy, metadata: {name: global}}
---
{apiVersion: v2, kind: Pod, metadata: {name: other-version, namespace: x}}
"#;
    assert_eq!(cluster.load_yaml(yaml, "crs.yaml"), Ok(4));
    let widget = cluster.resolve(None, "widgets").expect("plural");
    assert_eq!(widget.api_version(), "example.com/v1");
    assert!(widget.namespaced, "one Widget has a namespace");
    assert!(get(&cluster, "Widget", Some("default"), "w1").is_some());
    let policy = cluster
        .resolve(Some("example.com/v1"), "networkpolicies")
        .expect("consonant-y plural");
    assert!(!policy.namespaced);
    // A known kind in another version is a separate type; the built-in stays preferred.
    assert_eq!(cluster.resolve(None, "Pod").unwrap().version, "v1");
    assert_eq!(cluster.resolve(Some("v2"), "Pod").unwrap().version, "v2");
}

#[test]
fn guessed_plurals_follow_english_rules() {
    for (kind, plural) in [
        ("Widget", "widgets"),
        ("Ingress", "ingresses"),
        ("Policy", "policies"),
        ("Gateway", "gateways"),
        ("Box", "boxes"),
        ("Patch", "patches"),
        ("Mesh", "meshes"),
    ] {
        assert_eq!(resources::guess_plural(kind), plural);
    }
}

#[test]
fn load_registers_crd_kinds_wherever_the_crd_is() {
    let cluster = LocalCluster::new();
    let yaml = r#"
apiVersion: stable.example.com/v1
kind: CronTab
metadata: {name: every-minute}
spec: {cronSpec: "* * * * *"}
status: {active: 1}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: crontabs.stable.example.com}
spec:
  group: stable.example.com
  scope: Cluster
  names: {kind: CronTab, plural: crontabs, shortNames: [ct]}
  versions:
  - {name: v1, served: true, storage: true}
  - {name: v2, served: true, storage: false, subresources: {status: {}}}
"#;
    assert_eq!(cluster.load_yaml(yaml, "crd.yaml"), Ok(2));
    let crontab = cluster
        .resolve(None, "CT")
        .expect("short name from the CRD");
    assert_eq!(crontab.plural, "crontabs");
    assert!(
        !crontab.namespaced,
        "scope from the CRD, not from the object"
    );
    assert_eq!(crontab.version, "v1", "first served version preferred");
    assert!(get(&cluster, "crontab", None, "every-minute").is_some());
    // v1 has no status subresource: the main resource writes status.
    let patch = patch_spec(
        target("CronTab", None, "every-minute"),
        json!({"status": {"active": 2}}),
    );
    apply(&cluster, PatchOperation::MergePatch(patch)).unwrap();
    let crontab = get(&cluster, "CronTab", None, "every-minute").unwrap();
    assert_eq!(crontab["status"]["active"], 2);
}

#[test]
fn load_replaces_existing_objects_keeping_their_uid() {
    let cluster = cluster();
    let before = get(&cluster, "ConfigMap", Some("prod"), "settings").unwrap();
    let (_, mut events) = list(&cluster, "cm", &Selector::default());
    let yaml = "{apiVersion: v1, kind: ConfigMap, metadata: {name: settings, namespace: prod}, data: {mode: slow}}";
    assert_eq!(cluster.load_yaml(yaml, "second.yaml"), Ok(1));
    let after = get(&cluster, "ConfigMap", Some("prod"), "settings").unwrap();
    assert_eq!(after["data"]["mode"], "slow");
    assert_eq!(after["metadata"]["uid"], before["metadata"]["uid"]);
    assert_eq!(
        after["metadata"]["creationTimestamp"],
        before["metadata"]["creationTimestamp"]
    );
    assert_eq!(
        drain(&mut events),
        vec![(WatchEvent::Modified, "prod/settings".to_owned())]
    );
}

#[test]
fn load_file_reads_files_and_reports_unreadable_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pods.yaml");
    std::fs::write(&path, FIXTURES).unwrap();
    let cluster = LocalCluster::new();
    assert_eq!(cluster.load_file(&path), Ok(5));
    let missing = dir.path().join("missing.yaml");
    let errors = cluster.load_file(&missing).unwrap_err();
    assert!(
        matches!(&errors[..], [FixtureError::Read { path, .. }] if path.ends_with("missing.yaml"))
    );
}

// ---------------------------------------------------------------- resolve

#[test]
fn resolve_by_kind_plural_short_name_in_any_case() {
    let cluster = LocalCluster::new();
    for name in ["Pod", "pod", "PODS", "po", "Po"] {
        assert_eq!(cluster.resolve(None, name).unwrap().kind, "Pod", "{name}");
    }
    for (name, kind, namespaced) in [
        ("deploy", "Deployment", true),
        ("ds", "DaemonSet", true),
        ("sts", "StatefulSet", true),
        ("rs", "ReplicaSet", true),
        ("cj", "CronJob", true),
        ("ing", "Ingress", true),
        ("ns", "Namespace", false),
        ("no", "Node", false),
        ("pv", "PersistentVolume", false),
        ("pvc", "PersistentVolumeClaim", true),
        ("crd", "CustomResourceDefinition", false),
        ("clusterrolebindings", "ClusterRoleBinding", false),
        ("lease", "Lease", true),
        ("diag", "Diagnosis", true),
        ("diagnoses", "Diagnosis", true),
        ("opset", "OperationSet", false),
        ("trigger", "Trigger", false),
    ] {
        let resource = cluster.resolve(None, name).unwrap();
        assert_eq!(
            (resource.kind.as_str(), resource.namespaced),
            (kind, namespaced),
            "{name}"
        );
    }
    let deployment = cluster.resolve(Some("apps/v1"), "Deployment").unwrap();
    assert_eq!(deployment.api_version(), "apps/v1");
    assert_eq!(deployment.plural, "deployments");
    let ingress = cluster.resolve(None, "ingresses").unwrap();
    assert_eq!(ingress.group, "networking.k8s.io");
}

#[test]
fn every_common_built_in_kind_resolves_by_kind_plural_and_short_name() {
    // (apiVersion, kind, plural, short names, namespaced) as a v1.33 API server's
    // discovery gives them, for the groups hooks commonly watch.
    let expected: &[(&str, &str, &str, &[&str], bool)] = &[
        ("v1", "Pod", "pods", &["po"], true),
        ("v1", "Service", "services", &["svc"], true),
        ("v1", "ConfigMap", "configmaps", &["cm"], true),
        ("v1", "Secret", "secrets", &[], true),
        ("v1", "Namespace", "namespaces", &["ns"], false),
        ("v1", "Node", "nodes", &["no"], false),
        ("v1", "Event", "events", &["ev"], true),
        ("v1", "ServiceAccount", "serviceaccounts", &["sa"], true),
        ("v1", "Endpoints", "endpoints", &["ep"], true),
        (
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            &["pvc"],
            true,
        ),
        (
            "v1",
            "PersistentVolume",
            "persistentvolumes",
            &["pv"],
            false,
        ),
        (
            "v1",
            "ReplicationController",
            "replicationcontrollers",
            &["rc"],
            true,
        ),
        ("v1", "LimitRange", "limitranges", &["limits"], true),
        ("v1", "ResourceQuota", "resourcequotas", &["quota"], true),
        ("v1", "PodTemplate", "podtemplates", &[], true),
        ("apps/v1", "Deployment", "deployments", &["deploy"], true),
        ("apps/v1", "DaemonSet", "daemonsets", &["ds"], true),
        ("apps/v1", "StatefulSet", "statefulsets", &["sts"], true),
        ("apps/v1", "ReplicaSet", "replicasets", &["rs"], true),
        (
            "apps/v1",
            "ControllerRevision",
            "controllerrevisions",
            &[],
            true,
        ),
        ("batch/v1", "Job", "jobs", &[], true),
        ("batch/v1", "CronJob", "cronjobs", &["cj"], true),
        (
            "networking.k8s.io/v1",
            "Ingress",
            "ingresses",
            &["ing"],
            true,
        ),
        (
            "networking.k8s.io/v1",
            "IngressClass",
            "ingressclasses",
            &[],
            false,
        ),
        (
            "networking.k8s.io/v1",
            "NetworkPolicy",
            "networkpolicies",
            &["netpol"],
            true,
        ),
        ("rbac.authorization.k8s.io/v1", "Role", "roles", &[], true),
        (
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            "clusterroles",
            &[],
            false,
        ),
        (
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            "rolebindings",
            &[],
            true,
        ),
        (
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
            &[],
            false,
        ),
        (
            "policy/v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            &["pdb"],
            true,
        ),
        ("coordination.k8s.io/v1", "Lease", "leases", &[], true),
        ("events.k8s.io/v1", "Event", "events", &["ev"], true),
        (
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            &["crd", "crds"],
            false,
        ),
    ];
    let cluster = LocalCluster::new();
    for (api_version, kind, plural, short, namespaced) in expected {
        for name in std::iter::once(kind)
            .chain(std::iter::once(plural))
            .chain(short.iter())
        {
            let resource = cluster
                .resolve(Some(api_version), name)
                .unwrap_or_else(|e| panic!("{api_version} {name}: {e}"));
            assert_eq!(
                (
                    resource.api_version(),
                    resource.kind.as_str(),
                    resource.plural.as_str(),
                    resource.namespaced
                ),
                (api_version.to_string(), *kind, *plural, *namespaced),
                "{api_version} {name}"
            );
        }
    }
    // Without an apiVersion, Event is core/v1's, as kubectl resolves it.
    assert_eq!(cluster.resolve(None, "Event").unwrap().api_version(), "v1");
    assert_eq!(
        cluster
            .resolve(Some("events.k8s.io/v1"), "ev")
            .unwrap()
            .group,
        "events.k8s.io"
    );
}

#[test]
fn resolve_errors_name_the_kind_and_api_version() {
    let cluster = LocalCluster::new();
    let err = cluster.resolve(None, "Gadget").unwrap_err();
    assert_eq!(err.to_string(), "unknown kind \"Gadget\"");
    let err = cluster.resolve(Some("apps/v1"), "Pod").unwrap_err();
    assert_eq!(
        err,
        ClusterError::UnknownKind {
            kind: "Pod".to_owned(),
            api_version: Some("apps/v1".to_owned())
        }
    );
    assert_eq!(err.to_string(), "unknown kind \"Pod\" in apps/v1");
}

// ---------------------------------------------------------------- selectors

#[test]
fn selector_by_namespaces() {
    let cluster = cluster();
    let selector = Selector {
        namespaces: Some(vec!["prod".to_owned()]),
        ..Selector::default()
    };
    assert_eq!(
        list(&cluster, "Pod", &selector).0,
        ["prod/db-1", "prod/web-2"]
    );
    // Cluster-scoped kinds ignore namespaces.
    assert_eq!(list(&cluster, "Namespace", &selector).0, ["prod"]);
}

#[test]
fn selector_by_names() {
    let cluster = cluster();
    let selector = Selector {
        names: Some(vec!["web-1".to_owned(), "web-2".to_owned()]),
        ..Selector::default()
    };
    assert_eq!(
        list(&cluster, "Pod", &selector).0,
        ["default/web-1", "prod/web-2"]
    );
}

#[test]
fn selector_by_labels() {
    let cluster = cluster();
    let names = |selector: Selector| list(&cluster, "Pod", &selector).0;
    assert_eq!(
        names(labels(&[("app", "web")], vec![])),
        ["default/web-1", "prod/web-2"]
    );
    assert_eq!(
        names(labels(&[("app", "web"), ("tier", "front")], vec![])),
        ["prod/web-2"]
    );
    let expr = |operator, values: &[&str]| labels(&[], vec![requirement("tier", operator, values)]);
    assert_eq!(
        names(expr(LabelOperator::In, &["front", "back"])),
        ["prod/web-2"]
    );
    // NotIn matches objects without the label, as in Kubernetes.
    assert_eq!(
        names(expr(LabelOperator::NotIn, &["front"])),
        ["default/web-1", "prod/db-1"]
    );
    assert_eq!(names(expr(LabelOperator::Exists, &[])), ["prod/web-2"]);
    assert_eq!(
        names(expr(LabelOperator::DoesNotExist, &[])),
        ["default/web-1", "prod/db-1"]
    );
    let combined = labels(
        &[("app", "web")],
        vec![requirement("tier", LabelOperator::DoesNotExist, &[])],
    );
    assert_eq!(names(combined), ["default/web-1"]);
    // An empty selector matches everything, objects without labels included.
    assert_eq!(
        list(&cluster, "cm", &labels(&[], vec![])).0,
        ["prod/settings"]
    );
}

#[test]
fn selector_by_fields() {
    let cluster = cluster();
    let names = |selector: Selector| list(&cluster, "Pod", &selector).0;
    assert_eq!(
        names(field("metadata.name", FieldOperator::Equals, "db-1")),
        ["prod/db-1"]
    );
    assert_eq!(
        names(field(
            "metadata.namespace",
            FieldOperator::NotEquals,
            "prod"
        )),
        ["default/web-1"]
    );
    assert_eq!(
        names(field("status.phase", FieldOperator::Equals, "Running")),
        ["prod/db-1", "prod/web-2"]
    );
    // A missing field compares as the empty string.
    assert_eq!(
        names(field("spec.nodeName", FieldOperator::Equals, "")),
        ["default/web-1", "prod/db-1"]
    );
    assert_eq!(
        names(field("spec.nodeName", FieldOperator::NotEquals, "")),
        ["prod/web-2"]
    );
    // Requirements are ANDed.
    let mut both = field("status.phase", FieldOperator::Equals, "Running");
    both.fields
        .extend(field("metadata.name", FieldOperator::Equals, "web-2").fields);
    assert_eq!(names(both), ["prod/web-2"]);
    assert_eq!(
        field_value(&json!({"spec": {"replicas": 3}}), "spec.replicas"),
        "3"
    );
}

// ---------------------------------------------------------------- lists

#[test]
fn list_is_sorted_by_namespace_then_name() {
    let cluster = cluster();
    assert_eq!(
        list(&cluster, "pods", &Selector::default()).0,
        ["default/web-1", "prod/db-1", "prod/web-2"]
    );
}

#[test]
fn objects_are_sorted_by_api_version_kind_namespace_name() {
    let cluster = cluster();
    let yaml = "{apiVersion: apps/v1, kind: Deployment, metadata: {name: z, namespace: a}}";
    cluster.load_yaml(yaml, "more.yaml").unwrap();
    let order: Vec<(String, String, String)> = cluster
        .objects()
        .iter()
        .map(|o| {
            (
                o["apiVersion"].as_str().unwrap().to_owned(),
                o["kind"].as_str().unwrap().to_owned(),
                key_of(o),
            )
        })
        .collect();
    let expected = [
        ("apps/v1", "Deployment", "a/z"),
        ("v1", "ConfigMap", "prod/settings"),
        ("v1", "Namespace", "prod"),
        ("v1", "Pod", "default/web-1"),
        ("v1", "Pod", "prod/db-1"),
        ("v1", "Pod", "prod/web-2"),
    ];
    let expected: Vec<(String, String, String)> = expected
        .iter()
        .map(|(a, k, n)| ((*a).to_owned(), (*k).to_owned(), (*n).to_owned()))
        .collect();
    assert_eq!(order, expected);
}

#[test]
fn get_finds_objects_and_needs_a_namespace_for_namespaced_kinds() {
    let cluster = cluster();
    assert!(get(&cluster, "Pod", Some("prod"), "db-1").is_some());
    assert!(get(&cluster, "Pod", Some("prod"), "nope").is_none());
    assert!(get(&cluster, "Namespace", Some("whatever"), "prod").is_some());
    let pods = resource(&cluster, "Pod");
    let err = block_on(cluster.get(&pods, None, "db-1")).unwrap_err();
    assert!(err.to_string().contains("namespace is required"), "{err}");
    let unknown = Resource {
        group: "example.com".to_owned(),
        version: "v1".to_owned(),
        kind: "Nothing".to_owned(),
        plural: "nothings".to_owned(),
        namespaced: true,
    };
    let err = block_on(cluster.get(&unknown, Some("a"), "b")).unwrap_err();
    assert!(matches!(err, ClusterError::UnknownKind { .. }), "{err:?}");
}

// ---------------------------------------------------------------- watches

#[test]
fn watch_sees_every_later_change_in_order() {
    let cluster = cluster();
    let (initial, mut events) = list(&cluster, "Pod", &Selector::default());
    assert_eq!(initial.len(), 3);
    assert!(drain(&mut events).is_empty(), "the list is not replayed");

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "new", "namespace": "prod"}});
    apply(&cluster, PatchOperation::Create(create_spec(pod))).unwrap();
    let patch = patch_spec(
        target("Pod", Some("prod"), "new"),
        json!({"spec": {"x": 1}}),
    );
    apply(&cluster, PatchOperation::MergePatch(patch)).unwrap();
    apply(
        &cluster,
        PatchOperation::Delete(target("Pod", Some("prod"), "new")),
    )
    .unwrap();
    // Other kinds are not seen.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    apply(&cluster, PatchOperation::Create(create_spec(cm))).unwrap();

    let seen: Vec<Event> = std::iter::from_fn(|| events.try_recv().ok()).collect();
    let kinds: Vec<WatchEvent> = seen.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [WatchEvent::Added, WatchEvent::Modified, WatchEvent::Deleted]
    );
    let versions: Vec<u64> = seen.iter().map(|e| resource_version(&e.object)).collect();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
    assert_eq!(
        seen[2].object["spec"]["x"], 1,
        "Deleted carries the last state"
    );
}

#[test]
fn watch_with_selector_sees_objects_enter_and_leave() {
    let cluster = cluster();
    let (initial, mut events) = list(&cluster, "Pod", &labels(&[("app", "web")], vec![]));
    assert_eq!(initial, ["default/web-1", "prod/web-2"]);

    let relabel = |value: &str| {
        let patch = patch_spec(web2(), json!({"metadata": {"labels": {"app": value}}}));
        apply(&cluster, PatchOperation::MergePatch(patch)).unwrap();
    };
    relabel("api");
    let left = events.try_recv().expect("leaving the selector");
    assert_eq!(left.kind, WatchEvent::Deleted);
    assert_eq!(
        left.object["metadata"]["labels"]["app"], "web",
        "the state it was seen in"
    );
    assert_eq!(
        resource_version(&left.object),
        cluster.resource_version(),
        "at the version of the change"
    );
    // Changes while outside are not seen.
    let patch = patch_spec(web2(), json!({"spec": {"y": 2}}));
    apply(&cluster, PatchOperation::MergePatch(patch)).unwrap();
    assert!(events.try_recv().is_err());
    relabel("web");
    let entered = events.try_recv().expect("entering the selector");
    assert_eq!(entered.kind, WatchEvent::Added);
    assert_eq!(entered.object["spec"]["y"], 2);
    assert!(events.try_recv().is_err());
}

#[test]
fn dropped_watchers_are_cleaned_up() {
    let cluster = cluster();
    let (_, first) = list(&cluster, "Pod", &Selector::default());
    let (_, mut second) = list(&cluster, "Pod", &Selector::default());
    drop(first);
    let pod_index = cluster.lock().resolve(None, "Pod").unwrap();
    assert_eq!(cluster.lock().kinds[pod_index].watchers.len(), 2);
    let patch = patch_spec(web2(), json!({"spec": {"z": 1}}));
    apply(&cluster, PatchOperation::MergePatch(patch)).unwrap();
    assert_eq!(cluster.lock().kinds[pod_index].watchers.len(), 1);
    assert_eq!(drain(&mut second).len(), 1);
    drop(second);
    // A new watch prunes dead ones even without a write.
    let (_, _third) = list(&cluster, "Pod", &Selector::default());
    assert_eq!(cluster.lock().kinds[pod_index].watchers.len(), 1);
}

#[test]
fn scenario_watch_events_change_the_world() {
    let cluster = cluster();
    let (_, mut events) = list(&cluster, "Pod", &Selector::default());
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "s", "namespace": "prod", "uid": "scenario-uid"},
        "status": {"phase": "Pending"}});
    cluster
        .apply_watch_event(WatchEvent::Added, pod.clone())
        .unwrap();
    let mut running = pod.clone();
    running["status"]["phase"] = json!("Running");
    running["metadata"].as_object_mut().unwrap().remove("uid");
    cluster
        .apply_watch_event(WatchEvent::Modified, running)
        .unwrap();
    let stored = get(&cluster, "Pod", Some("prod"), "s").unwrap();
    assert_eq!(
        stored["status"]["phase"], "Running",
        "the world writes status freely"
    );
    assert_eq!(
        stored["metadata"]["uid"], "scenario-uid",
        "uid kept when not given"
    );
    cluster
        .apply_watch_event(WatchEvent::Deleted, pod.clone())
        .unwrap();
    assert_eq!(
        drain(&mut events),
        [
            (WatchEvent::Added, "prod/s".to_owned()),
            (WatchEvent::Modified, "prod/s".to_owned()),
            (WatchEvent::Deleted, "prod/s".to_owned()),
        ]
    );
    let err = cluster
        .apply_watch_event(WatchEvent::Modified, pod.clone())
        .unwrap_err();
    assert_eq!(err.to_string(), "Pod prod/s not found");
    let err = cluster
        .apply_watch_event(WatchEvent::Deleted, pod)
        .unwrap_err();
    assert!(matches!(err, ClusterError::NotFound { .. }));
    let err = cluster
        .apply_watch_event(WatchEvent::Added, json!({"kind": "Pod"}))
        .unwrap_err();
    assert!(err.to_string().contains("apiVersion is missing"), "{err}");
    // Unknown kinds in scenarios are registered like fixture kinds.
    let gadget =
        json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}});
    cluster
        .apply_watch_event(WatchEvent::Added, gadget)
        .unwrap();
    assert!(!cluster.resolve(None, "gadgets").unwrap().namespaced);
}

// ---------------------------------------------------------------- create / delete

#[test]
fn create_sets_server_fields_and_fails_on_existing() {
    let cluster = cluster();
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "api", "uid": "client-chosen", "resourceVersion": "77"},
        "spec": {"replicas": 1}, "status": {"replicas": 5}});
    apply(
        &cluster,
        PatchOperation::Create(create_spec(deployment.clone())),
    )
    .unwrap();
    let stored = get(&cluster, "Deployment", Some("default"), "api").expect("created");
    assert_ne!(
        stored["metadata"]["uid"], "client-chosen",
        "the server owns uid"
    );
    assert_eq!(resource_version(&stored), 6);
    assert!(stored["metadata"]["creationTimestamp"].is_string());
    assert!(
        stored.get("status").is_none(),
        "status is set through the subresource only"
    );

    let err = apply(&cluster, PatchOperation::Create(create_spec(deployment))).unwrap_err();
    assert_eq!(
        err,
        ClusterError::AlreadyExists {
            kind: "Deployment".to_owned(),
            namespace: Some("default".to_owned()),
            name: "api".to_owned()
        }
    );
    assert_eq!(err.to_string(), "Deployment default/api already exists");
}

#[test]
fn create_errors_are_typed() {
    let cluster = LocalCluster::new();
    let bad_json = CreateSpec {
        object: "{not json".to_owned(),
        subresource: None,
    };
    let err = apply(&cluster, PatchOperation::Create(bad_json)).unwrap_err();
    assert!(matches!(err, ClusterError::Invalid { .. }), "{err:?}");
    let no_name = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}});
    let err = apply(&cluster, PatchOperation::Create(create_spec(no_name))).unwrap_err();
    assert!(
        err.to_string().contains("metadata.name is missing"),
        "{err}"
    );
    let unknown =
        json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}});
    let err = apply(&cluster, PatchOperation::Create(create_spec(unknown))).unwrap_err();
    assert_eq!(err.to_string(), "unknown kind \"Gadget\" in example.com/v1");
    let mut scaled =
        create_spec(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}));
    scaled.subresource = Some("scale".to_owned());
    let err = apply(&cluster, PatchOperation::Create(scaled)).unwrap_err();
    assert!(err.to_string().contains("\"scale\""), "{err}");
}

#[test]
fn create_or_update_replaces_keeping_uid_and_creation_timestamp() {
    let cluster = cluster();
    let before = get(&cluster, "ConfigMap", Some("prod"), "settings").unwrap();
    let replacement = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "prod", "labels": {"new": "yes"}},
        "data": {"other": "x"}});
    apply(
        &cluster,
        PatchOperation::CreateOrUpdate(create_spec(replacement.clone())),
    )
    .unwrap();
    let after = get(&cluster, "ConfigMap", Some("prod"), "settings").unwrap();
    assert_eq!(after["data"], json!({"other": "x"}), "replaced, not merged");
    assert_eq!(after["metadata"]["labels"]["new"], "yes");
    assert_eq!(after["metadata"]["uid"], before["metadata"]["uid"]);
    assert_eq!(
        after["metadata"]["creationTimestamp"],
        before["metadata"]["creationTimestamp"]
    );
    assert!(resource_version(&after) > resource_version(&before));
    // The same object again changes nothing.
    let version = cluster.resource_version();
    apply(
        &cluster,
        PatchOperation::CreateOrUpdate(create_spec(replacement)),
    )
    .unwrap();
    assert_eq!(cluster.resource_version(), version);
    // And a missing object is created.
    let fresh = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fresh"}});
    apply(&cluster, PatchOperation::CreateOrUpdate(create_spec(fresh))).unwrap();
    assert!(get(&cluster, "cm", Some("default"), "fresh").is_some());
}

#[test]
fn create_or_update_keeps_status_of_kinds_with_a_status_subresource() {
    let cluster = cluster();
    let mut replacement = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-2", "namespace": "prod"},
        "spec": {"nodeName": "node-c"}, "status": {"phase": "Failed"}});
    apply(
        &cluster,
        PatchOperation::CreateOrUpdate(create_spec(replacement.clone())),
    )
    .unwrap();
    let pod = web2_now(&cluster);
    assert_eq!(pod["spec"]["nodeName"], "node-c");
    assert_eq!(
        pod["status"]["phase"], "Running",
        "status ignored by the main resource"
    );
    replacement["spec"]["nodeName"] = json!("node-z");
    let mut through_status = create_spec(replacement);
    through_status.subresource = Some("status".to_owned());
    apply(&cluster, PatchOperation::CreateOrUpdate(through_status)).unwrap();
    let pod = web2_now(&cluster);
    assert_eq!(pod["status"]["phase"], "Failed");
    assert_eq!(pod["spec"]["nodeName"], "node-c", "only status changed");
}

#[test]
fn create_if_not_exists_leaves_existing_objects_alone() {
    let cluster = cluster();
    let version = cluster.resource_version();
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "prod"}, "data": {"mode": "other"}});
    apply(
        &cluster,
        PatchOperation::CreateIfNotExists(create_spec(other)),
    )
    .unwrap();
    assert_eq!(cluster.resource_version(), version);
    let settings = get(&cluster, "cm", Some("prod"), "settings").unwrap();
    assert_eq!(settings["data"]["mode"], "fast");
    let new = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n", "namespace": "prod"}});
    apply(
        &cluster,
        PatchOperation::CreateIfNotExists(create_spec(new)),
    )
    .unwrap();
    assert!(get(&cluster, "cm", Some("prod"), "n").is_some());
}

#[test]
fn every_delete_removes_and_missing_objects_are_ignored() {
    let cluster = cluster();
    let (_, mut events) = list(&cluster, "Pod", &Selector::default());
    apply(
        &cluster,
        PatchOperation::Delete(target("Pod", Some("prod"), "web-2")),
    )
    .unwrap();
    apply(
        &cluster,
        PatchOperation::DeleteInBackground(target("po", Some("prod"), "db-1")),
    )
    .unwrap();
    apply(
        &cluster,
        PatchOperation::DeleteNonCascading(target("pods", Some("default"), "web-1")),
    )
    .unwrap();
    assert!(list(&cluster, "Pod", &Selector::default()).0.is_empty());
    assert_eq!(drain(&mut events).len(), 3);
    // shell-operator ignores NotFound on delete.
    let version = cluster.resource_version();
    apply(
        &cluster,
        PatchOperation::Delete(target("Pod", Some("prod"), "web-2")),
    )
    .unwrap();
    assert_eq!(cluster.resource_version(), version, "nothing written");
    assert!(drain(&mut events).is_empty());
    // Cluster-scoped objects ignore the namespace.
    apply(
        &cluster,
        PatchOperation::Delete(target("Namespace", Some("x"), "prod")),
    )
    .unwrap();
    assert!(get(&cluster, "ns", None, "prod").is_none());
    // But an unknown kind or a namespaced kind without a namespace is an error.
    let err = apply(
        &cluster,
        PatchOperation::Delete(target("Gadget", None, "g")),
    )
    .unwrap_err();
    assert!(matches!(err, ClusterError::UnknownKind { .. }));
    let err = apply(
        &cluster,
        PatchOperation::Delete(target("cm", None, "settings")),
    )
    .unwrap_err();
    assert!(err.to_string().contains("ConfigMap is namespaced"), "{err}");
}

// ---------------------------------------------------------------- patches

#[test]
fn jq_patch_replaces_the_object_with_the_filter_output() {
    let cluster = cluster();
    let before = web2_now(&cluster);
    let spec = jq_spec(
        web2(),
        r#".metadata.labels.checked = "yes" | del(.spec.nodeName)"#,
    );
    apply(&cluster, PatchOperation::JqPatch(spec.clone())).unwrap();
    let after = web2_now(&cluster);
    assert_eq!(after["metadata"]["labels"]["checked"], "yes");
    assert!(after["spec"].get("nodeName").is_none());
    assert_eq!(after["metadata"]["uid"], before["metadata"]["uid"]);
    // The filter is compiled once and reused from the cache.
    assert!(operon_jq::compile(&spec.jq_filter).is_ok());
    let version = cluster.resource_version();
    apply(&cluster, PatchOperation::JqPatch(spec)).unwrap();
    assert_eq!(
        cluster.resource_version(),
        version,
        "a second run changes nothing"
    );
}

#[test]
fn jq_patch_creates_missing_fields_and_ignores_missing_deletions_as_jq_does() {
    let cluster = cluster();
    let settings = || target("ConfigMap", Some("prod"), "settings");
    let now = |cluster: &LocalCluster| {
        get(cluster, "ConfigMap", Some("prod"), "settings").expect("settings exists")
    };
    assert!(now(&cluster)["metadata"].get("labels").is_none());
    apply(
        &cluster,
        PatchOperation::JqPatch(jq_spec(settings(), r#".metadata.labels.x = "y""#)),
    )
    .unwrap();
    let after = now(&cluster);
    assert_eq!(after["metadata"]["labels"], json!({"x": "y"}));
    assert_eq!(after["data"], json!({"mode": "fast"}));
    // Through null and past the end of a list, as jq does; a deletion of what is not
    // there writes nothing.
    apply(
        &cluster,
        PatchOperation::JqPatch(jq_spec(
            settings(),
            r#".metadata.annotations["a/b"] |= "c" | .spec.list[2] = 1"#,
        )),
    )
    .unwrap();
    let after = now(&cluster);
    assert_eq!(after["metadata"]["annotations"], json!({"a/b": "c"}));
    assert_eq!(after["spec"]["list"], json!([null, null, 1]));
    let version = cluster.resource_version();
    apply(
        &cluster,
        PatchOperation::JqPatch(jq_spec(
            settings(),
            r#"del(.metadata.finalizers[0], .status.nothing.deeper)"#,
        )),
    )
    .unwrap();
    assert_eq!(cluster.resource_version(), version, "nothing to delete");
}

#[test]
fn jq_patch_must_yield_exactly_one_object_with_the_same_identity() {
    let cluster = cluster();
    let version = cluster.resource_version();
    let error = |filter: &str| {
        let err = apply(&cluster, PatchOperation::JqPatch(jq_spec(web2(), filter))).unwrap_err();
        assert!(
            matches!(err, ClusterError::Invalid { .. }),
            "{filter}: {err:?}"
        );
        assert!(
            err.to_string().contains("JQPatch of Pod prod/web-2"),
            "{err}"
        );
        err.to_string()
    };
    assert!(error("empty").contains("yielded 0 outputs"));
    assert!(error(". , .").contains("yielded 2 outputs"));
    assert!(error(r#".metadata.name = "other""#).contains("metadata.name cannot change"));
    assert!(error(r#".kind = "Service""#).contains("kind cannot change"));
    assert!(error(r#".metadata.namespace = "dev""#).contains("metadata.namespace cannot change"));
    assert!(error(".metadata.name").contains("not an object"));
    assert!(error(".metadata |").contains("line 1"));
    assert!(error(r#"error("nope")"#).contains("nope"));
    assert_eq!(cluster.resource_version(), version, "nothing written");
    // Identity fields a filter drops are put back.
    apply(
        &cluster,
        PatchOperation::JqPatch(jq_spec(
            web2(),
            "del(.kind, .apiVersion, .metadata.namespace)",
        )),
    )
    .unwrap();
    let pod = web2_now(&cluster);
    assert_eq!(
        (pod["kind"].as_str(), pod["apiVersion"].as_str()),
        (Some("Pod"), Some("v1"))
    );
}

#[test]
fn merge_patch_follows_rfc_7386() {
    let cluster = cluster();
    let patch =
        json!({"metadata": {"labels": {"tier": null, "env": "prod"}}, "spec": {"replicas": 2}});
    apply(
        &cluster,
        PatchOperation::MergePatch(patch_spec(web2(), patch)),
    )
    .unwrap();
    let pod = web2_now(&cluster);
    assert_eq!(
        pod["metadata"]["labels"],
        json!({"app": "web", "env": "prod"})
    );
    assert_eq!(pod["spec"], json!({"nodeName": "node-a", "replicas": 2}));
    let bad = PatchSpec {
        patch: "{oops".to_owned(),
        ..patch_spec(web2(), json!({}))
    };
    let err = apply(&cluster, PatchOperation::MergePatch(bad)).unwrap_err();
    assert!(err.to_string().contains("not JSON"), "{err}");
    let numeric_label = json!({"metadata": {"labels": {"count": 3}}});
    let err = apply(
        &cluster,
        PatchOperation::MergePatch(patch_spec(web2(), numeric_label)),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("metadata.labels.count must be a string"),
        "{err}"
    );
}

#[test]
fn json_patch_follows_rfc_6902() {
    let cluster = cluster();
    let patch = json!([
        {"op": "add", "path": "/metadata/labels/env", "value": "prod"},
        {"op": "replace", "path": "/spec/nodeName", "value": "node-b"},
        {"op": "remove", "path": "/metadata/labels/tier"},
        {"op": "test", "path": "/metadata/labels/app", "value": "web"}
    ]);
    apply(
        &cluster,
        PatchOperation::JsonPatch(patch_spec(web2(), patch)),
    )
    .unwrap();
    let pod = web2_now(&cluster);
    assert_eq!(
        pod["metadata"]["labels"],
        json!({"app": "web", "env": "prod"})
    );
    assert_eq!(pod["spec"]["nodeName"], "node-b");

    let version = cluster.resource_version();
    let bad_path = json!([
        {"op": "add", "path": "/metadata/labels/half", "value": "done"},
        {"op": "replace", "path": "/spec/missing/deep", "value": 1}
    ]);
    let err = apply(
        &cluster,
        PatchOperation::JsonPatch(patch_spec(web2(), bad_path)),
    )
    .unwrap_err();
    assert!(matches!(err, ClusterError::Invalid { .. }), "{err:?}");
    assert!(err.to_string().contains("/spec/missing/deep"), "{err}");
    assert!(
        web2_now(&cluster)["metadata"]["labels"]
            .get("half")
            .is_none(),
        "all or nothing"
    );
    let not_array = patch_spec(web2(), json!({"op": "add"}));
    let err = apply(&cluster, PatchOperation::JsonPatch(not_array)).unwrap_err();
    assert!(err.to_string().contains("RFC 6902"), "{err}");
    let failed_test = json!([{"op": "test", "path": "/spec/nodeName", "value": "elsewhere"}]);
    let err = apply(
        &cluster,
        PatchOperation::JsonPatch(patch_spec(web2(), failed_test)),
    )
    .unwrap_err();
    assert!(matches!(err, ClusterError::Invalid { .. }));
    assert_eq!(cluster.resource_version(), version);
}

#[test]
fn missing_objects_fail_unless_ignored() {
    let cluster = cluster();
    let missing = || target("Pod", Some("prod"), "ghost");
    let operations = |ignore: bool| {
        vec![
            PatchOperation::MergePatch(PatchSpec {
                ignore_missing_object: ignore,
                ..patch_spec(missing(), json!({"a": 1}))
            }),
            PatchOperation::JsonPatch(PatchSpec {
                ignore_missing_object: ignore,
                ..patch_spec(missing(), json!([]))
            }),
            PatchOperation::JqPatch(JqPatchSpec {
                ignore_missing_object: ignore,
                ..jq_spec(missing(), ".")
            }),
        ]
    };
    for operation in operations(false) {
        let err = apply(&cluster, operation).unwrap_err();
        assert_eq!(err.to_string(), "Pod prod/ghost not found");
    }
    for operation in operations(true) {
        apply(&cluster, operation).unwrap();
    }
    assert!(get(&cluster, "Pod", Some("prod"), "ghost").is_none());
}

#[test]
fn status_subresource_changes_only_status() {
    let cluster = cluster();
    // Through the main resource, status is ignored for kinds with a status subresource.
    let main = patch_spec(
        web2(),
        json!({"status": {"phase": "Failed"}, "spec": {"a": 1}}),
    );
    apply(&cluster, PatchOperation::MergePatch(main.clone())).unwrap();
    let pod = web2_now(&cluster);
    assert_eq!(pod["status"]["phase"], "Running");
    assert_eq!(pod["spec"]["a"], 1);
    // Through the status subresource only status changes.
    let status = PatchSpec {
        subresource: Some("status".to_owned()),
        patch: json!({"status": {"phase": "Failed"}, "spec": {"b": 2}}).to_string(),
        ..main
    };
    apply(&cluster, PatchOperation::MergePatch(status)).unwrap();
    let pod = web2_now(&cluster);
    assert_eq!(pod["status"]["phase"], "Failed");
    assert!(pod["spec"].get("b").is_none());
    let jq = JqPatchSpec {
        subresource: Some("status".to_owned()),
        ..jq_spec(
            web2(),
            r#".status.reason = "Evicted" | .metadata.labels.x = "y""#,
        )
    };
    apply(&cluster, PatchOperation::JqPatch(jq)).unwrap();
    let pod = web2_now(&cluster);
    assert_eq!(pod["status"]["reason"], "Evicted");
    assert!(pod["metadata"]["labels"].get("x").is_none());
    // Kinds without a status subresource write status through the main resource...
    let settings = target("ConfigMap", Some("prod"), "settings");
    let patch = patch_spec(settings.clone(), json!({"status": {"seen": true}}));
    apply(&cluster, PatchOperation::MergePatch(patch)).unwrap();
    let cm = get(&cluster, "cm", Some("prod"), "settings").unwrap();
    assert_eq!(cm["status"]["seen"], true);
    // ...and have no status subresource.
    let patch = PatchSpec {
        subresource: Some("status".to_owned()),
        ..patch_spec(settings, json!({}))
    };
    let err = apply(&cluster, PatchOperation::MergePatch(patch)).unwrap_err();
    assert!(
        err.to_string()
            .contains("ConfigMap has no status subresource"),
        "{err}"
    );
}

#[test]
fn other_subresources_are_invalid() {
    let cluster = cluster();
    let patch = PatchSpec {
        subresource: Some("scale".to_owned()),
        ..patch_spec(web2(), json!({"spec": {"replicas": 3}}))
    };
    let err = apply(&cluster, PatchOperation::MergePatch(patch)).unwrap_err();
    assert!(matches!(err, ClusterError::Invalid { .. }));
    assert!(err.to_string().contains("subresource \"scale\""), "{err}");
}

#[test]
fn server_owned_metadata_cannot_be_patched() {
    let cluster = cluster();
    let before = web2_now(&cluster);
    let json = json!([
        {"op": "replace", "path": "/metadata/uid", "value": "forged"},
        {"op": "remove", "path": "/metadata/creationTimestamp"},
        {"op": "replace", "path": "/metadata/resourceVersion", "value": "1"},
        {"op": "add", "path": "/metadata/labels/patched", "value": "yes"}
    ]);
    apply(
        &cluster,
        PatchOperation::JsonPatch(patch_spec(web2(), json)),
    )
    .unwrap();
    let merge = json!({"metadata": {"uid": null, "creationTimestamp": "1999-01-01T00:00:00Z"}});
    apply(
        &cluster,
        PatchOperation::MergePatch(patch_spec(web2(), merge)),
    )
    .unwrap();
    let jq = r#".metadata.uid = "jq" | .metadata.resourceVersion = "0""#;
    apply(&cluster, PatchOperation::JqPatch(jq_spec(web2(), jq))).unwrap();
    let after = web2_now(&cluster);
    assert_eq!(after["metadata"]["labels"]["patched"], "yes");
    assert_eq!(after["metadata"]["uid"], before["metadata"]["uid"]);
    assert_eq!(
        after["metadata"]["creationTimestamp"],
        before["metadata"]["creationTimestamp"]
    );
    assert_eq!(resource_version(&after), cluster.resource_version());
}

#[test]
fn resource_version_increments_on_every_write_and_only_then() {
    let cluster = LocalCluster::new();
    assert_eq!(cluster.resource_version(), 0);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    apply(&cluster, PatchOperation::Create(create_spec(cm))).unwrap();
    assert_eq!(cluster.resource_version(), 1);
    let c = || target("ConfigMap", Some("default"), "c");
    apply(
        &cluster,
        PatchOperation::MergePatch(patch_spec(c(), json!({"data": {"a": "1"}}))),
    )
    .unwrap();
    assert_eq!(cluster.resource_version(), 2);
    let (_, mut events) = list(&cluster, "cm", &Selector::default());
    // A patch that changes nothing writes nothing and sends no event.
    apply(
        &cluster,
        PatchOperation::MergePatch(patch_spec(c(), json!({"data": {"a": "1"}}))),
    )
    .unwrap();
    assert_eq!(cluster.resource_version(), 2);
    assert!(drain(&mut events).is_empty());
    apply(
        &cluster,
        PatchOperation::JqPatch(jq_spec(c(), r#".data.b = "2""#)),
    )
    .unwrap();
    assert_eq!(cluster.resource_version(), 3);
    let stored = get(&cluster, "cm", Some("default"), "c").unwrap();
    assert_eq!(resource_version(&stored), 3);
    apply(&cluster, PatchOperation::Delete(c())).unwrap();
    assert_eq!(cluster.resource_version(), 4);
    assert_eq!(drain(&mut events).len(), 2);
}

#[test]
fn api_version_of_targets_is_checked() {
    let cluster = cluster();
    let mut wrong = web2();
    wrong.api_version = Some("apps/v1".to_owned());
    let err = apply(&cluster, PatchOperation::JqPatch(jq_spec(wrong, "."))).unwrap_err();
    assert_eq!(err.to_string(), "unknown kind \"Pod\" in apps/v1");
    let mut right = web2();
    right.api_version = Some("v1".to_owned());
    apply(
        &cluster,
        PatchOperation::JqPatch(jq_spec(right, ".spec.ok = true")),
    )
    .unwrap();
    assert_eq!(web2_now(&cluster)["spec"]["ok"], true);
}

#[test]
fn many_writes_with_watchers_stay_ordered() {
    // A cheap stand-in for the benchmark: thousands of writes, each seen once, in order.
    let cluster = cluster();
    let (_, mut all) = list(&cluster, "Pod", &Selector::default());
    let (_, mut web) = list(&cluster, "Pod", &labels(&[("app", "web")], vec![]));
    let (_, mut none) = list(&cluster, "Pod", &labels(&[("app", "nothing")], vec![]));
    let count = 2_000;
    for i in 0..count {
        let patch = patch_spec(web2(), json!({"spec": {"counter": i}}));
        apply(&cluster, PatchOperation::MergePatch(patch)).unwrap();
    }
    let seen: Vec<Event> = std::iter::from_fn(|| all.try_recv().ok()).collect();
    assert_eq!(seen.len(), count);
    assert!(
        seen.iter()
            .enumerate()
            .all(|(i, e)| e.object["spec"]["counter"] == i)
    );
    assert_eq!(drain(&mut web).len(), count);
    assert!(drain(&mut none).is_empty());
}
