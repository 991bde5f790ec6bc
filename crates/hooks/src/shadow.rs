//! Shadow hooks: a hook run beside a live one on the live hook's own inputs (every
//! run of its queues, every admission review), whose patches and answers are compared
//! with the live hook's and never applied. A new version of a rule can so be watched on
//! real traffic before it takes over.
//!
//! [`Shadows`] is shared by the engines of a process: a shadow attaches to the live
//! hook's name (as `operon debug hook list` shows it) whichever engine runs it, and
//! detaches when its [`Attachment`] is dropped. After each live run the engine hands
//! the shadows the same input (`Shadows::shadow`); each shadow runs in the
//! background (the live hook's queue and the API server do not wait for it), at most
//! [`CONCURRENT_RUNS`] at once: a run beyond that is skipped and counted, so a slow
//! shadow costs comparisons, never the live hook's latency.
//!
//! Compared: whether the run failed; the patch operations (in order, in shell-operator's
//! JSON form, JSON text compared as JSON); an admission answer's `allowed` and patch; a conversion's converted
//! objects and failure. Messages, warnings, metrics and logs are not: they are
//! expected to change between versions. Each comparison goes to the shadow's
//! observer, to `operon_shadow_runs_total` and `operon_shadow_divergences_total`, and,
//! when they differ, to the log with the object the run concerned.

use super::runner::{Hook, HookRun};
use crate::metrics::Metrics;
use operon_data::model::{BindingContext, HookInput, HookOutput};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

/// How many runs one shadow may have in flight.
pub const CONCURRENT_RUNS: usize = 4;

/// What a comparison found different.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    /// One run failed and the other did not (the error of the one that failed).
    Outcome {
        /// The live run's error, if it failed.
        live: Option<String>,
        /// The shadow run's error, if it failed.
        shadow: Option<String>,
    },
    /// The patch operations differ (as JSON).
    Patches {
        /// The live run's.
        live: Vec<Value>,
        /// The shadow's.
        shadow: Vec<Value>,
    },
    /// One answer allows the request and the other denies it.
    Allowed {
        /// The live answer's `allowed`.
        live: bool,
        /// The shadow's.
        shadow: bool,
    },
    /// The mutating answers' JSON patches differ.
    AdmissionPatch {
        /// The live answer's patch.
        live: Option<Value>,
        /// The shadow's.
        shadow: Option<Value>,
    },
    /// The conversions differ (converted objects or failure).
    Conversion {
        /// The live conversion.
        live: Value,
        /// The shadow's.
        shadow: Value,
    },
}

impl Difference {
    /// The `difference` label of `operon_shadow_divergences_total`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Outcome { .. } => "outcome",
            Self::Patches { .. } => "patches",
            Self::Allowed { .. } => "allowed",
            Self::AdmissionPatch { .. } => "admission_patch",
            Self::Conversion { .. } => "conversion",
        }
    }

    /// One line for logs and status.
    pub fn describe(&self) -> String {
        let or_none = |v: &Option<String>| v.clone().unwrap_or_else(|| "succeeded".into());
        match self {
            Self::Outcome { live, shadow } => {
                format!(
                    "live run: {}; shadow run: {}",
                    or_none(live),
                    or_none(shadow)
                )
            }
            Self::Patches { live, shadow } => format!(
                "patches: live {} ; shadow {}",
                Value::Array(live.clone()),
                Value::Array(shadow.clone())
            ),
            Self::Allowed { live, shadow } => {
                let word = |a: bool| if a { "allowed" } else { "denied" };
                format!("live {}, shadow {}", word(*live), word(*shadow))
            }
            Self::AdmissionPatch { live, shadow } => {
                let text = |p: &Option<Value>| p.as_ref().map_or("none".into(), Value::to_string);
                format!(
                    "admission patch: live {}; shadow {}",
                    text(live),
                    text(shadow)
                )
            }
            Self::Conversion { live, shadow } => {
                format!("conversion: live {live}; shadow {shadow}")
            }
        }
    }
}

/// One shadow run compared with its live run.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// The shadow hook.
    pub shadow: String,
    /// The live hook.
    pub live: String,
    /// The binding of the run's first context.
    pub binding: String,
    /// What the run concerned: the objects of its contexts, or the request under review.
    pub object: String,
    /// Empty when the shadow did what the live hook did.
    pub differences: Vec<Difference>,
}

/// What a run produced that comparisons look at.
#[derive(Debug, Clone)]
pub(crate) struct Observed {
    failed: Option<String>,
    patches: Vec<Value>,
    output: Option<HookOutput>,
}

impl Observed {
    pub(crate) fn of(run: &HookRun) -> Self {
        Self {
            failed: run.outcome.as_ref().err().map(ToString::to_string),
            patches: run
                .patches
                .iter()
                .map(|p| normalize(crate::shell_operator::patches::to_json(p)))
                .collect(),
            output: run.outcome.as_ref().ok().cloned(),
        }
    }
}

