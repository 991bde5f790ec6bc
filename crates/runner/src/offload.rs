//! Offloading a wasm step to a Kubernetes Job (`wasm.runOn: Job`): the `job` runner
//! with Operon's own image, whose container runs `operon op run` on the module by
//! digest.
//!
//! The reference (a name or a path) is resolved to a digest when the runner is built,
//! so the Job pins the bytes the engine checked: a Module renamed or re-pushed while
//! the Job waits for a node does not change what it runs. The container fetches the
//! bytes from the module API with its ServiceAccount token, checks their sha256 against
//! the digest, runs the component with the step's input and the runner context read
//! from the files the Job runner mounts, and writes its results as the termination
//! message the Job runner reads. The CA that signs the module API's certificate rides
//! in the step's input ConfigMap: it is public, and a Secret of the engine's namespace
//! cannot be mounted in the Diagnosis' namespace.

use super::job::{INPUT_DIR, JobRunner, RESULT_PATH};
use operon_data::api::WasmProcessor;
use operon_sandbox::ModuleDigest;
use operon_store::ModuleCatalog;
use std::sync::Arc;

/// The input ConfigMap's key holding the module API's CA.
pub const CA_FILE: &str = "module-ca.crt";
/// The input ConfigMap's key holding the results of earlier steps alone (the WIT
/// `operation-input` keeps them apart from the parameters).
pub(crate) const RESULTS_FILE: &str = "results.json";
/// The ServiceAccount token the kubelet mounts in every pod that does not opt out.
pub const TOKEN_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// Where offloaded steps run and fetch their modules from; set by `operon serve` (its
/// own module API) and by `operon agent` (the module API of `operon serve`).
#[derive(Clone)]
pub struct OffloadTarget {
    /// Operon's own image (the engine's), e.g. `ghcr.io/operon-dev/operon:0.1.0`.
    pub image: String,
    /// The module API as the Job's pod reaches it, e.g.
    /// `https://operon-webhooks.operon.svc:443`.
    pub module_url: String,
    /// The name the module API's certificate is checked against, when it differs from
    /// the URL's host.
    pub server_name: Option<String>,
    /// The CA (PEM) of the module API's certificate; a receiver so a rotated
    /// self-signed CA reaches the Jobs created after the rotation.
    pub ca: tokio::sync::watch::Receiver<Vec<u8>>,
    /// The store the module API serves (on an agent, its own copy, which follows the
    /// same Modules): a module it does not hold cannot be fetched by the Job, which is
    /// refused when the runner is built rather than in the pod.
    pub catalog: Option<Arc<ModuleCatalog>>,
}

impl std::fmt::Debug for OffloadTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OffloadTarget")
            .field("image", &self.image)
            .field("module_url", &self.module_url)
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

/// Why an offloaded step cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum OffloadError {
    /// This process cannot offload (no image, no module API, or no CA for it); its log
    /// at start says which.
    #[error(
        "wasm.runOn is Job but this process cannot offload steps (its log at start says why): `operon serve` offloads them while it serves the module API, given the engine's image (--image, env OPERON_IMAGE); `operon agent` given the image (--image), the module API's URL (--offload-module-url, env OPERON_OFFLOAD_MODULE_URL) and its CA (--offload-module-ca, else --module-source-ca); `operon run --dry-run --image IMAGE` shows the Job"
    )]
    NoTarget,
    /// The module is not in the store the module API serves.
    #[error(
        "wasm.runOn is Job but module {reference:?} ({digest}) is not in the module store, so the Job could not fetch it: upload it with `operon module push`"
    )]
    NotServed {
        /// The reference as written.
        reference: String,
        /// Its digest.
        digest: ModuleDigest,
    },
    /// The module API's CA, which the Job's pod checks its certificate with, has not
    /// arrived yet (a fresh install whose certificate Secret is still being made).
    #[error(
        "wasm.runOn is Job but the module API's CA is not there yet, so the Job could not check the module API's certificate: it is read again every few seconds (on a fresh install, the webhook certificate's Secret is being made)"
    )]
    NoCaYet,
}

impl OffloadTarget {
    /// The Job runner of `operation`'s offloaded `wasm` step, running the module whose
    /// digest is `digest` (resolved from `wasm.module` just before).
    pub(crate) fn runner(
        &self,
        client: Option<kube::Client>,
        operation: &str,
        wasm: &WasmProcessor,
        digest: ModuleDigest,
        platform: super::context::Platform,
    ) -> Result<JobRunner, OffloadError> {
        if let Some(catalog) = &self.catalog
            && !catalog.blobs().contains(&digest)
        {
            return Err(OffloadError::NotServed {
                reference: wasm.module.clone(),
                digest,
            });
        }
        // Without a client no Job is created (a local dry run shows it): no CA needed.
        if client.is_some() && self.ca.borrow().is_empty() {
            return Err(OffloadError::NoCaYet);
        }
        let processor = wasm.job_processor(
            &self.image,
            vec!["operon".to_owned()],
            self.args(wasm, &digest),
        );
        let ca = String::from_utf8_lossy(&self.ca.borrow()).into_owned();
        Ok(JobRunner::new(client, operation, processor, platform)
            .with_file(CA_FILE, ca)
            .with_results_file(RESULTS_FILE)
            .with_description(format!(
                "`operon op run` on module {digest} in {}",
                self.image
            )))
    }

