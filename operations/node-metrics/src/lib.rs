//! Node metrics: a hook that exports, once a minute, whether each node is ready and what it
//! can allocate, as Prometheus gauges.
//!
//! The `nodes` binding never runs the hook (`executeHookOnEvent: []`, no synchronization
//! run): it only keeps a snapshot of the nodes, filtered down to what the metrics need, and
//! drops the full objects. The `every-minute` schedule binding includes that snapshot and
//! turns it into gauges of the metric group `node-metrics`:
//!
//! - `node_ready{node}`: 1 when the node's `Ready` condition is `True`, else 0;
//! - `node_allocatable_cpu_cores{node}` and
//!   `node_allocatable_memory_bytes{node}`: from `status.allocatable`, when the node
//!   reports it;
//! - `nodes_total` and `nodes_ready`: how many nodes there are, and how many
//!   of them are ready.
//!
//! Each run expires the group before setting the gauges again, so the series of a deleted
//! node disappear, and an empty snapshot leaves no series at all. A filter result not
//! shaped like the output of `NODE_FILTER` fails the run, with an error naming the node,
//! and leaves the previous series in place.

use operon_sdk::metrics::{self, Gauge};
use operon_sdk::{
    BindingType, Error, Hook, HookConfig, HookInput, HookOutput, KubernetesBinding, Metric,
    ObjectAndFilter, ResultExt, ScheduleBinding, debug, info,
};
use serde::Deserialize;
use serde_json::Value;

/// The name of the snapshot-only node binding.
const NODES: &str = "nodes";
/// The metric group of every series this hook sets.
const GROUP: &str = "node-metrics";
/// Reduces a Node to its name, the status of its `Ready` condition (`Unknown` when it has
/// none) and its allocatable cpu and memory, as Kubernetes quantities.
const NODE_FILTER: &str = r#"{
    name: .metadata.name,
    ready: ([.status.conditions[]? | select(.type == "Ready") | .status][0] // "Unknown"),
    cpu: .status.allocatable.cpu,
    memory: .status.allocatable.memory
}"#;

struct NodeMetrics;

impl Hook for NodeMetrics {
    fn configure() -> Result<HookConfig, Error> {
        Ok(HookConfig::new()
            .schedule(
                ScheduleBinding::new("every-minute", "*/1 * * * *")
                    .include_snapshots_from(&[NODES]),
            )
            .kubernetes(
                KubernetesBinding::new(NODES, "Node")
                    .execute_hook_on_event(&[])
                    .execute_hook_on_synchronization(false)
                    .jq_filter(NODE_FILTER)
                    .keep_full_objects_in_memory(false),
            ))
    }

    fn handle(input: HookInput) -> Result<HookOutput, Error> {
        // A combined run carries several schedule contexts; the newest has the newest
        // snapshot, and the older ones add nothing to it.
        let Some(context) = (input.binding_contexts.iter().rev())
            .find(|context| context.type_ == BindingType::Schedule)
        else {
            debug!("no schedule context, nothing to export"; contexts = input.binding_contexts.len());
            return Ok(HookOutput::default());
        };
        // A missing snapshot is a host fault, not an empty cluster: fail rather than expire.
        let Some(snapshot) = context.snapshot(NODES) else {
            operon_sdk::bail!("the schedule context carries no `{NODES}` snapshot");
        };
        let nodes = parse_nodes(&snapshot.objects)?;

        // Expiring first drops the series of deleted nodes, whether the host expires the
        // whole group or only the series this run does not set again.
        metrics::expire_group(GROUP)?;
        for (gauge, value) in gauges(&nodes) {
            gauge.set(value)?;
        }
        let ready = nodes.iter().filter(|node| node.ready).count();
        info!("{} nodes, {ready} ready", nodes.len(); group = GROUP);
        Ok(HookOutput::default())
    }
}

operon_sdk::hook!(NodeMetrics);

/// One node, as its filter result describes it.
#[derive(Debug, Clone, PartialEq)]
struct Node {
    name: String,
    /// Whether the `Ready` condition is `True`; `False` and `Unknown` are both not ready.
    ready: bool,
    /// `status.allocatable.cpu` in cores; `None` until the kubelet reports it.
    cpu_cores: Option<f64>,
    /// `status.allocatable.memory` in bytes; `None` until the kubelet reports it.
    memory_bytes: Option<f64>,
}

