//! The node agent in `deploy/` (`agent.yaml`) and in the Helm chart (`templates/agent.yaml`),
//! with no cluster: both render the same objects; its RBAC is exactly what running a
//! Diagnosis needs; its DaemonSet is hardened like the controller, reaches every node one
//! pod at a time, gets its node from the downward API, passes only flags `operon agent
//! --help` lists, and is probed on the port the agent serves; and its pods stay out of
//! what selects the controller's.

use crate::deploy_support::{
    CHART, Grant, KUSTOMIZATION, NAMESPACE, assert_same, check_command_line, check_hardened,
    check_probes_and_resources, env_var, find, flag_value, flags, grant, grants, helm,
    help_default, image, is_agent, is_port_name, kind, kinds_and_names, name, normalized, of_kind,
    selects, strings, volumes_by_name,
};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

/// The name of every agent object: ServiceAccount, ClusterRole and binding, Role and
/// binding, DaemonSet.
const AGENT: &str = "operon-agent";
/// The ClusterRole and binding of the agent's built-in operations.
const BUILT_INS: &str = "operon-agent-builtins";
/// The port of `/healthz` and `/readyz` (`operon agent --listen-port`).
const HEALTH_PORT: i64 = 9116;

/// `operon agent --help` of the binary this test builds.
static AGENT_HELP: LazyLock<String> = LazyLock::new(|| crate::deploy_support::help("agent"));

fn agent_objects(objects: &[Value]) -> Vec<Value> {
    objects.iter().filter(|o| is_agent(o)).cloned().collect()
}

fn daemon_set(objects: &[Value]) -> &Value {
    find(objects, "DaemonSet", AGENT)
}

fn agent_container(objects: &[Value]) -> &Value {
    let containers = daemon_set(objects)["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers");
    assert_eq!(containers.len(), 1, "one container: {containers:?}");
    &containers[0]
}

fn agent_args(objects: &[Value]) -> Vec<String> {
    strings(&agent_container(objects)["args"])
}

/// The `[default: ...]` of `--flag` in `operon agent --help`, if it has one.
fn agent_default(flag: &str) -> Option<String> {
    help_default(&AGENT_HELP, flag)
}

/// What the agent may do: read what a Diagnosis runs, write its status, its results
/// ConfigMap and its Events, across the cluster; and take its node's Lease in its own
/// namespace. Nothing else.
fn expected_agent_grants() -> (BTreeSet<Grant>, BTreeSet<Grant>) {
    let mut cluster = BTreeSet::new();
    for resource in ["operations", "operationsets", "diagnoses"] {
        for verb in ["get", "list", "watch"] {
            cluster.insert(grant("operon.dev", resource, verb, ""));
        }
    }
    // A PUT of the status subresource; never the Diagnosis itself.
    for verb in ["get", "update"] {
        cluster.insert(grant("operon.dev", "diagnoses/status", verb, ""));
    }
    // The results ConfigMap: server-side apply (`patch`, and `create` when it creates),
    // read back on resume.
    for verb in ["get", "create", "patch"] {
        cluster.insert(grant("", "configmaps", verb, ""));
    }
    // kube-runtime's recorder: events.k8s.io only.
    for verb in ["create", "patch"] {
        cluster.insert(grant("events.k8s.io", "events", verb, ""));
    }
    // Uploaded modules: the Modules followed, their bytes fetched from a replica (whose
    // module API asks whether this account may `get` them).
    for verb in ["get", "list", "watch"] {
        cluster.insert(grant("operon.dev", "modules", verb, ""));
    }
    // The Lease operon-agent-<node>: no name to limit `create`, and names that depend
    // on the node for the rest.
    let namespaced = ["create", "get", "update"]
        .into_iter()
        .map(|verb| grant("coordination.k8s.io", "leases", verb, ""))
        .collect();
    (cluster, namespaced)
}

/// What the built-in operations need, in a ClusterRole of their own: the pods (of the
/// node, or the one a Diagnosis names), the node's schedulability, and asking whether a
/// Diagnosis' ServiceAccount may change it.
fn expected_built_in_grants() -> BTreeSet<Grant> {
    BTreeSet::from([
        grant("", "pods", "get", ""),
        grant("", "pods", "list", ""),
        grant("", "nodes", "patch", ""),
        grant("authorization.k8s.io", "subjectaccessreviews", "create", ""),
    ])
}

