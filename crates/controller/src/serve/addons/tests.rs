//! `operon serve` with addon-operator's modules over the in-memory cluster: the queue,
//! its metrics and readiness, ModuleConfigs, leadership, reloads and module sources.

use super::*;
use crate::serve::{Coordination, ServeError, ServeOptions};
use operon_addons::config::ConfigMapRef;
use operon_addons::render::Renderer;
use operon_cluster::local::LocalCluster;
use operon_data::model::WatchEvent;
use operon_hooks::load::HookLoader;
use operon_sandbox::{CallLimits, Sandbox, SandboxConfig};
use operon_script::{Launcher, ScriptSandboxConfig};
use std::net::SocketAddr;
use std::path::Path;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Modules of manifests only: no script runs, so the sandbox's launcher is never
/// started.
fn options(modules: &Path) -> Arc<ModulesOptions> {
    let launcher = Launcher {
        program: "/nonexistent/launcher".into(),
        args: Vec::new(),
    };
    Arc::new(ModulesOptions {
        settings: Settings {
            modules_dir: modules.to_owned(),
            global_hooks_dir: None,
            sources: None,
            config_map: ConfigMapRef {
                namespace: "ops".into(),
                name: "addon-operator".into(),
            },
            renderer: Renderer {
                helm: "helm".into(),
                namespace: "ops".into(),
                timeout: Duration::from_secs(10),
            },
            hook_timeout: Duration::from_secs(10),
            retry_first: Duration::from_millis(100),
            retry_max: Duration::from_secs(1),
        },
        namespace: "ops".into(),
        client: None,
        sandbox: ScriptSandbox::new(ScriptSandboxConfig::new(launcher)).unwrap(),
        view: QueueView::default(),
    })
}

/// A loopback address with a port free now, for serve's HTTP endpoints.
fn free_address() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// Runs `serve` with `options` over `cluster` until the sender is used or dropped.
fn spawn_serve(
    options: ServeOptions,
    cluster: Arc<LocalCluster>,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), ServeError>>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        crate::serve::run(
            options,
            &loader(),
            cluster,
            Coordination::default(),
            async {
                let _ = stopped.await;
            },
        )
        .await
    });
    (stop, server)
}

fn loader() -> HookLoader {
    let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
    HookLoader::new(sandbox, CallLimits::default(), false)
}

async fn get(address: SocketAddr, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: operon\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
}

async fn config_map(cluster: &LocalCluster, name: &str) -> Option<serde_json::Value> {
    let resource = cluster.resolve(Some("v1"), "ConfigMap").unwrap();
    Cluster::get(cluster, &resource, Some("ops"), name)
        .await
        .unwrap()
}

async fn until<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..200 {
        if let Some(found) = check().await {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_converges_modules_shows_their_queue_and_metrics_and_follows_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("hooks")).unwrap();
    write(
        d,
        "modules/values.yaml",
        "appEnabled: true\napp: {replicas: 2}\n",
    );
    write(
        d,
        "modules/001-app/manifests/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  a: b\n",
    );
    // A wasm beforeHelm hook: no script runs, and its run is in the history.
    std::fs::create_dir_all(d.join("modules/001-app/hooks")).unwrap();
    std::fs::copy(
        operon_tests::VALUES_HOOK,
        d.join("modules/001-app/hooks/values.wasm"),
    )
    .unwrap();
    let cluster = Arc::new(LocalCluster::new());
    let address: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let listener = std::net::TcpListener::bind(address).unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let socket = d.join("debug.socket");
    let options = ServeOptions {
        debug_socket: Some(socket.clone()),
        grace: Duration::from_secs(5),
        modules: Some(options(&d.join("modules"))),
        ..ServeOptions::new(d.join("hooks"), address)
    };
    let (stop, server) = spawn_serve(options, cluster.clone());

    let applied = until("the module's ConfigMap", async || {
        config_map(&cluster, "app").await
    })
    .await;
    assert_eq!(applied["data"]["a"], "b");
    let queue = until("the queue after the convergence", async || {
        let answer = crate::serve::debug::request(&socket, "/queue/main")
            .await
            .ok()?;
        (answer["enabledModules"] == serde_json::json!(["app"])).then_some(answer)
    })
    .await;
    assert_eq!(queue["runningQueue"], true);
    // The module hook's lifecycle run is in `operon hook history`, by its name.
    let runs = crate::serve::debug::request(&socket, "/hook/history")
        .await
        .unwrap();
    assert_eq!(runs[0]["hook"], "app/values.wasm", "{runs}");
    assert_eq!(runs[0]["bindings"], serde_json::json!(["beforeHelm"]));
    assert_eq!(runs[0]["outcome"], "Succeeded", "{runs}");
    let own = crate::serve::debug::request(&socket, "/hook/app%2Fvalues.wasm/history")
        .await
        .unwrap();
    assert_eq!(own, runs);
    let metrics = get(address, "/metrics").await;
    assert!(
        metrics.contains("operon_module_enabled{module=\"app\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("operon_module_run_seconds_count{module=\"app\"} 1"),
        "{metrics}"
    );

    // The ConfigMap disables the module: its objects and release record go.
    let config: serde_json::Value = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "addon-operator", "namespace": "ops"},
        "data": {"appEnabled": "false"},
    });
    cluster
        .apply_watch_event(WatchEvent::Added, config)
        .unwrap();
    until("the module's objects deleted", async || {
        let gone = config_map(&cluster, "app").await.is_none()
            && config_map(&cluster, "operon-module-app").await.is_none();
        gone.then_some(())
    })
    .await;
    let metrics = get(address, "/metrics").await;
    assert!(
        metrics.contains("operon_module_enabled{module=\"app\"} 0"),
        "{metrics}"
    );
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

