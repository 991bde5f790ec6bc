//! End to end on a node where Pods really run, with the real image (ignored unless run
//! with `--ignored`, and then failing without `OPERON_E2E_NODE_KUBECONFIG` and
//! `OPERON_E2E_NODE_IMAGE`; select it with the filter `e2e_node::`). Run it from where
//! the cluster's Service addresses are reachable (on the node, or inside the test
//! node's network namespace).
//!
//! On a cluster without Operon, it installs the Helm chart with Helm's own code
//! (`deploy/helm/install.py`), checks that its shell hook runs with every namespace, and
//! lists the node's processes (agent.hostPID) and cordons it through the agent's
//! built-ins, and uninstalls it; then it installs `deploy/` as a newcomer would (`kubectl apply -k` of
//! an overlay that only points the image at the one given, adds the pod
//! labeler as a wasm hook and as a shell twin to the hooks ConfigMap with their RBAC,
//! and, with `OPERON_E2E_NODE_KUBELET_DIR`, the kubelet's directory), then checks:
//! - every Pod becomes Ready, the seccomp profile's installer included;
//! - the API server calls a validating, a mutating and a conversion hook through the
//!   webhook Service;
//! - Pods created with kubectl get both hooks' labels, and the time from creation to
//!   each label is reported (p50, p99);
//! - the shell hook ran with every namespace (its metrics, scraped from the metrics
//!   Service) and `--strict` let it run;
//! - modules pushed to the module API right after the install are followed by the
//!   agent, and the node-diagnosis example's Diagnosis, placed on this node, succeeds
//!   through the agent (its script steps in the sandbox, its analyses the pushed modules);
//! - with `deploy/node-access` added, the same example reads the node: a kubelet journal
//!   written on the node (with systemd-journal-remote) is triaged, and without it the
//!   node's own filesystems are checked, by their node paths;
//! - a Diagnosis of a `job` step and a `runOn: Job` wasm step, and a Hook object with
//!   `runOn: Job`, run as real Jobs of the image;
//! - deleting the leader Pod with `--force` hands the Lease to the other replica, whose
//!   hooks then label a new Pod.
//!
//! It leaves Operon installed (for a look around) and removes its own namespace.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::e2e_support::*;
mod node_files;

/// How many Pods are labelled for the latency figures.
const PODS: usize = 50;
/// A shell hook with a validating and a mutating binding on ConfigMaps in namespaces
/// labelled `e2e.operon.dev/webhooks`: it refuses one labelled `e2e.operon.dev/deny` and
/// labels the others `e2e.operon.dev/mutated`. The API server calls it through the
/// webhook Service.
const WEBHOOK_HOOK: &str = r#"#!/usr/bin/env bash
set -euo pipefail
if [[ "${1:-}" == "--config" ]]; then
  cat <<CONFIG
configVersion: v1
kubernetesValidating:
- name: deny.e2e.operon.dev
  namespace:
    labelSelector:
      matchLabels:
        e2e.operon.dev/webhooks: "true"
  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE"]
    resources: ["configmaps"]
    scope: Namespaced
kubernetesMutating:
- name: mutate.e2e.operon.dev
  namespace:
    labelSelector:
      matchLabels:
        e2e.operon.dev/webhooks: "true"
  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE"]
    resources: ["configmaps"]
    scope: Namespaced
CONFIG
  exit 0
