//! The runner context (Capact's: name, dry run, timeout, platform) as each kind of
//! runner hands it on: environment variables for scripts and Jobs, a JSON file in a
//! Job, Workflow parameters for Argo, and the WIT record for wasm guests.
//!
//! One [`RunContext`] is built per run from the [`RunRequest`] and the process'
//! [`Platform`], so every runner spells the same facts the same way.

use super::RunRequest;
use operon_data::model::{OwnerReference, RunnerContext};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Where the engine runs: the platform part of the runner context.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Platform {
    /// A name for the cluster, from `OPERON_CLUSTER_NAME` (Kubernetes has no name for
    /// the cluster an API server serves).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
}

impl Platform {
    /// The platform as this process' environment describes it.
    pub fn from_env() -> Self {
        Self {
            cluster: std::env::var("OPERON_CLUSTER_NAME")
                .ok()
                .filter(|name| !name.is_empty()),
        }
    }
}

/// Everything a runner tells the step about its run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunContext {
    /// The run's name (`namespace/diagnosis/node-N`).
    pub name: String,
    /// Whether the run must not change anything.
    pub dry_run: bool,
    /// The run's budget.
    pub timeout: Duration,
    /// The node the run is about.
    pub node: Option<String>,
    /// The namespace the run belongs to.
    pub namespace: Option<String>,
    /// The object that asked for the run.
    pub owner: Option<OwnerReference>,
    /// Which cluster.
    pub platform: Platform,
    /// The W3C trace context of the span the run belongs to, when traces are exported:
    /// a script or a Job's container gets it as `TRACEPARENT` to continue the trace.
    pub traceparent: Option<String>,
}

/// The Capact-shaped JSON of a context (what a Job finds at `$RUNNER_CONTEXT_PATH`).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContextFile {
    name: String,
    #[serde(default)]
    dry_run: bool,
    timeout: String,
    platform: PlatformFile,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PlatformFile {
    #[serde(rename = "type", default)]
    type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cluster: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner_ref: Option<OwnerReferenceFile>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnerReferenceFile {
    api_version: String,
    kind: String,
    name: String,
    #[serde(default)]
    uid: String,
}

impl RunContext {
    /// The context of `request` on `platform`.
    pub(crate) fn new(request: &RunRequest, platform: &Platform) -> Self {
        Self {
            name: request.name.clone(),
            dry_run: request.dry_run,
            timeout: request.timeout,
            node: request.node.clone(),
            namespace: request.namespace.clone(),
            owner: request
                .owner
                .clone()
                .map(|(kind, name, uid)| OwnerReference {
                    api_version: operon_data::api::API_VERSION.to_owned(),
                    kind,
                    name,
                    uid,
                }),
            platform: platform.clone(),
            traceparent: crate::trace::traceparent(),
        }
    }

    /// The context as the WIT record a wasm guest gets (guests built against
    /// `operon:engine@0.3.0` and later also see the cluster).
    pub fn wasm(&self) -> RunnerContext {
        RunnerContext {
            name: self.name.clone(),
            dry_run: self.dry_run,
            timeout_ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
            node: self.node.clone(),
            namespace: self.namespace.clone(),
            owner: self.owner.clone(),
            cluster: self.platform.cluster.clone(),
        }
    }

    /// The context as `(name, value)` pairs, each named `OPERON_*`; unknown facts are
    /// empty strings so a step can test for them without `set -u` failures. With a
    /// trace being recorded, `TRACEPARENT` too (absent otherwise: an empty one is
    /// invalid to the SDKs that read it).
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        let mut env = self.pairs("OPERON_", |name| {
            name.to_ascii_uppercase().replace('-', "_")
        });
        if let Some(traceparent) = &self.traceparent {
            env.push((
                crate::trace::TRACEPARENT_ENV.to_owned(),
                traceparent.clone(),
            ));
        }
        env
    }

    /// The context as Argo Workflow parameters, each named `operon-*`; with a trace
    /// being recorded, `operon-traceparent` too, for the Workflow's steps to continue
    /// it (`{{workflow.parameters.operon-traceparent}}` into their `TRACEPARENT`).
    pub(crate) fn parameters(&self) -> Vec<(String, String)> {
        let mut parameters = self.pairs("operon-", str::to_owned);
        if let Some(traceparent) = &self.traceparent {
            parameters.push((
                crate::trace::TRACEPARENT_PARAMETER.to_owned(),
                traceparent.clone(),
            ));
        }
        parameters
    }

    fn pairs(&self, prefix: &str, spell: impl Fn(&str) -> String) -> Vec<(String, String)> {
        let owner = self.owner.as_ref();
        [
            ("run-name", self.name.clone()),
            ("dry-run", self.dry_run.to_string()),
            ("timeout-seconds", self.timeout.as_secs().max(1).to_string()),
            ("node", self.node.clone().unwrap_or_default()),
            ("namespace", self.namespace.clone().unwrap_or_default()),
            (
                "owner-kind",
                owner.map(|o| o.kind.clone()).unwrap_or_default(),
            ),
            (
                "owner-name",
                owner.map(|o| o.name.clone()).unwrap_or_default(),
            ),
            (
                "owner-uid",
                owner.map(|o| o.uid.clone()).unwrap_or_default(),
            ),
            ("cluster", self.platform.cluster.clone().unwrap_or_default()),
        ]
        .into_iter()
        .map(|(name, value)| (format!("{prefix}{}", spell(name)), value))
        .collect()
    }

    /// The context as a JSON document in Capact's runner-context shape (`name`,
    /// `dryRun`, `timeout`, `platform` with the namespace and the owner reference).
    pub fn to_json(&self) -> String {
        let file = ContextFile {
            name: self.name.clone(),
            dry_run: self.dry_run,
            timeout: humantime::format_duration(self.timeout).to_string(),
            platform: PlatformFile {
                type_: "kubernetes".to_owned(),
                cluster: self.platform.cluster.clone(),
                node: self.node.clone(),
                namespace: self.namespace.clone(),
                owner_ref: self.owner.as_ref().map(|o| OwnerReferenceFile {
                    api_version: o.api_version.clone(),
                    kind: o.kind.clone(),
                    name: o.name.clone(),
                    uid: o.uid.clone(),
                }),
            },
        };
        serde_json::to_string_pretty(&file).unwrap_or_default()
    }

    /// The context a document made by [`Self::to_json`] describes: how the container
    /// of an offloaded wasm step learns its run's context.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let file: ContextFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let timeout = humantime::parse_duration(&file.timeout)
            .map_err(|e| format!("timeout {:?}: {e}", file.timeout))?;
        Ok(Self {
            name: file.name,
            dry_run: file.dry_run,
            timeout,
            node: file.platform.node,
            namespace: file.platform.namespace,
            owner: file.platform.owner_ref.map(|o| OwnerReference {
                api_version: o.api_version,
                kind: o.kind,
                name: o.name,
                uid: o.uid,
            }),
            platform: Platform {
                cluster: file.platform.cluster,
            },
            traceparent: None,
        })
    }
}

