//! AdmissionReview and ConversionReview (v1) in and out, with shell-operator's answers:
//! a denial carries `status.code` 403 and the hook's message; a hook that failed, timed
//! out or gave no answer denies with code 500 and a message saying so (never an
//! unanswered or null response); a mutating answer's JSON Patch goes out base64-encoded
//! with `patchType: JSONPatch`; a conversion answer must hold as many objects as the
//! request, in order.

use base64::Engine as _;
use operon_data::model::{ConversionResponse, HookOutput, ValidatingResponse};
use serde_json::{Value, json};

/// Why a request body is not a review this server answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReviewError {
    /// Not JSON.
    #[error("the body is not JSON: {0}")]
    NotJson(String),
    /// Some other kind or version.
    #[error("expected {expected}, got apiVersion {api_version:?} kind {kind:?}")]
    WrongKind {
        /// What this endpoint takes.
        expected: &'static str,
        /// What came.
        api_version: String,
        /// What came.
        kind: String,
    },
    /// No `request` or no `request.uid`.
    #[error("the review has no request.uid")]
    NoRequest,
}

/// Checks a body is a `kind`/`api_version` review with a request; returns it.
fn parse(body: &[u8], kind: &'static str, api_version: &str) -> Result<Value, ReviewError> {
    let review: Value =
        serde_json::from_slice(body).map_err(|e| ReviewError::NotJson(e.to_string()))?;
    let text = |field: &str| review.get(field).and_then(Value::as_str).unwrap_or("");
    if text("kind") != kind || text("apiVersion") != api_version {
        return Err(ReviewError::WrongKind {
            expected: kind,
            api_version: text("apiVersion").to_owned(),
            kind: text("kind").to_owned(),
        });
    }
    if review
        .pointer("/request/uid")
        .and_then(Value::as_str)
        .is_none()
    {
        return Err(ReviewError::NoRequest);
    }
    Ok(review)
}

/// An `admission.k8s.io/v1` AdmissionReview.
pub fn admission_review(body: &[u8]) -> Result<Value, ReviewError> {
    parse(body, "AdmissionReview", "admission.k8s.io/v1")
}

/// An `apiextensions.k8s.io/v1` ConversionReview.
pub fn conversion_review(body: &[u8]) -> Result<Value, ReviewError> {
    parse(body, "ConversionReview", "apiextensions.k8s.io/v1")
}

fn uid(review: &Value) -> Value {
    review
        .pointer("/request/uid")
        .cloned()
        .unwrap_or(Value::Null)
}

/// What answering an admission request came to.
#[derive(Debug, Clone)]
pub enum AdmissionOutcome {
    /// The hook answered.
    Answered(ValidatingResponse),
    /// The hook could not answer: it failed, timed out or wrote nothing. The message
    /// says which hook and why.
    Failed(String),
}

impl AdmissionOutcome {
    /// The `outcome` label of `operon_webhook_requests_total`: `allowed`, `denied`, or
    /// `error` when the API server gets code 500 (what a binding's enforcement makes of
    /// it is [`super::enforce::Enforced::metric_label`]).
    pub(crate) fn metric_label(&self) -> &'static str {
        match self {
            Self::Answered(answer) if answer.allowed => "allowed",
            Self::Answered(_) => "denied",
            Self::Failed(_) => "error",
        }
    }
}

