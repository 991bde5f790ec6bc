//! What the deploy tests share (`deploy.rs`, the controller; `deploy_agent.rs`, the
//! node agent): rendering `deploy/` with `kubectl kustomize` and the Helm chart with
//! `deploy/helm/render.py`, finding objects in a rendering, RBAC grants, command lines
//! against `operon <command> --help`, the hardening every Operon pod has, and comparing
//! the two renderings.

// Each test binary uses part of this module; the rest is dead code to it.
#![allow(dead_code)]

use serde::Deserialize as _;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::LazyLock;

pub const NAMESPACE: &str = "operon";
pub const HOOKS_CONFIGMAP: &str = "operon-hooks";
/// The uid of the image's user and of every pod's securityContext.
pub const UID: i64 = 65532;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

pub fn deploy() -> PathBuf {
    repo().join("deploy")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every non-empty document of a YAML stream.
pub fn documents(yaml: &str) -> Vec<Value> {
    yaml_serde::Deserializer::from_str(yaml)
        .map(|document| Value::deserialize(document).expect("the rendering is valid YAML"))
        .filter(|value| !value.is_null())
        .collect()
}

pub fn kustomize(dir: &Path) -> Vec<Value> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl is installed (it renders the kustomization)");
    assert!(
        out.status.success(),
        "kubectl kustomize {} failed: {}",
        dir.display(),
        text(&out.stderr)
    );
    documents(&text(&out.stdout))
}

/// `deploy/helm/render.py` with these arguments, run by python3.
pub fn render_chart(args: &[&str]) -> Output {
    let script = deploy().join("helm/render.py");
    let out = Command::new("python3")
        .arg(&script)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("python3 must be installed to render the Helm chart ({e}); run .ci/setup")
        });
    if out.status.code() == Some(2) {
        panic!(
            "the Helm chart cannot be rendered: {}run .ci/setup (it installs helm-python-sdk)",
            text(&out.stderr)
        );
    }
    out
}

pub fn helm(args: &[&str]) -> Vec<Value> {
    let out = render_chart(args);
    assert!(
        out.status.success(),
        "render.py {args:?} failed: {}",
        text(&out.stderr)
    );
    documents(&text(&out.stdout))
}

/// `to` relative to the directory `from`.
pub fn relative(from: &Path, to: &Path) -> PathBuf {
    let (from, to) = (from.canonicalize().unwrap(), to.canonicalize().unwrap());
    let common = from
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = PathBuf::new();
    for _ in from.components().skip(common) {
        out.push("..");
    }
    for component in to.components().skip(common) {
        out.push(component);
    }
    out
}

/// `kubectl kustomize` of a kustomization that lists deploy/ and its `components`, as one
/// of your own beside deploy/ would.
pub fn kustomize_with(components: &[&str]) -> Vec<Value> {
    let overlay = tempfile::Builder::new()
        .prefix("overlay")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    // kustomize takes only relative paths to other kustomizations.
    let to_deploy = relative(overlay.path(), &deploy());
    let mut body = format!("resources:\n- {}\ncomponents:\n", to_deploy.display());
    for component in components {
        body.push_str(&format!("- {}\n", to_deploy.join(component).display()));
    }
    std::fs::write(overlay.path().join("kustomization.yaml"), body).unwrap();
    kustomize(overlay.path())
}

pub static KUSTOMIZATION: LazyLock<Vec<Value>> = LazyLock::new(|| kustomize(&deploy()));

pub static CHART: LazyLock<Vec<Value>> = LazyLock::new(|| helm(&["--include-crds"]));

pub fn kind(object: &Value) -> &str {
    object["kind"].as_str().unwrap_or_default()
}

pub fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

pub fn find<'a>(objects: &'a [Value], kind_: &str, name_: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| kind(o) == kind_ && name(o) == name_)
        .unwrap_or_else(|| panic!("no {kind_}/{name_} among {:?}", kinds_and_names(objects)))
}

pub fn of_kind<'a>(objects: &'a [Value], kind_: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| kind(o) == kind_).collect()
}

pub fn kinds_and_names(objects: &[Value]) -> BTreeSet<String> {
    objects
        .iter()
        .map(|o| format!("{}/{}", kind(o), name(o)))
        .collect()
}

pub fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|v| v.as_str().expect("a string").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The kustomize name of the generated hooks ConfigMap, `operon-hooks-<hash>`, without
/// its hash; any other name as it is.
pub fn without_hash(name: &str) -> &str {
    match name.strip_prefix(HOOKS_CONFIGMAP) {
        Some(rest)
            if rest.len() == 11
                && rest.starts_with('-')
                && rest[1..].bytes().all(|b| b.is_ascii_alphanumeric()) =>
        {
            HOOKS_CONFIGMAP
        }
        _ => name,
    }
}