async fn module_config_status(cluster: &LocalCluster) -> Option<serde_json::Value> {
    let resource = cluster.resolve(None, "ModuleConfig").unwrap();
    let object = Cluster::get(cluster, &resource, None, "app")
        .await
        .unwrap()?;
    object.get("status").cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_follows_module_configs_and_writes_their_status() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("hooks")).unwrap();
    // No flag enables the module: its ModuleConfig will.
    write(
        d,
        "modules/001-app/manifests/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n",
    );
    let cluster = Arc::new(LocalCluster::new());
    let crd =
        yaml_serde::to_string(&<operon_data::api::ModuleConfig as kube::CustomResourceExt>::crd())
            .unwrap();
    cluster.load_yaml(&crd, "operon CRDs").unwrap();
    let address = free_address();
    let options = ServeOptions {
        grace: Duration::from_secs(5),
        modules: Some(options(&d.join("modules"))),
        ..ServeOptions::new(d.join("hooks"), address)
    };
    let (stop, server) = spawn_serve(options, cluster.clone());
    let module_config = |generation: i64, enabled: bool| {
        serde_json::json!({
            "apiVersion": "operon.dev/v1alpha1", "kind": "ModuleConfig",
            "metadata": {"name": "app", "generation": generation},
            "spec": {"enabled": enabled},
        })
    };
    // Created after the queue started: its watch brings it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(config_map(&cluster, "app").await.is_none());
    cluster
        .apply_watch_event(WatchEvent::Added, module_config(1, true))
        .unwrap();
    until("the module's ConfigMap", async || {
        config_map(&cluster, "app").await
    })
    .await;
    let status = until("the ModuleConfig ready", async || {
        module_config_status(&cluster)
            .await
            .filter(|s| s["ready"] == true)
    })
    .await;
    assert_eq!(status["enabled"], true);
    assert_eq!(status["observedGeneration"], 1);
    assert_eq!(status["message"], "Enabled and ready");

    cluster
        .apply_watch_event(WatchEvent::Modified, module_config(2, false))
        .unwrap();
    let status = until("the ModuleConfig disabled", async || {
        module_config_status(&cluster)
            .await
            .filter(|s| s["enabled"] == false)
    })
    .await;
    assert_eq!(status["observedGeneration"], 2);
    assert_eq!(status["message"], "Disabled by ModuleConfig app");
    // Discovery says so before the ModuleDelete that follows it has run.
    until("the module's objects deleted", async || {
        config_map(&cluster, "app").await.is_none().then_some(())
    })
    .await;
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

struct Replica {
    server: tokio::task::JoinHandle<Result<(), ServeError>>,
    stop: tokio::sync::oneshot::Sender<()>,
    socket: std::path::PathBuf,
}

