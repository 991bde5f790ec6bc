//! The objects one kubernetes binding holds: per object, what the hook sees of it (the
//! filter result, and the full object only with `keepFullObjectsInMemory: true`; a hash
//! of the object when it sees neither), which is also what decides whether an event
//! changed anything, under a compact key that sorts as snapshots are sorted (namespace,
//! then name). Also counts the bytes it holds, for `operon_kube_snapshot_bytes`.

use crate::context;
use operon_cluster::{Identity, namespace_and_name};
use operon_data::model::ObjectAndFilter;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// `namespace` NUL `name`: one allocation, and NUL sorts before every character a
/// namespace may hold, so the order is (namespace, name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ObjectKey(Box<str>);

impl ObjectKey {
    /// The key of `object` (empty namespace for cluster-scoped objects).
    pub(crate) fn of(object: &Value) -> Self {
        let (namespace, name) = namespace_and_name(object);
        Self(format!("{namespace}\0{name}").into_boxed_str())
    }

    /// `metadata.namespace`.
    pub(crate) fn namespace(&self) -> &str {
        self.0.split_once('\0').map_or("", |(ns, _)| ns)
    }

    /// `metadata.name`.
    pub(crate) fn name(&self) -> &str {
        self.0.split_once('\0').map_or(&*self.0, |(_, name)| name)
    }
}

/// One object: what the hook sees of it. An object's text is shared with the contexts
/// that show it ([`ObjectAndFilter`] holds the same `Arc`), so a queued Synchronization
/// run, or each run's `snapshots`, costs a pointer per object and not a copy. A filter
/// result alone stays boxed to its length: it is small, and an `Arc`'s two counts
/// would cost more per watched object than the copy a context makes of it. Three
/// words: a binding of a whole cluster holds one per object.
#[derive(Debug, Clone)]
pub(crate) enum Stored {
    /// The filter result alone (a jqFilter, `keepFullObjectsInMemory: false`).
    Filtered(Box<str>),
    /// The object alone (no jqFilter).
    Object(Arc<str>),
    /// The object and the filter result, boxed so the common cases stay small.
    Both(Box<(Arc<str>, Arc<str>)>),
    /// Neither (no jqFilter, `keepFullObjectsInMemory: false`): a hash of the object's
    /// JSON, which is all an event needs to be compared with.
    Checksum(u64),
}

impl Stored {
    /// What a binding keeps of `object`: `filter_outputs` and `keep_full_object` as
    /// [`context::object_and_filter`] takes them, each text written once in the form
    /// it is kept in.
    pub(crate) fn of(
        object: &Value,
        filter_outputs: Option<&[Value]>,
        keep_full_object: bool,
    ) -> Self {
        match (keep_full_object, filter_outputs) {
            (false, Some(outputs)) => Self::Filtered(context::filter_text(outputs, context::boxed)),
            (true, None) => Self::Object(context::compact_text(object, context::shared)),
            (true, Some(outputs)) => Self::Both(Box::new((
                context::compact_text(object, context::shared),
                context::filter_text(outputs, context::shared),
            ))),
            (false, None) => Self::Checksum(checksum(object)),
        }
    }

    /// What a binding keeps of `object`, given what the hook sees of it.
    #[cfg(test)]
    fn new(item: ObjectAndFilter, object: &Value) -> Self {
        match (item.object, item.filter_result) {
            (None, Some(filtered)) => Self::Filtered(Box::from(&*filtered)),
            (Some(object), None) => Self::Object(object),
            (Some(object), Some(filtered)) => Self::Both(Box::new((object, filtered))),
            (None, None) => Self::Checksum(checksum(object)),
        }
    }

    /// Whether the hook sees the same in both: the filter result when there is one,
    /// otherwise the object (as shell-operator compares the checksum of the filter
    /// result, or of the object without a filter). An Added or Modified event that
    /// changes nothing the hook sees runs nothing.
    pub(crate) fn shows_the_same(&self, other: &Stored) -> bool {
        self.shown() == other.shown()
    }

    /// The text the hook is shown (or the hash standing in for it).
    fn shown(&self) -> Result<&str, u64> {
        match self {
            Self::Checksum(sum) => Err(*sum),
            _ => Ok(self
                .filter_result()
                .or(self.object().map(|t| &**t))
                .unwrap_or_default()),
        }
    }

    fn object(&self) -> Option<&Arc<str>> {
        match self {
            Self::Object(text) => Some(text),
            Self::Both(texts) => Some(&texts.0),
            Self::Filtered(_) | Self::Checksum(_) => None,
        }
    }

