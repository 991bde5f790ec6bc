//! Source-to-sink paths of a [`Graph`]: [`PathCount`], and the lazy `Paths` walk the
//! tests check the count against.
//!
//! KubeDiag builds every path up front and stores full node copies of each in the
//! status; a ladder of 40 diamonds (121 nodes) has 2^40 paths, so that cannot work.
//! Here the count comes from a linear dynamic program, not from enumeration.

use super::Graph;
use std::fmt;
#[cfg(test)]
use std::iter::FusedIterator;

impl Graph {
    /// Every path from the start node to a sink, lazily, the start node left out.
    ///
    /// **Order:** depth-first from the start node, taking each node's successors in
    /// their listed `to` order. Equivalently, path `p` comes before path `q` when, at
    /// the first position where they differ, `p`'s node is listed earlier in the
    /// previous node's `to` than `q`'s. The order depends only on the graph, so a
    /// restarted engine walks the same paths in the same order.
    ///
    /// Memory is proportional to the longest path, whatever the number of paths; each
    /// step costs at most the length of the path it yields.
    #[cfg(test)]
    pub(crate) fn paths(&self) -> Paths {
        Paths {
            graph: self.clone(),
            stack: vec![Frame {
                node: Graph::START,
                next: 0,
            }],
        }
    }

    /// The number of paths from the start node to a sink, in time linear in the size of the
    /// graph, saturating at [`PathCount::MoreThan`]`(u64::MAX)`.
    pub fn path_count(&self) -> PathCount {
        if self.is_sink(Graph::START) {
            return PathCount::Exact(0);
        }
        // Paths from each node to a sink; `None` once that exceeds u64.
        let mut from: Vec<Option<u64>> = vec![Some(0); self.len()];
        for &i in self.topological_order().iter().rev() {
            from[i] = if self.is_sink(i) {
                Some(1)
            } else {
                self.successors(i)
                    .iter()
                    .try_fold(0u64, |sum, &s| from[s].and_then(|c| sum.checked_add(c)))
            };
        }
        match from[Graph::START] {
            Some(n) => PathCount::Exact(n),
            None => PathCount::MoreThan(u64::MAX),
        }
    }
}

/// How many paths a graph has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathCount {
    /// Exactly this many.
    Exact(u64),
    /// More than this many (the count did not fit in a `u64`).
    MoreThan(u64),
}

impl fmt::Display for PathCount {
    /// `12`, or `more than 18446744073709551615`: the form of `status.pathCount`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathCount::Exact(n) => write!(f, "{n}"),
            PathCount::MoreThan(n) => write!(f, "more than {n}"),
        }
    }
}

/// The paths of a [`Graph`], in the order documented on [`Graph::paths`].
///
/// Holds its own handle on the graph, so it can outlive the borrow it came from.
#[cfg(test)]
#[derive(Debug, Clone)]
pub(crate) struct Paths {
    graph: Graph,
    /// The current path, start node first; an explicit stack because a graph can be
    /// deeper than the thread's stack.
    stack: Vec<Frame>,
}

#[cfg(test)]
#[derive(Debug, Clone, Copy)]
struct Frame {
    node: usize,
    /// The position in `node`'s successors of the next one to descend into.
    next: usize,
}

#[cfg(test)]
impl Paths {
    /// Skips every remaining path that starts with the first `prefix_len` nodes of the
    /// path last yielded.
    ///
    /// When the node at position `k` of a path fails, every path through the same
    /// first `k + 1` nodes would fail there too: `prune(k + 1)` skips them without
    /// enumerating them. `prune(0)` ends the walk; a `prefix_len` of the whole path or
    /// more changes nothing. Before the first path is yielded only `prune(0)` has an
    /// effect.
    pub(crate) fn prune(&mut self, prefix_len: usize) {
        // stack[0] is the start node and stack[k] the path's node k - 1, so the frames
        // at and above index `prefix_len` are the ones whose subtrees are abandoned.
        self.stack.truncate(prefix_len);
    }
}

#[cfg(test)]
impl Iterator for Paths {
    type Item = Vec<usize>;

    fn next(&mut self) -> Option<Vec<usize>> {
        loop {
            let frame = self.stack.last_mut()?;
            let Some(&child) = self.graph.successors(frame.node).get(frame.next) else {
                self.stack.pop();
                continue;
            };
            frame.next += 1;
            if self.graph.is_sink(child) {
                let mut path: Vec<usize> = Vec::with_capacity(self.stack.len());
                path.extend(self.stack[1..].iter().map(|f| f.node));
                path.push(child);
                return Some(path);
            }
            self.stack.push(Frame {
                node: child,
                next: 0,
            });
        }
    }
}

#[cfg(test)]
impl FusedIterator for Paths {}

#[cfg(test)]
mod tests {
    use super::super::testing::{Row, ladder, set};
    use super::super::{GraphNode, validate};
    use super::*;
    use std::time::{Duration, Instant};

