//! Operon's Diagnosis pipelines: what runs, in which order, and what happens when a
//! step fails.
//!
//! - [`graph`]: an OperationSet's DAG, its checks and its paths.
//! - [`walk`]: planning a Diagnosis (a runner per Operation, from the runner crate's
//!   processors) and running it as a memoized depth-first walk over its paths, with a
//!   checkpoint after each node. What a caller needs of it is re-exported here:
//!   [`plan()`], then [`execute`].
//! - [`triggers`]: which Trigger an alert, a Kubernetes event or a cron slot fires.
//!
//! This crate must not know about the controllers that watch Diagnoses and Triggers, nor
//! about hooks: a Diagnosis's progress reaches its caller through [`Progress`].

#![warn(unreachable_pub)]

pub mod graph;
pub mod triggers;
pub mod walk;

pub use walk::{
    COMPLETE, CheckpointError, CheckpointFile, CheckpointFuture, Operations, PipelineError, Plan,
    PlanError, Progress, Quiet, Step, execute, plan,
};
