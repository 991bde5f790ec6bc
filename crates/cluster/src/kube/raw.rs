//! Objects of any kind as the watcher receives them, decoded once, straight into JSON.
//!
//! kube's `DynamicObject` decodes `metadata` into the typed `ObjectMeta` (managed
//! fields, owner references, timestamps...), which the watch then had to turn back into
//! JSON for the bindings: for a Pod, most of the time a watch event cost. A
//! [`RawObject`] keeps the object as the API server sent it and copies out the one
//! field the watcher itself reads, `metadata.resourceVersion`, which it resumes from.

use ::kube::api::{ApiResource, ObjectMeta};
use ::kube::core::{DynamicResourceScope, Resource};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::borrow::Cow;

/// An object of the kind an [`ApiResource`] names, as JSON.
#[derive(Clone, Debug)]
pub(super) struct RawObject {
    /// Only `resourceVersion` is filled in: what kube-runtime's watcher reads.
    metadata: ObjectMeta,
    /// The object, unchanged.
    pub(super) value: Value,
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let resource_version = value
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_owned);
        Ok(Self {
            metadata: ObjectMeta {
                resource_version,
                ..ObjectMeta::default()
            },
            value,
        })
    }
}

impl Resource for RawObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_object_is_kept_as_sent_with_its_resource_version_for_the_watcher() {
        let sent = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "demo", "resourceVersion": "42",
                         "creationTimestamp": "2026-01-02T03:04:05.678Z",
                         "managedFields": [{"manager": "kubectl", "operation": "Update",
                                            "fieldsType": "FieldsV1", "fieldsV1": {"f:x": {}}}],
                         "futureField": {"kept": true}},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]},
        });
        let raw: RawObject = serde_json::from_value(sent.clone()).unwrap();
        assert_eq!(raw.value, sent);
        assert_eq!(raw.meta().resource_version.as_deref(), Some("42"));
        let bare: RawObject = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
        assert_eq!(bare.meta().resource_version, None);
    }
}
