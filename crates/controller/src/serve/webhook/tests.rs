//! The webhook server over real HTTPS on loopback: reviews in and out for every kind of
//! answer, bad requests, and a certificate rotation in the middle of a request stream.

use super::*;
use futures::future::BoxFuture;
use http_body_util::BodyExt as _;
use operon_cluster::local::LocalCluster;
use operon_data::model::{
    AdmissionBindingConfig, BindingType, ConversionBindingConfig, ConversionResponse,
    ConversionRule, HookConfig, HookInput, HookOutput, ValidatingResponse, WebhookRule,
};
use operon_hooks::config;
use operon_hooks::engine::LoadedHook;
use operon_hooks::metrics::Metrics;
use operon_hooks::{Hook, HookError, HookRun};
use operon_tests::pki::TestPki;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};

/// Answers by the name of the object under review.
struct Reviewer;

fn config() -> HookConfig {
    HookConfig {
        kubernetes_validating: vec![AdmissionBindingConfig {
            name: "policy.example.com".into(),
            rules: vec![WebhookRule {
                operations: vec!["CREATE".into()],
                api_groups: vec![String::new()],
                api_versions: vec!["v1".into()],
                resources: vec!["pods".into()],
                scope: None,
            }],
            failure_policy: None,
            label_selector: None,
            namespace: None,
            timeout_seconds: None,
            ..AdmissionBindingConfig::default()
        }],
        kubernetes_mutating: vec![AdmissionBindingConfig {
            name: "defaults.example.com".into(),
            rules: vec![WebhookRule {
                operations: vec!["CREATE".into()],
                api_groups: vec![String::new()],
                api_versions: vec!["v1".into()],
                resources: vec!["pods".into()],
                scope: None,
            }],
            ..AdmissionBindingConfig::default()
        }],
        // Two steps of one chain in two bindings: v1 -> v2 (with the group) and
        // v2 -> v3 (without: shell-operator matches `v2` to `example.com/v2`).
        kubernetes_conversion: vec![
            ConversionBindingConfig {
                name: "widgets".into(),
                crd_name: "widgets.example.com".into(),
                conversions: vec![ConversionRule {
                    from_version: "example.com/v1".into(),
                    to_version: "example.com/v2".into(),
                }],
                group: None,
                include_snapshots_from: vec![],
            },
            ConversionBindingConfig {
                name: "widgets-next".into(),
                crd_name: "widgets.example.com".into(),
                conversions: vec![ConversionRule {
                    from_version: "v2".into(),
                    to_version: "v3".into(),
                }],
                group: None,
                include_snapshots_from: vec![],
            },
        ],
        ..HookConfig::default()
    }
}

