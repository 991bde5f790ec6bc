//! What `deploy/` gives offloaded wasm steps (`wasm.runOn: Job`), rendered by
//! `kubectl kustomize` and the Helm chart: the component `deploy/offload` with the
//! ClusterRole their pods need and, for the node agents, the controller's grants for
//! Jobs and the module API's URL; and `OPERON_IMAGE` (the image those pods run) of the
//! controller and of the agent following their own image through kustomize `images:`
//! rewrites, in `deploy/` itself and in an overlay that repeats the replacements
//! `deploy/README.md` gives.

use crate::deploy_support::{
    CHART, Grant, KUSTOMIZATION, assert_same, check_command_line, deploy, find, grant, grants,
    helm, is_agent, kind, kinds_and_names, kustomize, name, normalized, render_chart, text,
};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const MODULE_READER: &str = "operon-module-reader";
/// The node agent's DaemonSet, container and ServiceAccount.
const AGENT: &str = "operon-agent";
/// The ClusterRole (and binding) of the agent's Jobs.
const AGENT_JOBS: &str = "operon-agent-jobs";

/// The controller container's image and its `OPERON_IMAGE`.
fn images(objects: &[Value]) -> (String, String) {
    image_and_env(objects, "Deployment", "operon", "operon")
}

/// The node agent container's image and its `OPERON_IMAGE`.
fn agent_images(objects: &[Value]) -> (String, String) {
    image_and_env(objects, "DaemonSet", AGENT, AGENT)
}

/// The container of a workload.
fn container<'a>(objects: &'a [Value], kind: &str, name: &str, container: &str) -> &'a Value {
    find(objects, kind, name)["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == container)
        .unwrap_or_else(|| panic!("the {container} container of {kind}/{name}"))
}

/// A container's environment variables by name: a literal value, or the JSON of its
/// source.
fn env(container: &Value) -> BTreeMap<String, String> {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let value = match e["value"].as_str() {
                Some(value) => value.to_owned(),
                None => e["valueFrom"].to_string(),
            };
            (e["name"].as_str().unwrap().to_owned(), value)
        })
        .collect()
}

fn image_and_env(objects: &[Value], kind: &str, name: &str, of: &str) -> (String, String) {
    let container = container(objects, kind, name, of);
    let image = env(container)
        .remove("OPERON_IMAGE")
        .unwrap_or_else(|| panic!("OPERON_IMAGE is set in {kind}/{name}"));
    (container["image"].as_str().unwrap().to_owned(), image)
}

/// A directory under the test's scratch space.
fn scratch(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

/// A copy of the files under `from` in `to`, the Helm chart apart (kustomize reads none
/// of it).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            if entry.file_name() != "helm" {
                copy_tree(&entry.path(), &target);
            }
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// `kubectl kustomize` of an overlay at `dir/overlay` listing deploy/ (copied to
/// `dir/deploy`) with `body` after `resources`.
fn overlay(dir: &Path, body: &str) -> Vec<Value> {
    copy_tree(&deploy(), &dir.join("deploy"));
    let overlay = dir.join("overlay");
    std::fs::create_dir_all(&overlay).unwrap();
    std::fs::write(
        overlay.join("kustomization.yaml"),
        format!("resources:\n- ../deploy\n{body}"),
    )
    .unwrap();
    kustomize(&overlay)
}

/// The YAML block of deploy/README.md's "Your own image".
fn readme_replacement() -> String {
    let readme = std::fs::read_to_string(deploy().join("README.md")).unwrap();
    let section = readme
        .split("### Your own image")
        .nth(1)
        .expect("deploy/README.md has \"### Your own image\"");
    let block = section
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a yaml block in that section");
    assert!(block.contains("OPERON_IMAGE"), "{block}");
    block.to_owned()
}

#[test]
fn operon_image_is_the_controller_image_by_default() {
    let (image, env) = images(&KUSTOMIZATION);
    assert_eq!(image, "ghcr.io/operon-dev/operon:0.1.0");
    assert_eq!(env, image);
    assert_eq!(agent_images(&KUSTOMIZATION), (image.clone(), image));
}

#[test]
fn operon_image_follows_an_images_rewrite_in_deploy() {
    let dir = scratch("deploy-set-image");
    copy_tree(&deploy(), dir.path());
    // What `kustomize edit set image ghcr.io/operon-dev/operon=registry.example/ops/operon:2.0.0`
    // writes into deploy/kustomization.yaml.
    let kustomization = dir.path().join("kustomization.yaml");
    let text = std::fs::read_to_string(&kustomization).unwrap();
    let rewritten = text.replace(
        "- name: ghcr.io/operon-dev/operon\n  newTag: 0.1.0\n",
        "- name: ghcr.io/operon-dev/operon\n  newName: registry.example/ops/operon\n  newTag: 2.0.0\n",
    );
    assert_ne!(
        rewritten, text,
        "deploy/kustomization.yaml's images: entry moved"
    );
    std::fs::write(&kustomization, rewritten).unwrap();

    let objects = kustomize(dir.path());
    let (image, env) = images(&objects);
    assert_eq!(image, "registry.example/ops/operon:2.0.0");
    assert_eq!(env, image);
    assert_eq!(agent_images(&objects), (image.clone(), image));
}

