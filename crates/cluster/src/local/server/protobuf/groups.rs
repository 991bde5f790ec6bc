//! The JSON of the messages of the groups other than core/v1 that kubectl's generators
//! and common hooks write, and of apimachinery's metav1 they all use, from their field
//! lists (see [`super::json`]).

/// metav1: object metadata, owner references, managed fields, label selectors, conditions.
mod meta {
    use super::super::json::messages;
    use k8s_pb::apimachinery::pkg::apis::meta::v1::*;

    messages! {
        ObjectMeta { creation_timestamp, deletion_timestamp, deletion_grace_period_seconds, labels,
            annotations, owner_references, finalizers, managed_fields; name, generate_name,
            namespace, self_link, uid, resource_version, generation }
        OwnerReference { api_version, kind, name, uid, controller, block_owner_deletion }
        ManagedFieldsEntry { time, fields_v1; manager, operation, api_version, fields_type,
            subresource }
        Condition { r#type, status, last_transition_time, reason, message; observed_generation }
        LabelSelector { match_labels, match_expressions }
        LabelSelectorRequirement { key, operator, values }
    }
}

/// apps/v1: Deployments, StatefulSets, DaemonSets, ReplicaSets.
mod apps {
    use super::super::json::messages;
    use k8s_pb::api::apps::v1::*;

