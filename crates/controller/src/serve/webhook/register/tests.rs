//! Tests of webhook registration: the configurations written, and the requests sent
//! for them to a mock API server.

use super::*;
use futures::future::BoxFuture;
use http_body_util::BodyExt as _;
use operon_data::model::{
    AdmissionBindingConfig, ConversionBindingConfig, ConversionRule, HookConfig, HookInput,
    MatchCondition, WebhookRule,
};
use operon_hooks::config::{self, ValidConfig};
use operon_hooks::{Hook, HookError, HookRun};
use std::sync::Arc;
use std::time::Duration;

struct Declares(HookConfig);

impl Hook for Declares {
    fn name(&self) -> &str {
        "policies/images.sh"
    }
    fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
        Box::pin(async move { Ok(self.0.clone()) })
    }
    fn handle(&self, _: HookInput, _: Duration) -> BoxFuture<'_, (HookRun, HookInput)> {
        unreachable!("registration never runs a hook")
    }
}

fn hooks(validating: bool) -> Vec<LoadedHook> {
    let mut raw = HookConfig::default();
    if validating {
        raw.kubernetes_validating = vec![AdmissionBindingConfig {
            name: "images.operon.dev".into(),
            rules: vec![WebhookRule {
                operations: vec!["CREATE".into(), "UPDATE".into()],
                api_groups: vec![String::new()],
                api_versions: vec!["v1".into()],
                resources: vec!["pods".into()],
                scope: Some("Namespaced".into()),
            }],
            failure_policy: Some("Ignore".into()),
            label_selector: Some(LabelSelector {
                match_labels: vec![("team".into(), "a".into())],
                match_expressions: vec![],
            }),
            namespace: None,
            timeout_seconds: Some(5),
            ..AdmissionBindingConfig::default()
        }];
        raw.kubernetes_mutating = vec![AdmissionBindingConfig {
            name: "defaults.operon.dev".into(),
            rules: vec![WebhookRule {
                operations: vec!["CREATE".into()],
                api_groups: vec!["apps".into()],
                api_versions: vec!["v1".into()],
                resources: vec!["deployments".into()],
                scope: None,
            }],
            side_effects: Some("NoneOnDryRun".into()),
            match_conditions: vec![MatchCondition {
                name: "not-system".into(),
                expression: "!request.namespace.startsWith('kube-')".into(),
            }],
            reinvocation_policy: Some("IfNeeded".into()),
            ..AdmissionBindingConfig::default()
        }];
    }
    raw.kubernetes_conversion = vec![ConversionBindingConfig {
        name: "widgets".into(),
        crd_name: "widgets.example.com".into(),
        conversions: vec![ConversionRule {
            from_version: "example.com/v1".into(),
            to_version: "example.com/v2".into(),
        }],
        group: None,
        include_snapshots_from: vec![],
    }];
    let config: ValidConfig =
        config::validate("policies/images.sh", &raw, &config::any_kind).unwrap();
    vec![LoadedHook {
        hook: Arc::new(Declares(raw)),
        config,
    }]
}

fn registration() -> Registration {
    Registration {
        validating_configuration: "operon-hooks".into(),
        mutating_configuration: "operon-mutating".into(),
        admission: ClientTarget::Service {
            namespace: "operon".into(),
            name: "operon-webhooks".into(),
            port: 443,
        },
        conversion: ClientTarget::Url("https://127.0.0.1:9681/".into()),
        admission_ca: b"CA1".to_vec(),
        conversion_ca: b"CA2".to_vec(),
        own_resources: false,
    }
}

#[test]
fn operons_own_resources_come_first_in_the_validating_configuration() {
    let registration = Registration {
        own_resources: true,
        ..registration()
    };
    let desired = validating_configuration(&[], &registration).expect("own webhook alone");
    assert_eq!(desired["webhooks"].as_array().unwrap().len(), 1);
    let own = &desired["webhooks"][0];
    assert_eq!(own["name"], "resources.operon.dev");
    assert_eq!(
        own["clientConfig"]["service"],
        json!({"namespace": "operon", "name": "operon-webhooks", "port": 443, "path": "/operon/validate"})
    );
    let with_hooks = validating_configuration(&hooks(true), &registration).unwrap();
    assert_eq!(with_hooks["webhooks"][0]["name"], "resources.operon.dev");
    assert!(with_hooks["webhooks"].as_array().unwrap().len() > 1);
}

