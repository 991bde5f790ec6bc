//! The Kubernetes manifests in `deploy/`, with no cluster: the kustomization rendered
//! by `kubectl kustomize`, the Helm chart rendered by Helm's own engine
//! (`deploy/helm/render.py` over the `helm-python-sdk` package, which `.ci/setup`
//! installs), and the container image built with buildah or podman (ignored unless
//! asked for: `cargo test -p operon-engine --test it deploy::image -- --ignored`).
//!
//! Both renderings go through the same checks (RBAC, the Deployment's hardening, its
//! flags against `operon serve --help`, the webhooks' Service, ports and certificate),
//! and the chart's default rendering must equal the kustomization's, labels and
//! annotations aside, so the two cannot drift apart; so must the chart's cert-manager
//! variant and the kustomization with its cert-manager component. The node agent's
//! objects are checked by `deploy_agent.rs`; the helpers both use are in
//! `deploy_support/`.

use crate::deploy_support::{
    CHART, Grant, HOOKS_CONFIGMAP, KUSTOMIZATION, NAMESPACE, UID, assert_same, check_command_line,
    check_hardened, check_probes_and_resources, deploy, documents, find, flag_value, flags, grant,
    grants, helm, help, help_default, image, is_agent, is_port_name, kind, kinds_and_names,
    kustomize, name, normalized, of_kind, render_chart, selects, strings, text, volumes_by_name,
    without_hash,
};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::LazyLock;

/// The Service in front of every replica's webhook servers.
const WEBHOOK_SERVICE: &str = "operon-webhooks";
/// The Validating- and MutatingWebhookConfiguration's name. Not `operon serve`'s default
/// (`operon-hooks`): kustomize rewrites RBAC resourceNames equal to a generated
/// ConfigMap's name, and the hooks ConfigMap is `operon-hooks`.
const WEBHOOK_CONFIGURATION: &str = "operon-webhooks";
/// The Secret holding the webhooks' certificate (Operon's own, or cert-manager's).
const WEBHOOK_TLS_SECRET: &str = "operon-webhook-tls";
/// The Secret holding the Alertmanager receiver's bearer token, and the Role that reads
/// it.
const ALERTMANAGER_TOKEN_SECRET: &str = "operon-alertmanager-token";
/// Where the webhooks' certificate files are, in either variant.
const WEBHOOK_TLS_DIR: &str = "/var/run/operon-webhook-tls";
/// Kinds without a namespace among what `deploy/` creates.
const CLUSTER_SCOPED: [&str; 4] = [
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
];

static SERVICE_MONITOR: LazyLock<Vec<Value>> =
    LazyLock::new(|| kustomize(&deploy().join("servicemonitor")));
/// The kustomization with its cert-manager component, as a kustomization of your own
/// beside deploy/ would list them.
static CERT_MANAGER: LazyLock<Vec<Value>> =
    LazyLock::new(|| crate::deploy_support::kustomize_with(&["cert-manager"]));

/// `operon serve --help` of the binary this test builds.
static SERVE_HELP: LazyLock<String> = LazyLock::new(|| crate::deploy_support::help("serve"));

/// The `[default: ...]` of `--flag` in `operon serve --help`, if it has one.
fn serve_default(flag: &str) -> Option<String> {
    help_default(&SERVE_HELP, flag)
}

/// What `--flag` is set to in `args`, or else its default.
fn serve_setting(args: &[String], flag: &str) -> String {
    flag_value(args, flag)
        .or_else(|| serve_default(flag))
        .unwrap_or_else(|| panic!("--{flag} is neither given ({args:?}) nor defaulted"))
}

fn container(objects: &[Value]) -> &Value {
    let deployment = find(objects, "Deployment", "operon");
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers");
    assert_eq!(containers.len(), 1, "one container: {containers:?}");
    &containers[0]
}

fn args(objects: &[Value]) -> Vec<String> {
    strings(&container(objects)["args"])
}

// ---- checks both renderings must pass -------------------------------------------------

fn check_namespaces(objects: &[Value]) {
    for object in objects {
        let namespace = object["metadata"]["namespace"].as_str();
        // The seccomp profile's installer has a namespace of its own (deploy_seccomp.rs).
        if kind(object) == "DaemonSet" && name(object) == "operon-seccomp" {
            assert_eq!(namespace, Some("operon-node"));
            continue;
        }
        // The kubelets' Leases are read where they are.
        let node_leases = name(object).ends_with("node-leases");
        if node_leases {
            assert_eq!(namespace, Some("kube-node-lease"), "{object}");
        } else if CLUSTER_SCOPED.contains(&kind(object)) {
            assert_eq!(namespace, None, "{} is cluster-scoped", name(object));
        } else {
            assert_eq!(
                namespace,
                Some(NAMESPACE),
                "{}/{} is not in namespace {NAMESPACE}",
                kind(object),
                name(object)
            );
        }
        // The controller's bindings name its ServiceAccount, the agent's the agent's.
        let account = if is_agent(object) {
            "operon-agent"
        } else {
            "operon"
        };
        for subject in object["subjects"].as_array().into_iter().flatten() {
            assert_eq!(subject["kind"], "ServiceAccount", "{object}");
            assert_eq!(subject["name"], account, "{object}");
            assert_eq!(subject["namespace"], NAMESPACE, "{object}");
        }
    }
}

/// What the controller may do for its webhooks.
struct WebhookGrants<'a> {
    /// The Validating- and MutatingWebhookConfiguration it may read, create (by
    /// server-side apply), patch and delete.
    configuration: &'a str,
    /// The CRDs whose conversion it may register: `None` no CRD at all, an empty list
    /// any CRD.
    conversion_crds: Option<&'a [&'a str]>,
    /// The Secret of its self-signed certificate, when it keeps one (a Role in its
    /// namespace: create any, read and update this one).
    tls_secret: Option<&'a str>,
}

/// What deploy/ and the chart grant by default.
const DEFAULT_WEBHOOK_GRANTS: WebhookGrants<'static> = WebhookGrants {
    configuration: WEBHOOK_CONFIGURATION,
    conversion_crds: Some(&[]),
    tls_secret: Some(WEBHOOK_TLS_SECRET),
};