/// The agent's ServiceAccount and exactly its grants; nothing else bound to it.
fn check_agent_rbac(objects: &[Value]) {
    find(objects, "ServiceAccount", AGENT);
    let (cluster, namespaced) = expected_agent_grants();
    let cluster_role = find(objects, "ClusterRole", AGENT);
    assert_eq!(grants(cluster_role), cluster, "the agent's ClusterRole");
    let role = find(objects, "Role", AGENT);
    assert_eq!(role["metadata"]["namespace"], NAMESPACE);
    assert_eq!(grants(role), namespaced, "the agent's Role");
    for (group, resource, verb, _) in grants(cluster_role).into_iter().chain(grants(role)) {
        assert!(
            !group.contains('*') && !resource.contains('*') && !verb.contains('*'),
            "wildcard in {group}/{resource} {verb}"
        );
        assert!(
            !["secrets", "nodes", "pods"].contains(&resource.as_str()),
            "the agent has no {resource} {verb}"
        );
    }

    let built_ins = find(objects, "ClusterRole", BUILT_INS);
    assert_eq!(
        grants(built_ins),
        expected_built_in_grants(),
        "the built-ins' ClusterRole"
    );

    let subject = json!([{"kind": "ServiceAccount", "name": AGENT, "namespace": NAMESPACE}]);
    for (binding_kind, role_kind, role) in [
        ("ClusterRoleBinding", "ClusterRole", AGENT),
        ("RoleBinding", "Role", AGENT),
        ("ClusterRoleBinding", "ClusterRole", BUILT_INS),
    ] {
        let binding = find(objects, binding_kind, role);
        assert_eq!(
            binding["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role})
        );
        assert_eq!(binding["subjects"], subject);
    }
    // Its account is bound to these two roles only.
    let bound: BTreeSet<String> = objects
        .iter()
        .filter(|o| ["ClusterRoleBinding", "RoleBinding"].contains(&kind(o)))
        .filter(|b| {
            b["subjects"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|s| s["name"] == AGENT)
        })
        .map(|b| format!("{}/{}", kind(b), name(b)))
        .collect();
    assert_eq!(
        bound,
        BTreeSet::from([
            format!("ClusterRoleBinding/{AGENT}"),
            format!("ClusterRoleBinding/{BUILT_INS}"),
            format!("RoleBinding/{AGENT}"),
        ])
    );
}

/// The DaemonSet: every node, one pod at a time, hardened like the controller, its node
/// from the downward API, flags `operon agent` knows, probes on its health port,
/// resources, and emptyDirs for what it writes.
fn check_daemon_set(objects: &[Value]) {
    let daemon_set = daemon_set(objects);
    let spec = &daemon_set["spec"];
    assert!(
        selects(
            &spec["selector"]["matchLabels"],
            &spec["template"]["metadata"]["labels"]
        ),
        "the selector selects the pod template"
    );
    // Two agents on a node would contend for its Lease: no surge.
    assert_eq!(
        spec["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], AGENT);
    assert!(
        pod["tolerations"]
            .as_array()
            .unwrap()
            .contains(&json!({"operator": "Exists"})),
        "runs on every node, whatever its taints: {}",
        pod["tolerations"]
    );

    let container = agent_container(objects);
    check_hardened(pod, container);
    assert_eq!(container["image"].as_str().unwrap(), image());

    let args = agent_args(objects);
    let env = container["env"].as_array().expect("env");
    let flags = flags(&AGENT_HELP);
    assert!(
        flags.contains_key("node-name") && flags.contains_key("listen-port"),
        "unexpected `operon agent --help`: {}",
        *AGENT_HELP
    );
    check_command_line("agent", &AGENT_HELP, &args, env);
    for (var, field) in [
        ("NODE_NAME", "spec.nodeName"),
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
    ] {
        assert_eq!(
            env_var(env, var)["valueFrom"],
            json!({"fieldRef": {"fieldPath": field}}),
            "{var}"
        );
    }
    assert_eq!(
        flag_value(&args, "node-name"),
        None,
        "the node comes from NODE_NAME"
    );

    // The health port: the one the agent listens on, named, probed.
    let listen_port: i64 = flag_value(&args, "listen-port")
        .or_else(|| agent_default("listen-port"))
        .expect("--listen-port")
        .parse()
        .unwrap();
    assert_eq!(listen_port, HEALTH_PORT);
    let ports = container["ports"].as_array().expect("ports");
    assert_eq!(ports.len(), 1, "{ports:?}");
    assert_eq!(ports[0]["containerPort"], HEALTH_PORT);
    assert_eq!(ports[0]["protocol"], "TCP");
    let port_name = ports[0]["name"].as_str().unwrap();
    assert!(is_port_name(port_name), "{port_name:?}");
    check_probes_and_resources(container, port_name);

    // emptyDirs for every path it writes (the root filesystem is read-only), and the
    // CA of the replicas' module API: ca.crt of the webhook certificate's Secret,
    // nothing else of it, read-only, named by OPERON_MODULE_SOURCE_CA. No hostPath
    // (check_hardened), no ConfigMap.
    let volumes = volumes_by_name(pod);
    let mounts: BTreeMap<&str, &str> = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["mountPath"].as_str().unwrap(),
                m["name"].as_str().unwrap(),
            )
        })
        .collect();
    let cache = env_var(env, "OPERON_CACHE_DIR")["value"].as_str().unwrap();
    let ca = env_var(env, "OPERON_MODULE_SOURCE_CA")["value"]
        .as_str()
        .unwrap();
    let ca_dir = ca
        .strip_suffix("/ca.crt")
        .expect("OPERON_MODULE_SOURCE_CA names ca.crt");
    // The data root is the flag's default: the script store lives on this volume.
    assert_eq!(
        mounts.keys().copied().collect::<BTreeSet<_>>(),
        BTreeSet::from(["/tmp", cache, "/var/lib/operon", ca_dir])
    );
    for (path, volume) in &mounts {
        if *path == ca_dir {
            let secret = &volumes[volume]["secret"];
            assert_eq!(
                secret["items"],
                json!([{"key": "ca.crt", "path": "ca.crt"}])
            );
            assert_eq!(
                secret["optional"], true,
                "the agent starts before the Secret exists"
            );
            assert!(
                secret["secretName"]
                    .as_str()
                    .unwrap()
                    .ends_with("webhook-tls"),
                "{secret}"
            );
            continue;
        }
        let keys: Vec<&String> = volumes[volume].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["emptyDir", "name"], "{path} is an emptyDir");
    }
    let ca_mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == ca_dir)
        .unwrap();
    assert_eq!(ca_mount["readOnly"], true);
    assert_eq!(volumes.len(), mounts.len(), "every volume is mounted once");
}

