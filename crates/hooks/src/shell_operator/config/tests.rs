//! Tests of reading shell-operator configurations.

use super::*;
use crate::config::{
    BindingId, EventSet, ExecutionRate, FailurePolicy, ValidConfig, any_kind, validate,
};
use operon_data::model::config::BindingKind;
use operon_data::model::{FieldOperator, LabelOperator, WatchEvent};
use operon_jq as jq;
use std::time::Duration;

fn parse(text: &str) -> HookConfig {
    super::parse("hook.sh", text).unwrap_or_else(|problems| {
        panic!("unexpected problems: {problems:#?}");
    })
}

fn valid(config: &HookConfig) -> ValidConfig {
    validate("hook.sh", config, &any_kind).unwrap_or_else(|problems| {
        panic!("unexpected problems: {problems:#?}");
    })
}

fn parse_problems(text: &str) -> Vec<String> {
    match super::parse("hook.sh", text) {
        Ok(config) => panic!("expected problems, got {config:?}"),
        Err(problems) => problems.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn parses_every_v1_kubernetes_field() {
    let config = parse(
        r#"
configVersion: v1
onStartup: 10
kubernetes:
- name: "Monitor pods in cache tier"
  apiVersion: v1
  kind: Pod
  executeHookOnEvent: [ "Added", "Modified" ]
  executeHookOnSynchronization: false
  waitForSynchronization: false
  keepFullObjectsInMemory: false
  nameSelector:
    matchNames: [pod-0, pod-1]
  labelSelector:
    matchLabels:
      myLabel: myLabelValue
    matchExpressions:
    - key: tier
      operator: In
      values: ["cache"]
  fieldSelector:
    matchExpressions:
    - field: status.phase
      operator: "!="
      value: Pending
  namespace:
    nameSelector:
      matchNames: ["proj-production"]
    labelSelector:
      matchLabels: {env: production}
  jqFilter: ".metadata.labels"
  includeSnapshotsFrom: ["Monitor pods in cache tier"]
  allowFailure: true
  queue: cache-pods
  group: pods
settings:
  executionMinInterval: 3s
  executionBurst: 2
  timeout: 1m30s
"#,
    );
    assert_eq!(config.on_startup, Some(10));
    let k = &config.kubernetes[0];
    assert_eq!(k.name, "Monitor pods in cache tier");
    assert_eq!(k.api_version.as_deref(), Some("v1"));
    assert_eq!(k.kind, "Pod");
    assert_eq!(
        k.execute_hook_on_event,
        Some(vec![WatchEvent::Added, WatchEvent::Modified])
    );
    assert_eq!(k.execute_hook_on_synchronization, Some(false));
    assert_eq!(k.wait_for_synchronization, Some(false));
    assert_eq!(k.keep_full_objects_in_memory, Some(false));
    assert_eq!(
        k.name_selector,
        Some(vec!["pod-0".to_owned(), "pod-1".to_owned()])
    );
    let labels = k.label_selector.as_ref().expect("labelSelector");
    assert_eq!(
        labels.match_labels,
        vec![("myLabel".to_owned(), "myLabelValue".to_owned())]
    );
    assert_eq!(labels.match_expressions[0].key, "tier");
    assert_eq!(labels.match_expressions[0].operator, LabelOperator::In);
    assert_eq!(labels.match_expressions[0].values, vec!["cache".to_owned()]);
    let fields = k.field_selector.as_ref().expect("fieldSelector");
    assert_eq!(fields[0].field, "status.phase");
    assert_eq!(fields[0].operator, FieldOperator::NotEquals);
    assert_eq!(fields[0].value, "Pending");
    let ns = k.namespace.as_ref().expect("namespace");
    assert_eq!(ns.name_selector, Some(vec!["proj-production".to_owned()]));
    assert!(ns.label_selector.is_some());
    assert_eq!(k.jq_filter.as_deref(), Some(".metadata.labels"));
    assert!(k.allow_failure);
    assert_eq!(k.queue.as_deref(), Some("cache-pods"));
    assert_eq!(k.group.as_deref(), Some("pods"));
    assert_eq!(k.include_snapshots_from, vec![k.name.clone()]);
    let settings = config.settings.as_ref().expect("settings");
    assert_eq!(settings.execution_min_interval_ms, Some(3_000));
    assert_eq!(settings.execution_burst, Some(2));
    assert_eq!(settings.timeout_ms, Some(90_000));

    let valid = valid(&config);
    let k = &valid.kubernetes[0];
    assert_eq!(k.id.to_string(), "kubernetes[0]");
    assert_eq!(
        k.execute_hook_on_event,
        EventSet {
            added: true,
            modified: true,
            deleted: false
        }
    );
    assert_eq!(
        k.jq_filter.as_ref().map(jq::Filter::text),
        Some(".metadata.labels")
    );
    assert_eq!(
        valid.settings.execution_rate,
        Some(ExecutionRate {
            min_interval: Duration::from_secs(3),
            burst: 2
        })
    );
    assert_eq!(valid.settings.timeout, Duration::from_secs(90));
}

#[test]
fn parses_schedules_webhooks_and_json() {
    let config = parse(
        r#"{
  "configVersion": "v1",
  "schedule": [
    {"crontab": "*/5 * * * *"},
    {"name": "every 10 seconds", "crontab": "*/10 * * * * *", "allowFailure": true,
     "queue": "every-ten", "includeSnapshotsFrom": ["kubernetes"], "group": "g"}
  ],
  "kubernetes": [{"kind": "ConfigMap", "executeHookOnEvent": []}],
  "kubernetesValidating": [{
    "name": "private-repo-policy.example.com",
    "rules": [{"apiGroups": ["stable.example.com"], "apiVersions": ["v1"],
               "operations": ["CREATE"], "resources": ["crontabs"], "scope": "Namespaced"}],
    "failurePolicy": "Ignore", "sideEffects": "None", "timeoutSeconds": 5,
    "namespace": {"labelSelector": {"matchLabels": {"env": "prod"}}}
  }],
  "kubernetesCustomResourceConversion": [{
    "name": "conversions", "crdName": "crontabs.stable.example.com",
    "conversions": [{"fromVersion": "unstable.crontab.io/v1beta1",
                     "toVersion": "stable.example.com/v1beta1"}]
  }]
}"#,
    );
    assert_eq!(config.schedule[0].name, "schedule");
    assert_eq!(config.schedule[1].crontab, "*/10 * * * * *");
    assert!(config.schedule[1].allow_failure);
    assert_eq!(config.kubernetes[0].name, "kubernetes");
    assert_eq!(config.kubernetes[0].execute_hook_on_event, Some(vec![]));
    let v = &config.kubernetes_validating[0];
    assert_eq!(v.rules[0].operations, vec!["CREATE".to_owned()]);
    assert_eq!(v.rules[0].scope.as_deref(), Some("Namespaced"));
    assert_eq!(v.failure_policy.as_deref(), Some("Ignore"));
    assert_eq!(v.timeout_seconds, Some(5));
    assert_eq!(v.side_effects.as_deref(), Some("None"));
    assert_eq!(config.kubernetes_conversion[0].conversions.len(), 1);

    let valid = valid(&config);
    assert!(valid.kubernetes[0].execute_hook_on_event.is_empty());
    assert_eq!(valid.schedules[1].queue, "every-ten");
    assert_eq!(valid.validating[0].failure_policy, FailurePolicy::Ignore);
    assert!(valid.validating[0].namespace_label_selector.is_some());
    assert_eq!(
        valid.binding_name(BindingId {
            kind: BindingKind::Conversion,
            index: 0
        }),
        Some("conversions")
    );
}

#[test]
fn legacy_v0_is_mapped_to_v1() {
    let config = parse(
        r#"
onStartup: 1
schedule:
- crontab: "0 * * * *"
  allowFailure: true
onKubernetesEvent:
- name: pods
  kind: pod
  event: [add, update]
  selector:
    matchLabels: {app: web}
  objectName: web-0
  namespaceSelector:
    matchNames: [default]
  jqFilter: .metadata.labels
- kind: namespace
  event: [delete]
  namespaceSelector: {any: true}
- kind: node
"#,
    );
    assert_eq!(config.on_startup, Some(1));
    assert_eq!(config.schedule[0].name, "schedule");
    assert!(config.schedule[0].allow_failure);
    let pods = &config.kubernetes[0];
    assert_eq!(
        pods.execute_hook_on_event,
        Some(vec![WatchEvent::Added, WatchEvent::Modified])
    );
    assert_eq!(pods.name_selector, Some(vec!["web-0".to_owned()]));
    assert_eq!(
        pods.namespace
            .as_ref()
            .and_then(|n| n.name_selector.clone()),
        Some(vec!["default".to_owned()])
    );
    assert!(pods.label_selector.is_some());
    let namespaces = &config.kubernetes[1];
    assert_eq!(namespaces.name, "onKubernetesEvent");
    assert_eq!(
        namespaces.execute_hook_on_event,
        Some(vec![WatchEvent::Deleted])
    );
    assert_eq!(namespaces.namespace, None);
    assert_eq!(config.kubernetes[2].execute_hook_on_event, None);
}

#[test]
fn unknown_and_mistyped_fields_are_all_reported() {
    let problems = parse_problems(
        r#"
configVersion: v1
kubernetes:
- name: pods
  kind: Pod
  executeHookOnEvents: [Added]
  resynchronizationPeriod: 10s
  allowFailure: maybe
  labelSelector:
    matchLabels: {enabled: true}
  fieldSelector:
    matchExpressions:
    - {field: status.phase, operator: "<", value: x}
kubernetesMutating:
- {name: m.example.com, reinvocation: IfNeeded}
settings:
  executionMinInterval: 3 seconds
"#,
    );
    let expected = [
        r#"hook "hook.sh": kubernetes[0] "pods": executeHookOnEvents: unknown field; did you mean executeHookOnEvent?"#,
        r#"hook "hook.sh": kubernetes[0] "pods": allowFailure: expected true or false"#,
        r#"hook "hook.sh": kubernetes[0] "pods": labelSelector.matchLabels.enabled: label values are strings"#,
        r#"hook "hook.sh": kubernetes[0] "pods": fieldSelector.matchExpressions[0].operator: "<" is not"#,
        r#"hook "hook.sh": kubernetesMutating[0] "m.example.com": reinvocation: unknown field"#,
        r#"hook "hook.sh": settings.executionMinInterval: invalid duration"#,
    ];
    for prefix in expected {
        assert!(
            problems.iter().any(|p| p.starts_with(prefix)),
            "missing {prefix:?} in {problems:#?}"
        );
    }
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
}

#[test]
fn v1_fields_without_config_version_point_at_it() {
    let problems = parse_problems("kubernetes:\n- kind: Pod\n");
    assert_eq!(
        problems,
        vec![
            r#"hook "hook.sh": kubernetes: needs configVersion: v1 (without it the v0 form is read)"#
        ]
    );
    let problems = parse_problems("configVersion: v2\nonStartup: 1\n");
    assert!(problems[0].contains("configVersion: \"v2\" is not a supported version"));
    assert!(parse_problems("").len() == 1);
    assert!(parse_problems("- a\n- b\n")[0].contains("must be a mapping"));
    assert!(parse_problems("{bad json")[0].contains("not valid JSON"));
}

#[test]
fn written_configurations_read_back_unchanged() {
    let text = r#"
configVersion: v1
onStartup: 10
schedule:
- name: every-minute
  crontab: "* * * * *"
  allowFailure: true
  queue: slow
  includeSnapshotsFrom: [pods]
kubernetes:
- name: pods
  apiVersion: v1
  kind: Pod
  executeHookOnEvent: [Added, Modified]
  executeHookOnSynchronization: false
  waitForSynchronization: false
  keepFullObjectsInMemory: false
  nameSelector:
    matchNames: [pod-0]
  labelSelector:
    matchLabels: {app: web}
    matchExpressions:
    - {key: tier, operator: In, values: [cache]}
    - {key: legacy, operator: DoesNotExist}
  fieldSelector:
    matchExpressions:
    - {field: status.phase, operator: "!=", value: Pending}
  namespace:
    nameSelector:
      matchNames: [prod]
    labelSelector:
      matchLabels: {env: prod}
  jqFilter: .metadata.labels
  queue: pods
  group: g
kubernetesValidating:
- name: policy.example.com
  rules:
  - operations: [CREATE]
    apiGroups: [""]
    apiVersions: [v1]
    resources: [pods]
    scope: Namespaced
  failurePolicy: Ignore
  namespace:
    labelSelector:
      matchLabels: {env: prod}
  timeoutSeconds: 5
  sideEffects: NoneOnDryRun
  matchConditions:
  - {name: not-system, expression: "!request.namespace.startsWith('kube-')"}
kubernetesMutating:
- name: defaults.example.com
  rules:
  - operations: [CREATE, UPDATE]
    apiGroups: [apps]
    apiVersions: [v1]
    resources: [deployments]
  failurePolicy: Fail
  sideEffects: None
  timeoutSeconds: 3
  reinvocationPolicy: IfNeeded
  enforcement: DryRun
  labelSelector:
    matchLabels: {mutate: "yes"}
  includeSnapshotsFrom: [pods]
kubernetesCustomResourceConversion:
- name: convert
  crdName: widgets.example.com
  conversions:
  - {fromVersion: example.com/v1, toVersion: example.com/v2}
settings:
  executionMinInterval: 1500ms
  executionBurst: 2
  timeout: 1h30m
"#;
    let config = parse(text);
    let written = to_json(&config);
    assert_eq!(
        written["kubernetes"][0]["fieldSelector"]["matchExpressions"][0]["operator"],
        "NotEquals"
    );
    assert_eq!(written["settings"]["timeout"], "1h30m");
    assert_eq!(written["kubernetesMutating"][0]["enforcement"], "DryRun");
    assert!(
        written["kubernetes"][0].get("allowFailure").is_none(),
        "false is left out"
    );
    assert!(
        !written.to_string().contains("null"),
        "no nulls in {written:#}"
    );
    assert_eq!(parse(&written.to_string()), config);

    let minimal = parse("configVersion: v1\nonStartup: 1\n");
    assert_eq!(
        to_json(&minimal),
        serde_json::json!({"configVersion": "v1", "onStartup": 1})
    );
}

#[test]
fn options_shell_operator_ignores_load_with_a_warning() {
    let text = "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  resynchronizationPeriod: 10s\n";
    let parsed = parse_with_warnings("hook.sh", text).expect("loads");
    assert_eq!(parsed.config.kubernetes[0].kind, "Pod");
    let warnings: Vec<String> = parsed.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(
            r#"hook "hook.sh": kubernetes[0] "pods": resynchronizationPeriod: ignored"#
        ),
        "{warnings:?}"
    );
    // shell-operator's schema wants a string there: anything else is still refused.
    let problems = parse_problems(
        "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  resynchronizationPeriod: 10\n",
    );
    assert!(
        problems[0].contains("resynchronizationPeriod: expected a string"),
        "{problems:?}"
    );
}