/// The controller's permissions are exactly its own resources, its Lease, Events,
/// placing and running Diagnoses (results ConfigMaps, Nodes and Pods read, the agents'
/// Leases read) and, with webhooks, their configurations, CRD conversions and
/// certificate Secret. The node agent's objects are deploy_agent.rs's.
fn check_rbac(objects: &[Value], lease: &str, webhooks: Option<&WebhookGrants>) {
    let objects: Vec<Value> = objects.iter().filter(|o| !is_agent(o)).cloned().collect();
    let objects = objects.as_slice();
    for role in of_kind(objects, "ClusterRole")
        .into_iter()
        .chain(of_kind(objects, "Role"))
    {
        for (group, resource, verb, _) in grants(role) {
            assert!(
                !group.contains('*') && !resource.contains('*') && !verb.contains('*'),
                "{}: wildcard in {group}/{resource} {verb}",
                name(role)
            );
        }
    }
    let (crds, reports): (Vec<&Value>, Vec<&Value>) = of_kind(objects, "CustomResourceDefinition")
        .into_iter()
        .partition(|crd| crd["spec"]["group"] == "operon.dev");
    assert_eq!(crds.len(), 7, "the seven operon.dev CRDs");
    assert_eq!(
        reports.iter().map(|crd| name(crd)).collect::<BTreeSet<_>>(),
        BTreeSet::from([
            "clusterpolicyreports.wgpolicyk8s.io",
            "policyreports.wgpolicyk8s.io"
        ]),
        "besides, the PolicyReport CRDs audits write"
    );

    let mut expected = BTreeSet::new();
    for crd in &crds {
        assert_eq!(crd["spec"]["group"], "operon.dev");
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap();
        for verb in ["get", "list", "watch"] {
            expected.insert(grant("operon.dev", plural, verb, ""));
        }
        let has_status = crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["subresources"].get("status").is_some());
        if has_status {
            for verb in ["get", "update", "patch"] {
                expected.insert(grant("operon.dev", &format!("{plural}/status"), verb, ""));
            }
        }
    }
    for verb in ["create", "update", "patch", "delete"] {
        expected.insert(grant("operon.dev", "diagnoses", verb, ""));
    }
    for group in ["", "events.k8s.io"] {
        // Recording Events, and watching them for event Triggers.
        for verb in ["create", "patch", "list", "watch"] {
            expected.insert(grant(group, "events", verb, ""));
        }
    }
    // The results ConfigMap of a Diagnosis run here: server-side apply (`patch`, and
    // `create` when it creates), read back on resume.
    for verb in ["get", "create", "patch"] {
        expected.insert(grant("", "configmaps", verb, ""));
    }
    // Placing a Diagnosis: the Node it names, the Pod it references.
    expected.insert(grant("", "nodes", "get", ""));
    expected.insert(grant("", "pods", "get", ""));
    // A Diagnosis about several nodes: its nodeSelector's Nodes listed, its children
    // created owned by it with blockOwnerDeletion (allowed to who may update its
    // finalizers).
    expected.insert(grant("", "nodes", "list", ""));
    // The nodes Diagnoses are placed on, followed for their Ready condition.
    expected.insert(grant("", "nodes", "watch", ""));
    expected.insert(grant("operon.dev", "diagnoses/finalizers", "update", ""));
    // job steps: their Job and input ConfigMap, the pods watched and a log read for
    // the result; argoWorkflow steps: their Workflow, watched and told to terminate.
    for verb in ["get", "list", "watch", "create", "delete"] {
        expected.insert(grant("batch", "jobs", verb, ""));
    }
    // The input ConfigMaps: deleted after the run, and a `runOn: Job` Hook's listed when
    // its engine starts, for those a lost leader left.
    for verb in ["delete", "list"] {
        expected.insert(grant("", "configmaps", verb, ""));
    }
    for verb in ["list", "watch"] {
        expected.insert(grant("", "pods", verb, ""));
    }
    expected.insert(grant("", "pods/log", "get", ""));
    for verb in ["get", "list", "watch", "create", "patch"] {
        expected.insert(grant("argoproj.io", "workflows", verb, ""));
    }
    // The module API: Modules written with server-side apply and removed on request,
    // callers reviewed by the API server.
    for verb in ["create", "patch", "delete"] {
        expected.insert(grant("operon.dev", "modules", verb, ""));
    }
    expected.insert(grant("authentication.k8s.io", "tokenreviews", "create", ""));
    expected.insert(grant(
        "authorization.k8s.io",
        "subjectaccessreviews",
        "create",
        "",
    ));
    // Audits: reports written with server-side apply, Operon's listed, stale ones
    // deleted; Namespaces listed and watched for namespaceSelectors.
    for resource in ["policyreports", "clusterpolicyreports"] {
        for verb in ["list", "create", "patch", "delete"] {
            expected.insert(grant("wgpolicyk8s.io", resource, verb, ""));
        }
    }
    for verb in ["list", "watch"] {
        expected.insert(grant("", "namespaces", verb, ""));
    }
    if let Some(webhooks) = webhooks {
        // Server-side apply creates a missing configuration with a PATCH that the API
        // server authorizes as `create` of that name, so `create` is named too.
        for resource in [
            "validatingwebhookconfigurations",
            "mutatingwebhookconfigurations",
        ] {
            for verb in ["get", "create", "patch", "delete"] {
                expected.insert(grant(
                    "admissionregistration.k8s.io",
                    resource,
                    verb,
                    webhooks.configuration,
                ));
            }
            // Hook objects' webhooks: one configuration per Hook, so any name; listed to
            // find those of Hooks that went while no leader ran.
            for verb in ["list", "create", "patch", "delete"] {
                expected.insert(grant("admissionregistration.k8s.io", resource, verb, ""));
            }
        }
        // Patching spec.conversion, never creating a CRD; listing CRDs to give back the
        // conversions of hooks that are gone.
        if webhooks.conversion_crds.is_some() {
            expected.insert(grant(
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                "list",
                "",
            ));
        }
        let crds = match webhooks.conversion_crds {
            None => vec![],
            Some([]) => vec![""],
            Some(names) => names.to_vec(),
        };
        for crd in crds {
            for verb in ["get", "patch"] {
                expected.insert(grant(
                    "apiextensions.k8s.io",
                    "customresourcedefinitions",
                    verb,
                    crd,
                ));
            }
        }
    }
    let cluster_role = find(objects, "ClusterRole", "operon");
    assert_eq!(
        grants(cluster_role),
        expected,
        "the controller's ClusterRole"
    );
    // Besides Operon's own, the role for people who write Hooks and push modules: not
    // aggregated into admin or edit (a Hook acts with Operon's account).
    let author = of_kind(objects, "ClusterRole")
        .into_iter()
        .find(|r| name(r).ends_with("hook-author"))
        .expect("the hook author ClusterRole");
    let mut authoring = BTreeSet::new();
    for verb in [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ] {
        authoring.insert(grant("operon.dev", "hooks", verb, ""));
    }
    for verb in ["get", "list", "watch", "create", "delete"] {
        authoring.insert(grant("operon.dev", "modules", verb, ""));
    }
    assert_eq!(grants(author), authoring, "the hook author ClusterRole");
    assert!(author["aggregationRule"].is_null());
    assert!(
        !author["metadata"]["labels"]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.starts_with("rbac.authorization.k8s.io/aggregate-to")),
        "not aggregated"
    );
    assert_eq!(of_kind(objects, "ClusterRole").len(), 2);
    assert!(
        !grants(cluster_role).iter().any(|g| g.1 == "leases"),
        "Leases belong in a Role"
    );
    assert!(
        !grants(cluster_role).iter().any(|g| g.1 == "secrets"),
        "no Secret of any namespace"
    );

    let role = find(objects, "Role", "operon-leader-election");
    assert_eq!(
        grants(role),
        BTreeSet::from([
            grant("coordination.k8s.io", "leases", "create", ""),
            grant("coordination.k8s.io", "leases", "get", lease),
            grant("coordination.k8s.io", "leases", "update", lease),
        ]),
        "the leader-election Role"
    );

    let mut bindings = vec![
        ("ClusterRoleBinding", "operon", "ClusterRole", "operon"),
        (
            "RoleBinding",
            "operon-leader-election",
            "Role",
            "operon-leader-election",
        ),
    ];
    // The agents' Leases, read (only) to tell whether a node has an agent.
    let role = find(objects, "Role", "operon-agent-leases");
    assert_eq!(
        grants(role),
        BTreeSet::from([grant("coordination.k8s.io", "leases", "get", "")]),
        "the agent-Lease Role"
    );
    bindings.push((
        "RoleBinding",
        "operon-agent-leases",
        "Role",
        "operon-agent-leases",
    ));
    // The kubelets' Leases, in kube-node-lease, read (only) by the node-lease built-in.
    let role = find(objects, "Role", "operon-node-leases");
    assert_eq!(role["metadata"]["namespace"], "kube-node-lease");
    assert_eq!(
        grants(role),
        BTreeSet::from([grant("coordination.k8s.io", "leases", "get", "")]),
        "the kubelet-Lease Role"
    );
    bindings.push((
        "RoleBinding",
        "operon-node-leases",
        "Role",
        "operon-node-leases",
    ));
    let mut roles = BTreeSet::from([
        "operon-leader-election",
        "operon-agent-leases",
        "operon-node-leases",
    ]);
    // The Alertmanager receiver's token: read and watched by name, never written, and
    // there exactly when the flag names it.
    let token_secret = alertmanager_token_secret(objects);
    let token_role = of_kind(objects, "Role")
        .into_iter()
        .find(|r| name(r) == ALERTMANAGER_TOKEN_SECRET);
    assert_eq!(
        token_secret.is_some(),
        token_role.is_some(),
        "the token Role comes with --alertmanager-token-secret"
    );
    if let (Some(secret), Some(role)) = (token_secret, token_role) {
        assert_eq!(
            grants(role),
            ["get", "list", "watch"]
                .into_iter()
                .map(|verb| grant("", "secrets", verb, &secret))
                .collect(),
            "the Alertmanager token's Role"
        );
        bindings.push((
            "RoleBinding",
            ALERTMANAGER_TOKEN_SECRET,
            "Role",
            ALERTMANAGER_TOKEN_SECRET,
        ));
        roles.insert(ALERTMANAGER_TOKEN_SECRET);
    }
    if let Some(secret) = webhooks.and_then(|w| w.tls_secret) {
        let role = find(objects, "Role", "operon-webhook-tls");
        // A POST carries no name to authorize, so `create` cannot be limited to one.
        assert_eq!(
            grants(role),
            BTreeSet::from([
                grant("", "secrets", "create", ""),
                grant("", "secrets", "get", secret),
                grant("", "secrets", "update", secret),
            ]),
            "the webhook certificate's Role"
        );
        bindings.push((
            "RoleBinding",
            "operon-webhook-tls",
            "Role",
            "operon-webhook-tls",
        ));
        roles.insert("operon-webhook-tls");
    }
    assert_eq!(
        of_kind(objects, "Role")
            .into_iter()
            .map(name)
            .collect::<BTreeSet<_>>(),
        roles
    );
    assert_eq!(
        of_kind(objects, "RoleBinding")
            .into_iter()
            .map(name)
            .collect::<BTreeSet<_>>(),
        roles,
        "a RoleBinding per Role, named alike"
    );
    for (binding_kind, binding, role_kind, role_name) in bindings {
        let binding = find(objects, binding_kind, binding);
        assert_eq!(
            binding["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name})
        );
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "operon", "namespace": NAMESPACE}])
        );
    }
    find(objects, "ServiceAccount", "operon");
}

