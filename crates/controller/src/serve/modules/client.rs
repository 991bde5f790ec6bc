//! The client of the module API ([`super`]): what `operon module push/ls/rm/get` call.
//!
//! By default it reaches the API through the API server's service proxy, with a
//! kubeconfig context (its token goes in [`PROXIED_AUTHORIZATION`], as the proxy drops
//! `Authorization`); with [`Connect::server`] it talks to the API directly, e.g. through
//! `kubectl port-forward`, checking the server's certificate against
//! [`Connect::certificate_authority`].
//!
//! Error messages name the `operon module` flags that would fix them: this client is the
//! command's, and its users see them as they are.

use super::PROXIED_AUTHORIZATION;
use http_body_util::BodyExt as _;
use operon_sandbox::ModuleDigest;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::Arc;

/// The size of the chunks an upload is sent in.
const CHUNK: usize = 64 * 1024;

/// Where the module API is and how to authenticate (`operon module`'s flags).
#[derive(Debug, Clone, Default)]
pub struct Connect {
    /// The module API's base URL (`https://HOST[:PORT]`); none: through the API
    /// server's service proxy.
    pub server: Option<String>,
    /// The bearer token; none: the kubeconfig user's.
    pub token: Option<String>,
    /// A kubeconfig file; none: `$KUBECONFIG`, then `~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    /// A kubeconfig context other than the current one.
    pub context: Option<String>,
    /// The namespace of Operon's Service (with the service proxy).
    pub operon_namespace: String,
    /// The Service and port serving the module API, `SERVICE[:PORT]` (with the service
    /// proxy; the port defaults to 443).
    pub operon_service: String,
    /// The CA (PEM) that signed the module API's certificate (with `server`).
    pub certificate_authority: Option<PathBuf>,
    /// The name the certificate is checked against, when not the server's host.
    pub tls_server_name: Option<String>,
    /// Whether to accept any certificate (with `server`): the token is then exposed to
    /// whoever answers.
    pub insecure_skip_tls_verify: bool,
}

/// Told after each chunk of an upload is handed to the connection: bytes sent so far,
/// and in all.
pub type Progress = Arc<dyn Fn(usize, usize) + Send + Sync>;

