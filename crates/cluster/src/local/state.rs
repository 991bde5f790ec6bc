//! The cluster's state behind its one lock: each kind's objects, watchers and recent
//! history, the `resourceVersion` counter, and the bookkeeping of a write (a new
//! `resourceVersion`, the history, the events each watcher's selector sees).

use super::access;
use super::resources::{self, ResourceInfo};
use super::write::{self, ObjectKey, Subresource};
use crate::{ClusterError, Event, Resource, Selector};
use operon_data::model::WatchEvent;
use serde_json::Value;
use std::collections::{BTreeMap, btree_map};
use std::sync::Arc;
use tokio::sync::mpsc;

pub(super) struct State {
    /// Every known resource type with its objects and watchers, built-ins first (the
    /// order `resolve` prefers).
    pub(super) kinds: Vec<KindState>,
    /// The last `resourceVersion` handed out.
    pub(super) resource_version: u64,
}

pub(super) struct KindState {
    pub(super) info: ResourceInfo,
    /// Sorted by namespace then name: lists come out in the order the contract asks.
    /// Shared with the watch events that carry them.
    pub(super) objects: BTreeMap<ObjectKey, Arc<Value>>,
    pub(super) watchers: Vec<Watcher>,
    /// The last changes, so that a watch from an older `resourceVersion` (kubectl's
    /// list then watch) misses nothing written in between.
    pub(super) history: access::History,
}

pub(super) struct Watcher {
    pub(super) selector: Selector,
    pub(super) sender: mpsc::UnboundedSender<Event>,
}

/// Who writes: the world described by fixtures and scenarios, or a client (a hook's
/// patch operations), which may not set server-owned fields.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    Fixture,
    Client,
}

/// Why an object's type could not be found.
pub(super) enum TypeLookup {
    /// Nothing by that name: fixtures register it, clients get `UnknownKind`.
    Unknown,
    /// The name is known but written differently, or the apiVersion does not parse.
    Refused(ClusterError),
}

impl State {
    pub(super) fn resolve(
        &self,
        api_version: Option<&str>,
        kind: &str,
    ) -> Result<usize, ClusterError> {
        resources::resolve(
            self.kinds.iter().map(|k| &k.info).enumerate(),
            api_version,
            kind,
        )
    }

    pub(super) fn index_of(&self, resource: &Resource) -> Result<usize, ClusterError> {
        self.kinds
            .iter()
            .position(|k| k.info.is(resource))
            .ok_or_else(|| ClusterError::UnknownKind {
                kind: resource.kind.clone(),
                api_version: Some(resource.api_version()),
            })
    }

    /// The type with exactly this `apiVersion` and `kind`, as written in an object.
    pub(super) fn find_type(&self, api_version: &str, kind: &str) -> Option<usize> {
        self.kinds
            .iter()
            .position(|k| k.info.is_type_of(api_version, kind))
    }

    pub(super) fn type_index(&self, api_version: &str, kind: &str) -> Result<usize, TypeLookup> {
        if let Some(index) = self.find_type(api_version, kind) {
            return Ok(index);
        }
        if let Err(reason) = resources::split_api_version(api_version) {
            return Err(TypeLookup::Refused(ClusterError::Invalid {
                what: format!("{kind} object"),
                reason,
            }));
        }
        match self.resolve(Some(api_version), kind) {
            // `kind: pods` or `kind: pod`: objects carry the kind exactly.
            Ok(index) => Err(TypeLookup::Refused(ClusterError::Invalid {
                what: format!("{kind} object"),
                reason: format!(
                    "kind {kind:?} must be written {:?}",
                    self.kinds[index].info.resource.kind
                ),
            })),
            Err(_) => Err(TypeLookup::Unknown),
        }
    }

    /// Adds a resource type, or updates the one with the same group, version and kind.
    pub(super) fn register(&mut self, info: ResourceInfo) -> Result<usize, String> {
        match self.kinds.iter().position(|k| k.info.is(&info.resource)) {
            Some(index) => {
                let existing = &mut self.kinds[index];
                if existing.info.resource.namespaced != info.resource.namespaced
                    && !existing.objects.is_empty()
                {
                    return Err(format!(
                        "{} is already known as {} with objects stored",
                        info.resource.kind,
                        if existing.info.resource.namespaced {
                            "namespaced"
                        } else {
                            "cluster-scoped"
                        }
                    ));
                }
                existing.info = info;
                Ok(index)
            }
            None => {
                self.kinds.push(KindState::new(info));
                Ok(self.kinds.len() - 1)
            }
        }
    }

    pub(super) fn register_crd(&mut self, crd: &Value) -> Result<(), String> {
        for info in resources::from_crd(crd)? {
            self.register(info)?;
        }
        Ok(())
    }

    pub(super) fn next_resource_version(&mut self) -> u64 {
        self.resource_version += 1;
        self.resource_version
    }

