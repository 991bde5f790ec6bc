//! The `argoWorkflow` runner: a step handed to Argo Workflows.
//!
//! A run submits a Workflow (from a WorkflowTemplate reference or an inline spec) in
//! the Diagnosis' namespace, owned by the Diagnosis so that deleting the Diagnosis
//! deletes the Workflow and Argo stops its pods. Its arguments are the Operation's
//! parameters plus the runner context as `operon-*` parameters (in a recorded trace,
//! `operon-traceparent` too, for its steps to continue it). The runner watches
//! the Workflow's phase; when it succeeds, its output parameters (the Workflow's
//! global outputs, then its entrypoint's) become the step's results. A Workflow that
//! runs past the step's timeout is told to terminate (`spec.shutdown`).
//!
//! The Workflow's name is derived from the run like a Job's, so a restarted
//! controller waits for the Workflow it submitted instead of submitting another.

use super::context::{Platform, RunContext};
use super::job::job_name;
use super::{DryRun, RunError, RunOutput, RunRequest, Runner};
use futures::StreamExt as _;
use futures::future::BoxFuture;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use operon_data::api::ArgoWorkflowProcessor;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// The annotation holding the run's full name.
const RUN_NAME_ANNOTATION: &str = "operon.dev/run-name";

/// Argo's Workflow kind.
pub fn workflow_resource() -> ApiResource {
    ApiResource {
        group: "argoproj.io".to_owned(),
        version: "v1alpha1".to_owned(),
        api_version: "argoproj.io/v1alpha1".to_owned(),
        kind: "Workflow".to_owned(),
        plural: "workflows".to_owned(),
    }
}

/// Why an Argo step could not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ArgoRunError {
    /// The process has no Kubernetes client.
    #[error(
        "the argoWorkflow processor needs the Kubernetes API and this process has none (`operon run` has no cluster: use --dry-run to see the Workflow it would submit)"
    )]
    NoCluster,
    /// A parameter's `fromKey` is not in the input.
    #[error(
        "argoWorkflow.parameters[{index}] takes input key {key:?}, which is not among the input keys"
    )]
    MissingKey {
        /// The parameter's index.
        index: usize,
        /// The key.
        key: String,
    },
    /// Argo's CRD is not installed.
    #[error("Argo Workflows is not installed in the cluster (no workflows.argoproj.io/v1alpha1)")]
    NotInstalled,
    /// A request failed.
    #[error("{what}: {source}")]
    Api {
        /// What was asked.
        what: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
    /// A Workflow of that name is not this run's.
    #[error("Workflow {workflow} exists and belongs to another run ({other})")]
    Foreign {
        /// `namespace/name`.
        workflow: String,
        /// The other run.
        other: String,
    },
    /// The Workflow failed, was deleted, or ran out of time.
    #[error("{0}")]
    Failed(String),
}

impl From<ArgoRunError> for RunError {
    fn from(e: ArgoRunError) -> Self {
        RunError::from_source(e)
    }
}

fn api_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ArgoRunError {
    let what = what.into();
    move |source| match &source {
        // Creating (or dry-running) an object of a kind the server does not serve.
        kube::Error::Api(s) if s.code == 404 => ArgoRunError::NotInstalled,
        _ => ArgoRunError::Api { what, source },
    }
}

/// Runs one Operation's steps as Argo Workflows.
#[derive(Clone)]
pub struct ArgoRunner {
    client: Option<kube::Client>,
    operation: String,
    processor: ArgoWorkflowProcessor,
    platform: Platform,
    /// How long past the deadline the runner waits for Argo to report the end.
    grace: Duration,
}

impl std::fmt::Debug for ArgoRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgoRunner")
            .field("operation", &self.operation)
            .field("cluster", &self.client.is_some())
            .finish_non_exhaustive()
    }
}

/// Where a Workflow stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WorkflowState {
    /// Pending or running.
    Running,
    /// Succeeded, with its output parameters.
    Succeeded(BTreeMap<String, String>),
    /// Failed or errored, or gone.
    Failed(String),
}

/// Reads a Workflow's state (`None`: it was deleted).
pub(crate) fn workflow_state(name: &str, workflow: Option<&DynamicObject>) -> WorkflowState {
    let Some(workflow) = workflow else {
        return WorkflowState::Failed(format!(
            "Workflow {name} was deleted before it finished (deleting the Diagnosis deletes its Workflows)"
        ));
    };
    let status = workflow.data.get("status").cloned().unwrap_or(Value::Null);
    let phase = status["phase"].as_str().unwrap_or("");
    let message = status["message"].as_str().unwrap_or("no message");
    match phase {
        "Succeeded" => {
            let mut results = BTreeMap::new();
            // The entrypoint's outputs first; the Workflow's global outputs win.
            let root = &status["nodes"][name]["outputs"]["parameters"];
            for outputs in [root, &status["outputs"]["parameters"]] {
                for p in outputs.as_array().into_iter().flatten() {
                    if let (Some(key), Some(value)) = (p["name"].as_str(), p["value"].as_str()) {
                        results.insert(key.to_owned(), value.to_owned());
                    }
                }
            }
            WorkflowState::Succeeded(results)
        }
        "Failed" | "Error" => {
            WorkflowState::Failed(format!("Workflow {name} ended in phase {phase}: {message}"))
        }
        _ => WorkflowState::Running,
    }
}