/// What went wrong talking to the module API.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The kubeconfig file given could not be read.
    #[error("reading {}", path.display())]
    KubeconfigFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The kubeconfig (or its context) is not usable.
    #[error("reading the kubeconfig")]
    Kubeconfig(#[source] kube::config::KubeconfigError),
    /// The kubeconfig user's token file could not be read.
    #[error("reading the token file {path}")]
    TokenFile {
        /// The file, as the kubeconfig names it.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No token given, and the kubeconfig's user has none.
    #[error(
        "the kubeconfig's user has no bearer token (a client certificate cannot be checked by the module API): give --token, e.g. $(kubectl create token NAME)"
    )]
    NoToken,
    /// The server's URL is not `https://HOST[:PORT]`.
    #[error("--server {0:?} is not https://HOST[:PORT]")]
    ServerUrl(String),
    /// The name the certificate is to be checked against is not a DNS name or address.
    #[error("{name:?} is not a server name")]
    ServerName {
        /// The name.
        name: String,
        /// Why.
        #[source]
        source: rustls::pki_types::InvalidDnsNameError,
    },
    /// Neither a CA nor `insecure_skip_tls_verify` with a server.
    #[error(
        "give --certificate-authority (the module API's CA, e.g. ca.crt of the Secret operon-webhook-tls) or --insecure-skip-tls-verify"
    )]
    NoCertificateAuthority,
    /// The CA file could not be read.
    #[error("reading {}", path.display())]
    CertificateAuthorityFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A certificate of the CA file is not PEM.
    #[error("reading {}", path.display())]
    CertificateAuthorityPem {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The CA file holds no certificate.
    #[error("{} holds no certificate", .0.display())]
    NoCertificate(PathBuf),
    /// The TLS client could not be configured.
    #[error(transparent)]
    Tls(#[from] rustls::Error),
    /// The Kubernetes client could not be built from the kubeconfig.
    #[error("building the client")]
    Client(#[source] kube::Error),
    /// No TCP connection to the server.
    #[error("connecting to {base}")]
    Connect {
        /// The server.
        base: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The TLS handshake with the server failed.
    #[error("TLS with {base}")]
    Handshake {
        /// The server.
        base: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// HTTP on the connection failed.
    #[error(transparent)]
    Http(#[from] hyper::Error),
    /// The request could not be built (a module name that cannot be in a path).
    #[error(transparent)]
    Request(#[from] http::Error),
    /// The server closed the connection while the module was sent, and refused nothing
    /// when asked again without it.
    #[error(
        "{method} {url}: the server closed the connection while the module was sent (is it larger than the server's limit, --module-max-bytes?)"
    )]
    UploadCut {
        /// The request's method.
        method: &'static str,
        /// The request's URL.
        url: String,
        /// Why.
        #[source]
        source: hyper::Error,
    },
    /// The request got no answer.
    #[error("{method} {url}")]
    Send {
        /// The request's method.
        method: &'static str,
        /// The request's URL.
        url: String,
        /// Why.
        #[source]
        source: hyper::Error,
    },
    /// The request got no answer through the API server.
    #[error("{method} {url} through the API server")]
    Proxy {
        /// The request's method.
        method: &'static str,
        /// The request's path on the API server.
        url: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The answer's body could not be read through the API server.
    #[error(transparent)]
    ProxyBody(kube::Error),
    /// The API answered with a failure.
    #[error("{method} {path}: HTTP {status}: {message}")]
    Refused {
        /// The request's method.
        method: &'static str,
        /// The request's path.
        path: String,
        /// The answer's status code.
        status: u16,
        /// The answer's message (with the proxy, a hint when no replica answers).
        message: String,
    },
    /// The API's answer does not say what it was asked.
    #[error("the answer names no digest")]
    NoDigest,
    /// What names a module's bytes is not a digest.
    #[error("{0:?} is not a sha256 digest")]
    NotADigest(String),
    /// The bytes the server sent are not the ones asked for.
    #[error("the server sent bytes with digest {actual}, not {wanted}: not written")]
    DigestMismatch {
        /// The digest asked for.
        wanted: ModuleDigest,
        /// The bytes' digest.
        actual: ModuleDigest,
    },
}

/// What an upload answers.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Pushed {
    /// The bytes' digest (`sha256:…`).
    pub digest: String,
    /// The world the module is a component of (`operation`, `hook`).
    pub world: String,
    /// The module's size in bytes.
    pub size: u64,
}

/// What a removal answers.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Removed {
    /// The digest the Module pointed to.
    pub digest: String,
}

/// A module's bytes, checked against the digest they were asked by.
#[derive(Debug, Clone)]
pub struct Downloaded {
    /// Their digest.
    pub digest: ModuleDigest,
    /// The bytes.
    pub bytes: bytes::Bytes,
}

/// A connection to the module API.
pub struct ModuleClient {
    transport: Transport,
}

impl std::fmt::Debug for ModuleClient {
    // Without the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = match &self.transport {
            Transport::Direct { base, .. } => base,
            Transport::Proxy { prefix, .. } => prefix,
        };
        f.debug_struct("ModuleClient")
            .field("at", at)
            .finish_non_exhaustive()
    }
}

/// How requests reach the API.
enum Transport {
    /// Straight to the module API.
    Direct {
        base: String,
        host: String,
        port: u16,
        server_name: ServerName<'static>,
        tls: Arc<rustls::ClientConfig>,
        token: String,
    },
    /// Through the API server's service proxy.
    Proxy {
        client: kube::Client,
        prefix: String,
        token: String,
    },
}

type RequestBody = http_body_util::combinators::BoxBody<bytes::Bytes, std::io::Error>;

impl ModuleClient {
    /// Reads the kubeconfig where `connect` needs it (the token, the proxy) and
    /// prepares TLS; nothing is sent yet.
    pub async fn connect(connect: &Connect) -> Result<Self, ClientError> {
        let kube_config = || async {
            let options = kube::config::KubeConfigOptions {
                context: connect.context.clone(),
                ..Default::default()
            };
            match &connect.kubeconfig {
                Some(path) => {
                    let file = kube::config::Kubeconfig::read_from(path).map_err(|source| {
                        ClientError::KubeconfigFile {
                            path: path.clone(),
                            source,
                        }
                    })?;
                    kube::Config::from_custom_kubeconfig(file, &options)
                        .await
                        .map_err(ClientError::Kubeconfig)
                }
                None => kube::Config::from_kubeconfig(&options)
                    .await
                    .map_err(ClientError::Kubeconfig),
            }
        };
        match &connect.server {
            Some(server) => {
                let token = match &connect.token {
                    Some(token) => token.clone(),
                    None => kubeconfig_token(&kube_config().await?)?,
                };
                let base = server.trim_end_matches('/').to_owned();
                let (host, port) = operon_store::fetch::host_port(&base)
                    .ok_or_else(|| ClientError::ServerUrl(server.clone()))?;
                let name = (connect.tls_server_name.clone()).unwrap_or_else(|| host.clone());
                let server_name = ServerName::try_from(name.clone())
                    .map_err(|source| ClientError::ServerName { name, source })?;
                let tls = client_tls(connect)?;
                Ok(Self {
                    transport: Transport::Direct {
                        base,
                        host,
                        port,
                        server_name,
                        tls,
                        token,
                    },
                })
            }
            None => {
                let mut config = kube_config().await?;
                // kube's default retries a 503 for minutes; through the proxy a 503 means
                // no replica is there to answer (no endpoints), which waiting rarely fixes
                // and a person at a terminal should hear at once.
                config.default_retry = false;
                let token = match &connect.token {
                    Some(token) => token.clone(),
                    None => kubeconfig_token(&config)?,
                };
                let (service, port) = (connect.operon_service.split_once(':'))
                    .unwrap_or((&connect.operon_service, "443"));
                let prefix = format!(
                    "/api/v1/namespaces/{}/services/https:{service}:{port}/proxy",
                    connect.operon_namespace
                );
                let client = kube::Client::try_from(config).map_err(ClientError::Client)?;
                Ok(Self {
                    transport: Transport::Proxy {
                        client,
                        prefix,
                        token,
                    },
                })
            }
        }
    }

    /// Uploads `bytes` as the Module `name`, telling `progress`, if any, how far the
    /// upload is.
    pub async fn push(
        &self,
        name: &str,
        bytes: Vec<u8>,
        progress: Option<Progress>,
    ) -> Result<Pushed, ClientError> {
        let path = format!("/v1/modules/{name}");
        let answer = self.call("POST", &path, Some((bytes, progress))).await?;
        Ok(serde_json::from_value(answer).unwrap_or_default())
    }

    /// The Modules, as the API shows them.
    pub async fn list(&self) -> Result<Vec<serde_json::Value>, ClientError> {
        let answer = self.call("GET", "/v1/modules", None).await?;
        Ok(answer["items"].as_array().cloned().unwrap_or_default())
    }

    /// Removes the Module `name` (its bytes stay while something refers to them).
    pub async fn remove(&self, name: &str) -> Result<Removed, ClientError> {
        let answer = (self.call("DELETE", &format!("/v1/modules/{name}"), None)).await?;
        Ok(serde_json::from_value(answer).unwrap_or_default())
    }

    /// The bytes of the Module `name`, or of the digest `name` (`sha256:…`), checked
    /// against their digest.
    pub async fn download(&self, name: &str) -> Result<Downloaded, ClientError> {
        let digest = match name.starts_with("sha256:") {
            true => name.to_owned(),
            false => {
                let module = (self.call("GET", &format!("/v1/modules/{name}"), None)).await?;
                module["digest"]
                    .as_str()
                    .ok_or(ClientError::NoDigest)?
                    .to_owned()
            }
        };
        let wanted =
            ModuleDigest::parse(&digest).ok_or_else(|| ClientError::NotADigest(digest.clone()))?;
        let bytes = self
            .fetch(&format!("/v1/modules/by-digest/{digest}"))
            .await?;
        let actual = ModuleDigest::of(&bytes);
        if actual != wanted {
            return Err(ClientError::DigestMismatch { wanted, actual });
        }
        Ok(Downloaded {
            digest: wanted,
            bytes,
        })
    }

    /// Sends a request and returns the answer's JSON; a failure answer is an error
    /// carrying its message.
    async fn call(
        &self,
        method: &'static str,
        path: &str,
        body: Option<(Vec<u8>, Option<Progress>)>,
    ) -> Result<serde_json::Value, ClientError> {
        let (status, bytes) = self.send(method, path, body).await?;
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            serde_json::Value::String(String::from_utf8_lossy(&bytes).into_owned())
        });
        if !status.is_success() {
            let mut message = value["message"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| value.to_string());
            if let Transport::Proxy { prefix, .. } = &self.transport
                && status == http::StatusCode::SERVICE_UNAVAILABLE
            {
                message.push_str(&format!(
                    " (no replica of operon serve answers behind {prefix}: is it running \
                     and ready? --operon-namespace and --operon-service name the Service)"
                ));
            }
            return Err(ClientError::Refused {
                method,
                path: path.to_owned(),
                status: status.as_u16(),
                message,
            });
        }
        Ok(value)
    }

    /// GETs raw bytes.
    async fn fetch(&self, path: &str) -> Result<bytes::Bytes, ClientError> {
        let (status, bytes) = self.send("GET", path, None).await?;
        if !status.is_success() {
            let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
            return Err(ClientError::Refused {
                method: "GET",
                path: path.to_owned(),
                status: status.as_u16(),
                message: value["message"].as_str().unwrap_or_default().to_owned(),
            });
        }
        Ok(bytes)
    }

    async fn send(
        &self,
        method: &'static str,
        path: &str,
        body: Option<(Vec<u8>, Option<Progress>)>,
    ) -> Result<(http::StatusCode, bytes::Bytes), ClientError> {
        match &self.transport {
            Transport::Direct {
                base,
                host,
                port,
                server_name,
                tls,
                token,
            } => {
                let tcp = tokio::net::TcpStream::connect((host.as_str(), *port))
                    .await
                    .map_err(|source| ClientError::Connect {
                        base: base.clone(),
                        source,
                    })?;
                let stream = tokio_rustls::TlsConnector::from(tls.clone())
                    .connect(server_name.clone(), tcp)
                    .await
                    .map_err(|source| ClientError::Handshake {
                        base: base.clone(),
                        source,
                    })?;
                let (mut sender, connection) =
                    hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                        .await?;
                tokio::spawn(connection);
                let size = body.as_ref().map(|(bytes, _)| bytes.len());
                let mut request = http::Request::builder()
                    .method(method)
                    .uri(path)
                    .header(http::header::HOST, host.as_str())
                    .header(http::header::AUTHORIZATION, format!("Bearer {token}"));
                if let Some(size) = size {
                    request = request
                        .header(http::header::CONTENT_LENGTH, size)
                        .header(http::header::CONTENT_TYPE, "application/wasm");
                }
                let request = request.body(upload_body(body))?;
                let response = match sender.send_request(request).await {
                    Ok(response) => response,
                    // The API refuses an upload before reading it (no token, no
                    // permission, too large) and closes the connection, which a client
                    // still writing sees as a broken pipe: ask again without the bytes
                    // to show why.
                    Err(source) if size.is_some() => {
                        let (status, answer) = Box::pin(self.send(method, path, None)).await?;
                        if matches!(status.as_u16(), 401 | 403) {
                            return Ok((status, answer));
                        }
                        return Err(ClientError::UploadCut {
                            method,
                            url: format!("{base}{path}"),
                            source,
                        });
                    }
                    Err(source) => {
                        return Err(ClientError::Send {
                            method,
                            url: format!("{base}{path}"),
                            source,
                        });
                    }
                };
                let status = response.status();
                let bytes = response.into_body().collect().await?.to_bytes();
                Ok((status, bytes))
            }
            Transport::Proxy {
                client,
                prefix,
                token,
            } => {
                let bytes = body.map(|(bytes, _)| bytes).unwrap_or_default();
                let request = http::Request::builder()
                    .method(method)
                    .uri(format!("{prefix}{path}"))
                    .header(PROXIED_AUTHORIZATION, format!("Bearer {token}"))
                    .header(http::header::CONTENT_TYPE, "application/wasm")
                    .body(kube::client::Body::from(bytes))?;
                let response = client
                    .send(request)
                    .await
                    .map_err(|source| ClientError::Proxy {
                        method,
                        url: format!("{prefix}{path}"),
                        source,
                    })?;
                let status = response.status();
                let bytes = (response.into_body().collect().await)
                    .map_err(ClientError::ProxyBody)?
                    .to_bytes();
                Ok((status, bytes))
            }
        }
    }
}

