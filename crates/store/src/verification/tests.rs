//! Verification against keys and a throwaway Fulcio-like PKI (good, tampered, for
//! another manifest, by another key, expired, for another issuer or subject, to
//! another root), against signatures made elsewhere (openssl, SUSE's signing service,
//! cosign with the public Fulcio and Rekor of 2021), and the configuration's refusals.

use super::*;
use crate::cosign::{BUNDLE_ANNOTATION, Signature};
use crate::keys::SigningKey;
use operon_tests::signing::{LeafSpec, SigningPki};
use std::collections::BTreeMap;
use std::path::Path;

const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const OTHER: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
const GITHUB: &str = "https://token.actions.githubusercontent.com";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A signature by `key` of a payload for `digest` with `annotations`.
fn signed(key: &SigningKey, digest: &str, annotations: &[(&str, &str)]) -> Signature {
    let annotations: BTreeMap<String, String> = annotations
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let payload = Payload::new("registry.example.com/ops/triage", digest, &annotations).to_bytes();
    let signature = b64(&key.sign(&payload).unwrap());
    Signature::new(payload, signature, None, None)
}

/// A keyless signature: `leaf`'s key over a payload for `digest`, with its certificate.
fn keyless(leaf: &operon_tests::signing::Leaf, digest: &str) -> Signature {
    let key = SigningKey::from_pem(&leaf.key_pem).unwrap();
    let mut signature = signed(&key, digest, &[]);
    let annotated = Signature::new(
        signature.payload.clone(),
        signature.signature().unwrap().to_owned(),
        Some(leaf.cert_pem.clone()),
        Some(leaf.chain_pem.clone()),
    );
    signature.annotations = annotated.annotations;
    signature
}

/// A configuration from `yaml`, with `files` beside it.
fn config(yaml: &str, files: &[(&str, &str)]) -> VerificationConfig {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let path = dir.path().join("verification.yaml");
    VerificationConfig::parse(yaml, &path).unwrap()
}

fn refusal(yaml: &str, files: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let path = dir.path().join("verification.yaml");
    let error = VerificationConfig::parse(yaml, &path)
        .unwrap_err()
        .to_string();
    let prefix = format!("{}: ", path.display());
    error
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{error}"))
        .to_owned()
}

/// `key: |` with the PEM of `key`, indented for a requirement.
fn pub_key(key: &SigningKey, extra: &str) -> String {
    let pem: String = (key.public_key().to_pem().lines())
        .map(|l| format!("      {l}\n"))
        .collect();
    format!("  - kind: pubKey\n    key: |\n{pem}{extra}")
}

fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

/// Why the first requirement of `report` is not met by its one signature.
fn why(report: &Report) -> String {
    match report.requirements[0].not_met.as_slice() {
        [(_, why)] => why.clone(),
        other => panic!("not one reason: {other:?}"),
    }
}

/// Why it is met by none of the signatures, one reason each, in their order.
fn reasons(report: &Report) -> Vec<String> {
    assert!(report.requirements[0].met_by.is_empty(), "{report:?}");
    report.requirements[0]
        .not_met
        .iter()
        .map(|(_, why)| why.clone())
        .collect()
}

