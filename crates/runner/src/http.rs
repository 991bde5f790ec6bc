//! The HTTP runner: KubeDiag's `httpServer` processor. POSTs the input map as JSON and
//! expects a JSON object of strings back.
//!
//! Unlike KubeDiag, https verifies the server's certificate against the system's roots.

use super::{DryRun, RunError, RunOutput, RunRequest, Runner};
use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use operon_data::api::HttpServer;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// KubeDiag's `MaxDataSize`: responses larger than this fail the run.
pub(crate) const MAX_RESPONSE_BYTES: usize = 2 << 20;

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// One client per process: loading the system's root certificates is not free.
fn client() -> Result<&'static HttpsClient, RunError> {
    static CLIENT: OnceLock<Result<HttpsClient, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            let connector = hyper_rustls::HttpsConnectorBuilder::new()
                .with_native_roots()
                .map_err(|e| format!("cannot load the system's root certificates: {e}"))?
                .https_or_http()
                .enable_http1()
                .build();
            Ok(Client::builder(TokioExecutor::new()).build(connector))
        })
        .as_ref()
        .map_err(|e| RunError::new(e.clone()))
}

/// Why an `httpServer` processor's fields do not make a URL.
#[derive(Debug, thiserror::Error)]
#[error("httpServer gives the URL {url:?}, which is invalid: {source}")]
pub struct HttpServerError {
    /// The URL the fields make.
    pub url: String,
    /// Why it is not a valid URL.
    #[source]
    pub source: hyper::http::uri::InvalidUri,
}

/// POSTs each run's input to one URL.
#[derive(Debug, Clone)]
pub(crate) struct HttpRunner {
    uri: hyper::Uri,
}

impl HttpRunner {
    /// A runner for the processor's endpoint, with KubeDiag's defaults (`http`,
    /// `127.0.0.1`, port 80/443, path `/`).
    pub(crate) fn new(server: &HttpServer) -> Result<Self, HttpServerError> {
        let scheme = server.scheme.as_deref().unwrap_or("http");
        let address = server.address.as_deref().unwrap_or("127.0.0.1");
        let port = server
            .port
            .unwrap_or(if scheme == "https" { 443 } else { 80 });
        let path = server.path.as_deref().unwrap_or("/");
        let host = if address.contains(':') {
            format!("[{address}]")
        } else {
            address.to_owned()
        };
        let text = format!("{scheme}://{host}:{port}{path}");
        let uri = text
            .parse()
            .map_err(|source| HttpServerError { url: text, source })?;
        Ok(Self { uri })
    }

    /// The URL runs are POSTed to.
    #[cfg(test)]
    pub(crate) fn uri(&self) -> &hyper::Uri {
        &self.uri
    }

    async fn post(&self, request: &RunRequest) -> Result<RunOutput, RunError> {
        let body = serde_json::to_vec(&request.input)
            .map_err(|e| RunError::caused_by(format!("cannot encode the input: {e}"), e))?;
        let http_request = hyper::Request::post(self.uri.clone())
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| RunError::caused_by(format!("cannot build the request: {e}"), e))?;
        let response = client()?
            .request(http_request)
            .await
            .map_err(|e| RunError::caused_by(format!("POST {} failed: {e}", self.uri), e))?;
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|e| {
                let message = format!(
                    "reading the response of {} failed: {e} (responses are limited to {MAX_RESPONSE_BYTES} bytes)",
                    self.uri
                );
                RunError::caused_by(message, Arc::<dyn std::error::Error + Send + Sync>::from(e))
            })?
            .to_bytes();
        if status != hyper::StatusCode::OK {
            let excerpt: String = String::from_utf8_lossy(&body).chars().take(200).collect();
            return Err(RunError::new(format!(
                "{} answered {status}: {excerpt}",
                self.uri
            )));
        }
        let results: BTreeMap<String, String> = serde_json::from_slice(&body).map_err(|e| {
            let message = format!(
                "{} answered 200 but its body is not a JSON object of strings: {e}",
                self.uri
            );
            RunError::caused_by(message, e)
        })?;
        Ok(RunOutput {
            output: String::new(),
            results,
        })
    }
}

