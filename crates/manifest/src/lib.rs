//! Reading Operon objects from YAML files and directories (multi-document YAML), for the
//! commands that run with no cluster, and checking them together (references between
//! them included).
//!
//! Every problem — a file that cannot be read, a document that is not YAML, an unknown
//! kind, a field of the wrong type, a duplicate name — is collected with the file, the
//! document number and the field, and loading goes on with the next document. Every
//! field's problem of an object is listed, not only the first.
//!
//! Hostile input is bounded before it is deserialized ([`scan`]): a duplicate key in a
//! mapping is refused with both places, a number JSON cannot hold is reported at its
//! field, and a document over the [`scan::LIMITS`] (size, nesting, nodes, aliases) is
//! refused by name. An OperationSet, the one kind that grows with its graph, is read
//! straight from its text into its typed form, so loading it costs a small multiple of
//! its size; a Diagnosis' or Trigger's parameters are limited to
//! [`PARAMETERS_BYTES`].
//!
//! [`kubediag`] rewrites KubeDiag's objects into Operon's group (`operon convert
//! kubediag`), reporting every change; loading names a KubeDiag object's apiVersion so
//! that the problem says which command converts it.
//!
//! Nothing here talks to a cluster or runs anything: the checks are the data crate's and
//! the pipeline's (graphs, plans, trigger matching), called on what the files hold.

#![warn(unreachable_pub)]

mod fields;
pub mod kubediag;
/// The YAML pre-pass documents are read with ([`operon_data::yaml_scan`]).
pub use operon_data::yaml_scan as scan;

use operon_data::api::{API_VERSION, Diagnosis, Operation, OperationSet, Problem, Trigger};
use operon_pipeline::{graph, triggers};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The most bytes (keys and values together) of a Diagnosis' or a Trigger's
/// `parameters`: each is copied into the input of every operation the Diagnosis runs.
pub const PARAMETERS_BYTES: usize = 256 * 1024;

/// Where an object came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Source {
    /// The file.
    pub(crate) file: PathBuf,
    /// The document's position in the file, from 1.
    pub(crate) document: usize,
}

impl Source {
    /// The directory relative paths in the object are resolved against.
    pub(crate) fn dir(&self) -> &Path {
        self.file.parent().unwrap_or(Path::new("."))
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}#{}", self.file.display(), self.document)
    }
}

/// An object with its source.
#[derive(Debug, Clone)]
pub struct Loaded<T> {
    /// The object.
    pub object: T,
    /// Where it was read.
    pub(crate) source: Source,
}

/// Everything read, by kind and name (sorted, so output is deterministic).
#[derive(Debug, Default, Clone)]
pub struct Manifests {
    /// Operations by name.
    pub operations: BTreeMap<String, Loaded<Operation>>,
    /// OperationSets by name.
    pub operation_sets: BTreeMap<String, Loaded<OperationSet>>,
    /// Triggers by name.
    pub triggers: BTreeMap<String, Loaded<Trigger>>,
    /// Diagnoses by name (namespaces are not separated: local runs use names).
    pub diagnoses: BTreeMap<String, Loaded<Diagnosis>>,
}

impl Manifests {
    /// How many objects were read.
    pub fn len(&self) -> usize {
        self.operations.len()
            + self.operation_sets.len()
            + self.triggers.len()
            + self.diagnoses.len()
    }

