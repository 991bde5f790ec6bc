//! Traces exported over OTLP, checked on what a receiver in this process gets: the
//! collector's gRPC service (opentelemetry-proto's tonic server) and its HTTP endpoint
//! (`POST /v1/traces`, protobuf or JSON). `operon hook test` runs a hook on one watch
//! event with `--otlp-endpoint`; the event must make one trace whose spans nest as
//! hook.event → hook.filter, hook.queue_wait, hook.run → hook.patch, a script must see
//! that trace in `TRACEPARENT`, and the JSON log lines of the run must carry its id.
//! An admission review makes a `hook.review` trace, and `operon run` a `diagnosis`
//! trace with one `diagnosis.step` per node it ran. (A review continuing the API
//! server's trace is checked on the webhook server itself, in operon-controller; a
//! Job's and an Argo Workflow's trace context, on their runners in operon-runner.)

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

/// The spans a receiver got, in arrival order.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<Span>>>);

impl Received {
    fn keep(&self, request: ExportTraceServiceRequest) {
        let mut spans = self.0.lock().unwrap();
        for resource in request.resource_spans {
            for scope in resource.scope_spans {
                spans.extend(scope.spans);
            }
        }
    }

    fn spans(&self) -> Vec<Span> {
        self.0.lock().unwrap().clone()
    }
}

#[tonic::async_trait]
impl TraceService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.keep(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// A receiver on a loopback port, served by a runtime of its own while it lives.
struct Receiver {
    received: Received,
    url: String,
    _runtime: tokio::runtime::Runtime,
}

impl Receiver {
    fn grpc() -> Self {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let received = Received::default();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let service = TraceServiceServer::new(received.clone());
        runtime.spawn(async move {
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tokio_stream(listener))
                .await
                .unwrap();
        });
        Self {
            received,
            url,
            _runtime: runtime,
        }
    }

    fn http() -> Self {
        use axum::body::Bytes;
        use axum::http::HeaderMap;
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let received = Received::default();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let keep = received.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |headers: HeaderMap, body: Bytes| async move {
                let json = headers
                    .get("content-type")
                    .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
                let request = if json {
                    serde_json::from_slice(&body).expect("an OTLP/JSON request")
                } else {
                    ExportTraceServiceRequest::decode(body).expect("an OTLP/protobuf request")
                };
                keep.keep(request);
                // An empty ExportTraceServiceResponse, in the request's encoding.
                if json {
                    "{}".as_bytes().to_vec()
                } else {
                    Vec::new()
                }
            }),
        );
        runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            received,
            url,
            _runtime: runtime,
        }
    }
}

/// The accepted connections of `listener`, as tonic's server takes them.
fn tokio_stream(
    listener: tokio::net::TcpListener,
) -> impl futures::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    futures::stream::unfold(listener, |listener| async move {
        let accepted = listener.accept().await.map(|(stream, _)| stream);
        Some((accepted, listener))
    })
}

fn operon(args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(args)
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .env("HOME", home.path())
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
        .output()
        .expect("operon runs")
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../operations/examples/hooks")
        .join(name)
        .display()
        .to_string()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The spans of the one trace whose root is the `hook.event` of web-2's Added event.
fn event_trace(spans: &[Span]) -> Vec<&Span> {
    let roots: Vec<&Span> = spans
        .iter()
        .filter(|s| {
            s.name == "hook.event"
                && attribute(s, "event").as_deref() == Some("Added")
                && attribute(s, "name").as_deref() == Some("web-2")
        })
        .collect();
    assert_eq!(
        roots.len(),
        1,
        "one trace of the Added event: {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let trace = &roots[0].trace_id;
    spans.iter().filter(|s| &s.trace_id == trace).collect()
}

fn one<'a>(trace: &[&'a Span], name: &str) -> &'a Span {
    let found: Vec<&&Span> = trace.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one {name} in the trace");
    found[0]
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
    let value = span
        .attributes
        .iter()
        .find(|a| a.key == key)?
        .value
        .as_ref()?;
    match value.value.as_ref()? {
        V::StringValue(s) => Some(s.clone()),
        V::IntValue(i) => Some(i.to_string()),
        V::BoolValue(b) => Some(b.to_string()),
        other => Some(format!("{other:?}")),
    }
}