fn replica(
    name: &str,
    dir: &Path,
    cluster: &Arc<LocalCluster>,
    leases: &Arc<std::sync::Mutex<crate::serve::fake_lease::FakeLeases>>,
) -> Replica {
    let socket = dir.join(format!("{name}.socket"));
    let address = free_address();
    let options = ServeOptions {
        debug_socket: Some(socket.clone()),
        grace: Duration::from_secs(5),
        modules: Some(options(&dir.join("modules"))),
        ..ServeOptions::new(dir.join("hooks"), address)
    };
    let mut lease = crate::serve::lease::LeaseOptions::new("operon", "ops");
    lease.identity = name.to_owned();
    lease.lease_duration = Duration::from_secs(2);
    lease.renew_deadline = Duration::from_secs(1);
    lease.retry_period = Duration::from_millis(100);
    let elector = crate::serve::lease::LeaderElector::new(
        crate::serve::fake_lease::client(leases.clone()),
        lease,
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let cluster: Arc<dyn Cluster> = cluster.clone();
    let server = tokio::spawn(async move {
        crate::serve::run(
            options,
            &loader(),
            cluster,
            Coordination {
                elector: Some(elector),
                ..Coordination::default()
            },
            async {
                let _ = stopped.await;
            },
        )
        .await
    });
    Replica {
        server,
        stop,
        socket,
    }
}

/// Whether the replica's module queue runs, once its debug socket answers.
async fn runs_queue(replica: &Replica) -> Option<bool> {
    let answer = crate::serve::debug::request(&replica.socket, "/queue/main")
        .await
        .ok()?;
    answer["runningQueue"].as_bool()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_converges_modules_and_a_new_leader_starts_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("hooks")).unwrap();
    write(d, "modules/values.yaml", "appEnabled: true\n");
    write(
        d,
        "modules/001-app/manifests/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n",
    );
    let cluster = Arc::new(LocalCluster::new());
    let leases = Arc::new(std::sync::Mutex::new(
        crate::serve::fake_lease::FakeLeases::default(),
    ));
    let a = replica("a", d, &cluster, &leases);
    until("a leads and converges", async || {
        (runs_queue(&a).await == Some(true) && config_map(&cluster, "app").await.is_some())
            .then_some(())
    })
    .await;
    let b = replica("b", d, &cluster, &leases);
    until("b answers on its debug socket", async || {
        runs_queue(&b).await
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(runs_queue(&b).await, Some(false), "b stands by");

    // a goes; the config disables the module; b takes over, reads the config
    // afresh and deletes what a applied.
    a.stop.send(()).unwrap();
    a.server.await.unwrap().unwrap();
    let config = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "addon-operator", "namespace": "ops"},
        "data": {"appEnabled": "false"},
    });
    cluster
        .apply_watch_event(WatchEvent::Added, config)
        .unwrap();
    until("b leads and deletes the module's objects", async || {
        (runs_queue(&b).await == Some(true) && config_map(&cluster, "app").await.is_none())
            .then_some(())
    })
    .await;
    b.stop.send(()).unwrap();
    b.server.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_the_modules_startup_convergence() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("hooks")).unwrap();
    write(d, "modules/values.yaml", "appEnabled: true\n");
    // A kind the cluster does not serve: the ModuleRun fails and is retried.
    let manifest = "modules/001-app/manifests/object.yaml";
    write(
        d,
        manifest,
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: app\n",
    );
    let cluster = Arc::new(LocalCluster::new());
    let address = free_address();
    let options = ServeOptions {
        grace: Duration::from_secs(5),
        modules: Some(options(&d.join("modules"))),
        ..ServeOptions::new(d.join("hooks"), address)
    };
    let (stop, server) = spawn_serve(options, cluster.clone());
    // The listener may not be bound yet: wait for it before asking.
    until("the listener", async || {
        tokio::net::TcpStream::connect(address).await.ok()
    })
    .await;
    let waiting = until("a retried ModuleRun named by /readyz", async || {
        let answer = get(address, "/readyz").await;
        answer.contains("(failed 2 times)").then_some(answer)
    })
    .await;
    assert!(
        waiting.lines().next().unwrap().contains(" 503 "),
        "{waiting}"
    );
    assert!(
        waiting.contains("waiting for the modules' startup convergence: ModuleRun:app"),
        "{waiting}"
    );
    // The manifest is fixed: the next retry succeeds and the convergence is done.
    write(
        d,
        manifest,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n",
    );
    let ready = until("/readyz ready", async || {
        let answer = get(address, "/readyz").await;
        let ok = answer.lines().next().is_some_and(|l| l.contains(" 200 "));
        ok.then_some(answer)
    })
    .await;
    assert!(config_map(&cluster, "app").await.is_some(), "{ready}");
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

async fn data(cluster: &LocalCluster, name: &str) -> Option<String> {
    let object = config_map(cluster, name).await?;
    Some(object["data"]["a"].as_str().unwrap_or_default().to_owned())
}

