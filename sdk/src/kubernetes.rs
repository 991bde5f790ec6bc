//! Changes to Kubernetes objects, built with [`Patch`] and submitted to the host.
//!
//! The host buffers submitted operations and applies them in order only after the run
//! returns successfully; a failed run or a dry run applies nothing. These are the patch
//! operations of shell-operator's `$KUBERNETES_PATCH_PATH`.

use serde_json::Value;

use crate::Error;
use crate::bindings::operation::operon::engine::kubernetes as wit;

pub use wit::{CreateSpec, JqPatchSpec, ObjectRef, PatchOperation, PatchSpec};

/// One change to a Kubernetes object, ready to [`submit`](Patch::submit).
///
/// Start from a constructor named after the operation, refine it, then submit it:
///
/// ```no_run
/// use operon_sdk::Patch;
/// use serde_json::json;
///
/// # fn main() -> Result<(), operon_sdk::Error> {
/// Patch::merge("Pod", Some("default"), "web-0", json!({"metadata": {"labels": {"checked": "yes"}}}))
///     .ignore_missing_object()
///     .submit()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Patch {
    /// Built directly in the contract's shape so refinements edit what will be sent.
    operation: PatchOperation,
}

impl Patch {
    /// A JSON merge patch (RFC 7386) of the object `kind` `namespace`/`name`.
    ///
    /// `namespace` is `None` for cluster-scoped objects.
    ///
    /// ```
    /// use operon_sdk::Patch;
    /// use serde_json::json;
    ///
    /// let patch = Patch::merge("Node", None, "worker-1", json!({"spec": {"unschedulable": true}}));
    /// # let _ = patch;
    /// ```
    pub fn merge(
        kind: impl Into<String>,
        namespace: Option<&str>,
        name: impl Into<String>,
        patch: Value,
    ) -> Self {
        Self::from(PatchOperation::MergePatch(patch_spec(
            kind, namespace, name, patch,
        )))
    }

    /// A JSON Patch (RFC 6902), an array of operations, of the object `kind`
    /// `namespace`/`name`.
    ///
    /// ```
    /// use operon_sdk::Patch;
    /// use serde_json::json;
    ///
    /// let patch = Patch::json_patch(
    ///     "Deployment",
    ///     Some("shop"),
    ///     "cart",
    ///     json!([{"op": "replace", "path": "/spec/replicas", "value": 3}]),
    /// );
    /// # let _ = patch;
    /// ```
    pub fn json_patch(
        kind: impl Into<String>,
        namespace: Option<&str>,
        name: impl Into<String>,
        operations: Value,
    ) -> Self {
        Self::from(PatchOperation::JsonPatch(patch_spec(
            kind, namespace, name, operations,
        )))
    }

    /// Replaces the object `kind` `namespace`/`name` with the output of a jq filter.
    ///
    /// ```
    /// let patch = operon_sdk::Patch::jq(
    ///     "ConfigMap",
    ///     Some("default"),
    ///     "settings",
    ///     r#".data.checked = "yes""#,
    /// );
    /// # let _ = patch;
    /// ```
    pub fn jq(
        kind: impl Into<String>,
        namespace: Option<&str>,
        name: impl Into<String>,
        filter: impl Into<String>,
    ) -> Self {
        Self::from(PatchOperation::JqPatch(JqPatchSpec {
            target: object_ref(kind, namespace, name),
            jq_filter: filter.into(),
            subresource: None,
            ignore_missing_object: false,
        }))
    }

    /// Creates `object`; applying it fails if the object already exists.
    ///
    /// ```
    /// use serde_json::json;
    ///
    /// let patch = operon_sdk::Patch::create(json!({
    ///     "apiVersion": "v1",
    ///     "kind": "ConfigMap",
    ///     "metadata": {"name": "report", "namespace": "default"},
    ///     "data": {"status": "ok"},
    /// }));
    /// # let _ = patch;
    /// ```
    pub fn create(object: Value) -> Self {
        Self::from(PatchOperation::Create(create_spec(object)))
    }

    /// Creates `object`, or replaces it if it exists.
    ///
    /// ```
    /// use serde_json::json;
    ///
    /// let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "report"}});
    /// let patch = operon_sdk::Patch::create_or_update(object);
    /// # let _ = patch;
    /// ```
    pub fn create_or_update(object: Value) -> Self {
        Self::from(PatchOperation::CreateOrUpdate(create_spec(object)))
    }

