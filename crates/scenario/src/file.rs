//! The test file `operon test` reads: its types (with the JSON schema derived from
//! them), and reading it with errors that name the file, the line and the field.
//!
//! A file holds one or more YAML documents, each a [`Test`]: a subject (a hook, a Hook
//! object, an addon-operator modules directory or a pipeline), the objects the
//! in-memory cluster starts with, and steps, each one action followed by what must hold.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The `apiVersion` of a test document.
pub const API_VERSION: &str = "test.operon.dev/v1alpha1";

/// The `kind` of a test document.
pub const KIND: &str = "Test";

/// One test: a subject, the starting objects and the steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Test {
    /// Always `test.operon.dev/v1alpha1`.
    pub api_version: String,
    /// Always `Test`.
    pub kind: String,
    /// What the test is about, printed with each step's outcome.
    pub name: String,
    /// Free text for the reader of the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What is tested.
    pub subject: Subject,
    /// Where wasm modules named by name or `sha256:` digest are found (a hook given by
    /// name, a Hook object's `spec.module`, an Operation's `wasm.module`), relative to
    /// the test file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modules: Option<PathBuf>,
    /// The objects the in-memory cluster holds before the first step: files (relative
    /// to the test file, several documents and `kind: List` accepted) or objects
    /// written here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<Objects>,
    /// What happens, in order; after each, its expectations are checked.
    pub steps: Vec<Step>,
}

/// The thing under test. Paths are relative to the test file.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Subject {
    /// A hook: a wasm component of the `hook` world, an executable shell-operator hook,
    /// or a module name or `sha256:` digest found in `modules`.
    Hook(PathBuf),
    /// A Hook object's YAML: its `spec.module` is found in `modules` (or beside the
    /// file), its overrides and permissions applied as `operon serve` applies them.
    HookObject(PathBuf),
    /// addon-operator's modules directory, with the operator's queue run over it.
    Modules(ModulesSubject),
    /// Operations and OperationSets (and KubeDiag's), for Diagnosis steps.
    Pipeline(PipelineSubject),
}

/// The files of a pipeline and the node it runs on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PipelineSubject {
    /// Files or directories of Operations, OperationSets and KubeDiag's objects.
    pub files: Vec<PathBuf>,
    /// The node's filesystem as an agent sees it (`$OPERON_NODE_ROOT` of scripts), a
    /// directory of fixtures [default: this machine's /].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_root: Option<PathBuf>,
}

/// Written as the one-key map it is read from (`hook: PATH`), not as a YAML tag.
impl Serialize for Subject {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = serializer.serialize_map(Some(1))?;
        match self {
            Subject::Hook(path) => map.serialize_entry("hook", path)?,
            Subject::HookObject(path) => map.serialize_entry("hookObject", path)?,
            Subject::Modules(modules) => map.serialize_entry("modules", modules)?,
            Subject::Pipeline(pipeline) => map.serialize_entry("pipeline", pipeline)?,
        }
        map.end()
    }
}

/// An addon-operator modules directory and what the operator is told about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModulesSubject {
    /// The modules directory (`NNN-name/` modules and `values.yaml`).
    pub dir: PathBuf,
    /// The global hooks directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_hooks_dir: Option<PathBuf>,
    /// The namespace of the modules' objects and of their ConfigMap.
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// The name of the ConfigMap of config values (addon-operator's default).
    #[serde(default = "default_config_map")]
    pub config_map: String,
}

fn default_namespace() -> String {
    "default".to_owned()
}

fn default_config_map() -> String {
    "addon-operator".to_owned()
}

/// Objects from a file or written inline: `file: PATH`, `object: OBJECT`, or the object
/// itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged, deny_unknown_fields)]
pub enum Objects {
    /// A YAML file of objects, relative to the test file.
    File {
        /// The file.
        file: PathBuf,
    },
    /// One object, under `object:`.
    Object {
        /// The object.
        object: Value,
    },
    /// One object, written as it is.
    Bare(Value),
}

