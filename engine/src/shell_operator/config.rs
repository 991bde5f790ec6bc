//! shell-operator hook configurations (what a hook prints for `--config`), YAML or
//! JSON, `configVersion: v1` or the legacy v0 form, read into the declared
//! [`HookConfig`].
//!
//! Only the *shape* is checked here (field names and types, in shell-operator's
//! spelling); every rule about *meaning* lives in `hooks::config::validate`, so wasm and
//! script hooks are held to the same rules. Every problem is reported at once.

use super::duration::parse_go_duration;
use crate::model::config::{BindingKind, ConfigProblem, Problems, location};
use crate::model::{
    ConversionBindingConfig, ConversionRule, FieldOperator, FieldRequirement, HookConfig,
    HookSettings, KubernetesBindingConfig, LabelOperator, LabelRequirement, LabelSelector,
    NamespaceSelector, ScheduleBindingConfig, ValidatingBindingConfig, WatchEvent, WebhookRule,
};
use serde_json::{Map, Value};

/// Reads a shell-operator hook configuration (what a hook prints for `--config`), YAML
/// or JSON, into the contract's [`HookConfig`].
///
/// `configVersion: v1` uses shell-operator's v1 field names. Without `configVersion`
/// the legacy v0 form is read (`onStartup`, `schedule{name, crontab, allowFailure}`,
/// `onKubernetesEvent{name, event: [add|update|delete], kind, selector, objectName,
/// namespaceSelector{matchNames, any}, jqFilter, allowFailure}`) and mapped to v1; such
/// hooks then receive v1 binding contexts.
///
/// Only the shape is checked here: every unknown field (a typo must not silently turn
/// an option off) and every value of the wrong type is a problem. What the values
/// mean is checked by [`crate::hooks::config::validate`]. As in shell-operator, a `schedule` or `kubernetes`
/// binding without `name` is called `schedule` or `kubernetes` (`onKubernetesEvent`
/// in v0).
///
/// Operon's one extension is `settings.timeout` (a duration such as `30s`): the
/// run budget, which shell-operator does not have. Options shell-operator accepts but
/// ignores (`resynchronizationPeriod`) or that Operon does not offer
/// (`kubernetesMutating`, `matchConditions`, `sideEffects: NoneOnDryRun`) are problems
/// with a reason, so nothing is silently dropped.
pub fn parse(hook: &str, text: &str) -> Result<HookConfig, Vec<ConfigProblem>> {
    let mut r = Reader {
        problems: Problems::new(hook),
    };
    let document = match parse_document(text) {
        Ok(document) => document,
        Err(reason) => {
            r.problems.push(None, "", reason);
            return Err(r.problems.list);
        }
    };
    let config = match document.as_object().map(|map| map.get("configVersion")) {
        None => {
            r.problems.push(
                None,
                "",
                format!(
                    "the configuration must be a mapping, not {}",
                    type_name(&document)
                ),
            );
            None
        }
        Some(None) => r.config_v0(&document),
        Some(Some(Value::String(version))) if version == "v1" => r.config_v1(&document),
        Some(Some(other)) => {
            r.problems.push(
                None,
                "configVersion",
                format!("{other} is not a supported version: use v1 (or omit it for v0)"),
            );
            None
        }
    };
    match config {
        Some(config) => r.problems.finish(config),
        None => Err(r.problems.list),
    }
}