#[test]
fn a_problem_in_one_binding_hides_none_in_another() {
    let problems = parse_problems(
        r#"
configVersion: v1
schedule:
- {name: a, crontab: "* * * * *", queu: slow}
- {name: b, crontab: 5}
kubernetes:
- name: pods
  kind: Pod
  executeHookOnEvent: [Added, Created, Modified, Gone]
  labelSelector:
    matchExpressions:
    - {operator: In}
    - {key: tier, operator: Between}
  nameSelector: {}
- kind: Node
  jqFiltr: .metadata
"#,
    );
    assert_eq!(
        problems,
        [
            r#"hook "hook.sh": schedule[0] "a": queu: unknown field; did you mean queue?"#,
            r#"hook "hook.sh": schedule[1] "b": crontab: expected a string, found 5"#,
            r#"hook "hook.sh": kubernetes[0] "pods": executeHookOnEvent[1]: "Created" is not Added, Modified or Deleted"#,
            r#"hook "hook.sh": kubernetes[0] "pods": executeHookOnEvent[3]: "Gone" is not Added, Modified or Deleted"#,
            r#"hook "hook.sh": kubernetes[0] "pods": labelSelector.matchExpressions[0].key: required"#,
            r#"hook "hook.sh": kubernetes[0] "pods": labelSelector.matchExpressions[1].operator: "Between" is not In, NotIn, Exists or DoesNotExist"#,
            r#"hook "hook.sh": kubernetes[0] "pods": nameSelector.matchNames: required"#,
            r#"hook "hook.sh": kubernetes[1] "kubernetes": jqFiltr: unknown field; did you mean jqFilter?"#,
        ]
    );
}

