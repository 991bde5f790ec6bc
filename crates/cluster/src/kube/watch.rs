//! Lists and watches, shared: one watch (a [`Source`]) per distinct (resource,
//! namespace, label selector, field selector), whatever number of bindings ask for it.
//!
//! A watcher keeps no object, only each object's [`Identity`] and a hash of its
//! `resourceVersion` (two words), which is what it needs to turn a re-list (after a
//! `410 Gone`, or when another binding joins) into exact events: objects that changed
//! during the gap become `Modified`, new ones `Added`, and ones that vanished `Deleted`
//! (with `deleted_final_state_unknown`: the watcher never saw their last state, and
//! knows them by identity only), while unchanged ones produce nothing, so no event is
//! lost or reported twice. A joining binding gets the
//! full list of that re-list as its initial objects. Reconnects back off exponentially
//! with jitter (kube-runtime's default backoff).

use super::source::{Source, SourceError, Step};
use super::{api_error, collection_path, metadata_str};
use crate::listed::{Text, with_type_meta};
use crate::{ClusterError, Event, EventStream, Identity, Listed, Resource, Selector};
use ::kube::Client;
use ::kube::runtime::WatchStreamExt as _;
use futures::StreamExt as _;
use operon_data::model::{FieldOperator, LabelOperator, LabelSelector, WatchEvent};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::hash::{Hash as _, Hasher as _};
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::{mpsc, oneshot};

/// What makes two list+watch requests the same request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct WatchKey {
    resource: Resource,
    namespace: Option<String>,
    labels: String,
    fields: String,
}

/// A binding joining a watch: where its events go, and where its initial list goes.
struct Join {
    events: mpsc::UnboundedSender<Event>,
    initial: oneshot::Sender<Result<Listed, ClusterError>>,
}

/// The open watches of one client.
#[derive(Default)]
pub(super) struct Watches {
    open: Mutex<HashMap<WatchKey, mpsc::UnboundedSender<Join>>>,
}

