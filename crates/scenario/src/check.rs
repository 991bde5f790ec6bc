//! Checking a step's expectations against what its action did.

use crate::file::Expect;
use crate::matcher::{Mode, compare};
use serde_json::Value;

/// What a step's action did, in the forms the expectations are written in.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    /// Each run's report (`hook`, `queue`, `status`, `error`, `patches`, ...).
    pub runs: Vec<Value>,
    /// The answer to an AdmissionReview.
    pub admission: Option<Value>,
    /// The answer to a ConversionReview.
    pub conversion: Option<Value>,
    /// Modules' values and the enabled modules.
    pub values: Option<Value>,
    /// Modules' tasks by name.
    pub tasks: Option<Value>,
    /// A Diagnosis after its run.
    pub diagnosis: Option<Value>,
    /// Every object of the cluster after the step.
    pub objects: Vec<Value>,
}

impl Observed {
    /// What the step observed besides runs and objects, keyed as in `expect`.
    pub(crate) fn answers(&self) -> serde_json::Map<String, Value> {
        [
            ("admission", &self.admission),
            ("conversion", &self.conversion),
            ("values", &self.values),
            ("tasks", &self.tasks),
            ("diagnosis", &self.diagnosis),
        ]
        .into_iter()
        .filter_map(|(key, value)| Some((key.to_owned(), value.clone()?)))
        .collect()
    }
}

/// Every way `observed` is not what `expect` says, each a line for the reader.
pub(crate) fn check(expect: &Expect, observed: &Observed) -> Vec<String> {
    let mut failures = Vec::new();
    match &expect.runs {
        Some(runs) => list("runs", runs, &observed.runs, &mut failures),
        None => {
            for (index, run) in observed.runs.iter().enumerate() {
                if run["status"] == "Failed" {
                    failures.push(format!(
                        "run {} of {} failed (add `runs` to the expectations if it should): {}",
                        index + 1,
                        run["hook"].as_str().unwrap_or("the hook"),
                        run["error"].as_str().unwrap_or("no error given")
                    ));
                }
            }
        }
    }
    if let Some(patches) = &expect.patches {
        list(
            "patches",
            patches,
            &all(&observed.runs, "patches"),
            &mut failures,
        );
    }
    if let Some(metrics) = &expect.metrics {
        list(
            "metrics",
            metrics,
            &all(&observed.runs, "metrics"),
            &mut failures,
        );
    }
    for (index, wanted) in expect.objects.iter().enumerate() {
        let (wanted, mode) = match wanted.get("exact") {
            Some(exact) if wanted.as_object().is_some_and(|o| o.len() == 1) => (exact, Mode::Exact),
            _ => (wanted, Mode::Subset),
        };
        let label = format!("objects[{index}] ({})", describe(wanted));
        match find(&observed.objects, wanted) {
            Found::One(actual) => {
                let actual = match mode {
                    Mode::Exact => without_server_fields(actual, wanted),
                    Mode::Subset => actual.clone(),
                };
                for difference in compare(wanted, &actual, mode) {
                    failures.push(format!("{label}: {difference}"));
                }
            }
            Found::None => failures.push(format!("{label}: not in the cluster")),
            Found::Several(namespaces) => failures.push(format!(
                "{label}: one in each of the namespaces {}: name the namespace",
                namespaces.join(", ")
            )),
        }
    }
    for (index, unwanted) in expect.absent.iter().enumerate() {
        if !matches!(find(&observed.objects, unwanted), Found::None) {
            failures.push(format!(
                "absent[{index}] ({}): is in the cluster",
                describe(unwanted)
            ));
        }
    }
    answer(
        "admission",
        expect.admission.as_ref(),
        observed.admission.as_ref(),
        "the step sent no AdmissionReview",
        &mut failures,
    );
    answer(
        "conversion",
        expect.conversion.as_ref(),
        observed.conversion.as_ref(),
        "the step sent no ConversionReview",
        &mut failures,
    );
    answer(
        "values",
        expect.values.as_ref(),
        observed.values.as_ref(),
        "the subject has no values",
        &mut failures,
    );
    answer(
        "tasks",
        expect.tasks.as_ref(),
        observed.tasks.as_ref(),
        "the step ran no module tasks",
        &mut failures,
    );
    answer(
        "diagnosis",
        expect.diagnosis.as_ref(),
        observed.diagnosis.as_ref(),
        "the step ran no Diagnosis",
        &mut failures,
    );
    failures
}

fn list(label: &str, expected: &[Value], actual: &[Value], failures: &mut Vec<String>) {
    let differences = compare(
        &Value::Array(expected.to_vec()),
        &Value::Array(actual.to_vec()),
        Mode::Subset,
    );
    if expected.len() != actual.len() {
        failures.push(format!(
            "{label}: expected {}, got {}",
            count(expected.len()),
            count(actual.len())
        ));
    }
    for difference in differences {
        failures.push(format!("{label}{difference}"));
    }
}

fn count(n: usize) -> String {
    match n {
        1 => "1 item".to_owned(),
        n => format!("{n} items"),
    }
}

fn answer(
    label: &str,
    expected: Option<&Value>,
    actual: Option<&Value>,
    missing: &str,
    failures: &mut Vec<String>,
) {
    let Some(expected) = expected else { return };
    let Some(actual) = actual else {
        failures.push(format!("{label}: {missing}"));
        return;
    };
    for difference in compare(expected, actual, Mode::Subset) {
        failures.push(format!("{label}{difference}"));
    }
}

