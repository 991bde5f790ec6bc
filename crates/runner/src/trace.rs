//! Trace context of runs: the spans' target and the W3C `traceparent` a run hands on.
//!
//! The hook engine, the pipeline and the webhooks make their spans with
//! [`TARGET`] at the `TRACE` level. Nothing enables that level unless OpenTelemetry
//! export is on (the process then adds a layer that wants exactly these spans), so with
//! export off each span is one comparison against the global level and costs nothing
//! measurable on the event path (the hook loop bench shows it).
//!
//! A run that starts a process or a Pod passes [`traceparent`] on as the `TRACEPARENT`
//! variable, so that tools inside a script or a Job (an OpenTelemetry SDK, `curl` with
//! the header) continue the trace instead of starting one.

use opentelemetry::trace::TraceContextExt;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The target of every span Operon exports; the exporting layer wants only these.
pub const TARGET: &str = "operon::trace";

/// The variable a script or a Job's container finds the trace context in (the name the
/// OpenTelemetry SDKs' environment carrier reads).
pub const TRACEPARENT_ENV: &str = "TRACEPARENT";

/// The W3C `traceparent` of the current span (`00-<trace id>-<span id>-<flags>`), when
/// a trace is being recorded; `None` with export off or outside any span.
pub fn traceparent() -> Option<String> {
    let span = tracing::Span::current();
    if span.is_disabled() {
        return None;
    }
    let context = span.context();
    let span_ref = context.span();
    let span_context = span_ref.span_context();
    span_context.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            span_context.trace_id(),
            span_context.span_id(),
            span_context.trace_flags().to_u8()
        )
    })
}

/// The trace id of the current span, for a log line; `None` as for [`traceparent`].
pub fn trace_id() -> Option<String> {
    let span = tracing::Span::current();
    if span.is_disabled() {
        return None;
    }
    let context = span.context();
    let span_ref = context.span();
    let span_context = span_ref.span_context();
    span_context
        .is_valid()
        .then(|| span_context.trace_id().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_without_a_span_or_an_exporting_layer() {
        assert_eq!(traceparent(), None);
        assert_eq!(trace_id(), None);
        let span = tracing::trace_span!(target: TARGET, "hook.run");
        let _in = span.enter();
        assert_eq!(traceparent(), None);
    }
}
