//! End to end with a real Prometheus and Alertmanager against a real Kubernetes API
//! server: ignored unless run with `--ignored`, and then failing unless
//! `OPERON_E2E_KUBECONFIG` names a kubeconfig (cluster-admin); it needs Debian's
//! `prometheus` and `prometheus-alertmanager` (or `alertmanager`) on the PATH.
//!
//! `operon serve` runs with its Alertmanager receiver; Prometheus scrapes its
//! `/metrics` every second and evaluates Operon's shipped alerting rules (they must
//! load) and one rule of the test's that fires at once (`operon_leader == 1`);
//! Alertmanager sends the alert to the receiver with the token; the matching Trigger
//! creates a Diagnosis, which the controller runs to Succeeded. The Trigger (and
//! through it the Diagnosis), the Operation, the OperationSet and the test's namespace
//! are deleted afterwards.

use kube::api::{Api, ListParams, PostParams};
use operon::api::{Diagnosis, DiagnosisPhase, Trigger};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::e2e_support::*;

/// A process killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn binary(names: &[&str]) -> PathBuf {
    program(names).unwrap_or_else(|| {
        panic!(
            "{} is not installed (apt-get install prometheus prometheus-alertmanager)",
            names[0]
        )
    })
}

/// The groups of the shipped PrometheusRule, as a Prometheus rules file.
fn shipped_rules() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/servicemonitor");
    for entry in std::fs::read_dir(&path).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            for document in text.split("\n---") {
                let Ok(object) = yaml_serde::from_str::<Value>(document) else {
                    continue;
                };
                if object["kind"] == "PrometheusRule" {
                    return json!({"groups": object["spec"]["groups"]});
                }
            }
        }
    }
    panic!("no PrometheusRule in {}", path.display());
}

