//! The `configVersion: v1` form: shell-operator's v1 field names, every section.

use super::{At, Reader, Refused, type_name};
use crate::model::config::BindingKind;
use crate::model::{
    AdmissionBindingConfig, ConfigVersion, ConversionBindingConfig, ConversionRule, FieldOperator,
    FieldRequirement, HookConfig, HookSettings, KubernetesBindingConfig, LabelOperator,
    LabelRequirement, LabelSelector, MatchCondition, NamespaceSelector, ScheduleBindingConfig,
    WatchEvent, WebhookRule,
};
use serde_json::Value;

impl Reader<'_> {
    pub(super) fn config_v1(&mut self, document: &Value) -> Option<HookConfig> {
        const TOP: &[&str] = &[
            "configVersion",
            "onStartup",
            "schedule",
            "kubernetes",
            "kubernetesValidating",
            "kubernetesMutating",
            "kubernetesCustomResourceConversion",
            "settings",
        ];
        const REFUSED: Refused<'_> = &[(
            "onKubernetesEvent",
            "this is the v0 spelling: with configVersion v1 use kubernetes",
        )];
        let map = self.object(&At::top(""), document, TOP, REFUSED)?;
        let on_startup = self.on_startup(map);
        let schedule = (self.items(map, "schedule"))
            .filter_map(|(i, item)| self.schedule_v1(i, item))
            .collect();
        let kubernetes = (self.items(map, "kubernetes"))
            .filter_map(|(i, item)| self.kubernetes_v1(i, item))
            .collect();
        let kubernetes_validating = (self.items(map, "kubernetesValidating"))
            .filter_map(|(i, item)| self.admission_v1(BindingKind::Validating, i, item))
            .collect();
        let kubernetes_mutating = (self.items(map, "kubernetesMutating"))
            .filter_map(|(i, item)| self.admission_v1(BindingKind::Mutating, i, item))
            .collect();
        let kubernetes_conversion = (self.items(map, "kubernetesCustomResourceConversion"))
            .filter_map(|(i, item)| self.conversion_v1(i, item))
            .collect();
        let settings = Self::field(map, "settings").and_then(|s| self.settings_v1(s));
        Some(HookConfig {
            version: ConfigVersion::V1,
            on_startup,
            schedule,
            kubernetes,
            kubernetes_validating,
            kubernetes_mutating,
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
            "resynchronizationPeriod",
        ];
        let name = Self::binding_name(value, "kubernetes");
        let at = At::binding(BindingKind::Kubernetes, index, &name);
        let map = self.object(&at, value, FIELDS, &[])?;
        self.ignored_string(&at, map, "resynchronizationPeriod");

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
    pub(super) fn name_selector(&mut self, at: &At, value: &Value) -> Option<Vec<String>> {
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

    pub(super) fn label_selector(&mut self, at: &At, value: &Value) -> Option<LabelSelector> {
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

    pub(super) fn field_selector(
        &mut self,
        at: &At,
        value: &Value,
    ) -> Option<Vec<FieldRequirement>> {
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

    pub(super) fn namespace_selector(
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

    /// A `kubernetesValidating` or `kubernetesMutating` item: shell-operator reads both
    /// with one schema (`reinvocationPolicy` is Operon's addition for mutating ones).
    fn admission_v1(
        &mut self,
        kind: BindingKind,
        index: usize,
        value: &Value,
    ) -> Option<AdmissionBindingConfig> {
        const FIELDS: &[&str] = &[
            "name",
            "rules",
            "failurePolicy",
            "sideEffects",
            "labelSelector",
            "namespace",
            "timeoutSeconds",
            "matchConditions",
            "reinvocationPolicy",
            "group",
            "includeSnapshotsFrom",
        ];
        let name = Self::binding_name(value, "");
        let at = At::binding(kind, index, &name);
        let map = self.object(&at, value, FIELDS, &[])?;

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

        let mut match_conditions = Vec::new();
        for (i, item) in self
            .list(&at, map, "matchConditions")
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let condition_at = at.key("matchConditions").item(i);
            let Some(condition) = self.object(&condition_at, item, &["name", "expression"], &[])
            else {
                continue;
            };
            match_conditions.push(MatchCondition {
                name: self
                    .string(&condition_at, condition, "name")
                    .unwrap_or_default(),
                expression: self
                    .string(&condition_at, condition, "expression")
                    .unwrap_or_default(),
            });
        }

        Some(AdmissionBindingConfig {
            name: self.string(&at, map, "name").unwrap_or(name),
            rules,
            failure_policy: self.string(&at, map, "failurePolicy"),
            side_effects: self.string(&at, map, "sideEffects"),
            label_selector,
            namespace,
            timeout_seconds,
            match_conditions,
            reinvocation_policy: self.string(&at, map, "reinvocationPolicy"),
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
}
