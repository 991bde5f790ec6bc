//! The one place that knows both Operon's data model ([`operon_data::model`]) and the types
//! generated from the WIT package ([`super::bindings`]), and translates between them.
//!
//! Inputs go to the guest as WIT values; whatever the guest returns or submits comes
//! back as model values. Every linked version of the package has its translations:
//! `operon:engine@0.3.0` at this module's root, `operon:engine@0.2.0` in `v0_2` and
//! `operon:engine@0.1.0` in `v0_1`. What
//! reads the same in both is written once (the macro in `shared`, instantiated per
//! version); only what changed between versions (binding types, validating and
//! mutating bindings) is written per version. When the WIT package gains a version, its
//! translations are added here, its bindings and exports beside them in the sandbox,
//! and nothing outside the sandbox changes.
//!
//! A hook's input is translated from a borrow: its object texts are shared with the
//! engine's binding snapshots, so the WIT record gets copies and the caller keeps the
//! input as it was. Whatever comes back from the guest is moved, not copied.

mod shared;
pub(crate) mod v0_1;
pub(crate) mod v0_2;

use super::bindings::{kubernetes as wk, log as wl, metrics as wm, types as wt};
use operon_data::model;

shared::shared_conversions!(pub);

fn runner_context(context: model::RunnerContext) -> wt::RunnerContext {
    wt::RunnerContext {
        name: context.name,
        dry_run: context.dry_run,
        timeout_ms: context.timeout_ms,
        node: context.node,
        namespace: context.namespace,
        owner: context.owner.map(owner_to_wit),
        cluster: context.cluster,
    }
}

/// A hook's addon-operator lifecycle bindings, by addon-operator's names (`beforeHelm`,
/// ...), with their orders.
pub(crate) fn lifecycle(config: &wt::HookConfig) -> Vec<(String, f64)> {
    config
        .lifecycle
        .iter()
        .map(|l| {
            let name = match l.binding {
                wt::LifecycleBinding::BeforeAll => "beforeAll",
                wt::LifecycleBinding::AfterAll => "afterAll",
                wt::LifecycleBinding::BeforeHelm => "beforeHelm",
                wt::LifecycleBinding::AfterHelm => "afterHelm",
                wt::LifecycleBinding::BeforeDeleteHelm => "beforeDeleteHelm",
                wt::LifecycleBinding::AfterDeleteHelm => "afterDeleteHelm",
            };
            (name.to_owned(), l.order)
        })
        .collect()
}

fn binding_type_to_wit(type_: model::BindingType) -> wt::BindingType {
    match type_ {
        model::BindingType::OnStartup => wt::BindingType::OnStartup,
        model::BindingType::Schedule => wt::BindingType::Schedule,
        model::BindingType::Synchronization => wt::BindingType::Synchronization,
        model::BindingType::Event => wt::BindingType::Event,
        model::BindingType::Group => wt::BindingType::Group,
        model::BindingType::Validating => wt::BindingType::Validating,
        model::BindingType::Mutating => wt::BindingType::Mutating,
        model::BindingType::Conversion => wt::BindingType::Conversion,
    }
}

/// A validating or mutating binding (two WIT records with the same admission fields) as
/// the model's one admission binding, with `reinvocation` as its reinvocation policy.
macro_rules! admission_binding {
    ($b:ident, $reinvocation:expr) => {
        model::AdmissionBindingConfig {
            reinvocation_policy: $reinvocation,
            // The WIT has no enforcement: a wasm hook's comes from the engine's default
            // or a Hook object's override.
            enforcement: None,
            name: $b.name,
            rules: $b.rules.into_iter().map(webhook_rule).collect(),
            failure_policy: $b.failure_policy,
            side_effects: $b.side_effects,
            label_selector: $b.label_selector.map(label_selector),
            namespace: $b.namespace.map(namespace_selector),
            timeout_seconds: $b.timeout_seconds,
            match_conditions: ($b.match_conditions.into_iter())
                .map(match_condition)
                .collect(),
            group: $b.group,
            include_snapshots_from: $b.include_snapshots_from,
        }
    };
}

