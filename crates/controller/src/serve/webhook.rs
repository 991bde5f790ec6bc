//! The webhook servers of `operon serve`: HTTPS (rustls with ring) with certificates
//! that reload ([`tls`]), one path per hook binding, AdmissionReview and
//! ConversionReview v1 in and out ([`review`]). Admission calls the hook directly (no
//! queue: the API server is waiting), bounded by a per-request timeout below the API
//! server's; request bodies are bounded. Every replica serves, leader or not.
//!
//! Paths: `POST /validate/HOOK/BINDING` and `POST /mutate/HOOK/BINDING` on the
//! admission server (and `POST /operon/validate` for Operon's own resources, [`own`]) (shell-operator also serves both kinds from one server),
//! `/hook-object/NAMESPACE/NAME/...` for Hook objects and `/module/MODULE/...` for
//! addon-operator modules (`owned`; a follower forwards a module's reviews to the
//! leader, [`forward`]),
//! `POST /convert/CRD` on the conversion server (one path per CustomResourceDefinition,
//! as shell-operator: a CRD has one conversion webhook, and its conversions may chain
//! rules of several hooks), the hook's name percent-encoded when it holds a `/`. A mutating hook's JSON Patch is applied to the
//! object under review before it is sent, so a patch that cannot apply is reported
//! with the hook's name instead of the API server's generic error.
//!
//! With trace export on, a request carrying a W3C `traceparent` header (the API server
//! sends one when its own tracing is on) is handled in a `webhook.request` span that
//! continues the caller's trace, so the `hook.review` of its hook run is part of it; an
//! invalid header is ignored. With export off the header is not parsed.

pub mod enforce;
pub mod forward;
pub mod own;
pub(crate) mod owned;
pub mod register;
pub mod review;
pub mod selfsigned;
pub mod tls;

use super::Status;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use enforce::Unenforced;
use operon_data::model::Enforcement;
use operon_hooks::engine::Engine;
use rustls::ServerConfig;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

use owned::{HOOK_OBJECT_PREFIX, MODULE_PREFIX};

/// The API server sends at most 3 MiB objects; a review wraps up to two of them.
pub(crate) const MAX_BODY: usize = 8 * 1024 * 1024;

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone)]
struct WebhookState {
    status: Arc<Status>,
    timeout: Duration,
    /// The enforcement of bindings that declare none (`--webhook-enforcement`).
    enforcement: Enforcement,
}

/// Which reviews a webhook server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookKind {
    /// AdmissionReviews of validating and mutating bindings: `/validate/...` and
    /// `/mutate/...`.
    Admission,
    /// ConversionReviews of conversion bindings: `/convert/...`.
    Conversion,
}

/// The kind of admission binding a request path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReviewKind {
    Validating,
    Mutating,
}

/// One webhook server: where it listens and its certificate.
#[derive(Debug, Clone)]
pub struct WebhookEndpoint {
    /// The address and port.
    pub listen: std::net::SocketAddr,
    /// The certificate, key and optional client CA.
    pub tls: tls::TlsFiles,
}

/// The routes of one server; `timeout` bounds each hook run (keep it below the
/// webhooks' `timeoutSeconds`, 10 s by default, so the API server gets an answer);
/// `enforcement` is what bindings that declare none get.
pub(super) fn router(
    status: Arc<Status>,
    kind: WebhookKind,
    timeout: Duration,
    enforcement: Enforcement,
) -> Router {
    let routes = match kind {
        WebhookKind::Admission => Router::new()
            .route("/{prefix}/{hook}/{binding}", post(admit))
            .route(
                &format!("/{HOOK_OBJECT_PREFIX}/{{namespace}}/{{name}}/{{prefix}}/{{binding}}"),
                post(admit_hook_object),
            )
            .route(
                &format!("/{MODULE_PREFIX}/{{module}}/{{prefix}}/{{binding}}"),
                post(admit_module),
            )
            .route(own::PATH, post(admit_own)),
        WebhookKind::Conversion => Router::new()
            .route("/convert/{crd}", post(convert))
            .route(
                &format!("/{HOOK_OBJECT_PREFIX}/{{namespace}}/{{name}}/convert/{{crd}}"),
                post(convert_hook_object),
            )
            .route(
                &format!("/{MODULE_PREFIX}/{{module}}/convert/{{crd}}"),
                post(convert_module),
            ),
    };
    routes
        .route("/healthz", get(|| async { "ok\n" }))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn(continue_caller_trace))
        .with_state(WebhookState {
            status,
            timeout,
            enforcement,
        })
}

