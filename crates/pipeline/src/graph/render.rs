//! Pictures of an OperationSet: Graphviz DOT and Mermaid `flowchart TD`.
//!
//! Both render the `adjacencyList` as written, not a validated [`Graph`](super::Graph),
//! because a picture is most useful exactly when the graph is wrong: self-loops,
//! duplicates and cycles are drawn, and only edges to ids that do not exist are left out
//! (there is nothing to draw them to). A Diagnosis's node outcomes colour the nodes and
//! its succeeded path is drawn in bold.

use operon_data::api::{NodePhase, OperationSet};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

const GREEN_FILL: &str = "#c8e6c9";
const GREEN_LINE: &str = "#2e7d32";
const GREEN_TEXT: &str = "#1b5e20";
const RED_FILL: &str = "#ffcdd2";
const RED_LINE: &str = "#c62828";
const RED_TEXT: &str = "#b71c1c";

/// Graphviz DOT for `set`.
///
/// `outcomes` (node id → phase) fills Succeeded nodes green and Failed ones red;
/// `succeeded_path` (node ids, start node excluded, as in `status.succeededPath`) draws
/// its edges, from the start node on, in bold green. Both may be empty. `to` edges are
/// solid; `dependences` are dashed, from the node that must run first.
pub fn to_dot(
    set: &OperationSet,
    outcomes: &BTreeMap<i64, NodePhase>,
    succeeded_path: &[i64],
) -> String {
    let picture = Picture::new(set, outcomes, succeeded_path);
    let mut out = String::new();
    // Writing to a String cannot fail; the results are ignored for that reason only.
    let _ = writeln!(out, "digraph \"{}\" {{", dot_escape(&picture.name));
    let _ = writeln!(out, "  rankdir=TB;");
    let _ = writeln!(out, "  node [shape=box, style=rounded];");
    for node in &picture.nodes {
        let mut attributes = format!("label=\"{}\"", dot_escape(&node.label));
        if node.index == 0 {
            attributes.push_str(", shape=oval");
        }
        match node.phase {
            Some(NodePhase::Succeeded) => {
                let _ = write!(
                    attributes,
                    ", style=\"rounded,filled\", fillcolor=\"{GREEN_FILL}\", \
                     color=\"{GREEN_LINE}\", fontcolor=\"{GREEN_TEXT}\""
                );
            }
            Some(NodePhase::Failed) => {
                let _ = write!(
                    attributes,
                    ", style=\"rounded,filled\", fillcolor=\"{RED_FILL}\", \
                     color=\"{RED_LINE}\", fontcolor=\"{RED_TEXT}\""
                );
            }
            None => {}
        }
        let _ = writeln!(out, "  n{} [{attributes}];", node.index);
    }
    for edge in &picture.edges {
        let attributes = match edge.kind {
            EdgeKind::Next { highlighted: false } => String::new(),
            EdgeKind::Next { highlighted: true } => {
                format!(" [color=\"{GREEN_LINE}\", penwidth=3]")
            }
            EdgeKind::Dependence => {
                " [style=dashed, color=gray, arrowhead=empty, constraint=false]".to_owned()
            }
        };
        let _ = writeln!(out, "  n{} -> n{}{attributes};", edge.from, edge.to);
    }
    out.push_str("}\n");
    out
}

/// Mermaid `flowchart TD` for `set`, with the same meaning of `outcomes` and
/// `succeeded_path` as [`to_dot`]: classes `succeeded` and `failed`, bold green links.
pub fn to_mermaid(
    set: &OperationSet,
    outcomes: &BTreeMap<i64, NodePhase>,
    succeeded_path: &[i64],
) -> String {
    let picture = Picture::new(set, outcomes, succeeded_path);
    let mut out = String::new();
    let _ = writeln!(out, "flowchart TD");
    for node in &picture.nodes {
        let label = mermaid_escape(&node.label);
        if node.index == 0 {
            let _ = writeln!(out, "    n0([\"{label}\"])");
        } else {
            let _ = writeln!(out, "    n{}[\"{label}\"]", node.index);
        }
    }
    let mut highlighted = Vec::new();
    // linkStyle addresses links by their position among all links, so every link
    // counts, dependences included.
    for (position, edge) in picture.edges.iter().enumerate() {
        let arrow = match edge.kind {
            EdgeKind::Next { highlighted: true } => {
                highlighted.push(position.to_string());
                "-->"
            }
            EdgeKind::Next { highlighted: false } => "-->",
            EdgeKind::Dependence => "-.->",
        };
        let _ = writeln!(out, "    n{} {arrow} n{}", edge.from, edge.to);
    }
    let class_members = |phase: NodePhase| -> Vec<String> {
        picture
            .nodes
            .iter()
            .filter(|n| n.phase == Some(phase))
            .map(|n| format!("n{}", n.index))
            .collect()
    };
    let succeeded = class_members(NodePhase::Succeeded);
    let failed = class_members(NodePhase::Failed);
    if !succeeded.is_empty() {
        let _ = writeln!(
            out,
            "    classDef succeeded fill:{GREEN_FILL},stroke:{GREEN_LINE},color:{GREEN_TEXT}"
        );
        let _ = writeln!(out, "    class {} succeeded", succeeded.join(","));
    }
    if !failed.is_empty() {
        let _ = writeln!(
            out,
            "    classDef failed fill:{RED_FILL},stroke:{RED_LINE},color:{RED_TEXT}"
        );
        let _ = writeln!(out, "    class {} failed", failed.join(","));
    }
    if !highlighted.is_empty() {
        let _ = writeln!(
            out,
            "    linkStyle {} stroke:{GREEN_LINE},stroke-width:3px",
            highlighted.join(",")
        );
    }
    out
}