impl Objects {
    /// The object written here, when it is not a file.
    pub fn object(&self) -> Option<&Value> {
        match self {
            Objects::File { .. } => None,
            Objects::Object { object } | Objects::Bare(object) => Some(object),
        }
    }
}

/// One step: exactly one action, then what must hold after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Step {
    /// Printed with the step's outcome [default: the action].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The first runs: startup, the Synchronization of every kubernetes binding and
    /// what they queue. Every test begins with them; a first step of `start: {}`
    /// checks what they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Start>,
    /// A watch event on objects: the cluster changes and the hook's bindings see it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<EventStep>,
    /// A tick of the hook's schedule binding of this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// An AdmissionReview to a validating or mutating binding, or a ConversionReview
    /// to a conversion binding, answered as `operon serve` would answer it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewStep>,
    /// One run of the hook on these binding contexts exactly, as a captured run
    /// received them (`operon hook record`); its patches are checked, not applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplayStep>,
    /// Modules: new config values, as the ConfigMap's would be (`global`, `<module>`
    /// and `<module>Enabled` keys), then the queue runs until it is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// Pipelines: a Diagnosis run to its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<DiagnosisStep>,
    /// What must hold after the action.
    #[serde(default)]
    pub expect: Expect,
}

/// The first runs of a test (nothing to set: the key alone says the step is this one).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Start {}

/// The kind of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum EventType {
    /// The objects are created (or replaced when they exist).
    Added,
    /// The objects change.
    Modified,
    /// The objects are deleted.
    Deleted,
}

/// A watch event: its type and its objects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventStep {
    /// What happens to the objects.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// The objects, each a file or an object.
    pub objects: Vec<Objects>,
}

/// A run replayed: the binding contexts a hook received, in shell-operator's JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplayStep {
    /// The binding contexts, snapshots included.
    pub binding_contexts: Vec<Value>,
}

/// A review sent to a webhook binding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewStep {
    /// The validating, mutating or conversion binding.
    pub binding: String,
    /// The review: a whole AdmissionReview or ConversionReview, or only an
    /// AdmissionReview's `request` (its `uid` made up when missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Value>,
    /// The review from a JSON or YAML file instead, relative to the test file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
}

/// A Diagnosis of the pipeline's OperationSet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiagnosisStep {
    /// The OperationSet to run.
    pub operation_set: String,
    /// The Diagnosis' name [default: the test's step].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `spec.parameters`.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub parameters: serde_json::Map<String, Value>,
    /// `spec.nodeName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
}

/// What must hold after a step. Every part is optional; what is left out is not
/// checked, except that a run that fails fails the step unless `runs` expects it.
///
/// Objects compare as kuttl and Chainsaw compare them: a map matches when every key it
/// names matches (others are ignored), a list when it has as many items and each
/// matches, anything else when it is equal.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// The step's runs, in order, each matched against the run's report (`hook`,
    /// `queue`, `status`, `error`, `bindingContexts`, `patches`, `metrics`, `logs`,
    /// `stdout`, `stderr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<Vec<Value>>,
    /// Every patch operation of the step's runs, in order, in shell-operator's JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patches: Option<Vec<Value>>,
    /// Every metric operation of the step's runs, in order, in shell-operator's JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Vec<Value>>,
    /// Objects the cluster holds after the step, found by apiVersion, kind, namespace
    /// and name, each matched as a subset; `{exact: OBJECT}` compares the whole object
    /// instead, server-owned metadata left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<Value>,
    /// Objects the cluster does not hold after the step: apiVersion, kind, and
    /// `metadata.name` (and `metadata.namespace`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absent: Vec<Value>,
    /// The answer to an AdmissionReview: `allowed`, `code`, `message`, `warnings`,
    /// `patch` (the JSON patch, decoded) and `object` (the object after the patch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<Value>,
    /// The answer to a ConversionReview: `failed`, `message`, `convertedObjects`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversion: Option<Value>,
    /// Modules: each module's values after the step (`global` for the global ones),
    /// and `enabled`, the list of enabled modules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Value>,
    /// Modules: what each queued task did, matched by task name (`ModuleRun:name`,
    /// `GlobalHookRun:...`): `ok` and `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Value>,
    /// Pipelines: the Diagnosis after its run: `phase`, `path` (the operations of the
    /// path that decided it, in order), `results` (operation to its result) and
    /// `failed` (operation to its error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<Value>,
}

