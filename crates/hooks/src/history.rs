//! The last runs of each hook, kept in memory for `operon hook history` (through the
//! debug socket of `operon serve`): what a hook did lately without searching the log.
//!
//! What is kept is bounded whatever the hooks do: [`RUNS_PER_HOOK`] runs per hook (the
//! oldest goes first), the end of each run's stderr up to [`STDERR_TAIL_BYTES`], an
//! error up to [`ERROR_BYTES`], and [`PATCHES_DESCRIBED`] patch descriptions per run
//! (the count is always exact). Nothing is kept across restarts: the log and the
//! Hook objects' `status.lastFailures` are where runs outlive the process.

use super::HookRun;
use super::engine::RunRecord;
use operon_data::api::HookRunOutcome;
use operon_data::model::{BindingContext, BindingType, PatchOperation};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::Mutex;

/// How many runs of one hook are kept.
pub const RUNS_PER_HOOK: usize = 20;
/// How much of the end of a run's stderr is kept, in bytes.
pub const STDERR_TAIL_BYTES: usize = 2048;
/// How much of a run's error is kept, in bytes (a script's error carries its last
/// stderr line, which can be long).
pub const ERROR_BYTES: usize = 1024;
/// How many of a run's patches are described one by one.
pub const PATCHES_DESCRIBED: usize = 10;

/// One run, as `operon hook history` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEntry {
    /// The hook.
    pub hook: String,
    /// The bindings of its binding contexts, each once, in order.
    pub bindings: Vec<String>,
    /// The type of its first binding context, in shell-operator's spelling
    /// (`Synchronization`, `Event`, `Schedule`...).
    pub binding_type: String,
    /// What started it: `Added Pod default/web-0`, `schedule`, `Synchronization (3
    /// objects)`, `startup`, `validating review`...; a combined run says how many
    /// contexts follow the first.
    pub trigger: String,
    /// Its queue (`webhook` for reviews, which run outside the queues).
    pub queue: String,
    /// When it started.
    pub started: jiff::Timestamp,
    /// How long the hook ran, in milliseconds.
    pub duration_ms: u64,
    /// How it ended.
    pub outcome: HookRunOutcome,
    /// Why it failed: the hook's error, or the patch or metric that could not be
    /// applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How many patch operations it submitted (applied only when it succeeded).
    pub patches: usize,
    /// The first patches: operation, kind and `namespace/name`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patch_descriptions: Vec<String>,
    /// A script hook's exit code, when it exited non-zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The end of what it wrote on stderr.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr_tail: String,
    /// Whether stderr was longer than its tail.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stderr_truncated: bool,
}

impl RunEntry {
    /// The entry for a run that just ended.
    pub fn of(record: &RunRecord) -> Self {
        Self::build(
            &record.hook,
            &record.queue,
            &record.contexts,
            &record.run,
            record.outcome(),
            record.error(),
        )
    }

    /// The entry for a run of `hook` that no engine ran (addon-operator's lifecycle
    /// hooks, on its `main` queue): failed when the hook failed or when `error` says
    /// what went wrong after it (its values patches).
    pub fn of_run(
        hook: &str,
        queue: &str,
        contexts: &[BindingContext],
        run: &HookRun,
        error: Option<String>,
    ) -> Self {
        let error = match &run.outcome {
            Err(e) => Some(e.to_string()),
            Ok(_) => error,
        };
        let outcome = match error {
            Some(_) => HookRunOutcome::Failed,
            None => HookRunOutcome::Succeeded,
        };
        Self::build(hook, queue, contexts, run, outcome, error)
    }

    fn build(
        hook: &str,
        queue: &str,
        contexts: &[BindingContext],
        run: &HookRun,
        outcome: HookRunOutcome,
        error: Option<String>,
    ) -> Self {
        let mut bindings: Vec<String> = Vec::new();
        for context in contexts {
            if !bindings.contains(&context.binding) {
                bindings.push(context.binding.clone());
            }
        }
        let elapsed = run.elapsed;
        let now = jiff::Timestamp::now();
        let (stderr_tail, stderr_truncated) = tail(&run.stderr, STDERR_TAIL_BYTES);
        Self {
            hook: hook.to_owned(),
            bindings,
            binding_type: contexts
                .first()
                .map(|c| c.type_.as_str().to_owned())
                .unwrap_or_default(),
            trigger: trigger(contexts),
            queue: queue.to_owned(),
            started: now.checked_sub(elapsed).unwrap_or(now),
            duration_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            outcome,
            exit_code: error.as_deref().and_then(exit_code),
            error: error.map(|e| head(&e, ERROR_BYTES)),
            patches: run.patches.len(),
            patch_descriptions: run
                .patches
                .iter()
                .take(PATCHES_DESCRIBED)
                .map(describe_patch)
                .collect(),
            stderr_tail: stderr_tail.to_owned(),
            stderr_truncated,
        }
    }
}

/// The last runs of every hook of an engine.
#[derive(Debug)]
pub(crate) struct History {
    /// Per hook (by its index in the engine), its runs with their sequence numbers,
    /// oldest first.
    runs: Mutex<HistoryState>,
}

#[derive(Debug)]
struct HistoryState {
    per_hook: Vec<VecDeque<(u64, RunEntry)>>,
    /// The sequence number of the next run: runs of all hooks are listed in the order
    /// they ended.
    next: u64,
}

impl History {
    /// An empty history for `hooks` hooks.
    pub(crate) fn new(hooks: usize) -> Self {
        Self {
            runs: Mutex::new(HistoryState {
                per_hook: vec![VecDeque::new(); hooks],
                next: 0,
            }),
        }
    }

