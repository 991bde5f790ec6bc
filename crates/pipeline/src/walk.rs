//! Running a Diagnosis: the memoized depth-first search over an OperationSet's paths.
//!
//! Semantics (a fixed KubeDiag):
//! - Paths are tried in the graph's path order (depth-first from the start node,
//!   successors in their listed `to` order). The first path whose every operation
//!   succeeds makes the Diagnosis `Succeeded`; when none does it is `Failed`.
//! - Each node runs at most once per Diagnosis. A failed node fails every path through
//!   it without running again; a node from which no successful path reaches a sink is
//!   remembered as a dead end. The search therefore visits each edge once: it is linear
//!   in nodes plus edges however many paths the graph has.
//! - A node's input is the Diagnosis' parameters, overlaid by the results of every
//!   operation that succeeded so far (later ones win), plus the built-ins
//!   `diagnosis.name`, `diagnosis.namespace`, `diagnosis.uid`, `node`, `pod.namespace`,
//!   `pod.name` and `container` (when known). `node`, like the run's node, is the node
//!   the Diagnosis is about: `spec.nodeName`, else its pod's node as placed.
//! - A node's `dependences` must have succeeded earlier in the Diagnosis, or the node
//!   fails with that reason (without running).
//! - After every node the status carries a record of it and a checkpoint. The status
//!   is persisted ([`Progress::checkpoint`]) just before the next node runs, with
//!   `currentNode` naming that node, and once at the end: one write per node plus one
//!   to finish, and never a node running that the persisted status does not show. A
//!   Diagnosis whose status already holds node records resumes without re-running them.
//! - Results of a failed run that the runner still reports (a script's
//!   `operation.<key>.error`) are merged too, so users see why it failed.
//!
//! - A dry run (`spec.dryRun`) walks the same search, but asks each runner what it
//!   would do ([`Runner::dry_run`]): sandboxed steps still run and their results feed
//!   later steps, the others return no results; each node records the action, and no
//!   result is stored on the host.
//!
//! This module knows no processor: each Operation is a [`Step`] holding a
//! [`Runner`].

mod checkpoint;
mod plan;
mod storage;

pub use checkpoint::{CheckpointError, CheckpointFile};
pub use plan::{Operations, Plan, PlanError, plan};
use storage::store_results;

use crate::graph::Graph;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use operon_data::api::{
    Checkpoint, Condition, ConditionStatus, Diagnosis, DiagnosisPhase, DiagnosisStatus,
    DryRunRecord, FailedPath, NodePhase, NodeRecord, PathNode,
};
use operon_data::conventions::conditions::set_condition;
use operon_runner::{RunRequest, Runner};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;

/// A dry run's detail (the object a step would create) is cut at this many bytes.
pub(crate) const MAX_DRY_RUN_DETAIL: usize = 16 << 10;

/// At most this many failed paths are listed in the status; the rest are counted.
pub(crate) const MAX_FAILED_PATHS: usize = 32;

/// The `Complete` condition type.
pub const COMPLETE: &str = "Complete";

/// How one Operation runs.
#[derive(Clone)]
pub struct Step {
    /// The runner of the Operation's processor.
    pub runner: Arc<dyn Runner>,
    /// The Operation's `timeoutSeconds`.
    pub timeout: Duration,
    /// The Operation's `storage.hostPath.path`.
    pub storage: Option<PathBuf>,
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Step")
            .field("timeout", &self.timeout)
            .field("storage", &self.storage)
            .finish_non_exhaustive()
    }
}

