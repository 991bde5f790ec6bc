//! Pipeline semantics with scripted runners: order, memoization, precedence,
//! dependences, resume, linearity.

use super::*;
use futures::future::BoxFuture;
use operon_data::api::{DiagnosisSpec, Node, OperationSet, OperationSetSpec};
use operon_runner::{RunError, RunOutput};
use std::sync::Mutex;

/// A runner whose outcome per operation is fixed, recording every call and its input.
#[derive(Default)]
struct Scripted {
    fail: Vec<&'static str>,
    results: BTreeMap<&'static str, Vec<(&'static str, &'static str)>>,
    calls: Mutex<Vec<(String, BTreeMap<String, String>)>>,
}

struct Named(Arc<Scripted>, String);

impl Runner for Named {
    fn run<'a>(&'a self, request: &'a RunRequest) -> BoxFuture<'a, Result<RunOutput, RunError>> {
        Box::pin(async move {
            let s = &self.0;
            s.calls
                .lock()
                .unwrap()
                .push((self.1.clone(), request.input.clone()));
            if s.fail.contains(&self.1.as_str()) {
                return Err(RunError::new(format!("{} failed", self.1)));
            }
            let results = s
                .results
                .get(self.1.as_str())
                .map(|r| {
                    r.iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect()
                })
                .unwrap_or_else(|| [(format!("{}.ran", self.1), "yes".to_owned())].into());
            Ok(RunOutput {
                results,
                output: String::new(),
            })
        })
    }
}

impl Scripted {
    fn calls(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .map(|(n, _)| n.clone())
            .collect()
    }
}

/// A graph from `(to, dependences)` per node; node i > 0 runs operation `op<i>`.
fn graph(nodes: &[(&[i64], &[i64])]) -> Graph {
    let set = OperationSet::new(
        "set",
        OperationSetSpec {
            adjacency_list: nodes
                .iter()
                .enumerate()
                .map(|(i, (to, deps))| Node {
                    id: i as i64,
                    to: to.to_vec(),
                    operation: (i > 0).then(|| format!("op{i}")),
                    dependences: deps.to_vec(),
                })
                .collect(),
        },
    );
    crate::graph::validate(&set, |_| true).expect("valid test graph")
}

fn steps(graph: &Graph, runner: &Arc<Scripted>) -> BTreeMap<String, Step> {
    (1..graph.len())
        .map(|i| {
            let name = format!("op{i}");
            let step = Step {
                runner: Arc::new(Named(runner.clone(), name.clone())),
                timeout: Duration::from_secs(5),
                storage: None,
            };
            (name, step)
        })
        .collect()
}