#[test]
fn a_key_signature_verifies_and_tampering_does_not() {
    let (key, _) = SigningKey::generate().unwrap();
    let (other, _) = SigningKey::generate().unwrap();
    let policy = config(
        &format!(
            "apiVersion: v1\nallOf:\n{}",
            pub_key(&key, "    owner: alice\n")
        ),
        &[],
    );
    let good = signed(&key, DIGEST, &[]);
    let report = policy.verify(DIGEST, std::slice::from_ref(&good), now());
    assert!(report.verified(), "{report}");
    assert_eq!(report.requirements[0].met_by, vec![0]);
    assert!(
        report.requirements[0]
            .requirement
            .starts_with("allOf[0] (pubKey ECDSA P-256, owner alice)"),
        "{report:?}"
    );

    // The payload changed after signing: the signature no longer covers it.
    let mut tampered = good.clone();
    tampered.payload = Payload::new(
        "registry.example.com/ops/triage",
        DIGEST,
        &[("x".to_owned(), "y".to_owned())].into(),
    )
    .to_bytes();
    // A valid signature, but of another manifest.
    let elsewhere = signed(&key, OTHER, &[]);
    // Another key.
    let stranger = signed(&other, DIGEST, &[]);
    // A signature that is not base64, and a layer without one.
    let mut garbled = good.clone();
    garbled.annotations.insert(
        crate::cosign::SIGNATURE_ANNOTATION.to_owned(),
        "not base64!".to_owned(),
    );
    let mut bare = good.clone();
    bare.annotations.clear();
    let all = [tampered, elsewhere, stranger, garbled, bare];
    let report = policy.verify(DIGEST, &all, now());
    assert!(!report.verified());
    let reasons = reasons(&report);
    assert_eq!(reasons[0], "it is not signed with this key");
    assert_eq!(
        reasons[1],
        format!("it signs manifest {OTHER}, not this one")
    );
    assert_eq!(reasons[2], "it is not signed with this key");
    assert!(
        reasons[3].starts_with("its signature is not base64"),
        "{}",
        reasons[3]
    );
    assert_eq!(
        reasons[4],
        "its layer has no dev.cosignproject.cosign/signature annotation"
    );
    let message = report.to_string();
    assert!(
        message.starts_with(&format!("manifest {DIGEST} (5 signatures): allOf[0] (pubKey ECDSA P-256, owner alice) is not met (signature 1 (sha256:")),
        "{message}"
    );
    // One good signature among them is enough.
    let mut with_good = all.to_vec();
    with_good.push(good);
    assert!(policy.verify(DIGEST, &with_good, now()).verified());
}

#[test]
fn no_signature_at_all_says_so() {
    let (key, _) = SigningKey::generate().unwrap();
    let policy = config(
        &format!("apiVersion: v1\nallOf:\n{}", pub_key(&key, "")),
        &[],
    );
    let report = policy.verify(DIGEST, &[], now());
    assert!(!report.verified());
    assert_eq!(
        report.to_string(),
        format!(
            "manifest {DIGEST} has no signature (no cosign signature under its sha256-….sig tag)"
        )
    );
}

#[test]
fn annotations_and_any_of_counts_are_required() {
    let (alice, _) = SigningKey::generate().unwrap();
    let (bob, _) = SigningKey::generate().unwrap();
    let policy = config(
        &format!(
            "apiVersion: v1\nallOf:\n{}anyOf:\n  minimumMatches: 2\n  signatures:\n{}{}",
            pub_key(&alice, "    annotations: {env: prod}\n"),
            pub_key(&alice, ""),
            pub_key(&bob, ""),
        ),
        &[],
    );
    let unannotated = signed(&alice, DIGEST, &[]);
    let report = policy.verify(DIGEST, std::slice::from_ref(&unannotated), now());
    assert_eq!(why(&report), "its payload lacks the annotations env=prod");
    let prod = signed(&alice, DIGEST, &[("env", "prod"), ("team", "ops")]);
    let report = policy.verify(DIGEST, std::slice::from_ref(&prod), now());
    assert!(!report.verified(), "bob has not signed");
    assert!(
        report
            .to_string()
            .contains("1 of anyOf's 2 met, 2 needed; anyOf.signatures[1]"),
        "{report}"
    );
    let report = policy.verify(DIGEST, &[prod, signed(&bob, DIGEST, &[])], now());
    assert!(report.verified(), "{report}");
}

/// The trust root files of `pki` and a configuration of `requirement` with them.
fn keyless_config(pki: &SigningPki, requirement: &str) -> VerificationConfig {
    config(
        &format!(
            "apiVersion: v1\ntrustRoot:\n  certificateAuthorities: fulcio.pem\n  transparencyLogKeys: rekor.pub\nallOf:\n{requirement}"
        ),
        &[
            ("fulcio.pem", &pki.root_pem()),
            ("rekor.pub", &pki.log_key_pem()),
        ],
    )
}

