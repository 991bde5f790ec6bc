//! Tests of hook configuration validation.

use super::super::any_kind;
use super::*;
use crate::shell_operator;

fn parse(text: &str) -> HookConfig {
    shell_operator::config::parse("hook.sh", text).unwrap_or_else(|problems| {
        panic!("unexpected problems: {problems:#?}");
    })
}

fn valid(config: &HookConfig) -> ValidConfig {
    validate("hook.sh", config, &any_kind).unwrap_or_else(|problems| {
        panic!("unexpected problems: {problems:#?}");
    })
}

fn problems(config: &HookConfig) -> Vec<String> {
    match validate("hook.sh", config, &any_kind) {
        Ok(_) => panic!("expected problems"),
        Err(problems) => problems.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn defaults_are_applied() {
    let config = parse(
        "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n\
             kubernetesValidating:\n- name: a.example.com\n  rules:\n  - {operations: [CREATE], \
             apiGroups: [''], apiVersions: [v1], resources: [pods]}\n",
    );
    let valid = valid(&config);
    let k = &valid.kubernetes[0];
    assert_eq!(k.execute_hook_on_event, EventSet::ALL);
    assert!(k.execute_hook_on_synchronization);
    assert!(k.wait_for_synchronization);
    assert!(k.keep_full_objects_in_memory);
    assert!(!k.allow_failure);
    assert_eq!(k.queue, MAIN_QUEUE);
    assert!(k.jq_filter.is_none());
    assert!(k.include_snapshots_from.is_empty());
    assert_eq!(valid.on_startup, None);
    assert_eq!(valid.settings.execution_rate, None);
    assert_eq!(valid.settings.timeout, DEFAULT_TIMEOUT);
    assert_eq!(valid.validating[0].failure_policy, FailurePolicy::Fail);
    assert_eq!(
        valid.validating[0].timeout_seconds,
        DEFAULT_WEBHOOK_TIMEOUT_SECONDS
    );

    let burst_defaults = HookConfig {
        settings: Some(HookSettings {
            execution_min_interval_ms: Some(500),
            execution_burst: None,
            timeout_ms: None,
        }),
        ..config
    };
    assert_eq!(
        valid_config_rate(&burst_defaults),
        Some(ExecutionRate {
            min_interval: Duration::from_millis(500),
            burst: 1
        })
    );
}

fn valid_config_rate(config: &HookConfig) -> Option<ExecutionRate> {
    valid(config).settings.execution_rate
}

#[test]
fn group_members_are_added_to_include_snapshots_from() {
    let config = parse(
        r#"
configVersion: v1
schedule:
- name: periodic-checking
  crontab: "0 */3 * * *"
  group: pods
  includeSnapshotsFrom: [extra]
kubernetes:
- name: monitor-pods
  kind: Pod
  jqFilter: .metadata.labels
  group: pods
- name: configmap-content
  kind: ConfigMap
  group: pods
- name: extra
  kind: Secret
kubernetesValidating:
- name: check.example.com
  group: pods
  rules: [{operations: ["*"], apiGroups: ["*"], apiVersions: ["*"], resources: ["*"]}]
"#,
    );
    let valid = valid(&config);
    assert_eq!(
        valid.schedules[0].include_snapshots_from,
        vec!["extra", "monitor-pods", "configmap-content"]
    );
    assert_eq!(
        valid.kubernetes[0].include_snapshots_from,
        vec!["monitor-pods", "configmap-content"]
    );
    assert!(valid.kubernetes[2].include_snapshots_from.is_empty());
    assert_eq!(
        valid.validating[0].include_snapshots_from,
        vec!["monitor-pods", "configmap-content"]
    );
    assert!(valid.kubernetes_binding("extra").is_some());
}

#[test]
fn every_problem_is_reported_with_binding_and_field() {
    let config = parse(
        r#"
configVersion: v1
schedule:
- name: pods
  crontab: "* * *"
  queue: Main
kubernetes:
- name: pods
  kind: Pod
  executeHookOnEvent: [Added, Added]
  labelSelector:
    matchLabels: {"bad key!": x}
    matchExpressions:
    - {key: tier, operator: In}
    - {key: tier, operator: Exists, values: [x]}
  nameSelector: {matchNames: [web]}
  fieldSelector:
    matchExpressions: [{field: metadata.name, operator: "=", value: web}]
  namespace: {nameSelector: {matchNames: []}}
  jqFilter: ".metadata | bogus_function"
  includeSnapshotsFrom: [nothing]
  waitForSynchronization: false
- name: ""
  kind: ""
kubernetesValidating:
- name: short.name
  rules: [{operations: [PATCH], apiGroups: [], apiVersions: [v1], resources: [pods], scope: All}]
  failurePolicy: Maybe
  timeoutSeconds: 31
  namespace: {labelSelector: {matchExpressions: [{key: a, operator: DoesNotExist}]}}
kubernetesCustomResourceConversion:
- name: conv
  crdName: crontabs
  conversions:
  - {fromVersion: v1, toVersion: v1}
settings:
  executionBurst: 0
  timeout: 0s
"#,
    );
    let problems = problems(&config);
    let expected = [
        r#"schedule[0] "pods": crontab: expected 5 fields"#,
        r#"schedule[0] "pods": queue: "Main" is not a valid queue name"#,
        r#"kubernetes[0] "pods": name: "pods" is already the name of schedule[0]"#,
        r#"kubernetes[0] "pods": executeHookOnEvent: Added is listed twice"#,
        r#"kubernetes[0] "pods": labelSelector.matchLabels: label key "bad key!""#,
        r#"kubernetes[0] "pods": labelSelector.matchExpressions[0].values: In and NotIn need"#,
        r#"kubernetes[0] "pods": labelSelector.matchExpressions[1].values: Exists and DoesNotExist take no values"#,
        r#"kubernetes[0] "pods": fieldSelector.matchExpressions[0].field: metadata.name and nameSelector"#,
        r#"kubernetes[0] "pods": jqFilter: jq filter"#,
        r#"kubernetes[0] "pods": includeSnapshotsFrom: "nothing" is not the name"#,
        r#"kubernetes[0] "pods": waitForSynchronization: false needs a named queue"#,
        r#"kubernetes[1]: name: a binding needs a non-empty name"#,
        r#"kubernetes[1]: kind: kind is required"#,
        r#"kubernetesValidating[0] "short.name": name: a validating binding's name"#,
        r#"kubernetesValidating[0] "short.name": rules[0].operations: "PATCH""#,
        r#"kubernetesValidating[0] "short.name": rules[0].apiGroups: at least one"#,
        r#"kubernetesValidating[0] "short.name": rules[0].scope: "All""#,
        r#"kubernetesValidating[0] "short.name": failurePolicy: "Maybe""#,
        r#"kubernetesValidating[0] "short.name": timeoutSeconds: 31"#,
        r#"kubernetesCustomResourceConversion[0] "conv": crdName: "crontabs""#,
        r#"kubernetesCustomResourceConversion[0] "conv": conversions[0]: fromVersion and toVersion"#,
        "settings.executionBurst: must be at least 1",
        "settings.executionBurst: has no effect without",
        "settings.timeout: must be longer than 0",
    ];
    for fragment in expected {
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with(&format!("hook \"hook.sh\": {fragment}"))),
            "missing {fragment:?} in {problems:#?}"
        );
    }
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
}

