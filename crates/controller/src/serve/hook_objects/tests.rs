//! Hook objects against a mock API server (the Hooks, their status writes: exact
//! requests) with their engines over the in-memory cluster and the pod labeler: a Hook
//! refused for its watch, changed to load, changed again to be allowed its patch, and
//! deleted, all without a restart.

use super::*;
use operon_cluster::kube::mock::{Call, MockApi, pair};
use operon_cluster::local::LocalCluster;
use operon_data::model::WatchEvent;
use operon_sandbox::{CallLimits, Sandbox, SandboxConfig};
use serde_json::{Value, json};

const STATUS: &str = "/apis/operon.dev/v1alpha1/namespaces/demo/hooks/labeler/status";

fn hook(generation: i64, resource_version: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "operon.dev/v1alpha1", "kind": "Hook",
        "metadata": {"name": "labeler", "namespace": "demo", "uid": "u-1",
                     "generation": generation, "resourceVersion": resource_version},
        "spec": spec,
    })
}

#[tokio::test]
async fn a_status_is_written_with_server_side_apply_as_operon() {
    let (client, mut api) = pair();
    let hooks: Api<Hook> = Api::namespaced(client, "demo");
    let mut status = HookStatus {
        observed_generation: Some(3),
        digest: Some("sha256:00".into()),
        ..HookStatus::default()
    };
    set_condition(
        &mut status.conditions,
        "Loaded",
        ConditionStatus::True,
        "Loaded",
        "module m",
    );
    let time = status.conditions[0].last_transition_time.clone().unwrap();
    let writing = tokio::spawn(async move { status::write(&hooks, "labeler", &status).await });
    let call = api.next().await;
    assert_eq!(call.method, "PATCH");
    assert_eq!(
        call.uri,
        format!("{STATUS}?&force=true&fieldManager=operon")
    );
    assert_eq!(
        call.content_type.as_deref(),
        Some("application/apply-patch+yaml")
    );
    assert_eq!(
        call.json(),
        json!({"apiVersion": "operon.dev/v1alpha1", "kind": "Hook",
               "metadata": {"name": "labeler"},
               "status": {"observedGeneration": 3, "digest": "sha256:00",
                          "conditions": [{"type": "Loaded", "status": "True", "reason": "Loaded",
                                          "message": "module m",
                                          "lastTransitionTime": serde_json::to_value(&time).unwrap()}]}})
    );
    call.answer(200, hook(3, "9", json!({"module": "m"})));
    writing.await.unwrap().unwrap();
    api.quiet().await;
}

#[test]
fn a_status_keeps_the_last_five_failures_oldest_first() {
    let run = |n: u64| operon_hooks::history::RunEntry {
        hook: "labeler".into(),
        bindings: vec!["pods".into()],
        binding_type: "Event".into(),
        trigger: format!("Added Pod demo/web-{n}"),
        queue: "main".into(),
        started: jiff::Timestamp::UNIX_EPOCH,
        duration_ms: n,
        outcome: operon_data::api::HookRunOutcome::Failed,
        error: Some("exit code 2".into()),
        patches: 0,
        patch_descriptions: Vec::new(),
        exit_code: Some(2),
        stderr_tail: String::new(),
        stderr_truncated: false,
    };
    let mut status = HookStatus::default();
    for n in 0..7 {
        status::record_failure(&mut status, &run(n));
    }
    let triggers: Vec<&str> = status
        .last_failures
        .iter()
        .map(|f| f.trigger.as_str())
        .collect();
    assert_eq!(
        triggers,
        (2..7)
            .map(|n| format!("Added Pod demo/web-{n}"))
            .collect::<Vec<_>>()
    );
    assert_eq!(status.last_failures[4].exit_code, Some(2));
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["lastFailures"][0]["exitCode"], 2);
    assert_eq!(json["lastFailures"][0]["outcome"], "Failed");
}

