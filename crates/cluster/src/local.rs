//! The local, in-memory cluster: objects loaded from YAML fixtures, watched and patched
//! with the API server's semantics, so `operon hook test` / `operon hook run` behave as
//! they would against Kubernetes.
//!
//! What it models: kinds resolved by kind, plural or short name; `uid`,
//! `creationTimestamp` and a cluster-wide `resourceVersion` owned by the server;
//! namespaces defaulted to `default`; selectors (namespaces, names, labels, fields);
//! watches that see objects enter and leave a selector as `Added` and `Deleted`; every
//! shell-operator patch operation, with the `status` subresource (kinds that have one
//! ignore `.status` in other writes, as the docs warn); writes that change nothing are
//! no-ops, with no event and no new `resourceVersion`, so a hook patching what it
//! watches does not loop.
//!
//! [`LocalApi`] serves it over HTTPS on loopback with the API server's REST
//! interface, so that kubectl and other clients (a script hook's) read and write the
//! same objects; it adds `resourceVersion` preconditions, `generateName`, every
//! patch type with server-side apply's field managers, and watches that resume
//! from a recent `resourceVersion` (see [`server`] for what it implements and
//! refuses).
//!
//! What it does not model: finalizers and graceful deletion, garbage collection of dependents, admission, defaulting of
//! fields beyond the namespace, and version conversion (each `apiVersion` of a kind is
//! a separate store).

mod access;
mod fixtures;
mod jq_patch;
mod resources;
mod selector;
pub mod server;
mod state;
mod write;

pub use fixtures::{FixtureError, FixtureLocation};
pub use server::{LocalApi, LocalApiError};

use crate::{Cluster, ClusterError, EventStream, Listed, Resource, Selector, describe_ref};
use futures::future::BoxFuture;
use operon_data::model::WatchEvent;
use operon_data::model::{CreateSpec, ObjectRef, PatchOperation};
use resources::ResourceInfo;
use serde_json::Value;
use state::{KindState, Origin, State, TypeLookup, Watcher};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use tokio::sync::mpsc;
use write::{ObjectKey, Subresource};

/// An in-memory Kubernetes cluster. Cheap to share: every method takes `&self`.
pub struct LocalCluster {
    /// One lock for everything: a write and the events it sends happen atomically, so
    /// every watcher sees writes in `resourceVersion` order.
    state: Mutex<State>,
}

/// What `Create*` does when the object exists.
#[derive(Clone, Copy, PartialEq, Eq)]
enum IfExists {
    Fail,
    Skip,
    Replace,
}

impl Default for LocalCluster {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for LocalCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("LocalCluster")
            .field("kinds", &state.kinds.len())
            .field(
                "objects",
                &state.kinds.iter().map(|k| k.objects.len()).sum::<usize>(),
            )
            .field("resource_version", &state.resource_version)
            .finish()
    }
}

