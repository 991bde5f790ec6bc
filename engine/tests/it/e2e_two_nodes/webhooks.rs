//! The webhooks only some replicas could answer, with two replicas behind the Service:
//! a Hook object's (every replica loads it) and an addon-operator module's (it runs on
//! the leader; a follower forwards its reviews), before and while the leader's node is
//! stopped.

use super::*;

/// The guard module of `operations/fixtures/module-webhooks`, mounted at /modules of
/// the controller from a ConfigMap (the hook executable), with the modules component.
pub(super) fn add_module_guard(dir: &Path) {
    let fixture = repo().join("operations/fixtures/module-webhooks/modules");
    std::fs::copy(fixture.join("values.yaml"), dir.join("values.yaml")).unwrap();
    std::fs::copy(
        fixture.join("001-guard/hooks/guard.sh"),
        dir.join("guard.sh"),
    )
    .unwrap();
    std::fs::write(
        dir.join("modules-volume.yaml"),
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: operon
  namespace: operon
spec:
  template:
    spec:
      containers:
      - name: operon
        volumeMounts:
        - name: e2e-modules
          mountPath: /modules
      volumes:
      - name: e2e-modules
        configMap:
          name: operon-e2e-modules
          items:
          - key: values.yaml
            path: values.yaml
          - key: guard.sh
            path: 001-guard/hooks/guard.sh
            mode: 0755
"#,
    )
    .unwrap();
    let kustomization = dir.join("kustomization.yaml");
    let mut text = std::fs::read_to_string(&kustomization).unwrap();
    let base = text
        .lines()
        .nth(1)
        .and_then(|l| l.strip_prefix("- "))
        .expect("the kustomization's first resource is deploy/")
        .to_owned();
    text = text.replacen(
        "configMapGenerator:\n",
        "configMapGenerator:\n- name: operon-e2e-modules\n  namespace: operon\n  files:\n  - values.yaml\n  - guard.sh\n",
        1,
    );
    text.push_str(&format!(
        "components:\n- {base}/modules\npatchesStrategicMerge:\n- modules-volume.yaml\n"
    ));
    std::fs::write(kustomization, text).unwrap();
}

/// What creating a guarded ConfigMap `name` came to.
#[derive(Debug, PartialEq)]
enum Guarded {
    Admitted,
    /// Refused by the module's hook (its message).
    Refused(String),
    /// Refused because the webhook could not be called, or the API server away.
    Failed(String),
}

fn create_guarded(config: &Path, namespace: &str, name: &str) -> Guarded {
    let manifest = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  labels:\n    operon.dev/guarded: \"true\"\n"
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), manifest).unwrap();
    match try_kubectl(config, &["create", "-f", file.path().to_str().unwrap()]) {
        (true, _, _) => Guarded::Admitted,
        (false, _, err) if err.contains("are not allowed") => Guarded::Refused(err),
        (false, _, err) => Guarded::Failed(err),
    }
}

/// Creates `count` guarded ConfigMaps with forbidden names: how many the module's
/// hook refused, and the other outcomes.
fn guard_round(
    config: &Path,
    namespace: &str,
    prefix: &str,
    count: usize,
) -> (usize, Vec<Guarded>) {
    let mut refused = 0;
    let mut others = Vec::new();
    for i in 0..count {
        match create_guarded(config, namespace, &format!("denied-{prefix}-{i}")) {
            Guarded::Refused(_) => refused += 1,
            other => others.push(other),
        }
    }
    (refused, others)
}

/// The Hook object `guard`: the admission guest, refusing Pods of its namespace whose
/// image is not from registry.example.com.
fn guard_hook(namespace: &str) -> String {
    format!(
        "apiVersion: operon.dev/v1alpha1\nkind: Hook\nmetadata:\n  name: guard\n  namespace: {namespace}\nspec:\n  module: e2e-two-guard\n  permissions:\n    watch:\n    - {{apiVersion: v1, kind: Pod}}\n"
    )
}

/// Creates `count` Pods with an image the Hook object refuses: how many it refused.
fn hook_round(config: &Path, namespace: &str, prefix: &str, count: usize) -> usize {
    (0..count)
        .filter(|i| {
            let (created, _, err) = try_kubectl(
                config,
                &[
                    "-n",
                    namespace,
                    "run",
                    &format!("{prefix}-{i}"),
                    "--image=docker.io/nginx:1.27",
                ],
            );
            !created && err.contains("only images from registry.example.com")
        })
        .count()
}