#[test]
fn a_keyless_signature_verifies_its_identity_and_issuer() {
    let pki = SigningPki::new();
    let workflow = "https://github.com/acme/hooks/.github/workflows/release.yml@refs/heads/main";
    let policy = keyless_config(
        &pki,
        &format!(
            "  - kind: genericIssuer\n    issuer: {GITHUB}\n    subject:\n      urlPrefix: https://github.com/acme\n"
        ),
    );
    let good = keyless(&pki.issue(&LeafSpec::new(workflow, GITHUB)), DIGEST);
    let report = policy.verify(DIGEST, std::slice::from_ref(&good), now());
    assert!(report.verified(), "{report}");

    // The prefix gains a `/`: a look-alike organisation is not admitted.
    let evil = keyless(
        &pki.issue(&LeafSpec::new(
            "https://github.com/acme-evil/hooks/x@refs/heads/main",
            GITHUB,
        )),
        DIGEST,
    );
    let other_issuer = keyless(
        &pki.issue(&LeafSpec::new(workflow, "https://accounts.google.com")),
        DIGEST,
    );
    let no_issuer = keyless(
        &pki.issue(&LeafSpec {
            issuer: None,
            ..LeafSpec::new(workflow, GITHUB)
        }),
        DIGEST,
    );
    let not_for_code = keyless(
        &pki.issue(&LeafSpec {
            no_code_signing: true,
            ..LeafSpec::new(workflow, GITHUB)
        }),
        DIGEST,
    );
    // Valid once, expired now, with no timestamp to say it was signed then.
    let expired = keyless(
        &pki.issue(&LeafSpec {
            validity: Some(((2021, 1, 1), (2021, 1, 2))),
            ..LeafSpec::new(workflow, GITHUB)
        }),
        DIGEST,
    );
    let another_root = SigningPki::new();
    let foreign = keyless(
        &another_root.issue(&LeafSpec::new(workflow, GITHUB)),
        DIGEST,
    );
    let mut key_signed = good.clone();
    key_signed
        .annotations
        .remove(crate::cosign::CERTIFICATE_ANNOTATION);
    // The certificate of one signature on the payload signed by another key.
    let mut swapped = keyless(&pki.issue(&LeafSpec::new(workflow, GITHUB)), DIGEST);
    swapped.annotations = good.annotations.clone();
    swapped.annotations.insert(
        crate::cosign::SIGNATURE_ANNOTATION.to_owned(),
        keyless(&pki.issue(&LeafSpec::new(workflow, GITHUB)), DIGEST)
            .signature()
            .unwrap()
            .to_owned(),
    );
    let all = [
        evil,
        other_issuer,
        no_issuer,
        not_for_code,
        expired,
        foreign,
        key_signed,
        swapped,
    ];
    let report = policy.verify(DIGEST, &all, now());
    assert!(!report.verified());
    let reasons = reasons(&report);
    assert_eq!(
        reasons[0],
        "its certificate is for https://github.com/acme-evil/hooks/x@refs/heads/main"
    );
    assert_eq!(
        reasons[1],
        "its certificate's issuer is https://accounts.google.com"
    );
    assert!(
        reasons[2].starts_with("its certificate names no OIDC issuer"),
        "{}",
        reasons[2]
    );
    assert_eq!(
        reasons[3],
        "its certificate is not for code signing (extended key usage)"
    );
    assert!(
        reasons[4].starts_with(
            "its certificate (or an issuer's) expired at 2021-01-02T00:00:00Z and was checked now ("
        ) && reasons[4].contains("without a transparency-log timestamp"),
        "{}",
        reasons[4]
    );
    assert_eq!(
        reasons[5],
        "its certificate does not chain to a certificate authority of trustRoot.certificateAuthorities"
    );
    assert_eq!(
        reasons[6],
        "it has no certificate (it is not a keyless signature)"
    );
    assert_eq!(reasons[7], "it is not signed with its certificate's key");
}

