//! `Operation`: one step of a diagnosis pipeline and the processor that runs it.

use super::Problem;
use super::cluster_processor::{ArgoWorkflowProcessor, JobProcessor, JobResources};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// An Operation: what runs (a wasm module, a script or an HTTP endpoint) and its limits.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "operon.dev",
    version = "v1alpha1",
    kind = "Operation",
    plural = "operations",
    shortname = "op",
    printcolumn = r#"{"name":"Timeout","type":"integer","jsonPath":".spec.processor.timeoutSeconds"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct OperationSpec {
    /// How the operation runs: exactly one of `wasm`, `scriptRunner`, `httpServer`,
    /// `job`, `argoWorkflow`.
    pub processor: Processor,
    /// Where results are also written as files, one per result key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<Storage>,
}

/// The processor of an Operation (KubeDiag's `spec.processor`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Processor {
    /// Run a WebAssembly component of the `operation` world.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wasm: Option<WasmProcessor>,
    /// Run a shell script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script_runner: Option<ScriptRunner>,
    /// POST the input to an HTTP endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_server: Option<HttpServer>,
    /// Run a Kubernetes Job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobProcessor>,
    /// Submit an Argo Workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argo_workflow: Option<ArgoWorkflowProcessor>,
    /// How long one run may take, in seconds (default 30, at least 1).
    #[serde(default = "default_timeout_seconds")]
    #[schemars(range(min = 1))]
    pub timeout_seconds: i64,
}

fn default_timeout_seconds() -> i64 {
    30
}

impl Processor {
    /// A processor that runs `wasm` and nothing else.
    pub fn wasm(wasm: WasmProcessor, timeout_seconds: i64) -> Self {
        Self {
            wasm: Some(wasm),
            script_runner: None,
            http_server: None,
            job: None,
            argo_workflow: None,
            timeout_seconds,
        }
    }
}

/// A wasm processor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WasmProcessor {
    /// The module: a name known to the module store, a path (local runs), a
    /// `sha256:<hex>` digest, or an OCI artifact, `oci://REGISTRY/REPOSITORY:TAG` or
    /// `oci://REGISTRY/REPOSITORY@sha256:<hex>` (a tag is resolved when a Diagnosis
    /// starts and the digest recorded in its `status.pinnedModules`, which its later
    /// steps and resumptions use).
    pub module: String,
    /// For an `oci://` module: Secrets of type `kubernetes.io/dockerconfigjson` (or
    /// `kubernetes.io/dockercfg`) in the engine's namespace holding the registry's
    /// credentials, tried in order (as a pod's `imagePullSecrets`). Without them the
    /// pull is anonymous.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<SecretReference>,
    /// Extra parameters passed to every run of this operation, under the input's
    /// parameters (a Diagnosis' parameters and earlier results win).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config: BTreeMap<String, String>,
    /// The node's directories (absolute) the module may read, each visible to the
    /// guest at the same path and read-only, e.g. `/proc` for a process listing; nothing
    /// else of the node's files is visible. On a node's agent they are looked up under
    /// the node's filesystem when the agent mounts it (`--node-root`), and are the
    /// pod's own paths otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_only_paths: Vec<String>,
    /// Where the module runs: `Sandbox` (default), in the engine's wasm sandbox, or
    /// `Job`, offloaded to a Kubernetes Job running Operon's own image, which fetches
    /// the module by digest from the module API and runs it with `operon op run`, so a
    /// long step leaves the controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_on: Option<WasmRunOn>,
    /// The Job's settings when `runOn` is `Job`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<WasmJob>,
}

/// A Secret named by an object, in the namespace the object's field says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretReference {
    /// The Secret's name.
    pub name: String,
}

