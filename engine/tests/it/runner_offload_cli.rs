//! `operon op run --digest`, the container of an offloaded wasm step: it fetches the
//! module from an HTTPS module API with its bearer token, refuses bytes of another
//! digest, runs the module with the input, results and runner context files the Job
//! runner mounts, and writes the results (or the error) as the termination message.
//! And `operon run --dry-run --image`, which shows the Job such a step would be.

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use operon::model::OwnerReference;
use operon::runner::context::{Platform, RunContext};
use operon::sandbox::ModuleDigest;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const TOKEN: &str = "job-token";

/// A CA (PEM) and a server configuration for 127.0.0.1 signed by it.
fn tls_pair() -> (String, Arc<rustls::ServerConfig>) {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap())
        .unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        )
        .unwrap();
    (ca.pem(), Arc::new(config))
}

/// A module API on a local port answering every digest with `bytes` to a request
/// bearing [`TOKEN`]; returns its URL and the paths it was asked for.
async fn module_api(bytes: Vec<u8>) -> (String, String, Arc<Mutex<Vec<String>>>) {
    let (ca, tls) = tls_pair();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let router = Router::new().route(
        "/v1/modules/by-digest/{digest}",
        get({
            let asked = asked.clone();
            move |axum::extract::Path(digest): axum::extract::Path<String>, headers: HeaderMap| {
                let asked = asked.clone();
                let bytes = bytes.clone();
                async move {
                    asked.lock().unwrap().push(digest);
                    let bearer = headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    if bearer != format!("Bearer {TOKEN}") {
                        return (StatusCode::UNAUTHORIZED, b"no".to_vec());
                    }
                    (StatusCode::OK, bytes)
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, router) = (acceptor.clone(), router.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper_util::service::TowerToHyperService::new(router);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (url, ca, asked)
}

/// The files an offloaded step's pod finds in its input ConfigMap, written to `dir`.
fn step_files(dir: &Path, ca: &str) {
    std::fs::write(dir.join("module-ca.crt"), ca).unwrap();
    std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
    std::fs::write(
        dir.join("input.json"),
        json!({"node": "n1", "level": "3", "operation.df.output": "87%"}).to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.join("results.json"),
        json!({"operation.df.output": "87%"}).to_string(),
    )
    .unwrap();
    let context = RunContext {
        name: "ops/disk/node-3".to_owned(),
        dry_run: false,
        timeout: Duration::from_secs(20),
        node: Some("n1".to_owned()),
        namespace: Some("ops".to_owned()),
        owner: Some(OwnerReference {
            api_version: "operon.dev/v1alpha1".to_owned(),
            kind: "Diagnosis".to_owned(),
            name: "disk".to_owned(),
            uid: "uid-1".to_owned(),
        }),
        platform: Platform {
            cluster: Some("lab".to_owned()),
        },
        traceparent: None,
    };
    std::fs::write(dir.join("context.json"), context.to_json()).unwrap();
}

/// `operon op run --digest DIGEST` as the Job's container runs it, with the step's
/// files in `dir`; (success, stdout, stderr).
fn op_run(dir: &Path, url: &str, digest: &ModuleDigest) -> (bool, String, String) {
    let file = |name: &str| dir.join(name).display().to_string();
    let output = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args([
            "op",
            "run",
            "--digest",
            &digest.to_string(),
            "--module-url",
            url,
        ])
        .args(["--module-ca", &file("module-ca.crt")])
        .args(["--token-file", &file("token")])
        .args(["--input-file", &file("input.json")])
        .args(["--results-file", &file("results.json")])
        .args(["--context-file", &file("context.json")])
        .args(["--result-file", &file("termination-log")])
        .args(["--no-cache", "--param", "greeting=hi", "--output", "json"])
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_module_fetched_by_digest_runs_with_the_steps_files() {
    let bytes = std::fs::read(operon_tests::ECHO).unwrap();
    let digest = ModuleDigest::of(&bytes);
    let (url, ca, asked) = module_api(bytes).await;
    let dir = tempfile::tempdir().unwrap();
    step_files(dir.path(), &ca);
    let (ok, stdout, stderr) = tokio::task::spawn_blocking({
        let dir = dir.path().to_owned();
        let url = url.clone();
        move || op_run(&dir, &url, &digest)
    })
    .await
    .unwrap();
    assert!(ok, "{stderr}\n{stdout}");
    let hex: String = digest.to_string().trim_start_matches("sha256:").to_owned();
    assert_eq!(*asked.lock().unwrap(), [hex]);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["module"], digest.to_string());
    assert_eq!(report["context"]["name"], "ops/disk/node-3");
    assert_eq!(report["context"]["namespace"], "ops");
    assert_eq!(report["context"]["timeoutMs"], 20_000);
    assert_eq!(report["context"]["owner"]["kind"], "Diagnosis");
    assert_eq!(report["context"]["cluster"], "lab");
    // The termination message: the results as a JSON object of strings.
    let message = std::fs::read_to_string(dir.path().join("termination-log")).unwrap();
    let results: Value = serde_json::from_str(&message).unwrap();
    assert_eq!(results, json!(report["results"]));
    // The echo guest returns its parameters (the input file over --param, the results
    // file's values among them) and its runner context.
    assert_eq!(results["level"], "3", "{results}");
    assert_eq!(results["greeting"], "hi", "{results}");
    assert_eq!(results["operation.df.output"], "87%", "{results}");
    assert_eq!(results["context.name"], "ops/disk/node-3", "{results}");
    assert_eq!(results["context.owner"], "Diagnosis/disk", "{results}");
    assert_eq!(results["context.node"], "n1", "{results}");
    // The platform of the context file reaches a 0.3.0 guest.
    assert_eq!(results["context.cluster"], "lab", "{results}");
}

#[tokio::test(flavor = "multi_thread")]
async fn tampered_bytes_are_refused_and_the_refusal_is_the_termination_message() {
    let genuine = std::fs::read(operon_tests::ECHO).unwrap();
    let digest = ModuleDigest::of(&genuine);
    let mut tampered = genuine.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 0xff;
    let (url, ca, _) = module_api(tampered).await;
    let dir = tempfile::tempdir().unwrap();
    step_files(dir.path(), &ca);
    let (ok, _, stderr) = tokio::task::spawn_blocking({
        let dir = dir.path().to_owned();
        move || op_run(&dir, &url, &digest)
    })
    .await
    .unwrap();
    assert!(!ok);
    assert!(stderr.contains(&digest.to_string()), "{stderr}");
    assert!(stderr.contains("digest"), "{stderr}");
    let message = std::fs::read_to_string(dir.path().join("termination-log")).unwrap();
    assert!(message.starts_with("error: "), "{message}");
    assert!(message.contains(&digest.to_string()), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_the_module_api_refuses_fails_the_run_with_the_status() {
    let bytes = std::fs::read(operon_tests::ECHO).unwrap();
    let digest = ModuleDigest::of(&bytes);
    let (url, ca, _) = module_api(bytes).await;
    let dir = tempfile::tempdir().unwrap();
    step_files(dir.path(), &ca);
    std::fs::write(dir.path().join("token"), "someone-else").unwrap();
    let (ok, _, stderr) = tokio::task::spawn_blocking({
        let dir = dir.path().to_owned();
        move || op_run(&dir, &url, &digest)
    })
    .await
    .unwrap();
    assert!(!ok);
    assert!(stderr.contains("HTTP 401"), "{stderr}");
}

#[test]
fn a_local_dry_run_shows_the_job_of_an_offloaded_step() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(operon_tests::ECHO, dir.path().join("echo.wasm")).unwrap();
    std::fs::write(
        dir.path().join("pipeline.yaml"),
        "apiVersion: operon.dev/v1alpha1\nkind: Operation\nmetadata: {name: off}\n\
         spec: {processor: {wasm: {module: echo.wasm, runOn: Job}}}\n---\n\
         apiVersion: operon.dev/v1alpha1\nkind: OperationSet\nmetadata: {name: s}\n\
         spec: {adjacencyList: [{id: 0, to: [1]}, {id: 1, operation: off}]}\n---\n\
         apiVersion: operon.dev/v1alpha1\nkind: Diagnosis\nmetadata: {name: d, namespace: ops}\n\
         spec: {operationSet: s}\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_operon"))
            .arg("run")
            .arg(dir.path())
            .args(extra)
            .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
            .output()
            .unwrap()
    };
    let out = run(&[
        "--dry-run",
        "--image",
        "registry.local/operon:1",
        "--output",
        "json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let digest = ModuleDigest::of(&std::fs::read(operon_tests::ECHO).unwrap());
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = status.to_string();
    assert!(text.contains("would create Job ops/d-node-1-"), "{text}");
    assert!(text.contains("registry.local/operon:1"), "{text}");
    assert!(
        text.contains(&format!("`operon op run` on module {digest}")),
        "{text}"
    );

    let refused = run(&["--dry-run"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("`operon run --dry-run --image IMAGE` shows the Job"),
        "{stderr}"
    );
}
