//! The format types turned into the contract's [`HookConfig`], with shell-operator's
//! defaults: the binding names it gives unnamed bindings, and v0 mapped onto v1.
//!
//! Each binding is read on its own, so a problem in one does not hide a problem in
//! another; the problems are named by binding (`kubernetes[0] "pods"`). The defaults
//! that depend on meaning (queues, events, timeouts) are applied later, by
//! `hooks::config::validate`, for wasm and script hooks alike.

use super::format_v0::{self, ConfigV0, EventV0, KubernetesV0, ScheduleV0};
use super::format_v1::{
    self, AdmissionV1, ConfigV1, ConversionV1, EventV1, FieldOperatorV1, KubernetesV1,
    LabelOperatorV1, LabelSelectorV1, NamespaceV1, ScheduleV1, SettingsV1,
};
use super::read::{Hints, Reader};
use operon_data::model::config::{BindingKind, location};
use operon_data::model::{
    AdmissionBindingConfig, ConfigVersion, ConversionBindingConfig, ConversionRule, FieldOperator,
    FieldRequirement, HookConfig, HookSettings, KubernetesBindingConfig, LabelOperator,
    LabelRequirement, LabelSelector, MatchCondition, NamespaceSelector, ScheduleBindingConfig,
    WatchEvent, WebhookRule,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// What is said of an option shell-operator accepts and does nothing with.
const IGNORED_OPTION: &str = "ignored: shell-operator accepts it but does nothing with it, and \
                              neither does Operon; it can be removed";

/// A `configVersion: v1` document.
pub(super) fn config_v1(r: &mut Reader<'_>, document: Value) -> Option<HookConfig> {
    let config: ConfigV1 = r.read(None, document, format_v1::HINTS)?;
    let schedule = bindings(r, BindingKind::Schedule, "schedule", config.schedule, &[])
        .into_iter()
        .map(|(_, s)| schedule_v1(s))
        .collect();
    let kubernetes = bindings(
        r,
        BindingKind::Kubernetes,
        "kubernetes",
        config.kubernetes,
        &[],
    )
    .into_iter()
    .map(|(at, k)| kubernetes_v1(r, &at, k))
    .collect();
    let kubernetes_validating =
        admissions(r, BindingKind::Validating, config.kubernetes_validating);
    let kubernetes_mutating = admissions(r, BindingKind::Mutating, config.kubernetes_mutating);
    let kubernetes_conversion = bindings(
        r,
        BindingKind::Conversion,
        "",
        config.kubernetes_conversion,
        &[],
    )
    .into_iter()
    .map(|(_, c)| conversion_v1(c))
    .collect();
    Some(HookConfig {
        version: ConfigVersion::V1,
        on_startup: config.on_startup.map(|order| order.0),
        schedule,
        kubernetes,
        kubernetes_validating,
        kubernetes_mutating,
        kubernetes_conversion,
        settings: config.settings.map(settings_v1),
    })
}

/// The legacy document without `configVersion`; its hooks receive v1 binding contexts
/// in v0's shape (see [`ConfigVersion::V0`]).
pub(super) fn config_v0(r: &mut Reader<'_>, document: Value) -> Option<HookConfig> {
    let config: ConfigV0 = r.read(None, document, format_v0::HINTS)?;
    let schedule = bindings(r, BindingKind::Schedule, "schedule", config.schedule, &[])
        .into_iter()
        .map(|(_, s)| schedule_v0(s))
        .collect();
    let kubernetes = bindings(
        r,
        BindingKind::Kubernetes,
        "onKubernetesEvent",
        config.on_kubernetes_event,
        &[],
    )
    .into_iter()
    .map(|(_, k)| kubernetes_v0(k))
    .collect();
    Some(HookConfig {
        version: ConfigVersion::V0,
        on_startup: config.on_startup.map(|order| order.0),
        schedule,
        kubernetes,
        kubernetes_validating: Vec::new(),
        kubernetes_mutating: Vec::new(),
        kubernetes_conversion: Vec::new(),
        settings: None,
    })
}

/// Each item of a binding list read as a `T`, with its location for later problems.
/// `default_name` is what shell-operator calls a binding without `name`; the location
/// uses it too, so problems name the binding as the hook will see it.
fn bindings<T: DeserializeOwned>(
    r: &mut Reader<'_>,
    kind: BindingKind,
    default_name: &str,
    items: Option<Vec<Value>>,
    hints: Hints<'_>,
) -> Vec<(String, T)> {
    (items.unwrap_or_default().into_iter().enumerate())
        .filter_map(|(index, item)| {
            let name = match item.get("name") {
                Some(Value::String(name)) => name.as_str(),
                _ => default_name,
            };
            let at = location(kind, index, name);
            let read = r.read(Some(&at), item, hints)?;
            Some((at, read))
        })
        .collect()
}

fn admissions(
    r: &mut Reader<'_>,
    kind: BindingKind,
    items: Option<Vec<Value>>,
) -> Vec<AdmissionBindingConfig> {
    bindings(r, kind, "", items, format_v1::ADMISSION_HINTS)
        .into_iter()
        .map(|(_, a)| admission_v1(a))
        .collect()
}

fn flag(value: Option<super::values::Flag>) -> bool {
    value.is_some_and(|f| f.0)
}

fn schedule_v1(s: ScheduleV1) -> ScheduleBindingConfig {
    ScheduleBindingConfig {
        name: s.name.unwrap_or_else(|| "schedule".to_owned()),
        crontab: s.crontab.unwrap_or_default(),
        allow_failure: flag(s.allow_failure),
        queue: s.queue,
        group: s.group,
        include_snapshots_from: s.include_snapshots_from.unwrap_or_default(),
    }
}

fn kubernetes_v1(r: &mut Reader<'_>, at: &str, k: KubernetesV1) -> KubernetesBindingConfig {
    if k.resynchronization_period.is_some() {
        r.warning(Some(at), "resynchronizationPeriod", IGNORED_OPTION);
    }
    // shell-operator prefers executeHookOnEvent when both are given, which would drop
    // the other silently.
    if k.execute_hook_on_event.is_some() && k.watch_event.is_some() {
        r.problem(
            Some(at),
            "watchEvent",
            "give only executeHookOnEvent (watchEvent is its older spelling)",
        );
    }
    let events = k.execute_hook_on_event.or(k.watch_event);
    KubernetesBindingConfig {
        name: k.name.unwrap_or_else(|| "kubernetes".to_owned()),
        api_version: k.api_version,
        kind: k.kind.unwrap_or_default(),
        execute_hook_on_event: events.map(|events| events.into_iter().map(event_v1).collect()),
        execute_hook_on_synchronization: k.execute_hook_on_synchronization.map(|f| f.0),
        wait_for_synchronization: k.wait_for_synchronization.map(|f| f.0),
        keep_full_objects_in_memory: k.keep_full_objects_in_memory.map(|f| f.0),
        name_selector: k.name_selector.map(|names| names.0),
        label_selector: k.label_selector.map(label_selector),
        field_selector: k.field_selector.map(|selector| {
            (selector.match_expressions.into_iter())
                .map(|e| FieldRequirement {
                    field: e.field,
                    operator: match e.operator {
                        FieldOperatorV1::Equals => FieldOperator::Equals,
                        FieldOperatorV1::NotEquals => FieldOperator::NotEquals,
                    },
                    value: e.value,
                })
                .collect()
        }),
        namespace: k.namespace.map(namespace_v1),
        jq_filter: k.jq_filter,
        allow_failure: flag(k.allow_failure),
        queue: k.queue,
        group: k.group,
        include_snapshots_from: k.include_snapshots_from.unwrap_or_default(),
    }
}

fn event_v1(event: EventV1) -> WatchEvent {
    match event {
        EventV1::Added => WatchEvent::Added,
        EventV1::Modified => WatchEvent::Modified,
        EventV1::Deleted => WatchEvent::Deleted,
    }
}

fn namespace_v1(namespace: NamespaceV1) -> NamespaceSelector {
    NamespaceSelector {
        name_selector: namespace.name_selector.map(|names| names.0),
        label_selector: namespace.label_selector.map(label_selector),
    }
}

fn label_selector(selector: LabelSelectorV1) -> LabelSelector {
    LabelSelector {
        match_labels: (selector.match_labels.unwrap_or_default().into_iter())
            .map(|(key, value)| (key, value.0))
            .collect(),
        match_expressions: (selector.match_expressions.unwrap_or_default().into_iter())
            .map(|e| LabelRequirement {
                key: e.key,
                operator: match e.operator {
                    LabelOperatorV1::In => LabelOperator::In,
                    LabelOperatorV1::NotIn => LabelOperator::NotIn,
                    LabelOperatorV1::Exists => LabelOperator::Exists,
                    LabelOperatorV1::DoesNotExist => LabelOperator::DoesNotExist,
                },
                values: e.values.unwrap_or_default(),
            })
            .collect(),
    }
}

fn admission_v1(a: AdmissionV1) -> AdmissionBindingConfig {
    AdmissionBindingConfig {
        name: a.name.unwrap_or_default(),
        rules: (a.rules.unwrap_or_default().into_iter())
            .map(|rule| WebhookRule {
                operations: rule.operations.unwrap_or_default(),
                api_groups: rule.api_groups.unwrap_or_default(),
                api_versions: rule.api_versions.unwrap_or_default(),
                resources: rule.resources.unwrap_or_default(),
                scope: rule.scope,
            })
            .collect(),
        failure_policy: a.failure_policy,
        side_effects: a.side_effects,
        label_selector: a.label_selector.map(label_selector),
        namespace: a.namespace.map(|namespace| NamespaceSelector {
            name_selector: None,
            label_selector: namespace.label_selector.map(label_selector),
        }),
        timeout_seconds: a.timeout_seconds.map(|t| t.0),
        match_conditions: (a.match_conditions.unwrap_or_default().into_iter())
            .map(|c| MatchCondition {
                name: c.name.unwrap_or_default(),
                expression: c.expression.unwrap_or_default(),
            })
            .collect(),
        reinvocation_policy: a.reinvocation_policy,
        enforcement: a.enforcement,
        group: a.group,
        include_snapshots_from: a.include_snapshots_from.unwrap_or_default(),
    }
}

fn conversion_v1(c: ConversionV1) -> ConversionBindingConfig {
    ConversionBindingConfig {
        name: c.name.unwrap_or_default(),
        crd_name: c.crd_name.unwrap_or_default(),
        conversions: (c.conversions.unwrap_or_default().into_iter())
            .map(|rule| ConversionRule {
                from_version: rule.from_version.unwrap_or_default(),
                to_version: rule.to_version.unwrap_or_default(),
            })
            .collect(),
        group: c.group,
        include_snapshots_from: c.include_snapshots_from.unwrap_or_default(),
    }
}

fn settings_v1(s: SettingsV1) -> HookSettings {
    HookSettings {
        execution_min_interval_ms: s.execution_min_interval.map(|d| d.millis()),
        execution_burst: s.execution_burst.map(|b| b.0),
        timeout_ms: s.timeout.map(|d| d.millis()),
    }
}

fn schedule_v0(s: ScheduleV0) -> ScheduleBindingConfig {
    ScheduleBindingConfig {
        name: s.name.unwrap_or_else(|| "schedule".to_owned()),
        crontab: s.crontab.unwrap_or_default(),
        allow_failure: flag(s.allow_failure),
        queue: None,
        group: None,
        include_snapshots_from: Vec::new(),
    }
}

fn kubernetes_v0(k: KubernetesV0) -> KubernetesBindingConfig {
    KubernetesBindingConfig {
        name: k.name.unwrap_or_else(|| "onKubernetesEvent".to_owned()),
        api_version: None,
        kind: k.kind.unwrap_or_default(),
        // A v0 binding without `event` runs on every event, as v0 documented (the
        // current shell-operator converter turns it into a binding that never runs).
        execute_hook_on_event: k.event.map(|events| {
            (events.into_iter())
                .map(|event| match event {
                    EventV0::Add => WatchEvent::Added,
                    EventV0::Update => WatchEvent::Modified,
                    EventV0::Delete => WatchEvent::Deleted,
                })
                .collect()
        }),
        // v0 has no Synchronization: its hooks hear of objects only through events.
        execute_hook_on_synchronization: Some(false),
        wait_for_synchronization: None,
        keep_full_objects_in_memory: None,
        name_selector: k.object_name.map(|name| vec![name]),
        label_selector: k.selector.map(label_selector),
        field_selector: None,
        namespace: k.namespace_selector.and_then(|selector| {
            match (flag(selector.any), selector.match_names) {
                (false, Some(names)) => Some(NamespaceSelector {
                    name_selector: Some(names),
                    label_selector: None,
                }),
                (true, _) | (false, None) => None,
            }
        }),
        jq_filter: k.jq_filter,
        allow_failure: flag(k.allow_failure),
        queue: None,
        group: None,
        include_snapshots_from: Vec::new(),
    }
}
