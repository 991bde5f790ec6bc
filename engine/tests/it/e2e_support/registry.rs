//! A real OCI registry for the suites: Debian's `docker-registry` (the CNCF
//! distribution registry) started on loopback with TLS (the test CA of
//! [`super::certificates`]) and htpasswd authentication (alice / s3cr3t), with a docker
//! config.json holding those credentials. A test calling [`registry`] fails, naming the
//! program, when `docker-registry` or `htpasswd` is not installed (`.ci/setup` installs
//! both).

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub struct Registry {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[track_caller]
pub fn registry() -> Registry {
    super::required_program("docker-registry", "docker-registry");
    super::required_program("htpasswd", "apache2-utils");
    let dir = tempfile::tempdir().unwrap();
    let (_, cert, key) = super::certificates(dir.path());
    let htpasswd = Command::new("htpasswd")
        .args(["-Bbn", "alice", "s3cr3t"])
        .output()
        .unwrap();
    assert!(htpasswd.status.success());
    std::fs::write(dir.path().join("htpasswd"), &htpasswd.stdout).unwrap();
    let port = super::free_port();
    let config = dir.path().join("config.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {data}\n\
             http:\n  addr: 127.0.0.1:{port}\n  tls:\n    certificate: {cert}\n    key: {key}\n\
             auth:\n  htpasswd:\n    realm: test\n    path: {passwd}\n",
            data = dir.path().join("data").display(),
            cert = cert.display(),
            key = key.display(),
            passwd = dir.path().join("htpasswd").display(),
        ),
    )
    .unwrap();
    let child = Command::new("docker-registry")
        .arg("serve")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("registry.log")).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the registry did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3cr3t");
    std::fs::write(
        dir.path().join("docker.json"),
        format!(r#"{{"auths": {{"127.0.0.1:{port}": {{"auth": "{auth}"}}}}}}"#),
    )
    .unwrap();
    Registry { child, port, dir }
}

impl Registry {
    pub fn reference(&self, rest: &str) -> String {
        format!("oci://127.0.0.1:{}/{rest}", self.port)
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// `operon module ARGS` with the test CA, and the credentials unless `anonymous`.
    pub fn operon(&self, args: &[&str], anonymous: bool) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_operon"));
        command.args(args).arg("--registry-ca").arg(self.ca());
        if !anonymous {
            command
                .arg("--docker-config")
                .arg(self.dir.path().join("docker.json"));
        }
        command.env_remove("DOCKER_CONFIG").output().unwrap()
    }
}
