//! Operon's data: what crosses the engine's module boundaries ([`model`]), the custom
//! resources users write and their own checks ([`api`]), cron schedules with robfig/cron's
//! meaning ([`schedule`]), Go durations ([`duration`]), the Kubernetes API conventions
//! (status conditions, names and labels, the field manager: [`conventions`]) the
//! first pass over YAML text ([`yaml_scan`]) and an error chain as one line ([`error_text`]).
//!
//! This crate does no I/O: no async runtime, no Kubernetes client, no sandbox. Everything
//! above it (the sandboxes, the cluster layer, the orchestration crates, the controllers)
//! speaks these types, so a change here is a change of contract.

#![warn(unreachable_pub)]

pub mod api;
pub mod conventions;
pub mod duration;
pub mod error_text;
pub mod model;
pub mod schedule;
pub mod yaml_scan;
