//! The rules about a hook configuration's meaning: names, selectors, label syntax,
//! crontabs, jq filters, queues, groups, webhook rules and settings, applied to what a
//! wasm or script hook declared, with defaults filled in.

use super::{
    AdmissionBinding, ConversionBinding, DEFAULT_TIMEOUT, DEFAULT_WEBHOOK_TIMEOUT_SECONDS,
    Enforcement, EventSet, ExecutionRate, FailurePolicy, KindExists, KubernetesBinding, MAIN_QUEUE,
    MAX_MATCH_CONDITIONS, ReinvocationPolicy, ScheduleBinding, Settings, SideEffects, ValidConfig,
};
use operon_data::conventions::names::{
    is_api_version, is_dns_label, is_dns_subdomain, is_fully_qualified_name, is_qualified_name,
    label_key, label_value,
};
use operon_data::model::config::{BindingId, BindingKind, ConfigProblem, Problems, location};
use operon_data::model::{
    AdmissionBindingConfig, ConversionBindingConfig, HookConfig, HookSettings,
    KubernetesBindingConfig, LabelOperator, LabelSelector, NamespaceSelector,
    ScheduleBindingConfig, WatchEvent,
};
use operon_data::schedule::Schedule;
use operon_jq as jq;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

/// Checks `config` of `hook` and returns the normalized configuration, or every
/// problem found.
///
/// `kind_exists` resolves a kubernetes binding's `apiVersion` and `kind` (e.g. through
/// [`operon_cluster::Cluster::resolve`]); [`super::any_kind`] skips that check.
pub fn validate(
    hook: &str,
    config: &HookConfig,
    kind_exists: &KindExists<'_>,
) -> Result<ValidConfig, Vec<ConfigProblem>> {
    let mut check = Checker::new(hook, config);
    check.names(config);

    let schedules: Vec<_> = (config.schedule.iter().enumerate())
        .filter_map(|(index, binding)| check.schedule(index, binding))
        .collect();
    let kubernetes: Vec<_> = (config.kubernetes.iter().enumerate())
        .filter_map(|(index, binding)| check.kubernetes(index, binding, kind_exists))
        .collect();
    let validating: Vec<_> = (config.kubernetes_validating.iter().enumerate())
        .filter_map(|(index, binding)| check.admission(BindingKind::Validating, index, binding))
        .collect();
    let mutating: Vec<_> = (config.kubernetes_mutating.iter().enumerate())
        .filter_map(|(index, binding)| check.admission(BindingKind::Mutating, index, binding))
        .collect();
    let conversions: Vec<_> = (config.kubernetes_conversion.iter().enumerate())
        .filter_map(|(index, binding)| check.conversion(index, binding))
        .collect();
    let settings = check.settings(config.settings.as_ref());

    let has_bindings = config.on_startup.is_some()
        || !config.schedule.is_empty()
        || !config.kubernetes.is_empty()
        || !config.kubernetes_validating.is_empty()
        || !config.kubernetes_mutating.is_empty()
        || !config.kubernetes_conversion.is_empty();
    let mut warnings = Problems::new(hook);
    warnings.list.append(&mut check.warnings.list);
    const NO_BINDINGS: &str = "the hook has no bindings (onStartup, schedule, kubernetes, \
                               kubernetesValidating, kubernetesMutating or \
                               kubernetesCustomResourceConversion), so it would never run";
    match (has_bindings, config.settings.is_some()) {
        (true, _) => {}
        // shell-operator accepts a configuration with settings only (its schema wants
        // configVersion and one more key): such a hook loads and never runs.
        (false, true) => warnings.push(None, "", NO_BINDINGS),
        (false, false) => check.problems.push(None, "", NO_BINDINGS),
    }

    check.problems.finish(ValidConfig {
        hook: hook.to_owned(),
        version: config.version,
        warnings: warnings.list,
        on_startup: config.on_startup,
        schedules,
        kubernetes,
        validating,
        mutating,
        conversions,
        settings,
    })
}

