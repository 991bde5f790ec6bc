//! `operon serve` end to end over the local cluster: hooks load and run, the endpoints
//! answer, the debug socket describes the engine, and a shutdown is clean.

use super::*;
use lease::LeaderElector;
use operon_cluster::local::LocalCluster;
use operon_hooks::load::HookLoader;
use operon_sandbox::{CallLimits, Sandbox, SandboxConfig};
use std::path::PathBuf;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A plain HTTP/1.0 GET: status code and body.
async fn get(address: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: operon\r\n\r\n").as_bytes())
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// `promtool check metrics` (Prometheus' own linter: naming, units, help texts) finds
/// nothing to say about `text`.
pub(crate) fn promtool_accepts(text: &str) {
    use std::io::Write as _;
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool runs (Debian's prometheus package; .ci/setup installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_runs_hooks_and_answers_metrics_health_readiness_and_debug() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    std::fs::copy(operon_tests::POD_LABELER, hooks.join("pod-labeler.wasm")).unwrap();
    let cluster = Arc::new(LocalCluster::new());
    let pods = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../operations/examples/hooks/pods.yaml"
    );
    cluster.load_file(pods).unwrap();
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(operon_tests::test_cache_dir()),
        ..SandboxConfig::default()
    })
    .unwrap();
    let loader = HookLoader::new(sandbox, CallLimits::default(), false);
    let address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let socket = dir.path().join("run/debug.socket");
    let options = ServeOptions {
        hooks_dir: hooks,
        listen: address,
        debug_socket: Some(socket.clone()),
        grace: Duration::from_secs(5),
        ..ServeOptions::new(PathBuf::new(), address)
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served_cluster = cluster.clone();
    let server = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        run(
            options,
            &loader,
            served_cluster,
            Coordination::default(),
            shutdown,
        )
        .await
    });

    // Ready once the pods binding synchronized (its run labels web-1).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok((200, _)) = get(address, "/readyz").await {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(get(address, "/healthz").await.unwrap().0, 200);
    // A script run's protections reach /metrics.
    operon_script::Protections {
        user_namespace: operon_script::ProtectionState::Applied,
        ..Default::default()
    }
    .record("a script hook");
    let (status, metrics) = get(address, "/metrics").await.unwrap();
    assert_eq!(status, 200);
    assert!(metrics.contains("operon_hook_run_seconds"), "{metrics}");
    assert!(
        metrics.contains("operon_script_sandbox_protection{protection=\"user_namespace\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("pods_labelled_total"), "{metrics}");
    // No leader election: this replica runs the hooks.
    assert!(metrics.contains("operon_leader{lease=\"\"} 1"), "{metrics}");
    promtool_accepts(&metrics);
    let (_, hook_metrics) = get(address, "/metrics/hooks").await.unwrap();
    assert!(hook_metrics.contains("pods_labelled_total"));
    assert!(!hook_metrics.contains("operon_hook_run_seconds"));
    let labelled = cluster
        .objects()
        .into_iter()
        .filter(|o| o.pointer("/metadata/labels/operon.dev~1seen").is_some())
        .count();
    assert_eq!(labelled, 2, "both pods carry the label");

    let hooks = debug::request(&socket, "/hook/list").await.unwrap();
    assert_eq!(hooks[0]["name"], "pod-labeler.wasm");
    let pods_binding = hooks[0]["bindings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "pods")
        .unwrap()
        .clone();
    assert_eq!(pods_binding["objects"], 2);
    assert_eq!(pods_binding["synchronized"], true);
    let snapshot = debug::request(&socket, "/hook/pod-labeler.wasm/snapshot")
        .await
        .unwrap();
    assert_eq!(snapshot[0]["objects"].as_array().unwrap().len(), 2);
    let queues = debug::request(&socket, "/queue/list").await.unwrap();
    assert_eq!(queues[0]["name"], "main");
    let missing = debug::request(&socket, "/hook/nope/snapshot").await;
    assert!(
        matches!(&missing, Err(debug::DebugError::Answer(m)) if m.contains("no hook named")),
        "{missing:?}"
    );
    // The Synchronization run that labelled the pods is in the hook's history.
    let runs = debug::request(&socket, "/hook/pod-labeler.wasm/history")
        .await
        .unwrap();
    let sync = runs
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["binding_type"] == "Synchronization")
        .unwrap_or_else(|| panic!("{runs}"));
    assert_eq!(sync["outcome"], "Succeeded");
    assert_eq!(sync["trigger"], "Synchronization (2 objects)");
    assert_eq!(
        sync["patch_descriptions"][0],
        "MergePatch Pod default/web-1"
    );
    assert_eq!(
        debug::request(&socket, "/hook/history").await.unwrap(),
        runs
    );
    // A hook's own log level, set and shown.
    let put = hyper::Method::PUT;
    let set = debug::request_with(
        &socket,
        put.clone(),
        "/hook/pod-labeler.wasm/log-level/debug",
    )
    .await
    .unwrap();
    assert_eq!(set["log_level"], "debug");
    let hooks = debug::request(&socket, "/hook/list").await.unwrap();
    assert_eq!(hooks[0]["log_level"], "debug");
    let wrong = debug::request_with(
        &socket,
        put.clone(),
        "/hook/pod-labeler.wasm/log-level/loud",
    )
    .await;
    assert!(
        matches!(&wrong, Err(debug::DebugError::Answer(m)) if m.contains("unknown log level")),
        "{wrong:?}"
    );
    let missing = debug::request_with(&socket, put, "/hook/nope/log-level/info").await;
    assert!(
        matches!(&missing, Err(debug::DebugError::Answer(_))),
        "{missing:?}"
    );

    stop.send(()).unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(30), server)
        .await
        .expect("serve stops after the shutdown signal")
        .unwrap();
    assert!(outcome.is_ok(), "{outcome:?}");
    assert!(!socket.exists(), "the debug socket is removed");
    assert!(
        get(address, "/healthz").await.is_err(),
        "the port is closed"
    );
}