/// Observes a Diagnosis as it runs. Every method has a default that does nothing.
pub trait Progress: Send {
    /// Why a checkpoint could not be persisted; it reaches the caller of [`execute`]
    /// as the source of [`PipelineError::Checkpoint`], with its type.
    type Error: std::error::Error + Send + Sync + 'static;
    /// A node is about to run.
    fn node_started(&mut self, _id: usize, _operation: &str) {}
    /// A node finished (or failed without running).
    fn node_finished(&mut self, _record: &NodeRecord) {}
    /// Persist the Diagnosis: called before every node runs and once when it ends. An
    /// error stops the Diagnosis (it could not be resumed faithfully).
    fn checkpoint<'a>(
        &'a mut self,
        _diagnosis: &'a Diagnosis,
    ) -> CheckpointFuture<'a, Self::Error> {
        Box::pin(std::future::ready(Ok(())))
    }
}

/// What [`Progress::checkpoint`] returns: a persister may have to wait on a network.
pub type CheckpointFuture<'a, E = CheckpointError> = futures::future::BoxFuture<'a, Result<(), E>>;

/// A [`Progress`] that observes nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Quiet;

impl Progress for Quiet {
    type Error = std::convert::Infallible;
}

/// Why a Diagnosis could not be run to an end; `E` is the error of its [`Progress`].
#[derive(Debug, thiserror::Error)]
pub enum PipelineError<E = CheckpointError> {
    /// The checkpoint could not be persisted.
    #[error("cannot persist the checkpoint of {diagnosis}: {source}")]
    Checkpoint {
        /// The Diagnosis.
        diagnosis: String,
        /// What the persister reported.
        #[source]
        source: E,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Not run yet.
    Unknown,
    /// Ran successfully; its successors may still be explored.
    Succeeded,
    /// Ran and failed, or could not run.
    Failed(String),
    /// Ran successfully, but no path from it reaches a sink successfully.
    DeadEnd,
}

fn now() -> Time {
    Time(jiff::Timestamp::now())
}

/// The node `diagnosis` is about: `spec.nodeName`, else the node it was placed on
/// (`status.nodeName`: its `podReference`'s pod's node, resolved once at placement, as
/// KubeDiag writes the pod's node into the Diagnosis' `nodeName`); `None` for one that
/// names neither.
fn subject_node(diagnosis: &Diagnosis) -> Option<String> {
    diagnosis.spec.node_name.clone().or_else(|| {
        diagnosis
            .status
            .as_ref()
            .and_then(|status| status.node_name.clone())
    })
}

/// The input of one node: parameters, overlaid by results, plus built-ins.
fn node_input(diagnosis: &Diagnosis) -> BTreeMap<String, String> {
    let status = diagnosis.status.as_ref();
    let mut input = diagnosis.spec.parameters.clone();
    if let Some(status) = status {
        input.extend(status.operation_results.clone());
    }
    let meta = &diagnosis.metadata;
    let pod = diagnosis.spec.pod_reference.as_ref();
    let builtins = [
        ("diagnosis.name", meta.name.clone()),
        ("diagnosis.namespace", meta.namespace.clone()),
        ("diagnosis.uid", meta.uid.clone()),
        ("node", subject_node(diagnosis)),
        ("pod.namespace", pod.map(|p| p.namespace.clone())),
        ("pod.name", pod.map(|p| p.name.clone())),
        ("container", pod.and_then(|p| p.container.clone())),
    ];
    for (key, value) in builtins {
        if let Some(value) = value {
            input.insert(key.to_owned(), value);
        }
    }
    input
}

/// Runs (or resumes) `diagnosis` over `graph`, with `steps` giving the Step of every
/// Operation name. Returns the final phase; the status holds the details.
///
/// A Diagnosis whose phase is already `Succeeded` or `Failed` is left as it is.
pub async fn execute<P: Progress + ?Sized>(
    diagnosis: &mut Diagnosis,
    graph: &Graph,
    steps: &BTreeMap<String, Step>,
    progress: &mut P,
) -> Result<DiagnosisPhase, PipelineError<P::Error>> {
    let status = diagnosis
        .status
        .get_or_insert_with(DiagnosisStatus::default);
    if let Some(phase @ (DiagnosisPhase::Succeeded | DiagnosisPhase::Failed)) = status.phase {
        return Ok(phase);
    }
    if status.start_time.is_none() {
        status.start_time = Some(now());
    }
    status.phase = Some(DiagnosisPhase::Running);

    // Every node's Operation must have a Step before anything runs: failing half-way
    // on a missing Operation would leave a partial, misleading record.
    let missing: Vec<String> = (0..graph.len())
        .filter_map(|id| graph.operation(id))
        .filter(|op| !steps.contains_key(*op))
        .map(str::to_owned)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if !missing.is_empty() {
        let message = format!("Operations not found: {}", missing.join(", "));
        finish(status, DiagnosisPhase::Failed, "OperationNotFound", message);
        persist(progress, diagnosis).await?;
        return Ok(DiagnosisPhase::Failed);
    }

    // One trace per run of a Diagnosis, a `diagnosis.step` span per node it runs.
    let span = tracing::trace_span!(target: operon_runner::trace::TARGET, parent: None,
        "diagnosis",
        namespace = diagnosis.metadata.namespace.as_deref().unwrap_or(""),
        name = diagnosis.metadata.name.as_deref().unwrap_or(""),
        phase = tracing::field::Empty,
    );
    let mut search = Search::new(graph, status);
    let outcome = search
        .run(diagnosis, steps, progress)
        .instrument(span.clone())
        .await?;
    span.record(
        "phase",
        if outcome.is_some() {
            "Succeeded"
        } else {
            "Failed"
        },
    );
    let status = diagnosis
        .status
        .get_or_insert_with(DiagnosisStatus::default);
    match outcome {
        Some(path) => {
            status.succeeded_path = path
                .iter()
                .map(|&id| PathNode {
                    id: id as i64,
                    operation: graph.operation(id).unwrap_or_default().to_owned(),
                })
                .collect();
            let ids: Vec<String> = path.iter().map(usize::to_string).collect();
            finish(
                status,
                DiagnosisPhase::Succeeded,
                "PathSucceeded",
                format!("path {} succeeded", ids.join(" → ")),
            );
        }
        None => {
            let message = if graph.successors(Graph::START).is_empty() {
                "the OperationSet has no paths".to_owned()
            } else {
                "no path succeeded".to_owned()
            };
            finish(status, DiagnosisPhase::Failed, "NoPathSucceeded", message);
        }
    }
    let phase = status.phase.unwrap_or(DiagnosisPhase::Failed);
    persist(progress, diagnosis).await?;
    Ok(phase)
}

async fn persist<P: Progress + ?Sized>(
    progress: &mut P,
    diagnosis: &Diagnosis,
) -> Result<(), PipelineError<P::Error>> {
    progress
        .checkpoint(diagnosis)
        .await
        .map_err(|source| PipelineError::Checkpoint {
            diagnosis: diagnosis.object_ref(),
            source,
        })
}

fn finish(status: &mut DiagnosisStatus, phase: DiagnosisPhase, reason: &str, message: String) {
    status.current_node = None;
    status.phase = Some(phase);
    status.completion_time = Some(now());
    set_condition(
        &mut status.conditions,
        Condition::new(COMPLETE, ConditionStatus::True, reason, message),
    );
}

/// The search state, rebuilt from the status' node records on resume.
struct Search<'g> {
    graph: &'g Graph,
    state: Vec<State>,
    /// Kept alongside `state` so each checkpoint is cheap to write.
    dead_ends: Vec<i64>,
}

