//! Captured runs as a test file: what `operon serve --capture-runs` kept of a hook's
//! runs becomes one step per run, which `operon test` replays against another version
//! of the hook, expecting what this version did.
//!
//! A review becomes a `review` step expecting the answer the hook gave; any other run a
//! `replay` step with its binding contexts (snapshots included), expecting its outcome,
//! patches and metrics. Secret data was redacted when the run was captured.

use crate::file::{self, Expect, ReplayStep, ReviewStep, Step, Subject, Test};
use serde_json::{Value, json};
use std::path::PathBuf;

/// The test replaying `runs` (as the debug socket serves them, oldest first) of the
/// hook called `hook`, whose file or module the test names as `subject`.
pub fn recorded_test(hook: &str, subject: PathBuf, runs: &[Value]) -> Test {
    let steps = runs
        .iter()
        .enumerate()
        .map(|(index, run)| step(index, run))
        .collect();
    Test {
        api_version: file::API_VERSION.to_owned(),
        kind: file::KIND.to_owned(),
        name: format!("the captured runs of {hook}"),
        description: Some(format!(
            "Recorded from operon serve ({} runs, the first ended {}). Replayed, each run \
             must do what it did then.",
            runs.len(),
            runs.first()
                .and_then(|r| r["ended"].as_str())
                .unwrap_or("?")
        )),
        subject: Subject::Hook(subject),
        modules: None,
        objects: Vec::new(),
        steps,
    }
}

/// A test as YAML, in the order its fields are read (name, action, expectations),
/// with a comment saying how to replay it.
pub fn to_yaml(test: &Test) -> String {
    let body = yaml_serde::to_string(test).expect("a test is YAML");
    format!(
        "# Captured by operon serve --capture-runs and written by operon hook record.\n\
         # Replay it against another version of the hook: operon test THIS-FILE\n{body}"
    )
}

