//! The built-ins that read what the API server knows of a node: its status (conditions,
//! taints, addresses, versions), the Lease its kubelet renews in `kube-node-lease`, and
//! the Events about it. They need nothing of the node itself, so they answer for a
//! node that is down: the controller runs them for a Diagnosis with `runOn:
//! Controller` about the node that just failed.

use crate::{RunError, RunOutput};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, NodeCondition};
use kube::Client;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The node's status, as JSON.
pub(crate) const NODE_STATUS: &str = "collector.kubernetes.node.status";
/// Its Ready condition's status alone (`True`, `False`, `Unknown`), for later steps'
/// `argKeys`.
pub(crate) const NODE_READY: &str = "collector.kubernetes.node.ready";
/// The kubelet's Lease, as JSON.
pub(crate) const NODE_LEASE: &str = "collector.kubernetes.node.lease";
/// The Events about the node, as JSON.
pub(crate) const NODE_EVENTS: &str = "collector.kubernetes.node.events";

/// The namespace of the kubelets' Leases.
const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// The most Events kept, the latest ones: a flapping node has thousands.
const EVENTS_KEPT: usize = 50;

fn encode(value: &Value) -> Result<String, RunError> {
    serde_json::to_string(value).map_err(|e| RunError::caused_by(format!("cannot encode: {e}"), e))
}

fn condition(c: &NodeCondition) -> Value {
    json!({
        "type": c.type_,
        "status": c.status,
        "reason": c.reason,
        "message": c.message,
        "lastHeartbeatTime": c.last_heartbeat_time.as_ref().map(|t| t.0.to_string()),
        "lastTransitionTime": c.last_transition_time.as_ref().map(|t| t.0.to_string()),
    })
}

/// `/processor/nodeStatusCollector`: the node's conditions, taints, schedulability,
/// addresses, versions and resources, and its Ready state alone.
pub(crate) async fn node_status(client: &Client, node: &str) -> Result<RunOutput, RunError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let found = nodes
        .get_opt(node)
        .await
        .map_err(|e| RunError::caused_by(format!("cannot read node {node}: {e}"), e))?
        .ok_or_else(|| RunError::new(format!("there is no node {node}")))?;
    let (summary, ready) = status_summary(&found);
    let output = describe(node, &found, &ready);
    Ok(RunOutput {
        results: BTreeMap::from([
            (NODE_STATUS.to_owned(), encode(&summary)?),
            (NODE_READY.to_owned(), ready),
        ]),
        output,
    })
}

/// The node as a result, and its Ready condition's status (`Unknown` when it has none).
fn status_summary(node: &Node) -> (Value, String) {
    let status = node.status.clone().unwrap_or_default();
    let spec = node.spec.clone().unwrap_or_default();
    let conditions = status.conditions.unwrap_or_default();
    let ready = conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map_or_else(|| "Unknown".to_owned(), |c| c.status.clone());
    let info = status.node_info.map(|i| {
        json!({
            "kubeletVersion": i.kubelet_version,
            "containerRuntimeVersion": i.container_runtime_version,
            "kernelVersion": i.kernel_version,
            "osImage": i.os_image,
        })
    });
    let summary = json!({
        "name": node.metadata.name,
        "ready": ready,
        "unschedulable": spec.unschedulable.unwrap_or(false),
        "conditions": conditions.iter().map(condition).collect::<Vec<_>>(),
        "taints": spec.taints.unwrap_or_default(),
        "addresses": status.addresses.unwrap_or_default(),
        "nodeInfo": info,
        "capacity": status.capacity.unwrap_or_default(),
        "allocatable": status.allocatable.unwrap_or_default(),
        "created": node.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()),
    });
    (summary, ready)
}

/// One line about the node: its Ready state since when and why, and its taints.
fn describe(name: &str, node: &Node, ready: &str) -> String {
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let mut line = format!("node {name}: Ready={ready}");
    if let Some(c) = conditions.iter().find(|c| c.type_ == "Ready") {
        if let Some(t) = &c.last_transition_time {
            line.push_str(&format!(" since {}", t.0));
        }
        if let Some(reason) = c.reason.as_deref().filter(|r| !r.is_empty()) {
            line.push_str(&format!(" ({reason})"));
        }
    }
    let taints: Vec<String> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect();
    if !taints.is_empty() {
        line.push_str(&format!("; taints {}", taints.join(", ")));
    }
    line
}