/// Handles a request in the trace its `traceparent` header names, when there is a valid
/// one and spans are exported.
async fn continue_caller_trace(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    use operon_runner::trace::{TARGET, TRACEPARENT_HEADER, continue_trace, parse_traceparent};
    use tracing::Instrument as _;
    let header = request.headers().get(TRACEPARENT_HEADER);
    if header.is_none() || !tracing::span_enabled!(target: TARGET, tracing::Level::TRACE) {
        return next.run(request).await;
    }
    let Some(caller) = header
        .and_then(|value| value.to_str().ok())
        .and_then(parse_traceparent)
    else {
        return next.run(request).await;
    };
    let span = tracing::trace_span!(target: TARGET, parent: None, "webhook.request",
        path = request.uri().path());
    continue_trace(&span, caller);
    next.run(request).instrument(span).await
}

fn refuse(code: StatusCode, message: impl Into<String>) -> Response {
    (code, message.into()).into_response()
}

fn json_body(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// The review a request carries, read by `parse`; or the status and message to refuse
/// it with (not JSON, not a review).
fn read_review(
    headers: &HeaderMap,
    body: &[u8],
    parse: fn(&[u8]) -> Result<serde_json::Value, review::ReviewError>,
) -> Result<serde_json::Value, (StatusCode, String)> {
    if !json_body(headers) {
        return Err((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "expected application/json".to_owned(),
        ));
    }
    parse(body).map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()))
}

/// Which hook a review is for.
#[derive(Debug, Clone, Copy)]
enum Target<'a> {
    /// A hook of the hooks directory, by name.
    Directory(&'a str),
    /// The hook of a Hook object.
    HookObject { namespace: &'a str, name: &'a str },
    /// The hook of a module (or of the global hooks, `global`) with the binding.
    Module(&'a str),
}

/// The engine and the index of the hook `target` names, which must have the `kind`
/// binding `binding`, with that binding's enforcement; or the refusal to answer with.
fn locate(
    state: &WebhookState,
    target: Target<'_>,
    binding: &str,
    kind: ReviewKind,
) -> Result<(Arc<Engine>, usize, Enforcement), (StatusCode, String)> {
    let (engine, hook) = match target {
        Target::Directory(hook) => {
            let Some(engine) = state.status.engine() else {
                return Err((
                    StatusCode::SERVICE_UNAVAILABLE,
                    "hooks are loading".to_owned(),
                ));
            };
            (engine, hook.to_owned())
        }
        Target::HookObject { .. } => hook_object_engine(state, target)?,
        Target::Module(module) => {
            let engine = module_engine(state, module)?;
            // A module's webhooks are named by binding: the first hook with it.
            let hook = (engine.hooks().iter())
                .find(|l| {
                    let config = &l.config;
                    let bindings = match kind {
                        ReviewKind::Validating => &config.validating,
                        ReviewKind::Mutating => &config.mutating,
                    };
                    bindings.iter().any(|b| b.name == binding)
                })
                .map(|l| l.hook.name().to_owned())
                .unwrap_or_default();
            (engine, hook)
        }
    };
    let hook = hook.as_str();
    let (what, of) = match kind {
        ReviewKind::Validating => ("validating", "validating binding"),
        ReviewKind::Mutating => ("mutating", "mutating binding"),
    };
    let Some(h) = engine.hooks().iter().position(|l| l.hook.name() == hook) else {
        return Err(match target {
            Target::Module(module) => (
                StatusCode::NOT_FOUND,
                format!("no hook of {module} has a {of} {binding:?}"),
            ),
            _ => (StatusCode::NOT_FOUND, format!("no hook named {hook:?}")),
        });
    };
    let config = &engine.hooks()[h].config;
    let bindings = match kind {
        ReviewKind::Validating => &config.validating,
        ReviewKind::Mutating => &config.mutating,
    };
    let Some(found) = bindings.iter().find(|b| b.name == binding) else {
        return Err((
            StatusCode::NOT_FOUND,
            format!("hook {hook:?} has no {what} binding {binding:?}"),
        ));
    };
    let enforcement = found.enforcement_or(state.enforcement);
    Ok((engine, h, enforcement))
}

/// The engine of the Hook object `target` names, with its hook's name; or the refusal:
/// a Hook not loaded (yet) on this replica gets 503, so the API server applies the
/// binding's failure policy, as for a hooks directory still loading.
fn hook_object_engine(
    state: &WebhookState,
    target: Target<'_>,
) -> Result<(Arc<Engine>, String), (StatusCode, String)> {
    let Target::HookObject { namespace, name } = target else {
        unreachable!("only called for Hook objects");
    };
    let hook = super::hook_objects::prepare::run_name_of(namespace, name);
    let engine = (state.status.engines.engines().into_iter())
        .filter(|r| r.source == super::hook_objects::HOOK_OBJECT_SOURCE)
        .map(|r| r.engine)
        .find(|e| e.hooks().iter().any(|l| l.hook.name() == hook))
        .ok_or_else(|| {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("Hook {namespace}/{name} is not loaded on this replica"),
            )
        })?;
    Ok((engine, hook))
}