#[test]
fn refused_keys_say_what_to_write_instead() {
    let problems = parse_problems(
        r#"
configVersion: v1
onKubernetesEvent: []
kubernetesValidating:
- name: v.example.com
  namespace:
    nameSelector: {matchNames: [default]}
kubernetesCustomResourceConversion:
- {name: c, crdName: a.example.com, conversion: []}
"#,
    );
    assert_eq!(
        problems,
        [
            r#"hook "hook.sh": onKubernetesEvent: this is the v0 spelling: with configVersion v1 use kubernetes"#,
            r#"hook "hook.sh": kubernetesValidating[0] "v.example.com": namespace.nameSelector: a webhook selects namespaces by labels only: use labelSelector with the kubernetes.io/metadata.name label"#,
            r#"hook "hook.sh": kubernetesCustomResourceConversion[0] "c": conversion: unknown field; did you mean conversions?"#,
        ]
    );
}

#[test]
fn config_version_v0_written_out_is_refused_as_shell_operator_does() {
    let problems = parse_problems("configVersion: v0\nonStartup: 1\n");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with(r#"hook "hook.sh": configVersion: "#)
            && problems[0].contains("omit configVersion for the v0 form"),
        "{problems:?}"
    );
}

#[test]
fn unknown_keys_where_shell_operator_skips_them_load_with_a_warning() {
    let text = r#"
onKubernetesEvent:
- name: pods
  kind: Pod
  jqFiltr: .metadata
  namespaceSelector: {matchNames: [default], labels: {}}
schedule:
- {crontab: "* * * * *", queue: slow}
"#;
    let parsed = parse_with_warnings("hook.sh", text).expect("loads");
    assert_eq!(parsed.config.version, operon_data::model::ConfigVersion::V0);
    assert_eq!(parsed.config.kubernetes[0].jq_filter, None);
    let warnings: Vec<String> = parsed.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(warnings.len(), 3, "{warnings:#?}");
    assert!(warnings[0].starts_with(r#"hook "hook.sh": schedule[0] "schedule": queue: ignored"#));
    assert!(
        warnings[1].starts_with(r#"hook "hook.sh": kubernetes[0] "pods": jqFiltr: ignored"#)
            && warnings[1].ends_with("did you mean jqFilter?"),
        "{warnings:#?}"
    );
    assert!(
        warnings[2].starts_with(
            r#"hook "hook.sh": kubernetes[0] "pods": namespaceSelector.labels: ignored"#
        )
    );

    let text = "configVersion: v1\nkubernetesValidating:\n- name: v.example.com\n  \
                matchConditions:\n  - {name: a, expression: 'true', message: m}\n";
    let parsed = parse_with_warnings("hook.sh", text).expect("loads");
    let warnings: Vec<String> = parsed.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        warnings,
        [format!(
            r#"hook "hook.sh": kubernetesValidating[0] "v.example.com": matchConditions[0].message: {}"#,
            "ignored: shell-operator does not know this field and skips it, and so does Operon"
        )]
    );
}

#[test]
fn scalars_are_read_as_hand_written_yaml_writes_them() {
    let config = parse(
        r#"
configVersion: v1
onStartup: 5.0
kubernetes:
- kind: Pod
  allowFailure: "true"
  executeHookOnSynchronization: "false"
  labelSelector:
    matchLabels: {mutate: "yes"}
settings:
  executionBurst: "3"
  executionMinInterval: " 2s "
"#,
    );
    assert_eq!(config.on_startup, Some(5));
    assert!(config.kubernetes[0].allow_failure);
    assert_eq!(
        config.kubernetes[0].execute_hook_on_synchronization,
        Some(false)
    );
    let settings = config.settings.expect("settings");
    assert_eq!(settings.execution_burst, Some(3));
    assert_eq!(settings.execution_min_interval_ms, Some(2_000));

    // YAML is read as 1.2: `yes` is a string, not a boolean.
    let problems = parse_problems(
        "configVersion: v1\nschedule:\n- {crontab: '* * * * *', allowFailure: yes}\n\
         kubernetesValidating:\n- {name: v, timeoutSeconds: -1}\nonStartup: 1.5\n",
    );
    assert_eq!(
        problems,
        [
            r#"hook "hook.sh": onStartup: expected an integer, found 1.5"#,
            r#"hook "hook.sh": schedule[0] "schedule": allowFailure: expected true or false, found "yes""#,
            r#"hook "hook.sh": kubernetesValidating[0] "v": timeoutSeconds: -1 is out of range"#,
        ]
    );
}

#[test]
fn settings_without_bindings_load_with_a_warning_as_in_shell_operator() {
    let config = parse("configVersion: v1\nsettings:\n  executionMinInterval: 1s\n");
    let valid = valid(&config);
    assert!(valid.schedules.is_empty() && valid.kubernetes.is_empty());
    assert_eq!(valid.warnings.len(), 1, "{:?}", valid.warnings);
    assert!(valid.warnings[0].reason.contains("no bindings"));
}
