//! The local API's patches (JSON with `test`, merge, strategic with merge keys and
//! directives, refused for custom resources; server-side apply with field managers,
//! removals and conflicts) and watches (initial events, resuming from a
//! `resourceVersion`, bookmarks, 410 for one too old).

use super::tests::{api, names};
use http::{Method, StatusCode};
use serde_json::{Value, json};

const DEPLOYMENT: &str = "/apis/apps/v1/namespaces/default/deployments";

async fn deployment(api: &super::tests::Api) {
    let deployment = json!({
        "metadata": {"name": "web"},
        "spec": {"template": {"spec": {
            "containers": [
                {"name": "app", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]},
                {"name": "side", "image": "busybox"},
            ],
            "volumes": [{"name": "data", "emptyDir": {}}],
        }}},
    });
    let (code, created) = api
        .call(
            Method::POST,
            DEPLOYMENT,
            "application/json",
            Some(deployment),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
}

fn containers(object: &Value) -> &Vec<Value> {
    object["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
}

#[tokio::test]
async fn json_and_merge_patches() {
    let api = api();
    let uri = "/api/v1/namespaces/default/secrets/creds";
    let merge =
        json!({"metadata": {"labels": {"copy": null, "new": "x"}}, "data": {"more": "eA=="}});
    let (code, patched) = api
        .call(
            Method::PATCH,
            uri,
            "application/merge-patch+json",
            Some(merge),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{patched}");
    assert_eq!(patched["metadata"]["labels"], json!({"new": "x"}));
    assert_eq!(patched["data"]["password"], "cGFzcw==");

    let failing = json!([{"op": "test", "path": "/data/more", "value": "no"}, {"op": "remove", "path": "/data/more"}]);
    let (code, status) = api
        .call(
            Method::PATCH,
            uri,
            "application/json-patch+json",
            Some(failing),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
    assert_eq!(status["kind"], "Status");
    let passing = json!([{"op": "test", "path": "/data/more", "value": "eA=="}, {"op": "remove", "path": "/data/more"}]);
    let (code, patched) = api
        .call(
            Method::PATCH,
            uri,
            "application/json-patch+json",
            Some(passing),
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    assert!(patched["data"].get("more").is_none());

    let stale = json!({"metadata": {"resourceVersion": "1"}, "data": {"x": "eA=="}});
    let (code, status) = api
        .call(
            Method::PATCH,
            uri,
            "application/merge-patch+json",
            Some(stale),
        )
        .await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert_eq!(status["reason"], "Conflict");

    let (code, status) = api
        .call(
            Method::PATCH,
            "/api/v1/namespaces/default/secrets/nope",
            "application/merge-patch+json",
            Some(json!({})),
        )
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{status}");
    let rename = json!({"metadata": {"name": "other"}});
    let (code, _) = api
        .call(
            Method::PATCH,
            uri,
            "application/merge-patch+json",
            Some(rename),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn strategic_merge_merges_lists_by_their_keys() {
    let api = api();
    deployment(&api).await;
    let uri = format!("{DEPLOYMENT}/web");
    let patch = json!({"spec": {"template": {"spec": {
        "containers": [
            {"name": "app", "image": "nginx:2", "env": [{"name": "B", "value": "2"}]},
            {"name": "new", "image": "alpine"},
        ],
        "volumes": [{"name": "data", "$patch": "delete"}],
    }}}});
    let (code, patched) = api
        .call(
            Method::PATCH,
            &uri,
            "application/strategic-merge-patch+json",
            Some(patch),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{patched}");
    let list = containers(&patched);
    let names: Vec<&str> = list.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["app", "side", "new"]);
    assert_eq!(list[0]["image"], "nginx:2");
    assert_eq!(
        list[0]["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
    );
    assert_eq!(patched["spec"]["template"]["spec"]["volumes"], json!([]));

    let replace = json!({"spec": {"template": {"spec": {
        "containers": [{"$patch": "replace"}, {"name": "only", "image": "x"}],
        "$setElementOrder/containers": [{"name": "only"}],
    }}}});
    let (_, patched) = api
        .call(
            Method::PATCH,
            &uri,
            "application/strategic-merge-patch+json",
            Some(replace),
        )
        .await;
    assert_eq!(
        containers(&patched),
        &vec![json!({"name": "only", "image": "x"})]
    );

    let (code, status) = api
        .call(
            Method::PATCH,
            "/apis/example.com/v1/namespaces/default/widgets/w1",
            "application/strategic-merge-patch+json",
            Some(json!({"spec": {"size": 2}})),
        )
        .await;
    assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(status["reason"], "UnsupportedMediaType");
    assert!(
        !status["message"].as_str().unwrap().contains("strategic"),
        "{status}"
    );
}

async fn apply(
    api: &super::tests::Api,
    manager: &str,
    force: bool,
    data: Value,
) -> (StatusCode, Value) {
    let config =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": data});
    let uri = format!(
        "/api/v1/namespaces/default/configmaps/cfg?fieldManager={manager}{}",
        if force { "&force=true" } else { "" }
    );
    api.call(
        Method::PATCH,
        &uri,
        "application/apply-patch+yaml",
        Some(Value::String(config.to_string())),
    )
    .await
}

#[tokio::test]
async fn server_side_apply_tracks_managers_removes_and_conflicts() {
    let api = api();
    let (code, created) = apply(&api, "alice", false, json!({"a": "1", "b": "2"})).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let managed = &created["metadata"]["managedFields"];
    assert_eq!(managed[0]["manager"], "alice");
    assert_eq!(managed[0]["operation"], "Apply");
    assert_eq!(
        managed[0]["fieldsV1"],
        json!({"f:data": {"f:a": {}, "f:b": {}}})
    );

    // Alice no longer applies b: it goes.
    let (code, applied) = apply(&api, "alice", false, json!({"a": "1"})).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(applied["data"], json!({"a": "1"}));

    // Bob may co-own a with the same value, and add c.
    let (code, applied) = apply(&api, "bob", false, json!({"a": "1", "c": "3"})).await;
    assert_eq!(code, StatusCode::OK, "{applied}");
    assert_eq!(applied["data"], json!({"a": "1", "c": "3"}));
    // Alice dropping a leaves it: Bob still owns it.
    let (_, applied) = apply(&api, "alice", false, json!({})).await;
    assert_eq!(applied["data"], json!({"a": "1", "c": "3"}));

    let (code, status) = apply(&api, "carol", false, json!({"c": "9"})).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert_eq!(
        status["message"],
        "Apply failed with 1 conflict: conflict with \"bob\" using v1: .data.c"
    );
    assert_eq!(status["details"]["causes"][0]["field"], ".data.c");
    let (code, applied) = apply(&api, "carol", true, json!({"c": "9"})).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(applied["data"]["c"], "9");
    let managers: Vec<&str> = applied["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["manager"].as_str().unwrap())
        .collect();
    // Alice still applies `data: {}`, which she owns.
    assert_eq!(managers, ["alice", "bob", "carol"]);

    // An ordinary write takes what it changes from the appliers.
    let (code, _) = api
        .call(
            Method::PATCH,
            "/api/v1/namespaces/default/configmaps/cfg?fieldManager=editor",
            "application/merge-patch+json",
            Some(json!({"data": {"a": "2"}})),
        )
        .await;
    assert_eq!(code, StatusCode::OK);
    let (code, status) = apply(&api, "bob", false, json!({"a": "1", "c": "3"})).await;
    assert_eq!(code, StatusCode::CONFLICT, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("conflict with \"editor\""),
        "{status}"
    );

    let (code, status) = api
        .call(
            Method::PATCH,
            "/api/v1/namespaces/default/configmaps/cfg",
            "application/apply-patch+yaml",
            Some(Value::String("data: {}".into())),
        )
        .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
}

#[tokio::test]
async fn server_side_apply_merges_containers_by_name() {
    let api = api();
    deployment(&api).await;
    let uri = format!("{DEPLOYMENT}/web?fieldManager=ops");
    let config = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [{"name": "side", "image": "busybox:2"}]}}}});
    let (code, applied) = api
        .call(
            Method::PATCH,
            &uri,
            "application/apply-patch+yaml",
            Some(Value::String(config.to_string())),
        )
        .await;
    assert_eq!(code, StatusCode::CONFLICT, "{applied}");
    let (code, applied) = api
        .call(
            Method::PATCH,
            &format!("{uri}&force=true"),
            "application/apply-patch+yaml",
            Some(Value::String(config.to_string())),
        )
        .await;
    assert_eq!(code, StatusCode::OK, "{applied}");
    let images: Vec<&str> = containers(&applied)
        .iter()
        .map(|c| c["image"].as_str().unwrap())
        .collect();
    assert_eq!(images, ["nginx:1", "busybox:2"]);
}

#[tokio::test]
async fn watches_start_with_the_objects_and_resume_from_a_version() {
    let api = api();
    let (_, list) = api.get("/api/v1/namespaces/default/configmaps").await;
    let version = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    for name in ["one", "two"] {
        api.call(
            Method::POST,
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            Some(json!({"metadata": {"name": name}})),
        )
        .await;
    }
    api.call(
        Method::DELETE,
        "/api/v1/namespaces/default/configmaps/one",
        "application/json",
        None,
    )
    .await;
    let (code, events) = api
        .get(&format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={version}&timeoutSeconds=1"))
        .await;
    assert_eq!(code, StatusCode::OK);
    let seen: Vec<(String, String)> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_owned(),
                e["object"]["metadata"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [("ADDED", "one"), ("ADDED", "two"), ("DELETED", "one")]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );

    let (_, events) = api
        .get("/api/v1/secrets?watch=1&labelSelector=copy%3Dyes&timeoutSeconds=1&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan")
        .await;
    let events = events.as_array().unwrap();
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["metadata"]["name"], "creds");
    assert_eq!(events[1]["type"], "BOOKMARK");
    assert_eq!(
        events[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(events.len(), 2);

    let (_, list) = api.get("/api/v1/namespaces/default/configmaps").await;
    assert_eq!(names(&list), ["two"]);
}

#[tokio::test]
async fn a_watch_from_a_version_no_longer_kept_is_gone() {
    let api = api();
    for i in 0..1002 {
        let cm = json!({"metadata": {"name": "churn"}, "data": {"i": i.to_string()}});
        let method = if i == 0 { Method::POST } else { Method::PUT };
        let uri = if i == 0 {
            "/api/v1/namespaces/default/configmaps".to_owned()
        } else {
            "/api/v1/namespaces/default/configmaps/churn".to_owned()
        };
        api.call(method, &uri, "application/json", Some(cm)).await;
    }
    let (code, status) = api
        .get("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=2&timeoutSeconds=1")
        .await;
    assert_eq!(code, StatusCode::GONE);
    assert_eq!(status["reason"], "Expired");
}