/// The engine of module `module` (`global`: the global hooks), which runs on the
/// leader only; or the refusal: 503 while it does not run (being enabled, or this
/// replica not leading: [`forwarded_to_leader`] passes those on).
fn module_engine(state: &WebhookState, module: &str) -> Result<Arc<Engine>, (StatusCode, String)> {
    super::module_webhooks::engine_of(&state.status.engines, module).ok_or_else(|| {
        let why = match *state.status.leading.borrow() {
            Some(false) => "this replica does not lead, and modules run on the leader",
            _ => "its hooks are not running",
        };
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("module {module} cannot answer: {why}"),
        )
    })
}

/// The leader's answer to a review of module `module` that arrived at `path`, when
/// this replica follows and does not run the module: `None` when it answers itself.
async fn forwarded_to_leader(
    state: &WebhookState,
    module: &str,
    path: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Option<Response> {
    if *state.status.leading.borrow() != Some(false)
        || super::module_webhooks::engine_of(&state.status.engines, module).is_some()
    {
        return None;
    }
    if forward::was_forwarded(headers) {
        // The leader it was sent to thinks this one leads: a Lease changing hands.
        return Some(refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("module {module}: forwarded to a replica that does not lead either"),
        ));
    }
    let Some(forwarder) = &state.status.forwarder else {
        return Some(refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "module {module} runs on the leader, and this replica has no way to reach it (no CA for the admission server)"
            ),
        ));
    };
    Some(match forwarder.forward(path, body.clone()).await {
        Ok(answer) => answer,
        Err(e) => {
            tracing::warn!(module, error = %e, "cannot forward a review to the leader");
            forward::unavailable(&e)
        }
    })
}

/// Answers an AdmissionReview for a validating or mutating binding of a module's hooks
/// (`/module/MODULE/validate/BINDING`, `.../mutate/BINDING`), on a follower by asking
/// the leader.
async fn admit_module(
    State(state): State<WebhookState>,
    Path((module, prefix, binding)): Path<(String, String, String)>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(answer) = forwarded_to_leader(&state, &module, uri.path(), &headers, &body).await {
        return answer;
    }
    let target = Target::Module(&module);
    answer_admission(&state, &prefix, target, &binding, &headers, &body).await
}

/// A review run: the parsed request, and the hook's output or why there is none.
struct Reviewed {
    /// The hook's name in its engine.
    hook: String,
    review: serde_json::Value,
    output: Result<operon_data::model::HookOutput, String>,
    started: Instant,
    enforcement: Enforcement,
}