#[test]
fn an_e_mail_identity_and_the_first_issuer_extension_are_read() {
    let pki = SigningPki::new();
    let policy = keyless_config(
        &pki,
        "  - kind: genericIssuer\n    issuer: https://accounts.example.com\n    subject: {equal: alice@example.com}\n",
    );
    let leaf = pki.issue(&LeafSpec {
        legacy_issuer: true,
        ..LeafSpec::new("alice@example.com", "https://accounts.example.com")
    });
    assert!(
        policy
            .verify(DIGEST, &[keyless(&leaf, DIGEST)], now())
            .verified()
    );
    let bob = keyless(
        &pki.issue(&LeafSpec::new(
            "bob@example.com",
            "https://accounts.example.com",
        )),
        DIGEST,
    );
    let report = policy.verify(DIGEST, std::slice::from_ref(&bob), now());
    assert_eq!(why(&report), "its certificate is for bob@example.com");
}

#[test]
fn a_log_bundle_dates_a_signature_whose_certificate_has_expired() {
    let pki = SigningPki::new();
    let policy = keyless_config(
        &pki,
        &format!(
            "  - kind: genericIssuer\n    issuer: {GITHUB}\n    subject: {{equal: https://github.com/acme/x}}\n"
        ),
    );
    let leaf = pki.issue(&LeafSpec {
        validity: Some(((2021, 1, 1), (2021, 1, 2))),
        ..LeafSpec::new("https://github.com/acme/x", GITHUB)
    });
    let mut signature = keyless(&leaf, DIGEST);
    let at = |t: &str| t.parse::<jiff::Timestamp>().unwrap().as_second();
    let logged = |signature: &Signature, time: i64| {
        let bundle = pki.bundle(
            &signature.payload,
            signature.signature().unwrap(),
            &leaf.cert_pem,
            time,
        );
        let mut dated = signature.clone();
        dated
            .annotations
            .insert(BUNDLE_ANNOTATION.to_owned(), bundle);
        dated
    };
    let in_time = logged(&signature, at("2021-01-01T12:00:00Z"));
    assert!(
        policy
            .verify(DIGEST, std::slice::from_ref(&in_time), now())
            .verified()
    );

    let too_late = logged(&signature, at("2021-03-01T00:00:00Z"));
    let report = policy.verify(DIGEST, std::slice::from_ref(&too_late), now());
    assert_eq!(
        why(&report),
        "its certificate (or an issuer's) expired at 2021-01-02T00:00:00Z and was checked when it was signed (2021-03-01T00:00:00Z, from its transparency-log bundle)"
    );

    // A bundle whose time was changed after the log signed it.
    let mut forged = in_time.clone();
    let bundle = forged.annotations[BUNDLE_ANNOTATION].replace(
        &at("2021-01-01T12:00:00Z").to_string(),
        &at("2021-01-01T13:00:00Z").to_string(),
    );
    forged
        .annotations
        .insert(BUNDLE_ANNOTATION.to_owned(), bundle);
    let report = policy.verify(DIGEST, std::slice::from_ref(&forged), now());
    assert_eq!(
        why(&report),
        "its transparency-log bundle does not verify: its SignedEntryTimestamp is not the log's signature"
    );

    // The log's entry of one signature beside another one.
    let other = keyless(&leaf, OTHER);
    let mut borrowed = logged(&other, at("2021-01-01T12:00:00Z"));
    borrowed.payload = signature.payload.clone();
    borrowed.annotations.insert(
        crate::cosign::SIGNATURE_ANNOTATION.to_owned(),
        signature.signature().unwrap().to_owned(),
    );
    let report = policy.verify(DIGEST, std::slice::from_ref(&borrowed), now());
    assert_eq!(
        why(&report),
        "its transparency-log bundle does not verify: its entry holds another signature"
    );

    // A log the trust root does not know.
    let stranger = SigningPki::new();
    signature.annotations.insert(
        BUNDLE_ANNOTATION.to_owned(),
        stranger.bundle(
            &signature.payload,
            signature.signature().unwrap(),
            &leaf.cert_pem,
            1_609_502_400,
        ),
    );
    let report = policy.verify(DIGEST, std::slice::from_ref(&signature), now());
    assert!(
        why(&report).contains("whose key trustRoot.transparencyLogKeys does not hold"),
        "{report:?}"
    );
}

