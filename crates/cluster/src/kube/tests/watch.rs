//! Discovery, shared list+watch, re-lists after `410 Gone`.

use super::{discovery_answer, mock, pod};
use crate::{Cluster as _, ClusterError, Event, Identity, Resource, Selector};
use operon_data::model::{FieldOperator, FieldRequirement, LabelSelector, WatchEvent};
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

fn default_app_x() -> Selector {
    Selector {
        namespaces: Some(vec!["default".into()]),
        labels: Some(LabelSelector {
            match_labels: vec![("app".into(), "x".into())],
            match_expressions: vec![],
        }),
        ..Selector::default()
    }
}

fn list(resource_version: &str, items: Vec<Value>) -> Value {
    // List items come without apiVersion and kind, as from a real server.
    let items: Vec<Value> = items
        .into_iter()
        .map(|mut item| {
            let map = item.as_object_mut().unwrap();
            map.remove("apiVersion");
            map.remove("kind");
            item
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "PodList",
           "metadata": {"resourceVersion": resource_version}, "items": items})
}

fn watch_lines(events: &[Value]) -> Vec<u8> {
    let mut body = Vec::new();
    for event in events {
        body.extend(serde_json::to_vec(event).unwrap());
        body.push(b'\n');
    }
    body
}

/// The first list: any version, from the API server's watch cache.
const LIST: &str = "/api/v1/namespaces/default/pods?&labelSelector=app%3Dx&resourceVersion=0";
/// A list after `410 Gone`: consistent, from etcd, paged.
const CONSISTENT_LIST: &str = "/api/v1/namespaces/default/pods?&labelSelector=app%3Dx&limit=500";

/// A later list: not older than `version`, the last one the watch saw.
fn relist_uri(version: &str) -> String {
    format!("/api/v1/namespaces/default/pods?&labelSelector=app%3Dx&resourceVersion={version}")
}

fn watch_uri(resource_version: &str) -> String {
    format!(
        "/api/v1/namespaces/default/pods?&watch=true&timeoutSeconds=290&labelSelector=app%3Dx&allowWatchBookmarks=true&resourceVersion={resource_version}"
    )
}

fn name(event: &Event) -> &str {
    event.object["metadata"]["name"].as_str().unwrap()
}

#[tokio::test]
async fn kinds_resolve_by_kind_plural_or_short_name_and_are_cached() {
    let (cluster, mut server) = mock();
    let resolving = tokio::spawn(async move {
        let deployment = cluster.resolve(None, "deployment").await.unwrap();
        let short = cluster.resolve(None, "DEPLOY").await.unwrap();
        let pods = cluster.resolve(Some("v1"), "pods").await.unwrap();
        (deployment, short, pods)
    });
    for uri in ["/api", "/apis", "/api/v1", "/apis/apps/v1"] {
        let call = server.raw().await;
        assert_eq!((call.method.as_str(), call.uri.as_str()), ("GET", uri));
        call.answer(200, discovery_answer("GET", uri).unwrap());
    }
    let (deployment, short, pods) = resolving.await.unwrap();
    assert_eq!(
        deployment,
        Resource {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            plural: "deployments".into(),
            namespaced: true,
        }
    );
    assert_eq!(short, deployment);
    assert_eq!(pods.kind, "Pod");
    server.quiet().await;
}

#[tokio::test]
async fn an_unknown_kind_refreshes_discovery_so_a_new_crd_resolves() {
    let (cluster, mut server) = mock();
    let cluster = std::sync::Arc::new(cluster);
    let c = cluster.clone();
    let first = tokio::spawn(async move { c.resolve(Some("example.com/v1"), "Widget").await });
    let call = server.raw().await;
    assert_eq!(call.uri, "/apis/example.com/v1");
    call.fail(
        404,
        "NotFound",
        "the server could not find the requested resource",
    );
    // The refresh right after the miss finds nothing either.
    let call = server.raw().await;
    assert_eq!(call.uri, "/apis/example.com/v1");
    call.fail(
        404,
        "NotFound",
        "the server could not find the requested resource",
    );
    assert_eq!(
        first.await.unwrap(),
        Err(ClusterError::UnknownKind {
            kind: "Widget".into(),
            api_version: Some("example.com/v1".into())
        })
    );
    // The CRD is created; a second later the kind resolves without a restart.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let c = cluster.clone();
    let second = tokio::spawn(async move { c.resolve(Some("example.com/v1"), "wg").await });
    let call = server.raw().await;
    assert_eq!(call.uri, "/apis/example.com/v1");
    call.answer(
        200,
        discovery_answer("GET", "/apis/example.com/v1").unwrap(),
    );
    let widget = second.await.unwrap().unwrap();
    assert_eq!(
        (widget.plural.as_str(), widget.namespaced),
        ("widgets", false)
    );
}