/// The Secret `--alertmanager-token-secret` names (`$(POD_NAMESPACE)/NAME`: the
/// engine's own namespace, which the kubelet expands), if the flag is given.
fn alertmanager_token_secret(objects: &[Value]) -> Option<String> {
    let value = flag_value(&args(objects), "alertmanager-token-secret")?;
    let name = value
        .strip_prefix("$(POD_NAMESPACE)/")
        .unwrap_or_else(|| panic!("the token Secret is in the engine's namespace: {value}"));
    Some(name.to_owned())
}

/// Every `--flag` of the container is one `operon serve` accepts, with a value exactly
/// when it takes one, and every environment variable is one it reads.
fn check_args(args: &[String], env: &[Value]) {
    let flags = flags(&SERVE_HELP);
    assert!(
        flags.contains_key("hooks-dir") && flags.contains_key("leader-elect"),
        "unexpected `operon serve --help`: {}",
        *SERVE_HELP
    );
    check_command_line("serve", &SERVE_HELP, args, env);
}

/// The controller Deployment: replicas, leader election, downward API, probes,
/// resources, hardening and volumes.
fn check_deployment(objects: &[Value], replicas: i64, leader_elect: bool) {
    let deployment = find(objects, "Deployment", "operon");
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"], replicas);
    assert!(
        selects(
            &spec["selector"]["matchLabels"],
            &spec["template"]["metadata"]["labels"]
        ),
        "the selector selects the pod template"
    );
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "operon");
    assert!(
        pod["terminationGracePeriodSeconds"].as_i64().unwrap() > 30,
        "above the 30 s --graceful-shutdown-period"
    );

    let container = container(objects);
    check_hardened(pod, container);
    assert_eq!(container["image"].as_str().unwrap(), image());

    let args = args(objects);
    let env = container["env"].as_array().expect("env");
    check_args(&args, env);
    assert_eq!(args.contains(&"--leader-elect".to_owned()), leader_elect);
    let env_var = |var: &str| {
        env.iter()
            .find(|e| e["name"] == var)
            .unwrap_or_else(|| panic!("no {var} in {env:?}"))
    };
    assert_eq!(
        env_var("POD_NAME")["valueFrom"],
        json!({"fieldRef": {"fieldPath": "metadata.name"}})
    );
    assert_eq!(
        env_var("POD_NAMESPACE")["valueFrom"],
        json!({"fieldRef": {"fieldPath": "metadata.namespace"}})
    );
    // Where the other replicas fetch uploaded modules from this one.
    assert_eq!(
        env_var("POD_IP")["valueFrom"],
        json!({"fieldRef": {"fieldPath": "status.podIP"}})
    );

    let ports = container["ports"].as_array().expect("ports");
    assert_eq!(
        ports[0],
        json!({"name": "http-metrics", "containerPort": 9115, "protocol": "TCP"})
    );
    for port in ports {
        let name = port["name"].as_str().expect("every port is named");
        assert!(
            is_port_name(name),
            "{name:?} is not a valid container port name"
        );
    }
    assert_eq!(flag_value(&args, "listen-port").as_deref(), Some("9115"));
    check_probes_and_resources(container, "http-metrics");

    // Volumes: the hooks from a ConfigMap, executable; emptyDirs for every path the
    // controller writes, since the root filesystem is read-only.
    let volumes = volumes_by_name(pod);
    let mounts: BTreeMap<&str, &Value> = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["mountPath"].as_str().unwrap(), m))
        .collect();
    let volume_at = |path: &str| {
        let mount = mounts
            .get(path)
            .unwrap_or_else(|| panic!("nothing mounted at {path}"));
        volumes[mount["name"].as_str().unwrap()]
    };
    assert_eq!(flag_value(&args, "hooks-dir").as_deref(), Some("/hooks"));
    assert_eq!(mounts["/hooks"]["readOnly"], true);
    let hooks = &volume_at("/hooks")["configMap"];
    assert_eq!(hooks["defaultMode"], 0o755, "hooks must be executable");
    let configmap = hooks["name"].as_str().unwrap();
    assert_eq!(without_hash(configmap), HOOKS_CONFIGMAP);
    find(objects, "ConfigMap", configmap);

    let socket = flag_value(&args, "debug-unix-socket").expect("--debug-unix-socket");
    let socket_dir = Path::new(&socket).parent().unwrap().to_str().unwrap();
    let cache = env_var("OPERON_CACHE_DIR")["value"].as_str().unwrap();
    for path in ["/tmp", socket_dir, cache] {
        assert!(
            volume_at(path).get("emptyDir").is_some(),
            "{path} is an emptyDir"
        );
    }
    // The webhooks' certificate directory is checked by check_webhooks.
    let expected = ["hooks", "tmp", "run", "module-cache", "webhook-tls"];
    assert!(volumes.keys().all(|v| expected.contains(v)), "{volumes:?}");
    assert_eq!(volumes.len(), mounts.len(), "every volume is mounted once");
}

