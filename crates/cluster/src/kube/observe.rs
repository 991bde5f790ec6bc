//! What every request to the API server cost: shell-operator's client metrics
//! (`kubernetes_client_request_latency_seconds{verb, url}` and
//! `kubernetes_client_request_result_total{code, method, host}`, there from client-go's
//! metric hooks), under `operon_`.
//!
//! The layer sits inside the client's rate limit, so the latency is the API server's
//! and the network's, not the wait for a token; each attempt of a request sent again is
//! one observation. The latency runs to the response's headers: a watch's events
//! stream after that for as long as it lasts, and a patch's body follows at once.
//!
//! `url` is the request's path with the namespace and the object's name replaced by
//! `{namespace}` and `{name}` (as client-go's URL template), so that a series is one
//! kind of call, not one object.

use http::{Method, Request, Response};
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::Instant;
use tower::{Layer, Service};

/// shell-operator's buckets for the request latency.
const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
];

fn latency_seconds() -> &'static HistogramVec {
    static METRIC: OnceLock<HistogramVec> = OnceLock::new();
    METRIC.get_or_init(|| {
        HistogramVec::new(
            HistogramOpts::new(
                "operon_kubernetes_client_request_latency_seconds",
                "How long requests to the API server took to answer (to the response's headers), by verb and URL template.",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["verb", "url"],
        )
        .expect("static metric definition is valid")
    })
}

fn result_total() -> &'static IntCounterVec {
    static METRIC: OnceLock<IntCounterVec> = OnceLock::new();
    METRIC.get_or_init(|| {
        IntCounterVec::new(
            Opts::new(
                "operon_kubernetes_client_request_result_total",
                "Requests to the API server by response code (<error>: no response), method and host.",
            ),
            &["code", "method", "host"],
        )
        .expect("static metric definition is valid")
    })
}

/// The client's collectors, one per metric family.
pub fn collectors() -> Vec<Box<dyn prometheus::core::Collector>> {
    vec![
        Box::new(latency_seconds().clone()),
        Box::new(result_total().clone()),
    ]
}

/// Registers the client's metrics in `registry` (once per registry).
pub fn register_metrics(registry: &prometheus::Registry) -> Result<(), prometheus::Error> {
    for collector in collectors() {
        registry.register(collector)?;
    }
    Ok(())
}

/// The layer, for a client of the API server at `host`.
#[derive(Clone)]
pub(super) struct Observe {
    host: Arc<str>,
}

impl Observe {
    pub(super) fn new(host: &str) -> Self {
        Self { host: host.into() }
    }
}

impl<S> Layer<S> for Observe {
    type Service = Observed<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Observed {
            inner,
            host: self.host.clone(),
        }
    }
}

/// The service the layer wraps.
#[derive(Clone)]
pub(super) struct Observed<S> {
    inner: S,
    host: Arc<str>,
}

impl<S, B, RB> Service<Request<B>> for Observed<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Timed<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        Timed {
            url: url_template(request.uri().path()),
            watch: watches(request.uri().query().unwrap_or("")),
            method: request.method().clone(),
            host: self.host.clone(),
            started: Instant::now(),
            inner: self.inner.call(request),
        }
    }
}

pin_project_lite::pin_project! {
    /// A request on its way, timed from when it was sent.
    pub(super) struct Timed<F> {
        #[pin]
        inner: F,
        started: Instant,
        url: String,
        method: Method,
        watch: bool,
        host: Arc<str>,
    }
}

impl<F, RB, E> Future for Timed<F>
where
    F: Future<Output = Result<Response<RB>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let output = ready!(this.inner.poll(cx));
        let verb = if *this.watch {
            "WATCH"
        } else {
            this.method.as_str()
        };
        latency_seconds()
            .with_label_values(&[verb, this.url.as_str()])
            .observe(this.started.elapsed().as_secs_f64());
        let status = output.as_ref().ok().map(Response::status);
        let code = status.as_ref().map_or("<error>", http::StatusCode::as_str);
        result_total()
            .with_label_values(&[code, this.method.as_str(), &**this.host])
            .inc();
        Poll::Ready(output)
    }
}

/// Whether the query asks for a watch (`watch=true` or `watch=1`).
fn watches(query: &str) -> bool {
    query
        .split('&')
        .any(|pair| matches!(pair, "watch=true" | "watch=1"))
}