/// One binding reading the watch of `default_app_x` Pods, listed at resourceVersion 10
/// with `items`: the cluster, the API server, the open watch, the binding's objects and
/// its events.
async fn watched(
    items: Vec<Value>,
) -> (
    std::sync::Arc<super::KubeCluster>,
    super::Server,
    super::Call,
    Vec<Value>,
    crate::EventStream,
) {
    let (cluster, mut server) = mock();
    let cluster = std::sync::Arc::new(cluster);
    let c = cluster.clone();
    let listing = tokio::spawn(async move { c.list_and_watch(&pods(), &default_app_x()).await });
    server
        .expect("GET", LIST)
        .await
        .answer(200, list("10", items));
    let watch = server.expect("GET", &watch_uri("10")).await;
    let (objects, events) = listing.await.unwrap().unwrap();
    (
        cluster,
        server,
        watch,
        objects.into_iter().collect(),
        events,
    )
}

#[tokio::test]
async fn a_relist_after_410_reports_changes_and_deletions_in_the_gap_once() {
    let (cluster, mut server, watch, objects, mut events) =
        watched(vec![pod("b", "2"), pod("a", "1")]).await;
    let names: Vec<&str> = objects
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"], "sorted by namespace and name");
    assert_eq!(objects[0]["kind"], "Pod", "list items get their kind back");

    // a changes; then the server has compacted past the watch's version.
    watch.answer_raw(
        200,
        watch_lines(&[
            json!({"type": "MODIFIED", "object": pod("a", "11")}),
            json!({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1",
                   "metadata": {"resourceVersion": "12"}}}),
            json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1",
                   "status": "Failure", "code": 410, "reason": "Expired",
                   "message": "too old resource version: 12 (30)"}}),
        ]),
    );
    // The re-list, consistent (the versions the watch saw are gone): a unchanged
    // since the event, b deleted in the gap, c created.
    server
        .expect("GET", CONSISTENT_LIST)
        .await
        .answer(200, list("30", vec![pod("a", "11"), pod("c", "25")]));
    let _next_watch = server.expect("GET", &watch_uri("30")).await;

    let mut seen = Vec::new();
    while seen.len() < 3 {
        let event = events.recv().await.unwrap();
        // A deletion noticed by the re-list names its object by identity only.
        let who = match event.deleted_final_state_unknown {
            Some(identity) => {
                assert_eq!(event.object["kind"], "Pod");
                ["a", "b", "c"]
                    .into_iter()
                    .find(|name| Identity::of("default", name) == identity)
                    .expect("the identity of a watched Pod")
            }
            None => name(&event),
        };
        seen.push((
            event.kind,
            who.to_owned(),
            event.deleted_final_state_unknown.is_some(),
        ));
    }
    assert_eq!(
        seen,
        [
            (WatchEvent::Modified, "a".to_owned(), false),
            (WatchEvent::Added, "c".to_owned(), false),
            (WatchEvent::Deleted, "b".to_owned(), true),
        ]
    );
    server.quiet().await;
    assert!(events.try_recv().is_err(), "a was reported once");
    assert_eq!(cluster.open_watches(), 1);
}

#[tokio::test]
async fn bindings_asking_for_the_same_objects_share_one_watch() {
    let (cluster, mut server) = mock();
    let cluster = std::sync::Arc::new(cluster);
    let c = cluster.clone();
    let first = tokio::spawn(async move { c.list_and_watch(&pods(), &default_app_x()).await });
    server
        .expect("GET", LIST)
        .await
        .answer(200, list("10", vec![pod("a", "1")]));
    let _watch = server.expect("GET", &watch_uri("10")).await;
    let (_, mut first_events) = first.await.unwrap().unwrap();

    // A second binding joins: one re-list, not older than the first list, gives it its
    // objects; the first binding sees nothing, as nothing changed.
    let c = cluster.clone();
    let second = tokio::spawn(async move { c.list_and_watch(&pods(), &default_app_x()).await });
    server
        .expect("GET", &relist_uri("10"))
        .await
        .answer(200, list("10", vec![pod("a", "1")]));
    let watch = server.expect("GET", &watch_uri("10")).await;
    let (objects, mut second_events) = second.await.unwrap().unwrap();
    assert_eq!(objects.len(), 1);
    assert!(first_events.try_recv().is_err());
    assert_eq!(cluster.open_watches(), 1);

    // Both see the next change.
    watch.answer_raw(
        200,
        watch_lines(&[json!({"type": "ADDED", "object": pod("b", "11")})]),
    );
    let _next = server.expect("GET", &watch_uri("11")).await;
    assert_eq!(name(&first_events.recv().await.unwrap()), "b");
    assert_eq!(name(&second_events.recv().await.unwrap()), "b");

    // When every binding is gone the watch closes.
    drop((first_events, second_events));
    let c = cluster.clone();
    let other = Selector {
        namespaces: Some(vec!["other".into()]),
        ..Selector::default()
    };
    let third = tokio::spawn(async move { c.list_and_watch(&pods(), &other).await });
    let call = server.next().await;
    assert_eq!(call.uri, "/api/v1/namespaces/other/pods?&resourceVersion=0");
    call.answer(200, list("40", vec![]));
    let _watch = server.next().await;
    let _third = third.await.unwrap().unwrap();
    assert_eq!(
        cluster.open_watches(),
        1,
        "the closed watch was unregistered"
    );
}

