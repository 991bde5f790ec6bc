//! The controllers of Operon's own resources in a cluster (kube-runtime), run by the
//! leader of `operon serve` beside its hooks when the operon.dev CRDs are installed.
//!
//! - `operation_set`: OperationSet `status.ready`, `status.pathCount` and conditions.
//! - `trigger`: Triggers into Diagnoses (cron, Kubernetes Events; the alert receiver
//!   of `operon serve` shares its parts).
//! - [`diagnosis`]: runs Diagnoses (in the controller, or on their node's agent).

pub mod diagnosis;
pub(crate) mod operation_set;
pub(crate) mod trigger;

use kube::Client;

/// Whether the API server serves Operon's resources (its CRDs are installed).
pub async fn crds_installed(client: &Client) -> Result<bool, kube::Error> {
    match client
        .list_api_group_resources(operon_data::api::API_VERSION)
        .await
    {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == "operationsets")),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// A spawned controller that is aborted when this is dropped.
pub(crate) struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl AbortOnDrop {
    /// Spawns `task`.
    pub(crate) fn spawn(task: impl std::future::Future<Output = ()> + Send + 'static) -> Self {
        Self(tokio::spawn(task))
    }

    /// Waits until the task has ended (returned, panicked or been aborted).
    pub(crate) async fn ended(&mut self) {
        let _ = (&mut self.0).await;
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