/// What both admission endpoints do before answering: check the body, find the binding, run the
/// hook within the timeout.
async fn run_review(
    state: &WebhookState,
    target: Target<'_>,
    binding: &str,
    headers: &HeaderMap,
    body: &[u8],
    kind: ReviewKind,
) -> Result<Reviewed, Response> {
    let review = read_review(headers, body, review::admission_review)
        .map_err(|(code, message)| refuse(code, message))?;
    let (engine, h, enforcement) =
        locate(state, target, binding, kind).map_err(|(code, message)| refuse(code, message))?;
    let hook = engine.hooks()[h].hook.name();
    let started = Instant::now();
    // The hook gets the text that arrived; the parsed review is only for the checks and
    // the answer. It parsed as JSON, so it is UTF-8.
    let text = String::from_utf8_lossy(body).into_owned();
    let output = match tokio::time::timeout(state.timeout, engine.review(h, binding, text)).await {
        Err(_) => Err(format!(
            "hook {hook} did not answer within {}s",
            state.timeout.as_secs_f64()
        )),
        Ok(None) => Err(format!("hook {hook} has no binding {binding}")),
        Ok(Some(record)) => record
            .run
            .outcome
            .map_err(|e| format!("hook {hook} failed: {e}")),
    };
    Ok(Reviewed {
        hook: hook.to_owned(),
        review,
        output,
        started,
        enforcement,
    })
}

fn request_field<'a>(review: &'a serde_json::Value, field: &str) -> &'a str {
    review
        .pointer(&format!("/request/{field}"))
        .and_then(|v| v.as_str())
        .unwrap_or("")
}

