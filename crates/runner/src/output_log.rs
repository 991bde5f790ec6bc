//! Hook and step output in the engine's log, the way shell-operator logs it, so that
//! `kubectl logs` is how hooks are debugged: every non-empty line a hook or step prints
//! is one record at level info, with the hook, binding and queue (or the run and
//! Operation of a step) and `output` naming the stream. A line that is a JSON object
//! (or a JSON object spread over consecutive lines) is one record with its own `level`
//! and `msg` ("hook result" without one) and its other fields as `hook_fields`. Lines
//! past 10,000 bytes are cut and end in `:truncated`, as shell-operator's; what a run
//! may print in all is bounded by the sandboxes' output limits. The log records a wasm
//! guest emits through the WIT log interface keep their level and fields.
//!
//! A hook may have its own log level, set while the engine runs (`operon debug hook
//! log-level`): its records below that level are dropped, and those below info but at
//! or above it are logged at info with `hook_level` naming their own level, so that
//! one hook's debug lines show without lowering `--log` for the whole process.

use operon_data::model::{LogLevel, LogRecord};
use serde_json::{Map, Value};

/// The longest line logged as it is (shell-operator's bound); longer ones are cut.
pub(crate) const MAX_LINE: usize = 10_000;

/// The message of a JSON line without `msg` (shell-operator's).
const JSON_DEFAULT_MESSAGE: &str = "hook result";

/// Where output came from: the fields each of its records carries.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// A hook run: the hook (its file name, or `module/hook`), the binding that ran it
    /// and its queue (empty when it has none, as an admission call).
    Hook {
        /// The hook.
        hook: &'a str,
        /// The binding.
        binding: &'a str,
        /// The queue.
        queue: &'a str,
    },
    /// A Diagnosis step: its run (`namespace/diagnosis/node-N`) and Operation.
    Step {
        /// The run's name.
        run: &'a str,
        /// The Operation.
        operation: &'a str,
    },
}

/// One record at a level known only at run time (tracing's levels are per call site),
/// or none when `$threshold` (a hook's own level) drops it.
macro_rules! emit {
    ($level:expr, $threshold:expr, $source:expr, $($field:tt)*) => {
        if let Some((level, own)) = level_under($level, $threshold) {
        let hook_level = own.map(LogLevel::as_str);
        match $source {
            Source::Hook { hook, binding, queue } => match level {
                LogLevel::Trace => tracing::trace!(hook, binding, queue, hook_level, $($field)*),
                LogLevel::Debug => tracing::debug!(hook, binding, queue, hook_level, $($field)*),
                LogLevel::Info => tracing::info!(hook, binding, queue, hook_level, $($field)*),
                LogLevel::Warn => tracing::warn!(hook, binding, queue, hook_level, $($field)*),
                LogLevel::Error => tracing::error!(hook, binding, queue, hook_level, $($field)*),
            },
            Source::Step { run, operation } => match $level {
                LogLevel::Trace => tracing::trace!(run, operation, $($field)*),
                LogLevel::Debug => tracing::debug!(run, operation, $($field)*),
                LogLevel::Info => tracing::info!(run, operation, $($field)*),
                LogLevel::Warn => tracing::warn!(run, operation, $($field)*),
                LogLevel::Error => tracing::error!(run, operation, $($field)*),
            },
        }
        }
    };
}

/// The level a record of `level` is logged at under a hook's own level `threshold`,
/// with its own level when that differs; `None` when the threshold drops it.
fn level_under(
    level: LogLevel,
    threshold: Option<LogLevel>,
) -> Option<(LogLevel, Option<LogLevel>)> {
    match threshold {
        None => Some((level, None)),
        Some(threshold) if level < threshold => None,
        // Below info, the process' filter (`--log`, info by default) would drop what
        // the hook's level asks for.
        Some(_) if level < LogLevel::Info => Some((LogLevel::Info, Some(level))),
        Some(_) => Some((level, None)),
    }
}

