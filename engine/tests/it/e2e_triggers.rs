//! End to end for Triggers against a real Kubernetes API server: ignored unless run
//! with `--ignored`, so CI (which has no API server) lists it as ignored, and then
//! failing unless `OPERON_E2E_KUBECONFIG` names a kubeconfig (cluster-admin).
//!
//! One `operon serve` with `--alertmanager-token-secret`: an Alertmanager webhook
//! message creates one Diagnosis (owned by its Trigger) and its redelivery none; a
//! wrong token is refused; a cron Trigger creates its Diagnosis and records
//! `status.lastScheduleTime`; a core/v1 and an events.k8s.io/v1 Event each make one
//! Diagnosis of an event Trigger. Diagnoses go to namespace `operon` (created when
//! missing, never deleted); the Triggers, and through their owner references their
//! Diagnoses, and the test's namespace are deleted afterwards.

use kube::api::{Api, ListParams, PostParams};
use operon::api::{Diagnosis, Trigger};
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::e2e_support::*;

fn unique() -> String {
    format!("{:08x}", getrandom_u32())
}

/// POSTs `body` to `path` on `port` with the bearer `token`; the status and the body,
/// or `None` while nothing listens.
async fn try_post(port: u16, path: &str, token: &str, body: &str) -> Option<(u16, Value)> {
    use http_body_util::BodyExt as _;
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::post(path)
        .header("host", "operon")
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {token}"))
        .body(http_body_util::Full::new(bytes::Bytes::from(
            body.to_owned(),
        )))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Some((status, value))
}

