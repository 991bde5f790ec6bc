//! Faults of the API server under shared watches and patches: 500s and 429s on the
//! list (without `Retry-After` the wait before a retry is kube-runtime's backoff; with
//! one, see `slow`), a watch stream that ends mid-way, a create answered with 500.
//! Asserted: no event is lost or repeated, a list that fails for a while is
//! retried until it succeeds (a binding gets its objects, not an error), and a failed
//! write is not sent twice.

use super::{mock, pod};
use crate::{Cluster as _, ClusterError, Event, Resource, Selector};
use operon_data::model::{CreateSpec, PatchOperation, WatchEvent};
use serde_json::{Value, json};

fn pods() -> Resource {
    Resource {
        group: String::new(),
        version: "v1".into(),
        kind: "Pod".into(),
        plural: "pods".into(),
        namespaced: true,
    }
}

fn in_default() -> Selector {
    Selector {
        namespaces: Some(vec!["default".into()]),
        ..Selector::default()
    }
}

const LIST: &str = "/api/v1/namespaces/default/pods?&resourceVersion=0";

fn watch_uri(resource_version: &str) -> String {
    format!(
        "/api/v1/namespaces/default/pods?&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&resourceVersion={resource_version}"
    )
}

fn list(resource_version: &str, items: Vec<Value>) -> Value {
    json!({"kind": "PodList", "apiVersion": "v1",
           "metadata": {"resourceVersion": resource_version}, "items": items})
}

fn lines(events: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for event in events {
        out.extend(serde_json::to_vec(event).unwrap());
        out.push(b'\n');
    }
    out
}

fn seen(event: &Event) -> (WatchEvent, String) {
    (
        event.kind,
        event.object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

#[tokio::test(start_paused = true)]
async fn a_list_failing_with_500_then_429_is_retried_until_it_succeeds() {
    let (cluster, mut server) = mock();
    let listing = tokio::spawn(async move {
        let (objects, _events) = cluster.list_and_watch(&pods(), &in_default()).await?;
        Ok::<_, ClusterError>(objects)
    });
    server
        .expect("GET", LIST)
        .await
        .fail(500, "InternalError", "etcdserver: request timed out");
    server.expect("GET", LIST).await.fail(
        429,
        "TooManyRequests",
        "the server has received too many requests and has asked us to try again later",
    );
    server
        .expect("GET", LIST)
        .await
        .answer(200, list("7", vec![pod("a", "5")]));
    let _watch = server.expect("GET", &watch_uri("7")).await;
    let objects = listing
        .await
        .unwrap()
        .expect("the binding gets its objects");
    let objects: Vec<_> = objects.into_iter().collect();
    assert_eq!(objects.len(), 1);
    assert_eq!(objects[0]["metadata"]["name"], "a");
}

#[tokio::test(start_paused = true)]
async fn a_watch_ending_mid_stream_resumes_from_its_last_version_without_losing_or_repeating_events()
 {
    let (cluster, mut server) = mock();
    let cluster = std::sync::Arc::new(cluster);
    let c = cluster.clone();
    let listing = tokio::spawn(async move { c.list_and_watch(&pods(), &in_default()).await });
    server
        .expect("GET", LIST)
        .await
        .answer(200, list("10", vec![pod("a", "1")]));
    // Two events, then the connection ends (a proxy or the server closing it).
    server.expect("GET", &watch_uri("10")).await.answer_raw(
        200,
        lines(&[
            json!({"type": "MODIFIED", "object": pod("a", "11")}),
            json!({"type": "ADDED", "object": pod("b", "12")}),
        ]),
    );
    let (_, mut events) = listing.await.unwrap().unwrap();
    // The watch resumes where it stopped, with no re-list.
    server.expect("GET", &watch_uri("12")).await.answer_raw(
        200,
        lines(&[json!({"type": "DELETED", "object": pod("a", "13")})]),
    );
    let mut got = Vec::new();
    while got.len() < 3 {
        got.push(seen(&events.recv().await.unwrap()));
    }
    assert_eq!(
        got,
        [
            (WatchEvent::Modified, "a".to_owned()),
            (WatchEvent::Added, "b".to_owned()),
            (WatchEvent::Deleted, "a".to_owned()),
        ]
    );
    let _next = server.expect("GET", &watch_uri("13")).await;
    server.quiet().await;
    assert!(events.try_recv().is_err(), "no event twice");
}

#[tokio::test]
async fn a_create_answered_with_500_fails_once_and_is_not_sent_again() {
    let (cluster, mut server) = mock();
    let create = PatchOperation::Create(CreateSpec {
        object: json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "c", "namespace": "default"}})
        .to_string(),
        subresource: None,
    });
    let applying = tokio::spawn(async move { cluster.apply(&create).await });
    server
        .expect(
            "POST",
            "/api/v1/namespaces/default/configmaps?&fieldManager=operon",
        )
        .await
        .fail(500, "InternalError", "etcdserver: leader changed");
    let result = applying.await.unwrap();
    let error = result.expect_err("the create failed");
    assert!(error.to_string().contains("leader changed"), "{error}");
    server.quiet().await;
}
