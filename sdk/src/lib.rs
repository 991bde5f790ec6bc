//! Write Operon operations and hooks in plain Rust, compiled to WASI 0.2 components.
//!
//! Operon runs each guest in a WebAssembly sandbox and talks to it through the
//! `operon:engine` WIT contract. This crate generates the bindings for that contract once
//! and wraps them, so a guest never sees raw bindings:
//!
//! - an **operation** is a function `fn(Input) -> Result<Output, Error>`, exported with
//!   [`operation!`];
//! - a **hook** is a type implementing [`Hook`], exported with [`hook!`];
//!   [`HookInput::objects`] yields every object a run is about, whatever its binding
//!   type, and [`ObjectAndFilter::meta`] gives its kind and metadata as an [`Object`];
//!   admission webhooks (validating and mutating bindings, their answers and JSON
//!   patches) are in [`admission`];
//! - changes to the cluster are [`Patch`]es, metrics are [`Metric`]s, and logs go through
//!   [`info!`] and its siblings;
//! - the hooks of addon-operator modules read and patch their module's values through
//!   [`values`], and declare lifecycle bindings with [`HookConfig::lifecycle`].
//!
//! A guest is a `cdylib` crate built with `cargo build --target wasm32-wasip2 --release`:
//!
//! ```standalone_crate
//! use operon_sdk::{Error, Input, Output};
//!
//! fn run(input: Input) -> Result<Output, Error> {
//!     let threshold: u8 = input.param_as("threshold")?.unwrap_or(85);
//!     let used: u8 = input.require("used")?.parse().map_err(|_| "`used` is not a number")?;
//!     Ok(Output::new()
//!         .result("pressure", used > threshold)
//!         .output(format!("{used}% used, threshold {threshold}%")))
//! }
//!
//! operon_sdk::operation!(run);
//! # fn main() {}
//! ```
//!
//! The SDK speaks version 0.3.0 of the contract (`operon:engine@0.3.0`, which added the
//! runner context's `cluster`, the `values` interface and lifecycle bindings). Guests
//! built with an older SDK, against 0.1.0 or 0.2.0, keep running: the host links every
//! published version.
//!
//! Host calls (patches, metrics, logs) only work inside the sandbox: on other targets they
//! compile but panic, so keep the logic worth unit-testing in plain functions.

// The generated export macros name the bindings as `::operon_sdk::...`, which must also
// resolve inside this crate (and its doc tests) for the SDK to compile.
extern crate self as operon_sdk;

pub mod admission;
mod bindings;
pub mod enabled;
mod error;
pub mod hook;
pub mod kubernetes;
pub mod log;
pub mod metrics;
mod object;
mod operation;
pub mod values;

/// The values of the WIT contract (`operon:engine@0.3.0`), as generated from
/// `wit/types.wit`.
pub mod types {
    pub use crate::bindings::operation::operon::engine::types::*;
}

pub use enabled::ModuleEnabled;
pub use error::{Error, ResultExt};
pub use hook::Hook;
pub use kubernetes::Patch;
pub use metrics::Metric;
pub use object::{Object, ObjectMeta};
pub use operation::{Input, Output};
pub use types::{
    BindingContext, BindingType, EnabledResult, HookConfig, HookInput, HookOutput, HookSettings,
    KubernetesBinding, LabelSelector, LifecycleBinding, MatchCondition, MutatingBinding,
    ObjectAndFilter, OwnerReference, RunnerContext, ScheduleBinding, Snapshot, ValidatingBinding,
    ValidatingResponse, WatchEvent, WebhookRule,
};

/// What the exported macros expand to; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::bindings::hook::{self, Guest as HookGuest};
    pub use crate::bindings::module_enabled::{self, Guest as ModuleEnabledGuest};
    pub use crate::bindings::operation::{self, Guest as OperationGuest};
    pub use crate::operation::run as run_operation;
    pub use wit_bindgen;
}