/// The controller's Deployment, Services and PodDisruptionBudget do not select the
/// agent's pods (they would be webhook and metrics endpoints and break the budget), nor
/// does the DaemonSet select the controller's.
fn check_selectors_apart(objects: &[Value]) {
    let agent_pods = &daemon_set(objects)["spec"]["template"]["metadata"]["labels"];
    let controller = find(objects, "Deployment", "operon");
    let controller_pods = &controller["spec"]["template"]["metadata"]["labels"];
    let mut selectors = vec![(
        "Deployment/operon".to_owned(),
        &controller["spec"]["selector"]["matchLabels"],
    )];
    for service in of_kind(objects, "Service") {
        selectors.push((
            format!("Service/{}", name(service)),
            &service["spec"]["selector"],
        ));
    }
    for budget in of_kind(objects, "PodDisruptionBudget") {
        selectors.push((
            format!("PodDisruptionBudget/{}", name(budget)),
            &budget["spec"]["selector"]["matchLabels"],
        ));
    }
    assert!(selectors.len() > 2, "{selectors:?}");
    for (object, selector) in selectors {
        assert!(
            !selects(selector, agent_pods),
            "{object} selects the agent's pods"
        );
    }
    assert!(
        !selects(
            &daemon_set(objects)["spec"]["selector"]["matchLabels"],
            controller_pods
        ),
        "the DaemonSet selects the controller's pods"
    );
}

#[test]
fn kustomization_and_chart_render_the_same_agent() {
    let expected: BTreeSet<String> = [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "DaemonSet",
    ]
    .into_iter()
    .map(|kind| format!("{kind}/{AGENT}"))
    .chain(["ClusterRole", "ClusterRoleBinding"].map(|kind| format!("{kind}/{BUILT_INS}")))
    .collect();
    let kustomized = agent_objects(&KUSTOMIZATION);
    let charted = agent_objects(&CHART);
    assert_eq!(kinds_and_names(&kustomized), expected);
    assert_eq!(kinds_and_names(&charted), expected);
    let (kustomized, charted) = (normalized(&kustomized), normalized(&charted));
    for (key, object) in &kustomized {
        assert_same(&format!("{key} (helm vs kustomize)"), &charted[key], object);
    }
}

#[test]
fn kustomization_agent_rbac_is_exactly_what_a_diagnosis_run_needs() {
    check_agent_rbac(&KUSTOMIZATION);
}

