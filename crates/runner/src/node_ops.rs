//! The built-in operations of the node agent and of the controller, under KubeDiag's
//! processor paths (`/processor/podListCollector`, `/processor/nodeCordon`, ...). An `httpServer` step
//! with neither address nor port names one of them, as it named a handler of
//! KubeDiag's agent; here the agent runs it itself, with no HTTP endpoint of its own,
//! so nothing but a Diagnosis placed on the node (created by someone RBAC allows to)
//! makes it act.
//!
//! What only reads the node's own files is a wasm operation written with the SDK
//! (`operations/node-collector`), run in the sandbox with `/proc` granted read-only:
//! the process and mount lists. What reads the cluster uses the agent's credentials,
//! which grant reading pods (`pods`); the systemd unit states come from systemd over
//! the node's system bus (`systemd`). What changes the node (cordon, uncordon) runs
//! only for a Diagnosis that names a ServiceAccount RBAC allows to patch the node
//! (`node`).
//!
//! The controller ([`ControllerOps`]) runs those that only read the API server, about
//! the node the Diagnosis names: the pods ones, and what the cluster knows of the node
//! itself (`node_state`: its status, its kubelet's Lease, its Events), so that a
//! Diagnosis about a node whose agent is down still has something to read.

mod node;
mod node_state;
mod pods;
mod systemd;

use crate::builtin::BuiltIns;
use crate::processors::{ProcessorError, Processors};
use crate::{RunError, RunOutput, RunRequest, Runner};
use futures::future::BoxFuture;
use kube::Client;
use operon_data::api::{Operation, OperationSpec, Processor, WasmProcessor};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

pub use node::NodeChange;
pub use systemd::DEFAULT_BUS as DEFAULT_SYSTEMD_BUS;

/// The module of the built-ins written as wasm operations, found by name in the
/// agent's modules directory (`--modules`).
pub(crate) const COLLECTOR_MODULE: &str = "node_collector";

/// One built-in operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BuiltIn {
    /// The pods on the node.
    PodList,
    /// One pod, named by `pod.namespace` and `pod.name`.
    PodDetail,
    /// The containers of the pods on the node, from their status.
    ContainerList,
    /// The node's processes (wasm, `/proc`).
    ProcessList,
    /// The node's mounts (wasm, `/proc`).
    MountInfo,
    /// The state of systemd units (over the system D-Bus).
    SystemdUnits,
    /// Marks the node unschedulable.
    NodeCordon,
    /// Marks the node schedulable again.
    NodeUncordon,
    /// The node's conditions, taints and versions, from the API server.
    NodeStatus,
    /// The Lease the node's kubelet renews.
    NodeLease,
    /// The Events about the node.
    NodeEvents,
}

impl BuiltIn {
    /// Every built-in, in the order they are listed.
    pub(crate) const ALL: [BuiltIn; 11] = [
        BuiltIn::PodList,
        BuiltIn::PodDetail,
        BuiltIn::ContainerList,
        BuiltIn::ProcessList,
        BuiltIn::MountInfo,
        BuiltIn::SystemdUnits,
        BuiltIn::NodeCordon,
        BuiltIn::NodeUncordon,
        BuiltIn::NodeStatus,
        BuiltIn::NodeLease,
        BuiltIn::NodeEvents,
    ];

    /// Its path, as KubeDiag's agent serves it (`nodeUncordon` and
    /// `systemdUnitCollector` are Operon's).
    pub(crate) fn path(self) -> &'static str {
        match self {
            BuiltIn::PodList => "/processor/podListCollector",
            BuiltIn::PodDetail => "/processor/podDetailCollector",
            BuiltIn::ContainerList => "/processor/containerCollector",
            BuiltIn::ProcessList => "/processor/processCollector",
            BuiltIn::MountInfo => "/processor/mountInfoCollector",
            BuiltIn::SystemdUnits => "/processor/systemdUnitCollector",
            BuiltIn::NodeCordon => "/processor/nodeCordon",
            BuiltIn::NodeUncordon => "/processor/nodeUncordon",
            BuiltIn::NodeStatus => "/processor/nodeStatusCollector",
            BuiltIn::NodeLease => "/processor/nodeLeaseCollector",
            BuiltIn::NodeEvents => "/processor/nodeEventCollector",
        }
    }

    /// Whether the node's agent runs it: all but those that read only what the API
    /// server knows of a node, which the controller runs (the agent's account may not
    /// read Leases and Events).
    pub(crate) fn on_agent(self) -> bool {
        !matches!(
            self,
            BuiltIn::NodeStatus | BuiltIn::NodeLease | BuiltIn::NodeEvents
        )
    }

    /// Whether the controller runs it, about the node a Diagnosis names: those that
    /// read the API server only (what needs the node itself, or changes it, runs on
    /// its agent).
    pub(crate) fn in_controller(self) -> bool {
        matches!(
            self,
            BuiltIn::PodList
                | BuiltIn::PodDetail
                | BuiltIn::ContainerList
                | BuiltIn::NodeStatus
                | BuiltIn::NodeLease
                | BuiltIn::NodeEvents
        )
    }

    /// The built-in at `path`.
    pub(crate) fn from_path(path: &str) -> Option<BuiltIn> {
        BuiltIn::ALL.into_iter().find(|b| b.path() == path)
    }
}