fn answer(context: &operon_data::model::BindingContext) -> Result<HookOutput, HookError> {
    let review: Value = serde_json::from_str(context.review.as_deref().unwrap()).unwrap();
    if context.type_ == BindingType::Conversion {
        let desired = review["request"]["desiredAPIVersion"].clone();
        let converted = review["request"]["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                let mut o = o.clone();
                o["apiVersion"] = desired.clone();
                o.to_string()
            })
            .collect();
        return Ok(HookOutput {
            conversion: Some(ConversionResponse {
                failed_message: None,
                converted_objects: converted,
            }),
            ..HookOutput::default()
        });
    }
    let name = review["request"]["object"]["metadata"]["name"]
        .as_str()
        .unwrap_or("");
    let validating =
        |allowed: bool, message: Option<&str>, warnings: &[&str], patch: Option<&str>| {
            Ok(HookOutput {
                validating: Some(ValidatingResponse {
                    allowed,
                    message: message.map(str::to_owned),
                    warnings: warnings.iter().map(|w| (*w).to_owned()).collect(),
                    patch: patch.map(str::to_owned),
                }),
                ..HookOutput::default()
            })
        };
    match name {
        "denied" => validating(false, Some("no pods named denied"), &[], None),
        "warned" => validating(true, None, &["careful"], None),
        "mutated" => validating(
            true,
            None,
            &[],
            Some(r#"[{"op":"add","path":"/metadata/labels","value":{"m":"y"}}]"#),
        ),
        "misfit" => validating(
            true,
            None,
            &[],
            Some(r#"[{"op":"replace","path":"/spec/absent","value":1}]"#),
        ),
        "garbled" => validating(true, None, &[], Some(r#"{"op":"add"}"#)),
        "failing" => Err(HookError::Run("exit code 3".into())),
        "silent" => Ok(HookOutput::default()),
        _ => validating(true, None, &[], None),
    }
}

impl Hook for Reviewer {
    fn name(&self) -> &str {
        "hooks/reviewer.sh"
    }
    fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
        Box::pin(async { Ok(config()) })
    }
    fn handle(&self, input: HookInput, _timeout: Duration) -> BoxFuture<'_, (HookRun, HookInput)> {
        Box::pin(async move {
            let context = &input.binding_contexts[0];
            let slow = context
                .review
                .as_deref()
                .is_some_and(|r| r.contains("\"slow\""));
            if slow {
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
            let run = HookRun {
                outcome: answer(context),
                patches: vec![],
                metrics: vec![],
                logs: vec![],
                stdout: String::new(),
                stderr: String::new(),
                elapsed: Duration::from_millis(1),
            };
            (run, input)
        })
    }
}

/// A running server: its address and certificate.
async fn start(
    pki: &TestPki,
    timeout: Duration,
) -> (std::net::SocketAddr, Arc<tls::ReloadingCert>, Arc<Metrics>) {
    start_enforcing(pki, timeout, Enforcement::Deny).await
}

/// [`start`], with `enforcement` for the bindings (as `--webhook-enforcement`).
async fn start_enforcing(
    pki: &TestPki,
    timeout: Duration,
    enforcement: Enforcement,
) -> (std::net::SocketAddr, Arc<tls::ReloadingCert>, Arc<Metrics>) {
    let files = pki.issue(1);
    let cert = tls::ReloadingCert::load(tls::TlsFiles {
        cert: files.cert,
        key: files.key,
        client_ca: None,
    })
    .unwrap();
    let hook: Arc<dyn Hook> = Arc::new(Reviewer);
    let raw = hook.configure().await.unwrap();
    let validated = config::validate(hook.name(), &raw, &config::any_kind).unwrap();
    let metrics = Arc::new(Metrics::new().unwrap());
    let engine = Arc::new(Engine::new(
        vec![LoadedHook {
            hook,
            config: validated,
        }],
        Arc::new(LocalCluster::new()),
        metrics.clone(),
    ));
    let status = Arc::new(Status {
        metrics: metrics.clone(),
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
    let router = router(status.clone(), WebhookKind::Admission, timeout, enforcement).merge(
        Router::new()
            .route("/convert/{crd}", post(convert))
            .with_state(WebhookState {
                status,
                timeout,
                enforcement,
            }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (_stop, stopped) = watch::channel(false);
    let config = cert.server_config().unwrap();
    tokio::spawn(async move {
        let _keep = _stop;
        serve_tls(listener, config, router, stopped).await;
    });
    (address, cert, metrics)
}

/// POSTs `body` over a new TLS connection; returns (status, JSON or text, the server
/// certificate's serial).
async fn post_review(
    pki: &TestPki,
    address: std::net::SocketAddr,
    path: &str,
    body: &Value,
) -> Result<(u16, Value, Vec<u8>), String> {
    post_review_traced(pki, address, path, body, None).await
}

/// [`post_review`] with a `traceparent` header.
async fn post_review_traced(
    pki: &TestPki,
    address: std::net::SocketAddr,
    path: &str,
    body: &Value,
    traceparent: Option<&str>,
) -> Result<(u16, Value, Vec<u8>), String> {
    let tcp = tokio::net::TcpStream::connect(address)
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::IpAddress(address.ip().into());
    let tls = pki
        .connector()
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let peer: CertificateDer<'static> = tls.get_ref().1.peer_certificates().unwrap()[0]
        .clone()
        .into_owned();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let mut request = hyper::Request::post(path)
        .header("host", "operon")
        .header("content-type", "application/json");
    if let Some(traceparent) = traceparent {
        request = request.header("traceparent", traceparent);
    }
    let request = request
        .body(http_body_util::Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Ok((status, value, peer.to_vec()))
}

fn admission(name: &str) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
           "request": {"uid": format!("uid-{name}"), "operation": "CREATE",
                       "kind": {"group": "", "version": "v1", "kind": "Pod"},
                       "object": {"metadata": {"name": name}}}})
}

const VALIDATE: &str = "/validate/hooks%2Freviewer.sh/policy.example.com";
const MUTATE: &str = "/mutate/hooks%2Freviewer.sh/defaults.example.com";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_reviews_are_answered_over_https() {
    let pki = TestPki::new();
    let (address, _cert, metrics) = start(&pki, Duration::from_millis(500)).await;
    let response = |name: &str| {
        let review = admission(name);
        let pki = &pki;
        async move { post_review(pki, address, VALIDATE, &review).await.unwrap() }
    };
    let (status, allowed, _) = response("fine").await;
    assert_eq!(status, 200);
    assert_eq!(
        allowed,
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
               "response": {"uid": "uid-fine", "allowed": true}})
    );
    let (_, denied, _) = response("denied").await;
    assert_eq!(
        denied["response"]["status"],
        json!({"code": 403, "message": "no pods named denied"})
    );
    let (_, warned, _) = response("warned").await;
    assert_eq!(warned["response"]["warnings"], json!(["careful"]));
    // A validating binding cannot mutate: the patch is dropped, the answer kept.
    let (_, mutated, _) = response("mutated").await;
    assert_eq!(
        mutated["response"],
        json!({"uid": "uid-mutated", "allowed": true})
    );
    let (_, failing, _) = response("failing").await;
    assert_eq!(failing["response"]["allowed"], false);
    assert_eq!(failing["response"]["status"]["code"], 500);
    assert!(
        failing["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("hook hooks/reviewer.sh failed"),
        "{failing}"
    );
    let (_, silent, _) = response("silent").await;
    assert_eq!(
        silent["response"]["status"]["message"],
        "hook hooks/reviewer.sh gave no answer for binding policy.example.com"
    );
    let (_, slow, _) = response("slow").await;
    assert_eq!(
        slow["response"]["status"]["message"],
        "hook hooks/reviewer.sh did not answer within 0.5s"
    );

    // Requests this endpoint does not answer.
    let (status, _, _) = post_review(&pki, address, "/validate/nope/policy", &admission("x"))
        .await
        .unwrap();
    assert_eq!(status, 404);
    let (status, _, _) = post_review(
        &pki,
        address,
        "/validate/hooks%2Freviewer.sh/other",
        &admission("x"),
    )
    .await
    .unwrap();
    assert_eq!(status, 404);
    let (status, text, _) = post_review(&pki, address, VALIDATE, &json!({"kind": "Pod"}))
        .await
        .unwrap();
    assert_eq!(status, 400, "{text}");

    // Every answered review counts by outcome; requests that reached no binding do not.
    let text = metrics.render();
    let webhook = "kind=\"validating\",outcome";
    for (outcome, count) in [("allowed", 3), ("denied", 1), ("error", 3)] {
        let series = format!(
            "operon_webhook_requests_total{{{webhook}=\"{outcome}\",webhook=\"hooks/reviewer.sh/policy.example.com\"}} {count}"
        );
        assert!(text.contains(&series), "{series} in\n{text}");
    }
    assert!(
        text.contains("operon_webhook_request_duration_seconds_count{kind=\"validating\",webhook=\"hooks/reviewer.sh/policy.example.com\"} 7"),
        "{text}"
    );
    assert!(!text.contains("nope"), "{text}");
    crate::serve::tests::promtool_accepts(&text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutating_reviews_carry_a_patch_that_applies() {
    use base64::Engine as _;
    let pki = TestPki::new();
    let (address, _cert, _metrics) = start(&pki, Duration::from_secs(5)).await;
    let response = |name: &str| {
        let review = admission(name);
        let pki = &pki;
        async move { post_review(pki, address, MUTATE, &review).await.unwrap() }
    };
    let (status, mutated, _) = response("mutated").await;
    assert_eq!(status, 200);
    assert_eq!(mutated["response"]["uid"], "uid-mutated");
    assert_eq!(mutated["response"]["allowed"], true);
    assert_eq!(mutated["response"]["patchType"], "JSONPatch");
    let patch = base64::engine::general_purpose::STANDARD
        .decode(mutated["response"]["patch"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&patch).unwrap(),
        json!([{"op": "add", "path": "/metadata/labels", "value": {"m": "y"}}])
    );
    // No patch, no patchType.
    let (_, plain, _) = response("fine").await;
    assert_eq!(
        plain["response"],
        json!({"uid": "uid-fine", "allowed": true})
    );
    // A patch that cannot apply to the object denies, naming the hook and binding.
    let (_, misfit, _) = response("misfit").await;
    assert_eq!(misfit["response"]["allowed"], false);
    assert_eq!(misfit["response"]["status"]["code"], 500);
    let message = misfit["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "hook hooks/reviewer.sh binding defaults.example.com: the patch does not apply"
        ),
        "{message}"
    );
    let (_, garbled, _) = response("garbled").await;
    let message = garbled["response"]["status"]["message"].as_str().unwrap();
    assert!(message.contains("not an RFC 6902 JSON Patch"), "{message}");
    // The validating binding is not reachable as a mutating one, nor the reverse.
    let (status, _, _) = post_review(
        &pki,
        address,
        "/mutate/hooks%2Freviewer.sh/policy.example.com",
        &admission("x"),
    )
    .await
    .unwrap();
    assert_eq!(status, 404);
    let (status, _, _) = post_review(
        &pki,
        address,
        "/validate/hooks%2Freviewer.sh/defaults.example.com",
        &admission("x"),
    )
    .await
    .unwrap();
    assert_eq!(status, 404);
}

fn conversion(desired: &str, versions: &[(&str, &str)]) -> Value {
    let objects: Vec<Value> = versions
        .iter()
        .map(|(version, name)| json!({"apiVersion": version, "metadata": {"name": name}}))
        .collect();
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "c1", "desiredAPIVersion": desired, "objects": objects}})
}

fn converted(answer: &Value) -> Vec<(&str, &str)> {
    answer["response"]["convertedObjects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["apiVersion"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversion_reviews_convert_every_object_in_order() {
    let pki = TestPki::new();
    let (address, _cert, metrics) = start(&pki, Duration::from_secs(5)).await;
    let review = conversion(
        "example.com/v2",
        &[("example.com/v1", "a"), ("example.com/v1", "b")],
    );
    let (status, answer, _) = post_review(&pki, address, "/convert/widgets.example.com", &review)
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(answer["response"]["uid"], "c1");
    assert_eq!(answer["response"]["result"]["status"], "Success");
    assert_eq!(
        converted(&answer),
        [("example.com/v2", "a"), ("example.com/v2", "b")]
    );
    let text = metrics.render();
    assert!(
        text.contains("operon_webhook_requests_total{kind=\"conversion\",outcome=\"converted\",webhook=\"widgets.example.com\"} 1"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversions_chain_rules_and_keep_the_order_of_mixed_versions() {
    let pki = TestPki::new();
    let (address, _cert, _metrics) = start(&pki, Duration::from_secs(5)).await;
    // v1 objects take two steps (two bindings), the v2 one takes one, the v3 one none.
    let review = conversion(
        "example.com/v3",
        &[
            ("example.com/v1", "a"),
            ("example.com/v3", "b"),
            ("example.com/v2", "c"),
            ("example.com/v1", "d"),
        ],
    );
    let (_, answer, _) = post_review(&pki, address, "/convert/widgets.example.com", &review)
        .await
        .unwrap();
    assert_eq!(
        answer["response"]["result"]["status"], "Success",
        "{answer}"
    );
    assert_eq!(
        converted(&answer),
        [
            ("example.com/v3", "a"),
            ("example.com/v3", "b"),
            ("example.com/v3", "c"),
            ("example.com/v3", "d")
        ]
    );
    // No chain back from v3: a Failure naming the versions, not a hang or a 500.
    let back = conversion("example.com/v1", &[("example.com/v3", "a")]);
    let (status, answer, _) = post_review(&pki, address, "/convert/widgets.example.com", &back)
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(answer["response"]["result"]["status"], "Failure");
    assert_eq!(
        answer["response"]["result"]["message"],
        "no hook converts widgets.example.com from example.com/v3 to example.com/v1 (no chain of conversion rules leads there)"
    );
    // A CRD no hook converts.
    let (status, _, _) = post_review(&pki, address, "/convert/gadgets.example.com", &back)
        .await
        .unwrap();
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_rotation_fails_no_request() {
    let pki = TestPki::new();
    let (address, cert, _metrics) = start(&pki, Duration::from_secs(5)).await;
    let first = post_review(&pki, address, VALIDATE, &admission("fine"))
        .await
        .unwrap()
        .2;
    // A stream of requests, each on a new connection (a new handshake), while the
    // certificate is renewed twice.
    let stream = {
        let review = admission("fine");
        let pki = &pki;
        async move {
            let mut certs = std::collections::HashSet::new();
            for _ in 0..150 {
                let (status, _, serial) = post_review(pki, address, VALIDATE, &review)
                    .await
                    .expect("no request fails during the rotation");
                assert_eq!(status, 200);
                certs.insert(serial);
            }
            certs
        }
    };
    let rotate = async {
        for serial in [2, 3] {
            tokio::time::sleep(Duration::from_millis(60)).await;
            pki.issue(serial);
            assert!(cert.reload().unwrap(), "the new files are picked up");
        }
    };
    let (seen, ()) = tokio::join!(stream, rotate);
    let last = post_review(&pki, address, VALIDATE, &admission("fine"))
        .await
        .unwrap()
        .2;
    assert_ne!(first, last, "new connections get the renewed certificate");
    assert!(
        seen.len() >= 2,
        "the stream saw {} certificates",
        seen.len()
    );
    // A broken renewal keeps the current certificate.
    std::fs::write(&pki.issue(4).key, "not a key").unwrap();
    assert!(cert.reload().is_err());
    let still = post_review(&pki, address, VALIDATE, &admission("fine"))
        .await
        .unwrap()
        .2;
    assert_eq!(still, last);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warn_by_default_allows_and_counts_what_would_be_denied() {
    let pki = TestPki::new();
    let (address, _cert, metrics) =
        start_enforcing(&pki, Duration::from_millis(500), Enforcement::Warn).await;
    let post = |path: &'static str, name: &str| {
        let review = admission(name);
        let pki = &pki;
        async move { post_review(pki, address, path, &review).await.unwrap().1 }
    };
    let denied = post(VALIDATE, "denied").await;
    assert_eq!(
        denied["response"],
        json!({"uid": "uid-denied", "allowed": true, "warnings": [
            "admission webhook \"policy.example.com\" would deny the request (Warn): no pods named denied"]})
    );
    let failing = post(VALIDATE, "failing").await;
    assert_eq!(failing["response"]["allowed"], true);
    assert!(
        failing["response"]["warnings"][0]
            .as_str()
            .unwrap()
            .contains("failed and is not enforced (Warn): hook hooks/reviewer.sh failed"),
        "{failing}"
    );
    let mutated = post(MUTATE, "mutated").await;
    assert_eq!(mutated["response"]["allowed"], true);
    assert!(mutated["response"].get("patch").is_none(), "{mutated}");

    let text = metrics.render();
    for (kind, webhook, outcome) in [
        ("validating", "policy.example.com", "would_deny"),
        ("validating", "policy.example.com", "error"),
        ("mutating", "defaults.example.com", "allowed"),
    ] {
        let series = format!(
            "operon_webhook_requests_total{{kind=\"{kind}\",outcome=\"{outcome}\",webhook=\"hooks/reviewer.sh/{webhook}\"}} 1"
        );
        assert!(text.contains(&series), "{series} in\n{text}");
    }
}

/// Spans handed to the exporter, kept in memory.
#[derive(Clone, Debug, Default)]
struct Collected(Arc<std::sync::Mutex<Vec<opentelemetry_sdk::trace::SpanData>>>);

impl opentelemetry_sdk::trace::SpanExporter for Collected {
    fn export(
        &self,
        batch: Vec<opentelemetry_sdk::trace::SpanData>,
    ) -> impl Future<Output = opentelemetry_sdk::error::OTelSdkResult> + Send {
        self.0.lock().unwrap().extend(batch);
        std::future::ready(Ok(()))
    }
}

// One thread: the server's tasks see the test's subscriber.
#[tokio::test]
async fn a_review_with_a_traceparent_continues_the_callers_trace() {
    use opentelemetry::trace::{SpanId, TracerProvider as _};
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let collected = Collected::default();
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_simple_exporter(collected.clone())
        .build();
    let spans = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("test"))
        .with_filter(
            tracing_subscriber::filter::Targets::new()
                .with_target(operon_runner::trace::TARGET, tracing::Level::TRACE),
        );
    let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(spans));
    // While one dispatcher is registered, tracing-core caches a callsite's interest from
    // the default of the thread that reaches it first: a test running beside this one
    // (no subscriber) would have `hook.review` cached as never, for this test too. A
    // second one makes it ask every registered dispatcher, this test's among them.
    let _second = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    let pki = TestPki::new();
    let (address, _cert, _) = start(&pki, Duration::from_secs(5)).await;
    for traceparent in [Some(CALLER), Some("00-not-a-trace-01"), None] {
        let (status, _, _) =
            post_review_traced(&pki, address, VALIDATE, &admission("fine"), traceparent)
                .await
                .unwrap();
        assert_eq!(status, 200);
    }
    let spans = collected.0.lock().unwrap().clone();
    let named = |name: &str| -> Vec<_> { spans.iter().filter(|s| s.name == name).collect() };
    let requests = named("webhook.request");
    assert_eq!(requests.len(), 1, "only the valid header starts one");
    let request = requests[0];
    assert_eq!(
        request.span_context.trace_id().to_string(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(request.parent_span_id.to_string(), "00f067aa0ba902b7");
    let reviews = named("hook.review");
    assert_eq!(reviews.len(), 3);
    assert_eq!(reviews[0].parent_span_id, request.span_context.span_id());
    assert_eq!(
        reviews[0].span_context.trace_id(),
        request.span_context.trace_id()
    );
    for review in &reviews[1..] {
        assert_eq!(review.parent_span_id, SpanId::INVALID, "a trace of its own");
        assert_ne!(
            review.span_context.trace_id(),
            request.span_context.trace_id()
        );
    }
}
