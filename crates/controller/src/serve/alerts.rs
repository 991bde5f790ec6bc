//! The Alertmanager receiver of `operon serve`: `POST /api/v2/alerts` and
//! `POST /api/v1/alerts` on the plain HTTP port, mounted only with
//! `--alertmanager-token-secret` (never unauthenticated). Every replica serves it, leader
//! or not: the Diagnoses' names are deterministic, so two replicas (or a redelivery)
//! creating the same one get AlreadyExists.
//!
//! A request is taken in this order, so that nothing unauthenticated is read: the
//! token must be loaded (503 otherwise, which Alertmanager retries), the `Authorization:
//! Bearer` token must match (401, compared in constant time), the body must fit in
//! `MAX_BODY` (413, refused from `Content-Length` before reading, or as soon as a
//! chunked body passes it), and parse as Alertmanager's webhook message or a plain list
//! of alerts (400). Resolved alerts are skipped; each firing alert makes a Diagnosis for
//! every alert Trigger it matches. The answer counts what happened, and is a 500 when a
//! creation failed, so that Alertmanager sends the group again (what was created then
//! comes back as AlreadyExists).

use crate::controllers::trigger::{DiagnosisCreator, Outcome, TriggerCatalog};
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt as _;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use operon_data::api::Trigger;
use operon_pipeline::triggers::{AlertPost, PrometheusAlert};
use serde::Serialize;
use sha2::{Digest as _, Sha256};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The largest body read: Alertmanager's messages hold a group's alerts, a few KiB each.
pub(crate) const MAX_BODY: usize = 1024 * 1024;
/// The key of the token in the Secret.
pub(crate) const TOKEN_KEY: &str = "token";
/// The receiver's paths: Alertmanager's API versions, which Prometheus and `amtool`
/// POST to, and what a `webhook_config` URL names.
pub(crate) const PATHS: [&str; 2] = ["/api/v2/alerts", "/api/v1/alerts"];

/// `NAMESPACE/NAME` of the Secret holding the bearer token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRef {
    /// The Secret's namespace.
    pub(crate) namespace: String,
    /// The Secret's name.
    pub(crate) name: String,
}

/// Why a `--alertmanager-token-secret` value is not `NAMESPACE/NAME`.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not NAMESPACE/NAME")]
pub struct SecretRefError(String);

impl FromStr for SecretRef {
    type Err = SecretRefError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.split_once('/') {
            Some((namespace, name))
                if !namespace.is_empty() && !name.is_empty() && !name.contains('/') =>
            {
                Ok(Self {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                })
            }
            _ => Err(SecretRefError(text.to_owned())),
        }
    }
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What the receiver needs from the command line.
#[derive(Clone)]
pub struct AlertmanagerOptions {
    /// The client it reads Triggers and the Secret and creates Diagnoses with.
    pub client: Client,
    /// The Secret holding the token (key `token`).
    pub token_secret: SecretRef,
}

impl fmt::Debug for AlertmanagerOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlertmanagerOptions")
            .field("token_secret", &self.token_secret)
            .finish_non_exhaustive()
    }
}

/// The SHA-256 of the token: what is compared, so the comparison always runs over 32
/// bytes whatever the lengths, and the token itself is not kept.
type TokenDigest = [u8; 32];

