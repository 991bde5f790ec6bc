//! Kubernetes events: a compiled `kubernetesEventTemplate` that matches core/v1 Events,
//! the subject (pod or node) an Event's Diagnosis is about, and events.k8s.io/v1
//! Events in the core/v1 shape the matcher reads.

use super::{Problems, matches_optional};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event, EventSeries};
use k8s_openapi::api::events::v1 as events_v1;
use operon_data::api::{KubernetesEventTemplate, PodReference};
use regex::Regex;

/// An events.k8s.io/v1 Event as the API server serves the same object through
/// core/v1 (the two APIs store Events once): `note` is `message`, `regarding`
/// `involvedObject`, `reportingController` `reportingComponent`, and the `deprecated*`
/// fields the core ones. So the same occurrence seen through either API has the same
/// identity, and makes the same Diagnosis name.
pub fn from_events_v1(event: events_v1::Event) -> Event {
    Event {
        metadata: event.metadata,
        involved_object: event.regarding.unwrap_or_default(),
        reason: event.reason,
        message: event.note,
        source: event.deprecated_source,
        first_timestamp: event.deprecated_first_timestamp,
        last_timestamp: event.deprecated_last_timestamp,
        count: event.deprecated_count,
        type_: event.type_,
        event_time: event.event_time,
        series: event.series.map(|series| EventSeries {
            count: Some(series.count),
            last_observed_time: Some(series.last_observed_time),
        }),
        action: event.action,
        related: event.related,
        reporting_component: event.reporting_controller,
        reporting_instance: event.reporting_instance,
    }
}

/// When the Event last occurred: the latest of `series.lastObservedTime`,
/// `lastTimestamp`, `eventTime`, `firstTimestamp` and, for an Event that sets none,
/// its creation.
pub fn last_occurrence(event: &Event) -> Option<Timestamp> {
    let series = event
        .series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref())
        .map(|t| t.0);
    [
        series,
        event.last_timestamp.as_ref().map(|t| t.0),
        event.event_time.as_ref().map(|t| t.0),
        event.first_timestamp.as_ref().map(|t| t.0),
    ]
    .into_iter()
    .flatten()
    .max()
    .or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// A compiled `kubernetesEventTemplate`. A field missing from the Event is matched as
/// the empty string, so `^$` selects Events without it.
#[derive(Debug, Clone)]
pub(super) struct EventMatcher {
    name: Option<Regex>,
    namespace: Option<Regex>,
    reason: Option<Regex>,
    message: Option<Regex>,
    component: Option<Regex>,
    host: Option<Regex>,
}

impl EventMatcher {
    /// Compiles `template` (at `field`), or records why it does not compile.
    pub(super) fn compile(
        template: &KubernetesEventTemplate,
        field: &str,
        problems: &mut Problems,
    ) -> Option<Self> {
        let before = problems.len();
        let regexp = &template.regexp;
        let source = regexp.source.clone().unwrap_or_default();
        let mut compile = |name: &str, pattern: &Option<String>| {
            pattern
                .as_deref()
                .and_then(|p| problems.regex(&format!("{field}.regexp.{name}"), p))
        };
        let matcher = Self {
            name: compile("name", &regexp.name),
            namespace: compile("namespace", &regexp.namespace),
            reason: compile("reason", &regexp.reason),
            message: compile("message", &regexp.message),
            component: compile("source.component", &source.component),
            host: compile("source.host", &source.host),
        };
        (problems.len() == before).then_some(matcher)
    }

    /// Whether every set regular expression matches `event`.
    pub(super) fn matches(&self, event: &Event) -> bool {
        fn text(value: Option<&String>) -> &str {
            value.map_or("", String::as_str)
        }
        let source = event.source.as_ref();
        // Components that record through events.k8s.io (the scheduler, for one) leave
        // `source` empty and fill `reportingComponent`, which names the same thing.
        let component = source
            .and_then(|s| s.component.as_ref())
            .filter(|c| !c.is_empty())
            .or(event.reporting_component.as_ref());
        matches_optional(self.name.as_ref(), text(event.metadata.name.as_ref()))
            && matches_optional(
                self.namespace.as_ref(),
                text(event.metadata.namespace.as_ref()),
            )
            && matches_optional(self.reason.as_ref(), text(event.reason.as_ref()))
            && matches_optional(self.message.as_ref(), text(event.message.as_ref()))
            && matches_optional(self.component.as_ref(), text(component))
            && matches_optional(
                self.host.as_ref(),
                text(source.and_then(|s| s.host.as_ref())),
            )
    }
}

