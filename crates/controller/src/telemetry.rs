//! The process' logs and traces: the log subscriber every command installs, and, when
//! an OTLP endpoint is given, the export of Operon's spans (one trace per hook event,
//! review and Diagnosis run) with their trace ids in the log lines.
//!
//! Off by default. Without an endpoint the subscriber is exactly the log formatter
//! behind an [`EnvFilter`]: nothing enables the `TRACE` level the spans are made at
//! ([`operon_runner::trace`]), so they cost one comparison each. With an endpoint, a
//! `tracing-opentelemetry` layer takes the spans of target [`TARGET`] only (the
//! libraries' own spans and every log event stay out of the traces), and a small layer
//! puts the current trace and span ids into each log line.
//!
//! The exporter runs on a runtime of its own (one thread): the SDK's batch processor
//! exports from a plain thread, and tonic and reqwest need a Tokio reactor, which the
//! commands' runtimes come and go too early to lend.

use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, SpanData, SpanExporter};
use operon_runner::trace::TARGET;
use std::cell::RefCell;
use std::sync::OnceLock;
use std::time::Duration;
use tracing::dispatcher::WeakDispatch;
use tracing::{Dispatch, Subscriber};
use tracing_subscriber::filter::{EnvFilter, Targets};
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::{FmtContext, MakeWriter};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, Registry};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Plain text.
    Text,
    /// Text with ANSI colours (no trace ids: the colours and the ids' place in a line
    /// are the formatter's own).
    Color,
    /// One JSON object per line.
    Json,
}

/// The OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// gRPC (tonic), the collector's port 4317.
    Grpc,
    /// Protobuf over HTTP, `<endpoint>/v1/traces` (port 4318).
    HttpProtobuf,
    /// JSON over HTTP, `<endpoint>/v1/traces`.
    HttpJson,
}

/// Where and how much to export.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpSettings {
    /// The collector's URL (`http://collector:4317`); for HTTP the base URL, to which
    /// `/v1/traces` is added unless it ends with it already.
    pub endpoint: String,
    /// The transport.
    pub protocol: Protocol,
    /// The share of new traces recorded, from 0 to 1; a trace continued from a caller
    /// follows the caller's decision (a parent-based sampler).
    pub sampling_ratio: f64,
}

/// Why the subscriber could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The sampling ratio is not a share.
    #[error("the sampling ratio {0} is not between 0 and 1")]
    SamplingRatio(f64),
    /// The exporter's runtime could not start.
    #[error("cannot start the OTLP exporter's thread")]
    Runtime(#[source] std::io::Error),
    /// The exporter refused its settings (a malformed endpoint, say).
    #[error("OTLP exporter for {endpoint}")]
    Exporter {
        /// The endpoint it was given.
        endpoint: String,
        /// What it said.
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
}

/// What keeps the traces flowing: flush it before the process ends
/// ([`Telemetry::shutdown`]), or the last batch is lost.
#[derive(Debug, Default)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Whether spans are exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Exports what is buffered now.
    pub fn flush(&self) {
        if let Some(provider) = &self.provider
            && let Err(e) = provider.force_flush()
        {
            tracing::warn!(error = %e, "could not export the last traces");
        }
    }

    /// Exports what is buffered and stops the exporter.
    pub fn shutdown(mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("warning: could not export the last traces: {e}");
        }
    }
}

/// The process' subscriber: logs filtered by `filter` in `format` to `writer`, and,
/// with `otlp`, Operon's spans exported with their trace ids in the logs.
pub fn subscriber<W>(
    filter: EnvFilter,
    format: LogFormat,
    writer: W,
    otlp: Option<&OtlpSettings>,
) -> Result<(Dispatch, Telemetry), TelemetryError>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let Some(otlp) = otlp else {
        // Exactly the logs and nothing else: no layer asks for the spans' level.
        let logs = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(writer);
        let dispatch = match format {
            LogFormat::Json => Dispatch::new(logs.json().flatten_event(true).finish()),
            LogFormat::Color => Dispatch::new(logs.with_ansi(true).finish()),
            LogFormat::Text => Dispatch::new(logs.with_ansi(false).finish()),
        };
        return Ok((dispatch, Telemetry::default()));
    };
    let provider = provider(otlp)?;
    let tracer = provider.tracer("operon");
    // Only Operon's spans become OpenTelemetry spans; log events stay in the log.
    let spans = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_tracked_inactivity(false)
        .with_filter(
            Targets::new()
                .with_target(TARGET, tracing::Level::TRACE)
                .with_default(tracing::level_filters::LevelFilter::OFF),
        );
    let fmt = tracing_subscriber::fmt::layer().with_writer(writer);
    let registry = Registry::default().with(spans).with(TraceIds::default());
    let dispatch = match format {
        LogFormat::Json => {
            let fmt = fmt
                .json()
                .flatten_event(true)
                .map_event_format(WithTraceIds::json)
                .with_filter(filter);
            Dispatch::new(registry.with(fmt))
        }
        LogFormat::Color => Dispatch::new(registry.with(fmt.with_ansi(true).with_filter(filter))),
        LogFormat::Text => {
            let fmt = fmt
                .with_ansi(false)
                .map_event_format(WithTraceIds::text)
                .with_filter(filter);
            Dispatch::new(registry.with(fmt))
        }
    };
    Ok((
        dispatch,
        Telemetry {
            provider: Some(provider),
        },
    ))
}