    /// Stores `object` (created or replacing the current one) with a new
    /// resourceVersion and tells the watchers.
    pub(super) fn store(
        &mut self,
        index: usize,
        key: ObjectKey,
        mut object: Value,
        origin: Origin,
    ) {
        let resource_version = self.next_resource_version();
        let kind = &mut self.kinds[index];
        match kind.objects.entry(key) {
            btree_map::Entry::Occupied(mut slot) => {
                // A client's write came through `KindState::updated`, which carried them.
                if origin == Origin::Fixture {
                    write::carry_server_fields(&mut object, slot.get(), true);
                }
                write::set_resource_version(&mut object, resource_version);
                let old = std::mem::replace(slot.get_mut(), Arc::new(object));
                kind.history
                    .record(resource_version, Some(&old), Some(slot.get()));
                notify(
                    &kind.info.resource,
                    &mut kind.watchers,
                    Some(&old),
                    Some(slot.get()),
                    resource_version,
                );
            }
            btree_map::Entry::Vacant(slot) => {
                if origin == Origin::Fixture {
                    write::init_server_fields(&mut object, true);
                }
                write::set_resource_version(&mut object, resource_version);
                let new = slot.insert(Arc::new(object));
                kind.history.record(resource_version, None, Some(new));
                notify(
                    &kind.info.resource,
                    &mut kind.watchers,
                    None,
                    Some(new),
                    resource_version,
                );
            }
        }
    }

    /// Removes an object if it exists and tells the watchers.
    pub(super) fn remove(&mut self, index: usize, key: &ObjectKey) {
        if !self.kinds[index].objects.contains_key(key) {
            return;
        }
        let resource_version = self.next_resource_version();
        let kind = &mut self.kinds[index];
        if let Some(old) = kind.objects.remove(key) {
            kind.history.record(resource_version, Some(&old), None);
            notify(
                &kind.info.resource,
                &mut kind.watchers,
                Some(&old),
                None,
                resource_version,
            );
        }
    }
}

impl KindState {
    pub(super) fn new(info: ResourceInfo) -> Self {
        KindState {
            info,
            objects: BTreeMap::new(),
            watchers: Vec::new(),
            history: access::History::default(),
        }
    }

    /// What a client write of `candidate` over `current` stores, or `None` when it
    /// would change nothing.
    pub(super) fn updated(
        &self,
        current: &Value,
        candidate: Value,
        subresource: Subresource,
    ) -> Option<Value> {
        let mut updated = match subresource {
            Subresource::Status => {
                let mut updated = current.clone();
                write::set_status(&mut updated, candidate.get("status"));
                updated
            }
            Subresource::Main => {
                let mut updated = candidate;
                if self.info.status_subresource {
                    write::set_status(&mut updated, current.get("status"));
                }
                updated
            }
        };
        write::carry_server_fields(&mut updated, current, false);
        (updated != *current).then_some(updated)
    }
}

/// Sends each watcher of a kind the event a real watch with its selector would see for
/// a change from `old` to `new`, and drops watchers whose receiver is gone.
pub(super) fn notify(
    resource: &Resource,
    watchers: &mut Vec<Watcher>,
    old: Option<&Arc<Value>>,
    new: Option<&Arc<Value>>,
    resource_version: u64,
) {
    let now = std::time::Instant::now();
    watchers.retain(|watcher| {
        match event_for(&watcher.selector, resource, old, new, resource_version, now) {
            Some(event) => watcher.sender.send(event).is_ok(),
            None => !watcher.sender.is_closed(),
        }
    });
}

/// The event a watch with `selector` sees for a change from `old` to `new`, if any.
pub(super) fn event_for(
    selector: &Selector,
    resource: &Resource,
    old: Option<&Arc<Value>>,
    new: Option<&Arc<Value>>,
    resource_version: u64,
    now: std::time::Instant,
) -> Option<Event> {
    let was = old.is_some_and(|o| selector.matches(resource, o));
    let is = new.is_some_and(|n| selector.matches(resource, n));
    match (was, is, old, new) {
        (false, true, _, Some(new)) => Some(Event {
            kind: WatchEvent::Added,
            object: Arc::clone(new),
            deleted_final_state_unknown: None,
            received: now,
        }),
        (true, true, _, Some(new)) => Some(Event {
            kind: WatchEvent::Modified,
            object: Arc::clone(new),
            deleted_final_state_unknown: None,
            received: now,
        }),
        // Deleted, or no longer selected: the last state it was seen in, at the
        // resourceVersion of the change (as the API server's watch cache does).
        (true, false, Some(old), _) => {
            let mut object = Value::clone(old);
            write::set_resource_version(&mut object, resource_version);
            Some(Event {
                kind: WatchEvent::Deleted,
                object: Arc::new(object),
                deleted_final_state_unknown: None,
                received: now,
            })
        }
        _ => None,
    }
}
