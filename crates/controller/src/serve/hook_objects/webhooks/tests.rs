//! A Hook's admission webhooks: what its permissions let them intercept, their names
//! and configurations, the registry's exact requests to the API server (apply,
//! nothing while loading, delete), and a review routed to a Hook object's engine.

use super::*;
use crate::serve::webhook::register::ClientTarget;
use operon_cluster::kube::mock::{MockApi, pair};
use operon_cluster::local::LocalCluster;
use operon_data::api::{HookPermissions, WatchPermission};
use operon_data::model::{AdmissionBindingConfig, HookConfig, LabelSelector, WebhookRule};
use operon_hooks::hooks::config;

fn rule(group: &str, resource: &str) -> WebhookRule {
    WebhookRule {
        operations: vec!["CREATE".into()],
        api_groups: vec![group.into()],
        api_versions: vec!["*".into()],
        resources: vec![resource.into()],
        scope: None,
    }
}

/// The validated validating bindings of a hook declaring `bindings`.
fn validating(bindings: Vec<AdmissionBindingConfig>) -> Vec<AdmissionBinding> {
    let raw = HookConfig {
        kubernetes_validating: bindings,
        ..HookConfig::default()
    };
    config::validate("Hook/demo/guard", &raw, &config::any_kind)
        .unwrap()
        .validating
}

fn binding(name: &str, rules: Vec<WebhookRule>) -> AdmissionBindingConfig {
    AdmissionBindingConfig {
        name: name.into(),
        rules,
        ..AdmissionBindingConfig::default()
    }
}

fn permissions(watch: &[(&str, &str, &[&str])]) -> Permissions {
    let declared = HookPermissions {
        watch: watch
            .iter()
            .map(|(api_version, kind, namespaces)| WatchPermission {
                api_version: (*api_version).into(),
                kind: (*kind).into(),
                namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
            })
            .collect(),
        patch: Vec::new(),
    };
    Permissions::new("demo", "guard", &declared).unwrap()
}

fn registration() -> Registration {
    Registration {
        validating_configuration: "operon-hooks".into(),
        mutating_configuration: "operon-hooks".into(),
        admission: ClientTarget::Service {
            namespace: "operon-system".into(),
            name: "operon-webhooks".into(),
            port: 443,
        },
        conversion: ClientTarget::Url("https://127.0.0.1:9681".into()),
        admission_ca: b"CA".to_vec(),
        conversion_ca: Vec::new(),
        own_resources: false,
    }
}

#[tokio::test]
async fn a_webhook_intercepts_only_what_its_hook_may_read_where_it_may_read_it() {
    let cluster = LocalCluster::new();
    let pods = validating(vec![binding("pods.example.com", vec![rule("", "pods")])]);

    // Granted in its own namespace (no namespace listed): kept to it.
    let own = permissions(&[("v1", "Pod", &[])]);
    let planned = plan(&own, &cluster, &pods, &[]).await.unwrap();
    assert_eq!(planned.validating[0].namespaces, Some(vec!["demo".into()]));

    // Granted everywhere: every namespace.
    let all = permissions(&[("v1", "Pod", &["*"])]);
    let planned = plan(&all, &cluster, &pods, &[]).await.unwrap();
    assert_eq!(planned.validating[0].namespaces, None);

    // A subresource counts as its resource; two grants add their namespaces.
    let status = validating(vec![binding(
        "status.example.com",
        vec![rule("", "pods/status")],
    )]);
    let two = permissions(&[("v1", "Pod", &["a"]), ("v1", "pods", &["b", "a"])]);
    let planned = plan(&two, &cluster, &status, &[]).await.unwrap();
    assert_eq!(
        planned.validating[0].namespaces,
        Some(vec!["a".into(), "b".into()])
    );

    // A cluster-scoped kind has no namespace to keep to.
    let nodes = validating(vec![binding("nodes.example.com", vec![rule("", "nodes")])]);
    let planned = plan(&permissions(&[("v1", "Node", &[])]), &cluster, &nodes, &[])
        .await
        .unwrap();
    assert_eq!(planned.validating[0].namespaces, None);

    // Not granted, or named by a wildcard: refused, naming the binding.
    let refused = plan(
        &permissions(&[("v1", "ConfigMap", &["*"])]),
        &cluster,
        &pods,
        &[],
    )
    .await
    .unwrap_err();
    assert_eq!(refused.reason, "WebhookNotPermitted");
    assert!(
        refused.message.starts_with(
            "binding \"pods.example.com\" intercepts pods, but spec.permissions.watch has no entry"
        ),
        "{}",
        refused.message
    );
    let wild = validating(vec![binding("all.example.com", vec![rule("", "*")])]);
    let refused = plan(&all, &cluster, &wild, &[]).await.unwrap_err();
    assert!(
        refused.message.contains("a wildcard would intercept"),
        "{}",
        refused.message
    );
    let deployments = validating(vec![binding(
        "apps.example.com",
        vec![rule("apps", "deployments")],
    )]);
    let refused = plan(&all, &cluster, &deployments, &[]).await.unwrap_err();
    assert!(
        refused.message.contains("deployments.apps"),
        "{}",
        refused.message
    );

    // Two kinds granted in different namespaces: only their common ones.
    let both = validating(vec![binding(
        "both.example.com",
        vec![rule("", "pods"), rule("", "configmaps")],
    )]);
    let granted = permissions(&[("v1", "Pod", &["a", "b"]), ("v1", "ConfigMap", &["b", "c"])]);
    let planned = plan(&granted, &cluster, &both, &[]).await.unwrap();
    assert_eq!(planned.validating[0].namespaces, Some(vec!["b".into()]));
    let apart = permissions(&[("v1", "Pod", &["a"]), ("v1", "ConfigMap", &["c"])]);
    let refused = plan(&apart, &cluster, &both, &[]).await.unwrap_err();
    assert!(
        refused.message.contains("no common namespace"),
        "{}",
        refused.message
    );
}