    fn graph(rows: &[Row<'_>]) -> Graph {
        validate(&set(rows), |_| true).expect("valid")
    }

    /// 0 → [2, 1], 1 → 3, 2 → [4, 3], 3 → 5: `to` order is not numeric order.
    fn small_dag() -> Graph {
        graph(&[
            (0, &[2, 1], None),
            (1, &[3], Some("a")),
            (2, &[4, 3], Some("b")),
            (3, &[5], Some("c")),
            (4, &[], Some("d")),
            (5, &[], Some("e")),
        ])
    }

    #[test]
    fn paths_are_depth_first_in_listed_order() {
        let paths: Vec<Vec<usize>> = small_dag().paths().collect();
        assert_eq!(paths, [vec![2, 4], vec![2, 3, 5], vec![1, 3, 5]]);
    }

    #[test]
    fn paths_of_a_ladder_branch_at_the_deepest_diamond_first() {
        let paths: Vec<Vec<usize>> = validate(&ladder(2), |_| true)
            .expect("valid")
            .paths()
            .collect();
        assert_eq!(
            paths,
            [
                vec![1, 3, 4, 6],
                vec![1, 3, 5, 6],
                vec![2, 3, 4, 6],
                vec![2, 3, 5, 6],
            ]
        );
    }

    #[test]
    fn paths_are_lazy() {
        let g = validate(&ladder(40), |_| true).expect("valid");
        let began = Instant::now();
        let mut paths = g.paths();
        let first = paths.next().expect("a path");
        let second = paths.next().expect("a second path");
        assert!(began.elapsed() < Duration::from_secs(5));
        let joins: Vec<usize> = (1..=40).map(|i| 3 * i).collect();
        let expected: Vec<usize> = joins.iter().flat_map(|&j| [j - 2, j]).collect();
        assert_eq!(first, expected);
        assert_eq!(first.len(), 80);
        assert_eq!(second[..78], expected[..78]);
        assert_eq!(second[78..], [119, 120]);
        // The walk keeps one frame per level, not one per path.
        assert!(paths.stack.len() <= 81);
    }

    #[test]
    fn a_start_node_without_successors_yields_no_paths() {
        // validate() rejects this graph; the walk still has to be well-defined.
        let g = Graph::new(
            vec![GraphNode {
                successors: Vec::new(),
                operation: None,
                dependences: Vec::new(),
            }],
            vec![0],
        );
        assert_eq!(g.paths().next(), None);
        assert_eq!(g.path_count(), PathCount::Exact(0));
    }

    #[test]
    fn paths_stay_finished() {
        let mut paths = small_dag().paths();
        assert_eq!(paths.by_ref().count(), 3);
        assert_eq!(paths.next(), None);
        assert_eq!(paths.next(), None);
    }

    #[test]
    fn prune_skips_paths_through_a_failed_prefix() {
        let mut paths = small_dag().paths();
        assert_eq!(paths.next(), Some(vec![2, 4]));
        // Node 2 (position 0) failed: nothing else through 2 is tried.
        paths.prune(1);
        assert_eq!(paths.next(), Some(vec![1, 3, 5]));
        assert_eq!(paths.next(), None);

        let mut paths = small_dag().paths();
        assert_eq!(paths.next(), Some(vec![2, 4]));
        // Node 4 (position 1) failed: only that path is abandoned.
        paths.prune(2);
        assert_eq!(paths.next(), Some(vec![2, 3, 5]));
        paths.prune(10);
        assert_eq!(paths.next(), Some(vec![1, 3, 5]));

        let mut paths = small_dag().paths();
        paths.prune(0);
        assert_eq!(paths.next(), None);
    }

    #[test]
    fn prune_keeps_a_ladder_walk_linear() {
        // Every `a` fails: a walk that prunes tries each diamond's `b` once.
        let g = validate(&ladder(40), |_| true).expect("valid");
        let mut paths = g.paths();
        let mut tried = 0;
        while let Some(path) = paths.next() {
            tried += 1;
            assert!(tried <= 41, "pruning did not skip the failed subtrees");
            if let Some(k) = path.iter().position(|&n| n % 3 == 1) {
                paths.prune(k + 1);
            }
        }
        assert_eq!(tried, 41);
    }

    #[test]
    fn path_count_is_exact_for_small_graphs() {
        assert_eq!(small_dag().path_count(), PathCount::Exact(3));
        for diamonds in 1..8 {
            let g = validate(&ladder(diamonds), |_| true).expect("valid");
            let walked = u64::try_from(g.paths().count()).expect("fits");
            assert_eq!(g.path_count(), PathCount::Exact(walked));
        }
    }

    #[test]
    fn path_count_of_a_40_diamond_ladder_is_exact() {
        let g = validate(&ladder(40), |_| true).expect("valid");
        assert_eq!(g.path_count(), PathCount::Exact(1 << 40));
        assert_eq!(g.path_count().to_string(), "1099511627776");
    }

    #[test]
    fn path_count_saturates() {
        let g = validate(&ladder(63), |_| true).expect("valid");
        assert_eq!(g.path_count(), PathCount::Exact(1 << 63));
        for diamonds in [64, 70] {
            let g = validate(&ladder(diamonds), |_| true).expect("valid");
            assert_eq!(g.path_count(), PathCount::MoreThan(u64::MAX));
        }
        assert_eq!(
            PathCount::MoreThan(u64::MAX).to_string(),
            "more than 18446744073709551615"
        );
        assert_eq!(PathCount::Exact(12).to_string(), "12");
    }
}
