//! Every published version of the `operon:engine` WIT contract keeps working: guests
//! built against 0.1.0 and 0.2.0 (without the SDK, from `wit/legacy/`) load, are
//! detected as their version, and their exports and host calls behave as before; guests
//! of 0.2.0 and later use what it added (mutating bindings), guests of 0.3.0 what 0.3.0
//! added (the runner context's cluster, the `values` interface, lifecycle bindings).
//! The mutating example and its shell twin build the same patch.

use crate::common::{block_on, limits};
use operon::model::{
    BindingContext, BindingType, HookConfig, HookInput, HookOutput, LogLevel, LogRecord,
    MetricOperation, ObjectAndFilter, ObjectRef, OperationInput, PatchOperation, PatchSpec,
    RunnerContext, Sample, WatchEvent, WebhookRule,
};
use operon::sandbox::{CallReport, HookModule, Sandbox, SandboxConfig, WitVersion};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn sandbox() -> Sandbox {
    Sandbox::new(SandboxConfig {
        max_concurrent_calls: 4,
        cache_dir: Some(operon_tests::test_cache_dir()),
        ..SandboxConfig::default()
    })
    .expect("engine")
}

fn runner_context() -> RunnerContext {
    RunnerContext {
        name: "wit-versions".to_owned(),
        dry_run: false,
        timeout_ms: 5_000,
        node: None,
        namespace: Some("shop".to_owned()),
        owner: None,
        cluster: Some("prod-eu".to_owned()),
    }
}

fn load_hook(sandbox: &Sandbox, path: &str) -> HookModule {
    sandbox.load_hook_file(path.as_ref()).expect("hook loads")
}

fn configure(sandbox: &Sandbox, module: &HookModule) -> HookConfig {
    let report = block_on(sandbox.configure_hook(module, "configure", &limits()));
    report.outcome.expect("configure succeeds")
}

/// Handles `contexts` and checks the input comes back unchanged.
fn handle(
    sandbox: &Sandbox,
    module: &HookModule,
    contexts: Vec<BindingContext>,
) -> CallReport<HookOutput> {
    let input = HookInput {
        context: runner_context(),
        binding_contexts: contexts,
    };
    block_on(sandbox.handle_hook(module, &input, &limits()))
}

fn pod(name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop", "labels": labels},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
    })
}

fn context(binding: &str, type_: BindingType) -> BindingContext {
    BindingContext {
        binding: binding.to_owned(),
        type_,
        group: None,
        watch_event: None,
        object: None,
        objects: vec![],
        snapshots: vec![],
        review: None,
    }
}

fn event(object: &Value) -> BindingContext {
    BindingContext {
        watch_event: Some(WatchEvent::Added),
        object: Some(ObjectAndFilter {
            object: Some(object.to_string().into()),
            filter_result: None,
        }),
        ..context("pods", BindingType::Event)
    }
}

fn admission_review(binding: &str, type_: BindingType, object: &Value) -> BindingContext {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "operation": "CREATE",
            "namespace": "shop",
            "object": object,
        },
    });
    BindingContext {
        review: Some(review.to_string()),
        ..context(binding, type_)
    }
}

fn pod_rule() -> WebhookRule {
    WebhookRule {
        operations: vec!["CREATE".to_owned()],
        api_groups: vec![String::new()],
        api_versions: vec!["v1".to_owned()],
        resources: vec!["pods".to_owned()],
        scope: Some("Namespaced".to_owned()),
    }
}

#[test]
fn sdk_guests_are_detected_as_the_current_version() {
    let sandbox = sandbox();
    let hook = load_hook(&sandbox, operon_tests::POD_LABELER);
    assert_eq!(hook.wit_version(), WitVersion::CURRENT);
    let operation = sandbox
        .load_operation_file(operon_tests::ECHO.as_ref())
        .unwrap();
    assert_eq!(operation.wit_version(), WitVersion::V0_3);
    assert_eq!(WitVersion::CURRENT, WitVersion::V0_3);
}

