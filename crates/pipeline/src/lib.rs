//! Operon's Diagnosis pipelines: what runs, in which order, and what happens when a
//! step fails.
//!
//! - [`graph`]: an OperationSet's DAG, its checks and its paths.
//! - [`pipeline`]: planning a Diagnosis (a runner per Operation, from the runner crate's
//!   processors) and running it as a memoized depth-first walk over its paths, with a
//!   checkpoint after each node.
//! - [`triggers`]: which Trigger an alert, a Kubernetes event or a cron slot fires.
//!
//! This crate must not know about the controllers that watch Diagnoses and Triggers, nor
//! about hooks: a Diagnosis's progress reaches its caller through [`pipeline::Progress`].

#![warn(unreachable_pub)]

pub mod graph;
pub mod pipeline;
pub mod triggers;
