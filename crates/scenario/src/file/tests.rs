//! Reading test files: shapes, actions, and errors naming their line and field.
use super::*;

fn parse_one(text: &str) -> Result<Vec<Test>, TestFileError> {
    parse(text, Path::new("t.test.yaml"))
}

const HEADER: &str =
    "apiVersion: test.operon.dev/v1alpha1\nkind: Test\nname: t\nsubject:\n  hook: h.sh\n";

#[test]
fn a_test_reads_with_its_steps() {
    let text = format!(
        "{HEADER}objects:\n- file: fixtures.yaml\nsteps:\n- start: {{}}\n- event:\n    type: Added\n    objects:\n    - object: {{apiVersion: v1, kind: Namespace, metadata: {{name: a}}}}\n    - {{apiVersion: v1, kind: Namespace, metadata: {{name: b}}}}\n    - file: more.yaml\n  expect:\n    patches: []\n"
    );
    let tests = parse_one(&text).unwrap();
    assert_eq!(tests.len(), 1);
    let test = &tests[0];
    assert_eq!(test.subject, Subject::Hook("h.sh".into()));
    assert_eq!(test.steps[0].action(), Some(Action::Start));
    assert_eq!(test.steps[1].title(), "Added event");
    assert_eq!(test.steps[1].expect.patches, Some(vec![]));
    let objects = &test.steps[1].event.as_ref().unwrap().objects;
    assert_eq!(objects[0].object().unwrap()["metadata"]["name"], "a");
    assert_eq!(objects[1].object().unwrap()["metadata"]["name"], "b");
    assert_eq!(
        objects[2],
        Objects::File {
            file: "more.yaml".into()
        }
    );
    let text = format!("{HEADER}steps:\n- event: {{type: Added, objects: [{{fil: x.yaml}}]}}\n");
    let error = parse_one(&text).unwrap_err().to_string();
    assert!(
        error.contains("t.test.yaml:7: steps[0].event.objects[0]: expected `file: PATH`"),
        "{error}"
    );
}

#[test]
fn an_unknown_field_is_named_with_its_line() {
    let text = format!("{HEADER}steps:\n- schedule: tick\n  expect:\n    patchez: []\n");
    let error = parse_one(&text).unwrap_err().to_string();
    assert!(
        error.starts_with("t.test.yaml:9: steps[0].expect"),
        "{error}"
    );
    assert!(error.contains("unknown field `patchez`"), "{error}");
}

#[test]
fn a_step_with_two_actions_or_none_is_refused() {
    let text = format!("{HEADER}steps:\n- schedule: tick\n  start: {{}}\n");
    let error = parse_one(&text).unwrap_err().to_string();
    assert!(
        error.contains(
            "t.test.yaml:7: steps[0]: a step has one action, this one has start and schedule"
        ),
        "{error}"
    );
    let text = format!("{HEADER}steps:\n- start: {{}}\n- name: y\n");
    let error = parse_one(&text).unwrap_err().to_string();
    assert!(
        error.contains("t.test.yaml:8: steps[1]: a step has one action"),
        "{error}"
    );
}

#[test]
fn actions_the_subject_does_not_take_are_refused() {
    let text = format!("{HEADER}steps:\n- diagnosis: {{operationSet: s}}\n");
    let error = parse_one(&text).unwrap_err().to_string();
    assert!(
        error.contains("steps[0].diagnosis: a test of a hook takes start, event, schedule, review"),
        "{error}"
    );
}

#[test]
fn a_wrong_header_and_a_bad_subject_are_named() {
    let text = HEADER.replace("v1alpha1", "v1") + "steps:\n- start: {}\n";
    let error = parse_one(&text).unwrap_err().to_string();
    assert_eq!(
        error,
        "t.test.yaml:1: apiVersion: \"test.operon.dev/v1\" is not test.operon.dev/v1alpha1"
    );
    let text = HEADER.replace("hook: h.sh", "hok: h.sh") + "steps:\n- start: {}\n";
    let error = parse_one(&text).unwrap_err().to_string();
    assert!(
        error.contains("t.test.yaml:4: subject: unknown variant `hok`"),
        "{error}"
    );
}

#[test]
fn several_documents_are_several_tests_and_lines_count_from_each() {
    let one = format!("{HEADER}steps:\n- start: {{}}\n");
    let two =
        format!("{HEADER}steps:\n- start: {{}}\n  expect:\n    objects:\n    - {{kind: Pod}}\n");
    let text = format!("---\n{one}---\n{two}");
    let error = parse_one(&text).unwrap_err().to_string();
    assert!(
        error.contains("t.test.yaml:19: steps[0].expect.objects[0]: an expected object names"),
        "{error}"
    );
    let text = format!("{one}---\n# nothing\n---\n{one}");
    assert_eq!(parse_one(&text).unwrap().len(), 2);
}

#[test]
fn yaml_errors_carry_their_line() {
    let error = parse_one("name: [\n").unwrap_err().to_string();
    assert!(error.starts_with("t.test.yaml:"), "{error}");
    let error = parse_one(&format!("{HEADER}steps: 3\n"))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("steps: invalid type: integer `3`, expected a sequence"),
        "{error}"
    );
}

#[test]
fn the_schema_names_every_action() {
    let schema = schema().to_string();
    for key in [
        "start",
        "event",
        "schedule",
        "review",
        "config",
        "diagnosis",
        "hookObject",
    ] {
        assert!(schema.contains(&format!("\"{key}\"")), "{key}");
    }
}
