//! Translations for guests built against `operon:engine@0.1.0`.
//!
//! 0.1.0 differs from the current version only in admission webhooks: it has no
//! mutating bindings (no `kubernetes-mutating`, no `mutating` binding type) and its
//! validating bindings carry neither `side-effects` nor `match-conditions`. Everything
//! else is the shared translation, generated from the same macro as the current one.

use crate::bindings::v0_1::{kubernetes as wk, log as wl, metrics as wm, types as wt};
use operon_data::model;

super::shared::shared_conversions!(pub(crate));

fn runner_context(context: model::RunnerContext) -> wt::RunnerContext {
    // This version's record has no cluster; the caller keeps the context it sent.
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
        // The engine sends a `Mutating` context only for a binding the hook declared in
        // `kubernetes-mutating`, which a 0.1.0 hook cannot declare (its `hook-config` has
        // no such field), so this arm is never taken. Were it taken, `validating` is the
        // closest thing a 0.1.0 guest understands: an admission review to answer. (The
        // caller keeps the type it sent.)
        model::BindingType::Mutating => wt::BindingType::Validating,
        model::BindingType::Conversion => wt::BindingType::Conversion,
    }
}

/// The model value of a 0.1.0 hook's `configure` result: no mutating bindings, and
/// validating bindings with the defaults of the fields 0.2.0 added.
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
        kubernetes_validating: config
            .kubernetes_validating
            .into_iter()
            .map(|b| model::AdmissionBindingConfig {
                name: b.name,
                rules: b.rules.into_iter().map(webhook_rule).collect(),
                failure_policy: b.failure_policy,
                side_effects: None,
                label_selector: b.label_selector.map(label_selector),
                namespace: b.namespace.map(namespace_selector),
                timeout_seconds: b.timeout_seconds,
                match_conditions: Vec::new(),
                reinvocation_policy: None,
                enforcement: None,
                group: b.group,
                include_snapshots_from: b.include_snapshots_from,
            })
            .collect(),
        kubernetes_mutating: Vec::new(),
        kubernetes_conversion: config
            .kubernetes_conversion
            .into_iter()
            .map(conversion_binding)
            .collect(),
        settings: config.settings.map(hook_settings),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(type_: model::BindingType) -> model::BindingContext {
        model::BindingContext {
            binding: "images".to_owned(),
            type_,
            group: None,
            watch_event: None,
            object: None,
            objects: vec![],
            snapshots: vec![],
            review: Some("{}".to_owned()),
        }
    }

    #[test]
    fn a_mutating_context_reaches_a_legacy_guest_as_validating() {
        let input = model::HookInput {
            context: model::RunnerContext {
                name: "run".to_owned(),
                dry_run: true,
                timeout_ms: 1,
                node: None,
                namespace: None,
                owner: None,
                cluster: None,
            },
            binding_contexts: vec![
                context(model::BindingType::Validating),
                context(model::BindingType::Mutating),
            ],
        };
        let wit = hook_input(&input);
        let types: Vec<_> = wit.binding_contexts.iter().map(|c| c.type_).collect();
        assert_eq!(
            types,
            [wt::BindingType::Validating, wt::BindingType::Validating]
        );
        assert!(wit.context.dry_run);
    }

    #[test]
    fn legacy_validating_bindings_get_the_defaults_of_the_new_fields() {
        let config = hook_config(wt::HookConfig {
            on_startup: Some(1),
            schedule: vec![],
            kubernetes: vec![],
            kubernetes_validating: vec![wt::ValidatingBinding {
                name: "images.example.com".to_owned(),
                rules: vec![],
                failure_policy: Some("Ignore".to_owned()),
                label_selector: None,
                namespace: None,
                timeout_seconds: Some(5),
                group: None,
                include_snapshots_from: vec![],
            }],
            kubernetes_conversion: vec![],
            settings: None,
        });
        assert!(config.kubernetes_mutating.is_empty());
        let binding = &config.kubernetes_validating[0];
        assert_eq!(binding.failure_policy.as_deref(), Some("Ignore"));
        assert_eq!(binding.timeout_seconds, Some(5));
        assert_eq!(binding.side_effects, None);
        assert!(binding.match_conditions.is_empty());
    }
}