/// The model value of a hook's `configure` result.
pub(crate) fn hook_config(config: wt::HookConfig) -> model::HookConfig {
    model::HookConfig {
        version: model::ConfigVersion::V1,
        on_startup: config.on_startup,
        schedule: config.schedule.into_iter().map(schedule_binding).collect(),
        kubernetes: config
            .kubernetes
            .into_iter()
            .map(kubernetes_binding)
            .collect(),
        kubernetes_validating: (config.kubernetes_validating.into_iter())
            .map(|b| admission_binding!(b, None))
            .collect(),
        kubernetes_mutating: (config.kubernetes_mutating.into_iter())
            .map(|b| admission_binding!(b, b.reinvocation_policy))
            .collect(),
        kubernetes_conversion: config
            .kubernetes_conversion
            .into_iter()
            .map(conversion_binding)
            .collect(),
        settings: config.settings.map(hook_settings),
    }
}

fn match_condition(c: wt::MatchCondition) -> model::MatchCondition {
    model::MatchCondition {
        name: c.name,
        expression: c.expression,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_output_keeps_the_last_value_of_a_repeated_key() {
        let out = operation_output(wt::OperationOutput {
            results: vec![
                ("a".to_owned(), "1".to_owned()),
                ("a".to_owned(), "2".to_owned()),
            ],
            output: "text".to_owned(),
        });
        assert_eq!(out.results["a"], "2");
        assert_eq!(out.output, "text");
    }

    #[test]
    fn binding_contexts_reach_the_guest_unchanged() {
        let context = model::BindingContext {
            binding: "pods".to_owned(),
            type_: model::BindingType::Event,
            group: None,
            watch_event: Some(model::WatchEvent::Deleted),
            object: Some(model::ObjectAndFilter {
                object: Some("{}".into()),
                filter_result: Some("null".into()),
            }),
            objects: vec![],
            snapshots: vec![model::Snapshot {
                binding: "nodes".to_owned(),
                objects: vec![],
            }],
            review: None,
        };
        let input = model::HookInput {
            context: model::RunnerContext {
                name: "run".to_owned(),
                dry_run: false,
                timeout_ms: 1,
                node: None,
                namespace: Some("ns".to_owned()),
                owner: None,
                cluster: Some("prod".to_owned()),
            },
            binding_contexts: vec![context],
        };
        let wit = hook_input(&input);
        let first = &wit.binding_contexts[0];
        assert_eq!(first.binding, "pods");
        assert_eq!(first.type_, wt::BindingType::Event);
        assert_eq!(first.watch_event, Some(wt::WatchEvent::Deleted));
        assert_eq!(
            first
                .object
                .as_ref()
                .and_then(|o| o.filter_result.as_deref()),
            Some("null")
        );
        assert_eq!(first.snapshots[0].binding, "nodes");
        assert_eq!(wit.context.cluster.as_deref(), Some("prod"));
    }

    #[test]
    fn mutating_bindings_keep_every_admission_field() {
        let config = hook_config(wt::HookConfig {
            on_startup: None,
            schedule: vec![],
            kubernetes: vec![],
            kubernetes_validating: vec![],
            kubernetes_mutating: vec![wt::MutatingBinding {
                name: "defaults.example.com".to_owned(),
                rules: vec![],
                failure_policy: Some("Ignore".to_owned()),
                side_effects: Some("NoneOnDryRun".to_owned()),
                label_selector: None,
                namespace: None,
                timeout_seconds: Some(3),
                match_conditions: vec![wt::MatchCondition {
                    name: "not-system".to_owned(),
                    expression: "true".to_owned(),
                }],
                reinvocation_policy: Some("IfNeeded".to_owned()),
                group: None,
                include_snapshots_from: vec![],
            }],
            kubernetes_conversion: vec![],
            settings: None,
            lifecycle: vec![wt::LifecycleOrder {
                binding: wt::LifecycleBinding::BeforeHelm,
                order: 5.0,
            }],
        });
        assert!(config.kubernetes_validating.is_empty());
        let binding = &config.kubernetes_mutating[0];
        assert_eq!(binding.side_effects.as_deref(), Some("NoneOnDryRun"));
        assert_eq!(binding.reinvocation_policy.as_deref(), Some("IfNeeded"));
        assert_eq!(binding.match_conditions[0].name, "not-system");
        assert_eq!(binding.timeout_seconds, Some(3));
    }

    #[test]
    fn a_mutating_context_reaches_a_current_guest_as_mutating() {
        let context = model::BindingContext {
            binding: "defaults".to_owned(),
            type_: model::BindingType::Mutating,
            group: None,
            watch_event: None,
            object: None,
            objects: vec![],
            snapshots: vec![],
            review: Some("{}".to_owned()),
        };
        assert_eq!(binding_context(&context).type_, wt::BindingType::Mutating);
    }
}