/// The receiver: its Triggers, its creator, its token, and the tasks that keep the
/// Triggers and the token current (stopped when the receiver is dropped).
pub(crate) struct AlertReceiver {
    catalog: TriggerCatalog,
    creator: DiagnosisCreator,
    token: watch::Receiver<Option<TokenDigest>>,
    secret: SecretRef,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for AlertReceiver {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl AlertReceiver {
    /// Starts watching the Triggers and the token Secret.
    pub(crate) fn start(
        options: AlertmanagerOptions,
        counter: Option<crate::controllers::trigger::DiagnosesCounter>,
    ) -> Self {
        let catalog = TriggerCatalog::new();
        let (token_sender, token) = watch::channel(None);
        let tasks = vec![
            tokio::spawn({
                let catalog = catalog.clone();
                let api = Api::all(options.client.clone());
                async move { catalog.run(api).await }
            }),
            tokio::spawn(watch_token(
                options.client.clone(),
                options.token_secret.clone(),
                token_sender,
            )),
        ];
        Self {
            catalog,
            creator: DiagnosisCreator::new(options.client, counter),
            token,
            secret: options.token_secret,
            tasks,
        }
    }

    /// A receiver over given parts, for tests.
    #[cfg(test)]
    pub(crate) fn from_parts(
        catalog: TriggerCatalog,
        creator: DiagnosisCreator,
        token: Option<&str>,
    ) -> Self {
        let (_, receiver) = watch::channel(token.map(digest));
        Self {
            catalog,
            creator,
            token: receiver,
            secret: SecretRef {
                namespace: "operon".into(),
                name: "operon-alertmanager-token".into(),
            },
            tasks: Vec::new(),
        }
    }
}

/// The receiver's routes.
pub(crate) fn routes(receiver: Arc<AlertReceiver>) -> Router {
    let mut router = Router::new();
    for path in PATHS {
        router = router.route(path, post(receive));
    }
    router.with_state(receiver)
}

/// Keeps `token` equal to the Secret's `token` key (surrounding whitespace removed, as
/// `--from-file` leaves a newline): `None` while the Secret or the key is missing or
/// empty.
async fn watch_token(client: Client, secret: SecretRef, token: watch::Sender<Option<TokenDigest>>) {
    let api: Api<Secret> = Api::namespaced(client, &secret.namespace);
    // One Secret, by name: RBAC can limit list and watch to it (resourceNames).
    let config = watcher::Config::default().fields(&format!("metadata.name={}", secret.name));
    let mut events = std::pin::pin!(watcher::watcher(api, config).default_backoff());
    let mut listed_any = false;
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Init) => listed_any = false,
            Ok(Event::Apply(object) | Event::InitApply(object)) => {
                listed_any = true;
                let value = token_of(&object);
                if value.is_none() {
                    tracing::warn!(secret = %secret, key = TOKEN_KEY,
                        "the Alertmanager token Secret has no token: alerts are refused");
                } else if token.borrow().is_none() {
                    tracing::info!(secret = %secret, "Alertmanager token loaded");
                }
                token.send_replace(value);
            }
            Ok(Event::InitDone) if !listed_any => {
                tracing::warn!(secret = %secret,
                    "the Alertmanager token Secret does not exist: alerts are refused until it does");
                token.send_replace(None);
            }
            Ok(Event::InitDone) => {}
            Ok(Event::Delete(_)) => {
                tracing::warn!(secret = %secret, "the Alertmanager token Secret was deleted: alerts are refused");
                token.send_replace(None);
            }
            Err(e) => tracing::warn!(secret = %secret, error = %e,
                "watching the Alertmanager token Secret failed; retrying"),
        }
    }
}

fn token_of(secret: &Secret) -> Option<TokenDigest> {
    let bytes = secret.data.as_ref()?.get(TOKEN_KEY)?;
    let text = std::str::from_utf8(&bytes.0).ok()?.trim();
    (!text.is_empty()).then(|| digest(text))
}

fn digest(token: &str) -> TokenDigest {
    Sha256::digest(token.as_bytes()).into()
}

/// Equal digests, in time that does not depend on where they differ.
fn same(a: &TokenDigest, b: &TokenDigest) -> bool {
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

/// What a POST came to.
#[derive(Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReceiveSummary {
    /// Alerts in the body.
    pub(crate) alerts: usize,
    /// Resolved alerts, skipped.
    pub(crate) resolved: usize,
    /// Diagnoses created.
    pub(crate) created: usize,
    /// Diagnoses that existed already (a redelivery, or another replica was first).
    pub(crate) already_existed: usize,
    /// Diagnoses not created because their Trigger is over its rate limit.
    pub(crate) rate_limited: usize,
    /// Diagnoses whose creation failed (the answer is then a 500).
    pub(crate) failed: usize,
    /// Each Diagnosis asked for.
    pub(crate) diagnoses: Vec<DiagnosisOutcome>,
}

/// One Diagnosis asked for.
#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DiagnosisOutcome {
    /// The Trigger that matched.
    pub(crate) trigger: String,
    /// The Diagnosis' namespace.
    pub(crate) namespace: String,
    /// The Diagnosis' name.
    pub(crate) name: String,
    /// `created`, `already_exists`, `rate_limited` or `failed`.
    pub(crate) outcome: &'static str,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
}

fn plain(status: StatusCode, message: impl Into<String>) -> Response {
    let mut text = message.into();
    text.push('\n');
    (status, text).into_response()
}

