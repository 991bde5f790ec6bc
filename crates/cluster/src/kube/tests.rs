//! Tests of the kube layer against tower-test mock services: every request's method,
//! path, query, content type and body is asserted, and the answers are what an API
//! server sends.

mod apply;
mod faults;
mod slow;
mod watch;

use super::KubeCluster;
use super::mock::{Call, MockApi};
use serde_json::{Value, json};

/// A cluster over a mock service, and the server side of that mock.
fn mock() -> (KubeCluster, Server) {
    let (client, api) = super::mock::pair();
    (KubeCluster::new(client), Server { api })
}

/// The API server's side: takes the next request, answers discovery itself.
struct Server {
    api: MockApi,
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
        self.api.next().await
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
        self.api.quiet().await;
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
