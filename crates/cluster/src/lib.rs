//! The `Cluster` abstraction the hook engine, the runners and the controllers talk to:
//! resolve a kind, list and watch objects with selectors, get one object, apply a patch
//! operation.
//!
//! Two implementations: `local` (in-memory objects loaded from YAML fixtures; used by
//! `operon hook test` / `operon hook run`, a product feature, not a test double) and,
//! `kube` (kube-rs, a real API server). The trait is kept narrow so the kube implementation is thin.
//! Objects travel as `serde_json::Value`: hooks see them as JSON anyway.
//!
//! This crate must not know what a hook, a binding or a Diagnosis is: it moves objects
//! and applies patch operations ([`operon_data::model::PatchOperation`]); what a binding
//! does with the objects stays in the hook engine.

#![warn(unreachable_pub)]

pub mod kube;
mod listed;
pub mod local;

pub use listed::{IntoIter as ListedObjects, Listed};

use futures::future::BoxFuture;
use operon_data::model::{FieldRequirement, LabelSelector, WatchEvent};
use operon_data::model::{ObjectRef, PatchOperation, PatchSpec};
use serde_json::Value;
use std::sync::Arc;

/// A resolved resource type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resource {
    /// API group; empty for the core group.
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// The kind, e.g. `Pod`.
    pub kind: String,
    /// The plural resource name, e.g. `pods`.
    pub plural: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
}

impl Resource {
    /// Whether `name` (the kind, the plural or one of `aliases`, any case) names this
    /// type: how `kubectl` and both clusters resolve what a user writes.
    pub fn answers_to(&self, name: &str, aliases: &[String]) -> bool {
        self.kind.eq_ignore_ascii_case(name)
            || self.plural.eq_ignore_ascii_case(name)
            || aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
    }

    /// `apiVersion` as written in objects: `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// Which objects of a resource a list or watch returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector {
    /// Only these namespaces; `None` means all (ignored for cluster-scoped resources).
    pub namespaces: Option<Vec<String>>,
    /// Only objects with one of these names.
    pub names: Option<Vec<String>>,
    /// Only objects whose labels match.
    pub labels: Option<LabelSelector>,
    /// Only objects whose fields match.
    pub fields: Vec<FieldRequirement>,
}

/// One change seen by a watch.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// What happened.
    pub kind: WatchEvent,
    /// The object after the change (before it, for `Deleted`). Shared: every binding
    /// reading the same watch, and the in-memory cluster's store, hold the same one.
    pub object: Arc<Value>,
    /// Set on a `Deleted` noticed by a re-list rather than seen (client-go's
    /// `DeletedFinalStateUnknown`): which object went. A watch keeps only the
    /// [`Identity`] of the objects it saw, not their names, so `object` then holds only
    /// `apiVersion` and `kind`; the reader's last known state of the object is the one
    /// to report.
    pub deleted_final_state_unknown: Option<Identity>,
    /// When the cluster layer had the event (decoded from the watch, or the change
    /// made in memory): where a reader's handling time starts
    /// (`operon_kube_event_duration_seconds`).
    pub received: std::time::Instant,
}

/// An object's identity (namespace and name) as a hash: what a watch keeps per object
/// to tell which objects a re-list no longer has, in one word rather than the names.
/// Keyed once per process with random keys, so names cannot be chosen to collide; two
/// objects of one watch share an identity with a probability of about n²/2⁶⁵ (10⁻¹⁰ for
/// 100,000 objects).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Identity(u64);

impl Identity {
    /// The identity of the object `name` in `namespace` (empty for cluster-scoped
    /// objects).
    pub fn of(namespace: &str, name: &str) -> Self {
        static KEYS: std::sync::OnceLock<std::hash::RandomState> = std::sync::OnceLock::new();
        Self(std::hash::BuildHasher::hash_one(
            KEYS.get_or_init(std::hash::RandomState::new),
            (namespace, name),
        ))
    }

    /// The identity of `object`, from its `metadata`.
    pub fn of_object(object: &Value) -> Self {
        let (namespace, name) = namespace_and_name(object);
        Self::of(namespace, name)
    }
}