/// Every item of `key` of every run, in order.
fn all(runs: &[Value], key: &str) -> Vec<Value> {
    runs.iter()
        .flat_map(|run| run[key].as_array().cloned().unwrap_or_default())
        .collect()
}

enum Found<'a> {
    None,
    One(&'a Value),
    Several(Vec<String>),
}

/// The object `wanted` names: by apiVersion, kind and name, and by namespace when it
/// names one.
fn find<'a>(objects: &'a [Value], wanted: &Value) -> Found<'a> {
    let namespace = wanted["metadata"]["namespace"].as_str();
    let matching: Vec<&Value> = objects
        .iter()
        .filter(|o| {
            o["apiVersion"] == wanted["apiVersion"]
                && o["kind"] == wanted["kind"]
                && o["metadata"]["name"] == wanted["metadata"]["name"]
                && namespace.is_none_or(|ns| o["metadata"]["namespace"].as_str() == Some(ns))
        })
        .collect();
    match matching.as_slice() {
        [] => Found::None,
        [one] => Found::One(one),
        several => Found::Several(
            several
                .iter()
                .map(|o| o["metadata"]["namespace"].as_str().unwrap_or("").to_owned())
                .collect(),
        ),
    }
}

/// `actual` without the metadata the server owns, unless the test names it.
fn without_server_fields(actual: &Value, wanted: &Value) -> Value {
    let mut actual = actual.clone();
    if let Some(metadata) = actual["metadata"].as_object_mut() {
        for key in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
        ] {
            if wanted["metadata"].get(key).is_none() {
                metadata.remove(key);
            }
        }
    }
    actual
}

fn describe(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or("?");
    let name = object["metadata"]["name"].as_str().unwrap_or("?");
    let namespace = object["metadata"]["namespace"].as_str();
    format!(
        "{kind} {}",
        operon_cluster::namespaced_name(namespace, name)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn expect(yaml: &str) -> Expect {
        yaml_serde::from_str(yaml).unwrap()
    }

    fn secret(namespace: &str, data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": namespace, "uid": "u1", "resourceVersion": "3"}, "data": data})
    }

    #[test]
    fn objects_are_found_by_identity_and_matched() {
        let observed = Observed {
            objects: vec![
                secret("a", json!({"k": "MQ=="})),
                secret("b", json!({"k": "Mg=="})),
            ],
            ..Observed::default()
        };
        let ok = expect(
            "objects:\n- {apiVersion: v1, kind: Secret, metadata: {name: s, namespace: b}, data: {k: Mg==}}\n",
        );
        assert_eq!(check(&ok, &observed), Vec::<String>::new());
        let wrong = expect(
            "objects:\n- {apiVersion: v1, kind: Secret, metadata: {name: s, namespace: a}, data: {k: Mg==}}\n- {apiVersion: v1, kind: Secret, metadata: {name: s}}\n- {apiVersion: v1, kind: Secret, metadata: {name: t, namespace: a}}\nabsent:\n- {apiVersion: v1, kind: Secret, metadata: {name: s, namespace: b}}\n",
        );
        assert_eq!(
            check(&wrong, &observed),
            [
                "objects[0] (Secret a/s): .data.k: expected \"Mg==\", got \"MQ==\"",
                "objects[1] (Secret s): one in each of the namespaces a, b: name the namespace",
                "objects[2] (Secret a/t): not in the cluster",
                "absent[0] (Secret b/s): is in the cluster",
            ]
        );
    }

    #[test]
    fn an_exact_object_leaves_out_server_fields_only() {
        let observed = Observed {
            objects: vec![secret("a", json!({"k": "MQ==", "extra": "eA=="}))],
            ..Observed::default()
        };
        let exact = expect(
            "objects:\n- exact: {apiVersion: v1, kind: Secret, metadata: {name: s, namespace: a}, data: {k: MQ==}}\n",
        );
        assert_eq!(
            check(&exact, &observed),
            ["objects[0] (Secret a/s): .data.extra: not expected, got \"eA==\""]
        );
    }

    #[test]
    fn a_failed_run_fails_the_step_unless_expected() {
        let observed = Observed {
            runs: vec![
                json!({"hook": "h.sh", "status": "Failed", "error": "exit code 1", "patches": []}),
            ],
            ..Observed::default()
        };
        assert_eq!(
            check(&Expect::default(), &observed),
            ["run 1 of h.sh failed (add `runs` to the expectations if it should): exit code 1"]
        );
        assert!(check(&expect("runs: [{status: Failed}]\n"), &observed).is_empty());
    }

    #[test]
    fn patches_of_all_runs_are_one_list() {
        let observed = Observed {
            runs: vec![
                json!({"status": "Succeeded", "patches": [{"operation": "Delete", "name": "a"}]}),
                json!({"status": "Succeeded", "patches": [{"operation": "Delete", "name": "b"}]}),
            ],
            ..Observed::default()
        };
        assert!(check(&expect("patches: [{name: a}, {name: b}]\n"), &observed).is_empty());
        assert_eq!(
            check(
                &expect("patches: [{name: a}]\nadmission: {allowed: true}\n"),
                &observed
            ),
            [
                "patches: expected 1 item, got 2 items",
                "patches[1]: not expected, got {\"name\":\"b\",\"operation\":\"Delete\"}",
                "admission: the step sent no AdmissionReview",
            ]
        );
    }
}