impl Watches {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<WatchKey, mpsc::UnboundedSender<Join>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many watches are open.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// Lists the objects a selector picks and streams every later change, through shared
/// watches: one per namespace and per name of the selector (as shell-operator opens
/// one informer per namespace and name), names becoming `metadata.name` field
/// selectors.
pub(super) async fn list_and_watch(
    watches: &Arc<Watches>,
    client: &Client,
    resource: &Resource,
    selector: &Selector,
) -> Result<(Listed, EventStream), ClusterError> {
    let (sender, receiver) = mpsc::unbounded_channel();
    let namespaces: Vec<Option<String>> = match (&selector.namespaces, resource.namespaced) {
        (Some(list), true) => list.iter().cloned().map(Some).collect(),
        _ => vec![None],
    };
    let names: Vec<Option<&str>> = match &selector.names {
        Some(list) => list.iter().map(|n| Some(n.as_str())).collect(),
        None => vec![None],
    };
    let labels = selector
        .labels
        .as_ref()
        .map(format_labels)
        .unwrap_or_default();
    let mut initial = Vec::new();
    for namespace in &namespaces {
        for name in &names {
            let mut fields = format_fields(selector);
            if let Some(name) = name {
                if !fields.is_empty() {
                    fields.push(',');
                }
                fields.push_str(&format!("metadata.name={name}"));
            }
            let key = WatchKey {
                resource: resource.clone(),
                namespace: namespace.clone(),
                labels: labels.clone(),
                fields,
            };
            initial.push(join(watches, client, key, sender.clone()));
        }
    }
    drop(sender);
    let mut objects = Listed::default();
    for list in initial {
        let list = list.await.map_err(ClusterError::WatchEnded)??;
        objects.append(list);
    }
    objects.sort();
    Ok((objects, receiver))
}

/// Joins the watch of `key`, opening it if nobody watches it yet.
fn join(
    watches: &Arc<Watches>,
    client: &Client,
    key: WatchKey,
    events: mpsc::UnboundedSender<Event>,
) -> oneshot::Receiver<Result<Listed, ClusterError>> {
    let (initial, receiver) = oneshot::channel();
    let mut request = Join { events, initial };
    let mut open = watches.lock();
    if let Some(joins) = open.get(&key) {
        // A watch whose task has ended refuses the join; a new one takes its place.
        match joins.send(request) {
            Ok(()) => return receiver,
            Err(mpsc::error::SendError(back)) => request = back,
        }
    }
    let (joins, join_receiver) = mpsc::unbounded_channel();
    let _ = joins.send(request);
    open.insert(key.clone(), joins);
    let type_meta = Arc::new((key.resource.api_version(), key.resource.kind.clone()));
    let task = WatchTask {
        type_meta,
        key,
        client: client.clone(),
        joins: join_receiver,
        watches: Arc::downgrade(watches),
        known: HashMap::new(),
        subscribers: Vec::new(),
        pending: Vec::new(),
        seen: None,
    };
    tokio::spawn(task.run());
    receiver
}

/// One shared watch.
struct WatchTask {
    key: WatchKey,
    /// The resource's `apiVersion` and `kind`, which list items lack.
    type_meta: Arc<(String, String)>,
    client: Client,
    joins: mpsc::UnboundedReceiver<Join>,
    watches: Weak<Watches>,
    /// Per object: a hash of its `resourceVersion`, with [`LISTED`] set once the
    /// current list saw it. Two words per object and no name: a watch of a whole
    /// cluster holds one entry per object it sees.
    known: HashMap<Identity, u64>,
    /// Bindings that have their initial list.
    subscribers: Vec<mpsc::UnboundedSender<Event>>,
    /// Bindings waiting for the current list to finish, with what it listed so far.
    pending: Vec<(Join, Listed)>,
    /// The last `resourceVersion` of a finished list or a watch event: the list a
    /// joining binding starts is not older, so the subscribers see nothing go back in
    /// time.
    seen: Option<String>,
}

impl WatchTask {
    async fn run(mut self) {
        let path = collection_path(&self.key.resource, self.key.namespace.as_deref());
        // Each pass of this loop lists afresh: at start and whenever a binding joins.
        loop {
            for join in std::iter::from_fn(|| self.joins.try_recv().ok()) {
                self.pending.push((join, Listed::default()));
            }
            let mut stream = Source::new(
                self.client.clone(),
                path.clone(),
                &self.key.labels,
                &self.key.fields,
                self.seen.clone(),
            )
            .into_stream()
            .default_backoff()
            .boxed();
            // Resolves once every subscriber dropped its stream, so a watch nobody
            // reads closes without waiting for its next event; rebuilt when the
            // subscribers change.
            let mut all_closed: Option<Pin<Box<dyn Future<Output = ()> + Send>>> = None;
            loop {
                if all_closed.is_none() && !self.subscribers.is_empty() {
                    let senders = self.subscribers.clone();
                    all_closed = Some(Box::pin(async move {
                        for sender in &senders {
                            sender.closed().await;
                        }
                    }));
                }
                let subscribers = self.subscribers.len();
                let closing = async {
                    match all_closed.as_mut() {
                        Some(closed) => closed.await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    join = self.joins.recv() => {
                        let Some(join) = join else { return };
                        self.pending.push((join, Listed::default()));
                        break;
                    }
                    item = stream.next() => match item {
                        Some(Ok(event)) => self.handle(event),
                        Some(Err(error)) => self.failed(error),
                        None => break,
                    },
                    () = closing => {}
                }
                // A page of a list, or a body frame of many events, is handled without
                // waiting on anything: this hands the thread to the bindings reading
                // the events once the task's share of the runtime is used, so that they
                // keep up, rather than holding a whole list's events in their queues.
                tokio::task::consume_budget().await;
                self.subscribers.retain(|s| !s.is_closed());
                if self.subscribers.len() != subscribers {
                    all_closed = None;
                }
                self.pending.retain(|(join, _)| !join.initial.is_closed());
                if self.subscribers.is_empty() && self.pending.is_empty() {
                    if self.close() {
                        return;
                    }
                    // A binding joined as the last one left: it waits for a list.
                    break;
                }
            }
        }
    }

    /// Keeps the `resourceVersion` of an object a watch event carried as the last one
    /// seen, and returns it (empty when the object has none).
    fn saw<'o>(&mut self, object: &'o Value) -> &'o str {
        let version = metadata_str(object, "resourceVersion").unwrap_or("");
        if !version.is_empty() {
            super::source::remember(&mut self.seen, version);
        }
        version
    }

