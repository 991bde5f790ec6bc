//! `JQPatch` on the local cluster: the filter runs on a copy of the object, outside
//! the cluster's lock and without stalling the async runtime, and its output replaces
//! the object only if nothing wrote it meanwhile.
//!
//! A filter may run up to its time limit (`--jq-timeout`). Run under the lock, it would
//! hold every other watcher, list and write of the cluster for that long; run on a
//! runtime worker, it would stall that worker's other tasks (`hook run` runs several
//! hooks' queues at once). So it runs as the kube cluster runs it: read the object, run
//! the filter with `Filter::run_one_in_task`, then write the output if the
//! object is still the one the filter read (the kube cluster's `resourceVersion`
//! precondition), or run it again on the newer object.

use super::LocalCluster;
use crate::{ClusterError, describe_ref};
use operon_data::model::{JqPatchSpec, ObjectRef};
use serde_json::Value;
use std::cell::Cell;

/// How many times the filter runs when the object keeps changing under it, as many
/// as the kube cluster's attempts on a conflict.
const ATTEMPTS: usize = 5;

impl LocalCluster {
    pub(super) fn jq_patch(&self, spec: &JqPatchSpec) -> Result<(), ClusterError> {
        let what = format!("JQPatch of {}", describe_ref(&spec.target));
        let invalid = |reason: String| ClusterError::Invalid {
            what: what.clone(),
            reason,
        };
        // Compiled (or fetched from the cache) before anything else.
        let filter = operon_jq::compile(&spec.jq_filter).map_err(|e| invalid(e.to_string()))?;
        for _ in 0..ATTEMPTS {
            let read = self.object_at(&spec.target)?;
            let patched = match &read {
                Some(object) => Some(
                    filter
                        .run_one_in_task(object)
                        .map_err(|e| invalid(e.to_string()))?,
                ),
                None => None,
            };
            // `patch` calls the closure only when the object exists, under the lock:
            // the output is written only if the object is still the one it was made from.
            let changed = Cell::new(false);
            let result = self.patch(
                "JQPatch",
                &spec.target,
                spec.subresource.as_deref(),
                spec.ignore_missing_object,
                |current| match (&read, patched) {
                    (Some(read), Some(patched)) if read == current => Ok(patched),
                    _ => {
                        changed.set(true);
                        Err("the object changed while the filter ran".to_owned())
                    }
                },
            );
            if !changed.get() {
                return result;
            }
        }
        Err(ClusterError::ChangedWhileFiltering {
            what,
            attempts: ATTEMPTS,
        })
    }

    /// The object `target` names as it is now, or `None` when there is none; errors
    /// are those of a write to it (an unknown kind, a namespaced kind without a
    /// namespace).
    fn object_at(&self, target: &ObjectRef) -> Result<Option<Value>, ClusterError> {
        let state = self.lock();
        let index = state.resolve(target.api_version.as_deref(), &target.kind)?;
        let kind = &state.kinds[index];
        let key = super::target_key(
            &kind.info.resource,
            target.namespace.as_deref(),
            &target.name,
        )?;
        Ok(kind.objects.get(&key).map(|o| Value::clone(o)))
    }
}

#[cfg(test)]
mod tests;
