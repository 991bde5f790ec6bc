//! The local cluster as an API server's storage sees it: resource types by plural,
//! lists at a `resourceVersion`, watches that resume from one (replaying the recent
//! changes a kind keeps), and one write primitive that reads the current object and
//! stores what a caller computed from it under the same lock, with the server-owned
//! fields and the `status` subresource handled as client writes are. The REST
//! interface over it is [`super::server`].

use super::LocalCluster;
use super::resources::ResourceInfo;
use super::state::{KindState, Origin, Watcher, event_for};
use super::write::{self, ObjectKey, Subresource};
use crate::{ClusterError, Event, EventStream, Resource, Selector};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::mpsc;

/// How many changes each kind keeps for watches that resume from an older
/// `resourceVersion`; older ones get `410 Gone`, as from the API server's watch cache.
const HISTORY: usize = 1000;

/// One stored change: the object before and after it.
struct Change {
    resource_version: u64,
    old: Option<Arc<Value>>,
    new: Option<Arc<Value>>,
}

/// The last [`HISTORY`] changes of one kind.
#[derive(Default)]
pub(super) struct History {
    changes: VecDeque<Change>,
    /// The `resourceVersion` of the newest change dropped: a watch from before it
    /// would miss it.
    floor: u64,
}

impl History {
    pub(super) fn record(
        &mut self,
        resource_version: u64,
        old: Option<&Arc<Value>>,
        new: Option<&Arc<Value>>,
    ) {
        if self.changes.len() == HISTORY
            && let Some(dropped) = self.changes.pop_front()
        {
            self.floor = dropped.resource_version;
        }
        self.changes.push_back(Change {
            resource_version,
            old: old.cloned(),
            new: new.cloned(),
        });
    }
}

/// Why a watch cannot start where it was asked to.
#[derive(Debug)]
pub(super) enum WatchStart {
    /// Changes after this `resourceVersion` are no longer kept.
    Expired { oldest: u64 },
    /// The kind is not known.
    Cluster(ClusterError),
}

/// What a write does to the object it read.
pub(super) enum Write {
    /// Store this object (created when there was none).
    Put(Value),
    /// Remove the object.
    Delete,
}

/// What a write left.
pub(super) struct Written {
    /// The object as stored (or as it would be, on a dry run); the removed one for a
    /// delete.
    pub(super) object: Value,
    /// Whether there was no object before.
    pub(super) created: bool,
}

impl LocalCluster {
    /// Every known resource type, built-ins first.
    pub(super) fn resource_types(&self) -> Vec<ResourceInfo> {
        self.lock().kinds.iter().map(|k| k.info.clone()).collect()
    }

