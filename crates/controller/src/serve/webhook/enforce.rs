//! What a binding's [`Enforcement`] makes of a hook's admission outcome: under `Deny`
//! the API server gets the hook's answer; under `Warn` and `DryRun` every request is
//! allowed and what the hook answered is recorded instead (as Kubewarden's monitor mode,
//! a mutating hook's patch is not applied either). Under `Warn` the client sees what
//! would have happened as admission warnings (kubectl prints `Warning: ...`); under
//! `DryRun` it sees nothing.

use super::review::AdmissionOutcome;
use operon_data::model::{Enforcement, ValidatingResponse};

/// How many patch operations a `Warn` warning names before it only counts the rest:
/// the API server truncates long warnings, and the log has the patch whole.
const NAMED_OPERATIONS: usize = 5;

/// An admission outcome under its binding's enforcement.
#[derive(Debug, Clone)]
pub struct Enforced {
    /// What the API server gets.
    pub outcome: AdmissionOutcome,
    /// What the hook answered that the API server does not get; `None` under `Deny`,
    /// and when the hook allowed without a patch.
    pub unenforced: Option<Unenforced>,
    /// The enforcement applied.
    pub enforcement: Enforcement,
}

/// A hook's answer that was recorded instead of enforced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unenforced {
    /// The hook denied, with this message.
    Denied(String),
    /// The hook allowed with this JSON Patch (a mutating binding).
    Patched(String),
    /// The hook failed, timed out or gave no answer.
    Failed(String),
}

impl Unenforced {
    /// What the hook would have done, for the log: `deny`, `patch` or `fail`.
    pub fn would(&self) -> &'static str {
        match self {
            Self::Denied(_) => "deny",
            Self::Patched(_) => "patch",
            Self::Failed(_) => "fail",
        }
    }

    /// The denial's message, the patch or the failure.
    pub fn detail(&self) -> &str {
        match self {
            Self::Denied(text) | Self::Patched(text) | Self::Failed(text) => text,
        }
    }
}

impl Enforced {
    /// The `outcome` label of `operon_webhook_requests_total`: `would_deny` for a denial
    /// that was not enforced; a failure stays `error` whatever the enforcement (the hook
    /// needs fixing either way); otherwise what the API server got.
    pub(crate) fn metric_label(&self) -> &'static str {
        match &self.unenforced {
            Some(Unenforced::Denied(_)) => "would_deny",
            Some(Unenforced::Failed(_)) => "error",
            _ => self.outcome.metric_label(),
        }
    }
}

/// `outcome` of binding `binding` (its webhook's name) under `enforcement`.
pub fn enforce(outcome: AdmissionOutcome, enforcement: Enforcement, binding: &str) -> Enforced {
    let webhook = format!("admission webhook {binding:?}");
    let (warnings, unenforced) = match (enforcement, outcome) {
        (Enforcement::Deny, outcome) => {
            return Enforced {
                outcome,
                unenforced: None,
                enforcement,
            };
        }
        (_, AdmissionOutcome::Failed(message)) => (
            vec![format!(
                "{webhook} failed and is not enforced (Warn): {message}"
            )],
            Some(Unenforced::Failed(message)),
        ),
        (_, AdmissionOutcome::Answered(answer)) if !answer.allowed => {
            let message = answer.message.unwrap_or_default();
            let mut warnings = answer.warnings;
            warnings.push(match message.is_empty() {
                true => format!("{webhook} would deny the request (Warn)"),
                false => format!("{webhook} would deny the request (Warn): {message}"),
            });
            (warnings, Some(Unenforced::Denied(message)))
        }
        (_, AdmissionOutcome::Answered(answer)) => {
            let mut warnings = answer.warnings;
            let patch = answer.patch.filter(|p| !p.trim().is_empty());
            if let Some(patch) = &patch {
                warnings.push(format!(
                    "{webhook} would patch the object (Warn, not applied): {}",
                    operations(patch)
                ));
            }
            (warnings, patch.map(Unenforced::Patched))
        }
    };
    let warnings = match enforcement {
        Enforcement::DryRun => Vec::new(),
        _ => warnings,
    };
    Enforced {
        outcome: AdmissionOutcome::Answered(ValidatingResponse {
            allowed: true,
            message: None,
            warnings,
            patch: None,
        }),
        unenforced,
        enforcement,
    }
}

