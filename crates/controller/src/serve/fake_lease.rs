//! A fake Lease API behind a tower-test mock service, for the leader election tests:
//! it keeps one Lease, checks `resourceVersion` preconditions as the API server does,
//! and records every request.

use ::kube::client::Body;
use http::{Request, Response};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

pub(crate) const PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/ops/leases";

#[derive(Default)]
pub(crate) struct FakeLeases {
    pub(crate) lease: Option<Value>,
    pub(crate) version: u64,
    /// (method, uri) of every request.
    pub(crate) log: Vec<(String, String)>,
    /// Fail every request with 500 (an API server that is down).
    pub(crate) down: bool,
    /// Right after answering the next GET, the holder renews (a concurrent writer).
    pub(crate) renew_after_get: bool,
}

fn status(code: u16, reason: &str) -> (u16, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
               "reason": reason, "message": reason}),
    )
}

impl FakeLeases {
    fn answer(&mut self, method: &str, uri: &str, body: &[u8]) -> (u16, Value) {
        self.log.push((method.to_owned(), uri.to_owned()));
        if self.down {
            return status(500, "InternalError");
        }
        let write = |this: &mut Self, mut lease: Value| {
            this.version += 1;
            lease["metadata"]["resourceVersion"] = json!(this.version.to_string());
            this.lease = Some(lease.clone());
            (200, lease)
        };
        match method {
            "GET" => match self.lease.clone() {
                Some(lease) => {
                    if std::mem::take(&mut self.renew_after_get) {
                        write(self, lease.clone());
                    }
                    (200, lease)
                }
                None => status(404, "NotFound"),
            },
            "POST" if self.lease.is_some() => status(409, "AlreadyExists"),
            "POST" => write(self, serde_json::from_slice(body).unwrap()),
            "PUT" => {
                let lease: Value = serde_json::from_slice(body).unwrap();
                let current = self
                    .lease
                    .as_ref()
                    .map(|l| l["metadata"]["resourceVersion"].clone());
                if current != Some(lease["metadata"]["resourceVersion"].clone()) {
                    return status(409, "Conflict");
                }
                write(self, lease)
            }
            _ => status(405, "MethodNotAllowed"),
        }
    }
}

/// A client whose requests the fake answers.
pub(crate) fn client(fake: Arc<Mutex<FakeLeases>>) -> ::kube::Client {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    tokio::spawn(async move {
        while let Some((request, respond)) = handle.next_request().await {
            let (parts, body) = request.into_parts();
            let body = body.collect().await.unwrap().to_bytes();
            let uri = parts.uri.to_string();
            assert!(uri.starts_with(PATH), "{uri}");
            if parts.method != "GET" {
                assert!(uri.ends_with("?&fieldManager=operon"), "{uri}");
            }
            let (code, value) = fake
                .lock()
                .unwrap()
                .answer(parts.method.as_str(), &uri, &body);
            let response = Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&value).unwrap()))
                .unwrap();
            respond.send_response(response);
        }
    });
    ::kube::Client::new(service, "default")
}
