//! `operon test` end to end: the repository's own test files (example hooks in shell and
//! wasm, a Hook object, a shell hook calling the real kubectl, addon-operator modules, a
//! pipeline) pass; a wrong expectation fails with the difference, in the table, in JSON
//! and in JUnit XML; a wrong test file is named by file, line and field.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `operon test ARGS` with the built guests as the modules directory and the fake helm.
fn operon_test(args: &[&str], home: &Path) -> Output {
    let guests = Path::new(operon_tests::POD_LABELER).parent().unwrap();
    Command::new(env!("CARGO_BIN_EXE_operon"))
        .arg("test")
        .args(args)
        .arg("--modules")
        .arg(guests)
        .arg("--helm-binary")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/addons/helm"))
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .env("HOME", home)
        .current_dir(repository())
        .output()
        .expect("operon runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The tools the repository's test files need: kubectl for the Secret copier, Helm's
/// engine for the modules' charts (both installed by .ci/setup).
fn tools_installed() -> bool {
    let kubectl = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    let helm = Command::new("python3")
        .args(["-c", "import helm_python"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        kubectl && helm,
        "kubectl ({kubectl}) and helm-python-sdk ({helm}) are needed: run .ci/setup"
    );
    true
}

#[test]
fn the_repositorys_test_files_pass() {
    assert!(tools_installed());
    let home = tempfile::tempdir().unwrap();
    let junit = home.path().join("junit.xml");
    let out = operon_test(
        &[
            "operations",
            "-o",
            "json",
            "--junit",
            junit.to_str().unwrap(),
        ],
        home.path(),
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", text(&out.stderr));
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["passed"], true);
    let tests = report["tests"].as_array().unwrap();
    let files: std::collections::BTreeSet<&str> =
        tests.iter().map(|t| t["file"].as_str().unwrap()).collect();
    for expected in [
        "operations/fixtures/shell-hooks/pod-labeler.test.yaml",
        "operations/fixtures/shell-hooks/validating.test.yaml",
        "operations/fixtures/shell-hooks/rollout.test.yaml",
        "operations/fixtures/shell-hooks/conversion.test.yaml",
        "operations/pod-labeler/pod-labeler.test.yaml",
        "operations/examples/hooks/secret-copier/secret-copier.test.yaml",
        "operations/addon-modules/modules.test.yaml",
        "operations/fixtures/module-configs/module-configs.test.yaml",
        "operations/examples/node-diagnosis/node-diagnosis.test.yaml",
    ] {
        assert!(files.contains(expected), "{expected} not run: {files:?}");
    }
    let steps: usize = tests
        .iter()
        .map(|t| t["steps"].as_array().unwrap().len())
        .sum();
    assert!(steps >= 18, "{steps} steps");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("failures=\"0\" errors=\"0\""), "{xml}");
    assert_eq!(xml.matches("<testcase ").count(), steps, "{xml}");
}

/// A test of the shell pod labeler whose expectations are wrong in two places.
const WRONG: &str = r#"apiVersion: test.operon.dev/v1alpha1
kind: Test
name: wrong expectations
subject:
  hook: HOOK
objects:
- file: PODS
steps:
- start: {}
  expect:
    patches:
    - {name: web-9}
- schedule: resync
  expect:
    objects:
    - {apiVersion: v1, kind: Pod, metadata: {name: web-1, namespace: default, labels: {operon.dev/seen: "no"}}}
    absent:
    - {apiVersion: v1, kind: Pod, metadata: {name: db-1, namespace: default}}
"#;

#[test]
fn a_wrong_expectation_fails_with_its_difference() {
    let home = tempfile::tempdir().unwrap();
    let repo = repository();
    let file = home.path().join("wrong.test.yaml");
    let test = WRONG
        .replace(
            "HOOK",
            &repo
                .join("operations/fixtures/shell-hooks/pod-labeler.sh")
                .display()
                .to_string(),
        )
        .replace(
            "PODS",
            &repo
                .join("operations/examples/hooks/pods.yaml")
                .display()
                .to_string(),
        );
    std::fs::write(&file, test).unwrap();
    let junit = home.path().join("junit.xml");
    let out = operon_test(
        &[file.to_str().unwrap(), "--junit", junit.to_str().unwrap()],
        home.path(),
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    for line in [
        "FAIL ",
        "wrong expectations / 1. start",
        "       patches[0].name: expected \"web-9\", got \"web-1\"",
        "wrong expectations / 2. schedule resync",
        "       objects[0] (Pod default/web-1): .metadata.labels[\"operon.dev/seen\"]: expected \"no\", got \"true\"",
        "       absent[0] (Pod default/db-1): is in the cluster",
        "1 test: 0 passed, 1 failed (2 steps, 2 failed)",
    ] {
        assert!(stdout.contains(line), "{line:?} not in:\n{stdout}");
    }
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("failures=\"2\""), "{xml}");
    assert!(
        xml.contains("patches[0].name: expected &quot;web-9&quot;, got &quot;web-1&quot;"),
        "{xml}"
    );

    let out = operon_test(&[file.to_str().unwrap(), "-o", "json"], home.path());
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(report["passed"], false);
    let steps = report["tests"][0]["steps"].as_array().unwrap();
    assert_eq!(
        steps[1]["failures"].as_array().unwrap().len(),
        2,
        "{report:#}"
    );
    assert_eq!(steps[1]["runs"][0]["status"], "Succeeded");
}

#[test]
fn a_wrong_test_file_is_named_by_line_and_field() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("typo.test.yaml");
    std::fs::write(
        &file,
        "apiVersion: test.operon.dev/v1alpha1\nkind: Test\nname: typo\nsubject: {hook: x.sh}\nsteps:\n- schedule: resync\n  expect:\n    patchez: []\n",
    )
    .unwrap();
    let out = operon_test(&[file.to_str().unwrap()], home.path());
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.starts_with("ERROR ")
            && stdout.contains(
                "typo.test.yaml:8: steps[0].expect.patchez: unknown field `patchez`, expected one of"
            ),
        "{stdout}"
    );

    let out = operon_test(&[home.path().join("none").to_str().unwrap()], home.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("cannot read"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_schema_describes_test_files() {
    let home = tempfile::tempdir().unwrap();
    let out = operon_test(&["--schema"], home.path());
    assert!(out.status.success());
    let schema: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(schema["title"], "Test");
    let shipped: Value = serde_json::from_str(
        &std::fs::read_to_string(repository().join("docs/src/reference/test-file.schema.json"))
            .unwrap(),
    )
    .unwrap();
    assert!(
        schema == shipped,
        "docs/src/reference/test-file.schema.json is out of date: operon test --schema > it"
    );
}