/// `metadata.namespace` (empty for cluster-scoped objects) and `metadata.name` of an
/// object; empty where missing.
pub fn namespace_and_name(object: &Value) -> (&str, &str) {
    let text = |field: &str| {
        object
            .get("metadata")
            .and_then(|metadata| metadata.get(field))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    (text("namespace"), text("name"))
}

/// Why a cluster call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// The kind (or apiVersion) is unknown to the cluster.
    #[error("unknown kind {kind:?}{}", api_version.as_deref().map(|v| format!(" in {v}")).unwrap_or_default())]
    UnknownKind {
        /// The kind as given.
        kind: String,
        /// The apiVersion as given.
        api_version: Option<String>,
    },
    /// The object does not exist.
    #[error("{kind} {} not found", namespaced_name(namespace.as_deref(), name))]
    NotFound {
        /// The kind.
        kind: String,
        /// The namespace.
        namespace: Option<String>,
        /// The name.
        name: String,
    },
    /// `Create` of an object that exists.
    #[error("{kind} {} already exists", namespaced_name(namespace.as_deref(), name))]
    AlreadyExists {
        /// The kind.
        kind: String,
        /// The namespace.
        namespace: Option<String>,
        /// The name.
        name: String,
    },
    /// The operation or object is malformed (bad JSON patch, a jq filter that does
    /// not compile or does not yield one object, an object without a name...).
    #[error("invalid {what}: {reason}")]
    Invalid {
        /// What is invalid.
        what: String,
        /// Why.
        reason: String,
    },
    /// The Kubernetes client's call failed: the API server refused it (with a status
    /// other than a malformed request's), or no answer came (no connection, a timeout,
    /// a body that does not decode).
    // The client's error is in the message, not a `source`: printed as a chain (the
    // CLI's `{:#}`) it would appear twice. It stays typed for callers that match it.
    #[error("{what}: {}", client_message(error.get()))]
    Client {
        /// The call, e.g. `get Pod default/web`.
        what: String,
        /// The client's error.
        error: Shared<::kube::Error>,
    },
    /// The client could not build a request (a name or body it refuses).
    #[error("{context}: {error}")]
    BuildRequest {
        /// The call and the step, e.g. `Create ConfigMap default/a: building the request`.
        context: String,
        /// The client's error (in the message, as for `Client`).
        error: Shared<::kube::core::request::Error>,
    },
    /// A write kept conflicting with other writers (409 Conflict) until it gave up.
    #[error("{what}: still conflicting after {attempts} attempts: {error}")]
    StillConflicting {
        /// The write.
        what: String,
        /// How many times it was sent.
        attempts: u32,
        /// The last conflict (in the message, as for `Client`).
        error: Shared<::kube::Error>,
    },
    /// A `JQPatch` whose object kept changing while its filter ran, until it gave up.
    #[error("{what}: the object changed while the filter ran, {attempts} times in a row")]
    ChangedWhileFiltering {
        /// The patch.
        what: String,
        /// How many times the filter ran.
        attempts: usize,
    },
    /// A foreground deletion whose object was still there when the wait ended.
    #[error(
        "{what}: the object still exists {}s after a foreground deletion (dependents or finalizers left)",
        waited.as_secs()
    )]
    StillExists {
        /// The deletion.
        what: String,
        /// How long it waited.
        waited: std::time::Duration,
    },
    /// A watch stopped before it delivered its first list.
    #[error("the watch ended before its list")]
    WatchEnded(#[source] tokio::sync::oneshot::error::RecvError),
    /// A patch operation its sender's permissions do not grant.
    #[error("not permitted: {subject} may not {operation} {object}: {reason}")]
    NotPermitted {
        /// Who sent it, e.g. `Hook demo/labeler`.
        subject: String,
        /// The operation, e.g. `MergePatch`.
        operation: String,
        /// The object, e.g. `Pod demo/web`.
        object: String,
        /// What the permissions lack.
        reason: String,
    },
}

/// A client error kept as the source of a [`ClusterError`]: shared, so the error stays
/// `Clone` (a watch's failure reaches every binding waiting for its list), and equal
/// only to itself, since the client's errors cannot be compared. It displays as the
/// error it holds and has that error's sources.
#[derive(Debug)]
pub struct Shared<E>(Arc<E>);

impl<E> Shared<E> {
    /// Keeps `error`.
    pub fn new(error: E) -> Self {
        Self(Arc::new(error))
    }

