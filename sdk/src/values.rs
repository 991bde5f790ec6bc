//! The values of addon-operator modules, for the hooks of modules and global hooks: what
//! shell hooks read from `$VALUES_PATH` and `$CONFIG_VALUES_PATH` and write to
//! `$VALUES_JSON_PATCH_PATH` and `$CONFIG_VALUES_JSON_PATCH_PATH`.
//!
//! Values are one JSON object: `global` and, for a module hook, the module's section under
//! its values key (the camelCase module name). Patches are RFC 6902 JSON Patches; the
//! host applies them, in order, only when the run succeeds. A hook that is not part of an
//! addon module gets an error from every function here.
//!
//! ```no_run
//! use operon_sdk::values;
//! use serde_json::json;
//!
//! # fn run() -> Result<(), operon_sdk::Error> {
//! let replicas = values::get()?["myModule"]["replicas"].as_u64().unwrap_or(1);
//! values::patch(&[values::replace("/myModule/internal/replicas", json!(replicas * 2))])?;
//! # Ok(())
//! # }
//! ```

use serde_json::{Value, json};

use crate::Error;
use crate::bindings::hook::operon::engine::values as wit;

fn parse(text: String, what: &str) -> Result<Value, Error> {
    serde_json::from_str(&text).map_err(|e| Error::from(format!("the host's {what}: {e}")))
}

/// The values the hook sees (every layer and earlier patches merged).
pub fn get() -> Result<Value, Error> {
    parse(wit::get().map_err(Error::from)?, "values")
}

/// The config values the hook sees (the configuration's layers).
pub fn get_config() -> Result<Value, Error> {
    parse(wit::get_config().map_err(Error::from)?, "config values")
}

/// Submits a JSON Patch of the values (memory values).
pub fn patch(operations: &[Value]) -> Result<(), Error> {
    wit::patch(&Value::from(operations.to_vec()).to_string()).map_err(Error::from)
}

/// Submits a JSON Patch of the config values, which the engine writes back to the
/// configuration.
pub fn patch_config(operations: &[Value]) -> Result<(), Error> {
    wit::patch_config(&Value::from(operations.to_vec()).to_string()).map_err(Error::from)
}

/// An `add` operation.
///
/// ```
/// use serde_json::json;
/// assert_eq!(
///     operon_sdk::values::add("/m/x", json!(1)),
///     json!({"op": "add", "path": "/m/x", "value": 1})
/// );
/// ```
pub fn add(path: &str, value: Value) -> Value {
    json!({"op": "add", "path": path, "value": value})
}

/// A `replace` operation.
pub fn replace(path: &str, value: Value) -> Value {
    json!({"op": "replace", "path": path, "value": value})
}

/// A `remove` operation.
///
/// ```
/// assert_eq!(operon_sdk::values::remove("/m/x")["op"], "remove");
/// ```
pub fn remove(path: &str) -> Value {
    json!({"op": "remove", "path": path})
}
