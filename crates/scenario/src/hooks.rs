//! Hooks under test: loading a hook, a module or a Hook object as `operon serve` would,
//! the forms its runs and answers are shown and checked in, and the steps of a hook
//! test (start, events, schedule ticks, reviews).

use crate::ScenarioError;
use crate::check::Observed;
use crate::file::{Action, EventType, ReviewStep};
use operon_cluster::Cluster;
use operon_cluster::local::LocalCluster;
use operon_controller::serve::hook_objects::prepare;
use operon_controller::serve::webhook::enforce as webhook_enforce;
use operon_controller::serve::webhook::review as webhook_review;
use operon_data::api::Hook;
use operon_data::api::HookRunOutcome;
use operon_data::model::{Enforcement, HookConfig, HookInput, RunnerContext, WatchEvent};
use operon_hooks::capture;
use operon_hooks::engine::{Engine, LoadedHook, RunRecord};
use operon_hooks::load::{self, HookLoadError, HookLoader};
use operon_hooks::shell_operator;
use operon_store::ModuleLocator;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

/// A hook loaded and configured, with the cluster its patches go to.
pub struct HookUnderTest {
    /// The hook and its checked configuration.
    pub loaded: LoadedHook,
    /// Its configuration as declared (printed as shell-operator's v1 document).
    pub declared: HookConfig,
    /// The cluster its engine talks to: a Hook object's patches are held to its
    /// permissions on the way.
    pub cluster: Arc<dyn Cluster>,
    /// What loading it warned about.
    pub warnings: Vec<String>,
    /// What the reader should know about how it runs here.
    pub notes: Vec<String>,
}

/// Loads the hook `reference` names (a path relative to `base`): a Hook object's YAML
/// (its `spec.module` found through `locator`, or beside the YAML), a hook file, or a
/// module name or digest `locator` finds.
pub async fn load_hook(
    reference: &Path,
    base: &Path,
    locator: &ModuleLocator,
    loader: &HookLoader,
    cluster: &Arc<LocalCluster>,
) -> Result<HookUnderTest, ScenarioError> {
    let path = &base.join(reference);
    if let Some(mut object) = hook_object(path)? {
        let name = format!(
            "Hook {}/{}",
            object.metadata.namespace.as_deref().unwrap_or_default(),
            object.metadata.name.as_deref().unwrap_or_default()
        );
        let base = path.parent().unwrap_or(Path::new("."));
        let module = locator
            .locate(&object.spec.module, base)
            .map_err(|source| ScenarioError::Module {
                subject: format!("{name}: spec.module"),
                source: Box::new(source),
            })?;
        let mut notes = Vec::new();
        if object.spec.offloaded() {
            // The hook's logic is what is tested: its runs stay in this sandbox.
            notes.push(format!(
                "{name} has runOn: Job; here its runs are in the sandbox, under `operon serve` each is a Job"
            ));
            object.spec.run_on = None;
        }
        let prepared = prepare::prepare(&object, &module, loader, cluster.clone(), None)
            .await
            .map_err(|refusal| ScenarioError::HookObject {
                name,
                reason: refusal.reason,
                message: refusal.message,
            })?;
        let warnings = (prepared.loaded.config.warnings.iter())
            .map(ToString::to_string)
            .collect();
        return Ok(HookUnderTest {
            loaded: prepared.loaded,
            declared: prepared.declared,
            cluster: prepared.cluster,
            warnings,
            notes,
        });
    }
    let file = match path.exists() {
        true => path.to_owned(),
        false => locator
            .locate(&reference.to_string_lossy(), base)
            .map_err(|source| ScenarioError::Module {
                subject: format!(
                    "the hook {} is neither a file nor a module of the modules directory",
                    reference.display()
                ),
                source: Box::new(source),
            })?,
    };
    let hooks_dir = file.parent().unwrap_or(Path::new(".")).to_owned();
    let hook = loader.hook(&file, &hooks_dir)?;
    let (loaded, declared) = match load::configure(hook, cluster.as_ref()).await {
        Err(HookLoadError::Invalid { hook, problems }) => {
            return Err(ScenarioError::InvalidHook {
                hook,
                problems: problems.iter().map(ToString::to_string).collect(),
            });
        }
        other => other?,
    };
    let warnings = loaded
        .config
        .warnings
        .iter()
        .map(ToString::to_string)
        .collect();
    Ok(HookUnderTest {
        loaded,
        declared,
        cluster: cluster.clone(),
        warnings,
        notes: Vec::new(),
    })
}

