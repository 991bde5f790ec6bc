//! The nine patch operations as API requests.

use super::{Server, mock};
use crate::kube::KubeCluster;
use crate::{Cluster as _, ClusterError};
use operon_data::model::{CreateSpec, JqPatchSpec, ObjectRef, PatchOperation, PatchSpec};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::task::JoinHandle;

const CM: &str = "/api/v1/namespaces/default/configmaps";

fn config_map(data: &str, resource_version: Option<&str>) -> Value {
    let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "settings", "namespace": "default"},
                            "data": {"mode": data}});
    if let Some(rv) = resource_version {
        object["metadata"]["resourceVersion"] = json!(rv);
    }
    object
}

fn target() -> ObjectRef {
    ObjectRef {
        api_version: Some("v1".into()),
        kind: "ConfigMap".into(),
        namespace: Some("default".into()),
        name: "settings".into(),
    }
}

fn create_spec() -> CreateSpec {
    CreateSpec {
        object: config_map("on", None).to_string(),
        subresource: None,
    }
}

fn start(operation: PatchOperation) -> (JoinHandle<Result<(), ClusterError>>, Server) {
    let (cluster, server) = mock();
    (spawn(Arc::new(cluster), operation), server)
}

fn spawn(
    cluster: Arc<KubeCluster>,
    operation: PatchOperation,
) -> JoinHandle<Result<(), ClusterError>> {
    tokio::spawn(async move { cluster.apply(&operation).await })
}

#[tokio::test]
async fn create_posts_with_the_field_manager_and_refuses_an_existing_object() {
    let (done, mut server) = start(PatchOperation::Create(create_spec()));
    let call = server
        .expect("POST", &format!("{CM}?&fieldManager=operon"))
        .await;
    assert_eq!(call.content_type.as_deref(), Some("application/json"));
    assert_eq!(call.json(), config_map("on", None));
    call.fail(
        409,
        "AlreadyExists",
        "configmaps \"settings\" already exists",
    );
    assert_eq!(
        done.await.unwrap(),
        Err(ClusterError::AlreadyExists {
            kind: "ConfigMap".into(),
            namespace: Some("default".into()),
            name: "settings".into()
        })
    );
}

#[tokio::test]
async fn create_if_not_exists_accepts_an_existing_object() {
    let (done, mut server) = start(PatchOperation::CreateIfNotExists(create_spec()));
    server
        .expect("POST", &format!("{CM}?&fieldManager=operon"))
        .await
        .fail(
            409,
            "AlreadyExists",
            "configmaps \"settings\" already exists",
        );
    assert_eq!(done.await.unwrap(), Ok(()));
    server.quiet().await;
}

#[tokio::test(start_paused = true)]
async fn create_or_update_replaces_with_the_read_version_and_retries_a_conflict() {
    let (done, mut server) = start(PatchOperation::CreateOrUpdate(create_spec()));
    server
        .expect("POST", &format!("{CM}?&fieldManager=operon"))
        .await
        .fail(
            409,
            "AlreadyExists",
            "configmaps \"settings\" already exists",
        );
    for (read, status) in [("7", 409), ("8", 200)] {
        server
            .expect("GET", &format!("{CM}/settings"))
            .await
            .answer(200, config_map("off", Some(read)));
        let put = server
            .expect("PUT", &format!("{CM}/settings?&fieldManager=operon"))
            .await;
        assert_eq!(put.json(), config_map("on", Some(read)));
        if status == 409 {
            put.fail(409, "Conflict", "the object has been modified; please apply your changes to the latest version and try again");
        } else {
            put.answer(200, config_map("on", Some("9")));
        }
    }
    assert_eq!(done.await.unwrap(), Ok(()));
}

#[tokio::test(start_paused = true)]
async fn a_conflict_that_persists_fails_after_four_attempts() {
    let (done, mut server) = start(PatchOperation::JqPatch(JqPatchSpec {
        target: target(),
        jq_filter: ".data.mode = \"on\"".into(),
        subresource: None,
        ignore_missing_object: false,
    }));
    for attempt in 0..4 {
        server
            .expect("GET", &format!("{CM}/settings"))
            .await
            .answer(200, config_map("off", Some(&attempt.to_string())));
        server
            .expect("PUT", &format!("{CM}/settings?&fieldManager=operon"))
            .await
            .fail(409, "Conflict", "the object has been modified");
    }
    let error = done.await.unwrap().unwrap_err();
    assert!(
        error
            .to_string()
            .contains("still conflicting after 4 attempts"),
        "{error}"
    );
}

#[tokio::test]
async fn jq_patch_updates_what_the_filter_made_of_the_read_object() {
    let (done, mut server) = start(PatchOperation::JqPatch(JqPatchSpec {
        target: target(),
        jq_filter: ".data.mode = \"on\" | .metadata.annotations = {checked: \"yes\"}".into(),
        subresource: Some("status".into()),
        ignore_missing_object: false,
    }));
    server
        .expect("GET", &format!("{CM}/settings"))
        .await
        .answer(200, config_map("off", Some("4")));
    let put = server
        .expect("PUT", &format!("{CM}/settings/status?&fieldManager=operon"))
        .await;
    let mut expected = config_map("on", Some("4"));
    expected["metadata"]["annotations"] = json!({"checked": "yes"});
    assert_eq!(put.json(), expected);
    put.answer(200, expected);
    assert_eq!(done.await.unwrap(), Ok(()));
}

