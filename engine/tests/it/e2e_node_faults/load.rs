//! The load the fault suite runs its faults under: ConfigMaps for the admission hooks
//! and Pods for the labelling hooks, created at a fixed rate, each Pod's time of carrying
//! both labels, and what a fault did to them.

use crate::e2e_node::{SHELL_LABEL, WASM_LABEL, percentile};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Admission requests (ConfigMap creations) per second; Pods are created at half this
/// rate. Each Pod costs two patches, one per labelling hook: with the default client
/// limit of 5 requests per second (`--kube-client-qps`, shell-operator's default) a
/// backlog drains at 1 Pod per second, so the install allows 50.
pub(super) const RATE: f64 = 4.0;
/// The label the load's Pods carry.
pub(super) const LOAD_LABEL: &str = "e2e.operon.dev/load";

/// What one admission request came to.
#[derive(Debug, Clone, PartialEq)]
enum Admission {
    /// Admitted, with the mutating hook's label: the hooks were called.
    Checked,
    /// Admitted without it: the request passed unchecked.
    Unchecked,
    /// Refused because a webhook could not be called.
    Refused(String),
    /// The API server itself did not answer.
    ApiAway(String),
}

/// What the load did while a fault ran.
#[derive(Default)]
struct Record {
    /// Each Pod created, with when its creation returned.
    pods: BTreeMap<String, Instant>,
    /// Each admission request, with when it was sent.
    admissions: Vec<(Instant, Admission)>,
    /// The longest an admission request took to be answered, and when it was sent.
    slowest: Option<(Duration, Instant)>,
    /// Pod creations the API server did not answer.
    pods_not_created: usize,
}

/// ConfigMaps created at [`RATE`] and Pods at half of it in `namespace` until stopped, and each load
/// Pod's time of carrying both labels, polled every 300 ms.
pub(crate) struct Load {
    stop: Arc<AtomicBool>,
    creating: tokio::task::JoinHandle<Record>,
    labelled: Arc<Mutex<BTreeMap<String, Instant>>>,
    polling: tokio::task::JoinHandle<()>,
}

