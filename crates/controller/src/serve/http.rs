//! The HTTP endpoints of `operon serve` (shell-operator's port, 9115): `/metrics` (the
//! engine's and the hooks' metrics), `/metrics/hooks` (the hooks' only), `/healthz`,
//! and `/readyz` (ready once every kubernetes binding synchronized). They serve health
//! and metrics only, so they need no authentication. With `--alertmanager-token-secret`
//! the Alertmanager receiver ([`super::alerts`]) is mounted beside them, with its own
//! bearer-token authentication.

use super::Status;
use super::alerts::{self, AlertReceiver};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::sync::Arc;
use tokio::sync::watch;

const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

pub(super) fn router(status: Arc<Status>, alerts: Option<Arc<AlertReceiver>>) -> Router {
    let router = Router::new()
        .route("/metrics", get(metrics))
        .route("/metrics/hooks", get(hook_metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(status);
    match alerts {
        Some(receiver) => router.merge(alerts::routes(receiver)),
        None => router,
    }
}

pub(super) async fn serve(
    listener: tokio::net::TcpListener,
    status: Arc<Status>,
    alerts: Option<Arc<AlertReceiver>>,
    mut stopped: watch::Receiver<bool>,
) {
    let shutdown = async move {
        let _ = stopped.wait_for(|s| *s).await;
    };
    if let Err(e) = axum::serve(listener, router(status, alerts))
        .with_graceful_shutdown(shutdown)
        .await
    {
        tracing::error!(error = %e, "the HTTP endpoint failed");
    }
}

async fn metrics(State(status): State<Arc<Status>>) -> Response {
    let mut text = status.metrics.render();
    text.push_str(&status.metrics.render_hooks());
    ([(header::CONTENT_TYPE, PROMETHEUS_TEXT)], text).into_response()
}

async fn hook_metrics(State(status): State<Arc<Status>>) -> Response {
    (
        [(header::CONTENT_TYPE, PROMETHEUS_TEXT)],
        status.metrics.render_hooks(),
    )
        .into_response()
}

async fn ready(State(status): State<Arc<Status>>) -> Response {
    match status.ready() {
        Ok(()) => "ok\n".into_response(),
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")).into_response(),
    }
}
