//! OperationSet graphs: validation, path counting, status and rendering.
//!
//! An OperationSet's `adjacencyList` is checked once by [`validate`], which reports every
//! [`Problem`] at once or returns a [`Graph`]: a DAG whose node ids are list indexes, every
//! node reachable from the start node 0. Everything downstream (the pipeline, the status,
//! the CLI) works on the [`Graph`], never on the raw list, so it never has to re-check ids.
//!
//! Unlike KubeDiag's graph builder, nothing here materializes the paths:
//! [`Graph::path_count`] counts them in linear time, so a graph with 2^40 paths is as
//! cheap to accept as one with 2.
//!
//! - `validate.rs`: the checks, from an `OperationSet` to a [`Graph`] or its problems.
//! - `paths.rs`: [`PathCount`], and the lazy walk of the paths the tests count with.
//! - `render.rs`: DOT and Mermaid pictures of a (possibly invalid) OperationSet.

mod paths;
mod render;
mod validate;

#[cfg(test)]
mod testing;

pub use paths::PathCount;
pub use render::{to_dot, to_mermaid};
pub use validate::validate;

use operon_data::api::{Condition, ConditionStatus, OperationSet, OperationSetStatus, Problem};
use std::sync::Arc;

/// The `type` of the condition [`status`] writes.
pub(crate) const READY_CONDITION: &str = "Ready";
/// The reason of a `Ready=True` condition.
pub(crate) const REASON_VALID: &str = "Valid";
/// The reason of a `Ready=False` condition.
pub(crate) const REASON_INVALID_GRAPH: &str = "InvalidGraph";

/// A validated OperationSet graph: acyclic, ids are list indexes, every node reachable
/// from the start node 0, every non-start node runs an Operation that exists.
///
/// Cloning is cheap (the nodes are shared), so a Diagnosis can keep its own handle while
/// the OperationSet is re-validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Graph {
    inner: Arc<GraphInner>,
}

#[derive(Debug, PartialEq, Eq)]
struct GraphInner {
    nodes: Vec<GraphNode>,
    /// Kept from validation so [`Graph::path_count`] needs no second sort.
    topological_order: Vec<usize>,
}

#[derive(Debug, PartialEq, Eq)]
struct GraphNode {
    /// In listed `to` order, because that order is the order paths are tried in.
    successors: Vec<usize>,
    operation: Option<String>,
    dependences: Vec<usize>,
}

impl Graph {
    /// The start node's id; it runs no operation and is left out of every path.
    pub(crate) const START: usize = 0;

    fn new(nodes: Vec<GraphNode>, topological_order: Vec<usize>) -> Self {
        Self {
            inner: Arc::new(GraphInner {
                nodes,
                topological_order,
            }),
        }
    }

    /// The number of nodes, the start node included.
    pub fn len(&self) -> usize {
        self.inner.nodes.len()
    }

    /// Always false: a valid graph has at least a start node and one successor.
    pub fn is_empty(&self) -> bool {
        self.inner.nodes.is_empty()
    }

    /// The start node's id, 0.
    #[cfg(test)]
    pub(crate) fn start(&self) -> usize {
        Self::START
    }

    /// The index of the node a user-supplied id (from a checkpoint, a CLI argument)
    /// names, or `None` when there is no such node.
    pub(crate) fn index(&self, id: i64) -> Option<usize> {
        usize::try_from(id).ok().filter(|&i| i < self.len())
    }

    /// The nodes that follow `id`, in their listed `to` order.
    ///
    /// # Panics
    /// If `id >= self.len()`; use [`Graph::index`] for ids that come from outside.
    pub(crate) fn successors(&self, id: usize) -> &[usize] {
        &self.inner.nodes[id].successors
    }

    /// The Operation node `id` runs; `None` for the start node.
    ///
    /// # Panics
    /// If `id >= self.len()`.
    pub(crate) fn operation(&self, id: usize) -> Option<&str> {
        self.inner.nodes[id].operation.as_deref()
    }

    /// The nodes that must have succeeded earlier in the same Diagnosis before `id` runs.
    ///
    /// # Panics
    /// If `id >= self.len()`.
    pub(crate) fn dependences(&self, id: usize) -> &[usize] {
        &self.inner.nodes[id].dependences
    }

    /// Whether `id` has no successors, i.e. a path that reaches it is complete.
    ///
    /// # Panics
    /// If `id >= self.len()`.
    pub(crate) fn is_sink(&self, id: usize) -> bool {
        self.successors(id).is_empty()
    }

    /// Every node, each before all of its successors (the start node first).
    pub(crate) fn topological_order(&self) -> &[usize] {
        &self.inner.topological_order
    }
}

