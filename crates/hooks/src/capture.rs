//! What each hook received and answered, kept when `operon serve --capture-runs` asks
//! for it, so that `operon hook record` can write it as a test file and `operon test`
//! can replay it against another version of the hook.
//!
//! A captured run is the binding contexts in shell-operator's JSON (snapshots and
//! admission or conversion reviews included) and what the hook submitted: patches,
//! metrics and its answer. It is bounded per hook, by count and by bytes, the oldest
//! going first. Secret data is redacted before anything is kept (each value of `data`
//! and `stringData` of every Secret, wherever it appears), and so is every field the
//! operator names (a dotted path such as `spec.password`, in every object with an
//! `apiVersion` and a `kind`): the debug socket never serves what was redacted.

use super::HookRun;
use super::engine::{Engine, RunRecord};
use crate::shell_operator::{context, metrics, patches, responses};
use operon_data::api::HookRunOutcome;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::Mutex;

/// What a Secret's value becomes in a capture: `REDACTED`, base64-encoded in `data`
/// so that a hook decoding it still gets text.
pub const REDACTED: &str = "REDACTED";
const REDACTED_BASE64: &str = "UkVEQUNURUQ=";

/// How much is captured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaptureSettings {
    /// Runs kept per hook; 0 captures nothing.
    pub runs_per_hook: usize,
    /// Bytes of captured JSON kept per hook, at most.
    pub bytes_per_hook: usize,
    /// Fields redacted in every object, as dotted paths (`spec.password`,
    /// `metadata.annotations.token`), besides Secret data.
    pub redact: Vec<String>,
}

/// The captured runs of every hook of an engine.
pub(crate) struct Capture {
    settings: CaptureSettings,
    /// Per hook: its runs, oldest first, each with its size.
    runs: Mutex<Vec<VecDeque<(usize, Value)>>>,
}

