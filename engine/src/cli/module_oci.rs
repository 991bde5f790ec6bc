//! The OCI side of `operon module`: `push FILE oci://...` to a registry (a wasm
//! component, or an addon-operator module directory as one tar layer), `pull
//! oci://...`, and the registry flags (credentials from a docker config.json, extra CAs,
//! plain-HTTP registries, the verification configuration signed modules are checked
//! against).

use anyhow::Context as _;
use operon::store::oci::{self, OciClient, OciError, OciOptions, PulledModule};
use operon::store::oci_modules::{AllowList, OciModules};
use operon::store::verification::VerificationConfig;
use operon::store::{BlobStore, DEFAULT_MAX_MODULE_BYTES, ModuleCatalog};
use std::path::PathBuf;
use std::time::Instant;

/// How to reach OCI registries.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RegistryArgs {
    /// The docker config.json with the registries' credentials [default:
    /// $DOCKER_CONFIG/config.json, then ~/.docker/config.json].
    #[arg(long)]
    docker_config: Option<PathBuf>,
    /// A CA (PEM) trusted for registries besides the system's (repeatable).
    #[arg(long = "registry-ca")]
    registry_ca: Vec<PathBuf>,
    /// A registry (`host:port`) reached over plain HTTP rather than HTTPS (repeatable;
    /// for a registry on loopback).
    #[arg(long = "plain-http")]
    plain_http: Vec<String>,
}

impl RegistryArgs {
    /// How to reach the registries: the CAs read, the plain-HTTP registries.
    pub fn options(&self) -> anyhow::Result<OciOptions> {
        options(&self.registry_ca, &self.plain_http)
    }

    /// A registry client with these CAs and plain-HTTP registries.
    pub fn client(&self) -> anyhow::Result<OciClient> {
        Ok(OciClient::new(&self.options()?))
    }

    /// The credentials for the registry of `reference`, from the docker config.json.
    pub fn auth(&self, reference: &str) -> Result<oci_client::secrets::RegistryAuth, OciError> {
        let registry = oci::registry_of(reference)?;
        oci::docker_auth(self.docker_config.as_deref(), &registry)
    }

    /// Pulls the module `reference` names.
    pub async fn pull(&self, reference: &str) -> anyhow::Result<PulledModule> {
        let auth = self.auth(reference)?;
        Ok(self
            .client()?
            .pull(reference, &auth, DEFAULT_MAX_MODULE_BYTES)
            .await?)
    }

    /// Pushes `file` to `reference` and prints what the registry holds now.
    pub async fn push(&self, file: &std::path::Path, reference: &str) -> anyhow::Result<()> {
        let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        // A file that is no component would be refused by every engine pulling it.
        anyhow::ensure!(
            bytes.starts_with(b"\0asm") && bytes.get(4..8) == Some(&[0x0d, 0x00, 0x01, 0x00]),
            "{} is not a wasm component (a core module, or not wasm at all)",
            file.display()
        );
        let auth = self.auth(reference)?;
        let started = Instant::now();
        let pushed = self.client()?.push(reference, &bytes, &auth).await?;
        let repository = oci::repository_of(reference);
        println!(
            "{reference} {} (layer {}, {} bytes, {:.2}s)\npinned: {repository}@{}",
            pushed.manifest_digest,
            pushed.layer_digest,
            bytes.len(),
            started.elapsed().as_secs_f64(),
            pushed.manifest_digest
        );
        Ok(())
    }
}

impl RegistryArgs {
    /// Packs the addon-operator module directory `dir` and pushes it to `reference`;
    /// prints the pinned reference, which `--module-source` takes.
    pub async fn push_addon(&self, dir: &std::path::Path, reference: &str) -> anyhow::Result<()> {
        // Read as the engine will read it, so that a broken module is not published.
        let layout = operon::addons::layout::Layout::read_with_sources(
            std::path::Path::new(""),
            &[operon::addons::layout::SourceModule {
                reference: reference.to_owned(),
                path: dir.to_owned(),
            }],
            None,
        )
        .with_context(|| format!("reading the module {}", dir.display()))?;
        if let Some(broken) = layout.unavailable.first() {
            anyhow::bail!("{}: {}", dir.display(), broken.message);
        }
        let name = layout
            .modules
            .first()
            .map(|m| m.name.clone())
            .context("no module read")?;
        let archive = operon::store::addon_archive::pack(dir)
            .with_context(|| format!("packing {}", dir.display()))?;
        let auth = self.auth(reference)?;
        let started = Instant::now();
        let pushed = self
            .client()?
            .push_addon(reference, &archive, &name, &auth)
            .await?;
        println!(
            "module {name}: {reference} {} (layer {}, {} bytes, {:.2}s)\npinned: {reference}@{}",
            pushed.manifest_digest,
            pushed.layer_digest,
            archive.len(),
            started.elapsed().as_secs_f64(),
            pushed.manifest_digest
        );
        Ok(())
    }
}