impl<'g> Search<'g> {
    fn new(graph: &'g Graph, status: &DiagnosisStatus) -> Self {
        let mut state = vec![State::Unknown; graph.len()];
        state[Graph::START] = State::Succeeded;
        for record in &status.nodes {
            if let Some(id) = graph.index(record.id) {
                state[id] = match record.phase {
                    NodePhase::Succeeded => State::Succeeded,
                    NodePhase::Failed => State::Failed(record.error.clone().unwrap_or_default()),
                };
            }
        }
        Self {
            graph,
            state,
            dead_ends: Vec::new(),
        }
    }

    /// Depth-first over the paths; returns the succeeded path (start excluded).
    async fn run<P: Progress + ?Sized>(
        &mut self,
        diagnosis: &mut Diagnosis,
        steps: &BTreeMap<String, Step>,
        progress: &mut P,
    ) -> Result<Option<Vec<usize>>, PipelineError<P::Error>> {
        let graph = self.graph;
        // (node, index of the next successor to try)
        let mut stack: Vec<(usize, usize)> = vec![(Graph::START, 0)];
        while let Some(&(node, next)) = stack.last() {
            if node != Graph::START && graph.is_sink(node) {
                return Ok(Some(stack[1..].iter().map(|&(n, _)| n).collect()));
            }
            let successors = graph.successors(node);
            let Some(&child) = successors.get(next) else {
                if node != Graph::START {
                    self.state[node] = State::DeadEnd;
                    self.dead_ends.push(node as i64);
                }
                stack.pop();
                continue;
            };
            if let Some(top) = stack.last_mut() {
                top.1 += 1;
            }
            if self.state[child] == State::Unknown {
                let path: Vec<usize> = stack[1..].iter().map(|&(n, _)| n).chain([child]).collect();
                self.run_node(child, &path, diagnosis, steps, progress)
                    .await?;
            }
            let path_to = |stack: &[(usize, usize)]| -> Vec<i64> {
                stack[1..]
                    .iter()
                    .map(|&(n, _)| n as i64)
                    .chain([child as i64])
                    .collect()
            };
            match &self.state[child] {
                State::Succeeded => stack.push((child, 0)),
                State::Failed(reason) => {
                    let reason = format!("node {child} failed: {reason}");
                    record_failed_path(diagnosis, path_to(&stack), child, reason);
                }
                State::DeadEnd => {
                    let reason = format!("no path from node {child} succeeds");
                    record_failed_path(diagnosis, path_to(&stack), child, reason);
                }
                State::Unknown => unreachable!("run_node always decides the node's state"),
            }
        }
        Ok(None)
    }

