//! Pipeline engine costs, measured in one run:
//!
//! - the engine's overhead per node, with an in-process no-op runner and with a trivial
//!   wasm operation per node (a 200-node chain);
//! - "ladder" OperationSets of N diamonds in series (2^N source-to-sink paths), where
//!   the first path succeeds, where only the last path succeeds (every `a` arm fails),
//!   and where every path ends in a failing node. The memoized search must stay linear
//!   in nodes plus edges: the node count run and the time grow with N, not 2^N.
//!
//! Run with `cargo bench -p operon-tests --bench pipeline`.

use futures::future::BoxFuture;
use operon::api::{Diagnosis, DiagnosisPhase, DiagnosisSpec, Node, OperationSet, OperationSetSpec};
use operon::graph::{self, Graph};
use operon::pipeline::{self, Quiet, Step};
use operon::runner::wasm::WasmRunner;
use operon::runner::{RunError, RunOutput, RunRequest, Runner};
use operon::sandbox::{CallLimits, Sandbox, SandboxConfig};
use operon_tests::bench::median;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

operon::binary_allocator!();

/// Succeeds unless its operation is in `fail`; counts calls.
struct NoOp {
    name: String,
    fail: bool,
    calls: Arc<AtomicUsize>,
}

impl Runner for NoOp {
    fn run<'a>(&'a self, _: &'a RunRequest) -> BoxFuture<'a, Result<RunOutput, RunError>> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::Relaxed);
            if self.fail {
                Err(RunError::new(format!("{} fails on purpose", self.name)))
            } else {
                Ok(RunOutput::default())
            }
        })
    }
}

fn set(adjacency: Vec<Vec<i64>>) -> OperationSet {
    OperationSet::new(
        "bench",
        OperationSetSpec {
            adjacency_list: adjacency
                .into_iter()
                .enumerate()
                .map(|(i, to)| Node {
                    id: i as i64,
                    to,
                    operation: (i > 0).then(|| format!("op{i}")),
                    dependences: vec![],
                })
                .collect(),
        },
    )
}

fn chain(n: usize) -> Graph {
    let adjacency = (0..=n)
        .map(|i| if i < n { vec![i as i64 + 1] } else { vec![] })
        .collect();
    graph::validate(&set(adjacency), |_| true).unwrap()
}

/// Node 0 is the start; diamond i has arms 1+3i and 2+3i joining at 3+3i; a tail node
/// follows the last join.
fn ladder(n: usize) -> (Graph, Vec<usize>, usize) {
    let mut adjacency: Vec<Vec<i64>> = vec![vec![1, 2]];
    let mut a_arms = Vec::new();
    for i in 0..n as i64 {
        let join = 3 + 3 * i;
        a_arms.push(1 + 3 * i as usize);
        adjacency.push(vec![join]);
        adjacency.push(vec![join]);
        adjacency.push(if i + 1 < n as i64 {
            vec![join + 1, join + 2]
        } else {
            vec![join + 1]
        });
    }
    adjacency.push(vec![]);
    let tail = adjacency.len() - 1;
    (
        graph::validate(&set(adjacency), |_| true).unwrap(),
        a_arms,
        tail,
    )
}

fn diagnosis() -> Diagnosis {
    let mut d = Diagnosis::new(
        "bench",
        DiagnosisSpec {
            operation_set: "bench".to_owned(),
            node_name: Some("node-a".to_owned()),
            pod_reference: None,
            parameters: BTreeMap::from([("threshold".to_owned(), "80".to_owned())]),
            service_account_name: None,
            dry_run: false,
            ..Default::default()
        },
    );
    d.metadata.namespace = Some("default".to_owned());
    d
}

