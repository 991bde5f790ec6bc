use super::*;
use std::io::Write;
use std::sync::{Arc, Mutex};

/// The JSON records logged while `f` runs, as `operon serve --log-type json` writes them.
fn records(f: impl FnOnce()) -> Vec<Value> {
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    // While one dispatcher is registered, tracing-core caches a callsite's interest from
    // the default of the thread that reaches it first: a test beside this one (no
    // subscriber) logging through the same lines would have them cached as never. A
    // second one makes it ask every registered dispatcher, this one among them.
    let _second = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    tracing::subscriber::with_default(subscriber, f);
    let bytes = buffer.0.lock().unwrap().clone();
    String::from_utf8(bytes)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

const HOOK: Source<'static> = Source::Hook {
    hook: "pods.sh",
    binding: "pods",
    queue: "main",
};

#[test]
fn every_line_is_a_record_with_the_hook_binding_queue_and_stream() {
    let logged = records(|| log_output(HOOK, "stderr", "first\n\n  second  \n"));
    assert_eq!(logged.len(), 2, "{logged:?}");
    for (record, message) in logged.iter().zip(["first", "second"]) {
        assert_eq!(record["level"], "INFO");
        assert_eq!(record["message"], message);
        assert_eq!(record["hook"], "pods.sh");
        assert_eq!(record["binding"], "pods");
        assert_eq!(record["queue"], "main");
        assert_eq!(record["output"], "stderr");
    }
}

#[test]
fn json_lines_give_their_level_message_and_fields() {
    let text = "{\"level\":\"error\",\"msg\":\"patch failed\",\"pod\":\"p1\",\"time\":\"x\"}\n\
                {\"pod\": \"p2\",\n \"attempt\": 2}\n\
                {not json\n\
                plain\n";
    let logged = records(|| log_output(HOOK, "stdout", text));
    assert_eq!(logged[0]["level"], "ERROR");
    assert_eq!(logged[0]["message"], "patch failed");
    assert_eq!(logged[0]["hook_fields"], r#"{"pod":"p1"}"#);
    // Spread over two lines, no msg: shell-operator's default message.
    assert_eq!(logged[1]["level"], "INFO");
    assert_eq!(logged[1]["message"], "hook result");
    assert_eq!(logged[1]["hook_fields"], r#"{"attempt":2,"pod":"p2"}"#);
    // What never parses is logged as the lines it was.
    assert_eq!(logged[2]["message"], "{not json");
    assert_eq!(logged[3]["message"], "plain");
    assert_eq!(logged.len(), 4, "{logged:?}");
}

#[test]
fn long_lines_are_cut_and_marked() {
    let long = "é".repeat(MAX_LINE);
    let logged = records(|| log_output(HOOK, "stdout", &long));
    let message = logged[0]["message"].as_str().unwrap();
    assert!(message.ends_with(":truncated"));
    assert!(message.len() <= MAX_LINE + ":truncated".len());
}

#[test]
fn steps_and_guest_records_carry_their_own_fields() {
    let step = Source::Step {
        run: "default/diag/node-1",
        operation: "collect-df",
    };
    let logged = records(|| {
        log_output(step, "combined", "Filesystem 1024-blocks\n");
        log_records(
            step,
            &[LogRecord {
                level: LogLevel::Warn,
                message: "disk almost full".into(),
                fields: vec![("mount".into(), "/".into())],
            }],
        );
    });
    assert_eq!(logged[0]["run"], "default/diag/node-1");
    assert_eq!(logged[0]["operation"], "collect-df");
    assert_eq!(logged[0]["output"], "combined");
    assert!(logged[0].get("hook").is_none());
    assert_eq!(logged[1]["level"], "WARN");
    assert_eq!(logged[1]["output"], "log");
    assert_eq!(logged[1]["hook_fields"], r#"{"mount":"/"}"#);
}

#[test]
fn a_hooks_own_level_drops_what_is_below_it_and_lifts_what_info_would_hide() {
    let text =
        "{\"level\":\"debug\",\"msg\":\"detail\"}\nplain\n{\"level\":\"error\",\"msg\":\"bad\"}\n";
    let at = |level| records(|| log_output_at(HOOK, "stdout", text, Some(level)));
    let logged = at(LogLevel::Debug);
    assert_eq!(logged.len(), 3, "{logged:?}");
    assert_eq!(logged[0]["level"], "INFO");
    assert_eq!(logged[0]["hook_level"], "debug");
    assert_eq!(logged[0]["message"], "detail");
    assert!(logged[1].get("hook_level").is_none());
    let logged = at(LogLevel::Warn);
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0]["message"], "bad");
    let guest = [LogRecord {
        level: LogLevel::Info,
        message: "hello".into(),
        fields: Vec::new(),
    }];
    assert!(records(|| log_records_at(HOOK, &guest, Some(LogLevel::Error))).is_empty());
    // With no level of its own, a hook's records keep theirs.
    let logged = records(|| log_output(HOOK, "stdout", text));
    assert_eq!(logged[0]["level"], "DEBUG");
    assert!(logged[0].get("hook_level").is_none());
}