/// Logs what a run printed on one stream (`stdout`, `stderr`, or `combined` where the
/// two were captured together).
pub fn log_output(source: Source<'_>, output: &str, text: &str) {
    log_output_at(source, output, text, None);
}

/// [`log_output`] under a hook's own log level (`None`: every record, at its level).
pub fn log_output_at(source: Source<'_>, output: &str, text: &str, threshold: Option<LogLevel>) {
    // Lines of a JSON object spread over several lines, until they parse.
    let mut pending: Vec<&str> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if !pending.is_empty() || line.starts_with('{') {
            pending.push(line);
            let joined = pending.join("\n");
            if let Some(object) = json_object(&joined) {
                log_json(source, output, object, threshold);
                pending.clear();
            } else if joined.len() > MAX_LINE {
                // Not a JSON object after all, or one too long to wait for.
                for line in pending.drain(..) {
                    log_line(source, output, line, threshold);
                }
            }
            continue;
        }
        log_line(source, output, line, threshold);
    }
    for line in pending {
        log_line(source, output, line, threshold);
    }
}

/// Logs the records a wasm guest emitted, at their levels.
pub fn log_records(source: Source<'_>, records: &[LogRecord]) {
    log_records_at(source, records, None);
}

/// [`log_records`] under a hook's own log level (`None`: every record, at its level).
pub fn log_records_at(source: Source<'_>, records: &[LogRecord], threshold: Option<LogLevel>) {
    for record in records {
        let message = cut(&record.message);
        if record.fields.is_empty() {
            emit!(record.level, threshold, source, output = "log", "{message}");
        } else {
            let fields = serde_json::to_string(
                &record
                    .fields
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect::<std::collections::BTreeMap<_, _>>(),
            )
            .unwrap_or_default();
            let fields = cut(&fields);
            emit!(record.level, threshold, source, output = "log", hook_fields = %fields, "{message}");
        }
    }
}

fn log_line(source: Source<'_>, output: &str, line: &str, threshold: Option<LogLevel>) {
    let line = cut(line);
    emit!(LogLevel::Info, threshold, source, output, "{line}");
}

fn log_json(
    source: Source<'_>,
    output: &str,
    mut object: Map<String, Value>,
    threshold: Option<LogLevel>,
) {
    let level = match object.remove("level") {
        Some(Value::String(level)) => parse_level(&level),
        _ => LogLevel::Info,
    };
    let message = match object.remove("msg") {
        Some(Value::String(message)) => message,
        Some(other) => other.to_string(),
        None => JSON_DEFAULT_MESSAGE.to_owned(),
    };
    object.remove("time");
    let message = cut(&message);
    if object.is_empty() {
        emit!(level, threshold, source, output, "{message}");
    } else {
        let fields = Value::Object(object).to_string();
        let fields = cut(&fields);
        emit!(level, threshold, source, output, hook_fields = %fields, "{message}");
    }
}

fn json_object(text: &str) -> Option<Map<String, Value>> {
    match serde_json::from_str(text) {
        Ok(Value::Object(object)) => Some(object),
        _ => None,
    }
}

/// The levels hooks' JSON logs use (logrus' and slog's names); unknown ones are info.
fn parse_level(level: &str) -> LogLevel {
    match level.to_ascii_lowercase().as_str() {
        "trace" => LogLevel::Trace,
        "debug" => LogLevel::Debug,
        "warn" | "warning" => LogLevel::Warn,
        "error" | "err" | "fatal" | "panic" | "critical" => LogLevel::Error,
        _ => LogLevel::Info,
    }
}

/// `text` cut at [`MAX_LINE`] bytes (on a character boundary) with `:truncated`.
fn cut(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= MAX_LINE {
        return text.into();
    }
    let mut end = MAX_LINE;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}:truncated", &text[..end]).into()
}

#[cfg(test)]
mod tests;
