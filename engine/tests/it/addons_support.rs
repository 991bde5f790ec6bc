//! What the addon-module suites share: the script sandbox, whose launcher half runs in
//! the test binary itself (`crate::sandbox_launcher_entry`), an operator over the local cluster with the
//! queue events it reports, and writing a module's files.

#![allow(dead_code)] // Each suite uses its own part.

use operon::addons::apply::ObjectWriter;
use operon::addons::config::ConfigMapRef;
use operon::addons::operator::{Operator, QueueEvent, Settings};
use operon::addons::render::Renderer;
use operon::cluster::local::LocalCluster;
use operon::script::{ScriptSandbox, ScriptSandboxConfig};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A script sandbox whose launcher is this test binary (`crate::launcher`).
pub fn sandbox() -> ScriptSandbox {
    let launcher = crate::launcher();
    ScriptSandbox::new(ScriptSandboxConfig::new(launcher)).unwrap()
}

/// The queue events an operator reported.
pub type Events = Arc<Mutex<Vec<QueueEvent>>>;

/// The operator settings of a root holding `modules/` (and `global-hooks/`).
pub fn settings(root: &Path) -> Settings {
    let global = root.join("global-hooks");
    Settings {
        modules_dir: root.join("modules"),
        global_hooks_dir: global.is_dir().then_some(global),
        sources: None,
        config_map: ConfigMapRef {
            namespace: "operon-demo".into(),
            name: "addon-operator".into(),
        },
        renderer: Renderer {
            helm: "helm".into(),
            namespace: "operon-demo".into(),
            timeout: Duration::from_secs(30),
        },
        hook_timeout: Duration::from_secs(20),
        retry_first: Duration::from_millis(200),
        retry_max: Duration::from_secs(1),
    }
}
/// An operator of `root` over `cluster`, and the queue events it reports.
pub async fn operator(cluster: &Arc<LocalCluster>, root: &Path) -> (Operator, Events) {
    let events: Events = Arc::default();
    let sink = events.clone();
    let writer = ObjectWriter::new(cluster.clone(), None, "operon-demo");
    let operator = Operator::new(settings(root), sandbox(), writer, move |e| {
        sink.lock().unwrap().push(e.clone());
    })
    .await
    .unwrap();
    (operator, events)
}
/// The tasks finished so far, with their results.
pub fn finished(events: &Events) -> Vec<(String, Result<String, String>)> {
    events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            QueueEvent::Finished { task, result, .. } => Some((task.to_string(), result.clone())),
            _ => None,
        })
        .collect()
}
/// Writes `text` to `path` under `root` (made executable when asked).
pub fn write(root: &Path, path: &str, text: &str, executable: bool) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    if executable {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}
/// Resolves once `done` holds for the tasks finished so far (checked every 20 ms), or
/// after `limit` at the latest, for the suite's assertions to say what is missing. A
/// suite that waited out a fixed time per test spent most of it idle.
pub async fn finishing(
    events: &Events,
    limit: Duration,
    done: impl Fn(&[(String, Result<String, String>)]) -> bool,
) {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline && !done(&finished(events)) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
/// Whether task `name` finished among `done`.
pub fn ran(done: &[(String, Result<String, String>)], name: &str) -> bool {
    done.iter().any(|(task, _)| task == name)
}