/// Why an `oci://` module reference cannot be right, when it cannot: it names a
/// registry host (with a dot or a port, or `localhost`) and a repository, and a pinned
/// digest is `sha256:` and 64 hex digits. The registry client checks the rest.
pub(crate) fn oci_reference_problem(reference: &str) -> Option<String> {
    let rest = reference.strip_prefix("oci://")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    if !(host.contains('.') || host.contains(':') || host == "localhost") {
        return Some(format!(
            "{host:?} is not a registry host (oci://REGISTRY/REPOSITORY:TAG, e.g. oci://ghcr.io/acme/triage:1.0)"
        ));
    }
    let (name, digest) = match path.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (path, None),
    };
    if name.is_empty() || name.starts_with(':') {
        return Some("names no repository".to_owned());
    }
    if let Some(digest) = digest {
        let hex = digest.strip_prefix("sha256:").unwrap_or_default();
        if hex.len() != 64
            || !hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        {
            return Some(format!(
                "{digest:?} is not a digest (sha256: and 64 lowercase hex digits)"
            ));
        }
    }
    None
}

/// Where a wasm step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum WasmRunOn {
    /// In the engine's wasm sandbox (the default).
    Sandbox,
    /// In a Kubernetes Job of Operon's image, in the namespace of the Diagnosis (or of
    /// the Hook).
    Job,
}

/// The Job an offloaded wasm step runs in: the settings of the `job` processor that
/// make sense for Operon's own image (the image, command and result source are the
/// engine's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WasmJob {
    /// Resource requests and limits of the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<JobResources>,
    /// Labels a node must have to run the pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Run the pod on the node the Diagnosis is about.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub on_diagnosis_node: bool,
    /// The pod's ServiceAccount (the namespace's `default` when unset). It fetches the
    /// module with its token, so it needs `get` on `modules.operon.dev` (the ClusterRole
    /// `operon-module-reader`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// How long a finished Job is kept, in seconds (default 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
    /// `Always`, `IfNotPresent` or `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
}

impl WasmProcessor {
    /// Whether the step is offloaded to a Job.
    pub fn offloaded(&self) -> bool {
        self.run_on == Some(WasmRunOn::Job)
    }

    /// The `job` processor of an offloaded step running `image` with `command` and
    /// `args`: this step's Job settings, the rest the engine's.
    pub fn job_processor(
        &self,
        image: &str,
        command: Vec<String>,
        args: Vec<String>,
    ) -> JobProcessor {
        let settings = self.job.clone().unwrap_or_default();
        JobProcessor {
            image: image.to_owned(),
            command,
            args,
            env: Vec::new(),
            resources: settings.resources,
            node_selector: settings.node_selector,
            on_diagnosis_node: settings.on_diagnosis_node,
            service_account_name: settings.service_account_name,
            image_pull_policy: settings.image_pull_policy,
            ttl_seconds_after_finished: settings.ttl_seconds_after_finished,
            result_from: None,
        }
    }
}

/// A script processor (KubeDiag's `scriptRunner`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScriptRunner {
    /// The script text; its shebang is honoured (`/bin/sh` when there is none).
    pub script: String,
    /// Input keys whose values become the script's positional arguments, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arg_keys: Vec<String>,
    /// When set, stdout is returned as `operation.<key>.output` and a failure as
    /// `operation.<key>.error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_result_key: Option<String>,
    /// Environment variables the script gets besides the sandbox's basics (`PATH`,
    /// `HOME`, `TMPDIR`, `LANG`); nothing else of the engine's environment is passed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Whether the script may use the network (default false: a private network
    /// namespace with no interfaces).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub network: bool,
    /// Refuse to run when any sandbox protection is unavailable on the node (overrides
    /// the engine's `--strict`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// The node's paths (absolute) the script may read, e.g. `/var/log/journal` for a
    /// kubelet-journal collection step; nothing else of the node is readable. On a
    /// node's agent that mounts the node's filesystem (`--node-root`) they are looked
    /// up under it, and the script finds them under `$OPERON_NODE_ROOT` (empty where
    /// the node's filesystem is `/`); otherwise they are the pod's own paths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_only_paths: Vec<String>,
}