/// The action of a step, once checked to be exactly one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action<'a> {
    /// The first runs.
    Start,
    /// A watch event.
    Event(&'a EventStep),
    /// A schedule tick.
    Schedule(&'a str),
    /// A review.
    Review(&'a ReviewStep),
    /// A captured run, replayed.
    Replay(&'a ReplayStep),
    /// New config values for modules.
    Config(&'a Value),
    /// A Diagnosis.
    Diagnosis(&'a DiagnosisStep),
}

impl Action<'_> {
    /// The key that names the action in the file.
    pub fn key(&self) -> &'static str {
        match self {
            Action::Start => "start",
            Action::Event(_) => "event",
            Action::Schedule(_) => "schedule",
            Action::Review(_) => "review",
            Action::Replay(_) => "replay",
            Action::Config(_) => "config",
            Action::Diagnosis(_) => "diagnosis",
        }
    }
}

impl Step {
    /// The step's one action; `None` when it names none or several (which
    /// [`read`] refuses).
    pub fn action(&self) -> Option<Action<'_>> {
        let mut actions = self.actions();
        let first = actions.next()?;
        actions.next().is_none().then_some(first)
    }

    fn actions(&self) -> impl Iterator<Item = Action<'_>> {
        [
            self.start.as_ref().map(|_| Action::Start),
            self.event.as_ref().map(Action::Event),
            self.schedule.as_deref().map(Action::Schedule),
            self.review.as_ref().map(Action::Review),
            self.replay.as_ref().map(Action::Replay),
            self.config.as_ref().map(Action::Config),
            self.diagnosis.as_ref().map(Action::Diagnosis),
        ]
        .into_iter()
        .flatten()
    }

    /// The name printed for the step: its own, else its action.
    pub fn title(&self) -> String {
        if let Some(name) = &self.name {
            return name.clone();
        }
        match self.action() {
            Some(Action::Start) | None => "start".to_owned(),
            Some(Action::Event(event)) => format!("{:?} event", event.kind),
            Some(Action::Schedule(name)) => format!("schedule {name}"),
            Some(Action::Review(review)) => format!("review to {}", review.binding),
            Some(Action::Replay(_)) => "replay".to_owned(),
            Some(Action::Config(_)) => "config values".to_owned(),
            Some(Action::Diagnosis(d)) => format!("Diagnosis of {}", d.operation_set),
        }
    }
}

/// Why a test file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TestFileError {
    /// The file cannot be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A document is not YAML, or does not have the shape of a test.
    #[error("{path}{}: {field}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The line, when known.
        line: Option<usize>,
        /// The field, as a path from the document's root (`steps[2].expect`).
        field: String,
        /// What is wrong.
        message: String,
    },
}

/// Reads every test of a file. Documents that are empty are skipped; the first
/// problem is returned.
pub fn read(path: &Path) -> Result<Vec<Test>, TestFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| TestFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(&text, path)
}