/// Checks the trace of the event that ran the hook; returns it.
fn check_event_trace(spans: &[Span]) -> Vec<&Span> {
    let trace = event_trace(spans);
    let root = one(&trace, "hook.event");
    assert!(root.parent_span_id.is_empty(), "hook.event is the root");
    assert_eq!(attribute(root, "event").as_deref(), Some("Added"));
    assert_eq!(attribute(root, "name").as_deref(), Some("web-2"));
    assert_eq!(attribute(root, "namespace").as_deref(), Some("default"));
    for child in ["hook.filter", "hook.queue_wait", "hook.run"] {
        assert_eq!(
            one(&trace, child).parent_span_id,
            root.span_id,
            "{child} is a child of hook.event"
        );
    }
    let run = one(&trace, "hook.run");
    assert_eq!(attribute(run, "outcome").as_deref(), Some("succeeded"));
    let patch = one(&trace, "hook.patch");
    assert_eq!(patch.parent_span_id, run.span_id, "hook.patch is the run's");
    assert_eq!(attribute(patch, "operation").as_deref(), Some("MergePatch"));
    // Each stage inside the event's time.
    for span in &trace {
        assert!(span.start_time_unix_nano >= root.start_time_unix_nano);
        assert!(span.end_time_unix_nano <= root.end_time_unix_nano);
    }
    trace
}

/// A hook that, on each Pod event, annotates web-2 with the `TRACEPARENT` it was given.
const TRACEPARENT_HOOK: &str = r#"#!/bin/sh
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","kubernetes":[{"name":"pods","kind":"Pod","jqFilter":".metadata.labels","executeHookOnSynchronization":false}]}'
  exit 0
fi
echo "the hook's traceparent: $TRACEPARENT" >&2
printf '{"operation":"MergePatch","kind":"Pod","namespace":"default","name":"web-2","mergePatch":{"metadata":{"annotations":{"traceparent":"%s"}}}}\n' "$TRACEPARENT" >> "$KUBERNETES_PATCH_PATH"
"#;