fi
jq -c '.[0] as $c
  | if $c.type == "Mutating" then
      {allowed: true, patch: ([{op: "add", path: "/metadata/labels", value:
        (($c.review.request.object.metadata.labels // {}) + {"e2e.operon.dev/mutated": "true"})}]
        | tojson | @base64)}
    elif ($c.review.request.object.metadata.labels // {}) | has("e2e.operon.dev/deny") then
      {allowed: false, message: "refused by e2e-webhooks.sh"}
    else {allowed: true} end' "$BINDING_CONTEXT_PATH" > "$VALIDATING_RESPONSE_PATH"
"#;

/// The CRD the conversion hook converts: Widgets stored as v1 (`spec.replicas`), also
/// served as v2 (`spec.count`).
const WIDGETS_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.e2e-node.operon.dev
spec:
  group: e2e-node.operon.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

/// The conversion hook of Widgets, which the leader registers on the CRD and the API
/// server calls through the webhook Service.
const CONVERSION_HOOK: &str = r#"#!/usr/bin/env bash
set -euo pipefail
if [[ "${1:-}" == "--config" ]]; then
  cat <<CONFIG
configVersion: v1
kubernetesCustomResourceConversion:
- name: widgets
  crdName: widgets.e2e-node.operon.dev
  conversions:
  - {fromVersion: e2e-node.operon.dev/v1, toVersion: e2e-node.operon.dev/v2}
  - {fromVersion: e2e-node.operon.dev/v2, toVersion: e2e-node.operon.dev/v1}
CONFIG
  exit 0
fi
jq '.[0].review.request as $r | {convertedObjects: [$r.objects[]
    | if .apiVersion == "e2e-node.operon.dev/v1"
      then .apiVersion = $r.desiredAPIVersion | .spec.count = .spec.replicas | del(.spec.replicas)
      else .apiVersion = $r.desiredAPIVersion | .spec.replicas = .spec.count | del(.spec.count) end]}' \
  "$BINDING_CONTEXT_PATH" > "$CONVERSION_RESPONSE_PATH"
"#;

/// The time between two of those Pods.
const PACE: Duration = Duration::from_millis(1000);
pub(crate) const WASM_LABEL: &str = "operon.dev/seen";
pub(crate) const SHELL_LABEL: &str = "operon.dev/seen-by-shell";

pub(crate) struct Node {
    pub(crate) kubeconfig: PathBuf,
    pub(crate) image: String,
    /// The kubelet's --root-dir, when not /var/lib/kubelet.
    pub(crate) kubelet_dir: Option<String>,
    /// The image of the test's Pods (any image the node has; they only sleep).
    pub(crate) pod_image: String,
}

/// The node to test on, from `OPERON_E2E_NODE_KUBECONFIG` and `OPERON_E2E_NODE_IMAGE`:
/// the tests that call this are `#[ignore]`d, and fail here, naming the variable, when
/// run with `--ignored` without them.
#[track_caller]
pub(crate) fn node() -> Node {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let kubeconfig = required_os(
        "OPERON_E2E_NODE_KUBECONFIG",
        "the kubeconfig of a cluster with a node where Pods really run",
    );
    let image = required(
        "OPERON_E2E_NODE_IMAGE",
        "the operon image the node has (a locally built one, say)",
    );
    Node {
        kubeconfig: kubeconfig.into(),
        image,
        kubelet_dir: var("OPERON_E2E_NODE_KUBELET_DIR"),
        pod_image: var("OPERON_E2E_NODE_POD_IMAGE")
            .unwrap_or_else(|| "operon.local/pause:1".to_owned()),
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The overlay a user with their own image writes (deploy/README.md, "Your own image"),
/// plus the pod labeler in both languages and its RBAC.
pub(crate) fn overlay(node: &Node, dir: &Path) {
    let deploy = repo().join("deploy").canonicalize().unwrap();
    std::fs::copy(
        deploy.join("examples/pod-labeler-rbac.yaml"),
        dir.join("pod-labeler-rbac.yaml"),
    )
    .unwrap();
    std::fs::copy(operon_tests::POD_LABELER, dir.join("pod_labeler.wasm")).unwrap();
    let shell =
        std::fs::read_to_string(repo().join("operations/fixtures/shell-hooks/pod-labeler.sh"))
            .unwrap()
            .replace(WASM_LABEL, SHELL_LABEL)
            // A queue of its own: each hook's latency is measured, not one waiting on the
            // other in the shared `main` queue.
            .replace(
                "  executeHookOnEvent: [\"Added\", \"Modified\"]",
                "  executeHookOnEvent: [\"Added\", \"Modified\"]\n  queue: shell",
            )
            // A line on stderr per Pod, which `kubectl logs` of the leader must show.
            .replace(
                "  name=$(jq -r .name <<<\"$meta\")\n",
                "  name=$(jq -r .name <<<\"$meta\")\n  echo \"labelling pod $name\" >&2\n",
            );
    assert!(shell.contains("queue: shell") && shell.contains("labelling pod"));
    std::fs::write(dir.join("pod-labeler-shell.sh"), shell).unwrap();
    std::fs::write(dir.join("e2e-webhooks.sh"), WEBHOOK_HOOK).unwrap();
    std::fs::write(dir.join("e2e-convert.sh"), CONVERSION_HOOK).unwrap();
    let (name, tag) = node.image.rsplit_once(':').expect("the image has a tag");
    let kubelet_patch = node
        .kubelet_dir
        .as_ref()
        .map(|root| {
            format!(
                "patches:\n- target:\n    kind: DaemonSet\n    name: operon-seccomp\n  patch: |-\n    - op: replace\n      path: /spec/template/spec/volumes/0/hostPath/path\n      value: {root}/seccomp\n"
            )
        })
        .unwrap_or_default();
    // Block style: a flow mapping cannot hold the `[name=...]` of a field path.
    let image_replacements = [("Deployment", "operon"), ("DaemonSet", "operon-agent")]
        .map(|(kind, object)| {
            let container = format!("spec.template.spec.containers.[name={object}]");
            format!(
                "- source:\n    kind: {kind}\n    name: {object}\n    fieldPath: {container}.image\n  targets:\n  - select:\n      kind: {kind}\n      name: {object}\n    fieldPaths:\n    - {container}.env.[name=OPERON_IMAGE].value\n"
            )
        })
        .concat();
    // kustomize takes no absolute path to a base.
    let base = relative(&dir.canonicalize().unwrap(), &deploy);
    let kustomization = format!(
        "resources:\n- {base}\n- pod-labeler-rbac.yaml\n\
         images:\n- name: ghcr.io/operon-dev/operon\n  newName: {name}\n  newTag: \"{tag}\"\n\
         replacements:\n{image_replacements}\
         configMapGenerator:\n- name: operon-hooks\n  behavior: merge\n  files:\n  - pod_labeler.wasm\n  - pod-labeler-shell.sh\n  - e2e-webhooks.sh\n  - e2e-convert.sh\n\
         {kubelet_patch}",
        base = base.display(),
    );
    std::fs::write(dir.join("kustomization.yaml"), kustomization).unwrap();
}

/// Adds to the overlay in `dir` a patch that allows the controller's client 50 requests
/// per second and bursts of 100 (`KUBE_CLIENT_QPS`, `KUBE_CLIENT_BURST`): under load
/// every Pod costs each labelling hook a patch, beyond the default 5 per second.
pub(crate) fn allow_qps(dir: &Path) {
    let path = dir.join("kustomization.yaml");
    let mut text = std::fs::read_to_string(&path).unwrap();
    if !text.contains("\npatches:\n") {
        text.push_str("patches:\n");
    }
    for (name, value) in [("KUBE_CLIENT_QPS", "50"), ("KUBE_CLIENT_BURST", "100")] {
        text.push_str(&format!(
            "- target:\n    kind: Deployment\n    name: operon\n  patch: |-\n    - op: add\n      path: /spec/template/spec/containers/0/env/-\n      value: {{name: {name}, value: \"{value}\"}}\n"
        ));
    }
    std::fs::write(path, text).unwrap();
}

/// Applies the overlay in `dir` (`kubectl apply -k`) and waits until every workload of
/// the install is rolled out.
pub(crate) fn install(config: &Path, dir: &Path) {
    // Server-side: the wasm hook in the hooks ConfigMap is larger than the 256 KiB
    // annotation a client-side apply records.
    kubectl(
        config,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-k",
            dir.to_str().unwrap(),
        ],
    );
    for (namespace, workload) in [
        ("operon-node", "daemonset/operon-seccomp"),
        ("operon", "daemonset/operon-agent"),
        ("operon", "deployment/operon"),
    ] {
        let (ok, out, err) = try_kubectl(
            config,
            &[
                "-n",
                namespace,
                "rollout",
                "status",
                workload,
                "--timeout=300s",
            ],
        );
        if !ok {
            let (_, pods, _) = try_kubectl(config, &["get", "pods", "-A", "-o", "wide"]);
            let (_, events, _) = try_kubectl(config, &["-n", namespace, "get", "events"]);
            panic!("{workload} did not become ready: {out}{err}\n{pods}\n{events}");
        }
    }
}

/// `to` as a path relative to the directory `from` (both absolute).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<_> = from.components().collect();
    let to: Vec<_> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut path: PathBuf = std::iter::repeat_n("..", from.len() - common).collect();
    path.extend(to[common..].iter().map(|c| c.as_os_str()));
    path
}

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

/// The ClusterIP of a Service.
fn cluster_ip(kubeconfig: &Path, namespace: &str, service: &str) -> String {
    kubectl(
        kubeconfig,
        &[
            "-n",
            namespace,
            "get",
            "service",
            service,
            "-o",
            "jsonpath={.spec.clusterIP}",
        ],
    )
}

/// When each label was first seen on each Pod, by Pod name and label.
type Seen = BTreeMap<(String, &'static str), Instant>;

/// Watches `pods` until each of `names` carries both labels, and returns when each label
/// was first seen. Started before the Pods are created: it returns once its first list
/// is done, with the task that finishes with what it saw.
async fn watch_labels(pods: &Api<Pod>, names: BTreeSet<String>) -> tokio::task::JoinHandle<Seen> {
    use futures::StreamExt as _;
    let (listed, ready) = tokio::sync::oneshot::channel();
    let pods = pods.clone();
    let task = tokio::spawn(async move {
        let mut listed = Some(listed);
        let mut seen = Seen::new();
        let stream = watcher(pods, watcher::Config::default());
        futures::pin_mut!(stream);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
        while seen.len() < names.len() * 2 {
            let event = tokio::time::timeout_at(deadline, stream.next())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "not every Pod was labelled within 300 s: {} of {} labels",
                        seen.len(),
                        names.len() * 2
                    )
                })
                .expect("the watch goes on")
                .expect("watch event");
            let pod = match event {
                watcher::Event::InitDone => {
                    if let Some(listed) = listed.take() {
                        let _ = listed.send(());
                    }
                    continue;
                }
                watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => pod,
                _ => continue,
            };
            let name = pod.metadata.name.clone().unwrap_or_default();
            if !names.contains(&name) {
                continue;
            }
            let labels = pod.metadata.labels.unwrap_or_default();
            for label in [WASM_LABEL, SHELL_LABEL] {
                if labels.get(label).map(String::as_str) == Some("true") {
                    seen.entry((name.clone(), label))
                        .or_insert_with(Instant::now);
                }
            }
        }
        seen
    });
    ready.await.expect("the watch lists the Pods");
    task
}

/// The time from each Pod's creation (as the test saw it) to each of its labels, sorted:
/// (wasm hook, shell hook).
fn latencies(created: &BTreeMap<String, Instant>, seen: &Seen) -> (Vec<Duration>, Vec<Duration>) {
    let mut wasm = Vec::new();
    let mut shell = Vec::new();
    for ((name, label), at) in seen {
        let Some(start) = created.get(name) else {
            continue;
        };
        let latency = at.saturating_duration_since(*start);
        if *label == WASM_LABEL {
            wasm.push(latency);
        } else {
            shell.push(latency);
        }
    }
    wasm.sort();
    shell.sort();
    (wasm, shell)
}

/// A number in file `file` of cgroup directory `dir`.
fn cgroup_number(dir: &Path, file: &str) -> Option<u64> {
    std::fs::read_to_string(dir.join(file))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Field `key` of a cgroup's `memory.stat` text, 0 when it is not there.
fn memory_stat(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0)
}

/// The working set (usage less inactive file pages, as the kubelet counts it) of the
/// Pod `uid`'s cgroup, when this machine is the node and shows its cgroups.
pub(crate) fn pod_memory(uid: &str) -> Option<u64> {
    let dir = pod_cgroup(uid, "memory")?;
    let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
    if let Some(usage) = cgroup_number(&dir, "memory.usage_in_bytes") {
        return Some(usage.saturating_sub(memory_stat(&stat, "total_inactive_file")));
    }
    let usage = cgroup_number(&dir, "memory.current")?;
    Some(usage.saturating_sub(memory_stat(&stat, "inactive_file")))
}

/// What the working set of Pod `uid` is made of, in bytes: anonymous memory (the
/// processes' heaps and stacks), kernel memory charged to the Pod (dentries, inodes,
/// page tables, sockets) and active file pages.
pub(crate) fn pod_memory_parts(uid: &str) -> Option<(u64, u64, u64)> {
    let dir = pod_cgroup(uid, "memory")?;
    let stat = std::fs::read_to_string(dir.join("memory.stat")).ok()?;
    if let Some(kernel) = cgroup_number(&dir, "memory.kmem.usage_in_bytes") {
        return Some((
            memory_stat(&stat, "total_rss"),
            kernel,
            memory_stat(&stat, "total_active_file"),
        ));
    }
    Some((
        memory_stat(&stat, "anon"),
        memory_stat(&stat, "kernel"),
        memory_stat(&stat, "active_file"),
    ))
}

/// The directory of the cgroup of Pod `uid` under cgroup v1's `controller`, or in the
/// unified hierarchy, when this machine is the node and shows its cgroups.
pub(crate) fn pod_cgroup(uid: &str, controller: &str) -> Option<PathBuf> {
    fn find(dir: &Path, name: &str, depth: usize) -> Option<PathBuf> {
        for entry in std::fs::read_dir(dir).ok()?.flatten() {
            let path = entry.path();
            if !entry.file_type().ok()?.is_dir() {
                continue;
            }
            if entry.file_name().to_string_lossy().ends_with(name) {
                return Some(path);
            }
            if depth > 0
                && let Some(found) = find(&path, name, depth - 1)
            {
                return Some(found);
            }
        }
        None
    }
    let pod = format!("pod{uid}");
    find(&Path::new("/sys/fs/cgroup").join(controller), &pod, 5)
        .or_else(|| find(Path::new("/sys/fs/cgroup"), &pod, 6))
}

/// An install of `deploy/` as [`overlay`] writes it (with `shell_twin` as the shell
/// labelling hook, when given), the controller's client allowed 50 requests per second
/// ([`allow_qps`]), and a fresh namespace whose ConfigMaps the admission hook checks:
/// for the suites that load the install.
pub(crate) async fn install_for_load(
    node: &Node,
    prefix: &str,
    shell_twin: Option<&str>,
) -> (tempfile::TempDir, kube::Client, Scratch) {
    install_for_load_with(node, prefix, shell_twin, |_| {}).await
}

/// [`install_for_load`], with `extend` changing the overlay in its directory first.
pub(crate) async fn install_for_load_with(
    node: &Node,
    prefix: &str,
    shell_twin: Option<&str>,
    extend: impl FnOnce(&Path),
) -> (tempfile::TempDir, kube::Client, Scratch) {
    let config = node.kubeconfig.as_path();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    overlay(node, dir.path());
    extend(dir.path());
    if let Some(script) = shell_twin {
        std::fs::write(dir.path().join("pod-labeler-shell.sh"), script).unwrap();
    }
    allow_qps(dir.path());
    install(config, dir.path());
    let cluster = connect(config).await;
    let scratch = Scratch::new(&cluster, config, prefix).await;
    kubectl(
        config,
        &[
            "label",
            "namespace",
            &scratch.name,
            "e2e.operon.dev/webhooks=true",
        ],
    );
    admission_answers(cluster.client(), &scratch.name).await;
    (dir, cluster.client().clone(), scratch)
}

/// A Hook object in `namespace` running the pushed pod labeler with `runOn: Job` on the
/// Pods of `watched` (another namespace: in its own, each run's pod would start the next
/// run), its Jobs kept `ttl` seconds after they finish.
pub(crate) fn labeler_hook_yaml(namespace: &str, watched: &str, ttl: u64) -> String {
    format!(
        r#"apiVersion: operon.dev/v1alpha1
kind: Hook
metadata:
  name: labeler
  namespace: {namespace}
spec:
  module: pod-labeler
  runOn: Job
  job:
    ttlSecondsAfterFinished: {ttl}
  overrides:
    timeout: 120s
    kubernetes:
    - name: pods
      namespaces: [{watched}]
  permissions:
    watch:
    - apiVersion: v1
      kind: Pod
      namespaces: [{watched}]
    patch:
    - apiVersion: v1
      kind: Pod
      operations: [MergePatch]
      namespaces: [{watched}]
"#
    )
}

/// The label selector of what the runs of the Hook [`labeler_hook_yaml`] applied in
/// `namespace` create (its Jobs, their pods and ConfigMaps).
pub(crate) fn labeler_hook_selector(config: &Path, namespace: &str) -> String {
    let uid = kubectl(
        config,
        &[
            "-n",
            namespace,
            "get",
            "hook",
            "labeler",
            "-o",
            "jsonpath={.metadata.uid}",
        ],
    );
    format!("operon.dev/hook-uid={uid}")
}

/// Grants the `default` ServiceAccount of `namespace` `get` on Modules (what a Job's pod
/// needs to fetch its module from the module API) through a ClusterRole that lives as
/// long as the returned guard and a RoleBinding in `namespace`.
pub(crate) fn grant_module_reader(config: &Path, namespace: &str) -> ClusterScoped {
    let reader = format!("{namespace}-module-reader");
    kubectl(
        config,
        &[
            "create",
            "clusterrole",
            &reader,
            "--verb=get",
            "--resource=modules.operon.dev",
        ],
    );
    let reader_role = ClusterScoped {
        kubeconfig: config.to_owned(),
        objects: vec![("clusterrole", reader.clone())],
    };
    kubectl(
        config,
        &[
            "-n",
            namespace,
            "create",
            "rolebinding",
            "module-reader",
            "--clusterrole",
            &reader,
            "--serviceaccount",
            &format!("{namespace}:default"),
        ],
    );
    reader_role
}

/// Pushes each `(name, file)` of `modules` through the controller's module API (its
/// Service, with the webhook CA the install wrote to `dir`) as the ServiceAccount
/// `uploader` of `namespace`, granted what a push needs by a ClusterRole that lives as
/// long as the returned guard.
pub(crate) fn push_modules(
    config: &Path,
    dir: &Path,
    namespace: &str,
    modules: &[(&str, &str)],
) -> ClusterScoped {
    let role = format!("{namespace}-uploader");
    let token = module_account(config, namespace, "uploader", &role, "create,get,list");
    let cleanup = ClusterScoped {
        kubeconfig: config.to_owned(),
        objects: vec![("clusterrole", role.clone()), ("clusterrolebinding", role)],
    };
    let ca = dir.join("ca.crt");
    let ca_pem = kubectl(
        config,
        &[
            "-n",
            "operon",
            "get",
            "secret",
            "operon-webhook-tls",
            "-o",
            "jsonpath={.data.ca\\.crt}",
        ],
    );
    use base64::Engine as _;
    std::fs::write(
        &ca,
        base64::engine::general_purpose::STANDARD
            .decode(ca_pem.trim())
            .unwrap(),
    )
    .unwrap();
    let webhooks_ip = cluster_ip(config, "operon", "operon-webhooks");
    for (name, file) in modules {
        // Right after a rollout, kube-proxy may not route the Service to the new Pods
        // yet (a busy node syncs its rules late): a refused connection is tried again.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let output = Command::new(env!("CARGO_BIN_EXE_operon"))
                .args(["module", "push", file, "--name", name])
                .args([
                    "--server",
                    &format!("https://{webhooks_ip}:443"),
                    "--token",
                    &token,
                ])
                .args(["--tls-server-name", "operon-webhooks.operon.svc"])
                .arg("--certificate-authority")
                .arg(&ca)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            if output.status.success() {
                break;
            }
            assert!(
                stderr.contains("error: connecting to") && Instant::now() < deadline,
                "operon module push {name}: {stderr}"
            );
            eprintln!("operon module push {name}: {stderr}; trying again");
            std::thread::sleep(Duration::from_secs(2));
        }
    }
    cleanup
}

