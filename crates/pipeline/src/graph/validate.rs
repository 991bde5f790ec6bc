//! Validation: an OperationSet's `adjacencyList` to a [`Graph`], or every problem with it.
//!
//! KubeDiag's graph builder stops at the first error, never says which, tests
//! reachability by in-degree (so a cycle off to the side passes) and panics on a
//! self-loop or an out-of-range id. Here every check runs on every node, each problem
//! names its node and the JSON path of the field to fix, and all loops are bounded by
//! the size of the list, whatever ids it holds.

use super::{Graph, GraphNode};
use operon_data::api::{Node, OperationSet, Problem};
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::{HashMap, VecDeque};

/// At most this many nodes of one strongly connected component are listed in a cycle
/// problem, so that one tangled graph does not produce a condition message of megabytes.
const LISTED_CYCLE_NODES: usize = 10;

/// Checks `set` and returns its [`Graph`], or every problem found.
///
/// `operation_exists` tells whether an Operation of that name exists; it is asked once
/// per distinct name.
///
/// Problems are ordered by node for the per-node checks (id, operation, `to`,
/// `dependences`, in that order), then cycles, then unreachable nodes.
pub fn validate(
    set: &OperationSet,
    operation_exists: impl Fn(&str) -> bool,
) -> Result<Graph, Vec<Problem>> {
    let mut report = Report {
        object: set.object_ref(),
        problems: Vec::new(),
    };
    let list = &set.spec.adjacency_list;
    if list.is_empty() {
        report.push(
            "spec.adjacencyList".to_owned(),
            "is empty: it needs the start node (id 0, no operation) and at least one node \
             after it"
                .to_owned(),
        );
        return Err(report.problems);
    }
    let n = list.len();
    let index = |id: i64| usize::try_from(id).ok().filter(|&i| i < n);
    let mut known_operations: HashMap<&str, bool> = HashMap::new();
    // Edges that are well-formed (in range, not a self-loop, not a duplicate, not into
    // the start node); the structural checks run on these only, so that one bad edge
    // is reported once, as itself, and not again as a cycle.
    let mut successors: Vec<Vec<usize>> = Vec::with_capacity(n);
    let mut dependences: Vec<Vec<usize>> = Vec::with_capacity(n);
    let mut first_seen: HashMap<usize, usize> = HashMap::new();

    for (i, node) in list.iter().enumerate() {
        let at = format!("spec.adjacencyList[{i}]");
        if usize::try_from(node.id).ok() != Some(i) {
            report.push(
                format!("{at}.id"),
                if i == 0 {
                    format!(
                        "the start node (index 0) has id {}; it must be 0, as every id must \
                         equal its node's index in adjacencyList",
                        node.id
                    )
                } else {
                    format!(
                        "node {i} has id {}; every id must equal its node's index in \
                         adjacencyList, and `to` and `dependences` refer to this node as {i}",
                        node.id
                    )
                },
            );
        }

        let operation = node.operation.as_deref().filter(|op| !op.trim().is_empty());
        match (i, operation) {
            (0, Some(op)) => report.push(
                format!("{at}.operation"),
                format!("the start node 0 must not run an operation, got {op:?}"),
            ),
            (0, None) => {}
            (_, None) => report.push(
                format!("{at}.operation"),
                format!("node {i} has no operation; every node but the start node runs one"),
            ),
            (_, Some(op)) => {
                let exists = *known_operations
                    .entry(op)
                    .or_insert_with(|| operation_exists(op));
                if !exists {
                    report.push(
                        format!("{at}.operation"),
                        format!("node {i} runs Operation {op:?}, which does not exist"),
                    );
                }
            }
        }

        if i == 0 && node.to.is_empty() {
            report.push(
                format!("{at}.to"),
                "the start node 0 has no successors, so the graph has no path to run".to_owned(),
            );
        }
        first_seen.clear();
        let mut clean = Vec::with_capacity(node.to.len());
        for (j, &to) in node.to.iter().enumerate() {
            let field = format!("{at}.to[{j}]");
            match index(to) {
                None => report.push(
                    field,
                    format!(
                        "node {i} has an edge to node {to}, which does not exist (ids are 0 \
                         to {})",
                        n - 1
                    ),
                ),
                Some(t) if t == i => report.push(
                    field,
                    format!("node {i} has an edge to itself; the graph must be acyclic"),
                ),
                Some(0) => report.push(
                    field,
                    format!(
                        "node {i} has an edge to the start node 0; nothing may lead back to \
                         the start"
                    ),
                ),
                Some(t) => {
                    if let Some(&k) = first_seen.get(&t) {
                        report.push(
                            field,
                            format!("node {i} lists node {t} twice in `to` (first at to[{k}])"),
                        );
                    } else {
                        first_seen.insert(t, j);
                        clean.push(t);
                    }
                }
            }
        }
        successors.push(clean);

        if i == 0 {
            if !node.dependences.is_empty() {
                report.push(
                    format!("{at}.dependences"),
                    format!(
                        "the start node 0 must not have dependences, got {:?}",
                        node.dependences
                    ),
                );
            }
            dependences.push(Vec::new());
            continue;
        }
        first_seen.clear();
        let mut clean = Vec::with_capacity(node.dependences.len());
        for (j, &dep) in node.dependences.iter().enumerate() {
            let field = format!("{at}.dependences[{j}]");
            match index(dep) {
                None => report.push(
                    field,
                    format!(
                        "node {i} depends on node {dep}, which does not exist (ids are 0 to \
                         {})",
                        n - 1
                    ),
                ),
                Some(d) if d == i => {
                    report.push(field, format!("node {i} depends on itself"));
                }
                Some(0) => report.push(
                    field,
                    format!("node {i} depends on the start node 0, which runs no operation"),
                ),
                Some(d) => {
                    if let Some(&k) = first_seen.get(&d) {
                        report.push(
                            field,
                            format!(
                                "node {i} lists dependence {d} twice (first at \
                                 dependences[{k}])"
                            ),
                        );
                    } else {
                        first_seen.insert(d, j);
                        clean.push(d);
                    }
                }
            }
        }
        dependences.push(clean);
    }

    let topological_order = topological_order(&successors);
    if topological_order.len() < n {
        report_cycles(&mut report, list, &successors);
    }
    let reachable = reachable_from_start(&successors);
    for (i, _) in reachable.iter().enumerate().filter(|(_, r)| !**r) {
        report.push(
            format!("spec.adjacencyList[{i}]"),
            format!(
                "node {i} is not reachable from the start node 0: no chain of `to` edges \
                 leads to it"
            ),
        );
    }

    if !report.problems.is_empty() {
        return Err(report.problems);
    }
    let nodes = list
        .iter()
        .zip(successors)
        .zip(dependences)
        .map(|((node, successors), dependences)| GraphNode {
            successors,
            operation: node.operation.clone(),
            dependences,
        })
        .collect();
    Ok(Graph::new(nodes, topological_order))
}