/// `add /metadata/labels, replace /spec/replicas` for a JSON Patch: the operations a
/// user recognizes, without the values (which may be large or secret).
fn operations(patch: &str) -> String {
    let Ok(serde_json::Value::Array(list)) = serde_json::from_str(patch) else {
        return "a patch".to_owned();
    };
    let text = |op: &serde_json::Value, key: &str| {
        op.get(key)
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_owned()
    };
    let mut named: Vec<String> = (list.iter().take(NAMED_OPERATIONS))
        .map(|op| format!("{} {}", text(op, "op"), text(op, "path")))
        .collect();
    if list.len() > NAMED_OPERATIONS {
        named.push(format!("and {} more", list.len() - NAMED_OPERATIONS));
    }
    named.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::webhook::review::{admission_outcome, admission_response};
    use operon_data::model::HookOutput;
    use serde_json::{Value, json};

    fn review() -> Value {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
               "request": {"uid": "u1", "operation": "CREATE",
                           "kind": {"group": "", "version": "v1", "kind": "Pod"},
                           "object": {"metadata": {"name": "x"}}}})
    }

    fn answer(
        allowed: bool,
        message: Option<&str>,
        patch: Option<&str>,
    ) -> Result<HookOutput, String> {
        Ok(HookOutput {
            validating: Some(ValidatingResponse {
                allowed,
                message: message.map(Into::into),
                warnings: vec!["set by the hook".into()],
                patch: patch.map(Into::into),
            }),
            ..HookOutput::default()
        })
    }

    const PATCH: &str = r#"[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]"#;

    /// The AdmissionReview's `response` and the metric label for one hook output,
    /// binding kind and enforcement.
    fn answered(
        output: Result<HookOutput, String>,
        mutating: bool,
        enforcement: Enforcement,
    ) -> (Value, &'static str, Option<Unenforced>) {
        let outcome = admission_outcome("h.sh", "policy.example.com", mutating, &review(), output);
        let enforced = enforce(outcome, enforcement, "policy.example.com");
        let label = enforced.metric_label();
        let unenforced = enforced.unenforced.clone();
        let response = admission_response(&review(), enforced.outcome)["response"].clone();
        (response, label, unenforced)
    }

    #[test]
    fn deny_answers_as_the_hook_did() {
        let (allowed, label, _) = answered(answer(true, None, None), false, Enforcement::Deny);
        assert_eq!(allowed["allowed"], true);
        assert_eq!(label, "allowed");
        let (denied, label, unenforced) = answered(
            answer(false, Some("no latest tags"), None),
            false,
            Enforcement::Deny,
        );
        assert_eq!(denied["allowed"], false);
        assert_eq!(
            denied["status"],
            json!({"code": 403, "message": "no latest tags"})
        );
        assert_eq!(denied["warnings"], json!(["set by the hook"]));
        assert_eq!((label, unenforced), ("denied", None));
        let (failed, label, _) = answered(
            Err("hook h.sh failed: exit 1".into()),
            false,
            Enforcement::Deny,
        );
        assert_eq!(failed["status"]["code"], 500);
        assert_eq!(label, "error");
        let (patched, label, _) =
            answered(answer(true, None, Some(PATCH)), true, Enforcement::Deny);
        assert_eq!(patched["patchType"], "JSONPatch");
        assert_eq!(label, "allowed");
    }

    #[test]
    fn warn_allows_and_shows_what_would_have_happened() {
        let (allowed, label, unenforced) =
            answered(answer(true, None, None), false, Enforcement::Warn);
        assert_eq!(
            allowed,
            json!({"uid": "u1", "allowed": true, "warnings": ["set by the hook"]})
        );
        assert_eq!((label, unenforced), ("allowed", None));

        let (denied, label, unenforced) = answered(
            answer(false, Some("no latest tags"), None),
            false,
            Enforcement::Warn,
        );
        assert_eq!(
            denied,
            json!({"uid": "u1", "allowed": true, "warnings": [
                "set by the hook",
                "admission webhook \"policy.example.com\" would deny the request (Warn): no latest tags"]})
        );
        assert_eq!(label, "would_deny");
        assert_eq!(
            unenforced,
            Some(Unenforced::Denied("no latest tags".into()))
        );

        let (failed, label, unenforced) = answered(
            Err("hook h.sh did not answer within 9s".into()),
            false,
            Enforcement::Warn,
        );
        assert_eq!(failed["allowed"], true);
        assert!(failed.get("status").is_none());
        assert_eq!(
            failed["warnings"],
            json!([
                "admission webhook \"policy.example.com\" failed and is not enforced (Warn): hook h.sh did not answer within 9s"
            ])
        );
        assert_eq!(label, "error");
        assert_eq!(unenforced.unwrap().would(), "fail");
    }

    #[test]
    fn warn_and_dry_run_apply_no_patch() {
        let (patched, label, unenforced) =
            answered(answer(true, None, Some(PATCH)), true, Enforcement::Warn);
        assert!(patched.get("patch").is_none() && patched.get("patchType").is_none());
        assert_eq!(
            patched["warnings"],
            json!([
                "set by the hook",
                "admission webhook \"policy.example.com\" would patch the object (Warn, not applied): add /metadata/labels"
            ])
        );
        assert_eq!(label, "allowed");
        assert_eq!(unenforced, Some(Unenforced::Patched(PATCH.into())));

        let (denied, label, _) =
            answered(answer(false, Some("no"), None), true, Enforcement::DryRun);
        assert_eq!(denied, json!({"uid": "u1", "allowed": true}));
        assert_eq!(label, "would_deny");

        // A patch that does not apply is a failure of the hook, not enforced either.
        let bad = r#"[{"op":"remove","path":"/spec/missing"}]"#;
        let (failed, label, unenforced) =
            answered(answer(true, None, Some(bad)), true, Enforcement::DryRun);
        assert_eq!(failed, json!({"uid": "u1", "allowed": true}));
        assert_eq!(label, "error");
        assert!(unenforced.unwrap().detail().contains("does not apply"));

        let (patched, label, unenforced) =
            answered(answer(true, None, Some(PATCH)), true, Enforcement::DryRun);
        assert_eq!(patched, json!({"uid": "u1", "allowed": true}));
        assert_eq!(label, "allowed");
        assert_eq!(unenforced.unwrap().would(), "patch");
    }

    #[test]
    fn dry_run_shows_the_client_nothing() {
        for output in [
            answer(true, None, None),
            answer(false, Some("no latest tags"), None),
            answer(false, None, None),
            Err("hook h.sh failed: exit 1".into()),
        ] {
            let (response, _, _) = answered(output, false, Enforcement::DryRun);
            assert_eq!(response, json!({"uid": "u1", "allowed": true}));
        }
        let (_, label, unenforced) =
            answered(answer(false, None, None), false, Enforcement::DryRun);
        assert_eq!(
            (label, unenforced),
            ("would_deny", Some(Unenforced::Denied(String::new())))
        );
    }

    #[test]
    fn long_patches_are_named_in_part() {
        let ops: Vec<Value> = (0..7)
            .map(|i| json!({"op": "add", "path": format!("/metadata/labels/l{i}"), "value": "v"}))
            .collect();
        let text = operations(&Value::Array(ops).to_string());
        assert!(
            text.ends_with("add /metadata/labels/l4, and 2 more"),
            "{text}"
        );
        assert_eq!(operations("not json"), "a patch");
    }
}