    /// Creates `object` unless it exists.
    ///
    /// ```
    /// use serde_json::json;
    ///
    /// let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops"}});
    /// let patch = operon_sdk::Patch::create_if_not_exists(object);
    /// # let _ = patch;
    /// ```
    pub fn create_if_not_exists(object: Value) -> Self {
        Self::from(PatchOperation::CreateIfNotExists(create_spec(object)))
    }

    /// Deletes the object in the foreground, waiting for its dependents.
    ///
    /// ```
    /// let patch = operon_sdk::Patch::delete("Pod", Some("default"), "stuck-0");
    /// # let _ = patch;
    /// ```
    pub fn delete(
        kind: impl Into<String>,
        namespace: Option<&str>,
        name: impl Into<String>,
    ) -> Self {
        Self::from(PatchOperation::Delete(object_ref(kind, namespace, name)))
    }

    /// Deletes the object and lets the garbage collector remove its dependents.
    ///
    /// ```
    /// let patch = operon_sdk::Patch::delete_in_background("Job", Some("batch"), "report-1");
    /// # let _ = patch;
    /// ```
    pub fn delete_in_background(
        kind: impl Into<String>,
        namespace: Option<&str>,
        name: impl Into<String>,
    ) -> Self {
        Self::from(PatchOperation::DeleteInBackground(object_ref(
            kind, namespace, name,
        )))
    }

    /// Deletes the object and orphans its dependents.
    ///
    /// ```
    /// let patch = operon_sdk::Patch::delete_non_cascading("ReplicaSet", Some("shop"), "cart-7d9");
    /// # let _ = patch;
    /// ```
    pub fn delete_non_cascading(
        kind: impl Into<String>,
        namespace: Option<&str>,
        name: impl Into<String>,
    ) -> Self {
        Self::from(PatchOperation::DeleteNonCascading(object_ref(
            kind, namespace, name,
        )))
    }

    /// Goes through a subresource such as `status`. Deletions have no subresource, so this
    /// leaves them unchanged.
    ///
    /// ```
    /// use serde_json::json;
    ///
    /// let patch = operon_sdk::Patch::merge("Diagnosis", Some("ops"), "node-3", json!({"status": {"phase": "Done"}}))
    ///     .subresource("status");
    /// # let _ = patch;
    /// ```
    pub fn subresource(mut self, subresource: impl Into<String>) -> Self {
        let subresource = Some(subresource.into());
        match &mut self.operation {
            PatchOperation::Create(spec)
            | PatchOperation::CreateOrUpdate(spec)
            | PatchOperation::CreateIfNotExists(spec) => spec.subresource = subresource,
            PatchOperation::MergePatch(spec) | PatchOperation::JsonPatch(spec) => {
                spec.subresource = subresource;
            }
            PatchOperation::JqPatch(spec) => spec.subresource = subresource,
            PatchOperation::Delete(_)
            | PatchOperation::DeleteInBackground(_)
            | PatchOperation::DeleteNonCascading(_) => {}
        }
        self
    }

    /// Makes a missing object not an error, for patches that race with deletion. Only
    /// merge, JSON and jq patches can ignore a missing object; others are left unchanged.
    ///
    /// ```
    /// use serde_json::json;
    ///
    /// let patch = operon_sdk::Patch::merge("Pod", Some("default"), "web-0", json!({}))
    ///     .ignore_missing_object();
    /// # let _ = patch;
    /// ```
    pub fn ignore_missing_object(mut self) -> Self {
        match &mut self.operation {
            PatchOperation::MergePatch(spec) | PatchOperation::JsonPatch(spec) => {
                spec.ignore_missing_object = true;
            }
            PatchOperation::JqPatch(spec) => spec.ignore_missing_object = true,
            _ => {}
        }
        self
    }