#[tokio::test]
async fn a_port_in_use_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
    let loader = HookLoader::new(sandbox, CallLimits::default(), false);
    let options = ServeOptions {
        hooks_dir: dir.path().to_owned(),
        listen: address,
        debug_socket: None,
        grace: Duration::ZERO,
        ..ServeOptions::new(PathBuf::new(), address)
    };
    let error = run(
        options,
        &loader,
        Arc::new(LocalCluster::new()),
        Coordination::default(),
        std::future::pending(),
    )
    .await
    .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with(&format!("cannot listen on {address}")),
        "{error}"
    );
}

/// One `serve::run` with leader election over the shared fake Lease API.
struct Replica {
    server: tokio::task::JoinHandle<Result<(), ServeError>>,
    stop: tokio::sync::oneshot::Sender<()>,
    socket: std::path::PathBuf,
}

fn replica(
    name: &str,
    dir: &std::path::Path,
    cluster: &Arc<LocalCluster>,
    leases: &Arc<std::sync::Mutex<crate::serve::fake_lease::FakeLeases>>,
) -> Replica {
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(operon_tests::test_cache_dir()),
        ..SandboxConfig::default()
    })
    .unwrap();
    let loader = HookLoader::new(sandbox, CallLimits::default(), false);
    let socket = dir.join(format!("{name}.socket"));
    let address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let options = ServeOptions {
        debug_socket: Some(socket.clone()),
        grace: Duration::from_secs(5),
        ..ServeOptions::new(dir.join("hooks"), address)
    };
    let mut lease = lease::LeaseOptions::new("operon", "ops");
    lease.identity = name.to_owned();
    lease.lease_duration = Duration::from_secs(2);
    lease.renew_deadline = Duration::from_secs(1);
    lease.retry_period = Duration::from_millis(100);
    let elector = LeaderElector::new(crate::serve::fake_lease::client(leases.clone()), lease);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let cluster: Arc<dyn operon_cluster::Cluster> = cluster.clone();
    let server = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        run(
            options,
            &loader,
            cluster,
            Coordination {
                elector: Some(elector),
                registrar: None,
                controllers: None,
                diagnoses: None,
                hook_objects: None,
                audit: None,
            },
            shutdown,
        )
        .await
    });
    Replica {
        server,
        stop,
        socket,
    }
}

/// Whether the replica's pods binding has synchronized (only a leader's engine runs).
async fn runs_hooks(replica: &Replica) -> Option<bool> {
    let hooks = debug::request(&replica.socket, "/hook/list").await.ok()?;
    let binding = hooks[0]["bindings"]
        .as_array()?
        .iter()
        .find(|b| b["name"] == "pods")?
        .clone();
    binding["synchronized"].as_bool()
}