    /// The container's arguments: `op run` on the digest, with the files the Job
    /// runner mounts. `wasm.config` goes as parameters, under the step's input as in
    /// the sandbox.
    fn args(&self, wasm: &WasmProcessor, digest: &ModuleDigest) -> Vec<String> {
        let mut args: Vec<String> = [
            "op",
            "run",
            "--digest",
            &digest.to_string(),
            "--module-url",
            &self.module_url,
        ]
        .map(str::to_owned)
        .to_vec();
        if let Some(name) = &self.server_name {
            args.extend(["--module-server-name".to_owned(), name.clone()]);
        }
        let file = |name: &str| format!("{INPUT_DIR}/{name}");
        args.extend([
            "--module-ca".to_owned(),
            file(CA_FILE),
            "--token-file".to_owned(),
            TOKEN_FILE.to_owned(),
            "--input-file".to_owned(),
            file("input.json"),
            "--results-file".to_owned(),
            file(RESULTS_FILE),
            "--context-file".to_owned(),
            file("context.json"),
            "--result-file".to_owned(),
            RESULT_PATH.to_owned(),
            "--no-cache".to_owned(),
        ]);
        for (key, value) in &wasm.config {
            args.extend(["--param".to_owned(), format!("{key}={value}")]);
        }
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RunRequest;
    use crate::processors::{ProcessorError, ProcessorSettings, Processors};
    use operon_data::api::{Operation, OperationSpec, Processor, WasmRunOn};
    use operon_sandbox::ModuleDigest;
    use std::time::Duration;

    fn offloaded(module: &str) -> Operation {
        let wasm = WasmProcessor {
            module: module.to_owned(),
            image_pull_secrets: Vec::new(),
            config: Default::default(),
            read_only_paths: Vec::new(),
            run_on: Some(WasmRunOn::Job),
            job: None,
        };
        Operation::new(
            "echo-offloaded",
            OperationSpec {
                processor: Processor::wasm(wasm, 30),
                storage: None,
            },
        )
    }

    #[tokio::test]
    async fn the_reference_is_pinned_to_its_digest_when_the_runner_is_built() {
        let processors = Processors::new(ProcessorSettings {
            cache_dir: None,
            ..ProcessorSettings::default()
        });
        let op = offloaded(operon_tests::ECHO);
        let err = processors
            .runner(&op, std::path::Path::new("/"))
            .err()
            .unwrap();
        assert!(
            matches!(err, ProcessorError::Offload(OffloadError::NoTarget)),
            "{err}"
        );
        assert!(err.to_string().contains("OPERON_IMAGE"), "{err}");

        processors.set_offload(OffloadTarget {
            image: "operon:dev".to_owned(),
            module_url: "https://127.0.0.1:9680".to_owned(),
            server_name: Some("operon-webhooks.operon.svc".to_owned()),
            ca: tokio::sync::watch::channel(Vec::new()).1,
            catalog: None,
        });
        let runner = processors.runner(&op, std::path::Path::new("/")).unwrap();
        let request = RunRequest {
            name: "ops/d/node-1".to_owned(),
            input: Default::default(),
            results: Default::default(),
            node: None,
            namespace: Some("ops".to_owned()),
            owner: None,
            dry_run: true,
            timeout: Duration::from_secs(30),
        };
        let dry = runner.dry_run(&request).await.unwrap();
        let digest = ModuleDigest::of(&std::fs::read(operon_tests::ECHO).unwrap());
        let args = &dry.detail.unwrap()["job"]["spec"]["template"]["spec"]["containers"][0]["args"];
        assert_eq!(args[3], digest.to_string());
        let args: Vec<&str> = args
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| a.as_str())
            .collect();
        let at = args
            .iter()
            .position(|a| *a == "--module-server-name")
            .unwrap();
        assert_eq!(args[at + 1], "operon-webhooks.operon.svc");
    }

    /// On an agent, a Diagnosis' node is the node the agent serves: with
    /// `onDiagnosisNode` the Job's pod is pinned there by name.
    #[tokio::test]
    async fn on_diagnosis_node_pins_the_pod_to_the_diagnosis_node() {
        let mut op = offloaded(operon_tests::ECHO);
        let wasm = op.spec.processor.wasm.as_mut().unwrap();
        wasm.job = Some(operon_data::api::WasmJob {
            on_diagnosis_node: true,
            ..Default::default()
        });
        let processors = Processors::new(ProcessorSettings {
            cache_dir: None,
            ..ProcessorSettings::default()
        });
        processors.set_offload(OffloadTarget {
            image: "operon:dev".to_owned(),
            module_url: "https://operon-webhooks.operon.svc:443".to_owned(),
            server_name: None,
            ca: tokio::sync::watch::channel(b"-----BEGIN CERTIFICATE-----\n".to_vec()).1,
            catalog: None,
        });
        let runner = processors.runner(&op, std::path::Path::new("/")).unwrap();
        let mut request = RunRequest {
            name: "ops/d/node-1".to_owned(),
            input: Default::default(),
            results: Default::default(),
            node: Some("local-node".to_owned()),
            namespace: Some("ops".to_owned()),
            owner: None,
            dry_run: true,
            timeout: Duration::from_secs(30),
        };
        let dry = runner.dry_run(&request).await.unwrap();
        let pod = &dry.detail.unwrap()["job"]["spec"]["template"]["spec"];
        assert_eq!(
            pod["affinity"],
            serde_json::json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["local-node"]}]}]}}})
        );
        assert_eq!(pod.get("nodeName"), None, "the scheduler still places it");

        request.node = None;
        let err = runner.dry_run(&request).await.unwrap_err();
        assert_eq!(
            err.message,
            "job.onDiagnosisNode is set but the Diagnosis names no node"
        );
    }
}