/// What a hook's run for binding `binding` (mutating or validating) comes to as an
/// answer to `review`: the run's answer, checked; or why there is none.
pub fn admission_outcome(
    hook: &str,
    binding: &str,
    mutating: bool,
    review: &Value,
    output: Result<HookOutput, String>,
) -> AdmissionOutcome {
    let answer = match output {
        Ok(HookOutput {
            validating: Some(answer),
            ..
        }) => answer,
        Ok(_) => {
            return AdmissionOutcome::Failed(format!(
                "hook {hook} gave no answer for binding {binding}"
            ));
        }
        Err(message) => return AdmissionOutcome::Failed(message),
    };
    if mutating {
        return match checked_mutation(review, answer) {
            Ok(answer) => AdmissionOutcome::Answered(answer),
            Err(reason) => {
                AdmissionOutcome::Failed(format!("hook {hook} binding {binding}: {reason}"))
            }
        };
    }
    let mut answer = answer;
    // The API server refuses a patch from a validating webhook; the hook meant to allow
    // or deny, so that answer is kept.
    if answer.patch.take().is_some_and(|p| !p.trim().is_empty()) {
        tracing::warn!(hook = %hook, binding = %binding,
            "a validating binding's answer carried a patch: it was dropped (declare a kubernetesMutating binding to change objects)");
    }
    AdmissionOutcome::Answered(answer)
}

/// The object under review with the answer's patch applied, when the answer allows it
/// and carries a patch that applies (what the API server stores).
pub fn patched_object(review: &Value, answer: &ValidatingResponse) -> Option<Value> {
    let patch: json_patch::Patch = serde_json::from_str(answer.patch.as_deref()?).ok()?;
    let mut object = review.pointer("/request/object")?.clone();
    json_patch::patch(&mut object, &patch).ok()?;
    Some(object)
}

/// Checks a mutating hook's answer against the object under review: its patch must be
/// an RFC 6902 JSON Patch that applies to `request.object`. An empty patch (`[]`) is
/// no patch. A denial keeps no patch: there is nothing to mutate.
pub(crate) fn checked_mutation(
    review: &Value,
    mut answer: ValidatingResponse,
) -> Result<ValidatingResponse, String> {
    let Some(text) = answer.patch.take().filter(|p| !p.trim().is_empty()) else {
        return Ok(answer);
    };
    if !answer.allowed {
        return Ok(answer);
    }
    let patch: json_patch::Patch = serde_json::from_str(&text)
        .map_err(|e| format!("the patch is not an RFC 6902 JSON Patch: {e}"))?;
    if patch.0.is_empty() {
        return Ok(answer);
    }
    let mut object = review
        .pointer("/request/object")
        .cloned()
        .unwrap_or(Value::Null);
    json_patch::patch(&mut object, &patch)
        .map_err(|e| format!("the patch does not apply to the object under review: {e}"))?;
    answer.patch = Some(text);
    Ok(answer)
}

