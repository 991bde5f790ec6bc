//! A Hook's admission webhooks: what its permissions let them intercept, their names
//! and configurations, the registry's exact requests to the API server (apply,
//! nothing while loading, delete), and a review routed to a Hook object's engine.

use super::*;
use crate::serve::webhook::owned::*;
use crate::serve::webhook::register::ClientTarget;
use crate::serve::webhook::register::{Registrar, Registration};
use operon_cluster::kube::mock::{MockApi, pair};
use operon_cluster::local::LocalCluster;
use operon_data::api::{HookPermissions, WatchPermission};
use operon_data::model::{AdmissionBindingConfig, HookConfig, LabelSelector, WebhookRule};
use operon_hooks::config;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

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
    let planned = plan(&own, &cluster, &pods, &[], &[]).await.unwrap();
    assert_eq!(planned.validating[0].namespaces, Some(vec!["demo".into()]));

    // Granted everywhere: every namespace.
    let all = permissions(&[("v1", "Pod", &["*"])]);
    let planned = plan(&all, &cluster, &pods, &[], &[]).await.unwrap();
    assert_eq!(planned.validating[0].namespaces, None);

    // A subresource counts as its resource; two grants add their namespaces.
    let status = validating(vec![binding(
        "status.example.com",
        vec![rule("", "pods/status")],
    )]);
    let two = permissions(&[("v1", "Pod", &["a"]), ("v1", "pods", &["b", "a"])]);
    let planned = plan(&two, &cluster, &status, &[], &[]).await.unwrap();
    assert_eq!(
        planned.validating[0].namespaces,
        Some(vec!["a".into(), "b".into()])
    );

    // A cluster-scoped kind has no namespace to keep to.
    let nodes = validating(vec![binding("nodes.example.com", vec![rule("", "nodes")])]);
    let planned = plan(
        &permissions(&[("v1", "Node", &[])]),
        &cluster,
        &nodes,
        &[],
        &[],
    )
    .await
    .unwrap();
    assert_eq!(planned.validating[0].namespaces, None);

    // Not granted, or named by a wildcard: refused, naming the binding.
    let refused = plan(
        &permissions(&[("v1", "ConfigMap", &["*"])]),
        &cluster,
        &pods,
        &[],
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
    let refused = plan(&all, &cluster, &wild, &[], &[]).await.unwrap_err();
    assert!(
        refused.message.contains("a wildcard would intercept"),
        "{}",
        refused.message
    );
    let deployments = validating(vec![binding(
        "apps.example.com",
        vec![rule("apps", "deployments")],
    )]);
    let refused = plan(&all, &cluster, &deployments, &[], &[])
        .await
        .unwrap_err();
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
    let planned = plan(&granted, &cluster, &both, &[], &[]).await.unwrap();
    assert_eq!(planned.validating[0].namespaces, Some(vec!["b".into()]));
    let apart = permissions(&[("v1", "Pod", &["a"]), ("v1", "ConfigMap", &["c"])]);
    let refused = plan(&apart, &cluster, &both, &[], &[]).await.unwrap_err();
    assert!(
        refused.message.contains("no common namespace"),
        "{}",
        refused.message
    );
}

fn configuration_name(namespace: &str, name: &str) -> String {
    Owner::Hook(namespace.to_owned(), name.to_owned()).configuration_name()
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
    assert!(
        operon_data::conventions::names::is_dns_subdomain(&name),
        "{name}"
    );
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
        &[],
    )
    .await
    .unwrap();
    let key = Owner::Hook("demo".to_owned(), "guard".to_owned());
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
                 "kind": kind, "metadata": {"name": n, "labels": {LABEL: "Hook"}}}))
                 .collect::<Vec<_>>()})
}