/// `/processor/nodeLeaseCollector`: the Lease the node's kubelet renews, and whether it
/// has expired by this process's clock.
pub(crate) async fn node_lease(client: &Client, node: &str) -> Result<RunOutput, RunError> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NODE_LEASE_NAMESPACE);
    let lease = leases.get_opt(node).await.map_err(|e| {
        RunError::new(format!(
            "cannot read Lease {NODE_LEASE_NAMESPACE}/{node}: {e}"
        ))
    })?;
    let (summary, output) = lease_summary(node, lease.as_ref(), jiff::Timestamp::now());
    Ok(RunOutput {
        results: BTreeMap::from([(NODE_LEASE.to_owned(), encode(&summary)?)]),
        output,
    })
}

/// The Lease as a result, with its age at `now`, and one line about it.
fn lease_summary(node: &str, lease: Option<&Lease>, now: jiff::Timestamp) -> (Value, String) {
    let Some(spec) = lease.and_then(|l| l.spec.as_ref()) else {
        return (
            json!({"found": false}),
            format!("node {node} has no Lease in {NODE_LEASE_NAMESPACE}"),
        );
    };
    let renewed = spec.renew_time.as_ref().map(|t| t.0);
    let elapsed = renewed.map(|t| now.duration_since(t));
    let age = elapsed.map(|e| e.as_secs());
    let duration = spec.lease_duration_seconds;
    // Expired once the renewal is older than the duration, to the microsecond: whole
    // seconds would keep a Lease 20.9 s old "fresh" for a duration of 20 s.
    let expired = match (elapsed, duration) {
        (Some(elapsed), Some(duration)) => {
            Some(elapsed > jiff::SignedDuration::from_secs(i64::from(duration)))
        }
        _ => None,
    };
    let summary = json!({
        "found": true,
        "holderIdentity": spec.holder_identity,
        "renewTime": renewed.map(|t| t.to_string()),
        "leaseDurationSeconds": duration,
        "secondsSinceRenewal": age,
        "expired": expired,
    });
    let line = match (age, expired) {
        (Some(age), Some(true)) => format!(
            "the kubelet of node {node} last renewed its Lease {age}s ago, past its {}s: expired",
            duration.unwrap_or_default()
        ),
        (Some(age), _) => format!("the kubelet of node {node} renewed its Lease {age}s ago"),
        (None, _) => format!("the Lease of node {node} was never renewed"),
    };
    (summary, line)
}

/// `/processor/nodeEventCollector`: the Events about the node (every namespace;
/// the node controller and the kubelet record theirs in `default`), oldest first, the
/// latest [`EVENTS_KEPT`].
pub(crate) async fn node_events(client: &Client, node: &str) -> Result<RunOutput, RunError> {
    let events: Api<Event> = Api::all(client.clone());
    let params = ListParams::default().fields(&format!(
        "involvedObject.kind=Node,involvedObject.name={node}"
    ));
    let listed = events
        .list(&params)
        .await
        .map_err(|e| RunError::caused_by(format!("cannot list the Events of node {node}: {e}"), e))?
        .items;
    let (kept, output) = events_summary(node, listed);
    Ok(RunOutput {
        results: BTreeMap::from([(NODE_EVENTS.to_owned(), encode(&kept)?)]),
        output,
    })
}

