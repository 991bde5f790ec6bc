//! The objects a hook run is about, and typed access to what identifies them.
//!
//! [`HookInput::objects`] yields every object of every binding context, whatever its type
//! (the object of an event, the objects of a synchronization, the snapshots of a schedule
//! or group), and [`ObjectAndFilter::meta`] parses an object's kind and metadata into an
//! [`Object`], from which [`Object::merge_patch`] targets a patch:
//!
//! ```no_run
//! use operon_sdk::{Error, HookInput};
//! use serde_json::json;
//!
//! fn label_all(input: &HookInput) -> Result<(), Error> {
//!     for pod in input.objects() {
//!         if let Some(pod) = pod.meta()? {
//!             pod.merge_patch(json!({"metadata": {"labels": {"seen": "yes"}}})).submit()?;
//!         }
//!     }
//!     Ok(())
//! }
//! # fn main() {}
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::types::{BindingContext, BindingType, HookInput, ObjectAndFilter};
use crate::{Error, Patch};

/// What identifies a Kubernetes object: its type and metadata, the fields a hook needs to
/// choose an object and patch it. Other fields are not parsed.
///
/// ```
/// use operon_sdk::ObjectAndFilter;
///
/// let pod = ObjectAndFilter {
///     object: Some(r#"{"apiVersion": "v1", "kind": "Pod", "spec": {},
///                      "metadata": {"name": "web-0", "namespace": "shop",
///                                   "labels": {"app": "web"}}}"#.into()),
///     filter_result: None,
/// };
/// let pod = pod.meta().unwrap().unwrap();
/// assert_eq!((pod.kind.as_str(), pod.name(), pod.namespace()), ("Pod", "web-0", Some("shop")));
/// assert_eq!(pod.label("app"), Some("web"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Object {
    /// `apiVersion`, e.g. `apps/v1`; empty when the object has none.
    #[serde(default)]
    pub api_version: String,
    /// `kind`, e.g. `Pod`; empty when the object has none.
    #[serde(default)]
    pub kind: String,
    /// `metadata`.
    pub metadata: ObjectMeta,
}

/// The `metadata` of an [`Object`]: the fields hooks match and patch on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// `metadata.name`; every stored object has one.
    pub name: String,
    /// `metadata.namespace`; `None` for cluster-scoped objects.
    #[serde(default)]
    pub namespace: Option<String>,
    /// `metadata.labels`.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// `metadata.uid`; `None` for objects not stored yet (admission of a create).
    #[serde(default)]
    pub uid: Option<String>,
    /// `metadata.resourceVersion`, for optimistic concurrency.
    #[serde(default)]
    pub resource_version: Option<String>,
}

impl Object {
    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// `metadata.namespace`; `None` for cluster-scoped objects.
    pub fn namespace(&self) -> Option<&str> {
        self.metadata.namespace.as_deref()
    }

    /// The value of the label `key`, if the object has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.metadata.labels.get(key).map(String::as_str)
    }

    /// A JSON merge patch of this object, targeted by kind, namespace and name (the host
    /// picks the preferred `apiVersion`; add [`Patch::api_version`] for another one).
    ///
    /// ```
    /// use operon_sdk::{Object, Patch};
    /// use serde_json::json;
    ///
    /// let mut pod = Object { kind: "Pod".into(), ..Object::default() };
    /// pod.metadata.name = "web-0".into();
    /// pod.metadata.namespace = Some("shop".into());
    /// let patch = json!({"metadata": {"labels": {"seen": "yes"}}});
    /// assert_eq!(pod.merge_patch(patch.clone()), Patch::merge("Pod", Some("shop"), "web-0", patch));
    /// ```
    pub fn merge_patch(&self, patch: Value) -> Patch {
        Patch::merge(&self.kind, self.namespace(), self.name(), patch)
    }

    /// A JSON Patch (RFC 6902) of this object, targeted like [`merge_patch`](Self::merge_patch).
    pub fn json_patch(&self, operations: Value) -> Patch {
        Patch::json_patch(&self.kind, self.namespace(), self.name(), operations)
    }
}

impl ObjectAndFilter {
    /// The object's kind and metadata; `None` when the binding drops full objects.
    ///
    /// ```
    /// let filtered_only = operon_sdk::ObjectAndFilter { object: None, filter_result: None };
    /// assert_eq!(filtered_only.meta().unwrap(), None);
    /// ```
    pub fn meta(&self) -> Result<Option<Object>, Error> {
        self.object_as()
    }

    /// The full object deserialized as `T` (any serde type, e.g. your own struct with the
    /// fields you read); `None` when the binding drops full objects.
    ///
    /// ```
    /// #[derive(serde::Deserialize)]
    /// struct Replicas { spec: Spec }
    /// #[derive(serde::Deserialize)]
    /// struct Spec { replicas: u32 }
    ///
    /// let deployment = operon_sdk::ObjectAndFilter {
    ///     object: Some(r#"{"spec": {"replicas": 3}}"#.into()),
    ///     filter_result: None,
    /// };
    /// let parsed: Replicas = deployment.object_as().unwrap().unwrap();
    /// assert_eq!(parsed.spec.replicas, 3);
    /// ```
    pub fn object_as<T: DeserializeOwned>(&self) -> Result<Option<T>, Error> {
        self.object
            .as_deref()
            .map(|json| {
                serde_json::from_str(json).map_err(|err| {
                    Error::new(format_args!("the host sent an invalid object: {err}"))
                })
            })
            .transpose()
    }
}

impl BindingContext {
    /// Every object this context is about, whatever its type: the object of an `event`,
    /// every object of a `synchronization`, and for the other types (`schedule`, `group`,
    /// admission and startup contexts) the objects of its snapshots, in snapshot order.
    ///
    /// ```
    /// use operon_sdk::{BindingContext, BindingType, ObjectAndFilter, Snapshot};
    ///
    /// let pod = ObjectAndFilter { object: Some("{}".into()), filter_result: None };
    /// let resync = BindingContext {
    ///     binding: "resync".into(),
    ///     type_: BindingType::Schedule,
    ///     group: None,
    ///     watch_event: None,
    ///     object: None,
    ///     objects: Vec::new(),
    ///     snapshots: vec![Snapshot { binding: "pods".into(), objects: vec![pod.clone()] }],
    ///     review: None,
    /// };
    /// assert_eq!(resync.objects().collect::<Vec<_>>(), [&pod]);
    /// ```
    pub fn objects(&self) -> Box<dyn Iterator<Item = &ObjectAndFilter> + '_> {
        match self.type_ {
            BindingType::Event | BindingType::Synchronization => Box::new(self.objects_reported()),
            _ => Box::new(self.snapshots.iter().flat_map(|snapshot| &snapshot.objects)),
        }
    }
}

impl HookInput {
    /// Every object this run is about: [`BindingContext::objects`] of each context, oldest
    /// context first.
    ///
    /// ```
    /// assert_eq!(operon_sdk::HookInput::default().objects().count(), 0);
    /// ```
    pub fn objects(&self) -> impl Iterator<Item = &ObjectAndFilter> {
        self.binding_contexts
            .iter()
            .flat_map(BindingContext::objects)
    }
}