impl Runner for HttpRunner {
    fn run<'a>(&'a self, request: &'a RunRequest) -> BoxFuture<'a, Result<RunOutput, RunError>> {
        Box::pin(async move {
            match tokio::time::timeout(request.timeout, self.post(request)).await {
                Ok(result) => result,
                Err(_) => Err(RunError::new(format!(
                    "POST {} timed out after {}",
                    self.uri,
                    humantime::format_duration(request.timeout)
                ))),
            }
        })
    }

    /// Sends nothing: the endpoint may act on the request.
    fn dry_run<'a>(&'a self, request: &'a RunRequest) -> BoxFuture<'a, Result<DryRun, RunError>> {
        Box::pin(std::future::ready(Ok(DryRun {
            action: format!(
                "would POST the input ({} keys) to {}",
                request.input.len(),
                self.uri
            ),
            detail: Some(serde_json::json!({
                "method": "POST", "url": self.uri.to_string(),
                "headers": {"content-type": "application/json"}, "body": request.input,
            })),
            output: RunOutput::default(),
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::routing::post;
    use std::time::Duration;

    fn request(timeout: Duration) -> RunRequest {
        RunRequest {
            name: "t".to_owned(),
            input: [("node".to_owned(), "n1".to_owned())].into(),
            results: BTreeMap::new(),
            node: None,
            namespace: None,
            owner: None,
            dry_run: false,
            timeout,
        }
    }

    /// Serves `router` on a loopback port and returns a runner for `path`.
    async fn serve(router: Router, path: &str) -> HttpRunner {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        HttpRunner::new(&HttpServer {
            address: Some("127.0.0.1".to_owned()),
            port: Some(i64::from(port)),
            path: Some(path.to_owned()),
            scheme: None,
        })
        .unwrap()
    }

    #[tokio::test]
    async fn posts_the_input_and_returns_the_string_map() {
        let router = Router::new().route(
            "/collect",
            post(|body: String| async move {
                let input: BTreeMap<String, String> = serde_json::from_str(&body).unwrap();
                format!(r#"{{"seen":"{}"}}"#, input["node"])
            }),
        );
        let runner = serve(router, "/collect").await;
        let out = runner.run(&request(Duration::from_secs(5))).await.unwrap();
        assert_eq!(out.results["seen"], "n1");
    }

    #[tokio::test]
    async fn non_200_bad_bodies_huge_bodies_and_slow_servers_fail() {
        let router = Router::new()
            .route(
                "/500",
                post(|| async { (hyper::StatusCode::INTERNAL_SERVER_ERROR, "boom") }),
            )
            .route("/list", post(|| async { "[1,2]" }))
            .route("/nested", post(|| async { r#"{"a":{"b":1}}"# }))
            .route(
                "/huge",
                post(|| async { "x".repeat(MAX_RESPONSE_BYTES + 1) }),
            )
            .route(
                "/slow",
                post(|| async {
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    "{}"
                }),
            );
        for (path, expected) in [
            ("/500", "500"),
            ("/list", "not a JSON object of strings"),
            ("/nested", "not a JSON object of strings"),
            ("/huge", "limited to"),
            ("/slow", "timed out"),
        ] {
            let runner = serve(router.clone(), path).await;
            let err = runner
                .run(&request(Duration::from_millis(300)))
                .await
                .unwrap_err();
            assert!(err.message.contains(expected), "{path}: {}", err.message);
        }
    }

    #[test]
    fn defaults_follow_kubediag() {
        let runner = HttpRunner::new(&HttpServer {
            address: None,
            port: None,
            path: None,
            scheme: None,
        })
        .unwrap();
        assert_eq!(runner.uri().to_string(), "http://127.0.0.1:80/");
    }
}
