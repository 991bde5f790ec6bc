use super::*;

#[test]
fn references_name_a_registry_host() {
    assert!(is_oci("oci://ghcr.io/acme/log-triage:1.0"));
    assert!(!is_oci("log-triage"));
    assert_eq!(
        registry_of("oci://registry.example.com:5000/team/mod@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef").unwrap(),
        "registry.example.com:5000"
    );
    assert_eq!(registry_of("oci://localhost/mod:1").unwrap(), "localhost");
    for bad in [
        "ghcr.io/acme/mod:1",
        "oci://mod:1",
        "oci://acme/mod:1",
        "oci://ghcr.io/Acme Mod",
    ] {
        let error = registry_of(bad).unwrap_err();
        assert!(
            matches!(error, OciError::BadReference { .. }),
            "{bad}: {error}"
        );
        assert!(error.to_string().starts_with(bad), "{error}");
    }
}

#[test]
fn credentials_come_from_a_docker_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    std::fs::write(
        &path,
        r#"{"auths": {
            "https://index.docker.io/v1/": {"auth": "aHViOnNlY3JldA=="},
            "registry.example.com:5000": {"auth": "YWxpY2U6czNjcjN0"},
            "plain.example.com": {"username": "bob", "password": "pw"},
            "token.example.com": {"identitytoken": "tok"}
        }}"#,
    )
    .unwrap();
    let auth = |registry: &str| format!("{:?}", docker_auth(Some(&path), registry).unwrap());
    let basic = |user: &str, password: &str| {
        format!(
            "{:?}",
            RegistryAuth::Basic(user.to_owned(), password.to_owned())
        )
    };
    assert_eq!(auth("registry.example.com:5000"), basic("alice", "s3cr3t"));
    assert_eq!(auth("index.docker.io"), basic("hub", "secret"));
    assert_eq!(auth("plain.example.com"), basic("bob", "pw"));
    assert_eq!(
        auth("token.example.com"),
        format!("{:?}", RegistryAuth::Bearer("tok".to_owned()))
    );
    assert_eq!(
        auth("other.example.com"),
        format!("{:?}", RegistryAuth::Anonymous)
    );
    // No file: anonymous. A broken one: named.
    assert_eq!(
        format!(
            "{:?}",
            docker_auth(Some(&dir.path().join("none.json")), "x.io").unwrap()
        ),
        format!("{:?}", RegistryAuth::Anonymous)
    );
    std::fs::write(&path, r#"{"auths": {"x.io": {"auth": "no base64!"}}}"#).unwrap();
    let error = docker_auth(Some(&path), "x.io").unwrap_err();
    assert!(
        error.to_string().contains("auths.x.io.auth is not base64"),
        "{error}"
    );
}
