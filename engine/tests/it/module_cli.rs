//! `operon module push/ls/get/rm` against a test server standing in for the module API:
//! what the CLI sends (path, token, body) and what it prints and refuses.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

const TOKEN: &str = "token-for-the-cli";

/// What the test server saw.
#[derive(Default)]
struct Seen {
    uploads: Vec<(String, Vec<u8>)>,
    deleted: Vec<String>,
    tokens: Vec<String>,
    /// Bytes to serve for every digest, instead of the genuine ones.
    tampered: Option<Vec<u8>>,
}

type Shared = Arc<Mutex<Seen>>;

fn token(seen: &Shared, headers: &HeaderMap) -> Result<(), (StatusCode, axum::Json<Value>)> {
    let header = headers
        .get("authorization")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    seen.lock().unwrap().tokens.push(header.clone());
    if header == format!("Bearer {TOKEN}") {
        return Ok(());
    }
    Err((
        StatusCode::FORBIDDEN,
        axum::Json(
            json!({"kind": "Status", "status": "Failure", "code": 403, "reason": "Forbidden",
            "message": "system:serviceaccount:x:y may not create modules.operon.dev \"probe\""}),
        ),
    ))
}

const MODULE: &[u8] = b"\0asm\x0d\0\x01\0a module for the CLI test";