/// The filter result of [`NODE_FILTER`], before its quantities are parsed.
#[derive(Deserialize)]
struct NodeFilterResult {
    name: String,
    ready: String,
    cpu: Option<String>,
    memory: Option<String>,
}

/// Parses the filter results of the `nodes` snapshot.
fn parse_nodes(objects: &[ObjectAndFilter]) -> Result<Vec<Node>, Error> {
    (objects.iter().enumerate())
        .map(|(index, object)| parse_node(index, object))
        .collect()
}

/// Parses one filter result; errors name the node, or its position when it has no name.
fn parse_node(index: usize, object: &ObjectAndFilter) -> Result<Node, Error> {
    let value = object.parse_filter_result()?.unwrap_or(Value::Null);
    let node = match value.get("name").and_then(Value::as_str) {
        Some(name) => format!("node `{name}`"),
        None => format!("node #{index}"),
    };
    let result: NodeFilterResult = serde_json::from_value(value)
        .with_context(|| format!("{node} in the `{NODES}` snapshot"))?;
    let quantity = |field: &str, text: Option<String>| {
        text.map(|text| {
            parse_quantity(&text).ok_or_else(|| {
                Error::new(format_args!(
                    "{node}: allocatable {field} {text:?} is not a Kubernetes quantity"
                ))
            })
        })
        .transpose()
    };
    Ok(Node {
        ready: result.ready == "True",
        cpu_cores: quantity("cpu", result.cpu)?,
        memory_bytes: quantity("memory", result.memory)?,
        name: result.name,
    })
}

/// Parses a Kubernetes quantity such as `3800m`, `16Gi`, `128974848` or `129e6`.
fn parse_quantity(text: &str) -> Option<f64> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '+' | '-')))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    // Dividing for negative exponents keeps `3800m` at exactly 3.8, which `* 1e-3` misses.
    let decimal = |exponent: i32| match exponent {
        ..0 => number / 10.0_f64.powi(-exponent),
        _ => number * 10.0_f64.powi(exponent),
    };
    let binary = |power_of_1024: i32| number * 2.0_f64.powi(10 * power_of_1024);
    let value = match suffix {
        "" => number,
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        exponent => decimal(exponent.strip_prefix(['e', 'E'])?.parse().ok()?),
    };
    Some(value).filter(|value| value.is_finite())
}