async fn receive(
    State(receiver): State<Arc<AlertReceiver>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(expected) = *receiver.token.borrow() else {
        return plain(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the receiver's token is not loaded (Secret {}, key {TOKEN_KEY})",
                receiver.secret
            ),
        );
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            let (scheme, token) = value.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        })
        .filter(|token| !token.is_empty());
    let authorized = presented.is_some_and(|token| same(&digest(token), &expected));
    if !authorized {
        let mut response = plain(
            StatusCode::UNAUTHORIZED,
            "a valid Authorization: Bearer token is required",
        );
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        return response;
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    let too_large = || {
        plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {MAX_BODY} bytes"),
        )
    };
    if declared.is_some_and(|length| length > MAX_BODY as u64) {
        return too_large();
    }
    let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(bytes) => bytes,
        Err(e) if is_length_limit(&e) => return too_large(),
        Err(e) => return plain(StatusCode::BAD_REQUEST, format!("reading the body: {e}")),
    };
    let post = match AlertPost::parse(&bytes) {
        Ok(post) => post,
        Err(e) => return plain(StatusCode::BAD_REQUEST, format!("not alerts: {e}")),
    };
    let snapshot = receiver.catalog.snapshot();
    if !snapshot.listed {
        return plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "the Triggers are not listed yet",
        );
    }
    let summary = create_all(
        &receiver.creator,
        &snapshot,
        post.alerts(),
        Timestamp::now(),
    )
    .await;
    if let AlertPost::Webhook {
        receiver: name,
        group_key,
        ..
    } = &post
    {
        tracing::info!(receiver = %name, group = %group_key, alerts = summary.alerts,
            resolved = summary.resolved, created = summary.created,
            already_existed = summary.already_existed, rate_limited = summary.rate_limited,
            failed = summary.failed, "Alertmanager notification");
    } else {
        tracing::info!(
            alerts = summary.alerts,
            resolved = summary.resolved,
            created = summary.created,
            already_existed = summary.already_existed,
            rate_limited = summary.rate_limited,
            failed = summary.failed,
            "alerts posted"
        );
    }
    let status = if summary.failed > 0 {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::OK
    };
    (status, axum::Json(summary)).into_response()
}

/// Whether reading the body stopped at the limit (rather than failing otherwise).
fn is_length_limit(error: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if e.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = e.source();
    }
    false
}

