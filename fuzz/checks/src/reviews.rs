//! Request bodies from the network: AdmissionReview and ConversionReview (the hook
//! webhooks), Operon's own admission webhook, and Alertmanager's notifications. The
//! first byte picks the endpoint.
//!
//! Beyond not panicking: a review that parses keeps its uid; Operon's own webhook
//! answers every review with a response carrying the request's uid, and a denial names
//! the object and lists its problems; the alerts of an Alertmanager body that parses,
//! posted again as a JSON array, read the same.

use operon_controller::serve::webhook::{own, review};
use operon_pipeline::triggers::AlertPost;
use serde_json::Value;

/// Checks one input; panics on a finding.
pub fn check(data: &[u8]) {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => {
            if let Ok(parsed) = review::admission_review(body) {
                assert!(parsed.pointer("/request/uid").is_some_and(Value::is_string));
            }
        }
        1 => {
            if let Ok(parsed) = review::conversion_review(body) {
                assert!(parsed.pointer("/request/uid").is_some_and(Value::is_string));
            }
        }
        2 => {
            let Ok(parsed) = review::admission_review(body) else {
                return;
            };
            let answer = own::answer(&parsed, None);
            assert_eq!(
                answer.pointer("/response/uid"),
                parsed.pointer("/request/uid"),
                "{answer}"
            );
            match answer.pointer("/response/allowed") {
                Some(Value::Bool(true)) => {}
                Some(Value::Bool(false)) => {
                    let message = answer
                        .pointer("/response/status/message")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    assert!(message.contains('/'), "a denial names Kind/name: {message}");
                    assert!(
                        message.contains("\n- "),
                        "a denial lists problems: {message}"
                    );
                }
                other => panic!("response.allowed is {other:?}"),
            }
        }
        _ => {
            if let Ok(post) = AlertPost::parse(body) {
                // The alerts, posted again as Prometheus posts them, read the same.
                let again = serde_json::to_vec(post.alerts()).expect("alerts serialize");
                let reread = AlertPost::parse(&again)
                    .unwrap_or_else(|e| panic!("alerts do not read again: {e}"));
                assert_eq!(reread.alerts(), post.alerts());
            }
        }
    }
}
