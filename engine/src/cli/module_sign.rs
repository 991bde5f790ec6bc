//! `operon module sign`, `verify` and `keygen`: cosign signatures of `oci://` modules,
//! pushed beside them in their registry, checked against a verification configuration,
//! and the key pair to sign with.

use super::module_oci::RegistryArgs;
use anyhow::Context as _;
use operon::store::keys::SigningKey;
use operon::store::oci::SignRequest;
use operon::store::verification::VerificationConfig;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `operon module sign`.
#[derive(Debug, clap::Args)]
pub struct SignArgs {
    /// The module: `oci://REGISTRY/REPOSITORY:TAG` or `@sha256:...` (a tag is signed as
    /// the manifest it names now).
    reference: String,
    /// The private key (PEM `PRIVATE KEY`: PKCS#8, ECDSA P-256 or Ed25519), e.g. from
    /// `operon module keygen`.
    #[arg(long)]
    key: PathBuf,
    /// A certificate for the key (PEM), attached for `genericIssuer` requirements (a
    /// private CA's, as `cosign sign --certificate` attaches one).
    #[arg(long, requires = "certificate_chain")]
    certificate: Option<PathBuf>,
    /// The certificate's issuers (PEM: intermediates, then the root).
    #[arg(long, requires = "certificate")]
    certificate_chain: Option<PathBuf>,
    /// An annotation signed into the payload, as KEY=VALUE (repeatable), which a
    /// requirement's `annotations` may demand.
    #[arg(long = "annotation", short = 'a', value_parser = super::op::key_value)]
    annotations: Vec<(String, String)>,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Arguments of `operon module verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// The module: `oci://REGISTRY/REPOSITORY:TAG` or `@sha256:...`.
    reference: String,
    /// The verification configuration (the file `--module-verification` takes).
    #[arg(long)]
    config: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// Arguments of `operon module keygen`.
#[derive(Debug, clap::Args)]
pub struct KeygenArgs {
    /// Where the files go: PREFIX.key (the private key, PKCS#8 PEM, readable by its
    /// owner only) and PREFIX.pub (the public key, PEM, for a `pubKey` requirement).
    #[arg(long, default_value = "operon-signing")]
    output_key_prefix: PathBuf,
}

fn read(path: &std::path::Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// `operon module sign`.
pub async fn sign(args: SignArgs) -> anyhow::Result<ExitCode> {
    let key = SigningKey::from_pem(&read(&args.key)?)
        .with_context(|| format!("--key {}", args.key.display()))?;
    let request = SignRequest {
        annotations: args.annotations.into_iter().collect(),
        certificate: args.certificate.as_deref().map(read).transpose()?,
        chain: args.certificate_chain.as_deref().map(read).transpose()?,
    };
    let auth = args.registry.auth(&args.reference)?;
    let (signed, added) = args
        .registry
        .client()?
        .sign(&args.reference, &key, &request, &auth)
        .await?;
    let count = signed.signatures.len();
    match added {
        true => println!(
            "{} signed with {} key: pushed to {} ({count} signature{})",
            signed.pinned,
            key.public_key().describe(),
            signed.signature_reference,
            if count == 1 { "" } else { "s" }
        ),
        false => println!(
            "{} already carries a signature of this payload by this key ({})",
            signed.pinned, signed.signature_reference
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// `operon module verify`: each requirement, the signatures that meet it and why the
/// others do not; fails when the configuration is not met.
pub async fn verify(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let config = VerificationConfig::load(&args.config)?;
    let auth = args.registry.auth(&args.reference)?;
    let signed = args
        .registry
        .client()?
        .signatures_of(&args.reference, &auth)
        .await?;
    let report = config.verify(
        &signed.manifest_digest,
        &signed.signatures,
        jiff::Timestamp::now(),
    );
    let count = report.signatures.len();
    println!(
        "{}: {count} signature{} in {}",
        signed.pinned,
        if count == 1 { "" } else { "s" },
        signed.signature_reference
    );
    for requirement in &report.requirements {
        let state = match requirement.met_by.is_empty() {
            true => "not met",
            false => "met",
        };
        println!("{}: {state}", requirement.requirement);
        for signature in &requirement.met_by {
            println!("  {}: meets it", report.signature_name(*signature));
        }
        for (signature, why) in &requirement.not_met {
            println!("  {}: {why}", report.signature_name(*signature));
        }
    }
    if report.verified() {
        println!("verified against {}", args.config.display());
        Ok(ExitCode::SUCCESS)
    } else {
        println!("not verified against {}: {report}", args.config.display());
        Ok(ExitCode::FAILURE)
    }
}

/// `operon module keygen`.
pub fn keygen(args: KeygenArgs) -> anyhow::Result<ExitCode> {
    let prefix = args.output_key_prefix.as_os_str().to_owned();
    let with = |extension: &str| {
        let mut path = prefix.clone();
        path.push(extension);
        PathBuf::from(path)
    };
    let (private, public) = (with(".key"), with(".pub"));
    for path in [&private, &public] {
        anyhow::ensure!(
            !path.exists(),
            "{} exists: not overwritten (give another --output-key-prefix)",
            path.display()
        );
    }
    let (key, pem) = SigningKey::generate()?;
    write_private(&private, &pem)?;
    std::fs::write(&public, key.public_key().to_pem())
        .with_context(|| format!("writing {}", public.display()))?;
    println!(
        "private key (ECDSA P-256): {}\npublic key: {}\n{}",
        private.display(),
        public.display(),
        key.public_key().to_pem().trim_end()
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes a private key readable by its owner only, refusing to replace a file.
fn write_private(path: &std::path::Path, pem: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(pem.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}