#[test]
fn chart_agent_rbac_is_exactly_what_a_diagnosis_run_needs() {
    check_agent_rbac(&CHART);
}

#[test]
fn kustomization_daemon_set_is_hardened_and_probed() {
    check_daemon_set(&KUSTOMIZATION);
    check_selectors_apart(&KUSTOMIZATION);
}

#[test]
fn chart_daemon_set_is_hardened_and_probed() {
    check_daemon_set(&CHART);
    check_selectors_apart(&CHART);
}

#[test]
fn chart_agent_can_be_turned_off_or_tuned() {
    // Off: no agent object; the controller still reads the agents' Leases, so that
    // Diagnoses placed on a node say NoAgent.
    let objects = helm(&["--include-crds", "--set", "agent.enabled=false"]);
    assert!(
        agent_objects(&objects).is_empty(),
        "{:?}",
        kinds_and_names(&objects)
    );
    assert!(
        kinds_and_names(&objects)
            .iter()
            .all(|o| !o.ends_with(AGENT)),
        "{:?}",
        kinds_and_names(&objects)
    );
    find(&objects, "Role", "operon-agent-leases");

    // The node's processes for the process list: the PID namespace, nothing else.
    let objects = helm(&["--include-crds", "--set", "agent.hostPID=true"]);
    let pod = &daemon_set(&objects)["spec"]["template"]["spec"];
    assert_eq!(pod["hostPID"], true);
    assert!(pod.get("hostNetwork").is_none() && pod.get("hostIPC").is_none());
    assert!(
        daemon_set(&CHART)["spec"]["template"]["spec"]
            .get("hostPID")
            .is_none()
    );

    // The node's system bus for the systemd built-in: /run/dbus read-only.
    let objects = helm(&["--include-crds", "--set", "agent.systemd.enabled=true"]);
    let pod = &daemon_set(&objects)["spec"]["template"]["spec"];
    let volumes = volumes_by_name(pod);
    assert_eq!(
        volumes["system-bus"]["hostPath"],
        json!({"path": "/run/dbus", "type": "Directory"})
    );
    let mounts = &agent_container(&objects)["volumeMounts"];
    assert!(
        mounts.as_array().unwrap().iter().any(
            |m| m == &json!({"name": "system-bus", "mountPath": "/run/dbus", "readOnly": true})
        ),
        "{mounts}"
    );

    // Built-ins off: the agent runs, without their grants.
    let objects = helm(&["--include-crds", "--set", "agent.builtIns.enabled=false"]);
    find(&objects, "DaemonSet", AGENT);
    assert!(
        !kinds_and_names(&objects)
            .iter()
            .any(|o| o.ends_with(BUILT_INS)),
        "{:?}",
        kinds_and_names(&objects)
    );

    let objects = helm(&[
        "--include-crds",
        "--set",
        "agent.extraArgs={--strict,--diagnosis-concurrency=4}",
        "--set",
        "agent.resources.limits.memory=1Gi",
        "--set-json",
        r#"agent.tolerations=[{"key":"dedicated","operator":"Equal","value":"ops","effect":"NoSchedule"},{"operator":"Exists"}]"#,
        "--set-json",
        r#"agent.nodeSelector={"kubernetes.io/os":"linux","operon.dev/agent":"true"}"#,
    ]);
    check_daemon_set(&objects);
    check_agent_rbac(&objects);
    let args = agent_args(&objects);
    assert!(
        args.ends_with(&[
            "--strict".to_owned(),
            "--diagnosis-concurrency=4".to_owned()
        ]),
        "{args:?}"
    );
    assert_eq!(
        agent_container(&objects)["resources"]["limits"]["memory"],
        "1Gi"
    );
    let pod = &daemon_set(&objects)["spec"]["template"]["spec"];
    assert_eq!(pod["tolerations"].as_array().unwrap().len(), 2);
    assert_eq!(
        pod["nodeSelector"],
        json!({"kubernetes.io/os": "linux", "operon.dev/agent": "true"})
    );
}