    /// Keeps `entry` as the newest run of hook `h`, dropping its oldest past the bound.
    pub(crate) fn push(&self, h: usize, entry: RunEntry) {
        let mut state = self.lock();
        let seq = state.next;
        state.next += 1;
        let Some(runs) = state.per_hook.get_mut(h) else {
            return;
        };
        if runs.len() == RUNS_PER_HOOK {
            runs.pop_front();
        }
        runs.push_back((seq, entry));
    }

    /// The runs of hook `h` (every hook's with `None`), in the order they ended.
    pub(crate) fn runs(&self, h: Option<usize>) -> Vec<RunEntry> {
        let state = self.lock();
        let mut runs: Vec<&(u64, RunEntry)> = match h {
            Some(h) => state.per_hook.get(h).into_iter().flatten().collect(),
            None => state.per_hook.iter().flatten().collect(),
        };
        runs.sort_by_key(|(seq, _)| *seq);
        runs.into_iter().map(|(_, entry)| entry.clone()).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HistoryState> {
        // A panic while holding the lock leaves whole entries only.
        self.runs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl super::engine::Engine {
    /// The last runs of hook `hook` (of every hook with `None`), oldest first; `None`
    /// for an unknown hook.
    pub fn history(&self, hook: Option<&str>) -> Option<Vec<RunEntry>> {
        let h = match hook {
            Some(name) => Some(self.hooks().iter().position(|l| l.hook.name() == name)?),
            None => None,
        };
        Some(self.runs.runs(h))
    }

    /// Takes over the runs `previous` kept of the hooks of the same name, so that a
    /// reload of the hooks directory does not forget what ran. For an engine that has
    /// not run anything yet: its own runs would be replaced.
    pub fn inherit_history(&self, previous: &Self) {
        let old = previous.runs.lock();
        let mut new = self.runs.lock();
        new.next = new.next.max(old.next);
        for (h, loaded) in self.hooks().iter().enumerate() {
            let name = loaded.hook.name();
            let Some(was) = (previous.hooks().iter()).position(|l| l.hook.name() == name) else {
                continue;
            };
            if let (Some(runs), Some(kept)) = (new.per_hook.get_mut(h), old.per_hook.get(was)) {
                runs.clone_from(kept);
            }
        }
    }
}

/// What started a run, from its binding contexts.
fn trigger(contexts: &[BindingContext]) -> String {
    let Some(first) = contexts.first() else {
        return String::new();
    };
    let described = match first.type_ {
        BindingType::OnStartup => "startup".to_owned(),
        BindingType::Schedule => "schedule".to_owned(),
        BindingType::Synchronization => match first.objects.len() {
            1 => "Synchronization (1 object)".to_owned(),
            n => format!("Synchronization ({n} objects)"),
        },
        BindingType::Group => format!("group {}", first.group.as_deref().unwrap_or(&first.binding)),
        BindingType::Validating => "validating review".to_owned(),
        BindingType::Mutating => "mutating review".to_owned(),
        BindingType::Conversion => "conversion review".to_owned(),
        BindingType::Event => {
            let kind = first.watch_event.map_or("Event", |e| e.as_str());
            let object = first
                .object
                .as_ref()
                .and_then(|o| o.object.as_deref())
                .and_then(identity);
            match object {
                Some(object) => format!("{kind} {object}"),
                None => kind.to_owned(),
            }
        }
    };
    match contexts.len() {
        1 => described,
        n => format!("{described} (+{} more)", n - 1),
    }
}

/// `Kind namespace/name` (`Kind name` when cluster-scoped) of an object's JSON text.
fn identity(object: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Object {
        kind: Option<String>,
        metadata: Option<Metadata>,
    }
    #[derive(Deserialize)]
    struct Metadata {
        name: Option<String>,
        namespace: Option<String>,
    }
    let object: Object = serde_json::from_str(object).ok()?;
    let metadata = object.metadata?;
    let kind = object.kind.unwrap_or_default();
    Some(match metadata.namespace {
        Some(namespace) => format!("{kind} {namespace}/{}", metadata.name?),
        None => format!("{kind} {}", metadata.name?),
    })
}

/// `Operation Kind namespace/name`.
fn describe_patch(patch: &PatchOperation) -> String {
    use PatchOperation as P;
    let target = match patch {
        P::Create(spec) | P::CreateOrUpdate(spec) | P::CreateIfNotExists(spec) => {
            identity(&spec.object)
        }
        P::Delete(target) | P::DeleteInBackground(target) | P::DeleteNonCascading(target) => {
            Some(object_ref(target))
        }
        P::JqPatch(spec) => Some(object_ref(&spec.target)),
        P::MergePatch(spec) | P::JsonPatch(spec) => Some(object_ref(&spec.target)),
    };
    match target {
        Some(target) => format!("{} {target}", patch.name()),
        None => patch.name().to_owned(),
    }
}

fn object_ref(target: &operon_data::model::ObjectRef) -> String {
    match &target.namespace {
        Some(namespace) => format!("{} {namespace}/{}", target.kind, target.name),
        None => format!("{} {}", target.kind, target.name),
    }
}

/// The exit code in a script hook's error (`hook NAME failed (exit code N)...`, as
/// `operon_script`'s run status writes it), for a run that exited non-zero.
fn exit_code(error: &str) -> Option<i32> {
    let (_, rest) = error.split_once("exit code ")?;
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .map_or(rest, |end| &rest[..end]);
    digits.parse().ok()
}

/// The last `max` bytes of `text` (fewer to start on a character boundary), and whether
/// anything was cut.
fn tail(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    (&text[start..], true)
}

/// The first `max` bytes of `text` (fewer to end on a character boundary), marked with
/// `…` when cut.
fn head(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests;