#[test]
fn one_webhook_per_validating_binding_with_its_fields() {
    let desired = validating_configuration(&hooks(true), &registration()).unwrap();
    assert_eq!(
        desired["webhooks"],
        json!([{
            "name": "images.operon.dev",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Ignore",
            "matchPolicy": "Equivalent",
            "timeoutSeconds": 5,
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""],
                       "apiVersions": ["v1"], "resources": ["pods"], "scope": "Namespaced"}],
            "objectSelector": {"matchLabels": {"team": "a"}},
            "clientConfig": {"service": {"namespace": "operon", "name": "operon-webhooks", "port": 443,
                                         "path": "/validate/policies%2Fimages.sh/images.operon.dev"},
                             "caBundle": "Q0Ex"},
        }])
    );
    assert!(validating_configuration(&hooks(false), &registration()).is_none());
    let mutating = mutating_configuration(&hooks(true), &registration()).unwrap();
    assert_eq!(mutating["kind"], "MutatingWebhookConfiguration");
    assert_eq!(mutating["metadata"]["name"], "operon-mutating");
    assert_eq!(
        mutating["webhooks"],
        json!([{
            "name": "defaults.operon.dev",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "NoneOnDryRun",
            "failurePolicy": "Fail",
            "matchPolicy": "Equivalent",
            "timeoutSeconds": 10,
            "rules": [{"operations": ["CREATE"], "apiGroups": ["apps"],
                       "apiVersions": ["v1"], "resources": ["deployments"]}],
            "matchConditions": [{"name": "not-system",
                                 "expression": "!request.namespace.startsWith('kube-')"}],
            "reinvocationPolicy": "IfNeeded",
            "clientConfig": {"service": {"namespace": "operon", "name": "operon-webhooks", "port": 443,
                                         "path": "/mutate/policies%2Fimages.sh/defaults.operon.dev"},
                             "caBundle": "Q0Ex"},
        }])
    );
    assert!(mutating_configuration(&hooks(false), &registration()).is_none());
    let patches = conversion_patches(&hooks(false), &registration());
    assert_eq!(patches[0].0, "widgets.example.com");
    assert_eq!(
        patches[0].1["spec"]["conversion"]["webhook"]["clientConfig"],
        json!({"url": "https://127.0.0.1:9681/convert/widgets.example.com", "caBundle": "Q0Ey"})
    );
}

type Seen = Vec<(String, String, Option<String>, bytes::Bytes)>;

/// CRDs as the API server lists them: one this engine converts, one whose
/// conversion it registered earlier for a hook that is gone, one whose conversion
/// another manager set.
fn crd_list() -> Value {
    let crd = |name: &str, manager: &str, conversion: bool| {
        let fields = if conversion {
            json!({"f:spec": {"f:conversion": {"f:strategy": {}, "f:webhook": {}}}})
        } else {
            json!({"f:metadata": {"f:labels": {}}})
        };
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": name, "managedFields": [
                   {"manager": manager, "operation": "Apply", "apiVersion": "apiextensions.k8s.io/v1",
                    "fieldsType": "FieldsV1", "fieldsV1": fields}]},
               "spec": {"group": "example.com", "scope": "Namespaced",
                        "names": {"plural": "x", "kind": "X"}, "versions": []}})
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinitionList",
           "metadata": {}, "items": [
               crd("widgets.example.com", "operon", true),
               crd("gadgets.example.com", "operon", true),
               crd("labelled.example.com", "operon", false),
               crd("foreign.example.com", "kubectl", true)]})
}

/// A mock API server answering `requests` requests (GET /version as Kubernetes
/// 1.`minor`, 404 to deletes, 200 otherwise); returns what it saw.
fn mock_server(requests: usize, minor: u32) -> (Client, tokio::task::JoinHandle<Seen>) {
    mock_server_without(requests, minor, None)
}

