//! The flags with which `operon serve` and `operon agent` offload `wasm.runOn: Job`
//! steps: the engine's own image, and the module API as the Jobs' pods reach it (its
//! URL, the name its certificate carries, its CA).
//!
//! `operon serve` knows defaults for the last two (its webhook Service, its admission
//! server's CA); `operon agent` serves no module API, so it needs the URL given and
//! takes the CA it already trusts when fetching modules (`--module-source-ca`).

use operon::runner::offload::OffloadTarget;
use operon::runner::processors::Processors;
use operon::store::ModuleCatalog;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How often a CA read from a file is read again: a renewed certificate (cert-manager,
/// a rotated Secret the kubelet rewrites in the pod) reaches the Jobs created after it.
const CA_RELOAD: Duration = Duration::from_secs(60);
/// How often a CA file that held no usable CA yet is read again.
const CA_AWAITED: Duration = Duration::from_secs(5);

/// How wasm steps are offloaded to Jobs.
#[derive(Debug, Clone, clap::Args)]
pub struct OffloadArgs {
    /// The image of this engine, which Jobs of `wasm.runOn: Job` steps run (`operon op
    /// run` on the module by digest); the Deployment and the DaemonSet set it to their
    /// own image. Without it such steps fail with a message saying so.
    #[arg(long = "image", env = "OPERON_IMAGE")]
    image: Option<String>,
    /// The module API as the Jobs' pods reach it [serve: default https://<the webhook
    /// Service>.<namespace>.svc:<its port>, which fronts every replica's module API;
    /// agent: required to offload, e.g. https://operon-webhooks.operon.svc:443].
    #[arg(long, env = "OPERON_OFFLOAD_MODULE_URL")]
    offload_module_url: Option<String>,
    /// The name the pods check the module API's certificate against [default: the
    /// URL's host].
    #[arg(long, env = "OPERON_OFFLOAD_MODULE_SERVER_NAME")]
    offload_module_server_name: Option<String>,
    /// The CA (PEM) the pods check the module API's certificate with [serve: default
    /// the admission server's CA, which serves the module API; agent: default
    /// --module-source-ca].
    #[arg(long, env = "OPERON_OFFLOAD_MODULE_CA")]
    offload_module_ca: Option<PathBuf>,
}

/// Where the module API's CA comes from when --offload-module-ca is not given.
#[derive(Debug)]
pub enum ModuleCa {
    /// Kept current by this process (`operon serve`'s self-signed CA, renewed in place).
    Live(watch::Receiver<Vec<u8>>),
    /// A PEM file, read again every [`CA_RELOAD`].
    File(PathBuf),
}

/// What a process knows of the module API its offloaded steps fetch from.
#[derive(Debug)]
pub struct OffloadDefaults {
    /// The command, for the log (`operon serve`, `operon agent`).
    pub process: &'static str,
    /// The module API's URL without --offload-module-url; `None`: the flag is required.
    pub module_url: Option<String>,
    /// The module API's CA without --offload-module-ca.
    pub ca: Option<ModuleCa>,
    /// What names that CA, for messages (`--module-source-ca (OPERON_MODULE_SOURCE_CA)`).
    pub ca_named_by: &'static str,
    /// The module store, to refuse a module it does not hold when the step starts
    /// rather than in the pod.
    pub catalog: Option<Arc<ModuleCatalog>>,
}

/// Why a process does not offload `wasm.runOn: Job` steps.
#[derive(Debug, thiserror::Error)]
// Every refusal is a setting that is missing, and says which.
#[allow(clippy::enum_variant_names)]
pub enum Refusal {
    /// No image for the Jobs.
    #[error("no --image (OPERON_IMAGE), the image the Jobs run")]
    NoImage,
    /// No module URL and no default for it.
    #[error(
        "no --offload-module-url (OPERON_OFFLOAD_MODULE_URL): this process serves no module API of its own, so the URL at which the Jobs' pods fetch modules must be given (the webhook Service of operon serve, e.g. https://operon-webhooks.operon.svc:443)"
    )]
    NoModuleUrl,
    /// No CA at all.
    #[error(
        "the module API's CA is not known: no --offload-module-ca (OPERON_OFFLOAD_MODULE_CA) and no {named_by}"
    )]
    NoCa {
        /// What would have named it otherwise.
        named_by: &'static str,
    },
}

