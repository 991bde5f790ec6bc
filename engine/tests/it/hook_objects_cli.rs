//! `operon hook test` with module names and Hook objects: the module found in
//! `--modules DIR` as `operon run --modules` finds an Operation's, a Hook's overrides
//! applied and its patches held to its permissions, with no cluster.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

const PODS: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: web-1, namespace: shop}\n";

fn operon(args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(args)
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .env("HOME", home.path())
        .env_remove("OPERON_MODULES_DIR")
        .output()
        .expect("operon runs")
}

/// A modules directory holding the pod labeler as `pod-labeler.wasm`, and the pods.
fn setup(dir: &Path) -> (String, String) {
    let modules = dir.join("modules");
    std::fs::create_dir(&modules).unwrap();
    std::fs::copy(operon_tests::POD_LABELER, modules.join("pod-labeler.wasm")).unwrap();
    let pods = dir.join("pods.yaml");
    std::fs::write(&pods, PODS).unwrap();
    (modules.display().to_string(), pods.display().to_string())
}

fn hook_yaml(dir: &Path, patch: &str) -> String {
    let path = dir.join("hook.yaml");
    std::fs::write(
        &path,
        format!(
            "apiVersion: operon.dev/v1alpha1\nkind: Hook\n\
             metadata: {{name: labeler, namespace: shop}}\n\
             spec:\n  module: pod-labeler\n\
             \x20 overrides: {{kubernetes: [{{name: pods, namespaces: [shop]}}]}}\n\
             \x20 permissions:\n    watch: [{{apiVersion: v1, kind: Pod}}]\n    patch: {patch}\n"
        ),
    )
    .unwrap();
    path.display().to_string()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn a_module_name_is_found_in_the_modules_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (modules, pods) = setup(dir.path());
    let out = operon(&[
        "hook",
        "test",
        "pod-labeler",
        "--modules",
        &modules,
        "--objects",
        &pods,
        "-o",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out)["runs"][0]["patches"][0]["name"], "web-1");
    // A name with no module says where it looked.
    let out = operon(&["hook", "test", "missing", "--modules", &modules]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("missing.wasm"), "{stderr}");
}

#[test]
fn a_hook_object_runs_within_its_permissions() {
    let dir = tempfile::tempdir().unwrap();
    let (modules, pods) = setup(dir.path());
    let allowed = hook_yaml(
        dir.path(),
        "[{apiVersion: v1, kind: Pod, operations: [MergePatch]}]",
    );
    let out = operon(&[
        "hook",
        "test",
        &allowed,
        "--modules",
        &modules,
        "--objects",
        &pods,
        "-o",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d = json(&out);
    assert_eq!(d["runs"][0]["status"], "Succeeded");
    assert_eq!(
        d["objects"][0]["metadata"]["labels"]["operon.dev/seen"],
        "true"
    );
    // The override is what the hook runs with.
    assert_eq!(
        d["configuration"]["kubernetes"][0]["namespace"]["nameSelector"]["matchNames"][0],
        "shop"
    );

    let refused = hook_yaml(dir.path(), "[]");
    let out = operon(&[
        "hook",
        "test",
        &refused,
        "--modules",
        &modules,
        "--objects",
        &pods,
        "-o",
        "json",
    ]);
    assert!(!out.status.success(), "a refused patch fails the run");
    let d = json(&out);
    assert_eq!(d["runs"][0]["status"], "Failed");
    assert_eq!(
        d["runs"][0]["error"],
        "patch operation 1 of 1: not permitted: Hook shop/labeler may not MergePatch Pod shop/web-1: spec.permissions.patch does not grant MergePatch on v1/Pod in namespace shop"
    );
    assert!(d["objects"][0]["metadata"]["labels"].is_null());
}

#[test]
fn a_hook_object_outside_its_watch_permissions_does_not_load() {
    let dir = tempfile::tempdir().unwrap();
    let (modules, pods) = setup(dir.path());
    let path = dir.path().join("wide.yaml");
    std::fs::write(
        &path,
        "apiVersion: operon.dev/v1alpha1\nkind: Hook\nmetadata: {name: wide}\n\
         spec: {module: pod-labeler, permissions: {watch: [{apiVersion: v1, kind: Pod}]}}\n",
    )
    .unwrap();
    let out = operon(&[
        "hook",
        "test",
        path.to_str().unwrap(),
        "--modules",
        &modules,
        "--objects",
        &pods,
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Hook default/wide does not load (BindingNotPermitted): binding \"pods\" watches v1/Pod in every namespace"),
        "{stderr}"
    );
}