fn provider(otlp: &OtlpSettings) -> Result<SdkTracerProvider, TelemetryError> {
    if !(0.0..=1.0).contains(&otlp.sampling_ratio) {
        return Err(TelemetryError::SamplingRatio(otlp.sampling_ratio));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("otlp-export")
        .enable_all()
        .build()
        .map_err(TelemetryError::Runtime)?;
    // reqwest's rustls takes the process' provider: ring, as everywhere in Operon.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let failed = |source| TelemetryError::Exporter {
        endpoint: otlp.endpoint.clone(),
        source,
    };
    let exporter = {
        // tonic's lazy channel spawns its worker on the runtime it is built in.
        let _in = runtime.enter();
        match otlp.protocol {
            Protocol::Grpc => opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(otlp.endpoint.clone())
                .with_timeout(Duration::from_secs(10))
                .build(),
            Protocol::HttpProtobuf | Protocol::HttpJson => {
                opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(match otlp.protocol {
                        Protocol::HttpJson => opentelemetry_otlp::Protocol::HttpJson,
                        _ => opentelemetry_otlp::Protocol::HttpBinary,
                    })
                    .with_endpoint(http_traces_url(&otlp.endpoint))
                    .with_timeout(Duration::from_secs(10))
                    .build()
            }
        }
        .map_err(failed)?
    };
    let mut resource = opentelemetry_sdk::Resource::builder();
    // OTEL_SERVICE_NAME (read by the builder) names the service when it is set.
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("operon");
    }
    let resource = resource
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(OnRuntime {
            inner: exporter,
            runtime,
        })
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            otlp.sampling_ratio,
        ))))
        .with_resource(resource)
        .build())
}

/// The HTTP URL spans are posted to: the collector's base URL with `/v1/traces`, as
/// `OTEL_EXPORTER_OTLP_ENDPOINT` is read.
fn http_traces_url(endpoint: &str) -> String {
    if endpoint.trim_end_matches('/').ends_with("/v1/traces") {
        endpoint.to_owned()
    } else {
        format!("{}/v1/traces", endpoint.trim_end_matches('/'))
    }
}

/// The OTLP exporter driven on its own runtime, from the batch processor's thread.
#[derive(Debug)]
struct OnRuntime {
    inner: opentelemetry_otlp::SpanExporter,
    runtime: tokio::runtime::Runtime,
}

impl SpanExporter for OnRuntime {
    fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
        // The batch processor calls this on its own thread, outside any runtime.
        let result = self.runtime.block_on(self.inner.export(batch));
        std::future::ready(result)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let _in = self.runtime.enter();
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        let _in = self.runtime.enter();
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}

thread_local! {
    /// The trace and span ids of the event being logged on this thread, left by
    /// [`TraceIds`] for [`WithTraceIds`], which the formatter cannot look up itself (its
    /// filter hides the spans).
    static CURRENT_IDS: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
}

/// Notes the current span's trace and span ids before the log formatter runs.
#[derive(Default)]
struct TraceIds {
    dispatch: OnceLock<WeakDispatch>,
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for TraceIds {
    fn on_register_dispatch(&self, dispatch: &Dispatch) {
        let _ = self.dispatch.set(dispatch.downgrade());
    }

    fn on_event(&self, _event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let ids = (|| {
            let id = ctx.current_span().id()?.clone();
            let dispatch = self.dispatch.get()?.upgrade()?;
            let context = tracing_opentelemetry::get_otel_context(&id, &dispatch)?;
            let span = context.span();
            let span_context = span.span_context();
            span_context.is_valid().then(|| {
                (
                    span_context.trace_id().to_string(),
                    span_context.span_id().to_string(),
                )
            })
        })();
        CURRENT_IDS.with(|current| *current.borrow_mut() = ids);
    }
}

/// A log formatter that adds `trace_id` and `span_id` to the lines logged in a trace.
struct WithTraceIds<F> {
    inner: F,
    json: bool,
}

impl<F> WithTraceIds<F> {
    fn json(inner: F) -> Self {
        Self { inner, json: true }
    }

    fn text(inner: F) -> Self {
        Self { inner, json: false }
    }
}

impl<S, N, F> FormatEvent<S, N> for WithTraceIds<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let Some((trace_id, span_id)) = CURRENT_IDS.with(|current| current.borrow().clone()) else {
            return self.inner.format_event(ctx, writer, event);
        };
        let mut line = String::new();
        self.inner
            .format_event(ctx, Writer::new(&mut line), event)?;
        if self.json {
            // `{"timestamp":...}` → `{"trace_id":"…","span_id":"…","timestamp":...}`
            let ids = format!(r#""trace_id":"{trace_id}","span_id":"{span_id}","#);
            match line.find('{') {
                Some(at) => line.insert_str(at + 1, &ids),
                None => return writer.write_str(&line),
            }
        } else {
            let end = line.trim_end_matches('\n').len();
            line.insert_str(end, &format!(" trace_id={trace_id} span_id={span_id}"));
        }
        writer.write_str(&line)
    }
}

#[cfg(test)]
mod tests;