/// Reads every test of `text`; `path` names it in errors.
pub fn parse(text: &str, path: &Path) -> Result<Vec<Test>, TestFileError> {
    let invalid = |line: Option<usize>, field: String, message: String| TestFileError::Invalid {
        path: path.to_owned(),
        line,
        field,
        message,
    };
    let starts = document_lines(text);
    let mut tests = Vec::new();
    for (index, document) in yaml_serde::Deserializer::from_str(text).enumerate() {
        let first_line = starts.get(index).copied().unwrap_or(1);
        // Empty documents (a leading `---`, comments only) are not tests.
        let probe: Result<Value, _> = serde_path_to_error::deserialize(document);
        let value = match probe {
            Ok(Value::Null) => continue,
            Ok(value) => value,
            Err(error) => {
                let line = error.inner().location().map(|l| l.line());
                return Err(invalid(
                    line,
                    "(document)".to_owned(),
                    error.into_inner().to_string(),
                ));
            }
        };
        let test: Test = match serde_path_to_error::deserialize(&value) {
            Ok(test) => test,
            Err(error) => {
                let field = error.path().to_string();
                let line = line_of(text, first_line, &field);
                return Err(invalid(line, field, error.into_inner().to_string()));
            }
        };
        check(&test).map_err(|(field, message)| {
            let line = line_of(text, first_line, &field);
            invalid(line, field, message)
        })?;
        tests.push(test);
    }
    Ok(tests)
}

/// What no type can say: the header, one action per step, the actions the subject
/// takes.
fn check(test: &Test) -> Result<(), (String, String)> {
    if test.api_version != API_VERSION {
        return Err((
            "apiVersion".to_owned(),
            format!("{:?} is not {API_VERSION}", test.api_version),
        ));
    }
    if test.kind != KIND {
        return Err(("kind".to_owned(), format!("{:?} is not {KIND}", test.kind)));
    }
    objects_ok(&test.objects, "objects")?;
    if test.steps.is_empty() {
        return Err((
            "steps".to_owned(),
            "a test has at least one step".to_owned(),
        ));
    }
    for (index, step) in test.steps.iter().enumerate() {
        let at = format!("steps[{index}]");
        let named: Vec<&str> = step.actions().map(|a| a.key()).collect();
        let action = match named.as_slice() {
            [_] => step.action().expect("one action"),
            [] => {
                return Err((
                    at,
                    "a step has one action: start, event, schedule, review, replay, config or diagnosis"
                        .to_owned(),
                ));
            }
            several => {
                return Err((
                    at,
                    format!(
                        "a step has one action, this one has {}: make each its own step",
                        several.join(" and ")
                    ),
                ));
            }
        };
        let allowed: &[&str] = match test.subject {
            Subject::Hook(_) | Subject::HookObject(_) => {
                &["start", "event", "schedule", "review", "replay"]
            }
            Subject::Modules(_) => &["start", "event", "config"],
            Subject::Pipeline(_) => &["diagnosis"],
        };
        if !allowed.contains(&action.key()) {
            return Err((
                format!("{at}.{}", action.key()),
                format!(
                    "a test of {} takes {}",
                    subject_kind(&test.subject),
                    allowed.join(", ")
                ),
            ));
        }
        if matches!(action, Action::Start) && index != 0 {
            return Err((
                format!("{at}.start"),
                "start is the first step or none".to_owned(),
            ));
        }
        if let Action::Review(review) = action
            && review.request.is_some() == review.file.is_some()
        {
            return Err((
                format!("{at}.review"),
                "a review has a request or a file, not both or neither".to_owned(),
            ));
        }
        if let Action::Replay(replay) = action
            && replay.binding_contexts.is_empty()
        {
            return Err((
                format!("{at}.replay.bindingContexts"),
                "a replayed run has at least one binding context".to_owned(),
            ));
        }
        if let Action::Event(event) = action {
            objects_ok(&event.objects, &format!("{at}.event.objects"))?;
        }
        if let Action::Event(event) = action
            && event.objects.is_empty()
        {
            return Err((
                format!("{at}.event.objects"),
                "an event has at least one object".to_owned(),
            ));
        }
        for (i, object) in step.expect.objects.iter().enumerate() {
            let object = object.get("exact").unwrap_or(object);
            if !is_object_identity(object) {
                return Err((
                    format!("{at}.expect.objects[{i}]"),
                    "an expected object names its apiVersion, kind and metadata.name".to_owned(),
                ));
            }
        }
        for (i, object) in step.expect.absent.iter().enumerate() {
            if !is_object_identity(object) {
                return Err((
                    format!("{at}.expect.absent[{i}]"),
                    "an absent object names its apiVersion, kind and metadata.name".to_owned(),
                ));
            }
        }
    }
    Ok(())
}