/// Where the webhooks' serving certificate comes from.
enum Certificate<'a> {
    /// `--webhook-self-signed`: Operon makes it, keeps it in this Secret and writes it to
    /// a memory emptyDir.
    SelfSigned { secret: &'a str },
    /// Files of this Secret (cert-manager's or yours), mounted read-only and passed as
    /// both servers' certificate, key and CA.
    Mounted { secret: &'a str },
}

/// The volume mounted at `path` in the controller's pod, and its mount.
fn mounted_at<'a>(objects: &'a [Value], path: &str) -> (&'a Value, &'a Value) {
    let pod = &find(objects, "Deployment", "operon")["spec"]["template"]["spec"];
    let mount = container(objects)["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == path)
        .unwrap_or_else(|| panic!("nothing mounted at {path}"));
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap_or_else(|| panic!("no volume {}", mount["name"]));
    (volume, mount)
}

/// The webhooks: every replica serves them behind the Service the registration names,
/// on the container ports the servers listen on, with the certificate `certificate`.
fn check_webhooks(objects: &[Value], certificate: &Certificate) {
    let args = args(objects);
    let setting = |flag: &str| serve_setting(&args, flag);
    let port = |flag: &str| -> i64 { setting(flag).parse().expect("a port number") };
    for flag in [
        "validating-webhook-service-name",
        "conversion-webhook-service-name",
    ] {
        assert_eq!(setting(flag), WEBHOOK_SERVICE, "--{flag}");
    }
    for flag in [
        "validating-webhook-configuration-name",
        "mutating-webhook-configuration-name",
    ] {
        assert_eq!(setting(flag), WEBHOOK_CONFIGURATION, "--{flag}");
    }

    // The servers' ports, named, and the Service's ports pointing at them by name.
    let container = container(objects);
    let container_port = |name: &str| {
        container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no container port {name}"))["containerPort"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(
        container_port("https-admission"),
        port("validating-webhook-listen-port")
    );
    assert_eq!(
        container_port("https-convert"),
        port("conversion-webhook-listen-port")
    );
    let service = find(objects, "Service", WEBHOOK_SERVICE);
    assert_eq!(service["spec"]["type"], "ClusterIP");
    let pod_labels =
        &find(objects, "Deployment", "operon")["spec"]["template"]["metadata"]["labels"];
    assert!(
        selects(&service["spec"]["selector"], pod_labels),
        "the webhook Service selects the controller's pods"
    );
    assert_eq!(
        service["spec"]["ports"],
        json!([
            {"name": "https-admission", "port": port("validating-webhook-service-port"),
             "targetPort": "https-admission", "protocol": "TCP"},
            {"name": "https-convert", "port": port("conversion-webhook-service-port"),
             "targetPort": "https-convert", "protocol": "TCP"},
        ])
    );

    let file_flags = [
        "validating-webhook-server-cert",
        "validating-webhook-server-key",
        "validating-webhook-ca",
        "conversion-webhook-server-cert",
        "conversion-webhook-server-key",
        "conversion-webhook-ca",
    ];
    match certificate {
        Certificate::SelfSigned { secret } => {
            assert!(
                args.contains(&"--webhook-self-signed".to_owned()),
                "{args:?}"
            );
            assert_eq!(setting("webhook-tls-secret"), *secret);
            // Its default lies under $TMPDIR, where script hooks run: given explicitly.
            let dir = flag_value(&args, "webhook-tls-dir").expect("--webhook-tls-dir");
            assert_eq!(dir, WEBHOOK_TLS_DIR);
            let (volume, mount) = mounted_at(objects, &dir);
            assert_eq!(
                volume["emptyDir"]["medium"], "Memory",
                "the key stays off the node's disk: {volume}"
            );
            assert_ne!(mount["readOnly"], true, "Operon writes {dir}");
            for flag in file_flags {
                assert_eq!(flag_value(&args, flag), None, "--{flag} with self-signed");
            }
        }
        Certificate::Mounted { secret } => {
            for flag in [
                "webhook-self-signed",
                "webhook-tls-secret",
                "webhook-tls-dir",
            ] {
                assert!(
                    args.iter()
                        .all(|a| a.split('=').next() != Some(&format!("--{flag}"))),
                    "--{flag} with certificate files: {args:?}"
                );
            }
            for flag in file_flags {
                let file = match flag.rsplit('-').next().unwrap() {
                    "cert" => "tls.crt",
                    "key" => "tls.key",
                    _ => "ca.crt",
                };
                assert_eq!(
                    flag_value(&args, flag),
                    Some(format!("{WEBHOOK_TLS_DIR}/{file}")),
                    "--{flag}"
                );
            }
            let (volume, mount) = mounted_at(objects, WEBHOOK_TLS_DIR);
            assert_eq!(
                volume,
                &json!({"name": "webhook-tls", "secret": {"secretName": secret, "defaultMode": 0o440}})
            );
            assert_eq!(mount["readOnly"], true);
        }
    }
}

/// No webhook: no Service, port, flag, volume or permission of theirs.
fn check_no_webhooks(objects: &[Value]) {
    assert!(
        of_kind(objects, "Service")
            .iter()
            .all(|s| name(s) != WEBHOOK_SERVICE)
    );
    let args = args(objects);
    assert!(args.iter().all(|a| !a.contains("webhook")), "{args:?}");
    assert_eq!(container(objects)["ports"].as_array().unwrap().len(), 1);
    let pod = &find(objects, "Deployment", "operon")["spec"]["template"]["spec"];
    assert!(
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v["name"] != "webhook-tls")
    );
    assert!(of_kind(objects, "Certificate").is_empty());
    check_rbac(objects, "operon", None);
}

fn check_service(objects: &[Value]) {
    let service = find(objects, "Service", "operon-metrics");
    let pod_labels =
        &find(objects, "Deployment", "operon")["spec"]["template"]["metadata"]["labels"];
    assert!(selects(&service["spec"]["selector"], pod_labels));
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "http-metrics", "port": 9115, "targetPort": "http-metrics", "protocol": "TCP"}])
    );
}

fn check_service_monitor(monitor: &Value, objects: &[Value]) {
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    let service = find(objects, "Service", "operon-metrics");
    assert!(selects(
        &monitor["spec"]["selector"]["matchLabels"],
        &service["metadata"]["labels"]
    ));
    // No namespaceSelector: the Service of the ServiceMonitor's own namespace.
    assert_eq!(
        monitor["metadata"]["namespace"],
        service["metadata"]["namespace"]
    );
    assert!(monitor["spec"].get("namespaceSelector").is_none());
    let endpoints = monitor["spec"]["endpoints"].as_array().unwrap();
    assert_eq!(endpoints.len(), 1);
    assert_eq!(endpoints[0]["port"], service["spec"]["ports"][0]["name"]);
    assert_eq!(endpoints[0]["path"], "/metrics");
}

// ---- the kustomization ----------------------------------------------------------------

