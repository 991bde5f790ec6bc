//! The kubernetes bindings of the engine: the selector each watch uses, its jq filter,
//! the watch itself, the Synchronization run it queues, and how each watch event
//! changes the binding's snapshot and queues an Event run.

use super::{BindingKey, Engine, State, TaskTrace, spans};
use crate::config::{KubernetesBinding, MAIN_QUEUE};
use crate::context;
use crate::metrics::BindingMetrics;
use crate::objects::{BindingObjects, ObjectKey, Stored};
use crate::queue::{Task, TaskKind};
use operon_cluster::{ClusterError, Event, Resource, Selector, namespace_and_name};
use operon_data::model::WatchEvent;
use serde_json::Value;
use tokio::time::Instant;

impl Engine {
    pub(super) async fn selector(
        &self,
        binding: &KubernetesBinding,
    ) -> Result<Selector, ClusterError> {
        let mut namespaces = None;
        if let Some(ns) = &binding.namespace {
            if let Some(names) = &ns.name_selector {
                namespaces = Some(names.clone());
            }
            if let Some(labels) = &ns.label_selector {
                let resource = self.cluster.resolve(Some("v1"), "Namespace").await?;
                let selector = Selector {
                    labels: Some(labels.clone()),
                    ..Selector::default()
                };
                // Namespaces matching the label selector, intersected with the names.
                let (objects, _stream) = self.cluster.list_and_watch(&resource, &selector).await?;
                let labelled: Vec<String> = objects
                    .into_iter()
                    .map(|o| namespace_and_name(&o).1.to_owned())
                    .collect();
                namespaces = Some(match namespaces {
                    Some(names) => names.into_iter().filter(|n| labelled.contains(n)).collect(),
                    None => labelled,
                });
            }
        }
        Ok(Selector {
            namespaces,
            names: binding.name_selector.clone(),
            labels: binding.label_selector.clone(),
            fields: binding.field_selector.clone(),
        })
    }

    pub(super) fn filter(
        binding: &KubernetesBinding,
        object: &Value,
        handles: &BindingMetrics,
    ) -> Stored {
        let outputs = binding.jq_filter.as_ref().map(|filter| {
            let started = std::time::Instant::now();
            // A filter that errors on one object yields nothing for it, as jq would
            // print nothing; the error is logged so it is not silent.
            let outputs = filter.run_in_task(object);
            let outputs = outputs.unwrap_or_else(|e| {
                tracing::warn!(binding = %binding.name, error = %e, "jq filter failed on an object");
                Vec::new()
            });
            handles.jq_filter(started.elapsed());
            outputs
        });
        Stored::of(
            object,
            outputs.as_deref(),
            binding.keep_full_objects_in_memory,
        )
    }

    pub(super) async fn watch_binding(
        &self,
        h: usize,
        b: usize,
        binding: &KubernetesBinding,
    ) -> Result<(), ClusterError> {
        let resource: Resource = self
            .cluster
            .resolve(binding.api_version.as_deref(), &binding.kind)
            .await?;
        let selector = self.selector(binding).await?;
        let (objects, stream) = self.cluster.list_and_watch(&resource, &selector).await?;
        // Each object is dropped as soon as its filter ran: only what the hook sees stays.
        let handles = self.kube_metrics(h, binding);
        let snapshot = BindingObjects::from_list(objects.into_iter().map(|object| {
            (
                ObjectKey::of(&object),
                Self::filter(binding, &object, &handles),
            )
        }));
        let mut state = self.lock();
        state.snapshots.insert((h, b), snapshot);
        self.count_snapshot(&mut state, (h, b));
        state.streams.push(((h, b), stream));
        Ok(())
    }

