//! `operon module push FILE oci://...` and `operon module pull oci://...` against a real
//! registry: Debian's `docker-registry` (the CNCF distribution registry) started on
//! loopback with TLS (a test CA) and htpasswd authentication; and signed modules there
//! (`operon module keygen`, `sign`, `verify`, `operon run --module-verification`). Failing,
//! naming the program, when `docker-registry` or `htpasswd` (apache2-utils) is not
//! installed: `.ci/setup` installs both.
//! And an addon-operator module pushed from its directory, then listed from there by
//! `operon modules list --module-source`.

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
    let registry = registry();
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
    let registry = registry();
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
    let registry = registry();
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

/// `operon module keygen` into `dir`: the private and public keys' paths.
fn keygen(dir: &Path) -> (PathBuf, PathBuf) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(["module", "keygen", "--output-key-prefix"])
        .arg(dir.join("release"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    (dir.join("release.key"), dir.join("release.pub"))
}

/// Copies the signature manifest of `from` (a manifest digest) to the tag of `to` in
/// `repository`, as someone with push access to the registry could.
async fn copy_signatures(
    registry: &crate::e2e_support::registry::Registry,
    repository: &str,
    from: &str,
    to: &str,
) {
    use oci_client::client::ClientConfig;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = oci_client::Client::new(ClientConfig {
        extra_root_certificates: vec![oci_client::client::Certificate {
            encoding: oci_client::client::CertificateEncoding::Pem,
            data: std::fs::read(registry.ca()).unwrap(),
        }],
        ..ClientConfig::default()
    });
    let auth = oci_client::secrets::RegistryAuth::Basic("alice".to_owned(), "s3cr3t".to_owned());
    let tag = |digest: &str| -> oci_client::Reference {
        format!(
            "127.0.0.1:{}/{repository}:{}.sig",
            registry.port,
            digest.replace(':', "-")
        )
        .parse()
        .unwrap()
    };
    let manifest_type = "application/vnd.oci.image.manifest.v1+json";
    let (manifest, _) = client
        .pull_manifest_raw(&tag(from), &auth, &[manifest_type])
        .await
        .unwrap();
    client
        .push_manifest_raw(&tag(to), manifest.to_vec(), manifest_type.parse().unwrap())
        .await
        .unwrap();
}

fn pinned_digest(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("pinned: "))
        .and_then(|p| p.split('@').nth(1))
        .unwrap_or_else(|| panic!("no pinned reference in {stdout}"))
        .to_owned()
}

#[tokio::test]
async fn a_signed_module_runs_and_an_unsigned_or_tampered_one_is_refused() {
    let registry = registry();
    let work = tempfile::tempdir().unwrap();
    let (key, public) = keygen(work.path());
    let config = work.path().join("verification.yaml");
    let public: String = std::fs::read_to_string(&public)
        .unwrap()
        .lines()
        .map(|l| format!("      {l}\n"))
        .collect();
    std::fs::write(
        &config,
        format!("apiVersion: v1\nallOf:\n  - kind: pubKey\n    owner: release\n    annotations: {{env: prod}}\n    key: |\n{public}"),
    )
    .unwrap();
    let tag = registry.reference("team/echo:1");
    let pushed = registry.operon(&["module", "push", operon_tests::ECHO, &tag], false);
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));
    let signed_digest = pinned_digest(&text(&pushed.stdout));
    let cache = work.path().join("cache");
    let run = |module: &str| {
        let pipeline = echo_pipeline(work.path(), module);
        registry.operon(
            &[
                "run",
                pipeline.to_str().unwrap(),
                "--cache-dir",
                cache.to_str().unwrap(),
                "--module-verification",
                config.to_str().unwrap(),
                "-o",
                "json",
            ],
            false,
        )
    };
    let verify = || {
        registry.operon(
            &[
                "module",
                "verify",
                "--config",
                config.to_str().unwrap(),
                &tag,
            ],
            false,
        )
    };

    // Unsigned: refused before any step, saying so; `verify` says why too.
    let error = failure(&run(&tag));
    assert!(
        error.contains(&format!(
            "Operation echo: spec.processor.wasm.module: {tag}: signature not verified: manifest {signed_digest} has no signature"
        )),
        "{error}"
    );
    let out = verify();
    assert!(!out.status.success());
    assert!(
        text(&out.stdout).contains("allOf[0] (pubKey ECDSA P-256, owner release): not met"),
        "{}",
        text(&out.stdout)
    );

    // Signed without the annotation the configuration wants, then with it.
    let sign = |annotations: &[&str]| {
        let mut args = vec!["module", "sign", "--key", key.to_str().unwrap()];
        for a in annotations {
            args.extend(["-a", a]);
        }
        args.push(&tag);
        let out = registry.operon(&args, false);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let first = sign(&[]);
    assert!(
        first.contains("signed with ECDSA P-256 key: pushed to"),
        "{first}"
    );
    let error = failure(&run(&tag));
    assert!(
        error.contains("its payload lacks the annotations env=prod"),
        "{error}"
    );
    let second = sign(&["env=prod"]);
    assert!(second.ends_with("(2 signatures)\n"), "{second}");
    let out = run(&tag);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["status"]["phase"], "Succeeded", "{status}");
    assert_eq!(status["status"]["operationResults"]["greeting"], "hello");
    let out = verify();
    assert!(out.status.success(), "{}", text(&out.stdout));
    let shown = text(&out.stdout);
    assert!(
        shown.contains("allOf[0] (pubKey ECDSA P-256, owner release): met")
            && shown.contains(": its payload lacks the annotations env=prod")
            && shown.contains(": meets it"),
        "{shown}"
    );

    // Other bytes pushed under the tag, the signatures copied beside them: refused.
    let mut tampered = std::fs::read(operon_tests::ECHO).unwrap();
    tampered.extend_from_slice(&[0x00, 0x04, 0x01, b'x', b'v', b'2']);
    let file = work.path().join("tampered.wasm");
    std::fs::write(&file, &tampered).unwrap();
    let pushed = registry.operon(&["module", "push", file.to_str().unwrap(), &tag], false);
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));
    let tampered_digest = pinned_digest(&text(&pushed.stdout));
    copy_signatures(&registry, "team/echo", &signed_digest, &tampered_digest).await;
    let error = failure(&run(&tag));
    assert!(
        error.contains(&format!(
            "{tag}: signature not verified: manifest {tampered_digest} (2 signatures)"
        )) && error.contains(&format!("it signs manifest {signed_digest}, not this one")),
        "{error}"
    );
    eprintln!("refused: {error}");
}