#[test]
fn a_condition_keeps_its_transition_time_while_its_status_holds() {
    let mut conditions = Vec::new();
    set_condition(
        &mut conditions,
        "Ready",
        ConditionStatus::False,
        "Starting",
        "",
    );
    let mut first = conditions[0].clone();
    first.last_transition_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::UNIX_EPOCH,
    ));
    conditions[0] = first.clone();
    set_condition(
        &mut conditions,
        "Ready",
        ConditionStatus::False,
        "RunFailed",
        "x",
    );
    assert_eq!(
        conditions[0].last_transition_time,
        first.last_transition_time
    );
    assert_eq!(conditions[0].reason, "RunFailed");
    set_condition(
        &mut conditions,
        "Ready",
        ConditionStatus::True,
        "Running",
        "",
    );
    assert_ne!(
        conditions[0].last_transition_time,
        first.last_transition_time
    );
    assert_eq!(conditions.len(), 1);
}

/// The API server's side: answers the Hook list with `listed`, holds watches, and
/// answers status writes (keeping their bodies) until `done` holds for the last one.
struct Server {
    api: MockApi,
    watches: Vec<Call>,
    writes: Vec<Value>,
}

impl Server {
    async fn until(&mut self, listed: &[Value], done: impl Fn(&Value) -> bool) -> Value {
        loop {
            let call = self.api.next().await;
            if call.uri.contains("watch=true") {
                self.watches.push(call);
            } else if call.method == "GET"
                && call.uri.starts_with("/apis/operon.dev/v1alpha1/hooks?")
            {
                call.answer(
                    200,
                    json!({"apiVersion": "operon.dev/v1alpha1", "kind": "HookList",
                           "metadata": {"resourceVersion": "1"}, "items": listed}),
                );
            } else if call.method == "PATCH" {
                assert_eq!(
                    call.uri,
                    format!("{STATUS}?&force=true&fieldManager=operon")
                );
                let body = call.json();
                // The API server answers with the whole object; a Hook without its
                // spec would not decode, and the writer would wait to try again.
                let mut object = hook(1, "9", json!({"module": "pod-labeler"}));
                object["status"] = body["status"].clone();
                call.answer(200, object);
                self.writes.push(body.clone());
                if done(&body) {
                    return body;
                }
            } else {
                panic!("unexpected {} {}", call.method, call.uri);
            }
        }
    }

    /// Sends `event` (ADDED, MODIFIED, DELETED) on the watch being held.
    fn event(&mut self, type_: &str, object: Value) {
        let call = self.watches.pop().expect("a watch is held");
        let line = serde_json::to_vec(&json!({"type": type_, "object": object})).unwrap();
        call.answer_raw(200, line);
    }
}

/// The debug socket of a process whose hooks directory has no hook, answering for the
/// engines of `engines`; it stops when the returned task is dropped.
fn debug_socket(
    engines: EngineSet,
    cluster: Arc<LocalCluster>,
) -> (tempfile::TempDir, std::path::PathBuf, AbortOnDrop) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("debug.socket");
    let listener = crate::serve::debug::bind(&socket).unwrap();
    let metrics = Arc::new(Metrics::new().unwrap());
    let directory = Arc::new(Engine::new(Vec::new(), cluster, metrics.clone()));
    let status = Arc::new(crate::serve::Status {
        metrics,
        engine: tokio::sync::watch::Sender::new(Some(directory)),
        engines,
        leading: tokio::sync::watch::Sender::new(None),
        modules: None,
        module_settings: None,
        webhooks_registered: tokio::sync::watch::Sender::new(true),
        forwarder: None,
        synchronized_once: Default::default(),
        reloads: Default::default(),
    });
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let serving = AbortOnDrop::spawn(async move {
        let _stop = _stop;
        crate::serve::debug::serve(listener, status, None, stopped).await;
    });
    (dir, socket, serving)
}

fn condition<'a>(body: &'a Value, type_: &str) -> &'a Value {
    body["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .unwrap_or(&Value::Null)
}

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "demo"}})
}