/// Answers the next request, which must be the labelled list of `path`'s configurations
/// (`VALIDATING` or `MUTATING`), with `names`.
async fn answer_list(api: &mut MockApi, path: &str, names: &[&str]) {
    let kind = if path == VALIDATING {
        "ValidatingWebhookConfiguration"
    } else {
        "MutatingWebhookConfiguration"
    };
    let selector = "?&labelSelector=operon.dev%2Fwebhooks-of+in+%28Hook%2CModule%29";
    expect(api, "GET", &format!("{path}{selector}"))
        .await
        .answer(200, list(kind, names));
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
    let key = Owner::Hook("demo".to_owned(), "guard".to_owned());
    let bindings = validating(vec![binding("pods.example.com", vec![rule("", "pods")])]);
    let planned = plan(
        &permissions(&[("v1", "Pod", &[])]),
        &LocalCluster::new(),
        &bindings,
        &[],
        &[],
    )
    .await
    .unwrap();
    let mut outcomes = registry.outcomes();

    // Serving, once every Hook is known: applied (server-side, as operon), and a stale
    // configuration of a Hook that is gone is deleted.
    registry.serving(&key, planned.clone());
    registry.synced("Hook");
    answer_list(&mut api, VALIDATING, &["operon-hook.old.gone"]).await;
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
    answer_list(&mut api, MUTATING, &[]).await;
    let seen = outcomes
        .wait_for(|o| o.contains_key(&key))
        .await
        .unwrap()
        .clone();
    assert_eq!(seen[&key], Ok(()));

    // Loading a new version: nothing is written or deleted.
    registry.loading(&key);
    answer_list(&mut api, VALIDATING, &["operon-hook.demo.guard"]).await;
    answer_list(&mut api, MUTATING, &[]).await;

    // Gone: deleted.
    registry.forget(&key);
    answer_list(&mut api, VALIDATING, &["operon-hook.demo.guard"]).await;
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
    answer_list(&mut api, MUTATING, &[]).await;
    api.quiet().await;
}

/// A review of a pod of namespace `demo` running `image`.
fn pod_review(image: &str) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
           "request": {"uid": "u-1", "operation": "CREATE", "namespace": "demo", "name": "web",
                       "kind": {"group": "", "version": "v1", "kind": "Pod"},
                       "resource": {"group": "", "version": "v1", "resource": "pods"},
                       "object": {"apiVersion": "v1", "kind": "Pod",
                                  "metadata": {"name": "web", "namespace": "demo"},
                                  "spec": {"containers": [{"name": "c", "image": image}]}}}})
}

/// POSTs `body` to `path` of `router`: the status and the JSON (or text) answer.
async fn post(router: &axum::Router, path: &str, body: &Value) -> (u16, Value) {
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;
    let request = axum::http::Request::post(path)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body.to_string()))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, value)
}

