//! `operon module push FILE oci://...` and `operon module pull oci://...` against a real
//! registry: Debian's `docker-registry` (the CNCF distribution registry) started on
//! loopback with TLS (a test CA) and htpasswd authentication. Skipped with a message
//! when `docker-registry` or `htpasswd` (apache2-utils) is not installed.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::e2e_support::registry::registry;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn failure(out: &Output) -> String {
    assert!(!out.status.success(), "{}", text(&out.stdout));
    text(&out.stderr)
}

#[test]
fn modules_go_to_a_registry_and_come_back_by_tag_and_by_digest() {
    let Some(registry) = registry() else { return };
    let module = Path::new(operon_tests::LOG_TRIAGE);
    let tag = registry.reference("team/log-triage:1.0");
    let pushed = registry.operon(&["module", "push", module.to_str().unwrap(), &tag], false);
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));
    let stdout = text(&pushed.stdout);
    let pinned = stdout
        .lines()
        .find_map(|l| l.strip_prefix("pinned: "))
        .unwrap_or_else(|| panic!("no pinned reference in {stdout}"))
        .to_owned();
    assert!(
        pinned.starts_with(&registry.reference("team/log-triage@sha256:")),
        "{pinned}"
    );

    let out = tempfile::tempdir().unwrap();
    for reference in [&tag, &pinned] {
        let file = out.path().join("pulled.wasm");
        let pulled = registry.operon(
            &["module", "pull", reference, "-o", file.to_str().unwrap()],
            false,
        );
        assert!(pulled.status.success(), "{}", text(&pulled.stderr));
        assert_eq!(
            std::fs::read(&file).unwrap(),
            std::fs::read(module).unwrap()
        );
    }

    // Each refusal names the reference and the reason.
    let file = out.path().join("x.wasm");
    let missing = registry.reference("team/log-triage:2.0");
    let error = failure(&registry.operon(
        &["module", "pull", &missing, "-o", file.to_str().unwrap()],
        false,
    ));
    assert!(
        error.contains(&format!("{missing}: not found in the registry")),
        "{error}"
    );
    let error = failure(&registry.operon(
        &["module", "pull", &tag, "-o", file.to_str().unwrap()],
        true,
    ));
    assert!(
        error.contains(&format!("{tag}: the registry refused access")),
        "{error}"
    );
    let error = failure(&registry.operon(&["module", "push", "/etc/hostname", &tag], false));
    assert!(error.contains("is not a wasm component"), "{error}");
    assert!(!file.exists());
}

#[tokio::test]
async fn an_artifact_that_is_no_wasm_module_is_refused_by_media_type() {
    let Some(registry) = registry() else { return };
    use oci_client::client::{ClientConfig, Config, ImageLayer};
    use oci_client::secrets::RegistryAuth;
    let _ = rustls::crypto::ring::default_provider().install_default();
    // A container image's config and layer, pushed with the registry client itself.
    let client = oci_client::Client::new(ClientConfig {
        extra_root_certificates: vec![oci_client::client::Certificate {
            encoding: oci_client::client::CertificateEncoding::Pem,
            data: std::fs::read(registry.ca()).unwrap(),
        }],
        ..ClientConfig::default()
    });
    let image: oci_client::Reference = format!("127.0.0.1:{}/team/image:1", registry.port)
        .parse()
        .unwrap();
    client
        .push(
            &image,
            &[ImageLayer::oci_v1(b"not a component".to_vec(), None)],
            Config::oci_v1(br#"{"architecture":"amd64","os":"linux"}"#.to_vec(), None),
            &RegistryAuth::Basic("alice".to_owned(), "s3cr3t".to_owned()),
            None,
        )
        .await
        .unwrap();
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("x.wasm");
    let reference = registry.reference("team/image:1");
    let error = failure(&registry.operon(
        &["module", "pull", &reference, "-o", file.to_str().unwrap()],
        false,
    ));
    assert!(
        error.contains(&format!(
            "{reference}: not a wasm module artifact: its config is application/vnd.oci.image.config.v1+json, not application/vnd.wasm.config.v0+json"
        )),
        "{error}"
    );
}

/// A pipeline whose one step is the echo fixture, named by `module`.
fn echo_pipeline(dir: &Path, module: &str) -> PathBuf {
    let file = dir.join("pipeline.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: operon.dev/v1alpha1\nkind: Operation\nmetadata: {{name: echo}}\n\
             spec:\n  processor:\n    wasm: {{module: \"{module}\"}}\n---\n\
             apiVersion: operon.dev/v1alpha1\nkind: OperationSet\nmetadata: {{name: one}}\n\
             spec:\n  adjacencyList:\n  - {{to: [1]}}\n  - {{id: 1, operation: echo}}\n---\n\
             apiVersion: operon.dev/v1alpha1\nkind: Diagnosis\nmetadata: {{name: d}}\n\
             spec:\n  operationSet: one\n  parameters: {{greeting: hello}}\n"
        ),
    )
    .unwrap();
    file
}

#[test]
fn operon_run_pulls_an_operations_oci_module_and_pins_its_tag() {
    let Some(registry) = registry() else { return };
    let tag = registry.reference("team/echo:1");
    let pushed = registry.operon(&["module", "push", operon_tests::ECHO, &tag], false);
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    let run = |module: &str, anonymous: bool| {
        let pipeline = echo_pipeline(work.path(), module);
        registry.operon(
            &[
                "run",
                pipeline.to_str().unwrap(),
                "--cache-dir",
                cache.to_str().unwrap(),
                "-o",
                "json",
            ],
            anonymous,
        )
    };
    let out = run(&tag, false);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["status"]["phase"], "Succeeded", "{status}");
    assert_eq!(status["status"]["operationResults"]["greeting"], "hello");
    let stderr = text(&out.stderr);
    let pinned_prefix = format!(
        "Operation echo: module pinned to {}",
        registry.reference("team/echo@sha256:")
    );
    assert!(stderr.contains(&pinned_prefix), "{stderr}");

    // Pulled once: the pinned reference runs from the store with no credentials.
    let pinned = stderr
        .lines()
        .find_map(|l| l.strip_prefix("Operation echo: module pinned to "))
        .and_then(|l| l.split(' ').next())
        .unwrap()
        .to_owned();
    let out = run(&pinned, true);
    assert!(
        !out.status.success(),
        "a pinned module still asks the registry for its manifest: anonymous is refused"
    );
    let out = run(&pinned, false);
    assert!(out.status.success(), "{}", text(&out.stderr));

    // A tag no one pushed: the run stops before any step, naming the Operation.
    let missing = registry.reference("team/echo:2");
    let error = failure(&run(&missing, false));
    assert!(
        error.contains(&format!(
            "Operation echo: spec.processor.wasm.module: {missing}: not found in the registry"
        )),
        "{error}"
    );
}