/// The token of the kubeconfig's user.
fn kubeconfig_token(config: &kube::Config) -> Result<String, ClientError> {
    use kube::config::AuthInfo;
    let AuthInfo {
        token, token_file, ..
    } = &config.auth_info;
    if let Some(token) = token {
        use secrecy::ExposeSecret as _;
        return Ok(token.expose_secret().to_owned());
    }
    if let Some(file) = token_file {
        return Ok(std::fs::read_to_string(file)
            .map_err(|source| ClientError::TokenFile {
                path: file.clone(),
                source,
            })?
            .trim()
            .to_owned());
    }
    Err(ClientError::NoToken)
}

/// The request body: the bytes in chunks, each told to the progress, if any.
fn upload_body(body: Option<(Vec<u8>, Option<Progress>)>) -> RequestBody {
    let Some((bytes, progress)) = body else {
        return http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed();
    };
    let total = bytes.len();
    let bytes = bytes::Bytes::from(bytes);
    let chunks: Vec<bytes::Bytes> = (0..total)
        .step_by(CHUNK)
        .map(|start| bytes.slice(start..(start + CHUNK).min(total)))
        .collect();
    let mut sent = 0usize;
    let stream = futures::stream::iter(chunks.into_iter().map(move |chunk| {
        sent += chunk.len();
        if let Some(progress) = &progress {
            progress(sent, total);
        }
        Ok::<_, std::io::Error>(hyper::body::Frame::data(chunk))
    }));
    http_body_util::StreamBody::new(stream).boxed()
}

