//! The processors that hand a step to the cluster instead of running it in the engine:
//! `job` (a Kubernetes Job) and `argoWorkflow` (an Argo Workflow), and their checks.

use super::EnvVar;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Run the step as a Kubernetes Job in the Diagnosis' namespace.
///
/// The container gets the step's input as a mounted file and as environment variables
/// and writes its results, a JSON object of strings, to `$OPERON_RESULT_PATH` (its
/// termination message).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobProcessor {
    /// The container image.
    pub image: String,
    /// The entrypoint (the image's when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Arguments to the entrypoint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables besides the input and the runner context.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Resource requests and limits, e.g. `limits: {nvidia.com/gpu: "1"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<JobResources>,
    /// Labels a node must have to run the pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Run the pod on the node the Diagnosis is about (its `kubernetes.io/hostname`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub on_diagnosis_node: bool,
    /// The pod's ServiceAccount (the namespace's `default` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// `Always`, `IfNotPresent` or `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    /// How long a finished Job (and its input Secret) is kept, in seconds (default 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
    /// Where the results are read from (default `TerminationMessage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_from: Option<JobResultSource>,
}

/// Resource requests and limits of a Job's container, as Kubernetes quantities.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobResources {
    /// Resources the scheduler reserves.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, String>,
    /// Resources the container may not exceed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, String>,
}

/// Where a Job step's results come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum JobResultSource {
    /// The container's termination message (at most 4096 bytes, the kubelet's bound).
    TerminationMessage,
    /// The last line of the container's log (at most 1 MiB is read).
    Logs,
}

/// Submit the step as an Argo Workflow in the Diagnosis' namespace and wait for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArgoWorkflowProcessor {
    /// Run this WorkflowTemplate (or ClusterWorkflowTemplate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_template_ref: Option<WorkflowTemplateRef>,
    /// Or run this Workflow spec, as written in a Workflow's `spec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_fields")]
    pub workflow_spec: Option<serde_json::Value>,
    /// Workflow arguments, besides the runner context's `operon-*` parameters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<ArgoParameter>,
    /// The ServiceAccount the Workflow's pods run as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

fn preserve_unknown_fields(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A WorkflowTemplate to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowTemplateRef {
    /// The template's name.
    pub name: String,
    /// A ClusterWorkflowTemplate rather than a WorkflowTemplate of the namespace.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cluster_scope: bool,
}

/// One Workflow argument: a literal value or the value of an input key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArgoParameter {
    /// The parameter's name in the Workflow.
    pub name: String,
    /// A literal value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The input key (a Diagnosis parameter or an earlier result) whose value is passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_key: Option<String>,
}

/// Whether `text` is a Kubernetes quantity, as the API server reads it: a signed
/// decimal number, then a binary suffix (`Ki`...`Ei`), a decimal one (`m`, `k`, `M`...
/// `E`) or a decimal exponent (`e3`, `E-2`).
fn is_quantity(text: &str) -> bool {
    static QUANTITY: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[mkMGTPE]|[eE][+-]?[0-9]+)?$",
        )
        .expect("the quantity pattern is valid")
    });
    QUANTITY.is_match(text)
}

fn is_env_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Argo's parameter names: letters, digits, `-` and `_`.
fn is_argo_parameter_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

impl JobProcessor {
    /// Every problem of this processor, as `(field under spec.processor.job, reason)`.
    pub(crate) fn problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        if self.image.trim().is_empty() {
            problems.push(("image".to_owned(), "must name an image".to_owned()));
        }
        for (i, var) in self.env.iter().enumerate() {
            if !is_env_name(&var.name) {
                problems.push((
                    format!("env[{i}].name"),
                    format!("{:?} is not a valid variable name", var.name),
                ));
            } else if var.name.starts_with("OPERON_") {
                problems.push((
                    format!("env[{i}].name"),
                    format!("{:?}: OPERON_ variables are set by the engine", var.name),
                ));
            }
        }
        if let Some(resources) = &self.resources {
            for (kind, map) in [
                ("requests", &resources.requests),
                ("limits", &resources.limits),
            ] {
                for (name, quantity) in map {
                    if quantity.trim().is_empty() {
                        problems.push((format!("resources.{kind}.{name}"), "is empty".to_owned()));
                    } else if !is_quantity(quantity) {
                        problems.push((
                            format!("resources.{kind}.{name}"),
                            format!(
                                "{quantity:?} is not a quantity (a number with an optional suffix: m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, or an exponent such as 1e3)"
                            ),
                        ));
                    }
                }
            }
        }
        if let Some(sa) = &self.service_account_name
            && !crate::conventions::names::is_dns_subdomain(sa)
        {
            problems.push((
                "serviceAccountName".to_owned(),
                format!("{sa:?} is not a valid ServiceAccount name"),
            ));
        }
        if let Some(policy) = &self.image_pull_policy
            && !["Always", "IfNotPresent", "Never"].contains(&policy.as_str())
        {
            problems.push((
                "imagePullPolicy".to_owned(),
                format!("must be Always, IfNotPresent or Never, got {policy:?}"),
            ));
        }
        if let Some(ttl) = self.ttl_seconds_after_finished
            && ttl < 0
        {
            problems.push((
                "ttlSecondsAfterFinished".to_owned(),
                format!("must not be negative, got {ttl}"),
            ));
        }
        problems
    }
}