/// The state shared by the per-binding checks.
struct Checker<'a> {
    problems: Problems<'a>,
    /// What is accepted but means less than it seems, reported without refusing.
    warnings: Problems<'a>,
    /// Names of the kubernetes bindings, which `includeSnapshotsFrom` may name.
    kubernetes_names: HashSet<&'a str>,
    /// Per group, its kubernetes bindings in configuration order.
    group_members: HashMap<&'a str, Vec<&'a str>>,
}

impl<'a> Checker<'a> {
    fn new(hook: &'a str, config: &'a HookConfig) -> Self {
        let mut group_members: HashMap<&str, Vec<&str>> = HashMap::new();
        for binding in &config.kubernetes {
            if let Some(group) = &binding.group {
                group_members
                    .entry(group.as_str())
                    .or_default()
                    .push(binding.name.as_str());
            }
        }
        Self {
            problems: Problems::new(hook),
            warnings: Problems::new(hook),
            kubernetes_names: config.kubernetes.iter().map(|b| b.name.as_str()).collect(),
            group_members,
        }
    }

    /// Names are non-empty and unique across every section: binding contexts and
    /// `includeSnapshotsFrom` refer to bindings by name alone.
    fn names(&mut self, config: &HookConfig) {
        let sections = [
            (
                BindingKind::Schedule,
                config.schedule.iter().map(|b| &b.name).collect::<Vec<_>>(),
            ),
            (
                BindingKind::Kubernetes,
                config.kubernetes.iter().map(|b| &b.name).collect(),
            ),
            (
                BindingKind::Validating,
                config
                    .kubernetes_validating
                    .iter()
                    .map(|b| &b.name)
                    .collect(),
            ),
            (
                BindingKind::Mutating,
                config.kubernetes_mutating.iter().map(|b| &b.name).collect(),
            ),
            (
                BindingKind::Conversion,
                config
                    .kubernetes_conversion
                    .iter()
                    .map(|b| &b.name)
                    .collect(),
            ),
        ];
        let all = sections.iter().flat_map(|(kind, names)| {
            names
                .iter()
                .enumerate()
                .map(move |(index, name)| (*kind, index, *name))
        });
        let mut seen: HashMap<&str, BindingId> = HashMap::new();
        for (kind, index, name) in all {
            let at = location(kind, index, name);
            if name.trim().is_empty() {
                self.problems
                    .push(Some(&at), "name", "a binding needs a non-empty name");
            } else if let Some(first) = seen.get(name.as_str()) {
                self.problems.push(
                    Some(&at),
                    "name",
                    format!(
                        "{name:?} is already the name of {first}: binding names must be \
                         unique across all bindings of a hook"
                    ),
                );
            } else {
                seen.insert(name, BindingId { kind, index });
            }
        }
    }

