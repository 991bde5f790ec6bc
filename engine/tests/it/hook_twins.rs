//! A shell-operator bash hook and its wasm twin, run through `operon hook test` on the
//! same scenario, must give the same binding contexts, patches, metrics and objects:
//! the engine cannot tell a script hook from a wasm hook.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
        .display()
        .to_string()
}

/// `operon hook test HOOK ARGS... -o json`, which must succeed; its report.
fn run_hook_test(hook: &str, args: &[&str]) -> Value {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(["hook", "test", hook])
        .args(args)
        .args(["-o", "json"])
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .env("HOME", home.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{hook}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn hook_test(hook: &str) -> Value {
    run_hook_test(
        hook,
        &[
            "--objects",
            &repo("operations/examples/hooks/pods.yaml"),
            "--event",
            &format!("added:{}", repo("operations/examples/hooks/new-pod.yaml")),
            "--schedule",
            "resync",
        ],
    )
}

/// Drops what differs between two runs of the same scenario by nature: server-assigned
/// uids and creation times, timings, logs and captured output.
fn comparable(mut value: Value) -> Value {
    let keys = [
        "uid",
        "creationTimestamp",
        "elapsedMs",
        "logs",
        "stdout",
        "stderr",
    ];
    if let Some(map) = value.as_object_mut() {
        map.values_mut()
            .for_each(|v| operon_tests::without_keys(v, &keys));
        if let Some(Value::Array(runs)) = map.get_mut("runs") {
            for run in runs {
                if let Some(run) = run.as_object_mut() {
                    run.remove("hook");
                }
            }
        }
    }
    value
}

#[test]
fn pod_labeler_in_bash_and_in_wasm_behave_identically() {
    let bash = hook_test(&repo("operations/fixtures/shell-hooks/pod-labeler.sh"));
    let wasm = hook_test(operon_tests::POD_LABELER);
    assert_eq!(bash["runs"].as_array().unwrap().len(), 5);
    assert_eq!(comparable(bash), comparable(wasm));
}

/// The validating answers `operon hook test --review` prints for `hook` on `review`.
fn validating_answer(hook: &str, review: &Value) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("review.json");
    std::fs::write(&file, review.to_string()).unwrap();
    let binding = format!("images.operon.dev:{}", file.display());
    let report = run_hook_test(hook, &["--review", &binding]);
    report["runs"][0]["validating"].clone()
}

#[test]
fn the_admission_hook_in_bash_and_in_wasm_answer_alike() {
    let review = |images: &[&str]| {
        let containers: Vec<Value> = images
            .iter()
            .enumerate()
            .map(|(i, image)| serde_json::json!({"name": format!("c{i}"), "image": image}))
            .collect();
        serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "operation": "CREATE",
                        "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "object": {"metadata": {"name": "p"}, "spec": {"containers": containers}}}})
    };
    let cases = [
        review(&["registry.example.com/web:1.4"]),
        review(&[
            "registry.example.com/web:latest",
            "registry.example.com/side:1",
        ]),
        review(&[
            "docker.io/nginx:1.27",
            "registry.example.com/web:1",
            "quay.io/x:2",
        ]),
    ];
    let bash = repo("operations/fixtures/shell-hooks/admission.sh");
    for case in &cases {
        let from_bash = validating_answer(&bash, case);
        let from_wasm = validating_answer(operon_tests::ADMISSION, case);
        assert_eq!(from_bash, from_wasm, "{case}");
    }
    let denied = validating_answer(operon_tests::ADMISSION, &cases[2]);
    assert_eq!(denied["allowed"], false);
    assert_eq!(
        denied["message"],
        "only images from registry.example.com are allowed: docker.io/nginx:1.27, quay.io/x:2"
    );
}

/// The answer `operon hook test --review` says the server would send for `hook`'s
/// mutating binding, and the object after the patch.
fn mutating_answer(hook: &str, review: &Value) -> (Value, Value) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("review.json");
    std::fs::write(&file, review.to_string()).unwrap();
    let binding = format!("defaults.operon.dev:{}", file.display());
    let report = run_hook_test(hook, &["--review", &binding]);
    let answer = &report["reviews"][0];
    (answer["answer"].clone(), answer["patchedObject"].clone())
}