/// Waits (at most 120 s) until a ConfigMap created in `namespace` comes back mutated: the
/// leader registers the webhooks once it leads, which may be after the rollout is
/// complete, and a load started before that would count its first ConfigMaps unchecked.
async fn admission_answers(client: &kube::Client, namespace: &str) {
    let maps = Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + Duration::from_secs(120);
    for attempt in 0.. {
        if checked_configmap(&maps, &format!("admission-probe-{attempt}")).await {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "ConfigMaps in {namespace} are not mutated 120 s after the install"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Creates ConfigMap `name` through `maps` and deletes it again; whether it came back
/// mutated by the admission hook ([`WEBHOOK_HOOK`]).
pub(crate) async fn checked_configmap(
    maps: &Api<k8s_openapi::api::core::v1::ConfigMap>,
    name: &str,
) -> bool {
    use kube::api::{DeleteParams, PostParams};
    let map = serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    let created = maps.create(&PostParams::default(), &map).await;
    let _ = maps.delete(name, &DeleteParams::default()).await;
    created
        .ok()
        .and_then(|map| map.metadata.labels)
        .is_some_and(|labels| labels.contains_key("e2e.operon.dev/mutated"))
}

/// A field (a JSONPath template) of the Pod `pod` in namespace operon.
pub(crate) fn operon_pod(config: &Path, pod: &str, field: &str) -> String {
    kubectl(
        config,
        &[
            "-n",
            "operon",
            "get",
            "pod",
            pod,
            "-o",
            &format!("jsonpath={field}"),
        ],
    )
}

/// The status of Diagnosis `namespace`/`name` once it Succeeded or Failed, polled every
/// half second for at most `limit`.
pub(crate) fn finished_diagnosis(
    config: &Path,
    namespace: &str,
    name: &str,
    limit: Duration,
) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let out = kubectl(
            config,
            &["-n", namespace, "get", "diagnosis", name, "-o", "json"],
        );
        let object: Value = serde_json::from_str(&out).unwrap();
        if matches!(
            object["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        ) {
            return object["status"].clone();
        }
        assert!(
            Instant::now() < deadline,
            "Diagnosis {namespace}/{name} did not end: {object:#}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A field (a JSONPath template) of the node agent's Pod (the one node's).
pub(crate) fn agent_pod(config: &Path, field: &str) -> String {
    agent_pod_where(config, &[], field)
}

/// [`agent_pod`] of the agent on node `node`: with several nodes, the one that ran a
/// Diagnosis about that node.
pub(crate) fn agent_pod_on(config: &Path, node: &str, field: &str) -> String {
    let on_node = format!("spec.nodeName={node}");
    agent_pod_where(config, &["--field-selector", &on_node], field)
}

/// `field` of the first agent Pod that `selectors` (kubectl arguments) pick.
fn agent_pod_where(config: &Path, selectors: &[&str], field: &str) -> String {
    let jsonpath = format!("jsonpath={{.items[0]{field}}}");
    let mut args = vec![
        "-n",
        "operon",
        "get",
        "pods",
        "-l",
        "app.kubernetes.io/name=operon-agent",
    ];
    args.extend_from_slice(selectors);
    args.extend_from_slice(&["-o", &jsonpath]);
    kubectl(config, &args)
}

/// Deletes Pod `pod` of namespace operon with `--force --grace-period=0`, as a node's
/// sudden loss would.
pub(crate) fn force_delete(config: &Path, pod: &str) {
    kubectl(
        config,
        &[
            "-n",
            "operon",
            "delete",
            "pod",
            pod,
            "--force",
            "--grace-period=0",
        ],
    );
}

/// The Pod holding the controller's Lease (its holder identity is `POD_NAME_SUFFIX`).
pub(crate) fn leader_pod(config: &Path) -> String {
    let holder = kubectl(
        config,
        &[
            "-n",
            "operon",
            "get",
            "lease",
            "operon",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
    );
    match holder.rsplit_once('_') {
        Some((pod, _)) => pod.to_owned(),
        None => holder,
    }
}

fn leader_memory(config: &Path) -> Option<u64> {
    let leader = leader_pod(config);
    let uid = operon_pod(config, &leader, "{.metadata.uid}");
    pod_memory(&uid)
}

fn report(what: &str, sorted: &[Duration]) {
    eprintln!(
        "{what}: p50 {:?}, p99 {:?}, max {:?} over {} Pods",
        percentile(sorted, 0.5),
        percentile(sorted, 0.99),
        sorted.last().unwrap(),
        sorted.len()
    );
}

/// The agent's built-ins on the node: the process list (the node's, with hostPID) and
/// a cordon by a Diagnosis whose ServiceAccount RBAC allows to patch the node; the node
/// is uncordoned after.
fn agent_built_ins_read_the_node_and_cordon_it(config: &Path) {
    let node = kubectl(
        config,
        &["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"],
    );
    let namespace = format!("e2e-node-builtins-{:08x}", getrandom_u32());
    kubectl(config, &["create", "namespace", &namespace]);
    kubectl(
        config,
        &["-n", &namespace, "create", "serviceaccount", "repairer"],
    );
    let role = format!("{namespace}-cordon");
    kubectl(
        config,
        &[
            "create",
            "clusterrole",
            &role,
            "--verb=patch",
            "--resource=nodes",
            &format!("--resource-name={node}"),
        ],
    );
    bind_cluster_role(config, &role, &namespace, "repairer");
    let _cleanup = ClusterScoped {
        kubeconfig: config.to_owned(),
        objects: vec![
            ("clusterrole", role.clone()),
            ("clusterrolebinding", role.clone()),
            ("namespace", namespace.clone()),
        ],
    };
    let file = std::env::temp_dir().join(format!("{namespace}.yaml"));
    std::fs::write(
        &file,
        format!(
            r#"apiVersion: operon.dev/v1alpha1
kind: Operation
metadata:
  name: e2e-processes
spec:
  processor:
    timeoutSeconds: 60
    httpServer:
      path: /processor/processCollector
---
apiVersion: operon.dev/v1alpha1
kind: Operation
metadata:
  name: e2e-cordon
spec:
  processor:
    timeoutSeconds: 60
    httpServer:
      path: /processor/nodeCordon
---
apiVersion: operon.dev/v1alpha1
kind: OperationSet
metadata:
  name: e2e-builtins
spec:
  adjacencyList:
  - id: 0
    to: [1]
  - id: 1
    operation: e2e-processes
    to: [2]
  - id: 2
    operation: e2e-cordon
---
apiVersion: operon.dev/v1alpha1
kind: Diagnosis
metadata:
  name: builtins
  namespace: {namespace}
spec:
  operationSet: e2e-builtins
  nodeName: {node}
  serviceAccountName: repairer
"#
        ),
    )
    .unwrap();
    kubectl(config, &["apply", "-f", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    let status = finished_diagnosis(config, &namespace, "builtins", Duration::from_secs(180));
    let uncordoned = try_kubectl(config, &["uncordon", &node]);
    assert_eq!(status["phase"], "Succeeded", "{status:#}");
    assert!(uncordoned.0, "uncordon: {}", uncordoned.2);
    let processes = status["operationResults"]["collector.system.process.list"]
        .as_str()
        .unwrap_or_default();
    assert!(
        processes.contains(r#""name":"kubelet""#),
        "the node's kubelet is not among its processes (hostPID): {}",
        &processes[..processes.len().min(2000)]
    );
    assert_eq!(
        status["operationResults"]["recover.kubernetes.node_cordon.result.name"],
        node.as_str(),
        "{status:#}"
    );
    eprintln!(
        "the agent listed the node's processes (hostPID) and cordoned it for an allowed account"
    );
}

/// The Helm chart installed with Helm's own code (deploy/helm/install.py), its shell hook
/// run with every namespace, then uninstalled.
fn helm_installs_and_uninstalls(node: &Node) {
    let config = node.kubeconfig.as_path();
    let (repository, tag) = node.image.rsplit_once(':').expect("the image has a tag");
    let script = repo().join("deploy/helm/install.py");
    let mut install = Command::new("python3");
    install
        .arg(&script)
        .arg("--kubeconfig")
        .arg(config)
        .args(["--set", &format!("image.repository={repository}")])
        .args(["--set", &format!("image.tag={tag}")]);
    if let Some(root) = &node.kubelet_dir {
        install.args(["--set", &format!("seccomp.install.kubeletRootDir={root}")]);
    }
    // The node's processes for the process list built-in (a host namespace: the
    // namespace Helm creates has no Pod Security label, so `privileged` applies).
    install.args(["--set", "agent.hostPID=true"]);
    let started = Instant::now();
    let output = install.output().unwrap();
    assert!(
        output.status.success(),
        "helm install: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!(
        "helm install (waiting for every object) took {:?}",
        started.elapsed()
    );
    let leader = leader_pod(config);
    let ip = operon_pod(config, &leader, "{.status.podIP}");
    let line = "operon_script_sandbox_protection{protection=\"user_namespace\"} 1";
    let deadline = Instant::now() + Duration::from_secs(60);
    while !http_get_at(&ip, 9115, "/metrics").is_some_and(|(_, m)| m.contains(line)) {
        assert!(
            Instant::now() < deadline,
            "the Helm release's hook never ran in a user namespace"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    agent_built_ins_read_the_node_and_cordon_it(config);

    let output = Command::new("python3")
        .arg(&script)
        .arg("--kubeconfig")
        .arg(config)
        .arg("--uninstall")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "helm uninstall: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (_, pods, _) = try_kubectl(config, &["-n", "operon", "get", "pods", "-o", "name"]);
        let (_, installer, _) =
            try_kubectl(config, &["get", "namespace", "operon-node", "-o", "name"]);
        if pods.trim().is_empty() && installer.trim().is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the Helm release is not gone: {pods}{installer}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a node where Pods run: set OPERON_E2E_NODE_KUBECONFIG and OPERON_E2E_NODE_IMAGE"]
async fn a_fresh_install_runs_hooks_modules_and_diagnoses_on_a_real_node() {
    let node = node();
    let config = node.kubeconfig.as_path();
    helm_installs_and_uninstalls(&node);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    overlay(&node, dir.path());

    // The CRD the conversion hook names, before the hook is loaded.
    let crd = dir.path().join("widgets-crd.yaml");
    std::fs::write(&crd, WIDGETS_CRD).unwrap();
    kubectl(config, &["apply", "-f", crd.to_str().unwrap()]);
    let _crd = ClusterScoped {
        kubeconfig: config.to_owned(),
        objects: vec![(
            "customresourcedefinition",
            "widgets.e2e-node.operon.dev".to_owned(),
        )],
    };

    // The install, timed to every Pod Ready.
    let started = Instant::now();
    install(config, dir.path());
    eprintln!(
        "kubectl apply -k deploy/ to all Pods Ready: {:?}",
        started.elapsed()
    );

    // Engine start to Ready, per controller replica: from its container's start to its
    // Ready condition (the API server keeps both to the second).
    let replicas: Value = serde_json::from_str(&kubectl(
        config,
        &[
            "-n",
            "operon",
            "get",
            "pods",
            "-l",
            "app.kubernetes.io/name=operon",
            "-o",
            "json",
        ],
    ))
    .unwrap();
    for pod in replicas["items"].as_array().unwrap() {
        let started = pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok());
        let ready = pod["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .and_then(|c| c["lastTransitionTime"].as_str())
            .and_then(|t| t.parse::<jiff::Timestamp>().ok());
        if let (Some(started), Some(ready)) = (started, ready) {
            eprintln!(
                "{}: container started to Ready in {} s",
                pod["metadata"]["name"].as_str().unwrap_or(""),
                (ready - started).get_seconds()
            );
        }
    }

    // Pod Security is enforced where the controller and the agent run: they were
    // admitted under `restricted`, which refuses what the installer needs.
    let level = kubectl(
        config,
        &[
            "get",
            "namespace",
            "operon",
            "-o",
            "jsonpath={.metadata.labels.pod-security\\.kubernetes\\.io/enforce}",
        ],
    );
    assert_eq!(level, "restricted");
    let host_path = dir.path().join("host-path-pod.yaml");
    std::fs::write(
        &host_path,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: refused\n  namespace: operon\nspec:\n  containers:\n  - name: c\n    image: {}\n  volumes:\n  - name: h\n    hostPath:\n      path: /var/lib/kubelet/seccomp\n",
            node.pod_image
        ),
    )
    .unwrap();
    let (admitted, _, why) = try_kubectl(
        config,
        &[
            "create",
            "--dry-run=server",
            "-f",
            host_path.to_str().unwrap(),
        ],
    );
    assert!(
        !admitted && why.contains("violates PodSecurity \"restricted"),
        "{why}"
    );

    let cluster = connect(config).await;
    let client = cluster.client().clone();
    let scratch = Scratch::new(&cluster, config, "e2e-node").await;
    let namespace = scratch.name.as_str();

    // Admission webhooks called by the API server through the webhook Service: a
    // mutating and a validating binding of a shell hook, registered by the leader.
    kubectl(
        config,
        &[
            "label",
            "namespace",
            namespace,
            "e2e.operon.dev/webhooks=true",
        ],
    );
    let configmap = |name: &str, labels: &str| {
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  labels: {{{labels}}}\n"
            ),
        )
        .unwrap();
        try_kubectl(config, &["create", "-f", path.to_str().unwrap()])
    };
    let mut attempt = 0;
    let refusal = eventually(
        "the validating webhook",
        Duration::from_secs(120),
        async || {
            attempt += 1;
            let (created, _, why) =
                configmap(&format!("denied-{attempt}"), "e2e.operon.dev/deny: \"yes\"");
            (!created).then_some(why)
        },
    )
    .await;
    assert!(refusal.contains("refused by e2e-webhooks.sh"), "{refusal}");
    let (created, _, why) = configmap("allowed", "app: e2e");
    assert!(created, "{why}");
    let labels = kubectl(
        config,
        &[
            "-n",
            namespace,
            "get",
            "configmap",
            "allowed",
            "-o",
            "jsonpath={.metadata.labels}",
        ],
    );
    assert!(
        labels.contains("e2e.operon.dev/mutated"),
        "not mutated: {labels}"
    );
    eprintln!("validating and mutating webhooks answered through the Service");

    // Conversion through the Service: a Widget stored as v1 and read as v2.
    let widget = dir.path().join("widget.yaml");
    std::fs::write(
        &widget,
        format!(
            "apiVersion: e2e-node.operon.dev/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: {namespace}\nspec:\n  replicas: 3\n"
        ),
    )
    .unwrap();
    kubectl(config, &["create", "-f", widget.to_str().unwrap()]);
    let converted: Value = eventually("the conversion", Duration::from_secs(120), async || {
        let (ok, out, _) = try_kubectl(
            config,
            &[
                "-n",
                namespace,
                "get",
                "widgets.v2.e2e-node.operon.dev",
                "w",
                "-o",
                "json",
            ],
        );
        ok.then(|| serde_json::from_str(&out).unwrap())
    })
    .await;
    assert_eq!(
        converted["apiVersion"], "e2e-node.operon.dev/v2",
        "{converted:#}"
    );
    assert_eq!(converted["spec"]["count"], 3, "{converted:#}");
    eprintln!("a conversion webhook answered through the Service");
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);

    // Pods labelled by the wasm hook and by its shell twin.
    let names: BTreeSet<String> = (0..PODS).map(|i| format!("p{i:03}")).collect();
    let watching = watch_labels(&pods, names).await;
    let mut created = BTreeMap::new();
    for i in 0..PODS {
        let name = format!("p{i:03}");
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {
                "containers": [{"name": "c", "image": node.pod_image, "imagePullPolicy": "IfNotPresent"}],
                "terminationGracePeriodSeconds": 0,
            },
        }))
        .unwrap();
        pods.create(&Default::default(), &pod).await.unwrap();
        created.insert(name, Instant::now());
        // Paced well below the client's default 5 requests per second, which two
        // patches per Pod and the engine's own requests share: this measures a Pod's
        // way, not a backlog.
        tokio::time::sleep(PACE).await;
    }
    let seen = watching.await.unwrap();
    let (wasm, shell) = latencies(&created, &seen);
    // The slowest, by name: an outlier is then told from a trend.
    let mut slowest: Vec<(Duration, &str, &str)> = seen
        .iter()
        .map(|((name, label), at)| {
            (
                at.saturating_duration_since(created[name]),
                name.as_str(),
                *label,
            )
        })
        .collect();
    slowest.sort();
    eprintln!("slowest: {:?}", &slowest[slowest.len().saturating_sub(3)..]);
    report("Pod created to label applied, wasm hook", &wasm);
    report("Pod created to label applied, shell hook", &shell);

    // The shell hook ran in every namespace the sandbox has in a pod, under --strict.
    let metrics_ip = cluster_ip(config, "operon", "operon-metrics");
    let leader = leader_pod(config);
    let leader_ip = operon_pod(config, &leader, "{.status.podIP}");
    let metrics = eventually(
        "the leader's metrics",
        Duration::from_secs(30),
        async || http_get_at(&leader_ip, 9115, "/metrics").map(|(_, body)| body),
    )
    .await;
    for protection in [
        "user_namespace",
        "mount_namespace",
        "pid_namespace",
        "network_namespace",
        "ipc_namespace",
        "uts_namespace",
        "landlock_filesystem",
        "disk_budget",
    ] {
        let line = format!("operon_script_sandbox_protection{{protection=\"{protection}\"}} 1");
        assert!(
            metrics.contains(&line),
            "{line} missing from the leader's metrics"
        );
    }
    assert!(metrics.contains("pods_labelled_total"), "{metrics}");
    // What the shell hook printed is in the leader's log, as shell-operator logs it.
    let logs = kubectl(config, &["-n", "operon", "logs", &leader]);
    let printed = logs
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|r| r["message"] == "labelling pod p001")
        .unwrap_or_else(|| panic!("the hook's output is not in the leader's log"));
    assert_eq!(printed["hook"], "pod-labeler-shell.sh", "{printed}");
    assert_eq!(printed["binding"], "pods", "{printed}");
    assert_eq!(printed["queue"], "shell", "{printed}");
    assert_eq!(printed["output"], "stderr", "{printed}");
    eprintln!("the shell hook's output in kubectl logs: {printed}");
    let service = http_get_at(&metrics_ip, 9115, "/metrics")
        .map(|(_, body)| body)
        .expect("the metrics Service answers");
    assert!(service.contains("operon_script_sandbox_protection"));

    // Modules pushed to a fresh install, followed by the agent (which may have started
    // before the webhook certificate's Secret existed), and the node-diagnosis example
    // run on this node through the agent.
    let _uploader = push_modules(
        config,
        dir.path(),
        namespace,
        &[
            ("log-triage", operon_tests::LOG_TRIAGE),
            ("disk-pressure", operon_tests::DISK_PRESSURE),
            ("pod-labeler", operon_tests::POD_LABELER),
        ],
    );
    let example = repo().join("operations/examples/node-diagnosis");
    for file in ["operations.yaml", "pipeline.yaml"] {
        kubectl(
            config,
            &["apply", "-f", example.join(file).to_str().unwrap()],
        );
    }
    let node_name = kubectl(
        config,
        &["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"],
    );
    let status = node_files::diagnose(
        config,
        dir.path(),
        namespace,
        "node-diagnosis",
        &node_name,
        "99",
    );
    assert_eq!(status["phase"], "Succeeded", "{status:#}");
    let records = status["nodes"].as_array().unwrap();
    let record = |operation: &str| {
        records
            .iter()
            .find(|n| n["operation"] == operation)
            .unwrap_or_else(|| panic!("no record of {operation}: {status:#}"))
    };
    // df read the run's mount table (the snapshot that stands in for /proc in a pod).
    assert_eq!(record("collect-df")["phase"], "Succeeded", "{status:#}");
    assert_eq!(record("disk-pressure")["phase"], "Succeeded", "{status:#}");
    assert_eq!(
        record("disk-cleanup-plan")["phase"],
        "Succeeded",
        "{status:#}"
    );

    // With deploy/node-access, the same example reads the node itself: the kubelet's
    // journal, and the node's filesystems by their node paths.
    node_files::node_diagnosis_reads_the_node(config, dir.path(), namespace, &node_name);

    // A Diagnosis naming no node runs in the controller: a `job` step as a real Job of
    // the Operon image, then a wasm step offloaded to a Job (`runOn: Job`) whose pod
    // fetches the pushed module from the module API through the webhook Service with
    // its ServiceAccount's token (granted `get` on Modules in this namespace only).
    let _reader = grant_module_reader(config, namespace);
    let jobs = dir.path().join("jobs.yaml");
    std::fs::write(
        &jobs,
        format!(
            r#"apiVersion: operon.dev/v1alpha1
kind: Operation
metadata:
  name: e2e-job-step
spec:
  processor:
    timeoutSeconds: 120
    job:
      image: {image}
      imagePullPolicy: IfNotPresent
      command: [bash, -c, 'printf "{{\"job.ran\":\"%s\"}}" "$(uname -n)" > "$OPERON_RESULT_PATH"']
---
apiVersion: operon.dev/v1alpha1
kind: Operation
metadata:
  name: e2e-offloaded-triage
spec:
  processor:
    timeoutSeconds: 120
    wasm:
      module: log-triage
      runOn: Job
---
apiVersion: operon.dev/v1alpha1
kind: OperationSet
metadata:
  name: e2e-jobs
spec:
  adjacencyList:
  - id: 0
    to: [1]
  - id: 1
    operation: e2e-job-step
    to: [2]
  - id: 2
    operation: e2e-offloaded-triage
---
apiVersion: operon.dev/v1alpha1
kind: Diagnosis
metadata:
  name: jobs
  namespace: {namespace}
spec:
  operationSet: e2e-jobs
  parameters:
    log: "kernel: Memory cgroup out of memory: Killed process 4242 (app) OOMKilled"
"#,
            image = node.image,
        ),
    )
    .unwrap();
    let in_jobs = Instant::now();
    kubectl(config, &["apply", "-f", jobs.to_str().unwrap()]);
    let status = finished_diagnosis(config, namespace, "jobs", Duration::from_secs(300));
    eprintln!(
        "a job step and an offloaded wasm step, as real Jobs: {:?}",
        in_jobs.elapsed()
    );
    assert_eq!(status["phase"], "Succeeded", "{status:#}");
    let results = &status["operationResults"];
    assert!(
        results["job.ran"].as_str().is_some_and(|r| !r.is_empty()),
        "{status:#}"
    );
    assert_eq!(results["triage.category"], "oom", "{status:#}");

    // A Hook object with `runOn: Job`: each run of the pushed pod labeler is a Job of
    // the image in the Hook's namespace, fetching the module by digest with that
    // namespace's default account. It watches another namespace: in its own, each run's
    // pod would start the next run.
    let target = Scratch::new(&cluster, config, "e2e-node-target").await;
    let watched = target.name.as_str();
    let hook = dir.path().join("hook.yaml");
    std::fs::write(&hook, labeler_hook_yaml(namespace, watched, 300)).unwrap();
    let hooked = Instant::now();
    kubectl(config, &["apply", "-f", hook.to_str().unwrap()]);
    kubectl(
        config,
        &[
            "-n",
            watched,
            "run",
            "hooked",
            "--image",
            &node.pod_image,
            "--restart=Never",
        ],
    );
    let selector = labeler_hook_selector(config, namespace);
    let succeeded = eventually(
        "a Job of the Hook to succeed",
        Duration::from_secs(180),
        async || {
            let out = kubectl(
                config,
                &[
                    "-n", namespace, "get", "jobs", "-l", &selector, "-o", "json",
                ],
            );
            let jobs: Value = serde_json::from_str(&out).unwrap();
            let done = jobs["items"]
                .as_array()?
                .iter()
                .filter(|j| j["status"]["succeeded"].as_i64() == Some(1))
                .count();
            (done > 0).then_some(done)
        },
    )
    .await;
    eprintln!(
        "Hook with runOn: Job: {succeeded} run(s) done as Jobs {:?} after the Hook was applied",
        hooked.elapsed()
    );
    let (_, failed, _) = try_kubectl(
        config,
        &[
            "-n",
            namespace,
            "get",
            "jobs",
            "-l",
            &selector,
            "-o",
            "jsonpath={.items[*].status.failed}",
        ],
    );
    assert!(
        failed.trim().is_empty(),
        "a Job of the Hook failed: {failed}"
    );

    // Leader hand-over: the leader deleted with --force, the other replica takes the
    // Lease and its hooks label a new Pod.
    let handed = Instant::now();
    force_delete(config, &leader);
    let next = eventually("another leader", Duration::from_secs(60), async || {
        let holder = leader_pod(config);
        (!holder.is_empty() && holder != leader).then_some(holder)
    })
    .await;
    eprintln!(
        "leader {leader} deleted, {next} leads after {:?}",
        handed.elapsed()
    );
    let watching = watch_labels(&pods, BTreeSet::from(["after-handover".to_owned()])).await;
    let mut after = BTreeMap::new();
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "after-handover"},
        "spec": {"containers": [{"name": "c", "image": node.pod_image}], "terminationGracePeriodSeconds": 0},
    }))
    .unwrap();
    pods.create(&Default::default(), &pod).await.unwrap();
    after.insert("after-handover".to_owned(), Instant::now());
    let (wasm, shell) = latencies(&after, &watching.await.unwrap());
    eprintln!(
        "after the hand-over, a new Pod was labelled in {:?} (wasm) and {:?} (shell)",
        wasm[0], shell[0]
    );
    // The test's Pods, not the Jobs' (labelled job-name).
    let listed = pods
        .list(&ListParams::default().labels("!job-name"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), PODS + 1);

    // The controller's memory, idle and while its hooks watch 1,000 more Pods (most of
    // them stay Pending: one node runs at most 110).
    let Some(idle) = leader_memory(config) else {
        eprintln!("the node's cgroups are not visible here: memory not measured");
        return;
    };
    let more = 1_000;
    for i in 0..more {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("w{i:04}")},
            "spec": {"containers": [{"name": "c", "image": node.pod_image}], "terminationGracePeriodSeconds": 0},
        }))
        .unwrap();
        pods.create(&Default::default(), &pod).await.unwrap();
    }
    let all = PODS + 1 + more;
    // Long enough for the watches to hold them and the first of their hook runs.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let watching = leader_memory(config).expect("measured before");
    eprintln!(
        "controller memory (cgroup working set): {:.1} MiB idle, {:.1} MiB watching {} Pods",
        idle as f64 / 1048576.0,
        watching as f64 / 1048576.0,
        all
    );
}
