//! Tests of the log subscriber and the trace export's settings.

use super::*;
use std::sync::{Arc, Mutex};

/// Log lines written to memory.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

/// Settings that export nothing (no trace is sampled) to a port nobody listens on.
fn unsampled() -> OtlpSettings {
    OtlpSettings {
        endpoint: "http://127.0.0.1:9".to_owned(),
        protocol: Protocol::Grpc,
        sampling_ratio: 0.0,
    }
}

/// Logs one line outside any span and one inside an Operon span, in `format`.
fn log_lines(format: LogFormat, otlp: Option<&OtlpSettings>) -> (String, Option<String>) {
    let lines = Lines::default();
    let writer = lines.clone();
    let (dispatch, telemetry) =
        subscriber(EnvFilter::new("info"), format, move || writer.clone(), otlp).unwrap();
    let trace_id = tracing::dispatcher::with_default(&dispatch, || {
        tracing::info!("outside");
        let span = tracing::trace_span!(target: TARGET, "hook.run");
        let _in = span.enter();
        tracing::info!("inside");
        operon_runner::trace::trace_id()
    });
    telemetry.shutdown();
    (lines.text(), trace_id)
}

#[test]
fn log_lines_in_a_trace_carry_its_id_in_json_and_text() {
    let settings = unsampled();
    let (json, trace_id) = log_lines(LogFormat::Json, Some(&settings));
    let trace_id = trace_id.expect("a trace id, sampled or not");
    let lines: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{json}");
    assert_eq!(lines[0]["message"], "outside");
    assert!(lines[0].get("trace_id").is_none(), "{json}");
    assert_eq!(lines[1]["message"], "inside");
    assert_eq!(lines[1]["trace_id"], trace_id.as_str());
    assert_eq!(lines[1]["span_id"].as_str().map(str::len), Some(16));

    let (text, trace_id) = log_lines(LogFormat::Text, Some(&settings));
    let trace_id = trace_id.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(!lines[0].contains("trace_id"), "{text}");
    assert!(
        lines[1].contains(&format!("inside trace_id={trace_id} span_id=")),
        "{text}"
    );
}

#[test]
fn without_an_endpoint_the_spans_are_not_even_made() {
    let (json, trace_id) = log_lines(LogFormat::Json, None);
    assert_eq!(trace_id, None);
    assert!(!json.contains("trace_id"), "{json}");
    assert_eq!(json.lines().count(), 2);
}

#[test]
fn a_ratio_outside_zero_to_one_is_refused() {
    for ratio in [-0.1, 1.5, f64::NAN] {
        let settings = OtlpSettings {
            sampling_ratio: ratio,
            ..unsampled()
        };
        let refused = subscriber(
            EnvFilter::new("info"),
            LogFormat::Text,
            std::io::sink,
            Some(&settings),
        );
        assert!(
            matches!(refused, Err(TelemetryError::SamplingRatio(_))),
            "{ratio}"
        );
    }
}

#[test]
fn http_endpoints_are_base_urls_unless_they_name_the_traces_path() {
    assert_eq!(
        http_traces_url("http://collector:4318"),
        "http://collector:4318/v1/traces"
    );
    assert_eq!(
        http_traces_url("http://collector:4318/"),
        "http://collector:4318/v1/traces"
    );
    assert_eq!(
        http_traces_url("https://gw/otlp/v1/traces"),
        "https://gw/otlp/v1/traces"
    );
}