/// What both renderers draw, decided once so the two pictures always agree.
struct Picture {
    name: String,
    nodes: Vec<PictureNode>,
    edges: Vec<Edge>,
}

struct PictureNode {
    /// The list index, which is what `to` and `dependences` refer to.
    index: usize,
    label: String,
    phase: Option<NodePhase>,
}

struct Edge {
    from: usize,
    to: usize,
    kind: EdgeKind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum EdgeKind {
    /// A `to` edge; `highlighted` when it is a step of the succeeded path.
    Next { highlighted: bool },
    /// `from` must have succeeded before `to` runs.
    Dependence,
}

impl Picture {
    fn new(
        set: &OperationSet,
        outcomes: &BTreeMap<i64, NodePhase>,
        succeeded_path: &[i64],
    ) -> Self {
        let list = &set.spec.adjacency_list;
        let index = |id: i64| usize::try_from(id).ok().filter(|&i| i < list.len());
        let steps: BTreeSet<(usize, usize)> = std::iter::once(0)
            .chain(succeeded_path.iter().copied())
            .map(index)
            .collect::<Vec<_>>()
            .windows(2)
            .filter_map(|w| Some((w[0]?, w[1]?)))
            .collect();

        let mut nodes = Vec::with_capacity(list.len());
        let mut next_edges = Vec::new();
        let mut dependence_edges = Vec::new();
        for (i, node) in list.iter().enumerate() {
            let operation = node.operation.as_deref().filter(|op| !op.trim().is_empty());
            let id_note = if usize::try_from(node.id).ok() == Some(i) {
                String::new()
            } else {
                format!(" (id {})", node.id)
            };
            let label = match (i, operation) {
                (0, None) => format!("start{id_note}"),
                (0, Some(op)) => format!("start{id_note}: {op}"),
                (_, Some(op)) => format!("{i}{id_note}: {op}"),
                (_, None) => format!("{i}{id_note}: (no operation)"),
            };
            let phase = i64::try_from(i)
                .ok()
                .and_then(|id| outcomes.get(&id))
                .copied();
            nodes.push(PictureNode {
                index: i,
                label,
                phase,
            });
            for to in node.to.iter().filter_map(|&t| index(t)) {
                next_edges.push(Edge {
                    from: i,
                    to,
                    kind: EdgeKind::Next {
                        highlighted: steps.contains(&(i, to)),
                    },
                });
            }
            for dep in node.dependences.iter().filter_map(|&d| index(d)) {
                dependence_edges.push(Edge {
                    from: dep,
                    to: i,
                    kind: EdgeKind::Dependence,
                });
            }
        }
        next_edges.extend(dependence_edges);
        Self {
            name: set.metadata.name.clone().unwrap_or_default(),
            nodes,
            edges: next_edges,
        }
    }
}

/// Inside a DOT double-quoted string: `"` must be escaped, and a lone backslash would
/// start one of Graphviz's label escapes (`\n`, `\N`, `\G`…).
fn dot_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// Inside a Mermaid `"…"` label there is no backslash escape: quotes and the
/// characters Mermaid would read as entity or HTML syntax become entity codes.
fn mermaid_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '#' => out.push_str("#35;"),
            '"' => out.push_str("#quot;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testing::set_of;
    use super::*;

    /// start → 1 (a) → 3 (c), start → 2 (b) → 3; 3 depends on 1.
    fn small() -> OperationSet {
        let mut s = set_of(
            "node-diagnosis",
            &[
                (0, &[1, 2], None),
                (1, &[3], Some("pod-list-collector")),
                (2, &[3], Some("core-file-profiler")),
                (3, &[], Some("node-cordon")),
            ],
        );
        s.spec.adjacency_list[3].dependences = vec![1];
        s
    }

    fn outcomes() -> BTreeMap<i64, NodePhase> {
        BTreeMap::from([
            (1, NodePhase::Failed),
            (2, NodePhase::Succeeded),
            (3, NodePhase::Succeeded),
        ])
    }

    #[test]
    fn dot_snapshot() {
        let dot = to_dot(&small(), &outcomes(), &[2, 3]);
        let expected = r##"digraph "node-diagnosis" {
  rankdir=TB;
  node [shape=box, style=rounded];
  n0 [label="start", shape=oval];
  n1 [label="1: pod-list-collector", style="rounded,filled", fillcolor="#ffcdd2", color="#c62828", fontcolor="#b71c1c"];
  n2 [label="2: core-file-profiler", style="rounded,filled", fillcolor="#c8e6c9", color="#2e7d32", fontcolor="#1b5e20"];
  n3 [label="3: node-cordon", style="rounded,filled", fillcolor="#c8e6c9", color="#2e7d32", fontcolor="#1b5e20"];
  n0 -> n1;
  n0 -> n2 [color="#2e7d32", penwidth=3];
  n1 -> n3;
  n2 -> n3 [color="#2e7d32", penwidth=3];
  n1 -> n3 [style=dashed, color=gray, arrowhead=empty, constraint=false];
}
"##;
        assert_eq!(dot, expected);
    }