pub(super) async fn webhooks_of_hooks_and_modules(node: &Node, second: &Second, dir: &Path) {
    let config = node.kubeconfig.as_path();
    // A namespace of its own: the other parts made the uploader and the module reader
    // of theirs.
    let cluster = connect(config).await;
    let scratch = Scratch::new(&cluster, config, "e2e-two-webhooks").await;
    let namespace = scratch.name.as_str();
    rolled_out(config);
    // Replicas of a rollout just done may still be terminating.
    eventually(
        "two controller replicas",
        Duration::from_secs(120),
        async || {
            let replicas: usize = pods_by_node(config, CONTROLLER)
                .values()
                .map(Vec::len)
                .sum();
            (replicas == 2).then_some(())
        },
    )
    .await;

    // The module's configuration, written by the leader once the module runs.
    let url = eventually(
        "the module's configuration",
        Duration::from_secs(120),
        async || {
            let (found, out, _) = try_kubectl(
                config,
                &[
                    "get",
                    "validatingwebhookconfiguration",
                    "operon-module.guard",
                    "-o",
                    "jsonpath={.webhooks[0].clientConfig.service.path}",
                ],
            );
            found.then_some(out)
        },
    )
    .await;
    assert_eq!(url, "/module/guard/validate/guard.modules.operon.dev");
    // The API server's webhook cache follows the configuration asynchronously.
    eventually(
        "the module's first denial",
        Duration::from_secs(60),
        async || {
            matches!(
                create_guarded(config, namespace, "denied-first"),
                Guarded::Refused(_)
            )
            .then_some(())
        },
    )
    .await;
    // The Service spreads the reviews over both replicas: every one is refused by the
    // module's hook, so the follower passed its share to the leader.
    let (refused, others) = guard_round(config, namespace, "both", 20);
    eprintln!(
        "module webhook, two replicas: {refused} of 20 refused by the module's hook, others {others:?}"
    );
    assert_eq!(refused, 20, "{others:?}");

    // A Hook object's webhook: every replica loads the Hook and answers itself.
    let _reader = grant_module_reader(config, namespace);
    let _uploader = push_modules(
        config,
        dir,
        namespace,
        &[("e2e-two-guard", operon_tests::ADMISSION)],
    );
    apply(config, dir, "guard-hook.yaml", &guard_hook(namespace));
    eventually(
        "the Hook's configuration",
        Duration::from_secs(120),
        async || {
            let (found, _, _) = try_kubectl(
                config,
                &[
                    "get",
                    "validatingwebhookconfiguration",
                    &format!("operon-hook.{namespace}.guard"),
                ],
            );
            found.then_some(())
        },
    )
    .await;
    eventually(
        "the Hook's first denial",
        Duration::from_secs(60),
        async || (hook_round(config, namespace, "first", 1) == 1).then_some(()),
    )
    .await;
    let refused = hook_round(config, namespace, "both", 20);
    eprintln!("Hook object webhook, two replicas: {refused} of 20 refused");
    assert_eq!(refused, 20);

    // The leader's node stops: reviews go on, each refused by its hook or by a call
    // that failed, until the other replica leads and runs the module.
    let leader = leader::leader_on(config, &second.name).await;
    let fault = Instant::now();
    let down = second.down("stop", "start");
    let mut first_module_answer = None;
    let mut failed = 0;
    let mut hook_object_misses = 0;
    let mut n = 0;
    while fault.elapsed() < Duration::from_secs(150) {
        n += 1;
        match create_guarded(config, namespace, &format!("denied-fault-{n}")) {
            Guarded::Refused(_) => {
                if first_module_answer.is_none() && failed > 0 {
                    first_module_answer = Some(fault.elapsed());
                }
            }
            Guarded::Failed(_) => failed += 1,
            Guarded::Admitted => panic!("a forbidden ConfigMap was admitted during the fault"),
        }
        if hook_round(config, namespace, &format!("fault-{n}"), 1) == 0 {
            hook_object_misses += 1;
        }
        if first_module_answer.is_some() && fault.elapsed() > Duration::from_secs(60) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!(
        "leader {leader}'s node stopped: {n} module reviews, {failed} not answered (the webhook's failure policy refused them), the module answered again {:?} after the fault; the Hook object's webhook missed {hook_object_misses} of {n}",
        first_module_answer.map(|d| format!("{:.1} s", d.as_secs_f64()))
    );
    down.undo();
    rolled_out(config);
    let (refused, others) = guard_round(config, namespace, "after", 10);
    assert_eq!(refused, 10, "after the fault: {others:?}");
}
