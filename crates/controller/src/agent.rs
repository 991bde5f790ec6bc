//! `operon agent`: the per-node half of the Diagnosis pipeline (a DaemonSet, one pod per
//! node). It runs the Diagnoses the controller placed on its node
//! ([`crate::controllers::diagnosis`], [`Role::Agent`](crate::controllers::diagnosis::Role)),
//! so collection and repair steps run where the problem is.
//!
//! The agent holds the Lease `operon-agent-<node>` while it runs them: the controller
//! reads it to tell whether a node has an agent, and two agent pods on one node (a
//! rolling update with a surge) never run Diagnoses at once. It serves no API of its
//! own besides health and metrics (`/metrics`: its script steps' sandbox protections,
//! the Diagnoses it ran, its module fetch errors): the controller and the agent meet
//! only at the API server, both authenticated by their ServiceAccounts.
//!
//! Script steps run from the agent's script store (`<data root>/scripts`, one file per
//! Operation, kept in step with the Operations by a watch).
//!
//! Stopping (SIGTERM), it takes no new Diagnosis and lets the running ones go on for a
//! grace period while it still holds the Lease, so that a rolling update does not cut
//! steps off; losing the Lease, it stops at once, since another agent may resume them.

use crate::controllers::AbortOnDrop;
use crate::controllers::diagnosis::{self, placement};
use crate::serve::lease::{LeaderElector, LeaseOptions};
use axum::Router;
use axum::routing::get;
use kube::Client;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::watch;

/// Why the agent stopped.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The health endpoint's address cannot be bound.
    #[error("cannot listen on {address}: {source}")]
    Listen {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Where the agent runs.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// The node it serves.
    pub node: String,
    /// Its namespace (where its Lease lives).
    pub namespace: String,
    /// The address of `/healthz` and `/readyz`.
    pub listen: SocketAddr,
    /// On shutdown, how long running Diagnoses may go on before they are cut off
    /// (the step cut off runs again when another agent resumes the Diagnosis).
    pub shutdown_grace: Duration,
}

impl AgentOptions {
    /// The Lease of this agent, with client-go's timing.
    pub(crate) fn lease(&self) -> LeaseOptions {
        LeaseOptions::new(&placement::agent_lease_name(&self.node), &self.namespace)
    }
}

/// Runs the agent until `shutdown` resolves: serves health, takes the node's Lease,
/// and runs the node's Diagnoses while it holds it (taking it again when it loses it).
pub async fn run(
    client: Client,
    ctx: Arc<diagnosis::Context>,
    options: AgentOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), AgentError> {
    let ready = Arc::new(AtomicBool::new(false));
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|source| AgentError::Listen {
            address: options.listen,
            source,
        })?;
    let (stop, mut stopped) = watch::channel(false);
    let health = tokio::spawn(serve_health(listener, ready.clone(), stopped.clone()));
    let scripts = ctx
        .processors()
        .script_store()
        .cloned()
        .map(|store| AbortOnDrop::spawn(follow_scripts(client.clone(), store)));
    let mut elector = LeaderElector::new(client, options.lease());
    tracing::info!(node = %options.node, lease = %elector.options().name,
        namespace = %options.namespace, "agent started");
    // The agent block borrows the elector: it ends before the Lease is released.
    {
        // Shutting down, the controller takes no new Diagnosis and lets running ones go
        // on (for at most the grace period) while the Lease is still renewed.
        let (drain, draining) = watch::channel(false);
        let agent = async {
            loop {
                if !elector.acquire(&mut stopped).await {
                    return;
                }
                ready.store(true, Ordering::Relaxed);
                let mut until_drained = draining.clone();
                // Aborted when dropped too: on shutdown the select below drops this block.
                let mut controller =
                    AbortOnDrop::spawn(diagnosis::run_controller(ctx.clone(), async move {
                        let _ = until_drained.wait_for(|d| *d).await;
                    }));
                tracing::info!(node = %options.node, "running this node's Diagnoses");
                let outcome = tokio::select! {
                    outcome = elector.renew(&mut stopped) => outcome,
                    () = controller.ended() => {
                        if *draining.borrow() {
                            Ok(())
                        } else {
                            tracing::error!("the Diagnosis controller stopped; starting it again");
                            ready.store(false, Ordering::Relaxed);
                            continue;
                        }
                    }
                };
                // Another agent may take the Lease now: stop at once, it resumes the runs.
                drop(controller);
                ready.store(false, Ordering::Relaxed);
                match outcome {
                    Ok(()) => return,
                    Err(lost) => {
                        tracing::error!(error = %lost, "lost this node's agent Lease; taking it again");
                    }
                }
            }
        };
        tokio::pin!(agent);
        tokio::select! {
            () = &mut agent => {}
            () = shutdown => {
                // Not holding the Lease, it runs nothing to wait for.
                if ready.load(Ordering::Relaxed) {
                    tracing::info!(grace = ?options.shutdown_grace,
                        "stopping: no new Diagnosis; letting running ones go on");
                    let _ = drain.send(true);
                    if tokio::time::timeout(options.shutdown_grace, &mut agent).await.is_err() {
                        tracing::warn!(grace = ?options.shutdown_grace,
                            "Diagnoses still running after the grace period: they resume on another agent, and the step cut off runs again");
                    }
                }
            }
        }
    }
    let _ = stop.send(true);
    drop(scripts);
    if let Err(e) = elector.release().await {
        tracing::warn!(error = %e, "cannot release the agent Lease");
    }
    let _ = health.await;
    Ok(())
}