impl ArgoWorkflowProcessor {
    /// Every problem of this processor, as `(field under spec.processor.argoWorkflow,
    /// reason)`.
    pub(crate) fn problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        match (&self.workflow_template_ref, &self.workflow_spec) {
            (None, None) => problems.push((
                String::new(),
                "set one of workflowTemplateRef, workflowSpec (none is set)".to_owned(),
            )),
            (Some(_), Some(_)) => problems.push((
                String::new(),
                "set one of workflowTemplateRef, workflowSpec (both are set)".to_owned(),
            )),
            (Some(r), None) if !crate::conventions::names::is_dns_subdomain(&r.name) => problems
                .push((
                    "workflowTemplateRef.name".to_owned(),
                    format!("{:?} is not a valid object name", r.name),
                )),
            (None, Some(spec)) if !spec.is_object() => problems.push((
                "workflowSpec".to_owned(),
                "must be an object (a Workflow's spec)".to_owned(),
            )),
            _ => {}
        }
        for (i, p) in self.parameters.iter().enumerate() {
            if !is_argo_parameter_name(&p.name) {
                problems.push((
                    format!("parameters[{i}].name"),
                    format!("{:?} is not a valid parameter name", p.name),
                ));
            } else if p.name.starts_with("operon-") {
                problems.push((
                    format!("parameters[{i}].name"),
                    format!("{:?}: operon- parameters are set by the engine", p.name),
                ));
            }
            match (&p.value, &p.from_key) {
                (Some(_), Some(_)) | (None, None) => problems.push((
                    format!("parameters[{i}]"),
                    "set exactly one of value, fromKey".to_owned(),
                )),
                (None, Some(key)) if key.is_empty() => {
                    problems.push((format!("parameters[{i}].fromKey"), "is empty".to_owned()))
                }
                _ => {}
            }
        }
        if let Some(sa) = &self.service_account_name
            && !crate::conventions::names::is_dns_subdomain(sa)
        {
            problems.push((
                "serviceAccountName".to_owned(),
                format!("{sa:?} is not a valid ServiceAccount name"),
            ));
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_problems_name_their_fields() {
        let job: JobProcessor = serde_json::from_value(serde_json::json!({
            "image": " ", "env": [{"name": "1x"}, {"name": "OPERON_NODE"}],
            "resources": {"limits": {"cpu": ""}}, "serviceAccountName": "Bad_SA",
            "imagePullPolicy": "Sometimes", "ttlSecondsAfterFinished": -1,
        }))
        .unwrap();
        let fields: Vec<String> = job.problems().into_iter().map(|p| p.0).collect();
        assert_eq!(
            fields,
            [
                "image",
                "env[0].name",
                "env[1].name",
                "resources.limits.cpu",
                "serviceAccountName",
                "imagePullPolicy",
                "ttlSecondsAfterFinished"
            ]
        );
    }

    #[test]
    fn resource_quantities_are_read_as_the_api_server_reads_them() {
        for good in [
            "500m", "2", "1.5", ".5", "+1", "256Mi", "1Gi", "2G", "1e3", "1E-2", "0.5Ki",
        ] {
            assert!(is_quantity(good), "{good}");
        }
        for bad in ["lots", "1 Gi", "1GB", "Mi", "1.2.3", "e3", "1mi", "--1"] {
            assert!(!is_quantity(bad), "{bad}");
        }
        let job: JobProcessor = serde_json::from_value(serde_json::json!({
            "image": "i", "resources": {"limits": {"memory": "lots"}, "requests": {"cpu": "250m"}},
        }))
        .unwrap();
        let problems = job.problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].0, "resources.limits.memory");
        assert!(problems[0].1.starts_with("\"lots\" is not a quantity"));
    }

    #[test]
    fn argo_needs_one_source_and_well_formed_parameters() {
        let argo: ArgoWorkflowProcessor = serde_json::from_value(serde_json::json!({
            "workflowTemplateRef": {"name": "t"}, "workflowSpec": {"entrypoint": "main"},
            "parameters": [{"name": "a b", "value": "x"}, {"name": "operon-node", "value": "x"},
                           {"name": "c"}, {"name": "d", "fromKey": ""}],
        }))
        .unwrap();
        let fields: Vec<String> = argo.problems().into_iter().map(|p| p.0).collect();
        assert_eq!(
            fields,
            [
                "",
                "parameters[0].name",
                "parameters[1].name",
                "parameters[2]",
                "parameters[3].fromKey"
            ]
        );
        let good: ArgoWorkflowProcessor = serde_json::from_value(serde_json::json!({
            "workflowSpec": {"entrypoint": "main", "templates": []},
            "parameters": [{"name": "node", "fromKey": "node"}],
        }))
        .unwrap();
        assert!(good.problems().is_empty());
    }
}