    /// Whether nothing was read.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every problem of every object, references between them included: each
    /// Operation's processor, each OperationSet's graph (its Operations must be among
    /// these objects), each Trigger's sources and OperationSet, each Diagnosis'
    /// OperationSet.
    pub fn validate(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        for op in self.operations.values() {
            problems.extend(op.object.validate());
        }
        for set in self.operation_sets.values() {
            if let Err(p) = graph::validate(&set.object, |name| self.operations.contains_key(name))
            {
                problems.extend(p);
            }
        }
        for trigger in self.triggers.values() {
            problems.extend(triggers::validate(&trigger.object));
            let set = &trigger.object.spec.operation_set;
            if !set.is_empty() && !self.operation_sets.contains_key(set) {
                problems.push(Problem::new(
                    trigger.object.object_ref(),
                    "spec.operationSet",
                    format!("OperationSet {set:?} is not defined in the given files"),
                ));
            }
        }
        for trigger in self.triggers.values() {
            problems.extend(parameters_size(
                trigger.object.object_ref(),
                &trigger.object.spec.parameters,
            ));
        }
        for diagnosis in self.diagnoses.values() {
            problems.extend(diagnosis.object.validate());
            problems.extend(parameters_size(
                diagnosis.object.object_ref(),
                &diagnosis.object.spec.parameters,
            ));
            let set = &diagnosis.object.spec.operation_set;
            if !self.operation_sets.contains_key(set) {
                problems.push(Problem::new(
                    diagnosis.object.object_ref(),
                    "spec.operationSet",
                    format!("OperationSet {set:?} is not defined in the given files"),
                ));
            }
        }
        problems
    }
}

/// Every problem of one object on its own, as an admission webhook sees it: its shape,
/// its fields and, for an OperationSet, its graph. References to other objects (an
/// OperationSet's Operations, a Trigger's or Diagnosis' OperationSet) are not checked:
/// `kubectl apply -f DIR` creates objects in file order, so a reference may come before
/// the object it names. Problems name the object as `Kind/name`.
pub fn validate_object(value: serde_json::Value) -> Vec<Problem> {
    let mut manifests = Manifests::default();
    let mut problems = Vec::new();
    let source = Source {
        file: PathBuf::from("object"),
        document: 1,
    };
    add(value, source, false, &[], &mut manifests, &mut problems);
    for op in manifests.operations.values() {
        problems.extend(op.object.validate());
    }
    for set in manifests.operation_sets.values() {
        if let Err(p) = graph::validate(&set.object, |_| true) {
            problems.extend(p);
        }
    }
    for trigger in manifests.triggers.values() {
        problems.extend(triggers::validate(&trigger.object));
        problems.extend(parameters_size(
            trigger.object.object_ref(),
            &trigger.object.spec.parameters,
        ));
    }
    for diagnosis in manifests.diagnoses.values() {
        problems.extend(diagnosis.object.validate());
        problems.extend(parameters_size(
            diagnosis.object.object_ref(),
            &diagnosis.object.spec.parameters,
        ));
    }
    problems
}

/// A problem when `parameters` hold more than [`PARAMETERS_BYTES`].
fn parameters_size(object: String, parameters: &BTreeMap<String, String>) -> Option<Problem> {
    let bytes: usize = parameters.iter().map(|(k, v)| k.len() + v.len()).sum();
    (bytes > PARAMETERS_BYTES).then(|| {
        Problem::new(
            object,
            "spec.parameters",
            format!(
                "holds {bytes} bytes, more than the {PARAMETERS_BYTES} allowed: every \
                 operation's input carries them; keep large data in a ConfigMap or a file \
                 the operation reads"
            ),
        )
    })
}

/// Operations resolve their relative module paths against their manifest's directory.
impl operon_pipeline::Operations for Manifests {
    fn get(&self, name: &str) -> Option<&Operation> {
        self.operations.get(name).map(|loaded| &loaded.object)
    }

    fn base_dir(&self, name: &str) -> &Path {
        self.operations
            .get(name)
            .map_or(Path::new("."), |loaded| loaded.source.dir())
    }

    fn origin(&self, name: &str) -> Option<String> {
        self.operations
            .get(name)
            .map(|loaded| loaded.source.to_string())
    }
}

/// Reads every `*.yaml` / `*.yml` file under `paths` (directories recursively, in sorted
/// order). Returns what could be read and every problem found.
pub fn load(paths: &[PathBuf]) -> (Manifests, Vec<Problem>) {
    let mut manifests = Manifests::default();
    let (files, mut problems) = yaml_files(paths);
    for file in files {
        match std::fs::read_to_string(&file) {
            Ok(text) => load_text(&file, &text, &mut manifests, &mut problems),
            Err(e) => problems.push(Problem::new(
                file.display().to_string(),
                "",
                format!("cannot read: {e}"),
            )),
        }
    }
    (manifests, problems)
}

