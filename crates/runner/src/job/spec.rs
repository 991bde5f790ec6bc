//! The objects a Job step creates: the ConfigMap holding its input and the Job itself,
//! with the deterministic name that lets a restarted controller find them again.

use super::JobRunError;
use crate::RunRequest;
use crate::context::RunContext;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use operon_data::api::JobProcessor;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;

/// The label every object of a run carries; its value is the Job's name.
pub(crate) const RUN_LABEL: &str = "operon.dev/run";
/// The annotation holding the run's full name (`namespace/diagnosis/node-N`).
pub(crate) const RUN_NAME_ANNOTATION: &str = "operon.dev/run-name";
/// The annotation naming the Operation the Job runs.
pub(crate) const OPERATION_ANNOTATION: &str = "operon.dev/operation";
/// The annotation naming the Hook whose run the Job is (instead of the Operation's).
pub(crate) const HOOK_ANNOTATION: &str = "operon.dev/hook";
/// The label holding the uid of the Hook whose run made the object (Job, pod,
/// ConfigMap): the Hook's own watches leave such objects out, or a Hook watching Pods
/// in its namespace would run again on each run's pod.
pub const HOOK_UID_LABEL: &str = "operon.dev/hook-uid";
/// The container's name.
pub(crate) const CONTAINER: &str = "step";
/// Where the input ConfigMap is mounted.
pub const INPUT_DIR: &str = "/var/run/operon";
/// Where the container writes its results: its termination message file.
pub const RESULT_PATH: &str = "/dev/termination-log";
/// A finished Job is kept this long unless the Operation says otherwise.
pub(crate) const DEFAULT_TTL_SECONDS: i32 = 600;
/// The API server refuses ConfigMaps larger than 1 MiB.
const MAX_INPUT_BYTES: usize = 1 << 20;

/// The name of the Job (and its input ConfigMap) for `request`: readable, at most 63
/// characters, and the same every time the same run asks, so a restarted controller
/// finds the Job it created instead of creating a second one.
pub fn job_name(request: &RunRequest) -> String {
    let uid = request.owner.as_ref().map_or("", |o| o.2.as_str());
    let digest = Sha256::digest(format!("{uid}\n{}", request.name).as_bytes());
    let hash: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    // `namespace/diagnosis/node-3` → `diagnosis-node-3`: the namespace is the Job's own.
    let readable = request
        .name
        .split_once('/')
        .map_or(request.name.as_str(), |(_, rest)| rest);
    let mut base: String = readable
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9') => c,
            _ => '-',
        })
        .collect();
    base.truncate(63 - 1 - hash.len());
    let base = base.trim_matches('-');
    if base.is_empty() {
        format!("operon-{hash}")
    } else {
        format!("{base}-{hash}")
    }
}

/// `OPERON_INPUT_<KEY>`: the variable an input key reaches the container as.
pub fn input_variable(key: &str) -> String {
    let spelled: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("OPERON_INPUT_{spelled}")
}

/// The ConfigMap holding a run's input: `input.json`, `context.json`, the runner's
/// extra `files`, and one key per input variable (the container's environment refers to them). A ConfigMap, not a
/// Secret: the input is the Diagnosis' parameters and results, which its status shows
/// anyway, and the controller is granted no Secrets outside its own namespace.
pub(crate) fn input_config_map(
    name: &str,
    namespace: &str,
    request: &RunRequest,
    context: &RunContext,
    files: &BTreeMap<String, String>,
) -> Result<ConfigMap, JobRunError> {
    let mut data = files.clone();
    let input = serde_json::to_string_pretty(&request.input).unwrap_or_default();
    data.insert("input.json".to_owned(), input);
    data.insert("context.json".to_owned(), context.to_json());
    for (key, value) in &request.input {
        // Keys spelled alike (`a.b`, `a_b`): the first in key order wins; input.json
        // keeps both.
        data.entry(input_variable(key))
            .or_insert_with(|| value.clone());
    }
    let size: usize = data.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > MAX_INPUT_BYTES {
        return Err(JobRunError::InputTooLarge { bytes: size });
    }
    let map = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": name, "namespace": namespace,
            "labels": labels(name, request),
            "ownerReferences": owner_references(request),
        },
        "data": data,
    });
    Ok(serde_json::from_value(map)?)
}

fn labels(name: &str, request: &RunRequest) -> Value {
    let mut labels = json!({
        "app.kubernetes.io/managed-by": "operon",
        RUN_LABEL: name,
    });
    match &request.owner {
        Some((kind, owner, _)) if kind == "Diagnosis" && owner.len() <= 63 => {
            labels["operon.dev/diagnosis"] = json!(owner);
        }
        Some((kind, _, uid)) if kind == "Hook" && !uid.is_empty() => {
            labels[HOOK_UID_LABEL] = json!(uid);
        }
        _ => {}
    }
    labels
}

/// The owner (the Diagnosis) owns what a run creates, so deleting it deletes the Job,
/// its pods and the ConfigMap: that is how a deleted Diagnosis cancels its steps.
fn owner_references(request: &RunRequest) -> Value {
    match &request.owner {
        Some((kind, name, uid)) if !uid.is_empty() => json!([{
            "apiVersion": operon_data::api::API_VERSION, "kind": kind, "name": name, "uid": uid,
            "blockOwnerDeletion": false, "controller": false,
        }]),
        _ => json!([]),
    }
}