async fn last_reload(socket: &Path) -> Option<serde_json::Value> {
    let reloads = crate::serve::debug::request(socket, "/reload/history")
        .await
        .ok()?;
    reloads.as_array()?.last().cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_added_changed_refused_and_removed_converges_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("hooks")).unwrap();
    let manifest = |name: &str, a: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: {a}\n")
    };
    write(d, "modules/values.yaml", "appEnabled: true\n");
    write(
        d,
        "modules/001-app/manifests/cm.yaml",
        &manifest("app", "one"),
    );
    let cluster = Arc::new(LocalCluster::new());
    let address = free_address();
    let socket = d.join("debug.socket");
    let options = ServeOptions {
        debug_socket: Some(socket.clone()),
        grace: Duration::from_secs(5),
        modules: Some(options(&d.join("modules"))),
        reload_interval: Some(Duration::from_millis(100)),
        ..ServeOptions::new(d.join("hooks"), address)
    };
    let (stop, server) = spawn_serve(options, cluster.clone());
    until("the module applied", async || {
        data(&cluster, "app").await.filter(|a| a == "one")
    })
    .await;

    // A module comes, enabled by its own values.yaml: it converges.
    write(d, "modules/002-extra/values.yaml", "extraEnabled: true\n");
    write(
        d,
        "modules/002-extra/manifests/cm.yaml",
        &manifest("extra", "x"),
    );
    until("the new module applied", async || {
        data(&cluster, "extra").await
    })
    .await;
    let added = until("the reload recorded", async || {
        last_reload(&socket)
            .await
            .filter(|r| r["added"] == serde_json::json!(["extra"]))
    })
    .await;
    assert_eq!(added["source"], "modules");
    assert_eq!(added["outcome"], "applied");

    // A module changes: its new manifest is applied.
    write(
        d,
        "modules/001-app/manifests/cm.yaml",
        &manifest("app", "two"),
    );
    until("the changed module applied", async || {
        data(&cluster, "app").await.filter(|a| a == "two")
    })
    .await;
    let changed = until("the reload recorded", async || {
        last_reload(&socket)
            .await
            .filter(|r| r["changed"] == serde_json::json!(["app"]))
    })
    .await;
    assert!(changed.get("added").is_none(), "{changed}");

    // A module that does not load: refused with its file, the rest goes on.
    write(d, "modules/003-bad/values.yaml", "bad: [not, a, mapping\n");
    let refused = until("the refused reload", async || {
        last_reload(&socket)
            .await
            .filter(|r| r["outcome"] == "refused")
    })
    .await;
    let error = refused["error"].as_str().unwrap();
    assert!(error.contains("003-bad/values.yaml"), "{error}");
    let queue = crate::serve::debug::request(&socket, "/queue/main")
        .await
        .unwrap();
    assert_eq!(
        queue["enabledModules"],
        serde_json::json!(["app", "extra"]),
        "{queue}"
    );

    // Modules go: the release of the one that was enabled is deleted.
    std::fs::remove_dir_all(d.join("modules/003-bad")).unwrap();
    std::fs::remove_dir_all(d.join("modules/002-extra")).unwrap();
    until("the removed module's objects deleted", async || {
        config_map(&cluster, "extra").await.is_none().then_some(())
    })
    .await;
    let removed = until("the reload recorded", async || {
        last_reload(&socket)
            .await
            .filter(|r| r["removed"] == serde_json::json!(["extra"]))
    })
    .await;
    assert_eq!(removed["outcome"], "applied");
    assert_eq!(data(&cluster, "app").await.as_deref(), Some("two"));
    let metrics = get(address, "/metrics").await;
    assert!(
        metrics.contains(r#"operon_reloads_total{outcome="refused",source="modules"} 1"#),
        "{metrics}"
    );
    assert!(
        !metrics.contains(r#"operon_module_enabled{module="extra"}"#),
        "{metrics}"
    );
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_bad_modules_directory_stops_serve_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("hooks")).unwrap();
    write(d, "modules/001-app/values.yaml", "app: [not, a, mapping\n");
    let address: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let options = ServeOptions {
        modules: Some(options(&d.join("modules"))),
        ..ServeOptions::new(d.join("hooks"), address)
    };
    let error = crate::serve::run(
        options,
        &loader(),
        Arc::new(LocalCluster::new()),
        Coordination::default(),
        std::future::pending(),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, ServeError::Modules(_)), "{error}");
    let message = error.to_string();
    assert!(
        message.starts_with("modules: ") && message.contains("001-app/values.yaml"),
        "{message}"
    );
}

