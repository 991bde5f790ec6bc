//! The flags with which `operon serve` offloads `wasm.runOn: Job` steps: the engine's
//! own image, and the module API as the Jobs' pods reach it.

use operon::runner::offload::OffloadTarget;
use operon::runner::processors::Processors;
use operon::store::ModuleCatalog;
use std::path::PathBuf;
use std::sync::Arc;

/// How wasm steps are offloaded to Jobs.
#[derive(Debug, Clone, clap::Args)]
pub struct OffloadArgs {
    /// The image of this engine, which Jobs of `wasm.runOn: Job` steps run (`operon op
    /// run` on the module by digest); the Deployment sets it to its own image. Without
    /// it such steps fail with a message saying so.
    #[arg(long = "image", env = "OPERON_IMAGE")]
    image: Option<String>,
    /// The module API as the Jobs' pods reach it [default: https://<the webhook
    /// Service>.<namespace>.svc:<its port>, which fronts every replica's module API].
    #[arg(long, env = "OPERON_OFFLOAD_MODULE_URL")]
    offload_module_url: Option<String>,
    /// The name the pods check the module API's certificate against [default: the
    /// URL's host].
    #[arg(long, env = "OPERON_OFFLOAD_MODULE_SERVER_NAME")]
    offload_module_server_name: Option<String>,
    /// The CA (PEM) the pods check the module API's certificate with [default: the
    /// admission server's CA, which serves the module API].
    #[arg(long, env = "OPERON_OFFLOAD_MODULE_CA")]
    offload_module_ca: Option<PathBuf>,
}

impl OffloadArgs {
    /// Lets `processors` offload steps when an image is set and the module API's CA
    /// is known: --offload-module-ca, else `ca` (the admission server's). `service` is
    /// the webhook Service's `https://NAME.NAMESPACE.svc:PORT`.
    pub fn apply(
        &self,
        processors: &Processors,
        service: String,
        ca: Option<tokio::sync::watch::Receiver<Vec<u8>>>,
        catalog: Option<Arc<ModuleCatalog>>,
    ) -> anyhow::Result<()> {
        let Some(image) = self.image.clone().filter(|i| !i.is_empty()) else {
            tracing::info!("no --image (OPERON_IMAGE): wasm steps with runOn: Job are refused");
            return Ok(());
        };
        let ca = match &self.offload_module_ca {
            Some(path) => {
                let pem = std::fs::read(path)
                    .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
                Some(tokio::sync::watch::channel(pem).1)
            }
            None => ca,
        };
        let Some(ca) = ca else {
            tracing::warn!(
                "the module API's CA is not known (no self-signed certificate, no --validating-webhook-ca or --offload-module-ca): wasm steps with runOn: Job are refused"
            );
            return Ok(());
        };
        processors.set_offload(OffloadTarget {
            image,
            module_url: self.offload_module_url.clone().unwrap_or(service),
            server_name: self.offload_module_server_name.clone(),
            ca,
            catalog,
        });
        Ok(())
    }
}