#[test]
fn configuration_names_never_collide_across_namespaces_and_stay_valid() {
    assert_eq!(
        configuration_name("demo", "guard"),
        "operon-hook.demo.guard"
    );
    // A namespace (a DNS label) holds no dot: the first dot after the prefix ends it,
    // so no two Hooks share a name.
    assert_ne!(
        configuration_name("a-b", "c"),
        configuration_name("a", "b-c")
    );
    assert_ne!(
        configuration_name("a", "b.c"),
        configuration_name("a", "b-c")
    );
    let long = ["x", "y", "z", "w"].map(|c| c.repeat(60)).join(".");
    let name = configuration_name(&"n".repeat(63), &long);
    assert!(name.len() <= 253, "{}", name.len());
    assert!(name.starts_with(&format!("operon-hook.{}.", "n".repeat(63))));
    let other = configuration_name(&"n".repeat(63), &format!("{long}z"));
    assert_ne!(name, other);
    assert!(operon_data::names::is_dns_subdomain(&name), "{name}");
}

#[tokio::test]
async fn a_configuration_carries_its_hook_its_paths_and_its_namespaces() {
    let mut selected = binding("pods.example.com", vec![rule("", "pods")]);
    selected.namespace = Some(operon_data::model::NamespaceSelector {
        label_selector: Some(LabelSelector {
            match_labels: [("team".to_owned(), "a".to_owned())].into(),
            ..LabelSelector::default()
        }),
        ..Default::default()
    });
    let bindings = validating(vec![selected]);
    let planned = plan(
        &permissions(&[("v1", "Pod", &[])]),
        &LocalCluster::new(),
        &bindings,
        &[],
    )
    .await
    .unwrap();
    let key = ("demo".to_owned(), "guard".to_owned());
    let (v, m) = configurations(&key, &planned, &registration());
    assert!(m.is_none(), "no mutating binding, no configuration");
    let v = v.unwrap();
    assert_eq!(v["kind"], "ValidatingWebhookConfiguration");
    assert_eq!(v["metadata"]["name"], "operon-hook.demo.guard");
    assert_eq!(v["metadata"]["labels"][LABEL], "Hook");
    assert_eq!(
        v["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "operon"
    );
    assert_eq!(v["metadata"]["annotations"][HOOK_ANNOTATION], "demo/guard");
    let webhook = &v["webhooks"][0];
    assert_eq!(webhook["name"], "pods.example.com");
    assert_eq!(
        webhook["clientConfig"]["service"]["path"],
        "/hook-object/demo/guard/validate/pods.example.com"
    );
    // The binding's own selector stays, and the permission's namespaces are ANDed in.
    assert_eq!(
        webhook["namespaceSelector"],
        json!({"matchLabels": {"team": "a"},
               "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                     "values": ["demo"]}]})
    );
}

/// The next request, which must be `method` on a URI starting with `uri`.
async fn expect(api: &mut MockApi, method: &str, uri: &str) -> operon_cluster::kube::mock::Call {
    let call = api.next().await;
    assert_eq!(call.method, method, "{}", call.uri);
    assert!(call.uri.starts_with(uri), "{} {}", call.method, call.uri);
    call
}

fn list(kind: &str, names: &[&str]) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": format!("{kind}List"),
           "metadata": {"resourceVersion": "1"},
           "items": names.iter().map(|n| json!({"apiVersion": "admissionregistration.k8s.io/v1",
                 "kind": kind, "metadata": {"name": n}})).collect::<Vec<_>>()})
}

