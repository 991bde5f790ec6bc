//! `operon modules values|render|run` end to end on the example modules directory
//! (`operations/addon-modules`) against the local cluster. Charts are rendered by
//! Helm's engine from `helm-python-sdk` (failing, naming it, when it is missing).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../operations/addon-modules")
}

/// `operon ARGS` on the example modules directory, its objects and the fake helm.
fn command(args: &[&str]) -> Command {
    let ex = example();
    let mut command = Command::new(env!("CARGO_BIN_EXE_operon"));
    command
        .args(args)
        .arg("--modules-dir")
        .arg(ex.join("modules"))
        .arg("--global-hooks-dir")
        .arg(ex.join("global-hooks"))
        .args(["-n", "operon-demo", "--objects"])
        .arg(ex.join("configmap.yaml"))
        .arg("--helm-binary")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/addons/helm"));
    command
}

fn operon(args: &[&str]) -> Output {
    command(args).output().expect("operon runs")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn values_show_each_key_with_its_source() {
    let out = stdout(&operon(&["modules", "values", "echo-server", "-o", "json"]));
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["values"]["echoServer"]["replicas"], 2);
    assert_eq!(
        v["values"]["echoServer"]["internal"]["greeting"],
        "hi from demo"
    );
    let source = |path: &str| {
        v["sources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["path"] == path)
            .map(|s| s["source"].as_str().unwrap().to_owned())
    };
    assert_eq!(source("echoServer.replicas").as_deref(), Some("ConfigMap"));
    assert_eq!(
        source("echoServer.service.port").as_deref(),
        Some("module values.yaml")
    );
    assert_eq!(
        source("echoServer.internal.greeting").as_deref(),
        Some("hook patch")
    );

    // Without hooks, the greeting is not there.
    let out = stdout(&operon(&[
        "modules",
        "values",
        "echoServer",
        "--no-hooks",
        "-o",
        "json",
    ]));
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["values"]["echoServer"]["internal"], serde_json::json!({}));
}

#[test]
fn render_prints_the_objects_and_the_diff() {
    crate::e2e_support::require_helm_python();
    let out = stdout(&operon(&["modules", "render", "echo-server", "-o", "json"]));
    let objects: Vec<Value> = serde_json::from_str(&out).unwrap();
    let kinds: Vec<&str> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["Service", "Deployment"]);
    assert_eq!(objects[1]["metadata"]["namespace"], "operon-demo");
    assert_eq!(
        objects[1]["spec"]["template"]["spec"]["containers"][0]["args"][1],
        "-text=hi from demo"
    );
    let out = stdout(&operon(&["modules", "render", "echo-server", "--diff"]));
    assert_eq!(
        out,
        "+ create Service operon-demo/echo-server\n+ create Deployment operon-demo/echo-server\n"
    );
}

#[test]
fn run_prints_the_queue_and_a_dry_run_applies_nothing() {
    crate::e2e_support::require_helm_python();
    let out = stdout(&operon(&["modules", "run", "--once", "--dry-run"]));
    let tasks: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_once(" queue: [")?.1.split_once(']'))
        .map(|(task, _)| task)
        .collect();
    assert_eq!(
        tasks,
        [
            "GlobalHookRun:onStartup:global/cluster-info.sh",
            "GlobalHookRun:beforeAll:global/cluster-info.sh",
            "DiscoverModules",
            "ModuleRun:echo-server",
            "ModuleRun:config-reporter",
            "GlobalHookRun:afterAll:global/cluster-info.sh",
        ]
    );
    assert!(
        out.contains("ModuleRun:echo-server: ok in ")
            && out.contains("dry run: + create Service operon-demo/echo-server; + create Deployment operon-demo/echo-server"),
        "{out}"
    );
    assert!(
        out.contains("operon_module_enabled{module=\"echo-server\"} 1"),
        "{out}"
    );
}