impl Load {
    pub(crate) fn start(
        client: &kube::Client,
        namespace: &str,
        prefix: &str,
        pod_image: &str,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        let creating = {
            let (stop, pods, prefix, image) = (
                stop.clone(),
                pods.clone(),
                prefix.to_owned(),
                pod_image.to_owned(),
            );
            tokio::spawn(async move {
                let mut record = Record::default();
                let period = Duration::from_secs_f64(1.0 / RATE);
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let tick = tokio::time::Instant::now();
                    n += 1;
                    let name = format!("{prefix}-{n}");
                    if n % 2 == 1 {
                        // Never scheduled (no node has the label): the hooks see it all
                        // the same, and the node is not loaded with containers.
                        let pod: Pod = serde_json::from_value(json!({
                            "metadata": {"name": name, "labels": {LOAD_LABEL: "true"}},
                            "spec": {"nodeSelector": {"e2e.operon.dev/nowhere": "true"},
                                     "containers": [{"name": "c", "image": image}]},
                        }))
                        .unwrap();
                        match pods.create(&PostParams::default(), &pod).await {
                            Ok(_) => {
                                record.pods.insert(name.clone(), Instant::now());
                            }
                            Err(_) => record.pods_not_created += 1,
                        }
                    }
                    let map: ConfigMap = serde_json::from_value(json!({
                        "metadata": {"name": name, "labels": {"app": "e2e-faults"}},
                    }))
                    .unwrap();
                    let sent = Instant::now();
                    let outcome = match maps.create(&PostParams::default(), &map).await {
                        Ok(created) => {
                            let labels = created.metadata.labels.unwrap_or_default();
                            if labels.contains_key("e2e.operon.dev/mutated") {
                                Admission::Checked
                            } else {
                                Admission::Unchecked
                            }
                        }
                        Err(kube::Error::Api(status))
                            if status.message.contains("failed calling webhook") =>
                        {
                            Admission::Refused(status.message)
                        }
                        Err(e) => Admission::ApiAway(e.to_string()),
                    };
                    let took = sent.elapsed();
                    if record.slowest.is_none_or(|(longest, _)| took > longest) {
                        record.slowest = Some((took, sent));
                    }
                    record.admissions.push((sent, outcome));
                    tokio::time::sleep_until(tick + period).await;
                }
                record
            })
        };
        let labelled = Arc::new(Mutex::new(BTreeMap::new()));
        // Until aborted by `finish`.
        let polling = {
            let labelled = labelled.clone();
            tokio::spawn(async move {
                let selector = ListParams::default().labels(&format!("{LOAD_LABEL}=true"));
                loop {
                    if let Ok(list) = pods.list(&selector).await {
                        let now = Instant::now();
                        let mut labelled = labelled.lock().unwrap();
                        for pod in list.items {
                            let labels = pod.metadata.labels.unwrap_or_default();
                            let both = [WASM_LABEL, SHELL_LABEL]
                                .iter()
                                .all(|l| labels.get(*l).map(String::as_str) == Some("true"));
                            if both {
                                labelled
                                    .entry(pod.metadata.name.unwrap_or_default())
                                    .or_insert(now);
                            }
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
            })
        };
        Self {
            stop,
            creating,
            labelled,
            polling,
        }
    }

    /// Stops creating, waits (at most `limit`) until every Pod created carries both
    /// labels, and reports the fault that began at `fault`.
    pub(crate) async fn finish(self, what: &str, fault: Instant, limit: Duration) -> Report {
        self.stop.store(true, Ordering::Relaxed);
        let record = self.creating.await.unwrap();
        let deadline = Instant::now() + limit;
        loop {
            let missing: Vec<String> = {
                let labelled = self.labelled.lock().unwrap();
                record
                    .pods
                    .keys()
                    .filter(|p| !labelled.contains_key(*p))
                    .cloned()
                    .collect()
            };
            if missing.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: {} of {} Pods were not labelled by both hooks within {limit:?}: {:?}",
                missing.len(),
                record.pods.len(),
                &missing[..missing.len().min(10)]
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        self.polling.abort();
        let labelled = self.labelled.lock().unwrap().clone();
        Report::new(what, fault, &record, &labelled)
    }
}

/// What one fault came to.
pub(crate) struct Report {
    what: String,
    pods: usize,
    pods_not_created: usize,
    /// From the fault to the first label on a Pod created after it.
    flowing_again: Option<Duration>,
    /// Creation to both labels, sorted.
    latencies: Vec<Duration>,
    checked: usize,
    unchecked: usize,
    refused: usize,
    api_away: usize,
    /// From the fault to the first and the last refused request.
    refused_window: Option<(Duration, Duration)>,
    unchecked_window: Option<(Duration, Duration)>,
    /// The longest an admission request waited for its answer, and when it was sent
    /// (from the fault; negative when before it).
    slowest: Option<(Duration, f64)>,
}

impl Report {
    fn new(
        what: &str,
        fault: Instant,
        record: &Record,
        labelled: &BTreeMap<String, Instant>,
    ) -> Self {
        let mut latencies: Vec<Duration> = record
            .pods
            .iter()
            .filter_map(|(name, created)| {
                Some(labelled.get(name)?.saturating_duration_since(*created))
            })
            .collect();
        latencies.sort();
        let flowing_again = record
            .pods
            .iter()
            .filter(|(_, created)| **created > fault)
            .filter_map(|(name, _)| labelled.get(name))
            .min()
            .map(|at| at.saturating_duration_since(fault));
        let window = |kind: fn(&Admission) -> bool| {
            let times: Vec<Duration> = record
                .admissions
                .iter()
                .filter(|(_, a)| kind(a))
                .map(|(at, _)| at.saturating_duration_since(fault))
                .collect();
            Some((*times.first()?, *times.last()?))
        };
        let count = |kind: fn(&Admission) -> bool| {
            record.admissions.iter().filter(|(_, a)| kind(a)).count()
        };
        Self {
            what: what.to_owned(),
            pods: record.pods.len(),
            pods_not_created: record.pods_not_created,
            flowing_again,
            latencies,
            checked: count(|a| *a == Admission::Checked),
            unchecked: count(|a| *a == Admission::Unchecked),
            refused: count(|a| matches!(a, Admission::Refused(_))),
            api_away: count(|a| matches!(a, Admission::ApiAway(_))),
            refused_window: window(|a| matches!(a, Admission::Refused(_))),
            unchecked_window: window(|a| *a == Admission::Unchecked),
            slowest: record.slowest.map(|(took, sent)| {
                let after = if sent >= fault {
                    sent.duration_since(fault).as_secs_f64()
                } else {
                    -fault.duration_since(sent).as_secs_f64()
                };
                (took, after)
            }),
        }
    }

    pub(crate) fn print(&self) {
        let span = |w: Option<(Duration, Duration)>| match w {
            Some((from, to)) => format!(
                "{:.1} s to {:.1} s after the fault",
                from.as_secs_f64(),
                to.as_secs_f64()
            ),
            None => "none".to_owned(),
        };
        eprintln!(
            "{}: {} Pods created ({} creations unanswered), all labelled by both hooks; \
             labels flowing again {} after the fault; creation to both labels p50 {:?}, p99 {:?}, max {:?}; \
             admission: {} checked, {} unchecked ({}), {} refused ({}), {} with the API server away",
            self.what,
            self.pods,
            self.pods_not_created,
            self.flowing_again
                .map_or("(no Pod created after it)".to_owned(), |d| format!(
                    "{:.1} s",
                    d.as_secs_f64()
                )),
            percentile(&self.latencies, 0.5),
            percentile(&self.latencies, 0.99),
            self.latencies.last().copied().unwrap_or_default(),
            self.checked,
            self.unchecked,
            span(self.unchecked_window),
            self.refused,
            span(self.refused_window),
            self.api_away,
        );
        if let Some((took, sent)) = self.slowest {
            eprintln!(
                "{}: the slowest admission request took {:.1} s, sent {sent:.1} s after the fault",
                self.what,
                took.as_secs_f64()
            );
        }
    }
}