#[tokio::test]
async fn a_follower_answers_the_webhooks_of_a_hook_object_it_does_not_run() {
    use crate::controllers::AbortOnDrop;
    use operon_hooks::engine_set::EngineSet;
    use operon_hooks::load::HookLoader;
    use operon_hooks::metrics::Metrics;
    use operon_sandbox::{CallLimits, Sandbox, SandboxConfig};
    use operon_store::ModuleLocator;

    let modules = tempfile::tempdir().unwrap();
    std::fs::copy(operon_tests::ADMISSION, modules.path().join("guard.wasm")).unwrap();
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(operon_tests::test_cache_dir()),
        ..SandboxConfig::default()
    })
    .unwrap();
    let (client, mut api) = pair();
    let objects = super::super::HookObjects::new(
        client,
        ModuleLocator::new(Some(modules.path().to_owned())),
        HookLoader::new(sandbox, CallLimits::default(), false),
        Arc::new(LocalCluster::new()),
    );
    let engines = EngineSet::default();
    let metrics = Arc::new(Metrics::new().unwrap());
    // Follows: never leads in this test, so it writes no status and registers nothing.
    let (_leads, leading) = watch::channel(false);
    let reporting = super::super::Reporting::new(
        metrics.clone(),
        engines.clone(),
        Default::default(),
        leading,
    )
    .with_webhooks(Default::default(), true, false);
    let _running = AbortOnDrop::spawn(super::super::run(Arc::new(objects), reporting));
    let hook = json!({"apiVersion": "operon.dev/v1alpha1", "kind": "Hook",
        "metadata": {"name": "guard", "namespace": "demo", "uid": "u-1", "generation": 1,
                     "resourceVersion": "1"},
        "spec": {"module": "guard", "permissions": {"watch": [{"apiVersion": "v1", "kind": "Pod"}]}}});
    let mut watches = Vec::new();
    let serving = async {
        loop {
            let call = api.next().await;
            if call.uri.contains("watch=true") {
                watches.push(call);
            } else if call.method == "GET"
                && call.uri.starts_with("/apis/operon.dev/v1alpha1/hooks?")
            {
                call.answer(
                    200,
                    json!({"apiVersion": "operon.dev/v1alpha1", "kind": "HookList",
                    "metadata": {"resourceVersion": "1"}, "items": [hook.clone()]}),
                );
            } else {
                panic!("a follower sent {} {}", call.method, call.uri);
            }
        }
    };
    let loaded = async {
        while engines.engines().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        () = serving => unreachable!(),
        () = loaded => {}
        () = tokio::time::sleep(Duration::from_secs(60)) => panic!("the Hook did not load"),
    }
    let status = Arc::new(crate::serve::Status {
        metrics,
        engine: watch::Sender::new(None),
        engines,
        leading: watch::Sender::new(Some(false)),
        modules: None,
        module_settings: None,
        webhooks_registered: watch::Sender::new(true),
        forwarder: None,
        synchronized_once: Default::default(),
        reloads: Default::default(),
    });
    let router = crate::serve::webhook::router(
        status,
        crate::serve::webhook::WebhookKind::Admission,
        Duration::from_secs(5),
        operon_data::model::Enforcement::Deny,
    );
    let path = "/hook-object/demo/guard/validate/images.operon.dev";
    let (code, denied) = post(&router, path, &pod_review("docker.io/nginx:1.27")).await;
    assert_eq!(code, 200, "{denied}");
    assert_eq!(denied["response"]["allowed"], false, "{denied}");
    assert_eq!(denied["response"]["uid"], "u-1");
    let (_, allowed) = post(
        &router,
        path,
        &pod_review("registry.example.com/nginx:1.27"),
    )
    .await;
    assert_eq!(allowed["response"]["allowed"], true, "{allowed}");
    // A Hook this replica has not loaded: the API server applies the failure policy.
    let (code, text) = post(
        &router,
        "/hook-object/other/guard/validate/images.operon.dev",
        &pod_review("x"),
    )
    .await;
    assert_eq!(code, 503, "{text}");
    assert_eq!(text, "Hook other/guard is not loaded on this replica");
    // A binding the Hook does not have.
    let (code, _) = post(
        &router,
        "/hook-object/demo/guard/validate/nope.example.com",
        &pod_review("x"),
    )
    .await;
    assert_eq!(code, 404);
    drop(watches);
}

/// The validated conversion bindings of a hook converting `crds`.
fn conversion_bindings(crds: &[&str]) -> Vec<ConversionBinding> {
    let raw = HookConfig {
        kubernetes_conversion: crds
            .iter()
            .enumerate()
            .map(|(i, crd)| operon_data::model::ConversionBindingConfig {
                name: format!("convert-{i}"),
                crd_name: (*crd).to_owned(),
                conversions: vec![operon_data::model::ConversionRule {
                    from_version: "v1alpha1".into(),
                    to_version: "v1".into(),
                }],
                group: None,
                include_snapshots_from: vec![],
            })
            .collect(),
        ..HookConfig::default()
    };
    config::validate("Hook/demo/guard", &raw, &config::any_kind)
        .unwrap()
        .conversions
}

#[tokio::test]
async fn a_conversion_needs_its_kind_granted_in_every_namespace() {
    let cluster = LocalCluster::new();
    cluster
        .load_yaml(
            "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: c, namespace: demo}\n",
            "crontabs",
        )
        .unwrap();
    let crontabs = conversion_bindings(&["crontabs.stable.example.com"]);
    let everywhere = permissions(&[("stable.example.com/v1", "CronTab", &["*"])]);
    let planned = plan(&everywhere, &cluster, &[], &[], &crontabs)
        .await
        .unwrap();
    assert_eq!(planned.conversions, ["crontabs.stable.example.com"]);
    assert!(!planned.admits() && !planned.is_empty());
    let own = permissions(&[("stable.example.com/v1", "CronTab", &[])]);
    let refused = plan(&own, &cluster, &[], &[], &crontabs).await.unwrap_err();
    assert_eq!(refused.reason, "WebhookNotPermitted");
    assert!(
        refused
            .message
            .contains("converts every object of crontabs.stable.example.com"),
        "{}",
        refused.message
    );
    let none = permissions(&[("v1", "Pod", &["*"])]);
    let refused = plan(&none, &cluster, &[], &[], &crontabs)
        .await
        .unwrap_err();
    assert!(
        refused.message.contains(
            "intercepts crontabs.stable.example.com, but spec.permissions.watch has no entry"
        ),
        "{}",
        refused.message
    );
}