fn label(cluster: &LocalCluster, name: &str) -> Value {
    cluster
        .objects()
        .into_iter()
        .find(|o| o["metadata"]["name"] == name)
        .map(|o| o["metadata"]["labels"]["operon.dev/seen"].clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn hooks_are_loaded_changed_and_dropped_as_their_objects_change() {
    let modules = tempfile::tempdir().unwrap();
    std::fs::copy(
        operon_tests::POD_LABELER,
        modules.path().join("pod-labeler.wasm"),
    )
    .unwrap();
    let cluster = Arc::new(LocalCluster::new());
    cluster
        .load_yaml(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web-1, namespace: demo}\n",
            "pods",
        )
        .unwrap();
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(operon_tests::test_cache_dir()),
        ..SandboxConfig::default()
    })
    .unwrap();
    let (client, api) = pair();
    let objects = Arc::new(HookObjects::new(
        client,
        ModuleLocator::new(Some(modules.path().to_owned())),
        HookLoader::new(sandbox, CallLimits::default(), false),
        cluster.clone(),
    ));
    let engines = EngineSet::default();
    let capture = CaptureSettings {
        runs_per_hook: 5,
        bytes_per_hook: 1 << 20,
        redact: Vec::new(),
    };
    let (_leads, leading) = tokio::sync::watch::channel(true);
    let _running = AbortOnDrop::spawn(run(
        objects,
        Reporting::new(
            Arc::new(Metrics::new().unwrap()),
            engines.clone(),
            capture,
            leading,
        ),
    ));
    let (_dir, socket, _debug) = debug_socket(engines, cluster.clone());
    let mut server = Server {
        api,
        watches: Vec::new(),
        writes: Vec::new(),
    };
    let watch = json!([{"apiVersion": "v1", "kind": "Pod"}]);

    // 1. Declared for every namespace, allowed its own: refused, naming the binding.
    let v1 = hook(
        1,
        "1",
        json!({"module": "pod-labeler", "permissions": {"watch": watch}}),
    );
    let refused = server
        .until(&[v1], |b| condition(b, "Loaded")["status"] == "False")
        .await;
    assert_eq!(
        condition(&refused, "Loaded")["reason"],
        "BindingNotPermitted"
    );
    assert!(
        refused["status"]["lastError"]
            .as_str()
            .unwrap()
            .starts_with("binding \"pods\" watches v1/Pod in every namespace"),
        "{refused}"
    );
    assert_eq!(condition(&refused, "Ready")["reason"], "NotLoaded");
    assert_eq!(refused["status"]["observedGeneration"], 1);

    // 2. Kept to its namespace: it loads, and its patch (no permission) fails its run.
    let v2 = hook(
        2,
        "2",
        json!({"module": "pod-labeler",
               "overrides": {"kubernetes": [{"name": "pods", "namespaces": ["demo"]}]},
               "permissions": {"watch": watch}}),
    );
    server.event("MODIFIED", v2);
    let failed = server
        .until(&[], |b| b["status"]["lastRun"]["outcome"] == "Failed")
        .await;
    assert_eq!(condition(&failed, "Loaded")["status"], "True");
    assert_eq!(condition(&failed, "Ready")["reason"], "RunFailed");
    let digest =
        operon_sandbox::ModuleDigest::of(&std::fs::read(operon_tests::POD_LABELER).unwrap());
    assert_eq!(failed["status"]["digest"], digest.to_string());
    assert_eq!(failed["status"]["observedGeneration"], 2);
    assert_eq!(
        failed["status"]["bindings"],
        json!([{"name": "resync", "type": "schedule", "crontab": "*/10 * * * *", "queue": "main"},
               {"name": "pods", "type": "kubernetes", "watches": "v1/Pod",
                "namespaces": ["demo"], "queue": "main"}])
    );
    let error = failed["status"]["lastError"].as_str().unwrap();
    assert!(
        error.contains("not permitted: Hook demo/labeler may not MergePatch Pod demo/web-1: spec.permissions.patch does not grant MergePatch on v1/Pod in namespace demo"),
        "{error}"
    );
    assert_eq!(label(&cluster, "web-1"), Value::Null);
    let failure = &failed["status"]["lastFailures"][0];
    assert_eq!(failure["outcome"], "Failed", "{failed}");
    assert_eq!(failure["binding"], "pods");
    assert_eq!(failure["trigger"], "Synchronization (1 object)");
    assert!(
        failure["error"].as_str().unwrap().contains("not permitted"),
        "{failure}"
    );

    // 3. Granted the patch: the next engine labels the pod.
    let v3 = hook(
        3,
        "3",
        json!({"module": "pod-labeler",
               "overrides": {"kubernetes": [{"name": "pods", "namespaces": ["demo"]}]},
               "permissions": {"watch": watch,
                               "patch": [{"apiVersion": "v1", "kind": "Pod", "operations": ["MergePatch"]}]}}),
    );
    server.event("MODIFIED", v3);
    let succeeded = server
        .until(&[], |b| {
            b["status"]["lastRun"]["outcome"] == "Succeeded"
                && condition(b, "Ready")["status"] == "True"
        })
        .await;
    assert_eq!(succeeded["status"]["observedGeneration"], 3);
    assert!(
        succeeded["status"].get("lastError").is_none(),
        "{succeeded}"
    );
    assert_eq!(label(&cluster, "web-1"), "true");
    // A success leaves the failures before it.
    assert_eq!(
        succeeded["status"]["lastFailures"][0]["trigger"],
        "Synchronization (1 object)"
    );
    // Its events run it too.
    cluster
        .apply_watch_event(WatchEvent::Added, pod("web-3"))
        .unwrap();
    let started = std::time::Instant::now();
    while label(&cluster, "web-3") != "true" {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "web-3 was not labelled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The debug socket answers for its engine, under the name its runs carry.
    let path = "/hook/Hook%2Fdemo%2Flabeler";
    let ask = |path: String| {
        let socket = socket.clone();
        async move { crate::serve::debug::request(&socket, &path).await }
    };
    let history = ask(format!("{path}/history")).await.unwrap();
    let triggers: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["trigger"].as_str().unwrap())
        .collect();
    assert!(triggers.contains(&"Added Pod demo/web-3"), "{history}");
    assert!(
        history
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["hook"] == "Hook/demo/labeler")
    );
    let all = ask("/hook/history".to_owned()).await.unwrap();
    assert_eq!(all, history, "the only engine with runs");
    let listed = ask("/hook/list".to_owned()).await.unwrap();
    assert_eq!(listed[0]["name"], "Hook/demo/labeler", "{listed}");
    assert_eq!(listed[0]["source"], HOOK_OBJECT_SOURCE);
    assert_eq!(listed[0]["log_level"], Value::Null);
    let snapshot = ask(format!("{path}/snapshot")).await.unwrap();
    assert!(snapshot.to_string().contains("web-3"), "{snapshot}");
    let captured = ask(format!("{path}/capture")).await.unwrap();
    assert!(!captured.as_array().unwrap().is_empty(), "{captured}");
    let set = crate::serve::debug::request_with(
        &socket,
        hyper::Method::PUT,
        &format!("{path}/log-level/debug"),
    )
    .await
    .unwrap();
    assert_eq!(
        set,
        json!({"hook": "Hook/demo/labeler", "log_level": "debug"})
    );
    let listed = ask("/hook/list".to_owned()).await.unwrap();
    assert_eq!(listed[0]["log_level"], "debug");

    // 4. Deleted: its engine is dropped, and a new pod is left alone.
    let deleted = hook(3, "4", json!({"module": "pod-labeler"}));
    server.event("DELETED", deleted);
    // The watch is taken up again once the deletion is handled; status writes of the
    // runs before it may come first.
    loop {
        let call = server.api.next().await;
        if call.uri.contains("watch=true") {
            server.watches.push(call);
            break;
        }
        assert_eq!(call.method, "PATCH", "{}", call.uri);
        let mut object = hook(3, "9", json!({"module": "pod-labeler"}));
        object["status"] = call.json()["status"].clone();
        call.answer(200, object);
    }
    cluster
        .apply_watch_event(WatchEvent::Added, pod("web-2"))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(label(&cluster, "web-2"), Value::Null);
    // Its engine left the debug socket with it.
    let gone = ask(format!("{path}/history")).await.unwrap_err();
    assert_eq!(gone.to_string(), "no hook named \"Hook/demo/labeler\"");
    assert_eq!(ask("/hook/list".to_owned()).await.unwrap(), json!([]));
    server.api.quiet().await;
}