impl ArgoRunner {
    /// A runner for `operation`'s `processor`; without a client it can only dry-run.
    pub fn new(
        client: Option<kube::Client>,
        operation: impl Into<String>,
        processor: ArgoWorkflowProcessor,
        platform: Platform,
    ) -> Self {
        Self {
            client,
            operation: operation.into(),
            processor,
            platform,
            grace: Duration::from_secs(30),
        }
    }

    fn namespace(&self, request: &RunRequest) -> String {
        super::context::namespace(request, self.client.as_ref())
    }

    /// The Workflow of one run.
    pub(crate) fn workflow(&self, request: &RunRequest) -> Result<DynamicObject, ArgoRunError> {
        let name = job_name(request);
        let namespace = self.namespace(request);
        let context = RunContext::new(request, &self.platform);
        let mut arguments: Vec<(String, String)> = Vec::new();
        for (index, p) in self.processor.parameters.iter().enumerate() {
            let value = match (&p.value, &p.from_key) {
                (Some(value), _) => value.clone(),
                (None, Some(key)) => {
                    request
                        .input
                        .get(key)
                        .cloned()
                        .ok_or_else(|| ArgoRunError::MissingKey {
                            index,
                            key: key.clone(),
                        })?
                }
                (None, None) => String::new(),
            };
            arguments.push((p.name.clone(), value));
        }
        arguments.extend(context.parameters());
        let mut spec = match (
            &self.processor.workflow_template_ref,
            &self.processor.workflow_spec,
        ) {
            (Some(reference), _) => {
                let mut r = json!({"name": reference.name});
                if reference.cluster_scope {
                    r["clusterScope"] = json!(true);
                }
                json!({"workflowTemplateRef": r})
            }
            (None, Some(inline)) => inline.clone(),
            (None, None) => json!({}),
        };
        // An inline spec's own arguments stay unless a parameter here names them.
        let mut parameters: Vec<Value> = spec["arguments"]["parameters"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        parameters.retain(|p| {
            !arguments
                .iter()
                .any(|(name, _)| p["name"].as_str() == Some(name))
        });
        parameters.extend(
            arguments
                .into_iter()
                .map(|(name, value)| json!({"name": name, "value": value})),
        );
        spec["arguments"]["parameters"] = Value::Array(parameters);
        spec["activeDeadlineSeconds"] = json!(request.timeout.as_secs().max(1));
        if let Some(sa) = &self.processor.service_account_name {
            spec["serviceAccountName"] = json!(sa);
        }
        let mut owners = json!([]);
        if let Some((kind, owner, uid)) = &request.owner
            && !uid.is_empty()
        {
            owners = json!([{"apiVersion": operon_data::api::API_VERSION, "kind": kind, "name": owner,
                "uid": uid, "blockOwnerDeletion": false, "controller": false}]);
        }
        let object = json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
            "metadata": {
                "name": name, "namespace": namespace,
                "labels": {"app.kubernetes.io/managed-by": "operon", "operon.dev/run": name},
                "annotations": {RUN_NAME_ANNOTATION: request.name,
                                "operon.dev/operation": self.operation},
                "ownerReferences": owners,
            },
            "spec": spec,
        });
        serde_json::from_value(object).map_err(|e| ArgoRunError::Failed(e.to_string()))
    }

    async fn run_workflow(&self, request: &RunRequest) -> Result<RunOutput, ArgoRunError> {
        let client = self.client.clone().ok_or(ArgoRunError::NoCluster)?;
        let namespace = self.namespace(request);
        let workflow = self.workflow(request)?;
        let name = workflow.metadata.name.clone().unwrap_or_default();
        let reference = format!("{namespace}/{name}");
        let api: Api<DynamicObject> =
            Api::namespaced_with(client, &namespace, &workflow_resource());
        match api
            .get_opt(&name)
            .await
            .map_err(api_error(format!("reading Workflow {reference}")))?
        {
            Some(existing) => {
                let theirs = existing
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(RUN_NAME_ANNOTATION))
                    .cloned()
                    .unwrap_or_default();
                if theirs != request.name {
                    return Err(ArgoRunError::Foreign {
                        workflow: reference,
                        other: theirs,
                    });
                }
                tracing::info!(workflow = %reference, "re-attaching to the run's Workflow");
            }
            None => {
                let params = PostParams {
                    dry_run: false,
                    field_manager: Some(operon_cluster::kube::FIELD_MANAGER.to_owned()),
                };
                match api.create(&params, &workflow).await {
                    Ok(_) => tracing::info!(workflow = %reference, "Workflow submitted"),
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => return Err(api_error(format!("submitting Workflow {reference}"))(e)),
                }
            }
        }
        let budget = request.timeout + self.grace;
        match tokio::time::timeout(budget, watch(&api, &name)).await {
            Ok(WorkflowState::Succeeded(results)) => Ok(RunOutput {
                results,
                output: String::new(),
            }),
            Ok(WorkflowState::Failed(reason)) => Err(ArgoRunError::Failed(reason)),
            Ok(WorkflowState::Running) => unreachable!("watch returns a decided state"),
            Err(_) => {
                let stop = json!({"spec": {"shutdown": "Terminate"}});
                let params = PatchParams::apply(operon_cluster::kube::FIELD_MANAGER);
                if let Err(e) = api.patch(&name, &params, &Patch::Merge(&stop)).await {
                    tracing::warn!(workflow = %reference, error = %e, "cannot terminate the Workflow");
                }
                Err(ArgoRunError::Failed(format!(
                    "Workflow {reference} did not finish within {} (timeoutSeconds plus {}); it was told to terminate",
                    humantime::format_duration(request.timeout),
                    humantime::format_duration(self.grace)
                )))
            }
        }
    }

    async fn dry_run_workflow(&self, request: &RunRequest) -> Result<DryRun, ArgoRunError> {
        // The object a real run would create: the same, but not told to dry-run.
        let real = RunRequest {
            dry_run: false,
            ..request.clone()
        };
        let workflow = self.workflow(&real)?;
        let namespace = self.namespace(request);
        let name = workflow.metadata.name.clone().unwrap_or_default();
        let reference = format!("{namespace}/{name}");
        let mut checked = "rendered locally: no cluster to check it against";
        if let Some(client) = &self.client {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &namespace, &workflow_resource());
            let params = PostParams {
                dry_run: true,
                field_manager: Some(operon_cluster::kube::FIELD_MANAGER.to_owned()),
            };
            checked = match api.create(&params, &workflow).await {
                Ok(_) => "accepted by the API server in a server-side dry run",
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    "the Workflow exists already: a run would wait for it"
                }
                Err(e) => return Err(api_error(format!("Workflow {reference} (dry run)"))(e)),
            };
        }
        let source = match &self.processor.workflow_template_ref {
            Some(r) if r.cluster_scope => format!("from ClusterWorkflowTemplate {}", r.name),
            Some(r) => format!("from WorkflowTemplate {}", r.name),
            None => "from its inline spec".to_owned(),
        };
        Ok(DryRun {
            action: format!("would submit Workflow {reference} {source}; {checked}"),
            detail: Some(serde_json::to_value(&workflow).unwrap_or_default()),
            output: RunOutput::default(),
        })
    }
}