#[tokio::test]
async fn module_config_admission_follows_a_module_added_and_keeps_its_rules_on_a_bad_tree() {
    let dir = tempfile::tempdir().unwrap();
    let modules = dir.path().join("modules");
    write(
        &modules,
        "001-app/manifests/app.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n",
    );
    let options = options(&modules);
    let layout = operon_addons::operator::read_layout(&options.settings)
        .await
        .unwrap();
    let rules: ModuleSettings = Arc::new(std::sync::RwLock::new(Arc::new(
        operon_addons::module_config::SettingsRules::new(&layout).unwrap(),
    )));
    let checked = |rules: &ModuleSettings| {
        let config = serde_json::json!({
            "apiVersion": "operon.dev/v1alpha1", "kind": "ModuleConfig",
            "metadata": {"name": "extra"},
            "spec": {"enabled": true, "version": 1, "settings": {"replicas": "two"}}});
        rules.read().unwrap().check(&config)
    };
    let before = checked(&rules);
    assert!(
        before.problems.is_empty(),
        "an unknown module is only warned about"
    );
    assert!(!before.warnings.is_empty());
    let _following = crate::controllers::AbortOnDrop::spawn(follow_settings(
        options,
        rules.clone(),
        Duration::from_millis(20),
    ));
    write(
        &modules,
        "002-extra/manifests/extra.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n",
    );
    write(
        &modules,
        "002-extra/openapi/config-values.yaml",
        "type: object\nproperties:\n  replicas:\n    type: integer\n",
    );
    let problems = until("the new module's schema", async || {
        let checked = checked(&rules);
        (!checked.problems.is_empty()).then_some(checked.problems)
    })
    .await;
    let text = format!("{problems:?}");
    assert!(text.contains("spec.settings.replicas"), "{text}");
    // A tree that does not read keeps the rules in use.
    write(&modules, "003-bad/values.yaml", "bad: [not, a, mapping\n");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !checked(&rules).problems.is_empty(),
        "the rules in use stay"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_source_unavailable_at_start_is_pulled_again_and_runs() {
    use operon_store::addon_modules::AddonModules;
    use operon_store::oci::{OciClient, OciOptions, RegistryAuth};
    use operon_store::oci_modules::{AllowList, OciModules};
    use std::sync::atomic::{AtomicBool, Ordering};

    let registry = operon_tests::registry::FakeRegistry::new(Some("puller:secret"));
    let host = registry.serve().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "published/manifests/app.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-source\ndata:\n  pulled: \"yes\"\n",
    );
    write(d, "published/module.yaml", "name: pulled\n");
    let archive = operon_store::addon_archive::pack(&d.join("published")).unwrap();
    let oci_options = OciOptions {
        extra_ca_pem: Vec::new(),
        plain_http: vec![host.clone()],
    };
    let granted = RegistryAuth::Basic("puller".into(), "secret".into());
    let tag = format!("oci://{host}/mods/pulled:1");
    let pushed = OciClient::new(&oci_options)
        .push_addon(&tag, &archive, "pulled", &granted)
        .await
        .unwrap();
    let reference = format!("{tag}@{}", pushed.manifest_digest);
    // The registry refuses the credentials given at start, and takes them later.
    let allowed = Arc::new(AtomicBool::new(false));
    let auth: operon_addons::sources::AuthFor = {
        let allowed = allowed.clone();
        Arc::new(move |_| {
            let auth = if allowed.load(Ordering::SeqCst) {
                RegistryAuth::Basic("puller".into(), "secret".into())
            } else {
                RegistryAuth::Basic("puller".into(), "wrong".into())
            };
            Box::pin(async move { Ok(auth) })
        })
    };
    let blobs = operon_store::BlobStore::open(d.join("store"), 64 << 20).unwrap();
    let oci = Arc::new(OciModules::new(
        blobs,
        oci_options,
        AllowList::new([host.clone()]),
    ));
    let sources = operon_addons::sources::ModuleSources::new(
        vec![reference],
        AddonModules::new(oci, d.join("cache")),
        auth,
    );
    std::fs::create_dir_all(d.join("hooks")).unwrap();
    write(d, "modules/values.yaml", "pulledEnabled: true\n");
    let mut modules = (*options(&d.join("modules"))).clone();
    modules.settings.sources = Some(sources);
    let cluster = Arc::new(LocalCluster::new());
    let address = free_address();
    let serve_options = ServeOptions {
        grace: Duration::from_secs(5),
        modules: Some(Arc::new(modules)),
        reload_interval: Some(Duration::from_millis(50)),
        ..ServeOptions::new(d.join("hooks"), address)
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = cluster.clone();
    let server = tokio::spawn(async move {
        crate::serve::run(
            serve_options,
            &loader(),
            served,
            Coordination::default(),
            async {
                let _ = stopped.await;
            },
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        config_map(&cluster, "from-source").await,
        None,
        "not pulled yet"
    );
    allowed.store(true, Ordering::SeqCst);
    until("the pulled module applied", async || {
        let object = config_map(&cluster, "from-source").await?;
        (object["data"]["pulled"] == "yes").then_some(())
    })
    .await;
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}
