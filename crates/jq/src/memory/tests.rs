//! Filters that build values past the memory budget stop with a limit naming it;
//! ordinary ones, and the operators' results and order of outputs, are unchanged.

use crate::{DEFAULT_MEMORY, JqError, Limit, Limits};
use serde_json::{Value, json};

fn run(filter: &str, input: &Value, limits: &Limits) -> Result<Vec<Value>, JqError> {
    crate::compile_uncached(filter)
        .unwrap_or_else(|e| panic!("{filter}: {e}"))
        .run_within(input, limits)
}

fn memory_limit_of(filter: &str, input: &Value, limits: &Limits) {
    match run(filter, input, limits) {
        Err(JqError::Limit { filter: f, limit }) => {
            assert_eq!(f, crate::shorten(filter), "the error names the filter");
            assert_eq!(limit, Limit::Memory(limits.memory), "{filter}");
        }
        other => panic!("{filter}: expected the memory limit, got {other:?}"),
    }
}

#[test]
fn growing_values_stop_at_the_memory_limit() {
    // The time limit is far above what any of these needs to reach the memory limit,
    // so that a slow machine running a debug build still stops them by memory: a
    // filter that doubles a string to 256 MiB copies about as much again on the way.
    let limits = Limits {
        time: std::time::Duration::from_secs(60),
        ..Limits::default()
    };
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
    // smaller budget.
    let small = Limits {
        memory: 8 << 20,
        ..limits
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
        time: std::time::Duration::from_secs(60),
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

/// Each native of jaq that builds a new string or array, and each `@` format and
/// string function built on them, is charged as it produces its output: a filter that
/// builds and drops large strings with one of them stops at the limit even though it
/// gathers nothing. (The budget is small and the time limit long so that a debug
/// build reaches the limit by memory, well before time.)
#[test]
fn natives_that_build_strings_are_charged_as_they_produce_them() {
    let small = Limits {
        memory: 8 << 20,
        time: std::time::Duration::from_secs(30),
        ..Limits::default()
    };
    // `$s` is charged 1 MB once; the loop adds up only what the native builds.
    let each = |prelude: &str, native: &str, times: u32| {
        format!("{prelude} as $s | reduce range({times}) as $_ (0; . + ($s | {native} | length))")
    };
    let x = r#"("x" * 1000000)"#;
    for filter in [
        each(r#"[range(100000) | 1114111]"#, "implode", 30),
        each(r#"("x" * 100000)"#, "explode", 10),
        each(r#"("ABC" * 300000)"#, "ascii_downcase", 10),
        each(x, "ascii_upcase", 10),
        each(r#"("QUJD" * 250000)"#, "@base64d", 15),
        each(x, "@base64", 10),
        each(r#"("<>" * 500000)"#, "@html", 3),
        each(r#"("/" * 1000000)"#, "@uri", 4),
        each(r#"("'" * 1000000)"#, "@sh", 3),
        each(x, "@json", 10),
        each(x, "@text | @json", 10),
        each(r#"("a,b" * 100000)"#, "split(\",\")", 10),
        each(x, "[.] | @csv", 10),
        each(x, "[.] | @tsv", 10),
        each(x, "[., .] | join(\",\")", 5),
        each(
            r#"("x" * 100000)"#,
            "first(match(\"x\"; \"g\")) | .string",
            1,
        ),
        each(r#"("x" * 100000)"#, "test(\"x\"; \"g\")", 1),
        each(r#"("x" * 100000)"#, "[splits(\"x\")]", 10),
        each(r#"("x" * 100000)"#, "indices(\"x\")", 10),
        each(r#"("%c" * 400000)"#, ". as $f | 0 | strftime($f)", 1),
        r#"("x" * 1000000) / "" | length"#.to_owned(),
        // Stopped before jaq builds a match object per character.
        r#"("x" * 1000000) | first(match(""; "g")) | .offset"#.to_owned(),
        r#"("x" * 1000000) | gsub(""; "-") | length"#.to_owned(),
        r#"("x" * 1000000) | split("") | length"#.to_owned(),
        r#"("a," * 500000) / "," | length"#.to_owned(),
        // Natives that return a part of their input build nothing, but a loop that
        // grows a string through them is still charged for the growth.
        r#"reduce range(30) as $_ ("x"; (. + . + "y") | ltrimstr("y") | rtrimstr("y"))"#.to_owned(),
    ] {
        memory_limit_of(&filter, &Value::Null, &small);
    }
}

#[test]
fn charged_natives_keep_their_results() {
    let limits = Limits::default();
    for (filter, expected) in [
        (r#""ABc" | ascii_downcase"#, json!("abc")),
        (r#""abC" | ascii_upcase"#, json!("ABC")),
        ("[65, 233, 128512] | implode", json!("Aé😀")),
        (r#""Aé" | explode"#, json!([65, 233])),
        (r#""QUJD" | @base64d"#, json!("ABC")),
        (r#""ABC" | @base64"#, json!("QUJD")),
        (r#""<a&'>" | @html"#, json!("&lt;a&amp;&apos;&gt;")),
        (r#""a b/é" | @uri"#, json!("a%20b%2F%C3%A9")),
        (r#"["a'b", 1] | @sh"#, json!("'a'\\''b' 1")),
        (r#"[1, "a\"b"] | @csv"#, json!("1,\"a\"\"b\"")),
        (r#"["a\tb", 2] | @tsv"#, json!("a\\tb\t2")),
        (r#""a,b,,c" / ",""#, json!(["a", "b", "", "c"])),
        (r#""aé" / """#, json!(["a", "é"])),
        (r#""" / ",""#, json!([])),
        (r#""a,b" | split(",")"#, json!(["a", "b"])),
        (r#""a1b22c" | [splits("[0-9]+")]"#, json!(["a", "b", "c"])),
        (r#""a,b,a" | indices("a")"#, json!([0, 4])),
        (r#""xax" | test("a")"#, json!(true)),
        (r#"[match("a"; "g") | .offset]"#, json!([])),
        (r#""banana" | [match("an"; "g") | .offset]"#, json!([1, 3])),
        (r#""aXbX" | gsub("X"; "-")"#, json!("a-b-")),
        (
            "0 | strftime(\"%Y-%m-%dT%H:%M:%SZ\")",
            json!("1970-01-01T00:00:00Z"),
        ),
        ("10 / 4", json!(2.5)),
        ("[(10, 20) / (2, 5)]", json!([5, 2, 10, 4])),
        (r#""xxabxx" | ltrimstr("xx") | rtrimstr("xx")"#, json!("ab")),
        (r#"["a", null, 1] | join("-")"#, json!("a--1")),
    ] {
        let input = json!("");
        let outputs = run(filter, &input, &limits).unwrap_or_else(|e| panic!("{filter}: {e}"));
        assert_eq!(outputs, [expected], "{filter}");
    }
}

#[test]
fn a_limit_that_is_not_whole_mebibytes_is_reported_in_bytes() {
    let limits = Limits {
        memory: 1_500_000,
        ..Limits::default()
    };
    let message = run(r#""x" * 2000000"#, &Value::Null, &limits)
        .unwrap_err()
        .to_string();
    assert!(
        message.ends_with("built values of more than its memory limit of 1500000 bytes"),
        "{message}"
    );
}