/// The namespace a run's cluster objects go to: the run's own, else the client's
/// default one, else `default`.
pub(crate) fn namespace(request: &RunRequest, client: Option<&kube::Client>) -> String {
    request.namespace.clone().unwrap_or_else(|| {
        client
            .map_or("default", |c| c.default_namespace())
            .to_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn context() -> RunContext {
        let request = RunRequest {
            name: "ops/diag-1/node-2".to_owned(),
            input: BTreeMap::new(),
            results: BTreeMap::new(),
            node: Some("n1".to_owned()),
            namespace: Some("ops".to_owned()),
            owner: Some((
                "Diagnosis".to_owned(),
                "diag-1".to_owned(),
                "u-1".to_owned(),
            )),
            dry_run: true,
            timeout: Duration::from_secs(90),
        };
        RunContext::new(
            &request,
            &Platform {
                cluster: Some("prod-eu".to_owned()),
            },
        )
    }

    #[test]
    fn every_fact_reaches_env_parameters_and_the_file() {
        let c = context();
        let env: BTreeMap<String, String> = c.env().into_iter().collect();
        assert_eq!(env["OPERON_RUN_NAME"], "ops/diag-1/node-2");
        assert_eq!(env["OPERON_DRY_RUN"], "true");
        assert_eq!(env["OPERON_TIMEOUT_SECONDS"], "90");
        assert_eq!(env["OPERON_NODE"], "n1");
        assert_eq!(env["OPERON_NAMESPACE"], "ops");
        assert_eq!(env["OPERON_OWNER_KIND"], "Diagnosis");
        assert_eq!(env["OPERON_OWNER_UID"], "u-1");
        assert_eq!(env["OPERON_CLUSTER"], "prod-eu");
        let params: BTreeMap<String, String> = c.parameters().into_iter().collect();
        assert_eq!(params["operon-owner-name"], "diag-1");
        assert_eq!(params.len(), env.len());
        let file: serde_json::Value = serde_json::from_str(&c.to_json()).unwrap();
        assert_eq!(
            file,
            serde_json::json!({
                "name": "ops/diag-1/node-2", "dryRun": true, "timeout": "1m 30s",
                "platform": {"type": "kubernetes", "cluster": "prod-eu", "node": "n1",
                    "namespace": "ops", "ownerRef": {"apiVersion": "operon.dev/v1alpha1",
                    "kind": "Diagnosis", "name": "diag-1", "uid": "u-1"}},
            })
        );
        assert_eq!(c.wasm().timeout_ms, 90_000);
        assert_eq!(c.wasm().cluster.as_deref(), Some("prod-eu"));
    }

    #[test]
    fn the_file_reads_back_as_the_context() {
        let c = context();
        assert_eq!(RunContext::from_json(&c.to_json()).unwrap(), c);
        let bare =
            RunContext::from_json(r#"{"name": "x", "timeout": "5s", "platform": {}}"#).unwrap();
        assert_eq!(bare.timeout, Duration::from_secs(5));
        assert!(!bare.dry_run && bare.owner.is_none());
        let err = RunContext::from_json(r#"{"name": "x", "timeout": "soon", "platform": {}}"#)
            .unwrap_err();
        assert!(err.contains("timeout \"soon\""), "{err}");
    }
}
