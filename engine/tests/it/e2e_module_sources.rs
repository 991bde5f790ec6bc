//! End to end against a real Kubernetes API server (ignored unless run with `--ignored`,
//! and then failing without `OPERON_E2E_KUBECONFIG`) and a real registry
//! (`docker-registry` with TLS and htpasswd, failing when it is not installed):
//! `operon serve --module-source` running an addon-operator module pulled from the
//! registry with the credentials of the `--module-source-pull-secret` Secret. With
//! credentials the registry refuses, the module is unavailable and serve runs on; once
//! the Secret is right, the next pull brings the module and it is applied.

use base64::Engine as _;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::e2e_support::registry::registry;
use crate::e2e_support::*;

/// A `kubernetes.io/dockerconfigjson` Secret `name` in `namespace` holding `user` and
/// `password` for `registry`, created or replaced.
fn pull_secret(kubeconfig: &Path, namespace: &str, name: &str, registry: &str, password: &str) {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("alice:{password}"));
    let config = serde_json::json!({"auths": {registry: {"auth": auth}}}).to_string();
    let secret = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": name, "namespace": namespace},
        "stringData": {".dockerconfigjson": config},
    });
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), secret.to_string()).unwrap();
    kubectl(kubeconfig, &["apply", "-f", file.path().to_str().unwrap()]);
}

#[tokio::test]
#[ignore = "needs an API server: set OPERON_E2E_KUBECONFIG"]
async fn serve_runs_a_module_pulled_with_its_pull_secret_once_the_secret_is_right() {
    let path = kubeconfig();
    let registry = registry();
    let module = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../crates/addons/testdata/module-symlinks/module_storage/002-frontend");
    let pushed = registry.operon(
        &[
            "module",
            "push",
            module.to_str().unwrap(),
            &registry.reference("modules/frontend:1.0"),
        ],
        false,
    );
    let stdout = String::from_utf8_lossy(&pushed.stdout).into_owned();
    assert!(
        pushed.status.success(),
        "{}",
        String::from_utf8_lossy(&pushed.stderr)
    );
    let pinned = stdout
        .lines()
        .find_map(|l| l.strip_prefix("pinned: "))
        .unwrap_or_else(|| panic!("no pinned reference in {stdout}"))
        .to_owned();

    let cluster = connect(&path).await;
    let scratch = Scratch::new(&cluster, &path, "operon-e2e-sources").await;
    let ns = scratch.name.as_str();
    apply_operon_crds(&cluster).await;
    let host = format!("127.0.0.1:{}", registry.port);
    // Credentials the registry refuses, first.
    pull_secret(&path, ns, "module-registry", &host, "not-the-password");

    let dir = tempfile::tempdir().unwrap();
    let hooks = dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    // A cache of its own, so that the module is pulled, not found from an earlier run.
    let cache = dir.path().join("cache");
    let ca = registry.ca();
    // The module's chart is rendered by Helm's engine from helm-python-sdk.
    require_helm_python();
    let helm = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/addons/helm");
    let lease = format!("e2e-sources-{:08x}", getrandom_u32());
    let flags = [
        "--leader-election-namespace",
        ns,
        "--leader-election-lease-name",
        &lease,
        "--no-controllers",
        "--reload-interval",
        "1s",
        "--module-source",
        &pinned,
        "--module-source-pull-secret",
        "module-registry",
        "--allow-registry",
        &host,
        "--registry-ca",
        ca.to_str().unwrap(),
        "--modules-namespace",
        ns,
        "--helm-binary",
        helm.to_str().unwrap(),
    ];
    let serving = serve_with_env(
        &path,
        &hooks,
        &flags,
        "sources",
        &[("OPERON_CACHE_DIR", cache.to_str().unwrap())],
    );
    let log = dir.path().join("sources.log");
    eventually("operon serve ready", Duration::from_secs(60), async || {
        http_get(serving.port, "/readyz").filter(|(code, _)| *code == 200)
    })
    .await;
    eventually(
        "the module source refused by the registry",
        Duration::from_secs(30),
        async || {
            let text = std::fs::read_to_string(&log).ok()?;
            text.contains("RegistryUnauthorized").then_some(())
        },
    )
    .await;
    let (found, _, _) = try_kubectl(&path, &["-n", ns, "get", "configmap", "frontend"]);
    assert!(
        !found,
        "the module ran without credentials the registry takes"
    );

    // The right credentials: the next pull (every six reload intervals) brings it.
    let fixed = Instant::now();
    pull_secret(&path, ns, "module-registry", &host, "s3cr3t");
    let greeting = loop {
        let (found, out, _) = try_kubectl(
            &path,
            &[
                "-n",
                ns,
                "get",
                "configmap",
                "frontend",
                "-o",
                "jsonpath={.data.greeting}",
            ],
        );
        if found {
            break out;
        }
        if fixed.elapsed() > Duration::from_secs(60) {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("the pulled module's ConfigMap did not come; serve's log:\n{log}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    eprintln!(
        "the module from {pinned} was applied {:.1} s after its pull Secret was fixed",
        fixed.elapsed().as_secs_f64()
    );
    assert_eq!(greeting, "hello from frontend");
    let unpacked = std::fs::read_dir(cache.join("addon-modules"))
        .unwrap()
        .count();
    assert_eq!(unpacked, 1, "the module is unpacked once in the cache");
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(log.contains("frontend: startup"), "{log}");
    drop(serving);
}
