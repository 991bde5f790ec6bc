//! The debug endpoint (shell-operator's idea): HTTP on a unix socket, so only who may
//! open the socket file (mode 0600, the engine's user) can ask, with `operon debug
//! queue list`, `operon debug hook list`, `operon debug hook snapshot NAME`, `operon
//! hook history [NAME]` (each hook's last runs) and `operon debug hook log-level NAME
//! LEVEL` (the one request that changes something: a hook's own log level), `/reload/history`
//! (what was loaded when: the hooks directory and the modules, at start and at each
//! reload) (and, with
//! modules, `operon modules queue`: `/queue/main`, see [`super::addons`]). This module
//! has both sides: the server routes and the client request.
//!
//! The hook routes answer for every engine of the process
//! ([`operon_hooks::engine_set::EngineSet`]): the hooks directory's, each Hook
//! object's (its hook is `Hook/NAMESPACE/NAME`) and those of addon-operator's global and
//! module hooks (`global/PATH`, `MODULE/PATH`); the lifecycle runs of these, which no
//! engine runs, are in the history too. A hook's name is in one engine only, but the
//! queues (`/queue/list`) stay the hooks directory's.

use super::Status;
use axum::Json;
use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use http_body_util::BodyExt as _;
use operon_hooks::engine::Engine;
use operon_hooks::engine::HookInfo;
use operon_hooks::engine_set::merge_by_end;
use serde::Serialize;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::Arc;
use tokio::sync::watch;

/// Where `operon serve` and `operon debug` meet by default (shell-operator uses
/// `/var/run/shell-operator/debug.socket`).
pub const DEFAULT_SOCKET: &str = "/var/run/operon/debug.socket";

/// Why a debug request failed.
#[derive(Debug, thiserror::Error)]
pub enum DebugError {
    /// The socket could not be reached.
    #[error(
        "cannot connect to the debug socket {path}: {source} (is `operon serve` running with --debug-unix-socket {path}?)"
    )]
    Connect {
        /// The socket path.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP exchange failed.
    #[error("debug request {path}: {reason}")]
    Http {
        /// The request path.
        path: String,
        /// Why.
        reason: String,
    },
    /// The engine answered with an error.
    #[error("{0}")]
    Answer(String),
}

/// Binds the socket, replacing a stale one, readable and writable by the owner only.
pub(super) fn bind(path: &Path) -> std::io::Result<tokio::net::UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = tokio::net::UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

pub(super) async fn serve(
    listener: tokio::net::UnixListener,
    status: Arc<Status>,
    modules: Option<Router>,
    mut stopped: watch::Receiver<bool>,
) {
    let router = Router::new()
        .route("/queue/list", get(queues))
        .route("/hook/list", get(hooks))
        .route("/hook/{name}/snapshot", get(snapshot))
        .route("/hook/history", get(all_history))
        .route("/hook/{name}/history", get(history))
        .route("/hook/{name}/capture", get(capture))
        .route("/hook/{name}/log-level/{level}", put(log_level))
        .route("/reload/history", get(reloads))
        .with_state(status);
    // addon-operator's module queue (`/queue/main`), when modules run.
    let router = match modules {
        Some(modules) => router.merge(modules),
        None => router,
    };
    let shutdown = async move {
        let _ = stopped.wait_for(|s| *s).await;
    };
    if let Err(e) = axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
    {
        tracing::error!(error = %e, "the debug endpoint failed");
    }
}

fn loading() -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, "hooks are loading").into_response()
}

/// What was loaded when (`/reload/history`): the hooks directory at start and at each
/// reload, and the modules' reloads, oldest first.
async fn reloads(State(status): State<Arc<Status>>) -> Response {
    Json(status.reloads.entries()).into_response()
}

async fn queues(State(status): State<Arc<Status>>) -> Response {
    match status.engine() {
        Some(engine) => Json(engine.queues()).into_response(),
        None => loading(),
    }
}

/// Where the hooks of the hooks directory come from, in `operon debug hook list`.
pub const DIRECTORY_SOURCE: &str = "directory";

/// One hook of `/hook/list`: what its engine says, and where it comes from.
#[derive(Serialize)]
struct ListedHook {
    /// `directory`, `Hook object`, `global hooks` or `module NAME`.
    source: String,
    #[serde(flatten)]
    info: HookInfo,
}