async fn wait_for(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_engines_sharing_a_lease_only_the_leader_runs_hooks() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("hooks")).unwrap();
    std::fs::copy(
        operon_tests::POD_LABELER,
        dir.path().join("hooks/pod-labeler.wasm"),
    )
    .unwrap();
    let cluster = Arc::new(LocalCluster::new());
    let pods = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../operations/examples/hooks/pods.yaml"
    );
    cluster.load_file(pods).unwrap();
    let leases = Arc::new(std::sync::Mutex::new(
        crate::serve::fake_lease::FakeLeases::default(),
    ));
    let holder = || {
        leases
            .lock()
            .unwrap()
            .lease
            .as_ref()
            .map(|l| l["spec"]["holderIdentity"].clone())
    };

    let a = replica("a", dir.path(), &cluster, &leases);
    wait_for("a leads and runs hooks", async || {
        runs_hooks(&a).await == Some(true)
    })
    .await;
    let b = replica("b", dir.path(), &cluster, &leases);
    wait_for("b loaded its hooks", async || {
        runs_hooks(&b).await.is_some()
    })
    .await;
    // b stays a standby for several retry periods.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(runs_hooks(&b).await, Some(false));
    assert_eq!(holder(), Some(serde_json::json!("a")));

    // a shuts down: it hands the Lease back and b takes over.
    a.stop.send(()).unwrap();
    a.server.await.unwrap().unwrap();
    wait_for("b runs hooks", async || runs_hooks(&b).await == Some(true)).await;
    assert_eq!(holder(), Some(serde_json::json!("b")));
    b.stop.send(()).unwrap();
    b.server.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_hooks_directory_serves_with_no_hooks() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
    let loader = HookLoader::new(sandbox, CallLimits::default(), false);
    let address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let options = ServeOptions::new(dir.path().to_owned(), address);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        run(
            options,
            &loader,
            Arc::new(LocalCluster::new()),
            Coordination::default(),
            shutdown,
        )
        .await
    });
    wait_for("readiness", async || {
        matches!(get(address, "/readyz").await, Ok((200, _)))
    })
    .await;
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_waits_until_the_webhook_configurations_are_registered() {
    use operon_cluster::kube::mock;
    use webhook::register::{ClientTarget, Registration};
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
    let loader = HookLoader::new(sandbox, CallLimits::default(), false);
    let address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let options = ServeOptions::new(dir.path().to_owned(), address);
    let (client, mut api) = mock::pair();
    let target = ClientTarget::Url("https://127.0.0.1:9680".to_owned());
    let registrar = Registrar::new(
        client,
        Registration {
            validating_configuration: "operon-webhooks".to_owned(),
            mutating_configuration: "operon-webhooks".to_owned(),
            admission: target.clone(),
            conversion: target,
            admission_ca: b"a CA bundle".to_vec(),
            conversion_ca: Vec::new(),
            own_resources: false,
        },
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        let coordination = Coordination {
            registrar: Some(registrar),
            ..Coordination::default()
        };
        run(
            options,
            &loader,
            Arc::new(LocalCluster::new()),
            coordination,
            shutdown,
        )
        .await
    });

    // No hook has admission bindings: the configuration is deleted, and the API server
    // is away the first time.
    let call = api.next().await;
    assert_eq!(call.method, "DELETE");
    assert!(
        call.uri
            .contains("validatingwebhookconfigurations/operon-webhooks"),
        "{}",
        call.uri
    );
    call.fail(503, "ServiceUnavailable", "the server is shutting down");
    let (code, reason) = get(address, "/readyz").await.unwrap();
    assert_eq!(code, 503);
    assert_eq!(
        reason,
        "waiting for the webhook configurations to be registered\n"
    );

    // Tried again 2 s later: both configurations are already gone.
    for kind in [
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
    ] {
        let call = api.next().await;
        assert_eq!(call.method, "DELETE");
        assert!(call.uri.contains(kind), "{}", call.uri);
        call.fail(404, "NotFound", "not found");
    }
    wait_for("readiness", async || {
        matches!(get(address, "/readyz").await, Ok((200, _)))
    })
    .await;
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_hook_of_the_directory_runs_beside_its_live_hook_only() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    std::fs::copy(operon_tests::POD_LABELER, hooks.join("pod-labeler.wasm")).unwrap();
    std::fs::copy(operon_tests::ANNOTATOR, hooks.join("annotator.wasm")).unwrap();
    let cluster = Arc::new(LocalCluster::new());
    cluster
        .load_yaml(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: demo}\n",
            "pods",
        )
        .unwrap();
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(operon_tests::test_cache_dir()),
        ..SandboxConfig::default()
    })
    .unwrap();
    let loader = HookLoader::new(sandbox, CallLimits::default(), false);
    let address: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let options = |shadow: &str| ServeOptions {
        hooks_dir: hooks.clone(),
        grace: Duration::from_secs(5),
        shadow_hooks: vec![(shadow.to_owned(), "pod-labeler.wasm".to_owned())],
        ..ServeOptions::new(PathBuf::new(), address)
    };

    // A shadow the directory does not have: refused, naming what it has.
    let error = run(
        options("annotater.wasm"),
        &loader,
        cluster.clone(),
        Coordination::default(),
        std::future::pending(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "--shadow-hook annotater.wasm=pod-labeler.wasm: the hooks directory has no hook named \"annotater.wasm\" (names as `operon debug hook list` shows them: annotator.wasm, pod-labeler.wasm)"
    );

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = cluster.clone();
    let options = options("annotator.wasm");
    let server = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        run(options, &loader, served, Coordination::default(), shutdown).await
    });
    let series = "operon_shadow_runs_total{live=\"pod-labeler.wasm\",result=\"diverged\",shadow=\"annotator.wasm\"}";
    wait_for("the shadow's comparison", async || {
        get(address, "/metrics")
            .await
            .is_ok_and(|(_, body)| body.contains(series))
    })
    .await;
    let pod = cluster.objects().into_iter().next().unwrap();
    assert_eq!(pod["metadata"]["labels"]["operon.dev/seen"], "true");
    assert!(
        pod["metadata"]["annotations"].is_null(),
        "the shadow ran on bindings of its own or its patch was applied: {pod}"
    );
    let (_, metrics) = get(address, "/metrics").await.unwrap();
    assert!(
        !metrics.contains("hook=\"annotator.wasm\""),
        "the shadow ran as a hook: {metrics}"
    );
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}
