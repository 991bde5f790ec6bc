//! Which Linux protections a script run actually got, and their metrics.
//!
//! A run reports every protection by name, whether it was applied, not asked for, or
//! unavailable (with the kernel's or the setup's reason). The report is logged with each
//! run and exported as `operon_script_sandbox_protection{protection}` (1 applied, 0 not)
//! and `operon_script_sandbox_runs_total{protection, state}`, so an operator can see at a
//! glance that, say, Landlock is missing on a node.

use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// The state of one protection in one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(tag = "state", content = "reason", rename_all = "kebab-case")]
pub enum ProtectionState {
    /// The protection was in force for the whole run.
    Applied,
    /// The run did not ask for it (e.g. the network namespace of a run granted network).
    NotRequested,
    /// The protection was wanted but could not be applied.
    Unavailable(String),
    /// The run stopped before this protection was reached (a setup failure).
    #[default]
    Unknown,
}

impl ProtectionState {
    /// An unavailable state with a reason.
    pub(crate) fn unavailable(reason: impl Into<String>) -> Self {
        Self::Unavailable(reason.into())
    }

    /// Whether the protection is missing although it was wanted.
    pub fn is_missing(&self) -> bool {
        matches!(self, Self::Unavailable(_) | Self::Unknown)
    }

    /// The short label used in logs and metrics.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Self::Applied => "applied",
            Self::NotRequested => "not-requested",
            Self::Unavailable(_) => "unavailable",
            Self::Unknown => "unknown",
        }
    }
}

/// Every protection of a script run, by name.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Protections {
    /// A new user namespace: the script is root only over its own namespaces.
    pub user_namespace: ProtectionState,
    /// A new mount namespace: mounts made for the run are invisible outside it.
    pub mount_namespace: ProtectionState,
    /// A new pid namespace: the script sees and signals only its own processes, and all
    /// of them die with the run.
    pub pid_namespace: ProtectionState,
    /// A new network namespace with only a loopback that is down: no network.
    pub network_namespace: ProtectionState,
    /// A new IPC namespace: no shared memory or semaphores with the host.
    pub ipc_namespace: ProtectionState,
    /// A new UTS namespace: hostname changes stay inside.
    pub uts_namespace: ProtectionState,
    /// A `/proc` showing only the run's processes.
    pub private_proc: ProtectionState,
    /// The host uid of the run is not 0 (root is exempt from the process limit, and a
    /// non-root uid cannot read the host's root-only files).
    pub unprivileged_uid: ProtectionState,
    /// Landlock file-system rules: read-only system paths, read-write only the run.
    pub landlock_filesystem: ProtectionState,
    /// Landlock TCP rules: no bind or connect.
    pub landlock_network: ProtectionState,
    /// Landlock scopes: no signals or abstract unix sockets outside the run.
    pub landlock_scopes: ProtectionState,
    /// `RLIMIT_CPU`.
    pub cpu_limit: ProtectionState,
    /// `RLIMIT_AS`.
    pub memory_limit: ProtectionState,
    /// `RLIMIT_NPROC`, counted per user namespace.
    pub process_limit: ProtectionState,
    /// `RLIMIT_FSIZE`.
    pub file_size_limit: ProtectionState,
    /// `RLIMIT_NOFILE`.
    pub open_files_limit: ProtectionState,
    /// A size-bounded tmpfs as the run's scratch directory.
    pub disk_budget: ProtectionState,
    /// The environment holds only the contract's variables and the declared allow-list.
    pub cleared_environment: ProtectionState,
}

