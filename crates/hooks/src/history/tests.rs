use super::*;
use crate::context;
use crate::runner::{HookError, HookRun};
use operon_data::model::{ConfigVersion, ObjectAndFilter, ObjectRef, PatchSpec, WatchEvent};
use std::time::Duration;

fn record(hook: &str, contexts: Vec<BindingContext>, outcome: Result<(), HookError>) -> RunRecord {
    let failed = outcome.is_err();
    RunRecord {
        hook: hook.to_owned(),
        hook_index: 0,
        synchronizes: Vec::new(),
        queue: "main".to_owned(),
        contexts,
        config_version: ConfigVersion::V1,
        run: HookRun {
            outcome: outcome.map(|()| Default::default()),
            patches: Vec::new(),
            metrics: Vec::new(),
            logs: Vec::new(),
            stdout: String::new(),
            stderr: String::new(),
            elapsed: Duration::from_millis(42),
        },
        apply_error: None,
        failed,
        allowed_failure: false,
        retry_in: None,
    }
}

fn scheduled(hook: &str, n: usize) -> RunEntry {
    let mut entry = RunEntry::of(&record(
        hook,
        vec![context::schedule("every-minute", Vec::new())],
        Ok(()),
    ));
    entry.duration_ms = n as u64;
    entry
}

#[test]
fn a_hook_keeps_its_last_runs_oldest_first() {
    let history = History::new(2);
    for n in 0..RUNS_PER_HOOK + 5 {
        history.push(0, scheduled("a.sh", n));
    }
    let runs = history.runs(Some(0));
    assert_eq!(runs.len(), RUNS_PER_HOOK);
    assert_eq!(runs[0].duration_ms, 5);
    assert_eq!(
        runs[RUNS_PER_HOOK - 1].duration_ms,
        RUNS_PER_HOOK as u64 + 4
    );
    assert!(history.runs(Some(1)).is_empty());
    assert!(history.runs(Some(9)).is_empty());
}

#[test]
fn every_hooks_runs_are_listed_in_the_order_they_ended() {
    let history = History::new(2);
    history.push(1, scheduled("b.sh", 1));
    history.push(0, scheduled("a.sh", 2));
    history.push(1, scheduled("b.sh", 3));
    let order: Vec<(String, u64)> = history
        .runs(None)
        .into_iter()
        .map(|r| (r.hook, r.duration_ms))
        .collect();
    assert_eq!(
        order,
        [("b.sh".into(), 1), ("a.sh".into(), 2), ("b.sh".into(), 3)]
    );
}

#[test]
fn the_stderr_tail_is_cut_on_a_character_boundary() {
    // Two-byte characters: an odd bound falls inside one.
    let text = "é".repeat(100);
    let (kept, cut) = tail(&text, 51);
    assert!(cut);
    assert_eq!(kept, "é".repeat(25));
    assert_eq!(tail("short", 51), ("short", false));
    let mut run = record("a.sh", vec![context::schedule("s", Vec::new())], Ok(()));
    run.run.stderr = format!("{}\nlast words", "x".repeat(STDERR_TAIL_BYTES * 2));
    let entry = RunEntry::of(&run);
    assert_eq!(entry.stderr_tail.len(), STDERR_TAIL_BYTES);
    assert!(entry.stderr_tail.ends_with("last words"));
    assert!(entry.stderr_truncated);
    assert_eq!(head(&"é".repeat(10), 5), "éé…");
}

#[test]
fn an_entry_says_what_started_the_run_and_what_it_did() {
    let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-0","namespace":"shop"}}"#;
    let object = ObjectAndFilter {
        object: Some(pod.into()),
        filter_result: None,
    };
    let contexts = vec![
        context::event("pods", WatchEvent::Added, object.clone(), Vec::new()),
        context::event("pods", WatchEvent::Modified, object, Vec::new()),
        context::schedule("resync", Vec::new()),
    ];
    let status = operon_script::RunStatus::Exited(3);
    let error = HookError::Run(format!("hook pods.sh failed ({status}): no such pod"));
    let mut run = record("pods.sh", contexts, Err(error));
    run.run.patches = vec![
        PatchOperation::MergePatch(PatchSpec {
            target: ObjectRef {
                api_version: None,
                kind: "Pod".into(),
                namespace: Some("shop".into()),
                name: "web-0".into(),
            },
            patch: "{}".into(),
            subresource: None,
            ignore_missing_object: false,
        }),
        PatchOperation::Create(operon_data::model::CreateSpec {
            object: r#"{"kind":"Namespace","metadata":{"name":"audit"}}"#.into(),
            subresource: None,
        }),
    ];
    let entry = RunEntry::of(&run);
    assert_eq!(entry.bindings, ["pods", "resync"]);
    assert_eq!(entry.binding_type, "Event");
    assert_eq!(entry.trigger, "Added Pod shop/web-0 (+2 more)");
    assert_eq!(entry.outcome, HookRunOutcome::Failed);
    assert_eq!(entry.exit_code, Some(3));
    assert_eq!(entry.patches, 2);
    assert_eq!(
        entry.patch_descriptions,
        ["MergePatch Pod shop/web-0", "Create Namespace audit"]
    );
    assert_eq!(entry.duration_ms, 42);
    // Killed by a signal: the code the shell would report.
    assert_eq!(
        exit_code(&format!(
            "hook x failed ({})",
            operon_script::RunStatus::Exited(137)
        )),
        Some(137)
    );
    assert_eq!(exit_code("guest trapped"), None);
    let json = serde_json::to_value(&entry).unwrap();
    assert!(json["started"].as_str().unwrap().ends_with('Z'), "{json}");
}

#[test]
fn startup_and_synchronization_runs_are_named_so() {
    let startup = RunEntry::of(&record(
        "a.sh",
        vec![context::lifecycle("onStartup", Vec::new())],
        Ok(()),
    ));
    assert_eq!(startup.trigger, "startup");
    let objects = vec![
        ObjectAndFilter {
            object: None,
            filter_result: Some("1".into())
        };
        3
    ];
    let sync = RunEntry::of(&record(
        "a.sh",
        vec![context::synchronization("pods", objects, Vec::new())],
        Ok(()),
    ));
    assert_eq!(sync.trigger, "Synchronization (3 objects)");
    assert_eq!(sync.outcome, HookRunOutcome::Succeeded);
}
