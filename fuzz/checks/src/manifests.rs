//! Operon's objects from a file: multi-document YAML, typed objects, validation.
//!
//! Beyond not panicking: every problem names an object and a reason; every object that
//! loads, written back out, loads again as the same object; an OperationSet read
//! straight from its text equals the one read through a JSON tree whenever both read;
//! the admission webhook's check of each loaded object answers.

use operon_data::api::OperationSet;
use operon_manifest::{self as manifest, Manifests};
use serde::Serialize;
use std::path::Path;

fn load(text: &str) -> (Manifests, Vec<operon_data::api::Problem>) {
    let mut manifests = Manifests::default();
    let mut problems = Vec::new();
    manifest::load_text(Path::new("f.yaml"), text, &mut manifests, &mut problems);
    (manifests, problems)
}

/// `object` as JSON text loads again, under `name`, as itself.
fn round_trip<T: Serialize>(object: &T, get: impl Fn(&Manifests) -> Option<serde_json::Value>) {
    let value = serde_json::to_value(object).expect("a loaded object serializes");
    let (again, problems) = load(&value.to_string());
    assert!(
        problems.is_empty(),
        "{value} does not load again: {problems:?}"
    );
    assert_eq!(
        get(&again),
        Some(value.clone()),
        "{value} loads as something else"
    );
    // The admission webhook's check of one object must answer, whatever it finds.
    for problem in manifest::validate_object(value) {
        assert!(!problem.object.is_empty() && !problem.reason.is_empty());
    }
}

/// The JSON tree of the clean document holding OperationSet `name`, read by the YAML
/// library every other kind goes through.
fn yaml_tree(text: &str, name: &str) -> Option<serde_json::Value> {
    let scan = manifest::scan::scan(text, manifest::scan::LIMITS);
    let document = scan.documents.iter().find(|d| {
        d.kind.as_deref() == Some("OperationSet")
            && d.name.as_deref() == Some(name)
            && d.findings.is_empty()
    })?;
    yaml_serde::from_str(document.text).ok()
}

/// Checks one input; panics on a finding.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (manifests, mut problems) = load(text);
    problems.extend(manifests.validate());
    for problem in &problems {
        assert!(!problem.object.is_empty(), "{problem:?}");
        assert!(!problem.reason.is_empty(), "{problem:?}");
    }
    for (name, loaded) in &manifests.operations {
        round_trip(&loaded.object, |m| {
            m.operations
                .get(name)
                .map(|l| serde_json::to_value(&l.object).unwrap())
        });
    }
    for (name, loaded) in &manifests.operation_sets {
        round_trip(&loaded.object, |m| {
            m.operation_sets
                .get(name)
                .map(|l| serde_json::to_value(&l.object).unwrap())
        });
        // The direct reading and the tree agree where both read the text.
        if let Some(value) = yaml_tree(text, name)
            && let Ok(through_tree) = serde_json::from_value::<OperationSet>(value)
        {
            assert_eq!(
                serde_json::to_value(&through_tree).unwrap(),
                serde_json::to_value(&loaded.object).unwrap(),
                "the direct reading of OperationSet {name} differs from the tree's"
            );
        }
    }
    for (name, loaded) in &manifests.triggers {
        round_trip(&loaded.object, |m| {
            m.triggers
                .get(name)
                .map(|l| serde_json::to_value(&l.object).unwrap())
        });
    }
    for (name, loaded) in &manifests.diagnoses {
        round_trip(&loaded.object, |m| {
            m.diagnoses
                .get(name)
                .map(|l| serde_json::to_value(&l.object).unwrap())
        });
    }
}