#[test]
fn the_mutating_hook_in_bash_and_in_wasm_answer_alike_through_the_engine() {
    let review = |object: Value| {
        serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "operation": "CREATE",
                        "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "object": object}})
    };
    let bare = review(serde_json::json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a", "image": "x"},
                                {"name": "b", "image": "y", "resources": {"limits": {"memory": "1Gi"}}}]}}));
    let done = review(serde_json::json!({
        "metadata": {"name": "p", "labels": {"operon.dev/mutated": "true"}},
        "spec": {"containers": [{"name": "a", "image": "x", "resources": {"limits": {"memory": "64Mi"}}}]}}));
    let bash = repo("operations/fixtures/shell-hooks/mutating.sh");
    for case in [&bare, &done] {
        let from_bash = mutating_answer(&bash, case);
        let from_wasm = mutating_answer(operon_tests::MUTATING, case);
        assert_eq!(from_bash, from_wasm, "{case}");
    }
    let (answer, patched) = mutating_answer(operon_tests::MUTATING, &bare);
    assert_eq!(answer["response"]["allowed"], true);
    assert_eq!(answer["response"]["patchType"], "JSONPatch");
    assert_eq!(patched["metadata"]["labels"]["operon.dev/mutated"], "true");
    assert_eq!(
        patched["spec"]["containers"][0]["resources"]["limits"]["memory"],
        "256Mi"
    );
    assert_eq!(
        patched["spec"]["containers"][1]["resources"]["limits"]["memory"],
        "1Gi"
    );
    // Nothing to change: allowed with no patch and no patched object.
    let (answer, patched) = mutating_answer(operon_tests::MUTATING, &done);
    assert_eq!(
        answer["response"],
        serde_json::json!({"uid": "u", "allowed": true})
    );
    assert!(patched.is_null());
}

/// The ConversionReview `operon hook test --review` says the server would send for
/// `hook`'s conversion binding `alpha-v1` on `review`.
fn conversion_answer(hook: &str, review: &Value) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("review.json");
    std::fs::write(&file, review.to_string()).unwrap();
    let binding = format!("alpha-v1:{}", file.display());
    let report = run_hook_test(hook, &["--review", &binding]);
    report["reviews"][0]["answer"].clone()
}

