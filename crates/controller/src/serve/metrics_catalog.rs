//! The metric families of Operon's processes as a whole: the catalog of every family
//! `operon serve` and `operon agent` can export (what dashboards and alerts may name),
//! and the registry a node agent serves. Here, above the parts that own the metrics
//! (the hook engine's, the controllers', modules', the sandbox's, the module store's).

use operon_hooks::metrics::MetricError;
use prometheus::Registry;

/// The registry of a node agent's `/metrics`: what its script steps got from the
/// sandbox, the Diagnoses it ran, its module fetches, its pulls from registries and its
/// requests to the API server.
pub(crate) fn agent_registry() -> Result<Registry, MetricError> {
    let registry = Registry::new();
    operon_script::register_metrics(&registry)
        .and_then(|()| crate::controllers::diagnosis::metrics::register_metrics(&registry))
        .and_then(|()| operon_store::fetch::register_metrics(&registry))
        .and_then(|()| operon_store::oci_modules::register_metrics(&registry))
        .and_then(|()| operon_cluster::kube::observe::register_metrics(&registry))
        .map_err(MetricError::from)?;
    Ok(registry)
}

/// Every metric family Operon's processes can export (`operon serve` and `operon
/// agent`; hooks' own metrics aside), with its help text, sorted by name: what
/// dashboards and alerts may refer to.
pub fn catalog() -> Result<Vec<(String, String)>, MetricError> {
    let registry_error = MetricError::from;
    let mut collectors = operon_hooks::metrics::Metrics::new()?.collectors();
    collectors.extend(operon_script::protections::collectors());
    collectors.extend(crate::controllers::diagnosis::metrics::collectors());
    collectors.extend(crate::controllers::trigger::metrics::collectors());
    collectors.extend(super::lease::metrics::collectors());
    collectors.extend(super::audit::metrics::collectors());
    collectors.extend(operon_store::fetch::collectors());
    collectors.extend(operon_store::oci_modules::collectors());
    collectors.extend(operon_cluster::kube::observe::collectors());
    collectors.extend(
        operon_addons::metrics::ModuleMetrics::new()
            .map_err(registry_error)?
            .collectors(),
    );
    let mut families: Vec<(String, String)> = collectors
        .iter()
        .flat_map(|c| c.desc())
        .map(|d| (d.fq_name.clone(), d.help.clone()))
        .collect();
    families.sort();
    families.dedup();
    Ok(families)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_names_every_family_once_with_its_help() {
        let catalog = catalog().unwrap();
        let names: Vec<&str> = catalog.iter().map(|(n, _)| n.as_str()).collect();
        for expected in [
            "operon_hook_run_seconds",
            "operon_hook_run_errors_total",
            "operon_tasks_queue_length",
            "operon_live_ticks_total",
            "operon_trigger_diagnoses_total",
            "operon_webhook_requests_total",
            "operon_webhook_request_duration_seconds",
            "operon_leader",
            "operon_script_sandbox_protection",
            "operon_diagnoses_total",
            "operon_audit_results_total",
            "operon_module_fetch_errors_total",
            "operon_module_run_seconds",
            "operon_kube_event_duration_seconds",
            "operon_kubernetes_client_request_latency_seconds",
            "operon_kubernetes_client_request_result_total",
        ] {
            assert!(
                names.contains(&expected),
                "{expected} missing from {names:?}"
            );
        }
        let mut unique = names.clone();
        unique.dedup();
        assert_eq!(unique, names, "one entry per family");
        for (name, help) in &catalog {
            assert!(name.starts_with("operon_"), "{name}");
            assert!(!help.is_empty(), "{name} has no help");
        }
    }

    #[test]
    fn an_agent_serves_its_diagnoses_fetches_and_sandbox_protections() {
        let registry = agent_registry().unwrap();
        crate::controllers::diagnosis::metrics::finished(
            &crate::controllers::diagnosis::Role::Agent {
                node: "worker-1".to_owned(),
            },
            operon_data::api::DiagnosisPhase::Succeeded,
        );
        let text = operon_hooks::metrics::render(&registry);
        assert!(
            text.contains("operon_diagnoses_total{phase=\"Succeeded\",role=\"agent\"}"),
            "{text}"
        );
        assert!(text.contains("operon_module_fetch_errors_total "), "{text}");
    }
}
