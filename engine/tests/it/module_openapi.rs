//! The OpenAPI description of the module API (`api/modules.openapi.yaml`) against the
//! routes `operon serve` mounts: every documented operation is routed (and asks for a
//! token before anything else), nothing undocumented is, every `$ref` resolves, and the
//! Module schema names every field of a Module's spec.

use axum::body::Body;
use http::{Method, Request, StatusCode};
use operon::serve::modules::auth::Authorizer;
use operon::serve::modules::{ModuleApi, router};
use operon::store::replica::ReplicaOptions;
use operon::store::{BlobStore, ModuleCatalog};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;
use tower::ServiceExt as _;

fn spec() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../api/modules.openapi.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    yaml_serde::from_str(&text).unwrap()
}

/// The module API over a store in a temporary directory and an API server that is
/// never asked (requests without a token are refused first).
fn api() -> (axum::Router, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let (service, _handle) =
        tower_test::mock::pair::<Request<kube::client::Body>, http::Response<kube::client::Body>>();
    let client = kube::Client::new(service, "default");
    let sandbox = operon::sandbox::Sandbox::new(operon::sandbox::SandboxConfig {
        cache_dir: None,
        ..Default::default()
    })
    .unwrap();
    let api = ModuleApi::new(
        client.clone(),
        Authorizer::new(client),
        Arc::new(ModuleCatalog::new(
            BlobStore::open(dir.path(), 1024).unwrap(),
        )),
        sandbox,
        ReplicaOptions {
            identity: "operon-0".into(),
            advertise: None,
            gc_grace: std::time::Duration::from_secs(60),
            pods_namespace: None,
        },
    );
    (router(Arc::new(api)), dir)
}

/// A concrete path for a templated one.
fn concrete(path: &str) -> String {
    path.replace("{name}", "probe")
        .replace("{sha256}", &"ab".repeat(32))
}

async fn status(router: &axum::Router, method: &Method, path: &str) -> StatusCode {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .body(Body::from("x"))
        .unwrap();
    router.clone().oneshot(request).await.unwrap().status()
}

#[tokio::test]
async fn every_documented_operation_is_served_and_nothing_else() {
    let spec = spec();
    let (router, _dir) = api();
    let paths = spec["paths"].as_object().unwrap();
    assert!(!paths.is_empty());
    let all = [
        Method::GET,
        Method::POST,
        Method::PUT,
        Method::PATCH,
        Method::DELETE,
    ];
    let mut documented = 0;
    for (path, item) in paths {
        for method in &all {
            let key = method.as_str().to_lowercase();
            let got = status(&router, method, &concrete(path)).await;
            match item.get(&key) {
                Some(operation) => {
                    documented += 1;
                    // Routed, and refused for want of a token before anything is read.
                    assert_eq!(got, StatusCode::UNAUTHORIZED, "{method} {path}");
                    let codes: BTreeSet<&str> = operation["responses"]
                        .as_object()
                        .unwrap()
                        .keys()
                        .map(String::as_str)
                        .collect();
                    assert!(
                        codes.contains("401") && codes.contains("403"),
                        "{method} {path}"
                    );
                    assert!(
                        operation["operationId"].is_string(),
                        "{method} {path}: operationId"
                    );
                }
                None => assert_eq!(
                    got,
                    StatusCode::METHOD_NOT_ALLOWED,
                    "{method} {path} is served but not documented"
                ),
            }
        }
    }
    assert_eq!(documented, 5, "the five operations of the module API");
    // A path the description does not have is not served.
    assert_eq!(
        status(&router, &Method::GET, "/v1/other").await,
        StatusCode::NOT_FOUND
    );
}

fn refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("$ref", Value::String(target)) => out.push(target),
                    _ => refs(value, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

#[test]
fn every_reference_resolves() {
    let spec = spec();
    let mut found = Vec::new();
    refs(&spec, &mut found);
    assert!(!found.is_empty());
    for target in found {
        let pointer = target.strip_prefix('#').expect("local references only");
        assert!(spec.pointer(pointer).is_some(), "{target} does not resolve");
    }
}

#[test]
fn the_module_schema_names_every_field_of_a_module() {
    let spec = spec();
    let documented: BTreeSet<String> = spec["components"]["schemas"]["Module"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let sample = operon::api::ModuleSpec {
        digest: format!("sha256:{}", "0".repeat(64)),
        world: operon::api::ModuleWorld::Operation,
        wit_version: "0.2.0".into(),
        size: 1,
        imports: vec!["wasi:io/streams@0.2.6".into()],
        uploaded_by: "alice".into(),
        uploaded_at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::UNIX_EPOCH,
        ),
    };
    let fields = serde_json::to_value(&sample).unwrap();
    for field in fields.as_object().unwrap().keys() {
        assert!(
            documented.contains(field),
            "the Module schema lacks {field}"
        );
    }
    for field in ["name", "sources"] {
        assert!(documented.contains(field), "{field}");
    }
}
