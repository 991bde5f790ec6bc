//! The local API's verbs through HTTP requests to its router: authentication,
//! discovery, get, list, create, update, delete, selectors, the status subresource,
//! `dryRun` and what it refuses; and one request over TLS with the kubeconfig it writes.

use super::super::LocalCluster;
use super::router;
use crate::{Cluster, Resource, Selector};
use axum::Router;
use http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;
use tower::ServiceExt as _;

pub(super) const TOKEN: &str = "s3cret";

pub(super) const FIXTURES: &str = "\
apiVersion: v1
kind: Namespace
metadata: {name: default}
status: {phase: Active}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
status: {phase: Active}
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: default, labels: {copy: 'yes'}}
type: Opaque
data: {password: cGFzcw==}
---
apiVersion: v1
kind: Secret
metadata: {name: other, namespace: team-a}
type: kubernetes.io/tls
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
  versions: [{name: v1, served: true, storage: true, subresources: {status: {}}}]
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, namespace: default}
spec: {size: 1, tags: [a, b]}
";

pub(super) struct Api {
    pub(super) router: Router,
    pub(super) cluster: Arc<LocalCluster>,
}

pub(super) fn api() -> Api {
    let cluster = Arc::new(LocalCluster::new());
    cluster.load_yaml(FIXTURES, "fixtures").unwrap();
    Api {
        router: router(cluster.clone(), TOKEN, "127.0.0.1:6443".parse().unwrap()),
        cluster,
    }
}

impl Api {
    /// Sends a request with the token and returns the code and the JSON body (the
    /// lines of a watch as an array).
    pub(super) async fn call(
        &self,
        method: Method,
        uri: &str,
        content_type: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let body = match body {
            Some(Value::String(text)) => text,
            Some(value) => value.to_string(),
            None => String::new(),
        };
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("content-type", content_type)
            .header("user-agent", "kubectl/v1.32.4 (linux/amd64)")
            .body(axum::body::Body::from(body))
            .unwrap();
        self.send(request).await
    }

    pub(super) async fn send(&self, request: Request<axum::body::Body>) -> (StatusCode, Value) {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let code = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        let value = serde_json::from_str(&text).unwrap_or_else(|_| {
            Value::Array(
                text.lines()
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect(),
            )
        });
        (code, value)
    }

    pub(super) async fn get(&self, uri: &str) -> (StatusCode, Value) {
        self.call(Method::GET, uri, "application/json", None).await
    }

    /// The stored object, as the local cluster holds it.
    pub(super) fn stored(&self, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        self.cluster.objects().into_iter().find(|o| {
            o["kind"] == kind
                && o["metadata"]["name"] == name
                && o["metadata"]["namespace"].as_str().unwrap_or_default() == namespace
        })
    }
}

pub(super) fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn requests_without_the_token_get_a_401_status() {
    let api = api();
    let request = Request::get("/api/v1/secrets")
        .header("authorization", "Bearer wrong")
        .body(axum::body::Body::empty())
        .unwrap();
    let (code, status) = api.send(request).await;
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "Unauthorized");
    assert_eq!(status["code"], 401);
}

#[tokio::test]
async fn discovery_lists_versions_groups_and_resources() {
    let api = api();
    let (_, version) = api.get("/version").await;
    assert_eq!(version["major"], "1");
    let (_, core) = api.get("/api").await;
    assert_eq!(core["versions"], json!(["v1"]));
    let (_, groups) = api.get("/apis").await;
    let group_names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert!(group_names.contains(&"apps"), "{group_names:?}");
    assert!(group_names.contains(&"example.com"), "{group_names:?}");
    let (_, v1) = api.get("/api/v1").await;
    let resources = v1["resources"].as_array().unwrap();
    let pods = resources.iter().find(|r| r["name"] == "pods").unwrap();
    assert_eq!(pods["namespaced"], true);
    assert_eq!(pods["shortNames"], json!(["po"]));
    assert!(resources.iter().any(|r| r["name"] == "pods/status"));
    let (_, widgets) = api.get("/apis/example.com/v1").await;
    assert_eq!(widgets["resources"][0]["kind"], "Widget");
    let (code, _) = api.get("/apis/nothing.io/v1").await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    let (_, openapi) = api.get("/openapi/v3/api/v1").await;
    let path = &openapi["paths"]["/api/v1/namespaces/{namespace}/secrets/{name}"]["patch"];
    assert_eq!(path["x-kubernetes-group-version-kind"]["kind"], "Secret");
}

