//! The hooks directory reloaded under `operon serve`, as a ConfigMap volume changes:
//! the kubelet's `..data` swap, a hook added, a tree that does not load, a hook removed.

use crate::serve::{Coordination, ServeOptions, debug};
use operon_cluster::local::LocalCluster;
use operon_hooks::load::HookLoader;
use operon_sandbox::{CallLimits, Sandbox, SandboxConfig};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Makes `files` the contents of the ConfigMap volume at `root` as the kubelet does:
/// a fresh hidden directory, one visible symlink per key, `..data` swapped last (and
/// the symlinks of keys that went removed).
fn config_map(root: &Path, version: u32, files: &[(&str, &[u8])]) {
    use std::os::unix::fs::symlink;
    let data = format!("..2026_11_23_10_00_{version:02}.1");
    std::fs::create_dir_all(root.join(&data)).unwrap();
    for (name, bytes) in files {
        std::fs::write(root.join(&data).join(name), bytes).unwrap();
    }
    let swap = root.join("..data_tmp");
    symlink(&data, &swap).unwrap();
    std::fs::rename(&swap, root.join("..data")).unwrap();
    for entry in std::fs::read_dir(root).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !name.starts_with("..") && !files.iter().any(|(f, _)| *f == name) {
            std::fs::remove_file(root.join(&name)).unwrap();
        }
    }
    for (name, _) in files {
        if std::fs::symlink_metadata(root.join(name)).is_err() {
            symlink(format!("..data/{name}"), root.join(name)).unwrap();
        }
    }
}