async fn post(port: u16, path: &str, token: &str, body: &str) -> (u16, Value) {
    try_post(port, path, token, body)
        .await
        .expect("operon serve listens")
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn alerts_and_a_schedule_create_diagnoses_owned_by_their_triggers() {
    let path = kubeconfig();
    let cluster = connect(&path).await;
    let client = cluster.client().clone();
    let run = unique();
    let namespace = format!("operon-e2e-triggers-{run}");
    let (alert_trigger, cron_trigger) = (format!("e2e-alert-{run}"), format!("e2e-cron-{run}"));
    let event_trigger = format!("e2e-event-{run}");
    let _cleanup = ClusterScoped {
        kubeconfig: path.clone(),
        objects: vec![
            ("trigger.operon.dev", alert_trigger.clone()),
            ("trigger.operon.dev", cron_trigger.clone()),
            ("trigger.operon.dev", event_trigger.clone()),
            ("namespace", namespace.clone()),
        ],
    };

    apply_operon_crds(&cluster).await;
    ensure_namespaces(&client, &[namespace.as_str(), "operon"]).await;
    let token = format!("e2e-token-{run}");
    token_secret(
        &client,
        &namespace,
        "alertmanager-token",
        &format!("{token}\n"),
    )
    .await;

    let triggers: Api<Trigger> = Api::all(client.clone());
    let trigger = |name: &str, source: Value| -> Trigger {
        serde_json::from_value(json!({
            "apiVersion": "operon.dev/v1alpha1", "kind": "Trigger",
            "metadata": {"name": name},
            "spec": {"operationSet": "e2e-absent-set", "sourceTemplate": source},
        }))
        .unwrap()
    };
    let alerting = triggers
        .create(
            &PostParams::default(),
            &trigger(
                &alert_trigger,
                json!({"prometheusAlertTemplate": {
                    "regexp": {"alertName": format!("^E2eDiskFull{run}$")},
                    "nodeNameReferenceLabel": "node"}}),
            ),
        )
        .await
        .unwrap();
    triggers
        .create(
            &PostParams::default(),
            &trigger(
                &cron_trigger,
                json!({"cronTemplate": {"schedule": "@every 3s"}}),
            ),
        )
        .await
        .unwrap();

    triggers
        .create(
            &PostParams::default(),
            &trigger(
                &event_trigger,
                json!({"kubernetesEventTemplate": {"regexp": {"reason": format!("^E2eBackOff{run}$")}}}),
            ),
        )
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_operon"))
        .arg("serve")
        .arg("--kubeconfig")
        .arg(&path)
        .arg("--hooks-dir")
        .arg(&hooks)
        .args([
            "--listen-address",
            "127.0.0.1",
            "--listen-port",
            &port.to_string(),
        ])
        .args(["--debug-unix-socket", ""])
        .args([
            "--alertmanager-token-secret",
            &format!("{namespace}/alertmanager-token"),
        ])
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .env("POD_NAME", "e2e-triggers")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("serve.log")).unwrap())
        .spawn()
        .expect("operon serve starts");
    let server = Serve { child, port };

    let message = json!({
        "receiver": "operon", "status": "firing", "version": "4",
        "groupKey": format!("{{}}:{{alertname=\"E2eDiskFull{run}\"}}"),
        "alerts": [{
            "status": "firing",
            "labels": {"alertname": format!("E2eDiskFull{run}"), "node": "worker-1", "severity": "warning"},
            "annotations": {"summary": "disk full"},
            "startsAt": "2024-05-01T10:02:33.421Z",
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus:9090/graph",
            "fingerprint": "3f5a2c1d9e8b7a60",
        }],
    })
    .to_string();
    // The receiver answers 503 until its token and Triggers are loaded.
    let first = eventually(
        "the receiver to take alerts",
        Duration::from_secs(60),
        async || {
            let answer = tokio::time::timeout(
                Duration::from_secs(5),
                try_post(server.port, "/api/v2/alerts", &token, &message),
            )
            .await
            .ok()??;
            (answer.0 != 503).then_some(answer)
        },
    )
    .await;
    assert_eq!(first.0, 200, "{}", first.1);
    assert_eq!(first.1["created"], 1, "{}", first.1);
    let name = first.1["diagnoses"][0]["name"].as_str().unwrap().to_owned();
    assert!(
        name.starts_with(&format!("prometheus-alert.{alert_trigger}.")),
        "{name}"
    );

    let again = post(server.port, "/api/v1/alerts", &token, &message).await;
    assert_eq!(again.0, 200, "{}", again.1);
    assert_eq!(again.1["created"], 0, "{}", again.1);
    assert_eq!(again.1["alreadyExisted"], 1, "{}", again.1);
    let refused = post(server.port, "/api/v2/alerts", "not-the-token", &message).await;
    assert_eq!(refused.0, 401);

    let diagnoses: Api<Diagnosis> = Api::namespaced(client.clone(), "operon");
    let diagnosis = diagnoses.get(&name).await.unwrap();
    assert_eq!(diagnosis.spec.node_name.as_deref(), Some("worker-1"));
    let owner = &diagnosis.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.kind, "Trigger");
    assert_eq!(owner.name, alert_trigger);
    assert_eq!(Some(&owner.uid), alerting.metadata.uid.as_ref());
    let by_trigger = ListParams::default().labels(&format!("operon.dev/trigger={alert_trigger}"));
    assert_eq!(diagnoses.list(&by_trigger).await.unwrap().items.len(), 1);

    // The cron Trigger fires 3 s after its creation, and records the slot.
    let last = eventually(
        "the cron Trigger's lastScheduleTime",
        Duration::from_secs(60),
        async || {
            let t = triggers.get(&cron_trigger).await.ok()?;
            t.status?.last_schedule_time
        },
    )
    .await;
    let slot = format!("cron.{cron_trigger}.{}", last.0.as_second());
    eventually("the cron Diagnosis", Duration::from_secs(10), async || {
        diagnoses.get(&slot).await.ok()
    })
    .await;

    // Events through either API: a core/v1 one and an events.k8s.io/v1 one, each
    // about a Pod, each making one Diagnosis about that Pod.
    let now = jiff::Timestamp::now();
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), &namespace);
    let event: k8s_openapi::api::core::v1::Event = serde_json::from_value(json!({
        "metadata": {"name": format!("cart-0.{run}")},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "cart-0", "namespace": namespace},
        "reason": format!("E2eBackOff{run}"),
        "message": "Back-off restarting failed container",
        "source": {"component": "kubelet", "host": "worker-1"},
        "count": 1, "type": "Warning",
        "firstTimestamp": now.to_string(), "lastTimestamp": now.to_string(),
    }))
    .unwrap();
    core.create(&PostParams::default(), &event).await.unwrap();
    let v1: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), &namespace);
    let event: k8s_openapi::api::events::v1::Event = serde_json::from_value(json!({
        "metadata": {"name": format!("cart-1.{run}")},
        "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        "reportingController": "e2e.operon.dev/test",
        "reportingInstance": "e2e",
        "action": "Restarting",
        "reason": format!("E2eBackOff{run}"),
        "regarding": {"apiVersion": "v1", "kind": "Pod", "name": "cart-1", "namespace": namespace},
        "note": "Back-off restarting failed container",
        "type": "Warning",
    }))
    .unwrap();
    v1.create(&PostParams::default(), &event).await.unwrap();
    let by_trigger = ListParams::default().labels(&format!("operon.dev/trigger={event_trigger}"));
    let mut pods = eventually(
        "a Diagnosis per Event",
        Duration::from_secs(60),
        async || {
            let items = diagnoses.list(&by_trigger).await.ok()?.items;
            (items.len() >= 2).then_some(items)
        },
    )
    .await
    .into_iter()
    .map(|d| d.spec.pod_reference.unwrap().name)
    .collect::<Vec<_>>();
    pods.sort();
    assert_eq!(
        pods,
        ["cart-0", "cart-1"],
        "one Diagnosis per Event, each seen through both APIs"
    );
}