fn diagnosis(params: &[(&str, &str)]) -> Diagnosis {
    let mut d = Diagnosis::new(
        "diag",
        DiagnosisSpec {
            operation_set: "set".to_owned(),
            node_name: Some("node-a".to_owned()),
            pod_reference: None,
            parameters: params
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            service_account_name: None,
            dry_run: false,
            ..Default::default()
        },
    );
    d.metadata.namespace = Some("ops".to_owned());
    d.metadata.uid = Some("uid-1".to_owned());
    d
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

fn run(d: &mut Diagnosis, g: &Graph, runner: &Arc<Scripted>) -> DiagnosisPhase {
    block_on(execute(d, g, &steps(g, runner), &mut Quiet)).unwrap()
}

fn succeeded_ids(d: &Diagnosis) -> Vec<i64> {
    d.status
        .as_ref()
        .unwrap()
        .succeeded_path
        .iter()
        .map(|p| p.id)
        .collect()
}

#[test]
fn paths_run_depth_first_in_listed_order_and_the_first_success_wins() {
    // 0 → 1 → 3, 0 → 2; node 3 fails, so path [1, 3] fails and [2] succeeds.
    let g = graph(&[(&[1, 2], &[]), (&[3], &[]), (&[], &[]), (&[], &[])]);
    let runner = Arc::new(Scripted {
        fail: vec!["op3"],
        ..Default::default()
    });
    let mut d = diagnosis(&[]);
    assert_eq!(run(&mut d, &g, &runner), DiagnosisPhase::Succeeded);
    assert_eq!(runner.calls(), ["op1", "op3", "op2"]);
    assert_eq!(succeeded_ids(&d), [2]);
    let status = d.status.as_ref().unwrap();
    assert_eq!(status.failed_paths.len(), 1);
    assert_eq!(status.failed_paths[0].nodes, [1, 3]);
    assert_eq!(status.failed_paths[0].failed_node, 3);
    assert_eq!(status.nodes.len(), 3);
    assert_eq!(status.nodes[1].phase, NodePhase::Failed);
    assert_eq!(status.nodes[1].error.as_deref(), Some("op3 failed"));
    let complete = status
        .conditions
        .iter()
        .find(|c| c.type_ == COMPLETE)
        .unwrap();
    assert_eq!(complete.reason, "PathSucceeded");
}

#[test]
fn a_node_shared_by_two_paths_runs_once() {
    // 0 → {1, 2} → 3 → 4, and 4 fails: both paths fail, 3 and 4 run once.
    let g = graph(&[
        (&[1, 2], &[]),
        (&[3], &[]),
        (&[3], &[]),
        (&[4], &[]),
        (&[], &[]),
    ]);
    let runner = Arc::new(Scripted {
        fail: vec!["op4"],
        ..Default::default()
    });
    let mut d = diagnosis(&[]);
    assert_eq!(run(&mut d, &g, &runner), DiagnosisPhase::Failed);
    assert_eq!(runner.calls(), ["op1", "op3", "op4", "op2"]);
    let status = d.status.as_ref().unwrap();
    assert_eq!(status.failed_paths[0].nodes, [1, 3, 4]);
    assert_eq!(status.failed_paths[1].nodes, [2, 3]);
    assert!(
        status.failed_paths[1]
            .reason
            .contains("no path from node 3")
    );
    assert_eq!(status.checkpoint.as_ref().unwrap().dead_ends, [3, 1]);
}

#[test]
fn results_overlay_parameters_and_builtins_come_last() {
    let g = graph(&[(&[1], &[]), (&[2], &[]), (&[3], &[]), (&[], &[])]);
    let runner = Arc::new(Scripted {
        results: [
            ("op1", vec![("level", "from-op1"), ("node", "spoofed")]),
            ("op2", vec![("level", "from-op2")]),
        ]
        .into(),
        ..Default::default()
    });
    let mut d = diagnosis(&[("level", "param"), ("keep", "param")]);
    assert_eq!(run(&mut d, &g, &runner), DiagnosisPhase::Succeeded);
    let calls = runner.calls.lock().unwrap();
    let first = &calls[0].1;
    assert_eq!(first["level"], "param");
    assert_eq!(first["diagnosis.name"], "diag");
    assert_eq!(first["diagnosis.namespace"], "ops");
    assert_eq!(first["diagnosis.uid"], "uid-1");
    assert_eq!(first["node"], "node-a");
    assert_eq!(calls[1].1["level"], "from-op1");
    assert_eq!(calls[1].1["node"], "node-a", "built-ins win over results");
    assert_eq!(calls[2].1["level"], "from-op2", "later results win");
    assert_eq!(calls[2].1["keep"], "param");
    let results = &d.status.as_ref().unwrap().operation_results;
    assert_eq!(results["level"], "from-op2");
}

#[test]
fn dependences_must_have_succeeded_earlier() {
    // 0 → 1 → 2 (2 depends on 3, which only runs on a later path), 0 → 3.
    let g = graph(&[(&[1, 3], &[]), (&[2], &[]), (&[], &[3]), (&[], &[])]);
    let runner = Arc::new(Scripted::default());
    let mut d = diagnosis(&[]);
    assert_eq!(run(&mut d, &g, &runner), DiagnosisPhase::Succeeded);
    assert_eq!(runner.calls(), ["op1", "op3"], "node 2 never ran");
    let status = d.status.as_ref().unwrap();
    let record = status.nodes.iter().find(|r| r.id == 2).unwrap();
    assert_eq!(record.phase, NodePhase::Failed);
    assert!(
        record
            .error
            .as_deref()
            .unwrap()
            .contains("dependence node 3 (op3)")
    );
    assert_eq!(succeeded_ids(&d), [3]);
}

#[test]
fn met_dependences_let_the_node_run() {
    let g = graph(&[(&[1], &[]), (&[2], &[]), (&[], &[1])]);
    let runner = Arc::new(Scripted::default());
    let mut d = diagnosis(&[]);
    assert_eq!(run(&mut d, &g, &runner), DiagnosisPhase::Succeeded);
    assert_eq!(succeeded_ids(&d), [1, 2]);
}

/// Persists the first `n` checkpoints, then fails as a crashed engine would.
struct CrashAfter(usize, Vec<Diagnosis>);

impl Progress for CrashAfter {
    type Error = CheckpointError;

    fn checkpoint<'a>(&'a mut self, d: &'a Diagnosis) -> CheckpointFuture<'a> {
        let saved = if self.1.len() == self.0 {
            Err(CheckpointError::Other("disk full".to_owned()))
        } else {
            self.1.push(d.clone());
            Ok(())
        };
        Box::pin(std::future::ready(saved))
    }
}

#[test]
fn a_restarted_run_resumes_without_rerunning_finished_nodes() {
    let g = graph(&[
        (&[1, 2], &[]),
        (&[3], &[]),
        (&[3], &[]),
        (&[4], &[]),
        (&[], &[]),
    ]);
    let runner = Arc::new(Scripted {
        fail: vec!["op4"],
        ..Default::default()
    });
    let mut d = diagnosis(&[]);
    // Persisted: before op1, before op3 (op1 done), before op4 (op3 done); the write
    // before op2 (op4 done) fails.
    let mut crash = CrashAfter(3, Vec::new());
    let err = block_on(execute(&mut d, &g, &steps(&g, &runner), &mut crash)).unwrap_err();
    assert!(matches!(err, PipelineError::Checkpoint { .. }));
    assert_eq!(runner.calls(), ["op1", "op3", "op4"]);
    let current: Vec<_> = crash
        .1
        .iter()
        .map(|d| d.status.as_ref().unwrap().current_node.as_ref().unwrap().id)
        .collect();
    assert_eq!(current, [1, 3, 4], "each write names the node about to run");

    // The engine restarts from the last persisted checkpoint (after op3).
    let mut resumed = crash.1.pop().unwrap();
    assert_eq!(resumed.status.as_ref().unwrap().nodes.len(), 2);
    let phase = block_on(execute(&mut resumed, &g, &steps(&g, &runner), &mut Quiet)).unwrap();
    assert_eq!(phase, DiagnosisPhase::Failed);
    // op4 ran again (its result was never persisted), op1 and op3 did not.
    assert_eq!(runner.calls(), ["op1", "op3", "op4", "op4", "op2"]);
    assert_eq!(resumed.status.as_ref().unwrap().nodes.len(), 4);

    // A finished Diagnosis is left alone.
    let phase = block_on(execute(&mut resumed, &g, &steps(&g, &runner), &mut Quiet)).unwrap();
    assert_eq!(phase, DiagnosisPhase::Failed);
    assert_eq!(runner.calls().len(), 5);
}

#[test]
fn a_missing_operation_fails_before_anything_runs() {
    let g = graph(&[(&[1], &[]), (&[2], &[]), (&[], &[])]);
    let runner = Arc::new(Scripted::default());
    let mut all = steps(&g, &runner);
    all.remove("op2");
    let mut d = diagnosis(&[]);
    let phase = block_on(execute(&mut d, &g, &all, &mut Quiet)).unwrap();
    assert_eq!(phase, DiagnosisPhase::Failed);
    assert!(runner.calls().is_empty());
    let status = d.status.as_ref().unwrap();
    assert_eq!(status.conditions[0].reason, "OperationNotFound");
    assert!(status.conditions[0].message.contains("op2"));
}

/// `n` diamonds in series: 2^n source-to-sink paths, then a failing tail node.
pub(crate) fn ladder(n: usize) -> Graph {
    // Node 0 is the start; diamond i has arms 1+3i and 2+3i joining at 3+3i, whose
    // successors are the next diamond's arms, or the tail node after the last one.
    let mut nodes: Vec<Vec<i64>> = vec![vec![1, 2]];
    for i in 0..n as i64 {
        let join = 3 + 3 * i;
        nodes.push(vec![join]);
        nodes.push(vec![join]);
        nodes.push(if i + 1 < n as i64 {
            vec![join + 1, join + 2]
        } else {
            vec![join + 1]
        });
    }
    nodes.push(vec![]);
    let refs: Vec<(&[i64], &[i64])> = nodes.iter().map(|t| (t.as_slice(), &[][..])).collect();
    graph(&refs)
}

#[test]
fn a_ladder_with_2_pow_40_failing_paths_runs_each_node_once() {
    let g = ladder(40);
    let tail = format!("op{}", g.len() - 1);
    let runner = Arc::new(Scripted {
        fail: vec![Box::leak(tail.into_boxed_str())],
        ..Default::default()
    });
    let mut d = diagnosis(&[]);
    assert_eq!(run(&mut d, &g, &runner), DiagnosisPhase::Failed);
    assert_eq!(
        runner.calls().len(),
        g.len() - 1,
        "every node ran exactly once"
    );
    let status = d.status.as_ref().unwrap();
    assert!(status.failed_paths.len() <= MAX_FAILED_PATHS);
}

/// A runner that reaches outside its sandbox: a dry run must ask it what it would do
/// and never run it.
#[derive(Default)]
struct Remote {
    runs: Mutex<usize>,
}

impl Runner for Remote {
    fn run<'a>(&'a self, _: &'a RunRequest) -> BoxFuture<'a, Result<RunOutput, RunError>> {
        *self.runs.lock().unwrap() += 1;
        Box::pin(std::future::ready(Ok(RunOutput::default())))
    }

    fn dry_run<'a>(
        &'a self,
        request: &'a RunRequest,
    ) -> BoxFuture<'a, Result<operon_runner::DryRun, RunError>> {
        assert!(request.dry_run, "the request says it is a dry run");
        Box::pin(std::future::ready(Ok(operon_runner::DryRun {
            action: "would create Job ops/x".to_owned(),
            detail: Some(serde_json::json!({"kind": "Job", "pad": "é".repeat(20_000)})),
            output: RunOutput::default(),
        })))
    }
}

