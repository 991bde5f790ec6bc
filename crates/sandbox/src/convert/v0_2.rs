//! Translations for guests built against `operon:engine@0.2.0`.
//!
//! 0.2.0 differs from the current version only in what 0.3.0 added for addon modules
//! and the platform: its runner context has no `cluster`, its hook configuration no
//! `lifecycle` bindings, and its hook world no `values` interface. Everything else is
//! the shared translation, generated from the same macro as the current one.

use crate::bindings::v0_2::{kubernetes as wk, log as wl, metrics as wm, types as wt};
use operon_data::model;

super::shared::shared_conversions!(pub(crate));

fn runner_context(context: model::RunnerContext) -> wt::RunnerContext {
    // This version's record has no cluster; the sandbox gives the caller back the
    // context it sent.
    wt::RunnerContext {
        name: context.name,
        dry_run: context.dry_run,
        timeout_ms: context.timeout_ms,
        node: context.node,
        namespace: context.namespace,
        owner: context.owner.map(owner_to_wit),
    }
}

/// This version has no lifecycle bindings.
pub(crate) fn lifecycle(_config: &wt::HookConfig) -> Vec<(String, f64)> {
    Vec::new()
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