/// The gauges to set for `nodes`, each with its value; none for an empty snapshot.
fn gauges(nodes: &[Node]) -> Vec<(Metric<Gauge>, f64)> {
    let gauge = |name: &str| Metric::gauge(name).group(GROUP);
    let mut gauges = Vec::new();
    for node in nodes {
        let of_node = |name: &str| gauge(name).label("node", &node.name);
        gauges.push((of_node("node_ready"), f64::from(u8::from(node.ready))));
        if let Some(cores) = node.cpu_cores {
            gauges.push((of_node("node_allocatable_cpu_cores"), cores));
        }
        if let Some(bytes) = node.memory_bytes {
            gauges.push((of_node("node_allocatable_memory_bytes"), bytes));
        }
    }
    if !nodes.is_empty() {
        let ready = nodes.iter().filter(|node| node.ready).count();
        gauges.push((gauge("nodes_total"), nodes.len() as f64));
        gauges.push((gauge("nodes_ready"), ready as f64));
    }
    gauges
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn filtered(result: Value) -> ObjectAndFilter {
        ObjectAndFilter {
            object: None,
            filter_result: Some(result.to_string()),
        }
    }

    fn node(name: &str, ready: bool, cpu_cores: Option<f64>, memory_bytes: Option<f64>) -> Node {
        Node {
            name: name.into(),
            ready,
            cpu_cores,
            memory_bytes,
        }
    }

    #[test]
    fn configures_a_schedule_over_a_snapshot_only_binding() {
        let config = NodeMetrics::configure().unwrap();

        let [schedule] = config.schedule.as_slice() else {
            panic!("expected one schedule binding, got {:?}", config.schedule);
        };
        assert_eq!(schedule.name, "every-minute");
        assert_eq!(schedule.crontab, "*/1 * * * *");
        assert_eq!(schedule.include_snapshots_from, [NODES]);

        let [nodes] = config.kubernetes.as_slice() else {
            panic!(
                "expected one kubernetes binding, got {:?}",
                config.kubernetes
            );
        };
        assert_eq!((nodes.name.as_str(), nodes.kind.as_str()), (NODES, "Node"));
        assert_eq!(nodes.execute_hook_on_event, Some(vec![]));
        assert_eq!(nodes.execute_hook_on_synchronization, Some(false));
        assert_eq!(nodes.keep_full_objects_in_memory, Some(false));
        assert_eq!(nodes.jq_filter.as_deref(), Some(NODE_FILTER));
    }

    #[test]
    fn parses_filter_results() {
        let nodes = parse_nodes(&[
            filtered(json!({"name": "a", "ready": "True", "cpu": "3800m", "memory": "16Gi"})),
            filtered(json!({"name": "b", "ready": "Unknown", "cpu": null, "memory": null})),
            filtered(json!({"name": "c", "ready": "False"})),
        ])
        .unwrap();
        assert_eq!(
            nodes,
            [
                node("a", true, Some(3.8), Some(16.0 * 1024.0 * 1024.0 * 1024.0)),
                node("b", false, None, None),
                node("c", false, None, None),
            ]
        );
    }

    #[test]
    fn malformed_filter_results_name_the_node() {
        let missing_ready = parse_nodes(&[filtered(json!({"name": "worker-1", "cpu": "4"}))]);
        assert_eq!(
            missing_ready.unwrap_err().message(),
            "node `worker-1` in the `nodes` snapshot: missing field `ready`"
        );

        let bad_cpu = parse_nodes(&[filtered(
            json!({"name": "worker-2", "ready": "True", "cpu": "four"}),
        )]);
        assert_eq!(
            bad_cpu.unwrap_err().message(),
            r#"node `worker-2`: allocatable cpu "four" is not a Kubernetes quantity"#
        );

        let nameless = parse_nodes(&[
            filtered(json!({"name": "a", "ready": "True"})),
            filtered(Value::Null),
        ]);
        assert!(
            nameless
                .unwrap_err()
                .message()
                .starts_with("node #1 in the `nodes` snapshot: invalid type: null"),
        );
    }

    #[test]
    fn parses_quantities() {
        assert_eq!(parse_quantity("4"), Some(4.0));
        assert_eq!(parse_quantity("250m"), Some(0.25));
        assert_eq!(parse_quantity("1.5k"), Some(1500.0));
        assert_eq!(parse_quantity("16393932Ki"), Some(16_393_932.0 * 1024.0));
        assert_eq!(parse_quantity("2Mi"), Some(2.0 * 1024.0 * 1024.0));
        assert_eq!(parse_quantity("129e6"), Some(129e6));
        assert_eq!(parse_quantity("1E"), Some(1e18));
        for invalid in ["", "m", "four", "12Kb", "1e", "1.2.3", "1e999"] {
            assert_eq!(parse_quantity(invalid), None, "{invalid:?}");
        }
    }

    #[test]
    fn sets_gauges_per_node_and_totals() {
        let gauge = |name: &str| Metric::gauge(name).group(GROUP);
        let gauges = gauges(&[
            node("a", true, Some(4.0), Some(1024.0)),
            node("b", false, None, None),
        ]);
        assert_eq!(
            gauges,
            [
                (gauge("node_ready").label("node", "a"), 1.0),
                (gauge("node_allocatable_cpu_cores").label("node", "a"), 4.0),
                (
                    gauge("node_allocatable_memory_bytes").label("node", "a"),
                    1024.0
                ),
                (gauge("node_ready").label("node", "b"), 0.0),
                (gauge("nodes_total"), 2.0),
                (gauge("nodes_ready"), 1.0),
            ]
        );
    }

    #[test]
    fn an_empty_snapshot_sets_no_gauges() {
        assert_eq!(gauges(&[]), []);
    }
}