/// `value` with every string that holds a JSON object or array replaced by that JSON,
/// so that two hooks writing the same object with different spacing or key order
/// compare equal.
fn normalize(value: Value) -> Value {
    match value {
        Value::String(text) => {
            let trimmed = text.trim_start();
            if trimmed.starts_with('{') || trimmed.starts_with('[') {
                match serde_json::from_str::<Value>(&text) {
                    Ok(parsed) => normalize(parsed),
                    Err(_) => Value::String(text),
                }
            } else {
                Value::String(text)
            }
        }
        Value::Array(items) => Value::Array(items.into_iter().map(normalize).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, normalize(v))).collect())
        }
        other => other,
    }
}

/// What differs between the live run and the shadow run.
pub(crate) fn compare(live: &Observed, shadow: &Observed) -> Vec<Difference> {
    let mut differences = Vec::new();
    if live.failed.is_some() != shadow.failed.is_some() {
        differences.push(Difference::Outcome {
            live: live.failed.clone(),
            shadow: shadow.failed.clone(),
        });
        return differences;
    }
    if live.patches != shadow.patches {
        differences.push(Difference::Patches {
            live: live.patches.clone(),
            shadow: shadow.patches.clone(),
        });
    }
    let (Some(l), Some(s)) = (&live.output, &shadow.output) else {
        return differences;
    };
    let admission = |r: &Option<operon_data::model::ValidatingResponse>| {
        r.as_ref().map(|v| {
            let patch = v.patch.clone().map(|p| normalize(Value::String(p)));
            (v.allowed, patch)
        })
    };
    match (admission(&l.validating), admission(&s.validating)) {
        (Some((la, lp)), Some((sa, sp))) => {
            if la != sa {
                differences.push(Difference::Allowed {
                    live: la,
                    shadow: sa,
                });
            } else if lp != sp {
                differences.push(Difference::AdmissionPatch {
                    live: lp,
                    shadow: sp,
                });
            }
        }
        (None, None) => {}
        (live_answer, shadow_answer) => differences.push(Difference::Allowed {
            live: live_answer.is_some_and(|(a, _)| a),
            shadow: shadow_answer.is_some_and(|(a, _)| a),
        }),
    }
    let conversion = |c: &Option<operon_data::model::ConversionResponse>| {
        normalize(serde_json::to_value(c).unwrap_or(Value::Null))
    };
    let (lc, sc) = (conversion(&l.conversion), conversion(&s.conversion));
    if lc != sc {
        differences.push(Difference::Conversion {
            live: lc,
            shadow: sc,
        });
    }
    differences
}

/// What a run concerned, for the log: the object of each context (`Kind ns/name`), or
/// the request of a review.
fn subject(contexts: &[BindingContext]) -> String {
    let mut objects = Vec::new();
    for context in contexts {
        if let Some(review) = context.review.as_deref() {
            let review: Value = serde_json::from_str(review).unwrap_or(Value::Null);
            let field = |p: &str| review.pointer(p).and_then(Value::as_str).unwrap_or("");
            let name = match field("/request/name") {
                "" => field("/request/object/metadata/generateName"),
                name => name,
            };
            let namespace = field("/request/namespace");
            let kind = field("/request/kind/kind");
            objects.push(match namespace {
                "" => format!("{} {kind} {name}", field("/request/operation")),
                ns => format!("{} {kind} {ns}/{name}", field("/request/operation")),
            });
            continue;
        }
        for entry in context.object.iter().chain(&context.objects) {
            let Some(object) = entry
                .object
                .as_deref()
                .and_then(|text| serde_json::from_str::<Value>(text).ok())
            else {
                continue;
            };
            let (namespace, name) = operon_cluster::namespace_and_name(&object);
            let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
            let place =
                operon_cluster::namespaced_name((!namespace.is_empty()).then_some(namespace), name);
            objects.push(format!("{kind} {place}"));
        }
    }
    match objects.len() {
        0 => String::new(),
        1..=3 => objects.join(", "),
        n => format!("{} and {} more", objects[..3].join(", "), n - 3),
    }
}

/// A hook run as the shadow of another.
pub struct Shadow {
    hook: Arc<dyn Hook>,
    timeout: Duration,
    metrics: Arc<Metrics>,
    running: Arc<tokio::sync::Semaphore>,
    observer: Arc<dyn Fn(&Comparison) + Send + Sync>,
}

impl std::fmt::Debug for Shadow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shadow")
            .field("hook", &self.hook.name())
            .finish_non_exhaustive()
    }
}