#[tokio::test]
async fn a_hook_naming_a_module_follows_it_to_new_bytes() {
    let store = tempfile::tempdir().unwrap();
    let blobs = operon_store::BlobStore::open(store.path(), 64 << 20).unwrap();
    let labeler = std::fs::read(operon_tests::POD_LABELER).unwrap();
    // The same component with a custom section: other bytes, another digest.
    let mut changed = labeler.clone();
    changed.extend_from_slice(&[0x00, 0x04, 0x01, b'x', b'v', b'2']);
    let (v1, v2) = (blobs.put(&labeler).unwrap(), blobs.put(&changed).unwrap());
    let catalog = Arc::new(operon_store::ModuleCatalog::new(blobs));
    catalog.set("labeler", v1);
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(operon_tests::test_cache_dir()),
        ..SandboxConfig::default()
    })
    .unwrap();
    let (client, api) = pair();
    let objects = HookObjects::new(
        client,
        ModuleLocator::new(None).with_catalog(catalog.clone()),
        HookLoader::new(sandbox, CallLimits::default(), false),
        Arc::new(LocalCluster::new()),
    )
    .with_catalog_changes(catalog.subscribe());
    let (_leads, leading) = tokio::sync::watch::channel(true);
    let _running = AbortOnDrop::spawn(run(
        Arc::new(objects),
        Reporting::new(
            Arc::new(Metrics::new().unwrap()),
            Default::default(),
            Default::default(),
            leading,
        ),
    ));
    let mut server = Server {
        api,
        watches: Vec::new(),
        writes: Vec::new(),
    };
    let spec = json!({"module": "labeler", "permissions": {"watch": [
        {"apiVersion": "v1", "kind": "Pod", "namespaces": ["*"]}]}});
    let loaded = |digest: operon_sandbox::ModuleDigest| {
        move |b: &Value| {
            b["status"]["digest"] == digest.to_string() && condition(b, "Ready")["status"] == "True"
        }
    };
    server.until(&[hook(1, "1", spec)], loaded(v1)).await;
    // The Module now names other bytes: the Hook runs them, with no change of its own.
    catalog.set("labeler", v2);
    let body = server.until(&[], loaded(v2)).await;
    assert_eq!(body["status"]["observedGeneration"], 1);
    // The Module gone: the Hook says so and runs nothing.
    catalog.remove("labeler");
    let body = server
        .until(&[], |b| condition(b, "Loaded")["status"] == "False")
        .await;
    assert_eq!(condition(&body, "Loaded")["reason"], "ModuleNotFound");
    assert!(body["status"].get("digest").is_none(), "{body}");
}

