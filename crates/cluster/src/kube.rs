//! The kube-rs implementation of [`Cluster`]: a real API server, reached through the
//! standard kubeconfig resolution. Kept thin: kinds come from API discovery
//! (`discovery`), lists and watches are shared per distinct request (`watch`), and
//! patch operations map onto API calls with shell-operator's semantics (`apply`); what
//! a binding does with the objects stays in `hooks/`. Every request waits out an
//! answer's `Retry-After` and times out when no answer comes (`retry`), and is counted
//! and timed for `/metrics` (`observe`).
//!
//! Every write carries the field manager `operon`. Objects travel as JSON values, as
//! everywhere in the engine.

mod apply;
mod discovery;
mod list_body;
pub mod observe;
mod retry;
mod source;
mod throttle;
mod watch;

#[cfg(any(test, feature = "mock"))]
pub mod mock;
#[cfg(test)]
mod tests;

use observe::Observe;
use retry::Patient;
use throttle::Throttle;

use crate::{
    Cluster, ClusterError, EventStream, Listed, Resource, Selector, Shared, namespaced_name,
};
use ::kube::config::{KubeConfigOptions, Kubeconfig};
use ::kube::{Client, Config};
use futures::FutureExt as _;
use futures::future::BoxFuture;
use operon_data::model::PatchOperation;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The field manager of every write (server-side field ownership, `managedFields`).
pub use operon_data::conventions::FIELD_MANAGER;

/// How to reach the API server.
#[derive(Debug, Clone)]
pub struct KubeOptions {
    /// A kubeconfig file; without one: `$KUBECONFIG`, `~/.kube/config`, then the
    /// in-cluster service account.
    pub kubeconfig: Option<PathBuf>,
    /// A kubeconfig context other than the current one.
    pub context: Option<String>,
    /// Sustained requests per second the client may send (shell-operator's
    /// `--kube-client-qps`); 0 disables the limit.
    pub qps: f32,
    /// Requests the client may send in a burst above `qps` (`--kube-client-burst`).
    pub burst: u32,
    /// How long a foreground `Delete` waits for the object to be gone.
    pub delete_wait: Duration,
}

impl Default for KubeOptions {
    fn default() -> Self {
        // shell-operator's defaults: 5 QPS, burst 10; a foreground delete waits 20 s.
        Self {
            kubeconfig: None,
            context: None,
            qps: 5.0,
            burst: 10,
            delete_wait: Duration::from_secs(20),
        }
    }
}