#[test]
fn mutating_bindings_are_held_to_the_admission_rules_and_their_own() {
    let config = parse(
        r#"
configVersion: v1
kubernetes:
- {name: pods, kind: Pod}
kubernetesValidating:
- name: policy.example.com
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: Some
  reinvocationPolicy: IfNeeded
  matchConditions:
  - {name: "bad name!", expression: "true"}
  - {name: ok, expression: " "}
kubernetesMutating:
- name: policy.example.com
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  reinvocationPolicy: Always
- name: short
  rules: []
  timeoutSeconds: 0
"#,
    );
    let problems = problems(&config);
    let expected = [
        r#"kubernetesValidating[0] "policy.example.com": sideEffects: "Some" is not None or NoneOnDryRun"#,
        r#"kubernetesValidating[0] "policy.example.com": reinvocationPolicy: only mutating webhooks"#,
        r#"kubernetesValidating[0] "policy.example.com": matchConditions[0].name: "bad name!" is not a qualified name"#,
        r#"kubernetesValidating[0] "policy.example.com": matchConditions[1].expression: a CEL expression is required"#,
        r#"kubernetesMutating[0] "policy.example.com": name: "policy.example.com" is already the name of kubernetesValidating[0]"#,
        r#"kubernetesMutating[0] "policy.example.com": reinvocationPolicy: "Always" is not Never or IfNeeded"#,
        r#"kubernetesMutating[1] "short": name: a mutating binding's name is its webhook's name"#,
        r#"kubernetesMutating[1] "short": rules: at least one rule is required"#,
        r#"kubernetesMutating[1] "short": timeoutSeconds: 0 is not between 1 and 30"#,
    ];
    for fragment in expected {
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with(&format!("hook \"hook.sh\": {fragment}"))),
            "missing {fragment:?} in {problems:#?}"
        );
    }
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");

    let config = parse(
        r#"
configVersion: v1
kubernetes:
- {name: pods, kind: Pod, group: g}
kubernetesMutating:
- name: defaults.example.com
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: NoneOnDryRun
  group: g
  matchConditions:
  - {name: example.com/not-system, expression: "!request.namespace.startsWith('kube-')"}
"#,
    );
    let valid = valid(&config);
    let m = &valid.mutating[0];
    assert!(m.is_mutating());
    assert_eq!(m.side_effects, SideEffects::NoneOnDryRun);
    assert_eq!(m.reinvocation_policy, Some(ReinvocationPolicy::Never));
    assert_eq!(m.failure_policy, FailurePolicy::Fail);
    assert_eq!(m.timeout_seconds, 10);
    assert_eq!(m.include_snapshots_from, vec!["pods".to_owned()]);
    assert_eq!(m.match_conditions.len(), 1);
}