/// An ECDSA P-256 signature made with openssl (`openssl dgst -sha256 -sign`) over a
/// payload written by hand as cosign marshals one: another implementation's bytes.
#[test]
fn a_signature_made_by_openssl_verifies() {
    const KEY: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEtKPFm9wofBEgEZSKZBL7p2coP1s5
tq/yfMVWfTXWemNK7ixXDeUwnF71kO/+iPTkTUJgTLQTnsOgXOV8oQ1gxQ==
-----END PUBLIC KEY-----
";
    const PAYLOAD: &str = r#"{"critical":{"identity":{"docker-reference":"registry.example.com/ops/disk-pressure"},"image":{"docker-manifest-digest":"sha256:faab7c5d0b5b0c4e0e3b2f1c9a4c6c1e1f0d9b8a7c6e5d4c3b2a1f0e9d8c7b6a"},"type":"cosign container image signature"},"optional":{"env":"prod"}}"#;
    const SIGNATURE: &str = "MEYCIQC2MkTlRUfzqurCVLizG4k+hFNeUWGY6XK5r+H2cmi8FQIhAJUUYl23MgqZZEfU8cr/iACZFm/E2lpwqPVzs1iq2iST";
    let digest = "sha256:faab7c5d0b5b0c4e0e3b2f1c9a4c6c1e1f0d9b8a7c6e5d4c3b2a1f0e9d8c7b6a";
    let pem: String = KEY.lines().map(|l| format!("      {l}\n")).collect();
    let policy = config(
        &format!(
            "apiVersion: v1\nallOf:\n  - kind: pubKey\n    annotations: {{env: prod}}\n    key: |\n{pem}"
        ),
        &[],
    );
    let signature = Signature::new(
        PAYLOAD.as_bytes().to_vec(),
        SIGNATURE.to_owned(),
        None,
        None,
    );
    assert!(policy.verify(digest, &[signature], now()).verified());
}

/// A signature from SUSE's signing service on registry.suse.com (RSA, with an
/// annotation), as published beside the image.
#[test]
fn an_rsa_signature_from_a_public_registry_verifies_with_its_annotation() {
    const KEY: &str = "-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAvM/dHoi6nSy7hbKHLYUr
Xy6Bv35JbdoIzny5vSFiRXApr0KS56U8PugdGmh+vd7H8YNlx2YOJxzv02Blsrcm
WDZcXjE3Xpsi/IHFfRZLOdwwR+u8MNFxwRUVzxyIzKGtbREVVfXPfb2Xc6FL5/tE
vQtUKuR6XdzSaav2RnV5IybCB09s0Np0AUbdi5EfSe4INuqgY+VFYLjvM5onbAQL
N3bFLS4Quk66Dhv93Zi6NwopwL1F07UPC5uadkyePStP3PA0OAOemj9vZADOWx5a
dsGCKISs8iphNC5mDVoLy8Ry49Ms3eQXRjVQOMco3YNf8AhsIdxDNBVN8VTDKVkE
DwIDAQAB
-----END PUBLIC KEY-----
";
    const PAYLOAD: &str = r#"{"critical":{"identity":{"docker-reference":"registry.suse.com/suse/sle-micro/5.0/toolbox"},"image":{"docker-manifest-digest":"sha256:356631f7603526a0af827741f5fe005acf19b7ef7705a34241a91c2d47a6db5e"},"type":"cosign container image signature"},"optional":{"creator":"OBS"}}"#;
    const SIGNATURE: &str = "umasnfYJyLbYPjiq1wIy086Ns+CrgiMoQUSGqPqlUmtWsY0hbngJ73hPfJFrppviPKdBeuUiiwgKagBKIXLEXjwxQp4eE3szwqkKoAnR/lByb7ahLgVQ4MB6xDQaHD53MYtj7aOvd4O7FqJltVVjEn7nM/Du2tL5y3jf6lD7VfHZE8uRocRlyppt8SfTc5L12mVlZ0YlfKYkd334A4y/reCy3Yws0j356Wj7GLScMU5uR11Y2y41rSyYm5uXhTerwNFXsRcPMAmenMarCdCmt4Lf4wpcJBCU172xiK+rIhbMgkLjjA772+auSYf1E8CySVah5CD0Td5YC3y8vIIYaA==";
    let digest = "sha256:356631f7603526a0af827741f5fe005acf19b7ef7705a34241a91c2d47a6db5e";
    let pem: String = KEY.lines().map(|l| format!("      {l}\n")).collect();
    let requirement = |creator: &str| {
        config(
            &format!(
                "apiVersion: v1\nallOf:\n  - kind: pubKey\n    annotations: {{creator: {creator}}}\n    key: |\n{pem}"
            ),
            &[],
        )
    };
    let signature = Signature::new(
        PAYLOAD.as_bytes().to_vec(),
        SIGNATURE.to_owned(),
        None,
        None,
    );
    let report = requirement("OBS").verify(digest, std::slice::from_ref(&signature), now());
    assert!(report.verified(), "{report}");
    assert!(
        report.requirements[0]
            .requirement
            .contains("pubKey RSA 2048"),
        "{report:?}"
    );
    let report =
        requirement("someone-else").verify(digest, std::slice::from_ref(&signature), now());
    assert_eq!(
        why(&report),
        "its payload lacks the annotations creator=someone-else"
    );
}

