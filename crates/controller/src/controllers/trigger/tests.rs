//! The Trigger controller's requests against a mock API server: the Diagnosis POST
//! (deterministic name, owner reference, field manager), a 409 as a redelivery, the
//! rate limit, the `status.lastScheduleTime` apply on the status subresource, and which
//! Events count.

use super::catalog::{Snapshot, TriggerCatalog};
use super::create::{DiagnosisCreator, Outcome};
use super::cron::{self, CronState};
use super::events::EventMatcher;
use super::metrics::{DiagnosesCounter, register_metrics};
use jiff::Timestamp;
use kube::Api;
use operon_cluster::kube::mock::{self, MockApi};
use operon_data::api::Trigger;
use operon_pipeline::triggers::CompiledTrigger;
use serde_json::{Value, json};
use std::sync::Arc;

/// What `/metrics` shows of the Trigger counter. It is process-wide: each test counts
/// under a Trigger name of its own.
fn served() -> String {
    let registry = prometheus::Registry::new();
    register_metrics(&registry).unwrap();
    operon_hooks::metrics::render(&registry)
}

const DIAGNOSES: &str =
    "/apis/operon.dev/v1alpha1/namespaces/operon/diagnoses?&fieldManager=operon";

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn trigger(name: &str, spec: Value) -> Trigger {
    serde_json::from_value(json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "Trigger",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "generation": 1,
                     "creationTimestamp": "2024-05-01T12:00:00Z", "resourceVersion": "5"},
        "spec": spec,
    }))
    .unwrap()
}

fn cron_trigger() -> Trigger {
    trigger(
        "nightly",
        json!({"operationSet": "node-check", "nodeName": "worker-1",
               "sourceTemplate": {"cronTemplate": {"schedule": "0 3 * * *"}}}),
    )
}

fn snapshot(triggers: Vec<Trigger>) -> Snapshot {
    TriggerCatalog::listed(triggers).snapshot()
}

/// Answers a Diagnosis POST as the API server would: the object back, with a uid.
fn created(call: mock::Call) {
    let mut body = call.json();
    body["metadata"]["uid"] = json!("d-1");
    body["metadata"]["resourceVersion"] = json!("10");
    call.answer(201, body);
}

fn already_exists(call: mock::Call) {
    let name = call.json()["metadata"]["name"].as_str().unwrap().to_owned();
    call.fail(
        409,
        "AlreadyExists",
        &format!("diagnoses.operon.dev \"{name}\" already exists"),
    );
}

async fn expect_post(api: &mut MockApi) -> mock::Call {
    let call = api.next().await;
    assert_eq!(call.method, "POST");
    assert_eq!(call.uri, DIAGNOSES);
    assert_eq!(call.content_type.as_deref(), Some("application/json"));
    call
}

#[tokio::test]
async fn a_diagnosis_is_posted_with_its_name_labels_and_owner_reference() {
    let (client, mut api) = mock::pair();
    let creator = DiagnosisCreator::new(client, None);
    let t = cron_trigger();
    let compiled = CompiledTrigger::new(&t).unwrap();
    let slot = at("2024-05-02T03:00:00Z");
    let new = compiled.scheduled_diagnosis(slot).unwrap();
    let creating = tokio::spawn(async move { creator.create(&t, &compiled, new).await });

    let post = expect_post(&mut api).await;
    let body = post.json();
    assert_eq!(
        body,
        json!({
            "apiVersion": "operon.dev/v1alpha1",
            "kind": "Diagnosis",
            "metadata": {
                "name": format!("cron.nightly.{}", slot.as_second()),
                "namespace": "operon",
                "labels": {"operon.dev/trigger": "nightly", "operon.dev/trigger-source": "cron"},
                "annotations": {
                    "operon.dev/trigger": "nightly",
                    "operon.dev/cause": "schedule \"0 3 * * *\" slot 2024-05-02T03:00:00Z",
                },
                "ownerReferences": [{
                    "apiVersion": "operon.dev/v1alpha1",
                    "kind": "Trigger",
                    "name": "nightly",
                    "uid": "uid-nightly",
                    "controller": true,
                    "blockOwnerDeletion": false,
                }],
            },
            "spec": {"operationSet": "node-check", "nodeName": "worker-1"},
        })
    );
    created(post);
    assert_eq!(creating.await.unwrap().unwrap(), Outcome::Created);
}

