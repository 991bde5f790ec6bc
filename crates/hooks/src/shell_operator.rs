//! shell-operator's formats, read and written in one place.
//!
//! A shell-operator hook talks to its operator through text: its configuration on
//! `--config` ([`config`]), the binding contexts it reads from `$BINDING_CONTEXT_PATH`
//! ([`context`]), and the files it writes: `$KUBERNETES_PATCH_PATH` ([`patches`]),
//! `$METRICS_PATH` ([`metrics`]), and `$VALIDATING_RESPONSE_PATH` /
//! `$CONVERSION_RESPONSE_PATH` ([`responses`]). Each module reads its format into the
//! types of [`operon_data::model`] and writes those types back in the same shape, so what
//! `operon hook test` prints is what a script hook would write, and what a script hook
//! writes becomes exactly what a wasm hook returns. [`files`] names the variables and
//! files; [`duration`] reads Go durations.
//!
//! Nothing here runs a hook or touches a file: the script sandbox does that.

pub mod config;
pub mod context;
pub use operon_data::duration;
pub mod files;
pub mod metrics;
pub mod patches;
pub mod responses;
mod stream;

pub use files::{HookFile, HookFileError};

/// A JSON-text field of the model as a JSON value, for writing. Text that does not parse
/// (which values built or checked by the engine never hold) is written as a string, so
/// the reader still sees it.
fn json_text(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.to_owned()))
}
