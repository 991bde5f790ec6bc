//! The translations that read the same in every linked WIT version, written once.
//!
//! `log`, `kubernetes`, `metrics` and most of `types` have not changed between versions,
//! but each version's bindings are distinct Rust types, so the same function body has
//! to exist once per version. [`shared_conversions!`] is that body: each version's
//! module brings its bindings into scope as `wt` (types), `wk` (kubernetes), `wl` (log)
//! and `wm` (metrics), defines what differs (`binding_type_to_wit`,
//! `hook_config`, `lifecycle`, `runner_context`), and invokes the macro.

/// Defines the version-independent translations against the `wt`, `wk`, `wl`, `wm` and
/// `model` paths in scope where it is invoked.
///
/// `$io_vis` is the visibility of `operation_input` and `operation_output`: public in
/// the current version's `convert`, which the call_path benchmark calls, the crate's
/// own in the older versions' modules.
macro_rules! shared_conversions {
    ($io_vis:vis) => {
        // -------------------------------------------------------------------------------
        // Model → WIT (what the guest receives)
        // -------------------------------------------------------------------------------

        /// The WIT `operation-input` for `input`.
        $io_vis fn operation_input(input: model::OperationInput) -> wt::OperationInput {
            wt::OperationInput {
                context: runner_context(input.context),
                parameters: input.parameters.into_iter().collect(),
                results: input.results.into_iter().collect(),
                args: input.args,
            }
        }

        /// The WIT `hook-input` for `input`. The texts are copied (the WIT record owns
        /// its strings); the caller keeps `input`, whose texts it shares with the
        /// binding snapshots.
        pub(crate) fn hook_input(input: &model::HookInput) -> wt::HookInput {
            wt::HookInput {
                context: runner_context(input.context.clone()),
                binding_contexts: input.binding_contexts.iter().map(binding_context).collect(),
            }
        }

        fn owner_to_wit(o: model::OwnerReference) -> wt::OwnerReference {
            wt::OwnerReference {
                api_version: o.api_version,
                kind: o.kind,
                name: o.name,
                uid: o.uid,
            }
        }

        fn binding_context(context: &model::BindingContext) -> wt::BindingContext {
            let objects = |items: &[model::ObjectAndFilter]| items.iter().map(object_and_filter).collect();
            wt::BindingContext {
                binding: context.binding.clone(),
                type_: binding_type_to_wit(context.type_),
                group: context.group.clone(),
                watch_event: context.watch_event.map(watch_event_to_wit),
                object: context.object.as_ref().map(object_and_filter),
                objects: objects(&context.objects),
                snapshots: context
                    .snapshots
                    .iter()
                    .map(|s| wt::Snapshot {
                        binding: s.binding.clone(),
                        objects: objects(&s.objects),
                    })
                    .collect(),
                review: context.review.clone(),
            }
        }

        fn object_and_filter(item: &model::ObjectAndFilter) -> wt::ObjectAndFilter {
            wt::ObjectAndFilter {
                object: item.object.as_deref().map(str::to_owned),
                filter_result: item.filter_result.as_deref().map(str::to_owned),
            }
        }

        fn watch_event_to_wit(event: model::WatchEvent) -> wt::WatchEvent {
            match event {
                model::WatchEvent::Added => wt::WatchEvent::Added,
                model::WatchEvent::Modified => wt::WatchEvent::Modified,
                model::WatchEvent::Deleted => wt::WatchEvent::Deleted,
            }
        }

        // -------------------------------------------------------------------------------
        // WIT → model (what the guest returns or submits)
        // -------------------------------------------------------------------------------

        /// The model value of an operation's `run` result. Later keys win, as the
        /// contract says.
        $io_vis fn operation_output(output: wt::OperationOutput) -> model::OperationOutput {
            model::OperationOutput {
                results: output.results.into_iter().collect(),
                output: output.output,
            }
        }

        /// The model value of a hook's `handle` result.
        pub(crate) fn hook_output(output: wt::HookOutput) -> model::HookOutput {
            model::HookOutput {
                validating: output.validating.map(|v| model::ValidatingResponse {
                    allowed: v.allowed,
                    message: v.message,
                    warnings: v.warnings,
                    patch: v.patch,
                }),
                conversion: output.conversion.map(|c| model::ConversionResponse {
                    failed_message: c.failed_message,
                    converted_objects: c.converted_objects,
                }),
            }
        }

        /// The model value of a log level.
        pub(crate) fn log_level(level: wl::Level) -> model::LogLevel {
            match level {
                wl::Level::Trace => model::LogLevel::Trace,
                wl::Level::Debug => model::LogLevel::Debug,
                wl::Level::Info => model::LogLevel::Info,
                wl::Level::Warn => model::LogLevel::Warn,
                wl::Level::Error => model::LogLevel::Error,
            }
        }

        /// The model value of a submitted patch operation.
        pub(crate) fn patch_operation(operation: wk::PatchOperation) -> model::PatchOperation {
            use model::PatchOperation as M;
            match operation {
                wk::PatchOperation::Create(s) => M::Create(create_spec(s)),
                wk::PatchOperation::CreateOrUpdate(s) => M::CreateOrUpdate(create_spec(s)),
                wk::PatchOperation::CreateIfNotExists(s) => M::CreateIfNotExists(create_spec(s)),
                wk::PatchOperation::Delete(t) => M::Delete(object_ref(t)),
                wk::PatchOperation::DeleteInBackground(t) => M::DeleteInBackground(object_ref(t)),
                wk::PatchOperation::DeleteNonCascading(t) => M::DeleteNonCascading(object_ref(t)),
                wk::PatchOperation::JqPatch(s) => M::JqPatch(model::JqPatchSpec {
                    target: object_ref(s.target),
                    jq_filter: s.jq_filter,
                    subresource: s.subresource,
                    ignore_missing_object: s.ignore_missing_object,
                }),
                wk::PatchOperation::MergePatch(s) => M::MergePatch(patch_spec(s)),
                wk::PatchOperation::JsonPatch(s) => M::JsonPatch(patch_spec(s)),
            }
        }

        fn create_spec(spec: wk::CreateSpec) -> model::CreateSpec {
            model::CreateSpec {
                object: spec.object,
                subresource: spec.subresource,
            }
        }

        fn patch_spec(spec: wk::PatchSpec) -> model::PatchSpec {
            model::PatchSpec {
                target: object_ref(spec.target),
                patch: spec.patch,
                subresource: spec.subresource,
                ignore_missing_object: spec.ignore_missing_object,
            }
        }

        fn object_ref(target: wk::ObjectRef) -> model::ObjectRef {
            model::ObjectRef {
                api_version: target.api_version,
                kind: target.kind,
                namespace: target.namespace,
                name: target.name,
            }
        }

        /// The model value of a submitted metric operation.
        pub(crate) fn metric_operation(operation: wm::MetricOperation) -> model::MetricOperation {
            let sample = |s: wm::Sample| model::Sample {
                name: s.name,
                value: s.value,
                labels: s.labels,
                group: s.group,
            };
            match operation {
                wm::MetricOperation::Add(s) => model::MetricOperation::Add(sample(s)),
                wm::MetricOperation::Set(s) => model::MetricOperation::Set(sample(s)),
                wm::MetricOperation::Observe(o) => {
                    model::MetricOperation::Observe(model::Observation {
                        name: o.name,
                        value: o.value,
                        buckets: o.buckets,
                        labels: o.labels,
                        group: o.group,
                    })
                }
                wm::MetricOperation::ExpireGroup(group) => {
                    model::MetricOperation::ExpireGroup(group)
                }
            }
        }

        fn schedule_binding(b: wt::ScheduleBinding) -> model::ScheduleBindingConfig {
            model::ScheduleBindingConfig {
                name: b.name,
                crontab: b.crontab,
                allow_failure: b.allow_failure,
                queue: b.queue,
                group: b.group,
                include_snapshots_from: b.include_snapshots_from,
            }
        }

        fn conversion_binding(b: wt::ConversionBinding) -> model::ConversionBindingConfig {
            model::ConversionBindingConfig {
                name: b.name,
                crd_name: b.crd_name,
                conversions: b
                    .conversions
                    .into_iter()
                    .map(|c| model::ConversionRule {
                        from_version: c.from_version,
                        to_version: c.to_version,
                    })
                    .collect(),
                group: b.group,
                include_snapshots_from: b.include_snapshots_from,
            }
        }

        fn hook_settings(s: wt::HookSettings) -> model::HookSettings {
            model::HookSettings {
                execution_min_interval_ms: s.execution_min_interval_ms,
                execution_burst: s.execution_burst,
                timeout_ms: s.timeout_ms,
            }
        }

        fn webhook_rule(r: wt::WebhookRule) -> model::WebhookRule {
            model::WebhookRule {
                operations: r.operations,
                api_groups: r.api_groups,
                api_versions: r.api_versions,
                resources: r.resources,
                scope: r.scope,
            }
        }

        fn kubernetes_binding(b: wt::KubernetesBinding) -> model::KubernetesBindingConfig {
            model::KubernetesBindingConfig {
                name: b.name,
                api_version: b.api_version,
                kind: b.kind,
                execute_hook_on_event: b
                    .execute_hook_on_event
                    .map(|events| events.into_iter().map(watch_event).collect()),
                execute_hook_on_synchronization: b.execute_hook_on_synchronization,
                wait_for_synchronization: b.wait_for_synchronization,
                keep_full_objects_in_memory: b.keep_full_objects_in_memory,
                name_selector: b.name_selector,
                label_selector: b.label_selector.map(label_selector),
                field_selector: b.field_selector.map(|fields| {
                    fields
                        .into_iter()
                        .map(|f| model::FieldRequirement {
                            field: f.field,
                            operator: match f.operator {
                                wt::FieldOperator::Equals => model::FieldOperator::Equals,
                                wt::FieldOperator::NotEquals => model::FieldOperator::NotEquals,
                            },
                            value: f.value,
                        })
                        .collect()
                }),
                namespace: b.namespace.map(namespace_selector),
                jq_filter: b.jq_filter,
                allow_failure: b.allow_failure,
                queue: b.queue,
                group: b.group,
                include_snapshots_from: b.include_snapshots_from,
            }
        }

        fn watch_event(event: wt::WatchEvent) -> model::WatchEvent {
            match event {
                wt::WatchEvent::Added => model::WatchEvent::Added,
                wt::WatchEvent::Modified => model::WatchEvent::Modified,
                wt::WatchEvent::Deleted => model::WatchEvent::Deleted,
            }
        }

        fn label_selector(selector: wt::LabelSelector) -> model::LabelSelector {
            model::LabelSelector {
                match_labels: selector.match_labels,
                match_expressions: selector
                    .match_expressions
                    .into_iter()
                    .map(|r| model::LabelRequirement {
                        key: r.key,
                        operator: match r.operator {
                            wt::LabelOperator::In => model::LabelOperator::In,
                            wt::LabelOperator::NotIn => model::LabelOperator::NotIn,
                            wt::LabelOperator::Exists => model::LabelOperator::Exists,
                            wt::LabelOperator::DoesNotExist => model::LabelOperator::DoesNotExist,
                        },
                        values: r.values,
                    })
                    .collect(),
            }
        }

        fn namespace_selector(selector: wt::NamespaceSelector) -> model::NamespaceSelector {
            model::NamespaceSelector {
                name_selector: selector.name_selector,
                label_selector: selector.label_selector.map(label_selector),
            }
        }
    };
}

pub(super) use shared_conversions;