/// Collects problems about one object.
struct Report {
    object: String,
    problems: Vec<Problem>,
}

impl Report {
    fn push(&mut self, field: String, reason: String) {
        self.problems
            .push(Problem::new(self.object.clone(), field, reason));
    }
}

/// Kahn's algorithm; shorter than the node count exactly when there is a cycle.
fn topological_order(successors: &[Vec<usize>]) -> Vec<usize> {
    let mut in_degree = vec![0usize; successors.len()];
    for &t in successors.iter().flatten() {
        in_degree[t] += 1;
    }
    let mut ready: VecDeque<usize> = (0..successors.len())
        .filter(|&i| in_degree[i] == 0)
        .collect();
    let mut order = Vec::with_capacity(successors.len());
    while let Some(i) = ready.pop_front() {
        order.push(i);
        for &t in &successors[i] {
            in_degree[t] -= 1;
            if in_degree[t] == 0 {
                ready.push_back(t);
            }
        }
    }
    order
}

/// True reachability (KubeDiag only checked in-degrees), with an explicit stack because
/// graphs can be deeper than the thread's stack.
fn reachable_from_start(successors: &[Vec<usize>]) -> Vec<bool> {
    let mut reachable = vec![false; successors.len()];
    let mut stack = vec![Graph::START];
    reachable[Graph::START] = true;
    while let Some(i) = stack.pop() {
        for &t in &successors[i] {
            if !reachable[t] {
                reachable[t] = true;
                stack.push(t);
            }
        }
    }
    reachable
}

