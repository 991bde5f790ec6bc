//! Admission for Operon's own resources: Operations, OperationSets, Triggers, Diagnoses,
//! Hooks and ModuleConfigs are checked on create and update with the same rules as
//! `operon validate` ([`operon_manifest::validate_object`]), and refused with every
//! problem listed, field by field. API servers before 1.25 drop a CRD's CEL rules, so
//! this webhook is where an OperationSet with a self-loop, an Operation with two
//! processors or a Hook whose permissions cannot be read
//! ([`operon_data::api::hook_spec_problems`]) is refused.
//!
//! A ModuleConfig is also checked against the modules directory of `operon serve
//! --modules-dir` ([`operon_addons::module_config`], read once at start by every
//! replica): its version and conversion, and its settings against the module's config
//! schema, every problem by field. What that check allows but finds worth saying (a
//! name that is no module, an old settings version converted) comes back as admission
//! warnings, which `kubectl` prints; without a modules directory only the spec's shape
//! is, and the warning says so.
//!
//! Served at `POST /operon/validate` on the admission server by every replica, whether
//! or not hooks have loaded: it needs nothing but the object (and the modules directory,
//! read before serving). References to other objects are not checked here (`kubectl
//! apply -f DIR` may create an OperationSet before its Operations); the controllers
//! report them in status.

use super::review;
use operon_addons::module_config::SettingsRules;
use operon_data::api::Problem;
use operon_data::model::ValidatingResponse;
use serde_json::Value;

/// The path of this webhook on the admission server.
pub(crate) const PATH: &str = "/operon/validate";

/// The webhook's name in the ValidatingWebhookConfiguration.
pub(crate) const WEBHOOK_NAME: &str = "resources.operon.dev";

/// The resources of group `operon.dev` it checks.
pub(crate) const RESOURCES: [&str; 6] = [
    "operations",
    "operationsets",
    "triggers",
    "diagnoses",
    "hooks",
    "moduleconfigs",
];

/// How long the API server waits for it: the check is local and fast, and a short
/// timeout bounds how long a create waits while no replica answers.
pub(crate) const TIMEOUT_SECONDS: i32 = 5;

/// The answer to an AdmissionReview of one of Operon's resources; `modules` checks
/// ModuleConfigs against the modules directory, when `operon serve` has one.
pub fn answer(review: &Value, modules: Option<&SettingsRules>) -> Value {
    let outcome = match review.pointer("/request/object") {
        // DELETE and CONNECT carry no object; the webhook is not registered for them.
        None | Some(Value::Null) => allowed(Vec::new()),
        Some(object) => {
            let mut problems = operon_manifest::validate_object(object.clone());
            let mut warnings = Vec::new();
            if object.get("kind").and_then(Value::as_str) == Some("ModuleConfig") {
                module_config(object, modules, &mut problems, &mut warnings);
            }
            if problems.is_empty() {
                allowed(warnings)
            } else {
                denied(&problems)
            }
        }
    };
    review::admission_response(review, review::AdmissionOutcome::Answered(outcome))
}

/// Adds what the modules directory says of a ModuleConfig: its problems (those of a
/// field the typed check reported already left out) and its warnings.
fn module_config(
    object: &Value,
    modules: Option<&SettingsRules>,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<String>,
) {
    let none = SettingsRules::none();
    let checked = modules.unwrap_or(&none).check(object);
    let typed: Vec<String> = problems.iter().map(|p| p.field.clone()).collect();
    problems.extend(
        checked
            .problems
            .into_iter()
            .filter(|p| !typed.contains(&p.field)),
    );
    if modules.is_some() {
        warnings.extend(checked.warnings);
    } else {
        warnings.push(
            "this operon serve runs no modules (no --modules-dir): the settings are not \
             checked against a module's schema"
                .to_owned(),
        );
    }
}

fn allowed(warnings: Vec<String>) -> ValidatingResponse {
    ValidatingResponse {
        allowed: true,
        message: None,
        warnings,
        patch: None,
    }
}