/// [`mock_server`] where CRD `missing` does not exist: an apply to it is refused as an
/// invalid creation (422) and a read of it is 404.
fn mock_server_without(
    requests: usize,
    minor: u32,
    missing: Option<&'static str>,
) -> (Client, tokio::task::JoinHandle<Seen>) {
    let (service, mut handle) = tower_test::mock::pair::<
        http::Request<::kube::client::Body>,
        http::Response<::kube::client::Body>,
    >();
    let client = Client::new(service, "default");
    let server = tokio::spawn(async move {
        let mut seen = Vec::new();
        for _ in 0..requests {
            let (request, respond) = handle.next_request().await.unwrap();
            let (parts, body) = request.into_parts();
            let body = body.collect().await.unwrap().to_bytes();
            let content_type = parts
                .headers
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_owned());
            let (status, answer) = if parts.uri.path() == "/version" {
                (
                    200,
                    json!({"major": "1", "minor": minor.to_string(),
                           "gitVersion": format!("v1.{minor}.0"), "gitCommit": "",
                           "gitTreeState": "clean", "buildDate": "", "goVersion": "",
                           "compiler": "gc", "platform": "linux/amd64"}),
                )
            } else if parts.method == "GET"
                && parts.uri.path() == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
            {
                (200, crd_list())
            } else if let Some(crd) = missing.filter(|crd| {
                parts.uri.path()
                    == format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
            }) {
                let code = if parts.method == "GET" { 404 } else { 422 };
                (
                    code,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "code": code, "reason": if code == 404 { "NotFound" } else { "Invalid" },
                           "message": format!("CustomResourceDefinition {crd:?} is invalid or not found")}),
                )
            } else if parts.method == "DELETE" {
                (
                    404,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                             "code": 404, "reason": "NotFound", "message": "not found"}),
                )
            } else {
                (200, json!({"metadata": {"name": "x"}}))
            };
            seen.push((
                parts.method.to_string(),
                parts.uri.to_string(),
                content_type,
                body,
            ));
            respond.send_response(
                http::Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(::kube::client::Body::from(
                        serde_json::to_vec(&answer).unwrap(),
                    ))
                    .unwrap(),
            );
        }
        seen
    });
    (client, server)
}

#[tokio::test]
async fn match_conditions_are_refused_before_kubernetes_1_28_naming_the_binding() {
    let (client, server) = mock_server(1, 24);
    let error = register(&client, &hooks(true), &registration())
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "hook policies/images.sh binding \"defaults.operon.dev\" declares matchConditions, \
         which this API server (v1.24.0) does not support (Kubernetes 1.28 and later evaluate \
         them): remove them from the binding or upgrade the cluster"
    );
    let seen = server.await.unwrap();
    assert_eq!(
        (seen[0].0.as_str(), seen[0].1.as_str()),
        ("GET", "/version")
    );
}

#[tokio::test]
async fn the_configurations_are_applied_server_side_and_stale_ones_removed() {
    let (client, server) = mock_server(11, 30);
    register(&client, &hooks(true), &registration())
        .await
        .unwrap();
    register(&client, &hooks(false), &registration())
        .await
        .unwrap();
    let seen = server.await.unwrap();
    let apply = "application/apply-patch+yaml";
    // matchConditions need Kubernetes 1.28: the version is asked first.
    assert_eq!(
        (seen[0].0.as_str(), seen[0].1.as_str()),
        ("GET", "/version")
    );
    assert_eq!(
        (seen[1].0.as_str(), seen[1].1.as_str(), seen[1].2.as_deref()),
        (
            "PATCH",
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/operon-hooks?&force=true&fieldManager=operon",
            Some(apply)
        )
    );
    let body: Value = serde_json::from_slice(&seen[1].3).unwrap();
    assert_eq!(
        body,
        validating_configuration(&hooks(true), &registration()).unwrap()
    );
    assert_eq!(
        (seen[2].0.as_str(), seen[2].1.as_str(), seen[2].2.as_deref()),
        (
            "PATCH",
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/operon-mutating?&force=true&fieldManager=operon",
            Some(apply)
        )
    );
    let body: Value = serde_json::from_slice(&seen[2].3).unwrap();
    assert_eq!(
        body,
        mutating_configuration(&hooks(true), &registration()).unwrap()
    );
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    assert_eq!(
        (seen[3].0.as_str(), seen[3].1.as_str()),
        (
            "PATCH",
            format!("{crds}/widgets.example.com?&force=true&fieldManager=operon").as_str()
        )
    );
    // The conversion this engine applied for a hook that is gone is given back:
    // only what this manager applied, only for CRDs no hook converts.
    assert_eq!(
        (seen[4].0.as_str(), seen[4].1.as_str()),
        ("GET", format!("{crds}?").as_str())
    );
    assert_eq!(
        (seen[5].0.as_str(), seen[5].1.as_str(), seen[5].2.as_deref()),
        (
            "PATCH",
            format!("{crds}/gadgets.example.com?&force=true&fieldManager=operon").as_str(),
            Some(apply)
        )
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&seen[5].3).unwrap(),
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "gadgets.example.com"}})
    );
    // The hook set without admission bindings: both configurations go.
    assert_eq!(
        (seen[6].0.as_str(), seen[6].1.as_str()),
        (
            "DELETE",
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/operon-hooks?"
        )
    );
    assert_eq!(
        (seen[7].0.as_str(), seen[7].1.as_str()),
        (
            "DELETE",
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/operon-mutating?"
        )
    );
    assert_eq!(seen[8].0, "PATCH");
    assert_eq!(seen[9].0, "GET");
    assert!(
        seen[10].1.contains("/gadgets.example.com?"),
        "{}",
        seen[10].1
    );
}