impl Protections {
    /// Every protection with its metric/log name.
    pub fn iter(&self) -> [(&'static str, &ProtectionState); 18] {
        [
            ("user_namespace", &self.user_namespace),
            ("mount_namespace", &self.mount_namespace),
            ("pid_namespace", &self.pid_namespace),
            ("network_namespace", &self.network_namespace),
            ("ipc_namespace", &self.ipc_namespace),
            ("uts_namespace", &self.uts_namespace),
            ("private_proc", &self.private_proc),
            ("unprivileged_uid", &self.unprivileged_uid),
            ("landlock_filesystem", &self.landlock_filesystem),
            ("landlock_network", &self.landlock_network),
            ("landlock_scopes", &self.landlock_scopes),
            ("cpu_limit", &self.cpu_limit),
            ("memory_limit", &self.memory_limit),
            ("process_limit", &self.process_limit),
            ("file_size_limit", &self.file_size_limit),
            ("open_files_limit", &self.open_files_limit),
            ("disk_budget", &self.disk_budget),
            ("cleared_environment", &self.cleared_environment),
        ]
    }

    /// Every protection's name, as in logs, metrics and `--strict-except`.
    pub(crate) fn names() -> [&'static str; 18] {
        Self::default().iter().map(|(name, _)| name)
    }

    /// The first protection that was wanted but is missing, with its reason.
    #[cfg(test)]
    pub(crate) fn first_missing(&self) -> Option<(&'static str, String)> {
        self.iter()
            .into_iter()
            .find_map(|(name, state)| match state {
                ProtectionState::Unavailable(reason) => Some((name, reason.clone())),
                ProtectionState::Unknown => Some((name, "not reached".to_owned())),
                _ => None,
            })
    }

    /// A one-line summary for logs, e.g. `pid_namespace=applied landlock_network=...`.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        for (name, state) in self.iter() {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(name);
            out.push('=');
            out.push_str(state.label());
        }
        out
    }

    /// Logs the report and updates the metrics. A protection strict mode does without
    /// (`--strict-except`) is expected to be missing: its absence is logged at debug.
    pub fn record(&self, run: &str) {
        let metrics = metrics();
        let expected = super::sandbox::strict_exceptions();
        for (name, state) in self.iter() {
            metrics
                .applied
                .with_label_values(&[name])
                .set(i64::from(*state == ProtectionState::Applied));
            metrics.runs.with_label_values(&[name, state.label()]).inc();
            if let ProtectionState::Unavailable(reason) = state
                && expected.iter().any(|e| e == name)
            {
                tracing::debug!(
                    run,
                    protection = name,
                    reason,
                    "script sandbox protection unavailable, as --strict-except expects"
                );
            } else if let ProtectionState::Unavailable(reason) = state {
                tracing::warn!(
                    run,
                    protection = name,
                    reason,
                    "script sandbox protection unavailable"
                );
            }
        }
        tracing::info!(run, protections = %self.summary(), "script sandbox run");
    }
}

/// The sandbox's prometheus collectors.
#[derive(Debug, Clone)]
struct SandboxMetrics {
    /// 1 when the protection was applied in the latest run, else 0.
    applied: IntGaugeVec,
    /// Runs per protection and state, so rare gaps are not hidden by the latest run.
    runs: IntCounterVec,
}

fn metrics() -> &'static SandboxMetrics {
    static METRICS: OnceLock<SandboxMetrics> = OnceLock::new();
    METRICS.get_or_init(|| SandboxMetrics {
        applied: IntGaugeVec::new(
            Opts::new(
                "operon_script_sandbox_protection",
                "Whether a script sandbox protection was applied in the latest run (1) or not (0).",
            ),
            &["protection"],
        )
        .expect("static metric definition is valid"),
        runs: IntCounterVec::new(
            Opts::new(
                "operon_script_sandbox_runs_total",
                "Script sandbox runs by protection and its state.",
            ),
            &["protection", "state"],
        )
        .expect("static metric definition is valid"),
    })
}

/// Registers the sandbox's metrics in `registry` (once per registry).
pub fn register_metrics(registry: &Registry) -> Result<(), prometheus::Error> {
    for collector in collectors() {
        registry.register(collector)?;
    }
    Ok(())
}

/// The sandbox's collectors, one per metric family.
pub fn collectors() -> Vec<Box<dyn prometheus::core::Collector>> {
    let metrics = metrics();
    vec![
        Box::new(metrics.applied.clone()),
        Box::new(metrics.runs.clone()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_missing_protection_is_named() {
        let mut p = Protections {
            cleared_environment: ProtectionState::Applied,
            ..Protections::default()
        };
        p.user_namespace = ProtectionState::Applied;
        p.mount_namespace = ProtectionState::unavailable("EPERM");
        let (name, reason) = p.first_missing().expect("missing");
        assert_eq!(name, "mount_namespace");
        assert_eq!(reason, "EPERM");
    }

    #[test]
    fn metrics_register_and_count() {
        let registry = Registry::new();
        register_metrics(&registry).unwrap();
        let p = Protections {
            pid_namespace: ProtectionState::Applied,
            ..Protections::default()
        };
        p.record("t");
        let families = registry.gather();
        let names: Vec<_> = families.iter().map(|f| f.name().to_owned()).collect();
        assert!(
            names.contains(&"operon_script_sandbox_protection".to_owned()),
            "{names:?}"
        );
        assert!(names.contains(&"operon_script_sandbox_runs_total".to_owned()));
    }

    #[test]
    fn states_round_trip_through_json() {
        let p = Protections {
            landlock_network: ProtectionState::unavailable("ABI 3"),
            network_namespace: ProtectionState::NotRequested,
            ..Protections::default()
        };
        let text = serde_json::to_string(&p).unwrap();
        let back: Protections = serde_json::from_str(&text).unwrap();
        assert_eq!(back, p);
    }
}
