//! The module API over real HTTP connections, with the API server mocked: its
//! TokenReviews, SubjectAccessReviews and Module writes are asserted request by request.

use super::*;
use http_body_util::{BodyExt as _, Full};
use operon_cluster::kube::mock::{self, MockApi};
use operon_sandbox::SandboxConfig;
use operon_store::BlobStore;
use operon_store::fetch::{FetchError, Fetcher, Token};
use operon_tests::pki::ca_and_server;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::watch;

const TOKEN: &str = "token-of-alice";

struct Harness {
    addr: std::net::SocketAddr,
    api: MockApi,
    store: BlobStore,
    _dir: tempfile::TempDir,
}

fn sandbox() -> Sandbox {
    Sandbox::new(SandboxConfig {
        cache_dir: Some(operon_tests::test_cache_dir()),
        ..SandboxConfig::default()
    })
    .unwrap()
}

/// The module API on a local port, with a store of at most `limit` bytes.
async fn harness(limit: u64) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let store = BlobStore::open(dir.path(), limit).unwrap();
    let (client, api) = mock::pair();
    let module_api = ModuleApi::new(
        client.clone(),
        Authorizer::uncached(client),
        Arc::new(ModuleCatalog::new(store.clone())),
        sandbox(),
        ReplicaOptions {
            identity: "operon-0".into(),
            advertise: None,
            gc_grace: Duration::from_secs(60),
            pods_namespace: None,
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router(Arc::new(module_api)))
            .await
            .unwrap()
    });
    Harness {
        addr,
        api,
        store,
        _dir: dir,
    }
}

type RequestBody = http_body_util::combinators::BoxBody<bytes::Bytes, std::io::Error>;

fn full(bytes: impl Into<bytes::Bytes>) -> RequestBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// Sends a request over a fresh connection; the answer's status and JSON (or text).
async fn send(
    addr: std::net::SocketAddr,
    method: &'static str,
    path: impl AsRef<str>,
    token: Option<&'static str>,
    body: RequestBody,
) -> (u16, Value) {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(connection);
    let mut request = http::Request::builder()
        .method(method)
        .uri(path.as_ref())
        .header(header::HOST, "localhost");
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let response = sender
        .send_request(request.body(body).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(format!("{} bytes", bytes.len())));
    (status, value)
}

/// Answers the TokenReview of `TOKEN` (authenticated as alice) and the
/// SubjectAccessReview that follows with `allowed`; returns the review bodies.
async fn review(api: &mut MockApi, allowed: bool) -> (Value, Value) {
    let call = api.next().await;
    assert_eq!(
        (call.method.as_str(), call.uri.as_str()),
        ("POST", "/apis/authentication.k8s.io/v1/tokenreviews?")
    );
    let token_review = call.json();
    let mut answer = token_review.clone();
    answer["status"] = json!({"authenticated": true,
        "user": {"username": "alice", "uid": "u-1", "groups": ["devs", "system:authenticated"]}});
    call.answer(201, answer);
    let call = api.next().await;
    assert_eq!(
        (call.method.as_str(), call.uri.as_str()),
        (
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews?"
        )
    );
    let access_review = call.json();
    let mut answer = access_review.clone();
    answer["status"] = match allowed {
        true => json!({"allowed": true}),
        false => json!({"allowed": false, "reason": "no RBAC policy matched"}),
    };
    call.answer(201, answer);
    (token_review, access_review)
}

