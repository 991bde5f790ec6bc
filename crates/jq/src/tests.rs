//! Unit tests of compiling, caching and running filters.

use super::*;
use paths::MAX_ARRAY_INDEX;
use serde_json::json;

fn pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web", "tier": "front"}},
        "spec": {"containers": [{"name": "a", "image": "nginx:1"}, {"name": "b", "image": "envoy:2"}]},
        "status": {"phase": "Running"}
    })
}

fn one(filter: &str, input: &Value) -> Value {
    compile(filter)
        .and_then(|f| f.run_one(input))
        .unwrap_or_else(|e| panic!("{filter}: {e}"))
}

#[test]
fn compiled_filters_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Filter>();
}

#[test]
fn compile_error_names_position_and_problem() {
    let err = compile(".metadata |\n  map(.name").unwrap_err();
    let JqError::Compile {
        line,
        column,
        message,
        ..
    } = &err
    else {
        panic!("expected a compile error, got {err:?}");
    };
    assert_eq!(*line, 2);
    assert!(*column >= 3, "column {column}");
    assert!(message.contains("expected"), "{message}");
    assert!(err.to_string().contains("line 2"), "{err}");
}

#[test]
fn compile_error_names_undefined_filter() {
    let err = compile(".a | nosuchfilter(1)").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("undefined filter nosuchfilter"), "{text}");
    assert!(text.contains("column 6"), "{text}");
}

#[test]
fn env_is_not_available() {
    assert!(matches!(compile("env"), Err(JqError::Compile { .. })));
    assert!(matches!(compile("$ENV"), Err(JqError::Compile { .. })));
}

#[test]
fn cache_returns_the_same_compiled_filter() {
    let a = compile(".metadata.name | ascii_downcase").unwrap();
    let b = compile(".metadata.name | ascii_downcase").unwrap();
    assert!(Arc::ptr_eq(&a.inner, &b.inner));
    let c = compile_uncached(".metadata.name | ascii_downcase").unwrap();
    assert!(!Arc::ptr_eq(&a.inner, &c.inner));
}

#[test]
fn cache_is_bounded_and_evicts_least_recently_used() {
    let mut cache = FilterCache::default();
    let first = cache.insert(compile_uncached(".first").unwrap());
    for i in 0..CACHE_CAPACITY - 1 {
        cache.insert(compile_uncached(&format!(".a{i}")).unwrap());
    }
    assert!(cache.get(".first").is_some());
    cache.insert(compile_uncached(".new").unwrap());
    assert_eq!(cache.filters.len(), CACHE_CAPACITY);
    let still = cache.get(".first").expect("recently used filter kept");
    assert!(Arc::ptr_eq(&first.inner, &still.inner));
    assert!(cache.get(".a0").is_none(), "least recently used evicted");
}

#[test]
fn multiple_outputs_in_order() {
    let f = compile(".spec.containers[] | .name").unwrap();
    assert_eq!(f.run(&pod()).unwrap(), vec![json!("a"), json!("b")]);
    assert_eq!(
        compile("empty").unwrap().run(&pod()).unwrap(),
        Vec::<Value>::new()
    );
}