/// Answers an AdmissionReview for a validating (`/validate/...`) or mutating
/// (`/mutate/...`) binding of a hook of the hooks directory.
async fn admit(
    State(state): State<WebhookState>,
    Path((prefix, hook, binding)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer_admission(
        &state,
        &prefix,
        Target::Directory(&hook),
        &binding,
        &headers,
        &body,
    )
    .await
}

/// Answers an AdmissionReview for a validating or mutating binding of a Hook object
/// (`/hook-object/NAMESPACE/NAME/validate/BINDING`, `.../mutate/BINDING`).
async fn admit_hook_object(
    State(state): State<WebhookState>,
    Path((namespace, name, prefix, binding)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let target = Target::HookObject {
        namespace: &namespace,
        name: &name,
    };
    answer_admission(&state, &prefix, target, &binding, &headers, &body).await
}

/// What both admission routes do: run the binding of `target` that `prefix`
/// (`validate` or `mutate`) and `binding` name, enforce and record its answer.
async fn answer_admission(
    state: &WebhookState,
    prefix: &str,
    target: Target<'_>,
    binding: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let kind = match prefix {
        "validate" => ReviewKind::Validating,
        "mutate" => ReviewKind::Mutating,
        _ => return refuse(StatusCode::NOT_FOUND, "no such endpoint"),
    };
    let reviewed = match run_review(state, target, binding, headers, body, kind).await {
        Ok(reviewed) => reviewed,
        Err(refused) => return refused,
    };
    let hook = reviewed.hook.clone();
    let hook = hook.as_str();
    let outcome = review::admission_outcome(
        hook,
        binding,
        kind == ReviewKind::Mutating,
        &reviewed.review,
        reviewed.output,
    );
    let enforced = enforce::enforce(outcome, reviewed.enforcement, binding);
    let kind_label = if kind == ReviewKind::Mutating {
        "mutating"
    } else {
        "validating"
    };
    record(
        state,
        kind_label,
        &format!("{hook}/{binding}"),
        enforced.metric_label(),
        reviewed.started,
    );
    if let Some(unenforced) = &enforced.unenforced {
        log_unenforced(
            hook,
            binding,
            &reviewed.review,
            enforced.enforcement,
            unenforced,
        );
    }
    let answer = review::admission_response(&reviewed.review, enforced.outcome);
    tracing::info!(
        hook = %hook, binding = %binding,
        kind = kind_label,
        uid = %request_field(&reviewed.review, "uid"),
        operation = %request_field(&reviewed.review, "operation"),
        allowed = answer.pointer("/response/allowed").and_then(|v| v.as_bool()).unwrap_or(false),
        patched = answer.pointer("/response/patch").is_some(),
        duration_ms = reviewed.started.elapsed().as_secs_f64() * 1000.0,
        "admission review"
    );
    axum::Json(answer).into_response()
}

/// Records what a `Warn` or `DryRun` binding answered and was not enforced, with the
/// object it concerns: the log and the `would_deny` count are where a rule being rolled
/// out shows what it would do to requests (audits show it for the objects that exist).
/// The object is named, not written out, so that a Secret's data stays out of the log.
fn log_unenforced(
    hook: &str,
    binding: &str,
    review: &serde_json::Value,
    enforcement: Enforcement,
    unenforced: &Unenforced,
) {
    let name = match request_field(review, "name") {
        "" => request_field(review, "object/metadata/generateName"),
        name => name,
    };
    tracing::info!(
        hook = %hook, binding = %binding,
        enforcement = %enforcement,
        would = unenforced.would(),
        detail = %unenforced.detail(),
        uid = %request_field(review, "uid"),
        operation = %request_field(review, "operation"),
        kind = %request_field(review, "kind/kind"),
        namespace = %request_field(review, "namespace"),
        name = %name,
        user = %request_field(review, "userInfo/username"),
        "admission answer not enforced"
    );
}

/// Counts one answered review in `operon_webhook_requests_total` and its duration.
/// Only reviews that reached a hook's binding (or a CRD some hook converts) count, so
/// the labels never take a value a caller made up.
fn record(state: &WebhookState, kind: &str, webhook: &str, outcome: &str, started: Instant) {
    let metrics = &state.status.metrics;
    metrics
        .webhook_requests_total
        .with_label_values(&[kind, webhook, outcome])
        .inc();
    metrics
        .webhook_request_duration_seconds
        .with_label_values(&[kind, webhook])
        .observe(started.elapsed().as_secs_f64());
}

/// Answers an AdmissionReview of one of Operon's own resources ([`own`]).
async fn admit_own(State(state): State<WebhookState>, headers: HeaderMap, body: Bytes) -> Response {
    let review = match read_review(&headers, &body, review::admission_review) {
        Ok(review) => review,
        Err((code, message)) => return refuse(code, message),
    };
    let rules = (state.status.module_settings.as_ref())
        .map(|rules| rules.read().unwrap_or_else(|e| e.into_inner()).clone());
    let answer = own::answer(&review, rules.as_deref());
    tracing::info!(
        kind = %request_field(&review, "kind/kind"),
        name = %request_field(&review, "name"),
        operation = %request_field(&review, "operation"),
        allowed = answer.pointer("/response/allowed").and_then(|v| v.as_bool()).unwrap_or(false),
        "admission review of an Operon resource"
    );
    axum::Json(answer).into_response()
}

/// Answers a ConversionReview for CRD `crd` through the chains of every hook's
/// conversion rules for it ([`operon_hooks::conversion`]).
async fn convert(
    State(state): State<WebhookState>,
    Path(crd): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let review = match read_review(&headers, &body, review::conversion_review) {
        Ok(review) => review,
        Err((code, message)) => return refuse(code, message),
    };
    let Some(engine) = state.status.engine() else {
        return refuse(StatusCode::SERVICE_UNAVAILABLE, "hooks are loading");
    };
    answer_conversion(&state, &engine, &crd, &review).await
}

/// Answers a ConversionReview for CRD `crd` through a Hook object's conversion
/// bindings (`/hook-object/NAMESPACE/NAME/convert/CRD`).
async fn convert_hook_object(
    State(state): State<WebhookState>,
    Path((namespace, name, crd)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let review = match read_review(&headers, &body, review::conversion_review) {
        Ok(review) => review,
        Err((code, message)) => return refuse(code, message),
    };
    let target = Target::HookObject {
        namespace: &namespace,
        name: &name,
    };
    let engine = match hook_object_engine(&state, target) {
        Ok((engine, _)) => engine,
        Err((code, message)) => return refuse(code, message),
    };
    answer_conversion(&state, &engine, &crd, &review).await
}

/// Answers a ConversionReview for CRD `crd` through a module's conversion bindings
/// (`/module/MODULE/convert/CRD`), on a follower by asking the leader.
async fn convert_module(
    State(state): State<WebhookState>,
    Path((module, crd)): Path<(String, String)>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let review = match read_review(&headers, &body, review::conversion_review) {
        Ok(review) => review,
        Err((code, message)) => return refuse(code, message),
    };
    if let Some(answer) = forwarded_to_leader(&state, &module, uri.path(), &headers, &body).await {
        return answer;
    }
    let engine = match module_engine(&state, &module) {
        Ok(engine) => engine,
        Err((code, message)) => return refuse(code, message),
    };
    answer_conversion(&state, &engine, &crd, &review).await
}

/// Converts `review` for CRD `crd` through the conversion rules of `engine`'s hooks.
async fn answer_conversion(
    state: &WebhookState,
    engine: &Engine,
    crd: &str,
    review: &serde_json::Value,
) -> Response {
    let crd = crd.to_owned();
    let review = review.clone();
    if engine.converter_of(&crd).is_none() {
        return refuse(
            StatusCode::NOT_FOUND,
            format!(
                "no hook converts {crd}: no kubernetesCustomResourceConversion binding names it"
            ),
        );
    }
    let started = Instant::now();
    let converted = match tokio::time::timeout(state.timeout, engine.convert(&crd, &review)).await {
        Ok(converted) => converted,
        Err(_) => operon_hooks::conversion::Converted {
            outcome: Err(format!(
                "the conversion of {crd} took longer than {}s",
                state.timeout.as_secs_f64()
            )),
            runs: Vec::new(),
        },
    };
    let steps = converted.runs.len();
    let outcome = converted
        .outcome
        .map(|objects| operon_data::model::ConversionResponse {
            failed_message: None,
            converted_objects: objects,
        });
    let answer = review::conversion_response(&review, outcome);
    let result = match answer.pointer("/response/result/status") {
        Some(serde_json::Value::String(status)) if status == "Success" => "converted",
        _ => "error",
    };
    record(state, "conversion", &crd, result, started);
    tracing::info!(
        crd = %crd,
        uid = %request_field(&review, "uid"),
        desired = %request_field(&review, "desiredAPIVersion"),
        steps,
        status = %answer.pointer("/response/result/status").and_then(|v| v.as_str()).unwrap_or(""),
        message = %answer.pointer("/response/result/message").and_then(|v| v.as_str()).unwrap_or(""),
        duration_ms = started.elapsed().as_secs_f64() * 1000.0,
        "conversion review"
    );
    axum::Json(answer).into_response()
}

/// Serves the `kind` webhooks of `engine` over TLS on `listener` until `stopped` turns
/// true: what `operon serve` runs, for callers that build their own engine (a local
/// loop, a benchmark). Bindings that declare no enforcement get `Deny`.
pub async fn serve_engine(
    engine: Arc<Engine>,
    metrics: Arc<operon_hooks::metrics::Metrics>,
    kind: WebhookKind,
    listener: tokio::net::TcpListener,
    tls: Arc<ServerConfig>,
    timeout: Duration,
    stopped: watch::Receiver<bool>,
) {
    let status = Arc::new(Status {
        metrics,
        engine: watch::Sender::new(Some(engine)),
        engines: Default::default(),
        leading: watch::Sender::new(None),
        modules: None,
        module_settings: None,
        webhooks_registered: tokio::sync::watch::Sender::new(true),
        forwarder: None,
        synchronized_once: Default::default(),
        reloads: Default::default(),
    });
    serve_tls(
        listener,
        tls,
        router(status, kind, timeout, Enforcement::Deny),
        stopped,
    )
    .await;
}

/// Serves `router` over TLS on `listener` until `stopped` turns true; connections in
/// progress are left to finish.
pub(super) async fn serve_tls(
    listener: tokio::net::TcpListener,
    tls: Arc<ServerConfig>,
    router: Router,
    mut stopped: watch::Receiver<bool>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let stop = async move {
        let _ = stopped.wait_for(|s| *s).await;
    };
    let mut stop = std::pin::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook server: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut stop => return,
        };
        // Answers are small and awaited: send them without Nagle's delay.
        let _ = stream.set_nodelay(true);
        let acceptor = acceptor.clone();
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(peer = %peer, error = %e, "webhook TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(peer = %peer, "webhook TLS handshake timed out");
                    return;
                }
            };
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(tls), service);
            if let Err(e) = connection.await {
                tracing::debug!(peer = %peer, error = %e, "webhook connection ended with an error");
            }
        });
    }
}

#[cfg(test)]
mod tests;