/// Creates the Diagnoses of every firing alert for every alert Trigger it matches.
pub(crate) async fn create_all(
    creator: &DiagnosisCreator,
    snapshot: &crate::controllers::trigger::Snapshot,
    alerts: &[PrometheusAlert],
    now: Timestamp,
) -> ReceiveSummary {
    let mut summary = ReceiveSummary {
        alerts: alerts.len(),
        ..ReceiveSummary::default()
    };
    let triggers: Vec<(&Arc<Trigger>, _)> = snapshot.compiled().collect();
    for alert in alerts {
        if alert.is_resolved_at(now) {
            summary.resolved += 1;
            continue;
        }
        for (trigger, compiled) in &triggers {
            let Some(new) = compiled.match_alert(alert) else {
                continue;
            };
            let (namespace, name) = (new.namespace.clone(), new.name.clone());
            let (outcome, error) = match creator.create(trigger, compiled, new).await {
                Ok(outcome) => {
                    match outcome {
                        Outcome::Created => summary.created += 1,
                        Outcome::AlreadyExists => summary.already_existed += 1,
                        Outcome::RateLimited => summary.rate_limited += 1,
                    }
                    (outcome.label(), None)
                }
                Err(e) => {
                    tracing::warn!(trigger = %compiled.name(), error = %e,
                        "could not create the Diagnosis of an alert");
                    summary.failed += 1;
                    ("failed", Some(e.to_string()))
                }
            };
            summary.diagnoses.push(DiagnosisOutcome {
                trigger: compiled.name().to_owned(),
                namespace,
                name,
                outcome,
                error,
            });
        }
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Request;
    use http_body_util::BodyExt as _;
    use operon_cluster::kube::mock::{self, MockApi};
    use serde_json::{Value, json};
    use tower::ServiceExt as _;

    const TOKEN: &str = "s3cr3t-token-from-the-secret";
    use operon_tests::alertmanager::{FIRING, LIST, MIXED, RESOLVED};
    const DIAGNOSES: &str =
        "/apis/operon.dev/v1alpha1/namespaces/operon/diagnoses?&fieldManager=operon";

    fn trigger(name: &str, template: Value) -> Trigger {
        serde_json::from_value(json!({
            "apiVersion": "operon.dev/v1alpha1", "kind": "Trigger",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "generation": 1},
            "spec": {"operationSet": "disk", "sourceTemplate": {"prometheusAlertTemplate": template}},
        }))
        .unwrap()
    }

    /// A router over a receiver whose Triggers are listed, and the mock API server.
    fn receiver(token: Option<&str>, triggers: Vec<Trigger>) -> (Router, MockApi) {
        let (client, api) = mock::pair();
        let catalog = TriggerCatalog::listed(triggers);
        let creator = DiagnosisCreator::new(client, None);
        let receiver = AlertReceiver::from_parts(catalog, creator, token);
        (routes(Arc::new(receiver)), api)
    }

    fn disk_triggers() -> Vec<Trigger> {
        vec![
            trigger(
                "disk-filling",
                json!({"regexp": {"alertName": "^NodeFilesystemSpaceFillingUp$"},
                       "nodeNameReferenceLabel": "node",
                       "parameterInjectionLabels": ["mountpoint", "device"]}),
            ),
            trigger(
                "crashloop",
                json!({"regexp": {"alertName": "^KubePodCrashLooping$"},
                       "podNamespaceReferenceLabel": "namespace",
                       "podNameReferenceLabel": "pod",
                       "containerReferenceLabel": "container"}),
            ),
        ]
    }

    fn request(path: &str, token: Option<&str>, body: impl Into<Body>) -> Request<Body> {
        let mut builder = Request::post(path).header("content-type", "application/json");
        if let Some(token) = token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        builder.body(body.into()).unwrap()
    }

    async fn send(router: &Router, request: Request<Body>) -> (u16, Value) {
        let response = router.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, body)
    }

    /// Sends `request` while the mock API server answers each Diagnosis POST with
    /// `answer`; returns the answer and the POSTed bodies.
    async fn send_answering(
        router: &Router,
        api: &mut MockApi,
        request: Request<Body>,
        posts: usize,
        answer: fn(mock::Call),
    ) -> ((u16, Value), Vec<Value>) {
        let sending = tokio::spawn({
            let router = router.clone();
            async move { send(&router, request).await }
        });
        let mut bodies = Vec::new();
        for _ in 0..posts {
            let call = api.next().await;
            assert_eq!(
                (call.method.as_str(), call.uri.as_str()),
                ("POST", DIAGNOSES)
            );
            bodies.push(call.json());
            answer(call);
        }
        let answered = sending.await.unwrap();
        api.quiet().await;
        (answered, bodies)
    }

    fn created(call: mock::Call) {
        let body = call.json();
        call.answer(201, body);
    }

    fn already_exists(call: mock::Call) {
        call.fail(409, "AlreadyExists", "already exists");
    }

    #[tokio::test]
    async fn a_firing_group_creates_one_diagnosis_per_alert_and_a_redelivery_none() {
        let (router, mut api) = receiver(Some(TOKEN), disk_triggers());
        let ((status, answer), bodies) = send_answering(
            &router,
            &mut api,
            request("/api/v2/alerts", Some(TOKEN), FIRING),
            2,
            created,
        )
        .await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["alerts"], 2);
        assert_eq!(answer["created"], 2);
        assert_eq!(answer["alreadyExisted"], 0);
        assert_eq!(answer["diagnoses"][0]["trigger"], "disk-filling");
        assert_eq!(answer["diagnoses"][0]["outcome"], "created");
        let names: Vec<&str> = bodies
            .iter()
            .map(|b| b["metadata"]["name"].as_str().unwrap())
            .collect();
        assert!(
            names[0].starts_with("prometheus-alert.disk-filling."),
            "{names:?}"
        );
        assert_ne!(names[0], names[1]);
        assert_eq!(bodies[0]["spec"]["nodeName"], "worker-1");
        assert_eq!(bodies[1]["spec"]["nodeName"], "worker-2");
        assert_eq!(bodies[0]["spec"]["parameters"]["mountpoint"], "/");
        assert_eq!(
            bodies[0]["metadata"]["ownerReferences"],
            json!([{"apiVersion": "operon.dev/v1alpha1", "kind": "Trigger", "name": "disk-filling",
                    "uid": "uid-disk-filling", "controller": true, "blockOwnerDeletion": false}])
        );

        // Alertmanager sends the group again (repeat_interval, or a retry): the same
        // names, all existing, none created.
        let ((status, again), bodies_again) = send_answering(
            &router,
            &mut api,
            request("/api/v1/alerts", Some(TOKEN), FIRING),
            2,
            already_exists,
        )
        .await;
        assert_eq!(status, 200, "{again}");
        assert_eq!(again["created"], 0);
        assert_eq!(again["alreadyExisted"], 2);
        assert_eq!(again["diagnoses"][1]["outcome"], "already_exists");
        let names_again: Vec<&str> = bodies_again
            .iter()
            .map(|b| b["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names_again, names);
    }

    #[tokio::test]
    async fn resolved_alerts_create_nothing() {
        let (router, mut api) = receiver(Some(TOKEN), disk_triggers());
        let (status, answer) =
            send(&router, request("/api/v2/alerts", Some(TOKEN), RESOLVED)).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["resolved"], 1);
        assert_eq!(answer["created"], 0);
        api.quiet().await;

        // A group with a resolved and a firing alert: only the firing one.
        let ((status, answer), bodies) = send_answering(
            &router,
            &mut api,
            request("/api/v2/alerts", Some(TOKEN), MIXED),
            1,
            created,
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(answer["resolved"], 1);
        assert_eq!(answer["created"], 1);
        assert_eq!(
            bodies[0]["spec"]["podReference"],
            json!({"namespace": "shop", "name": "cart-7d9f8b6c5-q8v4n", "container": "cart"})
        );
    }

    #[tokio::test]
    async fn prometheus_plain_lists_are_accepted() {
        let (router, mut api) = receiver(Some(TOKEN), disk_triggers());
        let ((status, answer), _) = send_answering(
            &router,
            &mut api,
            request("/api/v2/alerts", Some(TOKEN), LIST),
            1,
            created,
        )
        .await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["created"], 1);
    }

    #[tokio::test]
    async fn a_missing_or_wrong_token_is_401_and_reads_nothing() {
        let (router, mut api) = receiver(Some(TOKEN), disk_triggers());
        for token in [
            None,
            Some("wrong"),
            Some(""),
            Some("s3cr3t-token-from-the-secreT"),
        ] {
            let (status, _) = send(&router, request("/api/v2/alerts", token, FIRING)).await;
            assert_eq!(status, 401, "{token:?}");
        }
        let basic = Request::post("/api/v2/alerts")
            .header("authorization", format!("Basic {TOKEN}"))
            .body(Body::from(FIRING))
            .unwrap();
        let response = router.clone().oneshot(basic).await.unwrap();
        assert_eq!(response.status(), 401);
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
        api.quiet().await;
        // The scheme is case-insensitive (RFC 7235).
        let ((status, _), _) = send_answering(
            &router,
            &mut api,
            Request::post("/api/v2/alerts")
                .header("authorization", format!("bearer {TOKEN}"))
                .body(Body::from(RESOLVED))
                .unwrap(),
            0,
            created,
        )
        .await;
        assert_eq!(status, 200);
    }

    #[tokio::test]
    async fn no_token_loaded_is_503_so_alertmanager_retries() {
        let (router, mut api) = receiver(None, disk_triggers());
        let (status, body) = send(&router, request("/api/v2/alerts", Some(TOKEN), FIRING)).await;
        assert_eq!(status, 503);
        assert!(
            body.as_str()
                .unwrap()
                .contains("operon/operon-alertmanager-token"),
            "{body}"
        );
        api.quiet().await;
    }

    #[tokio::test]
    async fn oversize_bodies_are_413_declared_or_streamed() {
        let (router, mut api) = receiver(Some(TOKEN), disk_triggers());
        let big = vec![b' '; MAX_BODY + 1];
        let (status, _) = send(&router, request("/api/v2/alerts", Some(TOKEN), big.clone())).await;
        assert_eq!(status, 413);
        // A chunked body with no Content-Length, refused once it passes the limit.
        let chunks = futures::stream::iter(
            big.chunks(64 * 1024)
                .map(|c| Ok::<_, std::io::Error>(bytes::Bytes::copy_from_slice(c)))
                .collect::<Vec<_>>(),
        );
        let (status, _) = send(
            &router,
            request("/api/v2/alerts", Some(TOKEN), Body::from_stream(chunks)),
        )
        .await;
        assert_eq!(status, 413);
        // Declared too large: refused before a byte is read.
        let declared = Request::post("/api/v2/alerts")
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("content-length", (MAX_BODY + 1).to_string())
            .body(Body::empty())
            .unwrap();
        let (status, _) = send(&router, declared).await;
        assert_eq!(status, 413);
        api.quiet().await;
    }

    #[tokio::test]
    async fn bad_bodies_are_400_naming_where() {
        let (router, _api) = receiver(Some(TOKEN), disk_triggers());
        let (status, body) = send(
            &router,
            request(
                "/api/v2/alerts",
                Some(TOKEN),
                r#"{"version":"4","alerts":[{"labels":[]}]}"#,
            ),
        )
        .await;
        assert_eq!(status, 400);
        assert!(
            body.as_str().unwrap().contains("alerts[0].labels"),
            "{body}"
        );
    }

    #[tokio::test]
    async fn a_failed_creation_answers_500_so_the_group_is_sent_again() {
        let (router, mut api) = receiver(Some(TOKEN), disk_triggers());
        let ((status, answer), _) = send_answering(
            &router,
            &mut api,
            request("/api/v2/alerts", Some(TOKEN), FIRING),
            2,
            |call| call.fail(500, "InternalError", "etcd timeout"),
        )
        .await;
        assert_eq!(status, 500);
        assert_eq!(answer["failed"], 2);
        assert!(
            answer["diagnoses"][0]["error"]
                .as_str()
                .unwrap()
                .contains("etcd timeout")
        );
    }

    #[tokio::test]
    async fn rate_limited_diagnoses_are_counted_not_created() {
        let mut limited = disk_triggers();
        limited[0].spec.rate_limit = Some(operon_data::api::RateLimit {
            diagnoses: 1,
            per_seconds: 3600,
        });
        let (router, mut api) = receiver(Some(TOKEN), limited);
        let ((status, answer), _) = send_answering(
            &router,
            &mut api,
            request("/api/v2/alerts", Some(TOKEN), FIRING),
            1,
            created,
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(answer["created"], 1);
        assert_eq!(answer["rateLimited"], 1);
        assert_eq!(answer["diagnoses"][1]["outcome"], "rate_limited");
    }

    #[test]
    fn the_token_is_read_trimmed_and_an_empty_one_is_none() {
        let secret = |value: &[u8]| Secret {
            data: Some(
                [(
                    TOKEN_KEY.to_owned(),
                    k8s_openapi::ByteString(value.to_vec()),
                )]
                .into(),
            ),
            ..Secret::default()
        };
        assert_eq!(token_of(&secret(b"abc\n")), Some(digest("abc")));
        assert_eq!(token_of(&secret(b"  \n")), None);
        assert_eq!(token_of(&Secret::default()), None);
        assert!(same(&digest("abc"), &digest("abc")));
        assert!(!same(&digest("abc"), &digest("abd")));
    }

    #[test]
    fn secret_refs_are_namespace_slash_name() {
        let parsed: SecretRef = "operon/operon-alertmanager-token".parse().unwrap();
        assert_eq!(parsed.namespace, "operon");
        assert_eq!(parsed.to_string(), "operon/operon-alertmanager-token");
        for bad in ["operon", "/x", "x/", "a/b/c", ""] {
            assert!(bad.parse::<SecretRef>().is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn without_the_flag_the_routes_are_not_served() {
        let metrics = Arc::new(operon_hooks::metrics::Metrics::new().unwrap());
        let status = Arc::new(super::super::Status {
            metrics,
            engine: watch::Sender::new(None),
            engines: Default::default(),
            leading: watch::Sender::new(None),
            modules: None,
            module_settings: None,
            webhooks_registered: tokio::sync::watch::Sender::new(true),
            forwarder: None,
            synchronized_once: Default::default(),
            reloads: Default::default(),
        });
        let router = super::super::http::router(status, None);
        let (code, _) = send(&router, request("/api/v2/alerts", Some(TOKEN), FIRING)).await;
        assert_eq!(code, 404);
    }
}
