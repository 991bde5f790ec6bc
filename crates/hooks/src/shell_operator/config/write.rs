//! A declared [`HookConfig`] written back as shell-operator's `configVersion: v1`
//! document: camelCase keys, nothing that was not set, durations in Go syntax. What
//! `operon hook test` prints, in the form hook authors write; [`super::parse`] reads it
//! back unchanged.

use operon_data::model::{
    AdmissionBindingConfig, ConversionBindingConfig, FieldOperator, HookConfig, HookSettings,
    KubernetesBindingConfig, LabelOperator, LabelSelector, NamespaceSelector,
    ScheduleBindingConfig,
};
use serde_json::{Map, Value, json};

/// `config` as a shell-operator v1 document.
pub fn to_json(config: &HookConfig) -> Value {
    let mut out = Map::new();
    out.insert("configVersion".into(), json!("v1"));
    if let Some(order) = config.on_startup {
        out.insert("onStartup".into(), json!(order));
    }
    let section = |items: Vec<Value>| (!items.is_empty()).then_some(Value::Array(items));
    let sections = [
        (
            "schedule",
            section(config.schedule.iter().map(schedule).collect()),
        ),
        (
            "kubernetes",
            section(config.kubernetes.iter().map(kubernetes).collect()),
        ),
        (
            "kubernetesValidating",
            section(config.kubernetes_validating.iter().map(admission).collect()),
        ),
        (
            "kubernetesMutating",
            section(config.kubernetes_mutating.iter().map(admission).collect()),
        ),
        (
            "kubernetesCustomResourceConversion",
            section(
                config
                    .kubernetes_conversion
                    .iter()
                    .map(conversion)
                    .collect(),
            ),
        ),
        ("settings", config.settings.as_ref().and_then(settings)),
    ];
    for (key, value) in sections {
        if let Some(value) = value {
            out.insert(key.into(), value);
        }
    }
    Value::Object(out)
}

/// Inserts `value` under `key` when it is set.
fn put(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        map.insert(key.into(), value);
    }
}

/// The fields every binding may carry after its own.
fn common(
    map: &mut Map<String, Value>,
    allow_failure: Option<bool>,
    queue: Option<&String>,
    group: Option<&String>,
    include: &[String],
) {
    put(
        map,
        "allowFailure",
        allow_failure.filter(|a| *a).map(Value::Bool),
    );
    put(map, "queue", queue.map(|q| json!(q)));
    put(map, "group", group.map(|g| json!(g)));
    put(
        map,
        "includeSnapshotsFrom",
        (!include.is_empty()).then(|| json!(include)),
    );
}

fn schedule(binding: &ScheduleBindingConfig) -> Value {
    let mut map = Map::new();
    map.insert("name".into(), json!(binding.name));
    map.insert("crontab".into(), json!(binding.crontab));
    common(
        &mut map,
        Some(binding.allow_failure),
        binding.queue.as_ref(),
        binding.group.as_ref(),
        &binding.include_snapshots_from,
    );
    Value::Object(map)
}

fn kubernetes(binding: &KubernetesBindingConfig) -> Value {
    let mut map = Map::new();
    map.insert("name".into(), json!(binding.name));
    put(
        &mut map,
        "apiVersion",
        binding.api_version.as_ref().map(|v| json!(v)),
    );
    map.insert("kind".into(), json!(binding.kind));
    put(
        &mut map,
        "executeHookOnEvent",
        binding
            .execute_hook_on_event
            .as_ref()
            .map(|events| Value::Array(events.iter().map(|e| json!(e.as_str())).collect())),
    );
    for (key, flag) in [
        (
            "executeHookOnSynchronization",
            binding.execute_hook_on_synchronization,
        ),
        ("waitForSynchronization", binding.wait_for_synchronization),
        (
            "keepFullObjectsInMemory",
            binding.keep_full_objects_in_memory,
        ),
    ] {
        put(&mut map, key, flag.map(Value::Bool));
    }
    put(
        &mut map,
        "nameSelector",
        binding
            .name_selector
            .as_ref()
            .map(|names| json!({"matchNames": names})),
    );
    put(
        &mut map,
        "labelSelector",
        binding.label_selector.as_ref().map(label_selector),
    );
    put(
        &mut map,
        "fieldSelector",
        binding.field_selector.as_ref().map(|requirements| {
            let expressions: Vec<Value> = requirements
                .iter()
                .map(|r| {
                    let operator = match r.operator {
                        FieldOperator::Equals => "Equals",
                        FieldOperator::NotEquals => "NotEquals",
                    };
                    json!({"field": r.field, "operator": operator, "value": r.value})
                })
                .collect();
            json!({"matchExpressions": expressions})
        }),
    );
    put(
        &mut map,
        "namespace",
        binding.namespace.as_ref().map(namespace_selector),
    );
    put(
        &mut map,
        "jqFilter",
        binding.jq_filter.as_ref().map(|f| json!(f)),
    );
    common(
        &mut map,
        Some(binding.allow_failure),
        binding.queue.as_ref(),
        binding.group.as_ref(),
        &binding.include_snapshots_from,
    );
    Value::Object(map)
}