    fn queue(&mut self, at: &str, queue: Option<&String>) -> String {
        let Some(queue) = queue else {
            return MAIN_QUEUE.to_owned();
        };
        let valid = !queue.is_empty()
            && queue
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c));
        if !valid {
            self.problems.push(
                Some(at),
                "queue",
                format!(
                    "{queue:?} is not a valid queue name: use lowercase letters, digits, \
                     '-', '_' and '.'"
                ),
            );
        }
        queue.clone()
    }

    fn group(&mut self, at: &str, group: Option<&String>) -> Option<String> {
        let group = group?;
        if group.trim().is_empty() {
            self.problems
                .push(Some(at), "group", "an empty group name: omit group instead");
        }
        Some(group.clone())
    }

    /// Checks `includeSnapshotsFrom` and returns it merged with the group's kubernetes
    /// bindings, the way shell-operator merges them: named first, then the group's,
    /// each once.
    fn snapshots(&mut self, at: &str, include: &[String], group: Option<&str>) -> Vec<String> {
        for name in include {
            if !self.kubernetes_names.contains(name.as_str()) {
                self.problems.push(
                    Some(at),
                    "includeSnapshotsFrom",
                    format!("{name:?} is not the name of a kubernetes binding of this hook"),
                );
            }
        }
        let members = group.and_then(|g| self.group_members.get(g));
        let mut merged: Vec<String> = Vec::with_capacity(include.len());
        for name in include
            .iter()
            .map(String::as_str)
            .chain(members.into_iter().flatten().copied())
        {
            if !merged.iter().any(|m| m == name) {
                merged.push(name.to_owned());
            }
        }
        merged
    }

    fn schedule(
        &mut self,
        index: usize,
        binding: &ScheduleBindingConfig,
    ) -> Option<ScheduleBinding> {
        let at = location(BindingKind::Schedule, index, &binding.name);
        let crontab = Schedule::parse(&binding.crontab)
            .map_err(|reason| self.problems.push(Some(&at), "crontab", reason.to_string()))
            .ok();
        let queue = self.queue(&at, binding.queue.as_ref());
        let group = self.group(&at, binding.group.as_ref());
        let include_snapshots_from =
            self.snapshots(&at, &binding.include_snapshots_from, group.as_deref());
        Some(ScheduleBinding {
            name: binding.name.clone(),
            crontab: crontab?,
            allow_failure: binding.allow_failure,
            queue,
            group,
            include_snapshots_from,
        })
    }

    fn kubernetes(
        &mut self,
        index: usize,
        binding: &KubernetesBindingConfig,
        kind_exists: &KindExists<'_>,
    ) -> Option<KubernetesBinding> {
        let at = location(BindingKind::Kubernetes, index, &binding.name);
        let p = &mut self.problems;

        let api_version_ok = match binding.api_version.as_deref() {
            Some(api_version) => check_api_version(api_version)
                .map_err(|reason| p.push(Some(&at), "apiVersion", reason))
                .is_ok(),
            None => true,
        };
        if binding.kind.trim().is_empty() {
            p.push(
                Some(&at),
                "kind",
                "kind is required, e.g. Pod or deployments",
            );
        } else if api_version_ok
            && let Err(reason) = kind_exists(binding.api_version.as_deref(), &binding.kind)
        {
            p.push(Some(&at), "kind", reason.to_string());
        }

        let execute_hook_on_event = match &binding.execute_hook_on_event {
            None => EventSet::ALL,
            Some(events) => {
                let mut set = EventSet::NONE;
                for event in events {
                    if set.contains(*event) {
                        p.push(
                            Some(&at),
                            "executeHookOnEvent",
                            format!("{} is listed twice", watch_event_name(*event)),
                        );
                    }
                    set.insert(*event);
                }
                set
            }
        };

        if let Some(names) = &binding.name_selector {
            if names.is_empty() {
                // shell-operator watches every name when the list is empty.
                self.warnings.push(
                    Some(&at),
                    "nameSelector.matchNames",
                    "an empty list selects every name, as in shell-operator: omit \
                     nameSelector to say so",
                );
            }
            if names.iter().any(|n| n.trim().is_empty()) {
                p.push(
                    Some(&at),
                    "nameSelector.matchNames",
                    "names must not be empty",
                );
            }
        }

        let label_selector = binding
            .label_selector
            .as_ref()
            .map(|s| check_label_selector(p, &at, "labelSelector", s));

        let field_selector = binding.field_selector.clone().unwrap_or_default();
        for (i, requirement) in field_selector.iter().enumerate() {
            let field = &requirement.field;
            let path = format!("fieldSelector.matchExpressions[{i}].field");
            if field.trim().is_empty() {
                p.push(Some(&at), path, "a field is required, e.g. status.phase");
            } else if field.contains(|c: char| c.is_whitespace() || ",=!".contains(c)) {
                p.push(Some(&at), path, format!("{field:?} is not a field path"));
            } else if field == "metadata.name"
                && binding
                    .name_selector
                    .as_ref()
                    .is_some_and(|n| !n.is_empty())
            {
                p.push(
                    Some(&at),
                    path,
                    "metadata.name and nameSelector.matchNames are mutually exclusive",
                );
            }
        }

        let namespace = binding
            .namespace
            .as_ref()
            .and_then(|ns| check_namespace_selector(p, &mut self.warnings, &at, ns, true));

        let jq_filter = match binding.jq_filter.as_deref() {
            None => None,
            Some(text) if text.trim().is_empty() => {
                p.push(
                    Some(&at),
                    "jqFilter",
                    "an empty filter: omit jqFilter instead",
                );
                None
            }
            Some(text) => jq::compile(text)
                .map_err(|e| p.push(Some(&at), "jqFilter", e.to_string()))
                .ok(),
        };

        let queue = self.queue(&at, binding.queue.as_ref());
        let wait_for_synchronization = binding.wait_for_synchronization.unwrap_or(true);
        if !wait_for_synchronization && queue == MAIN_QUEUE {
            self.problems.push(
                Some(&at),
                "waitForSynchronization",
                "false needs a named queue: Synchronization runs on the main queue, so a \
                 binding on the main queue always waits for it",
            );
        }
        let group = self.group(&at, binding.group.as_ref());
        let include_snapshots_from =
            self.snapshots(&at, &binding.include_snapshots_from, group.as_deref());

        Some(KubernetesBinding {
            id: BindingId {
                kind: BindingKind::Kubernetes,
                index,
            },
            name: binding.name.clone(),
            api_version: binding.api_version.clone(),
            kind: binding.kind.clone(),
            execute_hook_on_event,
            execute_hook_on_synchronization: binding
                .execute_hook_on_synchronization
                .unwrap_or(true),
            wait_for_synchronization,
            keep_full_objects_in_memory: binding.keep_full_objects_in_memory.unwrap_or(true),
            name_selector: binding.name_selector.clone().filter(|n| !n.is_empty()),
            label_selector,
            field_selector,
            namespace,
            jq_filter,
            allow_failure: binding.allow_failure,
            queue,
            group,
            include_snapshots_from,
        })
    }

    /// A `kubernetesValidating` or `kubernetesMutating` binding (`kind` says which).
    fn admission(
        &mut self,
        kind: BindingKind,
        index: usize,
        binding: &AdmissionBindingConfig,
    ) -> Option<AdmissionBinding> {
        let at = location(kind, index, &binding.name);
        let p = &mut self.problems;
        let what = if kind == BindingKind::Mutating {
            "mutating"
        } else {
            "validating"
        };

        if !binding.name.trim().is_empty() && !is_fully_qualified_name(&binding.name) {
            p.push(
                Some(&at),
                "name",
                format!(
                    "a {what} binding's name is its webhook's name: a lowercase domain \
                     with at least three segments, e.g. policy.example.com"
                ),
            );
        }

        if binding.rules.is_empty() {
            p.push(Some(&at), "rules", "at least one rule is required");
        }
        for (i, rule) in binding.rules.iter().enumerate() {
            let field = |name: &str| format!("rules[{i}].{name}");
            const OPERATIONS: [&str; 5] = ["CREATE", "UPDATE", "DELETE", "CONNECT", "*"];
            if rule.operations.is_empty() {
                p.push(
                    Some(&at),
                    field("operations"),
                    "at least one operation is required",
                );
            }
            for operation in &rule.operations {
                if !OPERATIONS.contains(&operation.as_str()) {
                    p.push(
                        Some(&at),
                        field("operations"),
                        format!("{operation:?} is not CREATE, UPDATE, DELETE, CONNECT or *"),
                    );
                }
            }
            for (name, list) in [
                ("apiGroups", &rule.api_groups),
                ("apiVersions", &rule.api_versions),
                ("resources", &rule.resources),
            ] {
                if list.is_empty() {
                    p.push(
                        Some(&at),
                        field(name),
                        "at least one entry is required (\"*\" for all)",
                    );
                }
            }
            if let Some(scope) = &rule.scope
                && !["Cluster", "Namespaced", "*"].contains(&scope.as_str())
            {
                p.push(
                    Some(&at),
                    field("scope"),
                    format!("{scope:?} is not Cluster, Namespaced or *"),
                );
            }
        }

        let failure_policy = match binding.failure_policy.as_deref() {
            None | Some("Fail") => FailurePolicy::Fail,
            Some("Ignore") => FailurePolicy::Ignore,
            Some(other) => {
                p.push(
                    Some(&at),
                    "failurePolicy",
                    format!("{other:?} is not Fail or Ignore"),
                );
                FailurePolicy::Fail
            }
        };

        // Operon applies nothing a webhook run submits, so a hook has no side effects of
        // Operon's making; which of the two declarations is true of the hook's own
        // actions only its author knows, and the API server enforces the difference.
        let side_effects = match binding.side_effects.as_deref() {
            None | Some("None") => SideEffects::None,
            Some("NoneOnDryRun") => SideEffects::NoneOnDryRun,
            Some(other) => {
                p.push(
                    Some(&at),
                    "sideEffects",
                    format!(
                        "{other:?} is not None or NoneOnDryRun (admissionregistration.k8s.io/v1 \
                         accepts no other value)"
                    ),
                );
                SideEffects::None
            }
        };

        let reinvocation_policy = match (kind, binding.reinvocation_policy.as_deref()) {
            (BindingKind::Mutating, None | Some("Never")) => Some(ReinvocationPolicy::Never),
            (BindingKind::Mutating, Some("IfNeeded")) => Some(ReinvocationPolicy::IfNeeded),
            (BindingKind::Mutating, Some(other)) => {
                p.push(
                    Some(&at),
                    "reinvocationPolicy",
                    format!("{other:?} is not Never or IfNeeded"),
                );
                Some(ReinvocationPolicy::Never)
            }
            (_, None) => None,
            (_, Some(_)) => {
                p.push(
                    Some(&at),
                    "reinvocationPolicy",
                    "only mutating webhooks are reinvoked: this field belongs to \
                     kubernetesMutating bindings",
                );
                None
            }
        };

        let enforcement = binding.enforcement.as_deref().and_then(|text| {
            text.parse::<Enforcement>()
                .map_err(|e| p.push(Some(&at), "enforcement", e.to_string()))
                .ok()
        });

        let mut condition_names = HashSet::new();
        for (i, condition) in binding.match_conditions.iter().enumerate() {
            let field = |name: &str| format!("matchConditions[{i}].{name}");
            if !is_qualified_name(&condition.name) {
                p.push(
                    Some(&at),
                    field("name"),
                    format!(
                        "{:?} is not a qualified name (alphanumerics, '-', '_' or '.', \
                         at most 63 characters, starting and ending with an alphanumeric)",
                        condition.name
                    ),
                );
            } else if !condition_names.insert(condition.name.as_str()) {
                p.push(
                    Some(&at),
                    field("name"),
                    format!("{:?} is used by an earlier condition", condition.name),
                );
            }
            if condition.expression.trim().is_empty() {
                p.push(
                    Some(&at),
                    field("expression"),
                    "a CEL expression is required",
                );
            }
        }
        if binding.match_conditions.len() > MAX_MATCH_CONDITIONS {
            p.push(
                Some(&at),
                "matchConditions",
                format!(
                    "{} conditions: the API server allows at most {MAX_MATCH_CONDITIONS}",
                    binding.match_conditions.len()
                ),
            );
        }

        let timeout_seconds = binding
            .timeout_seconds
            .unwrap_or(DEFAULT_WEBHOOK_TIMEOUT_SECONDS);
        if !(1..=30).contains(&timeout_seconds) {
            p.push(
                Some(&at),
                "timeoutSeconds",
                format!("{timeout_seconds} is not between 1 and 30 seconds"),
            );
        }

        let label_selector = binding
            .label_selector
            .as_ref()
            .map(|s| check_label_selector(p, &at, "labelSelector", s));
        let namespace_label_selector = binding
            .namespace
            .as_ref()
            .and_then(|ns| check_namespace_selector(p, &mut self.warnings, &at, ns, false))
            .and_then(|ns| ns.label_selector);

        let group = self.group(&at, binding.group.as_ref());
        let include_snapshots_from =
            self.snapshots(&at, &binding.include_snapshots_from, group.as_deref());

        Some(AdmissionBinding {
            id: BindingId { kind, index },
            name: binding.name.clone(),
            rules: binding.rules.clone(),
            failure_policy,
            side_effects,
            label_selector,
            namespace_label_selector,
            timeout_seconds,
            match_conditions: binding.match_conditions.clone(),
            reinvocation_policy,
            enforcement,
            include_snapshots_from,
        })
    }

    fn conversion(
        &mut self,
        index: usize,
        binding: &ConversionBindingConfig,
    ) -> Option<ConversionBinding> {
        let at = location(BindingKind::Conversion, index, &binding.name);
        let p = &mut self.problems;

        if binding.crd_name.trim().is_empty() {
            p.push(
                Some(&at),
                "crdName",
                "the CustomResourceDefinition's name is required, e.g. crontabs.example.com",
            );
        } else if !is_dns_subdomain(&binding.crd_name) || !binding.crd_name.contains('.') {
            p.push(
                Some(&at),
                "crdName",
                format!(
                    "{:?} is not a CustomResourceDefinition name (<plural>.<group>)",
                    binding.crd_name
                ),
            );
        }
        if binding.conversions.is_empty() {
            p.push(
                Some(&at),
                "conversions",
                "at least one conversion is required",
            );
        }
        let mut seen: HashSet<(&str, &str)> = HashSet::new();
        for (i, rule) in binding.conversions.iter().enumerate() {
            let from = rule.from_version.as_str();
            let to = rule.to_version.as_str();
            if from.trim().is_empty() {
                p.push(
                    Some(&at),
                    format!("conversions[{i}].fromVersion"),
                    "required",
                );
            }
            if to.trim().is_empty() {
                p.push(Some(&at), format!("conversions[{i}].toVersion"), "required");
            }
            if !from.is_empty() && from == to {
                p.push(
                    Some(&at),
                    format!("conversions[{i}]"),
                    format!("fromVersion and toVersion are both {from:?}"),
                );
            } else if !seen.insert((from, to)) {
                p.push(
                    Some(&at),
                    format!("conversions[{i}]"),
                    format!("the conversion {from} -> {to} is listed twice"),
                );
            }
        }

        let group = self.group(&at, binding.group.as_ref());
        let include_snapshots_from =
            self.snapshots(&at, &binding.include_snapshots_from, group.as_deref());

        Some(ConversionBinding {
            name: binding.name.clone(),
            crd_name: binding.crd_name.clone(),
            conversions: binding.conversions.clone(),
            include_snapshots_from,
        })
    }

    fn settings(&mut self, settings: Option<&HookSettings>) -> Settings {
        let Some(settings) = settings else {
            return Settings {
                execution_rate: None,
                timeout: DEFAULT_TIMEOUT,
            };
        };
        let p = &mut self.problems;
        let field = "settings.executionMinInterval";
        let min_interval = settings
            .execution_min_interval_ms
            .map(Duration::from_millis);
        if min_interval == Some(Duration::ZERO) {
            p.push(
                None,
                field,
                "must be longer than 0: omit it to not throttle the hook",
            );
        }
        if settings.execution_burst == Some(0) {
            p.push(None, "settings.executionBurst", "must be at least 1");
        }
        if settings.execution_burst.is_some() && min_interval.is_none() {
            p.push(
                None,
                "settings.executionBurst",
                "has no effect without settings.executionMinInterval",
            );
        }
        if settings.timeout_ms == Some(0) {
            p.push(None, "settings.timeout", "must be longer than 0");
        }
        Settings {
            execution_rate: min_interval.map(|min_interval| ExecutionRate {
                min_interval,
                burst: settings.execution_burst.unwrap_or(1).max(1),
            }),
            timeout: settings
                .timeout_ms
                .map_or(DEFAULT_TIMEOUT, Duration::from_millis),
        }
    }
}

