//! Tests of the kube layer against tower-test mock services: every request's method,
//! path, query, content type and body is asserted, and the answers are what an API
//! server sends.

mod apply;
mod watch;

use super::KubeCluster;
use ::kube::Client;
use ::kube::client::Body;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use tower_test::mock::{Handle, SendResponse};

type MockHandle = Handle<Request<Body>, Response<Body>>;

/// A cluster over a mock service, and the server side of that mock.
fn mock() -> (KubeCluster, Server) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    (KubeCluster::new(client), Server { handle })
}

/// The API server's side: takes the next request, answers discovery itself.
struct Server {
    handle: MockHandle,
}

/// One request the client sent.
struct Call {
    method: String,
    uri: String,
    content_type: Option<String>,
    body: Vec<u8>,
    respond: SendResponse<Response<Body>>,
}

impl Call {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "{} {} has no JSON body ({e}): {:?}",
                self.method,
                self.uri,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    fn answer(self, status: u16, body: Value) {
        self.answer_raw(status, serde_json::to_vec(&body).unwrap());
    }

    fn answer_raw(self, status: u16, body: Vec<u8>) {
        let response = Response::builder()
            .status(StatusCode::from_u16(status).unwrap())
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        self.respond.send_response(response);
    }

    /// Answers with an API `Status` failure.
    fn fail(self, code: u16, reason: &str, message: &str) {
        self.answer(
            code,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                   "code": code, "reason": reason, "message": message}),
        );
    }
}

impl Server {
    /// The next request that is not discovery (which is answered from a fixed set of
    /// resources: core v1 pods, configmaps, namespaces; apps/v1 deployments; a
    /// `Widget` CRD in example.com/v1).
    async fn next(&mut self) -> Call {
        loop {
            let call = self.raw().await;
            match discovery_answer(&call.method, &call.uri) {
                Some(body) => call.answer(200, body),
                None => return call,
            }
        }
    }

    /// The next request, discovery included.
    async fn raw(&mut self) -> Call {
        let (request, respond) = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            self.handle.next_request(),
        )
        .await
        .expect("the client sent no request within 30 s")
        .expect("the client is gone");
        let (parts, body) = request.into_parts();
        let body = body.collect().await.unwrap().to_bytes().to_vec();
        Call {
            method: parts.method.to_string(),
            uri: parts.uri.to_string(),
            content_type: parts
                .headers
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_owned()),
            body,
            respond,
        }
    }

    /// Takes the next request and checks its method and URI.
    async fn expect(&mut self, method: &str, uri: &str) -> Call {
        let call = self.next().await;
        assert_eq!(
            (call.method.as_str(), call.uri.as_str()),
            (method, uri),
            "unexpected request"
        );
        call
    }

    /// Asserts that the client sends nothing more right now.
    async fn quiet(&mut self) {
        tokio::task::yield_now().await;
        let next = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            self.handle.next_request(),
        )
        .await;
        if let Ok(Some((request, _))) = next {
            panic!("unexpected request {} {}", request.method(), request.uri());
        }
    }
}

fn resource(name: &str, kind: &str, namespaced: bool, short: &[&str]) -> Value {
    json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
           "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
           "shortNames": short})
}

/// The discovery documents of the mock API server.
fn discovery_answer(method: &str, uri: &str) -> Option<Value> {
    if method != "GET" {
        return None;
    }
    Some(match uri {
        "/api" => json!({"kind": "APIVersions", "versions": ["v1"],
                         "serverAddressByClientCIDRs": []}),
        "/apis" => json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
             "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}},
            {"name": "example.com", "versions": [{"groupVersion": "example.com/v1", "version": "v1"}],
             "preferredVersion": {"groupVersion": "example.com/v1", "version": "v1"}},
        ]}),
        "/api/v1" => json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
            resource("pods", "Pod", true, &["po"]),
            resource("pods/status", "Pod", true, &[]),
            resource("configmaps", "ConfigMap", true, &["cm"]),
            resource("namespaces", "Namespace", false, &["ns"]),
        ]}),
        "/apis/apps/v1" => {
            json!({"kind": "APIResourceList", "groupVersion": "apps/v1", "resources": [
                resource("deployments", "Deployment", true, &["deploy"]),
            ]})
        }
        "/apis/example.com/v1" => {
            json!({"kind": "APIResourceList", "groupVersion": "example.com/v1", "resources": [
                resource("widgets", "Widget", false, &["wg"]),
            ]})
        }
        _ => return None,
    })
}

/// A pod as the API server returns it.
fn pod(name: &str, resource_version: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                        "resourceVersion": resource_version, "labels": {"app": "x"}}})
}