const VALIDATING: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
const MUTATING: &str = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";

#[tokio::test]
async fn the_leader_registers_a_hooks_webhooks_keeps_them_while_it_loads_and_removes_them_when_it_goes()
 {
    let (client, mut api) = pair();
    let registry = WebhookRegistry::default();
    let registrar = Registrar::new(client, registration());
    let _running =
        crate::controllers::AbortOnDrop::spawn(keep_registered(registry.clone(), registrar));
    let key = ("demo".to_owned(), "guard".to_owned());
    let bindings = validating(vec![binding("pods.example.com", vec![rule("", "pods")])]);
    let planned = plan(
        &permissions(&[("v1", "Pod", &[])]),
        &LocalCluster::new(),
        &bindings,
        &[],
    )
    .await
    .unwrap();
    let mut outcomes = registry.outcomes();

    // Serving, once every Hook is known: applied (server-side, as operon), and a stale
    // configuration of a Hook that is gone is deleted.
    registry.serving(&key, planned.clone());
    registry.synced();
    let selector = "?&labelSelector=operon.dev%2Fwebhooks-of%3DHook";
    expect(&mut api, "GET", &format!("{VALIDATING}{selector}"))
        .await
        .answer(
            200,
            list("ValidatingWebhookConfiguration", &["operon-hook.old.gone"]),
        );
    let applied = expect(
        &mut api,
        "PATCH",
        &format!("{VALIDATING}/operon-hook.demo.guard?"),
    )
    .await;
    assert!(applied.uri.contains("fieldManager=operon") && applied.uri.contains("force=true"));
    assert_eq!(applied.json()["webhooks"][0]["name"], "pods.example.com");
    let body = applied.json();
    applied.answer(200, body);
    expect(
        &mut api,
        "DELETE",
        &format!("{VALIDATING}/operon-hook.old.gone"),
    )
    .await
    .answer(
        200,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
    );
    expect(&mut api, "GET", &format!("{MUTATING}{selector}"))
        .await
        .answer(200, list("MutatingWebhookConfiguration", &[]));
    let seen = outcomes
        .wait_for(|o| o.contains_key(&key))
        .await
        .unwrap()
        .clone();
    assert_eq!(seen[&key], Ok(()));

    // Loading a new version: nothing is written or deleted.
    registry.loading(&key);
    expect(&mut api, "GET", &format!("{VALIDATING}{selector}"))
        .await
        .answer(
            200,
            list(
                "ValidatingWebhookConfiguration",
                &["operon-hook.demo.guard"],
            ),
        );
    expect(&mut api, "GET", &format!("{MUTATING}{selector}"))
        .await
        .answer(200, list("MutatingWebhookConfiguration", &[]));

    // Gone: deleted.
    registry.forget(&key);
    expect(&mut api, "GET", &format!("{VALIDATING}{selector}"))
        .await
        .answer(
            200,
            list(
                "ValidatingWebhookConfiguration",
                &["operon-hook.demo.guard"],
            ),
        );
    expect(
        &mut api,
        "DELETE",
        &format!("{VALIDATING}/operon-hook.demo.guard"),
    )
    .await
    .answer(
        200,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
    );
    expect(&mut api, "GET", &format!("{MUTATING}{selector}"))
        .await
        .answer(200, list("MutatingWebhookConfiguration", &[]));
    api.quiet().await;
}
