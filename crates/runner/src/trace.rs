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
//! the header) continue the trace instead of starting one. The other way round, a
//! request that arrives with a `traceparent` header ([`continue_trace`]) makes its
//! spans part of the caller's trace.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
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

/// The Argo Workflow parameter a Workflow's steps find the trace context in.
pub const TRACEPARENT_PARAMETER: &str = "operon-traceparent";

/// The HTTP header the W3C trace context travels in.
pub const TRACEPARENT_HEADER: &str = "traceparent";

/// The caller's span in a W3C `traceparent` value (`00-<trace id>-<span id>-<flags>`);
/// `None` when the value is not a valid one, which the W3C recommendation says to
/// ignore (the request then starts a trace of its own). A version after `00` is read
/// as `00` where it can be, as the recommendation asks; `ff` is invalid.
pub fn parse_traceparent(value: &str) -> Option<SpanContext> {
    let value = value.trim();
    let mut parts = value.split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if !hex(version, 2) || version == "ff" || !hex(trace, 32) || !hex(span, 16) || !hex(flags, 2) {
        return None;
    }
    // Version 00 has exactly four fields; later versions may append more.
    if version == "00" && parts.next().is_some() {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(span).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let context = SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags & TraceFlags::SAMPLED.to_u8()),
        true,
        TraceState::default(),
    );
    // All-zero ids are invalid.
    context.is_valid().then_some(context)
}

/// Makes `span` a child of `caller`'s span (read by [`parse_traceparent`]); returns
/// whether it did (not when `span` is not recorded).
pub fn continue_trace(span: &tracing::Span, caller: SpanContext) -> bool {
    if span.is_disabled() {
        return false;
    }
    let parent = opentelemetry::Context::new().with_remote_span_context(caller);
    span.set_parent(parent).is_ok()
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

/// A recorded span (an SDK tracer with no exporter, the thread's default subscriber
/// while the guard lives) and its `traceparent`: what a run sees with export on.
#[cfg(test)]
pub(crate) fn recorded_span() -> (tracing::subscriber::DefaultGuard, tracing::Span, String) {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
    let guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
    let span = tracing::trace_span!(target: TARGET, "test");
    let traceparent = span.in_scope(traceparent).expect("a recorded span");
    (guard, span, traceparent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_read_strictly() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = parse_traceparent(good).unwrap();
        assert_eq!(
            context.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(context.span_id().to_string(), "00f067aa0ba902b7");
        assert!(context.is_sampled() && context.is_remote());
        let unsampled = parse_traceparent(&good.replace("-01", "-00")).unwrap();
        assert!(!unsampled.is_sampled());
        // A later version may carry more fields.
        assert!(
            parse_traceparent(&format!("{}-what-comes", good.replacen("00", "01", 1))).is_some()
        );
        for bad in [
            "",
            "00",
            "garbage",
            &good.replace("-01", "-01-extra"),
            &good.replacen("00", "ff", 1),
            &good.to_uppercase(),
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn nothing_without_a_span_or_an_exporting_layer() {
        assert_eq!(traceparent(), None);
        assert_eq!(trace_id(), None);
        let span = tracing::trace_span!(target: TARGET, "hook.run");
        let caller = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        assert!(!continue_trace(&span, caller.unwrap()));
        let _in = span.enter();
        assert_eq!(traceparent(), None);
    }
}
