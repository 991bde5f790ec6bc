//! A mock API server for tests of code that talks to Kubernetes through a `kube::Client`
//! (tower-test): takes the client's requests one by one, with their method, URI,
//! content type and body, and answers them as an API server would.

use ::kube::Client;
use ::kube::client::Body;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use tower_test::mock::{Handle, SendResponse};

/// A client whose requests reach the returned mock.
pub fn pair() -> (Client, MockApi) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    (Client::new(service, "default"), MockApi { handle })
}

/// The API server's side of [`pair`].
pub struct MockApi {
    handle: Handle<Request<Body>, Response<Body>>,
}

/// One request the client sent, to be answered.
pub struct Call {
    /// The HTTP method.
    pub method: String,
    /// The path and query.
    pub uri: String,
    /// The request's `Content-Type`, if it had one.
    pub content_type: Option<String>,
    /// The request body.
    pub body: Vec<u8>,
    respond: SendResponse<Response<Body>>,
}

impl Call {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "{} {} has no JSON body ({e}): {:?}",
                self.method,
                self.uri,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// Answers with `body` as JSON.
    pub fn answer(self, status: u16, body: impl serde::Serialize) {
        self.answer_raw(status, serde_json::to_vec(&body).unwrap());
    }

    /// Answers with `body` as it is.
    pub fn answer_raw(self, status: u16, body: Vec<u8>) {
        let response = Response::builder()
            .status(StatusCode::from_u16(status).unwrap())
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        self.respond.send_response(response);
    }

    /// Answers with an API `Status` failure that carries `Retry-After: seconds`.
    #[cfg(test)]
    pub(crate) fn fail_retry_after(self, code: u16, reason: &str, seconds: &str) {
        let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                          "status": "Failure", "code": code, "reason": reason,
                          "message": reason, "details": {"retryAfterSeconds": 1}});
        let response = Response::builder()
            .status(StatusCode::from_u16(code).unwrap())
            .header("content-type", "application/json")
            .header("retry-after", seconds)
            .body(Body::from(serde_json::to_vec(&body).unwrap()))
            .unwrap();
        self.respond.send_response(response);
    }

    /// Answers with a 429 or 5xx whose `Retry-After` is an HTTP-date, with the
    /// response's own `Date`.
    #[cfg(test)]
    pub(crate) fn fail_retry_at(self, code: u16, retry_after: &str, date: &str) {
        let response = Response::builder()
            .status(StatusCode::from_u16(code).unwrap())
            .header("retry-after", retry_after)
            .header("date", date)
            .body(Body::empty())
            .unwrap();
        self.respond.send_response(response);
    }

    /// Answers with an API `Status` failure.
    pub fn fail(self, code: u16, reason: &str, message: &str) {
        self.answer(
            code,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "code": code, "reason": reason, "message": message}),
        );
    }
}

impl MockApi {
    /// The next request, within 30 s.
    pub async fn next(&mut self) -> Call {
        tokio::time::timeout(std::time::Duration::from_secs(30), self.receive())
            .await
            .expect("the client sent no request within 30 s")
    }

    /// The next request, however long it takes (for tests on a paused clock).
    pub async fn receive(&mut self) -> Call {
        let (request, respond) = self
            .handle
            .next_request()
            .await
            .expect("the client is gone");
        let (parts, body) = request.into_parts();
        Call {
            method: parts.method.to_string(),
            uri: parts.uri.to_string(),
            content_type: parts
                .headers
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_owned()),
            body: body.collect().await.unwrap().to_bytes().to_vec(),
            respond,
        }
    }

    /// Asserts that the client sends nothing more right now.
    pub async fn quiet(&mut self) {
        tokio::task::yield_now().await;
        let next = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            self.handle.next_request(),
        )
        .await;
        if let Ok(Some((request, _))) = next {
            panic!("unexpected request {} {}", request.method(), request.uri());
        }
    }
}
