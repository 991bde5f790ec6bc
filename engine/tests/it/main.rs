//! The engine's integration tests, one binary: each module is one suite. The tests
//! that need an API server or a node are `#[ignore]`d, with what they need as the
//! reason: run them with `cargo test -p operon-engine --test it SUITE:: -- --ignored`
//! and their environment variable set (see each module's own doc); without it they fail,
//! naming it.

/// The launcher half of the script sandbox, in this very test binary: the sandboxes of
/// the suites re-run it filtered to this test, which then becomes the in-sandbox half and
/// never returns. Its name is the filter [`launcher`] passes, so it stays at the root.
#[test]
fn sandbox_launcher_entry() {
    operon::script::launcher::run_if_invoked();
}

/// The launcher of the suites' script sandboxes: this binary, filtered to
/// [`sandbox_launcher_entry`].
fn launcher() -> operon::script::Launcher {
    operon::script::Launcher {
        program: std::env::current_exe().unwrap(),
        args: [
            "--exact",
            "sandbox_launcher_entry",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ]
        .map(str::to_owned)
        .to_vec(),
    }
}

mod addons_support;
mod deploy_support;
mod e2e_support;

mod addons_cli;
mod addons_deploy;
mod addons_e2e;
mod addons_lifecycle;
mod addons_module_configs;
mod addons_oci_sources;
mod addons_phases;
mod addons_serve_e2e;
mod addons_snapshots;
mod addons_wasm_enabled;
mod addons_wasm_hooks;
mod architecture;
mod audit_cli;
mod bad_input;
mod book;
mod cli;
mod deploy;
mod deploy_agent;
mod deploy_offload;
mod e2e_agent_offload;
mod e2e_audit;
mod e2e_diagnosis;
mod e2e_hook_admission;
mod e2e_hook_object_webhooks;
mod e2e_hook_offload;
mod e2e_hooks;
mod e2e_kube;
mod e2e_module_configs;
mod e2e_module_sources;
mod e2e_module_webhooks;
mod e2e_modules;
mod e2e_node;
mod e2e_node_faults;
mod e2e_node_soak;
mod e2e_oci_modules;
mod e2e_offload;
mod e2e_prometheus;
mod e2e_runners;
mod e2e_triggers;
mod e2e_two_nodes;
mod faults_kill;
mod faults_kill_cluster;
mod faults_kill_hook;
mod fuzz_corpus;
mod hook_cli;
mod hook_compat;
mod hook_objects;
mod hook_objects_cli;
mod hook_record;
mod hook_twins;
mod jq_compat;
mod local_kubectl;
mod module_cli;
mod module_openapi;
mod node_builtins;
mod oci_registry;
mod operon_test;
mod otlp;
mod owner_only_hooks;
mod prometheus;
mod runner_offload_cli;
mod script_sandbox;
