//! Hostile filters meet their limits and the thread goes on; ordinary ones do not.

use super::{MAX_ARRAY_LENGTH, MAX_CLOSURE_CALLS, MAX_DEPTH};
use crate::{JqError, Limit, Limits, MAX_TEXT_BYTES};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn limit_of(filter: &str, limits: &Limits) -> Limit {
    let compiled = crate::compile_uncached(filter).unwrap_or_else(|e| panic!("{filter}: {e}"));
    match compiled.run_within(&Value::Null, limits) {
        Err(JqError::Limit { limit, filter: f }) => {
            assert_eq!(f, filter, "the error names the filter");
            limit
        }
        other => panic!("{filter}: expected a limit, got {other:?}"),
    }
}

fn short() -> Limits {
    Limits {
        time: Duration::from_millis(200),
        ..Limits::default()
    }
}

#[test]
fn endless_loops_stop_at_the_time_limit() {
    for filter in [
        "last(range(1e18))",
        "def f: f; f",
        "def f: def g: f; g; f",
        "last(limit(1e9; repeat(1)))",
        "last(range(1e18) | [.])",
        "reduce range(1e18) as $x (0; 1)",
        "first(foreach range(1e18) as $x (0; . + 1; select(. < 0)))",
        "until(false; .)",
        "last(while(true; .))",
        "last(recurse(.))",
        "[range(20)] as $a | [$a, $a, $a, $a, $a, $a, $a] | last(combinations)",
    ] {
        let started = Instant::now();
        assert_eq!(
            limit_of(filter, &short()),
            Limit::Time(short().time),
            "{filter}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{filter}: {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn try_does_not_swallow_a_limit() {
    for filter in [
        r#"try last(range(1e18)) catch "caught""#,
        "(last(range(1e18)))?",
        r#"def f: try [f] catch f; f"#,
        r#"[.[]?, (last(range(1e18)) // 1)]"#,
        r#"label $out | last(range(1e18)), break $out"#,
    ] {
        let limit = limit_of(filter, &short());
        assert!(
            matches!(limit, Limit::Time(_) | Limit::Stack(_)),
            "{filter}: {limit:?}"
        );
    }
}

#[test]
fn endless_recursion_stops_at_the_stack_limit() {
    for filter in [
        "def f: [f]; f",
        "def f: 1 + f; f",
        "def f: {a: f}; f",
        "def f: (f | .) + 1; f",
        "def f(g): [g | f(g)]; f(.)",
        "def f(g): [f(g | .)]; f(.)",
        r#"def f: "\(f)"; f"#,
    ] {
        assert_eq!(
            limit_of(filter, &Limits::default()),
            Limit::Stack(Limits::default().stack),
            "{filter}"
        );
    }
}

#[test]
fn loops_of_definitions_with_filter_parameters_are_bounded() {
    // A tail-recursive loop takes no stack, but each call's closure holds its caller's.
    for filter in [
        "def f(g): f(g | .); f(.)",
        "def f(g): if . > 0 then . - 1 | f(g) else . end; 1e6 | f(.)",
    ] {
        assert_eq!(
            limit_of(filter, &Limits::default()),
            Limit::ClosureCalls(MAX_CLOSURE_CALLS),
            "{filter}"
        );
    }
    let outputs = crate::compile("def f(g): if . > 0 then . - 1 | f(g) else . end; 5000 | f(.)")
        .unwrap()
        .run(&Value::Null)
        .unwrap();
    assert_eq!(outputs, vec![json!(0)]);
}

#[test]
fn the_stack_limit_holds_on_a_thread_with_a_small_stack() {
    // Tokio's workers have 2 MiB; a run that needs more than the thread has is run
    // again on a stack of its own, so the limit is the same on every thread.
    let thread = std::thread::Builder::new().stack_size(256 << 10).spawn(|| {
        let deep =
            crate::compile_uncached("def f: if . > 0 then [. - 1 | f] else . end; f | flatten")
                .unwrap()
                .run(&json!(150))
                .unwrap();
        let endless = limit_of("def f: [f]; f", &Limits::default());
        (deep, endless)
    });
    let (deep, endless) = thread.unwrap().join().expect("the thread survives");
    assert_eq!(deep, vec![json!([0])]);
    assert_eq!(endless, Limit::Stack(Limits::default().stack));
}

#[test]
fn values_nested_too_deep_are_refused_where_they_are_built() {
    // Depth must stop these before time does, on a busy machine too: a debug build
    // sharing its CPUs once reached the 200 ms of `short()` first.
    let roomy = Limits {
        time: Duration::from_secs(10),
        ..Limits::default()
    };
    for filter in [
        "reduce range(100000) as $i (0; [.])",
        "reduce range(100000) as $i (0; {a: .})",
        "reduce range(100000) as $i ({}; .a = .)",
        "reduce range(100000) as $i ({}; .a |= [.])",
        "reduce range(100000) as $i (0; [., 1] | group_by(.))",
        "reduce range(100000) as $i ([1]; key_values)",
        "reduce range(100000) as $i (0; path_value(.))",
        r#"setpath([range(100000) | "a"]; 1)"#,
        r#""[" * 100000 | fromjson"#,
        r#""[" * 100000 | tonumber"#,
        r#"try ("[" * 100000 | fromjson) catch 0"#,
    ] {
        assert_eq!(
            limit_of(filter, &roomy),
            Limit::Depth(MAX_DEPTH),
            "{filter}"
        );
    }
    // Up to the limit is fine.
    let at_limit = format!("reduce range({}) as $i (0; [.]) | flatten", MAX_DEPTH);
    let outputs = crate::compile(&at_limit)
        .unwrap()
        .run(&Value::Null)
        .unwrap();
    assert_eq!(outputs, vec![json!([0])]);
}

#[test]
fn inputs_nested_too_deep_are_refused() {
    let mut deep = json!(0);
    for _ in 0..=MAX_DEPTH {
        deep = json!([deep]);
    }
    let err = crate::compile(".").unwrap().run(&deep).unwrap_err();
    assert!(
        matches!(
            err,
            JqError::Limit {
                limit: Limit::InputDepth(MAX_DEPTH),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("nested deeper than the limit of 512 levels"),
        "{err}"
    );
}

#[test]
fn arrays_are_bounded_in_length() {
    assert_eq!(
        limit_of("[range(1e9)] | length", &Limits::default()),
        Limit::ArrayLength(MAX_ARRAY_LENGTH)
    );
    let outputs = crate::compile("[range(1000)] | length")
        .unwrap()
        .run(&Value::Null)
        .unwrap();
    assert_eq!(outputs, vec![json!(1000)]);
}

#[test]
fn long_filter_texts_are_refused_before_parsing() {
    let text = "[".repeat(MAX_TEXT_BYTES + 1);
    let err = crate::compile(&text).unwrap_err();
    assert!(
        matches!(
            err,
            JqError::Limit {
                limit: Limit::TextLength(MAX_TEXT_BYTES),
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn deeply_nested_filter_texts_compile_or_fail_without_crashing() {
    let half = MAX_TEXT_BYTES / 2 - 1;
    for text in [
        "-".repeat(MAX_TEXT_BYTES - 1) + "1",
        "[".repeat(half) + &"]".repeat(half),
        "(".repeat(half) + "1" + &")".repeat(half),
        ".|".repeat(half) + ".",
        "1+".repeat(half) + "1",
        "{a:".repeat(MAX_TEXT_BYTES / 4 - 1) + "1" + &"}".repeat(MAX_TEXT_BYTES / 4 - 1),
    ] {
        match crate::compile_uncached(&text).map(|f| f.run(&Value::Null)) {
            Ok(Ok(_)) | Err(JqError::Compile { .. }) => {}
            Ok(Err(JqError::Limit {
                limit: Limit::Stack(_) | Limit::Depth(_),
                ..
            })) => {}
            other => panic!("{}…: {other:?}", &text[..10]),
        }
    }
}

#[test]
fn the_error_names_the_filter_and_the_limit() {
    let err = crate::compile("last(range(1e18))")
        .unwrap()
        .run_within(&Value::Null, &short())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"jq filter "last(range(1e18))" ran longer than its time limit of 200ms"#
    );
    let err = crate::compile("def f: [f]; f")
        .unwrap()
        .run(&Value::Null)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"jq filter "def f: [f]; f" recursed deeper than its stack limit of 16 MiB allows"#
    );
}

#[test]
fn the_thread_runs_ordinary_filters_after_a_limit() {
    let _ = limit_of("def f: [f]; f", &Limits::default());
    let _ = limit_of("last(range(1e18))", &short());
    let outputs = crate::compile(r#".metadata.labels.foo = "bar" | .metadata.labels"#)
        .unwrap()
        .run(&json!({"metadata": {"labels": {"app": "web"}}}))
        .unwrap();
    assert_eq!(outputs, vec![json!({"app": "web", "foo": "bar"})]);
    // A guard outside a run (none is under way) never fails.
    assert!(super::check());
}