/// The built-ins of the agent of one node.
#[derive(Clone)]
pub struct NodeOps {
    client: Client,
    node: String,
    /// The D-Bus address of the node's system bus.
    systemd_bus: String,
}

impl std::fmt::Debug for NodeOps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeOps")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl NodeOps {
    /// The built-ins of `node`, acting with `client`'s credentials.
    pub fn new(client: Client, node: impl Into<String>) -> Self {
        Self {
            client,
            node: node.into(),
            systemd_bus: systemd::DEFAULT_BUS.to_owned(),
        }
    }

    /// The same, asking systemd on the bus at `address` (a D-Bus address such as
    /// `unix:path=/run/dbus/system_bus_socket`).
    pub fn with_systemd_bus(mut self, address: impl Into<String>) -> Self {
        self.systemd_bus = address.into();
        self
    }

    /// The wasm Operation a collector built-in runs: the node-collector module told
    /// what to collect, with `/proc` readable. Its timeout is never used: a run takes
    /// the step's, from the request.
    fn collector(&self, what: &str) -> Operation {
        Operation::new(
            &format!("builtin-{what}"),
            OperationSpec {
                processor: Processor::wasm(
                    WasmProcessor {
                        module: COLLECTOR_MODULE.to_owned(),
                        image_pull_secrets: Vec::new(),
                        config: BTreeMap::from([("collect".to_owned(), what.to_owned())]),
                        read_only_paths: vec!["/proc".to_owned()],
                        run_on: None,
                        job: None,
                    },
                    30,
                ),
                storage: None,
            },
        )
    }
}

/// How a built-in runs.
enum Action {
    /// The node-collector wasm operation, told what to collect.
    Collect(&'static str),
    /// Through the API server or the system bus, here.
    Api(ApiOp),
}

/// The built-ins that run in the agent itself.
#[derive(Debug, Clone, Copy)]
enum ApiOp {
    PodList,
    PodDetail,
    ContainerList,
    SystemdUnits,
    Node(NodeChange),
    NodeStatus,
    NodeLease,
    NodeEvents,
}

impl BuiltIn {
    fn action(self) -> Action {
        match self {
            BuiltIn::ProcessList => Action::Collect("processes"),
            BuiltIn::MountInfo => Action::Collect("mounts"),
            BuiltIn::PodList => Action::Api(ApiOp::PodList),
            BuiltIn::PodDetail => Action::Api(ApiOp::PodDetail),
            BuiltIn::ContainerList => Action::Api(ApiOp::ContainerList),
            BuiltIn::SystemdUnits => Action::Api(ApiOp::SystemdUnits),
            BuiltIn::NodeCordon => Action::Api(ApiOp::Node(NodeChange::Cordon)),
            BuiltIn::NodeUncordon => Action::Api(ApiOp::Node(NodeChange::Uncordon)),
            BuiltIn::NodeStatus => Action::Api(ApiOp::NodeStatus),
            BuiltIn::NodeLease => Action::Api(ApiOp::NodeLease),
            BuiltIn::NodeEvents => Action::Api(ApiOp::NodeEvents),
        }
    }
}

impl BuiltIns for NodeOps {
    fn runner(
        &self,
        path: &str,
        processors: &Processors,
    ) -> Option<Result<Arc<dyn Runner>, ProcessorError>> {
        let built_in = BuiltIn::from_path(path).filter(|b| b.on_agent())?;
        Some(match built_in.action() {
            Action::Collect(what) => processors.runner(&self.collector(what), Path::new(".")),
            Action::Api(op) => Ok(Arc::new(ApiRunner {
                client: self.client.clone(),
                node: Some(self.node.clone()),
                systemd_bus: self.systemd_bus.clone(),
                path: built_in.path(),
                op,
            })),
        })
    }

