//! Discovery as kubectl reads it: `/version`, the legacy `/api` and `/apis` documents
//! (answered as plain `application/json`, which tells a client asking for aggregated
//! discovery to fall back to them), each group version's resource list, and a minimal
//! OpenAPI v3: one PATCH operation per kind that declares `fieldValidation`, which is
//! what kubectl checks before leaving validation to the server (it validates no
//! schema here, and needs none).

use super::super::resources::ResourceInfo;
use super::strategic;
use serde_json::{Value, json};

/// `/version`: a Kubernetes version kubectl 1.32 does not warn about.
pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0-operon-local",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "",
        "compiler": "operon",
        "platform": "linux/amd64",
    })
}

/// `/api`.
pub(crate) fn core_versions(address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    })
}

/// The groups other than the core one, each with its versions in the order the types
/// were registered (preferred first).
fn groups(types: &[ResourceInfo]) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for info in types.iter().filter(|i| !i.resource.group.is_empty()) {
        let r = &info.resource;
        match groups.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, versions)) => {
                if !versions.contains(&r.version) {
                    versions.push(r.version.clone());
                }
            }
            None => groups.push((r.group.clone(), vec![r.version.clone()])),
        }
    }
    groups
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let version = |v: &String| json!({"groupVersion": format!("{name}/{v}"), "version": v});
    json!({
        "name": name,
        "versions": versions.iter().map(version).collect::<Vec<_>>(),
        "preferredVersion": version(&versions[0]),
    })
}

/// `/apis`.
pub(crate) fn group_list(types: &[ResourceInfo]) -> Value {
    let groups: Vec<Value> = groups(types)
        .iter()
        .map(|(name, versions)| group_json(name, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`, if the group is known.
pub(crate) fn group(types: &[ResourceInfo], name: &str) -> Option<Value> {
    let groups = groups(types);
    let (_, versions) = groups.iter().find(|(g, _)| g == name)?;
    let mut group = group_json(name, versions);
    group["kind"] = "APIGroup".into();
    group["apiVersion"] = "v1".into();
    Some(group)
}

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The kinds of the category `all` (`kubectl get all`), as the API server lists them.
const IN_ALL: [(&str, &str); 10] = [
    ("", "Pod"),
    ("", "Service"),
    ("", "ReplicationController"),
    ("apps", "Deployment"),
    ("apps", "DaemonSet"),
    ("apps", "StatefulSet"),
    ("apps", "ReplicaSet"),
    ("batch", "Job"),
    ("batch", "CronJob"),
    ("autoscaling", "HorizontalPodAutoscaler"),
];

/// `/api/v1` or `/apis/{group}/{version}`, if any type is served there.
pub(crate) fn resource_list(types: &[ResourceInfo], group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for info in types
        .iter()
        .filter(|i| i.resource.group == group && i.resource.version == version)
    {
        let r = &info.resource;
        let mut resource = json!({
            "name": r.plural,
            "singularName": r.kind.to_ascii_lowercase(),
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": VERBS,
            "shortNames": info.short_names,
        });
        if IN_ALL.contains(&(r.group.as_str(), r.kind.as_str())) {
            resource["categories"] = json!(["all"]);
        }
        resources.push(resource);
        if info.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

/// `/openapi/v3`: where each group version's document is.
pub(crate) fn openapi_root(types: &[ResourceInfo]) -> Value {
    let mut paths = serde_json::Map::new();
    for info in types {
        let r = &info.resource;
        let path = if r.group.is_empty() {
            format!("api/{}", r.version)
        } else {
            format!("apis/{}/{}", r.group, r.version)
        };
        let url = format!("/openapi/v3/{path}?hash=0");
        paths.insert(path, json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

/// `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`: one PATCH operation per
/// kind, tagged with its group, version and kind, taking `fieldValidation`.
pub(crate) fn openapi_group_version(
    types: &[ResourceInfo],
    group: &str,
    version: &str,
) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    for info in types
        .iter()
        .filter(|i| i.resource.group == group && i.resource.version == version)
    {
        let r = &info.resource;
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let path = if r.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
        } else {
            format!("{prefix}/{}/{{name}}", r.plural)
        };
        let mut content = serde_json::Map::new();
        // Strategic merge is left out: kubectl then computes its apply patches from the
        // patch strategies compiled into it, which this document does not describe.
        for media in strategic::patch_types(info)
            .into_iter()
            .filter(|m| *m != strategic::STRATEGIC)
        {
            content.insert(media.to_owned(), json!({"schema": {"type": "object"}}));
        }
        paths.insert(
            path,
            json!({"patch": {
                "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": r.kind},
                "parameters": [
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
                    {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
                ],
                "requestBody": {"content": content},
                "responses": {"200": {"description": "OK"}},
            }}),
        );
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Operon local API", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}
