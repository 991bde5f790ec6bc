//! Kubernetes Events on a Diagnosis (events.k8s.io/v1, through kube-runtime's
//! recorder): a node started, a node failed and why, the Diagnosis ended; what
//! `kubectl describe diagnosis` shows under Events.
//!
//! Events are published from a task of their own: a slow or refused Event never holds
//! up the pipeline, and losing one loses no record (the status is the record).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};
use operon_data::api::{Diagnosis, NodePhase, NodeRecord};

/// Events are notes for people; an error message past this is cut (the API server
/// refuses notes over 1 kB).
const NOTE_MAX: usize = 1000;

/// Publishes the Events of one Diagnosis.
#[derive(Clone)]
pub(crate) struct Events {
    recorder: Recorder,
    reference: ObjectReference,
}

impl Events {
    /// Events about `diagnosis`, published by `recorder`.
    pub(crate) fn new(recorder: Recorder, diagnosis: &Diagnosis) -> Self {
        Self {
            recorder,
            reference: kube::Resource::object_ref(diagnosis, &()),
        }
    }

    /// Publishes one Event without waiting for it. Events of one `reason` and `action`
    /// are counted as one series with the first note, so an action names its node.
    pub(crate) fn publish(&self, type_: EventType, reason: &str, action: &str, note: String) {
        let recorder = self.recorder.clone();
        let reference = self.reference.clone();
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(cut(note)),
            action: action.to_owned(),
            secondary: None,
        };
        tokio::spawn(async move {
            if let Err(e) = recorder.publish(&event, &reference).await {
                tracing::debug!(error = %e, reason = %event.reason, "cannot publish an Event");
            }
        });
    }

    /// Node `id` is about to run.
    pub(crate) fn node_started(&self, id: usize, operation: &str) {
        self.publish(
            EventType::Normal,
            "NodeStarted",
            &format!("RunNode{id}"),
            format!("node {id} ({operation}) started"),
        );
    }

    /// A node failed (successes are in the status; an Event each would be noise).
    pub(crate) fn node_finished(&self, record: &NodeRecord) {
        if record.phase == NodePhase::Failed {
            self.publish(
                EventType::Warning,
                "NodeFailed",
                &format!("RunNode{}", record.id),
                format!(
                    "node {} ({}) failed after {} ms: {}",
                    record.id,
                    record.operation,
                    record.duration_millis,
                    record.error.as_deref().unwrap_or("")
                ),
            );
        }
    }
}

fn cut(mut note: String) -> String {
    if note.len() > NOTE_MAX {
        let mut end = NOTE_MAX - 3;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push_str("...");
    }
    note
}

#[cfg(test)]
mod tests {
    use super::cut;

    #[test]
    fn long_notes_are_cut_on_a_character_boundary() {
        let note = cut("é".repeat(800));
        assert!(note.len() <= 1000);
        assert!(note.ends_with("..."));
        assert_eq!(cut("short".to_owned()), "short");
    }
}