/// The files [`load`] reads for `paths`: files as given, and every `*.yaml` / `*.yml`
/// under directories (recursively, sorted, hidden entries and `operon test`'s
/// `*.test.yaml` files skipped); a path that does not exist is a problem.
pub fn yaml_files(paths: &[PathBuf]) -> (Vec<PathBuf>, Vec<Problem>) {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for path in paths {
        collect_files(path, &mut files, &mut problems);
    }
    (files, problems)
}

fn collect_files(path: &Path, files: &mut Vec<PathBuf>, problems: &mut Vec<Problem>) {
    if path.is_dir() {
        let entries = match std::fs::read_dir(path) {
            Ok(entries) => entries,
            Err(e) => {
                problems.push(Problem::new(
                    path.display().to_string(),
                    "",
                    format!("cannot read: {e}"),
                ));
                return;
            }
        };
        let mut children: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        children.sort();
        for child in children {
            let hidden = child
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'));
            let yaml = child.extension().is_some_and(|e| e == "yaml" || e == "yml");
            // `operon test`'s files sit beside what they test, and are not objects.
            let test_file = child.file_name().is_some_and(|n| {
                let name = n.to_string_lossy();
                name.ends_with(".test.yaml") || name.ends_with(".test.yml")
            });
            if hidden || test_file {
                continue;
            }
            if child.is_dir() || yaml {
                collect_files(&child, files, problems);
            }
        }
    } else if path.exists() {
        files.push(path.to_owned());
    } else {
        problems.push(Problem::new(
            path.display().to_string(),
            "",
            "no such file or directory",
        ));
    }
}

/// Parses one file's documents into `manifests`.
pub fn load_text(file: &Path, text: &str, manifests: &mut Manifests, problems: &mut Vec<Problem>) {
    let scanned = scan::scan(text, scan::LIMITS);
    let count = scanned.documents.len();
    for (index, document) in scanned.documents.iter().enumerate() {
        let source = Source {
            file: file.to_owned(),
            document: index + 1,
        };
        let object = format!(
            "{source} ({}/{})",
            document.kind.as_deref().unwrap_or(""),
            document.name.as_deref().unwrap_or("")
        );
        for finding in &document.findings {
            problems.push(Problem::new(&object, &finding.field, &finding.reason));
        }
        let broken = scanned.error.is_some() && index + 1 == count && document.broken;
        if broken {
            // The YAML stream cannot be trusted past a syntax error.
            let error = scanned.error.as_deref().unwrap_or_default();
            problems.push(Problem::new(
                source.to_string(),
                "",
                format!("not valid YAML: {error}"),
            ));
            return;
        }
        if document.refused || document.empty {
            continue;
        }
        let known: Vec<String> = document.findings.iter().map(|f| f.field.clone()).collect();
        if known.is_empty()
            && document.kind.as_deref() == Some("OperationSet")
            && document.api_version.as_deref() == Some(API_VERSION)
            && document.name.as_deref().is_some_and(|n| !n.is_empty())
            && let Some(set) = operation_set_from_text(document.text)
        {
            let name = document.name.clone().unwrap_or_default();
            insert(
                &mut manifests.operation_sets,
                name,
                Loaded {
                    object: set,
                    source,
                },
                object,
                problems,
            );
            continue;
        }
        let value = match yaml_serde::from_str::<fields::Tree>(document.text) {
            Ok(fields::Tree(serde_json::Value::Null)) => continue,
            Ok(fields::Tree(value)) => value,
            Err(e) => {
                problems.push(Problem::new(
                    source.to_string(),
                    "",
                    format!(
                        "not valid YAML: {e} (in the document starting at line {})",
                        document.line
                    ),
                ));
                continue;
            }
        };
        add(value, source, true, &known, manifests, problems);
    }
    if let Some(error) = &scanned.error
        && !scanned.documents.last().is_some_and(|d| d.broken)
    {
        let source = Source {
            file: file.to_owned(),
            document: count + 1,
        };
        problems.push(Problem::new(
            source.to_string(),
            "",
            format!("not valid YAML: {error}"),
        ));
    }
}

