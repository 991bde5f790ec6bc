//! Diagnoses of `oci://` modules under a verification configuration, against a mock
//! API server and a registry served in the test: a signed module is pinned and run, an
//! unsigned or tampered one fails the Diagnosis with reason `SignatureNotVerified`
//! before anything of it runs.

use super::tests::{answer_put, diagnosis};
use super::*;
use operon_cluster::kube::mock::{self, MockApi};
use operon_runner::processors::ProcessorSettings;
use operon_store::keys::SigningKey;
use operon_store::oci::{OciClient, OciOptions, RegistryAuth, SignRequest};
use operon_store::oci_modules::{AllowList, OciModules};
use operon_store::verification::VerificationConfig;
use operon_store::{BlobStore, ModuleLocator};
use operon_tests::registry::{FakeRegistry, sha256};
use serde_json::{Value, json};

struct Signed {
    registry: Arc<FakeRegistry>,
    host: String,
    options: OciOptions,
    key: SigningKey,
    processors: Arc<Processors>,
    _dir: tempfile::TempDir,
}

/// A registry holding the echo fixture as `team/echo:1`, and a controller whose
/// `oci://` modules must be signed by a key.
async fn setup() -> Signed {
    let registry = FakeRegistry::new(None);
    let host = registry.serve().await;
    registry.publish_wasm(
        "team/echo",
        "1",
        &std::fs::read(operon_tests::ECHO).unwrap(),
    );
    let options = OciOptions {
        extra_ca_pem: Vec::new(),
        plain_http: vec![host.clone()],
    };
    let dir = tempfile::tempdir().unwrap();
    let (key, _) = SigningKey::generate().unwrap();
    let pem: String = (key.public_key().to_pem().lines())
        .map(|l| format!("      {l}\n"))
        .collect();
    let config = dir.path().join("verification.yaml");
    std::fs::write(
        &config,
        format!("apiVersion: v1\nallOf:\n  - kind: pubKey\n    key: |\n{pem}"),
    )
    .unwrap();
    let blobs = BlobStore::open(dir.path().join("store"), 64 << 20).unwrap();
    let oci = OciModules::new(blobs, options.clone(), AllowList::new([host.clone()]))
        .with_verification(Arc::new(VerificationConfig::load(&config).unwrap()));
    let processors = Processors::new(ProcessorSettings {
        cache_dir: Some(operon_tests::test_cache_dir()),
        modules: ModuleLocator::new(None).with_oci(Arc::new(oci)),
        ..ProcessorSettings::default()
    });
    Signed {
        registry,
        host,
        options,
        key,
        processors: Arc::new(processors),
        _dir: dir,
    }
}

/// A controller's context over `client`, with the pulled modules of `s`.
fn context(s: &Signed, client: kube::Client) -> Arc<Context> {
    Arc::new(Context::new(
        client,
        s.processors.clone(),
        Settings::new(Role::Controller, "operon"),
    ))
}

/// Answers the reads of a Diagnosis of set `three`, whose one node runs Operation
/// `echo` of `module`.
async fn answer_reads(api: &mut MockApi, d: &Diagnosis, module: &str) {
    let get = api.next().await;
    assert_eq!(
        get.uri,
        "/apis/operon.dev/v1alpha1/namespaces/ops/diagnoses/d1"
    );
    get.answer(200, serde_json::to_value(d).unwrap());
    let set = api.next().await;
    assert_eq!(set.uri, "/apis/operon.dev/v1alpha1/operationsets/three");
    set.answer(
        200,
        json!({"apiVersion": "operon.dev/v1alpha1", "kind": "OperationSet",
               "metadata": {"name": "three", "generation": 1},
               "spec": {"adjacencyList": [{"id": 0, "to": [1]}, {"id": 1, "operation": "echo"}]}}),
    );
    let operation = api.next().await;
    assert_eq!(operation.uri, "/apis/operon.dev/v1alpha1/operations/echo");
    operation.answer(
        200,
        json!({"apiVersion": "operon.dev/v1alpha1", "kind": "Operation",
               "metadata": {"name": "echo"},
               "spec": {"processor": {"timeoutSeconds": 30, "wasm": {"module": module}}}}),
    );
}