#[test]
fn a_0_3_0_operation_sees_the_cluster() {
    let sandbox = sandbox();
    let module = sandbox
        .load_operation_file(operon_tests::ECHO.as_ref())
        .unwrap();
    let input = OperationInput {
        context: runner_context(),
        parameters: BTreeMap::new(),
        results: BTreeMap::new(),
        args: vec![],
    };
    let output = block_on(sandbox.run_operation(&module, input, &limits()))
        .outcome
        .expect("run succeeds");
    assert_eq!(output.results["context.cluster"], "prod-eu");
    assert_eq!(output.results["context.namespace"], "shop");
}

#[test]
fn a_0_2_0_operation_runs_with_the_0_2_0_types() {
    let sandbox = sandbox();
    let module = sandbox
        .load_operation_file(operon_tests::V0_2_OPERATION.as_ref())
        .expect("0.2.0 operation loads");
    assert_eq!(module.wit_version(), WitVersion::V0_2);
    let input = OperationInput {
        context: runner_context(),
        parameters: BTreeMap::new(),
        results: BTreeMap::new(),
        args: vec![],
    };
    let report = block_on(sandbox.run_operation(&module, input, &limits()));
    let output = report.outcome.expect("run succeeds");
    assert_eq!(output.results["contract"], "0.2.0");
    assert_eq!(output.results["context.name"], "wit-versions");
    assert_eq!(output.results["context.namespace"], "shop");
    assert_eq!(report.logs[0].message, "0.2.0 run");
}

#[test]
fn a_0_3_0_hook_declares_lifecycle_bindings_only_for_addon_modules() {
    let sandbox = sandbox();
    let module = load_hook(&sandbox, operon_tests::VALUES_HOOK);
    assert_eq!(module.wit_version(), WitVersion::V0_3);
    let report = block_on(sandbox.configure_addon_hook(&module, "configure", &limits()));
    let (_, lifecycle) = report.outcome.expect("configure succeeds");
    assert_eq!(lifecycle, [("beforeHelm".to_owned(), 10.0)]);
    // Anywhere else a lifecycle binding is an error naming it.
    let report = block_on(sandbox.configure_hook(&module, "configure", &limits()));
    let err = report.outcome.unwrap_err().to_string();
    assert!(
        err.contains("beforeHelm") && err.contains("addon modules"),
        "{err}"
    );
    // A hook of an older version declares none.
    let legacy = load_hook(&sandbox, operon_tests::LEGACY_HOOK);
    let report = block_on(sandbox.configure_addon_hook(&legacy, "configure", &limits()));
    assert!(report.outcome.unwrap().1.is_empty());
}

#[test]
fn a_0_3_0_hook_reads_and_patches_its_values() {
    let sandbox = sandbox();
    let module = load_hook(&sandbox, operon_tests::VALUES_HOOK);
    let values = operon::sandbox::HookValues {
        values: json!({"global": {}, "echo": {"replicas": 3, "patchConfig": true}}).to_string(),
        config_values: json!({"global": {}}).to_string(),
    };
    let input = HookInput {
        context: runner_context(),
        binding_contexts: vec![context("beforeHelm", BindingType::OnStartup)],
    };
    let report =
        block_on(sandbox.handle_hook_with_values(&module, &input, Some(values), &limits()));
    let output = report.outcome.expect("handle succeeds");
    let seen: Value =
        serde_json::from_str(output.validating.unwrap().message.as_deref().unwrap()).unwrap();
    assert_eq!(seen["echo"]["replicas"], 3);
    let patches = serde_json::to_value(&report.values_patches.values).unwrap();
    assert_eq!(
        patches,
        json!([
            {"op": "add", "path": "/echo/internal", "value": {}},
            {"op": "add", "path": "/echo/internal/wasmReplicas", "value": 6},
            {"op": "add", "path": "/echo/internal/wasmRuns", "value": 1},
        ])
    );
    let config = serde_json::to_value(&report.values_patches.config_values).unwrap();
    assert_eq!(
        config,
        json!([
            {"op": "add", "path": "/echo", "value": {}},
            {"op": "add", "path": "/echo/wasmSeen", "value": true},
        ])
    );
    // Outside an addon module the interface answers with an error, which fails the run.
    let report = block_on(sandbox.handle_hook(&module, &input, &limits()));
    let err = report.outcome.unwrap_err().to_string();
    assert!(err.contains("addon modules"), "{err}");
    assert!(report.values_patches.values.is_empty());
}