async fn until<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..400 {
        if let Some(found) = check().await {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn hook_names(socket: &Path) -> Option<Vec<String>> {
    let hooks = debug::request(socket, "/hook/list").await.ok()?;
    let names = hooks.as_array()?.iter();
    Some(
        names
            .filter_map(|h| h["name"].as_str().map(str::to_owned))
            .collect(),
    )
}

fn labelled(cluster: &LocalCluster) -> usize {
    (cluster.objects().into_iter())
        .filter(|o| o.pointer("/metadata/labels/operon.dev~1seen").is_some())
        .count()
}

/// What `/metrics` serves; nothing while the server does not listen yet (it is spawned
/// just before the first `until` asks).
async fn metrics(address: SocketAddr) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let Ok(mut stream) = tokio::net::TcpStream::connect(address).await else {
        return String::new();
    };
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: operon\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
}

/// `operon serve` of `hooks` over `cluster`, reloading every 100 ms, with its debug
/// socket in `dir`: its metrics address, the socket, what stops it and its task.
#[allow(clippy::type_complexity)]
fn serve(
    dir: &Path,
    hooks: &Path,
    cluster: &Arc<LocalCluster>,
    shadow_hooks: Vec<(String, String)>,
) -> (
    SocketAddr,
    std::path::PathBuf,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), crate::serve::ServeError>>,
) {
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(operon_tests::test_cache_dir()),
        ..SandboxConfig::default()
    })
    .unwrap();
    let loader = HookLoader::new(sandbox, CallLimits::default(), false);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let socket = dir.join("debug.socket");
    let options = ServeOptions {
        debug_socket: Some(socket.clone()),
        grace: Duration::from_secs(5),
        reload_interval: Some(Duration::from_millis(100)),
        shadow_hooks,
        ..ServeOptions::new(hooks.to_path_buf(), address)
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = cluster.clone();
    let server = tokio::spawn(async move {
        crate::serve::run(options, &loader, served, Coordination::default(), async {
            let _ = stopped.await;
        })
        .await
    });
    (address, socket, stop, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hooks_config_map_update_is_served_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    // The ConfigMap starts empty: serve starts with no hooks, as shell-operator does.
    config_map(&hooks, 1, &[]);
    let cluster = Arc::new(LocalCluster::new());
    cluster
        .load_file(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../operations/examples/hooks/pods.yaml"
        ))
        .unwrap();
    let (address, socket, stop, server) = serve(dir.path(), &hooks, &cluster, Vec::new());
    until("the debug socket", async || hook_names(&socket).await).await;
    assert_eq!(hook_names(&socket).await.unwrap(), Vec::<String>::new());
    // One of the two pods carries the label already.
    assert_eq!(labelled(&cluster), 1);

    // The ConfigMap gets a hook: it loads, and its Synchronization run labels the pods.
    let labeler = std::fs::read(operon_tests::POD_LABELER).unwrap();
    config_map(&hooks, 2, &[("pod-labeler.wasm", &labeler)]);
    until("the new hook's Synchronization run", async || {
        (labelled(&cluster) == 2).then_some(())
    })
    .await;
    assert_eq!(hook_names(&socket).await.unwrap(), ["pod-labeler.wasm"]);
    let reloads = debug::request(&socket, "/reload/history").await.unwrap();
    let last = &reloads[reloads.as_array().unwrap().len() - 1];
    assert_eq!(last["source"], "hooks_directory");
    assert_eq!(last["outcome"], "applied");
    assert_eq!(last["added"], serde_json::json!(["pod-labeler.wasm"]));
    assert_eq!(reloads[0]["outcome"], "loaded", "{reloads}");

    // A file that is no hook (half written, say): refused with its name and the reason;
    // the hook in use keeps running.
    config_map(
        &hooks,
        3,
        &[
            ("pod-labeler.wasm", &labeler),
            ("broken.wasm", b"\0asm\x01"),
        ],
    );
    let refused = until("the refused reload", async || {
        let reloads = debug::request(&socket, "/reload/history").await.ok()?;
        let refused = reloads
            .as_array()?
            .iter()
            .find(|r| r["outcome"] == "refused");
        refused.cloned()
    })
    .await;
    let error = refused["error"].as_str().unwrap();
    assert!(error.contains("broken.wasm"), "{error}");
    assert_eq!(hook_names(&socket).await.unwrap(), ["pod-labeler.wasm"]);
    let text = metrics(address).await;
    assert!(
        text.contains(r#"operon_reloads_total{outcome="refused",source="hooks_directory"} 1"#),
        "{text}"
    );
    assert!(text.contains(r#"hook="pod-labeler.wasm""#), "{text}");

    // The hook goes: its engine and its series go with it.
    config_map(&hooks, 4, &[]);
    until("the hook removed", async || {
        hook_names(&socket).await.filter(|n| n.is_empty())
    })
    .await;
    let text = metrics(address).await;
    assert!(
        text.contains(r#"operon_reloads_total{outcome="applied",source="hooks_directory"} 2"#),
        "{text}"
    );
    assert!(!text.contains(r#"hook="pod-labeler.wasm""#), "{text}");
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

async fn history(socket: &Path, hook: &str) -> Vec<serde_json::Value> {
    let path = format!("/hook/{hook}/history");
    let runs = debug::request(socket, &path).await.unwrap();
    runs.as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_edited_is_attached_again_and_a_reload_keeps_the_runs_history() {
    use operon_cluster::Cluster as _;
    use operon_data::model::{CreateSpec, PatchOperation};
    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    let labeler = std::fs::read(operon_tests::POD_LABELER).unwrap();
    let annotator = std::fs::read(operon_tests::ANNOTATOR).unwrap();
    // The shadow starts as the annotator, which never does what the labeller does.
    config_map(
        &hooks,
        1,
        &[("pod-labeler.wasm", &labeler), ("shadow.wasm", &annotator)],
    );
    let cluster = Arc::new(LocalCluster::new());
    cluster
        .load_yaml(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: demo}\n",
            "pods",
        )
        .unwrap();
    let shadows = vec![("shadow.wasm".to_owned(), "pod-labeler.wasm".to_owned())];
    let (address, socket, stop, server) = serve(dir.path(), &hooks, &cluster, shadows);
    let series = |result: &str| {
        format!(
            "operon_shadow_runs_total{{live=\"pod-labeler.wasm\",result=\"{result}\",shadow=\"shadow.wasm\"}}"
        )
    };
    until("the first shadow's comparison", async || {
        metrics(address)
            .await
            .contains(&series("diverged"))
            .then_some(())
    })
    .await;
    let before = history(&socket, "pod-labeler.wasm").await;
    assert!(!before.is_empty());

    // The shadow becomes the labeller's twin: attached again without a new engine (no
    // second Synchronization run), and its next comparison agrees.
    config_map(
        &hooks,
        2,
        &[("pod-labeler.wasm", &labeler), ("shadow.wasm", &labeler)],
    );
    let reloaded = until("the shadow reloaded", async || {
        let reloads = debug::request(&socket, "/reload/history").await.ok()?;
        let last = reloads.as_array()?.last()?.clone();
        (last["outcome"] == "applied").then_some(last)
    })
    .await;
    assert_eq!(reloaded["changed"], serde_json::json!(["shadow.wasm"]));
    assert_eq!(hook_names(&socket).await.unwrap(), ["pod-labeler.wasm"]);
    let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"api","namespace":"demo"}}"#;
    cluster
        .apply(&PatchOperation::Create(CreateSpec {
            object: pod.to_owned(),
            subresource: None,
        }))
        .await
        .unwrap();
    until("the edited shadow's comparison", async || {
        metrics(address)
            .await
            .contains(&series("same"))
            .then_some(())
    })
    .await;
    let runs = history(&socket, "pod-labeler.wasm").await;
    let synchronizations = (runs.iter())
        .filter(|r| r["binding_type"] == "Synchronization")
        .count();
    assert_eq!(synchronizations, 1, "the engine was replaced: {runs:?}");

    // A hook added replaces the engine: the labeller's runs so far stay in its history.
    config_map(
        &hooks,
        3,
        &[
            ("pod-labeler.wasm", &labeler),
            ("shadow.wasm", &labeler),
            ("annotator.wasm", &annotator),
        ],
    );
    until("the added hook", async || {
        (hook_names(&socket).await?.len() == 2).then_some(())
    })
    .await;
    let after = until("the new engine's Synchronization run", async || {
        let after = history(&socket, "pod-labeler.wasm").await;
        (after.len() > runs.len()).then_some(after)
    })
    .await;
    assert_eq!(
        after[..runs.len()],
        runs[..],
        "the runs before the reload went"
    );
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}