#[test]
fn the_conversion_hook_in_bash_and_in_wasm_answer_alike_through_the_engine() {
    const V1ALPHA1: &str = "stable.example.com/v1alpha1";
    const V1: &str = "stable.example.com/v1";
    let review = |desired: &str, objects: Vec<Value>| {
        serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "u", "desiredAPIVersion": desired, "objects": objects}})
    };
    let crontab = |version: &str, name: &str, spec: Value| {
        serde_json::json!({"apiVersion": version, "kind": "CronTab",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
            "spec": spec})
    };
    let to_v1 = review(
        V1,
        vec![
            crontab(
                V1ALPHA1,
                "nightly",
                serde_json::json!({"cron": ["0", "3", "*", "*", "*"], "imageName": "backup:1", "replicas": 2}),
            ),
            crontab(
                V1ALPHA1,
                "often",
                serde_json::json!({"cron": ["*", "*", "*", "*", "*/5"]}),
            ),
        ],
    );
    let to_v1alpha1 = review(
        V1ALPHA1,
        vec![crontab(
            V1,
            "nightly",
            serde_json::json!({"cronSpec": "0 3 * * 1-5", "image": "backup:2"}),
        )],
    );
    let malformed = review(
        V1,
        vec![
            crontab(
                V1ALPHA1,
                "fine",
                serde_json::json!({"cron": ["*", "*", "*", "*", "*"]}),
            ),
            crontab(
                V1ALPHA1,
                "short",
                serde_json::json!({"cron": ["*", "*", "*", "*"]}),
            ),
        ],
    );
    // Every way an object can be wrong fails the review with the same message.
    let more_malformed = [
        review(
            V1ALPHA1,
            vec![crontab(V1, "text", serde_json::json!({"cronSpec": 5}))],
        ),
        review(
            V1ALPHA1,
            vec![crontab(
                V1,
                "four",
                serde_json::json!({"cronSpec": " * *  * * "}),
            )],
        ),
        review(
            V1,
            vec![crontab(
                V1ALPHA1,
                "typed",
                serde_json::json!({"cron": ["*", "*", 1, "*", "*"]}),
            )],
        ),
        review(
            V1,
            vec![crontab(
                V1ALPHA1,
                "spaced",
                serde_json::json!({"cron": ["*", "*", "*", "1 2", "*"]}),
            )],
        ),
        review(
            V1,
            vec![
                serde_json::json!({"apiVersion": V1ALPHA1, "kind": "CronTab", "metadata": {"name": "bare"}}),
            ],
        ),
        review(
            V1,
            vec![crontab(
                "stable.example.com/v1beta1",
                "beta",
                serde_json::json!({}),
            )],
        ),
        serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "u", "objects": []}}),
    ];
    let bash = repo("operations/fixtures/shell-hooks/conversion.sh");
    let converted = [&to_v1, &to_v1alpha1].map(|case| (case, "Success"));
    let failed = std::iter::once(&malformed)
        .chain(&more_malformed)
        .map(|case| (case, "Failure"));
    for (case, status) in converted.into_iter().chain(failed) {
        let from_bash = conversion_answer(&bash, case);
        let from_wasm = conversion_answer(operon_tests::CONVERSION, case);
        assert_eq!(from_bash, from_wasm, "{case}");
        assert_eq!(from_wasm["response"]["result"]["status"], status, "{case}");
    }

    let answer = conversion_answer(operon_tests::CONVERSION, &to_v1);
    assert_eq!(
        answer,
        serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": {"uid": "u", "result": {"status": "Success"}, "convertedObjects": [
            crontab(V1, "nightly", serde_json::json!({"cronSpec": "0 3 * * *", "image": "backup:1", "replicas": 2})),
            crontab(V1, "often", serde_json::json!({"cronSpec": "* * * * */5"})),
        ]}})
    );
    let answer = conversion_answer(operon_tests::CONVERSION, &to_v1alpha1);
    assert_eq!(
        answer["response"]["convertedObjects"],
        serde_json::json!([crontab(
            V1ALPHA1,
            "nightly",
            serde_json::json!({"cron": ["0", "3", "*", "*", "1-5"], "imageName": "backup:2"})
        )])
    );
    let answer = conversion_answer(operon_tests::CONVERSION, &malformed);
    assert_eq!(
        answer["response"],
        serde_json::json!({"uid": "u", "convertedObjects": [], "result": {"status": "Failure",
            "message": "cannot convert default/short to stable.example.com/v1: spec.cron must hold 5 fields, got 4"}})
    );
}

#[test]
fn the_example_conversion_review_is_answered() {
    let review = repo("operations/examples/hooks/conversion-review.yaml");
    let binding = format!("alpha-v1:{review}");
    let bash = repo("operations/fixtures/shell-hooks/conversion.sh");
    let from_bash = run_hook_test(&bash, &["--review", &binding]);
    let from_wasm = run_hook_test(operon_tests::CONVERSION, &["--review", &binding]);
    let answer = &from_wasm["reviews"][0]["answer"]["response"];
    assert_eq!(answer["result"]["status"], "Success");
    let specs: Vec<&Value> = (answer["convertedObjects"].as_array().unwrap().iter())
        .map(|object| &object["spec"])
        .collect();
    assert_eq!(specs[0]["cronSpec"], "0 3 * * *");
    assert_eq!(specs[1]["cronSpec"], "* * * * */5");
    assert_eq!(
        from_bash["reviews"][0]["answer"],
        from_wasm["reviews"][0]["answer"]
    );
    assert_eq!(from_bash["configuration"], from_wasm["configuration"]);
}