/// The Job of one run of `processor`.
pub(crate) fn job(
    name: &str,
    namespace: &str,
    operation: &str,
    processor: &JobProcessor,
    request: &RunRequest,
    context: &RunContext,
) -> Result<Job, JobRunError> {
    let mut env: Vec<Value> = processor
        .env
        .iter()
        .map(|v| json!({"name": v.name, "value": v.value}))
        .collect();
    env.extend(
        context
            .env()
            .into_iter()
            .map(|(name, value)| json!({"name": name, "value": value})),
    );
    let files = [
        ("OPERON_INPUT_PATH", format!("{INPUT_DIR}/input.json")),
        ("OPERON_CONTEXT_PATH", format!("{INPUT_DIR}/context.json")),
        ("OPERON_RESULT_PATH", RESULT_PATH.to_owned()),
        // Capact's names for the same files: its runners read them unchanged.
        ("RUNNER_ARGS_PATH", format!("{INPUT_DIR}/input.json")),
        ("RUNNER_CONTEXT_PATH", format!("{INPUT_DIR}/context.json")),
    ];
    env.extend(
        files
            .into_iter()
            .map(|(name, value)| json!({"name": name, "value": value})),
    );
    let mut seen = std::collections::BTreeSet::new();
    for key in request.input.keys() {
        let variable = input_variable(key);
        if seen.insert(variable.clone()) {
            env.push(json!({"name": variable, "valueFrom": {"configMapKeyRef": {
                "name": name, "key": variable}}}));
        }
    }
    let mut container = json!({
        "name": CONTAINER,
        "image": processor.image,
        "env": env,
        "volumeMounts": [{"name": "operon-input", "mountPath": INPUT_DIR, "readOnly": true}],
        "terminationMessagePath": RESULT_PATH,
        "terminationMessagePolicy": "File",
    });
    if !processor.command.is_empty() {
        container["command"] = json!(processor.command);
    }
    if !processor.args.is_empty() {
        container["args"] = json!(processor.args);
    }
    if let Some(policy) = &processor.image_pull_policy {
        container["imagePullPolicy"] = json!(policy);
    }
    if let Some(resources) = &processor.resources {
        container["resources"] = json!({
            "requests": resources.requests, "limits": resources.limits,
        });
    }
    let mut pod_spec = json!({
        "restartPolicy": "Never",
        "containers": [container],
        "volumes": [{"name": "operon-input", "configMap": {"name": name}}],
    });
    if !processor.node_selector.is_empty() {
        pod_spec["nodeSelector"] = json!(processor.node_selector);
    }
    if processor.on_diagnosis_node {
        let node = request
            .node
            .as_deref()
            .ok_or(JobRunError::NoDiagnosisNode)?;
        // Pinned by the node's name, as the DaemonSet controller pins its pods: the
        // scheduler still checks resources and taints.
        pod_spec["affinity"] = json!({"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]}}});
    }
    if let Some(sa) = &processor.service_account_name {
        pod_spec["serviceAccountName"] = json!(sa);
    }
    let labels = labels(name, request);
    let subject = match &request.owner {
        Some((kind, _, _)) if kind == "Hook" => HOOK_ANNOTATION,
        _ => OPERATION_ANNOTATION,
    };
    let job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {
            "name": name, "namespace": namespace, "labels": labels,
            "annotations": {RUN_NAME_ANNOTATION: request.name, subject: operation},
            "ownerReferences": owner_references(request),
        },
        "spec": {
            // One attempt: a failed step fails its paths, and the pipeline moves on.
            "backoffLimit": 0,
            "activeDeadlineSeconds": context.timeout.as_secs().max(1),
            "ttlSecondsAfterFinished": processor.ttl_seconds_after_finished
                .unwrap_or(DEFAULT_TTL_SECONDS),
            "template": {
                "metadata": {"labels": labels},
                "spec": pod_spec,
            },
        },
    });
    Ok(serde_json::from_value(job)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn request(name: &str, uid: &str) -> RunRequest {
        RunRequest {
            name: name.to_owned(),
            input: BTreeMap::new(),
            results: BTreeMap::new(),
            node: None,
            namespace: Some("ops".to_owned()),
            owner: Some(("Diagnosis".to_owned(), "d".to_owned(), uid.to_owned())),
            dry_run: false,
            timeout: Duration::from_secs(30),
        }
    }

    #[test]
    fn names_are_stable_short_and_per_run() {
        let a = job_name(&request("ops/disk-check/node-3", "u1"));
        assert_eq!(a, job_name(&request("ops/disk-check/node-3", "u1")));
        assert!(a.starts_with("disk-check-node-3-"), "{a}");
        assert_ne!(a, job_name(&request("ops/disk-check/node-3", "u2")));
        assert_ne!(a, job_name(&request("ops/disk-check/node-4", "u1")));
        let long = job_name(&request(&format!("ops/{}/node-1", "x".repeat(200)), "u"));
        assert_eq!(long.len(), 63);
        assert!(job_name(&request("ops/___/", "u")).starts_with("operon-"));
    }

    #[test]
    fn input_keys_become_variables() {
        assert_eq!(
            input_variable("operation.df.output"),
            "OPERON_INPUT_OPERATION_DF_OUTPUT"
        );
        assert_eq!(input_variable("pod.name"), "OPERON_INPUT_POD_NAME");
    }
}