/// The latest Events, oldest first, as a result, and one line naming the last one.
fn events_summary(node: &str, mut events: Vec<Event>) -> (Value, String) {
    let when = |e: &Event| {
        e.last_timestamp
            .as_ref()
            .map(|t| t.0)
            .or_else(|| e.event_time.as_ref().map(|t| t.0))
            .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
    };
    events.sort_by_key(when);
    let total = events.len();
    let kept: Vec<Value> = events
        .iter()
        .skip(total.saturating_sub(EVENTS_KEPT))
        .map(|e| {
            json!({
                "type": e.type_,
                "reason": e.reason,
                "message": e.message,
                "source": e.source.as_ref().and_then(|s| s.component.clone())
                    .or_else(|| e.reporting_component.clone()),
                "count": e.count,
                "lastTimestamp": when(e).map(|t| t.to_string()),
            })
        })
        .collect();
    let line = match events.last() {
        Some(last) => format!(
            "{total} Events about node {node}; the last: {}: {}",
            last.reason.as_deref().unwrap_or("-"),
            last.message.as_deref().unwrap_or("")
        ),
        None => format!("no Events about node {node}"),
    };
    (Value::Array(kept), line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn down_node() -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "worker-2"},
            "spec": {"taints": [
                {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]},
            "status": {"conditions": [
                {"type": "MemoryPressure", "status": "Unknown"},
                {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                 "message": "Kubelet stopped posting node status.",
                 "lastTransitionTime": "2026-11-28T10:00:00Z"}],
                "nodeInfo": {"kubeletVersion": "v1.24.17", "machineID": "", "systemUUID": "",
                    "bootID": "", "kernelVersion": "6.1", "osImage": "Debian",
                    "containerRuntimeVersion": "containerd://1.6", "kubeProxyVersion": "",
                    "operatingSystem": "linux", "architecture": "amd64"}},
        }))
        .unwrap()
    }

    #[test]
    fn a_down_node_is_summed_up_with_its_ready_state_taints_and_versions() {
        let node = down_node();
        let (summary, ready) = status_summary(&node);
        assert_eq!(ready, "Unknown");
        assert_eq!(summary["ready"], "Unknown");
        assert_eq!(summary["conditions"][1]["reason"], "NodeStatusUnknown");
        assert_eq!(summary["taints"][1]["effect"], "NoExecute");
        assert_eq!(summary["nodeInfo"]["kubeletVersion"], "v1.24.17");
        assert_eq!(
            describe("worker-2", &node, &ready),
            "node worker-2: Ready=Unknown since 2026-11-28T10:00:00Z (NodeStatusUnknown); \
             taints node.kubernetes.io/unreachable:NoSchedule, \
             node.kubernetes.io/unreachable:NoExecute"
        );
    }

    #[test]
    fn a_lease_past_its_duration_is_expired() {
        let lease: Lease = serde_json::from_value(json!({
            "metadata": {"name": "worker-2", "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": "worker-2", "leaseDurationSeconds": 40,
                     "renewTime": "2026-11-28T10:00:00.000000Z"}}))
        .unwrap();
        let now: jiff::Timestamp = "2026-11-28T10:01:00Z".parse().unwrap();
        let (summary, line) = lease_summary("worker-2", Some(&lease), now);
        assert_eq!(summary["secondsSinceRenewal"], 60);
        assert_eq!(summary["expired"], true);
        assert!(line.contains("60s ago, past its 40s: expired"), "{line}");
        let fresh: jiff::Timestamp = "2026-11-28T10:00:10Z".parse().unwrap();
        assert_eq!(
            lease_summary("worker-2", Some(&lease), fresh).0["expired"],
            false
        );
        assert_eq!(lease_summary("worker-2", None, now).0["found"], false);
        // Past the duration by a fraction of a second: expired, though its whole
        // seconds equal the duration.
        let just: jiff::Timestamp = "2026-11-28T10:00:40.300Z".parse().unwrap();
        let (summary, _) = lease_summary("worker-2", Some(&lease), just);
        assert_eq!(summary["secondsSinceRenewal"], 40);
        assert_eq!(summary["expired"], true);
        let exactly: jiff::Timestamp = "2026-11-28T10:00:40Z".parse().unwrap();
        assert_eq!(
            lease_summary("worker-2", Some(&lease), exactly).0["expired"],
            false
        );
    }

    #[test]
    fn events_are_kept_oldest_first_and_the_latest_named() {
        let event = |reason: &str, at: &str| -> Event {
            serde_json::from_value(json!({
                "metadata": {"name": reason, "namespace": "default"},
                "involvedObject": {"kind": "Node", "name": "worker-2"},
                "reason": reason, "message": format!("{reason} happened"),
                "source": {"component": "node-controller"},
                "lastTimestamp": at}))
            .unwrap()
        };
        let (kept, line) = events_summary(
            "worker-2",
            vec![
                event("NodeNotReady", "2026-11-28T10:00:20Z"),
                event("Starting", "2026-11-28T09:00:00Z"),
            ],
        );
        assert_eq!(kept[0]["reason"], "Starting");
        assert_eq!(kept[1]["source"], "node-controller");
        assert_eq!(
            line,
            "2 Events about node worker-2; the last: NodeNotReady: NodeNotReady happened"
        );
        let many: Vec<Event> = (0..60)
            .map(|i| event(&format!("E{i:02}"), &format!("2026-11-28T10:00:{i:02}Z")))
            .collect();
        let (kept, _) = events_summary("worker-2", many);
        assert_eq!(kept.as_array().unwrap().len(), EVENTS_KEPT);
        assert_eq!(kept[0]["reason"], "E10");
    }
}