#[test]
fn a_dry_run_asks_each_runner_what_it_would_do_and_stores_nothing() {
    let g = graph(&[(&[1], &[]), (&[2], &[]), (&[], &[])]);
    let scripted = Arc::new(Scripted::default());
    let remote = Arc::new(Remote::default());
    let root = tempfile::tempdir().unwrap();
    let stored = root.path().join("results");
    let mut steps = steps(&g, &scripted);
    steps.insert(
        "op2".to_owned(),
        Step {
            runner: remote.clone(),
            timeout: Duration::from_secs(5),
            storage: Some(stored.clone()),
        },
    );
    let mut d = diagnosis(&[]);
    d.spec.dry_run = true;
    let phase = block_on(execute(&mut d, &g, &steps, &mut Quiet)).unwrap();
    assert_eq!(phase, DiagnosisPhase::Succeeded);
    let status = d.status.unwrap();
    // The sandboxed step ran (the default), and its results fed the next one.
    assert_eq!(scripted.calls(), ["op1"]);
    assert_eq!(status.operation_results["op1.ran"], "yes");
    let first = status.nodes[0].dry_run.as_ref().unwrap();
    assert_eq!(first.action, "ran (the step has no side effects)");
    assert_eq!(*remote.runs.lock().unwrap(), 0, "the remote step never ran");
    let second = status.nodes[1].dry_run.as_ref().unwrap();
    assert_eq!(
        second.action,
        format!(
            "would create Job ops/x; results would be stored under {}",
            stored.display()
        )
    );
    let detail = second.detail.as_deref().unwrap();
    assert!(detail.len() <= MAX_DRY_RUN_DETAIL + "\n… (cut)".len());
    assert!(detail.ends_with("… (cut)"));
    assert!(!stored.exists(), "nothing is written on the host");
}