    /// Names the target's `apiVersion`, e.g. `apps/v1`, instead of the preferred version.
    /// Objects to create carry their own `apiVersion`, so this leaves creations unchanged.
    ///
    /// ```
    /// let patch = operon_sdk::Patch::delete("Deployment", Some("shop"), "cart").api_version("apps/v1");
    /// # let _ = patch;
    /// ```
    pub fn api_version(mut self, api_version: impl Into<String>) -> Self {
        let api_version = Some(api_version.into());
        match &mut self.operation {
            PatchOperation::Delete(target)
            | PatchOperation::DeleteInBackground(target)
            | PatchOperation::DeleteNonCascading(target) => target.api_version = api_version,
            PatchOperation::MergePatch(spec) | PatchOperation::JsonPatch(spec) => {
                spec.target.api_version = api_version;
            }
            PatchOperation::JqPatch(spec) => spec.target.api_version = api_version,
            PatchOperation::Create(_)
            | PatchOperation::CreateOrUpdate(_)
            | PatchOperation::CreateIfNotExists(_) => {}
        }
        self
    }

    /// The operation as the contract describes it, e.g. to check it in a unit test.
    ///
    /// ```
    /// use operon_sdk::kubernetes::PatchOperation;
    ///
    /// let patch = operon_sdk::Patch::delete("Pod", None, "x");
    /// assert!(matches!(patch.operation(), PatchOperation::Delete(target) if target.name == "x"));
    /// ```
    pub fn operation(&self) -> &PatchOperation {
        &self.operation
    }

    /// Queues the operation with the host. Fails when the run may submit no more, or when
    /// the host rejects the operation.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), operon_sdk::Error> {
    /// operon_sdk::Patch::delete("Pod", Some("default"), "stuck-0").submit()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn submit(&self) -> Result<(), Error> {
        submit(&self.operation)
    }
}

impl From<PatchOperation> for Patch {
    fn from(operation: PatchOperation) -> Self {
        Self { operation }
    }
}

impl From<Patch> for PatchOperation {
    fn from(patch: Patch) -> Self {
        patch.operation
    }
}

/// Queues one operation in the contract's own shape; [`Patch::submit`] is usually simpler.
///
/// ```no_run
/// use operon_sdk::kubernetes::{submit, ObjectRef, PatchOperation};
///
/// # fn main() -> Result<(), operon_sdk::Error> {
/// submit(&PatchOperation::Delete(ObjectRef {
///     api_version: None,
///     kind: "Pod".into(),
///     namespace: Some("default".into()),
///     name: "stuck-0".into(),
/// }))?;
/// # Ok(())
/// # }
/// ```
pub fn submit(operation: &PatchOperation) -> Result<(), Error> {
    wit::submit(operation).map_err(|err| Error::new(format_args!("submitting a patch: {err}")))
}

fn object_ref(
    kind: impl Into<String>,
    namespace: Option<&str>,
    name: impl Into<String>,
) -> ObjectRef {
    ObjectRef {
        api_version: None,
        kind: kind.into(),
        namespace: namespace.map(str::to_owned),
        name: name.into(),
    }
}

fn patch_spec(
    kind: impl Into<String>,
    namespace: Option<&str>,
    name: impl Into<String>,
    patch: Value,
) -> PatchSpec {
    PatchSpec {
        target: object_ref(kind, namespace, name),
        patch: patch.to_string(),
        subresource: None,
        ignore_missing_object: false,
    }
}

fn create_spec(object: Value) -> CreateSpec {
    CreateSpec {
        object: object.to_string(),
        subresource: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn refinements_reach_the_operation() {
        let patch = Patch::merge("Pod", Some("default"), "web-0", json!({"a": 1}))
            .subresource("status")
            .ignore_missing_object()
            .api_version("v1");
        let PatchOperation::MergePatch(spec) = patch.operation() else {
            panic!("expected a merge patch, got {patch:?}");
        };
        assert_eq!(spec.target.api_version.as_deref(), Some("v1"));
        assert_eq!(spec.target.namespace.as_deref(), Some("default"));
        assert_eq!(spec.subresource.as_deref(), Some("status"));
        assert!(spec.ignore_missing_object);
        assert_eq!(spec.patch, r#"{"a":1}"#);
    }

    #[test]
    fn refinements_that_do_not_apply_change_nothing() {
        let delete = Patch::delete("Pod", None, "x");
        assert_eq!(
            delete.clone().subresource("status").ignore_missing_object(),
            delete
        );
        let create = Patch::create(json!({"kind": "Namespace"}));
        assert_eq!(create.clone().api_version("v1"), create);
    }
}