#[tokio::test]
async fn names_and_fields_become_field_selectors_one_watch_per_namespace_and_name() {
    let (cluster, mut server) = mock();
    let selector = Selector {
        namespaces: Some(vec!["a".into(), "b".into()]),
        names: Some(vec!["x".into()]),
        labels: None,
        fields: vec![FieldRequirement {
            field: "status.phase".into(),
            operator: FieldOperator::NotEquals,
            value: "Running".into(),
        }],
    };
    let cluster = std::sync::Arc::new(cluster);
    let c = cluster.clone();
    let listing = tokio::spawn(async move { c.list_and_watch(&pods(), &selector).await });
    let mut uris = Vec::new();
    let mut open_watches = Vec::new();
    for _ in 0..4 {
        let call = server.next().await;
        uris.push(call.uri.clone());
        if call.uri.contains("watch=true") {
            open_watches.push(call);
        } else {
            call.answer(200, list("5", vec![]));
        }
    }
    uris.sort();
    assert_eq!(
        uris,
        [
            "/api/v1/namespaces/a/pods?&fieldSelector=status.phase%21%3DRunning%2Cmetadata.name%3Dx&resourceVersion=0",
            "/api/v1/namespaces/a/pods?&watch=true&timeoutSeconds=290&fieldSelector=status.phase%21%3DRunning%2Cmetadata.name%3Dx&allowWatchBookmarks=true&resourceVersion=5",
            "/api/v1/namespaces/b/pods?&fieldSelector=status.phase%21%3DRunning%2Cmetadata.name%3Dx&resourceVersion=0",
            "/api/v1/namespaces/b/pods?&watch=true&timeoutSeconds=290&fieldSelector=status.phase%21%3DRunning%2Cmetadata.name%3Dx&allowWatchBookmarks=true&resourceVersion=5",
        ]
    );
    listing.await.unwrap().unwrap();
    assert_eq!(cluster.open_watches(), 2);
}

#[tokio::test]
async fn a_forbidden_list_fails_the_binding_with_the_servers_reason() {
    let (cluster, mut server) = mock();
    let listing =
        tokio::spawn(async move { cluster.list_and_watch(&pods(), &default_app_x()).await });
    server.expect("GET", LIST).await.fail(
        403,
        "Forbidden",
        "pods is forbidden: User \"system:serviceaccount:operon:operon\" cannot list resource \"pods\"",
    );
    let error = listing.await.unwrap().unwrap_err();
    assert!(
        error
            .to_string()
            .contains("403 Forbidden: pods is forbidden"),
        "{error}"
    );
}

