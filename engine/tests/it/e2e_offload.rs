//! End to end against a real Kubernetes API server (ignored unless run with
//! `--ignored`, and then failing without `OPERON_E2E_KUBECONFIG`): a wasm step
//! offloaded to a Job (`wasm.runOn: Job`). `operon serve` with its module API creates a
//! Job of Operon's image running `operon op run` on the pushed module's digest; with no
//! kubelet here, the test runs the container's command itself (fetching the module by
//! digest from `operon serve` with the step's ServiceAccount token, which may read
//! modules through a RoleBinding in its namespace only) and writes the pod's status
//! with the termination message it wrote; the Diagnosis reaches Succeeded with the
//! module's results.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};
use std::time::Duration;

use crate::e2e_support::*;

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn an_offloaded_wasm_step_runs_as_a_job_of_operons_image_on_the_pushed_digest() {
    let path = kubeconfig();
    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-offload").await;
    let ns = scratch.name.clone();
    let run = format!("{:08x}", getrandom_u32());
    let (module, op, set, role, pusher) = (
        format!("e2e-echo-off-{run}"),
        format!("e2e-offloaded-{run}"),
        format!("e2e-offload-set-{run}"),
        format!("e2e-module-reader-{run}"),
        format!("e2e-module-pusher-{run}"),
    );
    let _cleanup = ClusterScoped {
        kubeconfig: path.clone(),
        objects: vec![
            ("module.operon.dev", module.clone()),
            ("operation.operon.dev", op.clone()),
            ("operationset.operon.dev", set.clone()),
            ("clusterrole", role.clone()),
            ("clusterrole", pusher.clone()),
            ("clusterrolebinding", pusher.clone()),
        ],
    };
    apply_operon_crds(&cluster).await;
    // The offloaded step's ServiceAccount pushes the module here, which only a
    // cluster-wide grant allows; reading comes below, granted as the deploy docs do.
    kubectl(&path, &["-n", &ns, "create", "serviceaccount", "offloader"]);
    let account = format!("{ns}:offloader");
    kubectl(
        &path,
        &[
            "create",
            "clusterrole",
            &role,
            "--verb=get",
            "--resource=modules.operon.dev",
        ],
    );
    kubectl(
        &path,
        &[
            "create",
            "clusterrole",
            &pusher,
            "--verb=create",
            "--resource=modules.operon.dev",
        ],
    );
    kubectl(
        &path,
        &[
            "create",
            "clusterrolebinding",
            &pusher,
            "--clusterrole",
            &pusher,
            "--serviceaccount",
            &account,
        ],
    );
    let token = kubectl(&path, &["-n", &ns, "create", "token", "offloader"])
        .trim()
        .to_owned();

    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    let certs = certificates(dir.path());
    let ca = certs.0.clone();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, &token).unwrap();
    let port = free_port();
    let module_url = format!("https://127.0.0.1:{port}");
    let lease = format!("e2e-offload-{run}");
    let store = dir.path().join("store");
    let mut args = module_api_args(&ns, &lease, port, &certs, &store, Some(&token_file));
    args.extend(
        [
            "--image",
            "ghcr.io/operon-dev/operon:e2e",
            "--offload-module-url",
            &module_url,
        ]
        .map(str::to_owned),
    );
    args.extend(["--offload-module-ca".to_owned(), ca.display().to_string()]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = serve(&path, &hooks, &refs, "offload");
    eventually(
        "the module API served",
        Duration::from_secs(60),
        async || std::net::TcpStream::connect(("127.0.0.1", port)).ok(),
    )
    .await;
    let _ = server.port;

    // The module, pushed: the Operation names it, and the Job pins its digest.
    let bytes = std::fs::read(operon_tests::ECHO).unwrap();
    let digest = operon::sandbox::ModuleDigest::of(&bytes);
    let pushed = std::process::Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(["module", "push", operon_tests::ECHO, "--name", &module])
        .args([
            "--server",
            &module_url,
            "--token",
            &token,
            "--certificate-authority",
        ])
        .arg(&ca)
        .output()
        .unwrap();
    assert!(
        pushed.status.success(),
        "{}",
        String::from_utf8_lossy(&pushed.stderr)
    );

    // Not bound yet: the module API refuses the account's read, naming where a grant
    // would count.
    let fetched = dir.path().join("fetched.wasm");
    let fetch = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_operon"))
            .args(["module", "get", &digest.to_string(), "-o"])
            .arg(&fetched)
            .args([
                "--server",
                &module_url,
                "--token",
                &token,
                "--certificate-authority",
            ])
            .arg(&ca)
            .output()
            .unwrap()
    };
    let refused = fetch();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "system:serviceaccount:{account} may not get modules.operon.dev \
             (neither cluster-wide nor in namespace {ns}, where a RoleBinding can grant it)"
        )),
        "{stderr}"
    );
    // Read access as the deploy docs grant it: a ClusterRole bound by a RoleBinding in
    // the account's own namespace only. Modules are cluster-scoped, so only the module
    // API's second question, in that namespace, sees it.
    kubectl(
        &path,
        &[
            "-n",
            &ns,
            "create",
            "rolebinding",
            &role,
            "--clusterrole",
            &role,
            "--serviceaccount",
            &account,
        ],
    );
    // What the API server says: no cluster-wide read, a read in its namespace.
    let user = format!("--as=system:serviceaccount:{account}");
    let can_i = |namespace: Option<&str>| {
        let mut args = vec!["auth", "can-i", "get", "modules.operon.dev", user.as_str()];
        if let Some(namespace) = namespace {
            args.extend(["-n", namespace]);
        }
        let out = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&path)
            .args(&args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(can_i(None), "no");
    assert_eq!(can_i(Some(&ns)), "yes");
    // The refusal is remembered for DENIED_TTL (10 s); then the read is allowed.
    eventually(
        "the account reads the module through its namespace",
        Duration::from_secs(30),
        async || {
            let read = fetch().status.success();
            if !read {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            read.then_some(())
        },
    )
    .await;
    assert_eq!(std::fs::read(&fetched).unwrap(), bytes);

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
                        "ttlSecondsAfterFinished": 60}}}},
            })),
        )
        .await
        .unwrap();
    operon_api(&cluster, "OperationSet")
        .create(&post, &chain(&set, &[op.as_str()]))
        .await
        .unwrap();
    let client = cluster.client().clone();
    let diagnoses: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &operon_resource("Diagnosis"));
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    diagnoses
        .create(
            &post,
            &object(
                json!({"apiVersion": "operon.dev/v1alpha1", "kind": "Diagnosis",
                "metadata": {"name": "offload"},
                "spec": {"operationSet": set, "parameters": {"level": "3"}}}),
            ),
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
    let pod_spec = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    assert_eq!(pod_spec.service_account_name.as_deref(), Some("offloader"));
    let container = &pod_spec.containers[0];
    assert_eq!(
        container.image.as_deref(),
        Some("ghcr.io/operon-dev/operon:e2e")
    );
    let args = container.args.clone().unwrap();
    assert_eq!(args[..4], ["op", "run", "--digest", &digest.to_string()]);
    let data = maps.get(&job_name).await.unwrap().data.unwrap();
    assert_eq!(data["module-ca.crt"], std::fs::read_to_string(&ca).unwrap());

    // No kubelet here: the test runs the container's command itself, which fetches the
    // module by digest from `operon serve` with the ServiceAccount's token, and writes
    // the pod's status with the termination message it wrote.
    let pod = the_pod(&pods, &job_name).await;
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
    complete_pod(&pods, &pod, "ghcr.io/operon-dev/operon:e2e", &message).await;

    let done = eventually("offload Succeeded", Duration::from_secs(90), async || {
        let d = diagnoses.get("offload").await.ok()?;
        let status = d.data.get("status")?.clone();
        matches!(status["phase"].as_str(), Some("Succeeded" | "Failed")).then_some(status)
    })
    .await;
    assert_eq!(done["phase"], "Succeeded", "{done}");
    let results = &done["operationResults"];
    // The echo guest's results: its parameters (wasm.config under the input) and the
    // runner context it got in the pod.
    assert_eq!(results["greeting"], "hi", "{done}");
    assert_eq!(results["level"], "3", "{done}");
    assert_eq!(
        results["context.name"],
        format!("{ns}/offload/node-1"),
        "{done}"
    );
    assert_eq!(results["context.owner"], "Diagnosis/offload", "{done}");
    assert_eq!(results["context.namespace"], ns.as_str(), "{done}");
}