/// A runner recording the node each request is about and the `node` of its input.
#[derive(Default)]
struct NodeSeen {
    seen: Mutex<Vec<(Option<String>, Option<String>)>>,
}

impl Runner for NodeSeen {
    fn run<'a>(&'a self, request: &'a RunRequest) -> BoxFuture<'a, Result<RunOutput, RunError>> {
        let input = request.input.get("node").cloned();
        self.seen
            .lock()
            .unwrap()
            .push((request.node.clone(), input));
        Box::pin(std::future::ready(Ok(RunOutput::default())))
    }
}

/// A Diagnosis of `pod` in `default`, placed on `placed` when given (what the
/// controller writes in `status.nodeName` when it places it).
fn pod_diagnosis(placed: Option<&str>) -> Diagnosis {
    let mut d = diagnosis(&[]);
    d.spec.node_name = None;
    d.spec.pod_reference = Some(operon_data::api::PodReference {
        namespace: "default".to_owned(),
        name: "web-0".to_owned(),
        container: None,
    });
    d.status = placed.map(|node| DiagnosisStatus {
        node_name: Some(node.to_owned()),
        ..DiagnosisStatus::default()
    });
    d
}

fn nodes_seen(d: &mut Diagnosis) -> Vec<(Option<String>, Option<String>)> {
    let g = graph(&[(&[1], &[]), (&[], &[])]);
    let runner = Arc::new(NodeSeen::default());
    let step = Step {
        runner: runner.clone(),
        timeout: Duration::from_secs(5),
        storage: None,
    };
    let steps = [("op1".to_owned(), step)].into();
    let phase = block_on(execute(d, &g, &steps, &mut Quiet)).unwrap();
    assert_eq!(phase, DiagnosisPhase::Succeeded);
    runner.seen.lock().unwrap().clone()
}

