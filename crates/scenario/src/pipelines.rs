//! Pipelines under test: the Operations and OperationSets of files, and a Diagnosis
//! run to its end as `operon run` runs it, shown in the form `expect.diagnosis` is
//! written in.

use crate::check::Observed;
use crate::file::DiagnosisStep;
use crate::file::PipelineSubject;
use crate::{Options, ScenarioError};
use operon_data::api::{Diagnosis, DiagnosisSpec, DiagnosisStatus};
use operon_manifest::{self as manifest, Manifests};
use operon_pipeline::Progress;
use operon_runner::node_paths::NodeRoot;
use operon_runner::processors::{ProcessorSettings, Processors};
use operon_store::ModuleLocator;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The Operations and OperationSets of a pipeline test, read once for all its steps.
pub(crate) struct Pipeline {
    manifests: Manifests,
    processors: Processors,
    /// What did not read: shown only when a Diagnosis cannot be planned, as `operon
    /// run` shows it (files beside the pipeline may hold other things).
    problems: Vec<String>,
}

/// Progress that only counts: a test's output is its report.
struct Quiet;

impl Progress for Quiet {
    type Error = std::convert::Infallible;
}

impl Pipeline {
    /// Reads the subject's files (relative to `base`).
    pub(crate) fn load(
        subject: &PipelineSubject,
        base: &Path,
        modules: ModuleLocator,
        options: &Options,
    ) -> Result<Self, ScenarioError> {
        let files: Vec<PathBuf> = subject.files.iter().map(|f| base.join(f)).collect();
        let (manifests, problems) = manifest::load(&files);
        let processors = Processors::new(ProcessorSettings {
            cache_dir: options.cache_dir.clone(),
            strict: options.strict,
            modules,
            node_root: NodeRoot::new(subject.node_root.as_ref().map(|r| base.join(r))),
            ..ProcessorSettings::default()
        });
        Ok(Self {
            manifests,
            processors,
            problems: problems.iter().map(ToString::to_string).collect(),
        })
    }

    /// Runs the step's Diagnosis to its end.
    pub(crate) async fn diagnose(
        &self,
        step: &DiagnosisStep,
        index: usize,
    ) -> Result<Observed, ScenarioError> {
        let set = self
            .manifests
            .operation_sets
            .get(&step.operation_set)
            .ok_or_else(|| {
                ScenarioError::Pipeline(format!(
                    "OperationSet {:?} is not in the pipeline's files (found: {}){}",
                    step.operation_set,
                    self.manifests
                        .operation_sets
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", "),
                    match self.problems.as_slice() {
                        [] => String::new(),
                        problems => format!("; problems: {}", problems.join("; ")),
                    }
                ))
            })?;
        let plan =
            operon_pipeline::plan(&set.object, &self.manifests, &self.processors).map_err(|e| {
                let problems: Vec<String> = (self.problems.iter().cloned())
                    .chain(e.problems().iter().map(ToString::to_string))
                    .collect();
                ScenarioError::Pipeline(format!("{e}: {}", problems.join("; ")))
            })?;
        let name = step
            .name
            .clone()
            .unwrap_or_else(|| format!("test-{}", index + 1));
        let mut diagnosis = Diagnosis::new(
            &name,
            DiagnosisSpec {
                operation_set: step.operation_set.clone(),
                node_name: step.node_name.clone(),
                parameters: parameters(&step.parameters),
                ..Default::default()
            },
        );
        diagnosis.metadata.namespace = Some("default".to_owned());
        diagnosis.metadata.uid = Some(format!("test-{name}"));
        operon_pipeline::execute(&mut diagnosis, &plan.graph, &plan.steps, &mut Quiet)
            .await
            .map_err(ScenarioError::PipelineRun)?;
        Ok(Observed {
            diagnosis: Some(view(diagnosis.status.as_ref())),
            ..Observed::default()
        })
    }
}

/// `spec.parameters` are strings: numbers and booleans are written as YAML shows them.
fn parameters(given: &serde_json::Map<String, Value>) -> BTreeMap<String, String> {
    given
        .iter()
        .map(|(key, value)| {
            let text = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (key.clone(), text)
        })
        .collect()
}

/// A Diagnosis' outcome in the form `expect.diagnosis` is written in.
fn view(status: Option<&DiagnosisStatus>) -> Value {
    let Some(status) = status else {
        return json!({"phase": null});
    };
    let failed: BTreeMap<&str, &str> = status
        .nodes
        .iter()
        .filter_map(|n| n.error.as_deref().map(|e| (n.operation.as_str(), e)))
        .collect();
    json!({
        "phase": status.phase,
        "path": status.succeeded_path.iter().map(|n| n.operation.as_str()).collect::<Vec<_>>(),
        "results": status.operation_results,
        "failed": failed,
        "nodes": status.nodes.iter().map(|n| json!({"operation": n.operation, "phase": n.phase})).collect::<Vec<_>>(),
    })
}