impl LocalCluster {
    /// An empty cluster that knows the built-in kinds.
    pub fn new() -> Self {
        let kinds = resources::builtin()
            .into_iter()
            .map(KindState::new)
            .collect();
        LocalCluster {
            state: Mutex::new(State {
                kinds,
                resource_version: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Writes finish their bookkeeping before anything can panic, so a poisoned
        // state is still consistent.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Loads every object of a multi-document YAML text (`kind: List` and typed lists
    /// are expanded). `origin` names the text in errors. Objects that exist are
    /// replaced; CustomResourceDefinitions register their kinds; other unknown kinds
    /// are registered as guessed from their objects. Returns how many objects were
    /// stored, or every problem found, in which case no object is stored.
    pub fn load_yaml(&self, text: &str, origin: &str) -> Result<usize, Vec<FixtureError>> {
        let (objects, mut errors) = fixtures::parse(text, origin);
        let mut state = self.lock();

        // CRDs first, so objects of their kinds get the declared plural and scope
        // wherever they appear in the text.
        for (location, object) in &objects {
            if is_crd(object)
                && let Err(reason) = state.register_crd(object)
            {
                errors.push(FixtureError::Object {
                    location: location.clone(),
                    reason,
                });
            }
        }

        // An unknown kind is namespaced if any of its objects has a namespace.
        let mut guessed: Vec<(String, String, bool)> = Vec::new();
        for (_, object) in &objects {
            let (api_version, kind) = type_of(object);
            if state.find_type(api_version, kind).is_some() {
                continue;
            }
            let namespaced = has_namespace(object);
            match guessed
                .iter_mut()
                .find(|(v, k, _)| v == api_version && k == kind)
            {
                Some(entry) => entry.2 |= namespaced,
                None => guessed.push((api_version.to_owned(), kind.to_owned(), namespaced)),
            }
        }

        let mut planned: Vec<(usize, ObjectKey, Value)> = Vec::with_capacity(objects.len());
        let mut seen: HashMap<(usize, ObjectKey), FixtureLocation> = HashMap::new();
        for (location, mut object) in objects {
            let (api_version, kind) = type_of(&object);
            let index = match state.type_index(api_version, kind) {
                Ok(index) => index,
                Err(TypeLookup::Unknown) => {
                    let namespaced = guessed
                        .iter()
                        .find(|(v, k, _)| v == api_version && k == kind)
                        .is_some_and(|(_, _, namespaced)| *namespaced);
                    match ResourceInfo::guessed(api_version, kind, namespaced)
                        .and_then(|info| state.register(info))
                    {
                        Ok(index) => index,
                        Err(reason) => {
                            errors.push(FixtureError::Object { location, reason });
                            continue;
                        }
                    }
                }
                Err(TypeLookup::Refused(error)) => {
                    errors.push(FixtureError::Cluster { location, error });
                    continue;
                }
            };
            let key = write::normalize_namespace(
                &mut object,
                state.kinds[index].info.resource.namespaced,
            );
            match seen.entry((index, key.clone())) {
                std::collections::hash_map::Entry::Occupied(first) => {
                    errors.push(FixtureError::Duplicate {
                        location,
                        what: describe(&state.kinds[index].info.resource, &key),
                        first: first.get().clone(),
                    });
                }
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(location);
                    planned.push((index, key, object));
                }
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let count = planned.len();
        for (index, key, object) in planned {
            state.store(index, key, object, Origin::Fixture);
        }
        Ok(count)
    }

    /// Reads and loads a fixture file (see [`LocalCluster::load_yaml`]).
    pub fn load_file(&self, path: impl AsRef<Path>) -> Result<usize, Vec<FixtureError>> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| {
            vec![FixtureError::Read {
                path: path.display().to_string(),
                reason: e.to_string(),
            }]
        })?;
        self.load_yaml(&text, &path.display().to_string())
    }

    /// A snapshot of every object, sorted by apiVersion, kind, namespace and name.
    pub fn objects(&self) -> Vec<Value> {
        let state = self.lock();
        let mut kinds: Vec<&KindState> = state
            .kinds
            .iter()
            .filter(|k| !k.objects.is_empty())
            .collect();
        kinds.sort_by_cached_key(|k| (k.info.resource.api_version(), k.info.resource.kind.clone()));
        kinds
            .into_iter()
            .flat_map(|k| k.objects.values().map(|o| Value::clone(o)))
            .collect()
    }

    /// The last `resourceVersion` handed out (0 before the first write).
    #[cfg(test)]
    pub(crate) fn resource_version(&self) -> u64 {
        self.lock().resource_version
    }

    /// Applies a change described by a scenario, as the world (not a hook) makes it:
    /// `Added` creates or replaces the object, `Modified` replaces it, `Deleted`
    /// removes it. Server-owned fields given in the object are kept. Watchers see the
    /// change as a real watch would.
    pub fn apply_watch_event(
        &self,
        kind: WatchEvent,
        mut object: Value,
    ) -> Result<(), ClusterError> {
        fixtures::check_object(&object).map_err(|reason| ClusterError::Invalid {
            what: format!("{kind:?} object"),
            reason,
        })?;
        let mut state = self.lock();
        if is_crd(&object) && !matches!(kind, WatchEvent::Deleted) {
            state
                .register_crd(&object)
                .map_err(|reason| ClusterError::Invalid {
                    what: "CustomResourceDefinition".to_owned(),
                    reason,
                })?;
        }
        let (api_version, type_name) = type_of(&object);
        let index = match state.type_index(api_version, type_name) {
            Ok(index) => index,
            Err(TypeLookup::Unknown) => {
                let info = ResourceInfo::guessed(api_version, type_name, has_namespace(&object))
                    .map_err(|reason| ClusterError::Invalid {
                        what: format!("{type_name} object"),
                        reason,
                    })?;
                state
                    .register(info)
                    .map_err(|reason| ClusterError::Invalid {
                        what: type_name.to_owned(),
                        reason,
                    })?
            }
            Err(TypeLookup::Refused(error)) => return Err(error),
        };
        let resource = &state.kinds[index].info.resource;
        let key = write::normalize_namespace(&mut object, resource.namespaced);
        let exists = state.kinds[index].objects.contains_key(&key);
        match kind {
            WatchEvent::Added => state.store(index, key, object, Origin::Fixture),
            WatchEvent::Modified if exists => state.store(index, key, object, Origin::Fixture),
            WatchEvent::Deleted if exists => state.remove(index, &key),
            WatchEvent::Modified | WatchEvent::Deleted => {
                return Err(not_found(&state.kinds[index].info.resource, &key));
            }
        }
        Ok(())
    }

    fn list_and_watch_now(
        &self,
        resource: &Resource,
        selector: &Selector,
    ) -> Result<(Listed, EventStream), ClusterError> {
        let mut state = self.lock();
        let index = state.index_of(resource)?;
        let kind = &mut state.kinds[index];
        let objects: Vec<Value> = kind
            .objects
            .values()
            .filter(|object| selector.matches(&kind.info.resource, object))
            .map(|object| Value::clone(object))
            .collect();
        let (sender, receiver) = mpsc::unbounded_channel();
        // Receivers dropped since the last write are pruned here too, so a cluster
        // that is watched often but rarely written does not collect dead watchers.
        kind.watchers.retain(|w| !w.sender.is_closed());
        kind.watchers.push(Watcher {
            selector: selector.clone(),
            sender,
        });
        Ok((Listed::from(objects), receiver))
    }

    fn get_now(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, ClusterError> {
        let state = self.lock();
        let index = state.index_of(resource)?;
        let info = &state.kinds[index].info;
        let key = target_key(&info.resource, namespace, name)?;
        Ok(state.kinds[index]
            .objects
            .get(&key)
            .map(|o| Value::clone(o)))
    }

    fn apply_now(&self, operation: &PatchOperation) -> Result<(), ClusterError> {
        match operation {
            PatchOperation::Create(spec) => self.create(spec, IfExists::Fail),
            PatchOperation::CreateOrUpdate(spec) => self.create(spec, IfExists::Replace),
            PatchOperation::CreateIfNotExists(spec) => self.create(spec, IfExists::Skip),
            PatchOperation::Delete(target)
            | PatchOperation::DeleteInBackground(target)
            | PatchOperation::DeleteNonCascading(target) => self.delete(target),
            PatchOperation::JqPatch(spec) => self.jq_patch(spec),
            PatchOperation::MergePatch(spec) => {
                let patch = super::merge_patch_document(spec)?;
                self.patch(
                    "MergePatch",
                    &spec.target,
                    spec.subresource.as_deref(),
                    spec.ignore_missing_object,
                    |current| {
                        let mut patched = current.clone();
                        json_patch::merge(&mut patched, &patch);
                        Ok(patched)
                    },
                )
            }
            PatchOperation::JsonPatch(spec) => {
                let patch = super::json_patch_document(spec)?;
                self.patch(
                    "JSONPatch",
                    &spec.target,
                    spec.subresource.as_deref(),
                    spec.ignore_missing_object,
                    |current| {
                        let mut patched = current.clone();
                        json_patch::patch(&mut patched, &patch.0).map_err(|e| e.to_string())?;
                        Ok(patched)
                    },
                )
            }
        }
    }

    fn create(&self, spec: &CreateSpec, if_exists: IfExists) -> Result<(), ClusterError> {
        let invalid = |what: &str, reason: String| ClusterError::Invalid {
            what: what.to_owned(),
            reason,
        };
        let mut object: Value = serde_json::from_str(&spec.object)
            .map_err(|e| invalid("object to create", format!("not JSON: {e}")))?;
        fixtures::check_object(&object).map_err(|reason| invalid("object to create", reason))?;
        let subresource = Subresource::parse(spec.subresource.as_deref())
            .map_err(|reason| invalid("object to create", reason))?;
        let mut state = self.lock();
        let (api_version, kind) = type_of(&object);
        let index = match state.type_index(api_version, kind) {
            Ok(index) => index,
            Err(TypeLookup::Unknown) => {
                return Err(ClusterError::UnknownKind {
                    kind: kind.to_owned(),
                    api_version: Some(api_version.to_owned()),
                });
            }
            Err(TypeLookup::Refused(error)) => return Err(error),
        };
        let info = &state.kinds[index].info;
        let key = write::normalize_namespace(&mut object, info.resource.namespaced);
        if subresource == Subresource::Status && !info.status_subresource {
            return Err(no_status(&info.resource));
        }
        let Some(current) = state.kinds[index].objects.get(&key) else {
            if subresource == Subresource::Status {
                // There is no status subresource of an object that does not exist.
                return Err(not_found(&info.resource, &key));
            }
            if info.status_subresource {
                write::set_status(&mut object, None);
            }
            write::init_server_fields(&mut object, false);
            state.store(index, key, object, Origin::Client);
            return Ok(());
        };
        match if_exists {
            IfExists::Fail => Err(ClusterError::AlreadyExists {
                kind: info.resource.kind.clone(),
                namespace: namespace_of(&info.resource, &key),
                name: key.1.clone(),
            }),
            IfExists::Skip => Ok(()),
            IfExists::Replace => {
                let updated = state.kinds[index].updated(current, object, subresource);
                if let Some(updated) = updated {
                    state.store(index, key, updated, Origin::Client);
                }
                Ok(())
            }
        }
    }

    fn delete(&self, target: &ObjectRef) -> Result<(), ClusterError> {
        let mut state = self.lock();
        let index = state.resolve(target.api_version.as_deref(), &target.kind)?;
        let key = target_key(
            &state.kinds[index].info.resource,
            target.namespace.as_deref(),
            &target.name,
        )?;
        // shell-operator treats deleting a missing object as done.
        state.remove(index, &key);
        Ok(())
    }

    /// Reads the target, transforms it with `change` and writes the result back through
    /// the main resource or the status subresource.
    fn patch(
        &self,
        operation: &str,
        target: &ObjectRef,
        subresource: Option<&str>,
        ignore_missing_object: bool,
        change: impl FnOnce(&Value) -> Result<Value, String>,
    ) -> Result<(), ClusterError> {
        let invalid = |reason: String| ClusterError::Invalid {
            what: format!("{operation} of {}", describe_ref(target)),
            reason,
        };
        let subresource = Subresource::parse(subresource).map_err(invalid)?;
        let mut state = self.lock();
        let index = state.resolve(target.api_version.as_deref(), &target.kind)?;
        let info = &state.kinds[index].info;
        let key = target_key(&info.resource, target.namespace.as_deref(), &target.name)?;
        if subresource == Subresource::Status && !info.status_subresource {
            return Err(no_status(&info.resource));
        }
        let Some(current) = state.kinds[index].objects.get(&key) else {
            return if ignore_missing_object {
                Ok(())
            } else {
                Err(not_found(&info.resource, &key))
            };
        };
        let mut candidate = change(current).map_err(invalid)?;
        write::keep_identity(&mut candidate, current).map_err(invalid)?;
        // The API server validates what a patch produced, e.g. labels that became numbers.
        fixtures::check_object(&candidate).map_err(invalid)?;
        let updated = state.kinds[index].updated(current, candidate, subresource);
        if let Some(updated) = updated {
            state.store(index, key, updated, Origin::Client);
        }
        Ok(())
    }
}

impl LocalCluster {
    /// [`Cluster::resolve`], answered at once: every kind this cluster knows was
    /// registered when its fixtures or CRDs were loaded.
    pub fn resolve(&self, api_version: Option<&str>, kind: &str) -> Result<Resource, ClusterError> {
        let state = self.lock();
        let index = state.resolve(api_version, kind)?;
        Ok(state.kinds[index].info.resource.clone())
    }
}

impl Cluster for LocalCluster {
    fn resolve<'a>(
        &'a self,
        api_version: Option<&'a str>,
        kind: &'a str,
    ) -> BoxFuture<'a, Result<Resource, ClusterError>> {
        Box::pin(std::future::ready(LocalCluster::resolve(
            self,
            api_version,
            kind,
        )))
    }

    fn list_and_watch<'a>(
        &'a self,
        resource: &'a Resource,
        selector: &'a Selector,
    ) -> BoxFuture<'a, Result<(Listed, EventStream), ClusterError>> {
        Box::pin(std::future::ready(
            self.list_and_watch_now(resource, selector),
        ))
    }

