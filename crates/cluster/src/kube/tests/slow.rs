//! An API server that asks to wait (`Retry-After` on a 429 or 5xx) or does not answer
//! in time, through [`Patient`](crate::kube::Patient) as `KubeCluster::connect`
//! builds it. The clock is tokio's paused one, so each wait is asserted to the second.

use super::{Server, discovery_answer, pod};
use crate::kube::KubeCluster;
use crate::kube::mock::Call;
use crate::kube::retry::{MAX_RETRY_AFTER, Patient, REQUEST_TIMEOUT};
use crate::{Cluster as _, ClusterError, Resource, Selector};
use operon_data::model::{CreateSpec, PatchOperation};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

fn patient() -> (Arc<KubeCluster>, Server) {
    let (client, api) = crate::kube::mock::pair();
    let client = Patient::new(client).into_client("default");
    (Arc::new(KubeCluster::new(client)), Server { api })
}

impl Server {
    /// The next request that is not discovery, however long it takes to come (the
    /// clock is paused: waiting advances it to the client's next timer).
    async fn after_waiting(&mut self) -> Call {
        loop {
            let call = self.api.receive().await;
            match discovery_answer(&call.method, &call.uri) {
                Some(body) => call.answer(200, body),
                None => return call,
            }
        }
    }
}

fn pods() -> Resource {
    Resource {
        group: String::new(),
        version: "v1".into(),
        kind: "Pod".into(),
        plural: "pods".into(),
        namespaced: true,
    }
}

const GET_A: &str = "/api/v1/namespaces/default/pods/a";
const CREATE: &str = "/api/v1/namespaces/default/configmaps?&fieldManager=operon";

fn create(name: &str) -> PatchOperation {
    PatchOperation::Create(CreateSpec {
        object: json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": "default"}})
        .to_string(),
        subresource: None,
    })
}

fn assert_request(call: &Call, method: &str, uri: &str) {
    assert_eq!((call.method.as_str(), call.uri.as_str()), (method, uri));
}