/// The DaemonSet's pod and agent container with the node's filesystem mounted: checks
/// what both the node-access component and the chart's agent.nodeRoot must give.
fn check_node_root(objects: &[Value]) {
    let pod = &daemon_set(objects)["spec"]["template"]["spec"];
    // The journal's readers on Debian, Ubuntu and RHEL; the rest of the hardening is
    // every pod's.
    let mut unprivileged = pod.clone();
    let groups = unprivileged["securityContext"]
        .as_object_mut()
        .unwrap()
        .remove("supplementalGroups");
    assert_eq!(groups, Some(json!([4])));
    // ... but for this one hostPath, checked below.
    unprivileged["volumes"]
        .as_array_mut()
        .unwrap()
        .retain(|v| v["name"] != "node-root");
    check_hardened(&unprivileged, agent_container(objects));
    let volumes = volumes_by_name(pod);
    assert_eq!(
        volumes["node-root"]["hostPath"],
        json!({"path": "/", "type": "Directory"})
    );
    let container = agent_container(objects);
    let mounts: Vec<&Value> = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["name"] == "node-root")
        .collect();
    assert_eq!(
        mounts,
        [&json!({"name": "node-root", "mountPath": "/host", "readOnly": true})]
    );
    let env = container["env"].as_array().unwrap();
    assert_eq!(
        env_var(env, "OPERON_NODE_ROOT")["value"],
        "/host",
        "--node-root names the mount"
    );
    assert!(
        flags(&AGENT_HELP).contains_key("node-root"),
        "operon agent takes --node-root"
    );
    assert!(pod.get("hostPID").is_none() && pod.get("hostNetwork").is_none());
}

#[test]
fn node_access_mounts_the_node_read_only_in_a_privileged_namespace() {
    let objects = crate::deploy_support::kustomize_with(&["node-access"]);
    check_node_root(&objects);
    check_agent_rbac(&objects);
    let labels = &find(&objects, "Namespace", NAMESPACE)["metadata"]["labels"];
    assert_eq!(labels["pod-security.kubernetes.io/enforce"], "privileged");
    assert_eq!(labels["pod-security.kubernetes.io/warn"], "restricted");
    assert_eq!(labels["pod-security.kubernetes.io/audit"], "restricted");
    // Without the component: no node file, and `restricted` enforced.
    let pod = &daemon_set(&KUSTOMIZATION)["spec"]["template"]["spec"];
    assert!(!volumes_by_name(pod).contains_key("node-root"));
    assert_eq!(
        find(&KUSTOMIZATION, "Namespace", NAMESPACE)["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "restricted"
    );

    // The chart's agent.nodeRoot renders the same agent, but for the order of lists
    // merged by name (a strategic merge patch puts what it adds first).
    let charted = helm(&["--include-crds", "--set", "agent.nodeRoot.enabled=true"]);
    check_node_root(&charted);
    let by_name = |objects: &[Value]| {
        let mut objects = agent_objects(objects);
        for object in &mut objects {
            for path in [
                "/spec/template/spec/volumes",
                "/spec/template/spec/containers/0/env",
                "/spec/template/spec/containers/0/volumeMounts",
            ] {
                if let Some(items) = object.pointer_mut(path).and_then(Value::as_array_mut) {
                    items.sort_by_key(|item| item["name"].as_str().unwrap_or("").to_owned());
                }
            }
        }
        normalized(&objects)
    };
    let (kustomized, charted) = (by_name(&objects), by_name(&charted));
    for (key, object) in &kustomized {
        assert_same(&format!("{key} (helm vs kustomize)"), &charted[key], object);
    }
}

/// `ociModules.verificationConfigMap`: the controller and the agents both check the
/// signatures of the `oci://` modules they pull, against the same file mounted
/// read-only from the ConfigMap (its trust-root files beside it).
#[test]
fn chart_checks_module_signatures_in_the_controller_and_the_agents() {
    let flag = "--module-verification=/etc/operon/module-verification/verification.yaml";
    let objects = helm(&[
        "--include-crds",
        "--set",
        "ociModules.verificationConfigMap=module-verification",
    ]);
    let deployment = find(&objects, "Deployment", "operon");
    let controller = &deployment["spec"]["template"]["spec"]["containers"][0];
    for (pod, container) in [
        (&deployment["spec"]["template"]["spec"], controller),
        (
            &daemon_set(&objects)["spec"]["template"]["spec"],
            agent_container(&objects),
        ),
    ] {
        assert!(
            strings(&container["args"]).iter().any(|a| a == flag),
            "{}",
            container["args"]
        );
        assert_eq!(
            volumes_by_name(pod)["module-verification"]["configMap"],
            json!({"name": "module-verification"})
        );
        assert!(
            container["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m
                    == &json!({"name": "module-verification",
                           "mountPath": "/etc/operon/module-verification", "readOnly": true})),
            "{}",
            container["volumeMounts"]
        );
    }
    // Off by default.
    assert!(
        !strings(&agent_container(&CHART)["args"])
            .iter()
            .any(|a| a.starts_with("--module-verification"))
    );
}
