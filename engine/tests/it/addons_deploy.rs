//! The deployment of modules, with no cluster: the Helm chart's `modules` values
//! rendered by Helm's own engine (`deploy/helm/render.py` over `helm-python-sdk`) and
//! the kustomize component `deploy/modules` rendered by `kubectl kustomize`; each test
//! fails, naming the tool, when the one it needs is missing (`.ci/setup` installs both):
//! the flags or variables operon serve gets, the modules directory mounted read-only,
//! the config ConfigMap, and the grants: the ConfigMap and the release records in the
//! release namespace, and only the extra rules the values give beyond that.

use serde::Deserialize as _;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn documents(text: &str) -> Vec<Value> {
    yaml_serde::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

/// The chart rendered with `args`; `Err` with Helm's message when it refuses.
fn render(args: &[&str]) -> Result<Vec<Value>, String> {
    crate::e2e_support::require_helm_python();
    let out = Command::new("python3")
        .arg(deploy().join("helm/render.py"))
        .args(args)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(documents(&String::from_utf8_lossy(&out.stdout)))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
}

fn container(objects: &[Value]) -> &Value {
    &find(objects, "Deployment", "operon").expect("the Deployment")["spec"]["template"]["spec"]["containers"]
        [0]
}

fn args(objects: &[Value]) -> Vec<String> {
    container(objects)["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_chart_runs_no_modules_by_default() {
    let objects = render(&[]).unwrap();
    assert!(
        !args(&objects).iter().any(|a| a.contains("modules-dir")),
        "{:?}",
        args(&objects)
    );
    assert!(find(&objects, "Role", "operon-modules").is_none());
    assert!(find(&objects, "ConfigMap", "operon-modules").is_none());
}

#[test]
fn the_chart_mounts_the_modules_and_grants_what_they_need() {
    let objects = render(&[
        "--set",
        "modules.enabled=true",
        "--set",
        "modules.globalHooks.fromImage=true",
        "--set-json",
        r#"modules.volume={"configMap":{"name":"my-modules","defaultMode":493,"items":[{"key":"values.yaml","path":"values.yaml"}]}}"#,
        "--set-json",
        r#"modules.configMap.data={"global":"clusterName: prod\n","echoServerEnabled":"true"}"#,
        "--set-json",
        r#"modules.rbac.clusterRules=[{"apiGroups":["apps"],"resources":["deployments"],"verbs":["get","list","watch","create","update","patch","delete"]}]"#,
    ])
    .unwrap();
    let args = args(&objects);
    for flag in [
        "--modules-dir=/modules",
        "--global-hooks-dir=/global-hooks",
        "--config-map=operon-modules",
        "--helm-binary=helm",
        "--module-hook-timeout=60s",
    ] {
        assert!(args.iter().any(|a| a == flag), "{flag} missing: {args:?}");
    }
    let mounts = container(&objects)["volumeMounts"].as_array().unwrap();
    let mount = mounts.iter().find(|m| m["name"] == "modules").unwrap();
    assert_eq!(mount["mountPath"], "/modules");
    assert_eq!(mount["readOnly"], true);
    let spec = &find(&objects, "Deployment", "operon").unwrap()["spec"]["template"]["spec"];
    let volume = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "modules")
        .unwrap();
    assert_eq!(volume["configMap"]["name"], "my-modules");
    assert_eq!(volume["configMap"]["defaultMode"], 493);

    let config = find(&objects, "ConfigMap", "operon-modules").unwrap();
    assert_eq!(config["metadata"]["namespace"], "operon");
    assert_eq!(config["data"]["global"], "clusterName: prod\n");
    assert_eq!(config["data"]["echoServerEnabled"], "true");
    let role = find(&objects, "Role", "operon-modules").unwrap();
    assert_eq!(role["metadata"]["namespace"], "operon");
    assert_eq!(
        role["rules"],
        serde_json::json!([{"apiGroups": [""], "resources": ["configmaps"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}])
    );
    let binding = find(&objects, "RoleBinding", "operon-modules").unwrap();
    assert_eq!(binding["subjects"][0]["name"], "operon");
    let cluster_role = find(&objects, "ClusterRole", "operon-modules").unwrap();
    assert_eq!(cluster_role["rules"][0]["resources"][0], "deployments");
    assert!(find(&objects, "ClusterRoleBinding", "operon-modules").is_some());
}

#[test]
fn the_chart_pulls_module_sources_with_the_pull_secrets_it_may_read() {
    let pinned = "oci://registry.example/mods/frontend:1@sha256:aaaa";
    let objects = render(&[
        "--set",
        "modules.enabled=true",
        "--set-json",
        &format!(r#"modules.sources=["{pinned}"]"#),
        "--set-json",
        r#"ociModules.pullSecrets=["registry-creds"]"#,
        "--set-json",
        r#"ociModules.allowedRegistries=["registry.example"]"#,
    ])
    .unwrap();
    let args = args(&objects);
    for flag in [
        format!("--module-source={pinned}"),
        "--module-source-pull-secret=registry-creds".to_owned(),
        "--allow-registry=registry.example".to_owned(),
    ] {
        assert!(args.contains(&flag), "{flag} missing: {args:?}");
    }
    // Sources alone: no modules directory, so no volume for one.
    assert!(
        !args.iter().any(|a| a.starts_with("--modules-dir")),
        "{args:?}"
    );
    let mounts = container(&objects)["volumeMounts"].as_array().unwrap();
    assert!(!mounts.iter().any(|m| m["name"] == "modules"), "{mounts:?}");
    // Every flag the chart gives is one `operon serve` takes.
    let known = crate::deploy_support::flags(&crate::deploy_support::help("serve"));
    for arg in args.iter().filter(|a| a.starts_with("--")) {
        let name = arg.trim_start_matches('-').split('=').next().unwrap();
        assert!(known.contains_key(name), "operon serve has no --{name}");
    }
    // The controller may read the pull Secret, by name.
    let readable = objects.iter().any(|o| {
        o["kind"] == "Role"
            && (o["rules"].as_array().into_iter().flatten()).any(|rule| {
                rule["resources"] == serde_json::json!(["secrets"])
                    && rule["resourceNames"] == serde_json::json!(["registry-creds"])
            })
    });
    assert!(readable, "no Role grants the pull Secret");
}

#[test]
fn the_chart_refuses_modules_without_a_directory() {
    let error = render(&["--set", "modules.enabled=true"]).unwrap_err();
    assert!(
        error.contains("modules.enabled needs modules.volume"),
        "{error}"
    );
}

#[test]
fn the_kustomize_component_adds_the_variables_the_config_map_and_its_role() {
    crate::e2e_support::required_program("kubectl", "kubernetes-client");
    // kustomize loads only what is under the overlay's root: a copy of deploy/ beside
    // an overlay that lists it and the component.
    let dir = tempfile::tempdir().unwrap();
    let copy = Command::new("cp")
        .arg("-r")
        .arg(deploy())
        .arg(dir.path().join("deploy"))
        .status()
        .unwrap();
    assert!(copy.success());
    let overlay = dir.path().join("overlay");
    std::fs::create_dir(&overlay).unwrap();
    std::fs::write(
        overlay.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         resources:\n- ../deploy\ncomponents:\n- ../deploy/modules\n",
    )
    .unwrap();
    let render = |dir: &Path| {
        let out = Command::new("kubectl")
            .arg("kustomize")
            .arg(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        documents(&String::from_utf8_lossy(&out.stdout))
    };
    let with = render(&overlay);
    let without = render(&dir.path().join("deploy"));
    assert_eq!(
        args(&with),
        args(&without),
        "the arguments stay as they are"
    );
    let env = container(&with)["env"].as_array().unwrap();
    let var = |name: &str| {
        env.iter()
            .find(|e| e["name"] == name)
            .map(|e| e["value"].clone())
    };
    assert_eq!(var("MODULES_DIR"), Some(Value::from("/modules")));
    assert_eq!(
        var("ADDON_OPERATOR_CONFIG_MAP"),
        Some(Value::from("operon-modules"))
    );
    assert!(
        env.iter().any(|e| e["name"] == "POD_NAMESPACE"),
        "the base's variables stay: {env:?}"
    );
    assert!(find(&with, "ConfigMap", "operon-modules").is_some());
    let role = find(&with, "Role", "operon-modules").unwrap();
    assert_eq!(role["rules"][0]["resources"][0], "configmaps");
    assert!(find(&with, "RoleBinding", "operon-modules").is_some());
    assert!(find(&without, "Role", "operon-modules").is_none());
}