#[tokio::test(start_paused = true)]
async fn a_429_with_retry_after_is_sent_again_after_exactly_that_wait() {
    let (cluster, mut server) = patient();
    let c = cluster.clone();
    let getting = tokio::spawn(async move { c.get(&pods(), Some("default"), "a").await });
    let first = server.after_waiting().await;
    assert_request(&first, "GET", GET_A);
    let answered = Instant::now();
    first.fail_retry_after(429, "TooManyRequests", "7");
    let second = server.after_waiting().await;
    assert_request(&second, "GET", GET_A);
    assert_eq!(answered.elapsed(), Duration::from_secs(7));
    second.answer(200, pod("a", "3"));
    let object = getting.await.unwrap().unwrap().expect("found");
    assert_eq!(object["metadata"]["name"], "a");
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_date_is_waited_until() {
    let (cluster, mut server) = patient();
    let c = cluster.clone();
    let getting = tokio::spawn(async move { c.get(&pods(), Some("default"), "a").await });
    let first = server.after_waiting().await;
    let answered = Instant::now();
    first.fail_retry_at(
        503,
        "Fri, 31 Dec 1999 23:59:59 GMT",
        "Fri, 31 Dec 1999 23:59:54 GMT",
    );
    let second = server.after_waiting().await;
    assert_request(&second, "GET", GET_A);
    assert_eq!(answered.elapsed(), Duration::from_secs(5));
    second.answer(200, pod("a", "3"));
    assert!(getting.await.unwrap().unwrap().is_some());
}

#[tokio::test(start_paused = true)]
async fn a_long_retry_after_is_bounded() {
    let (cluster, mut server) = patient();
    let c = cluster.clone();
    let getting = tokio::spawn(async move { c.get(&pods(), Some("default"), "a").await });
    let answered = {
        let first = server.after_waiting().await;
        let at = Instant::now();
        first.fail_retry_after(503, "ServiceUnavailable", "3600");
        at
    };
    let second = server.after_waiting().await;
    assert_eq!(answered.elapsed(), MAX_RETRY_AFTER);
    second.answer(200, pod("a", "3"));
    assert!(getting.await.unwrap().unwrap().is_some());
}

#[tokio::test(start_paused = true)]
async fn a_write_the_server_asks_to_retry_after_is_sent_again() {
    // A 429 or a 5xx with Retry-After says the server did not act on the request, so
    // even a create is sent again (client-go does the same).
    let (cluster, mut server) = patient();
    let c = cluster.clone();
    let applying = tokio::spawn(async move { c.apply(&create("c")).await });
    let first = server.after_waiting().await;
    assert_request(&first, "POST", CREATE);
    let answered = Instant::now();
    first.fail_retry_after(429, "TooManyRequests", "2");
    let second = server.after_waiting().await;
    assert_request(&second, "POST", CREATE);
    assert_eq!(second.json()["metadata"]["name"], "c");
    assert_eq!(answered.elapsed(), Duration::from_secs(2));
    let created = second.json();
    second.answer(201, created);
    applying.await.unwrap().expect("created");
    server.quiet().await;
}

#[tokio::test(start_paused = true)]
async fn a_429_without_retry_after_is_the_callers_to_handle() {
    let (cluster, mut server) = patient();
    let c = cluster.clone();
    let getting = tokio::spawn(async move { c.get(&pods(), Some("default"), "a").await });
    server.after_waiting().await.fail(
        429,
        "TooManyRequests",
        "the server has received too many requests",
    );
    let error = getting
        .await
        .unwrap()
        .expect_err("no retry without Retry-After");
    assert!(error.to_string().contains("429"), "{error}");
    server.quiet().await;
}

#[tokio::test(start_paused = true)]
async fn a_read_without_an_answer_times_out_and_is_sent_again() {
    let (cluster, mut server) = patient();
    let c = cluster.clone();
    let getting = tokio::spawn(async move { c.get(&pods(), Some("default"), "a").await });
    let silent = server.after_waiting().await;
    let sent = Instant::now();
    let again = server.after_waiting().await;
    assert_request(&again, "GET", GET_A);
    assert_eq!(sent.elapsed(), REQUEST_TIMEOUT);
    drop(silent);
    again.answer(200, pod("a", "3"));
    assert!(getting.await.unwrap().unwrap().is_some());
}

#[tokio::test(start_paused = true)]
async fn a_read_that_never_gets_an_answer_fails_naming_the_request() {
    let (cluster, mut server) = patient();
    let c = cluster.clone();
    let getting = tokio::spawn(async move { c.get(&pods(), Some("default"), "a").await });
    let started = Instant::now();
    let mut silent = Vec::new();
    for _ in 0..3 {
        let call = server.after_waiting().await;
        assert_request(&call, "GET", GET_A);
        silent.push(call);
    }
    let error = getting.await.unwrap().expect_err("timed out");
    assert_eq!(started.elapsed(), REQUEST_TIMEOUT * 3);
    let text = error.to_string();
    assert!(
        text.contains(
            "GET /api/v1/namespaces/default/pods/a: no response within 30s (sent 3 times)"
        ),
        "{text}"
    );
    assert!(matches!(error, ClusterError::Client { .. }), "{error:?}");
}

#[tokio::test(start_paused = true)]
async fn a_create_without_an_answer_is_not_sent_again_and_the_next_write_goes_through() {
    let (cluster, mut server) = patient();
    let c = cluster.clone();
    let applying = tokio::spawn(async move { c.apply(&create("c")).await });
    let silent = server.after_waiting().await;
    assert_request(&silent, "POST", CREATE);
    let error = applying.await.unwrap().expect_err("timed out");
    let text = error.to_string();
    assert!(
        text.contains(&format!("POST {CREATE}: no response within 30s")),
        "{text}"
    );
    assert!(text.contains("a write is not sent again"), "{text}");
    server.quiet().await;
    drop(silent);
    // Nothing is stuck: the next write is sent and answered.
    let c = cluster.clone();
    let next = tokio::spawn(async move { c.apply(&create("d")).await });
    let call = server.after_waiting().await;
    assert_request(&call, "POST", CREATE);
    assert_eq!(call.json()["metadata"]["name"], "d");
    let created = call.json();
    call.answer(201, created);
    next.await.unwrap().expect("created");
}

#[tokio::test(start_paused = true)]
async fn a_watch_whose_start_gets_no_answer_is_started_again() {
    let (cluster, mut server) = patient();
    let c = cluster.clone();
    let selector = Selector {
        namespaces: Some(vec!["default".into()]),
        ..Selector::default()
    };
    let listing = tokio::spawn(async move { c.list_and_watch(&pods(), &selector).await });
    let list = server.after_waiting().await;
    assert_request(
        &list,
        "GET",
        "/api/v1/namespaces/default/pods?&resourceVersion=0",
    );
    list.answer(
        200,
        json!({"kind": "PodList", "apiVersion": "v1",
               "metadata": {"resourceVersion": "7"}, "items": [pod("a", "5")]}),
    );
    let (objects, mut events) = listing.await.unwrap().unwrap();
    assert_eq!(objects.len(), 1);
    let watch = "/api/v1/namespaces/default/pods?&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&resourceVersion=7";
    let silent = server.after_waiting().await;
    assert_request(&silent, "GET", watch);
    let sent = Instant::now();
    let again = server.after_waiting().await;
    assert_request(&again, "GET", watch);
    assert_eq!(sent.elapsed(), REQUEST_TIMEOUT);
    drop(silent);
    let event = json!({"type": "ADDED", "object": pod("b", "8")});
    let mut line = serde_json::to_vec(&event).unwrap();
    line.push(b'\n');
    again.answer_raw(200, line);
    let event = events.recv().await.expect("the event arrives");
    assert_eq!(event.object["metadata"]["name"], "b");
}