#[tokio::test]
async fn a_shadow_hook_object_runs_beside_a_hook_of_the_directory_and_shows_its_divergences() {
    let modules = tempfile::tempdir().unwrap();
    std::fs::copy(
        operon_tests::ANNOTATOR,
        modules.path().join("annotator.wasm"),
    )
    .unwrap();
    let cluster = Arc::new(LocalCluster::new());
    cluster
        .load_yaml(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web-1, namespace: demo}\n",
            "pods",
        )
        .unwrap();
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(operon_tests::test_cache_dir()),
        ..SandboxConfig::default()
    })
    .unwrap();
    let loader = HookLoader::new(sandbox, CallLimits::default(), false);
    // The live hook: the pod labeler of the hooks directory.
    let live = loader
        .wasm_hook(
            "pod-labeler.wasm".into(),
            std::path::Path::new(operon_tests::POD_LABELER),
        )
        .unwrap();
    let (live, _) = operon_hooks::load::configure(live, cluster.as_ref())
        .await
        .unwrap();
    let metrics = Arc::new(Metrics::new().unwrap());
    let shadows = operon_hooks::shadow::Shadows::default();
    let main = Arc::new(
        Engine::new(vec![live], cluster.clone(), metrics.clone()).with_shadows(shadows.clone()),
    );
    let (_main, main_view) = tokio::sync::watch::channel(Some(main.clone()));
    let (client, api) = pair();
    let objects = Arc::new(HookObjects::new(
        client,
        ModuleLocator::new(Some(modules.path().to_owned())),
        loader,
        cluster.clone(),
    ));
    let (_leads, leading) = tokio::sync::watch::channel(true);
    let reporting = Reporting::new(
        metrics.clone(),
        EngineSet::default(),
        Default::default(),
        leading,
    )
    .with_shadows(shadows.clone(), main_view);
    let _running = AbortOnDrop::spawn(run(objects, reporting));
    let mut server = Server {
        api,
        watches: Vec::new(),
        writes: Vec::new(),
    };
    // The annotator as the shadow of the labeler: it may watch every Pod, as the
    // labeler does.
    let shadow = hook(
        1,
        "1",
        json!({"module": "annotator", "shadowOf": "pod-labeler.wasm",
               "permissions": {"watch": [{"apiVersion": "v1", "kind": "Pod", "namespaces": ["*"]}]}}),
    );
    let attached = server
        .until(&[shadow], |b| {
            condition(b, "Ready")["reason"] == "Shadowing"
        })
        .await;
    assert_eq!(attached["status"]["shadow"]["live"], "pod-labeler.wasm");
    assert_eq!(shadows.of("pod-labeler.wasm"), ["Hook/demo/labeler"]);

    // The live hook runs: the shadow runs on the same input, its annotation is compared
    // with the label and never applied.
    main.start().await.unwrap();
    main.drain(|_| {}).await;
    let diverged = server
        .until(&[], |b| {
            b["status"]["shadow"]["diverged"].as_u64() >= Some(1)
        })
        .await;
    let last = &diverged["status"]["shadow"]["lastDivergence"];
    assert_eq!(last["binding"], "pods");
    assert_eq!(last["object"], "Pod demo/web-1");
    assert!(
        last["differences"][0]
            .as_str()
            .unwrap()
            .starts_with("patches: live "),
        "{last}"
    );
    let pod = cluster.objects().into_iter().next().unwrap();
    assert_eq!(pod["metadata"]["labels"]["operon.dev/seen"], "true");
    assert!(
        pod["metadata"]["annotations"].is_null(),
        "the shadow's patch was applied: {pod}"
    );
    assert!(
        metrics
            .shadow_runs_total
            .with_label_values(&["Hook/demo/labeler", "pod-labeler.wasm", "diverged"])
            .get()
            >= 1
    );
}