/// Every engine the hook routes answer for, the hooks directory's first, with where its
/// hooks come from; `None` while the hooks directory loads. The set's lock is released
/// before any engine is asked anything.
fn engines(status: &Status) -> Option<Vec<(String, Arc<Engine>)>> {
    let main = status.engine()?;
    let mut all = vec![(DIRECTORY_SOURCE.to_owned(), main)];
    all.extend(
        status
            .engines
            .engines()
            .into_iter()
            .map(|r| (r.source, r.engine)),
    );
    Some(all)
}

fn unknown(name: &str) -> Response {
    (StatusCode::NOT_FOUND, format!("no hook named {name:?}")).into_response()
}

/// The first answer of `ask` among the engines (a hook's name is in one engine only).
fn ask_one<T: Serialize>(
    status: &Status,
    name: &str,
    ask: impl Fn(&Engine) -> Option<T>,
) -> Response {
    let Some(engines) = engines(status) else {
        return loading();
    };
    match engines.iter().find_map(|(_, engine)| ask(engine)) {
        Some(answer) => Json(answer).into_response(),
        None => unknown(name),
    }
}

async fn hooks(State(status): State<Arc<Status>>) -> Response {
    let Some(engines) = engines(&status) else {
        return loading();
    };
    let listed: Vec<ListedHook> = engines
        .iter()
        .flat_map(|(source, engine)| {
            engine.hook_infos().into_iter().map(|info| ListedHook {
                source: source.clone(),
                info,
            })
        })
        .collect();
    Json(listed).into_response()
}

async fn snapshot(State(status): State<Arc<Status>>, UrlPath(name): UrlPath<String>) -> Response {
    ask_one(&status, &name, |engine| engine.hook_snapshot(&name))
}

async fn all_history(State(status): State<Arc<Status>>) -> Response {
    let Some(engines) = engines(&status) else {
        return loading();
    };
    let lists = engines
        .iter()
        .filter_map(|(_, engine)| engine.history(None))
        .chain(status.engines.recorded(None));
    Json(merge_by_end(lists)).into_response()
}

async fn history(State(status): State<Arc<Status>>, UrlPath(name): UrlPath<String>) -> Response {
    let Some(engines) = engines(&status) else {
        return loading();
    };
    // A module hook's binding runs are in its engine, its lifecycle runs beside it.
    let lists: Vec<_> = engines
        .iter()
        .filter_map(|(_, engine)| engine.history(Some(&name)))
        .chain(status.engines.recorded(Some(&name)))
        .collect();
    if lists.is_empty() {
        return unknown(&name);
    }
    Json(merge_by_end(lists)).into_response()
}

async fn capture(State(status): State<Arc<Status>>, UrlPath(name): UrlPath<String>) -> Response {
    ask_one(&status, &name, |engine| engine.captured(&name))
}

async fn log_level(
    State(status): State<Arc<Status>>,
    UrlPath((name, level)): UrlPath<(String, String)>,
) -> Response {
    let Some(engines) = engines(&status) else {
        return loading();
    };
    let level = match operon_hooks::log_level::parse(&level) {
        Ok(level) => level,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    if !engines
        .iter()
        .any(|(_, engine)| engine.set_log_level(&name, level))
    {
        return unknown(&name);
    }
    Json(serde_json::json!({
        "hook": name,
        "log_level": level.map(operon_data::model::LogLevel::as_str),
    }))
    .into_response()
}

/// GETs `path` from the debug socket and returns the JSON answer.
pub async fn request(socket: &Path, path: &str) -> Result<serde_json::Value, DebugError> {
    request_with(socket, hyper::Method::GET, path).await
}

/// Sends a `method` request for `path` to the debug socket and returns the JSON answer.
pub async fn request_with(
    socket: &Path,
    method: hyper::Method,
    path: &str,
) -> Result<serde_json::Value, DebugError> {
    let http_error = |reason: String| DebugError::Http {
        path: path.to_owned(),
        reason,
    };
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|source| DebugError::Connect {
            path: socket.display().to_string(),
            source,
        })?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| http_error(e.to_string()))?;
    tokio::spawn(connection);
    let request = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, "operon")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .map_err(|e| http_error(e.to_string()))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| http_error(e.to_string()))?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| http_error(e.to_string()))?
        .to_bytes();
    if !status.is_success() {
        return Err(DebugError::Answer(
            String::from_utf8_lossy(&body).trim().to_owned(),
        ));
    }
    serde_json::from_slice(&body).map_err(|e| http_error(format!("the answer is not JSON: {e}")))
}