/// An OperationSet read straight from its YAML text, without a JSON tree in between:
/// a tree of a 100,000-node graph is over ten times the size of its text. `None` when
/// it does not read; the tree path then reports every problem.
fn operation_set_from_text(text: &str) -> Option<OperationSet> {
    let limits = scan::LIMITS;
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = limits.depth + 1;
    budget.max_nodes = limits.nodes;
    budget.max_events = limits.nodes.saturating_mul(3);
    budget.max_aliases = limits.aliases;
    budget.max_documents = 1;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    serde_saphyr::from_str_with_options(text, options).ok()
}

/// Adds one object; its problems name it `FILE#N (Kind/name)`, or `Kind/name` when
/// `name_source` is false (an object that came from no file).
fn add(
    value: serde_json::Value,
    source: Source,
    name_source: bool,
    known: &[String],
    manifests: &mut Manifests,
    problems: &mut Vec<Problem>,
) {
    let api_version = value
        .get("apiVersion")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    let kind = value
        .get("kind")
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .to_owned();
    let name = value
        .pointer("/metadata/name")
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .to_owned();
    let object = if name_source {
        format!("{source} ({kind}/{name})")
    } else {
        format!("{kind}/{name}")
    };
    if api_version == crate::kubediag::KUBEDIAG_API_VERSION {
        problems.push(Problem::new(
            object,
            "apiVersion",
            format!(
                "a KubeDiag object: Operon's group is {API_VERSION}; `operon convert \
                 kubediag FILE` rewrites it and reports every field it changes or drops"
            ),
        ));
        return;
    }
    if api_version != API_VERSION {
        problems.push(Problem::new(
            object,
            "apiVersion",
            format!("expected {API_VERSION}, got {api_version:?}"),
        ));
        return;
    }
    if kind == "Operation" && value.pointer("/spec/processor/function").is_some() {
        problems.push(Problem::new(
            &object,
            "spec.processor.function",
            "KubeDiag's function processor (Python code run by its agent) is not \
             supported: write the step as a wasm component (processor.wasm, e.g. \
             with the Rust SDK) or a script (processor.scriptRunner)",
        ));
    }
    if name.is_empty() {
        problems.push(Problem::new(
            object,
            "metadata.name",
            "every object needs a name",
        ));
        return;
    }
    fn typed<T: serde::de::DeserializeOwned>(
        value: serde_json::Value,
        known: &[String],
        object: &str,
        problems: &mut Vec<Problem>,
    ) -> Option<T> {
        fields::typed(value, known)
            .map_err(|found| {
                for (field, reason) in found {
                    problems.push(Problem::new(object, field, reason));
                }
            })
            .ok()
    }
    match kind.as_str() {
        "Operation" => {
            if let Some(o) = typed(value, known, &object, problems) {
                insert(
                    &mut manifests.operations,
                    name,
                    Loaded { object: o, source },
                    object,
                    problems,
                );
            }
        }
        "OperationSet" => {
            if let Some(o) = typed(value, known, &object, problems) {
                insert(
                    &mut manifests.operation_sets,
                    name,
                    Loaded { object: o, source },
                    object,
                    problems,
                );
            }
        }
        "Trigger" => {
            if let Some(o) = typed(value, known, &object, problems) {
                insert(
                    &mut manifests.triggers,
                    name,
                    Loaded { object: o, source },
                    object,
                    problems,
                );
            }
        }
        "Diagnosis" => {
            if let Some(mut o) = typed::<Diagnosis>(value, known, &object, problems) {
                o.metadata
                    .namespace
                    .get_or_insert_with(|| "default".to_owned());
                insert(
                    &mut manifests.diagnoses,
                    name,
                    Loaded { object: o, source },
                    object,
                    problems,
                );
            }
        }
        // Checked, not kept: a Hook runs a module of the cluster's module store, which
        // nothing here loads or runs.
        "Hook" => {
            let found = operon_data::api::hook_spec_problems(&value);
            let mut listed: Vec<String> = known.to_vec();
            listed.extend(found.iter().map(|(field, _)| field.clone()));
            let typing = fields::typed::<operon_data::api::Hook>(value, &listed).err();
            // A field already reported (e.g. an unknown operation name) can also be
            // the one that stopped deserialization: it is listed once.
            let typing = typing
                .into_iter()
                .flatten()
                .filter(|(f, _)| !listed.contains(f));
            for (field, reason) in found.into_iter().chain(typing) {
                problems.push(Problem::new(&object, field, reason));
            }
        }
        // Checked, not kept: its settings are checked against a modules directory's
        // schemas where one is at hand (the admission webhook of `operon serve
        // --modules-dir`, `operon_addons::module_config`).
        "ModuleConfig" => {
            for (field, reason) in fields::typed::<operon_data::api::ModuleConfig>(value, known)
                .err()
                .into_iter()
                .flatten()
            {
                problems.push(Problem::new(&object, field, reason));
            }
        }
        other => problems.push(Problem::new(
            object,
            "kind",
            format!(
                "unknown kind {other:?}; expected Operation, OperationSet, Trigger, \
                 Diagnosis, Hook or ModuleConfig"
            ),
        )),
    }
}