async fn serve_health(
    listener: tokio::net::TcpListener,
    ready: Arc<AtomicBool>,
    mut stopped: watch::Receiver<bool>,
) {
    let registry = match crate::serve::metrics_catalog::agent_registry() {
        Ok(registry) => Some(registry),
        Err(e) => {
            tracing::error!(error = %e, "cannot register the agent's metrics; /metrics is empty");
            None
        }
    };
    let router = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/metrics",
            get(move || {
                let text = registry
                    .as_ref()
                    .map(operon_hooks::metrics::render)
                    .unwrap_or_default();
                async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8",
                        )],
                        text,
                    )
                }
            }),
        )
        .route(
            "/readyz",
            get(move || {
                let ready = ready.load(Ordering::Relaxed);
                async move {
                    if ready {
                        (axum::http::StatusCode::OK, "ok\n")
                    } else {
                        (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            "waiting for this node's agent Lease\n",
                        )
                    }
                }
            }),
        );
    let shutdown = async move {
        let _ = stopped.wait_for(|s| *s).await;
    };
    if let Err(e) = axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
    {
        tracing::error!(error = %e, "the health endpoint stopped");
    }
}

/// Keeps the script store in step with the Operations as they appear, change and
/// disappear (the controller also syncs it before each Diagnosis runs).
async fn follow_scripts(client: Client, store: Arc<operon_script::ScriptStore>) {
    use futures::StreamExt as _;
    use kube::runtime::{WatchStreamExt as _, reflector, watcher};
    let (reader, writer) = reflector::store::<operon_data::api::Operation>();
    let api: kube::Api<operon_data::api::Operation> = kube::Api::all(client);
    let events =
        reflector::reflector(writer, watcher(api, watcher::Config::default())).default_backoff();
    futures::pin_mut!(events);
    while let Some(event) = events.next().await {
        match event {
            // Until a (re-)list is complete the cache holds part of the Operations:
            // syncing then would remove the scripts of the rest.
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => continue,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "watching Operations for the script store");
                continue;
            }
        }
        let operations = reader.state();
        if let Err(e) =
            operon_runner::processors::sync_scripts(&store, operations.iter().map(AsRef::as_ref))
        {
            tracing::error!(error = %e, "cannot bring the script store in step with the Operations");
        }
    }
}
