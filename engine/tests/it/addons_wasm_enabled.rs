//! `enabled` programs that are wasm components (the `module-enabled` world of
//! `operon:engine@0.3.0`, `operations/fixtures/enabled-program`) in addon modules:
//! discovery runs them in module order with the values addon-operator's `enabled`
//! script reads (`global.enabledModules` lists the modules enabled before), and a
//! program's `false` disables its module with the reason it gave, beside a shell
//! `enabled` script doing the same through `$MODULE_ENABLED_RESULT`.

use crate::addons_support::sandbox;
use operon::addons::apply::ObjectWriter;
use operon::addons::config::ConfigMapRef;
use operon::addons::operator::{Operator, QueueEvent, Settings};
use operon::addons::render::Renderer;
use operon::cluster::local::LocalCluster;
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

/// The shell twin of the fixture's `requires` rule.
const SHELL_ENABLED: &str = r#"#!/bin/bash
needed=$(jq -r '.shellMissing.requires' "$VALUES_PATH")
if jq -e --arg m "$needed" '.global.enabledModules | index($m)' "$VALUES_PATH" >/dev/null; then
  echo true > "$MODULE_ENABLED_RESULT"
else
  echo false > "$MODULE_ENABLED_RESULT"
  echo "needs $needed, which is not enabled" > "$MODULE_ENABLED_REASON"
fi
"#;

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "modules/values.yaml",
        b"baseEnabled: true\nneedsBaseEnabled: true\nneedsMissingEnabled: true\n\
          shellMissingEnabled: true\nunflaggedEnabled: false\n\
          needsBase: {requires: base}\nneedsMissing: {requires: nothing}\n\
          shellMissing: {requires: nothing}\nunflagged: {fail: true}\n",
        false,
    );
    let wasm = std::fs::read(operon_tests::ENABLED_PROGRAM).unwrap();
    // A flag that disables the module keeps its program from running at all (this
    // one would fail).
    for dir in ["002-needs-base", "003-needs-missing", "005-unflagged"] {
        write(d, &format!("modules/{dir}/enabled"), &wasm, true);
    }
    write(
        d,
        "modules/004-shell-missing/enabled",
        SHELL_ENABLED.as_bytes(),
        true,
    );
    for dir in [
        "001-base",
        "002-needs-base",
        "003-needs-missing",
        "004-shell-missing",
        "005-unflagged",
    ] {
        let name = &dir[4..];
        let cm = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  module: {name}\n"
        );
        write(
            d,
            &format!("modules/{dir}/manifests/cm.yaml"),
            cm.as_bytes(),
            false,
        );
    }
    dir
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
async fn wasm_enabled_programs_decide_in_module_order_as_scripts_do() {
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
    assert_eq!(op.enabled_modules(), ["base", "needs-base"]);

    let results: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            QueueEvent::Finished {
                result: Ok(text), ..
            } => Some(text.clone()),
            _ => None,
        })
        .collect();
    let all = results.join("\n");
    for line in [
        "needs-base: enabled",
        "needs-missing: disabled by its enabled script (needs nothing, which is not enabled)",
        "shell-missing: disabled by its enabled script (needs nothing, which is not enabled)",
    ] {
        assert!(all.contains(line), "{line:?} in {all}");
    }
    assert!(!all.contains("unflagged: enabled"), "{all}");
}
