//! The Secret's life against a tower-test mock API server (every request's method,
//! path, query, content type and body asserted), and the certificate put to work: a
//! TLS server through `ReloadingCert`, a client that trusts only `ca.crt`.

use super::certs::{self, Material, Names, Plan, Policy};
use super::*;
use crate::serve::webhook::tls::{ReloadingCert, TlsFiles};
use base64::Engine as _;
use operon_cluster::kube::mock::{Call, MockApi};
use serde_json::{Value, json};
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::sync::Arc;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const SECRET: &str = "/api/v1/namespaces/operon/secrets/operon-webhook-tls";
const CREATE: &str = "/api/v1/namespaces/operon/secrets?&fieldManager=operon";
const REPLACE: &str = "/api/v1/namespaces/operon/secrets/operon-webhook-tls?&fieldManager=operon";
const DAY: i64 = 86_400;

fn options(dir: &Path) -> SelfSignedOptions {
    let mut options = SelfSignedOptions::for_service(
        "operon",
        "operon-webhook-tls",
        "operon-webhooks",
        dir.into(),
    );
    options.ip_addresses = vec![IpAddr::from([127, 0, 0, 1])];
    options
}

fn wanted() -> Names {
    Names {
        dns: service_dns_names("operon-webhooks", "operon"),
        ips: vec![IpAddr::from([127, 0, 0, 1])],
    }
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// A set made `days_ago`: its serving certificate ends 365 days after.
fn made(days_ago: i64) -> Material {
    certs::fresh(&wanted(), now() - days_ago * DAY).unwrap().0
}

fn setup(dir: &Path) -> (SelfSigned, Server) {
    let (client, api) = operon_cluster::kube::mock::pair();
    (SelfSigned::new(client, options(dir)), Server { api })
}

/// The mock API server, taking requests of an expected method and URI.
struct Server {
    api: MockApi,
}

impl Server {
    async fn expect(&mut self, method: &str, uri: &str) -> Call {
        let call = self.api.next().await;
        assert_eq!((call.method.as_str(), call.uri.as_str()), (method, uri));
        call
    }

    /// The next request, however long it takes (for tests on a paused clock).
    async fn receive(&mut self, method: &str, uri: &str) -> Call {
        let call = self.api.receive().await;
        assert_eq!((call.method.as_str(), call.uri.as_str()), (method, uri));
        call
    }

    /// Asserts that the client sends nothing more.
    async fn quiet(&mut self) {
        self.api.quiet().await;
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The Secret as the API server returns it.
fn stored(material: &Material, resource_version: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "operon-webhook-tls", "namespace": "operon", "uid": "u-1",
                     "resourceVersion": resource_version,
                     "labels": {MANAGED_BY_LABEL: MANAGED_BY},
                     "annotations": {NAMES_ANNOTATION: wanted().joined()},
                     "managedFields": [{"manager": "operon", "operation": "Update",
                                        "apiVersion": "v1", "fieldsType": "FieldsV1"}]},
        "type": "kubernetes.io/tls",
        "data": {"ca.crt": b64(&material.ca_crt), "ca.key": b64(&material.ca_key),
                 "tls.crt": b64(&material.tls_crt), "tls.key": b64(&material.tls_key)},
    })
}

fn material_of(secret: &Value) -> Material {
    let get = |key: &str| {
        let text = secret["data"][key]
            .as_str()
            .unwrap_or_else(|| panic!("no {key}"));
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap()
    };
    Material {
        ca_crt: get("ca.crt"),
        ca_key: get("ca.key"),
        tls_crt: get("tls.crt"),
        tls_key: get("tls.key"),
    }
}

fn is_current(material: &Material) -> bool {
    let policy = Policy {
        renew_before: 30 * DAY,
        settle: 7200,
    };
    matches!(
        certs::plan(material, &wanted(), &policy, now()).unwrap(),
        Plan::Keep { .. }
    )
}