    fn filter_result(&self) -> Option<&str> {
        match self {
            Self::Filtered(text) => Some(text),
            Self::Both(texts) => Some(&texts.1),
            Self::Object(_) | Self::Checksum(_) => None,
        }
    }

    /// What the hook sees, sharing the texts.
    pub(crate) fn item(&self) -> ObjectAndFilter {
        ObjectAndFilter {
            object: self.object().cloned(),
            filter_result: match self {
                Self::Both(texts) => Some(texts.1.clone()),
                _ => self.filter_result().map(Arc::from),
            },
        }
    }

    /// What the hook sees.
    pub(crate) fn into_item(self) -> ObjectAndFilter {
        match self {
            Self::Filtered(text) => ObjectAndFilter {
                object: None,
                filter_result: Some(text.into()),
            },
            Self::Object(text) => ObjectAndFilter {
                object: Some(text),
                filter_result: None,
            },
            Self::Both(texts) => {
                let (object, filtered) = *texts;
                ObjectAndFilter {
                    object: Some(object),
                    filter_result: Some(filtered),
                }
            }
            Self::Checksum(_) => ObjectAndFilter {
                object: None,
                filter_result: None,
            },
        }
    }

    /// The bytes it keeps besides itself: each text, with an `Arc`'s two counts for a
    /// shared one, whether or not a context shares it at the moment.
    fn heap_bytes(&self) -> usize {
        let counts = 2 * size_of::<usize>();
        match self {
            Self::Filtered(text) => text.len(),
            Self::Object(text) => text.len() + counts,
            Self::Both(texts) => {
                size_of::<(Arc<str>, Arc<str>)>() + texts.0.len() + texts.1.len() + 2 * counts
            }
            Self::Checksum(_) => 0,
        }
    }
}

/// A hash of an object's JSON, for an object kept neither whole nor filtered.
fn checksum(value: &Value) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.to_string().hash(&mut hasher);
    hasher.finish()
}

/// The objects of one binding.
#[derive(Debug, Default)]
pub(crate) struct BindingObjects {
    objects: BTreeMap<ObjectKey, Stored>,
    bytes: usize,
}

/// The map entry and the key's text.
fn bytes_of_key(key: &ObjectKey) -> usize {
    std::mem::size_of::<(ObjectKey, Stored)>() + key.0.len()
}

fn bytes_of(key: &ObjectKey, stored: &Stored) -> usize {
    bytes_of_key(key) + stored.heap_bytes()
}