/// What an Event's Diagnosis is about, as far as the Event says.
#[derive(Debug, Default)]
pub(super) struct Subject {
    pub(super) node_name: Option<String>,
    pub(super) pod_reference: Option<PodReference>,
}

/// The Event's involved object when it is a Pod or a Node. `source.host` is not used:
/// it names the reporter's host, which is the subject's node only for kubelet events.
pub(super) fn subject(event: &Event) -> Subject {
    let object = &event.involved_object;
    let core = object
        .api_version
        .as_deref()
        .is_none_or(|v| v.is_empty() || v == "v1");
    let name = object.name.clone().filter(|n| !n.is_empty());
    match (core, object.kind.as_deref(), name) {
        (true, Some("Pod"), Some(name)) => {
            // Events about a Pod live in its namespace, so either one names it.
            let namespace = object
                .namespace
                .clone()
                .or_else(|| event.metadata.namespace.clone())
                .filter(|n| !n.is_empty());
            Subject {
                node_name: None,
                pod_reference: namespace.map(|namespace| PodReference {
                    namespace,
                    name,
                    container: object.field_path.as_deref().and_then(container_of),
                }),
            }
        }
        (true, Some("Node"), Some(name)) => Subject {
            node_name: Some(name),
            pod_reference: None,
        },
        _ => Subject::default(),
    }
}

/// The container in a `fieldPath` such as `spec.containers{app}`: the kubelet names
/// the container an event is about that way.
fn container_of(field_path: &str) -> Option<String> {
    let (list, rest) = field_path.split_once('{')?;
    let name = rest.strip_suffix('}')?;
    let known = matches!(
        list,
        "spec.containers" | "spec.initContainers" | "spec.ephemeralContainers"
    );
    (known && !name.is_empty()).then(|| name.to_owned())
}

/// What identifies one occurrence of an Event: its uid and how many times it has
/// occurred (the kubelet bumps `count`, events.k8s.io recorders `series.count`), or,
/// for an Event with no uid, its name and resourceVersion.
pub(super) fn identity(event: &Event) -> Vec<String> {
    let meta = &event.metadata;
    let text = |value: &Option<String>| value.clone().unwrap_or_default();
    match meta.uid.as_deref().filter(|uid| !uid.is_empty()) {
        Some(uid) => vec![
            "uid".to_owned(),
            uid.to_owned(),
            event.count.unwrap_or(0).to_string(),
            event
                .series
                .as_ref()
                .and_then(|s| s.count)
                .unwrap_or(0)
                .to_string(),
        ],
        None => vec![
            "name".to_owned(),
            text(&meta.namespace),
            text(&meta.name),
            text(&meta.resource_version),
        ],
    }
}

/// A one-line description of the Event, for the Diagnosis' cause annotation.
pub(super) fn cause(event: &Event) -> String {
    let text = |value: &Option<String>| value.clone().unwrap_or_default();
    format!(
        "Event {}/{} reason={:?} count={} involvedObject={}/{}",
        text(&event.metadata.namespace),
        text(&event.metadata.name),
        text(&event.reason),
        event.count.unwrap_or(0),
        text(&event.involved_object.kind),
        text(&event.involved_object.name),
    )
}

#[cfg(test)]
mod tests {
    use super::super::new_diagnosis::tests::assert_valid_name;
    use super::super::tests::trigger;
    use super::super::{CompiledTrigger, SOURCE_LABEL};
    use super::*;

    fn compiled(regexp: &str) -> CompiledTrigger {
        let yaml = format!(
            "metadata: {{name: events}}\nspec:\n  operationSet: s\n  nodeName: fallback\n  \
             sourceTemplate:\n    kubernetesEventTemplate:\n      regexp: {regexp}\n"
        );
        CompiledTrigger::new(&trigger(&yaml)).expect("valid Trigger")
    }

    fn event(json: serde_json::Value) -> Event {
        serde_json::from_value(json).expect("event JSON")
    }