#[test]
fn kustomization_holds_the_controller_and_nothing_optional() {
    let objects = &*KUSTOMIZATION;
    let names = kinds_and_names(objects);
    let configmaps = of_kind(objects, "ConfigMap");
    assert_eq!(configmaps.len(), 1);
    let configmap = name(configmaps[0]);
    assert_eq!(
        without_hash(configmap),
        HOOKS_CONFIGMAP,
        "the generated hooks ConfigMap"
    );
    let expected: BTreeSet<String> = [
        "Namespace/operon",
        // The seccomp profile's installer (deploy_seccomp.rs checks it).
        "Namespace/operon-node",
        "DaemonSet/operon-seccomp",
        "CustomResourceDefinition/operations.operon.dev",
        "CustomResourceDefinition/operationsets.operon.dev",
        "CustomResourceDefinition/triggers.operon.dev",
        "CustomResourceDefinition/diagnoses.operon.dev",
        "CustomResourceDefinition/modules.operon.dev",
        "CustomResourceDefinition/hooks.operon.dev",
        "CustomResourceDefinition/moduleconfigs.operon.dev",
        // The reports audits write.
        "CustomResourceDefinition/policyreports.wgpolicyk8s.io",
        "CustomResourceDefinition/clusterpolicyreports.wgpolicyk8s.io",
        "ServiceAccount/operon",
        "ClusterRole/operon",
        "ClusterRole/operon-hook-author",
        "ClusterRoleBinding/operon",
        "Role/operon-leader-election",
        "RoleBinding/operon-leader-election",
        "Role/operon-webhook-tls",
        "RoleBinding/operon-webhook-tls",
        "Role/operon-alertmanager-token",
        "RoleBinding/operon-alertmanager-token",
        &format!("ConfigMap/{configmap}"),
        "Deployment/operon",
        "Service/operon-metrics",
        "Service/operon-webhooks",
        "PodDisruptionBudget/operon",
        "Role/operon-agent-leases",
        "RoleBinding/operon-agent-leases",
        // The kubelets' Leases, in kube-node-lease.
        "Role/operon-node-leases",
        "RoleBinding/operon-node-leases",
        // The node agent (deploy_agent.rs checks it).
        "ServiceAccount/operon-agent",
        "ClusterRole/operon-agent",
        "ClusterRoleBinding/operon-agent",
        "ClusterRole/operon-agent-builtins",
        "ClusterRoleBinding/operon-agent-builtins",
        "Role/operon-agent",
        "RoleBinding/operon-agent",
        "DaemonSet/operon-agent",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(names, expected);
    // Applies on a cluster without the Prometheus operator or cert-manager.
    assert!(objects.iter().all(|o| {
        let api = o["apiVersion"].as_str().unwrap();
        !api.contains("coreos.com") && !api.contains("cert-manager.io")
    }));
}

#[test]
fn kustomization_objects_live_in_the_operon_namespace() {
    check_namespaces(&KUSTOMIZATION);
}

#[test]
fn kustomization_rbac_is_least_privilege() {
    let lease = flag_value(&args(&KUSTOMIZATION), "leader-election-lease-name")
        .expect("the Lease is named");
    check_rbac(&KUSTOMIZATION, &lease, Some(&DEFAULT_WEBHOOK_GRANTS));
    assert_eq!(
        alertmanager_token_secret(&KUSTOMIZATION).as_deref(),
        Some(ALERTMANAGER_TOKEN_SECRET),
        "the Alertmanager receiver is served"
    );
}

#[test]
fn kustomization_deployment_is_hardened_and_checked_by_probes() {
    check_deployment(&KUSTOMIZATION, 2, true);
    check_service(&KUSTOMIZATION);
}

/// Webhooks are on by default, with a certificate Operon makes: nothing to install first.
#[test]
fn kustomization_serves_webhooks_with_a_self_signed_certificate() {
    check_webhooks(
        &KUSTOMIZATION,
        &Certificate::SelfSigned {
            secret: WEBHOOK_TLS_SECRET,
        },
    );
}

#[test]
fn kustomization_crds_are_the_generated_ones() {
    let mut generated =
        documents(&std::fs::read_to_string(deploy().join("crds/operon.dev.yaml")).unwrap());
    generated.extend(documents(
        &std::fs::read_to_string(deploy().join("crds/wgpolicyk8s.io.yaml")).unwrap(),
    ));
    let rendered: Vec<Value> = of_kind(&KUSTOMIZATION, "CustomResourceDefinition")
        .into_iter()
        .cloned()
        .collect();
    let by_name = |crds: &[Value]| -> BTreeMap<String, Value> {
        crds.iter()
            .map(|c| (name(c).to_owned(), c.clone()))
            .collect()
    };
    let (rendered, generated) = (by_name(&rendered), by_name(&generated));
    assert_eq!(
        rendered.keys().collect::<Vec<_>>(),
        generated.keys().collect::<Vec<_>>()
    );
    for (name, crd) in &rendered {
        assert_same(
            &format!("CRD {name} (kustomize vs deploy/crds)"),
            crd,
            &generated[name],
        );
    }
}

#[test]
fn servicemonitor_is_separate_and_scrapes_the_metrics_service() {
    // Beside it: the agents' PodMonitor, the alerts and the dashboard (prometheus.rs).
    let monitors = of_kind(&SERVICE_MONITOR, "ServiceMonitor");
    assert_eq!(monitors.len(), 1);
    assert_eq!(monitors[0]["metadata"]["namespace"], NAMESPACE);
    check_service_monitor(monitors[0], &KUSTOMIZATION);
}

/// The cert-manager component is opt-in, and swaps the self-signed certificate for
/// cert-manager's: a private CA, the Service's serving certificate in the same Secret,
/// mounted read-only; Operon no longer writes Secrets, and nothing else changes.
#[test]
fn cert_manager_component_replaces_the_self_signed_certificate() {
    let component: Value = yaml_serde::from_str(
        &std::fs::read_to_string(deploy().join("cert-manager/kustomization.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(component["kind"], "Component");
    let kustomization: Value = yaml_serde::from_str(
        &std::fs::read_to_string(deploy().join("kustomization.yaml")).unwrap(),
    )
    .unwrap();
    assert!(
        kustomization.get("components").is_none(),
        "cert-manager is not needed by default"
    );

    let objects = &*CERT_MANAGER;
    let mut expected = kinds_and_names(&KUSTOMIZATION);
    expected.remove("Role/operon-webhook-tls");
    expected.remove("RoleBinding/operon-webhook-tls");
    for object in [
        "Issuer/operon-selfsigned",
        "Certificate/operon-webhook-ca",
        "Issuer/operon-webhook-ca",
        "Certificate/operon-webhook-tls",
    ] {
        expected.insert(object.to_owned());
    }
    assert_eq!(kinds_and_names(objects), expected);
    check_namespaces(objects);
    check_rbac(
        objects,
        "operon",
        Some(&WebhookGrants {
            tls_secret: None,
            ..DEFAULT_WEBHOOK_GRANTS
        }),
    );
    check_deployment(objects, 2, true);
    check_webhooks(
        objects,
        &Certificate::Mounted {
            secret: WEBHOOK_TLS_SECRET,
        },
    );
    check_certificates(objects, "operon-webhook-ca");

    // The same arguments but for the certificate's.
    let base = args(&KUSTOMIZATION);
    let swapped = args(objects);
    let certificate_flag = |a: &&String| {
        a.contains("webhook-tls")
            || a.contains("-server-")
            || a.contains("webhook-ca")
            || a.as_str() == "--webhook-self-signed"
    };
    assert_eq!(
        base.iter()
            .filter(|a| !certificate_flag(a))
            .collect::<Vec<_>>(),
        swapped
            .iter()
            .filter(|a| !certificate_flag(a))
            .collect::<Vec<_>>()
    );
    // Everything else as deploy/ has it, the Deployment's arguments and volumes aside.
    let without_args_and_volumes = |objects: &[Value]| {
        let mut objects = normalized(objects);
        let pod = objects
            .get_mut("Deployment/operon")
            .unwrap()
            .pointer_mut("/spec/template/spec")
            .unwrap();
        pod.as_object_mut().unwrap().remove("volumes");
        let container = pod.pointer_mut("/containers/0").unwrap();
        for field in ["args", "volumeMounts"] {
            container.as_object_mut().unwrap().remove(field);
        }
        objects
    };
    let (base, swapped) = (
        without_args_and_volumes(&KUSTOMIZATION),
        without_args_and_volumes(objects),
    );
    for (key, object) in &base {
        if let Some(other) = swapped.get(key) {
            assert_same(&format!("{key} (with cert-manager)"), other, object);
        }
    }
}

/// cert-manager's objects: a self-signed Issuer makes the CA `ca` (a CA certificate in
/// the Secret of that name, long-lived, its key kept), a CA Issuer of that Secret signs
/// the serving certificate for every name of the webhook Service into the Secret the
/// pods mount.
fn check_certificates(objects: &[Value], ca: &str) {
    let serving = find(objects, "Certificate", WEBHOOK_TLS_SECRET);
    assert_eq!(serving["apiVersion"], "cert-manager.io/v1");
    assert_eq!(serving["spec"]["secretName"], WEBHOOK_TLS_SECRET);
    let service = WEBHOOK_SERVICE;
    assert_eq!(
        serving["spec"]["dnsNames"],
        json!([
            service,
            format!("{service}.{NAMESPACE}"),
            format!("{service}.{NAMESPACE}.svc"),
            format!("{service}.{NAMESPACE}.svc.cluster.local"),
        ])
    );
    assert_eq!(
        serving["spec"]["usages"],
        json!(["server auth", "digital signature"])
    );
    assert_eq!(
        serving["spec"]["issuerRef"],
        json!({"group": "cert-manager.io", "kind": "Issuer", "name": ca})
    );
    let issuer = find(objects, "Issuer", ca);
    assert_eq!(issuer["spec"], json!({"ca": {"secretName": ca}}));
    let authority = find(objects, "Certificate", ca);
    assert_eq!(authority["spec"]["isCA"], true);
    assert_eq!(authority["spec"]["secretName"], ca);
    assert_eq!(authority["spec"]["privateKey"]["rotationPolicy"], "Never");
    let root = authority["spec"]["issuerRef"]["name"].as_str().unwrap();
    assert_eq!(
        find(objects, "Issuer", root)["spec"],
        json!({"selfSigned": {}})
    );
}

/// The image's entrypoint is the binary, so the Deployment's args start with `serve`.
#[test]
fn containerfile_runs_operon_as_the_deployment_user() {
    let containerfile = std::fs::read_to_string(deploy().join("Containerfile")).unwrap();
    let line = |prefix: &str| {
        containerfile
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in the Containerfile"))
            .to_owned()
    };
    assert_eq!(line("FROM "), "FROM scratch");
    assert_eq!(
        line("ENTRYPOINT "),
        r#"ENTRYPOINT ["/usr/local/bin/operon"]"#
    );
    assert_eq!(line("USER "), format!("USER {UID}:{UID}"));
    assert_eq!(args(&KUSTOMIZATION)[0], "serve");
}

// ---- hooks ----------------------------------------------------------------------------

fn files_in(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&path).unwrap(),
            )
        })
        .collect()
}

/// A ConfigMap's files: `data` as text, `binaryData` decoded.
fn configmap_files(configmap: &Value) -> BTreeMap<String, Vec<u8>> {
    use base64::Engine as _;
    let mut files = BTreeMap::new();
    for (key, value) in configmap["data"].as_object().into_iter().flatten() {
        files.insert(key.clone(), value.as_str().unwrap().as_bytes().to_vec());
    }
    for (key, value) in configmap["binaryData"].as_object().into_iter().flatten() {
        let encoded: String = value
            .as_str()
            .unwrap()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("binaryData is base64");
        files.insert(key.clone(), bytes);
    }
    files
}

#[test]
fn hooks_configmap_holds_exactly_the_files_of_deploy_hooks() {
    use std::os::unix::fs::PermissionsExt as _;
    let files = files_in(&deploy().join("hooks"));
    assert!(!files.is_empty());
    for file in files.keys().filter(|f| !f.ends_with(".wasm")) {
        let mode = std::fs::metadata(deploy().join("hooks").join(file))
            .unwrap()
            .permissions()
            .mode();
        assert!(mode & 0o111 != 0, "deploy/hooks/{file} is not executable");
    }
    let data = configmap_files(of_kind(&KUSTOMIZATION, "ConfigMap")[0]);
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        files.keys().collect::<Vec<_>>(),
        "deploy/kustomization.yaml's configMapGenerator lists every file of deploy/hooks"
    );
    assert!(
        data == files,
        "the ConfigMap holds deploy/hooks as they are"
    );
}