/// One RBAC permission: (API group, resource, verb, resource name or "").
pub type Grant = (String, String, String, String);

pub fn grants(role: &Value) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for rule in role["rules"].as_array().expect("rules") {
        let names = strings(&rule["resourceNames"]);
        let names = if names.is_empty() {
            vec![String::new()]
        } else {
            names
        };
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    for name in &names {
                        out.insert((group.clone(), resource.clone(), verb.clone(), name.clone()));
                    }
                }
            }
        }
    }
    out
}

pub fn grant(group: &str, resource: &str, verb: &str, name: &str) -> Grant {
    (group.into(), resource.into(), verb.into(), name.into())
}

pub fn flag_value(args: &[String], flag: &str) -> Option<String> {
    args.iter()
        .find_map(|a| a.strip_prefix(&format!("--{flag}=")).map(str::to_owned))
}

/// Whether every key of `subset` is in `labels` with the same value.
pub fn selects(subset: &Value, labels: &Value) -> bool {
    let subset = subset.as_object().expect("a label map");
    !subset.is_empty() && subset.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// Where two JSON values first differ, as a JSON pointer with both sides, or `None`.
pub fn difference(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys()).collect::<BTreeSet<_>>() {
                let here = format!("{at}/{key}");
                match (x.get(key), y.get(key)) {
                    (Some(x), Some(y)) => {
                        if let Some(d) = difference(x, y, &here) {
                            return Some(d);
                        }
                    }
                    (x, y) => return Some(format!("{here}: {x:?} vs {y:?}")),
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (x, y))| difference(x, y, &format!("{at}/{i}"))),
        (Value::Number(x), Value::Number(y)) if x.as_f64() == y.as_f64() => None,
        _ if a == b => None,
        _ => Some(format!("{at}: {a} vs {b}")),
    }
}

/// Asserts two objects are equal, naming the first difference.
pub fn assert_same(what: &str, a: &Value, b: &Value) {
    if let Some(d) = difference(a, b, "") {
        panic!("{what} differs at {d}");
    }
}

/// A container port's name as the API server accepts it (an IANA service name): at most
/// 15 characters, lowercase letters, digits and single inner hyphens, a letter at least.
pub fn is_port_name(name: &str) -> bool {
    (1..=15).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && name.bytes().any(|b| b.is_ascii_lowercase())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// Labels, annotations and the generated ConfigMap's hash aside, every object as the
/// kustomization has it; the Namespace is `helm install --create-namespace`'s.
pub fn normalized(objects: &[Value]) -> BTreeMap<String, Value> {
    fn strip(value: &mut Value) {
        for pointer in ["/metadata", "/spec/template/metadata"] {
            if let Some(Value::Object(metadata)) = value.pointer_mut(pointer) {
                metadata.remove("labels");
                metadata.remove("annotations");
            }
        }
    }
    fn unhash(value: &mut Value) {
        match value {
            Value::String(s) => {
                let plain = without_hash(s).to_owned();
                *s = plain;
            }
            Value::Array(items) => items.iter_mut().for_each(unhash),
            Value::Object(map) => map.values_mut().for_each(unhash),
            _ => {}
        }
    }
    objects
        .iter()
        .filter(|o| kind(o) != "Namespace")
        .map(|o| {
            let mut o = o.clone();
            strip(&mut o);
            unhash(&mut o);
            // kustomize folds long base64 lines, Helm does not.
            if let Some(Value::Object(binary)) = o.get_mut("binaryData") {
                for value in binary.values_mut() {
                    let unfolded: String = value
                        .as_str()
                        .unwrap()
                        .chars()
                        .filter(|c| !c.is_whitespace())
                        .collect();
                    *value = Value::String(unfolded);
                }
            }
            (format!("{}/{}", kind(&o), name(&o)), o)
        })
        .collect()
}

/// `operon <command> --help` of the binary these tests build.
pub fn help(command: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args([command, "--help"])
        .output()
        .expect("operon runs");
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// The flags a `--help` text lists, each with whether it takes a value.
pub fn flags(help: &str) -> BTreeMap<String, bool> {
    let mut flags = BTreeMap::new();
    for line in help.lines() {
        let line = line.trim_start();
        if !line.starts_with('-') {
            continue;
        }
        let takes_value = line.contains('<');
        for token in line.split([' ', ',']) {
            if let Some(name) = token.strip_prefix("--") {
                flags.insert(name.to_owned(), takes_value);
            }
        }
    }
    assert!(flags.contains_key("help"), "unexpected --help text: {help}");
    flags
}

/// A container's `args` are `operon <command>` and flags `help` lists, each with a value
/// exactly when it takes one, and every variable of its `env` is one the command reads.
pub fn check_command_line(command: &str, help: &str, args: &[String], env: &[Value]) {
    let flags = flags(help);
    assert_eq!(args.first().map(String::as_str), Some(command), "{args:?}");
    let mut rest = args[1..].iter();
    while let Some(arg) = rest.next() {
        let Some(flag) = arg.strip_prefix("--") else {
            panic!("{arg:?} is not a flag of operon {command} (args: {args:?})");
        };
        let (flag, inline_value) = match flag.split_once('=') {
            Some((flag, value)) => (flag, Some(value)),
            None => (flag, None),
        };
        let Some(&takes_value) = flags.get(flag) else {
            panic!(
                "--{flag} is not a flag of operon {command}; it accepts {:?}",
                flags.keys().collect::<Vec<_>>()
            );
        };
        match (takes_value, inline_value) {
            (true, Some(value)) => assert!(!value.is_empty(), "--{flag} has an empty value"),
            (true, None) => {
                let value = rest.next();
                assert!(
                    value.is_some_and(|v| !v.starts_with('-')),
                    "--{flag} needs a value: {args:?}"
                );
            }
            (false, Some(_)) => panic!("--{flag} takes no value: {args:?}"),
            (false, None) => {}
        }
    }
    for var in env {
        let var = var["name"].as_str().unwrap();
        // POD_NAME is the Lease holder's identity and POD_IP where the module API is
        // advertised, both read without a flag.
        assert!(
            ["POD_NAME", "POD_IP"].contains(&var) || help.contains(&format!("[env: {var}=")),
            "operon {command} does not read {var}"
        );
    }
}

/// The environment variable `var` of a container's `env`.
pub fn env_var<'a>(env: &'a [Value], var: &str) -> &'a Value {
    env.iter()
        .find(|e| e["name"] == var)
        .unwrap_or_else(|| panic!("no {var} in {env:?}"))
}

