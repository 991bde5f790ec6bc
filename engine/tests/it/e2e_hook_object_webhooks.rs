//! End to end against a real Kubernetes API server (ignored unless run with
//! `--ignored`, and then failing without `OPERON_E2E_KUBECONFIG`): a Hook object's
//! validating binding is registered as its own ValidatingWebhookConfiguration, kept to
//! the namespace its permissions grant, denies a Pod through the API server, and goes
//! with the Hook; a shadow Hook beside the hooks directory's pod labeler shows its
//! divergence in its status and applies nothing.

use std::path::Path;
use std::time::Duration;

use crate::e2e_support::*;

fn hook(name: &str, spec: &str) -> String {
    format!("apiVersion: operon.dev/v1alpha1\nkind: Hook\nmetadata:\n  name: {name}\nspec:\n{spec}")
}

fn apply(kubeconfig: &Path, namespace: &str, manifest: &str) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), manifest).unwrap();
    kubectl(
        kubeconfig,
        &[
            "-n",
            namespace,
            "apply",
            "-f",
            file.path().to_str().unwrap(),
        ],
    );
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn a_hook_objects_webhook_is_registered_enforced_and_removed_with_it() {
    let path = kubeconfig();
    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-hook-webhooks").await;
    let other = Scratch::new(&cluster, &path, "operon-e2e-hook-webhooks-other").await;
    let ns = scratch.name.as_str();
    let run = format!("{:08x}", getrandom_u32());
    let configuration = format!("operon-e2e-hook-webhooks-{run}");
    let guard_configuration = format!("operon-hook.{ns}.guard");
    let _cleanup = ClusterScoped {
        kubeconfig: path.clone(),
        objects: vec![
            ("validatingwebhookconfiguration", configuration.clone()),
            ("mutatingwebhookconfiguration", configuration.clone()),
            (
                "validatingwebhookconfiguration",
                guard_configuration.clone(),
            ),
        ],
    };
    apply_operon_crds(&cluster).await;

    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    let modules = dir.path().join("modules");
    std::fs::create_dir(&hooks).unwrap();
    std::fs::create_dir(&modules).unwrap();
    std::fs::copy(operon_tests::POD_LABELER, hooks.join("pod-labeler.wasm")).unwrap();
    std::fs::copy(operon_tests::ADMISSION, modules.join("guard.wasm")).unwrap();
    std::fs::copy(operon_tests::ANNOTATOR, modules.join("annotator.wasm")).unwrap();
    let (ca, cert, key) = certificates(dir.path());
    let port = free_port().to_string();
    let url = format!("https://127.0.0.1:{port}");
    let flags = [
        "--leader-election-namespace",
        ns,
        "--validating-webhook-listen-address",
        "127.0.0.1",
        "--validating-webhook-listen-port",
        &port,
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
        "--modules",
        modules.to_str().unwrap(),
    ];
    let server = serve(&path, &hooks, &flags, "hook-object-webhooks");
    eventually("operon serve ready", Duration::from_secs(60), async || {
        http_get(server.port, "/readyz").filter(|(code, _)| *code == 200)
    })
    .await;

    // The guard: Pods of its own namespace only, from registry.example.com.
    let spec = "  module: guard\n  permissions:\n    watch:\n    - {apiVersion: v1, kind: Pod}\n";
    apply(&path, ns, &hook("guard", spec));
    let selector = eventually("the Hook's configuration", Duration::from_secs(60), async || {
        let (found, out, _) = try_kubectl(
            &path,
            &[
                "get",
                "validatingwebhookconfiguration",
                &guard_configuration,
                "-o",
                "jsonpath={.webhooks[0].clientConfig.url} {.webhooks[0].namespaceSelector.matchExpressions[0].values}",
            ],
        );
        found.then_some(out)
    })
    .await;
    assert_eq!(
        selector,
        format!("{url}/hook-object/{ns}/guard/validate/images.operon.dev [\"{ns}\"]")
    );
    // The API server's webhook cache follows the configuration asynchronously.
    let denied = eventually("the denial", Duration::from_secs(60), async || {
        let pod = format!("web-{}", getrandom_u32() % 1000);
        match try_kubectl(
            &path,
            &["-n", ns, "run", &pod, "--image=docker.io/nginx:1.27"],
        ) {
            (false, _, err) if err.contains("images.operon.dev") => Some(err),
            (true, _, _) => {
                kubectl(&path, &["-n", ns, "delete", "pod", &pod, "--wait=false"]);
                None
            }
            _ => None,
        }
    })
    .await;
    assert!(
        denied.contains("only images from registry.example.com are allowed"),
        "{denied}"
    );
    kubectl(
        &path,
        &[
            "-n",
            ns,
            "run",
            "fine",
            "--image=registry.example.com/nginx:1.27",
        ],
    );
    // Another namespace is not the guard's to intercept.
    kubectl(
        &path,
        &[
            "-n",
            &other.name,
            "run",
            "web",
            "--image=docker.io/nginx:1.27",
        ],
    );
    // The status is written at most once a second, after the registration.
    let registered = eventually("the condition", Duration::from_secs(30), async || {
        let reason = kubectl(
            &path,
            &[
                "-n",
                ns,
                "get",
                "hook",
                "guard",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"WebhooksRegistered\")].reason}",
            ],
        );
        (!reason.is_empty()).then_some(reason)
    })
    .await;
    assert_eq!(registered, "Registered");

    // A shadow of the directory's pod labeler: compared, never applied.
    let spec = "  module: annotator\n  shadowOf: pod-labeler.wasm\n  permissions:\n    watch:\n    - {apiVersion: v1, kind: Pod, namespaces: [\"*\"]}\n";
    apply(&path, ns, &hook("labeler-next", spec));
    eventually("the shadow attached", Duration::from_secs(60), async || {
        let reason = kubectl(
            &path,
            &[
                "-n",
                ns,
                "get",
                "hook",
                "labeler-next",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].reason}",
            ],
        );
        (reason == "Shadowing").then_some(())
    })
    .await;
    kubectl(&path, &["-n", ns, "label", "pod", "fine", "touched=yes"]);
    let diverged = eventually("a divergence", Duration::from_secs(60), async || {
        let shadow = kubectl(
            &path,
            &[
                "-n",
                ns,
                "get",
                "hook",
                "labeler-next",
                "-o",
                "jsonpath={.status.shadow}",
            ],
        );
        let shadow: serde_json::Value = serde_json::from_str(&shadow).ok()?;
        (shadow["diverged"].as_u64() >= Some(1)).then_some(shadow)
    })
    .await;
    assert_eq!(diverged["live"], "pod-labeler.wasm");
    let annotations = kubectl(
        &path,
        &[
            "-n",
            ns,
            "get",
            "pod",
            "fine",
            "-o",
            "jsonpath={.metadata.annotations}",
        ],
    );
    assert!(
        !annotations.contains("operon.dev/seen-version"),
        "the shadow's patch was applied: {annotations}"
    );

    // The Hook goes, and its configuration with it.
    kubectl(&path, &["-n", ns, "delete", "hook", "guard"]);
    eventually(
        "the configuration removed",
        Duration::from_secs(60),
        async || {
            let (found, _, _) = try_kubectl(
                &path,
                &[
                    "get",
                    "validatingwebhookconfiguration",
                    &guard_configuration,
                ],
            );
            (!found).then_some(())
        },
    )
    .await;
    drop(server);
}