fn serving_conversions(crds: &[&str]) -> OwnedWebhooks {
    OwnedWebhooks {
        conversions: crds.iter().map(|c| (*c).to_owned()).collect(),
        ..OwnedWebhooks::default()
    }
}

#[tokio::test]
async fn a_crds_conversion_goes_to_one_hook_and_is_given_back_when_it_goes() {
    let (client, mut api) = pair();
    let registry = WebhookRegistry::default();
    let mut registration = registration();
    registration.conversion_ca = b"CA2".to_vec();
    let registrar = Registrar::new(client, registration);
    let _running =
        crate::controllers::AbortOnDrop::spawn(keep_registered(registry.clone(), registrar));
    let first = Owner::Hook("a".to_owned(), "convert".to_owned());
    let second = Owner::Hook("b".to_owned(), "convert".to_owned());
    let crd = "crontabs.stable.example.com";
    let mut outcomes = registry.outcomes();
    registry.serving(&first, serving_conversions(&[crd]));
    registry.serving(&second, serving_conversions(&[crd]));
    registry.synced("Hook");
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    answer_list(&mut api, VALIDATING, &[]).await;
    answer_list(&mut api, MUTATING, &[]).await;
    let applied = expect(&mut api, "PATCH", &format!("{crds}/{crd}?")).await;
    let body = applied.json();
    assert_eq!(
        body["spec"]["conversion"]["webhook"]["clientConfig"]["url"],
        "https://127.0.0.1:9681/hook-object/a/convert/convert/crontabs.stable.example.com"
    );
    applied.answer(200, body);
    // The first scan: a CRD a Hook that is gone converted is given back.
    let stale = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "names": {"plural": "widgets", "kind": "Widget"}, "scope": "Namespaced",
                 "versions": [],
                 "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                     "clientConfig": {"service": {"namespace": "operon", "name": "operon-webhooks",
                         "path": "/hook-object/old/gone/convert/widgets.example.com"}}}}}});
    expect(&mut api, "GET", crds).await.answer(
        200,
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinitionList",
                            "metadata": {"resourceVersion": "1"}, "items": [stale]}),
    );
    let released = expect(&mut api, "PATCH", &format!("{crds}/widgets.example.com?")).await;
    assert_eq!(
        released.json(),
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "widgets.example.com"}})
    );
    let body = released.json();
    released.answer(200, body);
    let seen = outcomes
        .wait_for(|o| o.contains_key(&first) && o.contains_key(&second))
        .await
        .unwrap()
        .clone();
    assert_eq!(seen[&first], Ok(()));
    assert_eq!(
        seen[&second],
        Err("CustomResourceDefinition crontabs.stable.example.com has one conversion webhook, and Hook a/convert has it".to_owned())
    );

    // The first Hook goes: the second gets the conversion.
    registry.forget(&first);
    answer_list(&mut api, VALIDATING, &[]).await;
    answer_list(&mut api, MUTATING, &[]).await;
    let applied = expect(&mut api, "PATCH", &format!("{crds}/{crd}?")).await;
    let body = applied.json();
    assert_eq!(
        body["spec"]["conversion"]["webhook"]["clientConfig"]["url"],
        "https://127.0.0.1:9681/hook-object/b/convert/convert/crontabs.stable.example.com"
    );
    applied.answer(200, body);

    // And when it goes too, the CRD's conversion is given back.
    registry.forget(&second);
    answer_list(&mut api, VALIDATING, &[]).await;
    answer_list(&mut api, MUTATING, &[]).await;
    let released = expect(&mut api, "PATCH", &format!("{crds}/{crd}?")).await;
    assert!(released.json().get("spec").is_none());
    let body = released.json();
    released.answer(200, body);
    api.quiet().await;
}