fn parse_document(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Err("the configuration is empty".to_owned());
    }
    if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))
    } else {
        yaml_serde::from_str(text).map_err(|e| format!("not valid YAML: {e}"))
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Where a value sits: the binding (once known) and the field path inside it.
#[derive(Debug, Clone, Default)]
struct At {
    binding: Option<String>,
    path: String,
}

impl At {
    fn binding(kind: BindingKind, index: usize, name: &str) -> Self {
        Self {
            binding: Some(location(kind, index, name)),
            path: String::new(),
        }
    }

    /// A top-level field outside any binding.
    fn top(field: &str) -> Self {
        Self {
            binding: None,
            path: field.to_owned(),
        }
    }

    fn key(&self, key: &str) -> Self {
        Self {
            binding: self.binding.clone(),
            path: if self.path.is_empty() {
                key.to_owned()
            } else {
                format!("{}.{key}", self.path)
            },
        }
    }

    fn item(&self, index: usize) -> Self {
        Self {
            binding: self.binding.clone(),
            path: format!("{}[{index}]", self.path),
        }
    }
}

/// Fields that exist elsewhere but are not accepted, with the reason to give.
type Refused<'a> = &'a [(&'a str, &'a str)];

const RESYNC_REFUSED: (&str, &str) = (
    "resynchronizationPeriod",
    "not supported: shell-operator accepts it but does nothing with it; remove it",
);

/// A reader of one configuration document that records every shape problem.
struct Reader<'h> {
    problems: Problems<'h>,
}