/// A `kubernetesValidating` or `kubernetesMutating` item.
fn admission(binding: &AdmissionBindingConfig) -> Value {
    let mut map = Map::new();
    map.insert("name".into(), json!(binding.name));
    let rules: Vec<Value> = binding
        .rules
        .iter()
        .map(|rule| {
            let mut out = Map::new();
            out.insert("operations".into(), json!(rule.operations));
            out.insert("apiGroups".into(), json!(rule.api_groups));
            out.insert("apiVersions".into(), json!(rule.api_versions));
            out.insert("resources".into(), json!(rule.resources));
            put(&mut out, "scope", rule.scope.as_ref().map(|s| json!(s)));
            Value::Object(out)
        })
        .collect();
    map.insert("rules".into(), Value::Array(rules));
    put(
        &mut map,
        "failurePolicy",
        binding.failure_policy.as_ref().map(|p| json!(p)),
    );
    put(
        &mut map,
        "sideEffects",
        binding.side_effects.as_ref().map(|p| json!(p)),
    );
    put(
        &mut map,
        "labelSelector",
        binding.label_selector.as_ref().map(label_selector),
    );
    put(
        &mut map,
        "namespace",
        binding.namespace.as_ref().map(namespace_selector),
    );
    put(
        &mut map,
        "timeoutSeconds",
        binding.timeout_seconds.map(|t| json!(t)),
    );
    put(
        &mut map,
        "matchConditions",
        (!binding.match_conditions.is_empty()).then(|| {
            Value::Array(
                binding
                    .match_conditions
                    .iter()
                    .map(|c| json!({"name": c.name, "expression": c.expression}))
                    .collect(),
            )
        }),
    );
    put(
        &mut map,
        "reinvocationPolicy",
        binding.reinvocation_policy.as_ref().map(|p| json!(p)),
    );
    put(
        &mut map,
        "enforcement",
        binding.enforcement.as_ref().map(|e| json!(e)),
    );
    common(
        &mut map,
        None,
        None,
        binding.group.as_ref(),
        &binding.include_snapshots_from,
    );
    Value::Object(map)
}

fn conversion(binding: &ConversionBindingConfig) -> Value {
    let mut map = Map::new();
    map.insert("name".into(), json!(binding.name));
    map.insert("crdName".into(), json!(binding.crd_name));
    let rules: Vec<Value> = binding
        .conversions
        .iter()
        .map(|rule| json!({"fromVersion": rule.from_version, "toVersion": rule.to_version}))
        .collect();
    map.insert("conversions".into(), Value::Array(rules));
    common(
        &mut map,
        None,
        None,
        binding.group.as_ref(),
        &binding.include_snapshots_from,
    );
    Value::Object(map)
}

fn label_selector(selector: &LabelSelector) -> Value {
    let mut map = Map::new();
    if !selector.match_labels.is_empty() {
        let labels: Map<String, Value> = selector
            .match_labels
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        map.insert("matchLabels".into(), Value::Object(labels));
    }
    if !selector.match_expressions.is_empty() {
        let expressions: Vec<Value> = selector
            .match_expressions
            .iter()
            .map(|r| {
                let operator = match r.operator {
                    LabelOperator::In => "In",
                    LabelOperator::NotIn => "NotIn",
                    LabelOperator::Exists => "Exists",
                    LabelOperator::DoesNotExist => "DoesNotExist",
                };
                let mut out = Map::new();
                out.insert("key".into(), json!(r.key));
                out.insert("operator".into(), json!(operator));
                if !r.values.is_empty() {
                    out.insert("values".into(), json!(r.values));
                }
                Value::Object(out)
            })
            .collect();
        map.insert("matchExpressions".into(), Value::Array(expressions));
    }
    Value::Object(map)
}

fn namespace_selector(selector: &NamespaceSelector) -> Value {
    let mut map = Map::new();
    put(
        &mut map,
        "nameSelector",
        selector
            .name_selector
            .as_ref()
            .map(|names| json!({"matchNames": names})),
    );
    put(
        &mut map,
        "labelSelector",
        selector.label_selector.as_ref().map(label_selector),
    );
    Value::Object(map)
}

fn settings(settings: &HookSettings) -> Option<Value> {
    let mut map = Map::new();
    put(
        &mut map,
        "executionMinInterval",
        settings.execution_min_interval_ms.map(go_duration),
    );
    put(
        &mut map,
        "executionBurst",
        settings.execution_burst.map(|b| json!(b)),
    );
    put(&mut map, "timeout", settings.timeout_ms.map(go_duration));
    (!map.is_empty()).then_some(Value::Object(map))
}

/// Milliseconds in Go's duration syntax: `1h30m`, `3s`, `1500ms`, `0s`.
fn go_duration(ms: u64) -> Value {
    if ms == 0 {
        return json!("0s");
    }
    if !ms.is_multiple_of(1000) {
        return json!(format!("{ms}ms"));
    }
    let seconds = ms / 1000;
    let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    let mut text = String::new();
    if h > 0 {
        text.push_str(&format!("{h}h"));
    }
    if m > 0 {
        text.push_str(&format!("{m}m"));
    }
    if s > 0 {
        text.push_str(&format!("{s}s"));
    }
    json!(text)
}