#[tokio::test]
async fn get_and_list_with_label_and_field_selectors() {
    let api = api();
    let (code, secret) = api.get("/api/v1/namespaces/default/secrets/creds").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(secret["data"]["password"], "cGFzcw==");
    let (code, status) = api.get("/api/v1/namespaces/default/secrets/nope").await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(status["message"], "secrets \"nope\" not found");
    assert_eq!(status["reason"], "NotFound");
    assert_eq!(status["details"]["kind"], "secrets");

    let (_, all) = api.get("/api/v1/secrets").await;
    assert_eq!(all["kind"], "SecretList");
    assert_eq!(names(&all), ["creds", "other"]);
    assert!(all["metadata"]["resourceVersion"].as_str().is_some());
    let (_, default) = api.get("/api/v1/namespaces/default/secrets").await;
    assert_eq!(names(&default), ["creds"]);
    for (selector, expected) in [
        ("labelSelector=copy%3Dyes", vec!["creds"]),
        ("labelSelector=copy%21%3Dyes", vec!["other"]),
        ("labelSelector=copy+in+(yes,no)", vec!["creds"]),
        ("labelSelector=%21copy", vec!["other"]),
        ("fieldSelector=type%3Dkubernetes.io/tls", vec!["other"]),
        ("fieldSelector=metadata.name%3Dcreds", vec!["creds"]),
        (
            "fieldSelector=metadata.namespace%21%3Ddefault",
            vec!["other"],
        ),
    ] {
        let (code, list) = api.get(&format!("/api/v1/secrets?{selector}")).await;
        assert_eq!(code, StatusCode::OK, "{selector}: {list}");
        assert_eq!(names(&list), expected, "{selector}");
    }
    let (code, status) = api
        .get("/api/v1/secrets?fieldSelector=data.password%3Dx")
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(
        status["message"],
        "field label not supported: data.password"
    );

    let (_, page) = api.get("/api/v1/secrets?limit=1").await;
    assert_eq!(names(&page), ["creds"]);
    let token = page["metadata"]["continue"].as_str().unwrap();
    let (_, rest) = api
        .get(&format!("/api/v1/secrets?limit=1&continue={token}"))
        .await;
    assert_eq!(names(&rest), ["other"]);
    assert!(rest["metadata"].get("continue").is_none());
}

#[tokio::test]
async fn create_with_a_name_or_generate_name_and_refusals() {
    let api = api();
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "new"}, "data": {"a": "Yg=="}});
    let (code, created) = api
        .call(
            Method::POST,
            "/api/v1/namespaces/team-a/secrets",
            "application/json",
            Some(secret.clone()),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(created["metadata"]["namespace"], "team-a");
    assert!(created["metadata"]["uid"].as_str().is_some());
    assert_eq!(
        created["metadata"]["managedFields"][0]["manager"],
        "kubectl"
    );
    assert!(api.stored("Secret", "team-a", "new").is_some());

    let (code, status) = api
        .call(
            Method::POST,
            "/api/v1/namespaces/team-a/secrets",
            "application/json",
            Some(secret),
        )
        .await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert_eq!(status["reason"], "AlreadyExists");
    assert_eq!(status["message"], "secrets \"new\" already exists");

    let generated = json!({"metadata": {"generateName": "job-"}, "data": {}});
    let (code, created) = api
        .call(
            Method::POST,
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            Some(generated),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let name = created["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("job-") && name.len() == 9, "{name}");
    assert_eq!(created["kind"], "ConfigMap");

    let (code, status) = api
        .call(
            Method::POST,
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            Some(json!({"metadata": {}})),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(status["reason"], "Invalid");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("name or generateName is required")
    );

    let wrong = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "team-a"}});
    let (code, status) = api
        .call(
            Method::POST,
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            Some(wrong),
        )
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{status}");

    let (code, status) = api
        .call(
            Method::POST,
            "/api/v1/namespaces/default/configmaps",
            "application/vnd.kubernetes.protobuf",
            Some(json!({})),
        )
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("protobuf envelope"),
        "{status}"
    );

    let (code, status) = api
        .call(
            Method::POST,
            "/api/v1/namespaces/default/configmaps",
            "application/cbor",
            Some(json!({})),
        )
        .await;
    assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(status["reason"], "UnsupportedMediaType");
}