/// One problem per strongly connected component with a cycle, naming the shortest cycle
/// through its lowest node: a component can hold exponentially many cycles, and breaking
/// them is easier from one concrete example than from a list.
fn report_cycles(report: &mut Report, list: &[Node], successors: &[Vec<usize>]) {
    let mut graph: DiGraph<(), (), usize> = DiGraph::with_capacity(successors.len(), 0);
    for _ in successors {
        graph.add_node(());
    }
    for (i, targets) in successors.iter().enumerate() {
        for &t in targets {
            graph.add_edge(NodeIndex::new(i), NodeIndex::new(t), ());
        }
    }
    // kosaraju_scc is iterative (petgraph's tarjan_scc recurses once per node).
    let mut components: Vec<Vec<usize>> = petgraph::algo::kosaraju_scc(&graph)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            let mut c: Vec<usize> = c.into_iter().map(NodeIndex::index).collect();
            c.sort_unstable();
            c
        })
        .collect();
    components.sort_unstable_by_key(|c| c[0]);

    let mut component_of = vec![usize::MAX; successors.len()];
    for (k, component) in components.iter().enumerate() {
        for &i in component {
            component_of[i] = k;
        }
    }
    // Components are disjoint and each search stays inside its own, so one parent
    // table serves them all without resetting.
    let mut parent: Vec<Option<usize>> = vec![None; successors.len()];
    for (k, component) in components.iter().enumerate() {
        let first = component[0];
        let Some(last) = shortest_cycle(first, k, successors, &component_of, &mut parent) else {
            continue;
        };
        let mut cycle = vec![last];
        let mut at = last;
        while at != first {
            match parent[at] {
                Some(p) => {
                    cycle.push(p);
                    at = p;
                }
                None => break,
            }
        }
        cycle.reverse();
        cycle.push(first);
        let named = name_cycle(&cycle);
        let closing = list[last]
            .to
            .iter()
            .position(|&t| usize::try_from(t).ok() == Some(first))
            .map_or(String::new(), |j| format!(".to[{j}]"));
        let mut reason = format!(
            "cycle {named}: the graph must be acyclic; remove one of these edges, e.g. this \
             one from node {last} back to node {first}"
        );
        if component.len() + 1 > cycle.len() {
            let mut listed: Vec<String> = component
                .iter()
                .take(LISTED_CYCLE_NODES)
                .map(usize::to_string)
                .collect();
            if component.len() > LISTED_CYCLE_NODES {
                listed.push(format!("and {} more", component.len() - LISTED_CYCLE_NODES));
            }
            reason.push_str(&format!(
                " (nodes {} all lie on cycles through one another)",
                listed.join(", ")
            ));
        }
        report.push(format!("spec.adjacencyList[{last}]{closing}"), reason);
    }
}

/// `1 → 3 → 5 → 1`, eliding the middle of a long cycle so the message stays readable.
fn name_cycle(cycle: &[usize]) -> String {
    const HEAD: usize = 8;
    const TAIL: usize = 3;
    let join = |nodes: &[usize]| {
        nodes
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(" → ")
    };
    if cycle.len() <= HEAD + TAIL + 1 {
        return join(cycle);
    }
    let (head, rest) = cycle.split_at(HEAD);
    let (elided, tail) = rest.split_at(rest.len() - TAIL);
    format!(
        "{} → … {} more … → {}",
        join(head),
        elided.len(),
        join(tail)
    )
}