/// A keyless signature `cosign sign` made in October 2021 with a certificate from the
/// public Fulcio, recorded in the public Rekor log (entry 783607): the signature, its
/// certificate and bundle, Fulcio's root of the time and Rekor's public key, all as
/// published. Fulcio did not write the issuer extension yet, so a genericIssuer
/// requirement fails on that alone: the chain, the log's timestamp and the signature
/// have passed by then.
#[test]
fn a_keyless_signature_cosign_made_with_the_public_fulcio_and_rekor_verifies() {
    let files = [
        ("fulcio.pem", include_str!("testdata/fulcio-2021-root.pem")),
        ("rekor.pub", include_str!("testdata/rekor.pub")),
    ];
    let yaml = |log_keys: bool| {
        format!(
            "apiVersion: v1\ntrustRoot:\n  certificateAuthorities: fulcio.pem\n{}allOf:\n  - kind: genericIssuer\n    issuer: https://github.com/login/oauth\n    subject: {{equal: flavio@castelli.me}}\n",
            if log_keys {
                "  transparencyLogKeys: rekor.pub\n"
            } else {
                ""
            }
        )
    };
    let digest = "sha256:5f481572d088dc4023afb35fced9530ced3d9b03bf7299c6f492163cb9f0452e";
    let payload = format!(
        r#"{{"critical":{{"identity":{{"docker-reference":"registry-testing.svc.lan/kubewarden/disallow-service-nodeport"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":null}}"#
    );
    let mut signature = Signature::new(
        payload.into_bytes(),
        "MEUCIGqWScz7s9aP2sGXNFKeqivw3B6kPRs56AITIHnvd5igAiEA1kzbaV2Y5yPE81EN92NUFOl31LLJSvwsjFQ07m2XqaA=".to_owned(),
        Some(include_str!("testdata/fulcio-2021-leaf.pem").to_owned()),
        None,
    );
    signature.annotations.insert(
        BUNDLE_ANNOTATION.to_owned(),
        include_str!("testdata/rekor-783607.bundle.json").to_owned(),
    );
    let report =
        config(&yaml(true), &files).verify(digest, std::slice::from_ref(&signature), now());
    assert!(
        why(&report).starts_with("its certificate names no OIDC issuer"),
        "{report:?}"
    );
    // Without the log's key the certificate's ten minutes of 2021 are long over.
    let report =
        config(&yaml(false), &files).verify(digest, std::slice::from_ref(&signature), now());
    assert!(
        why(&report).starts_with(
            "its certificate (or an issuer's) expired at 2021-10-20T07:45:15Z and was checked now"
        ),
        "{report:?}"
    );
    // The same bundle with its time moved no longer carries the log's signature.
    signature.annotations.insert(
        BUNDLE_ANNOTATION.to_owned(),
        include_str!("testdata/rekor-783607.bundle.json").replace("1634714717", "1634714718"),
    );
    let report =
        config(&yaml(true), &files).verify(digest, std::slice::from_ref(&signature), now());
    assert_eq!(
        why(&report),
        "its transparency-log bundle does not verify: its SignedEntryTimestamp is not the log's signature"
    );
}

