//! What `deploy/` gives offloaded wasm steps (`wasm.runOn: Job`), rendered by
//! `kubectl kustomize`: the component `deploy/offload` with the ClusterRole their pods
//! need, and `OPERON_IMAGE` (the image those pods run) following the controller's image
//! through kustomize `images:` rewrites, in `deploy/` itself and in an overlay that
//! repeats the replacement `deploy/README.md` gives.

mod deploy_support;

use deploy_support::{KUSTOMIZATION, deploy, find, grant, grants, kinds_and_names, kustomize};
use serde_json::Value;
use std::path::Path;

const MODULE_READER: &str = "operon-module-reader";

/// The controller container's image and its `OPERON_IMAGE`.
fn images(objects: &[Value]) -> (String, String) {
    let deployment = find(objects, "Deployment", "operon");
    let container = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "operon")
        .expect("the operon container");
    let env = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "OPERON_IMAGE")
        .expect("OPERON_IMAGE is set");
    (
        container["image"].as_str().unwrap().to_owned(),
        env["value"].as_str().expect("a literal value").to_owned(),
    )
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

    let (image, env) = images(&kustomize(dir.path()));
    assert_eq!(image, "registry.example/ops/operon:2.0.0");
    assert_eq!(env, image);
}

#[test]
fn an_overlay_keeps_operon_image_only_with_the_documented_replacement() {
    let rewrite = "images:\n- name: ghcr.io/operon-dev/operon\n  newName: registry.example/operon\n  newTag: \"3.1\"\n";

    // Why the README asks for the block: the base's replacement ran before this rewrite.
    let dir = scratch("overlay-image");
    let (image, env) = images(&overlay(dir.path(), rewrite));
    assert_eq!(image, "registry.example/operon:3.1");
    assert_eq!(env, "ghcr.io/operon-dev/operon:0.1.0");

    let dir = scratch("overlay-image-replaced");
    let block = readme_replacement()
        .replace("REGISTRY/operon", "registry.example/operon")
        .replace("TAG", "\"3.1\"");
    let (image, env) = images(&overlay(dir.path(), &block));
    assert_eq!(image, "registry.example/operon:3.1");
    assert_eq!(env, image);
}

#[test]
fn offload_component_adds_only_the_module_reader_cluster_role() {
    let dir = scratch("offload-component");
    let objects = overlay(dir.path(), "components:\n- ../deploy/offload\n");
    let mut expected = kinds_and_names(&KUSTOMIZATION);
    expected.insert(format!("ClusterRole/{MODULE_READER}"));
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
}

#[test]
fn the_component_names_the_cluster_role_the_chart_binds() {
    let chart = deploy_support::helm(&[
        "--set",
        "offload.moduleReaders[0].namespace=team-a",
        "--set",
        "offload.moduleReaders[0].serviceAccount=default",
    ]);
    let from_chart = find(&chart, "ClusterRole", MODULE_READER);
    let component = kustomize(&deploy().join("offload"));
    let from_component = find(&component, "ClusterRole", MODULE_READER);
    assert_eq!(grants(from_chart), grants(from_component));
}