#[tokio::test]
async fn a_409_is_a_redelivery_that_uses_no_rate_limit_and_is_counted() {
    let (client, mut api) = mock::pair();
    let creator = Arc::new(DiagnosisCreator::new(client, Some(DiagnosesCounter::new())));
    let t = Arc::new(trigger(
        "events",
        json!({"operationSet": "s", "rateLimit": {"diagnoses": 1, "perSeconds": 3600},
               "sourceTemplate": {"cronTemplate": {"schedule": "@hourly"}}}),
    ));
    let compiled = Arc::new(CompiledTrigger::new(&t).unwrap());
    let create = |slot: &str| {
        let (creator, t, compiled) = (creator.clone(), t.clone(), compiled.clone());
        let new = compiled.scheduled_diagnosis(at(slot)).unwrap();
        tokio::spawn(async move { creator.create(&t, &compiled, new).await })
    };

    let first = create("2024-05-01T13:00:00Z");
    already_exists(expect_post(&mut api).await);
    assert_eq!(first.await.unwrap().unwrap(), Outcome::AlreadyExists);
    api.quiet().await;

    // The redelivery gave its token back: the one allowed Diagnosis is still there.
    let second = create("2024-05-01T14:00:00Z");
    created(expect_post(&mut api).await);
    assert_eq!(second.await.unwrap().unwrap(), Outcome::Created);

    // Now the Trigger is over its limit: nothing is sent.
    let third = create("2024-05-01T15:00:00Z");
    assert_eq!(third.await.unwrap().unwrap(), Outcome::RateLimited);
    api.quiet().await;

    // An API failure is an error, not retried here, and gives the token back too.
    let rendered = served();
    for outcome in ["created", "already_exists", "rate_limited"] {
        let line = format!(
            "operon_trigger_diagnoses_total{{outcome=\"{outcome}\",source=\"cron\",trigger=\"events\"}} 1"
        );
        assert!(rendered.contains(&line), "{line} in {rendered}");
    }
}

#[tokio::test]
async fn an_api_failure_is_an_error_and_counted_as_failed() {
    let (client, mut api) = mock::pair();
    let creator = DiagnosisCreator::new(client, Some(DiagnosesCounter::new()));
    let t = cron_trigger();
    let compiled = CompiledTrigger::new(&t).unwrap();
    let new = compiled
        .scheduled_diagnosis(at("2024-05-02T03:00:00Z"))
        .unwrap();
    let creating = tokio::spawn(async move { creator.create(&t, &compiled, new).await });
    expect_post(&mut api)
        .await
        .fail(404, "NotFound", "namespaces \"operon\" not found");
    let error = creating.await.unwrap().unwrap_err();
    assert!(
        error
            .to_string()
            .contains("creating Diagnosis operon/cron.nightly."),
        "{error}"
    );
    assert!(served().contains(
        "operon_trigger_diagnoses_total{outcome=\"failed\",source=\"cron\",trigger=\"nightly\"} 1"
    ));
}

#[test]
fn cron_plans_one_slot_for_a_missed_range_then_sleeps_until_the_next() {
    let snapshot = snapshot(vec![cron_trigger()]);
    let mut state = CronState::default();
    // Created 2024-05-01T12:00, down until 2024-05-04T10:00: three 03:00 slots missed,
    // one Diagnosis, for the latest.
    let now = at("2024-05-04T10:00:00Z");
    let (due, next) = cron::plan(&snapshot, &mut state, now);
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].slot, at("2024-05-04T03:00:00Z"));
    assert_eq!(next, None);

    // A new Trigger waits for its first slot.
    let (due, next) = cron::plan(
        &snapshot,
        &mut CronState::default(),
        at("2024-05-01T20:00:00Z"),
    );
    assert!(due.is_empty());
    assert_eq!(next, Some(at("2024-05-02T03:00:00Z")));
}

/// Plans the nightly Trigger 5 s after its 03:00 slot and fires that slot in a task
/// that returns the cron state, against a mock API server.
fn fire_the_nightly_slot() -> (Snapshot, MockApi, tokio::task::JoinHandle<CronState>) {
    let (client, api) = mock::pair();
    let creator = DiagnosisCreator::new(client.clone(), None);
    let triggers: Api<Trigger> = Api::all(client);
    let snapshot = snapshot(vec![cron_trigger()]);
    let mut state = CronState::default();
    let now = at("2024-05-02T03:00:05Z");
    let (mut due, _) = cron::plan(&snapshot, &mut state, now);
    let due = due.pop().unwrap();
    assert_eq!(due.slot, at("2024-05-02T03:00:00Z"));
    let firing = tokio::spawn(async move {
        cron::fire(&due, &mut state, &creator, &triggers, now).await;
        state
    });
    (snapshot, api, firing)
}

