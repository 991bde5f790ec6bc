//! The node agent's built-in operations, under KubeDiag's processor paths
//! (`/processor/podListCollector`, `/processor/nodeCordon`, ...). An `httpServer` step
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

mod node;
mod pods;
mod systemd;

use crate::runner::builtin::BuiltIns;
use crate::runner::processors::{ProcessorError, Processors};
use crate::runner::{RunError, RunOutput, RunRequest, Runner};
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
}

impl BuiltIn {
    /// Every built-in, in the order they are listed.
    pub(crate) const ALL: [BuiltIn; 8] = [
        BuiltIn::PodList,
        BuiltIn::PodDetail,
        BuiltIn::ContainerList,
        BuiltIn::ProcessList,
        BuiltIn::MountInfo,
        BuiltIn::SystemdUnits,
        BuiltIn::NodeCordon,
        BuiltIn::NodeUncordon,
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
        }
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
        }
    }
}

impl BuiltIns for NodeOps {
    fn runner(
        &self,
        path: &str,
        processors: &Processors,
    ) -> Option<Result<Arc<dyn Runner>, ProcessorError>> {
        let built_in = BuiltIn::from_path(path)?;
        Some(match built_in.action() {
            Action::Collect(what) => processors.runner(&self.collector(what), Path::new(".")),
            Action::Api(op) => Ok(Arc::new(ApiRunner {
                ops: self.clone(),
                path: built_in.path(),
                op,
            })),
        })
    }

    fn paths(&self) -> Vec<&'static str> {
        BuiltIn::ALL.iter().map(|b| b.path()).collect()
    }
}

/// A built-in that runs in the agent itself, with its credentials.
struct ApiRunner {
    ops: NodeOps,
    /// Its path, for messages.
    path: &'static str,
    op: ApiOp,
}

impl Runner for ApiRunner {
    fn run<'a>(&'a self, request: &'a RunRequest) -> BoxFuture<'a, Result<RunOutput, RunError>> {
        Box::pin(async move {
            let work = async {
                let client = &self.ops.client;
                let node = &self.ops.node;
                match self.op {
                    ApiOp::PodList => pods::pod_list(client, node).await,
                    ApiOp::PodDetail => pods::pod_detail(client, &request.input).await,
                    ApiOp::ContainerList => pods::container_list(client, node).await,
                    ApiOp::SystemdUnits => {
                        systemd::unit_status(&self.ops.systemd_bus, &request.input).await
                    }
                    ApiOp::Node(change) => node::change(client, node, change, request).await,
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