#[test]
fn run_one_names_the_count() {
    let err = compile(".spec.containers[]")
        .unwrap()
        .run_one(&pod())
        .unwrap_err();
    assert!(
        matches!(err, JqError::NotOneOutput { count: 2, .. }),
        "{err:?}"
    );
    let err = compile("empty").unwrap().run_one(&pod()).unwrap_err();
    assert!(
        matches!(err, JqError::NotOneOutput { count: 0, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("0 outputs"), "{err}");
}

#[test]
fn runtime_errors_are_errors() {
    let err = compile(".metadata.name + 1")
        .unwrap()
        .run(&pod())
        .unwrap_err();
    assert!(matches!(err, JqError::Runtime { .. }), "{err:?}");
    let err = compile(r#"error("boom")"#)
        .unwrap()
        .run(&pod())
        .unwrap_err();
    assert!(err.to_string().contains("boom"), "{err}");
    // An error after a first output still fails the run.
    let err = compile(r#"1, error("late")"#)
        .unwrap()
        .run(&pod())
        .unwrap_err();
    assert!(err.to_string().contains("late"), "{err}");
}

#[test]
fn halt_ends_the_run_not_the_process() {
    let err = compile("halt").unwrap().run(&pod()).unwrap_err();
    assert!(err.to_string().contains("halted"), "{err}");
}

#[test]
fn runaway_filters_are_cut_off() {
    let err = compile("repeat(1)").unwrap().run(&Value::Null).unwrap_err();
    assert!(matches!(err, JqError::TooManyOutputs { .. }), "{err:?}");
}

#[test]
fn shell_operator_style_filters() {
    let pod = pod();
    assert_eq!(
        one(".metadata.labels", &pod),
        json!({"app": "web", "tier": "front"})
    );
    assert_eq!(
        one("{name: .metadata.name, labels: .metadata.labels}", &pod),
        json!({"name": "web-1", "labels": {"app": "web", "tier": "front"}})
    );
    assert_eq!(
        one(".spec.containers | map(.image)", &pod),
        json!(["nginx:1", "envoy:2"])
    );
    let relabelled = one(r#".metadata.labels["app"] = "x""#, &pod);
    assert_eq!(relabelled["metadata"]["labels"]["app"], json!("x"));
    assert_eq!(relabelled["spec"], pod["spec"]);
    let without_status = one("del(.status)", &pod);
    assert!(without_status.get("status").is_none());
    assert_eq!(without_status["metadata"], pod["metadata"]);
}

#[test]
fn standard_library_functions() {
    let pod = pod();
    assert_eq!(
        one(".metadata.labels | to_entries | map(.key)", &pod),
        json!(["app", "tier"])
    );
    assert_eq!(one(r#".metadata | has("labels")"#, &pod), json!(true));
    assert_eq!(
        one(
            r#"[.spec.containers[] | select(.image | startswith("nginx")) | .name]"#,
            &pod
        ),
        json!(["a"])
    );
    assert_eq!(
        one(
            r#".metadata.name | split("-") | join("_") | ascii_upcase"#,
            &pod
        ),
        json!("WEB_1")
    );
    assert_eq!(
        one(r#".metadata.name | test("^web-[0-9]+$")"#, &pod),
        json!(true)
    );
    assert_eq!(one(".spec.containers | length", &pod), json!(2));
    assert_eq!(
        one("[.spec.containers[].name] | sort | first", &pod),
        json!("a")
    );
    assert_eq!(one(".metadata.missing // \"none\"", &pod), json!("none"));
    assert_eq!(
        one("keys", &pod),
        json!(["apiVersion", "kind", "metadata", "spec", "status"])
    );
}

#[test]
fn numbers_round_trip_like_jq() {
    let input = json!({"replicas": 3, "big": 18446744073709551615u64, "ratio": 0.25, "neg": -7});
    assert_eq!(one(".", &input), input);
    assert_eq!(one(".replicas * 1.0", &input), json!(3));
    assert_eq!(one(".replicas + 1", &input), json!(4));
    assert_eq!(one(".ratio * 2", &input), json!(0.5));
    assert_eq!(one("nan", &input), Value::Null);
}

#[test]
fn non_string_keys_are_not_json() {
    // jaq allows any key type; JSON does not.
    let result = compile("{(1): 2}").map(|f| f.run(&Value::Null));
    match result {
        Ok(Err(JqError::NotJson { .. })) | Ok(Err(JqError::Runtime { .. })) | Err(_) => {}
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn prelude_definitions_parse() {
    let defs = jaq_core::load::parse(prelude::DEFS, |parser| parser.defs());
    assert!(defs.is_some_and(|defs| defs.len() > 10));
}

#[test]
fn assignments_go_through_null_as_in_jq() {
    let empty = json!({"metadata": {"name": "a"}});
    assert_eq!(
        one(r#".metadata.labels.x = "y""#, &empty),
        json!({"metadata": {"name": "a", "labels": {"x": "y"}}})
    );
    assert_eq!(
        one(".spec.list[2] = 1", &empty)["spec"],
        json!({"list": [null, null, 1]})
    );
    assert_eq!(one("del(.nothing.deeper)", &empty), empty);
    assert_eq!(
        one(".a += 1 | .x.y //= 3", &Value::Null),
        json!({"a": 1, "x": {"y": 3}})
    );
}

#[test]
fn padding_an_array_is_bounded() {
    let at_limit = format!(".[{MAX_ARRAY_INDEX}] = 1 | length");
    assert_eq!(one(&at_limit, &Value::Null), json!(MAX_ARRAY_INDEX + 1));
    let past = format!(".[{}] = 1", MAX_ARRAY_INDEX + 1);
    let err = compile(&past).unwrap().run(&Value::Null).unwrap_err();
    assert!(err.to_string().contains("too large"), "{err}");
}

#[test]
fn a_filter_may_define_its_own_setpath() {
    assert_eq!(
        one(
            r#"def setpath($p; $v): "mine"; setpath(["a"]; 1)"#,
            &Value::Null
        ),
        json!("mine")
    );
    // `=` is jq's definition, not the user's `setpath`.
    assert_eq!(
        one(r#"def setpath($p; $v): "mine"; .a = 1"#, &Value::Null),
        json!({"a": 1})
    );
}

#[test]
fn update_operators_inside_definitions_and_strings_are_rewritten() {
    assert_eq!(
        one(
            r#"def tag(k): .metadata.labels[k] = "t"; tag("a")"#,
            &Value::Null
        ),
        json!({"metadata": {"labels": {"a": "t"}}})
    );
    assert_eq!(
        one(r#""\(.a.b = 1)""#, &Value::Null),
        json!(r#"{"a":{"b":1}}"#)
    );
    assert_eq!(one(r#""\(4 / 2)""#, &Value::Null), json!("2"));
}