    async fn run_node<P: Progress + ?Sized>(
        &mut self,
        id: usize,
        path: &[usize],
        diagnosis: &mut Diagnosis,
        steps: &BTreeMap<String, Step>,
        progress: &mut P,
    ) -> Result<(), PipelineError<P::Error>> {
        let graph = self.graph;
        let operation = graph.operation(id).unwrap_or_default().to_owned();
        diagnosis
            .status
            .get_or_insert_with(DiagnosisStatus::default)
            .current_node = Some(PathNode {
            id: id as i64,
            operation: operation.clone(),
        });
        persist(progress, diagnosis).await?;
        progress.node_started(id, &operation);
        let span = tracing::trace_span!(target: operon_runner::trace::TARGET,
            "diagnosis.step",
            node = id,
            operation = operation.as_str(),
            dry_run = diagnosis.spec.dry_run,
            outcome = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
            error = tracing::field::Empty,
        );
        let started_at = now();
        let started = Instant::now();
        let unmet = graph
            .dependences(id)
            .iter()
            .copied()
            .find(|&dep| !matches!(self.state[dep], State::Succeeded | State::DeadEnd));
        let mut dry_run = None;
        let (outcome, mut results) = if let Some(dep) = unmet {
            let message = format!(
                "dependence node {dep} ({}) has not succeeded earlier in this Diagnosis",
                graph.operation(dep).unwrap_or("start")
            );
            (Err(message), BTreeMap::new())
        } else if diagnosis.spec.dry_run {
            let step = &steps[&operation];
            let request = self.request(diagnosis, id, step);
            match step.runner.dry_run(&request).instrument(span.clone()).await {
                Ok(report) => {
                    let mut action = report.action;
                    if let Some(root) = &step.storage {
                        action.push_str(&format!(
                            "; results would be stored under {}",
                            root.display()
                        ));
                    }
                    dry_run = Some(DryRunRecord {
                        action,
                        detail: report.detail.map(|d| bounded_detail(&d)),
                    });
                    let size = report.output.size();
                    (Ok(size), report.output.results)
                }
                Err(e) => (Err(e.message), e.results),
            }
        } else {
            let step = &steps[&operation];
            let request = self.request(diagnosis, id, step);
            match step.runner.run(&request).instrument(span.clone()).await {
                Ok(out) => {
                    let stored = match &step.storage {
                        Some(root) => store_results(root, diagnosis, id, &out.results)
                            .map_err(|e| e.to_string()),
                        None => Ok(()),
                    };
                    let size = out.size();
                    (stored.map(|()| size), out.results)
                }
                Err(e) => (Err(e.message), e.results),
            }
        };
        match &outcome {
            Ok(_) => {
                span.record("outcome", "Succeeded");
            }
            Err(e) => {
                span.record("outcome", "Failed");
                span.record("otel.status_code", "ERROR");
                span.record("error", e.as_str());
            }
        }
        drop(span);
        let record = NodeRecord {
            id: id as i64,
            operation,
            phase: if outcome.is_ok() {
                NodePhase::Succeeded
            } else {
                NodePhase::Failed
            },
            start_time: Some(started_at),
            duration_millis: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            error: outcome.as_ref().err().cloned(),
            output_size: *outcome.as_ref().unwrap_or(&0),
            result_keys: results.keys().cloned().collect(),
            dry_run,
        };
        self.state[id] = match outcome {
            Ok(_) => State::Succeeded,
            Err(e) => State::Failed(e),
        };
        progress.node_finished(&record);
        let status = diagnosis
            .status
            .get_or_insert_with(DiagnosisStatus::default);
        status.operation_results.append(&mut results);
        status.nodes.push(record);
        status.checkpoint = Some(Checkpoint {
            path: path.iter().map(|&n| n as i64).collect(),
            completed_nodes: status.nodes.len() as u64,
            dead_ends: self.dead_ends.clone(),
        });
        Ok(())
    }

