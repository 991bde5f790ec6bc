//! The properties Operon's fuzz targets check, one module per target, each with a
//! `check(data)` that panics on a finding. The libFuzzer harness (fuzz/, a workspace of
//! its own) calls them with generated inputs; the main workspace's tests replay every
//! input of `fuzz/corpus/TARGET` through them. The checks see the engine only through
//! its crates' public APIs.

pub mod binding_context;
pub mod hook_config;
pub mod hook_files;
pub mod jq;
pub mod manifests;
pub mod module;
pub mod reviews;

/// A target's check: panics on a finding.
pub type Check = fn(&[u8]);

/// Every target: its name (the corpus directory's and the fuzz binary's) and its check.
pub const TARGETS: &[(&str, Check)] = &[
    ("manifests", manifests::check),
    ("hook_config", hook_config::check),
    ("hook_files", hook_files::check),
    ("binding_context", binding_context::check),
    ("jq", jq::check),
    ("reviews", reviews::check),
    ("module", module::check),
];