#[test]
fn a_script_hooks_event_is_one_trace_over_grpc_and_the_script_continues_it() {
    use std::os::unix::fs::PermissionsExt as _;
    let receiver = Receiver::grpc();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let hook = dir.path().join("traceparent.sh");
    std::fs::write(&hook, TRACEPARENT_HOOK).unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = operon(&[
        "hook",
        "test",
        hook.to_str().unwrap(),
        "--objects",
        &fixture("pods.yaml"),
        "--event",
        &format!("added:{}", fixture("new-pod.yaml")),
        "-o",
        "json",
        "--otlp-endpoint",
        &receiver.url,
        "--log-type",
        "json",
        "--log",
        "info",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    let spans = receiver.received.spans();
    let trace = check_event_trace(&spans);
    let run = one(&trace, "hook.run");
    // The script got the run's span as its parent.
    let web2 = result["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["metadata"]["name"] == "web-2")
        .expect("web-2");
    let traceparent = web2["metadata"]["annotations"]["traceparent"]
        .as_str()
        .expect("the hook saw TRACEPARENT");
    assert_eq!(
        traceparent,
        format!("00-{}-{}-01", hex(&run.trace_id), hex(&run.span_id))
    );
    // The hook's output, logged in its run, carries the trace's id.
    let logged: Vec<Value> = stderr
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|l: &Value| l.to_string().contains("the hook's traceparent"))
        .collect();
    assert!(!logged.is_empty(), "the hook's stderr is logged: {stderr}");
    for line in logged {
        assert_eq!(line["trace_id"], hex(&run.trace_id), "{line}");
    }
}

#[test]
fn a_wasm_hooks_event_is_one_trace_over_http_protobuf_and_json() {
    for protocol in ["http/protobuf", "http/json"] {
        let receiver = Receiver::http();
        let out = operon(&[
            "hook",
            "test",
            operon_tests::POD_LABELER,
            "--objects",
            &fixture("pods.yaml"),
            "--event",
            &format!("added:{}", fixture("new-pod.yaml")),
            "-o",
            "json",
            "--otlp-endpoint",
            &receiver.url,
            "--otlp-protocol",
            protocol,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let spans = receiver.received.spans();
        check_event_trace(&spans);
        // The Synchronization run is a trace of its own.
        assert!(
            spans.iter().any(|s| s.name == "hook.synchronization"),
            "{protocol}"
        );
    }
}

#[test]
fn a_sampling_ratio_of_zero_exports_nothing_and_one_past_one_is_refused() {
    let receiver = Receiver::grpc();
    let out = operon(&[
        "hook",
        "test",
        operon_tests::POD_LABELER,
        "--objects",
        &fixture("pods.yaml"),
        "--event",
        &format!("added:{}", fixture("new-pod.yaml")),
        "--otlp-endpoint",
        &receiver.url,
        "--otlp-sampling-ratio",
        "0",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(receiver.received.spans(), Vec::new());
    let out = operon(&[
        "hook",
        "test",
        operon_tests::POD_LABELER,
        "--otlp-endpoint",
        &receiver.url,
        "--otlp-sampling-ratio",
        "2",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not between 0 and 1"), "{stderr}");
}

#[test]
fn an_admission_review_is_a_hook_review_trace() {
    let receiver = Receiver::grpc();
    let hook = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../operations/fixtures/shell-hooks/validating.sh")
        .display()
        .to_string();
    let out = operon(&[
        "hook",
        "test",
        &hook,
        "--review",
        &format!(
            "private-repo-policy.example.com:{}",
            fixture("admission-review.yaml")
        ),
        "--otlp-endpoint",
        &receiver.url,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spans = receiver.received.spans();
    let reviews: Vec<&Span> = spans.iter().filter(|s| s.name == "hook.review").collect();
    assert_eq!(
        reviews.len(),
        1,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let review = reviews[0];
    assert!(
        review.parent_span_id.is_empty(),
        "no caller: a trace of its own"
    );
    assert_eq!(
        attribute(review, "binding").as_deref(),
        Some("private-repo-policy.example.com")
    );
    let trace: Vec<&Span> = spans
        .iter()
        .filter(|s| s.trace_id == review.trace_id)
        .collect();
    assert_eq!(one(&trace, "hook.run").parent_span_id, review.span_id);
}

/// A Diagnosis whose first path fails at its second node and whose second path
/// succeeds: three nodes run.
const DIAGNOSIS: &str = r#"
apiVersion: operon.dev/v1alpha1
kind: Operation
metadata: {name: count}
spec:
  processor:
    scriptRunner: {script: "echo counted"}
---
apiVersion: operon.dev/v1alpha1
kind: Operation
metadata: {name: fail}
spec:
  processor:
    scriptRunner: {script: "exit 2"}
---
apiVersion: operon.dev/v1alpha1
kind: OperationSet
metadata: {name: set}
spec:
  adjacencyList:
    - {id: 0, to: [1, 3]}
    - {id: 1, operation: count, to: [2]}
    - {id: 2, operation: fail}
    - {id: 3, operation: count}
"#;

#[test]
fn a_diagnosis_is_one_trace_with_a_step_per_node() {
    let receiver = Receiver::http();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("diagnosis.yaml");
    std::fs::write(&file, DIAGNOSIS).unwrap();
    let out = operon(&[
        "run",
        file.to_str().unwrap(),
        "--operation-set",
        "set",
        "--output",
        "json",
        "--otlp-endpoint",
        &receiver.url,
        "--otlp-protocol",
        "http/protobuf",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["status"]["phase"], "Succeeded");
    let spans = receiver.received.spans();
    let roots: Vec<&Span> = spans.iter().filter(|s| s.name == "diagnosis").collect();
    assert_eq!(roots.len(), 1);
    let root = roots[0];
    assert!(root.parent_span_id.is_empty());
    let steps: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "diagnosis.step")
        .collect();
    let mut nodes: Vec<String> = steps.iter().filter_map(|s| attribute(s, "node")).collect();
    nodes.sort();
    assert_eq!(nodes, ["1", "2", "3"]);
    assert_eq!(
        steps.len(),
        result["status"]["nodes"].as_array().unwrap().len(),
        "one step per node that ran"
    );
    for step in &steps {
        assert_eq!(step.trace_id, root.trace_id);
        assert_eq!(step.parent_span_id, root.span_id);
    }
    let failed = steps
        .iter()
        .find(|s| attribute(s, "node").as_deref() == Some("2"))
        .unwrap();
    assert_eq!(attribute(failed, "outcome").as_deref(), Some("Failed"));
}