fn watch_event_name(event: WatchEvent) -> &'static str {
    match event {
        WatchEvent::Added => "Added",
        WatchEvent::Modified => "Modified",
        WatchEvent::Deleted => "Deleted",
    }
}

/// `v1` or `group/version`.
fn check_api_version(api_version: &str) -> Result<(), String> {
    if is_api_version(api_version) {
        Ok(())
    } else {
        Err(format!(
            "{api_version:?} is not an apiVersion (e.g. v1 or apps/v1); omit it for the \
             preferred version"
        ))
    }
}

/// Checks a label selector and returns it with `matchLabels` keys made unique (the
/// last value wins, as for every string map of the contract) and sorted.
fn check_label_selector(
    p: &mut Problems<'_>,
    at: &str,
    field: &str,
    selector: &LabelSelector,
) -> LabelSelector {
    for (key, value) in &selector.match_labels {
        if let Err(reason) = label_key(key) {
            p.push(Some(at), format!("{field}.matchLabels"), reason.to_string());
        }
        if let Err(reason) = label_value(value) {
            p.push(
                Some(at),
                format!("{field}.matchLabels.{key}"),
                reason.to_string(),
            );
        }
    }
    for (i, requirement) in selector.match_expressions.iter().enumerate() {
        let path = format!("{field}.matchExpressions[{i}]");
        if let Err(reason) = label_key(&requirement.key) {
            p.push(Some(at), format!("{path}.key"), reason.to_string());
        }
        match requirement.operator {
            LabelOperator::In | LabelOperator::NotIn => {
                if requirement.values.is_empty() {
                    p.push(
                        Some(at),
                        format!("{path}.values"),
                        "In and NotIn need at least one value",
                    );
                }
                for value in &requirement.values {
                    if let Err(reason) = label_value(value) {
                        p.push(Some(at), format!("{path}.values"), reason.to_string());
                    }
                }
            }
            LabelOperator::Exists | LabelOperator::DoesNotExist => {
                if !requirement.values.is_empty() {
                    p.push(
                        Some(at),
                        format!("{path}.values"),
                        "Exists and DoesNotExist take no values",
                    );
                }
            }
        }
    }
    let match_labels: BTreeMap<&String, &String> =
        selector.match_labels.iter().map(|(k, v)| (k, v)).collect();
    LabelSelector {
        match_labels: match_labels
            .into_iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        match_expressions: selector.match_expressions.clone(),
    }
}