    messages! {
        Deployment { metadata, spec, status }
        DeploymentSpec { replicas, selector, template, strategy, revision_history_limit,
            progress_deadline_seconds; min_ready_seconds, paused }
        DeploymentStrategy { rolling_update; r#type }
        RollingUpdateDeployment { max_unavailable, max_surge }
        DeploymentStatus { terminating_replicas, conditions, collision_count; observed_generation,
            replicas, updated_replicas, ready_replicas, available_replicas, unavailable_replicas }
        DeploymentCondition { r#type, status, last_update_time, last_transition_time; reason,
            message }
        StatefulSet { metadata, spec, status }
        StatefulSetSpec { replicas, selector, template, volume_claim_templates, service_name,
            update_strategy, revision_history_limit, persistent_volume_claim_retention_policy,
            ordinals; pod_management_policy, min_ready_seconds }
        StatefulSetUpdateStrategy { rolling_update; r#type }
        RollingUpdateStatefulSetStrategy { partition, max_unavailable }
        StatefulSetPersistentVolumeClaimRetentionPolicy { ; when_deleted, when_scaled }
        StatefulSetOrdinals { start }
        StatefulSetStatus { replicas, collision_count, conditions, available_replicas;
            observed_generation, ready_replicas, current_replicas, updated_replicas,
            current_revision, update_revision }
        StatefulSetCondition { r#type, status, last_transition_time; reason, message }
        DaemonSet { metadata, spec, status }
        DaemonSetSpec { selector, template, update_strategy, revision_history_limit;
            min_ready_seconds }
        DaemonSetUpdateStrategy { rolling_update; r#type }
        RollingUpdateDaemonSet { max_unavailable, max_surge }
        DaemonSetStatus { current_number_scheduled, number_misscheduled, desired_number_scheduled,
            number_ready, collision_count, conditions; observed_generation,
            updated_number_scheduled, number_available, number_unavailable }
        DaemonSetCondition { r#type, status, last_transition_time; reason, message }
        ReplicaSet { metadata, spec, status }
        ReplicaSetSpec { replicas, selector, template; min_ready_seconds }
        ReplicaSetStatus { replicas, terminating_replicas, conditions; fully_labeled_replicas,
            ready_replicas, available_replicas, observed_generation }
        ReplicaSetCondition { r#type, status, last_transition_time; reason, message }
    }
}

/// batch/v1: Jobs and CronJobs.
mod batch {
    use super::super::json::messages;
    use k8s_pb::api::batch::v1::*;

    messages! {
        Job { metadata, spec, status }
        JobSpec { parallelism, completions, active_deadline_seconds, pod_failure_policy,
            success_policy, backoff_limit, backoff_limit_per_index, max_failed_indexes, selector,
            manual_selector, template, ttl_seconds_after_finished, completion_mode, suspend,
            pod_replacement_policy, managed_by }
        PodFailurePolicy { rules }
        PodFailurePolicyRule { action, on_exit_codes, on_pod_conditions }
        PodFailurePolicyOnExitCodesRequirement { container_name, operator, values }
        PodFailurePolicyOnPodConditionsPattern { r#type, status }
        SuccessPolicy { rules }
        SuccessPolicyRule { succeeded_indexes, succeeded_count }
        JobStatus { conditions, start_time, completion_time, terminating, failed_indexes,
            uncounted_terminated_pods, ready; active, succeeded, failed, completed_indexes }
        JobCondition { r#type, status, last_probe_time, last_transition_time; reason, message }
        UncountedTerminatedPods { succeeded, failed }
        CronJob { metadata, spec, status }
        CronJobSpec { schedule, time_zone, starting_deadline_seconds, suspend, job_template,
            successful_jobs_history_limit, failed_jobs_history_limit; concurrency_policy }
        JobTemplateSpec { metadata, spec }
        CronJobStatus { active, last_schedule_time, last_successful_time }
    }
}

/// rbac.authorization.k8s.io/v1: Roles, ClusterRoles and their bindings.
mod rbac {
    use super::super::json::messages;
    use k8s_pb::api::rbac::v1::*;

    messages! {
        Role { metadata, rules }
        PolicyRule { verbs, api_groups, resources, resource_names, non_resource_ur_ls =
            "nonResourceURLs" }
        RoleBinding { metadata, subjects, role_ref }
        Subject { kind, name; api_group, namespace }
        RoleRef { api_group, kind, name }
        ClusterRole { metadata, rules, aggregation_rule }
        AggregationRule { cluster_role_selectors }
        ClusterRoleBinding { metadata, subjects, role_ref }
    }
}

/// scheduling.k8s.io/v1: PriorityClasses.
mod scheduling {
    use super::super::json::messages;
    use k8s_pb::api::scheduling::v1::*;

    messages! {
        PriorityClass { metadata, value, preemption_policy; global_default, description }
    }
}

/// policy/v1: PodDisruptionBudgets.
mod policy {
    use super::super::json::messages;
    use k8s_pb::api::policy::v1::*;

    messages! {
        PodDisruptionBudget { metadata, spec, status }
        PodDisruptionBudgetSpec { min_available, selector, max_unavailable,
            unhealthy_pod_eviction_policy }
        PodDisruptionBudgetStatus { disrupted_pods, disruptions_allowed, current_healthy,
            desired_healthy, expected_pods, conditions; observed_generation }
    }
}

/// networking.k8s.io/v1: Ingresses, IngressClasses, NetworkPolicies.
mod networking {
    use super::super::json::messages;
    use k8s_pb::api::networking::v1::*;

    messages! {
        Ingress { metadata, spec, status }
        IngressSpec { ingress_class_name, default_backend, tls, rules }
        IngressBackend { service, resource }
        IngressServiceBackend { name, port }
        ServiceBackendPort { ; name, number }
        IngressTls { hosts; secret_name }
        IngressRule { ; host; ingress_rule_value }
        IngressRuleValue { http }
        HttpIngressRuleValue { paths }
        HttpIngressPath { path_type, backend; path }
        IngressStatus { load_balancer }
        IngressLoadBalancerStatus { ingress }
        IngressLoadBalancerIngress { ports; ip, hostname }
        IngressPortStatus { port, protocol, error }
        IngressClass { metadata, spec }
        IngressClassSpec { parameters; controller }
        IngressClassParametersReference { a_pi_group = "apiGroup", kind, name, scope, namespace }
        NetworkPolicy { metadata, spec }
        NetworkPolicySpec { pod_selector, ingress, egress, policy_types }
        NetworkPolicyIngressRule { ports, from }
        NetworkPolicyPort { protocol, port, end_port }
        NetworkPolicyPeer { pod_selector, namespace_selector, ip_block }
        IpBlock { cidr, except }
        NetworkPolicyEgressRule { ports, to }
    }
}