fn digest(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

fn server(seen: Shared) -> Router {
    Router::new()
        .route(
            "/v1/modules",
            get(|State(seen): State<Shared>, headers: HeaderMap| async move {
                token(&seen, &headers)?;
                Ok::<_, (StatusCode, axum::Json<Value>)>(axum::Json(json!({"items": [
                    {"name": "probe", "world": "operation", "digest": digest(MODULE), "size": MODULE.len(),
                     "uploadedBy": "alice", "uploadedAt": "2026-11-24T01:00:00Z", "sources": 1},
                ]})))
            }),
        )
        .route(
            "/v1/modules/{name}",
            get(|State(seen): State<Shared>, headers: HeaderMap, Path(name): Path<String>| async move {
                token(&seen, &headers)?;
                Ok::<_, (StatusCode, axum::Json<Value>)>(axum::Json(json!({"name": name, "digest": digest(MODULE)})))
            })
            .post(
                |State(seen): State<Shared>, headers: HeaderMap, Path(name): Path<String>, body: Bytes| async move {
                    token(&seen, &headers)?;
                    let answer = json!({"name": name, "digest": digest(&body), "world": "operation",
                        "witVersion": "0.2.0", "size": body.len(), "imports": [], "uploadedBy": "alice", "changed": true});
                    seen.lock().unwrap().uploads.push((name, body.to_vec()));
                    Ok::<_, (StatusCode, axum::Json<Value>)>((StatusCode::CREATED, axum::Json(answer)))
                },
            )
            .delete(|State(seen): State<Shared>, headers: HeaderMap, Path(name): Path<String>| async move {
                token(&seen, &headers)?;
                seen.lock().unwrap().deleted.push(name.clone());
                Ok::<_, (StatusCode, axum::Json<Value>)>(axum::Json(json!({"name": name, "digest": digest(MODULE)})))
            }),
        )
        .route(
            "/v1/modules/by-digest/{digest}",
            get(|State(seen): State<Shared>, headers: HeaderMap| async move {
                token(&seen, &headers)?;
                let bytes = seen.lock().unwrap().tampered.clone().unwrap_or(MODULE.to_vec());
                Ok::<_, (StatusCode, axum::Json<Value>)>(bytes)
            }),
        )
        .with_state(seen)
}

/// Serves `router` over TLS for 127.0.0.1; returns the URL and the CA file.
async fn serve(router: Router, dir: &std::path::Path) -> (String, std::path::PathBuf) {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap())
        .unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let ca_file = dir.join("ca.crt");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let acceptor = acceptor.clone();
            let service = hyper_util::service::TowerToHyperService::new(router.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (url, ca_file)
}

/// Runs `operon module ARGS --server URL --certificate-authority CA [--token TOKEN]`.
async fn operon(
    args: &[&str],
    url: &str,
    ca: &std::path::Path,
    token: &str,
) -> (bool, String, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_operon"));
    command
        .arg("module")
        .args(args)
        .args(["--server", url, "--certificate-authority"])
        .arg(ca)
        .args(["--token", token])
        .env_remove("OPERON_SERVER")
        .env_remove("OPERON_TOKEN");
    let output = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn push_ls_get_and_rm_talk_to_the_module_api() {
    let dir = tempfile::tempdir().unwrap();
    let seen = Shared::default();
    let (url, ca) = serve(server(seen.clone()), dir.path()).await;
    let file = dir.path().join("probe.wasm");
    std::fs::write(&file, MODULE).unwrap();

    let (ok, out, err) = operon(&["push", file.to_str().unwrap()], &url, &ca, TOKEN).await;
    assert!(ok, "{err}");
    assert!(out.contains(&digest(MODULE)), "{out}");
    assert!(
        out.starts_with("probe "),
        "the name defaults to the file's: {out}"
    );
    assert_eq!(
        seen.lock().unwrap().uploads,
        vec![("probe".to_owned(), MODULE.to_vec())]
    );

    let (ok, out, err) = operon(
        &["push", file.to_str().unwrap(), "--name", "renamed"],
        &url,
        &ca,
        TOKEN,
    )
    .await;
    assert!(ok, "{err}");
    assert!(out.starts_with("renamed "), "{out}");

    let (ok, out, err) = operon(&["ls"], &url, &ca, TOKEN).await;
    assert!(ok, "{err}");
    assert!(out.starts_with("NAME"), "{out}");
    assert!(out.contains("probe") && out.contains("alice"), "{out}");

    let target = dir.path().join("fetched.wasm");
    let (ok, out, err) = operon(
        &["get", "probe", "-o", target.to_str().unwrap()],
        &url,
        &ca,
        TOKEN,
    )
    .await;
    assert!(ok, "{err}");
    assert!(out.contains(&digest(MODULE)), "{out}");
    assert_eq!(std::fs::read(&target).unwrap(), MODULE);

    let (ok, out, err) = operon(&["rm", "probe"], &url, &ca, TOKEN).await;
    assert!(ok, "{err}");
    assert!(out.contains("removed"), "{out}");
    assert_eq!(seen.lock().unwrap().deleted, vec!["probe".to_owned()]);
    assert!(
        seen.lock()
            .unwrap()
            .tokens
            .iter()
            .all(|t| t == &format!("Bearer {TOKEN}")),
        "every request carries the token"
    );
}

#[tokio::test]
async fn a_refusal_is_reported_with_the_servers_message() {
    let dir = tempfile::tempdir().unwrap();
    let seen = Shared::default();
    let (url, ca) = serve(server(seen.clone()), dir.path()).await;
    let file = dir.path().join("probe.wasm");
    std::fs::write(&file, MODULE).unwrap();
    let (ok, _, err) = operon(
        &["push", file.to_str().unwrap()],
        &url,
        &ca,
        "another-token",
    )
    .await;
    assert!(!ok);
    assert!(
        err.contains("HTTP 403") && err.contains("may not create"),
        "{err}"
    );
    assert!(seen.lock().unwrap().uploads.is_empty());
}

#[tokio::test]
async fn downloaded_bytes_of_another_digest_are_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let seen = Shared::default();
    seen.lock().unwrap().tampered = Some(b"\0asm\x0d\0\x01\0something else".to_vec());
    let (url, ca) = serve(server(seen), dir.path()).await;
    let target = dir.path().join("fetched.wasm");
    let (ok, _, err) = operon(
        &["get", "probe", "-o", target.to_str().unwrap()],
        &url,
        &ca,
        TOKEN,
    )
    .await;
    assert!(!ok);
    assert!(err.contains("not written"), "{err}");
    assert!(!target.exists());
}

#[tokio::test]
async fn a_server_with_a_certificate_from_another_ca_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let (url, _) = serve(server(Shared::default()), dir.path()).await;
    let (_, other_ca) = serve(server(Shared::default()), other.path()).await;
    let (ok, _, err) = operon(&["ls"], &url, &other_ca, TOKEN).await;
    assert!(!ok);
    assert!(err.contains("TLS"), "{err}");
}

#[tokio::test]
async fn a_refusal_before_the_upload_is_read_is_reported_not_a_broken_pipe() {
    // A server that answers from the headers alone, as the module API does for a token
    // it refuses: it closes the connection while a large body is still being sent.
    let refusing = Router::new().route(
        "/v1/modules/{name}",
        axum::routing::post(|headers: HeaderMap| async move {
            let seen = Shared::default();
            token(&seen, &headers).map(|()| StatusCode::CREATED)
        }),
    );
    let dir = tempfile::tempdir().unwrap();
    let (url, ca) = serve(refusing, dir.path()).await;
    let file = dir.path().join("big.wasm");
    std::fs::write(&file, vec![0u8; 16 * 1024 * 1024]).unwrap();
    let (ok, _, err) = operon(&["push", file.to_str().unwrap()], &url, &ca, "refused").await;
    assert!(!ok);
    assert!(
        err.contains("HTTP 403") && err.contains("may not create"),
        "{err}"
    );
}