fn guest(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// Answers the Module reads and writes of a successful upload of `name`: the read of
/// what the Module was (absent), then the server-side apply; returns the applied body.
async fn module_written(api: &mut MockApi, name: &str) -> Value {
    let call = api.next().await;
    assert_eq!(
        (call.method.as_str(), call.uri.as_str()),
        (
            "GET",
            format!("/apis/operon.dev/v1alpha1/modules/{name}").as_str()
        )
    );
    call.fail(404, "NotFound", "not found");
    let call = api.next().await;
    assert_eq!(call.method, "PATCH");
    assert_eq!(
        call.uri,
        format!("/apis/operon.dev/v1alpha1/modules/{name}?&force=true&fieldManager=operon")
    );
    assert_eq!(
        call.content_type.as_deref(),
        Some("application/apply-patch+yaml")
    );
    let body = call.json();
    call.answer(200, body.clone());
    body
}

#[tokio::test]
async fn a_request_without_a_token_is_refused_without_asking_the_api_server() {
    let mut h = harness(1 << 20).await;
    let (status, answer) = send(h.addr, "POST", "/v1/modules/probe", None, full("x")).await;
    assert_eq!(status, 401, "{answer}");
    assert_eq!(answer["reason"], "Unauthorized");
    let (status, _) = send(h.addr, "GET", "/v1/modules", Some(""), full("")).await;
    assert_eq!(status, 401);
    h.api.quiet().await;
}

#[tokio::test]
async fn a_token_the_api_server_rejects_is_401() {
    let mut h = harness(1 << 20).await;
    let sending = tokio::spawn(send(h.addr, "GET", "/v1/modules", Some("forged"), full("")));
    let call = h.api.next().await;
    assert_eq!(call.json()["spec"]["token"], "forged");
    let mut answer = call.json();
    answer["status"] = json!({"authenticated": false, "error": "invalid bearer token"});
    call.answer(201, answer);
    let (status, answer) = sending.await.unwrap();
    assert_eq!(status, 401, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("invalid bearer token"),
        "{answer}"
    );
    h.api.quiet().await;
}

#[tokio::test]
async fn a_user_without_rbac_is_403_and_the_review_names_the_module() {
    let mut h = harness(1 << 20).await;
    let sending = tokio::spawn(send(
        h.addr,
        "POST",
        "/v1/modules/probe",
        Some(TOKEN),
        full(guest(operon_tests::TRIVIAL)),
    ));
    let (token_review, access_review) = review(&mut h.api, false).await;
    assert_eq!(token_review["spec"]["token"], TOKEN);
    assert_eq!(
        access_review["spec"],
        json!({
            "user": "alice", "uid": "u-1", "groups": ["devs", "system:authenticated"],
            "resourceAttributes": {"group": "operon.dev", "version": "v1alpha1",
                "resource": "modules", "verb": "create", "name": "probe"},
        })
    );
    let (status, answer) = sending.await.unwrap();
    assert_eq!(status, 403, "{answer}");
    assert_eq!(
        answer["message"],
        "alice may not create modules.operon.dev \"probe\": no RBAC policy matched"
    );
    h.api.quiet().await;
    assert!(h.store.list().unwrap().is_empty());
}

#[tokio::test]
async fn an_operation_is_checked_kept_and_named_by_a_module() {
    let mut h = harness(64 << 20).await;
    let bytes = guest(operon_tests::TRIVIAL);
    let sending = tokio::spawn(send(
        h.addr,
        "POST",
        "/v1/modules/trivial",
        Some(TOKEN),
        full(bytes.clone()),
    ));
    review(&mut h.api, true).await;
    let applied = module_written(&mut h.api, "trivial").await;
    let (status, answer) = sending.await.unwrap();
    assert_eq!(status, 201, "{answer}");
    let digest = ModuleDigest::of(&bytes).to_string();
    assert_eq!(answer["digest"], digest.as_str());
    assert_eq!(answer["world"], "operation");
    assert_eq!(answer["uploadedBy"], "alice");
    assert_eq!(answer["size"], bytes.len() as u64);
    assert!(
        answer["imports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i.as_str().unwrap().starts_with("wasi:")),
        "{answer}"
    );
    assert_eq!(applied["apiVersion"], "operon.dev/v1alpha1");
    assert_eq!(applied["kind"], "Module");
    assert_eq!(applied["spec"]["digest"], digest.as_str());
    assert_eq!(applied["spec"]["world"], "operation");
    assert_eq!(applied["spec"]["uploadedBy"], "alice");
    assert!(h.store.contains(&ModuleDigest::of(&bytes)));
    h.api.quiet().await;
}

#[tokio::test]
async fn a_hook_is_recorded_as_a_hook() {
    let mut h = harness(64 << 20).await;
    let sending = tokio::spawn(send(
        h.addr,
        "POST",
        "/v1/modules/labeler",
        Some(TOKEN),
        full(guest(operon_tests::POD_LABELER)),
    ));
    review(&mut h.api, true).await;
    let applied = module_written(&mut h.api, "labeler").await;
    let (status, answer) = sending.await.unwrap();
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer["world"], "hook");
    assert_eq!(applied["spec"]["world"], "hook");
}

#[tokio::test]
async fn junk_core_modules_and_commands_are_refused_with_the_reason() {
    let mut h = harness(64 << 20).await;
    let cases: [(&[u8], &str); 3] = [
        (b"#!/bin/sh\necho hi\n", "is not a WebAssembly file"),
        (b"\0asm\x01\0\0\0", "is a core WebAssembly module"),
        (&guest(operon_tests::COMMAND), "wasi:cli/command"),
    ];
    for (bytes, expected) in cases {
        let sending = tokio::spawn(send(
            h.addr,
            "POST",
            "/v1/modules/bad",
            Some(TOKEN),
            full(bytes.to_vec()),
        ));
        review(&mut h.api, true).await;
        let (status, answer) = sending.await.unwrap();
        assert_eq!(status, 422, "{answer}");
        let message = answer["message"].as_str().unwrap();
        assert!(message.contains(expected), "{message}");
        assert!(message.contains("module \"bad\""), "{message}");
    }
    h.api.quiet().await;
    assert!(h.store.list().unwrap().is_empty());
}

/// Writes `head` and then `body` in pieces on a raw connection, stopping when the
/// server stops reading, and returns the status line of its answer.
async fn raw_upload(addr: std::net::SocketAddr, head: String, body: Vec<Vec<u8>>) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    for piece in body {
        if stream.write_all(&piece).await.is_err() {
            break;
        }
    }
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn oversize_bodies_are_413_declared_or_streamed() {
    let mut h = harness(1024).await;
    // Declared too large: refused from the header, with only part of the body sent.
    let head = format!(
        "POST /v1/modules/big HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 1048576\r\n\r\n"
    );
    let sending = tokio::spawn(raw_upload(h.addr, head, vec![vec![0u8; 100]]));
    review(&mut h.api, true).await;
    assert_eq!(sending.await.unwrap(), "HTTP/1.1 413 Payload Too Large");
    // Chunked, no Content-Length: refused once it passes the limit.
    let head = format!(
        "POST /v1/modules/big HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    let chunk = |n: usize| {
        let mut piece = format!("{n:x}\r\n").into_bytes();
        piece.extend(std::iter::repeat_n(b'a', n));
        piece.extend_from_slice(b"\r\n");
        piece
    };
    let sending = tokio::spawn(raw_upload(
        h.addr,
        head,
        (0..4).map(|_| chunk(512)).collect(),
    ));
    review(&mut h.api, true).await;
    assert_eq!(sending.await.unwrap(), "HTTP/1.1 413 Payload Too Large");
    h.api.quiet().await;
    assert!(h.store.list().unwrap().is_empty());
}

#[tokio::test]
async fn concurrent_uploads_of_one_module_both_succeed() {
    let mut h = harness(64 << 20).await;
    let bytes = guest(operon_tests::TRIVIAL);
    let first = tokio::spawn(send(
        h.addr,
        "POST",
        "/v1/modules/same",
        Some(TOKEN),
        full(bytes.clone()),
    ));
    let second = tokio::spawn(send(
        h.addr,
        "POST",
        "/v1/modules/same",
        Some(TOKEN),
        full(bytes.clone()),
    ));
    // Both are reviewed, then both write the Module, in whatever order they arrive.
    let mut writes = 0;
    let mut reviews = 0;
    while writes < 2 {
        let call = h.api.next().await;
        let mut body = if call.body.is_empty() {
            Value::Null
        } else {
            call.json()
        };
        match (call.method.as_str(), call.uri.as_str()) {
            (_, uri) if uri.contains("tokenreviews") => {
                body["status"] = json!({"authenticated": true, "user": {"username": "alice"}});
                call.answer(201, body);
            }
            (_, uri) if uri.contains("subjectaccessreviews") => {
                reviews += 1;
                body["status"] = json!({"allowed": true});
                call.answer(201, body);
            }
            ("GET", _) => call.fail(404, "NotFound", "not found"),
            ("PATCH", _) => {
                writes += 1;
                call.answer(200, body);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(reviews, 2);
    for answer in [first.await.unwrap(), second.await.unwrap()] {
        assert_eq!(answer.0, 201, "{}", answer.1);
        assert_eq!(answer.1["digest"], ModuleDigest::of(&bytes).to_string());
    }
    assert_eq!(h.store.list().unwrap().len(), 1);
}

#[tokio::test]
async fn bytes_are_served_by_digest_and_an_unknown_one_is_404() {
    let mut h = harness(1 << 20).await;
    let digest = h.store.put(b"\0asm\x0d\0\x01\0stored").unwrap();
    let hex = hex::encode(digest.as_bytes());
    for path in [
        format!("/v1/modules/by-digest/{hex}"),
        format!("/v1/modules/by-digest/{digest}"),
    ] {
        let sending = tokio::spawn(send(h.addr, "GET", path, Some(TOKEN), full("")));
        let (_, access) = review(&mut h.api, true).await;
        assert_eq!(access["spec"]["resourceAttributes"]["verb"], "get");
        let (status, answer) = sending.await.unwrap();
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer, "14 bytes");
    }
    let missing = hex::encode(ModuleDigest::of(b"other").as_bytes());
    let sending = tokio::spawn(send(
        h.addr,
        "GET",
        format!("/v1/modules/by-digest/{missing}"),
        Some(TOKEN),
        full(""),
    ));
    review(&mut h.api, true).await;
    assert_eq!(sending.await.unwrap().0, 404);
}

#[tokio::test]
async fn delete_removes_the_module_with_preconditions() {
    let mut h = harness(1 << 20).await;
    let sending = tokio::spawn(send(
        h.addr,
        "DELETE",
        "/v1/modules/old",
        Some(TOKEN),
        full(""),
    ));
    let (_, access) = review(&mut h.api, true).await;
    assert_eq!(access["spec"]["resourceAttributes"]["verb"], "delete");
    assert_eq!(access["spec"]["resourceAttributes"]["name"], "old");
    let call = h.api.next().await;
    assert_eq!(call.method, "GET");
    let digest = ModuleDigest::of(b"old").to_string();
    call.answer(
        200,
        json!({"apiVersion": "operon.dev/v1alpha1", "kind": "Module",
            "metadata": {"name": "old", "uid": "uid-old", "resourceVersion": "42"},
            "spec": {"digest": digest, "world": "operation", "witVersion": "0.2.0", "size": 3,
                     "uploadedBy": "bob", "uploadedAt": "2026-01-01T00:00:00Z"}}),
    );
    let call = h.api.next().await;
    assert_eq!(
        (call.method.as_str(), call.uri.as_str()),
        ("DELETE", "/apis/operon.dev/v1alpha1/modules/old?")
    );
    assert_eq!(
        call.json()["preconditions"],
        json!({"uid": "uid-old", "resourceVersion": "42"})
    );
    call.answer(200, json!({"kind": "Status", "status": "Success"}));
    let (status, answer) = sending.await.unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["digest"], digest.as_str());
}

#[test]
fn module_names_must_be_dns_subdomains() {
    for good in ["probe", "disk-pressure", "team.probe-2"] {
        assert!(check_name(good).is_ok(), "{good}");
    }
    for bad in ["", "Probe", "-x", "x-", "a..b", "a_b", &"x".repeat(254)] {
        let err = check_name(bad).unwrap_err();
        assert!(err.message.contains("metadata.name"), "{bad}");
    }
}

/// Serves `router` over TLS on a local port.
async fn serve_tls_router(router: Router, tls: Arc<rustls::ServerConfig>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let (_keep, stopped) = watch::channel(false);
    tokio::spawn(async move {
        let _keep = _keep;
        super::super::webhook::serve_tls(listener, tls, router, stopped).await
    });
    url
}

fn source(url: &str, digest: &ModuleDigest) -> operon_data::api::ModuleSource {
    operon_data::api::ModuleSource {
        replica: "operon-0".into(),
        url: url.to_owned(),
        server_name: None,
        digest: digest.to_string(),
    }
}

#[tokio::test]
async fn a_replica_fetches_over_https_with_its_token_and_checks_the_digest() {
    let (ca, tls) = ca_and_server();
    let dir = tempfile::tempdir().unwrap();
    let store = BlobStore::open(dir.path(), 1 << 20).unwrap();
    let bytes = b"\0asm\x0d\0\x01\0the module".to_vec();
    let digest = ModuleDigest::of(&bytes);
    let (client, mut api) = mock::pair();
    let module_api = ModuleApi::new(
        client.clone(),
        Authorizer::uncached(client),
        Arc::new(ModuleCatalog::new(store.clone())),
        sandbox(),
        ReplicaOptions {
            identity: "operon-0".into(),
            advertise: None,
            gc_grace: Duration::from_secs(60),
            pods_namespace: None,
        },
    );
    store.put(&bytes).unwrap();
    let url = serve_tls_router(router(Arc::new(module_api)), tls).await;
    let target_dir = tempfile::tempdir().unwrap();
    let target = BlobStore::open(target_dir.path(), 1 << 20).unwrap();
    let fetcher =
        Fetcher::new(ca.as_bytes(), "ca.crt".into(), Token::Static(TOKEN.into())).unwrap();
    let fetching = tokio::spawn({
        let target = target.clone();
        let source = source(&url, &digest);
        async move { fetcher.fetch(&source, &digest, &target).await }
    });
    let (token_review, _) = review(&mut api, true).await;
    assert_eq!(token_review["spec"]["token"], TOKEN);
    fetching.await.unwrap().unwrap();
    assert_eq!(target.get(&digest).unwrap().unwrap(), bytes);
}

#[tokio::test]
async fn a_tampered_module_from_a_peer_is_refused() {
    let (ca, tls) = ca_and_server();
    // A peer that answers every digest with other bytes.
    let evil = Router::new().route(
        "/v1/modules/by-digest/{digest}",
        get(|| async { b"\0asm\x0d\0\x01\0tampered".to_vec() }),
    );
    let url = serve_tls_router(evil, tls).await;
    let dir = tempfile::tempdir().unwrap();
    let store = BlobStore::open(dir.path(), 1 << 20).unwrap();
    let digest = ModuleDigest::of(b"\0asm\x0d\0\x01\0genuine");
    let fetcher =
        Fetcher::new(ca.as_bytes(), "ca.crt".into(), Token::Static(TOKEN.into())).unwrap();
    let err = fetcher
        .fetch(&source(&url, &digest), &digest, &store)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FetchError::Store { source, .. }
            if matches!(**source, BlobError::DigestMismatch { .. })),
        "{err}"
    );
    assert!(!store.contains(&digest));
    assert!(store.list().unwrap().is_empty());
}

