//! What the end-to-end suites share: the kubeconfig they run against (their tests are
//! `#[ignore]`d, and fail naming the variable when run without it), scratch namespaces,
//! `operon serve` as a child process, Operon's CRDs, and waiting for a condition.

#![allow(dead_code)]

pub mod registry;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use operon::cluster::kube::{KubeCluster, KubeOptions};
use serde_json::json;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Which suite's tests may use the API server now, and how many of them are running.
static TURN: Mutex<(Option<&'static str>, usize)> = Mutex::new((None, 0));
static TURN_CHANGED: Condvar = Condvar::new();

/// One test's share of its suite's turn.
struct Turn(&'static str);

impl Turn {
    fn take(suite: &'static str) -> Self {
        let mut turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
        while turn.0.is_some_and(|current| current != suite) {
            turn = TURN_CHANGED
                .wait(turn)
                .unwrap_or_else(PoisonError::into_inner);
        }
        turn.0 = Some(suite);
        turn.1 += 1;
        Self(suite)
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
        turn.1 -= 1;
        if turn.1 == 0 {
            turn.0 = None;
            TURN_CHANGED.notify_all();
        }
    }
}

thread_local! {
    /// The turn the test running on this thread holds: libtest runs each test on a
    /// thread of its own, so the turn ends with the test, passed or panicked.
    static HELD: RefCell<Option<Turn>> = const { RefCell::new(None) };
}

/// The API server's kubeconfig, from `OPERON_E2E_KUBECONFIG`. The tests that call this
/// are `#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]`: run with
/// `--ignored` without the variable, they fail here, saying so.
///
/// The suites were written as binaries of their own, run one after another: a suite's
/// tests run side by side, but two suites' `operon serve` processes would each take the
/// other's Hooks and Diagnoses. So a test waits here until no other suite's test holds
/// the API server (the suite is the calling file).
#[track_caller]
pub fn kubeconfig() -> PathBuf {
    let suite = std::panic::Location::caller().file();
    let path = required_os(
        "OPERON_E2E_KUBECONFIG",
        "a kubeconfig (cluster-admin) of the API server to test against",
    );
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        if held.as_ref().is_none_or(|turn| turn.0 != suite) {
            *held = None;
            *held = Some(Turn::take(suite));
        }
    });
    PathBuf::from(path)
}

/// The value of the environment variable `name`, which an opt-in (`#[ignore]`d) test
/// needs: run with `--ignored` without it (or with it empty), the test fails here,
/// naming the variable and `what` it gives.
#[track_caller]
pub fn required(name: &str, what: &str) -> String {
    required_os(name, what)
        .into_string()
        .unwrap_or_else(|value| panic!("{name} is not UTF-8: {value:?}"))
}

/// [`required`] for a path, which need not be UTF-8.
#[track_caller]
pub fn required_os(name: &str, what: &str) -> std::ffi::OsString {
    match std::env::var_os(name) {
        Some(value) if !value.is_empty() => value,
        _ => panic!(
            "{name} is not set: this opt-in test needs {what} (see the suite's module doc \
             and docs/src/development/testing.md)"
        ),
    }
}

/// The program `name` on `PATH`, which a test needs and `.ci/setup` installs (from
/// Debian's `package`): without it the test fails here, naming both, rather than passing
/// with nothing checked.
#[track_caller]
pub fn required_program(name: &str, package: &str) -> PathBuf {
    match program(&[name]) {
        Some(path) => path,
        None => panic!(
            "{name} is not installed: this test needs it (apt-get install {package}, or run \
             .ci/setup)"
        ),
    }
}

/// Fails the test unless `python3` imports `helm_python` (helm-python-sdk, Helm's own
/// engine, which renders the modules' charts); `.ci/setup` installs it.
#[track_caller]
pub fn require_helm_python() {
    let imported = Command::new("python3")
        .args(["-c", "import helm_python"])
        .status()
        .is_ok_and(|status| status.success());
    assert!(
        imported,
        "helm-python-sdk is not installed: this test renders charts with it \
         (python3 -m pip install helm-python-sdk, or run .ci/setup)"
    );
}

pub async fn connect(path: &Path) -> KubeCluster {
    let options = KubeOptions {
        kubeconfig: Some(path.to_owned()),
        qps: 0.0,
        ..KubeOptions::default()
    };
    KubeCluster::connect(&options)
        .await
        .expect("the kubeconfig works")
}