impl Shadow {
    /// `hook` as a shadow, each run bounded by `timeout`, counted in `metrics`, each
    /// comparison handed to `observer` (a Hook object's status).
    pub fn new(
        hook: Arc<dyn Hook>,
        timeout: Duration,
        metrics: Arc<Metrics>,
        observer: impl Fn(&Comparison) + Send + Sync + 'static,
    ) -> Self {
        Self {
            hook,
            timeout,
            metrics,
            running: Arc::new(tokio::sync::Semaphore::new(CONCURRENT_RUNS)),
            observer: Arc::new(observer),
        }
    }

    /// The shadow hook's name.
    pub fn name(&self) -> &str {
        self.hook.name()
    }

    /// Runs the shadow on `input` in the background and compares it with `live`.
    fn spawn(&self, live_hook: &str, input: HookInput, live: Observed) {
        let shadow = self.name().to_owned();
        let runs = &self.metrics.shadow_runs_total;
        let Ok(permit) = self.running.clone().try_acquire_owned() else {
            runs.with_label_values(&[&shadow, live_hook, "skipped"])
                .inc();
            tracing::debug!(shadow = %shadow, live = %live_hook, "shadow busy: a run is not compared");
            return;
        };
        let hook = self.hook.clone();
        let timeout = self.timeout;
        let metrics = self.metrics.clone();
        let observer = self.observer.clone();
        let live_hook = live_hook.to_owned();
        tokio::spawn(async move {
            let _permit = permit;
            let binding = input
                .binding_contexts
                .first()
                .map(|c| c.binding.clone())
                .unwrap_or_default();
            let (run, input) = hook.handle(input, timeout).await;
            let differences = compare(&live, &Observed::of(&run));
            let comparison = Comparison {
                shadow: shadow.clone(),
                live: live_hook.clone(),
                binding,
                object: subject(&input.binding_contexts),
                differences,
            };
            let result = if comparison.differences.is_empty() {
                "same"
            } else {
                "diverged"
            };
            metrics
                .shadow_runs_total
                .with_label_values(&[&shadow, &live_hook, result])
                .inc();
            for difference in &comparison.differences {
                metrics
                    .shadow_divergences_total
                    .with_label_values(&[
                        &shadow,
                        &live_hook,
                        &comparison.binding,
                        difference.label(),
                    ])
                    .inc();
                tracing::warn!(shadow = %shadow, live = %live_hook, binding = %comparison.binding,
                    object = %comparison.object, difference = difference.label(),
                    detail = %difference.describe(), "the shadow hook diverged from the live hook");
            }
            observer(&comparison);
        });
    }
}

/// The shadows of a process, by the live hook they follow; clones share them.
#[derive(Debug, Clone, Default)]
pub struct Shadows(Arc<Inner>);

/// The shadows of each live hook, each with the number of its attachment.
type ByLive = HashMap<String, Vec<(u64, Arc<Shadow>)>>;

#[derive(Debug, Default)]
struct Inner {
    by_live: Mutex<ByLive>,
    next: AtomicU64,
}

/// Keeps a shadow attached; dropping it detaches the shadow.
#[derive(Debug)]
#[must_use = "the shadow detaches when the attachment is dropped"]
pub struct Attachment {
    set: Weak<Inner>,
    live: String,
    id: u64,
}

impl Drop for Attachment {
    fn drop(&mut self) {
        if let Some(set) = self.set.upgrade() {
            let mut by_live = set.by_live.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(list) = by_live.get_mut(&self.live) {
                list.retain(|(id, _)| *id != self.id);
                if list.is_empty() {
                    by_live.remove(&self.live);
                }
            }
        }
    }
}

impl Shadows {
    /// Runs `shadow` beside the hook named `live` until the attachment is dropped.
    pub fn attach(&self, live: &str, shadow: Shadow) -> Attachment {
        let id = self.0.next.fetch_add(1, Ordering::Relaxed);
        self.lock()
            .entry(live.to_owned())
            .or_default()
            .push((id, Arc::new(shadow)));
        Attachment {
            set: Arc::downgrade(&self.0),
            live: live.to_owned(),
            id,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ByLive> {
        self.0
            .by_live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The names of the shadows of `live`.
    pub fn of(&self, live: &str) -> Vec<String> {
        self.lock()
            .get(live)
            .map(|list| list.iter().map(|(_, s)| s.name().to_owned()).collect())
            .unwrap_or_default()
    }

    /// After a run of `live` on `input` that produced `run`: each shadow of `live`
    /// runs on the same input in the background. Nothing when it has none.
    pub(crate) fn shadow(&self, live: &str, input: &HookInput, run: &HookRun) {
        let shadows: Vec<Arc<Shadow>> = match self.lock().get(live) {
            Some(list) => list.iter().map(|(_, s)| s.clone()).collect(),
            None => return,
        };
        let observed = Observed::of(run);
        for shadow in shadows {
            shadow.spawn(live, input.clone(), observed.clone());
        }
    }
}

#[cfg(test)]
mod tests;