#[test]
fn a_pod_referenced_diagnosis_runs_about_the_node_its_pod_was_placed_on() {
    let on = |node: &str| (Some(node.to_owned()), Some(node.to_owned()));
    // KubeDiag fills the Diagnosis' nodeName from the pod: the run and the `node`
    // built-in name the node the Diagnosis was placed on.
    assert_eq!(
        nodes_seen(&mut pod_diagnosis(Some("node-b"))),
        [on("node-b")]
    );
    // spec.nodeName is the node (the placement, then, is the same node).
    let mut named = diagnosis(&[]);
    assert_eq!(nodes_seen(&mut named), [on("node-a")]);
    // Not placed (`operon run`, with no cluster to find the pod in): no node.
    assert_eq!(nodes_seen(&mut pod_diagnosis(None)), [(None, None)]);
    // A Diagnosis naming neither runs in the controller, about no node.
    let mut neither = diagnosis(&[]);
    neither.spec.node_name = None;
    assert_eq!(nodes_seen(&mut neither), [(None, None)]);
}

#[test]
fn an_offloaded_step_of_a_pod_referenced_diagnosis_is_pinned_to_the_pods_node() {
    let g = graph(&[(&[1], &[]), (&[], &[])]);
    let processor: operon_data::api::JobProcessor = serde_json::from_value(serde_json::json!({
        "image": "registry.local/fsck:1.2", "onDiagnosisNode": true,
    }))
    .unwrap();
    let runner = operon_runner::job::JobRunner::new(
        None,
        "op1",
        processor,
        operon_runner::context::Platform::default(),
    );
    let step = Step {
        runner: Arc::new(runner),
        timeout: Duration::from_secs(60),
        storage: None,
    };
    let steps: BTreeMap<String, Step> = [("op1".to_owned(), step)].into();
    let mut d = pod_diagnosis(Some("node-b"));
    d.spec.dry_run = true;
    let phase = block_on(execute(&mut d, &g, &steps, &mut Quiet)).unwrap();
    assert_eq!(phase, DiagnosisPhase::Succeeded, "{:?}", d.status);
    let status = d.status.unwrap();
    let record = status.nodes[0].dry_run.as_ref().unwrap();
    let detail: serde_json::Value =
        serde_json::from_str(record.detail.as_deref().unwrap()).unwrap();
    let pod = &detail["job"]["spec"]["template"]["spec"];
    assert_eq!(
        pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"],
        serde_json::json!([{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-b"]}]}]),
        "{detail}"
    );
    // Unplaced, the same step fails naming what is missing, before any Job exists.
    let mut unplaced = pod_diagnosis(None);
    unplaced.spec.dry_run = true;
    let phase = block_on(execute(&mut unplaced, &g, &steps, &mut Quiet)).unwrap();
    assert_eq!(phase, DiagnosisPhase::Failed);
    let status = unplaced.status.unwrap();
    assert!(
        status.failed_paths[0]
            .reason
            .contains("job.onDiagnosisNode is set but the Diagnosis names no node"),
        "{:?}",
        status.failed_paths
    );
}
