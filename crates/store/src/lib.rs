//! Operon's module store, a crate of its own below the runners.
//!
//! What Operon keeps between runs, and where it finds it: wasm modules, found by path,
//! by name in a modules directory, or by sha256 digest ([`ModuleLocator`]), and the
//! content-addressed module store behind the upload API ([`BlobStore`]): modules checked
//! at upload ([`inspect()`]), named by the cluster's Module objects ([`ModuleCatalog`]),
//! and copied between replicas and agents by digest ([`replica`], [`fetch`]); and
//! modules pulled from OCI registries ([`oci`], [`oci_modules`]), with their cosign
//! signatures ([`cosign`], [`keys`]) verified before they run ([`verification`]);
//! addon-operator modules pulled the same way and unpacked into a cache directory
//! ([`addon_modules`], their archives in [`addon_archive`]).
//!
//! This crate keeps bytes and vouches for them (digest, signature, a component the
//! sandbox can load); it does not run them: the runners (`operon-runner`) and everything
//! above find their modules here.

#![warn(unreachable_pub)]

pub mod addon_archive;
pub mod addon_modules;
mod blobs;
mod catalog;
pub mod cosign;
pub mod fetch;
mod inspect;
pub mod keys;
mod modules;
pub mod oci;
pub mod oci_modules;
pub mod replica;
pub mod verification;

pub use blobs::{BlobError, BlobStore, DEFAULT_MAX_MODULE_BYTES, StoredBlob};
pub use catalog::ModuleCatalog;
pub use inspect::{ModuleInfo, imports, inspect};
pub use modules::{ModuleError, ModuleLocator};
