//! Wasm hooks in addon modules: a module whose `beforeHelm` hook is a component of
//! `operon:engine@0.3.0` (`operations/fixtures/values-hook`) reads its values and
//! patches memory and config values through the WIT `values` interface, beside a module
//! whose shell hook does the same through addon-operator's files; both reach the same
//! values, against the local cluster.

use crate::addons_support::sandbox;
use operon::addons::apply::ObjectWriter;
use operon::addons::config::ConfigMapRef;
use operon::addons::operator::{Operator, QueueEvent, Settings};
use operon::addons::render::Renderer;
use operon::cluster::local::LocalCluster;
use operon::cluster::{Cluster, Resource};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn write(root: &Path, path: &str, text: &[u8], executable: bool) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    if executable {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// The shell twin of the values-hook fixture: the same patches through the files.
const SHELL_HOOK: &str = r#"#!/bin/bash
if [ "$1" = --config ]; then echo '{"configVersion":"v1","beforeHelm":10}'; exit 0; fi
jq '.shellMod as $m | [
  (if $m.internal == null then {"op":"add","path":"/shellMod/internal","value":{}} else empty end),
  {"op":"add","path":"/shellMod/internal/wasmReplicas","value":((($m.replicas // 1)) * 2)},
  {"op":"add","path":"/shellMod/internal/wasmRuns","value":(($m.internal.wasmRuns // 0) + 1)}
]' "$VALUES_PATH" > "$VALUES_JSON_PATCH_PATH"
if [ "$(jq -r '.shellMod.patchConfig' "$VALUES_PATH")" = true ]; then
  jq 'if .shellMod == null then [{"op":"add","path":"/shellMod","value":{}}] else [] end
      + [{"op":"add","path":"/shellMod/wasmSeen","value":true}]' "$CONFIG_VALUES_PATH" \
    > "$CONFIG_VALUES_JSON_PATCH_PATH"
fi
"#;

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "modules/values.yaml",
        b"wasmModEnabled: true\nshellModEnabled: true\n\
          wasmMod: {replicas: 3, patchConfig: true}\nshellMod: {replicas: 3, patchConfig: true}\n",
        false,
    );
    let wasm = std::fs::read(operon_tests::VALUES_HOOK).unwrap();
    write(d, "modules/001-wasm-mod/hooks/values.wasm", &wasm, false);
    write(
        d,
        "modules/002-shell-mod/hooks/values.sh",
        SHELL_HOOK.as_bytes(),
        true,
    );
    for name in ["wasm-mod", "shell-mod"] {
        let cm = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  module: {name}\n"
        );
        write(
            d,
            &format!("modules/{}/manifests/cm.yaml", module_dir(name)),
            cm.as_bytes(),
            false,
        );
    }
    dir
}

fn module_dir(name: &str) -> &'static str {
    match name {
        "wasm-mod" => "001-wasm-mod",
        _ => "002-shell-mod",
    }
}

fn settings(modules: &Path) -> Settings {
    Settings {
        modules_dir: modules.to_owned(),
        global_hooks_dir: None,
        sources: None,
        config_map: ConfigMapRef {
            namespace: "operon-demo".into(),
            name: "addon-operator".into(),
        },
        renderer: Renderer {
            helm: Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/addons/helm"),
            namespace: "operon-demo".into(),
            timeout: Duration::from_secs(120),
        },
        hook_timeout: Duration::from_secs(30),
        retry_first: Duration::from_millis(200),
        retry_max: Duration::from_secs(1),
    }
}

#[tokio::test]
async fn a_wasm_module_hook_patches_values_as_its_shell_twin_does() {
    let tree = tree();
    let cluster = Arc::new(LocalCluster::new());
    let events: Arc<Mutex<Vec<QueueEvent>>> = Arc::default();
    let sink = events.clone();
    let writer = ObjectWriter::new(cluster.clone(), None, "operon-demo");
    let mut op = Operator::new(
        settings(&tree.path().join("modules")),
        sandbox(),
        writer,
        move |e| sink.lock().unwrap().push(e.clone()),
    )
    .await
    .unwrap();
    let failed = op.drain().await;
    assert!(failed.is_empty(), "{failed:?}");

    let wasm = op.module_values("wasm-mod").unwrap().values;
    let shell = op.module_values("shell-mod").unwrap().values;
    assert_eq!(wasm["internal"]["wasmReplicas"], 6, "{wasm}");
    assert!(
        wasm["internal"]["wasmRuns"].as_u64().unwrap() >= 1,
        "{wasm}"
    );
    assert_eq!(wasm["internal"], shell["internal"], "the twins agree");
    // The config values patch reached the ConfigMap, for both.
    let resource: Resource = cluster.resolve(None, "ConfigMap").unwrap();
    let cm: Value = Cluster::get(&*cluster, &resource, Some("operon-demo"), "addon-operator")
        .await
        .unwrap()
        .expect("the ConfigMap, created for the config values");
    assert_eq!(cm["data"]["wasmMod"], "wasmSeen: true\n", "{cm}");
    assert_eq!(cm["data"]["shellMod"], "wasmSeen: true\n", "{cm}");
    // And each module's objects were applied.
    for name in ["wasm-mod", "shell-mod"] {
        let applied = Cluster::get(&*cluster, &resource, Some("operon-demo"), name)
            .await
            .unwrap();
        assert!(applied.is_some(), "{name}");
    }
}

#[tokio::test]
async fn a_wasm_global_hook_with_a_module_binding_is_refused_by_name() {
    // The fixture declares beforeHelm, which a global hook may not have.
    let tree = tree();
    let d = tree.path();
    let wasm = std::fs::read(operon_tests::VALUES_HOOK).unwrap();
    write(d, "global-hooks/values.wasm", &wasm, false);
    let mut settings = settings(&d.join("modules"));
    settings.global_hooks_dir = Some(d.join("global-hooks"));
    let writer = ObjectWriter::new(Arc::new(LocalCluster::new()), None, "operon-demo");
    let err = Operator::new(settings, sandbox(), writer, |_| {})
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("global/values.wasm")
            && err.contains("beforeHelm is not a binding of a global hook"),
        "{err}"
    );
}