/// Objects written in the file are objects with a kind.
fn objects_ok(objects: &[Objects], at: &str) -> Result<(), (String, String)> {
    for (index, source) in objects.iter().enumerate() {
        if let Some(object) = source.object()
            && !(object["apiVersion"].is_string() && object["kind"].is_string())
        {
            return Err((
                format!("{at}[{index}]"),
                "expected `file: PATH`, `object: OBJECT` or an object with apiVersion and kind"
                    .to_owned(),
            ));
        }
    }
    Ok(())
}

fn subject_kind(subject: &Subject) -> &'static str {
    match subject {
        Subject::Hook(_) => "a hook",
        Subject::HookObject(_) => "a Hook object",
        Subject::Modules(_) => "modules",
        Subject::Pipeline(_) => "a pipeline",
    }
}

fn is_object_identity(object: &Value) -> bool {
    object["apiVersion"].is_string()
        && object["kind"].is_string()
        && object["metadata"]["name"].is_string()
}

/// The first line (1-based) of each document of `text`.
fn document_lines(text: &str) -> Vec<usize> {
    let mut starts = vec![1];
    let mut content_seen = false;
    for (number, line) in text.lines().enumerate() {
        if line.starts_with("---") {
            if content_seen {
                starts.push(number + 2);
            } else {
                starts[0] = number + 2;
            }
            content_seen = false;
        } else if !line.trim().is_empty() && !line.trim_start().starts_with('#') {
            content_seen = true;
        }
    }
    starts
}

/// The line of `field` (a path such as `steps[1].expect.objectz`) in the document
/// starting at `first`: each key is looked for below the previous one's line, list
/// items counted by their `-`. Where the text stops showing the path in block style
/// (a flow mapping such as `{a: 1}`), the line of the deepest part found.
fn line_of(text: &str, first: usize, field: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut at = first.checked_sub(1)?;
    let mut indent: Option<usize> = None;
    for segment in path_segments(field) {
        let found = match segment {
            Segment::Key(key) => (at..lines.len()).find_map(|n| {
                let line = lines[n];
                let body = line.trim_start();
                let body = body.strip_prefix("- ").unwrap_or(body);
                let own = line.len() - body.len();
                let deeper = indent.is_none_or(|i| own > i || (own == i && n == at));
                (deeper && body.starts_with(&format!("{key}:"))).then_some((n, own))
            }),
            Segment::Index(index) => {
                let mut seen = 0;
                let mut found = None;
                for (n, line) in lines.iter().enumerate().skip(at + 1) {
                    let body = line.trim_start();
                    let own = line.len() - body.len();
                    if body.is_empty() || body.starts_with('#') {
                        continue;
                    }
                    if indent.is_some_and(|i| own < i) {
                        break;
                    }
                    if body.starts_with("- ") || body == "-" {
                        if seen == index {
                            found = Some((n, own));
                            break;
                        }
                        seen += 1;
                    }
                }
                found
            }
        };
        let Some((line, own)) = found else { break };
        at = line;
        indent = Some(own);
    }
    Some(at + 1)
}

enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

fn path_segments(field: &str) -> Vec<Segment<'_>> {
    let mut segments = Vec::new();
    for part in field.split('.').filter(|p| !p.is_empty() && *p != "?") {
        let (key, rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            segments.push(Segment::Key(key));
        }
        for index in rest.split('[').filter(|s| !s.is_empty()) {
            if let Ok(i) = index.trim_end_matches(']').parse() {
                segments.push(Segment::Index(i));
            }
        }
    }
    segments
}

/// The JSON schema of a test document, for editors.
pub fn schema() -> Value {
    serde_json::to_value(schemars::schema_for!(Test)).expect("a schema is JSON")
}

#[cfg(test)]
mod tests;