/// Adds `loaded` under `name` unless the name is taken.
fn insert<T>(
    map: &mut BTreeMap<String, Loaded<T>>,
    name: String,
    loaded: Loaded<T>,
    object: String,
    problems: &mut Vec<Problem>,
) {
    if let Some(previous) = map.get(&name) {
        problems.push(Problem::new(
            object,
            "metadata.name",
            format!("duplicate name; first defined in {}", previous.source),
        ));
    } else {
        map.insert(name, loaded);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> (Manifests, Vec<Problem>) {
        let mut m = Manifests::default();
        let mut p = Vec::new();
        load_text(Path::new("x.yaml"), text, &mut m, &mut p);
        (m, p)
    }

    #[test]
    fn directories_skip_test_files_and_hidden_entries_but_not_files_given() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "a.yaml",
            "b.yml",
            "c.test.yaml",
            "d.test.yml",
            ".e.yaml",
            "f.txt",
        ] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let (files, problems) = yaml_files(&[dir.path().to_owned()]);
        assert!(problems.is_empty());
        let names: Vec<_> = files.iter().filter_map(|f| f.file_name()).collect();
        assert_eq!(names, ["a.yaml", "b.yml"]);
        let given = dir.path().join("c.test.yaml");
        assert_eq!(yaml_files(std::slice::from_ref(&given)).0, [given]);
    }

    #[test]
    fn multi_document_files_load_every_kind() {
        let (m, p) = parse(
            "apiVersion: operon.dev/v1alpha1\nkind: Operation\nmetadata: {name: a}\nspec: {processor: {scriptRunner: {script: 'true'}}}\n---\n---\napiVersion: operon.dev/v1alpha1\nkind: OperationSet\nmetadata: {name: s}\nspec: {adjacencyList: [{id: 0, to: [1]}, {id: 1, operation: a}]}\n---\napiVersion: operon.dev/v1alpha1\nkind: Diagnosis\nmetadata: {name: d}\nspec: {operationSet: s}\n",
        );
        assert!(p.is_empty(), "{p:?}");
        assert!(m.operations.contains_key("a"));
        assert!(m.operation_sets.contains_key("s"));
        assert_eq!(
            m.diagnoses["d"].object.metadata.namespace.as_deref(),
            Some("default")
        );
        assert_eq!(m.diagnoses["d"].source.document, 4);
    }

    #[test]
    fn bad_documents_are_reported_with_file_document_and_field() {
        let (m, p) = parse(
            "apiVersion: operon.dev/v1alpha1\nkind: Operation\nmetadata: {name: a}\nspec: {processor: {timeoutSeconds: soon, scriptRunner: {script: x}}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\napiVersion: operon.dev/v1alpha1\nkind: Widget\nmetadata: {name: w}\n---\napiVersion: operon.dev/v1alpha1\nkind: Operation\nmetadata: {}\n---\nkey: [unclosed\n",
        );
        assert!(m.operations.is_empty());
        let fields: Vec<(&str, &str)> = p
            .iter()
            .map(|p| (p.object.as_str(), p.field.as_str()))
            .collect();
        assert_eq!(
            fields[0],
            ("x.yaml#1 (Operation/a)", "spec.processor.timeoutSeconds")
        );
        assert_eq!(fields[1], ("x.yaml#2 (Pod/p)", "apiVersion"));
        assert_eq!(fields[2], ("x.yaml#3 (Widget/w)", "kind"));
        assert_eq!(fields[3], ("x.yaml#4 (Operation/)", "metadata.name"));
        assert!(p[4].reason.contains("not valid YAML"), "{}", p[4]);
    }

    #[test]
    fn kubediag_objects_and_function_processors_are_refused_with_what_to_do() {
        let (m, p) = parse(
            "apiVersion: diagnosis.kubediag.org/v1\nkind: Operation\nmetadata: {name: a}\nspec: {processor: {scriptRunner: {script: x}}}\n---\napiVersion: operon.dev/v1alpha1\nkind: Operation\nmetadata: {name: py}\nspec: {processor: {function: {runtime: Python3, codeSource: {}}}}\n",
        );
        assert_eq!(
            (p[0].object.as_str(), p[0].field.as_str()),
            ("x.yaml#1 (Operation/a)", "apiVersion")
        );
        assert!(p[0].reason.contains("operon convert kubediag"), "{}", p[0]);
        assert_eq!(
            (p[1].object.as_str(), p[1].field.as_str()),
            ("x.yaml#2 (Operation/py)", "spec.processor.function")
        );
        assert!(p[1].reason.contains("processor.wasm"), "{}", p[1]);
        assert!(!m.operations.contains_key("a"));
    }

    #[test]
    fn one_object_is_checked_on_its_own_without_its_references() {
        let set: serde_json::Value = yaml_serde::from_str(
            "apiVersion: operon.dev/v1alpha1\nkind: OperationSet\nmetadata: {name: loop}\nspec: {adjacencyList: [{id: 0, to: [1]}, {id: 1, operation: not-yet-created, to: [1, 5]}]}\n",
        )
        .unwrap();
        let problems = validate_object(set);
        assert!(!problems.is_empty());
        assert!(
            problems.iter().all(|p| p.object == "OperationSet/loop"),
            "{problems:?}"
        );
        let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
        assert!(
            fields.contains(&"spec.adjacencyList[1].to[1]"),
            "{fields:?}"
        );
        assert!(
            !problems
                .iter()
                .any(|p| p.reason.contains("not-yet-created")),
            "{problems:?}"
        );
        let op: serde_json::Value = yaml_serde::from_str(
            "apiVersion: operon.dev/v1alpha1\nkind: Operation\nmetadata: {name: a}\nspec: {processor: {timeoutSeconds: soon}}\n",
        )
        .unwrap();
        let problems = validate_object(op);
        assert_eq!(problems[0].object, "Operation/a");
        assert_eq!(problems[0].field, "spec.processor.timeoutSeconds");
        let fine: serde_json::Value = yaml_serde::from_str(
            "apiVersion: operon.dev/v1alpha1\nkind: Diagnosis\nmetadata: {name: d, namespace: x}\nspec: {operationSet: elsewhere}\n",
        )
        .unwrap();
        assert_eq!(validate_object(fine), []);
    }

    #[test]
    fn every_field_problem_is_listed_with_out_of_range_numbers_and_duplicate_keys() {
        let (m, p) = parse(
            "apiVersion: operon.dev/v1alpha1\nkind: Operation\nmetadata: {name: a}\nspec:\n  processor:\n    timeoutSeconds: 99999999999999999999\n    scriptRunner: {script: 'true'}\n    scriptRunner: {script: 'false', argKeys: 5}\n  storage: [wrong]\n",
        );
        assert!(m.operations.is_empty());
        let found: Vec<(&str, &str)> = p
            .iter()
            .map(|p| (p.field.as_str(), p.reason.as_str()))
            .collect();
        assert!(
            p.iter().all(|p| p.object == "x.yaml#1 (Operation/a)"),
            "{p:?}"
        );
        assert_eq!(
            found.iter().map(|f| f.0).collect::<Vec<_>>(),
            [
                "spec.processor.timeoutSeconds",
                "spec.processor.scriptRunner",
                "spec.processor.scriptRunner.argKeys",
                "spec.storage[0]"
            ],
            "{p:?}"
        );
        assert!(found[0].1.contains("out of range"), "{p:?}");
        assert!(
            found[1]
                .1
                .contains("line 7 column 5, again at line 8 column 5"),
            "{p:?}"
        );
        assert!(!p.iter().any(|p| p.reason.contains("not valid YAML")));
    }

    #[test]
    fn a_missing_field_does_not_hide_the_next_one() {
        let (_, p) = parse(
            "apiVersion: operon.dev/v1alpha1\nkind: Trigger\nmetadata: {name: t}\nspec: {parameters: {a: [1]}}\n",
        );
        let fields: Vec<&str> = p.iter().map(|p| p.field.as_str()).collect();
        assert!(fields.len() >= 2, "{p:?}");
        assert!(
            p.iter()
                .any(|p| p.reason.contains("missing field `operationSet`")),
            "{p:?}"
        );
        assert!(fields.contains(&"spec.parameters.a"), "{p:?}");
    }

    #[test]
    fn a_large_operation_set_is_read_straight_from_its_text_like_a_small_one() {
        let mut text = String::from(
            "apiVersion: operon.dev/v1alpha1\nkind: OperationSet\nmetadata: {name: s, labels: {a: 'yes'}}\nspec:\n  adjacencyList:\n  - id: 0\n    to: [1]\n",
        );
        for id in 1..200 {
            text.push_str(&format!(
                "  - id: {id}\n    operation: op\n    to: [{}]\n",
                id + 1
            ));
        }
        text.push_str("  - id: 200\n    operation: op\n");
        let (m, p) = parse(&text);
        assert!(p.is_empty(), "{p:?}");
        let direct = &m.operation_sets["s"].object;
        let value: serde_json::Value = yaml_serde::from_str(&text).unwrap();
        let through_tree: OperationSet = serde_json::from_value(value).unwrap();
        assert_eq!(
            serde_json::to_value(direct).unwrap(),
            serde_json::to_value(&through_tree).unwrap()
        );
        assert_eq!(direct.spec.adjacency_list.len(), 201);
    }

    #[test]
    fn parameters_over_the_limit_are_a_problem() {
        let big = "x".repeat(PARAMETERS_BYTES);
        let (m, p) = parse(&format!(
            "apiVersion: operon.dev/v1alpha1\nkind: Diagnosis\nmetadata: {{name: d}}\nspec: {{operationSet: s, parameters: {{a: {big}}}}}\n"
        ));
        assert!(p.is_empty(), "{p:?}");
        let problems = m.validate();
        let found = problems
            .iter()
            .find(|p| p.field == "spec.parameters")
            .expect("a parameters problem");
        assert!(
            found.reason.contains("more than the 262144 allowed"),
            "{found}"
        );
    }

    #[test]
    fn duplicate_names_are_reported() {
        let doc = "apiVersion: operon.dev/v1alpha1\nkind: Operation\nmetadata: {name: a}\nspec: {processor: {scriptRunner: {script: x}}}\n";
        let (_, p) = parse(&format!("{doc}---\n{doc}"));
        assert_eq!(p.len(), 1);
        assert!(
            p[0].reason.contains("first defined in x.yaml#1"),
            "{}",
            p[0]
        );
    }
}