/// Every problem, one per line, under a line naming the object: what `kubectl apply`
/// prints after "denied the request:".
fn denied(problems: &[Problem]) -> ValidatingResponse {
    let object = &problems[0].object;
    let mut message = match problems.len() {
        1 => format!("{object} is invalid:"),
        n => format!("{object} has {n} problems:"),
    };
    for problem in problems {
        message.push_str("\n- ");
        if !problem.field.is_empty() {
            message.push_str(&problem.field);
            message.push_str(": ");
        }
        message.push_str(&problem.reason);
    }
    ValidatingResponse {
        allowed: false,
        message: Some(message),
        warnings: Vec::new(),
        patch: None,
    }
}

/// The webhook entry of the ValidatingWebhookConfiguration, with `client_config`
/// pointing at [`PATH`]. `failurePolicy: Fail`: an invalid object must never be stored
/// unchecked; the price is that Operon's own kinds cannot be created or changed while
/// no replica answers (no other resource is affected).
pub(crate) fn webhook(client_config: Value) -> Value {
    serde_json::json!({
        "name": WEBHOOK_NAME,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "timeoutSeconds": TIMEOUT_SECONDS,
        // Status writes (the `/status` subresources) are the controllers' and not checked.
        "rules": [{
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": [operon_data::api::GROUP],
            "apiVersions": ["*"],
            "resources": RESOURCES,
            "scope": "*",
        }],
        "clientConfig": client_config,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer_of(review: &Value) -> Value {
        answer(review, None)
    }

    fn review(object: Value) -> Value {
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u-1",
                "kind": {"group": "operon.dev", "version": "v1alpha1", "kind": "OperationSet"},
                "operation": "CREATE",
                "object": object,
            },
        })
    }

    #[test]
    fn an_invalid_operation_set_is_denied_with_every_problem() {
        let answer = answer_of(&review(json!({
            "apiVersion": "operon.dev/v1alpha1",
            "kind": "OperationSet",
            "metadata": {"name": "loop", "uid": "x", "resourceVersion": "1"},
            "spec": {"adjacencyList": [
                {"id": 0, "to": [1]},
                {"id": 1, "operation": "a", "to": [1]},
                {"id": 2, "operation": "b", "to": [9]},
            ]},
        })));
        let response = &answer["response"];
        assert_eq!(response["uid"], "u-1");
        assert_eq!(response["allowed"], false);
        assert_eq!(response["status"]["code"], 403);
        let message = response["status"]["message"].as_str().unwrap();
        assert!(message.starts_with("OperationSet/loop has "), "{message}");
        assert!(
            message.contains("\n- spec.adjacencyList[1].to[0]: "),
            "{message}"
        );
        assert!(
            message.contains("\n- spec.adjacencyList[2].to[0]: "),
            "{message}"
        );
    }

    #[test]
    fn a_valid_object_is_allowed_even_when_what_it_names_does_not_exist_yet() {
        let answer = answer_of(&review(json!({
            "apiVersion": "operon.dev/v1alpha1",
            "kind": "OperationSet",
            "metadata": {"name": "ok"},
            "spec": {"adjacencyList": [{"id": 0, "to": [1]}, {"id": 1, "operation": "later"}]},
        })));
        assert_eq!(answer["response"]["allowed"], true);
        assert!(answer["response"].get("status").is_none());
    }

    #[test]
    fn an_operation_with_two_processors_is_denied() {
        let answer = answer_of(&review(json!({
            "apiVersion": "operon.dev/v1alpha1",
            "kind": "Operation",
            "metadata": {"name": "two"},
            "spec": {"processor": {
                "scriptRunner": {"script": "true"},
                "httpServer": {"port": 80},
            }},
        })));
        let message = answer["response"]["status"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("Operation/two is invalid:\n- spec.processor: "),
            "{message}"
        );
    }

    fn hook(spec: Value) -> Value {
        json!({
            "apiVersion": "operon.dev/v1alpha1",
            "kind": "Hook",
            "metadata": {"name": "labeler", "namespace": "demo"},
            "spec": spec,
        })
    }

    #[test]
    fn a_hook_is_denied_with_every_problem_of_its_reference_permissions_and_overrides() {
        let answer = answer_of(&review(hook(json!({
            "module": "sha256:abc",
            "permissions": {
                "watch": [{"apiVersion": "apps/v1/x", "kind": "Deployment"},
                          {"apiVersion": "v1", "kind": " ", "namespaces": [""]}],
                "patch": [{"apiVersion": "/v1", "kind": "ConfigMap", "operations": []},
                          {"apiVersion": "v1", "kind": "Pod",
                           "operations": ["MergePatch", "Patch"]}],
            },
            "overrides": {
                "timeout": "soon",
                "schedule": [{"name": "tick", "crontab": "61 * * * *"},
                             {"name": "tick"}],
                "kubernetes": [{"name": ""}],
            },
        }))));
        let response = &answer["response"];
        assert_eq!(response["allowed"], false);
        let message = response["status"]["message"].as_str().unwrap();
        let lines: Vec<&str> = message.lines().collect();
        assert_eq!(lines[0], "Hook/labeler has 11 problems:", "{message}");
        let fields: Vec<&str> = lines[1..]
            .iter()
            .map(|l| l.trim_start_matches("- ").split(": ").next().unwrap())
            .collect();
        assert_eq!(
            fields,
            [
                "spec.module",
                "spec.permissions.watch[0].apiVersion",
                "spec.permissions.watch[1].kind",
                "spec.permissions.watch[1].namespaces[0]",
                "spec.permissions.patch[0].apiVersion",
                "spec.permissions.patch[0].operations",
                "spec.permissions.patch[1].operations[1]",
                "spec.overrides.timeout",
                "spec.overrides.schedule[0].crontab",
                "spec.overrides.schedule[1].name",
                "spec.overrides.kubernetes[0].name",
            ],
            "{message}"
        );
        assert!(
            message.contains("unknown operation \"Patch\"; expected one of Create, "),
            "{message}"
        );
        assert!(message.contains("sha256: is followed by 64 lowercase hex digits"));
    }

    #[test]
    fn a_hook_naming_a_path_or_no_module_name_is_denied() {
        for (module, reason) in [
            ("hooks/labeler.wasm", "is a path"),
            ("Labeler", "is not a Module name"),
            ("", "empty"),
        ] {
            let answer = answer_of(&review(hook(json!({"module": module}))));
            let message = answer["response"]["status"]["message"].as_str().unwrap();
            assert!(
                message.starts_with("Hook/labeler is invalid:\n- spec.module: "),
                "{message}"
            );
            assert!(message.contains(reason), "{module}: {message}");
        }
    }

    #[test]
    fn a_hook_of_the_wrong_types_is_denied_naming_the_field() {
        let answer = answer_of(&review(hook(json!({
            "module": "labeler",
            "permissions": {"watch": [{"apiVersion": "v1"}]},
            "overrides": {"executionBurst": "many"},
        }))));
        let message = answer["response"]["status"]["message"].as_str().unwrap();
        assert!(message.contains("- spec.permissions.watch[0]"), "{message}");
        assert!(message.contains("kind"), "{message}");
        assert!(
            message.contains("- spec.overrides.executionBurst: "),
            "{message}"
        );
    }

    #[test]
    fn a_valid_hook_is_allowed_whatever_bindings_its_overrides_name() {
        let answer = answer_of(&review(hook(json!({
            "module": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "permissions": {
                "watch": [{"apiVersion": "v1", "kind": "Pod", "namespaces": ["*"]}],
                "patch": [{"apiVersion": "apps/v1", "kind": "Deployment",
                           "operations": ["MergePatch", "JSONPatch", "JQPatch", "Delete"]}],
            },
            "overrides": {
                "timeout": "30s", "executionMinInterval": "1m30s", "executionBurst": 2,
                "schedule": [{"name": "not-known-here", "crontab": "*/5 * * * *"}],
                "kubernetes": [{"name": "pods", "namespaces": ["demo"]}],
            },
        }))));
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
    }

    #[test]
    fn the_webhook_covers_the_six_kinds_on_create_and_update() {
        let webhook = webhook(json!({"url": "https://x/operon/validate"}));
        assert_eq!(webhook["failurePolicy"], "Fail");
        assert_eq!(webhook["rules"][0]["apiGroups"], json!(["operon.dev"]));
        assert_eq!(
            webhook["rules"][0]["resources"],
            json!([
                "operations",
                "operationsets",
                "triggers",
                "diagnoses",
                "hooks",
                "moduleconfigs"
            ])
        );
        assert_eq!(
            webhook["rules"][0]["operations"],
            json!(["CREATE", "UPDATE"])
        );
    }

    /// `echo-server` whose settings are at version 2 (`count` became `replicas`).
    fn modules() -> (tempfile::TempDir, SettingsRules) {
        let dir = tempfile::tempdir().unwrap();
        let module = dir.path().join("modules/001-echo-server/openapi");
        std::fs::create_dir_all(module.join("conversions")).unwrap();
        std::fs::write(
            module.join("config-values.yaml"),
            "type: object\nproperties:\n  replicas: {type: integer, minimum: 1}\n  \
             service:\n    type: object\n    properties:\n      port: {type: integer}\n",
        )
        .unwrap();
        std::fs::write(
            module.join("conversions/v2.yaml"),
            "version: 2\nconversions: ['.replicas = .count | del(.count)']\n",
        )
        .unwrap();
        let rules = SettingsRules::read(&dir.path().join("modules"), None).unwrap();
        (dir, rules)
    }

    fn module_config(name: &str, spec: Value) -> Value {
        review(json!({
            "apiVersion": "operon.dev/v1alpha1",
            "kind": "ModuleConfig",
            "metadata": {"name": name},
            "spec": spec,
        }))
    }

    #[test]
    fn a_module_config_is_denied_with_every_problem_of_its_settings_by_field() {
        let (_dir, rules) = modules();
        let review = module_config(
            "echo-server",
            json!({"enabled": "yes", "version": 2,
                   "settings": {"replicas": 0, "service": {"port": "http"}}}),
        );
        let answer = answer(&review, Some(&rules));
        let response = &answer["response"];
        assert_eq!(response["allowed"], false);
        let message = response["status"]["message"].as_str().unwrap();
        let lines: Vec<&str> = message.lines().collect();
        assert_eq!(
            lines[0], "ModuleConfig/echo-server has 3 problems:",
            "{message}"
        );
        let fields: Vec<&str> = lines[1..]
            .iter()
            .map(|l| l.trim_start_matches("- ").split(": ").next().unwrap())
            .collect();
        // The typed check names spec.enabled once; the modules' check adds the rest.
        assert_eq!(
            fields,
            [
                "spec.enabled",
                "spec.settings.replicas",
                "spec.settings.service.port"
            ],
            "{message}"
        );
    }

    #[test]
    fn a_module_config_of_an_old_version_or_no_module_is_allowed_with_a_warning() {
        let (_dir, rules) = modules();
        let old = module_config(
            "echo-server",
            json!({"enabled": true, "version": 1, "settings": {"count": 2}}),
        );
        let allowed = answer(&old, Some(&rules));
        assert_eq!(allowed["response"]["allowed"], true, "{allowed}");
        let warning = allowed["response"]["warnings"][0].as_str().unwrap();
        assert!(
            warning.starts_with("spec.version 1 is older than the latest of module echo-server, 2"),
            "{warning}"
        );

        let unknown = module_config("nothing-here", json!({"enabled": true}));
        let allowed = answer(&unknown, Some(&rules));
        assert_eq!(allowed["response"]["allowed"], true);
        assert_eq!(
            allowed["response"]["warnings"],
            json!([
                "no module \"nothing-here\" in the modules directory: nothing uses this ModuleConfig"
            ])
        );

        // Without a modules directory only the types are checked.
        let answer = answer_of(&old);
        assert_eq!(answer["response"]["allowed"], true);
        assert!(
            answer["response"]["warnings"][0]
                .as_str()
                .unwrap()
                .contains("no --modules-dir")
        );
        let denied = answer_of(&module_config("echo-server", json!({"version": "two"})));
        let message = denied["response"]["status"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("ModuleConfig/echo-server is invalid:\n- spec.version: "),
            "{message}"
        );
    }
}
