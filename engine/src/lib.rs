//! Operon's engine library: everything the `operon` binary does, as reusable parts.
//!
//! - [`sandbox`] runs WebAssembly components (operations and hooks) with hard limits on
//!   time, memory and output, through the typed contract in `wit/`.

pub mod sandbox;