#[tokio::test]
async fn a_binding_joining_gets_the_relist_and_the_others_its_changes() {
    let (cluster, mut server, _watch, objects, mut first_events) =
        watched(vec![pod("a", "1"), pod("b", "2")]).await;
    assert_eq!(objects.len(), 2);

    // Two more join while a changed, b stayed and c appeared: each gets the whole
    // re-list, the first binding only what changed.
    let joins: Vec<_> = (0..2)
        .map(|_| {
            let c = cluster.clone();
            tokio::spawn(async move { c.list_and_watch(&pods(), &default_app_x()).await })
        })
        .collect();
    // Both joins may land in one re-list or in two; each re-list lists the same.
    let mut lists = 0;
    let mut watches = Vec::new();
    let mut joined = Vec::new();
    for join in joins {
        while !join.is_finished() {
            tokio::select! {
                call = server.next() => {
                    if call.uri.contains("watch=true") {
                        watches.push(call);
                    } else {
                        lists += 1;
                        call.answer(200, list("20", vec![pod("a", "11"), pod("b", "2"), pod("c", "12")]));
                    }
                }
                () = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
            }
        }
        joined.push(join.await.unwrap().unwrap());
    }
    assert!((1..=2).contains(&lists), "{lists} re-lists");
    for (objects, _) in joined {
        let mut names: Vec<_> = objects
            .into_iter()
            .map(|o| {
                (
                    o["metadata"]["name"].clone(),
                    o["metadata"]["resourceVersion"].clone(),
                )
            })
            .collect();
        names.sort_by_key(|(name, _)| name.to_string());
        assert_eq!(
            names,
            vec![
                (json!("a"), json!("11")),
                (json!("b"), json!("2")),
                (json!("c"), json!("12"))
            ]
        );
    }
    let mut next = async || {
        tokio::time::timeout(std::time::Duration::from_secs(5), first_events.recv())
            .await
            .expect("an event within 5 s")
            .unwrap()
    };
    let first_event = next().await;
    assert_eq!(
        (first_event.kind, name(&first_event)),
        (WatchEvent::Modified, "a")
    );
    let second_event = next().await;
    assert_eq!(
        (second_event.kind, name(&second_event)),
        (WatchEvent::Added, "c")
    );
    assert!(first_events.try_recv().is_err(), "b did not change");
}

#[tokio::test]
async fn a_list_of_several_pages_is_followed_to_its_last_page() {
    let (cluster, mut server) = mock();
    let listing =
        tokio::spawn(async move { cluster.list_and_watch(&pods(), &default_app_x()).await });
    let mut first = list("", vec![pod("a", "1"), pod("b", "2")]);
    first["metadata"] = json!({"continue": "page-2", "remainingItemCount": 1});
    server.expect("GET", LIST).await.answer(200, first);
    // Whatever the first page asked for, the next ones carry the token and a limit.
    server
        .expect("GET", &format!("{CONSISTENT_LIST}&continue=page-2"))
        .await
        .answer(200, list("15", vec![pod("c", "3")]));
    let _watch = server.expect("GET", &watch_uri("15")).await;
    let (objects, _events) = listing.await.unwrap().unwrap();
    let names: Vec<String> = objects
        .into_iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
}

#[tokio::test]
async fn listed_objects_come_as_sent_with_their_type_whatever_the_shape_of_their_metadata() {
    let (cluster, mut server) = mock();
    let cluster = std::sync::Arc::new(cluster);
    let c = cluster.clone();
    let listing = tokio::spawn(async move { c.list_and_watch(&pods(), &default_app_x()).await });
    // Kept as text, read back by the binding: escapes, numbers and key order survive;
    // "b" repeats its metadata (read whole, the last one counts, as for a watch event)
    // and "c" has a null namespace.
    let body = r#"{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"9"},"items":[
        {"metadata":{"name":"d","namespace":"default","resourceVersion":"4"},"spec":{"z":1.5e3,"a":"\u00e9\n"}},
        {"metadata":{"name":"x"},"metadata":{"name":"b","namespace":"default","resourceVersion":"2"}},
        {"metadata":{"name":"c","namespace":null,"resourceVersion":"3"}}
    ]}"#;
    server
        .expect("GET", LIST)
        .await
        .answer_raw(200, body.as_bytes().to_vec());
    let _watch = server.expect("GET", &watch_uri("9")).await;
    let (objects, _events) = listing.await.unwrap().unwrap();
    assert_eq!(objects.len(), 3);
    let objects: Vec<Value> = objects.into_iter().collect();
    assert_eq!(
        objects,
        [
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "c", "namespace": null, "resourceVersion": "3"}}),
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "b", "namespace": "default", "resourceVersion": "2"}}),
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "d", "namespace": "default", "resourceVersion": "4"},
                   "spec": {"z": 1.5e3, "a": "\u{e9}\n"}}),
        ]
    );
}

#[tokio::test]
async fn a_line_that_is_no_watch_event_brings_a_new_list_and_loses_nothing() {
    let (_cluster, mut server, watch, _objects, mut events) = watched(vec![pod("a", "1")]).await;
    // An event, a line cut short (what a broken proxy might pass on), and an event the
    // source can no longer trust to follow on from it.
    let mut body = watch_lines(&[json!({"type": "MODIFIED", "object": pod("a", "11")})]);
    body.extend_from_slice(b"{\"type\": \"MODIFIED\", \"object\": {\"metadata\"\n");
    body.extend(watch_lines(&[
        json!({"type": "ADDED", "object": pod("b", "13")}),
    ]));
    watch.answer_raw(200, body);
    // The new list, not older than the last event seen (a at 11), has what the broken
    // line was about (a at 12) and b.
    server
        .expect("GET", &relist_uri("11"))
        .await
        .answer(200, list("13", vec![pod("a", "12"), pod("b", "13")]));
    let _next = server.expect("GET", &watch_uri("13")).await;
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let event = events.recv().await.unwrap();
        let version = event.object["metadata"]["resourceVersion"].clone();
        seen.push((event.kind, name(&event).to_owned(), version));
    }
    assert_eq!(
        seen,
        [
            (WatchEvent::Modified, "a".to_owned(), json!("11")),
            (WatchEvent::Modified, "a".to_owned(), json!("12")),
            (WatchEvent::Added, "b".to_owned(), json!("13")),
        ]
    );
    server.quiet().await;
    assert!(events.try_recv().is_err());
}