/// The outcome of the offload flags: where steps go, or why they are refused.
#[derive(Debug)]
pub enum Offload {
    /// Steps with `runOn: Job` run as Jobs of this target.
    To(OffloadTarget),
    /// They are refused, for this reason.
    Refused(Refusal),
}

impl OffloadArgs {
    /// Lets `processors` offload steps when the image, the module URL and the CA are
    /// known (each from its flag, else from `defaults`); otherwise logs once why such
    /// steps are refused. An --offload-module-ca that cannot be used is an error.
    pub fn apply(&self, processors: &Processors, defaults: OffloadDefaults) -> anyhow::Result<()> {
        let process = defaults.process;
        match self.offload(defaults)? {
            Offload::To(target) => processors.set_offload(target),
            Offload::Refused(Refusal::NoImage) => tracing::info!(
                "{process}: no --image (OPERON_IMAGE): wasm steps with runOn: Job are refused"
            ),
            Offload::Refused(refusal) => tracing::warn!(
                "{process} has an image for wasm steps with runOn: Job but refuses them: {refusal}"
            ),
        }
        Ok(())
    }

    /// Where steps go, or why not. A CA file read here is read again every
    /// [`CA_RELOAD`] (needs a tokio runtime).
    pub fn offload(&self, defaults: OffloadDefaults) -> anyhow::Result<Offload> {
        let Some(image) = self.image.clone().filter(|i| !i.is_empty()) else {
            return Ok(Offload::Refused(Refusal::NoImage));
        };
        let module_url = self
            .offload_module_url
            .clone()
            .filter(|u| !u.is_empty())
            .or(defaults.module_url);
        let Some(module_url) = module_url else {
            return Ok(Offload::Refused(Refusal::NoModuleUrl));
        };
        let named_by = defaults.ca_named_by;
        let ca = match (&self.offload_module_ca, defaults.ca) {
            (Some(path), _) => {
                let pem = read_ca(path).map_err(|reason| {
                    anyhow::anyhow!("--offload-module-ca {}: {reason}", path.display())
                })?;
                reloaded(path.clone(), pem)
            }
            (None, Some(ModuleCa::Live(ca))) => ca,
            // A file not there yet (the Secret of a fresh install) is waited for: steps
            // are refused, saying so, until it arrives.
            (None, Some(ModuleCa::File(path))) => match read_ca(&path) {
                Ok(pem) => reloaded(path, pem),
                Err(reason) => {
                    tracing::warn!(path = %path.display(), %reason, "{}: the module API's CA ({named_by}) cannot be used yet: wasm steps with runOn: Job wait for it", defaults.process);
                    reloaded(path, Vec::new())
                }
            },
            (None, None) => return Ok(Offload::Refused(Refusal::NoCa { named_by })),
        };
        Ok(Offload::To(OffloadTarget {
            image,
            module_url,
            server_name: self.offload_module_server_name.clone(),
            ca,
            catalog: defaults.catalog,
        }))
    }
}

/// The PEM at `path`, when it holds certificates and nothing that fails to parse.
fn read_ca(path: &Path) -> Result<Vec<u8>, String> {
    let pem = std::fs::read(path).map_err(|e| e.to_string())?;
    let mut certificates = 0;
    for cert in CertificateDer::pem_slice_iter(&pem) {
        cert.map_err(|e| format!("not a PEM certificate: {e}"))?;
        certificates += 1;
    }
    if certificates == 0 {
        return Err("no PEM certificate in it".to_owned());
    }
    Ok(pem)
}