fn assert_files(bundle: &Bundle, material: &Material) {
    assert_eq!(bundle.ca_pem, material.ca_crt);
    assert_eq!(std::fs::read(&bundle.cert_path).unwrap(), material.tls_crt);
    assert_eq!(std::fs::read(&bundle.key_path).unwrap(), material.tls_key);
    let mode = std::fs::metadata(&bundle.key_path).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[tokio::test]
async fn a_missing_secret_is_created_with_a_ca_and_a_serving_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (selfsigned, mut server) = setup(dir.path());
    let mut ca = selfsigned.ca_bundle();
    let (bundle, posted) = tokio::join!(selfsigned.ensure(), async {
        server.expect("GET", SECRET).await.fail(
            404,
            "NotFound",
            "secrets \"operon-webhook-tls\" not found",
        );
        let call = server.expect("POST", CREATE).await;
        assert_eq!(call.content_type.as_deref(), Some("application/json"));
        let body = call.json();
        let mut answer = body.clone();
        answer["metadata"]["resourceVersion"] = json!("1");
        call.answer(201, &answer);
        body
    });
    let bundle = bundle.unwrap();
    server.quiet().await;

    assert_eq!(
        (&posted["apiVersion"], &posted["kind"], &posted["type"]),
        (&json!("v1"), &json!("Secret"), &json!("kubernetes.io/tls"))
    );
    assert_eq!(
        posted["metadata"],
        json!({"name": "operon-webhook-tls", "namespace": "operon",
               "labels": {"app.kubernetes.io/managed-by": "operon"},
               "annotations": {"operon.dev/webhook-certificate-names":
                   "operon-webhooks,operon-webhooks.operon,operon-webhooks.operon.svc,\
                    operon-webhooks.operon.svc.cluster.local,127.0.0.1"}})
    );
    let keys: Vec<&String> = posted["data"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["ca.crt", "ca.key", "tls.crt", "tls.key"]);
    let material = material_of(&posted);
    assert!(is_current(&material));
    assert_files(&bundle, &material);
    assert!(bundle.not_after > jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * 364));
    assert!(ca.has_changed().unwrap());
    assert_eq!(*ca.borrow_and_update(), material.ca_crt);
}

#[tokio::test]
async fn a_replica_that_loses_the_creation_race_uses_the_winners_secret() {
    let dir = tempfile::tempdir().unwrap();
    let (selfsigned, mut server) = setup(dir.path());
    let winner = made(0);
    let (bundle, ()) = tokio::join!(selfsigned.ensure(), async {
        server
            .expect("GET", SECRET)
            .await
            .fail(404, "NotFound", "not found");
        server.expect("POST", CREATE).await.fail(
            409,
            "AlreadyExists",
            "secrets \"operon-webhook-tls\" already exists",
        );
        server
            .expect("GET", SECRET)
            .await
            .answer(200, stored(&winner, "7"));
    });
    server.quiet().await;
    assert_files(&bundle.unwrap(), &winner);
}

#[tokio::test]
async fn an_expiring_certificate_is_renewed_under_the_same_ca_with_the_read_version() {
    let dir = tempfile::tempdir().unwrap();
    let (selfsigned, mut server) = setup(dir.path());
    let old = made(340);
    let mut read = stored(&old, "41");
    read["metadata"]["labels"]["team"] = json!("platform");
    read["data"]["extra"] = json!(b64(b"kept"));
    let (bundle, put) = tokio::join!(selfsigned.ensure(), async {
        server.expect("GET", SECRET).await.answer(200, &read);
        let call = server.expect("PUT", REPLACE).await;
        assert_eq!(call.content_type.as_deref(), Some("application/json"));
        let body = call.json();
        let mut answer = body.clone();
        answer["metadata"]["resourceVersion"] = json!("42");
        call.answer(200, &answer);
        body
    });
    let bundle = bundle.unwrap();
    server.quiet().await;

    assert_eq!(put["metadata"]["resourceVersion"], "41");
    assert_eq!(put["metadata"]["uid"], "u-1");
    assert!(put["metadata"].get("managedFields").is_none());
    assert_eq!(
        put["metadata"]["labels"],
        json!({"app.kubernetes.io/managed-by": "operon", "team": "platform"})
    );
    assert_eq!(put["type"], "kubernetes.io/tls");
    assert_eq!(put["data"]["extra"], json!(b64(b"kept")));
    let renewed = material_of(&put);
    assert_eq!(
        (&renewed.ca_crt, &renewed.ca_key),
        (&old.ca_crt, &old.ca_key),
        "the CA and so the caBundle stay"
    );
    assert_ne!(renewed.tls_crt, old.tls_crt);
    assert!(is_current(&renewed));
    assert_files(&bundle, &renewed);
}