#[tokio::test]
async fn a_fired_slot_is_created_then_written_to_the_status_subresource() {
    let (snapshot, mut api, firing) = fire_the_nightly_slot();
    // A redelivery (another leader got there first) still records the slot.
    already_exists(expect_post(&mut api).await);
    let patch = api.next().await;
    assert_eq!(patch.method, "PATCH");
    assert_eq!(
        patch.uri,
        "/apis/operon.dev/v1alpha1/triggers/nightly/status?&force=true&fieldManager=operon"
    );
    assert_eq!(
        patch.content_type.as_deref(),
        Some("application/apply-patch+yaml")
    );
    assert_eq!(
        patch.json(),
        json!({"apiVersion": "operon.dev/v1alpha1", "kind": "Trigger",
               "status": {"lastScheduleTime": "2024-05-02T03:00:00Z"}})
    );
    let mut stored = serde_json::to_value(cron_trigger()).unwrap();
    stored["status"] = json!({"lastScheduleTime": "2024-05-02T03:00:00Z"});
    patch.answer(200, stored);
    let mut state = firing.await.unwrap();
    api.quiet().await;

    // Handled: nothing more is due until the next night, even before the watch shows
    // the new status.
    let (due, next) = cron::plan(&snapshot, &mut state, at("2024-05-02T10:00:00Z"));
    assert!(due.is_empty());
    assert_eq!(next, Some(at("2024-05-03T03:00:00Z")));
}

#[tokio::test]
async fn a_failed_creation_is_retried_later_without_a_status_write() {
    let (snapshot, mut api, firing) = fire_the_nightly_slot();
    expect_post(&mut api)
        .await
        .fail(500, "InternalError", "etcd is down");
    let mut state = firing.await.unwrap();
    api.quiet().await;
    let (due, next) = cron::plan(&snapshot, &mut state, at("2024-05-02T03:00:06Z"));
    assert!(due.is_empty());
    assert_eq!(next, Some(at("2024-05-02T03:00:15Z")), "retry in 10 s");
    let (due, _) = cron::plan(&snapshot, &mut state, at("2024-05-02T03:00:15Z"));
    assert_eq!(due.len(), 1, "the same slot again");
}

fn pod_event(occurred: &str) -> k8s_openapi::api::core::v1::Event {
    serde_json::from_value(json!({
        "metadata": {"name": "cart-0.17a2b3c4", "namespace": "shop", "uid": "e-1",
                     "resourceVersion": "100", "creationTimestamp": occurred},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "cart-0", "namespace": "shop"},
        "reason": "BackOff",
        "message": "Back-off restarting failed container",
        "source": {"component": "kubelet", "host": "worker-1"},
        "count": 5,
        "lastTimestamp": occurred,
    }))
    .unwrap()
}

#[tokio::test]
async fn events_count_when_recent_once_per_occurrence_and_after_the_trigger() {
    let (client, mut api) = mock::pair();
    let creator = DiagnosisCreator::new(client, None);
    let snapshot = snapshot(vec![trigger(
        "backoff",
        json!({"operationSet": "s", "sourceTemplate": {"kubernetesEventTemplate": {"regexp": {"reason": "^BackOff$"}}}}),
    )]);
    let started = at("2024-05-02T00:00:00Z");
    let mut matcher = EventMatcher::new(started);

    // Older than the lookback before the start: a re-list's history, skipped.
    matcher
        .handle(&snapshot, &creator, &pod_event("2024-05-01T23:57:59Z"))
        .await;
    api.quiet().await;

    // Within it: matched and created.
    let recent = pod_event("2024-05-01T23:58:30Z");
    let handling = {
        let snapshot = snapshot.clone();
        let recent = recent.clone();
        tokio::spawn(async move {
            matcher.handle(&snapshot, &creator, &recent).await;
            (matcher, creator)
        })
    };
    let post = expect_post(&mut api).await;
    let body = post.json();
    assert!(
        body["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("kubernetes-event.backoff."),
        "{body}"
    );
    assert_eq!(body["spec"]["podReference"]["name"], "cart-0");
    assert_eq!(body["metadata"]["ownerReferences"][0]["name"], "backoff");
    created(post);
    let (mut matcher, creator) = handling.await.unwrap();

    // The same occurrence through the other Events API: not sent again.
    matcher.handle(&snapshot, &creator, &recent).await;
    api.quiet().await;

    // An Event that occurred before the Trigger existed does not count for it.
    let mut young = trigger(
        "young",
        json!({"operationSet": "s", "sourceTemplate": {"kubernetesEventTemplate": {}}}),
    );
    young.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        at("2024-05-02T00:00:10Z"),
    ));
    let mut other = pod_event("2024-05-02T00:00:05Z");
    other.metadata.uid = Some("e-2".into());
    other.reason = Some("Pulled".into());
    matcher.handle(&snapshot_of(young), &creator, &other).await;
    api.quiet().await;
}

fn snapshot_of(t: Trigger) -> Snapshot {
    snapshot(vec![t])
}
