//! The `kubernetes` host interface: buffers the patch operations a guest submits.
//!
//! Nothing is applied here. The caller applies the buffer after the run succeeds, so a
//! failed or timed-out run changes nothing in the cluster. [`KubernetesState::queue`]
//! does the work; each linked WIT version's `Host` impl only translates and calls it.

use super::HostLimitExceeded;
use crate::{bindings, convert};
use operon_data::model::PatchOperation;

/// Per-call state of the `kubernetes` interface.
#[derive(Debug)]
pub(crate) struct KubernetesState {
    /// Operations submitted so far, in order.
    pub(crate) operations: Vec<PatchOperation>,
    /// How many operations one run may submit.
    max_operations: usize,
    /// Bytes of JSON and filters still allowed across all operations.
    remaining_bytes: usize,
    /// The byte budget this call started with, for the error message.
    max_bytes: usize,
}

impl KubernetesState {
    /// A fresh state allowing `max_operations` operations of `max_bytes` in total.
    pub(crate) fn new(max_operations: usize, max_bytes: usize) -> Self {
        Self {
            operations: Vec::new(),
            max_operations,
            remaining_bytes: max_bytes,
            max_bytes,
        }
    }
}

/// Checks what can be checked before the cluster sees an operation: JSON syntax.
/// Returns the payload size counted against the byte budget.
fn validate(operation: &PatchOperation) -> Result<usize, String> {
    fn json(what: &str, text: &str) -> Result<usize, String> {
        serde_json::from_str::<serde_json::Value>(text)
            .map(|_| text.len())
            .map_err(|e| format!("{what} is not valid JSON: {e}"))
    }
    match operation {
        PatchOperation::Create(spec)
        | PatchOperation::CreateOrUpdate(spec)
        | PatchOperation::CreateIfNotExists(spec) => {
            let value: serde_json::Value = serde_json::from_str(&spec.object)
                .map_err(|e| format!("object is not valid JSON: {e}"))?;
            if !value.is_object() {
                return Err("object must be a JSON object".to_owned());
            }
            Ok(spec.object.len())
        }
        PatchOperation::Delete(target)
        | PatchOperation::DeleteInBackground(target)
        | PatchOperation::DeleteNonCascading(target) => {
            if target.name.is_empty() || target.kind.is_empty() {
                return Err("delete needs a kind and a name".to_owned());
            }
            Ok(target.name.len() + target.kind.len())
        }
        PatchOperation::JqPatch(spec) => {
            if spec.jq_filter.trim().is_empty() {
                return Err("jq-filter is empty".to_owned());
            }
            Ok(spec.jq_filter.len())
        }
        PatchOperation::MergePatch(spec) => json("merge patch", &spec.patch),
        PatchOperation::JsonPatch(spec) => {
            let value: serde_json::Value = serde_json::from_str(&spec.patch)
                .map_err(|e| format!("JSON patch is not valid JSON: {e}"))?;
            if !value.is_array() {
                return Err("JSON patch must be an array of operations".to_owned());
            }
            Ok(spec.patch.len())
        }
    }
}

impl KubernetesState {
    /// Buffers `operation`. A malformed one is the guest's error (`Ok(Err(reason))`);
    /// one past the run's budget traps.
    pub(crate) fn queue(
        &mut self,
        operation: PatchOperation,
    ) -> wasmtime::Result<Result<(), String>> {
        if self.operations.len() >= self.max_operations {
            return Err(wasmtime::Error::new(HostLimitExceeded::PatchOperations {
                limit: self.max_operations,
            }));
        }
        let size = match validate(&operation) {
            Ok(size) => size,
            Err(reason) => return Ok(Err(reason)),
        };
        if size > self.remaining_bytes {
            return Err(wasmtime::Error::new(HostLimitExceeded::PatchBytes {
                limit: self.max_bytes,
            }));
        }
        self.remaining_bytes -= size;
        self.operations.push(operation);
        Ok(Ok(()))
    }
}

impl bindings::kubernetes::Host for KubernetesState {
    fn submit(
        &mut self,
        operation: bindings::kubernetes::PatchOperation,
    ) -> wasmtime::Result<Result<(), String>> {
        self.queue(convert::patch_operation(operation))
    }
}

impl bindings::v0_2::kubernetes::Host for KubernetesState {
    fn submit(
        &mut self,
        operation: bindings::v0_2::kubernetes::PatchOperation,
    ) -> wasmtime::Result<Result<(), String>> {
        self.queue(convert::v0_2::patch_operation(operation))
    }
}

impl bindings::v0_1::kubernetes::Host for KubernetesState {
    fn submit(
        &mut self,
        operation: bindings::v0_1::kubernetes::PatchOperation,
    ) -> wasmtime::Result<Result<(), String>> {
        self.queue(convert::v0_1::patch_operation(operation))
    }
}