/// Breadth-first search from `first` inside component `k`; returns the last node of a
/// shortest cycle through `first` (its edge leads back to `first`), with the way there
/// left in `parent`.
fn shortest_cycle(
    first: usize,
    k: usize,
    successors: &[Vec<usize>],
    component_of: &[usize],
    parent: &mut [Option<usize>],
) -> Option<usize> {
    let mut queue = VecDeque::from([first]);
    while let Some(i) = queue.pop_front() {
        for &t in &successors[i] {
            if t == first {
                return Some(i);
            }
            if component_of[t] == k && parent[t].is_none() {
                parent[t] = Some(i);
                queue.push_back(t);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::testing::{Row, ladder, set, set_of};
    use super::*;

    fn problems(rows: &[Row<'_>]) -> Vec<Problem> {
        validate(&set(rows), |_| true).expect_err("the graph should be invalid")
    }

    /// The one problem at `field`, asserting there is exactly one.
    fn at<'a>(problems: &'a [Problem], field: &str) -> &'a Problem {
        let found: Vec<&Problem> = problems.iter().filter(|p| p.field == field).collect();
        assert_eq!(found.len(), 1, "one problem at {field} in {problems:#?}");
        found[0]
    }

    fn assert_reason(problem: &Problem, parts: &[&str]) {
        for part in parts {
            assert!(
                problem.reason.contains(part),
                "{:?} should contain {part:?}",
                problem.reason
            );
        }
    }

    #[test]
    fn a_valid_graph_validates() {
        let g = validate(&ladder(2), |_| true).expect("valid");
        assert_eq!(g.len(), 7);
    }

    #[test]
    fn problems_name_the_object() {
        let p = validate(&set_of("node-diagnosis", &[]), |_| true).expect_err("invalid");
        assert_eq!(p[0].object, "OperationSet/node-diagnosis");
    }

    #[test]
    fn empty_list_is_reported() {
        let p = problems(&[]);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].field, "spec.adjacencyList");
        assert_reason(&p[0], &["is empty", "start node"]);
    }

    #[test]
    fn start_node_alone_has_no_paths() {
        let p = problems(&[(0, &[], None)]);
        assert_eq!(p.len(), 1);
        assert_reason(
            at(&p, "spec.adjacencyList[0].to"),
            &["start node 0", "no path"],
        );
    }

    #[test]
    fn start_node_with_an_operation_is_reported() {
        let p = problems(&[(0, &[1], Some("collect")), (1, &[], Some("a"))]);
        assert_eq!(p.len(), 1);
        assert_reason(
            at(&p, "spec.adjacencyList[0].operation"),
            &["start node 0", "\"collect\""],
        );
    }

    #[test]
    fn start_node_with_dependences_is_reported() {
        let mut s = set(&[(0, &[1], None), (1, &[], Some("a"))]);
        s.spec.adjacency_list[0].dependences = vec![1];
        let p = validate(&s, |_| true).expect_err("invalid");
        assert_eq!(p.len(), 1);
        assert_reason(
            at(&p, "spec.adjacencyList[0].dependences"),
            &["start node 0", "dependences"],
        );
    }

    #[test]
    fn ids_must_equal_list_indexes() {
        let p = problems(&[(0, &[1, 2], None), (1, &[], Some("a")), (7, &[], Some("b"))]);
        assert_eq!(p.len(), 1);
        assert_reason(
            at(&p, "spec.adjacencyList[2].id"),
            &["node 2", "id 7", "index"],
        );

        let p = problems(&[(-3, &[1], None), (1, &[], Some("a"))]);
        assert_reason(at(&p, "spec.adjacencyList[0].id"), &["start node", "id -3"]);
    }

    #[test]
    fn edges_to_unknown_ids_are_reported() {
        let p = problems(&[
            (0, &[1], None),
            (1, &[2, -1, 5, i64::MAX, i64::MIN], Some("a")),
            (2, &[], Some("b")),
        ]);
        assert_eq!(p.len(), 4, "{p:#?}");
        assert_reason(
            at(&p, "spec.adjacencyList[1].to[1]"),
            &["node 1", "node -1", "does not exist", "0 to 2"],
        );
        assert_reason(at(&p, "spec.adjacencyList[1].to[2]"), &["node 1", "node 5"]);
        assert_reason(
            at(&p, "spec.adjacencyList[1].to[3]"),
            &[&i64::MAX.to_string()],
        );
        assert_reason(
            at(&p, "spec.adjacencyList[1].to[4]"),
            &[&i64::MIN.to_string()],
        );
    }

    #[test]
    fn self_loops_are_reported() {
        let p = problems(&[
            (0, &[1], None),
            (1, &[2, 1], Some("a")),
            (2, &[], Some("b")),
        ]);
        assert_eq!(p.len(), 1, "{p:#?}");
        assert_reason(at(&p, "spec.adjacencyList[1].to[1]"), &["node 1", "itself"]);
    }

    #[test]
    fn duplicate_edges_are_reported() {
        let p = problems(&[
            (0, &[1], None),
            (1, &[2, 2], Some("a")),
            (2, &[], Some("b")),
        ]);
        assert_eq!(p.len(), 1, "{p:#?}");
        assert_reason(
            at(&p, "spec.adjacencyList[1].to[1]"),
            &["node 1", "node 2 twice", "to[0]"],
        );
    }

    #[test]
    fn edges_back_to_the_start_node_are_reported() {
        let p = problems(&[(0, &[1], None), (1, &[2], Some("a")), (2, &[0], Some("b"))]);
        assert_eq!(p.len(), 1, "{p:#?}");
        assert_reason(
            at(&p, "spec.adjacencyList[2].to[0]"),
            &["node 2", "start node 0"],
        );
    }

    #[test]
    fn a_cycle_is_named() {
        let p = problems(&[
            (0, &[1], None),
            (1, &[2, 3], Some("a")),
            (2, &[], Some("b")),
            (3, &[4], Some("c")),
            (4, &[5], Some("d")),
            (5, &[1], Some("e")),
        ]);
        assert_eq!(p.len(), 1, "{p:#?}");
        let cycle = at(&p, "spec.adjacencyList[5].to[0]");
        assert_reason(cycle, &["cycle 1 → 3 → 4 → 5 → 1", "acyclic"]);
    }

    #[test]
    fn each_cycle_is_reported_once() {
        // Two separate cycles, and one tangle (3 ⇄ 4 ⇄ 5 ⇄ 3) with many cycles in it.
        let p = problems(&[
            (0, &[1, 3, 6], None),
            (1, &[2], Some("a")),
            (2, &[1], Some("b")),
            (3, &[4, 5], Some("c")),
            (4, &[3, 5], Some("d")),
            (5, &[3, 4], Some("e")),
            (6, &[7], Some("f")),
            (7, &[8], Some("g")),
            (8, &[6], Some("h")),
        ]);
        let cycles: Vec<&Problem> = p
            .iter()
            .filter(|p| p.reason.starts_with("cycle "))
            .collect();
        assert_eq!(cycles.len(), 3, "{p:#?}");
        assert_eq!(p.len(), 3, "{p:#?}");
        assert_reason(cycles[0], &["cycle 1 → 2 → 1"]);
        assert_eq!(cycles[0].field, "spec.adjacencyList[2].to[0]");
        assert_reason(
            cycles[1],
            &["cycle 3 → 4 → 3", "nodes 3, 4, 5 all lie on cycles"],
        );
        assert_reason(cycles[2], &["cycle 6 → 7 → 8 → 6"]);
    }

    #[test]
    fn a_big_tangle_is_one_short_problem() {
        // A complete graph on 200 nodes has more cycles than atoms in the universe.
        let n = 200i64;
        let mut rows_to: Vec<Vec<i64>> = vec![vec![1]];
        for i in 1..n {
            rows_to.push((1..n).filter(|&t| t != i).collect());
        }
        let rows: Vec<Row<'_>> = rows_to
            .iter()
            .enumerate()
            .map(|(i, to)| {
                let id = i64::try_from(i).expect("small");
                (id, to.as_slice(), (i > 0).then_some("op"))
            })
            .collect();
        let p = problems(&rows);
        assert_eq!(p.len(), 1, "{p:#?}");
        assert_reason(&p[0], &["cycle 1 → 2 → 1", "and 189 more"]);
    }

    #[test]
    fn unreachable_nodes_are_reported() {
        // KubeDiag's in-degree test passes 3 and 4: each has an incoming edge.
        let p = problems(&[
            (0, &[1], None),
            (1, &[], Some("a")),
            (2, &[], Some("b")),
            (3, &[4], Some("c")),
            (4, &[3], Some("d")),
        ]);
        assert_reason(
            at(&p, "spec.adjacencyList[2]"),
            &["node 2", "not reachable"],
        );
        assert_reason(
            at(&p, "spec.adjacencyList[3]"),
            &["node 3", "not reachable"],
        );
        assert_reason(
            at(&p, "spec.adjacencyList[4]"),
            &["node 4", "not reachable"],
        );
        assert_reason(at(&p, "spec.adjacencyList[4].to[0]"), &["cycle 3 → 4 → 3"]);
        assert_eq!(p.len(), 4, "{p:#?}");
    }

    #[test]
    fn nodes_without_an_operation_are_reported() {
        let p = problems(&[(0, &[1, 2], None), (1, &[], None), (2, &[], Some("  "))]);
        assert_eq!(p.len(), 2, "{p:#?}");
        assert_reason(
            at(&p, "spec.adjacencyList[1].operation"),
            &["node 1", "no operation"],
        );
        assert_reason(
            at(&p, "spec.adjacencyList[2].operation"),
            &["node 2", "no operation"],
        );
    }

    #[test]
    fn unknown_operations_are_reported_and_looked_up_once() {
        let s = set(&[
            (0, &[1, 2, 3], None),
            (1, &[], Some("pod-list-collector")),
            (2, &[], Some("gone")),
            (3, &[], Some("gone")),
        ]);
        let asked = std::cell::Cell::new(0);
        let p = validate(&s, |name| {
            asked.set(asked.get() + 1);
            name == "pod-list-collector"
        })
        .expect_err("invalid");
        assert_eq!(asked.get(), 2);
        assert_eq!(p.len(), 2, "{p:#?}");
        assert_reason(
            at(&p, "spec.adjacencyList[2].operation"),
            &["node 2", "\"gone\"", "does not exist"],
        );
        assert_reason(at(&p, "spec.adjacencyList[3].operation"), &["node 3"]);
    }

    #[test]
    fn bad_dependences_are_reported() {
        let mut s = set(&[(0, &[1], None), (1, &[2], Some("a")), (2, &[], Some("b"))]);
        s.spec.adjacency_list[2].dependences = vec![1, 9, -4, 2, 0, 1];
        let p = validate(&s, |_| true).expect_err("invalid");
        assert_eq!(p.len(), 5, "{p:#?}");
        assert_reason(
            at(&p, "spec.adjacencyList[2].dependences[1]"),
            &["node 2", "node 9", "does not exist"],
        );
        assert_reason(
            at(&p, "spec.adjacencyList[2].dependences[2]"),
            &["node 2", "node -4"],
        );
        assert_reason(
            at(&p, "spec.adjacencyList[2].dependences[3]"),
            &["node 2", "itself"],
        );
        assert_reason(
            at(&p, "spec.adjacencyList[2].dependences[4]"),
            &["node 2", "start node 0"],
        );
        assert_reason(
            at(&p, "spec.adjacencyList[2].dependences[5]"),
            &["node 2", "dependence 1 twice", "dependences[0]"],
        );
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let p = validate(
            &set(&[
                (0, &[1, 2], Some("oops")),
                (1, &[1, 3, 3], Some("a")),
                (5, &[99], Some("missing")),
                (3, &[], None),
                (4, &[], Some("b")),
            ]),
            |name| name != "missing",
        )
        .expect_err("invalid");
        let fields: Vec<&str> = p.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.adjacencyList[0].operation",
                "spec.adjacencyList[1].to[0]",
                "spec.adjacencyList[1].to[2]",
                "spec.adjacencyList[2].id",
                "spec.adjacencyList[2].operation",
                "spec.adjacencyList[2].to[0]",
                "spec.adjacencyList[3].operation",
                "spec.adjacencyList[4]",
            ]
        );
    }

    #[test]
    fn kubediag_crash_cases_are_reported_not_panicking() {
        // gonum panics on a self-loop; KubeDiag indexes past `visited` on an id ≥ len.
        let p = problems(&[(0, &[0], None), (1, &[1], Some("a"))]);
        assert_reason(at(&p, "spec.adjacencyList[0].to[0]"), &["node 0", "itself"]);
        assert_reason(at(&p, "spec.adjacencyList[1].to[0]"), &["node 1", "itself"]);
        assert_reason(at(&p, "spec.adjacencyList[1]"), &["not reachable"]);

        let p = problems(&[(0, &[1], None), (1, &[2], Some("a"))]);
        assert_eq!(p.len(), 1, "{p:#?}");
        assert_reason(
            at(&p, "spec.adjacencyList[1].to[0]"),
            &["node 2", "does not exist"],
        );
    }

    #[test]
    fn random_graphs_never_panic_and_valid_ones_walk_as_counted() {
        // xorshift: deterministic, so a failure reproduces.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |bound: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % bound
        };
        let mut valid = 0;
        for _ in 0..2_000 {
            let n = 1 + next(9);
            let id = |k: u64| i64::try_from(k).expect("small") - 1;
            let mut nodes: Vec<Node> = Vec::new();
            for i in 0..n {
                let mut to = Vec::new();
                for _ in 0..next(3) {
                    // Mostly forward edges, so that a fair share of graphs is valid.
                    let forward = n - i - 1;
                    if next(16) == 0 {
                        to.push(id(next(n + 3)));
                    } else if forward > 0 {
                        to.push(id(i + 2 + next(forward)));
                    }
                }
                let mut dependences = Vec::new();
                if next(8) == 0 {
                    dependences.push(id(next(n + 2)));
                }
                // Chain most nodes to their predecessor so that most are reachable.
                if let Some(previous) = nodes.last_mut()
                    && next(10) != 0
                    && !previous.to.contains(&id(i + 1))
                {
                    previous.to.push(id(i + 1));
                }
                nodes.push(Node {
                    id: if next(30) == 0 { 7 } else { id(i + 1) },
                    to,
                    operation: (i > 0 || next(30) == 0).then(|| "op".to_owned()),
                    dependences,
                });
            }
            let mut s = set(&[]);
            s.spec.adjacency_list = nodes;
            let result = validate(&s, |_| true);
            let _ = super::super::to_dot(&s, &Default::default(), &[1, 2]);
            let _ = super::super::to_mermaid(&s, &Default::default(), &[-1, 99]);
            let Ok(g) = result else { continue };
            valid += 1;
            let paths: Vec<Vec<usize>> = g.paths().collect();
            assert_eq!(
                g.path_count(),
                super::super::PathCount::Exact(u64::try_from(paths.len()).expect("fits"))
            );
            for path in &paths {
                let mut at = g.start();
                for &node in path {
                    assert!(g.successors(at).contains(&node), "{path:?} in {s:?}");
                    at = node;
                }
                assert!(g.is_sink(at));
            }
            let mut sorted = paths.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), paths.len());
        }
        assert!(
            valid > 100,
            "only {valid} valid graphs: the generator needs tuning"
        );
    }

    #[test]
    fn deep_graphs_do_not_overflow_the_stack() {
        let n = 200_000usize;
        let to: Vec<Vec<i64>> = (0..n)
            .map(|i| {
                if i + 1 < n {
                    vec![i64::try_from(i + 1).expect("fits")]
                } else {
                    vec![1]
                }
            })
            .collect();
        let rows: Vec<Row<'_>> = to
            .iter()
            .enumerate()
            .map(|(i, to)| {
                let id = i64::try_from(i).expect("fits");
                (id, to.as_slice(), (i > 0).then_some("op"))
            })
            .collect();
        // One long cycle 1 → 2 → … → n-1 → 1.
        let p = problems(&rows);
        assert_eq!(p.len(), 1);
        assert_reason(
            &p[0],
            &["cycle 1 → 2 → 3 → 4 → 5 → 6 → 7 → 8 → … 199989 more … → 199998 → 199999 → 1"],
        );
        assert!(p[0].reason.len() < 1_000, "{}", p[0].reason);

        let mut s = set(&rows);
        s.spec.adjacency_list[n - 1].to.clear();
        let g = validate(&s, |_| true).expect("a long chain is valid");
        assert_eq!(g.paths().next().map(|p| p.len()), Some(n - 1));
        assert_eq!(g.path_count(), super::super::PathCount::Exact(1));
    }
}
