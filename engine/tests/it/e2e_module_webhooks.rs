//! End to end against a real Kubernetes API server (ignored unless run with
//! `--ignored`, and then failing without `OPERON_E2E_KUBECONFIG`): the validating
//! binding of an addon-operator module's hook is registered as the module's own
//! ValidatingWebhookConfiguration while the module is enabled. Two `operon serve`
//! replicas elect a leader; the API server calls the follower, which passes the review
//! to the leader (where the module runs, with its values); when the leader stops, the
//! other takes over and answers itself; disabling the module removes its configuration.

use std::path::Path;
use std::time::Duration;

use crate::e2e_support::*;

const GUARD: &str = "operon-module.guard";

/// Creates a guarded ConfigMap `name`: `Ok` when admitted, else the API server's error.
fn create(kubeconfig: &Path, namespace: &str, name: &str) -> Result<(), String> {
    let manifest = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  labels:\n    operon.dev/guarded: \"true\"\n"
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), manifest).unwrap();
    match try_kubectl(
        kubeconfig,
        &[
            "-n",
            namespace,
            "create",
            "-f",
            file.path().to_str().unwrap(),
        ],
    ) {
        (true, _, _) => Ok(()),
        (false, _, err) => Err(err),
    }
}

/// Waits until a forbidden name is refused by the module's webhook, and returns the
/// API server's message.
async fn refused(kubeconfig: &Path, namespace: &str, what: &str) -> String {
    eventually(what, Duration::from_secs(90), async || {
        let name = format!("denied-{}", getrandom_u32() % 100_000);
        match create(kubeconfig, namespace, &name) {
            // Not a webhook that could not be called (the Lease changing hands).
            Err(e) if e.contains("are not allowed") => Some(e),
            Err(_) => None,
            Ok(()) => {
                kubectl(kubeconfig, &["-n", namespace, "delete", "configmap", &name]);
                None
            }
        }
    })
    .await
}

fn lease_holder(kubeconfig: &Path, namespace: &str) -> String {
    try_kubectl(
        kubeconfig,
        &[
            "-n",
            namespace,
            "get",
            "lease",
            "operon",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
    )
    .1
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn a_modules_webhook_is_answered_by_the_leader_through_a_follower() {
    let path = kubeconfig();
    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-module-webhooks").await;
    let ns = scratch.name.as_str();
    // The replicas' own configurations get a name of this run, so that none is left
    // behind under the default name for the suites after this one.
    let configuration = format!("operon-e2e-module-webhooks-{:08x}", getrandom_u32());
    let _cleanup = ClusterScoped {
        kubeconfig: path.clone(),
        objects: vec![
            ("validatingwebhookconfiguration", GUARD.to_owned()),
            ("validatingwebhookconfiguration", configuration.clone()),
            ("mutatingwebhookconfiguration", configuration.clone()),
        ],
    };
    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    let modules = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../operations/fixtures/module-webhooks/modules");
    let (ca, cert, key) = certificates(dir.path());
    let (leader_port, follower_port) = (free_port().to_string(), free_port().to_string());
    // Both register the follower's address: the API server calls it, and it forwards.
    let url = format!("https://127.0.0.1:{follower_port}");
    let flags = |port: &str| -> Vec<String> {
        [
            "--leader-elect",
            "--leader-election-namespace",
            ns,
            "--no-controllers",
            "--modules-dir",
            modules.to_str().unwrap(),
            "--modules-namespace",
            ns,
            "--validating-webhook-listen-address",
            "127.0.0.1",
            "--validating-webhook-listen-port",
            port,
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
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let leader_flags = flags(&leader_port);
    let leader_flags: Vec<&str> = leader_flags.iter().map(String::as_str).collect();
    let env = [("POD_IP", "127.0.0.1")];
    let leader = serve_with_env(&path, &hooks, &leader_flags, "leader", &env);
    eventually(
        "the first replica leads",
        Duration::from_secs(60),
        async || lease_holder(&path, ns).starts_with("leader_").then_some(()),
    )
    .await;
    let follower_flags = flags(&follower_port);
    let follower_flags: Vec<&str> = follower_flags.iter().map(String::as_str).collect();
    let follower = serve_with_env(&path, &hooks, &follower_flags, "follower", &env);
    eventually("the follower ready", Duration::from_secs(60), async || {
        http_get(follower.port, "/readyz").filter(|(code, _)| *code == 200)
    })
    .await;

    let configuration = eventually("the module's configuration", Duration::from_secs(60), async || {
        let (found, out, _) = try_kubectl(
            &path,
            &[
                "get",
                "validatingwebhookconfiguration",
                GUARD,
                "-o",
                "jsonpath={.metadata.labels.operon\\.dev/webhooks-of} {.webhooks[0].name} {.webhooks[0].clientConfig.url}",
            ],
        );
        found.then_some(out)
    })
    .await;
    assert_eq!(
        configuration,
        format!(
            "Module guard.modules.operon.dev {url}/module/guard/validate/guard.modules.operon.dev"
        )
    );
    let message = refused(&path, ns, "the follower's forwarded denial").await;
    assert!(
        message.contains("module guard: names starting with denied- are not allowed"),
        "{message}"
    );
    create(&path, ns, "allowed").unwrap();
    let log = std::fs::read_to_string(dir.path().join("leader.log")).unwrap();
    assert!(
        log.contains("admission review") && log.contains("guard.modules.operon.dev"),
        "the leader answered: {log}"
    );

    // The leader stops: the follower takes the Lease, runs the module and answers.
    drop(leader);
    eventually("the follower leads", Duration::from_secs(60), async || {
        lease_holder(&path, ns)
            .starts_with("follower_")
            .then_some(())
    })
    .await;
    let message = refused(&path, ns, "the new leader's denial").await;
    assert!(message.contains("names starting with denied-"), "{message}");

    // Disabled, the module's configuration goes.
    kubectl(
        &path,
        &[
            "-n",
            ns,
            "create",
            "configmap",
            "addon-operator",
            "--from-literal=guardEnabled=false",
        ],
    );
    eventually(
        "the configuration removed",
        Duration::from_secs(60),
        async || {
            let (found, _, _) =
                try_kubectl(&path, &["get", "validatingwebhookconfiguration", GUARD]);
            (!found).then_some(())
        },
    )
    .await;
    create(&path, ns, "denied-after").unwrap();
    drop(follower);
}
