//! The `log` host interface: records a guest's log lines, bounded by a byte budget.
//!
//! [`LogState::record`] does the work; each linked WIT version's `Host` impl only
//! translates its level and calls it.

use super::HostLimitExceeded;
use crate::{bindings, convert};
use operon_data::model::{LogLevel, LogRecord};

/// Per-call state of the `log` interface.
#[derive(Debug)]
pub(crate) struct LogState {
    /// Records kept so far.
    pub(crate) records: Vec<LogRecord>,
    /// Bytes still allowed; a guest that logs in a loop must hit a wall, not fill the
    /// host's memory.
    remaining: usize,
    /// The budget this call started with, for the error message.
    limit: usize,
    /// The run's name, so host-side log lines can be correlated with the run.
    run: String,
}

impl LogState {
    /// A fresh state allowing `limit` bytes of messages and fields.
    pub(crate) fn new(limit: usize, run: String) -> Self {
        Self {
            records: Vec::new(),
            remaining: limit,
            limit,
            run,
        }
    }

    /// Keeps one record, or traps once the run's byte budget is spent.
    pub(crate) fn record(
        &mut self,
        level: LogLevel,
        message: String,
        fields: Vec<(String, String)>,
    ) -> wasmtime::Result<()> {
        let size = message.len() + fields.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>();
        if size > self.remaining {
            return Err(wasmtime::Error::new(HostLimitExceeded::Logs {
                limit: self.limit,
            }));
        }
        self.remaining -= size;
        match level {
            LogLevel::Error => tracing::error!(run = %self.run, "{message}"),
            LogLevel::Warn => tracing::warn!(run = %self.run, "{message}"),
            LogLevel::Info => tracing::info!(run = %self.run, "{message}"),
            LogLevel::Debug => tracing::debug!(run = %self.run, "{message}"),
            LogLevel::Trace => tracing::trace!(run = %self.run, "{message}"),
        }
        self.records.push(LogRecord {
            level,
            message,
            fields,
        });
        Ok(())
    }
}

impl bindings::log::Host for LogState {
    fn log(
        &mut self,
        level: bindings::log::Level,
        message: String,
        fields: Vec<(String, String)>,
    ) -> wasmtime::Result<()> {
        self.record(convert::log_level(level), message, fields)
    }
}

impl bindings::v0_1::log::Host for LogState {
    fn log(
        &mut self,
        level: bindings::v0_1::log::Level,
        message: String,
        fields: Vec<(String, String)>,
    ) -> wasmtime::Result<()> {
        self.record(convert::v0_1::log_level(level), message, fields)
    }
}

impl bindings::v0_2::log::Host for LogState {
    fn log(
        &mut self,
        level: bindings::v0_2::log::Level,
        message: String,
        fields: Vec<(String, String)>,
    ) -> wasmtime::Result<()> {
        self.record(convert::v0_2::log_level(level), message, fields)
    }
}
