//! Kubernetes-event Triggers: watches core/v1 and events.k8s.io/v1 Events in every
//! namespace while at least one valid event Trigger exists, and creates a Diagnosis
//! for each Trigger an Event occurrence matches.
//!
//! Which Events count: those whose last occurrence
//! ([`last_occurrence`](operon_pipeline::triggers::last_occurrence)) is no earlier than
//! [`LOOKBACK`] before the controller started, and no earlier than the Trigger's own
//! creation. A (re-)list replays every stored Event (an hour of them by default);
//! without the first rule a new leader would act on all of them, and without the
//! second a new Trigger would act on history. The lookback covers a leader hand-over;
//! what the previous leader already created comes back as AlreadyExists, since the
//! names are deterministic.
//!
//! The API server stores Events once and serves them through both APIs, so each
//! occurrence arrives twice: converted to the same core shape it yields the same
//! Diagnosis name, and a short memory of the occurrences handled (uid and
//! resourceVersion) saves the second POST.

use super::catalog::Snapshot;
use super::create::DiagnosisCreator;
use futures::{Stream, StreamExt as _};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::api::events::v1 as events_v1;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event as WatchEvent};
use kube::{Api, Client};
use operon_pipeline::triggers::{SourceKind, from_events_v1, last_occurrence};
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use tokio::sync::watch;

/// How far before the controller's start an Event may have occurred and still count.
pub(crate) const LOOKBACK: SignedDuration = SignedDuration::from_secs(120);
/// Occurrences remembered to skip their second arrival.
const REMEMBERED: usize = 8192;

/// Whether any valid Trigger listens to Events.
fn wanted(snapshot: &Snapshot) -> bool {
    snapshot
        .compiled()
        .any(|(_, compiled)| compiled.kind() == SourceKind::KubernetesEvent)
}

/// Watches Events while event Triggers exist, until the task is dropped.
pub(super) async fn run(
    client: Client,
    mut snapshots: watch::Receiver<Snapshot>,
    creator: Arc<DiagnosisCreator>,
    started: Timestamp,
) {
    let mut matcher = EventMatcher::new(started);
    loop {
        // Nothing to watch (no event Trigger): wait for one, costing the API server
        // nothing meanwhile.
        if snapshots
            .wait_for(|snapshot| snapshot.listed && wanted(snapshot))
            .await
            .is_err()
        {
            return;
        }
        tracing::info!("watching core/v1 and events.k8s.io/v1 Events for event Triggers");
        let mut events = std::pin::pin!(futures::stream::select(
            core_events(client.clone()),
            v1_events(client.clone())
        ));
        loop {
            tokio::select! {
                changed = snapshots.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    if !wanted(&snapshots.borrow()) {
                        tracing::info!("no event Trigger left: stopped watching Events");
                        break;
                    }
                }
                event = events.next() => match event {
                    Some(Ok(event)) => {
                        let snapshot = snapshots.borrow().clone();
                        matcher.handle(&snapshot, &creator, &event).await;
                    }
                    Some(Err(e)) => tracing::warn!(error = %e, "watching Events failed; retrying"),
                    None => break,
                },
            }
        }
    }
}

/// Applied core/v1 Events.
fn core_events(client: Client) -> impl Stream<Item = Result<Event, watcher::Error>> {
    applied(watcher::watcher(
        Api::<Event>::all(client),
        watcher::Config::default(),
    ))
}

/// Applied events.k8s.io/v1 Events, in the core shape.
fn v1_events(client: Client) -> impl Stream<Item = Result<Event, watcher::Error>> {
    applied(watcher::watcher(
        Api::<events_v1::Event>::all(client),
        watcher::Config::default(),
    ))
    .map(|event| event.map(from_events_v1))
}

/// The objects added or changed, listed or watched (deletions say nothing new), with
/// backoff on errors.
fn applied<K: Clone + Send + 'static>(
    stream: impl Stream<Item = Result<WatchEvent<K>, watcher::Error>> + Send,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send {
    stream.default_backoff().filter_map(|event| async move {
        match event {
            Ok(WatchEvent::Apply(object) | WatchEvent::InitApply(object)) => Some(Ok(object)),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        }
    })
}

/// Matches Event occurrences against the event Triggers.
pub(super) struct EventMatcher {
    started: Timestamp,
    /// Occurrences handled, oldest first, to forget the oldest.
    order: VecDeque<String>,
    seen: HashSet<String>,
}

impl EventMatcher {
    pub(super) fn new(started: Timestamp) -> Self {
        Self {
            started,
            order: VecDeque::new(),
            seen: HashSet::new(),
        }
    }

    /// Creates a Diagnosis for each Trigger of `snapshot` that `event` matches, when
    /// the occurrence counts and was not handled already.
    pub(super) async fn handle(
        &mut self,
        snapshot: &Snapshot,
        creator: &DiagnosisCreator,
        event: &Event,
    ) {
        let Some(occurred) = last_occurrence(event) else {
            return;
        };
        if occurred < self.started - LOOKBACK || !self.remember(event) {
            return;
        }
        for (trigger, compiled) in snapshot.compiled() {
            let created = trigger.metadata.creation_timestamp.as_ref().map(|t| t.0);
            if created.is_some_and(|created| occurred < created) {
                continue;
            }
            let Some(new) = compiled.match_event(event) else {
                continue;
            };
            if let Err(e) = creator.create(trigger, compiled, new).await {
                // Not retried: an Event is seen again only if it occurs again. The
                // counter and this line are what is left of it.
                tracing::warn!(trigger = %compiled.name(), error = %e,
                    "could not create the Diagnosis of an Event");
            }
        }
    }

    /// Records the occurrence; `false` when it was handled already.
    fn remember(&mut self, event: &Event) -> bool {
        let meta = &event.metadata;
        let key = format!(
            "{}/{}/{}/{}",
            meta.namespace.as_deref().unwrap_or_default(),
            meta.uid
                .as_deref()
                .unwrap_or_else(|| meta.name.as_deref().unwrap_or_default()),
            meta.resource_version.as_deref().unwrap_or_default(),
            event.count.unwrap_or(0),
        );
        if !self.seen.insert(key.clone()) {
            return false;
        }
        self.order.push_back(key);
        if self.order.len() > REMEMBERED
            && let Some(oldest) = self.order.pop_front()
        {
            self.seen.remove(&oldest);
        }
        true
    }
}
