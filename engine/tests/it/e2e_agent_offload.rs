//! End to end against a real Kubernetes API server (ignored unless run with
//! `--ignored`, and then failing without `OPERON_E2E_KUBECONFIG`): a wasm step
//! offloaded to a Job (`wasm.runOn: Job`) by the node agent. `operon serve` serves the
//! module API (and has no image, so it offloads nothing); `operon agent` for Node
//! `local-node`, given the image and serve's module API, runs the Diagnosis placed on
//! its node and creates the Job, pinned to the node by `job.onDiagnosisNode`. With no
//! kubelet here, the test runs the container's command itself (fetching the module by
//! digest from `operon serve` with the step's ServiceAccount token, trusting the CA the
//! agent fetches modules with) and writes the pod's status with the termination message
//! it wrote.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, PodSpec};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::e2e_support::*;

/// The Node the agent serves: the local cluster's only one.
const NODE: &str = "local-node";
const IMAGE: &str = "ghcr.io/operon-dev/operon:e2e";

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

/// The pod's required node affinity, as the names of the nodes it allows.
fn pinned_to(pod: &PodSpec) -> Vec<String> {
    let required = pod
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .expect("a required node affinity");
    let [term] = &required.node_selector_terms[..] else {
        panic!("one term: {required:?}");
    };
    let [field] = term.match_fields.as_deref().unwrap_or_default() else {
        panic!("one field: {term:?}");
    };
    assert_eq!(
        (field.key.as_str(), field.operator.as_str()),
        ("metadata.name", "In")
    );
    field.values.clone().unwrap_or_default()
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn the_agent_offloads_a_wasm_step_to_a_job_pinned_to_its_node() {
    let path = kubeconfig();
    let cluster = connect(&path).await;
    let client = cluster.client().clone();
    let nodes: Api<Node> = Api::all(client.clone());
    // The API server harness has no kubelet to register a Node: one started with fresh
    // state has none, so the test makes its own (and leaves it, as a kubelet would).
    if nodes.get_opt(NODE).await.unwrap().is_none() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}}
        }))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-agent-offload").await;
    let ns = scratch.name.clone();
    let run = format!("{:08x}", getrandom_u32());
    let (module, op, set, role) = (
        format!("e2e-echo-agent-{run}"),
        format!("e2e-agent-offloaded-{run}"),
        format!("e2e-agent-offload-set-{run}"),
        format!("e2e-agent-module-reader-{run}"),
    );
    let _cleanup = ClusterScoped {
        kubeconfig: path.clone(),
        objects: vec![
            ("module.operon.dev", module.clone()),
            ("operation.operon.dev", op.clone()),
            ("operationset.operon.dev", set.clone()),
            ("clusterrole", role.clone()),
            ("clusterrolebinding", role.clone()),
        ],
    };
    apply_operon_crds(&cluster).await;
    // The offloaded step's ServiceAccount may read modules; here it also pushes one, and
    // the agent and serve fetch with its token.
    let token = module_account(&path, &ns, "offloader", &role, "create,get,list");

    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    let certs = certificates(dir.path());
    let ca = certs.0.clone();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, &token).unwrap();
    let port = free_port();
    let module_url = format!("https://127.0.0.1:{port}");
    // serve leads in the scratch namespace and looks for the agent's Lease there.
    let lease = format!("e2e-agent-offload-{run}");
    let args = module_api_args(
        &ns,
        &lease,
        port,
        &certs,
        &dir.path().join("store"),
        Some(&token_file),
    );
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let _server = serve(&path, &hooks, &refs, "agent-offload-controller");
    eventually(
        "the module API served",
        Duration::from_secs(60),
        async || std::net::TcpStream::connect(("127.0.0.1", port)).ok(),
    )
    .await;

    let bytes = std::fs::read(operon_tests::ECHO).unwrap();
    let digest = operon::sandbox::ModuleDigest::of(&bytes);
    push_module(operon_tests::ECHO, &module, &module_url, &token, &ca);

    // The agent: the module API's URL given, its CA the one it fetches modules with.
    let agent_store = dir.path().join("agent-store");
    let agent_log = dir.path().join("agent.log");
    let _agent = Agent(
        Command::new(env!("CARGO_BIN_EXE_operon"))
            .args(["agent", "--node-name", NODE, "--namespace", &ns])
            .arg("--kubeconfig")
            .arg(&path)
            .arg("--data-root")
            .arg(dir.path().join("agent"))
            .args(["--listen-address", "127.0.0.1", "--listen-port"])
            .arg(free_port().to_string())
            .arg("--module-store")
            .arg(&agent_store)
            .arg("--module-source-ca")
            .arg(&ca)
            .arg("--module-fetch-token-file")
            .arg(&token_file)
            .args(["--image", IMAGE, "--offload-module-url", &module_url])
            .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
            .env("POD_NAME", format!("agent-offload-{run}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&agent_log).unwrap())
            .spawn()
            .expect("operon agent starts"),
    );
    let log = || std::fs::read_to_string(&agent_log).unwrap_or_default();
    let fetched = agent_store.join("sha256").join(hex(&digest));
    eventually(
        "the agent fetched the module",
        Duration::from_secs(60),
        async || fetched.exists().then_some(()),
    )
    .await;
    assert!(
        log().contains("wasm steps with runOn: Job run as Jobs"),
        "the agent offloads: {}",
        log()
    );

    let post = PostParams::default();
    operon_api(&cluster, "Operation")
        .create(
            &post,
            &object(json!({
                "apiVersion": "operon.dev/v1alpha1", "kind": "Operation",
                "metadata": {"name": op},
                "spec": {"processor": {"timeoutSeconds": 120, "wasm": {
                    "module": module, "config": {"greeting": "hi"},
                    "runOn": "Job", "job": {"serviceAccountName": "offloader",
                        "onDiagnosisNode": true, "ttlSecondsAfterFinished": 60}}}},
            })),
        )
        .await
        .unwrap();
    operon_api(&cluster, "OperationSet")
        .create(&post, &chain(&set, &[op.as_str()]))
        .await
        .unwrap();
    let diagnoses: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &operon_resource("Diagnosis"));
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    diagnoses
        .create(
            &post,
            &object(json!({
                "apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
                "metadata": {"name": "on-node"},
                "spec": {"operationSet": set, "nodeName": NODE, "parameters": {"level": "3"}},
            })),
        )
        .await
        .unwrap();
    let job = eventually(
        "the offloaded step's Job",
        Duration::from_secs(90),
        async || {
            jobs.list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .next()
        },
    )
    .await;
    let job_name = job.metadata.name.clone().unwrap();
    let placed = diagnoses.get("on-node").await.unwrap();
    assert_eq!(placed.data["status"]["nodeName"], NODE, "run by the agent");

    let template = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    assert_eq!(pinned_to(template), [NODE]);
    assert_eq!(template.service_account_name.as_deref(), Some("offloader"));
    let container = &template.containers[0];
    assert_eq!(container.image.as_deref(), Some(IMAGE));
    let args = container.args.clone().unwrap();
    assert_eq!(
        args[..6],
        [
            "op",
            "run",
            "--digest",
            &digest.to_string(),
            "--module-url",
            &module_url
        ]
    );
    let data = maps.get(&job_name).await.unwrap().data.unwrap();
    assert_eq!(data["module-ca.crt"], std::fs::read_to_string(&ca).unwrap());

    // The Job controller's pod carries the pin; no kubelet here: the test runs the
    // container's command, which fetches the module by digest from `operon serve`.
    let pod = the_pod(&pods, &job_name).await;
    assert_eq!(pinned_to(pod.spec.as_ref().unwrap()), [NODE]);
    let work = tempfile::tempdir().unwrap();
    let message = tokio::task::spawn_blocking({
        let (job, data, token, work) = (
            job.clone(),
            data.clone(),
            token.clone(),
            work.path().to_owned(),
        );
        move || run_offloaded_container(&job, &data, &token, &work)
    })
    .await
    .unwrap();
    complete_pod(&pods, &pod, IMAGE, &message).await;

    let done = eventually("on-node finished", Duration::from_secs(90), async || {
        let d = diagnoses.get("on-node").await.ok()?;
        let status = d.data.get("status")?.clone();
        matches!(status["phase"].as_str(), Some("Succeeded" | "Failed")).then_some(status)
    })
    .await;
    assert_eq!(done["phase"], "Succeeded", "{done}\nagent log:\n{}", log());
    let results = &done["operationResults"];
    // The echo guest's results: its parameters and the runner context it got in the pod.
    assert_eq!(results["greeting"], "hi", "{done}");
    assert_eq!(results["level"], "3", "{done}");
    assert_eq!(results["context.node"], NODE, "{done}");
    assert_eq!(
        results["context.name"],
        format!("{ns}/on-node/node-1"),
        "{done}"
    );
    assert_eq!(results["context.owner"], "Diagnosis/on-node", "{done}");
}

fn hex(digest: &operon::sandbox::ModuleDigest) -> String {
    digest
        .to_string()
        .strip_prefix("sha256:")
        .expect("a sha256: digest")
        .to_owned()
}