#[tokio::test]
async fn update_with_a_stale_resource_version_is_a_conflict() {
    let api = api();
    let (_, mut secret) = api.get("/api/v1/namespaces/default/secrets/creds").await;
    let stale = secret.clone();
    secret["data"]["password"] = "bmV3".into();
    let uri = "/api/v1/namespaces/default/secrets/creds";
    let (code, updated) = api
        .call(Method::PUT, uri, "application/json", Some(secret))
        .await;
    assert_eq!(code, StatusCode::OK, "{updated}");
    assert_ne!(
        updated["metadata"]["resourceVersion"],
        stale["metadata"]["resourceVersion"]
    );
    assert_eq!(
        api.stored("Secret", "default", "creds").unwrap()["data"]["password"],
        "bmV3"
    );

    let (code, status) = api
        .call(Method::PUT, uri, "application/json", Some(stale.clone()))
        .await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(
        status["message"],
        "Operation cannot be fulfilled on secrets \"creds\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert_eq!(status["details"]["name"], "creds");

    let mut unconditional = stale;
    unconditional["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let (code, _) = api
        .call(Method::PUT, uri, "application/json", Some(unconditional))
        .await;
    assert_eq!(code, StatusCode::OK);

    let (code, status) = api
        .call(
            Method::PUT,
            "/api/v1/namespaces/default/secrets/nope",
            "application/json",
            Some(json!({"metadata": {"name": "nope"}})),
        )
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{status}");
}

#[tokio::test]
async fn the_status_subresource_changes_only_the_status() {
    let api = api();
    let uri = "/apis/example.com/v1/namespaces/default/widgets/w1";
    let (_, mut widget) = api.get(uri).await;
    widget["spec"]["size"] = 5.into();
    widget["status"] = json!({"ready": true});
    let (code, _) = api
        .call(
            Method::PUT,
            &format!("{uri}/status"),
            "application/json",
            Some(widget.clone()),
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    let stored = api.stored("Widget", "default", "w1").unwrap();
    assert_eq!(stored["status"]["ready"], true);
    assert_eq!(stored["spec"]["size"], 1);

    widget["status"] = json!({"ready": false});
    widget["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let (code, _) = api
        .call(Method::PUT, uri, "application/json", Some(widget))
        .await;
    assert_eq!(code, StatusCode::OK);
    let stored = api.stored("Widget", "default", "w1").unwrap();
    assert_eq!(stored["status"]["ready"], true);
    assert_eq!(stored["spec"]["size"], 5);

    let (code, status) = api
        .get("/api/v1/namespaces/default/secrets/creds/status")
        .await;
    assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED);
    assert!(
        status["message"].as_str().unwrap().contains("\"status\""),
        "{status}"
    );
}

#[tokio::test]
async fn delete_one_object_and_a_collection_by_selector() {
    let api = api();
    let uri = "/api/v1/namespaces/default/secrets/creds";
    let (code, status) = api
        .call(
            Method::DELETE,
            uri,
            "application/json",
            Some(json!({"preconditions": {"resourceVersion": "1"}})),
        )
        .await;
    assert_eq!(code, StatusCode::CONFLICT, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("Precondition failed")
    );
    let (code, status) = api
        .call(Method::DELETE, uri, "application/json", None)
        .await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(status["status"], "Success");
    assert!(api.stored("Secret", "default", "creds").is_none());
    let (code, status) = api
        .call(Method::DELETE, uri, "application/json", None)
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(status["message"], "secrets \"creds\" not found");

    for name in ["a", "b", "c"] {
        let labels = if name == "c" {
            json!({})
        } else {
            json!({"app": "x"})
        };
        let cm = json!({"metadata": {"name": name, "labels": labels}});
        api.call(
            Method::POST,
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            Some(cm),
        )
        .await;
    }
    let (code, deleted) = api
        .call(
            Method::DELETE,
            "/api/v1/namespaces/default/configmaps?labelSelector=app%3Dx",
            "application/json",
            None,
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(names(&deleted), ["a", "b"]);
    let (_, left) = api.get("/api/v1/namespaces/default/configmaps").await;
    assert_eq!(names(&left), ["c"]);
}

#[tokio::test]
async fn dry_run_stores_nothing_and_unknown_requests_are_named() {
    let api = api();
    let cm = json!({"metadata": {"name": "dry"}});
    let (code, created) = api
        .call(
            Method::POST,
            "/api/v1/namespaces/default/configmaps?dryRun=All",
            "application/json",
            Some(cm),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED);
    assert_eq!(created["metadata"]["name"], "dry");
    assert!(api.stored("ConfigMap", "default", "dry").is_none());
    let (code, _) = api
        .call(
            Method::DELETE,
            "/api/v1/namespaces/default/secrets/creds?dryRun=All",
            "application/json",
            None,
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    assert!(api.stored("Secret", "default", "creds").is_some());
    let (code, _) = api
        .get("/api/v1/namespaces/default/configmaps?dryRun=Some")
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);

    let (code, status) = api.get("/api/v1/namespaces/default/pods/p/log").await;
    assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(
        status["message"],
        "the local API server does not implement GET /api/v1/namespaces/default/pods/p/log: the subresource \"log\" of pods"
    );
    let (code, status) = api
        .call(
            Method::POST,
            "/api/v1/namespaces/default/secrets/creds",
            "application/json",
            Some(json!({})),
        )
        .await;
    assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED);
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("the local API server does not implement POST")
    );
    let (code, _) = api.get("/apis/apps/v1/namespaces/default/nothings").await;
    assert_eq!(code, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn writes_are_seen_by_the_clusters_own_watches() {
    let api = api();
    let resource = api.cluster.resolve(Some("v1"), "ConfigMap").unwrap();
    let (_, mut events) = api
        .cluster
        .list_and_watch(&resource, &Selector::default())
        .await
        .unwrap();
    let cm = json!({"metadata": {"name": "seen"}, "data": {"k": "v"}});
    api.call(
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        Some(cm),
    )
    .await;
    let event = events.try_recv().unwrap();
    assert_eq!(event.kind, operon_data::model::WatchEvent::Added);
    assert_eq!(event.object["metadata"]["name"], "seen");
    let _: &Resource = &resource;
}

#[tokio::test]
async fn kube_rs_reads_through_tls_with_the_written_kubeconfig() {
    let cluster = Arc::new(LocalCluster::new());
    cluster.load_yaml(FIXTURES, "fixtures").unwrap();
    let api = super::LocalApi::start(cluster).await.unwrap();
    let text = std::fs::read_to_string(api.kubeconfig()).unwrap();
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&text).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client.clone(), "default");
    let creds = secrets.get("creds").await.unwrap();
    assert_eq!(creds.metadata.labels.unwrap()["copy"], "yes");
    let missing = secrets.get("nope").await.unwrap_err();
    assert!(
        missing.to_string().contains("secrets \"nope\" not found"),
        "{missing}"
    );
}