#[tokio::test]
async fn a_peer_with_a_certificate_from_another_ca_is_not_trusted() {
    let (_, tls) = ca_and_server();
    let (other_ca, _) = ca_and_server();
    let url = serve_tls_router(Router::new(), tls).await;
    let dir = tempfile::tempdir().unwrap();
    let store = BlobStore::open(dir.path(), 1 << 20).unwrap();
    let digest = ModuleDigest::of(b"m");
    let fetcher = Fetcher::new(
        other_ca.as_bytes(),
        "ca.crt".into(),
        Token::Static(TOKEN.into()),
    )
    .unwrap();
    let err = fetcher
        .fetch(&source(&url, &digest), &digest, &store)
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::Transport { .. }), "{err}");
    assert!(err.to_string().contains("TLS"), "{err}");
}

#[tokio::test]
async fn a_pinned_digest_is_fetched_from_the_first_peer_that_has_it() {
    let (ca, tls) = ca_and_server();
    let bytes = b"\0asm\x0d\0\x01\0pinned".to_vec();
    let digest = ModuleDigest::of(&bytes);
    // One peer no longer holds the bytes, the next one does.
    let gone = serve_tls_router(Router::new(), tls.clone()).await;
    let holder = serve_tls_router(
        Router::new().route(
            "/v1/modules/by-digest/{digest}",
            get(move || {
                let bytes = bytes.clone();
                async move { bytes }
            }),
        ),
        tls,
    )
    .await;
    let peers = [
        operon_data::api::ModuleSource {
            replica: "operon-1".into(),
            ..source(&gone, &ModuleDigest::of(b"other"))
        },
        operon_data::api::ModuleSource {
            replica: "operon-2".into(),
            ..source(&holder, &ModuleDigest::of(b"other"))
        },
    ];
    let dir = tempfile::tempdir().unwrap();
    let store = BlobStore::open(dir.path(), 1 << 20).unwrap();
    let fetcher =
        Fetcher::new(ca.as_bytes(), "ca.crt".into(), Token::Static(TOKEN.into())).unwrap();
    let from = operon_store::replica::fetch_from_peers(&fetcher, &peers, &digest, &store)
        .await
        .unwrap();
    assert_eq!(from, "operon-2");
    assert!(store.contains(&digest));
    // No peer has these bytes: every peer's answer is given.
    let absent = ModuleDigest::of(b"absent");
    let errors = operon_store::replica::fetch_from_peers(&fetcher, &peers[..1], &absent, &store)
        .await
        .unwrap_err();
    assert_eq!(errors.len(), 1);
    assert!(errors[0].starts_with("operon-1: "), "{errors:?}");
    assert!(!store.contains(&absent));
}