    fn pod_event() -> Event {
        event(serde_json::json!({
            "metadata": {
                "name": "cart-0.17a2b3c4d5e6f708",
                "namespace": "shop",
                "uid": "5f1e0c2a-0000-4000-8000-000000000001",
                "resourceVersion": "1234",
            },
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": "cart-0",
                "namespace": "shop",
                "fieldPath": "spec.containers{app}",
            },
            "reason": "BackOff",
            "message": "Back-off restarting failed container app",
            "source": {"component": "kubelet", "host": "node-1"},
            "count": 3,
            "type": "Warning",
        }))
    }

    fn node_event() -> Event {
        event(serde_json::json!({
            "metadata": {"name": "node-2.17a2b3c4", "namespace": "default", "uid": "u-2"},
            "involvedObject": {"kind": "Node", "name": "node-2", "uid": "node-2"},
            "reason": "NodeHasDiskPressure",
            "message": "Node node-2 status is now: NodeHasDiskPressure",
            "source": {"component": "kubelet", "host": "node-2"},
            "count": 1,
        }))
    }

    #[test]
    fn a_pod_event_is_about_the_pod_and_its_container() {
        let t = compiled(
            "{reason: ^BackOff$, message: restarting, namespace: ^shop$, name: ^cart-, \
             source: {component: kubelet, host: node-}}",
        );
        let new = t.match_event(&pod_event()).expect("matches");
        assert_valid_name(&new.name);
        assert!(
            new.name.starts_with("kubernetes-event.events."),
            "{}",
            new.name
        );
        assert_eq!(new.labels[SOURCE_LABEL], "kubernetes-event");
        assert_eq!(
            new.spec.pod_reference,
            Some(PodReference {
                namespace: "shop".into(),
                name: "cart-0".into(),
                container: Some("app".into()),
            })
        );
        assert_eq!(new.spec.node_name.as_deref(), Some("fallback"));
    }

    #[test]
    fn a_node_event_is_about_the_node() {
        let t = compiled("{reason: DiskPressure}");
        let new = t.match_event(&node_event()).expect("matches");
        assert_eq!(new.spec.node_name.as_deref(), Some("node-2"));
        assert_eq!(new.spec.pod_reference, None);
        assert!(t.match_event(&pod_event()).is_none());
    }

    #[test]
    fn other_objects_fall_back_to_the_trigger_node() {
        let t = compiled("{}");
        let mut event = pod_event();
        event.involved_object.kind = Some("Deployment".into());
        event.involved_object.api_version = Some("apps/v1".into());
        let new = t.match_event(&event).expect("matches");
        assert_eq!(new.spec.node_name.as_deref(), Some("fallback"));
        assert_eq!(new.spec.pod_reference, None);
    }

    #[test]
    fn each_field_can_reject() {
        for regexp in [
            "{name: ^other}",
            "{namespace: ^kube-system$}",
            "{reason: ^Failed$}",
            "{message: OOM}",
            "{source: {component: scheduler}}",
            "{source: {host: node-9}}",
        ] {
            assert!(
                compiled(regexp).match_event(&pod_event()).is_none(),
                "{regexp} should not match"
            );
        }
    }

    #[test]
    fn missing_fields_match_as_empty() {
        let t = compiled("{message: '^$', source: {host: '^$'}}");
        let mut event = pod_event();
        assert!(t.match_event(&event).is_none());
        event.message = None;
        event.source = None;
        assert!(t.match_event(&event).is_some());
    }

    #[test]
    fn reporting_component_stands_in_for_an_empty_source() {
        let t = compiled("{source: {component: ^default-scheduler$}}");
        let mut event = pod_event();
        event.source = None;
        event.reporting_component = Some("default-scheduler".into());
        assert!(t.match_event(&event).is_some());
    }

    #[test]
    fn names_follow_occurrences() {
        let t = compiled("{}");
        let first = t.match_event(&pod_event()).expect("matches").name;
        assert_eq!(t.match_event(&pod_event()).expect("matches").name, first);
        let mut again = pod_event();
        again.count = Some(4);
        assert_ne!(t.match_event(&again).expect("matches").name, first);

        // Without a uid, name and resourceVersion identify the occurrence.
        let mut no_uid = pod_event();
        no_uid.metadata.uid = None;
        let by_version = t.match_event(&no_uid).expect("matches").name;
        assert_ne!(by_version, first);
        no_uid.metadata.resource_version = Some("1235".into());
        assert_ne!(t.match_event(&no_uid).expect("matches").name, by_version);
    }

    /// What `kubectl get events.v1.events.k8s.io -o json` shows for a scheduler event.
    fn scheduler_event_v1() -> events_v1::Event {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {
                "name": "cart-0.17c9f0e1a2b3c4d5",
                "namespace": "shop",
                "uid": "9d0c1f2e-0000-4000-8000-000000000002",
                "resourceVersion": "4321",
                "creationTimestamp": "2024-05-01T10:00:00Z",
            },
            "eventTime": "2024-05-01T10:00:00.123456Z",
            "series": {"count": 4, "lastObservedTime": "2024-05-01T10:05:00.000001Z"},
            "reportingController": "default-scheduler",
            "reportingInstance": "default-scheduler-control-plane",
            "action": "Scheduling",
            "reason": "FailedScheduling",
            "regarding": {
                "apiVersion": "v1", "kind": "Pod", "name": "cart-0",
                "namespace": "shop", "uid": "p-1", "resourceVersion": "99",
            },
            "note": "0/3 nodes are available: 3 Insufficient memory.",
            "type": "Warning",
            "deprecatedCount": 0,
        }))
        .expect("events.k8s.io/v1 Event JSON")
    }

    #[test]
    fn events_v1_convert_to_the_core_shape() {
        let core = from_events_v1(scheduler_event_v1());
        assert_eq!(
            core.message.as_deref(),
            Some("0/3 nodes are available: 3 Insufficient memory.")
        );
        assert_eq!(core.reason.as_deref(), Some("FailedScheduling"));
        assert_eq!(core.involved_object.kind.as_deref(), Some("Pod"));
        assert_eq!(core.involved_object.name.as_deref(), Some("cart-0"));
        assert_eq!(
            core.reporting_component.as_deref(),
            Some("default-scheduler")
        );
        assert_eq!(
            core.reporting_instance.as_deref(),
            Some("default-scheduler-control-plane")
        );
        assert_eq!(core.action.as_deref(), Some("Scheduling"));
        assert_eq!(core.type_.as_deref(), Some("Warning"));
        assert_eq!(core.count, Some(0));
        assert_eq!(core.source, None);
        let series = core.series.as_ref().expect("series");
        assert_eq!(series.count, Some(4));
        assert_eq!(
            last_occurrence(&core),
            Some("2024-05-01T10:05:00.000001Z".parse().unwrap())
        );

        // The matcher reads it like a core Event: reportingController stands in for
        // the empty source, the note is the message, the regarded Pod the subject.
        let t = compiled(
            "{reason: ^FailedScheduling$, message: Insufficient, source: {component: ^default-scheduler$}}",
        );
        let new = t.match_event(&core).expect("matches");
        assert_eq!(
            new.spec.pod_reference,
            Some(PodReference {
                namespace: "shop".into(),
                name: "cart-0".into(),
                container: None,
            })
        );
    }

    #[test]
    fn both_apis_name_one_occurrence_alike() {
        let v1 = scheduler_event_v1();
        // The same object as core/v1 serves it.
        let core: Event = serde_json::from_value(serde_json::json!({
            "metadata": v1.metadata,
            "involvedObject": v1.regarding,
            "reason": "FailedScheduling",
            "message": "0/3 nodes are available: 3 Insufficient memory.",
            "source": {},
            "count": 0,
            "eventTime": "2024-05-01T10:00:00.123456Z",
            "series": {"count": 4, "lastObservedTime": "2024-05-01T10:05:00.000001Z"},
            "reportingComponent": "default-scheduler",
            "reportingInstance": "default-scheduler-control-plane",
            "action": "Scheduling",
            "type": "Warning",
        }))
        .unwrap();
        let t = compiled("{}");
        assert_eq!(
            t.match_event(&from_events_v1(v1)).unwrap().name,
            t.match_event(&core).unwrap().name
        );
    }

    #[test]
    fn last_occurrence_takes_the_latest_time_or_the_creation() {
        let mut event = pod_event();
        assert_eq!(last_occurrence(&event), None);
        event.metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2024-05-01T09:00:00Z".parse().unwrap(),
            ));
        assert_eq!(
            last_occurrence(&event),
            Some("2024-05-01T09:00:00Z".parse().unwrap())
        );
        event.first_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2024-05-01T09:10:00Z".parse().unwrap(),
        ));
        event.last_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2024-05-01T09:30:00Z".parse().unwrap(),
        ));
        assert_eq!(
            last_occurrence(&event),
            Some("2024-05-01T09:30:00Z".parse().unwrap())
        );
    }

    #[test]
    fn container_comes_from_the_field_path() {
        assert_eq!(container_of("spec.containers{app}").as_deref(), Some("app"));
        assert_eq!(
            container_of("spec.initContainers{init}").as_deref(),
            Some("init")
        );
        assert_eq!(container_of("spec.containers{}"), None);
        assert_eq!(container_of("metadata.name"), None);
    }
}
