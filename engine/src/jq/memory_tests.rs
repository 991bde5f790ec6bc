//! Filters that build values past the memory budget stop with a limit naming it;
//! ordinary ones, and the operators' results and order of outputs, are unchanged.

use crate::jq::{self, DEFAULT_MEMORY, JqError, Limit, Limits};
use serde_json::{Value, json};

fn run(filter: &str, input: &Value, limits: &Limits) -> Result<Vec<Value>, JqError> {
    jq::compile_uncached(filter)
        .unwrap_or_else(|e| panic!("{filter}: {e}"))
        .run_within(input, limits)
}

fn memory_limit_of(filter: &str, input: &Value, limits: &Limits) {
    match run(filter, input, limits) {
        Err(JqError::Limit { filter: f, limit }) => {
            assert_eq!(f, filter, "the error names the filter");
            assert_eq!(limit, Limit::Memory(limits.memory), "{filter}");
        }
        other => panic!("{filter}: expected the memory limit, got {other:?}"),
    }
}

#[test]
fn growing_values_stop_at_the_memory_limit() {
    let limits = Limits::default();
    for filter in [
        r#""x" * 1000000000"#,
        r#"1000000000 * "xy""#,
        r#""x" * 100000000000000000000000"#,
        "last(limit(40; \"x\" | recurse(. + .)))",
        "[limit(40; \"x\" | recurse(. + .))] | length",
        r#""abcd" as $x | reduce range(60) as $_ ($x; . + .) | length"#,
        "[1, 2] as $x | reduce range(60) as $_ ($x; . + .) | length",
        r#"reduce range(60) as $_ ("x"; "\(.)\(.)") | length"#,
        r#"reduce range(60) as $_ ("x"; [., .] | join("")) | length"#,
        r#"reduce range(60) as $_ ("x"; . += .) | length"#,
        r#"("x" * 1000000) as $s | [range(100000) | $s] | tojson | length"#,
        r#"("x" * 1000000) as $s | [range(100000) | $s] | tostring | length"#,
        r#"("x" * 1000000) as $s | [range(1000) | $s + "y"] | length"#,
        r#"("x" * 1000000) as $s | [range(1000) | "\($s)y"] | length"#,
        r#"[range(100000)] as $a | [range(1000) | $a] | tojson | length"#,
        r#"[limit(100000; repeat("x" * 100000))] | length"#,
        "def f: . + . | f; \"x\" | f",
    ] {
        memory_limit_of(filter, &Value::Null, &limits);
    }
    // Natives whose outputs are as large as their inputs, gathered: the same within a
    // smaller budget, which a debug build reaches well within the time limit.
    let small = Limits {
        memory: 8 << 20,
        ..Limits::default()
    };
    for filter in [
        r#"[range(100000) | 1114111] as $a | [range(100) | $a | implode] | length"#,
        r#"("QUJD" * 100000) as $s | [range(100) | $s + "" | @base64d] | length"#,
        r#"("ABC" * 100000) as $s | [range(100) | ($s + "D") | ascii_downcase] | length"#,
        r#"("x" * 100000) as $s | [range(1000) | {a: ($s + "y")}] | length"#,
    ] {
        memory_limit_of(filter, &Value::Null, &small);
    }
}

#[test]
fn the_memory_limit_is_the_runs() {
    let small = Limits {
        memory: 1 << 20,
        ..Limits::default()
    };
    memory_limit_of(r#""x" * 2000000"#, &Value::Null, &small);
    memory_limit_of(". + . + .", &json!("x".repeat(600_000)), &small);
    let wide: serde_json::Map<String, Value> =
        (0..40_000).map(|i| (format!("k{i}"), json!(i))).collect();
    let wide = Value::Object(wide);
    memory_limit_of(". + with_entries(.key += \"x\") | length", &wide, &small);
    memory_limit_of(". * with_entries(.key += \"x\") | length", &wide, &small);
    assert_eq!(
        run(r#""x" * 500000 | length"#, &Value::Null, &small).unwrap(),
        [json!(500_000)]
    );
    // A run's charges do not carry over to the next.
    for _ in 0..4 {
        run(r#""x" * 500000 | length"#, &Value::Null, &small).unwrap();
    }
    let message = run(r#""x" * 2000000"#, &Value::Null, &small)
        .unwrap_err()
        .to_string();
    assert_eq!(
        message,
        r#"jq filter "\"x\" * 2000000" built values of more than its memory limit of 1 MiB"#
    );
}

#[test]
fn try_does_not_catch_the_memory_limit() {
    memory_limit_of(
        r#"try ("x" * 1000000000) catch "caught""#,
        &Value::Null,
        &Limits::default(),
    );
    memory_limit_of(r#"("x" * 1000000000)?"#, &Value::Null, &Limits::default());
}

#[test]
fn operators_keep_their_results_and_order() {
    let limits = Limits::default();
    for (filter, expected) in [
        (r#""ab" * 3"#, json!(["ababab"])),
        (r#"3 * "ab""#, json!(["ababab"])),
        (r#""ab" * 0"#, json!([null])),
        ("[(1, 2) + (10, 20)]", json!([[11, 21, 12, 22]])),
        ("[(1, 2) * (10, 20)]", json!([[10, 20, 20, 40]])),
        ("[1] + [2]", json!([[1, 2]])),
        (
            r#"{"a": {"b": 1}} * {"a": {"c": 2}}"#,
            json!([{"a": {"b": 1, "c": 2}}]),
        ),
        (r#"{"a": 1} + {"b": 2}"#, json!([{"a": 1, "b": 2}])),
        ("null + 1", json!([1])),
        (".a += 1", json!([{"a": 2}])),
        (r#""\(.a)-\(.a + 1)""#, json!(["1-2"])),
        (
            "reduce range(3000) as $i (\"\"; . + \"x\") | length",
            json!([3000]),
        ),
        (
            "reduce range(3000) as $i ([]; . + [$i]) | length",
            json!([3000]),
        ),
        ("[range(100000)] | tojson | length", json!([588891])),
        ("add", json!([1])),
    ] {
        let input = json!({"a": 1});
        let outputs = run(filter, &input, &limits).unwrap_or_else(|e| panic!("{filter}: {e}"));
        assert_eq!(Value::Array(outputs), expected, "{filter}");
    }
    assert_eq!(
        run("[.[] | . * 2] | add", &json!([1, 2, 3]), &limits).unwrap(),
        [json!(12)]
    );
}

#[test]
fn the_default_memory_limit_is_far_above_a_hooks_values() {
    const { assert!(DEFAULT_MEMORY >= 64 << 20) };
    // A snapshot of 2,000 ConfigMaps turned into one patch each and printed.
    let snapshot: Vec<Value> = (0..2_000)
        .map(|i| {
            json!({"metadata": {"name": format!("cm-{i}"), "namespace": "default"},
                        "data": {"key": "v".repeat(200)}})
        })
        .collect();
    let filter = r#"[.[] | {op: "add", path: "/metadata/labels/x", value: (.data | tojson)}] | tojson | length"#;
    let outputs = run(filter, &Value::Array(snapshot), &Limits::default()).unwrap();
    assert!(outputs[0].as_u64().unwrap() > 400_000);
}