#[tokio::test]
async fn jq_patch_that_changes_nothing_writes_nothing() {
    let (done, mut server) = start(PatchOperation::JqPatch(JqPatchSpec {
        target: target(),
        jq_filter: ".data.mode = \"on\"".into(),
        subresource: None,
        ignore_missing_object: false,
    }));
    server
        .expect("GET", &format!("{CM}/settings"))
        .await
        .answer(200, config_map("on", Some("4")));
    assert_eq!(done.await.unwrap(), Ok(()));
    server.quiet().await;
}

#[tokio::test]
async fn jq_patch_of_a_missing_object_fails_unless_ignored() {
    for ignore in [false, true] {
        let (done, mut server) = start(PatchOperation::JqPatch(JqPatchSpec {
            target: target(),
            jq_filter: ".".into(),
            subresource: None,
            ignore_missing_object: ignore,
        }));
        server.expect("GET", &format!("{CM}/settings")).await.fail(
            404,
            "NotFound",
            "configmaps \"settings\" not found",
        );
        let outcome = done.await.unwrap();
        if ignore {
            assert_eq!(outcome, Ok(()));
        } else {
            assert_eq!(
                outcome,
                Err(ClusterError::NotFound {
                    kind: "ConfigMap".into(),
                    namespace: Some("default".into()),
                    name: "settings".into()
                })
            );
        }
    }
}

#[tokio::test]
async fn merge_and_json_patches_carry_their_content_type() {
    let merge = PatchOperation::MergePatch(PatchSpec {
        target: target(),
        patch: r#"{"data":{"mode":"on"}}"#.into(),
        subresource: None,
        ignore_missing_object: false,
    });
    let (done, mut server) = start(merge);
    let call = server
        .expect("PATCH", &format!("{CM}/settings?&fieldManager=operon"))
        .await;
    assert_eq!(
        call.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert_eq!(call.json(), json!({"data": {"mode": "on"}}));
    call.answer(200, config_map("on", Some("5")));
    assert_eq!(done.await.unwrap(), Ok(()));

    let json_patch = PatchOperation::JsonPatch(PatchSpec {
        target: target(),
        patch: r#"[{"op":"replace","path":"/status/phase","value":"Done"}]"#.into(),
        subresource: Some("status".into()),
        ignore_missing_object: true,
    });
    let (done, mut server) = start(json_patch);
    let call = server
        .expect(
            "PATCH",
            &format!("{CM}/settings/status?&fieldManager=operon"),
        )
        .await;
    assert_eq!(
        call.content_type.as_deref(),
        Some("application/json-patch+json")
    );
    assert_eq!(
        call.json(),
        json!([{"op": "replace", "path": "/status/phase", "value": "Done"}])
    );
    call.fail(404, "NotFound", "configmaps \"settings\" not found");
    assert_eq!(done.await.unwrap(), Ok(()), "ignoreMissingObject");
}

#[tokio::test(start_paused = true)]
async fn delete_waits_until_a_foreground_deletion_is_done() {
    let (done, mut server) = start(PatchOperation::Delete(target()));
    let call = server.expect("DELETE", &format!("{CM}/settings?")).await;
    assert_eq!(call.json(), json!({"propagationPolicy": "Foreground"}));
    let mut deleting = config_map("on", Some("6"));
    deleting["metadata"]["deletionTimestamp"] = json!("2026-11-23T10:00:00Z");
    deleting["metadata"]["finalizers"] = json!(["foregroundDeletion"]);
    call.answer(200, deleting.clone());
    server
        .expect("GET", &format!("{CM}/settings"))
        .await
        .answer(200, deleting);
    assert!(!done.is_finished(), "still waiting while the object exists");
    server.expect("GET", &format!("{CM}/settings")).await.fail(
        404,
        "NotFound",
        "configmaps \"settings\" not found",
    );
    assert_eq!(done.await.unwrap(), Ok(()));
}

#[tokio::test]
async fn background_and_orphan_deletes_do_not_wait_and_a_missing_object_is_deleted() {
    for (operation, policy) in [
        (PatchOperation::DeleteInBackground(target()), "Background"),
        (PatchOperation::DeleteNonCascading(target()), "Orphan"),
    ] {
        let (done, mut server) = start(operation);
        let call = server.expect("DELETE", &format!("{CM}/settings?")).await;
        assert_eq!(call.json(), json!({"propagationPolicy": policy}));
        call.fail(404, "NotFound", "configmaps \"settings\" not found");
        assert_eq!(done.await.unwrap(), Ok(()));
        server.quiet().await;
    }
}

#[tokio::test]
async fn an_invalid_object_names_the_servers_reason() {
    let (done, mut server) = start(PatchOperation::Create(create_spec()));
    server
        .expect("POST", &format!("{CM}?&fieldManager=operon"))
        .await
        .fail(
            422,
            "Invalid",
            "ConfigMap \"settings\" is invalid: data[mode]: Invalid value",
        );
    let error = done.await.unwrap().unwrap_err();
    assert_eq!(
        error,
        ClusterError::Invalid {
            what: "Create of ConfigMap default/settings".into(),
            reason: "ConfigMap \"settings\" is invalid: data[mode]: Invalid value".into()
        }
    );
}