    /// The type served at `/apis/{group}/{version}/{plural}` (`group` empty for the
    /// core group).
    pub(super) fn type_by_plural(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<ResourceInfo> {
        self.lock()
            .kinds
            .iter()
            .find(|k| {
                k.info.resource.group == group
                    && k.info.resource.version == version
                    && k.info.resource.plural == plural
            })
            .map(|k| k.info.clone())
    }

    /// The objects `selector` picks and the `resourceVersion` they are current at.
    pub(super) fn list_at(
        &self,
        resource: &Resource,
        selector: &Selector,
    ) -> Result<(Vec<Value>, u64), ClusterError> {
        let state = self.lock();
        let index = state.index_of(resource)?;
        let kind = &state.kinds[index];
        let objects = kind
            .objects
            .values()
            .filter(|object| selector.matches(&kind.info.resource, object))
            .map(|object| Value::clone(object))
            .collect();
        Ok((objects, state.resource_version))
    }

    /// A watch of the objects `selector` picks: the events of the kept changes after
    /// `since` (none when `None`: from now on), then every later one; and the current
    /// `resourceVersion`.
    pub(super) fn watch_since(
        &self,
        resource: &Resource,
        selector: &Selector,
        since: Option<u64>,
    ) -> Result<(Vec<Event>, EventStream, u64), WatchStart> {
        let mut state = self.lock();
        let current = state.resource_version;
        let index = state.index_of(resource).map_err(WatchStart::Cluster)?;
        let kind = &mut state.kinds[index];
        let mut replay = Vec::new();
        if let Some(since) = since.filter(|since| *since < current) {
            if since < kind.history.floor {
                return Err(WatchStart::Expired {
                    oldest: kind.history.floor,
                });
            }
            let now = std::time::Instant::now();
            replay.extend(
                kind.history
                    .changes
                    .iter()
                    .filter(|c| c.resource_version > since)
                    .filter_map(|c| {
                        event_for(
                            selector,
                            &kind.info.resource,
                            c.old.as_ref(),
                            c.new.as_ref(),
                            c.resource_version,
                            now,
                        )
                    }),
            );
        }
        let (sender, receiver) = mpsc::unbounded_channel();
        kind.watchers.retain(|w| !w.sender.is_closed());
        kind.watchers.push(Watcher {
            selector: selector.clone(),
            sender,
        });
        Ok((replay, receiver, current))
    }

    /// The last `resourceVersion` handed out.
    pub(super) fn current_resource_version(&self) -> u64 {
        self.lock().resource_version
    }

    /// The object with this key, if any.
    pub(super) fn object(
        &self,
        resource: &Resource,
        key: &ObjectKey,
    ) -> Result<Option<Value>, ClusterError> {
        let state = self.lock();
        let index = state.index_of(resource)?;
        Ok(state.kinds[index]
            .objects
            .get(key)
            .map(|object| Value::clone(object)))
    }

    /// Reads the object at `key` and writes what `change` makes of it, atomically.
    /// A `Put` over an existing object is a client update (server-owned fields kept,
    /// `.status` only through the status subresource, nothing stored when nothing
    /// changes); over none, a creation with new server-owned fields. With `dry_run`
    /// nothing is stored. `change` gets the current object and the type's info.
    pub(super) fn write_with<E: From<ClusterError>>(
        &self,
        resource: &Resource,
        key: &ObjectKey,
        subresource: Subresource,
        dry_run: bool,
        change: impl FnOnce(Option<&Value>, &ResourceInfo) -> Result<Write, E>,
    ) -> Result<Written, E> {
        let mut state = self.lock();
        let index = state.index_of(resource)?;
        let kind = &state.kinds[index];
        let current = kind.objects.get(key).cloned();
        let decided = change(current.as_deref(), &kind.info)?;
        match (decided, current) {
            (Write::Delete, None) => Err(E::from(super::not_found(&kind.info.resource, key))),
            (Write::Delete, Some(current)) => {
                if !dry_run {
                    state.remove(index, key);
                }
                Ok(Written {
                    object: Value::clone(&current),
                    created: false,
                })
            }
            (Write::Put(mut object), None) => {
                write::normalize_namespace(&mut object, kind.info.resource.namespaced);
                if kind.info.status_subresource {
                    write::set_status(&mut object, None);
                }
                write::init_server_fields(&mut object, false);
                if dry_run {
                    return Ok(Written {
                        object,
                        created: true,
                    });
                }
                state.store(index, key.clone(), object, Origin::Client);
                let stored = state.kinds[index].objects.get(key).map(|o| Value::clone(o));
                Ok(Written {
                    object: stored.unwrap_or_default(),
                    created: true,
                })
            }
            (Write::Put(object), Some(current)) => {
                let Some(updated) = KindState::updated(kind, &current, object, subresource) else {
                    return Ok(Written {
                        object: Value::clone(&current),
                        created: false,
                    });
                };
                if dry_run {
                    return Ok(Written {
                        object: updated,
                        created: false,
                    });
                }
                state.store(index, key.clone(), updated, Origin::Client);
                let stored = state.kinds[index].objects.get(key).map(|o| Value::clone(o));
                Ok(Written {
                    object: stored.unwrap_or_default(),
                    created: false,
                })
            }
        }
    }
}