#[tokio::test]
async fn a_missing_crd_is_named_and_the_rest_registered() {
    // version, validating, mutating, the refused apply, the CRD read, the CRD list, the
    // stale conversion given back.
    let (client, server) = mock_server_without(7, 30, Some("widgets.example.com"));
    let error = register(&client, &hooks(true), &registration())
        .await
        .unwrap_err();
    assert!(error.may_pass());
    assert_eq!(
        error.to_string(),
        "CustomResourceDefinitions named by conversion bindings do not exist: widgets.example.com"
    );
    let seen = server.await.unwrap();
    let calls = calls(&seen);
    assert_eq!(calls[3..], missing_crd_calls());
    assert!(
        calls[1].1.contains("validatingwebhookconfigurations"),
        "{calls:?}"
    );
    assert!(
        calls[2].1.contains("mutatingwebhookconfigurations"),
        "{calls:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn while_a_crd_is_missing_only_its_conversion_is_tried_again() {
    // The try 2 s after the first: the refused apply, the CRD read, the CRD list, the
    // stale conversion given back. No GET /version and no admission configuration.
    let (client, server) = mock_server_without(4, 30, Some("widgets.example.com"));
    let registrar = Registrar::new(client, registration());
    let first = Err(RegisterError::CrdsMissing {
        crds: vec!["widgets.example.com".to_owned()],
    });
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let registered = std::sync::atomic::AtomicUsize::new(0);
    let hooks = hooks(true);
    let keeping = registrar.keep_registered(&hooks, first, stopped, || {
        registered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    let stopping = async {
        let seen = server.await.unwrap();
        stop.send(true).unwrap();
        seen
    };
    let ((), seen) = tokio::join!(keeping, stopping);
    assert_eq!(calls(&seen), missing_crd_calls());
    // The admission webhooks stayed in place: readiness is told so again.
    assert_eq!(registered.load(std::sync::atomic::Ordering::Relaxed), 1);
}

/// Each request of `seen` as (method, URI).
fn calls(seen: &Seen) -> Vec<(String, String)> {
    (seen.iter())
        .map(|(method, uri, _, _)| (method.clone(), uri.clone()))
        .collect()
}

/// The requests of a registration of [`hooks`]' conversions while CRD
/// widgets.example.com is missing: the refused apply, the CRD read, the CRD list, and
/// the stale conversion of gadgets.example.com given back.
fn missing_crd_calls() -> Vec<(String, String)> {
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    [
        (
            "PATCH",
            format!("{crds}/widgets.example.com?&force=true&fieldManager=operon"),
        ),
        ("GET", format!("{crds}/widgets.example.com")),
        ("GET", format!("{crds}?")),
        (
            "PATCH",
            format!("{crds}/gadgets.example.com?&force=true&fieldManager=operon"),
        ),
    ]
    .into_iter()
    .map(|(method, uri)| (method.to_owned(), uri))
    .collect()
}
