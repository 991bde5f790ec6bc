//! The `values` host interface: an addon module hook reads its values and config values
//! and submits JSON patches to them, as addon-operator's shell hooks do through
//! `$VALUES_PATH`, `$CONFIG_VALUES_PATH`, `$VALUES_JSON_PATCH_PATH` and
//! `$CONFIG_VALUES_JSON_PATCH_PATH`.
//!
//! The values are given per call ([`HookValues`]); a call without them (a hook outside
//! an addon module) gets an error from every function. Patches are parsed as RFC 6902
//! operations when submitted, so a malformed one is the guest's error at once, and are
//! bounded by the call's patch budgets.

use super::HostLimitExceeded;
use crate::bindings;

/// The values a module or global hook's call sees, as JSON documents
/// (`{"global": ..., "<valuesKey>": ...}`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookValues {
    /// The values (every layer and earlier patches merged).
    pub values: String,
    /// The config values.
    pub config_values: String,
}

/// The patches one call submitted, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ValuesPatches {
    /// Patches of the (memory) values.
    pub values: Vec<json_patch::PatchOperation>,
    /// Patches of the config values.
    pub config_values: Vec<json_patch::PatchOperation>,
}

/// Per-call state of the `values` interface.
#[derive(Debug)]
pub(crate) struct ValuesState {
    /// What the hook may read; `None` outside addon modules.
    pub(crate) given: Option<HookValues>,
    /// What it submitted.
    pub(crate) patches: ValuesPatches,
    /// Operations still allowed.
    remaining_operations: usize,
    /// The operation budget, for the error message.
    max_operations: usize,
    /// Bytes of patch text still allowed.
    remaining_bytes: usize,
    /// The byte budget, for the error message.
    max_bytes: usize,
}

/// What a call outside an addon module is told.
const NOT_A_MODULE_HOOK: &str =
    "values are only available to the hooks of addon modules and global hooks";

impl ValuesState {
    /// A fresh state with `given` values and the call's patch budgets.
    pub(crate) fn new(given: Option<HookValues>, max_operations: usize, max_bytes: usize) -> Self {
        Self {
            given,
            patches: ValuesPatches::default(),
            remaining_operations: max_operations,
            max_operations,
            remaining_bytes: max_bytes,
            max_bytes,
        }
    }

    fn read(&self, config: bool) -> Result<String, String> {
        let given = self.given.as_ref().ok_or(NOT_A_MODULE_HOOK)?;
        Ok(if config {
            given.config_values.clone()
        } else {
            given.values.clone()
        })
    }

    /// Parses and buffers one patch (an array of operations or one operation). A
    /// malformed patch is the guest's error (`Ok(Err(reason))`); one past the call's
    /// budget traps.
    pub(crate) fn queue(
        &mut self,
        patch: &str,
        config: bool,
    ) -> wasmtime::Result<Result<(), String>> {
        if self.given.is_none() {
            return Ok(Err(NOT_A_MODULE_HOOK.to_owned()));
        }
        let value: serde_json::Value = match serde_json::from_str(patch) {
            Ok(value) => value,
            Err(e) => return Ok(Err(format!("the patch is not valid JSON: {e}"))),
        };
        let items = match value {
            serde_json::Value::Array(items) => items,
            one => vec![one],
        };
        let mut operations = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            match serde_json::from_value::<json_patch::PatchOperation>(item.clone()) {
                Ok(op) => operations.push(op),
                Err(e) => {
                    return Ok(Err(format!(
                        "operation {i}: {item} is not a JSON Patch operation: {e}"
                    )));
                }
            }
        }
        if operations.len() > self.remaining_operations {
            return Err(wasmtime::Error::new(HostLimitExceeded::PatchOperations {
                limit: self.max_operations,
            }));
        }
        if patch.len() > self.remaining_bytes {
            return Err(wasmtime::Error::new(HostLimitExceeded::PatchBytes {
                limit: self.max_bytes,
            }));
        }
        self.remaining_operations -= operations.len();
        self.remaining_bytes -= patch.len();
        let target = if config {
            &mut self.patches.config_values
        } else {
            &mut self.patches.values
        };
        target.extend(operations);
        Ok(Ok(()))
    }
}

impl bindings::values::Host for ValuesState {
    fn get(&mut self) -> wasmtime::Result<Result<String, String>> {
        Ok(self.read(false))
    }

    fn get_config(&mut self) -> wasmtime::Result<Result<String, String>> {
        Ok(self.read(true))
    }

    fn patch(&mut self, patch: String) -> wasmtime::Result<Result<(), String>> {
        self.queue(&patch, false)
    }

    fn patch_config(&mut self, patch: String) -> wasmtime::Result<Result<(), String>> {
        self.queue(&patch, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> ValuesState {
        ValuesState::new(
            Some(HookValues {
                values: r#"{"global":{},"echo":{"replicas":1}}"#.to_owned(),
                config_values: r#"{"echo":{}}"#.to_owned(),
            }),
            3,
            1024,
        )
    }

    #[test]
    fn patches_are_parsed_when_submitted_and_kept_apart() {
        let mut s = state();
        assert_eq!(
            s.read(false).unwrap(),
            r#"{"global":{},"echo":{"replicas":1}}"#
        );
        s.queue(
            r#"[{"op":"replace","path":"/echo/replicas","value":2}]"#,
            false,
        )
        .unwrap()
        .unwrap();
        s.queue(r#"{"op":"add","path":"/echo/debug","value":true}"#, true)
            .unwrap()
            .unwrap();
        assert_eq!(s.patches.values.len(), 1);
        assert_eq!(s.patches.config_values.len(), 1);
        let err = s.queue(r#"[{"op":"move"}]"#, false).unwrap().unwrap_err();
        assert!(err.contains("operation 0"), "{err}");
        let err = s.queue("not json", false).unwrap().unwrap_err();
        assert!(err.contains("not valid JSON"), "{err}");
    }

    #[test]
    fn budgets_trap_and_outside_modules_every_call_errs() {
        let mut s = state();
        let four = r#"[{"op":"remove","path":"/a"},{"op":"remove","path":"/b"},
            {"op":"remove","path":"/c"},{"op":"remove","path":"/d"}]"#;
        assert!(s.queue(four, false).is_err());
        let mut outside = ValuesState::new(None, 3, 1024);
        assert!(outside.read(true).unwrap_err().contains("addon modules"));
        let err = outside
            .queue(r#"{"op":"remove","path":"/a"}"#, false)
            .unwrap()
            .unwrap_err();
        assert!(err.contains("addon modules"), "{err}");
    }
}