impl Reader<'_> {
    fn problem(&mut self, at: &At, reason: impl Into<String>) {
        self.problems
            .push(at.binding.as_deref(), at.path.clone(), reason);
    }

    /// `value` as a mapping whose keys are all in `allowed`.
    fn object<'v>(
        &mut self,
        at: &At,
        value: &'v Value,
        allowed: &[&str],
        refused: Refused<'_>,
    ) -> Option<&'v Map<String, Value>> {
        let Some(map) = value.as_object() else {
            self.problem(
                at,
                format!("expected a mapping, found {}", type_name(value)),
            );
            return None;
        };
        for key in map.keys() {
            if allowed.contains(&key.as_str()) {
                continue;
            }
            let reason = match refused.iter().find(|(name, _)| name == key) {
                Some((_, reason)) => (*reason).to_owned(),
                None => unknown_field_reason(key, allowed),
            };
            self.problem(&at.key(key), reason);
        }
        Some(map)
    }

    /// A field's value; `null` counts as absent, as it does for shell-operator.
    fn field<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
        map.get(key).filter(|v| !v.is_null())
    }

    fn string(&mut self, at: &At, map: &Map<String, Value>, key: &str) -> Option<String> {
        match Self::field(map, key)? {
            Value::String(s) => Some(s.clone()),
            other => {
                self.problem(
                    &at.key(key),
                    format!("expected a string, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn bool(&mut self, at: &At, map: &Map<String, Value>, key: &str) -> Option<bool> {
        match Self::field(map, key)? {
            Value::Bool(b) => Some(*b),
            // Quoted booleans are common in hand-written YAML; their meaning is clear.
            Value::String(s) if s == "true" => Some(true),
            Value::String(s) if s == "false" => Some(false),
            other => {
                self.problem(
                    &at.key(key),
                    format!("expected true or false, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn integer(&mut self, at: &At, map: &Map<String, Value>, key: &str) -> Option<i64> {
        let value = Self::field(map, key)?;
        let number = match value {
            Value::Number(n) => n
                .as_i64()
                .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
            // shell-operator reads executionBurst as a string; accept both spellings.
            Value::String(s) => s.trim().parse::<i64>().ok(),
            _ => None,
        };
        if number.is_none() {
            self.problem(&at.key(key), format!("expected an integer, found {value}"));
        }
        number
    }

    fn list<'v>(&mut self, at: &At, map: &'v Map<String, Value>, key: &str) -> Option<&'v [Value]> {
        match Self::field(map, key)? {
            Value::Array(items) => Some(items),
            other => {
                self.problem(
                    &at.key(key),
                    format!("expected a list, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn string_list(&mut self, at: &At, map: &Map<String, Value>, key: &str) -> Option<Vec<String>> {
        let items = self.list(at, map, key)?;
        let at = at.key(key);
        Some(self.strings(&at, items))
    }

    fn strings(&mut self, at: &At, items: &[Value]) -> Vec<String> {
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::String(s) => out.push(s.clone()),
                other => self.problem(
                    &at.item(i),
                    format!("expected a string, found {}", type_name(other)),
                ),
            }
        }
        out
    }

    fn duration_ms(&mut self, at: &At, map: &Map<String, Value>, key: &str) -> Option<u64> {
        let text = self.string(at, map, key)?;
        match parse_go_duration(text.trim()) {
            Ok(duration) => Some(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)),
            Err(reason) => {
                self.problem(&at.key(key), reason.to_string());
                None
            }
        }
    }

    /// The `name` of a binding item, read first so later problems can name it.
    fn binding_name(value: &Value, default: &str) -> String {
        match value.get("name") {
            Some(Value::String(name)) => name.clone(),
            _ => default.to_owned(),
        }
    }

    /// Each item of the list at `key`, with its index.
    fn items<'v>(
        &mut self,
        map: &'v Map<String, Value>,
        key: &str,
    ) -> impl Iterator<Item = (usize, &'v Value)> + use<'v> {
        self.list(&At::top(""), map, key)
            .unwrap_or_default()
            .iter()
            .enumerate()
    }

    fn on_startup(&mut self, map: &Map<String, Value>) -> Option<i32> {
        let at = At::top("");
        let order = self.integer(&at, map, "onStartup")?;
        match i32::try_from(order) {
            Ok(order) => Some(order),
            Err(_) => {
                self.problem(&at.key("onStartup"), format!("{order} is out of range"));
                None
            }
        }
    }

    // --- v1 ---------------------------------------------------------------------------

    fn config_v1(&mut self, document: &Value) -> Option<HookConfig> {
        const TOP: &[&str] = &[
            "configVersion",
            "onStartup",
            "schedule",
            "kubernetes",
            "kubernetesValidating",
            "kubernetesCustomResourceConversion",
            "settings",
        ];
        const REFUSED: Refused<'_> = &[
            (
                "kubernetesMutating",
                "mutating webhooks are not supported by Operon",
            ),
            (
                "onKubernetesEvent",
                "this is the v0 spelling: with configVersion v1 use kubernetes",
            ),
        ];
        let map = self.object(&At::top(""), document, TOP, REFUSED)?;
        let on_startup = self.on_startup(map);
        let schedule = (self.items(map, "schedule"))
            .filter_map(|(i, item)| self.schedule_v1(i, item))
            .collect();
        let kubernetes = (self.items(map, "kubernetes"))
            .filter_map(|(i, item)| self.kubernetes_v1(i, item))
            .collect();
        let kubernetes_validating = (self.items(map, "kubernetesValidating"))
            .filter_map(|(i, item)| self.validating_v1(i, item))
            .collect();
        let kubernetes_conversion = (self.items(map, "kubernetesCustomResourceConversion"))
            .filter_map(|(i, item)| self.conversion_v1(i, item))
            .collect();
        let settings = Self::field(map, "settings").and_then(|s| self.settings_v1(s));
        Some(HookConfig {
            on_startup,
            schedule,
            kubernetes,
            kubernetes_validating,
            kubernetes_conversion,
            settings,
        })
    }

    fn schedule_v1(&mut self, index: usize, value: &Value) -> Option<ScheduleBindingConfig> {
        const FIELDS: &[&str] = &[
            "name",
            "crontab",
            "allowFailure",
            "queue",
            "group",
            "includeSnapshotsFrom",
        ];
        let name = Self::binding_name(value, "schedule");
        let at = At::binding(BindingKind::Schedule, index, &name);
        let map = self.object(&at, value, FIELDS, &[])?;
        Some(ScheduleBindingConfig {
            name: self.string(&at, map, "name").unwrap_or(name),
            crontab: self.string(&at, map, "crontab").unwrap_or_default(),
            allow_failure: self.bool(&at, map, "allowFailure").unwrap_or(false),
            queue: self.string(&at, map, "queue"),
            group: self.string(&at, map, "group"),
            include_snapshots_from: self
                .string_list(&at, map, "includeSnapshotsFrom")
                .unwrap_or_default(),
        })
    }

    fn kubernetes_v1(&mut self, index: usize, value: &Value) -> Option<KubernetesBindingConfig> {
        const FIELDS: &[&str] = &[
            "name",
            "apiVersion",
            "kind",
            "executeHookOnEvent",
            "watchEvent",
            "executeHookOnSynchronization",
            "waitForSynchronization",
            "keepFullObjectsInMemory",
            "nameSelector",
            "labelSelector",
            "fieldSelector",
            "namespace",
            "jqFilter",
            "allowFailure",
            "queue",
            "group",
            "includeSnapshotsFrom",
        ];
        let name = Self::binding_name(value, "kubernetes");
        let at = At::binding(BindingKind::Kubernetes, index, &name);
        let map = self.object(&at, value, FIELDS, &[RESYNC_REFUSED])?;

        // `watchEvent` is the older spelling; shell-operator prefers
        // `executeHookOnEvent` when both are given, which would drop the other silently.
        let events_key = match (
            map.contains_key("executeHookOnEvent"),
            map.contains_key("watchEvent"),
        ) {
            (true, true) => {
                self.problem(
                    &at.key("watchEvent"),
                    "give only executeHookOnEvent (watchEvent is its older spelling)",
                );
                "executeHookOnEvent"
            }
            (false, true) => "watchEvent",
            _ => "executeHookOnEvent",
        };
        let execute_hook_on_event = self.list(&at, map, events_key).map(|items| {
            let at = at.key(events_key);
            let names = self.strings(&at, items);
            names
                .iter()
                .enumerate()
                .filter_map(|(i, name)| match name.as_str() {
                    "Added" => Some(WatchEvent::Added),
                    "Modified" => Some(WatchEvent::Modified),
                    "Deleted" => Some(WatchEvent::Deleted),
                    other => {
                        self.problem(
                            &at.item(i),
                            format!("{other:?} is not Added, Modified or Deleted"),
                        );
                        None
                    }
                })
                .collect()
        });

        let name_selector = Self::field(map, "nameSelector")
            .and_then(|v| self.name_selector(&at.key("nameSelector"), v));
        let label_selector = Self::field(map, "labelSelector")
            .and_then(|v| self.label_selector(&at.key("labelSelector"), v));
        let field_selector = Self::field(map, "fieldSelector")
            .and_then(|v| self.field_selector(&at.key("fieldSelector"), v));
        let namespace = Self::field(map, "namespace")
            .and_then(|v| self.namespace_selector(&at.key("namespace"), v, true));

        Some(KubernetesBindingConfig {
            name: self.string(&at, map, "name").unwrap_or(name),
            api_version: self.string(&at, map, "apiVersion"),
            kind: self.string(&at, map, "kind").unwrap_or_default(),
            execute_hook_on_event,
            execute_hook_on_synchronization: self.bool(&at, map, "executeHookOnSynchronization"),
            wait_for_synchronization: self.bool(&at, map, "waitForSynchronization"),
            keep_full_objects_in_memory: self.bool(&at, map, "keepFullObjectsInMemory"),
            name_selector,
            label_selector,
            field_selector,
            namespace,
            jq_filter: self.string(&at, map, "jqFilter"),
            allow_failure: self.bool(&at, map, "allowFailure").unwrap_or(false),
            queue: self.string(&at, map, "queue"),
            group: self.string(&at, map, "group"),
            include_snapshots_from: self
                .string_list(&at, map, "includeSnapshotsFrom")
                .unwrap_or_default(),
        })
    }

    /// `{matchNames: [...]}`; a bare list is accepted too, as shell-operator's own
    /// documentation writes `namespace.nameSelector` that way.
    fn name_selector(&mut self, at: &At, value: &Value) -> Option<Vec<String>> {
        if let Value::Array(items) = value {
            return Some(self.strings(at, items));
        }
        let map = self.object(at, value, &["matchNames"], &[])?;
        match self.string_list(at, map, "matchNames") {
            Some(names) => Some(names),
            None => {
                if !map.contains_key("matchNames") {
                    self.problem(&at.key("matchNames"), "required");
                }
                None
            }
        }
    }

    fn label_selector(&mut self, at: &At, value: &Value) -> Option<LabelSelector> {
        let map = self.object(at, value, &["matchLabels", "matchExpressions"], &[])?;
        let mut match_labels = Vec::new();
        if let Some(labels) = Self::field(map, "matchLabels") {
            let labels_at = at.key("matchLabels");
            match labels.as_object() {
                Some(labels) => {
                    for (key, value) in labels {
                        match value {
                            Value::String(v) => match_labels.push((key.clone(), v.clone())),
                            other => self.problem(
                                &labels_at.key(key),
                                format!(
                                    "label values are strings, found {} (quote it)",
                                    type_name(other)
                                ),
                            ),
                        }
                    }
                }
                None => self.problem(
                    &labels_at,
                    format!("expected a mapping, found {}", type_name(labels)),
                ),
            }
        }
        let mut match_expressions = Vec::new();
        for (i, item) in self
            .list(at, map, "matchExpressions")
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let item_at = at.key("matchExpressions").item(i);
            let Some(expression) = self.object(&item_at, item, &["key", "operator", "values"], &[])
            else {
                continue;
            };
            for key in ["key", "operator"] {
                if Self::field(expression, key).is_none() {
                    self.problem(&item_at.key(key), "required");
                }
            }
            let key = self.string(&item_at, expression, "key");
            let operator = match self.string(&item_at, expression, "operator").as_deref() {
                Some("In") => Some(LabelOperator::In),
                Some("NotIn") => Some(LabelOperator::NotIn),
                Some("Exists") => Some(LabelOperator::Exists),
                Some("DoesNotExist") => Some(LabelOperator::DoesNotExist),
                Some(other) => {
                    self.problem(
                        &item_at.key("operator"),
                        format!("{other:?} is not In, NotIn, Exists or DoesNotExist"),
                    );
                    None
                }
                None => None,
            };
            let values = self
                .string_list(&item_at, expression, "values")
                .unwrap_or_default();
            if let (Some(key), Some(operator)) = (key, operator) {
                match_expressions.push(LabelRequirement {
                    key,
                    operator,
                    values,
                });
            }
        }
        Some(LabelSelector {
            match_labels,
            match_expressions,
        })
    }

    fn field_selector(&mut self, at: &At, value: &Value) -> Option<Vec<FieldRequirement>> {
        let map = self.object(at, value, &["matchExpressions"], &[])?;
        let items = self.list(at, map, "matchExpressions").unwrap_or_default();
        let mut requirements = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let item_at = at.key("matchExpressions").item(i);
            let Some(expression) =
                self.object(&item_at, item, &["field", "operator", "value"], &[])
            else {
                continue;
            };
            for key in ["field", "operator", "value"] {
                if Self::field(expression, key).is_none() {
                    self.problem(&item_at.key(key), "required");
                }
            }
            let field = self.string(&item_at, expression, "field");
            let operator = match self.string(&item_at, expression, "operator").as_deref() {
                Some("=" | "==" | "Equals") => Some(FieldOperator::Equals),
                Some("!=" | "NotEquals") => Some(FieldOperator::NotEquals),
                Some(other) => {
                    self.problem(
                        &item_at.key("operator"),
                        format!("{other:?} is not =, ==, Equals, != or NotEquals"),
                    );
                    None
                }
                None => None,
            };
            let value = self.string(&item_at, expression, "value");
            if let (Some(field), Some(operator), Some(value)) = (field, operator, value) {
                requirements.push(FieldRequirement {
                    field,
                    operator,
                    value,
                });
            }
        }
        Some(requirements)
    }

    fn namespace_selector(
        &mut self,
        at: &At,
        value: &Value,
        names_allowed: bool,
    ) -> Option<NamespaceSelector> {
        let allowed: &[&str] = if names_allowed {
            &["nameSelector", "labelSelector"]
        } else {
            &["labelSelector"]
        };
        let refused: Refused<'_> = &[(
            "nameSelector",
            "a webhook selects namespaces by labels only: use labelSelector with the \
             kubernetes.io/metadata.name label",
        )];
        let map = self.object(at, value, allowed, refused)?;
        let name_selector = if names_allowed {
            Self::field(map, "nameSelector")
                .and_then(|v| self.name_selector(&at.key("nameSelector"), v))
        } else {
            None
        };
        let label_selector = Self::field(map, "labelSelector")
            .and_then(|v| self.label_selector(&at.key("labelSelector"), v));
        Some(NamespaceSelector {
            name_selector,
            label_selector,
        })
    }

    fn validating_v1(&mut self, index: usize, value: &Value) -> Option<ValidatingBindingConfig> {
        const FIELDS: &[&str] = &[
            "name",
            "rules",
            "failurePolicy",
            "sideEffects",
            "labelSelector",
            "namespace",
            "timeoutSeconds",
            "group",
            "includeSnapshotsFrom",
        ];
        const REFUSED: Refused<'_> = &[(
            "matchConditions",
            "not supported by Operon: use labelSelector and namespace.labelSelector",
        )];
        let name = Self::binding_name(value, "");
        let at = At::binding(BindingKind::Validating, index, &name);
        let map = self.object(&at, value, FIELDS, REFUSED)?;

        // Operon registers every webhook with `sideEffects: None`, shell-operator's
        // default; a hook that claims side effects would be registered wrongly.
        match self.string(&at, map, "sideEffects").as_deref() {
            None | Some("None") => {}
            Some(other) => self.problem(
                &at.key("sideEffects"),
                format!(
                    "{other:?} is not supported: Operon registers webhooks with sideEffects \
                     None, so hooks must not have side effects"
                ),
            ),
        }

        let mut rules = Vec::new();
        for (i, item) in self
            .list(&at, map, "rules")
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            const RULE: &[&str] = &[
                "operations",
                "apiGroups",
                "apiVersions",
                "resources",
                "scope",
            ];
            let rule_at = at.key("rules").item(i);
            let Some(rule) = self.object(&rule_at, item, RULE, &[]) else {
                continue;
            };
            rules.push(WebhookRule {
                operations: self
                    .string_list(&rule_at, rule, "operations")
                    .unwrap_or_default(),
                api_groups: self
                    .string_list(&rule_at, rule, "apiGroups")
                    .unwrap_or_default(),
                api_versions: self
                    .string_list(&rule_at, rule, "apiVersions")
                    .unwrap_or_default(),
                resources: self
                    .string_list(&rule_at, rule, "resources")
                    .unwrap_or_default(),
                scope: self.string(&rule_at, rule, "scope"),
            });
        }

        let timeout_seconds = self.integer(&at, map, "timeoutSeconds").and_then(|t| {
            u32::try_from(t)
                .map_err(|_| {
                    self.problem(&at.key("timeoutSeconds"), format!("{t} is out of range"))
                })
                .ok()
        });
        let label_selector = Self::field(map, "labelSelector")
            .and_then(|v| self.label_selector(&at.key("labelSelector"), v));
        let namespace = Self::field(map, "namespace")
            .and_then(|v| self.namespace_selector(&at.key("namespace"), v, false));

        Some(ValidatingBindingConfig {
            name: self.string(&at, map, "name").unwrap_or(name),
            rules,
            failure_policy: self.string(&at, map, "failurePolicy"),
            label_selector,
            namespace,
            timeout_seconds,
            group: self.string(&at, map, "group"),
            include_snapshots_from: self
                .string_list(&at, map, "includeSnapshotsFrom")
                .unwrap_or_default(),
        })
    }

    fn conversion_v1(&mut self, index: usize, value: &Value) -> Option<ConversionBindingConfig> {
        const FIELDS: &[&str] = &[
            "name",
            "crdName",
            "conversions",
            "group",
            "includeSnapshotsFrom",
        ];
        const REFUSED: Refused<'_> = &[(
            "conversion",
            "unknown field: the list of rules is called conversions",
        )];
        let name = Self::binding_name(value, "");
        let at = At::binding(BindingKind::Conversion, index, &name);
        let map = self.object(&at, value, FIELDS, REFUSED)?;
        let mut conversions = Vec::new();
        for (i, item) in self
            .list(&at, map, "conversions")
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let rule_at = at.key("conversions").item(i);
            let Some(rule) = self.object(&rule_at, item, &["fromVersion", "toVersion"], &[]) else {
                continue;
            };
            conversions.push(ConversionRule {
                from_version: self
                    .string(&rule_at, rule, "fromVersion")
                    .unwrap_or_default(),
                to_version: self.string(&rule_at, rule, "toVersion").unwrap_or_default(),
            });
        }
        Some(ConversionBindingConfig {
            name: self.string(&at, map, "name").unwrap_or(name),
            crd_name: self.string(&at, map, "crdName").unwrap_or_default(),
            conversions,
            group: self.string(&at, map, "group"),
            include_snapshots_from: self
                .string_list(&at, map, "includeSnapshotsFrom")
                .unwrap_or_default(),
        })
    }

    fn settings_v1(&mut self, value: &Value) -> Option<HookSettings> {
        let at = At::top("settings");
        let map = self.object(
            &at,
            value,
            &["executionMinInterval", "executionBurst", "timeout"],
            &[],
        )?;
        let execution_burst = self.integer(&at, map, "executionBurst").and_then(|b| {
            u32::try_from(b)
                .map_err(|_| {
                    self.problem(&at.key("executionBurst"), format!("{b} is out of range"))
                })
                .ok()
        });
        Some(HookSettings {
            execution_min_interval_ms: self.duration_ms(&at, map, "executionMinInterval"),
            execution_burst,
            timeout_ms: self.duration_ms(&at, map, "timeout"),
        })
    }

    // --- v0 ---------------------------------------------------------------------------

    fn config_v0(&mut self, document: &Value) -> Option<HookConfig> {
        const REFUSED: Refused<'_> = &[
            (
                "kubernetes",
                "needs configVersion: v1 (without it the v0 form is read)",
            ),
            (
                "kubernetesValidating",
                "needs configVersion: v1 (without it the v0 form is read)",
            ),
            (
                "kubernetesCustomResourceConversion",
                "needs configVersion: v1 (without it the v0 form is read)",
            ),
            (
                "settings",
                "needs configVersion: v1 (without it the v0 form is read)",
            ),
        ];
        let map = self.object(
            &At::top(""),
            document,
            &["onStartup", "schedule", "onKubernetesEvent"],
            REFUSED,
        )?;
        let on_startup = self.on_startup(map);
        let schedule = (self.items(map, "schedule"))
            .filter_map(|(i, item)| {
                let name = Self::binding_name(item, "schedule");
                let at = At::binding(BindingKind::Schedule, i, &name);
                let m = self.object(&at, item, &["name", "crontab", "allowFailure"], &[])?;
                Some(ScheduleBindingConfig {
                    name: self.string(&at, m, "name").unwrap_or(name),
                    crontab: self.string(&at, m, "crontab").unwrap_or_default(),
                    allow_failure: self.bool(&at, m, "allowFailure").unwrap_or(false),
                    queue: None,
                    group: None,
                    include_snapshots_from: Vec::new(),
                })
            })
            .collect();
        let kubernetes = (self.items(map, "onKubernetesEvent"))
            .filter_map(|(i, item)| self.kubernetes_v0(i, item))
            .collect();
        Some(HookConfig {
            on_startup,
            schedule,
            kubernetes,
            kubernetes_validating: Vec::new(),
            kubernetes_conversion: Vec::new(),
            settings: None,
        })
    }

    fn kubernetes_v0(&mut self, index: usize, value: &Value) -> Option<KubernetesBindingConfig> {
        const FIELDS: &[&str] = &[
            "name",
            "event",
            "kind",
            "selector",
            "objectName",
            "namespaceSelector",
            "jqFilter",
            "allowFailure",
        ];
        let name = Self::binding_name(value, "onKubernetesEvent");
        let at = At::binding(BindingKind::Kubernetes, index, &name);
        let map = self.object(&at, value, FIELDS, &[])?;

        // A v0 binding without `event` runs on every event, as v0 documented (the
        // current shell-operator converter turns it into a binding that never runs).
        let execute_hook_on_event = self.string_list(&at, map, "event").map(|names| {
            names
                .iter()
                .enumerate()
                .filter_map(|(i, name)| match name.as_str() {
                    "add" => Some(WatchEvent::Added),
                    "update" => Some(WatchEvent::Modified),
                    "delete" => Some(WatchEvent::Deleted),
                    other => {
                        self.problem(
                            &at.key("event").item(i),
                            format!("{other:?} is not add, update or delete"),
                        );
                        None
                    }
                })
                .collect()
        });

        let name_selector = self.string(&at, map, "objectName").map(|name| vec![name]);
        let label_selector =
            Self::field(map, "selector").and_then(|v| self.label_selector(&at.key("selector"), v));
        let namespace = Self::field(map, "namespaceSelector").and_then(|v| {
            let ns_at = at.key("namespaceSelector");
            let ns = self.object(&ns_at, v, &["matchNames", "any"], &[])?;
            let any = self.bool(&ns_at, ns, "any").unwrap_or(false);
            let names = self.string_list(&ns_at, ns, "matchNames");
            match (any, names) {
                (true, _) | (false, None) => None,
                (false, Some(names)) => Some(NamespaceSelector {
                    name_selector: Some(names),
                    label_selector: None,
                }),
            }
        });

        Some(KubernetesBindingConfig {
            name: self.string(&at, map, "name").unwrap_or(name),
            api_version: None,
            kind: self.string(&at, map, "kind").unwrap_or_default(),
            execute_hook_on_event,
            execute_hook_on_synchronization: None,
            wait_for_synchronization: None,
            keep_full_objects_in_memory: None,
            name_selector,
            label_selector,
            field_selector: None,
            namespace,
            jq_filter: self.string(&at, map, "jqFilter"),
            allow_failure: self.bool(&at, map, "allowFailure").unwrap_or(false),
            queue: None,
            group: None,
            include_snapshots_from: Vec::new(),
        })
    }
}

/// "unknown field", with the closest allowed name when one is near enough to be the
/// intended one.
fn unknown_field_reason(key: &str, allowed: &[&str]) -> String {
    let closest = allowed
        .iter()
        .map(|name| {
            (
                edit_distance(&key.to_ascii_lowercase(), &name.to_ascii_lowercase()),
                name,
            )
        })
        .min_by_key(|(distance, _)| *distance)
        .filter(|(distance, name)| *distance <= 2 || distance * 4 <= name.len());
    match closest {
        Some((_, name)) => format!("unknown field; did you mean {name}?"),
        None if allowed.is_empty() => "unknown field".to_owned(),
        None => format!("unknown field; expected one of: {}", allowed.join(", ")),
    }
}

/// Levenshtein distance, for typo suggestions on short field names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
