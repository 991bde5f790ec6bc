//! Operon's processes and the controllers of its own resources.
//!
//! - [`serve`]: `operon serve`, the controller process: the hook engine over a cluster,
//!   HTTP and debug endpoints, leader election, the webhook servers with their
//!   registration and certificates, the admission webhook of Operon's resources, the
//!   Alertmanager receiver, the module API, Hook objects, and audits of existing objects
//!   into PolicyReports.
//! - [`controllers`]: the kube-runtime controllers of OperationSets, Triggers and
//!   Diagnoses.
//! - [`agent`]: `operon agent`, the per-node runner of the Diagnoses placed on its node.
//! - [`telemetry`]: the process' log subscriber and, when asked, the export of its
//!   traces over OTLP.
//!
//! This is the top of the library: everything below (pipelines, hooks, runners,
//! sandboxes, the cluster layer, the data model, objects read from files) is its own
//! crate and knows nothing of this one. Command lines are parsed by the `operon` binary, not here.

#![warn(unreachable_pub)]

pub mod agent;
pub mod controllers;
pub mod serve;
pub mod telemetry;