/// One environment variable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EnvVar {
    /// The variable's name.
    pub name: String,
    /// Its value.
    #[serde(default)]
    pub value: String,
}

/// An HTTP processor (KubeDiag's `httpServer`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HttpServer {
    /// Host name or IP address (default `127.0.0.1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// TCP port (default 80 for http, 443 for https).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i64>,
    /// Request path (default `/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `http` (default) or `https`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
}

/// Where results are stored besides the Diagnosis status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Storage {
    /// A directory on the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_path: Option<HostPathStorage>,
}

/// A directory on the node that results are written under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostPathStorage {
    /// An absolute directory path.
    pub path: String,
}

impl Operation {
    /// `Operation/<name>`, for messages.
    pub fn object_ref(&self) -> String {
        format!(
            "Operation/{}",
            self.metadata.name.as_deref().unwrap_or("<unnamed>")
        )
    }

    /// Every problem with this Operation.
    pub fn validate(&self) -> Vec<Problem> {
        let object = self.object_ref();
        let mut problems = Vec::new();
        let mut problem = |field: &str, reason: String| {
            problems.push(Problem::new(object.clone(), field, reason));
        };
        if self.metadata.name.as_deref().is_none_or(str::is_empty) {
            problem("metadata.name", "an Operation needs a name".to_owned());
        }
        let p = &self.spec.processor;
        let set: Vec<&str> = [
            p.wasm.as_ref().map(|_| "wasm"),
            p.script_runner.as_ref().map(|_| "scriptRunner"),
            p.http_server.as_ref().map(|_| "httpServer"),
            p.job.as_ref().map(|_| "job"),
            p.argo_workflow.as_ref().map(|_| "argoWorkflow"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if set.len() != 1 {
            problem(
                "spec.processor",
                if set.is_empty() {
                    "set exactly one of wasm, scriptRunner, httpServer, job, argoWorkflow (none is set)".to_owned()
                } else {
                    format!(
                        "set exactly one of wasm, scriptRunner, httpServer, job, argoWorkflow (found {})",
                        set.join(", ")
                    )
                },
            );
        }
        if p.timeout_seconds < 1 {
            problem(
                "spec.processor.timeoutSeconds",
                format!("must be at least 1, got {}", p.timeout_seconds),
            );
        }
        if let Some(wasm) = &p.wasm
            && wasm.module.trim().is_empty()
        {
            problem(
                "spec.processor.wasm.module",
                "must name a module".to_owned(),
            );
        }
        if let Some(wasm) = &p.wasm
            && let Some(reason) = oci_reference_problem(&wasm.module)
        {
            problem(
                "spec.processor.wasm.module",
                format!("{}: {reason}", wasm.module),
            );
        }
        if let Some(wasm) = &p.wasm {
            for (i, path) in wasm.read_only_paths.iter().enumerate() {
                if let Some(reason) = read_only_path_problem(path) {
                    problem(&format!("spec.processor.wasm.readOnlyPaths[{i}]"), reason);
                }
            }
            if wasm.job.is_some() && !wasm.offloaded() {
                problem(
                    "spec.processor.wasm.job",
                    "is only used with runOn: Job; set runOn: Job or remove it".to_owned(),
                );
            }
            if wasm.offloaded() {
                if !wasm.read_only_paths.is_empty() {
                    problem(
                        "spec.processor.wasm.readOnlyPaths",
                        "a step with runOn: Job runs in a pod, where the engine's host directories are not mounted".to_owned(),
                    );
                }
                // The engine's image, command and result source are fixed; the rest
                // is checked as the job processor checks it.
                let job = wasm.job_processor("operon", Vec::new(), Vec::new());
                for (field, reason) in job.problems() {
                    problem(&format!("spec.processor.wasm.job.{field}"), reason);
                }
            }
        }
        if let Some(script) = &p.script_runner {
            if script.script.trim().is_empty() {
                problem("spec.processor.scriptRunner.script", "is empty".to_owned());
            }
            for (i, key) in script.arg_keys.iter().enumerate() {
                if key.is_empty() {
                    problem(
                        &format!("spec.processor.scriptRunner.argKeys[{i}]"),
                        "is empty".to_owned(),
                    );
                }
            }
            for (i, var) in script.env.iter().enumerate() {
                let valid = var
                    .name
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && var
                        .name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !valid {
                    problem(
                        &format!("spec.processor.scriptRunner.env[{i}].name"),
                        format!("{:?} is not a valid variable name", var.name),
                    );
                }
            }
            for (i, path) in script.read_only_paths.iter().enumerate() {
                if let Some(reason) = read_only_path_problem(path) {
                    problem(
                        &format!("spec.processor.scriptRunner.readOnlyPaths[{i}]"),
                        reason,
                    );
                }
            }
            if script.operation_result_key.as_deref() == Some("") {
                problem(
                    "spec.processor.scriptRunner.operationResultKey",
                    "is empty".to_owned(),
                );
            }
        }
        if let Some(http) = &p.http_server {
            if let Some(port) = http.port
                && !(1..=65535).contains(&port)
            {
                problem(
                    "spec.processor.httpServer.port",
                    format!("must be 1-65535, got {port}"),
                );
            }
            if let Some(scheme) = &http.scheme
                && scheme != "http"
                && scheme != "https"
            {
                problem(
                    "spec.processor.httpServer.scheme",
                    format!("must be http or https, got {scheme:?}"),
                );
            }
            if let Some(address) = &http.address
                && (address.is_empty() || address.contains(['/', ' ', '?', '#']))
            {
                problem(
                    "spec.processor.httpServer.address",
                    format!("must be a host name or IP address, got {address:?}"),
                );
            }
            if let Some(path) = &http.path
                && !path.starts_with('/')
            {
                problem(
                    "spec.processor.httpServer.path",
                    format!("must start with '/', got {path:?}"),
                );
            }
        }
        if let Some(job) = &p.job {
            for (field, reason) in job.problems() {
                problem(&format!("spec.processor.job.{field}"), reason);
            }
        }
        if let Some(argo) = &p.argo_workflow {
            for (field, reason) in argo.problems() {
                let field = if field.is_empty() {
                    "spec.processor.argoWorkflow".to_owned()
                } else {
                    format!("spec.processor.argoWorkflow.{field}")
                };
                problem(&field, reason);
            }
        }
        if let Some(host_path) = self
            .spec
            .storage
            .as_ref()
            .and_then(|s| s.host_path.as_ref())
            && !host_path.path.starts_with('/')
        {
            problem(
                "spec.storage.hostPath.path",
                format!("must be an absolute path, got {:?}", host_path.path),
            );
        }
        problems
    }
}

/// Why `path` cannot be a script's read-only path, if it cannot.
fn read_only_path_problem(path: &str) -> Option<String> {
    let p = std::path::Path::new(path);
    if !p.is_absolute() {
        return Some(format!("{path:?} is not an absolute path"));
    }
    if p.components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Some(format!("{path:?} contains \"..\""));
    }
    if p.parent().is_none() {
        return Some(
            "\"/\" would make the whole host readable; name the directories the script needs"
                .to_owned(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn operation(yaml: &str) -> Operation {
        yaml_serde::from_str(yaml).unwrap()
    }

    /// The processor an Operation uses, once validated.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum ProcessorKind {
        /// `wasm`.
        Wasm,
        /// `scriptRunner`.
        Script,
        /// `httpServer`.
        Http,
        /// `job`.
        Job,
        /// `argoWorkflow`.
        ArgoWorkflow,
    }

    /// The processor kind, when exactly one is set.
    fn processor_kind(op: &Operation) -> Option<ProcessorKind> {
        let p = &op.spec.processor;
        let kinds = [
            p.wasm.as_ref().map(|_| ProcessorKind::Wasm),
            p.script_runner.as_ref().map(|_| ProcessorKind::Script),
            p.http_server.as_ref().map(|_| ProcessorKind::Http),
            p.job.as_ref().map(|_| ProcessorKind::Job),
            p.argo_workflow
                .as_ref()
                .map(|_| ProcessorKind::ArgoWorkflow),
        ];
        let mut set = kinds.into_iter().flatten();
        match (set.next(), set.next()) {
            (Some(kind), None) => Some(kind),
            _ => None,
        }
    }

    #[test]
    fn defaults_and_a_valid_script_operation() {
        let op = operation(
            "apiVersion: operon.dev/v1alpha1\nkind: Operation\nmetadata: {name: df}\nspec:\n  processor:\n    scriptRunner:\n      script: df -P\n      operationResultKey: df\n",
        );
        assert_eq!(op.spec.processor.timeout_seconds, 30);
        assert_eq!(processor_kind(&op), Some(ProcessorKind::Script));
        assert!(op.validate().is_empty(), "{:?}", op.validate());
    }

    #[test]
    fn every_problem_is_reported_with_its_field() {
        let op = operation(
            "apiVersion: operon.dev/v1alpha1\nkind: Operation\nmetadata: {name: bad}\nspec:\n  processor:\n    timeoutSeconds: 0\n    wasm: {module: ''}\n    httpServer: {port: 70000, scheme: ftp, path: x}\n  storage: {hostPath: {path: relative}}\n",
        );
        let fields: Vec<String> = op.validate().into_iter().map(|p| p.field).collect();
        assert_eq!(
            fields,
            [
                "spec.processor",
                "spec.processor.timeoutSeconds",
                "spec.processor.wasm.module",
                "spec.processor.httpServer.port",
                "spec.processor.httpServer.scheme",
                "spec.processor.httpServer.path",
                "spec.storage.hostPath.path",
            ]
        );
        assert_eq!(processor_kind(&op), None);
    }

    #[test]
    fn an_offloaded_wasm_step_takes_job_settings() {
        let op = operation(
            "apiVersion: operon.dev/v1alpha1\nkind: Operation\nmetadata: {name: scan}\nspec:\n  processor:\n    wasm:\n      module: scan\n      runOn: Job\n      job: {serviceAccountName: scanner, nodeSelector: {pool: batch}, ttlSecondsAfterFinished: 60}\n",
        );
        assert!(op.validate().is_empty(), "{:?}", op.validate());
        let wasm = op.spec.processor.wasm.as_ref().unwrap();
        assert!(wasm.offloaded());
        let job = wasm.job_processor("img", vec!["operon".into()], vec!["op".into()]);
        assert_eq!(job.service_account_name.as_deref(), Some("scanner"));
        assert_eq!(job.node_selector["pool"], "batch");
        assert_eq!(job.ttl_seconds_after_finished, Some(60));
        assert_eq!(job.image, "img");
    }

    #[test]
    fn offload_settings_are_checked_with_their_fields() {
        let op = operation(
            "apiVersion: operon.dev/v1alpha1\nkind: Operation\nmetadata: {name: scan}\nspec:\n  processor:\n    wasm:\n      module: scan\n      readOnlyPaths: [/proc]\n      runOn: Job\n      job: {serviceAccountName: Not_Valid, ttlSecondsAfterFinished: -1}\n",
        );
        let fields: Vec<String> = op.validate().into_iter().map(|p| p.field).collect();
        assert_eq!(
            fields,
            [
                "spec.processor.wasm.readOnlyPaths",
                "spec.processor.wasm.job.serviceAccountName",
                "spec.processor.wasm.job.ttlSecondsAfterFinished",
            ]
        );
        let op = operation(
            "apiVersion: operon.dev/v1alpha1\nkind: Operation\nmetadata: {name: scan}\nspec:\n  processor:\n    wasm: {module: scan, job: {}}\n",
        );
        let problems = op.validate();
        assert_eq!(problems[0].field, "spec.processor.wasm.job");
        assert!(problems[0].reason.contains("runOn: Job"), "{problems:?}");
    }
}