/// A receiver of `pem`, the content of `path`, which a task reads again every
/// [`CA_RELOAD`] while anyone holds the receiver (every [`CA_AWAITED`] while `pem` is
/// empty: no usable CA yet); a file that turns unreadable or invalid keeps the last
/// good CA.
fn reloaded(path: PathBuf, pem: Vec<u8>) -> watch::Receiver<Vec<u8>> {
    let (sender, receiver) = watch::channel(pem);
    tokio::spawn(async move {
        loop {
            let period = if sender.borrow().is_empty() {
                CA_AWAITED
            } else {
                CA_RELOAD
            };
            tokio::select! {
                _ = sender.closed() => return,
                _ = tokio::time::sleep(period) => {}
            }
            match read_ca(&path) {
                Ok(pem) => {
                    let mut arrived = false;
                    let changed = sender.send_if_modified(|old| {
                        let changed = *old != pem;
                        if changed {
                            arrived = old.is_empty();
                            *old = pem;
                        }
                        changed
                    });
                    if arrived {
                        tracing::info!(path = %path.display(),
                            "the module API's CA arrived: wasm steps with runOn: Job are offloaded from now on");
                    } else if changed {
                        tracing::info!(path = %path.display(),
                            "the module API's CA changed: Jobs of offloaded steps carry the new one");
                    }
                }
                // Waiting for the first CA was said once at start.
                Err(_) if sender.borrow().is_empty() => {}
                Err(reason) => tracing::warn!(path = %path.display(), %reason,
                    "cannot read the module API's CA again: Jobs of offloaded steps keep the last one"),
            }
        }
    });
    receiver
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        offload: OffloadArgs,
    }

    /// The flags as `operon agent` or `operon serve` parse them.
    fn args(flags: &[&str]) -> OffloadArgs {
        let argv = std::iter::once("operon").chain(flags.iter().copied());
        Cli::try_parse_from(argv).unwrap().offload
    }

    /// No flag at all, whatever this test's environment holds.
    fn nothing() -> OffloadArgs {
        OffloadArgs {
            image: None,
            offload_module_url: None,
            offload_module_server_name: None,
            offload_module_ca: None,
        }
    }

    fn ca_pem() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap().pem()
    }

    /// A directory holding `ca.crt` and `other.crt` (CA certificates) and `junk.crt`
    /// (not PEM).
    struct Cas {
        _dir: tempfile::TempDir,
        ca: PathBuf,
        other: PathBuf,
        junk: PathBuf,
    }

    fn cas() -> Cas {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name);
        let (ca, other, junk) = (path("ca.crt"), path("other.crt"), path("junk.crt"));
        std::fs::write(&ca, ca_pem()).unwrap();
        std::fs::write(&other, ca_pem()).unwrap();
        std::fs::write(&junk, "not a certificate\n").unwrap();
        Cas {
            _dir: dir,
            ca,
            other,
            junk,
        }
    }

    const SOURCE_CA: &str = "--module-source-ca (OPERON_MODULE_SOURCE_CA)";
    const URL: &str = "https://operon-webhooks.operon.svc:443";

    /// What `operon agent` passes: no URL, its --module-source-ca when it has one.
    fn agent(source_ca: Option<&Path>) -> OffloadDefaults {
        OffloadDefaults {
            process: "operon agent",
            module_url: None,
            ca: source_ca.map(|path| ModuleCa::File(path.to_owned())),
            ca_named_by: SOURCE_CA,
            catalog: None,
        }
    }

    /// What `operon serve` passes: its webhook Service, its admission CA when known.
    fn serve(ca: Option<Vec<u8>>) -> OffloadDefaults {
        OffloadDefaults {
            process: "operon serve",
            module_url: Some(URL.to_owned()),
            ca: ca.map(|pem| ModuleCa::Live(watch::channel(pem).1)),
            ca_named_by: "admission server's CA",
            catalog: None,
        }
    }

    fn target(flags: &OffloadArgs, defaults: OffloadDefaults) -> OffloadTarget {
        match flags.offload(defaults).unwrap() {
            Offload::To(target) => target,
            Offload::Refused(refusal) => panic!("refused: {refusal}"),
        }
    }

    fn refusal(flags: &OffloadArgs, defaults: OffloadDefaults) -> Refusal {
        match flags.offload(defaults).unwrap() {
            Offload::To(target) => panic!("offloads to {target:?}"),
            Offload::Refused(refusal) => refusal,
        }
    }

    #[tokio::test]
    async fn the_agent_offloads_with_an_image_a_module_url_and_its_module_source_ca() {
        let cas = cas();
        let flags = args(&["--image", "operon:1", "--offload-module-url", URL]);
        let target = target(&flags, agent(Some(&cas.ca)));
        assert_eq!(target.image, "operon:1");
        assert_eq!(target.module_url, URL);
        assert_eq!(target.server_name, None);
        assert_eq!(*target.ca.borrow(), std::fs::read(&cas.ca).unwrap());
    }

    #[tokio::test]
    async fn offload_module_ca_wins_over_the_module_source_ca() {
        let cas = cas();
        let other = cas.other.display().to_string();
        let flags = args(&[
            "--image=operon:1",
            "--offload-module-url",
            URL,
            "--offload-module-ca",
            &other,
            "--offload-module-server-name",
            "modules.example",
        ]);
        // Even a fallback that could not be used is not looked at.
        let target = target(&flags, agent(Some(&cas.junk)));
        assert_eq!(*target.ca.borrow(), std::fs::read(&cas.other).unwrap());
        assert_eq!(target.server_name.as_deref(), Some("modules.example"));
        let alone = self::target(&flags, agent(None));
        assert_eq!(*alone.ca.borrow(), std::fs::read(&cas.other).unwrap());
    }

    #[tokio::test]
    async fn the_agent_refuses_without_image_url_or_ca_and_says_which() {
        let cas = cas();
        let no_image = OffloadArgs {
            offload_module_url: Some(URL.to_owned()),
            ..nothing()
        };
        let why = refusal(&no_image, agent(Some(&cas.ca)));
        assert!(matches!(why, Refusal::NoImage), "{why}");
        // An empty OPERON_IMAGE (a chart value left blank) is no image.
        let blank = args(&["--image=", "--offload-module-url", URL]);
        let why = refusal(&blank, agent(Some(&cas.ca)));
        assert!(matches!(why, Refusal::NoImage), "{why}");

        let no_url = OffloadArgs {
            image: Some("operon:1".to_owned()),
            ..nothing()
        };
        let why = refusal(&no_url, agent(Some(&cas.ca)));
        assert!(matches!(why, Refusal::NoModuleUrl), "{why}");
        assert!(
            why.to_string()
                .starts_with("no --offload-module-url (OPERON_OFFLOAD_MODULE_URL): "),
            "{why}"
        );

        let no_ca = OffloadArgs {
            offload_module_url: Some(URL.to_owned()),
            ..no_url
        };
        assert_eq!(
            refusal(&no_ca, agent(None)).to_string(),
            "the module API's CA is not known: no --offload-module-ca (OPERON_OFFLOAD_MODULE_CA) and no --module-source-ca (OPERON_MODULE_SOURCE_CA)"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_fallback_ca_that_is_not_there_yet_is_waited_for() {
        let cas = cas();
        let flags = args(&["--image", "operon:1", "--offload-module-url", URL]);
        // Not there (a Secret not made yet) or no certificate in it: the target has no
        // CA yet, and the agent runs its other steps meanwhile.
        for path in [cas.ca.with_file_name("missing.crt"), cas.junk.clone()] {
            let mut ca = target(&flags, agent(Some(&path))).ca;
            assert!(ca.borrow_and_update().is_empty(), "{}", path.display());
            let pem = ca_pem();
            std::fs::write(&path, &pem).unwrap();
            tokio::time::timeout(CA_AWAITED * 2, ca.changed())
                .await
                .expect("read again within the waiting period")
                .unwrap();
            assert_eq!(*ca.borrow(), pem.as_bytes());
        }
    }

    #[tokio::test]
    async fn an_offload_module_ca_that_cannot_be_used_is_an_error() {
        let cas = cas();
        let flags = OffloadArgs {
            image: Some("operon:1".to_owned()),
            offload_module_url: Some(URL.to_owned()),
            offload_module_ca: Some(cas.junk.clone()),
            ..nothing()
        };
        let err = flags.offload(agent(Some(&cas.ca))).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "--offload-module-ca {}: no PEM certificate in it",
                cas.junk.display()
            )
        );
    }

    #[tokio::test]
    async fn serve_defaults_to_its_webhook_service_and_admission_ca() {
        let pem = ca_pem().into_bytes();
        let image = OffloadArgs {
            image: Some("operon:1".to_owned()),
            ..nothing()
        };
        let target = target(&image, serve(Some(pem.clone())));
        assert_eq!(target.module_url, URL);
        assert_eq!(*target.ca.borrow(), pem);
        let elsewhere = OffloadArgs {
            offload_module_url: Some("https://10.0.0.7:9680".to_owned()),
            ..image
        };
        let target = self::target(&elsewhere, serve(Some(pem)));
        assert_eq!(target.module_url, "https://10.0.0.7:9680");
        assert_eq!(
            refusal(&elsewhere, serve(None)).to_string(),
            "the module API's CA is not known: no --offload-module-ca (OPERON_OFFLOAD_MODULE_CA) and no admission server's CA"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_ca_file_is_read_again_and_a_bad_rewrite_keeps_the_last_good_one() {
        let cas = cas();
        let flags = args(&["--image", "operon:1", "--offload-module-url", URL]);
        let mut ca = target(&flags, agent(Some(&cas.ca))).ca;
        let first = ca.borrow_and_update().clone();

        let renewed = ca_pem();
        std::fs::write(&cas.ca, &renewed).unwrap();
        tokio::time::timeout(CA_RELOAD * 2, ca.changed())
            .await
            .expect("read again within a period")
            .unwrap();
        assert_eq!(*ca.borrow_and_update(), renewed.as_bytes());
        assert_ne!(first, renewed.as_bytes());

        std::fs::write(&cas.ca, "garbage").unwrap();
        tokio::time::sleep(CA_RELOAD * 3).await;
        assert!(!ca.has_changed().unwrap());
        assert_eq!(*ca.borrow(), renewed.as_bytes());
    }

    #[tokio::test]
    async fn runners_offload_once_the_flags_allow_it() {
        use operon::api::{Operation, OperationSpec, Processor, WasmProcessor, WasmRunOn};
        use operon::runner::processors::ProcessorSettings;
        let processors = Processors::new(ProcessorSettings {
            cache_dir: None,
            ..ProcessorSettings::default()
        });
        let wasm = WasmProcessor {
            module: operon_tests::ECHO.to_owned(),
            image_pull_secrets: Vec::new(),
            config: Default::default(),
            read_only_paths: Vec::new(),
            run_on: Some(WasmRunOn::Job),
            job: None,
        };
        let spec = OperationSpec {
            processor: Processor::wasm(wasm, 30),
            storage: None,
        };
        let op = Operation::new("offloaded", spec);
        let no_url = OffloadArgs {
            image: Some("operon:1".to_owned()),
            ..nothing()
        };
        let cas = cas();
        no_url
            .apply(&processors, agent(Some(&cas.ca)))
            .expect("a refusal is logged, not an error");
        let err = processors.runner(&op, Path::new("/")).err().unwrap();
        let text = err.to_string();
        for named in [
            "operon serve",
            "operon agent",
            "--image",
            "--offload-module-url",
            "--module-source-ca",
        ] {
            assert!(text.contains(named), "{named} in {text}");
        }

        let flags = OffloadArgs {
            offload_module_url: Some(URL.to_owned()),
            ..no_url
        };
        flags.apply(&processors, agent(Some(&cas.ca))).unwrap();
        processors.runner(&op, Path::new("/")).unwrap();
    }
}