#[tokio::test]
async fn a_renewal_that_loses_to_another_replica_reads_and_uses_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let (selfsigned, mut server) = setup(dir.path());
    let old = made(340);
    let theirs = made(0);
    let (bundle, ()) = tokio::join!(selfsigned.ensure(), async {
        server
            .expect("GET", SECRET)
            .await
            .answer(200, stored(&old, "41"));
        server.expect("PUT", REPLACE).await.fail(
            409,
            "Conflict",
            "Operation cannot be fulfilled on secrets \"operon-webhook-tls\": the object has been modified",
        );
        server
            .expect("GET", SECRET)
            .await
            .answer(200, stored(&theirs, "43"));
    });
    server.quiet().await;
    assert_files(&bundle.unwrap(), &theirs);
}

#[tokio::test]
async fn a_secret_operon_did_not_make_is_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let (selfsigned, mut server) = setup(dir.path());
    let mut foreign = stored(&made(340), "5");
    foreign["metadata"]["labels"] = json!({"app": "webhooks"});
    foreign["metadata"]["annotations"] = json!({"cert-manager.io/certificate-name": "webhooks"});
    let (result, ()) = tokio::join!(selfsigned.ensure(), async {
        server.expect("GET", SECRET).await.answer(200, &foreign);
    });
    server.quiet().await;
    let error = result.unwrap_err();
    assert!(
        matches!(error, SelfSignedError::NotManaged { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    for part in [
        "Secret operon/operon-webhook-tls",
        "app.kubernetes.io/managed-by=operon",
        "drop --webhook-self-signed",
        "another Secret name",
    ] {
        assert!(message.contains(part), "{message}");
    }
    assert!(!dir.path().join("tls.crt").exists());
    assert!(selfsigned.ca_bundle().borrow().is_empty());
}

#[tokio::test]
async fn a_current_secret_is_used_as_it_is_and_its_files_are_not_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let (selfsigned, mut server) = setup(dir.path());
    let current = made(10);
    let secret = stored(&current, "9");
    let (first, ()) = tokio::join!(selfsigned.ensure(), async {
        server.expect("GET", SECRET).await.answer(200, &secret);
    });
    server.quiet().await;
    let first = first.unwrap();
    assert_files(&first, &current);
    let inode = |p: &Path| std::fs::metadata(p).unwrap().ino();
    let before = (inode(&first.cert_path), inode(&first.key_path));

    let ca = selfsigned.ca_bundle();
    let (second, ()) = tokio::join!(selfsigned.ensure(), async {
        server.expect("GET", SECRET).await.answer(200, &secret);
    });
    server.quiet().await;
    let second = second.unwrap();
    assert_eq!(second, first);
    assert_eq!((inode(&second.cert_path), inode(&second.key_path)), before);
    assert!(
        !ca.has_changed().unwrap(),
        "the same bundle is not announced again"
    );
}

#[tokio::test]
async fn options_without_names_or_with_a_window_too_long_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (client, _api) = operon_cluster::kube::mock::pair();
    let mut nameless = options(dir.path());
    nameless.dns_names.clear();
    nameless.ip_addresses.clear();
    let error = SelfSigned::new(client.clone(), nameless)
        .ensure()
        .await
        .unwrap_err();
    assert!(error.to_string().contains("no DNS name"), "{error}");
    let mut long = options(dir.path());
    long.renew_before = std::time::Duration::from_secs(200 * 86_400);
    let error = SelfSigned::new(client, long).ensure().await.unwrap_err();
    assert!(error.to_string().contains("renewal window"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn the_refresher_follows_the_secret_retries_sooner_and_stops_when_told() {
    use tokio::time::Instant;
    let dir = tempfile::tempdir().unwrap();
    let (selfsigned, mut server) = setup(dir.path());
    let first = made(10);
    let (bundle, ()) = tokio::join!(selfsigned.ensure(), async {
        server
            .expect("GET", SECRET)
            .await
            .answer(200, stored(&first, "9"));
    });
    let bundle = bundle.unwrap();
    let mut ca = selfsigned.ca_bundle();
    let (stop, stopped) = watch::channel(false);
    let selfsigned = Arc::new(selfsigned);
    let refresher = tokio::spawn({
        let selfsigned = selfsigned.clone();
        async move { selfsigned.run(stopped).await }
    });

    let started = Instant::now();
    server
        .receive("GET", SECRET)
        .await
        .fail(500, "InternalError", "etcdserver: request timed out");
    let waited = started.elapsed();
    assert!(
        waited >= DEFAULT_CHECK_EVERY && waited <= DEFAULT_CHECK_EVERY * 11 / 10,
        "{waited:?}"
    );
    // A failed look is retried sooner; meanwhile another replica has replaced the set.
    let failed = Instant::now();
    let theirs = made(0);
    server
        .receive("GET", SECRET)
        .await
        .answer(200, stored(&theirs, "12"));
    assert_eq!(failed.elapsed(), FIRST_RETRY);
    ca.changed().await.unwrap();
    assert_eq!(*ca.borrow_and_update(), theirs.ca_crt);
    assert_files(
        &Bundle {
            ca_pem: theirs.ca_crt.clone(),
            ..bundle
        },
        &theirs,
    );

    stop.send(true).unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(1), refresher)
        .await
        .expect("the refresher stops when told")
        .unwrap();
}

/// A TLS client that trusts only `ca_pem`.
fn connector(ca_pem: &[u8]) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// Connects to `addr` as `name` and reads the server's greeting.
async fn handshake(
    connector: &tokio_rustls::TlsConnector,
    addr: std::net::SocketAddr,
    name: &str,
) -> Result<(), String> {
    let name = rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let mut greeting = Vec::new();
    tls.read_to_end(&mut greeting)
        .await
        .map_err(|e| e.to_string())?;
    assert_eq!(greeting, b"ok");
    Ok(())
}

#[tokio::test]
async fn the_certificate_serves_every_requested_name_to_a_client_trusting_only_the_ca() {
    let dir = tempfile::tempdir().unwrap();
    let (selfsigned, mut server) = setup(dir.path());
    let issued = made(340);
    let secret = stored(&issued, "3");
    let (bundle, ()) = tokio::join!(selfsigned.ensure_at(now() - 340 * DAY), async {
        server.expect("GET", SECRET).await.answer(200, &secret);
    });
    let bundle = bundle.unwrap();
    let cert = ReloadingCert::load(TlsFiles {
        cert: bundle.cert_path.clone(),
        key: bundle.key_path.clone(),
        client_ca: None,
    })
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(cert.server_config().unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serving = tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(mut tls) = acceptor.accept(tcp).await {
                    let _ = tls.write_all(b"ok").await;
                    let _ = tls.shutdown().await;
                }
            });
        }
    });

    let trusting = connector(&bundle.ca_pem);
    for name in service_dns_names("operon-webhooks", "operon")
        .iter()
        .chain([&"127.0.0.1".to_owned()])
    {
        handshake(&trusting, addr, name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    for name in [
        "operon-webhooks.other.svc",
        "webhooks.operon.svc",
        "127.0.0.2",
    ] {
        let error = handshake(&trusting, addr, name).await.unwrap_err();
        assert!(error.contains("not valid for name"), "{name}: {error}");
    }
    let stranger = connector(&made(0).ca_crt);
    let error = handshake(&stranger, addr, "operon-webhooks.operon.svc")
        .await
        .unwrap_err();
    assert!(error.contains("UnknownIssuer"), "{error}");

    // Renewed when it is due: the server picks up the new files, same CA.
    let (renewed, ()) = tokio::join!(selfsigned.ensure(), async {
        server.expect("GET", SECRET).await.answer(200, &secret);
        let call = server.expect("PUT", REPLACE).await;
        let body = call.json();
        call.answer(200, &body);
    });
    let renewed = renewed.unwrap();
    assert_eq!(renewed.ca_pem, bundle.ca_pem);
    assert!(cert.reload().unwrap(), "the renewal reached the server");
    handshake(&trusting, addr, "operon-webhooks.operon.svc")
        .await
        .unwrap();
    serving.abort();
}