#[test]
fn an_overlay_keeps_operon_image_only_with_the_documented_replacement() {
    let rewrite = "images:\n- name: ghcr.io/operon-dev/operon\n  newName: registry.example/operon\n  newTag: \"3.1\"\n";

    // Why the README asks for the block: the base's replacement ran before this rewrite.
    let dir = scratch("overlay-image");
    let objects = overlay(dir.path(), rewrite);
    let stale = (
        "registry.example/operon:3.1".to_owned(),
        "ghcr.io/operon-dev/operon:0.1.0".to_owned(),
    );
    assert_eq!(images(&objects), stale);
    assert_eq!(agent_images(&objects), stale);

    let dir = scratch("overlay-image-replaced");
    let block = readme_replacement()
        .replace("REGISTRY/operon", "registry.example/operon")
        .replace("TAG", "\"3.1\"");
    let objects = overlay(dir.path(), &block);
    let (image, env) = images(&objects);
    assert_eq!(image, "registry.example/operon:3.1");
    assert_eq!(env, image);
    assert_eq!(agent_images(&objects), (image.clone(), image));
}

/// The controller's grants for running Jobs (rbac.yaml), which the agent gets too.
fn job_grants() -> BTreeSet<Grant> {
    let mut expected: BTreeSet<Grant> = ["get", "list", "watch", "create", "delete"]
        .into_iter()
        .map(|verb| grant("batch", "jobs", verb, ""))
        .collect();
    expected.extend([
        grant("", "configmaps", "delete", ""),
        grant("", "pods", "list", ""),
        grant("", "pods", "watch", ""),
        grant("", "pods/log", "get", ""),
    ]);
    expected
}

/// The URL of the module API behind the webhook Service of `objects`.
fn webhook_service_url(objects: &[Value]) -> String {
    let service = objects
        .iter()
        .find(|o| kind(o) == "Service" && name(o).ends_with("-webhooks"))
        .expect("the webhook Service");
    let port = service["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "https-admission")
        .expect("the admission port");
    format!(
        "https://{}.{}.svc:{}",
        name(service),
        service["metadata"]["namespace"].as_str().unwrap(),
        port["port"]
    )
}

/// What offloading from the agent adds, checked in a rendering with it on: the Jobs
/// ClusterRole bound to the agent's account alone, with exactly the controller's grants
/// for Jobs; the module API's URL (the webhook Service), which `operon agent` reads.
fn check_agent_offloads(objects: &[Value], prefix: &str) {
    let (role, account) = (format!("{prefix}-agent-jobs"), format!("{prefix}-agent"));
    let jobs = find(objects, "ClusterRole", &role);
    assert_eq!(grants(jobs), job_grants(), "the agent's Jobs ClusterRole");
    let controller = find(objects, "ClusterRole", prefix);
    assert!(
        grants(jobs).is_subset(&grants(controller)),
        "no more than the controller has"
    );
    let binding = find(objects, "ClusterRoleBinding", &role);
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role})
    );
    let namespace = find(objects, "DaemonSet", &account)["metadata"]["namespace"].clone();
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": account, "namespace": namespace}])
    );
    let bound_to_jobs: Vec<String> = objects
        .iter()
        .filter(|o| kind(o) == "ClusterRoleBinding" || kind(o) == "RoleBinding")
        .filter(|b| b["roleRef"]["name"] == role)
        .map(|b| name(b).to_owned())
        .collect();
    assert_eq!(bound_to_jobs, [role.as_str()], "bound once, to the agent");

    let container = container(objects, "DaemonSet", &account, AGENT);
    let env = env(container);
    assert_eq!(
        env["OPERON_OFFLOAD_MODULE_URL"],
        webhook_service_url(objects)
    );
    assert_eq!(env["OPERON_IMAGE"], container["image"].as_str().unwrap());
    assert!(
        env.contains_key("OPERON_MODULE_SOURCE_CA"),
        "the CA the pods trust is the one the agent fetches modules with"
    );
    let args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    check_command_line(
        "agent",
        &crate::deploy_support::help("agent"),
        &args,
        container["env"].as_array().unwrap(),
    );
}