/// The AdmissionReview answering `review`.
pub fn admission_response(review: &Value, outcome: AdmissionOutcome) -> Value {
    let mut response = json!({"uid": uid(review)});
    match outcome {
        AdmissionOutcome::Answered(answer) => {
            response["allowed"] = json!(answer.allowed);
            if !answer.allowed {
                response["status"] = json!({
                    "code": 403,
                    "message": answer.message.unwrap_or_default(),
                });
            }
            if !answer.warnings.is_empty() {
                response["warnings"] = json!(answer.warnings);
            }
            if let Some(patch) = answer.patch.filter(|p| !p.trim().is_empty()) {
                response["patchType"] = json!("JSONPatch");
                response["patch"] =
                    json!(base64::engine::general_purpose::STANDARD.encode(patch.as_bytes()));
            }
        }
        AdmissionOutcome::Failed(message) => {
            response["allowed"] = json!(false);
            response["status"] = json!({"code": 500, "message": message});
        }
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

/// The ConversionReview answering `review`: the hook's objects, or a failure when it
/// failed, said so, or returned a different number of objects than it was given.
pub fn conversion_response(review: &Value, outcome: Result<ConversionResponse, String>) -> Value {
    let asked = review
        .pointer("/request/objects")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let converted = outcome.and_then(|answer| {
        if let Some(message) = answer.failed_message {
            return Err(message);
        }
        if answer.converted_objects.len() != asked {
            return Err(format!(
                "the hook returned {} objects instead of {asked}",
                answer.converted_objects.len()
            ));
        }
        answer
            .converted_objects
            .iter()
            .map(|text| {
                serde_json::from_str::<Value>(text)
                    .map_err(|e| format!("the hook returned an object that is not JSON: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()
    });
    let response = match converted {
        Ok(objects) => json!({
            "uid": uid(review),
            "result": {"status": "Success"},
            "convertedObjects": objects,
        }),
        Err(message) => json!({
            "uid": uid(review),
            "result": {"status": "Failure", "message": message},
            "convertedObjects": [],
        }),
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review() -> Value {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
               "request": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                           "kind": {"group": "", "version": "v1", "kind": "Pod"},
                           "operation": "CREATE", "object": {"metadata": {"name": "x"}}}})
    }

    #[test]
    fn requests_are_checked() {
        let body = serde_json::to_vec(&review()).unwrap();
        assert!(admission_review(&body).is_ok());
        assert!(matches!(
            conversion_review(&body),
            Err(ReviewError::WrongKind { .. })
        ));
        assert!(matches!(
            admission_review(b"{"),
            Err(ReviewError::NotJson(_))
        ));
        let no_request = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#;
        assert_eq!(admission_review(no_request), Err(ReviewError::NoRequest));
    }

    #[test]
    fn admission_answers_have_shell_operators_shape() {
        let denied = admission_response(
            &review(),
            AdmissionOutcome::Answered(ValidatingResponse {
                allowed: false,
                message: Some("no latest tags".into()),
                warnings: vec!["think twice".into()],
                patch: None,
            }),
        );
        assert_eq!(
            denied,
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                   "response": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": false,
                                "status": {"code": 403, "message": "no latest tags"},
                                "warnings": ["think twice"]}})
        );
        let mutated = admission_response(
            &review(),
            AdmissionOutcome::Answered(ValidatingResponse {
                allowed: true,
                message: None,
                warnings: vec![],
                patch: Some(r#"[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]"#.into()),
            }),
        );
        assert_eq!(mutated["response"]["patchType"], "JSONPatch");
        let patch = base64::engine::general_purpose::STANDARD
            .decode(mutated["response"]["patch"].as_str().unwrap())
            .unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&patch).unwrap()[0]["path"],
            "/metadata/labels"
        );
        assert!(mutated["response"].get("status").is_none());
        let failed = admission_response(
            &review(),
            AdmissionOutcome::Failed("hook v.sh gave no answer".into()),
        );
        assert_eq!(
            failed["response"],
            json!({"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": false,
                   "status": {"code": 500, "message": "hook v.sh gave no answer"}})
        );
    }

    #[test]
    fn conversions_keep_the_order_and_the_count() {
        let review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "u1", "desiredAPIVersion": "example.com/v2",
                        "objects": [{"apiVersion": "example.com/v1"}, {"apiVersion": "example.com/v1"}]}});
        let ok = conversion_response(
            &review,
            Ok(ConversionResponse {
                failed_message: None,
                converted_objects: vec![
                    r#"{"apiVersion":"example.com/v2","n":1}"#.into(),
                    r#"{"apiVersion":"example.com/v2","n":2}"#.into(),
                ],
            }),
        );
        assert_eq!(ok["response"]["result"]["status"], "Success");
        assert_eq!(ok["response"]["convertedObjects"][1]["n"], 2);
        let short = conversion_response(
            &review,
            Ok(ConversionResponse {
                failed_message: None,
                converted_objects: vec![r#"{"apiVersion":"example.com/v2"}"#.into()],
            }),
        );
        assert_eq!(
            short["response"]["result"],
            json!({"status": "Failure", "message": "the hook returned 1 objects instead of 2"})
        );
        let refused = conversion_response(
            &review,
            Ok(ConversionResponse {
                failed_message: Some("v1 objects without spec.size cannot be converted".into()),
                converted_objects: vec![],
            }),
        );
        assert_eq!(refused["response"]["result"]["status"], "Failure");
        assert_eq!(refused["response"]["uid"], "u1");
    }
}
