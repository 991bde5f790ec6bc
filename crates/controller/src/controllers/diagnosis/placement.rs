//! Where a Diagnosis runs: on the node it names (`spec.nodeName`, or the node of the
//! pod of `spec.podReference`), by that node's agent; or, naming none or with
//! `spec.runOn: Controller`, in the controller. An agent shows it is alive by holding
//! the Lease `operon-agent-<node>` in its namespace; whether its node is up is the
//! Node's Ready condition, which the node controller keeps.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::Api;
use operon_data::api::{Diagnosis, DiagnosisRunOn};
use sha2::Digest as _;

/// The prefix of the agents' Lease names.
pub(crate) const AGENT_LEASE_PREFIX: &str = "operon-agent-";

/// The Lease the agent of `node` holds.
pub(crate) fn agent_lease_name(node: &str) -> String {
    let name = format!("{AGENT_LEASE_PREFIX}{node}");
    if name.len() <= operon_data::conventions::names::MAX_SUBDOMAIN {
        name
    } else {
        // Object names stop at 253 characters; a digest keeps long node names apart.
        let digest = sha2::Sha256::digest(node.as_bytes());
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        format!("{AGENT_LEASE_PREFIX}{hex}")
    }
}

/// Why a Diagnosis has no node to run on (yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unplaced {
    /// `spec.nodeName` names no Node.
    NodeNotFound(String),
    /// `spec.podReference` names no Pod.
    PodNotFound(String),
    /// The pod is not scheduled yet.
    PodNotScheduled(String),
}

impl Unplaced {
    /// The condition reason.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Self::NodeNotFound(_) => "NodeNotFound",
            Self::PodNotFound(_) => "PodNotFound",
            Self::PodNotScheduled(_) => "PodNotScheduled",
        }
    }

    /// Whether waiting may help.
    pub(crate) fn may_resolve(&self) -> bool {
        matches!(self, Self::PodNotScheduled(_))
    }

    /// The condition message.
    pub(crate) fn message(&self) -> String {
        match self {
            Self::NodeNotFound(node) => format!("spec.nodeName: there is no Node {node:?}"),
            Self::PodNotFound(pod) => format!("spec.podReference: there is no Pod {pod}"),
            Self::PodNotScheduled(pod) => {
                format!("spec.podReference: Pod {pod} is not scheduled to a node yet")
            }
        }
    }
}

/// The node `diagnosis` runs on: `Ok(None)` when it names none.
pub(crate) async fn resolve(
    client: &Client,
    diagnosis: &Diagnosis,
) -> Result<Result<Option<String>, Unplaced>, kube::Error> {
    if diagnosis.spec.run_on == Some(DiagnosisRunOn::Controller) {
        return Ok(Ok(None));
    }
    if let Some(node) = &diagnosis.spec.node_name {
        let nodes: Api<Node> = Api::all(client.clone());
        return Ok(match nodes.get_metadata_opt(node).await? {
            Some(_) => Ok(Some(node.clone())),
            None => Err(Unplaced::NodeNotFound(node.clone())),
        });
    }
    if let Some(pod) = &diagnosis.spec.pod_reference {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
        let shown = format!("{}/{}", pod.namespace, pod.name);
        return Ok(match pods.get_opt(&pod.name).await? {
            None => Err(Unplaced::PodNotFound(shown)),
            Some(found) => match found.spec.and_then(|s| s.node_name) {
                Some(node) => Ok(Some(node)),
                None => Err(Unplaced::PodNotScheduled(shown)),
            },
        });
    }
    Ok(Ok(None))
}

/// What the API server says of a node a Diagnosis is placed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NodeHealth {
    /// Its Ready condition is `True`.
    Ready,
    /// Its Ready condition is `False` or `Unknown` (the kubelet stopped posting its
    /// status).
    NotReady {
        /// The condition's status: `False` or `Unknown`.
        status: String,
        /// The condition's reason and message, as the kubelet or the node controller
        /// wrote them.
        reason: Option<String>,
        /// Its message.
        message: Option<String>,
        /// When it stopped being Ready (the condition's last transition).
        since: Option<jiff::Timestamp>,
    },
    /// There is no such Node (any more).
    Gone,
    /// It has no Ready condition yet (just registered, or a Node no kubelet posts for):
    /// nothing says it is down.
    Unreported,
}