    fn paths(&self) -> Vec<&'static str> {
        BuiltIn::ALL
            .iter()
            .filter(|b| b.on_agent())
            .map(|b| b.path())
            .collect()
    }
}

/// The built-ins of the controller (`operon serve`): those that read the API server,
/// about the node of the Diagnosis that runs them. So a Diagnosis about a node whose
/// agent cannot answer (`runOn: Controller`) still collects what the cluster knows of
/// it: its status, its kubelet's Lease, its Events and its Pods.
#[derive(Clone)]
pub struct ControllerOps {
    client: Client,
}

impl std::fmt::Debug for ControllerOps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerOps").finish_non_exhaustive()
    }
}

impl ControllerOps {
    /// The controller's built-ins, reading with `client`'s credentials.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl BuiltIns for ControllerOps {
    fn runner(
        &self,
        path: &str,
        _processors: &Processors,
    ) -> Option<Result<Arc<dyn Runner>, ProcessorError>> {
        let built_in = BuiltIn::from_path(path)?;
        let (true, Action::Api(op)) = (built_in.in_controller(), built_in.action()) else {
            // The node's own files or a change of it: only its agent runs that.
            return Some(Err(ProcessorError::BuiltInOffNode {
                path: path.to_owned(),
            }));
        };
        Some(Ok(Arc::new(ApiRunner {
            client: self.client.clone(),
            node: None,
            systemd_bus: String::new(),
            path: built_in.path(),
            op,
        })))
    }

    fn paths(&self) -> Vec<&'static str> {
        BuiltIn::ALL
            .iter()
            .filter(|b| b.in_controller())
            .map(|b| b.path())
            .collect()
    }
}

/// A built-in that runs in the process itself (the agent or the controller), with its
/// credentials.
struct ApiRunner {
    client: Client,
    /// The agent's node; `None` in the controller, which runs it about the node of the
    /// Diagnosis.
    node: Option<String>,
    /// The D-Bus address of the node's system bus (the agent's).
    systemd_bus: String,
    /// Its path, for messages.
    path: &'static str,
    op: ApiOp,
}

impl ApiRunner {
    /// The node it reads: the agent's own, or in the controller the Diagnosis' node.
    fn node<'a>(&'a self, request: &'a RunRequest) -> Result<&'a str, RunError> {
        self.node
            .as_deref()
            .or(request.node.as_deref())
            .ok_or_else(|| {
                RunError::new(format!(
                    "{} reads a node, and this Diagnosis names none (spec.nodeName)",
                    self.path
                ))
            })
    }
}

impl Runner for ApiRunner {
    fn run<'a>(&'a self, request: &'a RunRequest) -> BoxFuture<'a, Result<RunOutput, RunError>> {
        Box::pin(async move {
            let work = async {
                let client = &self.client;
                match self.op {
                    ApiOp::PodList => pods::pod_list(client, self.node(request)?).await,
                    ApiOp::PodDetail => pods::pod_detail(client, &request.input).await,
                    ApiOp::ContainerList => pods::container_list(client, self.node(request)?).await,
                    ApiOp::SystemdUnits => {
                        systemd::unit_status(&self.systemd_bus, &request.input).await
                    }
                    ApiOp::Node(change) => {
                        node::change(client, self.node(request)?, change, request).await
                    }
                    ApiOp::NodeStatus => node_state::node_status(client, self.node(request)?).await,
                    ApiOp::NodeLease => node_state::node_lease(client, self.node(request)?).await,
                    ApiOp::NodeEvents => node_state::node_events(client, self.node(request)?).await,
                }
            };
            tokio::time::timeout(request.timeout, work)
                .await
                .unwrap_or_else(|_| {
                    Err(RunError::new(format!(
                        "{} did not finish within {}s",
                        self.path,
                        request.timeout.as_secs()
                    )))
                })
        })
    }
}

#[cfg(test)]
mod systemd_tests;
#[cfg(test)]
mod tests;
