//! ModuleConfig objects against a real Kubernetes API server (ignored unless run with
//! `--ignored`, and then failing without `OPERON_E2E_KUBECONFIG`): Operon's CRDs
//! applied, `operon serve --modules-dir` with its admission webhook registered by URL
//! with a test CA. A ModuleConfig whose settings do not match the module's config
//! schema is refused at `kubectl apply` with every problem named by field; a valid one
//! is stored, enables the module (its object is applied) and gets a status from the
//! leader through the status subresource: enabled, ready, the settings version and
//! `observedGeneration`, the message, field manager `operon`.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::e2e_support::*;

/// `kubectl apply -f -` of `manifest`: whether it succeeded, and what kubectl printed.
fn apply(kubeconfig: &Path, manifest: &str) -> (bool, String) {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(manifest.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

fn module_config(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: operon.dev/v1alpha1\nkind: ModuleConfig\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

#[tokio::test]
#[ignore = "needs a real API server: set OPERON_E2E_KUBECONFIG"]
async fn module_configs_are_checked_at_admission_and_get_a_status() {
    let path = kubeconfig();
    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-moduleconfigs").await;
    let ns = scratch.name.as_str();
    let run = format!("{:08x}", getrandom_u32());
    // ModuleConfigs are cluster-scoped: the module's name is this run's.
    let module = format!("e2e-app-{run}");
    let configuration = format!("operon-e2e-moduleconfigs-{run}");
    let _cleanup = ClusterScoped {
        kubeconfig: path.clone(),
        objects: vec![
            ("validatingwebhookconfiguration", configuration.clone()),
            ("mutatingwebhookconfiguration", configuration.clone()),
            ("moduleconfig", module.clone()),
        ],
    };
    apply_operon_crds(&cluster).await;

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let hooks = d.join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    let write = |file: &str, text: &str| {
        let file = d.join("modules").join(format!("001-{module}")).join(file);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    };
    write(
        "manifests/configmap.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: e2e-app\ndata:\n  a: b\n",
    );
    write(
        "openapi/config-values.yaml",
        "type: object\nproperties:\n  replicas: {type: integer, minimum: 1}\n  \
         service:\n    type: object\n    properties:\n      port: {type: integer}\n",
    );
    let (ca, cert, key) = certificates(d);
    let port = free_port();
    let port_text = port.to_string();
    let url = format!("https://127.0.0.1:{port}");
    let modules = d.join("modules");
    let config_map = format!("{ns}/addon-operator");
    let flags: Vec<&str> = vec![
        "--leader-election-namespace",
        ns,
        "--validating-webhook-listen-address",
        "127.0.0.1",
        "--validating-webhook-listen-port",
        &port_text,
        "--validating-webhook-url-base",
        &url,
        "--validating-webhook-configuration-name",
        &configuration,
        "--mutating-webhook-configuration-name",
        &configuration,
        "--validating-webhook-server-cert",
        cert.to_str().unwrap(),
        "--validating-webhook-server-key",
        key.to_str().unwrap(),
        "--validating-webhook-ca",
        ca.to_str().unwrap(),
        "--modules-dir",
        modules.to_str().unwrap(),
        "--modules-namespace",
        ns,
        "--config-map",
        &config_map,
        "--no-controllers",
    ];
    let server = serve(&path, &hooks, &flags, "moduleconfigs");
    let log = || std::fs::read_to_string(d.join("moduleconfigs.log")).unwrap_or_default();
    eventually("operon serve ready", Duration::from_secs(90), async || {
        http_get(server.port, "/readyz").filter(|(code, _)| *code == 200)
    })
    .await;

    // Refused, every problem by field, once the registration reaches the API server's
    // webhook cache (an object stored before that is removed again).
    let bad = module_config(
        &module,
        "  enabled: true\n  version: 1\n  settings:\n    replicas: 0\n    service: {port: http}\n",
    );
    let refusal = eventually(
        "the refusal",
        Duration::from_secs(60),
        async || match apply(&path, &bad) {
            (false, text) if text.contains("resources.operon.dev") => Some(text),
            (true, _) => {
                kubectl(&path, &["delete", "moduleconfig", &module]);
                None
            }
            (false, _) => None,
        },
    )
    .await;
    eprintln!("{refusal}");
    assert!(
        refusal.contains(&format!("ModuleConfig/{module} has 2 problems:")),
        "{refusal}"
    );
    assert!(
        refusal.contains("- spec.settings.replicas: 0 is less than the minimum of 1"),
        "{refusal}"
    );
    assert!(
        refusal.contains("- spec.settings.service.port: \"http\" is not of type \"integer\""),
        "{refusal}"
    );
    let stored = kubectl(
        &path,
        &["get", "moduleconfigs", "--ignore-not-found", &module],
    );
    assert!(stored.trim().is_empty(), "stored: {stored}");

    // Taken: the module runs and the leader writes the status.
    let good = module_config(
        &module,
        "  enabled: true\n  version: 1\n  settings:\n    replicas: 2\n",
    );
    let (stored, text) = apply(&path, &good);
    assert!(stored, "{text}");
    eventually(
        "the module's ConfigMap",
        Duration::from_secs(60),
        async || {
            let (found, _, _) = try_kubectl(&path, &["-n", ns, "get", "configmap", "e2e-app"]);
            found.then_some(())
        },
    )
    .await;
    let object = eventually("a ready status", Duration::from_secs(60), async || {
        // kubectl leaves managedFields out unless asked.
        let text = kubectl(
            &path,
            &[
                "get",
                "moduleconfig",
                &module,
                "-o",
                "json",
                "--show-managed-fields",
            ],
        );
        let object: serde_json::Value = serde_json::from_str(&text).ok()?;
        (object["status"]["ready"] == true).then_some(object)
    })
    .await;
    let status = &object["status"];
    assert_eq!(status["enabled"], true, "{}", log());
    assert_eq!(status["version"], 1);
    assert_eq!(
        status["observedGeneration"],
        object["metadata"]["generation"]
    );
    assert_eq!(status["message"], "Enabled and ready");
    let managers: Vec<(&str, &str)> = object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["manager"].as_str().unwrap_or_default(),
                m["subresource"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert!(managers.contains(&("operon", "status")), "{managers:?}");

    // The printer columns show it.
    let table = kubectl(&path, &["get", "moduleconfig", &module]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "ENABLED", "READY", "VERSION", "AGE", "MESSAGE"],
        "{table}"
    );

    // Turned off: the module's object goes and the status follows.
    let (stored, text) = apply(
        &path,
        &module_config(
            &module,
            "  enabled: false\n  version: 1\n  settings:\n    replicas: 2\n",
        ),
    );
    assert!(stored, "{text}");
    eventually(
        "the module's ConfigMap deleted",
        Duration::from_secs(60),
        async || {
            let (found, _, _) = try_kubectl(&path, &["-n", ns, "get", "configmap", "e2e-app"]);
            (!found).then_some(())
        },
    )
    .await;
    let status = eventually("a disabled status", Duration::from_secs(60), async || {
        // kubectl leaves managedFields out unless asked.
        let text = kubectl(
            &path,
            &[
                "get",
                "moduleconfig",
                &module,
                "-o",
                "json",
                "--show-managed-fields",
            ],
        );
        let object: serde_json::Value = serde_json::from_str(&text).ok()?;
        (object["status"]["enabled"] == false).then(|| object["status"].clone())
    })
    .await;
    assert_eq!(
        status["message"],
        format!("Disabled by ModuleConfig {module}")
    );
    drop(server);
}