/// A fresh namespace, deleted when dropped (with kubectl: a drop cannot wait for the
/// test's runtime, which the client's requests need).
pub struct Scratch {
    pub kubeconfig: PathBuf,
    pub name: String,
}

impl Scratch {
    pub async fn new(cluster: &KubeCluster, kubeconfig: &Path, prefix: &str) -> Self {
        let name = format!("{prefix}-{:08x}", getrandom_u32());
        let namespaces: Api<Namespace> = Api::all(cluster.client().clone());
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        Self {
            kubeconfig: kubeconfig.to_owned(),
            name,
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["delete", "namespace", &self.name, "--wait=false"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

pub fn getrandom_u32() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    nanos ^ std::process::id().rotate_left(16)
}

/// `operon serve` as a child process, killed when dropped.
pub struct Serve {
    pub child: Child,
    pub port: u16,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `operon agent` as a child process, killed when dropped.
pub struct Agent(pub Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `operon agent` for `node`, its Lease in `namespace`, its data under `data_root` and
/// its log in `data_root/agent.log`, with `extra` flags.
pub fn agent(
    kubeconfig: &Path,
    node: &str,
    namespace: &str,
    data_root: &Path,
    extra: &[&str],
) -> Agent {
    let log = data_root.join("agent.log");
    let child = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(["agent", "--node-name", node, "--namespace", namespace])
        .arg("--data-root")
        .arg(data_root)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--listen-address", "127.0.0.1", "--listen-port"])
        .arg(free_port().to_string())
        .args(extra)
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .env("POD_NAME", format!("agent-{node}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("operon agent starts");
    Agent(child)
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn serve(kubeconfig: &Path, hooks: &Path, extra: &[&str], name: &str) -> Serve {
    serve_with_env(kubeconfig, hooks, extra, name, &[])
}

/// [`serve`], with `env` added to its environment.
pub fn serve_with_env(
    kubeconfig: &Path,
    hooks: &Path,
    extra: &[&str],
    name: &str,
    env: &[(&str, &str)],
) -> Serve {
    let port = free_port();
    let dir = hooks.parent().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_operon"))
        .arg("serve")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--hooks-dir")
        .arg(hooks)
        .args([
            "--listen-address",
            "127.0.0.1",
            "--listen-port",
            &port.to_string(),
        ])
        .arg("--debug-unix-socket")
        .arg(dir.join(format!("{name}.socket")))
        .args(extra)
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .env("POD_NAME", name)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("{name}.log"))).unwrap())
        .spawn()
        .expect("operon serve starts");
    Serve { child, port }
}

pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    http_get_at("127.0.0.1", port, path)
}

/// `GET path` over plain HTTP at `address:port`: the status and the body.
pub fn http_get_at(address: &str, port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect((address, port)).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: operon\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    Some((status, response.split_once("\r\n\r\n")?.1.to_owned()))
}

pub async fn eventually<T>(
    what: &str,
    limit: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Removes what the webhook test made outside its namespace.
pub struct ClusterScoped {
    pub kubeconfig: PathBuf,
    pub objects: Vec<(&'static str, String)>,
}

impl Drop for ClusterScoped {
    fn drop(&mut self) {
        for (kind, name) in &self.objects {
            let _ = Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&self.kubeconfig)
                .args(["delete", kind, name, "--ignore-not-found", "--wait=false"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Applies Operon's CRDs by server-side apply and waits until every one is served;
/// they are never deleted afterwards, as a cluster may already run Operon.
pub async fn apply_operon_crds(cluster: &KubeCluster) {
    use kube::api::{ListParams, Patch, PatchParams};
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client().clone());
    for crd in operon::api::crds() {
        let name = crd.metadata.name.clone().unwrap();
        crds.patch(
            &name,
            &PatchParams::apply("operon-e2e").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap();
        // A changed CRD is briefly not served (404) while the API server rebuilds it.
        let kind = crd.spec.names.kind.clone();
        eventually(
            &format!("{kind} served"),
            Duration::from_secs(30),
            async || {
                let api = operon_api(cluster, &kind);
                api.list(&ListParams::default().limit(1))
                    .await
                    .ok()
                    .map(drop)
            },
        )
        .await;
    }
}

/// The API of an operon.dev/v1alpha1 kind across namespaces, untyped.
pub fn operon_api(cluster: &KubeCluster, kind: &str) -> Api<kube::api::DynamicObject> {
    Api::all_with(cluster.client().clone(), &operon_resource(kind))
}

/// An operon.dev/v1alpha1 kind, with the plural its CRD declares (`diagnoses`: a guess
/// from the kind would be wrong).
pub fn operon_resource(kind: &str) -> kube::api::ApiResource {
    let gvk = kube::api::GroupVersionKind::gvk("operon.dev", "v1alpha1", kind);
    let plural = operon::api::crds()
        .into_iter()
        .find(|crd| crd.spec.names.kind == kind)
        .map(|crd| crd.spec.names.plural)
        .unwrap_or_else(|| panic!("no operon.dev kind {kind}"));
    kube::api::ApiResource::from_gvk_with_plural(&gvk, &plural)
}

/// An OperationSet named `name` chaining `operations`: start → 1 → 2 → ….
pub fn chain<S: AsRef<str>>(name: &str, operations: &[S]) -> kube::api::DynamicObject {
    let mut nodes = vec![json!({"id": 0, "to": [1]})];
    for (i, op) in operations.iter().enumerate() {
        let id = i + 1;
        let mut node = json!({"id": id, "operation": op.as_ref()});
        if id < operations.len() {
            node["to"] = json!([id + 1]);
        }
        nodes.push(node);
    }
    serde_json::from_value(json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "OperationSet",
        "metadata": {"name": name}, "spec": {"adjacencyList": nodes},
    }))
    .unwrap()
}

/// `kubectl --kubeconfig KUBECONFIG ARGS`, which must succeed; its standard output.
pub fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    let (ok, out, err) = try_kubectl(kubeconfig, args);
    assert!(ok, "kubectl {args:?}: {err}");
    out
}

/// `kubectl --kubeconfig KUBECONFIG ARGS`, which may fail: (success, stdout, stderr).
pub fn try_kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let output = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A CA and a serving certificate for 127.0.0.1 in `dir`: (ca, cert, key).
pub fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap())
        .unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let paths = (dir.join("ca.crt"), dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, cert.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

/// The flags of an `operon serve` replica whose module API listens on 127.0.0.1:`port`
/// with `certs` (as [`certificates`] writes them), keeping modules in `store` and
/// fetching the ones it lacks with `token_file` when given; its Lease is `lease` in
/// `namespace`.
pub fn module_api_args(
    namespace: &str,
    lease: &str,
    port: u16,
    certs: &(PathBuf, PathBuf, PathBuf),
    store: &Path,
    token_file: Option<&Path>,
) -> Vec<String> {
    let (ca, cert, key) = certs;
    let mut args: Vec<String> = [
        "--leader-election-namespace",
        namespace,
        "--leader-election-lease-name",
        lease,
        "--validating-webhook-listen-address",
        "127.0.0.1",
        "--validating-webhook-listen-port",
        &port.to_string(),
        "--module-api-url",
        &format!("https://127.0.0.1:{port}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let paths = [
        ("--validating-webhook-server-cert", Some(cert.as_path())),
        ("--validating-webhook-server-key", Some(key.as_path())),
        ("--module-source-ca", Some(ca.as_path())),
        ("--module-fetch-token-file", token_file),
        ("--module-store", Some(store)),
    ];
    for (flag, path) in paths {
        if let Some(path) = path {
            args.extend([flag.to_owned(), path.display().to_string()]);
        }
    }
    args
}

/// Plays the kubelet: the pod ran `image` and its container `step` wrote `message`.
pub async fn complete_pod(
    pods: &Api<k8s_openapi::api::core::v1::Pod>,
    pod: &k8s_openapi::api::core::v1::Pod,
    image: &str,
    message: &str,
) {
    let name = pod.metadata.name.clone().unwrap();
    let status = json!({"status": {
        "phase": "Succeeded",
        "containerStatuses": [{"name": "step", "image": image,
            "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed", "message": message,
                "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:01Z"}}}],
    }});
    pods.patch_status(
        &name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&status),
    )
    .await
    .unwrap();
}

/// The pod of the Job running `job` (its `operon.dev/run` label), once it exists.
pub async fn the_pod(
    pods: &Api<k8s_openapi::api::core::v1::Pod>,
    job: &str,
) -> k8s_openapi::api::core::v1::Pod {
    eventually("the Job's pod", Duration::from_secs(60), async || {
        let list = pods
            .list(&kube::api::ListParams::default().labels(&format!("operon.dev/run={job}")))
            .await
            .ok()?;
        list.items.into_iter().next()
    })
    .await
}

/// Plays the kubelet for an offloaded wasm step's pod (`wasm.runOn: Job`): runs the
/// Job's container command (`operon op run` on the digest) on this machine, with the
/// pod's files (the input ConfigMap's `data`, the ServiceAccount `token`) in `dir`, and
/// returns what it wrote as its termination message.
pub fn run_offloaded_container(
    job: &k8s_openapi::api::batch::v1::Job,
    data: &std::collections::BTreeMap<String, String>,
    token: &str,
    dir: &Path,
) -> String {
    let pod = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    let container = &pod.containers[0];
    assert_eq!(
        container.command.as_deref(),
        Some(&["operon".to_owned()][..])
    );
    for (key, value) in data {
        std::fs::write(dir.join(key), value).unwrap();
    }
    std::fs::write(dir.join("token"), token).unwrap();
    let termination = dir.join("termination-log");
    let local = |arg: &String| -> String {
        if arg == "/dev/termination-log" {
            termination.display().to_string()
        } else if arg == "/var/run/secrets/kubernetes.io/serviceaccount/token" {
            dir.join("token").display().to_string()
        } else if let Some(file) = arg.strip_prefix("/var/run/operon/") {
            dir.join(file).display().to_string()
        } else {
            arg.clone()
        }
    };
    let args: Vec<String> = container.args.iter().flatten().map(local).collect();
    let output = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(&args)
        .output()
        .unwrap();
    eprintln!(
        "$ operon {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "the container's command failed");
    std::fs::read_to_string(termination).unwrap()
}

/// A ClusterRoleBinding `role` of the ClusterRole `role` to the ServiceAccount
/// `namespace`/`account`.
pub fn bind_cluster_role(kubeconfig: &Path, role: &str, namespace: &str, account: &str) {
    kubectl(
        kubeconfig,
        &[
            "create",
            "clusterrolebinding",
            role,
            "--clusterrole",
            role,
            "--serviceaccount",
            &format!("{namespace}:{account}"),
        ],
    );
}

/// Creates the ServiceAccount `account` in `namespace`, granted `verbs` (e.g.
/// `create,get,list`) on `modules.operon.dev` cluster-wide by a ClusterRole and a
/// ClusterRoleBinding both named `role` (for the test's [`ClusterScoped`] to delete),
/// and returns a token of it.
pub fn module_account(
    kubeconfig: &Path,
    namespace: &str,
    account: &str,
    role: &str,
    verbs: &str,
) -> String {
    kubectl(
        kubeconfig,
        &["-n", namespace, "create", "serviceaccount", account],
    );
    kubectl(
        kubeconfig,
        &[
            "create",
            "clusterrole",
            role,
            &format!("--verb={verbs}"),
            "--resource=modules.operon.dev",
        ],
    );
    bind_cluster_role(kubeconfig, role, namespace, account);
    kubectl(kubeconfig, &["-n", namespace, "create", "token", account])
        .trim()
        .to_owned()
}

/// Pushes the module `file` as `name` to the module API at `url` (trusting `ca`) with
/// `token`; returns what `operon module push` printed.
pub fn push_module(file: &str, name: &str, url: &str, token: &str, ca: &Path) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(["module", "push", file, "--name", name])
        .args(["--server", url, "--token", token])
        .arg("--certificate-authority")
        .arg(ca)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "operon module push {file}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Creates each namespace of `names` that does not exist yet.
pub async fn ensure_namespaces(client: &kube::Client, names: &[&str]) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in names {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => panic!("creating namespace {name}: {e}"),
        }
    }
}

/// Creates the Secret `namespace/name` holding `token` under `token`, as
/// `--alertmanager-token-secret` reads it.
pub async fn token_secret(client: &kube::Client, namespace: &str, name: &str, token: &str) {
    use k8s_openapi::api::core::v1::Secret;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name},
        "stringData": {"token": token},
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

/// The first of `names` found on the PATH.
pub fn program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}