    pub(super) fn queue_synchronization(
        &self,
        state: &mut State,
        h: usize,
        b: usize,
        binding: &KubernetesBinding,
    ) {
        if !binding.execute_hook_on_synchronization {
            state.synced.insert((h, b));
            return;
        }
        let context = match &binding.group {
            Some(group) => context::group(&binding.name, group, Vec::new()),
            None => {
                let items = state
                    .snapshots
                    .get(&(h, b))
                    .map(|s| s.items().collect())
                    .unwrap_or_default();
                context::synchronization(&binding.name, items, Vec::new())
            }
        };
        let task = Task {
            hook: h,
            merge: self.merges(h),
            kind: TaskKind::Synchronization,
            contexts: vec![context],
            allow_failure: binding.allow_failure,
            synchronizes: vec![b],
            queued_at: Instant::now(),
            trace: TaskTrace::of_kind(
                TaskKind::Synchronization,
                self.hooks[h].hook.name(),
                &binding.name,
            ),
            running: Vec::new(),
        };
        // Synchronization runs go to the main queue, which they hold up, whatever the
        // binding's queue: shell-operator's `NewSyncHookRunTask` puts them all on
        // `main`, and `taskHandleEnableKubernetesBindings` runs a hook's before the next
        // hook's bindings are even enabled. They are never run beside each other to
        // start faster: a hook may rely on the hooks before it (by path) having
        // synchronized and their patches being applied, and on onStartup being over.
        // `waitForSynchronization: false` (allowed only on a named queue, as in
        // addon-operator) sends them to the binding's own queue, beside `main`, so
        // nothing else waits.
        let queue = if binding.wait_for_synchronization {
            MAIN_QUEUE
        } else {
            binding.queue.as_str()
        };
        self.push(state, queue, task);
    }

    /// Handles one watch event of binding `(h, b)`: updates the snapshot and queues an
    /// Event run when the binding wants one.
    pub(crate) fn handle_event(&self, key: BindingKey, event: Event) {
        let (h, b) = key;
        let binding = &self.hooks[h].config.kubernetes[b];
        let handles = self.kube_metrics(h, binding);
        let received = event.received;
        self.handle(key, binding, event, &handles);
        handles.event(received.elapsed());
    }

    pub(super) fn handle(
        &self,
        key: BindingKey,
        binding: &KubernetesBinding,
        event: Event,
        handles: &BindingMetrics,
    ) {
        let root = spans::event(
            self.hooks[key.0].hook.name(),
            &binding.name,
            event.kind,
            &event.object,
            event.received,
        );
        if let Some(identity) = event.deleted_final_state_unknown {
            // Deleted while the watch was down: the last state the binding saw is the
            // one to report; the cluster layer knows only the object's identity.
            let mut state = self.lock();
            let snapshot = state.snapshots.entry(key).or_default();
            let Some(last) = snapshot.remove_identity(identity) else {
                return;
            };
            return self.fire(state, key, WatchEvent::Deleted, last.into_item(), root);
        }
        let object_key = ObjectKey::of(&event.object);
        let stored = {
            let _filter = spans::filter(&root).entered();
            Self::filter(binding, &event.object, handles)
        };
        let mut state = self.lock();
        let snapshot = state.snapshots.entry(key).or_default();
        let item = match event.kind {
            WatchEvent::Deleted => {
                snapshot.remove(&object_key);
                Some(stored.into_item())
            }
            WatchEvent::Added | WatchEvent::Modified => {
                // The snapshot takes the item; the run shares its texts.
                let changed = snapshot
                    .get(&object_key)
                    .is_none_or(|before| !before.shows_the_same(&stored));
                let run_item = changed.then(|| stored.item());
                snapshot.insert(object_key, stored);
                run_item
            }
        };
        match item {
            Some(item) => self.fire(state, key, event.kind, item, root),
            None => {
                root.record("dropped", true);
                self.count_snapshot(&mut state, key)
            }
        }
    }

    pub(super) fn count_snapshot(&self, state: &mut State, (h, b): BindingKey) {
        let (objects, bytes) = state
            .snapshots
            .get(&(h, b))
            .map_or((0, 0), |s| (s.len(), s.bytes()));
        let [objects_gauge, bytes_gauge] =
            state.snapshot_gauges.entry((h, b)).or_insert_with(|| {
                let binding = &self.hooks[h].config.kubernetes[b];
                let labels = [self.hooks[h].hook.name(), binding.name.as_str()];
                [
                    self.metrics
                        .kube_snapshot_objects
                        .with_label_values(&labels),
                    self.metrics.kube_snapshot_bytes.with_label_values(&labels),
                ]
            });
        objects_gauge.set(objects as i64);
        bytes_gauge.set(bytes as i64);
    }
}