fn noop_steps(
    g: &Graph,
    failing: &BTreeSet<usize>,
    calls: &Arc<AtomicUsize>,
) -> BTreeMap<String, Step> {
    (1..g.len())
        .map(|i| {
            let name = format!("op{i}");
            let runner = NoOp {
                name: name.clone(),
                fail: failing.contains(&i),
                calls: calls.clone(),
            };
            (
                name,
                Step {
                    runner: Arc::new(runner),
                    timeout: Duration::from_secs(5),
                    storage: None,
                },
            )
        })
        .collect()
}

/// Runs one Diagnosis; returns (phase, nodes run, elapsed).
fn run(
    rt: &tokio::runtime::Runtime,
    g: &Graph,
    steps: &BTreeMap<String, Step>,
    calls: &AtomicUsize,
) -> (DiagnosisPhase, usize, Duration) {
    calls.store(0, Ordering::Relaxed);
    let mut d = diagnosis();
    let started = Instant::now();
    let phase = rt
        .block_on(pipeline::execute(&mut d, g, steps, &mut Quiet))
        .unwrap();
    (phase, calls.load(Ordering::Relaxed), started.elapsed())
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));

    // Overhead per node.
    let n = 200;
    let g = chain(n);
    let steps = noop_steps(&g, &BTreeSet::new(), &calls);
    let mut noops: Vec<Duration> = (0..21).map(|_| run(&rt, &g, &steps, &calls).2).collect();
    let noop = median(&mut noops) / n as u32;

    let sandbox = Sandbox::new(SandboxConfig::default()).unwrap();
    let module = sandbox
        .load_operation_file(operon_tests::TRIVIAL.as_ref())
        .unwrap();
    let wasm_steps: BTreeMap<String, Step> = (1..g.len())
        .map(|i| {
            let runner = WasmRunner::new(
                sandbox.clone(),
                module.clone(),
                BTreeMap::new(),
                CallLimits::default(),
            );
            (
                format!("op{i}"),
                Step {
                    runner: Arc::new(runner),
                    timeout: Duration::from_secs(5),
                    storage: None,
                },
            )
        })
        .collect();
    let mut wasms: Vec<Duration> = (0..11)
        .map(|_| run(&rt, &g, &wasm_steps, &calls).2)
        .collect();
    let wasm = median(&mut wasms) / n as u32;
    println!("per node, {n}-node chain (median of runs)");
    println!(
        "  engine with a no-op runner        {:>10.2} µs",
        noop.as_secs_f64() * 1e6
    );
    println!(
        "  engine with a trivial wasm op     {:>10.2} µs",
        wasm.as_secs_f64() * 1e6
    );
    println!();

    println!(
        "{:<10} {:>10} {:>22} {:>24} {:>24}",
        "diamonds", "paths", "first path succeeds", "only last path succeeds", "every path fails"
    );
    for diamonds in [10, 20, 40] {
        let (g, a_arms, tail) = ladder(diamonds);
        let cases = [
            BTreeSet::new(),
            a_arms.iter().copied().collect::<BTreeSet<_>>(),
            BTreeSet::from([tail]),
        ];
        let mut cells = Vec::new();
        for (i, failing) in cases.iter().enumerate() {
            let steps = noop_steps(&g, failing, &calls);
            let runs: Vec<_> = (0..11).map(|_| run(&rt, &g, &steps, &calls)).collect();
            let (phase, nodes, _) = runs[0];
            let expected = if i == 2 {
                DiagnosisPhase::Failed
            } else {
                DiagnosisPhase::Succeeded
            };
            assert_eq!(phase, expected);
            assert!(nodes < g.len(), "a node ran twice");
            let mut times: Vec<Duration> = runs.into_iter().map(|r| r.2).collect();
            let time = median(&mut times);
            cells.push(format!(
                "{nodes} nodes {:>8.3} ms",
                time.as_secs_f64() * 1e3
            ));
        }
        println!(
            "{:<10} {:>10} {:>22} {:>24} {:>24}",
            diamonds,
            g.path_count().to_string(),
            cells[0],
            cells[1],
            cells[2]
        );
    }
}