    /// Unregisters the watch when nobody joined meanwhile; false if someone did.
    fn close(&mut self) -> bool {
        let Some(watches) = self.watches.upgrade() else {
            return true;
        };
        let mut open = watches.lock();
        if let Ok(join) = self.joins.try_recv() {
            self.pending.push((join, Listed::default()));
            return false;
        }
        open.remove(&self.key);
        true
    }

    fn failed(&mut self, error: SourceError) {
        let what = format!(
            "watch of {} {}",
            self.key.resource.plural,
            self.key.namespace.as_deref().unwrap_or("(all namespaces)")
        );
        // A refusal (forbidden, not found, a bad selector) will not heal by retrying:
        // a binding waiting for its first list gets it as its error.
        if let SourceError::List(::kube::Error::Api(status)) = &error
            && (400..500).contains(&status.code)
            && status.code != 410
            && status.code != 429
        {
            let error = api_error(::kube::Error::Api(status.clone()), &what);
            for (join, _) in self.pending.drain(..) {
                let _ = join.initial.send(Err(error.clone()));
            }
        }
        tracing::warn!(watch = %what, error = %error, "watch failed; retrying with backoff");
    }

    fn handle(&mut self, step: Step) {
        match step {
            Step::Init => {
                for seen in self.known.values_mut() {
                    *seen &= !LISTED;
                }
                for (_, listed) in &mut self.pending {
                    *listed = Listed::default();
                }
            }
            Step::Listed(object) => self.listed(object),
            Step::ListDone(version) => {
                self.seen = Some(version);
                let mut gone = Vec::new();
                self.known.retain(|identity, seen| {
                    let keep = *seen & LISTED != 0;
                    if !keep {
                        gone.push(*identity);
                    }
                    keep
                });
                for identity in gone {
                    self.send(WatchEvent::Deleted, self.tombstone(), Some(identity));
                }
                for (join, listed) in self.pending.drain(..) {
                    if join.initial.send(Ok(listed)).is_ok() {
                        self.subscribers.push(join.events);
                    }
                }
            }
            Step::Applied(object) => {
                let object = self.value(object);
                self.applied(object);
            }
            Step::Deleted(object) => {
                let object = self.value(object);
                self.saw(&object);
                self.known.remove(&Identity::of_object(&object));
                self.send(WatchEvent::Deleted, object, None);
            }
        }
    }

