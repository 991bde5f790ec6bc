//! The legacy form without `configVersion`, mapped onto the v1 types.

use super::{At, Reader, Refused};
use crate::model::config::BindingKind;
use crate::model::{
    ConfigVersion, HookConfig, KubernetesBindingConfig, NamespaceSelector, ScheduleBindingConfig,
    WatchEvent,
};
use serde_json::Value;

impl Reader<'_> {
    pub(super) fn config_v0(&mut self, document: &Value) -> Option<HookConfig> {
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
            version: ConfigVersion::V0,
            on_startup,
            schedule,
            kubernetes,
            kubernetes_validating: Vec::new(),
            kubernetes_mutating: Vec::new(),
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
            // v0 has no Synchronization: its hooks hear of objects only through events.
            execute_hook_on_synchronization: Some(false),
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