/// Checks a namespace selector; `names_allowed` is false for admission webhooks,
/// whose `namespaceSelector` can only match labels. `None` when it selects every
/// namespace (an empty `nameSelector.matchNames` and no labels, as shell-operator reads
/// it).
fn check_namespace_selector(
    p: &mut Problems<'_>,
    w: &mut Problems<'_>,
    at: &str,
    selector: &NamespaceSelector,
    names_allowed: bool,
) -> Option<NamespaceSelector> {
    if selector.name_selector.is_none() && selector.label_selector.is_none() {
        p.push(
            Some(at),
            "namespace",
            "give nameSelector or labelSelector, or omit namespace to watch every namespace",
        );
    }
    if let Some(names) = &selector.name_selector {
        if !names_allowed {
            p.push(
                Some(at),
                "namespace.nameSelector",
                "a webhook selects namespaces by labels only: use namespace.labelSelector \
                 with the kubernetes.io/metadata.name label",
            );
        } else if names.is_empty() {
            // shell-operator watches every namespace when the list is empty.
            w.push(
                Some(at),
                "namespace.nameSelector.matchNames",
                "an empty list selects every namespace, as in shell-operator: omit it to \
                 say so",
            );
        }
        for name in names {
            if !is_dns_label(name) {
                p.push(
                    Some(at),
                    "namespace.nameSelector.matchNames",
                    format!("{name:?} is not a namespace name"),
                );
            }
        }
    }
    let checked = NamespaceSelector {
        name_selector: selector.name_selector.clone().filter(|n| !n.is_empty()),
        label_selector: selector
            .label_selector
            .as_ref()
            .map(|s| check_label_selector(p, at, "namespace.labelSelector", s)),
    };
    (checked.name_selector.is_some() || checked.label_selector.is_some()).then_some(checked)
}

#[cfg(test)]
mod tests;