fn accepted(status: &Value) -> &Value {
    status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == ACCEPTED))
        .unwrap_or(&Value::Null)
}

#[tokio::test]
async fn a_signed_module_runs_and_a_tampered_one_fails_the_diagnosis() {
    let s = setup().await;
    let tag = format!("oci://{}/team/echo:1", s.host);
    let mut d = diagnosis(None);
    d.spec.parameters = [("greeting".to_owned(), "hello".to_owned())].into();

    // Unsigned: the Diagnosis is not accepted, saying why; nothing runs.
    let (client, mut api) = mock::pair();
    let reconciling = tokio::spawn(reconcile(Arc::new(d.clone()), context(&s, client)));
    answer_reads(&mut api, &d, &tag).await;
    let put = answer_put(&mut api, 11).await;
    let condition = accepted(&put["status"]);
    assert_eq!(condition["status"], "False", "{put}");
    assert_eq!(condition["reason"], "SignatureNotVerified", "{put}");
    let message = condition["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "Operation echo: spec.processor.wasm.module: {tag}: signature not verified: manifest sha256:"
        )) && message.contains("has no signature"),
        "{message}"
    );
    assert!(put["status"]["operationResults"].is_null(), "{put}");
    reconciling.await.unwrap().unwrap();
    api.quiet().await;

    // Signed with the key: pinned, run, succeeded.
    OciClient::new(&s.options)
        .sign(
            &tag,
            &s.key,
            &SignRequest::default(),
            &RegistryAuth::Anonymous,
        )
        .await
        .unwrap();
    let (client, mut api) = mock::pair();
    let reconciling = tokio::spawn(reconcile(Arc::new(d.clone()), context(&s, client)));
    answer_reads(&mut api, &d, &tag).await;
    let mut version = 11;
    let finished = loop {
        let put = answer_put(&mut api, version).await;
        version += 1;
        if put["status"]["phase"] == "Succeeded" || put["status"]["phase"] == "Failed" {
            break put;
        }
    };
    let status = &finished["status"];
    assert_eq!(status["phase"], "Succeeded", "{finished}");
    assert_eq!(
        status["operationResults"]["greeting"], "hello",
        "{finished}"
    );
    let manifest = sha256(&s.registry.manifest("team/echo:1").unwrap());
    assert_eq!(
        status["pinnedModules"]["echo"],
        format!("oci://{}/team/echo@{manifest}", s.host)
    );
    reconciling.await.unwrap().unwrap();

    // Other bytes under the tag, the signatures copied beside them: failed at once.
    let moved = s.registry.publish_wasm(
        "team/echo",
        "1",
        b"\0asm\x0d\x00\x01\x00 not the module that was signed",
    );
    let hex = |digest: &str| digest.trim_start_matches("sha256:").to_owned();
    let signatures = s
        .registry
        .manifest(&format!("team/echo:sha256-{}.sig", hex(&manifest)))
        .unwrap();
    s.registry.put_manifest(
        "team/echo",
        &format!("sha256-{}.sig", hex(&moved)),
        &signatures,
    );
    let (client, mut api) = mock::pair();
    let reconciling = tokio::spawn(reconcile(Arc::new(d.clone()), context(&s, client)));
    answer_reads(&mut api, &d, &tag).await;
    let put = answer_put(&mut api, 20).await;
    assert_eq!(put["status"]["phase"], "Failed", "{put}");
    let condition = accepted(&put["status"]);
    assert_eq!(condition["reason"], "SignatureNotVerified", "{put}");
    assert!(
        condition["message"]
            .as_str()
            .unwrap()
            .contains(&format!("it signs manifest {manifest}, not this one")),
        "{put}"
    );
    assert_eq!(reconciling.await.unwrap().unwrap(), Action::await_change());
    api.quiet().await;
}
