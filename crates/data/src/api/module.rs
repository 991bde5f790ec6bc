//! `Module`: a name for an uploaded wasm module (cluster-scoped). The spec records the
//! digest the name points to and what the module is, written by the upload API of
//! `operon serve`; the status lists the replicas that hold the bytes and serve them to
//! the others. The bytes themselves live in each replica's module store, never in the
//! API server (etcd caps objects near 1.5 MiB).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A Module: `metadata.name` → the module with `spec.digest`. Renaming a module to new
/// bytes updates `spec.digest`; Operations naming the module follow it, Operations
/// naming a digest stay pinned.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "operon.dev",
    version = "v1alpha1",
    kind = "Module",
    plural = "modules",
    shortname = "mod",
    status = "ModuleStatus",
    printcolumn = r#"{"name":"World","type":"string","jsonPath":".spec.world"}"#,
    printcolumn = r#"{"name":"Digest","type":"string","jsonPath":".spec.digest"}"#,
    printcolumn = r#"{"name":"Size","type":"integer","jsonPath":".spec.size"}"#,
    printcolumn = r#"{"name":"Uploaded-By","type":"string","jsonPath":".spec.uploadedBy"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ModuleSpec {
    /// `sha256:<64 hex digits>` of the module's bytes.
    #[schemars(regex(pattern = r"^sha256:[0-9a-f]{64}$"))]
    pub digest: String,
    /// The world the module implements: `operation` or `hook`.
    pub world: ModuleWorld,
    /// The version of the `operon:engine` WIT package it was built against.
    pub wit_version: String,
    /// Its size in bytes.
    pub size: i64,
    /// The interfaces it imports, as the component names them: what it may ask of
    /// the host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<String>,
    /// The user who uploaded it, as the API server authenticated them.
    pub uploaded_by: String,
    /// When it was uploaded.
    pub uploaded_at: Time,
}

/// The world of a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ModuleWorld {
    /// `operon:engine/operation`: a step of an OperationSet.
    Operation,
    /// `operon:engine/hook`: reacts to cluster events.
    Hook,
}

/// Where a Module's bytes can be fetched.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleStatus {
    /// The replicas of `operon serve` holding the module's bytes, each serving them at
    /// `GET <url>/v1/modules/by-digest/<sha256>`. A replica or agent lacking the bytes
    /// fetches them from one of these and checks the digest before keeping them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<ModuleSource>,
}

/// One replica holding a module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleSource {
    /// The replica (its pod name).
    pub replica: String,
    /// The base URL of its module API, e.g. `https://10.1.2.3:9443`.
    pub url: String,
    /// The name its TLS certificate is checked against when it differs from the URL's
    /// host (replicas share a certificate for their Service's DNS name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// The digest it holds (the spec's, or an earlier one while it catches up).
    pub digest: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt as _;

    #[test]
    fn the_crd_is_cluster_scoped_with_printer_columns() {
        let crd = Module::crd();
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.plural, "modules");
        let columns: Vec<String> = crd.spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(
            columns,
            ["World", "Digest", "Size", "Uploaded-By", "Age"].map(String::from)
        );
    }
}