/// Watches the Workflow `name` until it has ended (or is gone).
async fn watch(api: &Api<DynamicObject>, name: &str) -> WorkflowState {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher::watcher(api.clone(), config)
        .default_backoff()
        .boxed();
    let (mut current, mut listing) = (None, None);
    let mut listed = false;
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Init) => listing = None,
            Ok(Event::InitApply(w)) => listing = Some(w),
            Ok(Event::InitDone) => {
                current = listing.take();
                listed = true;
            }
            Ok(Event::Apply(w)) => current = Some(w),
            Ok(Event::Delete(_)) => current = None,
            Err(e) => {
                tracing::warn!(workflow = name, error = %e, "watching the Workflow failed; retrying");
                continue;
            }
        }
        if listed {
            let state = workflow_state(name, current.as_ref());
            if state != WorkflowState::Running {
                return state;
            }
        }
    }
    WorkflowState::Failed(format!("the watch of Workflow {name} ended"))
}

impl Runner for ArgoRunner {
    fn run<'a>(&'a self, request: &'a RunRequest) -> BoxFuture<'a, Result<RunOutput, RunError>> {
        Box::pin(async move { Ok(self.run_workflow(request).await?) })
    }

    fn dry_run<'a>(&'a self, request: &'a RunRequest) -> BoxFuture<'a, Result<DryRun, RunError>> {
        Box::pin(async move { Ok(self.dry_run_workflow(request).await?) })
    }
}

#[cfg(test)]
mod tests;