#[test]
fn a_legacy_hook_is_configured_with_the_0_1_0_types() {
    let sandbox = sandbox();
    let module = load_hook(&sandbox, operon_tests::LEGACY_HOOK);
    assert_eq!(module.wit_version(), WitVersion::V0_1);

    let config = configure(&sandbox, &module);
    let [pods] = config.kubernetes.as_slice() else {
        panic!("one kubernetes binding: {config:?}");
    };
    assert_eq!(pods.name, "pods");
    assert_eq!(pods.kind, "Pod");
    assert_eq!(pods.api_version.as_deref(), Some("v1"));
    assert_eq!(
        pods.execute_hook_on_event,
        Some(vec![WatchEvent::Added, WatchEvent::Modified])
    );
    let [validating] = config.kubernetes_validating.as_slice() else {
        panic!("one validating binding: {config:?}");
    };
    assert_eq!(validating.name, "legacy.operon.dev");
    assert_eq!(validating.rules, [pod_rule()]);
    assert_eq!(validating.failure_policy.as_deref(), Some("Ignore"));
    assert_eq!(validating.timeout_seconds, Some(5));
    // What 0.1.0 cannot say gets the defaults.
    assert_eq!(validating.side_effects, None);
    assert!(validating.match_conditions.is_empty());
    assert!(config.kubernetes_mutating.is_empty());
    assert!(config.schedule.is_empty() && config.kubernetes_conversion.is_empty());
}

#[test]
fn a_legacy_hook_patches_logs_and_counts_through_the_0_1_0_imports() {
    let sandbox = sandbox();
    let module = load_hook(&sandbox, operon_tests::LEGACY_HOOK);
    let report = handle(
        &sandbox,
        &module,
        vec![event(&pod("web-0", json!({"app": "web"})))],
    );
    let output = report.outcome.expect("handle succeeds");
    assert_eq!(output, HookOutput::default());

    let [PatchOperation::MergePatch(spec)] = report.patches.as_slice() else {
        panic!("one merge patch: {:?}", report.patches);
    };
    assert_eq!(
        *spec,
        PatchSpec {
            target: ObjectRef {
                api_version: Some("v1".to_owned()),
                kind: "Pod".to_owned(),
                namespace: Some("shop".to_owned()),
                name: "web-0".to_owned(),
            },
            patch: spec.patch.clone(),
            subresource: None,
            ignore_missing_object: true,
        }
    );
    let patch: Value = serde_json::from_str(&spec.patch).unwrap();
    assert_eq!(
        patch,
        json!({"metadata": {"annotations": {"operon.dev/contract": "0.1.0"}}})
    );
    assert_eq!(
        report.logs,
        [LogRecord {
            level: LogLevel::Info,
            message: "annotated".to_owned(),
            fields: vec![("pod".to_owned(), "web-0".to_owned())],
        }]
    );
    assert_eq!(
        report.metrics,
        [MetricOperation::Add(Sample {
            name: "legacy_hook_pods_total".to_owned(),
            value: 1.0,
            labels: vec![],
            group: None,
        })]
    );
}