    /// The error kept.
    pub fn get(&self) -> &E {
        &self.0
    }
}

impl<E> Clone for Shared<E> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<E> PartialEq for Shared<E> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<E> Eq for Shared<E> {}

impl<E: std::fmt::Display> std::fmt::Display for Shared<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<E: std::error::Error> std::error::Error for Shared<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// What a client error says after the call's name: an API server's refusal with its
/// code, reason and message, anything else as the client words it.
fn client_message(error: &::kube::Error) -> String {
    match error {
        ::kube::Error::Api(status) => {
            let message = if status.message.is_empty() {
                &status.reason
            } else {
                &status.message
            };
            format!(
                "the API server answered {} {}: {message}",
                status.code, status.reason
            )
        }
        other => other.to_string(),
    }
}

/// `Kind namespace/name` (or `Kind name`) for messages.
pub fn describe_ref(target: &ObjectRef) -> String {
    format!(
        "{} {}",
        target.kind,
        namespaced_name(
            target.namespace.as_deref().filter(|n| !n.is_empty()),
            &target.name
        )
    )
}

/// The document of a `MergePatch`, or why it is not one.
pub(crate) fn merge_patch_document(spec: &PatchSpec) -> Result<Value, ClusterError> {
    serde_json::from_str(&spec.patch).map_err(|e| ClusterError::Invalid {
        what: format!("MergePatch of {}", describe_ref(&spec.target)),
        reason: format!("the patch is not JSON: {e}"),
    })
}

/// The operations of a `JSONPatch`, or why they are not RFC 6902 operations.
pub(crate) fn json_patch_document(spec: &PatchSpec) -> Result<json_patch::Patch, ClusterError> {
    serde_json::from_str(&spec.patch).map_err(|e| ClusterError::Invalid {
        what: format!("JSONPatch of {}", describe_ref(&spec.target)),
        reason: format!("the patch is not an array of RFC 6902 operations: {e}"),
    })
}

pub use operon_data::model::split_api_version;

/// `namespace/name`, or `name` for cluster-scoped objects.
pub fn namespaced_name(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    }
}

/// A stream of watch events; dropped to stop watching.
pub type EventStream = tokio::sync::mpsc::UnboundedReceiver<Event>;

/// What the hook engine needs from a Kubernetes cluster.
pub trait Cluster: Send + Sync {
    /// Resolves a kind (case-insensitive; a plural or short name is accepted too) and an
    /// optional `apiVersion` to a resource. Asynchronous because a real API server is
    /// asked through discovery, again when a kind is unknown (a CRD created after start).
    fn resolve<'a>(
        &'a self,
        api_version: Option<&'a str>,
        kind: &'a str,
    ) -> BoxFuture<'a, Result<Resource, ClusterError>>;

    /// Lists the matching objects, sorted by namespace then name, and starts watching
    /// them: the stream carries every change after the list, in order. The listed
    /// objects decode as they are taken (see [`Listed`]).
    fn list_and_watch<'a>(
        &'a self,
        resource: &'a Resource,
        selector: &'a Selector,
    ) -> BoxFuture<'a, Result<(Listed, EventStream), ClusterError>>;

    /// Gets one object (`namespace` is ignored for cluster-scoped resources).
    fn get<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, ClusterError>>;

    /// Applies one patch operation, shell-operator style.
    fn apply<'a>(
        &'a self,
        operation: &'a PatchOperation,
    ) -> BoxFuture<'a, Result<(), ClusterError>>;
}

#[cfg(test)]
mod identity_tests {
    use super::Identity;
    use serde_json::json;

    #[test]
    fn an_identity_is_its_namespace_and_name_and_nothing_else() {
        let object = json!({"metadata": {"namespace": "a", "name": "b", "uid": "1"}});
        assert_eq!(Identity::of_object(&object), Identity::of("a", "b"));
        assert_ne!(Identity::of("a", "b"), Identity::of("b", "a"));
        // Where the namespace ends is part of it.
        assert_ne!(Identity::of("a", "b-c"), Identity::of("a-b", "c"));
        assert_ne!(Identity::of("", "ab"), Identity::of("a", "b"));
        // A cluster-scoped object: no namespace.
        let node = json!({"metadata": {"name": "n1"}});
        assert_eq!(Identity::of_object(&node), Identity::of("", "n1"));
    }
}