#[test]
fn a_configuration_that_cannot_work_is_refused_by_field() {
    let (key, _) = SigningKey::generate().unwrap();
    let good_key = pub_key(&key, "");
    let cases: Vec<(String, &str)> = vec![
        (format!("allOf:\n{good_key}"), "apiVersion: missing (apiVersion: v1)"),
        (format!("apiVersion: v2\nallOf:\n{good_key}"), "apiVersion: \"v2\" is not a version this engine reads (v1)"),
        ("apiVersion: v1\n".to_owned(), "neither allOf nor anyOf names a signature: every module would pass"),
        (format!("apiVersion: v1\nallof:\n{good_key}"), "unknown field `allof`"),
        ("apiVersion: v1\nallOf:\n  - kind: pubKey\n    key: nope\n".to_owned(), "allOf[0].key: no PEM PUBLIC KEY block"),
        ("apiVersion: v1\nallOf:\n  - kind: pubKey\n".to_owned(), "allOf[0].key: missing: the PEM public key"),
        ("apiVersion: v1\nallOf:\n  - kind: githubAction\n    owner: acme\n".to_owned(), "allOf[0].kind: githubAction is not supported: write it as genericIssuer"),
        ("apiVersion: v1\nallOf:\n  - kind: genericIssuer\n    issuer: https://x\n    subject: {equal: a@b}\n".to_owned(), "trustRoot.certificateAuthorities: allOf[0] is a keyless (genericIssuer) requirement"),
        (format!("apiVersion: v1\nanyOf:\n  minimumMatches: 2\n  signatures:\n{good_key}"), "anyOf.minimumMatches: 2: must be from 1 to the 1 signatures listed"),
        ("apiVersion: v1\ntrustRoot: {certificateAuthorities: missing.pem}\nallOf: []\n".to_owned(), "trustRoot.certificateAuthorities: "),
        ("apiVersion: v1\ntrustRoot: {certificateAuthorities: leaf.pem}\nallOf: []\n".to_owned(), "trustRoot.certificateAuthorities: leaf.pem: holds no self-signed CA certificate to anchor a chain"),
        ("apiVersion: v1\ntrustRoot: {certificateAuthorities: root.pem}\nallOf:\n  - kind: genericIssuer\n    issuer: https://x\n    subject: {equal: a, urlPrefix: b}\n".to_owned(), "allOf[0].subject: give exactly one of equal or urlPrefix, not empty"),
        ("apiVersion: v1\ntrustRoot: {certificateAuthorities: root.pem}\nallOf:\n  - kind: genericIssuer\n    key: k\n".to_owned(), "allOf[0].key: a genericIssuer requirement takes no key"),
    ];
    let pki = SigningPki::new();
    let leaf = pki.issue(&LeafSpec::new("a@b", "https://x"));
    let files = [
        ("leaf.pem", leaf.cert_pem.as_str()),
        ("root.pem", &pki.root_pem()),
    ];
    for (yaml, expected) in cases {
        let error = refusal(&yaml, &files);
        assert!(
            error.contains(expected),
            "{yaml}\n→ {error}\nwanted {expected}"
        );
    }
}

#[test]
fn a_url_prefix_gains_its_slash() {
    let pki = SigningPki::new();
    let policy = keyless_config(
        &pki,
        "  - kind: genericIssuer\n    issuer: https://x\n    subject: {urlPrefix: https://github.com/acme}\n",
    );
    let GenericIssuer { subject, .. } = &policy.all_of[0].kind else {
        panic!("{policy:?}");
    };
    assert_eq!(
        *subject,
        Subject::UrlPrefix("https://github.com/acme/".to_owned())
    );
    assert_eq!(
        policy.path().file_name(),
        Some(Path::new("verification.yaml").as_os_str())
    );
}

use config::Kind::GenericIssuer;
