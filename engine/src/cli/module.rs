//! `operon module push/ls/rm/get/pull/sign/verify/keygen`: the client of the module API
//! of `operon serve` (and, through [`super::module_oci`] and [`super::module_sign`], of
//! OCI registries and the signatures of the modules in them). The flags with which
//! `operon serve` and `operon agent` keep their module store are in
//! [`super::module_store`].
//!
//! By default the CLI reaches the API through the API server's service proxy, with the
//! kubeconfig's current context (its token goes in `X-Operon-Authorization`, as the
//! proxy drops `Authorization`); `--server` and `--token` talk to it directly, e.g.
//! through `kubectl port-forward`.

use anyhow::{Context as _, bail};
use http_body_util::BodyExt as _;
use operon::serve::modules::PROXIED_AUTHORIZATION;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// Uploads larger than this show their progress.
const PROGRESS_FROM: usize = 1024 * 1024;
/// The size of the chunks an upload is sent in.
const CHUNK: usize = 64 * 1024;

/// Work with the modules uploaded to `operon serve`.
#[derive(Debug, clap::Subcommand)]
pub enum ModuleCommand {
    /// Upload a wasm component as module NAME (prints its digest), or push it to an OCI
    /// registry: `push FILE oci://REGISTRY/REPOSITORY:TAG`. FILE may itself be an
    /// `oci://` reference, pulled and then uploaded. FILE may also be an
    /// addon-operator module directory, pushed to a registry as one tar layer (for
    /// `operon serve --module-source`); the pinned reference is printed.
    Push {
        /// The component (`.wasm`), `oci://REGISTRY/REPOSITORY[:TAG][@sha256:...]`, or
        /// an addon-operator module directory (with an `oci://` destination).
        file: PathBuf,
        /// An `oci://` reference to push to instead of the cluster's store.
        destination: Option<String>,
        /// The module's name [default: the file's name without `.wasm`, or the OCI
        /// repository's last segment].
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        connect: ConnectArgs,
        #[command(flatten)]
        registry: super::module_oci::RegistryArgs,
    },
    /// Pull a module from an OCI registry: `pull oci://REGISTRY/REPOSITORY[:TAG][@sha256:...]
    /// -o FILE`; the layer's and a pinned manifest's digests are verified.
    Pull {
        /// The reference.
        reference: String,
        /// Where to write the component.
        #[arg(long, short = 'o')]
        output: PathBuf,
        #[command(flatten)]
        registry: super::module_oci::RegistryArgs,
    },
    /// Sign a module in an OCI registry as cosign does, and push the signature beside
    /// it (tag `sha256-<digest>.sig`): `sign --key KEY.pem oci://REGISTRY/REPOSITORY:TAG`.
    Sign(super::module_sign::SignArgs),
    /// Check a module's signatures against a verification configuration: which
    /// requirement each signature meets, and why the others do not (exit 1 when the
    /// configuration is not met).
    Verify(super::module_sign::VerifyArgs),
    /// Make a key pair to sign modules with (ECDSA P-256, cosign's kind).
    Keygen(super::module_sign::KeygenArgs),
    /// List the modules.
    Ls {
        #[command(flatten)]
        connect: ConnectArgs,
        /// Output format.
        #[arg(long, short, value_enum, default_value_t = super::output::Format::Table)]
        output: super::output::Format,
    },
    /// Remove module NAME (its bytes stay while an Operation pins their digest).
    Rm {
        /// The module.
        name: String,
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// Download module NAME (or a `sha256:` digest).
    Get {
        /// The module or digest.
        name: String,
        /// Where to write it.
        #[arg(long, short = 'o')]
        output: PathBuf,
        #[command(flatten)]
        connect: ConnectArgs,
    },
}

/// Where the module API is and how to authenticate.
#[derive(Debug, Clone, clap::Args)]
pub struct ConnectArgs {
    /// The module API's base URL (e.g. `https://127.0.0.1:9680` through `kubectl
    /// port-forward svc/operon-webhooks 9680:443`) [default: through the API server's
    /// service proxy].
    #[arg(long, env = "OPERON_SERVER")]
    server: Option<String>,
    /// The bearer token [default: the kubeconfig user's].
    #[arg(long, env = "OPERON_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A kubeconfig file [default: $KUBECONFIG, then ~/.kube/config].
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// A kubeconfig context other than the current one.
    #[arg(long)]
    context: Option<String>,
    /// The namespace of Operon's Service (with the service proxy).
    #[arg(long, default_value = "operon")]
    operon_namespace: String,
    /// The Service and port serving the module API (with the service proxy).
    #[arg(long, default_value = "operon-webhooks:443")]
    operon_service: String,
    /// The CA (PEM) that signed the module API's certificate (with --server).
    #[arg(long)]
    certificate_authority: Option<PathBuf>,
    /// The name the certificate is checked against, when not the --server host (e.g.
    /// `operon-webhooks.operon.svc` through a port-forward).
    #[arg(long)]
    tls_server_name: Option<String>,
    /// Do not check the module API's certificate (with --server; the token is then
    /// exposed to whoever answers).
    #[arg(long)]
    insecure_skip_tls_verify: bool,
}

/// Runs `operon module`.
pub fn run(command: ModuleCommand) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(execute(command))
}