fn step(index: usize, run: &Value) -> Step {
    let contexts = run["bindingContexts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let first = contexts.first().cloned().unwrap_or(Value::Null);
    let kind = first["type"].as_str().unwrap_or("onStartup");
    let binding = first["binding"].as_str().unwrap_or_default().to_owned();
    let mut step = Step {
        name: Some(format!(
            "run {}: {} (ended {})",
            index + 1,
            describe(&first, contexts.len()),
            run["ended"].as_str().unwrap_or("?")
        )),
        start: None,
        event: None,
        schedule: None,
        review: None,
        replay: None,
        config: None,
        diagnosis: None,
        expect: Expect::default(),
    };
    let failed = run["status"] == "Failed";
    match kind {
        "Validating" | "Mutating" => {
            step.review = Some(ReviewStep {
                binding,
                request: Some(first["review"].clone()),
                file: None,
            });
            step.expect.admission = Some(if failed {
                json!({"allowed": false, "code": 500})
            } else {
                admission(&run["validating"])
            });
        }
        "Conversion" => {
            step.review = Some(ReviewStep {
                binding,
                request: Some(first["review"].clone()),
                file: None,
            });
            let answer = &run["conversion"];
            step.expect.conversion = Some(match answer["failedMessage"].as_str() {
                _ if failed => json!({"failed": true}),
                Some(message) => json!({"failed": true, "message": message}),
                None => json!({"failed": false, "convertedObjects": answer["convertedObjects"]}),
            });
        }
        _ => {
            step.replay = Some(ReplayStep {
                binding_contexts: contexts,
            });
            let mut expected = json!({"status": run["status"]});
            if let Some(error) = run["error"].as_str() {
                expected["error"] = json!(error);
            }
            step.expect.runs = Some(vec![expected]);
            step.expect.patches = Some(list(&run["patches"]));
            step.expect.metrics = Some(list(&run["metrics"]));
        }
    }
    step
}

/// The answer a validating or mutating hook gave, in the form `expect.admission` is
/// matched against (a message is part of the answer only when it denies).
fn admission(answer: &Value) -> Value {
    let allowed = answer["allowed"].as_bool().unwrap_or(false);
    let mut expected = json!({
        "allowed": allowed,
        "warnings": answer["warnings"].as_array().cloned().unwrap_or_default(),
    });
    if !allowed {
        expected["message"] = answer["message"].clone();
    }
    if !answer["patch"].is_null() {
        expected["patch"] = answer["patch"].clone();
    }
    expected
}

fn list(value: &Value) -> Vec<Value> {
    value.as_array().cloned().unwrap_or_default()
}

/// What started a run, for the step's name: `Event Modified Pod default/web-1 on
/// pods`, `Schedule hourly`...
fn describe(context: &Value, count: usize) -> String {
    let kind = context["type"].as_str().unwrap_or("onStartup");
    let binding = context["binding"].as_str().unwrap_or_default();
    let object = match kind {
        "Validating" | "Mutating" | "Conversion" => &context["review"]["request"]["object"],
        _ => &context["object"],
    };
    let mut text = match (kind, object["kind"].as_str()) {
        ("Event", Some(object_kind)) => format!(
            "Event {} {object_kind} {} on {binding}",
            context["watchEvent"].as_str().unwrap_or("?"),
            name_of(object)
        ),
        ("Validating" | "Mutating", Some(object_kind)) => format!(
            "{kind} review {} {object_kind} {} on {binding}",
            context["review"]["request"]["operation"]
                .as_str()
                .unwrap_or("?"),
            name_of(object)
        ),
        ("Synchronization", _) => format!(
            "Synchronization of {binding} ({} objects)",
            context["objects"].as_array().map_or(0, Vec::len)
        ),
        _ => format!("{kind} {binding}").trim_end().to_owned(),
    };
    if count > 1 {
        text.push_str(&format!(" and {} more contexts", count - 1));
    }
    text
}

fn name_of(object: &Value) -> String {
    let name = object["metadata"]["name"].as_str().unwrap_or("?");
    operon_cluster::namespaced_name(object["metadata"]["namespace"].as_str(), name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::Action;

    #[test]
    fn runs_become_replays_and_reviews_expecting_what_they_did() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": "default"}});
        let runs = vec![
            json!({"ended": "2026-11-28T10:00:00Z", "status": "Succeeded",
                   "bindingContexts": [{"binding": "pods", "type": "Event", "watchEvent": "Added", "object": pod}],
                   "patches": [{"operation": "MergePatch", "name": "web-1"}], "metrics": []}),
            json!({"ended": "2026-11-28T10:00:01Z", "status": "Succeeded",
                   "bindingContexts": [{"binding": "policy", "type": "Validating",
                                        "review": {"request": {"operation": "CREATE", "object": pod}}}],
                   "patches": [], "metrics": [],
                   "validating": {"allowed": false, "message": "no", "warnings": [], "patch": null}}),
            json!({"ended": "2026-11-28T10:00:02Z", "status": "Failed", "error": "exit code 1",
                   "bindingContexts": [{"binding": "hourly", "type": "Schedule"}],
                   "patches": [], "metrics": []}),
        ];
        let test = recorded_test("h.sh", "h.sh".into(), &runs);
        assert_eq!(test.steps.len(), 3);
        assert_eq!(
            test.steps[0].name.as_deref(),
            Some("run 1: Event Added Pod default/web-1 on pods (ended 2026-11-28T10:00:00Z)")
        );
        assert!(matches!(test.steps[0].action(), Some(Action::Replay(_))));
        assert_eq!(
            test.steps[0].expect.patches,
            Some(vec![json!({"operation": "MergePatch", "name": "web-1"})])
        );
        assert!(matches!(test.steps[1].action(), Some(Action::Review(_))));
        assert_eq!(
            test.steps[1].expect.admission,
            Some(json!({"allowed": false, "message": "no", "warnings": []}))
        );
        assert_eq!(
            test.steps[2].expect.runs,
            Some(vec![json!({"status": "Failed", "error": "exit code 1"})])
        );
        // What is written reads back as the same test.
        let text = to_yaml(&test);
        assert!(text.starts_with("# Captured by operon serve"), "{text}");
        let read = file::parse(&text, std::path::Path::new("r.test.yaml")).unwrap();
        assert_eq!(read, vec![test]);
    }
}