async fn get_json(url: &str) -> Option<Value> {
    let (host_port, path) = url.strip_prefix("http://")?.split_once('/')?;
    let (host, port) = host_port.split_once(':')?;
    let (status, body) = http_get_at(host, port.parse().ok()?, &format!("/{path}"))?;
    (status == 200).then(|| serde_json::from_str(&body).ok())?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn a_prometheus_alert_through_alertmanager_becomes_a_diagnosis_that_runs() {
    let path = kubeconfig();
    let prometheus = binary(&["prometheus"]);
    let alertmanager = binary(&["prometheus-alertmanager", "alertmanager"]);
    let cluster = connect(&path).await;
    let client = cluster.client().clone();
    let run = format!("{:08x}", getrandom_u32());
    let namespace = format!("operon-e2e-prometheus-{run}");
    let (trigger_name, set_name, operation) = (
        format!("e2e-prom-{run}"),
        format!("e2e-prom-set-{run}"),
        format!("e2e-prom-op-{run}"),
    );
    let alert = format!("OperonE2eLeader{run}");
    let _cleanup = ClusterScoped {
        kubeconfig: path.clone(),
        objects: vec![
            ("trigger.operon.dev", trigger_name.clone()),
            ("operationset.operon.dev", set_name.clone()),
            ("operation.operon.dev", operation.clone()),
            ("namespace", namespace.clone()),
        ],
    };
    apply_operon_crds(&cluster).await;
    ensure_namespaces(&client, &[namespace.as_str(), "operon"]).await;
    let token = format!("e2e-token-{run}");
    token_secret(&client, &namespace, "alertmanager-token", &token).await;
    let operations = operon_api(&cluster, "Operation");
    let op: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "Operation",
        "metadata": {"name": operation},
        "spec": {"processor": {"scriptRunner": {
            "operationResultKey": "handled",
            "script": "echo alert handled",
        }}},
    }))
    .unwrap();
    operations
        .create(&PostParams::default(), &op)
        .await
        .unwrap();
    operon_api(&cluster, "OperationSet")
        .create(&PostParams::default(), &chain(&set_name, &[&operation]))
        .await
        .unwrap();
    let triggers: Api<Trigger> = Api::all(client.clone());
    let trigger: Trigger = serde_json::from_value(json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "Trigger",
        "metadata": {"name": trigger_name},
        "spec": {"operationSet": set_name, "sourceTemplate": {
            "prometheusAlertTemplate": {"regexp": {"alertName": format!("^{alert}$")}}}},
    }))
    .unwrap();
    triggers
        .create(&PostParams::default(), &trigger)
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
        .args(["--listen-address", "127.0.0.1"])
        .args(["--listen-port", &port.to_string()])
        .args(["--debug-unix-socket", ""])
        .args([
            "--alertmanager-token-secret",
            &format!("{namespace}/alertmanager-token"),
        ])
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .env("POD_NAME", "e2e-prometheus")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("serve.log")).unwrap())
        .spawn()
        .expect("operon serve starts");
    let _serve = Serve { child, port };

    // Alertmanager: every alert to Operon's receiver at once, with the token.
    let am_port = free_port();
    let am_config = dir.path().join("alertmanager.yml");
    std::fs::write(
        &am_config,
        json!({
            "route": {"receiver": "operon", "group_by": ["alertname"],
                      "group_wait": "0s", "group_interval": "1s", "repeat_interval": "1h"},
            "receivers": [{"name": "operon", "webhook_configs": [{
                "url": format!("http://127.0.0.1:{port}/api/v2/alerts"),
                "send_resolved": false,
                "http_config": {"authorization": {"type": "Bearer", "credentials": token}},
            }]}],
        })
        .to_string(),
    )
    .unwrap();
    let _alertmanager = Running(
        Command::new(&alertmanager)
            .arg(format!("--config.file={}", am_config.display()))
            .arg(format!(
                "--storage.path={}",
                dir.path().join("am").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{am_port}"))
            .arg("--cluster.listen-address=")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("alertmanager.log")).unwrap())
            .spawn()
            .expect("alertmanager starts"),
    );

    // Prometheus: scrapes operon serve every second, with Operon's rules and the test's.
    let prom_port = free_port();
    std::fs::write(
        dir.path().join("operon-rules.json"),
        shipped_rules().to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("e2e-rules.json"),
        json!({"groups": [{"name": "e2e", "interval": "1s", "rules": [{
            "alert": alert, "expr": "operon_leader == 1", "for": "0s",
            "labels": {"severity": "info"},
            "annotations": {"summary": "the test's alert"},
        }]}]})
        .to_string(),
    )
    .unwrap();
    let prom_config = dir.path().join("prometheus.yml");
    std::fs::write(
        &prom_config,
        json!({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [dir.path().join("operon-rules.json"), dir.path().join("e2e-rules.json")],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [format!("127.0.0.1:{am_port}")]}]}]},
            "scrape_configs": [{"job_name": "operon", "static_configs": [{"targets": [format!("127.0.0.1:{port}")]}]}],
        })
        .to_string(),
    )
    .unwrap();
    let prometheus_started = std::time::Instant::now();
    let _prometheus = Running(
        Command::new(&prometheus)
            .arg(format!("--config.file={}", prom_config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
            .spawn()
            .expect("prometheus starts"),
    );

    // Operon's rules loaded, healthy, beside the test's.
    let rules = eventually(
        "Prometheus to load and evaluate the rules",
        Duration::from_secs(60),
        async || {
            let rules = get_json(&format!("http://127.0.0.1:{prom_port}/api/v1/rules")).await?;
            let groups = rules["data"]["groups"].as_array()?;
            let evaluated = groups.len() >= 2
                && groups
                    .iter()
                    .flat_map(|g| g["rules"].as_array().into_iter().flatten())
                    .all(|r| r["health"] == "ok");
            evaluated.then_some(rules)
        },
    )
    .await;
    let alerts: Vec<&str> = rules["data"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .filter_map(|r| r["name"].as_str())
        .collect();
    eprintln!("rules loaded and healthy: {alerts:?}");
    // Scraped: the up series of the job is 1.
    eventually(
        "Prometheus to scrape operon serve",
        Duration::from_secs(60),
        async || {
            let up = get_json(&format!(
                "http://127.0.0.1:{prom_port}/api/v1/query?query=up%7Bjob%3D%22operon%22%7D"
            ))
            .await?;
            (up["data"]["result"][0]["value"][1] == "1").then_some(())
        },
    )
    .await;

    // The alert fires, Alertmanager posts it, the Trigger makes a Diagnosis that runs.
    let diagnoses: Api<Diagnosis> = Api::namespaced(client.clone(), "operon");
    let by_trigger = ListParams::default().labels(&format!("operon.dev/trigger={trigger_name}"));
    let done = eventually(
        "the alert's Diagnosis to finish",
        Duration::from_secs(120),
        async || {
            let list = diagnoses.list(&by_trigger).await.ok()?;
            let d = list.items.into_iter().next()?;
            let phase = d.status.as_ref()?.phase?;
            matches!(phase, DiagnosisPhase::Succeeded | DiagnosisPhase::Failed).then_some(d)
        },
    )
    .await;
    eprintln!(
        "Prometheus started to the alert's Diagnosis {} finished: {:?} (first scrape, rule evaluation, Alertmanager, receiver, Trigger, run)",
        done.metadata.name.as_deref().unwrap_or_default(),
        prometheus_started.elapsed()
    );
    let status = done.status.unwrap();
    assert_eq!(status.phase, Some(DiagnosisPhase::Succeeded), "{status:?}");
    assert_eq!(
        status
            .operation_results
            .get("operation.handled.output")
            .map(String::as_str),
        Some("alert handled\n"),
        "{status:?}"
    );
    let serve_log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap_or_default();
    assert!(
        serve_log.contains("alert handled"),
        "the step's output is in the log:\n{serve_log}"
    );
}