    fn get<'a>(
        &'a self,
        resource: &'a Resource,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, ClusterError>> {
        Box::pin(std::future::ready(self.get_now(resource, namespace, name)))
    }

    fn apply<'a>(
        &'a self,
        operation: &'a PatchOperation,
    ) -> BoxFuture<'a, Result<(), ClusterError>> {
        Box::pin(std::future::ready(self.apply_now(operation)))
    }
}

fn is_crd(object: &Value) -> bool {
    object.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition")
        && object
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| v.starts_with("apiextensions.k8s.io/"))
}

/// `apiVersion` and `kind` of an object checked by `fixtures::check_object`.
fn type_of(object: &Value) -> (&str, &str) {
    let text = |field: &str| {
        object
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    (text("apiVersion"), text("kind"))
}

fn has_namespace(object: &Value) -> bool {
    object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .is_some_and(|ns| !ns.is_empty())
}

/// The key of a patch or delete target; a namespaced kind needs a namespace (shell-
/// operator reads an empty one as "cluster-scoped"), a cluster-scoped one ignores it.
fn target_key(
    resource: &Resource,
    namespace: Option<&str>,
    name: &str,
) -> Result<ObjectKey, ClusterError> {
    if !resource.namespaced {
        return Ok((String::new(), name.to_owned()));
    }
    match namespace {
        Some(namespace) if !namespace.is_empty() => Ok((namespace.to_owned(), name.to_owned())),
        _ => Err(ClusterError::Invalid {
            what: format!("{} {name}", resource.kind),
            reason: format!("{} is namespaced: a namespace is required", resource.kind),
        }),
    }
}

fn namespace_of(resource: &Resource, key: &ObjectKey) -> Option<String> {
    resource.namespaced.then(|| key.0.clone())
}

fn not_found(resource: &Resource, key: &ObjectKey) -> ClusterError {
    ClusterError::NotFound {
        kind: resource.kind.clone(),
        namespace: namespace_of(resource, key),
        name: key.1.clone(),
    }
}

fn no_status(resource: &Resource) -> ClusterError {
    ClusterError::Invalid {
        what: "subresource \"status\"".to_owned(),
        reason: format!("{} has no status subresource", resource.kind),
    }
}

fn describe(resource: &Resource, key: &ObjectKey) -> String {
    if resource.namespaced {
        format!("{} {}/{}", resource.kind, key.0, key.1)
    } else {
        format!("{} {}", resource.kind, key.1)
    }
}

#[cfg(test)]
mod tests;