#[tokio::test]
async fn an_error_event_other_than_gone_resumes_the_watch_without_a_list() {
    let (_cluster, mut server, watch, _objects, mut events) = watched(vec![pod("a", "1")]).await;
    watch.answer_raw(
        200,
        watch_lines(&[
            json!({"type": "ADDED", "object": pod("b", "11")}),
            json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1",
                   "status": "Failure", "code": 500, "reason": "InternalError",
                   "message": "etcdserver: leader changed"}}),
            json!({"type": "DELETED", "object": pod("a", "12")}),
        ]),
    );
    let _next = server.expect("GET", &watch_uri("12")).await;
    let added = events.recv().await.unwrap();
    let deleted = events.recv().await.unwrap();
    assert_eq!(
        [(added.kind, name(&added)), (deleted.kind, name(&deleted))],
        [(WatchEvent::Added, "b"), (WatchEvent::Deleted, "a")]
    );
}

#[tokio::test]
async fn a_binding_joining_as_the_last_one_leaves_gets_its_list() {
    let (cluster, mut server, _watch, _, events) = watched(vec![pod("a", "1")]).await;
    let mut events = Some(events);
    let mut watches = Vec::new();
    let (resource, selector) = (pods(), default_app_x());
    // The watch task sees the last binding gone and the join at the same time, and
    // `select!` takes ready branches in a random order: rounds enough that the
    // binding leaving is seen first in some.
    for round in 0..16 {
        let mut rejoin = Box::pin(cluster.list_and_watch(&resource, &selector));
        drop(events.take());
        // The join is sent before the watch task runs again.
        assert!(futures::poll!(&mut rejoin).is_pending());
        let call = tokio::time::timeout(std::time::Duration::from_secs(5), server.next())
            .await
            .unwrap_or_else(|_| panic!("round {round}: the joining binding got no list"));
        // Not older than the list before it.
        assert_eq!(call.uri, relist_uri("10"), "round {round}");
        call.answer(200, list("10", vec![pod("a", "1")]));
        watches.push(server.expect("GET", &watch_uri("10")).await);
        let (objects, joined) = rejoin.await.unwrap();
        assert_eq!(objects.len(), 1, "round {round}");
        events = Some(joined);
        assert_eq!(cluster.open_watches(), 1);
    }
}

#[tokio::test]
async fn a_relist_at_a_version_the_server_does_not_have_is_followed_by_one_from_etcd() {
    // Gone (compacted) or not there yet (an API server behind the one that answered
    // before): either way client-go's reflector lists from etcd next, and so does this.
    let statuses = [
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410,
               "reason": "Expired", "message": "too old resource version: 11 (40)"}),
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 504,
               "reason": "Timeout", "message": "Too large resource version: 11, current: 9",
               "details": {"causes": [{"reason": "ResourceVersionTooLarge",
                                       "message": "Too large resource version"}]}}),
    ];
    for status in statuses {
        let (_cluster, mut server, watch, _objects, mut events) =
            watched(vec![pod("a", "1")]).await;
        // An event, then a line that is no watch event: a new list, from the last
        // version the watch saw.
        let mut body = watch_lines(&[json!({"type": "MODIFIED", "object": pod("a", "11")})]);
        body.extend_from_slice(b"not a watch event\n");
        watch.answer_raw(200, body);
        assert_eq!(name(&events.recv().await.unwrap()), "a");
        let code = status["code"].as_u64().unwrap() as u16;
        server
            .expect("GET", &relist_uri("11"))
            .await
            .answer(code, status.clone());
        server
            .expect("GET", CONSISTENT_LIST)
            .await
            .answer(200, list("40", vec![pod("a", "11")]));
        let _next = server.expect("GET", &watch_uri("40")).await;
        server.quiet().await;
        assert!(events.try_recv().is_err(), "{code}: a was reported once");
    }
}