#[test]
fn offload_component_adds_the_module_reader_and_the_agent_s_offloading() {
    let dir = scratch("offload-component");
    let objects = overlay(dir.path(), "components:\n- ../deploy/offload\n");
    let mut expected = kinds_and_names(&KUSTOMIZATION);
    expected.insert(format!("ClusterRole/{MODULE_READER}"));
    expected.insert(format!("ClusterRole/{AGENT_JOBS}"));
    expected.insert(format!("ClusterRoleBinding/{AGENT_JOBS}"));
    assert_eq!(kinds_and_names(&objects), expected);

    let role = find(&objects, "ClusterRole", MODULE_READER);
    assert_eq!(
        grants(role),
        [grant("operon.dev", "modules", "get", "")].into(),
        "get on modules.operon.dev, nothing more"
    );
    assert!(
        role["metadata"].get("namespace").is_none(),
        "cluster-scoped"
    );
    // Nothing is bound: which accounts read modules is the user's choice.
    assert!(
        objects
            .iter()
            .filter(|o| o["kind"] == "RoleBinding" || o["kind"] == "ClusterRoleBinding")
            .all(|b| b["roleRef"]["name"] != MODULE_READER)
    );

    check_agent_offloads(&objects, "operon");
    // Only the agent's DaemonSet changed, by its URL.
    let with_component = normalized(&objects);
    for (key, object) in normalized(&KUSTOMIZATION) {
        let mut with = with_component[&key].clone();
        if key == format!("DaemonSet/{AGENT}") {
            let env = with
                .pointer_mut("/spec/template/spec/containers/0/env")
                .and_then(Value::as_array_mut)
                .unwrap();
            env.retain(|e| e["name"] != "OPERON_OFFLOAD_MODULE_URL");
        }
        assert_same(&key, &with, &object);
    }
}

#[test]
fn without_the_component_the_agent_has_an_image_but_no_url_and_no_job_grants() {
    let agent = container(&KUSTOMIZATION, "DaemonSet", AGENT, AGENT);
    assert!(!env(agent).contains_key("OPERON_OFFLOAD_MODULE_URL"));
    assert!(
        !kinds_and_names(&KUSTOMIZATION)
            .iter()
            .any(|o| o.ends_with(AGENT_JOBS))
    );
    let agent = container(&CHART, "DaemonSet", AGENT, AGENT);
    assert!(!env(agent).contains_key("OPERON_OFFLOAD_MODULE_URL"));
    assert_eq!(
        env(agent)["OPERON_IMAGE"],
        agent["image"].as_str().unwrap(),
        "the chart's agent image"
    );
    assert!(
        !kinds_and_names(&CHART)
            .iter()
            .any(|o| o.ends_with(AGENT_JOBS))
    );
}

#[test]
fn the_chart_lets_the_agent_offload_as_the_component_does() {
    let chart = helm(&["--include-crds", "--set", "offload.agent.enabled=true"]);
    check_agent_offloads(&chart, "operon");
    let dir = scratch("offload-component-vs-chart");
    let kustomized = overlay(dir.path(), "components:\n- ../deploy/offload\n");
    let agent = |objects: &[Value]| -> BTreeMap<String, Value> {
        let mut agent = normalized(
            &objects
                .iter()
                .filter(|o| is_agent(o))
                .cloned()
                .collect::<Vec<_>>(),
        );
        // kustomize's patch puts the URL first, the chart beside OPERON_IMAGE.
        for object in agent.values_mut() {
            if let Some(env) = object
                .pointer_mut("/spec/template/spec/containers/0/env")
                .and_then(Value::as_array_mut)
            {
                env.sort_by_key(|e| e["name"].as_str().unwrap().to_owned());
            }
        }
        agent
    };
    let (charted, kustomized) = (agent(&chart), agent(&kustomized));
    assert_eq!(
        charted.keys().collect::<Vec<_>>(),
        kustomized.keys().collect::<Vec<_>>()
    );
    for (key, object) in &kustomized {
        assert_same(&format!("{key} (helm vs kustomize)"), &charted[key], object);
    }

    // Another release, namespace and Service port: the URL follows them, the image too.
    let chart = helm(&[
        "--name",
        "diag",
        "--namespace",
        "ops",
        "--set",
        "offload.agent.enabled=true",
        "--set",
        "webhooks.service.admissionPort=8443",
        "--set",
        "image.tag=2.0.0",
    ]);
    check_agent_offloads(&chart, "diag-operon");
    let agent = container(&chart, "DaemonSet", "diag-operon-agent", AGENT);
    assert_eq!(
        env(agent)["OPERON_OFFLOAD_MODULE_URL"],
        "https://diag-operon-webhooks.ops.svc:8443"
    );
    assert_eq!(
        env(agent)["OPERON_IMAGE"],
        "ghcr.io/operon-dev/operon:2.0.0"
    );

    // No module API without the webhook Service: refused, saying why.
    let out = render_chart(&[
        "--set",
        "offload.agent.enabled=true",
        "--set",
        "webhooks.enabled=false",
    ]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("offload.agent.enabled needs webhooks.enabled"),
        "{err}"
    );
}

#[test]
fn the_component_names_the_cluster_role_the_chart_binds() {
    let chart = crate::deploy_support::helm(&[
        "--set",
        "offload.moduleReaders[0].namespace=team-a",
        "--set",
        "offload.moduleReaders[0].serviceAccount=default",
    ]);
    let from_chart = find(&chart, "ClusterRole", MODULE_READER);
    // The component patches the agent's DaemonSet, so it renders only over deploy/.
    let dir = scratch("offload-component-names");
    let component = overlay(dir.path(), "components:\n- ../deploy/offload\n");
    let from_component = find(&component, "ClusterRole", MODULE_READER);
    assert_eq!(grants(from_chart), grants(from_component));
}