async fn execute(command: ModuleCommand) -> anyhow::Result<ExitCode> {
    match command {
        ModuleCommand::Sign(args) => return super::module_sign::sign(args).await,
        ModuleCommand::Verify(args) => return super::module_sign::verify(args).await,
        ModuleCommand::Keygen(args) => return super::module_sign::keygen(args),
        ModuleCommand::Pull {
            reference,
            output,
            registry,
        } => super::module_oci::pull_to(&registry, &reference, &output).await?,
        ModuleCommand::Push {
            file,
            destination,
            name,
            connect,
            registry,
        } => {
            if let Some(destination) = destination {
                anyhow::ensure!(
                    operon::store::oci::is_oci(&destination),
                    "{destination}: push to an oci:// reference, or give none to upload to the cluster"
                );
                if file.is_dir() {
                    registry.push_addon(&file, &destination).await?;
                } else {
                    registry.push(&file, &destination).await?;
                }
                return Ok(ExitCode::SUCCESS);
            }
            anyhow::ensure!(
                !file.is_dir(),
                "{} is a directory: push an addon-operator module to an oci:// reference (push DIR oci://REGISTRY/REPOSITORY:TAG)",
                file.display()
            );
            let source = file.to_string_lossy().into_owned();
            let from_registry = operon::store::oci::is_oci(&source);
            let name = match name {
                Some(name) => name,
                None if from_registry => {
                    super::module_oci::default_name(&source).context("give --name NAME")?
                }
                None => file
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .map(str::to_owned)
                    .context("give --name NAME")?,
            };
            let bytes = if from_registry {
                registry.pull(&source).await?.bytes
            } else {
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?
            };
            let api = Api::connect(&connect).await?;
            let started = Instant::now();
            let answer = api
                .call("POST", &format!("/v1/modules/{name}"), Some(bytes))
                .await?;
            let elapsed = started.elapsed();
            println!(
                "{} {} ({} world, {} bytes, {:.2}s)",
                name,
                answer["digest"].as_str().unwrap_or_default(),
                answer["world"].as_str().unwrap_or_default(),
                answer["size"],
                elapsed.as_secs_f64()
            );
        }
        ModuleCommand::Ls { connect, output } => {
            let api = Api::connect(&connect).await?;
            let answer = api.call("GET", "/v1/modules", None).await?;
            let items = answer["items"].as_array().cloned().unwrap_or_default();
            match output {
                super::output::Format::Table => {
                    let rows: Vec<Vec<String>> = items
                        .iter()
                        .map(|m| {
                            let text = |k: &str| m[k].as_str().unwrap_or_default().to_owned();
                            vec![
                                text("name"),
                                text("world"),
                                text("digest"),
                                m["size"].to_string(),
                                text("uploadedBy"),
                                text("uploadedAt"),
                            ]
                        })
                        .collect();
                    print!(
                        "{}",
                        super::output::table(
                            &[
                                "NAME",
                                "WORLD",
                                "DIGEST",
                                "SIZE",
                                "UPLOADED-BY",
                                "UPLOADED-AT"
                            ],
                            &rows
                        )
                    );
                }
                other => super::output::print_structured(other, &items)?,
            }
        }
        ModuleCommand::Rm { name, connect } => {
            let api = Api::connect(&connect).await?;
            let answer = api
                .call("DELETE", &format!("/v1/modules/{name}"), None)
                .await?;
            println!(
                "module {name} removed ({})",
                answer["digest"].as_str().unwrap_or_default()
            );
        }
        ModuleCommand::Get {
            name,
            output,
            connect,
        } => {
            let api = Api::connect(&connect).await?;
            let digest = match name.starts_with("sha256:") {
                true => name.clone(),
                false => {
                    let module = api
                        .call("GET", &format!("/v1/modules/{name}"), None)
                        .await?;
                    module["digest"]
                        .as_str()
                        .context("the answer names no digest")?
                        .to_owned()
                }
            };
            let wanted = operon::sandbox::ModuleDigest::parse(&digest)
                .with_context(|| format!("{digest:?} is not a sha256 digest"))?;
            let bytes = api
                .fetch(&format!("/v1/modules/by-digest/{digest}"))
                .await?;
            let actual = operon::sandbox::ModuleDigest::of(&bytes);
            if actual != wanted {
                bail!("the server sent bytes with digest {actual}, not {wanted}: not written");
            }
            std::fs::write(&output, &bytes)
                .with_context(|| format!("writing {}", output.display()))?;
            println!("{} {} ({} bytes)", output.display(), wanted, bytes.len());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A connection to the module API.
enum Api {
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

impl Api {
    async fn connect(args: &ConnectArgs) -> anyhow::Result<Self> {
        let kube_config = || async {
            let options = kube::config::KubeConfigOptions {
                context: args.context.clone(),
                ..Default::default()
            };
            match &args.kubeconfig {
                Some(path) => {
                    let file = kube::config::Kubeconfig::read_from(path)
                        .with_context(|| format!("reading {}", path.display()))?;
                    kube::Config::from_custom_kubeconfig(file, &options)
                        .await
                        .context("reading the kubeconfig")
                }
                None => kube::Config::from_kubeconfig(&options)
                    .await
                    .context("reading the kubeconfig"),
            }
        };
        let kubeconfig_token = |config: &kube::Config| -> anyhow::Result<String> {
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
                    .with_context(|| format!("reading the token file {file}"))?
                    .trim()
                    .to_owned());
            }
            bail!(
                "the kubeconfig's user has no bearer token (a client certificate cannot be checked by the module API): give --token, e.g. $(kubectl create token NAME)"
            )
        };
        match &args.server {
            Some(server) => {
                let token = match &args.token {
                    Some(token) => token.clone(),
                    None => kubeconfig_token(&kube_config().await?)?,
                };
                let base = server.trim_end_matches('/').to_owned();
                let (host, port) = operon::store::fetch::host_port(&base)
                    .with_context(|| format!("--server {server:?} is not https://HOST[:PORT]"))?;
                let name = args.tls_server_name.clone().unwrap_or_else(|| host.clone());
                let server_name = ServerName::try_from(name.clone())
                    .with_context(|| format!("{name:?} is not a server name"))?;
                let tls = client_tls(args)?;
                Ok(Api::Direct {
                    base,
                    host,
                    port,
                    server_name,
                    tls,
                    token,
                })
            }
            None => {
                let mut config = kube_config().await?;
                // kube's default retries a 503 for minutes; through the proxy a 503 means
                // no replica is there to answer (no endpoints), which waiting rarely fixes
                // and a person at a terminal should hear at once.
                config.default_retry = false;
                let token = match &args.token {
                    Some(token) => token.clone(),
                    None => kubeconfig_token(&config)?,
                };
                let (service, port) = args
                    .operon_service
                    .split_once(':')
                    .unwrap_or((&args.operon_service, "443"));
                let prefix = format!(
                    "/api/v1/namespaces/{}/services/https:{service}:{port}/proxy",
                    args.operon_namespace
                );
                let client = kube::Client::try_from(config).context("building the client")?;
                Ok(Api::Proxy {
                    client,
                    prefix,
                    token,
                })
            }
        }
    }

    /// Sends a request and returns the answer's JSON; a failure answer is an error
    /// carrying its message.
    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> anyhow::Result<serde_json::Value> {
        let (status, bytes) = self.send(method, path, body).await?;
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            serde_json::Value::String(String::from_utf8_lossy(&bytes).into_owned())
        });
        if !status.is_success() {
            let mut message = value["message"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| value.to_string());
            if let Api::Proxy { prefix, .. } = self
                && status == http::StatusCode::SERVICE_UNAVAILABLE
            {
                message.push_str(&format!(
                    " (no replica of operon serve answers behind {prefix}: is it running \
                     and ready? --operon-namespace and --operon-service name the Service)"
                ));
            }
            bail!("{method} {path}: HTTP {}: {message}", status.as_u16());
        }
        Ok(value)
    }

    /// GETs raw bytes.
    async fn fetch(&self, path: &str) -> anyhow::Result<bytes::Bytes> {
        let (status, bytes) = self.send("GET", path, None).await?;
        if !status.is_success() {
            let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
            bail!(
                "GET {path}: HTTP {}: {}",
                status.as_u16(),
                value["message"].as_str().unwrap_or_default()
            );
        }
        Ok(bytes)
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> anyhow::Result<(http::StatusCode, bytes::Bytes)> {
        match self {
            Api::Direct {
                base,
                host,
                port,
                server_name,
                tls,
                token,
            } => {
                let tcp = tokio::net::TcpStream::connect((host.as_str(), *port))
                    .await
                    .with_context(|| format!("connecting to {base}"))?;
                let stream = tokio_rustls::TlsConnector::from(tls.clone())
                    .connect(server_name.clone(), tcp)
                    .await
                    .with_context(|| format!("TLS with {base}"))?;
                let (mut sender, connection) =
                    hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                        .await?;
                tokio::spawn(connection);
                let size = body.as_ref().map(Vec::len);
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
                let request = request.body(upload_body(path, body))?;
                let response = match sender.send_request(request).await {
                    Ok(response) => response,
                    // The API refuses an upload before reading it (no token, no
                    // permission, too large) and closes the connection, which a client
                    // still writing sees as a broken pipe: ask again without the bytes
                    // to show why.
                    Err(e) if size.is_some() => {
                        let (status, answer) = Box::pin(self.send(method, path, None)).await?;
                        if matches!(status.as_u16(), 401 | 403) {
                            return Ok((status, answer));
                        }
                        return Err(anyhow::Error::new(e).context(format!(
                            "{method} {base}{path}: the server closed the connection while the \
                             module was sent (is it larger than the server's limit, \
                             --module-max-bytes?)"
                        )));
                    }
                    Err(e) => {
                        return Err(anyhow::Error::new(e).context(format!("{method} {base}{path}")));
                    }
                };
                let status = response.status();
                let bytes = response.into_body().collect().await?.to_bytes();
                Ok((status, bytes))
            }
            Api::Proxy {
                client,
                prefix,
                token,
            } => {
                let request = http::Request::builder()
                    .method(method)
                    .uri(format!("{prefix}{path}"))
                    .header(PROXIED_AUTHORIZATION, format!("Bearer {token}"))
                    .header(http::header::CONTENT_TYPE, "application/wasm")
                    .body(kube::client::Body::from(body.unwrap_or_default()))?;
                let response = client
                    .send(request)
                    .await
                    .with_context(|| format!("{method} {prefix}{path} through the API server"))?;
                let status = response.status();
                let bytes = response.into_body().collect().await?.to_bytes();
                Ok((status, bytes))
            }
        }
    }
}

/// The request body: `bytes` in chunks, with the progress on stderr for large uploads
/// to a terminal.
fn upload_body(path: &str, bytes: Option<Vec<u8>>) -> RequestBody {
    let Some(bytes) = bytes else {
        return http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed();
    };
    let total = bytes.len();
    let show = total >= PROGRESS_FROM && std::io::stderr().is_terminal();
    let label = path.rsplit('/').next().unwrap_or_default().to_owned();
    let bytes = bytes::Bytes::from(bytes);
    let chunks: Vec<bytes::Bytes> = (0..total)
        .step_by(CHUNK)
        .map(|start| bytes.slice(start..(start + CHUNK).min(total)))
        .collect();
    let mut sent = 0usize;
    let stream = futures::stream::iter(chunks.into_iter().map(move |chunk| {
        sent += chunk.len();
        if show {
            let mut err = std::io::stderr();
            let _ = write!(
                err,
                "\ruploading {label}: {:>3}% ({:.1} / {:.1} MiB)",
                sent * 100 / total.max(1),
                sent as f64 / 1048576.0,
                total as f64 / 1048576.0
            );
            if sent == total {
                let _ = writeln!(err);
            }
        }
        Ok::<_, std::io::Error>(hyper::body::Frame::data(chunk))
    }));
    http_body_util::StreamBody::new(stream).boxed()
}

/// The TLS client of --server: its CA, or no check with --insecure-skip-tls-verify.
fn client_tls(args: &ConnectArgs) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    if args.insecure_skip_tls_verify {
        return Ok(Arc::new(
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
                .with_no_client_auth(),
        ));
    }
    let path = args.certificate_authority.as_ref().context(
        "give --certificate-authority (the module API's CA, e.g. ca.crt of the Secret operon-webhook-tls) or --insecure-skip-tls-verify",
    )?;
    let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        roots.add(cert.with_context(|| format!("reading {}", path.display()))?)?;
    }
    anyhow::ensure!(!roots.is_empty(), "{} holds no certificate", path.display());
    Ok(Arc::new(
        builder.with_root_certificates(roots).with_no_client_auth(),
    ))
}

/// Accepts any certificate (--insecure-skip-tls-verify), still checking signatures.
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