/// The Hook object in `path`, when it is a YAML or JSON file of one (in the namespace
/// `default` when it names none, as kubectl would create it).
pub fn hook_object(path: &Path) -> Result<Option<Hook>, ScenarioError> {
    let is_manifest = path
        .extension()
        .is_some_and(|e| e == "yaml" || e == "yml" || e == "json");
    if !is_manifest || !path.is_file() {
        return Ok(None);
    }
    let invalid = |message: String| ScenarioError::Subject {
        path: path.to_owned(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| invalid(e.to_string()))?;
    let value: Value =
        yaml_serde::from_str(&text).map_err(|e| invalid(format!("not YAML: {e}")))?;
    if value["kind"] != "Hook" {
        return Ok(None);
    }
    let mut object: Hook =
        serde_json::from_value(value).map_err(|e| invalid(format!("not a valid Hook: {e}")))?;
    object
        .metadata
        .namespace
        .get_or_insert_with(|| "default".to_owned());
    Ok(Some(object))
}

/// A run as `operon hook test -o json` shows it and `expect.runs` matches it.
pub fn run_json(record: &RunRecord) -> Value {
    let contexts = shell_operator::context::to_json_for(record.config_version, &record.contexts);
    capture::report(
        &record.hook,
        &record.queue,
        contexts,
        &record.run,
        record.outcome(),
        record.error(),
    )
}

/// Runs the engine's hook once on `contexts` (shell-operator's JSON), outside the
/// queues: a captured run replayed. Its patches are reported, not applied.
async fn replay(engine: &Engine, contexts: &[Value]) -> Result<Value, ScenarioError> {
    let contexts_json = Value::Array(contexts.to_vec());
    let binding_contexts = shell_operator::context::from_json(&contexts_json).map_err(|e| {
        ScenarioError::Replay(format!(
            "the binding contexts are not shell-operator's: {e}"
        ))
    })?;
    let loaded = &engine.hooks()[0];
    let timeout = loaded.config.settings.timeout;
    let input = HookInput {
        context: RunnerContext::new(loaded.hook.name(), timeout),
        binding_contexts,
    };
    let (run, _) = loaded.hook.handle(input, timeout).await;
    let error = run.outcome.as_ref().err().map(ToString::to_string);
    let outcome = match error {
        Some(_) => HookRunOutcome::Failed,
        None => HookRunOutcome::Succeeded,
    };
    let name = loaded.hook.name();
    Ok(capture::report(
        name,
        "replay",
        contexts_json,
        &run,
        outcome,
        error,
    ))
}

/// What `operon serve`'s webhook server would answer for a review run, the binding's
/// enforcement applied, as `binding`,
/// `answer` (the AdmissionReview or ConversionReview) and, for an allowed mutation,
/// `patchedObject`, the object the API server would store.
pub fn server_answer(engine: &Engine, binding: &str, review: &Value, record: &RunRecord) -> Value {
    let config = &engine.hooks()[0].config;
    let output =
        (record.run.outcome.clone()).map_err(|e| format!("hook {} failed: {e}", record.hook));
    if config.conversions.iter().any(|c| c.name == binding) {
        let outcome = output.and_then(|o| {
            o.conversion
                .ok_or_else(|| format!("hook {} gave no answer for binding {binding}", record.hook))
        });
        return json!({"binding": binding, "answer": webhook_review::conversion_response(review, outcome)});
    }
    let mutating = config.mutating.iter().any(|m| m.name == binding);
    // As `operon serve` with its default `--webhook-enforcement Deny`: the binding's
    // own enforcement, else Deny.
    let enforcement = (config.validating.iter().chain(&config.mutating))
        .find(|b| b.name == binding)
        .map_or(Enforcement::Deny, |b| b.enforcement_or(Enforcement::Deny));
    let outcome =
        webhook_review::admission_outcome(&record.hook, binding, mutating, review, output);
    let outcome = webhook_enforce::enforce(outcome, enforcement, binding).outcome;
    let patched = match &outcome {
        webhook_review::AdmissionOutcome::Answered(answer) if mutating => {
            webhook_review::patched_object(review, answer)
        }
        _ => None,
    };
    let mut answer =
        json!({"binding": binding, "answer": webhook_review::admission_response(review, outcome)});
    if let Some(object) = patched {
        answer["patchedObject"] = object;
    }
    answer
}

/// The answer to an AdmissionReview in the form `expect.admission` is written in:
/// `allowed`, `code`, `message`, `warnings`, `patch` decoded, `object` after it.
fn admission_view(answer: &Value) -> Value {
    let response = &answer["answer"]["response"];
    let mut view = json!({
        "allowed": response["allowed"],
        "code": response["status"]["code"].as_u64().unwrap_or(200),
        "warnings": response.get("warnings").cloned().unwrap_or(json!([])),
    });
    if let Some(message) = response["status"]["message"].as_str() {
        view["message"] = json!(message);
    }
    if let Some(patch) = response["patch"].as_str() {
        use base64::Engine as _;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
        view["patch"] = decoded.unwrap_or(Value::Null);
    }
    if let Some(object) = answer.get("patchedObject") {
        view["object"] = object.clone();
    }
    view
}

/// The answer to a ConversionReview in the form `expect.conversion` is written in.
fn conversion_view(answer: &Value) -> Value {
    let response = &answer["answer"]["response"];
    let mut view = json!({
        "failed": response["result"]["status"] != "Success",
        "convertedObjects": response["convertedObjects"],
    });
    if let Some(message) = response["result"]["message"].as_str() {
        view["message"] = json!(message);
    }
    view
}

/// A review from a step: the whole review as written, or an AdmissionReview (or
/// ConversionReview, when it has `desiredAPIVersion`) around a bare request.
pub(crate) fn review_of(step: &ReviewStep, base: &Path) -> Result<Value, ScenarioError> {
    let value = match (&step.request, &step.file) {
        (Some(request), _) => request.clone(),
        (None, Some(file)) => {
            let path = base.join(file);
            let text = std::fs::read_to_string(&path).map_err(|e| ScenarioError::Subject {
                path: path.clone(),
                message: e.to_string(),
            })?;
            yaml_serde::from_str(&text).map_err(|e| ScenarioError::Subject {
                path,
                message: format!("not a JSON or YAML review: {e}"),
            })?
        }
        (None, None) => Value::Null,
    };
    if value
        .get("kind")
        .is_some_and(|k| k == "AdmissionReview" || k == "ConversionReview")
    {
        return Ok(value);
    }
    let mut request = value;
    if request.get("uid").is_none() {
        request["uid"] = json!("00000000-0000-0000-0000-000000000001");
    }
    Ok(if request.get("desiredAPIVersion").is_some() {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": request})
    } else {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
    })
}

/// The watch event of an event step's type.
pub(crate) fn watch_event(kind: EventType) -> WatchEvent {
    match kind {
        EventType::Added => WatchEvent::Added,
        EventType::Modified => WatchEvent::Modified,
        EventType::Deleted => WatchEvent::Deleted,
    }
}

/// Runs a hook test's action against `engine` and says what happened.
pub(crate) async fn act(
    action: Action<'_>,
    engine: &Engine,
    cluster: &LocalCluster,
    base: &Path,
) -> Result<(Observed, Vec<RunRecord>), ScenarioError> {
    let mut records = Vec::new();
    let mut observed = Observed::default();
    match action {
        Action::Start | Action::Config(_) | Action::Diagnosis(_) => {}
        Action::Replay(step) => {
            observed.runs = vec![replay(engine, &step.binding_contexts).await?];
            return Ok((observed, records));
        }
        Action::Event(event) => {
            let kind = watch_event(event.kind);
            for object in crate::objects(&event.objects, base)? {
                cluster
                    .apply_watch_event(kind, object)
                    .map_err(ScenarioError::event)?;
            }
            engine.drain(|r| records.push(r.clone())).await;
        }
        Action::Schedule(name) => {
            let index = engine.hooks()[0]
                .config
                .schedules
                .iter()
                .position(|s| s.name == name)
                .ok_or_else(|| ScenarioError::NoBinding {
                    kind: "schedule",
                    binding: name.to_owned(),
                })?;
            engine.fire_schedule(0, index);
            engine.drain(|r| records.push(r.clone())).await;
        }
        Action::Review(step) => {
            let review = review_of(step, base)?;
            let record = engine
                .review(0, &step.binding, review.to_string())
                .await
                .ok_or_else(|| ScenarioError::NoBinding {
                    kind: "validating, mutating or conversion",
                    binding: step.binding.clone(),
                })?;
            let answer = server_answer(engine, &step.binding, &review, &record);
            if review["kind"] == "ConversionReview" {
                observed.conversion = Some(conversion_view(&answer));
            } else {
                observed.admission = Some(admission_view(&answer));
            }
            records.push(record);
        }
    }
    observed.runs = records.iter().map(run_json).collect();
    Ok((observed, records))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_request_becomes_a_review() {
        let step = ReviewStep {
            binding: "b".to_owned(),
            request: Some(json!({"operation": "CREATE", "object": {"kind": "Pod"}})),
            file: None,
        };
        let review = review_of(&step, Path::new(".")).unwrap();
        assert_eq!(review["kind"], "AdmissionReview");
        assert_eq!(review["request"]["operation"], "CREATE");
        assert!(review["request"]["uid"].is_string());
        let step = ReviewStep {
            request: Some(json!({"desiredAPIVersion": "x/v2", "objects": []})),
            ..step
        };
        assert_eq!(
            review_of(&step, Path::new(".")).unwrap()["kind"],
            "ConversionReview"
        );
    }

    #[test]
    fn an_answer_shows_its_patch_decoded() {
        let patch = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            br#"[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]"#,
        );
        let answer = json!({"answer": {"response": {"allowed": true, "patch": patch, "warnings": ["w"]}}, "patchedObject": {"kind": "Pod"}});
        assert_eq!(
            admission_view(&answer),
            json!({"allowed": true, "code": 200, "warnings": ["w"], "patch": [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}], "object": {"kind": "Pod"}})
        );
        let denied = json!({"answer": {"response": {"allowed": false, "status": {"code": 403, "message": "no"}}}});
        assert_eq!(
            admission_view(&denied),
            json!({"allowed": false, "code": 403, "warnings": [], "message": "no"})
        );
    }
}
