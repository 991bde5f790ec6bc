//! Capture and replay: `operon serve --capture-runs` (in this process, over the local
//! cluster) keeps what the wasm pod labeler received, `operon hook record` writes it as
//! a test file, and `operon test` replays it: against the same hook it passes, against
//! its shell twin too (the same patches and metrics), and against a changed shell hook
//! it fails, step by step, where the patches differ. Secret data never reaches the file.

use operon::cluster::local::LocalCluster;
use operon::hooks::capture::CaptureSettings;
use operon::hooks::load::HookLoader;
use operon::sandbox::{CallLimits, Sandbox, SandboxConfig};
use operon::serve::{Coordination, ServeOptions};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn operon(args: &[&str], home: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(args)
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .env("HOME", home)
        .output()
        .expect("operon runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

type Served = tokio::task::JoinHandle<Result<(), operon::serve::ServeError>>;

/// `operon serve` in this process over `cluster`, with the wasm pod labeler as its
/// hooks directory and its debug socket in `dir`; stopped by the sender.
fn serve(
    dir: &Path,
    cluster: Arc<LocalCluster>,
    capture: CaptureSettings,
) -> (tokio::sync::oneshot::Sender<()>, Served, PathBuf) {
    let hooks = dir.join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    std::fs::copy(operon_tests::POD_LABELER, hooks.join("pod-labeler.wasm")).unwrap();
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(operon_tests::test_cache_dir()),
        ..SandboxConfig::default()
    })
    .unwrap();
    let loader = HookLoader::new(sandbox, CallLimits::default(), false);
    let address: SocketAddr = format!("127.0.0.1:{}", crate::e2e_support::free_port())
        .parse()
        .unwrap();
    let socket = dir.join("debug.socket");
    let options = ServeOptions {
        debug_socket: Some(socket.clone()),
        grace: Duration::from_secs(5),
        capture,
        ..ServeOptions::new(hooks, address)
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        operon::serve::run(options, &loader, cluster, Coordination::default(), shutdown).await
    });
    (stop, server, socket)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capture_replays_against_the_hook_and_shows_where_a_changed_one_differs() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Arc::new(LocalCluster::new());
    cluster
        .load_file(repository().join("operations/examples/hooks/pods.yaml"))
        .unwrap();
    cluster
        .load_yaml(
            "apiVersion: v1\nkind: Secret\nmetadata: {name: token, namespace: default}\ndata: {token: c2VjcmV0LXZhbHVl}\n",
            "secret",
        )
        .unwrap();
    let capture = CaptureSettings {
        runs_per_hook: 10,
        bytes_per_hook: 1 << 20,
        redact: Vec::new(),
    };
    let (stop, server, socket) = serve(dir.path(), cluster.clone(), capture);
    // The Synchronization labels web-1; a new pod makes one more run.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let labelled = |name: &str| {
        cluster.objects().iter().any(|o| {
            o["metadata"]["name"] == name && o["metadata"]["labels"]["operon.dev/seen"] == "true"
        })
    };
    while !labelled("web-1") {
        assert!(std::time::Instant::now() < deadline, "web-1 never labelled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cluster
        .apply_watch_event(
            operon::model::WatchEvent::Added,
            serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web-2", "namespace": "default", "labels": {"app": "web"}}}),
        )
        .unwrap();
    while !labelled("web-2") {
        assert!(std::time::Instant::now() < deadline, "web-2 never labelled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let home = tempfile::tempdir().unwrap();
    let recorded = dir.path().join("recorded.test.yaml");
    let wasm = dir.path().join("hooks/pod-labeler.wasm");
    let out = tokio::task::spawn_blocking({
        let (socket, recorded, wasm, home) = (
            socket.clone(),
            recorded.clone(),
            wasm.clone(),
            home.path().to_owned(),
        );
        move || {
            operon(
                &[
                    "hook",
                    "record",
                    "pod-labeler.wasm",
                    "--debug-socket",
                    socket.to_str().unwrap(),
                    "--hook",
                    wasm.to_str().unwrap(),
                    "-f",
                    recorded.to_str().unwrap(),
                ],
                &home,
            )
        }
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let _ = stop.send(());
    server.await.unwrap().unwrap();

    let file = std::fs::read_to_string(&recorded).unwrap();
    assert!(file.starts_with("# Captured by operon serve"), "{file}");
    assert!(file.contains("replay:"), "{file}");
    // web-2's Added event was captured, in a run of its own or combined behind web-1's
    // Modified (its own label patch) when both were queued at once.
    let captured: serde_json::Value = yaml_serde::from_str(&file).unwrap();
    let added_web_2 = captured["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|step| step["replay"]["bindingContexts"].as_array().unwrap())
        .any(|context| {
            context["watchEvent"] == "Added" && context["object"]["metadata"]["name"] == "web-2"
        });
    assert!(added_web_2, "{file}");
    // No Secret is watched by this hook: the only Secret data there could be is none.
    assert!(!file.contains("c2VjcmV0LXZhbHVl"), "{file}");

    // Against the hook that was captured: every step passes.
    let out = operon(&["test", recorded.to_str().unwrap()], home.path());
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(!stdout.contains("FAIL"), "{stdout}");

    // Against its shell twin: the same patches and metrics.
    let twin = repository().join("operations/fixtures/shell-hooks/pod-labeler.sh");
    let replayed = |hook: &Path, name: &str| {
        let file = dir.path().join(name);
        std::fs::write(
            &file,
            std::fs::read_to_string(&recorded)
                .unwrap()
                .replace(wasm.to_str().unwrap(), hook.to_str().unwrap()),
        )
        .unwrap();
        operon(&["test", file.to_str().unwrap()], home.path())
    };
    let out = replayed(&twin, "twin.test.yaml");
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );

    // A changed hook: the label's value is now "yes".
    let changed = dir.path().join("changed.sh");
    std::fs::write(
        &changed,
        std::fs::read_to_string(&twin).unwrap().replace(
            r#""operon.dev/seen": "true""#,
            r#""operon.dev/seen": "yes""#,
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&changed, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = replayed(&changed, "changed.test.yaml");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("FAIL "), "{stdout}");
    assert!(
        stdout.contains(
            r#"patches[0].mergePatch.metadata.labels["operon.dev/seen"]: expected "true", got "yes""#
        ),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recording_a_hook_that_captured_nothing_says_how_to_capture() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Arc::new(LocalCluster::new());
    let (stop, server, socket) = serve(dir.path(), cluster, CaptureSettings::default());
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !socket.exists() {
        assert!(std::time::Instant::now() < deadline, "no debug socket");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let home = tempfile::tempdir().unwrap();
    let args = |name: &'static str| {
        let socket = socket.clone();
        let home = home.path().to_owned();
        move || {
            operon(
                &[
                    "hook",
                    "record",
                    name,
                    "--debug-socket",
                    socket.to_str().unwrap(),
                ],
                &home,
            )
        }
    };
    let mut out = tokio::task::spawn_blocking(args("pod-labeler.wasm"))
        .await
        .unwrap();
    // The engine may still be loading: its answer then says so.
    while text(&out.stderr).contains("loading") && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        out = tokio::task::spawn_blocking(args("pod-labeler.wasm"))
            .await
            .unwrap();
    }
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(
            "no run of hook pod-labeler.wasm is captured: start operon serve with --capture-runs N"
        ),
        "{}",
        text(&out.stderr)
    );
    let out = tokio::task::spawn_blocking(args("nope")).await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no hook named \"nope\""),
        "{}",
        text(&out.stderr)
    );
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}