#[test]
fn a_legacy_hook_answers_admission_reviews() {
    let sandbox = sandbox();
    let module = load_hook(&sandbox, operon_tests::LEGACY_HOOK);
    let answer = |object: Value, type_| {
        let report = handle(
            &sandbox,
            &module,
            vec![admission_review("legacy.operon.dev", type_, &object)],
        );
        assert!(report.patches.is_empty() && report.metrics.is_empty());
        report
            .outcome
            .expect("handle succeeds")
            .validating
            .expect("an admission answer")
    };

    let admitted = answer(pod("web-0", json!({"app": "web"})), BindingType::Validating);
    assert!(admitted.allowed);
    assert_eq!(admitted.message, None);

    let denied = answer(pod("stray", json!({})), BindingType::Validating);
    assert!(!denied.allowed);
    assert_eq!(denied.message.as_deref(), Some("pods need an app label"));

    // The engine never sends a mutating context to a 0.1.0 hook (it cannot declare a
    // mutating binding); were it to, the hook would see an admission review to answer.
    let mutating = answer(pod("stray", json!({})), BindingType::Mutating);
    assert!(!mutating.allowed);
}

#[test]
fn a_legacy_operation_runs_with_the_0_1_0_types() {
    let sandbox = sandbox();
    let module = sandbox
        .load_operation_file(operon_tests::LEGACY_OPERATION.as_ref())
        .expect("legacy operation loads");
    assert_eq!(module.wit_version(), WitVersion::V0_1);
    let input = OperationInput {
        context: runner_context(),
        parameters: BTreeMap::from([("name".to_owned(), "operon".to_owned())]),
        results: BTreeMap::new(),
        args: vec![],
    };
    let report = block_on(sandbox.run_operation(&module, input, &limits()));
    let output = report.outcome.expect("run succeeds");
    assert_eq!(output.results["contract"], "0.1.0");
    assert_eq!(output.results["greeting"], "hello, operon");
    assert_eq!(report.logs.len(), 1);
    assert_eq!(report.logs[0].message, "legacy run");
}

#[test]
fn legacy_guests_are_refused_for_the_other_world() {
    let sandbox = sandbox();
    assert!(
        sandbox
            .load_operation_file(operon_tests::LEGACY_HOOK.as_ref())
            .is_err()
    );
    assert!(
        sandbox
            .load_hook_file(operon_tests::LEGACY_OPERATION.as_ref())
            .is_err()
    );
}

#[test]
fn an_sdk_hook_declares_a_mutating_binding() {
    // Mutating bindings came with 0.2.0; the SDK builds the current version.
    let sandbox = sandbox();
    let module = load_hook(&sandbox, operon_tests::MUTATING);
    assert_eq!(module.wit_version(), WitVersion::CURRENT);

    let config = configure(&sandbox, &module);
    assert!(config.kubernetes_validating.is_empty() && config.kubernetes.is_empty());
    let [binding] = config.kubernetes_mutating.as_slice() else {
        panic!("one mutating binding: {config:?}");
    };
    assert_eq!(binding.name, "defaults.operon.dev");
    assert_eq!(binding.rules, [pod_rule()]);
    assert_eq!(binding.failure_policy, None);
    assert_eq!(binding.reinvocation_policy, None);
}

/// The patch the wasm mutating example answers for `object`, parsed.
fn wasm_patch(sandbox: &Sandbox, module: &HookModule, object: &Value) -> Option<Value> {
    let report = handle(
        sandbox,
        module,
        vec![admission_review(
            "defaults.operon.dev",
            BindingType::Mutating,
            object,
        )],
    );
    assert!(report.patches.is_empty(), "an answer, not a cluster patch");
    let answer = report
        .outcome
        .expect("handle succeeds")
        .validating
        .expect("an admission answer");
    assert!(answer.allowed);
    answer
        .patch
        .map(|patch| serde_json::from_str(&patch).expect("the patch is JSON"))
}