/// The TLS client of a direct connection: its CA, or no check with
/// `insecure_skip_tls_verify`.
fn client_tls(connect: &Connect) -> Result<Arc<rustls::ClientConfig>, ClientError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    if connect.insecure_skip_tls_verify {
        return Ok(Arc::new(
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
                .with_no_client_auth(),
        ));
    }
    let path =
        (connect.certificate_authority.as_ref()).ok_or(ClientError::NoCertificateAuthority)?;
    let pem = std::fs::read(path).map_err(|source| ClientError::CertificateAuthorityFile {
        path: path.clone(),
        source,
    })?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        roots.add(cert.map_err(|source| ClientError::CertificateAuthorityPem {
            path: path.clone(),
            source,
        })?)?;
    }
    if roots.is_empty() {
        return Err(ClientError::NoCertificate(path.clone()));
    }
    Ok(Arc::new(
        builder.with_root_certificates(roots).with_no_client_auth(),
    ))
}

/// Accepts any certificate (`insecure_skip_tls_verify`), still checking signatures.
#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn direct(server: &str) -> Connect {
        Connect {
            server: Some(server.to_owned()),
            token: Some("token".to_owned()),
            ..Connect::default()
        }
    }

    #[tokio::test]
    async fn a_server_that_is_not_https_is_refused_by_its_flag() {
        let error = ModuleClient::connect(&direct("http://127.0.0.1:9680"))
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "--server \"http://127.0.0.1:9680\" is not https://HOST[:PORT]"
        );
    }

    #[tokio::test]
    async fn a_direct_connection_needs_a_ca_or_the_choice_to_check_nothing() {
        let error = ModuleClient::connect(&direct("https://127.0.0.1:9680"))
            .await
            .unwrap_err();
        assert!(
            matches!(error, ClientError::NoCertificateAuthority),
            "{error}"
        );
        let insecure = Connect {
            insecure_skip_tls_verify: true,
            ..direct("https://127.0.0.1:9680/")
        };
        let client = ModuleClient::connect(&insecure).await.unwrap();
        // The token stays out of what is logged.
        assert_eq!(
            format!("{client:?}"),
            "ModuleClient { at: \"https://127.0.0.1:9680\", .. }"
        );
    }

    #[tokio::test]
    async fn a_ca_file_without_a_certificate_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.crt");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let connect = Connect {
            certificate_authority: Some(path.clone()),
            ..direct("https://127.0.0.1:9680")
        };
        let error = ModuleClient::connect(&connect).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("{} holds no certificate", path.display())
        );
    }
}
