//! [`LocalApi`]: a [`LocalCluster`] served on loopback with the Kubernetes API
//! server's REST interface, so that kubectl (or any client) in a script hook under
//! `operon hook test` reads and writes the objects the hook engine watches.
//!
//! It serves HTTPS with a CA made at start and a random bearer token, and writes a
//! kubeconfig for both into a temporary directory. What it implements: discovery
//! (`/version`, `/api`, `/apis`, the legacy answer, which kubectl falls back to from
//! aggregated discovery; a minimal OpenAPI v3 so kubectl validates on the server), get,
//! list (with `limit`/`continue`), watch (resuming from a recent `resourceVersion`,
//! bookmarks, `sendInitialEvents`), create (`generateName`), update with
//! `resourceVersion` preconditions, delete and deletecollection, label and field
//! selectors, the `status` subresource, the four patch types (strategic merge for the
//! built-in kinds only, as for custom resources the API server refuses it), server-side
//! apply with field managers and conflicts, and `dryRun=All`; bodies in JSON, YAML and,
//! for the built-in kinds kubectl's generators make, protobuf (module `protobuf`), answered
//! in JSON. What it refuses, with a `Status` naming the request: other subresources
//! (`scale`, `log`, `exec`, `eviction`, ...), protobuf bodies of other kinds,
//! `resourceVersionMatch=Exact` lists. Not modelled: schemas
//! (no validation or defaulting beyond the local cluster's), admission, RBAC (the token
//! may do everything), graceful deletion and finalizers.

mod discovery;
mod handler;
mod managed;
mod patch;
mod protobuf;
mod query;
mod status;
mod strategic;
mod tls;
mod watch;

use super::LocalCluster;
use axum::Router;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why the local API cannot start.
#[derive(Debug, thiserror::Error)]
pub enum LocalApiError {
    /// No loopback port could be bound.
    #[error("local API: cannot listen on 127.0.0.1")]
    Listen(#[source] std::io::Error),
    /// The CA or the serving certificate could not be made.
    #[error("local API: cannot make its certificates")]
    Certificate(#[source] rcgen::Error),
    /// rustls refused the certificate or key.
    #[error("local API: TLS setup failed")]
    Tls(#[source] rustls::Error),
    /// The kubeconfig directory could not be written.
    #[error("local API: cannot write the kubeconfig in {dir}")]
    Kubeconfig {
        /// The directory written to.
        dir: PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// No randomness for the token.
    #[error("local API: no randomness for the token: {0}")]
    Random(#[source] getrandom::Error),
}

/// What every request handler shares.
pub(crate) struct Shared {
    cluster: Arc<LocalCluster>,
    /// `Bearer <token>`: the only Authorization accepted.
    authorization: String,
    /// `host:port`, for discovery's server addresses.
    address: String,
}

/// The local cluster served over HTTPS on 127.0.0.1 until dropped.
pub struct LocalApi {
    address: SocketAddr,
    /// Holds `kubeconfig`, `token` and `ca.crt`; removed when the API is dropped.
    dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl LocalApi {
    /// Serves `cluster` on a free loopback port. Must be called within a Tokio runtime;
    /// the server runs as tasks of it.
    pub async fn start(cluster: Arc<LocalCluster>) -> Result<Self, LocalApiError> {
        let token = random_token()?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(LocalApiError::Listen)?;
        let address = listener.local_addr().map_err(LocalApiError::Listen)?;
        let material = tls::Material::new()?;
        let dir = tempfile::Builder::new()
            .prefix("operon-local-api-")
            .tempdir()
            .map_err(|source| LocalApiError::Kubeconfig {
                dir: std::env::temp_dir(),
                source,
            })?;
        tls::write_kubeconfig(dir.path(), address, &token, &material.ca_pem)?;
        let router = router(cluster, &token, address);
        let config = material.server_config()?;
        let task = tokio::spawn(tls::serve(listener, config, router));
        Ok(LocalApi { address, dir, task })
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The directory holding `kubeconfig`, `token` and `ca.crt`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The kubeconfig a client uses (`KUBECONFIG`).
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join(tls::KUBECONFIG)
    }
}

impl Drop for LocalApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for LocalApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalApi")
            .field("address", &self.address)
            .field("dir", &self.dir.path())
            .finish()
    }
}

/// The REST interface of `cluster`, accepting only `token`.
pub(crate) fn router(cluster: Arc<LocalCluster>, token: &str, address: SocketAddr) -> Router {
    let shared = Arc::new(Shared {
        cluster,
        authorization: format!("Bearer {token}"),
        address: address.to_string(),
    });
    Router::new().fallback(handler::handle).with_state(shared)
}

fn random_token() -> Result<String, LocalApiError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(LocalApiError::Random)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_patch;