    /// An object of the list. Each binding waiting for the list gets it as text, and
    /// the subscribers an event for it when it changed since they last saw it (a
    /// re-list after a gap): the watch decodes only its metadata otherwise.
    fn listed(&mut self, object: Box<RawValue>) {
        let Ok(head) = serde_json::from_str::<Head<'_>>(object.get()) else {
            // Metadata of an unusual shape (a null, a repeated field): the object is
            // read whole, as a watch event is.
            match serde_json::from_str(object.get()) {
                Ok(value) => self.listed_value(self.value(value)),
                Err(error) => tracing::warn!(
                    watch = %self.key.resource.plural,
                    error = %error,
                    "a listed object does not decode; it is left out of the list"
                ),
            }
            return;
        };
        let meta = head.metadata.unwrap_or_default();
        let text = |field: &Option<Cow<'_, str>>| field.as_deref().unwrap_or_default().to_owned();
        let (namespace, name) = (text(&meta.namespace), text(&meta.name));
        let version = meta.resource_version.as_deref().unwrap_or_default();
        let kind = self
            .record(Identity::of(&namespace, &name), version)
            .filter(|_| !self.subscribers.is_empty());
        if let Some(kind) = kind {
            match serde_json::from_str(object.get()) {
                Ok(value) => {
                    let value = self.value(value);
                    self.send(kind, value, None);
                }
                Err(error) => tracing::warn!(
                    watch = %self.key.resource.plural,
                    object = %crate::namespaced_name(Some(namespace.as_str()).filter(|n| !n.is_empty()), &name),
                    error = %error,
                    "a listed object does not decode; its change is not reported"
                ),
            }
        }
        // The last binding to need the text takes this one, the others copies: usually
        // one binding joins a watch nobody else reads, and the list holds it once.
        let Some(((_, last), others)) = self.pending.split_last_mut() else {
            return;
        };
        let text = Text {
            namespace: namespace.into(),
            name: name.into(),
            json: Box::<str>::from(object),
            type_meta: Arc::clone(&self.type_meta),
        };
        for (_, listed) in others {
            listed.push_text(text.clone());
        }
        last.push_text(text);
    }

    /// A listed object the watch had to decode whole: as [`Self::listed`], with values.
    fn listed_value(&mut self, object: Value) {
        let kind = self
            .record_object(&object)
            .filter(|_| !self.subscribers.is_empty());
        for (_, listed) in &mut self.pending {
            listed.push_value(object.clone());
        }
        if let Some(kind) = kind {
            self.send(kind, object, None);
        }
    }

    /// An object listed or seen by the watch: an event for the subscribers unless its
    /// `resourceVersion` is the one they already saw.
    fn applied(&mut self, object: Value) {
        let version = self.saw(&object);
        if let Some(kind) = self.record(Identity::of_object(&object), version) {
            self.send(kind, object, None);
        }
    }

    /// [`Self::record`] of a decoded object.
    fn record_object(&mut self, object: &Value) -> Option<WatchEvent> {
        let version = metadata_str(object, "resourceVersion").unwrap_or("");
        self.record(Identity::of_object(object), version)
    }

    /// Remembers that the watch saw the object `identity` at `version`; the event it is
    /// for the subscribers, if any: none when that version is the one they already saw.
    fn record(&mut self, identity: Identity, version: &str) -> Option<WatchEvent> {
        let version = hash(version);
        let previous = self.known.insert(identity, version | LISTED);
        match previous {
            None => Some(WatchEvent::Added),
            Some(before) if before & !LISTED != version => Some(WatchEvent::Modified),
            Some(_) => None,
        }
    }

    fn send(&self, kind: WatchEvent, object: Value, deleted_final_state_unknown: Option<Identity>) {
        if self.subscribers.is_empty() {
            return;
        }
        let object = Arc::new(object);
        let received = std::time::Instant::now();
        for subscriber in &self.subscribers {
            let _ = subscriber.send(Event {
                kind,
                object: Arc::clone(&object),
                deleted_final_state_unknown,
                received,
            });
        }
    }

    /// The JSON of an object, with `apiVersion` and `kind` (list items lack them),
    /// otherwise as the API server sent it.
    fn value(&self, object: Value) -> Value {
        with_type_meta(object, &self.type_meta.0, &self.type_meta.1)
    }

    /// The object of a deletion noticed by a re-list: its type; the event's
    /// [`Identity`] says which object it was.
    fn tombstone(&self) -> Value {
        serde_json::json!({
            "apiVersion": self.key.resource.api_version(),
            "kind": self.key.resource.kind,
            "metadata": {},
        })
    }
}

/// What the watch reads of a listed object to record it.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow, default)]
    metadata: Option<HeadMeta<'a>>,
}

#[derive(Deserialize, Default)]
struct HeadMeta<'a> {
    #[serde(borrow, default)]
    namespace: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "resourceVersion")]
    resource_version: Option<Cow<'a, str>>,
}

/// The bit of a [`WatchTask::known`] entry that says the current list saw the object.
const LISTED: u64 = 1;

/// A `resourceVersion`'s hash, its lowest bit left for [`LISTED`].
fn hash(text: &str) -> u64 {
    // SipHash with fixed keys: the same version always hashes the same.
    let mut hasher = std::hash::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish() & !LISTED
}

/// A label selector in the API's query syntax.
fn format_labels(selector: &LabelSelector) -> String {
    let mut parts: Vec<String> = selector
        .match_labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for requirement in &selector.match_expressions {
        let key = &requirement.key;
        let values = requirement.values.join(",");
        parts.push(match requirement.operator {
            LabelOperator::In => format!("{key} in ({values})"),
            LabelOperator::NotIn => format!("{key} notin ({values})"),
            LabelOperator::Exists => key.clone(),
            LabelOperator::DoesNotExist => format!("!{key}"),
        });
    }
    parts.join(",")
}

/// A field selector in the API's query syntax.
fn format_fields(selector: &Selector) -> String {
    selector
        .fields
        .iter()
        .map(|f| match f.operator {
            FieldOperator::Equals => format!("{}={}", f.field, f.value),
            FieldOperator::NotEquals => format!("{}!={}", f.field, f.value),
        })
        .collect::<Vec<_>>()
        .join(",")
}