impl Capture {
    pub(crate) fn new(hooks: usize, settings: CaptureSettings) -> Self {
        Self {
            settings,
            runs: Mutex::new(vec![VecDeque::new(); hooks]),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<VecDeque<(usize, Value)>>> {
        self.runs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Keeps `record` for hook `h`, redacted, within the bounds.
    pub(crate) fn push(&self, h: usize, record: &RunRecord) {
        if self.settings.runs_per_hook == 0 {
            return;
        }
        let mut captured = captured(record);
        redact(&mut captured, &self.settings.redact);
        let size = captured.to_string().len();
        if size > self.settings.bytes_per_hook {
            tracing::debug!(hook = %record.hook, size, "a run too large to capture is left out");
            return;
        }
        let mut runs = self.lock();
        let Some(kept) = runs.get_mut(h) else { return };
        kept.push_back((size, captured));
        let mut total: usize = kept.iter().map(|(size, _)| size).sum();
        while kept.len() > self.settings.runs_per_hook || total > self.settings.bytes_per_hook {
            let Some((size, _)) = kept.pop_front() else {
                break;
            };
            total -= size;
        }
    }

    /// Hook `h`'s captured runs, oldest first.
    pub(crate) fn of(&self, h: usize) -> Vec<Value> {
        self.lock()
            .get(h)
            .map(|kept| kept.iter().map(|(_, run)| run.clone()).collect())
            .unwrap_or_default()
    }
}

/// A run as it is captured: when it ended, what it received, what it gave back. Its
/// output and logs are left out: they are the hook's to print, not its answer.
fn captured(record: &RunRecord) -> Value {
    let contexts = context::to_json_for(record.config_version, &record.contexts);
    let mut run = report(
        &record.hook,
        &record.queue,
        contexts,
        &record.run,
        record.outcome(),
        record.error(),
    );
    if let Some(fields) = run.as_object_mut() {
        for key in ["elapsedMs", "logs", "stdout", "stderr"] {
            fields.remove(key);
        }
    }
    run["ended"] = json!(jiff::Timestamp::now().to_string());
    run
}

/// What a run of `hook` on `contexts` (shell-operator's JSON) did, as `operon hook
/// test -o json` and `operon test` show it: `status`, `error`, `elapsedMs`, the
/// `patches` and `metrics` in shell-operator's JSON, `logs`, the `validating` or
/// `conversion` answer, `stdout` and `stderr`.
pub fn report(
    hook: &str,
    queue: &str,
    contexts: Value,
    run: &HookRun,
    outcome: HookRunOutcome,
    error: Option<String>,
) -> Value {
    let output = run.outcome.as_ref().ok();
    json!({
        "hook": hook,
        "queue": queue,
        "bindingContexts": contexts,
        "status": outcome.as_str(),
        "error": error,
        "elapsedMs": run.elapsed.as_secs_f64() * 1e3,
        "patches": run.patches.iter().map(patches::to_json).collect::<Vec<_>>(),
        "metrics": run.metrics.iter().map(metrics::to_json).collect::<Vec<_>>(),
        "logs": run.logs.iter().map(|l| json!({"level": l.level.as_str(), "message": l.message, "fields": l.fields})).collect::<Vec<_>>(),
        "validating": output.and_then(|o| o.validating.as_ref()).map(responses::validating_to_json),
        "conversion": output.and_then(|o| o.conversion.as_ref()).map(responses::conversion_to_json),
        "stdout": run.stdout,
        "stderr": run.stderr,
    })
}

/// Redacts Secret data and the `fields` of every object within `value`.
pub fn redact(value: &mut Value, fields: &[String]) {
    match value {
        Value::Object(map) => {
            let is_object = map.get("apiVersion").is_some_and(Value::is_string)
                && map.get("kind").is_some_and(Value::is_string);
            if is_object && map.get("kind").is_some_and(|k| k == "Secret") {
                for (key, replacement) in [("data", REDACTED_BASE64), ("stringData", REDACTED)] {
                    if let Some(Value::Object(entries)) = map.get_mut(key) {
                        for entry in entries.values_mut() {
                            *entry = json!(replacement);
                        }
                    }
                }
            }
            if is_object {
                for field in fields {
                    redact_path(map, field);
                }
            }
            for child in map.values_mut() {
                redact(child, fields);
            }
        }
        Value::Array(items) => {
            for item in items {
                redact(item, fields);
            }
        }
        // Objects inside JSON text: a review or a patch carried as a string.
        Value::String(text) if text.starts_with('{') || text.starts_with('[') => {
            if let Ok(mut inner) = serde_json::from_str::<Value>(text) {
                let before = inner.clone();
                redact(&mut inner, fields);
                if inner != before {
                    *text = inner.to_string();
                }
            }
        }
        _ => {}
    }
}

fn redact_path(object: &mut serde_json::Map<String, Value>, path: &str) {
    let mut keys = path.trim_start_matches('.').split('.').peekable();
    let mut at = object;
    while let Some(key) = keys.next() {
        if keys.peek().is_none() {
            if let Some(value) = at.get_mut(key) {
                *value = json!(REDACTED);
            }
            return;
        }
        match at.get_mut(key) {
            Some(Value::Object(next)) => at = next,
            _ => return,
        }
    }
}

impl Engine {
    /// Hook `name`'s captured runs, oldest first; `None` when there is no such hook.
    pub fn captured(&self, name: &str) -> Option<Vec<Value>> {
        let h = self.hooks().iter().position(|l| l.hook.name() == name)?;
        Some(self.capture.of(h))
    }

    /// Keeps a run that just ended: in the history, and in the capture when asked.
    pub(super) fn keep(&self, h: usize, record: &RunRecord) {
        self.runs.push(h, super::history::RunEntry::of(record));
        self.capture.push(h, record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HookRun;
    use operon_data::model::{BindingContext, BindingType, ConfigVersion};
    use std::time::Duration;

    fn record(binding: &str, object: Value) -> RunRecord {
        RunRecord {
            hook: "h.sh".to_owned(),
            hook_index: 0,
            synchronizes: Vec::new(),
            queue: "main".to_owned(),
            contexts: vec![BindingContext {
                binding: binding.to_owned(),
                type_: BindingType::Schedule,
                group: None,
                watch_event: None,
                object: None,
                objects: Vec::new(),
                snapshots: vec![operon_data::model::Snapshot {
                    binding: "secrets".to_owned(),
                    objects: vec![operon_data::model::ObjectAndFilter {
                        object: Some(object.to_string().into()),
                        filter_result: None,
                    }],
                }],
                review: None,
            }],
            config_version: ConfigVersion::V1,
            run: HookRun {
                outcome: Ok(Default::default()),
                patches: Vec::new(),
                metrics: Vec::new(),
                logs: Vec::new(),
                stdout: String::new(),
                stderr: String::new(),
                elapsed: Duration::from_millis(1),
            },
            apply_error: None,
            failed: false,
            allowed_failure: false,
            retry_in: None,
        }
    }

    #[test]
    fn runs_are_kept_within_their_count_and_bytes_redacted() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "c2VjcmV0"}});
        let off = Capture::new(1, CaptureSettings::default());
        off.push(0, &record("a", secret.clone()));
        assert!(off.of(0).is_empty());
        let capture = Capture::new(
            2,
            CaptureSettings {
                runs_per_hook: 2,
                bytes_per_hook: 4096,
                redact: Vec::new(),
            },
        );
        for binding in ["a", "b", "c"] {
            capture.push(0, &record(binding, secret.clone()));
        }
        let kept = capture.of(0);
        let bindings: Vec<&Value> = kept
            .iter()
            .map(|r| &r["bindingContexts"][0]["binding"])
            .collect();
        assert_eq!(bindings, [&json!("b"), &json!("c")]);
        assert!(capture.of(1).is_empty());
        let text = kept[0].to_string();
        assert!(
            !text.contains("c2VjcmV0") && text.contains(REDACTED_BASE64),
            "{text}"
        );
        assert_eq!(kept[0]["status"], "Succeeded");
        let size = kept[0].to_string().len();
        let small = Capture::new(
            1,
            CaptureSettings {
                runs_per_hook: 10,
                bytes_per_hook: size * 2 + size / 2,
                redact: Vec::new(),
            },
        );
        for binding in ["a", "b", "c"] {
            small.push(0, &record(binding, secret.clone()));
        }
        assert_eq!(small.of(0).len(), 2, "bounded by bytes");
        let huge =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"x": "y".repeat(size * 3)}});
        small.push(0, &record("d", huge));
        assert_eq!(
            small.of(0).len(),
            2,
            "a run larger than the bound is left out"
        );
    }

    #[test]
    fn secret_data_is_redacted_wherever_it_is() {
        let mut value = json!([{
            "object": {"apiVersion": "v1", "kind": "Secret", "data": {"a": "c2VjcmV0"}, "stringData": {"b": "plain"}},
            "snapshots": {"s": [{"object": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}, "data": {"c": "eA=="}}}]},
            "review": {"request": {"object": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"kept": "yes"}}}},
        }]);
        redact(&mut value, &[]);
        assert_eq!(value[0]["object"]["data"]["a"], REDACTED_BASE64);
        assert_eq!(value[0]["object"]["stringData"]["b"], REDACTED);
        assert_eq!(
            value[0]["snapshots"]["s"][0]["object"]["data"]["c"],
            REDACTED_BASE64
        );
        assert_eq!(
            value[0]["snapshots"]["s"][0]["object"]["metadata"]["name"],
            "x"
        );
        assert_eq!(
            value[0]["review"]["request"]["object"]["data"]["kept"],
            "yes"
        );
        use base64::Engine as _;
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(REDACTED_BASE64)
                .unwrap(),
            REDACTED.as_bytes()
        );
    }

    #[test]
    fn named_fields_are_redacted_in_every_object_and_inside_json_text() {
        let object =
            json!({"apiVersion": "x/v1", "kind": "Db", "spec": {"password": "p", "user": "u"}});
        let mut value = json!({"object": object, "review": json!({"request": {"object": object}}).to_string(), "spec": {"password": "not an object's"}});
        redact(&mut value, &["spec.password".to_owned()]);
        assert_eq!(value["object"]["spec"]["password"], REDACTED);
        assert_eq!(value["object"]["spec"]["user"], "u");
        let review: Value = serde_json::from_str(value["review"].as_str().unwrap()).unwrap();
        assert_eq!(review["request"]["object"]["spec"]["password"], REDACTED);
        assert_eq!(value["spec"]["password"], "not an object's");
    }
}