/// The seccomp profile Operon's pods name: the one `operon seccomp-profile` installs.
pub fn seccomp_profile() -> Value {
    json!({"type": "Localhost", "localhostProfile": operon::script::seccomp::PROFILE_PATH})
}

/// The hardening of every Operon pod: its pod-level securityContext, and its
/// container's (non-root, no privilege escalation, no capability, a read-only root
/// filesystem, Operon's seccomp profile).
pub fn check_hardened(pod: &Value, container: &Value) {
    assert_eq!(
        pod["securityContext"],
        json!({
            "runAsNonRoot": true, "runAsUser": UID, "runAsGroup": UID, "fsGroup": UID,
            "seccompProfile": seccomp_profile()
        })
    );
    assert_eq!(
        container["securityContext"],
        json!({
            "runAsNonRoot": true, "runAsUser": UID, "runAsGroup": UID,
            "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
            "capabilities": {"drop": ["ALL"]}, "seccompProfile": seccomp_profile()
        })
    );
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        assert_ne!(pod[field], true, "{field}");
    }
    for volume in pod["volumes"].as_array().into_iter().flatten() {
        assert!(volume.get("hostPath").is_none(), "no hostPath: {volume}");
    }
    for port in container["ports"].as_array().into_iter().flatten() {
        assert!(port.get("hostPort").is_none(), "no hostPort: {port}");
    }
}

/// The image every pod runs by default: Operon's, tagged with this workspace's version.
pub fn image() -> String {
    format!("ghcr.io/operon-dev/operon:{}", env!("CARGO_PKG_VERSION"))
}

/// Whether `object` belongs to the node agent (label `app.kubernetes.io/component:
/// agent`) rather than to the controller.
pub fn is_agent(object: &Value) -> bool {
    object["metadata"]["labels"]["app.kubernetes.io/component"] == "agent"
}

/// The container's /healthz liveness and /readyz readiness probes on `port`, and CPU
/// and memory requests and limits.
pub fn check_probes_and_resources(container: &Value, port: &str) {
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        assert_eq!(
            container[probe]["httpGet"],
            serde_json::json!({"path": path, "port": port}),
            "{probe}"
        );
    }
    for part in ["requests", "limits"] {
        for resource in ["cpu", "memory"] {
            assert!(
                container["resources"][part][resource].is_string(),
                "resources.{part}.{resource}"
            );
        }
    }
}

/// A pod spec's volumes by name.
pub fn volumes_by_name(pod: &Value) -> BTreeMap<&str, &Value> {
    pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap(), v))
        .collect()
}

/// The `[default: ...]` of `--flag` in a command's `--help` text, if it has one.
pub fn help_default(help: &str, flag: &str) -> Option<String> {
    let mut lines = help.lines().map(str::trim_start);
    lines.find(|l| l.split([' ', ',']).any(|t| t == format!("--{flag}")))?;
    let text: String = lines
        .take_while(|l| !l.starts_with('-'))
        .collect::<Vec<_>>()
        .join(" ");
    let start = text.find("[default: ")? + "[default: ".len();
    let end = start + text[start..].find(']')?;
    Some(text[start..end].to_owned())
}