#[test]
fn an_sdk_hook_answers_a_mutating_review_with_a_json_patch() {
    let sandbox = sandbox();
    let module = load_hook(&sandbox, operon_tests::MUTATING);

    let bare = json!({
        "metadata": {"name": "web-0", "namespace": "shop"},
        "spec": {"containers": [
            {"name": "app", "image": "nginx"},
            {"name": "sidecar", "resources": {"limits": {"memory": "64Mi"}}},
        ]},
    });
    assert_eq!(
        wasm_patch(&sandbox, &module, &bare),
        Some(json!([
            {"op": "add", "path": "/metadata/labels", "value": {}},
            {"op": "add", "path": "/metadata/labels/operon.dev~1mutated", "value": "true"},
            {"op": "add", "path": "/spec/containers/0/resources", "value": {}},
            {"op": "add", "path": "/spec/containers/0/resources/limits", "value": {}},
            {"op": "add", "path": "/spec/containers/0/resources/limits/memory", "value": "256Mi"},
        ]))
    );

    let done = json!({
        "metadata": {"name": "web-1", "labels": {"operon.dev/mutated": "true"}},
        "spec": {"containers": [{"name": "app", "resources": {"limits": {"memory": "1Gi"}}}]},
    });
    assert_eq!(wasm_patch(&sandbox, &module, &done), None);
}

/// The patch `operations/fixtures/shell-hooks/mutating.sh` answers for `object`, run
/// directly with bash (not through the engine), decoded from base64 and parsed.
fn shell_patch(object: &Value) -> Option<Value> {
    let dir = tempfile::tempdir().unwrap();
    let contexts = dir.path().join("contexts.json");
    let response = dir.path().join("response.json");
    let context = json!([{
        "binding": "defaults.operon.dev",
        "type": "Mutating",
        "review": {"request": {"uid": "1", "operation": "CREATE", "object": object}},
    }]);
    std::fs::write(&contexts, context.to_string()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../operations/fixtures/shell-hooks/mutating.sh");
    let status = Command::new("bash")
        .arg(&script)
        .env("BINDING_CONTEXT_PATH", &contexts)
        .env("VALIDATING_RESPONSE_PATH", &response)
        .status()
        .expect("bash runs");
    assert!(status.success(), "mutating.sh failed: {status}");
    let answer: Value = serde_json::from_slice(&std::fs::read(&response).unwrap()).unwrap();
    assert_eq!(answer["allowed"], true);
    let encoded = answer.get("patch")?.as_str().expect("a base64 string");
    let decoded = Command::new("jq")
        .args(["-rn", "--arg", "patch", encoded, "$patch | @base64d"])
        .output()
        .expect("jq runs");
    assert!(decoded.status.success());
    Some(serde_json::from_slice(&decoded.stdout).expect("the decoded patch is JSON"))
}

#[test]
fn the_mutating_example_and_its_shell_twin_build_the_same_patch() {
    let sandbox = sandbox();
    let module = load_hook(&sandbox, operon_tests::MUTATING);
    let pods = [
        json!({"metadata": {"name": "bare"}, "spec": {"containers": [{"name": "a"}]}}),
        json!({
            "metadata": {"name": "mixed", "labels": {"app": "web", "operon.dev/mutated": "no"}},
            "spec": {"containers": [
                {"name": "limited", "resources": {"limits": {"memory": "1Gi"}}},
                {"name": "cpu-only", "resources": {"limits": {"cpu": "1"}}},
                {"name": "requests-only", "resources": {"requests": {"memory": "64Mi"}}},
                {"name": "null", "resources": null},
            ]},
        }),
        json!({
            "metadata": {"name": "done", "labels": {"operon.dev/mutated": "true"}},
            "spec": {"containers": [{"resources": {"limits": {"memory": "128Mi"}}}]},
        }),
        json!({"spec": {}}),
    ];
    for pod in &pods {
        assert_eq!(
            wasm_patch(&sandbox, &module, pod),
            shell_patch(pod),
            "for {pod}"
        );
    }
}
