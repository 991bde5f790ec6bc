//! Operon's engine library: everything the `operon` binary does, as reusable parts.
//! Data flows one way, from what users write to what is applied (see ARCHITECTURE.md):
//!
//! - [`api`]: the custom resources (Operation, OperationSet, Trigger, Diagnosis) and their own checks.
//! - [`manifest`]: objects read from YAML files, and checked together, for commands with no cluster.
//! - [`yaml_scan`]: a first pass over YAML text: documents, duplicate keys, out-of-range numbers, size limits.
//! - [`model`]: Operon's data model for what crosses module boundaries (contexts, patches, metrics, configs).
//! - [`graph`]: an OperationSet's DAG checked, its paths walked lazily and drawn.
//! - [`pipeline`]: a Diagnosis planned and run over the graph, node by node, with checkpoints.
//! - [`runner`]: the one contract of every operation's processor, and its wasm, script and http runners.
//! - [`hooks`]: shell-operator's hook model: configuration, contexts, queues, the engine, hook runners.
//! - [`triggers`]: alerts, events and schedules turned into Diagnoses.
//! - [`schedule`]: cron schedules (5 or 6 fields, descriptors, `@every`, time zones) and their slots.
//! - [`cluster`]: the `Cluster` contract hooks talk to: the in-memory `local` cluster and `kube`, an API server.
//! - [`shell_operator`]: shell-operator's text formats (config, contexts, patches, metrics, responses), both ways.
//! - [`sandbox`]: the wasm sandbox; the only module that knows the WIT-generated types.
//! - [`script`]: the Linux sandbox for shell scripts (namespaces, Landlock, rlimits) and its script store.
//! - [`metrics`]: Prometheus metrics of the engine and of hooks.
//! - [`store`]: what Operon keeps and finds: wasm modules by path, name or digest.
//! - [`jq`]: jq filters (jaq), compiled once and cached.
//! - [`controllers`]: the kube-runtime controllers of Operon's own resources (OperationSet status, Diagnoses).
//! - [`addons`]: addon-operator's modules: layout, layered values, enabled programs, lifecycle hooks, rendering, the task queue.
//! - [`agent`]: `operon agent`, the per-node runner of the Diagnoses placed on its node.
//! - [`node_ops`]: the agent's built-in operations under KubeDiag's `/processor/` paths.
//! - [`kubediag`]: KubeDiag objects rewritten into Operon's group (`operon convert kubediag`).
//! - [`serve`]: `operon serve`, the controller: the hook engine over a cluster, endpoints, leader election.

pub use operon_addons as addons;
pub mod agent;
pub use operon_cluster as cluster;
pub use operon_data::api;
pub mod controllers;
pub use operon_hooks::hooks;
pub use operon_jq as jq;
pub use operon_pipeline::graph;
pub mod kubediag;
pub mod manifest;
pub use operon_data::model;
pub use operon_data::schedule;
pub use operon_hooks::metrics;
pub use operon_pipeline::pipeline;
pub use operon_runner::node_ops;
pub use operon_runner::output_log;
pub use operon_runner::runner;
pub use operon_sandbox as sandbox;
pub use operon_script as script;
pub mod serve;
pub use operon_data::yaml_scan;
pub use operon_hooks::shell_operator;
pub use operon_pipeline::triggers;
pub use operon_runner::store;
