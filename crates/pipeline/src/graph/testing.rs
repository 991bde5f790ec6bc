//! Test fixtures for the graph module: OperationSets written as compact node tables.

use operon_data::api::{Node, OperationSet, OperationSetSpec};

/// One node as `(id, to, operation)`.
pub(super) type Row<'a> = (i64, &'a [i64], Option<&'a str>);

/// An OperationSet named `test` with these nodes.
pub(super) fn set(rows: &[Row<'_>]) -> OperationSet {
    set_of("test", rows)
}

/// An OperationSet named `name` with these nodes.
pub(super) fn set_of(name: &str, rows: &[Row<'_>]) -> OperationSet {
    let adjacency_list = rows
        .iter()
        .map(|&(id, to, operation)| Node {
            id,
            to: to.to_vec(),
            operation: operation.map(str::to_owned),
            dependences: Vec::new(),
        })
        .collect();
    OperationSet::new(name, OperationSetSpec { adjacency_list })
}

/// `diamonds` diamonds in series: the start node (the first join) fans out to `a_1` and
/// `b_1`, both lead to `join_1`, which fans out to `a_2` and `b_2`, and so on; the last
/// join is the only sink. Diamond `i` (from 1) uses ids `3i-2` (a), `3i-1` (b), `3i`
/// (join), so the graph has `2^diamonds` paths.
pub(super) fn ladder(diamonds: usize) -> OperationSet {
    let mut nodes = vec![Node {
        id: 0,
        to: Vec::new(),
        operation: None,
        dependences: Vec::new(),
    }];
    for i in 1..=diamonds {
        let (a, b, join) = (3 * i - 2, 3 * i - 1, 3 * i);
        let id = |n: usize| i64::try_from(n).expect("small test graph");
        nodes[join - 3].to = vec![id(a), id(b)];
        for (n, op) in [(a, "probe-a"), (b, "probe-b")] {
            nodes.push(Node {
                id: id(n),
                to: vec![id(join)],
                operation: Some(op.to_owned()),
                dependences: Vec::new(),
            });
        }
        nodes.push(Node {
            id: id(join),
            to: Vec::new(),
            operation: Some("join".to_owned()),
            dependences: Vec::new(),
        });
    }
    OperationSet::new(
        "ladder",
        OperationSetSpec {
            adjacency_list: nodes,
        },
    )
}
