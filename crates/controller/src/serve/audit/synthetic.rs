//! The AdmissionReview an audit sends a validating binding for an object that exists:
//! the request the API server would send if the object were created now, as a dry run.
//!
//! Its shape is the API server's, field for field, so that a hook needs no audit mode:
//! `operation: CREATE` with the object as listed (its `metadata.uid`, `resourceVersion`
//! and `status` included) and no `oldObject`; `kind`, `resource` and their `request*`
//! twins from the resource the object was listed through; `namespace` for a namespaced
//! object; `dryRun: true` with `CreateOptions` saying so, since nothing the review
//! decides is stored (a hook with `sideEffects: NoneOnDryRun` must then change
//! nothing); `userInfo.username` [`AUDIT_USER`], so that a hook can tell an audit from a
//! person; and a fresh `uid` per review.

use super::targets::AUDITED_OPERATION;
use operon_cluster::Resource;
use serde_json::{Value, json};

/// The user an audit review names.
pub const AUDIT_USER: &str = "operon:audit";

/// The review of `object`, of type `resource`, with the request uid `uid`.
pub fn review(resource: &Resource, object: &Value, uid: &str) -> Value {
    let kind = json!({
        "group": resource.group,
        "version": resource.version,
        "kind": resource.kind,
    });
    let plural = json!({
        "group": resource.group,
        "version": resource.version,
        "resource": resource.plural,
    });
    let (namespace, name) = operon_cluster::namespace_and_name(object);
    let mut request = json!({
        "uid": uid,
        "kind": kind,
        "resource": plural,
        "requestKind": kind,
        "requestResource": plural,
        "name": name,
        "operation": AUDITED_OPERATION,
        "userInfo": {"username": AUDIT_USER},
        "object": object,
        "oldObject": null,
        "dryRun": true,
        "options": {
            "apiVersion": "meta.k8s.io/v1",
            "kind": "CreateOptions",
            "dryRun": ["All"],
        },
    });
    if resource.namespaced {
        request["namespace"] = json!(namespace);
    }
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request,
    })
}

/// A fresh request uid (a random version 4 UUID, as the API server's).
pub fn new_uid() -> String {
    let mut bytes = [0u8; 16];
    // Without randomness the uid still differs per review: it only has to tell
    // requests apart in logs.
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = jiff::Timestamp::now().as_nanosecond();
        bytes = nanos.to_be_bytes();
    }
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .hyphenated()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(kind: &str, plural: &str, namespaced: bool) -> Resource {
        Resource {
            group: String::new(),
            version: "v1".into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
        }
    }

    #[test]
    fn a_review_is_a_dry_run_create_of_the_object_as_listed() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u-1", "resourceVersion": "7"},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            "status": {"phase": "Running"}});
        let review = review(&resource("Pod", "pods", true), &pod, "r-1");
        let kind = json!({"group": "", "version": "v1", "kind": "Pod"});
        let plural = json!({"group": "", "version": "v1", "resource": "pods"});
        assert_eq!(
            review,
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {
                    "uid": "r-1", "kind": kind, "resource": plural,
                    "requestKind": kind, "requestResource": plural,
                    "name": "web", "namespace": "shop", "operation": "CREATE",
                    "userInfo": {"username": "operon:audit"},
                    "object": pod, "oldObject": null, "dryRun": true,
                    "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions",
                                "dryRun": ["All"]}}})
        );
        // What the webhook server checks of any review it answers.
        crate::serve::webhook::review::admission_review(review.to_string().as_bytes()).unwrap();
    }

    #[test]
    fn a_cluster_scoped_object_has_no_namespace() {
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}});
        let review = review(
            &resource("Namespace", "namespaces", false),
            &namespace,
            "r-2",
        );
        assert!(review["request"].get("namespace").is_none());
        assert_eq!(review["request"]["name"], "shop");
        assert_eq!(review["request"]["resource"]["resource"], "namespaces");
    }

    #[test]
    fn every_review_has_a_uid_of_its_own() {
        let (a, b) = (new_uid(), new_uid());
        assert_ne!(a, b);
        let parsed = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
        assert_eq!(a.len(), 36);
    }
}