    #[test]
    fn mermaid_snapshot() {
        let mermaid = to_mermaid(&small(), &outcomes(), &[2, 3]);
        let expected = r#"flowchart TD
    n0(["start"])
    n1["1: pod-list-collector"]
    n2["2: core-file-profiler"]
    n3["3: node-cordon"]
    n0 --> n1
    n0 --> n2
    n1 --> n3
    n2 --> n3
    n1 -.-> n3
    classDef succeeded fill:#c8e6c9,stroke:#2e7d32,color:#1b5e20
    class n2,n3 succeeded
    classDef failed fill:#ffcdd2,stroke:#c62828,color:#b71c1c
    class n1 failed
    linkStyle 1,3 stroke:#2e7d32,stroke-width:3px
"#;
        assert_eq!(mermaid, expected);
    }

    #[test]
    fn without_outcomes_nothing_is_coloured() {
        let none = BTreeMap::new();
        let dot = to_dot(&small(), &none, &[]);
        assert!(!dot.contains("filled"), "{dot}");
        assert!(!dot.contains("penwidth"), "{dot}");
        assert!(dot.contains("  n0 -> n2;\n"), "{dot}");
        let mermaid = to_mermaid(&small(), &none, &[]);
        assert!(!mermaid.contains("classDef"), "{mermaid}");
        assert!(!mermaid.contains("linkStyle"), "{mermaid}");
    }

    #[test]
    fn invalid_graphs_render_what_is_there() {
        let s = set_of(
            "broken",
            &[
                (0, &[1, 7, -2], Some("bogus")),
                (1, &[1, 2, 2], Some("a")),
                (5, &[0], None),
            ],
        );
        let none = BTreeMap::new();
        let dot = to_dot(&s, &none, &[1, 9, 2]);
        for line in [
            "  n0 [label=\"start: bogus\", shape=oval];",
            "  n2 [label=\"2 (id 5): (no operation)\"];",
            "  n0 -> n1 [color=\"#2e7d32\", penwidth=3];",
            "  n1 -> n1;",
            "  n1 -> n2;",
            "  n2 -> n0;",
        ] {
            assert!(
                dot.lines().any(|l| l == line),
                "{line:?} missing from\n{dot}"
            );
        }
        assert_eq!(dot.matches("n1 -> n2;").count(), 2, "{dot}");
        assert!(!dot.contains("n7") && !dot.contains("n-2"), "{dot}");
        let mermaid = to_mermaid(&s, &none, &[1, 9, 2]);
        assert!(mermaid.contains("\n    n1 --> n1\n"), "{mermaid}");
        assert!(mermaid.contains("\n    n2 --> n0\n"), "{mermaid}");
        assert!(mermaid.contains("\n    linkStyle 0 stroke"), "{mermaid}");
        assert!(!mermaid.contains("n7"), "{mermaid}");
    }

    #[test]
    fn labels_are_escaped() {
        let s = set_of(
            "say \"hi\"",
            &[(0, &[1], None), (1, &[], Some("a\"b\\c#d<e>\nf"))],
        );
        let none = BTreeMap::new();
        let dot = to_dot(&s, &none, &[]);
        assert!(dot.starts_with("digraph \"say \\\"hi\\\"\" {\n"), "{dot}");
        assert!(
            dot.contains("  n1 [label=\"1: a\\\"b\\\\c#d<e>\\nf\"];\n"),
            "{dot}"
        );
        let mermaid = to_mermaid(&s, &none, &[]);
        assert!(
            mermaid.contains("    n1[\"1: a#quot;b\\c#35;d#lt;e#gt; f\"]\n"),
            "{mermaid}"
        );
    }
}