    fn request(&self, diagnosis: &Diagnosis, id: usize, step: &Step) -> RunRequest {
        let meta = &diagnosis.metadata;
        let name = meta.name.clone().unwrap_or_default();
        RunRequest {
            name: format!(
                "{}/{}/node-{id}",
                meta.namespace.as_deref().unwrap_or("default"),
                name
            ),
            input: node_input(diagnosis),
            results: diagnosis
                .status
                .as_ref()
                .map(|s| s.operation_results.clone())
                .unwrap_or_default(),
            node: subject_node(diagnosis),
            namespace: meta.namespace.clone(),
            owner: Some((
                "Diagnosis".to_owned(),
                name,
                meta.uid.clone().unwrap_or_default(),
            )),
            dry_run: diagnosis.spec.dry_run,
            timeout: step.timeout,
        }
    }
}

/// `detail` as pretty JSON, cut at [`MAX_DRY_RUN_DETAIL`] bytes on a character
/// boundary.
fn bounded_detail(detail: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(detail).unwrap_or_default();
    if text.len() > MAX_DRY_RUN_DETAIL {
        let mut cut = MAX_DRY_RUN_DETAIL;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n… (cut)");
    }
    text
}

fn record_failed_path(diagnosis: &mut Diagnosis, nodes: Vec<i64>, failed: usize, reason: String) {
    let status = diagnosis
        .status
        .get_or_insert_with(DiagnosisStatus::default);
    if status.failed_paths.len() < MAX_FAILED_PATHS {
        status.failed_paths.push(FailedPath {
            nodes,
            failed_node: failed as i64,
            reason,
        });
    } else {
        status.failed_paths_omitted += 1;
    }
}

#[cfg(test)]
mod tests;