#[test]
fn empty_match_names_select_everything_with_a_warning_as_in_shell_operator() {
    let config = parse(
        r#"
configVersion: v1
kubernetes:
- name: pods
  kind: Pod
  nameSelector: {matchNames: []}
  namespace: {nameSelector: {matchNames: []}}
- name: labelled
  kind: Pod
  namespace:
    nameSelector: {matchNames: []}
    labelSelector: {matchLabels: {env: prod}}
"#,
    );
    let valid = valid(&config);
    let pods = &valid.kubernetes[0];
    assert_eq!(pods.name_selector, None, "every name");
    assert!(pods.namespace.is_none(), "every namespace");
    let labelled = valid.kubernetes[1].namespace.as_ref().unwrap();
    assert_eq!(labelled.name_selector, None);
    assert!(labelled.label_selector.is_some());
    let warnings: Vec<String> = valid.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        warnings,
        [
            r#"hook "hook.sh": kubernetes[0] "pods": nameSelector.matchNames: an empty list selects every name, as in shell-operator: omit nameSelector to say so"#,
            r#"hook "hook.sh": kubernetes[0] "pods": namespace.nameSelector.matchNames: an empty list selects every namespace, as in shell-operator: omit it to say so"#,
            r#"hook "hook.sh": kubernetes[1] "labelled": namespace.nameSelector.matchNames: an empty list selects every namespace, as in shell-operator: omit it to say so"#,
        ]
    );
}

#[test]
fn kinds_are_checked_by_the_given_checker() {
    let config =
        parse("configVersion: v1\nkubernetes:\n- kind: Pdo\n- kind: Pod\n  apiVersion: a/b/c\n");
    let only_pods = |_: Option<&str>, kind: &str| {
        if kind == "Pod" {
            Ok(())
        } else {
            Err(operon_cluster::ClusterError::UnknownKind {
                kind: kind.to_owned(),
                api_version: None,
            })
        }
    };
    let problems: Vec<String> = validate("hook.sh", &config, &only_pods)
        .expect_err("problems")
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("kubernetes[0] \"kubernetes\": kind: unknown kind \"Pdo\""))
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("apiVersion: \"a/b/c\" is not an apiVersion"))
    );
    // Two unnamed kubernetes bindings share shell-operator's default name.
    assert!(
        problems
            .iter()
            .any(|p| p.contains("name: \"kubernetes\" is already"))
    );
}

#[test]
fn a_hook_without_bindings_is_refused() {
    let nothing = HookConfig::default();
    assert_eq!(
        problems(&nothing),
        vec![
            "hook \"hook.sh\": the hook has no bindings (onStartup, schedule, kubernetes, \
                 kubernetesValidating, kubernetesMutating or kubernetesCustomResourceConversion), \
                 so it would never run"
        ]
    );
}

#[test]
fn a_hook_with_settings_only_loads_with_a_warning_as_in_shell_operator() {
    let config = parse("configVersion: v1\nsettings:\n  executionMinInterval: 1s\n");
    let valid = valid(&config);
    let warnings: Vec<String> = valid.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("would never run"), "{warnings:?}");
    assert!(valid.kubernetes.is_empty() && valid.schedules.is_empty());
}

#[test]
fn problems_display_hook_binding_field_and_reason() {
    let problem = ConfigProblem {
        hook: "pods.sh".to_owned(),
        binding: Some("kubernetes[2] \"pods\"".to_owned()),
        field: "kind".to_owned(),
        reason: "kind is required".to_owned(),
    };
    assert_eq!(
        problem.to_string(),
        "hook \"pods.sh\": kubernetes[2] \"pods\": kind: kind is required"
    );
}

#[test]
fn enforcement_is_read_per_binding_and_an_unknown_one_is_named() {
    let config = parse(
        r#"
configVersion: v1
kubernetesValidating:
- name: warn.example.com
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  enforcement: Warn
- name: unset.example.com
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
kubernetesMutating:
- name: dry.example.com
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  enforcement: DryRun
"#,
    );
    let valid = valid(&config);
    assert_eq!(valid.validating[0].enforcement, Some(Enforcement::Warn));
    assert_eq!(valid.validating[1].enforcement, None);
    assert_eq!(
        valid.validating[1].enforcement_or(Enforcement::DryRun),
        Enforcement::DryRun
    );
    assert_eq!(valid.mutating[0].enforcement, Some(Enforcement::DryRun));

    let config = parse(
        r#"
configVersion: v1
kubernetesValidating:
- name: warn.example.com
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  enforcement: warn
kubernetesMutating:
- name: audit.example.com
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  enforcement: Audit
"#,
    );
    assert_eq!(
        problems(&config),
        [
            r#"hook "hook.sh": kubernetesValidating[0] "warn.example.com": enforcement: "warn" is not an enforcement: use Deny, Warn or DryRun"#,
            r#"hook "hook.sh": kubernetesMutating[0] "audit.example.com": enforcement: "Audit" is not an enforcement: use Deny, Warn or DryRun"#,
        ]
    );
}