impl NodeHealth {
    /// Whether the node is known to be down: not Ready, or gone.
    pub(crate) fn is_down(&self) -> bool {
        matches!(self, Self::NotReady { .. } | Self::Gone)
    }

    /// What it says of `node`, for a condition message.
    pub(crate) fn describe(&self, node: &str) -> String {
        match self {
            Self::Ready => format!("node {node} is Ready"),
            Self::Gone => format!("node {node} no longer exists"),
            Self::Unreported => format!("node {node} has not reported its Ready condition"),
            Self::NotReady {
                status,
                reason,
                message,
                since,
            } => {
                let mut text = format!("node {node} is not Ready (Ready={status}");
                if let Some(since) = since {
                    text.push_str(&format!(" since {since}"));
                }
                match (reason, message) {
                    (Some(reason), Some(message)) => {
                        text.push_str(&format!(", {reason}: {message}"));
                    }
                    (Some(reason), None) => text.push_str(&format!(", {reason}")),
                    (None, Some(message)) => text.push_str(&format!(", {message}")),
                    (None, None) => {}
                }
                text.push(')');
                text
            }
        }
    }
}

/// The health of `node`, as its Ready condition tells.
pub(crate) fn health_of(node: &Node) -> NodeHealth {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|conditions| conditions.iter().find(|c| c.type_ == "Ready"));
    match ready {
        Some(c) if c.status == "True" => NodeHealth::Ready,
        Some(c) => NodeHealth::NotReady {
            status: c.status.clone(),
            reason: c.reason.clone().filter(|r| !r.is_empty()),
            message: c.message.clone().filter(|m| !m.is_empty()),
            since: c.last_transition_time.as_ref().map(|t| t.0),
        },
        None => NodeHealth::Unreported,
    }
}

/// The health of the Node named `node`.
pub(crate) async fn node_health(nodes: &Api<Node>, node: &str) -> Result<NodeHealth, kube::Error> {
    Ok(match nodes.get_opt(node).await? {
        Some(found) => health_of(&found),
        None => NodeHealth::Gone,
    })
}

/// Whether the agent of `node` holds its Lease now: renewed within its duration, as
/// this controller's clock tells (agents and controllers run on synchronised nodes).
pub(crate) async fn agent_alive(
    leases: &Api<Lease>,
    node: &str,
    now: jiff::Timestamp,
) -> Result<bool, kube::Error> {
    let Some(lease) = leases.get_opt(&agent_lease_name(node)).await? else {
        return Ok(false);
    };
    Ok(lease_held(&lease, now))
}

/// Whether `lease` has a holder that renewed it within its duration at `now`.
pub(crate) fn lease_held(lease: &Lease, now: jiff::Timestamp) -> bool {
    let Some(spec) = &lease.spec else {
        return false;
    };
    if spec.holder_identity.as_deref().unwrap_or("").is_empty() {
        return false;
    }
    let (Some(renewed), Some(seconds)) = (&spec.renew_time, spec.lease_duration_seconds) else {
        return false;
    };
    let expires = renewed.0 + jiff::SignedDuration::from_secs(i64::from(seconds));
    expires >= now
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn lease(holder: Option<&str>, renewed: jiff::Timestamp, seconds: i32) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                renew_time: Some(MicroTime(renewed)),
                lease_duration_seconds: Some(seconds),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    #[test]
    fn a_lease_is_held_until_its_duration_passes() {
        let t: jiff::Timestamp = "2026-11-23T10:00:00Z".parse().unwrap();
        let later = |s| t + jiff::SignedDuration::from_secs(s);
        assert!(lease_held(&lease(Some("agent-a"), t, 40), later(40)));
        assert!(!lease_held(&lease(Some("agent-a"), t, 40), later(41)));
        assert!(!lease_held(&lease(None, t, 40), t), "released");
        assert!(!lease_held(&Lease::default(), t));
    }

    #[test]
    fn lease_names_stay_valid_object_names() {
        assert_eq!(agent_lease_name("worker-1"), "operon-agent-worker-1");
        let long = "n".repeat(250);
        let name = agent_lease_name(&long);
        assert!(name.len() <= 253);
        assert_ne!(name, agent_lease_name(&"m".repeat(250)));
    }
}
