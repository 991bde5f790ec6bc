//! The guest-facing integration tests, one binary: each module is one suite.

mod common;

mod module_enabled;
mod sandbox;
mod sdk_languages;
mod wit_versions;