/// The path with the namespace and the object's name as `{namespace}` and `{name}`:
/// `/api/v1/namespaces/ns/pods/p/status` becomes
/// `/api/v1/namespaces/{namespace}/pods/{name}/status`. Paths outside the resource
/// APIs (`/version`, discovery) stay as they are.
fn url_template(path: &str) -> String {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    // `/api/VERSION/...` or `/apis/GROUP/VERSION/...`.
    let prefix = match segments.first() {
        Some(&"api") => 2,
        Some(&"apis") => 3,
        _ => return path.to_owned(),
    };
    if segments.len() <= prefix {
        return path.to_owned();
    }
    let mut out: Vec<&str> = segments[..prefix].to_vec();
    let mut rest = &segments[prefix..];
    // `namespaces/NS/RESOURCE...`: a namespaced call. `namespaces/NAME` alone (or with
    // a subresource: `namespaces/NAME/finalize`, `status`) is the Namespace itself.
    if rest.first() == Some(&"namespaces") && rest.len() >= 3 && !is_namespace_subresource(rest[2])
    {
        out.extend(["namespaces", "{namespace}"]);
        rest = &rest[2..];
    }
    if let Some((resource, tail)) = rest.split_first() {
        out.push(resource);
        if let Some((_name, subresource)) = tail.split_first() {
            out.push("{name}");
            out.extend(subresource);
        }
    }
    format!("/{}", out.join("/"))
}

/// Subresources of a Namespace, which would otherwise read as a resource inside it.
fn is_namespace_subresource(segment: &str) -> bool {
    matches!(segment, "finalize" | "status")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt as _;

    #[test]
    fn paths_become_templates_without_namespaces_or_names() {
        for (path, template) in [
            ("/api/v1/pods", "/api/v1/pods"),
            (
                "/api/v1/namespaces/ns/pods",
                "/api/v1/namespaces/{namespace}/pods",
            ),
            (
                "/api/v1/namespaces/ns/pods/p-1",
                "/api/v1/namespaces/{namespace}/pods/{name}",
            ),
            (
                "/api/v1/namespaces/ns/pods/p-1/status",
                "/api/v1/namespaces/{namespace}/pods/{name}/status",
            ),
            (
                "/apis/apps/v1/namespaces/ns/deployments/d",
                "/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
            ),
            (
                "/apis/coordination.k8s.io/v1/namespaces/ns/leases",
                "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases",
            ),
            ("/api/v1/namespaces", "/api/v1/namespaces"),
            ("/api/v1/namespaces/ns", "/api/v1/namespaces/{name}"),
            (
                "/api/v1/namespaces/ns/finalize",
                "/api/v1/namespaces/{name}/finalize",
            ),
            ("/api/v1/nodes/n1", "/api/v1/nodes/{name}"),
            (
                "/apis/example.com/v1/widgets/w",
                "/apis/example.com/v1/widgets/{name}",
            ),
            ("/apis/apps/v1", "/apis/apps/v1"),
            ("/api", "/api"),
            ("/version", "/version"),
        ] {
            assert_eq!(url_template(path), template, "{path}");
        }
    }

    #[test]
    fn a_watch_is_told_from_a_list() {
        assert!(watches("labelSelector=a%3Db&watch=true&resourceVersion=1"));
        assert!(watches("watch=1"));
        assert!(!watches("watch=false"));
        assert!(!watches("limit=500"));
    }

    #[tokio::test]
    async fn each_request_is_counted_and_timed() {
        let service = tower::service_fn(|request: Request<()>| async move {
            let status = match request.method() {
                &Method::PATCH => 200,
                _ => 404,
            };
            Ok::<_, std::convert::Infallible>(Response::builder().status(status).body(()).unwrap())
        });
        // A host no other test uses: the metrics are the process'.
        let observed = Observe::new("observe-test:6443").layer(service);
        for (method, uri) in [
            (
                Method::PATCH,
                "/api/v1/namespaces/a/pods/p?fieldManager=operon",
            ),
            (Method::GET, "/api/v1/namespaces/a/configmaps/gone"),
        ] {
            let request = Request::builder().method(method).uri(uri).body(()).unwrap();
            observed.clone().oneshot(request).await.unwrap();
        }
        let count = |code: &str, method: &str| {
            result_total()
                .with_label_values(&[code, method, "observe-test:6443"])
                .get()
        };
        assert_eq!(count("200", "PATCH"), 1);
        assert_eq!(count("404", "GET"), 1);
        let patches = latency_seconds()
            .with_label_values(&["PATCH", "/api/v1/namespaces/{namespace}/pods/{name}"])
            .get_sample_count();
        assert!(patches >= 1, "the patch was timed");

        let registry = prometheus::Registry::new();
        register_metrics(&registry).unwrap();
        let families: Vec<String> = registry
            .gather()
            .iter()
            .map(|f| f.name().to_owned())
            .collect();
        assert!(families.contains(&"operon_kubernetes_client_request_latency_seconds".to_owned()));
        assert!(families.contains(&"operon_kubernetes_client_request_result_total".to_owned()));
    }
}
