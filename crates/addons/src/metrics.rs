//! Prometheus metrics of modules, addon-operator's self-metrics under Operon's prefix:
//! run seconds, run, delete and discovery errors, hook errors, and whether each module
//! is enabled.

use prometheus::{
    HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry,
};

/// The modules' metrics, registered in their own registry.
#[derive(Debug, Clone)]
pub struct ModuleMetrics {
    /// The registry holding them.
    pub(crate) registry: Registry,
    /// `operon_module_run_seconds{module}`: one ModuleRun, hooks and apply included.
    pub(crate) run_seconds: HistogramVec,
    /// `operon_module_run_errors_total{module}`.
    pub(crate) run_errors: IntCounterVec,
    /// `operon_module_delete_errors_total{module}`.
    pub(crate) delete_errors: IntCounterVec,
    /// `operon_module_discover_errors_total`.
    pub(crate) discover_errors: IntCounter,
    /// `operon_module_enabled{module}`: 1 enabled, 0 disabled.
    pub(crate) enabled: IntGaugeVec,
    /// `operon_module_hook_run_errors_total{module,hook,binding}` (`module` is
    /// `global` for global hooks).
    pub(crate) hook_errors: IntCounterVec,
}

impl ModuleMetrics {
    /// Creates and registers the metrics.
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let run_seconds = HistogramVec::new(
            HistogramOpts::new("operon_module_run_seconds", "Duration of ModuleRun tasks.")
                .buckets(vec![
                    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                ]),
            &["module"],
        )?;
        let run_errors = IntCounterVec::new(
            Opts::new("operon_module_run_errors_total", "Failed ModuleRun tasks."),
            &["module"],
        )?;
        let delete_errors = IntCounterVec::new(
            Opts::new(
                "operon_module_delete_errors_total",
                "Failed ModuleDelete tasks.",
            ),
            &["module"],
        )?;
        let discover_errors = IntCounter::new(
            "operon_module_discover_errors_total",
            "Failed module discoveries.",
        )?;
        let enabled = IntGaugeVec::new(
            Opts::new(
                "operon_module_enabled",
                "Whether the module is enabled (1) or not (0).",
            ),
            &["module"],
        )?;
        let hook_errors = IntCounterVec::new(
            Opts::new(
                "operon_module_hook_run_errors_total",
                "Failed runs of global and module hooks.",
            ),
            &["module", "hook", "binding"],
        )?;
        registry.register(Box::new(run_seconds.clone()))?;
        registry.register(Box::new(run_errors.clone()))?;
        registry.register(Box::new(delete_errors.clone()))?;
        registry.register(Box::new(discover_errors.clone()))?;
        registry.register(Box::new(enabled.clone()))?;
        registry.register(Box::new(hook_errors.clone()))?;
        Ok(Self {
            registry,
            run_seconds,
            run_errors,
            delete_errors,
            discover_errors,
            enabled,
            hook_errors,
        })
    }

    /// Registers the same metrics in `registry` too (`operon serve`'s, which
    /// `/metrics` serves).
    pub(crate) fn register_in(&self, registry: &Registry) -> Result<(), prometheus::Error> {
        for collector in self.collectors() {
            registry.register(collector)?;
        }
        Ok(())
    }

    /// One collector per metric family.
    pub fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.run_seconds.clone()),
            Box::new(self.run_errors.clone()),
            Box::new(self.delete_errors.clone()),
            Box::new(self.discover_errors.clone()),
            Box::new(self.enabled.clone()),
            Box::new(self.hook_errors.clone()),
        ]
    }

    /// The metrics in Prometheus' text format.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let encoder = prometheus::TextEncoder::new();
        // Encoding into a String fails only on a write error, which a String has not.
        let _ = encoder.encode_utf8(&self.registry.gather(), &mut out);
        out
    }
}