#[test]
fn an_unknown_module_is_named() {
    let out = operon(&["modules", "values", "nginx"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no module nginx in "), "{stderr}");
}

#[test]
fn render_refuses_values_required_for_helm_that_are_missing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let write = |path: &str, text: &str| {
        let path = d.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("modules/values.yaml", "ingressEnabled: true\n");
    write(
        "modules/001-ingress/openapi/config-values.yaml",
        "type: object\nx-required-for-helm: host\nproperties:\n  host: {type: string}\n",
    );
    write(
        "modules/001-ingress/manifests/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ingress\n",
    );
    let render = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_operon"))
            .args([
                "modules",
                "render",
                "ingress",
                "--no-hooks",
                "--modules-dir",
            ])
            .arg(d.join("modules"))
            .args(extra)
            .output()
            .unwrap()
    };
    let out = render(&[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("module ingress values for rendering (x-required-for-helm) are not valid")
            && stderr.contains("\"host\" is a required property"),
        "{stderr}"
    );
    // The values say nothing against it as config: `operon modules values` shows them.
    let out = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args([
            "modules",
            "values",
            "ingress",
            "--no-hooks",
            "--modules-dir",
        ])
        .arg(d.join("modules"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What a module's hook prints is in the log, one record per line with the hook, the
/// binding and the stream, as addon-operator and shell-operator log it.
#[test]
fn run_logs_what_hooks_print() {
    crate::e2e_support::require_helm_python();
    let out = command(&["modules", "run", "--once", "--dry-run"])
        .env("LOG_TYPE", "json")
        .env_remove("OPERON_LOG")
        .output()
        .expect("operon runs");
    stdout(&out);
    let records: Vec<Value> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    // The hook that prints to stderr; another hook may log too (a slow run's warning
    // on a loaded machine), which is not what this test is about.
    let printed = records
        .iter()
        .find(|r| r["output"] == "stderr" && r["hook"] == "global/cluster-info.sh")
        .unwrap_or_else(|| panic!("no output of global/cluster-info.sh in the log: {records:#?}"));
    assert_eq!(printed["binding"], "afterAll", "{printed:#}");
    assert_eq!(printed["level"], "INFO");
    assert!(
        printed["message"]
            .as_str()
            .unwrap()
            .starts_with("enabled modules: [\"echo-server\""),
        "{printed}"
    );
}

/// `operon modules list` on a modules directory whose modules carry `module.yaml`
/// requirements (`crates/addons/testdata/module-requirements`).
fn list(extra: &[&str]) -> Output {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../crates/addons/testdata/module-requirements/modules");
    Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(["modules", "list", "--modules-dir"])
        .arg(dir)
        .args(extra)
        .output()
        .expect("operon runs")
}

#[test]
fn list_shows_the_order_and_why_modules_are_disabled() {
    let out = stdout(&list(&["-o", "json"]));
    let modules: Vec<Value> = serde_json::from_str(&out).unwrap();
    let rows: Vec<(&str, bool, &str)> = modules
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap(),
                m["enabled"].as_bool().unwrap(),
                m["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("dashboard", false, "disabled by modules/values.yaml"),
            ("prometheus-crd", true, "enabled"),
            ("cert-manager", true, "enabled"),
            ("ingress-nginx", true, "enabled"),
            (
                "node-metrics",
                false,
                "disabled by its requirements (needs Kubernetes >= 1.27, < 1.31, the cluster runs 1.32.0)"
            ),
            (
                "console",
                false,
                "disabled by its requirements (needs module dashboard, which is disabled)"
            ),
        ]
    );
    assert_eq!(
        modules[5]["requires"],
        serde_json::json!(["dashboard", "ingress-nginx"])
    );

    // An older cluster: ingress-nginx goes, and console with it.
    let out = stdout(&list(&["--kubernetes-version", "v1.26.4"]));
    let line = |name: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in {out}"))
            .to_owned()
    };
    assert!(out.starts_with("MODULE"), "{out}");
    assert!(
        line("ingress-nginx")
            .contains("by its requirements (needs Kubernetes >= 1.27, the cluster runs 1.26.4)"),
        "{out}"
    );
    assert!(line("node-metrics").contains("1.26.4"), "{out}");
    assert!(
        line("console").contains("needs module dashboard, which is disabled, needs module ingress-nginx, which is disabled"),
        "{out}"
    );
    assert!(line("cert-manager").contains("enabled"), "{out}");
}

#[test]
fn list_refuses_a_requirement_cycle_and_a_malformed_module_yaml() {
    let dir = tempfile::tempdir().unwrap();
    for (module, needs) in [("001-a", "b"), ("002-b", "c"), ("003-c", "a")] {
        std::fs::create_dir(dir.path().join(module)).unwrap();
        std::fs::write(
            dir.path().join(module).join("module.yaml"),
            format!("requirements:\n  modules:\n    {needs}: \">= 0\"\n"),
        )
        .unwrap();
    }
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_operon"))
            .args(["modules", "list", "--modules-dir"])
            .arg(dir.path())
            .output()
            .expect("operon runs")
    };
    let out = run();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("module requirements form a cycle: a, b, c"),
        "{stderr}"
    );

    std::fs::write(
        dir.path().join("003-c/module.yaml"),
        "requirements:\n  kubernetes: 1.27 or later\n",
    )
    .unwrap();
    let out = run();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let file = dir.path().join("003-c/module.yaml");
    assert!(
        stderr.contains(&format!(
            "module c: {}: requirements.kubernetes: \"1.27 or later\" is not a version range",
            file.display()
        )),
        "{stderr}"
    );
}