/// The status to write for `set`, given what [`validate`] returned for it.
///
/// `Ready` keeps its `lastTransitionTime` from `set.status` when its status did not
/// change, as the Kubernetes condition convention asks, so that re-validating an
/// unchanged set does not produce a status update.
pub fn status(set: &OperationSet, result: &Result<Graph, Vec<Problem>>) -> OperationSetStatus {
    let nodes = set.spec.adjacency_list.len();
    let (ready, path_count, condition) = match result {
        Ok(graph) => {
            let count = graph.path_count();
            let condition = Condition::new(
                READY_CONDITION,
                ConditionStatus::True,
                REASON_VALID,
                format!("the graph is valid: {nodes} nodes, {count} paths"),
            );
            (true, Some(count.to_string()), condition)
        }
        Err(problems) => {
            let listed: Vec<String> = problems
                .iter()
                .map(|p| format!("{}: {}", p.field, p.reason))
                .collect();
            let noun = if problems.len() == 1 {
                "problem"
            } else {
                "problems"
            };
            let condition = Condition::new(
                READY_CONDITION,
                ConditionStatus::False,
                REASON_INVALID_GRAPH,
                format!(
                    "the graph has {} {noun}: {}",
                    problems.len(),
                    listed.join("; ")
                ),
            );
            (false, None, condition)
        }
    };
    // Only the Ready condition, its transition time kept while its status holds.
    let mut conditions: Vec<Condition> = set
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == READY_CONDITION))
        .cloned()
        .into_iter()
        .collect();
    operon_data::conventions::conditions::set_condition(&mut conditions, condition);
    OperationSetStatus {
        ready,
        conditions,
        path_count,
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{ladder, set, set_of};
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn accessors_expose_the_validated_graph() {
        let s = set(&[
            (0, &[1, 2], None),
            (1, &[3], Some("a")),
            (2, &[3], Some("b")),
            (3, &[], Some("c")),
        ]);
        let g = validate(&s, |_| true).expect("valid");
        assert_eq!(g.len(), 4);
        assert!(!g.is_empty());
        assert_eq!(g.start(), 0);
        assert_eq!(g.successors(0), &[1, 2]);
        assert_eq!(g.successors(1), &[3]);
        assert_eq!(g.operation(0), None);
        assert_eq!(g.operation(2), Some("b"));
        assert!(g.is_sink(3));
        assert!(!g.is_sink(0));
        assert_eq!(g.index(3), Some(3));
        assert_eq!(g.index(4), None);
        assert_eq!(g.index(-1), None);
        assert_eq!(g.index(i64::MAX), None);
        let order = g.topological_order();
        assert_eq!(order.len(), 4);
        assert_eq!(order[0], 0);
        let pos = |n| order.iter().position(|&x| x == n).expect("in order");
        assert!(pos(1) < pos(3) && pos(2) < pos(3));
        let shared = g.clone();
        assert!(Arc::ptr_eq(&shared.inner, &g.inner));
    }

    #[test]
    fn dependences_are_exposed_as_indexes() {
        let mut s = set(&[(0, &[1], None), (1, &[2], Some("a")), (2, &[], Some("b"))]);
        s.spec.adjacency_list[2].dependences = vec![1];
        let g = validate(&s, |_| true).expect("valid");
        assert_eq!(g.dependences(2), &[1]);
        assert!(g.dependences(1).is_empty());
    }

    #[test]
    fn status_of_a_valid_graph_is_ready_with_its_path_count() {
        let s = ladder(3);
        let result = validate(&s, |_| true);
        let st = status(&s, &result);
        assert!(st.ready);
        assert_eq!(st.path_count.as_deref(), Some("8"));
        assert_eq!(st.conditions.len(), 1);
        let c = &st.conditions[0];
        assert_eq!(c.type_, "Ready");
        assert_eq!(c.status, ConditionStatus::True);
        assert_eq!(c.reason, "Valid");
        assert!(c.message.contains("8 paths"), "{}", c.message);
    }

    #[test]
    fn status_of_an_invalid_graph_lists_every_problem() {
        let s = set_of(
            "broken",
            &[(0, &[1, 9], None), (1, &[1], None), (2, &[], Some("x"))],
        );
        let result = validate(&s, |_| true);
        let problems = result.as_ref().expect_err("invalid");
        let st = status(&s, &result);
        assert!(!st.ready);
        assert_eq!(st.path_count, None);
        let c = &st.conditions[0];
        assert_eq!(c.status, ConditionStatus::False);
        assert_eq!(c.reason, "InvalidGraph");
        assert!(
            c.message
                .starts_with(&format!("the graph has {} problems: ", problems.len())),
            "{}",
            c.message
        );
        for p in problems {
            assert!(
                c.message.contains(&p.field),
                "{} lacks {}",
                c.message,
                p.field
            );
            assert!(
                c.message.contains(&p.reason),
                "{} lacks {}",
                c.message,
                p.reason
            );
        }
    }

    #[test]
    fn status_keeps_the_transition_time_when_readiness_is_unchanged() {
        let mut s = ladder(1);
        let then = Time(jiff::Timestamp::UNIX_EPOCH);
        let mut previous = status(&s, &validate(&s, |_| true));
        previous.conditions[0].last_transition_time = Some(then.clone());
        s.status = Some(previous);
        let again = status(&s, &validate(&s, |_| true));
        assert_eq!(again.conditions[0].last_transition_time, Some(then.clone()));
        let failed = status(&s, &validate(&s, |_| false));
        assert_ne!(failed.conditions[0].last_transition_time, Some(then));
    }
}