/// A private CA's certificate for the signing key, attached as cosign attaches a
/// Fulcio one, meets a genericIssuer requirement with that CA as trust root.
#[test]
fn a_module_signed_with_a_certificate_verifies_to_its_trust_root() {
    use operon_tests::signing::{LeafSpec, SigningPki};
    let registry = registry();
    let work = tempfile::tempdir().unwrap();
    let pki = SigningPki::new();
    let leaf = pki.issue(&LeafSpec::new(
        "https://github.com/acme/hooks/.github/workflows/release.yml@refs/heads/main",
        "https://token.actions.githubusercontent.com",
    ));
    let file = |name: &str, text: &str| {
        let path = work.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let (key, cert, chain) = (
        file("leaf.key", &leaf.key_pem),
        file("leaf.crt", &leaf.cert_pem),
        file("chain.pem", &leaf.chain_pem),
    );
    file("fulcio.pem", &pki.root_pem());
    let config = file(
        "verification.yaml",
        "apiVersion: v1\ntrustRoot: {certificateAuthorities: fulcio.pem}\nallOf:\n  - kind: genericIssuer\n    issuer: https://token.actions.githubusercontent.com\n    subject: {urlPrefix: https://github.com/acme}\n",
    );
    let tag = registry.reference("team/labeler:1");
    let pushed = registry.operon(&["module", "push", operon_tests::POD_LABELER, &tag], false);
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));
    let signed = registry.operon(
        &[
            "module",
            "sign",
            "--key",
            &key,
            "--certificate",
            &cert,
            "--certificate-chain",
            &chain,
            &tag,
        ],
        false,
    );
    assert!(signed.status.success(), "{}", text(&signed.stderr));
    let out = registry.operon(&["module", "verify", "--config", &config, &tag], false);
    assert!(out.status.success(), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("allOf[0] (genericIssuer https://token.actions.githubusercontent.com, subject https://github.com/acme/…): met"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn an_addon_module_goes_to_a_registry_and_is_listed_from_there() {
    let registry = registry();
    let module = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../crates/addons/testdata/module-symlinks/module_storage/002-frontend");
    let tag = registry.reference("modules/frontend:1.0");
    let pushed = registry.operon(&["module", "push", module.to_str().unwrap(), &tag], false);
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));
    let stdout = text(&pushed.stdout);
    let pinned = stdout
        .lines()
        .find_map(|l| l.strip_prefix("pinned: "))
        .unwrap_or_else(|| panic!("no pinned reference in {stdout}"))
        .to_owned();
    assert!(pinned.starts_with(&format!("{tag}@sha256:")), "{pinned}");

    let list = |cache: &Path, anonymous: bool| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_operon"));
        command
            .args(["modules", "list", "-o", "json", "--module-source", &pinned])
            .arg("--registry-ca")
            .arg(registry.ca())
            .env("XDG_CACHE_HOME", cache)
            .env("HOME", cache)
            .env_remove("DOCKER_CONFIG");
        if !anonymous {
            command
                .arg("--docker-config")
                .arg(registry.ca().with_file_name("docker.json"));
        }
        let out = command.output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        serde_json::from_slice::<Vec<serde_json::Value>>(&out.stdout).unwrap()
    };
    let cache = tempfile::tempdir().unwrap();
    let modules = list(cache.path(), false);
    assert_eq!(modules[0]["name"], "frontend");
    assert_eq!(modules[0]["state"], "enabled");
    assert_eq!(modules[0]["source"], pinned.as_str());

    // Without the credentials the registry refuses, and the module is unavailable.
    let anonymous = tempfile::tempdir().unwrap();
    let modules = list(anonymous.path(), true);
    let state = modules[0]["state"].as_str().unwrap();
    assert!(
        state.starts_with("unavailable (RegistryUnauthorized:"),
        "{state}"
    );
}