/// How `operon serve` and `operon agent` pull the `oci://` modules of Operations and
/// Hooks (their credentials come from the Secrets the objects name).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct EngineRegistryArgs {
    /// A registry (`host[:port]`) `oci://` modules may be pulled from (repeatable, or
    /// comma-separated; `*` allows any). With none, every `oci://` module is refused.
    #[arg(
        long = "allow-registry",
        env = "OPERON_ALLOW_REGISTRIES",
        value_delimiter = ','
    )]
    allow_registry: Vec<String>,
    /// A CA (PEM) trusted for registries besides the system's (repeatable).
    #[arg(
        long = "registry-ca",
        env = "OPERON_REGISTRY_CA",
        value_delimiter = ','
    )]
    registry_ca: Vec<PathBuf>,
    /// A registry (`host:port`) reached over plain HTTP rather than HTTPS (repeatable).
    #[arg(long = "plain-http-registry")]
    plain_http: Vec<String>,
    #[command(flatten)]
    verification: VerificationArgs,
    /// The pulled modules' store, made once and shared by the Diagnoses and the Hooks.
    #[arg(skip)]
    modules: std::sync::OnceLock<Option<std::sync::Arc<OciModules>>>,
}

/// Which signatures `oci://` modules must carry.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct VerificationArgs {
    /// A verification configuration (YAML: `allOf`/`anyOf` of `pubKey` and
    /// `genericIssuer` requirements, a `trustRoot`): every `oci://` module must carry
    /// cosign signatures that meet it, or it is refused (SignatureNotVerified).
    #[arg(long = "module-verification", env = "OPERON_MODULE_VERIFICATION")]
    module_verification: Option<PathBuf>,
}

impl VerificationArgs {
    /// The configuration read and checked, when one is named.
    pub fn load(&self) -> anyhow::Result<Option<std::sync::Arc<VerificationConfig>>> {
        self.module_verification
            .as_deref()
            .map(|path| {
                VerificationConfig::load(path)
                    .map(std::sync::Arc::new)
                    .context("--module-verification")
            })
            .transpose()
    }

    /// `modules`, refusing what the configuration refuses.
    pub fn apply(&self, modules: OciModules) -> anyhow::Result<OciModules> {
        Ok(match self.load()? {
            Some(verification) => modules.with_verification(verification),
            None => modules,
        })
    }
}

impl EngineRegistryArgs {
    /// Checks what can be checked before the engine starts: the verification
    /// configuration (a broken one would otherwise refuse every module, late).
    pub fn check(&self) -> anyhow::Result<()> {
        self.verification.load().map(|_| ())
    }

    /// Where `oci://` modules are pulled to: the module store of `catalog` when there
    /// is one (the module API then serves them to offloaded steps), else
    /// `<cache>/oci-modules`. `None`, logged, when no store can be opened.
    pub fn modules(
        &self,
        catalog: Option<std::sync::Arc<ModuleCatalog>>,
        cache_dir: Option<&std::path::Path>,
    ) -> Option<std::sync::Arc<OciModules>> {
        self.modules
            .get_or_init(|| {
                let made = self.make(catalog, cache_dir);
                if let Err(e) = &made {
                    tracing::error!(error = %format!("{e:#}"), "oci:// modules cannot be pulled");
                }
                made.ok().map(std::sync::Arc::new)
            })
            .clone()
    }

    fn make(
        &self,
        catalog: Option<std::sync::Arc<ModuleCatalog>>,
        cache_dir: Option<&std::path::Path>,
    ) -> anyhow::Result<OciModules> {
        let options = options(&self.registry_ca, &self.plain_http)?;
        let allowed = AllowList::new(self.allow_registry.iter().map(|r| r.trim().to_owned()));
        if let Some(catalog) = catalog {
            return self
                .verification
                .apply(OciModules::sharing(options, allowed, catalog));
        }
        let root = cache_dir
            .map(|dir| dir.join("oci-modules"))
            .context("no cache directory to keep pulled modules in (--cache-dir)")?;
        let blobs = BlobStore::open(&root, DEFAULT_MAX_MODULE_BYTES)
            .with_context(|| format!("the module store {}", root.display()))?;
        self.verification
            .apply(OciModules::new(blobs, options, allowed))
    }
}

/// The registries' CAs (`--registry-ca`, read) and plain-HTTP registries.
fn options(registry_ca: &[PathBuf], plain_http: &[String]) -> anyhow::Result<OciOptions> {
    let mut extra_ca_pem = Vec::new();
    for path in registry_ca {
        extra_ca_pem.push(
            std::fs::read(path).with_context(|| format!("--registry-ca {}", path.display()))?,
        );
    }
    Ok(OciOptions {
        extra_ca_pem,
        plain_http: plain_http.to_vec(),
    })
}

/// The module name an OCI reference suggests: its repository's last segment.
pub fn default_name(reference: &str) -> Option<String> {
    let path = reference.strip_prefix(oci::SCHEME)?;
    let path = path.split('@').next()?;
    let last = path.rsplit('/').next()?;
    let name = last.split(':').next()?;
    (!name.is_empty()).then(|| name.to_owned())
}

/// `operon module pull REFERENCE -o FILE`.
pub async fn pull_to(
    registry: &RegistryArgs,
    reference: &str,
    output: &std::path::Path,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let pulled = registry.pull(reference).await?;
    std::fs::write(output, &pulled.bytes)
        .with_context(|| format!("writing {}", output.display()))?;
    println!(
        "{} {} (manifest {}, {} bytes, {:.2}s)",
        output.display(),
        pulled.layer_digest,
        pulled.manifest_digest,
        pulled.bytes.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
