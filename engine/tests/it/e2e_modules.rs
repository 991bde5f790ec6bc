//! End to end against a real Kubernetes API server (ignored unless run with
//! `--ignored`, and then failing without `OPERON_E2E_KUBECONFIG`): `operon module push`
//! to a replica of `operon serve`, refused without a token and for an account without
//! RBAC; the Module object it makes; a second replica fetching the bytes from the
//! first; and a Diagnosis of an Operation naming the module reaching Succeeded.

use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::e2e_support::*;

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

/// `operon module ARGS` against `server`; (success, stdout, stderr).
fn module(args: &[&str], server: &str, ca: &Path, token: Option<&str>) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_operon"));
    command
        .arg("module")
        .args(args)
        .args(["--server", server, "--certificate-authority"])
        .arg(ca)
        .env_remove("OPERON_TOKEN");
    if let Some(token) = token {
        command.args(["--token", token]);
    } else {
        // A kubeconfig whose user has no token: the CLI has nothing to send.
        command
            .args(["--kubeconfig"])
            .arg(std::env::var_os("OPERON_E2E_KUBECONFIG").unwrap());
    }
    let output = command.output().unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn a_pushed_module_runs_by_name_and_reaches_a_second_replica() {
    let path = kubeconfig();
    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-modules").await;
    let ns = scratch.name.as_str();
    let run = format!("{:08x}", getrandom_u32());
    let (name, op, set, role) = (
        format!("e2e-trivial-{run}"),
        format!("e2e-wasm-{run}"),
        format!("e2e-wasm-set-{run}"),
        format!("e2e-module-uploader-{run}"),
    );
    let _cleanup = ClusterScoped {
        kubeconfig: path.clone(),
        objects: vec![
            ("module.operon.dev", name.clone()),
            ("operation.operon.dev", op.clone()),
            ("operationset.operon.dev", set.clone()),
            ("clusterrole", role.clone()),
            ("clusterrolebinding", role.clone()),
        ],
    };
    apply_operon_crds(&cluster).await;

    // An uploader allowed by RBAC, and an account with no grant at all.
    kubectl(&path, &["-n", ns, "create", "serviceaccount", "uploader"]);
    kubectl(&path, &["-n", ns, "create", "serviceaccount", "nobody"]);
    kubectl(
        &path,
        &[
            "create",
            "clusterrole",
            &role,
            "--verb=create,get,list,delete",
            "--resource=modules.operon.dev",
        ],
    );
    bind_cluster_role(&path, &role, ns, "uploader");
    let uploader = kubectl(&path, &["-n", ns, "create", "token", "uploader"])
        .trim()
        .to_owned();
    let nobody = kubectl(&path, &["-n", ns, "create", "token", "nobody"])
        .trim()
        .to_owned();

    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    let certs = certificates(dir.path());
    let ca = certs.0.clone();
    // The replicas fetch from each other with the uploader's token (it may `get`).
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, &uploader).unwrap();
    let replica = |id: &str, port: u16| {
        let store = dir.path().join(format!("store-{id}"));
        let lease = format!("e2e-modules-{run}");
        let mut args = module_api_args(ns, &lease, port, &certs, &store, Some(&token_file));
        args.push("--leader-elect".to_owned());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        (serve(&path, &hooks, &refs, &format!("modules-{id}")), store)
    };
    let (port_a, port_b) = (free_port(), free_port());
    let (first, store_a) = replica("a", port_a);
    let server = format!("https://127.0.0.1:{port_a}");
    eventually("replica a ready", Duration::from_secs(60), async || {
        http_get(first.port, "/readyz").filter(|(code, _)| *code == 200)
    })
    .await;
    eventually(
        "the module API served",
        Duration::from_secs(30),
        async || std::net::TcpStream::connect(("127.0.0.1", port_a)).ok(),
    )
    .await;

    // Refused: no token at all, a token the API server does not know, an account
    // without RBAC.
    let trivial = operon_tests::TRIVIAL;
    let (ok, _, err) = module(&["push", trivial, "--name", &name], &server, &ca, None);
    assert!(!ok && err.contains("no bearer token"), "{err}");
    let (ok, _, err) = module(
        &["push", trivial, "--name", &name],
        &server,
        &ca,
        Some("not-a-token"),
    );
    assert!(!ok && err.contains("HTTP 401"), "{err}");
    let (ok, _, err) = module(
        &["push", trivial, "--name", &name],
        &server,
        &ca,
        Some(&nobody),
    );
    assert!(!ok && err.contains("HTTP 403"), "{err}");
    assert!(
        err.contains(&format!("system:serviceaccount:{ns}:nobody may not create")),
        "{err}"
    );

    let bytes = std::fs::read(trivial).unwrap();
    let digest = operon::sandbox::ModuleDigest::of(&bytes);
    let (ok, out, err) = module(
        &["push", trivial, "--name", &name],
        &server,
        &ca,
        Some(&uploader),
    );
    assert!(ok, "{err}");
    assert!(
        out.contains(&digest.to_string()) && out.contains("operation world"),
        "{out}"
    );
    let pushed = Instant::now();

    // The Module, as kubectl shows it.
    let table = kubectl(&path, &["get", "modules", &name]);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(
        table.contains("operation") && table.contains(&digest.to_string()),
        "{table}"
    );
    assert!(
        table.contains(&format!("system:serviceaccount:{ns}:uploader")),
        "{table}"
    );

    // A second replica learns of the module and fetches it from the first.
    let (_second, store_b) = replica("b", port_b);
    let blob = store_b.join("sha256").join(hex::encode(digest.as_bytes()));
    let started = Instant::now();
    eventually(
        "replica b holds the module",
        Duration::from_secs(60),
        async || blob.is_file().then_some(()),
    )
    .await;
    eprintln!(
        "replica b held the module {:?} after it started",
        started.elapsed()
    );
    assert_eq!(std::fs::read(&blob).unwrap(), bytes);
    assert!(
        store_a
            .join("sha256")
            .join(hex::encode(digest.as_bytes()))
            .is_file()
    );
    let modules = operon_api(&cluster, "Module");
    eventually(
        "both replicas listed as sources",
        Duration::from_secs(30),
        async || {
            let module = modules.get(&name).await.ok()?;
            let sources = module.data["status"]["sources"].as_array()?.len();
            (sources == 2).then_some(())
        },
    )
    .await;

    // An Operation naming the module runs in a Diagnosis.
    let post = PostParams::default();
    operon_api(&cluster, "Operation")
        .create(
            &post,
            &object(json!({
                "apiVersion": "operon.dev/v1alpha1", "kind": "Operation",
                "metadata": {"name": op},
                "spec": {"processor": {"timeoutSeconds": 30, "wasm": {"module": name}}},
            })),
        )
        .await
        .unwrap();
    operon_api(&cluster, "OperationSet")
        .create(
            &post,
            &object(json!({
                "apiVersion": "operon.dev/v1alpha1", "kind": "OperationSet",
                "metadata": {"name": set},
                "spec": {"adjacencyList": [{"id": 0, "to": [1]}, {"id": 1, "operation": op}]},
            })),
        )
        .await
        .unwrap();
    let diagnoses: Api<DynamicObject> =
        Api::namespaced_with(cluster.client().clone(), ns, &operon_resource("Diagnosis"));
    diagnoses
        .create(
            &post,
            &object(json!({
                "apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
                "metadata": {"name": "by-name"}, "spec": {"operationSet": set},
            })),
        )
        .await
        .unwrap();
    let status = eventually(
        "the Diagnosis succeeded",
        Duration::from_secs(90),
        async || {
            let d = diagnoses.get("by-name").await.ok()?;
            let status = d.data.get("status")?.clone();
            matches!(status["phase"].as_str(), Some("Succeeded" | "Failed")).then_some(status)
        },
    )
    .await;
    assert_eq!(status["phase"], "Succeeded", "{status}");
    eprintln!("pushed to Succeeded in {:?}", pushed.elapsed());

    // Removing the Module leaves the bytes for the grace period.
    let (ok, out, err) = module(&["rm", &name], &server, &ca, Some(&uploader));
    assert!(ok, "{err}");
    assert!(out.contains("removed"), "{out}");
    assert!(blob.is_file());
}