/// A verification configuration requiring signatures by `key`, written in `dir`.
fn requiring_key(
    dir: &std::path::Path,
    key: &operon_store::keys::SigningKey,
) -> Arc<operon_store::verification::VerificationConfig> {
    let pem: String = (key.public_key().to_pem().lines())
        .map(|l| format!("      {l}\n"))
        .collect();
    let path = dir.join("verification.yaml");
    std::fs::write(
        &path,
        format!("apiVersion: v1\nallOf:\n  - kind: pubKey\n    owner: release\n    key: |\n{pem}"),
    )
    .unwrap();
    Arc::new(operon_store::verification::VerificationConfig::load(&path).unwrap())
}

#[tokio::test]
async fn a_hook_runs_a_signed_oci_module_and_refuses_an_unsigned_or_tampered_one() {
    use operon_store::keys::SigningKey;
    use operon_store::oci::{OciClient, OciOptions, RegistryAuth, SignRequest};
    use operon_store::oci_modules::{AllowList, OciModules};
    use operon_tests::registry::FakeRegistry;

    let registry = FakeRegistry::new(None);
    let host = registry.serve().await;
    let labeler = std::fs::read(operon_tests::POD_LABELER).unwrap();
    registry.publish_wasm("team/labeler", "1", &labeler);
    let mut changed = labeler.clone();
    changed.extend_from_slice(&[0x00, 0x04, 0x01, b'x', b'v', b'2']);
    let tampered = registry.publish_wasm("team/labeler", "tampered", &changed);
    let options = OciOptions {
        extra_ca_pem: Vec::new(),
        plain_http: vec![host.clone()],
    };
    let dir = tempfile::tempdir().unwrap();
    let (key, _) = SigningKey::generate().unwrap();
    let blobs = operon_store::BlobStore::open(dir.path().join("store"), 64 << 20).unwrap();
    let oci = OciModules::new(blobs, options.clone(), AllowList::new([host.clone()]))
        .with_verification(requiring_key(dir.path(), &key));
    let cluster = Arc::new(LocalCluster::new());
    cluster
        .load_yaml(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web-1, namespace: demo}\n",
            "pods",
        )
        .unwrap();
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(operon_tests::test_cache_dir()),
        ..SandboxConfig::default()
    })
    .unwrap();
    let (client, api) = pair();
    let objects = HookObjects::new(
        client,
        ModuleLocator::new(None).with_oci(Arc::new(oci)),
        HookLoader::new(sandbox, CallLimits::default(), false),
        cluster.clone(),
    );
    let (_leads, leading) = tokio::sync::watch::channel(true);
    let _running = AbortOnDrop::spawn(run(
        Arc::new(objects),
        Reporting::new(
            Arc::new(Metrics::new().unwrap()),
            Default::default(),
            Default::default(),
            leading,
        ),
    ));
    let mut server = Server {
        api,
        watches: Vec::new(),
        writes: Vec::new(),
    };
    let spec = |module: &str| {
        json!({"module": module,
               "overrides": {"kubernetes": [{"name": "pods", "namespaces": ["demo"]}]},
               "permissions": {"watch": [{"apiVersion": "v1", "kind": "Pod"}],
                               "patch": [{"apiVersion": "v1", "kind": "Pod", "operations": ["MergePatch"]}]}})
    };
    let tag = format!("oci://{host}/team/labeler:1");

    // Unsigned: not loaded, the reason in its condition; tried again (a signature
    // may come).
    let refused = server
        .until(&[hook(1, "1", spec(&tag))], |b| {
            condition(b, "Loaded")["status"] == "False"
        })
        .await;
    let loaded = condition(&refused, "Loaded");
    assert_eq!(loaded["reason"], "SignatureNotVerified", "{refused}");
    let message = loaded["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "spec.module: {tag}: signature not verified: manifest sha256:"
        )) && message.contains("has no signature")
            && message.ends_with("(tried again in 5s)"),
        "{message}"
    );
    assert_eq!(label(&cluster, "web-1"), Value::Null);

    // Signed: the next try loads it, and it runs.
    OciClient::new(&options)
        .sign(
            &tag,
            &key,
            &SignRequest::default(),
            &RegistryAuth::Anonymous,
        )
        .await
        .unwrap();
    let ready = server
        .until(&[], |b| condition(b, "Ready")["status"] == "True")
        .await;
    assert_eq!(condition(&ready, "Loaded")["status"], "True");
    let digest = operon_sandbox::ModuleDigest::of(&labeler);
    assert_eq!(ready["status"]["digest"], digest.to_string());
    let started = std::time::Instant::now();
    while label(&cluster, "web-1") != "true" {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "web-1 was not labelled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Changed to other bytes under the first one's signatures: refused for good.
    let hex = |digest: &str| digest.trim_start_matches("sha256:").to_owned();
    let signed_manifest = registry
        .manifest("team/labeler:1")
        .map(|m| operon_tests::registry::sha256(&m))
        .unwrap();
    let signatures = registry
        .manifest(&format!(
            "team/labeler:sha256-{}.sig",
            hex(&signed_manifest)
        ))
        .unwrap();
    registry.put_manifest(
        "team/labeler",
        &format!("sha256-{}.sig", hex(&tampered)),
        &signatures,
    );
    let tampered_tag = format!("oci://{host}/team/labeler:tampered");
    server.event("MODIFIED", hook(2, "2", spec(&tampered_tag)));
    let refused = server
        .until(&[], |b| {
            condition(b, "Loaded")["status"] == "False" && b["status"]["observedGeneration"] == 2
        })
        .await;
    let loaded = condition(&refused, "Loaded");
    assert_eq!(loaded["reason"], "SignatureNotVerified", "{refused}");
    let message = loaded["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "it signs manifest {signed_manifest}, not this one"
        )) && !message.contains("tried again"),
        "{message}"
    );
    assert!(refused["status"].get("digest").is_none(), "{refused}");
}