impl BindingObjects {
    /// The objects of a list, built in one pass (the map's nodes come out full).
    pub(crate) fn from_list(objects: impl IntoIterator<Item = (ObjectKey, Stored)>) -> Self {
        let mut list: Vec<(ObjectKey, Stored)> = objects.into_iter().collect();
        list.sort_by(|a, b| a.0.cmp(&b.0));
        // A list never holds one object twice; if a cluster sent one, the last wins.
        list.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                std::mem::swap(later, earlier);
            }
            same
        });
        let bytes = list.iter().map(|(k, s)| bytes_of(k, s)).sum();
        Self {
            objects: list.into_iter().collect(),
            bytes,
        }
    }

    /// Stores `stored` under `key`; returns what was there.
    pub(crate) fn insert(&mut self, key: ObjectKey, stored: Stored) -> Option<Stored> {
        // The key's share is the same before and after: counted once, for a new object.
        let key_bytes = bytes_of_key(&key);
        self.bytes += stored.heap_bytes();
        let before = self.objects.insert(key, stored);
        match &before {
            Some(before) => self.bytes -= before.heap_bytes(),
            None => self.bytes += key_bytes,
        }
        before
    }

    /// The object under `key`, if there is one.
    pub(crate) fn get(&self, key: &ObjectKey) -> Option<&Stored> {
        self.objects.get(key)
    }

    /// Removes the object under `key`.
    pub(crate) fn remove(&mut self, key: &ObjectKey) -> Option<Stored> {
        let removed = self.objects.remove(key)?;
        self.bytes -= bytes_of(key, &removed);
        Some(removed)
    }

    /// Removes the object whose [`Identity`] is `identity` (a deletion the cluster layer
    /// noticed by a re-list, knowing no name). Looks at every key: such deletions are
    /// rare, and keeping each identity beside its key would cost a word per object.
    pub(crate) fn remove_identity(&mut self, identity: Identity) -> Option<Stored> {
        let key = self
            .objects
            .keys()
            .find(|key| Identity::of(key.namespace(), key.name()) == identity)?
            .clone();
        self.remove(&key)
    }

    /// How many objects.
    pub(crate) fn len(&self) -> usize {
        self.objects.len()
    }

    /// Bytes held: keys, texts, and the map entries themselves.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Every object with its key, sorted by namespace then name.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&ObjectKey, &Stored)> {
        self.objects.iter()
    }

    /// What the hook sees, sorted by namespace then name, sharing the texts.
    pub(crate) fn items(&self) -> impl Iterator<Item = ObjectAndFilter> + '_ {
        self.objects.values().map(Stored::item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored(text: &str) -> Stored {
        Stored::Filtered(text.into())
    }

    fn kept(object: Option<&str>, filter_result: Option<&str>, of: &Value) -> Stored {
        let item = ObjectAndFilter {
            object: object.map(Arc::from),
            filter_result: filter_result.map(Arc::from),
        };
        Stored::new(item, of)
    }

    fn key(ns: &str, name: &str) -> ObjectKey {
        ObjectKey::of(&json!({"metadata": {"namespace": ns, "name": name}}))
    }

    #[test]
    fn keys_sort_by_namespace_then_name() {
        // "a-b" > "a" as namespaces, although '-' sorts before '/'.
        let mut keys = [key("a-b", "x"), key("a", "y"), key("", "z"), key("a", "b")];
        keys.sort();
        let pairs: Vec<(&str, &str)> = keys.iter().map(|k| (k.namespace(), k.name())).collect();
        assert_eq!(pairs, [("", "z"), ("a", "b"), ("a", "y"), ("a-b", "x")]);
    }

    #[test]
    fn bytes_follow_inserts_and_removals() {
        let mut objects = BindingObjects::from_list([(key("a", "x"), stored("1"))]);
        let one = objects.bytes();
        assert!(one > 0);
        objects.insert(key("a", "y"), stored("2"));
        objects.insert(key("a", "y"), stored("22"));
        objects.remove(&key("a", "x"));
        let expected = BindingObjects::from_list([(key("a", "y"), stored("22"))]).bytes();
        assert_eq!(objects.bytes(), expected);
        assert_eq!(objects.len(), 1);
    }

    #[test]
    fn what_is_kept_comes_back_as_the_hook_sees_it() {
        let pod = json!({"metadata": {"name": "a"}});
        for (object, filter_result) in [
            (None, Some("1")),
            (Some("{}"), None),
            (Some("{}"), Some("1")),
            (None, None),
        ] {
            let stored = kept(object, filter_result, &pod);
            let expected = ObjectAndFilter {
                object: object.map(Arc::from),
                filter_result: filter_result.map(Arc::from),
            };
            assert_eq!(stored.item(), expected);
            assert_eq!(stored.into_item(), expected);
        }
    }

    #[test]
    fn a_change_counts_only_in_what_the_hook_is_shown() {
        let a = json!({"metadata": {"name": "a"}});
        let b = json!({"metadata": {"name": "b"}});
        // With a filter, only its result counts, even when the object is kept too.
        assert!(kept(Some("{1}"), Some("x"), &a).shows_the_same(&kept(Some("{2}"), Some("x"), &b)));
        assert!(!kept(Some("{1}"), Some("x"), &a).shows_the_same(&kept(
            Some("{1}"),
            Some("y"),
            &a
        )));
        assert!(kept(None, Some("x"), &a).shows_the_same(&kept(None, Some("x"), &b)));
        assert!(!kept(Some("{1}"), None, &a).shows_the_same(&kept(Some("{2}"), None, &a)));
        // Neither kept: the object itself, through its hash.
        assert!(kept(None, None, &a).shows_the_same(&kept(None, None, &a.clone())));
        assert!(!kept(None, None, &a).shows_the_same(&kept(None, None, &b)));
    }

    #[test]
    fn a_filter_result_alone_is_kept_in_three_words() {
        assert_eq!(std::mem::size_of::<Stored>(), 24);
    }

    #[test]
    fn an_object_known_only_by_identity_is_found_and_removed() {
        let mut objects =
            BindingObjects::from_list([(key("a", "x"), stored("1")), (key("b", "x"), stored("2"))]);
        let removed = objects.remove_identity(Identity::of("b", "x"));
        assert_eq!(
            removed
                .map(Stored::into_item)
                .and_then(|i| i.filter_result)
                .as_deref(),
            Some("2")
        );
        assert!(objects.remove_identity(Identity::of("b", "x")).is_none());
        assert_eq!(objects.len(), 1);
        assert_eq!(
            objects.bytes(),
            BindingObjects::from_list([(key("a", "x"), stored("1"))]).bytes()
        );
    }
}
