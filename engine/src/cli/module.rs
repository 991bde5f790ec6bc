//! `operon module push/ls/rm/get/pull/sign/verify/keygen`: the client of the module API
//! of `operon serve` (and, through [`super::module_oci`] and [`super::module_sign`], of
//! OCI registries and the signatures of the modules in them). The flags with which
//! `operon serve` and `operon agent` keep their module store are in
//! [`super::module_store`].
//!
//! The module API's client is `operon::serve::modules::client`, beside the API: by
//! default it reaches the API through the API server's service proxy, with the
//! kubeconfig's current context; `--server` and `--token` talk to it directly, e.g.
//! through `kubectl port-forward`. Here are the flags, the calls and what is printed
//! (an upload's progress included).

use anyhow::Context as _;
use operon::serve::modules::client::{Connect, ModuleClient, Progress};
use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// Uploads larger than this show their progress.
const PROGRESS_FROM: usize = 1024 * 1024;

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
            let api = ModuleClient::connect(&connect.into()).await?;
            let progress = progress(&name, bytes.len());
            let started = Instant::now();
            let pushed = api.push(&name, bytes, progress).await?;
            let elapsed = started.elapsed();
            println!(
                "{} {} ({} world, {} bytes, {:.2}s)",
                name,
                pushed.digest,
                pushed.world,
                pushed.size,
                elapsed.as_secs_f64()
            );
        }
        ModuleCommand::Ls { connect, output } => {
            let api = ModuleClient::connect(&connect.into()).await?;
            let items = api.list().await?;
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
            let api = ModuleClient::connect(&connect.into()).await?;
            let removed = api.remove(&name).await?;
            println!("module {name} removed ({})", removed.digest);
        }
        ModuleCommand::Get {
            name,
            output,
            connect,
        } => {
            let api = ModuleClient::connect(&connect.into()).await?;
            let downloaded = api.download(&name).await?;
            let (wanted, bytes) = (downloaded.digest, downloaded.bytes);
            std::fs::write(&output, &bytes)
                .with_context(|| format!("writing {}", output.display()))?;
            println!("{} {} ({} bytes)", output.display(), wanted, bytes.len());
        }
    }
    Ok(ExitCode::SUCCESS)
}

impl From<ConnectArgs> for Connect {
    fn from(args: ConnectArgs) -> Self {
        Connect {
            server: args.server,
            token: args.token,
            kubeconfig: args.kubeconfig,
            context: args.context,
            operon_namespace: args.operon_namespace,
            operon_service: args.operon_service,
            certificate_authority: args.certificate_authority,
            tls_server_name: args.tls_server_name,
            insecure_skip_tls_verify: args.insecure_skip_tls_verify,
        }
    }
}

/// The progress of an upload of `total` bytes as `name`, on stderr when it is large and
/// a terminal.
fn progress(name: &str, total: usize) -> Option<Progress> {
    if total < PROGRESS_FROM || !std::io::stderr().is_terminal() {
        return None;
    }
    let name = name.to_owned();
    Some(Arc::new(move |sent: usize, total: usize| {
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "\ruploading {name}: {:>3}% ({:.1} / {:.1} MiB)",
            sent * 100 / total.max(1),
            sent as f64 / 1048576.0,
            total as f64 / 1048576.0
        );
        if sent == total {
            let _ = writeln!(err);
        }
    }))
}
