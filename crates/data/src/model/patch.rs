//! Patch operations: the changes a hook or an operation asks the cluster for, in
//! shell-operator's `$KUBERNETES_PATCH_PATH` vocabulary.

use serde::{Deserialize, Serialize};

/// Identifies an existing object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ObjectRef {
    /// `apiVersion`, e.g. `v1` or `apps/v1`; `None` picks the preferred version.
    pub api_version: Option<String>,
    /// The kind, e.g. `Pod`.
    pub kind: String,
    /// The namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

/// An object to create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateSpec {
    /// The full object as JSON text.
    pub object: String,
    /// A subresource to create the object through, e.g. `status`.
    pub subresource: Option<String>,
}

/// A patch to apply to an existing object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchSpec {
    /// The object to patch.
    pub target: ObjectRef,
    /// The patch document as JSON text: a JSON merge patch (RFC 7386) or a JSON Patch
    /// (RFC 6902).
    pub patch: String,
    /// A subresource to patch, e.g. `status`.
    pub subresource: Option<String>,
    /// When true a missing object is not an error.
    pub ignore_missing_object: bool,
}

/// A jq filter whose output replaces the object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JqPatchSpec {
    /// The object to patch.
    pub target: ObjectRef,
    /// The jq filter, e.g. `.metadata.labels.checked = "yes"`.
    pub jq_filter: String,
    /// A subresource to patch, e.g. `status`.
    pub subresource: Option<String>,
    /// When true a missing object is not an error.
    pub ignore_missing_object: bool,
}

/// The patch operations of shell-operator's `$KUBERNETES_PATCH_PATH`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PatchOperation {
    /// `Create`: fails if the object exists.
    Create(CreateSpec),
    /// `CreateOrUpdate`: creates the object or replaces an existing one.
    CreateOrUpdate(CreateSpec),
    /// `CreateIfNotExists`: creates the object unless it exists.
    CreateIfNotExists(CreateSpec),
    /// `Delete`: foreground deletion, waiting for dependents.
    Delete(ObjectRef),
    /// `DeleteInBackground`: deletes and lets the garbage collector remove dependents.
    DeleteInBackground(ObjectRef),
    /// `DeleteNonCascading`: deletes and orphans dependents.
    DeleteNonCascading(ObjectRef),
    /// `JQPatch`: replaces the object with the output of a jq filter.
    JqPatch(JqPatchSpec),
    /// `MergePatch`: a JSON merge patch.
    MergePatch(PatchSpec),
    /// `JSONPatch`: an RFC 6902 JSON Patch.
    JsonPatch(PatchSpec),
}

impl PatchOperation {
    /// The operation's name in shell-operator's spelling (`MergePatch`, `JQPatch`...).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Create(_) => "Create",
            Self::CreateOrUpdate(_) => "CreateOrUpdate",
            Self::CreateIfNotExists(_) => "CreateIfNotExists",
            Self::Delete(_) => "Delete",
            Self::DeleteInBackground(_) => "DeleteInBackground",
            Self::DeleteNonCascading(_) => "DeleteNonCascading",
            Self::JqPatch(_) => "JQPatch",
            Self::MergePatch(_) => "MergePatch",
            Self::JsonPatch(_) => "JSONPatch",
        }
    }
}
