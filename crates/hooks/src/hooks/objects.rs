//! The objects one kubernetes binding holds: per object, what the hook sees of it (the
//! filter result, and the full object only with `keepFullObjectsInMemory: true`) and a
//! checksum of that, under a compact key that sorts as snapshots are sorted (namespace,
//! then name). Also counts the bytes it holds, for `operon_kube_snapshot_bytes`.

use operon_data::model::ObjectAndFilter;
use serde_json::Value;
use std::collections::BTreeMap;

/// `namespace` NUL `name`: one allocation, and NUL sorts before every character a
/// namespace may hold, so the order is (namespace, name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ObjectKey(Box<str>);

impl ObjectKey {
    /// The key of `object` (empty namespace for cluster-scoped objects).
    pub(crate) fn of(object: &Value) -> Self {
        let field = |f: &str| {
            object
                .get("metadata")
                .and_then(|m| m.get(f))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        Self(format!("{}\0{}", field("namespace"), field("name")).into_boxed_str())
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

/// One object: what the hook sees of it (an [`ObjectAndFilter`], its texts boxed to
/// their length: a binding of a whole cluster holds one per object), and a checksum
/// of that.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    object: Option<Box<str>>,
    filter_result: Option<Box<str>>,
    /// A hash of the filter result (or of the object without a filter): an Added or
    /// Modified event whose checksum did not change runs nothing.
    pub(crate) checksum: u64,
}

impl Stored {
    pub(crate) fn new(item: ObjectAndFilter, checksum: u64) -> Self {
        Self {
            object: item.object.map(String::into_boxed_str),
            filter_result: item.filter_result.map(String::into_boxed_str),
            checksum,
        }
    }

    /// What the hook sees, as a copy.
    pub(crate) fn item(&self) -> ObjectAndFilter {
        ObjectAndFilter {
            object: self.object.as_deref().map(str::to_owned),
            filter_result: self.filter_result.as_deref().map(str::to_owned),
        }
    }

    /// What the hook sees.
    pub(crate) fn into_item(self) -> ObjectAndFilter {
        ObjectAndFilter {
            object: self.object.map(String::from),
            filter_result: self.filter_result.map(String::from),
        }
    }
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

/// The texts an object keeps.
fn bytes_of_stored(stored: &Stored) -> usize {
    let text = |t: &Option<Box<str>>| t.as_deref().map_or(0, str::len);
    text(&stored.object) + text(&stored.filter_result)
}

fn bytes_of(key: &ObjectKey, stored: &Stored) -> usize {
    bytes_of_key(key) + bytes_of_stored(stored)
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
        self.bytes += bytes_of_stored(&stored);
        let before = self.objects.insert(key, stored);
        match &before {
            Some(before) => self.bytes -= bytes_of_stored(before),
            None => self.bytes += key_bytes,
        }
        before
    }

    /// The checksum of the object under `key`, if there is one.
    pub(crate) fn checksum(&self, key: &ObjectKey) -> Option<u64> {
        self.objects.get(key).map(|stored| stored.checksum)
    }

    /// Removes the object under `key`.
    pub(crate) fn remove(&mut self, key: &ObjectKey) -> Option<Stored> {
        let removed = self.objects.remove(key)?;
        self.bytes -= bytes_of(key, &removed);
        Some(removed)
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

    /// What the hook sees, sorted by namespace then name, as copies.
    pub(crate) fn items(&self) -> impl Iterator<Item = ObjectAndFilter> + '_ {
        self.objects.values().map(Stored::item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored(text: &str) -> Stored {
        Stored::new(
            ObjectAndFilter {
                object: None,
                filter_result: Some(text.to_owned()),
            },
            0,
        )
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
}