/// Why the client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum KubeConnectError {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        /// Which file.
        path: String,
        /// Why.
        #[source]
        source: ::kube::config::KubeconfigError,
    },
    /// No configuration was found anywhere.
    #[error("no Kubernetes configuration found ($KUBECONFIG, ~/.kube/config, in-cluster): {0}")]
    Infer(#[source] ::kube::config::InferConfigError),
    /// The client could not be built from the configuration.
    #[error("building the Kubernetes client: {0}")]
    Client(#[source] ::kube::Error),
}

/// A Kubernetes API server as a [`Cluster`].
pub struct KubeCluster {
    client: Client,
    discovery: discovery::Discovery,
    watches: Arc<watch::Watches>,
    delete_wait: Duration,
}

impl KubeCluster {
    /// Connects with the standard kubeconfig resolution and the options' limits.
    pub async fn connect(options: &KubeOptions) -> Result<Self, KubeConnectError> {
        let config = match &options.kubeconfig {
            Some(path) => {
                let kubeconfig_error = |source| KubeConnectError::Kubeconfig {
                    path: path.display().to_string(),
                    source,
                };
                let kubeconfig = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
                let opts = KubeConfigOptions {
                    context: options.context.clone(),
                    ..KubeConfigOptions::default()
                };
                Config::from_custom_kubeconfig(kubeconfig, &opts)
                    .await
                    .map_err(kubeconfig_error)?
            }
            None if options.context.is_some() => {
                let opts = KubeConfigOptions {
                    context: options.context.clone(),
                    ..KubeConfigOptions::default()
                };
                Config::from_kubeconfig(&opts).await.map_err(|source| {
                    KubeConnectError::Kubeconfig {
                        path: "(default)".to_owned(),
                        source,
                    }
                })?
            }
            None => Config::infer().await.map_err(KubeConnectError::Infer)?,
        };
        let throttle = Throttle::new(options.qps, options.burst);
        let namespace = config.default_namespace.clone();
        let host = config
            .cluster_url
            .authority()
            .map_or_else(String::new, ToString::to_string);
        // Inside the throttle: the latency observed is the server's, not a token's wait.
        let client = ::kube::client::ClientBuilder::try_from(config)
            .map_err(KubeConnectError::Client)?
            .with_layer(&Observe::new(&host))
            .with_layer(&throttle)
            .build();
        // Outside the throttle, so that a request sent again waits for a token too.
        let client = Patient::new(client).into_client(&namespace);
        let mut cluster = Self::new(client);
        cluster.delete_wait = options.delete_wait;
        Ok(cluster)
    }

    /// A cluster over an existing client (tests use a mock service).
    pub fn new(client: Client) -> Self {
        Self {
            discovery: discovery::Discovery::new(client.clone()),
            watches: Arc::new(watch::Watches::default()),
            client,
            delete_wait: KubeOptions::default().delete_wait,
        }
    }

    /// The client, for callers that need API calls beyond the [`Cluster`] trait
    /// (leases, events).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// How many distinct list+watch requests are open (shared by bindings).
    #[cfg(test)]
    pub(crate) fn open_watches(&self) -> usize {
        self.watches.len()
    }
}

impl Cluster for KubeCluster {
    fn resolve<'a>(
        &'a self,
        api_version: Option<&'a str>,
        kind: &'a str,
    ) -> BoxFuture<'a, Result<Resource, ClusterError>> {
        self.discovery.resolve(api_version, kind).boxed()
    }

    fn list_and_watch<'a>(
        &'a self,
        resource: &'a Resource,
        selector: &'a Selector,
    ) -> BoxFuture<'a, Result<(Listed, EventStream), ClusterError>> {
        watch::list_and_watch(&self.watches, &self.client, resource, selector).boxed()
    }

    fn get<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, ClusterError>> {
        async move {
            let request = request_for(resource, namespace);
            let req =
                request
                    .get(name, &Default::default())
                    .map_err(|e| ClusterError::BuildRequest {
                        context: "building a GET request".to_owned(),
                        error: Shared::new(e),
                    })?;
            match self.client.request::<Value>(req).await {
                Ok(object) => Ok(Some(object)),
                Err(::kube::Error::Api(status)) if status.is_not_found() => Ok(None),
                Err(e) => Err(api_error(
                    e,
                    &format!("get {} {}", resource.kind, namespaced_name(namespace, name)),
                )),
            }
        }
        .boxed()
    }

    fn apply<'a>(
        &'a self,
        operation: &'a PatchOperation,
    ) -> BoxFuture<'a, Result<(), ClusterError>> {
        apply::apply(self, operation).boxed()
    }
}

/// The request builder for a resource's collection, in a namespace when it is
/// namespaced.
fn request_for(resource: &Resource, namespace: Option<&str>) -> ::kube::core::Request {
    ::kube::core::Request::new(collection_path(resource, namespace))
}

/// `/api/v1/namespaces/NS/pods` or `/apis/GROUP/VERSION/PLURAL`.
fn collection_path(resource: &Resource, namespace: Option<&str>) -> String {
    let base = if resource.group.is_empty() {
        format!("/api/{}", resource.version)
    } else {
        format!("/apis/{}/{}", resource.group, resource.version)
    };
    match namespace.filter(|_| resource.namespaced) {
        Some(ns) => format!("{base}/namespaces/{ns}/{}", resource.plural),
        None => format!("{base}/{}", resource.plural),
    }
}

/// A text field of an object's `metadata`. Watches read these for every event, and
/// `Value::pointer` allocates for each part of its path.
fn metadata_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// Maps a client error to the engine's vocabulary; `what` names the call.
fn api_error(error: ::kube::Error, what: &str) -> ClusterError {
    match error {
        ::kube::Error::Api(status) if matches!(status.code, 400 | 422) => ClusterError::Invalid {
            what: what.to_owned(),
            reason: if status.message.is_empty() {
                status.reason
            } else {
                status.message
            },
        },
        other => ClusterError::Client {
            what: what.to_owned(),
            error: Shared::new(other),
        },
    }
}