/// The example hook works as shipped: its configuration is valid and a run over two
/// Diagnoses sets its gauge per phase.
#[test]
fn example_hook_counts_diagnoses_by_phase() {
    let dir = tempfile::tempdir().unwrap();
    let objects = dir.path().join("diagnoses.yaml");
    std::fs::write(
        &objects,
        "apiVersion: operon.dev/v1alpha1\nkind: Diagnosis\n\
         metadata: {name: a, namespace: default}\nspec: {operationSet: s}\n\
         status: {phase: Succeeded}\n---\n\
         apiVersion: operon.dev/v1alpha1\nkind: Diagnosis\n\
         metadata: {name: b, namespace: team}\nspec: {operationSet: s}\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(["hook", "test"])
        .arg(deploy().join("hooks/diagnosis-phases.sh"))
        .arg("--objects")
        .arg(&objects)
        .args(["-o", "json"])
        .env("HOME", dir.path())
        .env("OPERON_CACHE_DIR", dir.path().join("cache"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{report:#}");
    let gauges: BTreeMap<String, f64> = runs[0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            assert_eq!(m["name"], "diagnoses_by_phase");
            (
                m["labels"]["phase"].as_str().unwrap().to_owned(),
                m["value"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        gauges,
        BTreeMap::from([
            ("Failed".into(), 0.0),
            ("Pending".into(), 1.0),
            ("Running".into(), 0.0),
            ("Succeeded".into(), 1.0),
        ])
    );
}

#[test]
fn hook_rbac_example_is_optional_and_grants_the_pod_labeler() {
    let path = deploy().join("examples/pod-labeler-rbac.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("# "), "the example explains itself");
    let kustomization: Value = yaml_serde::from_str(
        &std::fs::read_to_string(deploy().join("kustomization.yaml")).unwrap(),
    )
    .unwrap();
    for entry in strings(&kustomization["resources"]) {
        assert!(
            !entry.starts_with("examples"),
            "hook permissions are not applied by default: {entry}"
        );
    }
    let objects = documents(&text);
    assert_eq!(
        kinds_and_names(&objects),
        BTreeSet::from([
            "ClusterRole/operon-hook-pod-labeler".to_owned(),
            "ClusterRoleBinding/operon-hook-pod-labeler".to_owned(),
        ])
    );
    let role = find(&objects, "ClusterRole", "operon-hook-pod-labeler");
    let expected: BTreeSet<Grant> = ["get", "list", "watch", "patch"]
        .into_iter()
        .map(|verb| grant("", "pods", verb, ""))
        .collect();
    assert_eq!(grants(role), expected);
    let binding = find(&objects, "ClusterRoleBinding", "operon-hook-pod-labeler");
    assert_eq!(binding["roleRef"]["name"], "operon-hook-pod-labeler");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "operon", "namespace": NAMESPACE}])
    );
}

// ---- the Helm chart -------------------------------------------------------------------

#[test]
fn chart_copies_equal_their_sources_byte_for_byte() {
    let chart = deploy().join("helm/operon");
    for file in ["operon.dev.yaml", "wgpolicyk8s.io.yaml"] {
        assert!(
            std::fs::read(chart.join("crds").join(file)).unwrap()
                == std::fs::read(deploy().join("crds").join(file)).unwrap(),
            "deploy/helm/operon/crds/{file} differs from deploy/crds/{file}: \
             cp deploy/crds/{file} deploy/helm/operon/crds/"
        );
    }
    assert_eq!(
        files_in(&chart.join("crds")).len(),
        2,
        "only the CRDs of deploy/crds"
    );
    assert!(
        files_in(&chart.join("files/hooks")) == files_in(&deploy().join("hooks")),
        "deploy/helm/operon/files/hooks differs from deploy/hooks: \
         cp deploy/hooks/* deploy/helm/operon/files/hooks/"
    );
}

#[test]
fn chart_versions_follow_the_workspace() {
    let chart: Value = yaml_serde::from_str(
        &std::fs::read_to_string(deploy().join("helm/operon/Chart.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(chart["apiVersion"], "v2");
    assert_eq!(chart["name"], "operon");
    assert_eq!(chart["appVersion"], env!("CARGO_PKG_VERSION"));
    let kustomization: Value = yaml_serde::from_str(
        &std::fs::read_to_string(deploy().join("kustomization.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        kustomization["images"],
        json!([{"name": "ghcr.io/operon-dev/operon", "newTag": env!("CARGO_PKG_VERSION")}])
    );
}

#[test]
fn chart_passes_helm_lint_strict() {
    for args in [
        &["--lint"][..],
        &["--lint", "--set", "serviceMonitor.enabled=true"],
        &["--lint", "--set", "webhooks.certificate=certManager"],
        &["--lint", "--set", "webhooks.certificate=files"],
        &["--lint", "--set", "webhooks.enabled=false"],
        &["--lint", "--set", "agent.enabled=false"],
    ] {
        let out = render_chart(args);
        assert!(
            out.status.success(),
            "helm lint --strict {args:?}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
}

#[test]
fn chart_defaults_pass_the_same_checks() {
    let objects = &*CHART;
    check_namespaces(objects);
    check_rbac(objects, "operon", Some(&DEFAULT_WEBHOOK_GRANTS));
    check_deployment(objects, 2, true);
    check_service(objects);
    check_webhooks(
        objects,
        &Certificate::SelfSigned {
            secret: WEBHOOK_TLS_SECRET,
        },
    );
    assert!(of_kind(objects, "ServiceMonitor").is_empty());
    assert!(of_kind(objects, "Certificate").is_empty());
}

#[test]
fn chart_defaults_render_what_the_kustomization_applies() {
    let chart = normalized(&CHART);
    let kustomization = normalized(&KUSTOMIZATION);
    assert_eq!(
        chart.keys().collect::<Vec<_>>(),
        kustomization.keys().collect::<Vec<_>>(),
        "the same objects"
    );
    for (key, object) in &kustomization {
        assert_same(&format!("{key} (helm vs kustomize)"), &chart[key], object);
    }
}

#[test]
fn chart_overrides_replicas_lease_args_and_service_monitor() {
    let objects = helm(&[
        "--include-crds",
        "--set",
        "replicas=3",
        "--set",
        "serviceMonitor.enabled=true",
        "--set",
        "leaderElection.leaseName=operon-controller",
        "--set",
        "extraArgs={--strict,--kube-client-qps=20}",
    ]);
    check_deployment(&objects, 3, true);
    check_namespaces(&objects);
    check_rbac(&objects, "operon-controller", Some(&DEFAULT_WEBHOOK_GRANTS));
    let args = args(&objects);
    assert_eq!(
        flag_value(&args, "leader-election-lease-name").as_deref(),
        Some("operon-controller")
    );
    assert!(args.ends_with(&["--strict".to_owned(), "--kube-client-qps=20".to_owned()]));
    let monitors = of_kind(&objects, "ServiceMonitor");
    assert_eq!(monitors.len(), 1);
    assert_eq!(monitors[0]["metadata"]["namespace"], NAMESPACE);
    check_service_monitor(monitors[0], &objects);
    let kustomized = normalized(&SERVICE_MONITOR);
    assert_same(
        "the ServiceMonitor (helm vs kustomize)",
        &normalized(&[monitors[0].clone()])["ServiceMonitor/operon"],
        &kustomized["ServiceMonitor/operon"],
    );
}

#[test]
fn chart_without_leader_election_runs_one_replica_and_no_lease_role() {
    let objects = helm(&[
        "--set",
        "leaderElection.enabled=false",
        "--set",
        "replicas=1",
    ]);
    check_deployment(&objects, 1, false);
    let args = args(&objects);
    assert!(
        args.iter().all(|a| !a.starts_with("--leader-elect")),
        "{args:?}"
    );
    for kind_ in ["Role", "RoleBinding"] {
        assert_eq!(
            of_kind(&objects, kind_)
                .into_iter()
                .map(name)
                .collect::<BTreeSet<_>>(),
            BTreeSet::from([
                "operon-webhook-tls",
                ALERTMANAGER_TOKEN_SECRET,
                "operon-agent-leases",
                "operon-node-leases",
                "operon-agent",
            ]),
            "no {kind_} for the leader-election Lease"
        );
    }
    find(&objects, "ClusterRole", "operon");

    // Several replicas without a Lease would each run every hook: refused.
    let out = render_chart(&["--set", "leaderElection.enabled=false"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("leaderElection.enabled"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn chart_alertmanager_receiver_off_or_with_another_secret() {
    let objects = helm(&["--include-crds", "--set", "alertmanager.enabled=false"]);
    check_rbac(&objects, "operon", Some(&DEFAULT_WEBHOOK_GRANTS));
    assert_eq!(alertmanager_token_secret(&objects), None);
    assert!(
        !kinds_and_names(&objects).contains("Role/operon-alertmanager-token"),
        "no Role for a receiver that is off"
    );

    let objects = helm(&[
        "--include-crds",
        "--set",
        "alertmanager.tokenSecret=alertmanager-bearer",
    ]);
    check_rbac(&objects, "operon", Some(&DEFAULT_WEBHOOK_GRANTS));
    assert_eq!(
        alertmanager_token_secret(&objects).as_deref(),
        Some("alertmanager-bearer")
    );
}

/// The Deployment's volumes and mounts in name order: a kustomize patch may reorder them.
fn volumes_sorted(objects: &BTreeMap<String, Value>) -> BTreeMap<String, Value> {
    let mut objects = objects.clone();
    let deployment = objects.get_mut("Deployment/operon").unwrap();
    for pointer in [
        "/spec/template/spec/volumes",
        "/spec/template/spec/containers/0/volumeMounts",
    ] {
        let list = deployment
            .pointer_mut(pointer)
            .unwrap()
            .as_array_mut()
            .unwrap();
        list.sort_by_key(|v| v["name"].as_str().unwrap().to_owned());
    }
    objects
}

#[test]
fn chart_with_cert_manager_renders_what_the_component_applies() {
    let objects = helm(&[
        "--include-crds",
        "--set",
        "webhooks.certificate=certManager",
    ]);
    check_namespaces(&objects);
    check_rbac(
        &objects,
        "operon",
        Some(&WebhookGrants {
            tls_secret: None,
            ..DEFAULT_WEBHOOK_GRANTS
        }),
    );
    check_deployment(&objects, 2, true);
    check_webhooks(
        &objects,
        &Certificate::Mounted {
            secret: WEBHOOK_TLS_SECRET,
        },
    );
    check_certificates(&objects, "operon-webhook-ca");
    let chart = volumes_sorted(&normalized(&objects));
    let kustomization = volumes_sorted(&normalized(&CERT_MANAGER));
    assert_eq!(
        chart.keys().collect::<Vec<_>>(),
        kustomization.keys().collect::<Vec<_>>(),
        "the same objects"
    );
    for (key, object) in &kustomization {
        assert_same(&format!("{key} (helm vs kustomize)"), &chart[key], object);
    }

    // With an issuer of yours, only the serving certificate.
    let objects = helm(&[
        "--set",
        "webhooks.certificate=certManager",
        "--set-json",
        r#"webhooks.certManager.issuerRef={"name":"corp-ca","kind":"ClusterIssuer","group":"cert-manager.io"}"#,
    ]);
    assert!(of_kind(&objects, "Issuer").is_empty());
    let certificates = of_kind(&objects, "Certificate");
    assert_eq!(certificates.len(), 1);
    assert_eq!(
        certificates[0]["spec"]["issuerRef"],
        json!({"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"})
    );
}

#[test]
fn chart_webhooks_from_your_secret_limited_or_off() {
    // Your own Secret: mounted, nothing issued, no Secret written.
    let objects = helm(&[
        "--set",
        "webhooks.certificate=files",
        "--set",
        "webhooks.tlsSecret=my-webhook-tls",
    ]);
    check_webhooks(
        &objects,
        &Certificate::Mounted {
            secret: "my-webhook-tls",
        },
    );
    assert!(of_kind(&objects, "Certificate").is_empty());
    assert!(
        of_kind(&objects, "Role")
            .iter()
            .all(|r| name(r) != "operon-webhook-tls")
    );

    // Conversion registration limited to named CRDs, or not granted.
    let objects = helm(&[
        "--include-crds",
        "--set-json",
        r#"webhooks.conversion.crds=["crontabs.example.com","widgets.example.com"]"#,
    ]);
    check_rbac(
        &objects,
        "operon",
        Some(&WebhookGrants {
            conversion_crds: Some(&["crontabs.example.com", "widgets.example.com"]),
            ..DEFAULT_WEBHOOK_GRANTS
        }),
    );
    let objects = helm(&[
        "--include-crds",
        "--set",
        "webhooks.conversion.enabled=false",
    ]);
    check_rbac(
        &objects,
        "operon",
        Some(&WebhookGrants {
            conversion_crds: None,
            ..DEFAULT_WEBHOOK_GRANTS
        }),
    );

    // Another configuration name: the flags and the permission follow.
    let objects = helm(&[
        "--include-crds",
        "--set",
        "webhooks.configurationName=team-a-webhooks",
    ]);
    let args = args(&objects);
    for flag in [
        "validating-webhook-configuration-name",
        "mutating-webhook-configuration-name",
    ] {
        assert_eq!(flag_value(&args, flag).as_deref(), Some("team-a-webhooks"));
    }
    check_rbac(
        &objects,
        "operon",
        Some(&WebhookGrants {
            configuration: "team-a-webhooks",
            ..DEFAULT_WEBHOOK_GRANTS
        }),
    );

    // Off: no Service, port, flag, volume, certificate or permission of theirs.
    let objects = helm(&["--include-crds", "--set", "webhooks.enabled=false"]);
    check_deployment(&objects, 2, true);
    check_no_webhooks(&objects);

    // An unknown certificate source is refused.
    let out = render_chart(&["--set", "webhooks.certificate=acme"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("webhooks.certificate"),
        "{}",
        text(&out.stderr)
    );
}

/// The hooks volume and mount of the chart's Deployment, and its ConfigMaps.
fn hooks_in_chart(args: &[&str]) -> (Option<Value>, Option<Value>, Vec<Value>) {
    let objects = helm(args);
    let pod = &find(&objects, "Deployment", "operon")["spec"]["template"]["spec"];
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "hooks")
        .cloned();
    let mount = pod["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "hooks")
        .cloned();
    let configmaps = of_kind(&objects, "ConfigMap")
        .into_iter()
        .cloned()
        .collect();
    (volume, mount, configmaps)
}

#[test]
fn chart_takes_hooks_from_your_configmap_a_volume_or_the_image() {
    let mount = json!({"name": "hooks", "mountPath": "/hooks", "readOnly": true});

    let (volume, at, configmaps) = hooks_in_chart(&[
        "--set",
        "hooks.configMap.create=false",
        "--set",
        "hooks.configMap.name=my-hooks",
    ]);
    assert!(configmaps.is_empty());
    assert_eq!(
        volume,
        Some(json!({"name": "hooks", "configMap": {"name": "my-hooks", "defaultMode": 0o755}}))
    );
    assert_eq!(at.as_ref(), Some(&mount));

    let (volume, at, configmaps) = hooks_in_chart(&[
        "--set-json",
        r#"hooks.volume={"image":{"reference":"registry.example/hooks:1","pullPolicy":"IfNotPresent"}}"#,
    ]);
    assert!(configmaps.is_empty());
    assert_eq!(
        volume,
        Some(
            json!({"name": "hooks", "image": {"reference": "registry.example/hooks:1", "pullPolicy": "IfNotPresent"}})
        )
    );
    assert_eq!(at.as_ref(), Some(&mount));

    let (volume, at, configmaps) = hooks_in_chart(&["--set", "hooks.fromImage=true"]);
    assert!(configmaps.is_empty());
    assert_eq!((volume, at), (None, None), "the image's own /hooks");

    // More hook files beside the example.
    let (_, _, configmaps) = hooks_in_chart(&[
        "--set-json",
        r##"hooks.files={"extra.sh":"#!/bin/sh\necho hi\n"}"##,
    ]);
    let data = configmaps[0]["data"].as_object().unwrap();
    assert_eq!(data["extra.sh"], "#!/bin/sh\necho hi\n");
    assert!(data.contains_key("diagnosis-phases.sh"));
}

// ---- the image ------------------------------------------------------------------------

fn installed(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run(command: &mut Command) -> String {
    let out = command.output().expect("the command starts");
    assert!(
        out.status.success(),
        "{command:?} failed: {}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// What the image test runs in the image, as its user: who it is, the binary, and the
/// example hook (passed in `$HOOK`) over one Diagnosis.
const IN_IMAGE: &str = r#"set -e
id -u
operon version
printf '%s' "$HOOK" > /tmp/hook.sh
chmod +x /tmp/hook.sh
printf 'apiVersion: operon.dev/v1alpha1\nkind: Diagnosis\nmetadata: {name: a, namespace: x}\nspec: {operationSet: s}\n' > /tmp/d.yaml
operon hook test /tmp/hook.sh --objects /tmp/d.yaml --log error
"#;

/// Builds the image from this build's binary, then runs `operon version` and the
/// example hook inside it as its non-root user. Opt-in: CI installs neither buildah nor
/// podman, and run with `--ignored` without them the test fails, saying so.
#[test]
#[ignore = "needs buildah or podman: install one, and run with --ignored"]
fn image_builds_and_runs_the_example_hook() {
    let tool = ["buildah", "podman"].into_iter().find(|t| installed(t));
    let tool = tool.expect(
        "neither buildah nor podman is installed: this opt-in test builds the image with one",
    );
    let work = tempfile::tempdir().unwrap();
    let context = work.path().join("context");
    run(Command::new(deploy().join("image/build-rootfs.sh"))
        .arg(env!("CARGO_BIN_EXE_operon"))
        .arg(&context));
    // A private image store, removed with the temporary directory.
    let store = |command: &mut Command| {
        command
            .arg("--root")
            .arg(work.path().join("storage"))
            .arg("--runroot")
            .arg(work.path().join("run"))
            .args(["--storage-driver", "vfs"]);
    };
    let tag = "localhost/operon-deploy-test:latest";
    let mut build = Command::new(tool);
    store(&mut build);
    build.arg(if tool == "buildah" { "bud" } else { "build" });
    if tool == "buildah" {
        build.args(["--isolation", "chroot"]);
    }
    run(build
        .arg("-f")
        .arg(context.join("Containerfile"))
        .args(["-t", tag])
        .arg(&context));

    let hook = std::fs::read_to_string(deploy().join("hooks/diagnosis-phases.sh")).unwrap();
    let script = IN_IMAGE;
    let output = if tool == "buildah" {
        let mut from = Command::new(tool);
        store(&mut from);
        let container = run(from.args(["from", tag])).trim().to_owned();
        let mut exec = Command::new(tool);
        store(&mut exec);
        let output = run(exec
            .args(["run", "--isolation", "chroot", "--env"])
            .arg(format!("HOOK={hook}"))
            .arg(&container)
            .args(["--", "/bin/sh", "-c", script]));
        let mut remove = Command::new(tool);
        store(&mut remove);
        run(remove.args(["rm", &container]));
        output
    } else {
        let mut exec = Command::new(tool);
        store(&mut exec);
        run(exec
            .args(["run", "--rm", "--entrypoint", "/bin/sh", "--env"])
            .arg(format!("HOOK={hook}"))
            .args([tag, "-c", script]))
    };
    assert!(output.starts_with(&format!("{UID}\n")), "{output}");
    assert!(
        output.contains(concat!("operon   ", env!("CARGO_PKG_VERSION"))),
        "{output}"
    );
    assert!(output.contains("— Succeeded in"), "{output}");
    assert!(
        output.contains(r#""labels":{"phase":"Pending"},"name":"diagnoses_by_phase","value":1.0"#),
        "{output}"
    );
}

// ---- the seccomp profile and its installer --------------------------------------------

/// The installer DaemonSet, checked: on every node, in its own `privileged` namespace,
/// writing the kubelet's seccomp directory `kubelet_dir` as root without capabilities,
/// token or host namespace, with the controller's image.
fn check_seccomp_installer(objects: &[Value], kubelet_dir: &str) {
    let namespace = find(objects, "Namespace", "operon-node");
    let labels = &namespace["metadata"]["labels"];
    assert_eq!(labels["pod-security.kubernetes.io/enforce"], "privileged");
    let installer = find(objects, "DaemonSet", "operon-seccomp");
    assert_eq!(installer["metadata"]["namespace"], "operon-node");
    let pod = &installer["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(pod["tolerations"], json!([{"operator": "Exists"}]));
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        assert!(pod.get(field).is_none(), "{field}");
    }
    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let container = &containers[0];
    assert_eq!(container["image"], container_image(objects));
    let args = strings(&container["args"]);
    check_command_line(
        "seccomp-profile",
        &help("seccomp-profile"),
        &args,
        container["env"].as_array().unwrap(),
    );
    let dir = flag_value(&args, "install-dir").expect("--install-dir");
    assert!(
        flag_value(&args, "keep").is_some(),
        "kept, not written once"
    );
    assert_eq!(
        container["volumeMounts"],
        json!([{"name": "seccomp", "mountPath": dir}])
    );
    assert_eq!(
        pod["volumes"],
        json!([{"name": "seccomp", "hostPath": {
            "path": format!("{kubelet_dir}/seccomp"), "type": "DirectoryOrCreate"}}])
    );
    assert_eq!(
        container["securityContext"],
        json!({
            "runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": false,
            "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
            "capabilities": {"drop": ["ALL"]}
        })
    );
    assert_eq!(
        pod["securityContext"],
        json!({"seccompProfile": {"type": "RuntimeDefault"}})
    );
}

fn container_image(objects: &[Value]) -> Value {
    container(objects)["image"].clone()
}

/// Both engines run with --strict, waiving only the private /proc no pod can have.
fn check_strict(objects: &[Value], strict: bool) {
    let agent = find(objects, "DaemonSet", "operon-agent");
    let agent = &agent["spec"]["template"]["spec"]["containers"][0];
    for container in [container(objects), agent] {
        let args = strings(&container["args"]);
        let env = container["env"].as_array().unwrap();
        let waived = env.iter().find(|e| e["name"] == "OPERON_STRICT_EXCEPT");
        if strict {
            assert!(args.contains(&"--strict".to_owned()), "{args:?}");
            assert_eq!(waived.unwrap()["value"], "private_proc");
        } else {
            assert!(!args.contains(&"--strict".to_owned()), "{args:?}");
            assert!(waived.is_none());
        }
    }
}

#[test]
fn kustomization_installs_the_seccomp_profile_its_pods_name_and_runs_strict() {
    check_seccomp_installer(&KUSTOMIZATION, "/var/lib/kubelet");
    check_strict(&KUSTOMIZATION, true);
}

#[test]
fn chart_installs_the_seccomp_profile_or_leaves_it_to_you() {
    check_seccomp_installer(&CHART, "/var/lib/kubelet");
    check_strict(&CHART, true);
    let elsewhere = helm(&["--set", "seccomp.install.kubeletRootDir=/data/kubelet"]);
    check_seccomp_installer(&elsewhere, "/data/kubelet");

    let yours = helm(&[
        "--set",
        "seccomp.install.enabled=false",
        "--set",
        "seccomp.strict=false",
    ]);
    let names = kinds_and_names(&yours);
    assert!(!names.contains("DaemonSet/operon-seccomp"), "{names:?}");
    assert!(!names.contains("Namespace/operon-node"), "{names:?}");
    check_strict(&yours, false);
    // The pods still name the profile: it is installed some other way.
    let pod = &find(&yours, "Deployment", "operon")["spec"]["template"]["spec"];
    assert_eq!(
        pod["securityContext"]["seccompProfile"],
        crate::deploy_support::seccomp_profile()
    );
}

#[test]
fn the_profile_installed_is_the_one_printed() {
    let printed = Command::new(env!("CARGO_BIN_EXE_operon"))
        .arg("seccomp-profile")
        .output()
        .unwrap();
    assert!(printed.status.success());
    let profile: Value = serde_json::from_slice(&printed.stdout).unwrap();
    assert_eq!(profile["defaultAction"], "SCMP_ACT_ERRNO");
    let dir = tempfile::tempdir().unwrap();
    let installed = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(["seccomp-profile", "--install-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(installed.status.success(), "{}", text(&installed.stderr));
    let file = dir.path().join(operon::script::seccomp::PROFILE_PATH);
    assert_eq!(std::fs::read(file).unwrap(), printed.stdout);
    // --keep needs somewhere to install.
    let refused = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(["seccomp-profile", "--keep", "1m"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
}
