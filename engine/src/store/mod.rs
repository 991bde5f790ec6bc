//! What Operon keeps between runs, and where it finds it. Today: wasm modules on disk,
//! found by path, by name in a modules directory, or by sha256 digest
//! ([`ModuleLocator`]). The content-addressed module store behind the upload API comes
//! here too.

mod modules;

pub use modules::{ModuleError, ModuleLocator};
