//! Each hook's own log level, changed while the engine runs (`operon debug hook
//! log-level`, through the debug socket of `operon serve`): what the hook's runs print
//! and log is filtered by it ([`operon_runner::output_log`] says how), so a hook can be
//! silenced or made verbose with no restart. A hook with no level of its own logs every
//! record at the record's level, under the process' `--log` filter.

use super::engine::Engine;
use operon_data::model::LogLevel;
use std::sync::Mutex;

/// A log level name that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown log level {0:?} (expected trace, debug, info, warn, error or default)")]
pub struct UnknownLogLevel(pub String);

/// Reads a hook's log level as `operon debug hook log-level` spells it: a level name,
/// or `default` (`None`: no level of its own).
pub fn parse(name: &str) -> Result<Option<LogLevel>, UnknownLogLevel> {
    Ok(Some(match name.to_ascii_lowercase().as_str() {
        "trace" => LogLevel::Trace,
        "debug" => LogLevel::Debug,
        "info" => LogLevel::Info,
        "warn" | "warning" => LogLevel::Warn,
        "error" => LogLevel::Error,
        "default" => return Ok(None),
        _ => return Err(UnknownLogLevel(name.to_owned())),
    }))
}

/// The hooks' own levels, by index in the engine.
#[derive(Debug)]
pub(crate) struct LogLevels(Mutex<Vec<Option<LogLevel>>>);

impl LogLevels {
    /// No hook of `hooks` has a level of its own.
    pub(crate) fn new(hooks: usize) -> Self {
        Self(Mutex::new(vec![None; hooks]))
    }

    /// Hook `h`'s level.
    pub(crate) fn get(&self, h: usize) -> Option<LogLevel> {
        self.lock().get(h).copied().flatten()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Option<LogLevel>>> {
        // A level is one word: a panic elsewhere cannot leave it half written.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Engine {
    /// Sets the log level of hook `hook` for its next runs (`None`: none of its own);
    /// `false` for an unknown hook.
    pub fn set_log_level(&self, hook: &str, level: Option<LogLevel>) -> bool {
        let Some(h) = self.hooks().iter().position(|l| l.hook.name() == hook) else {
            return false;
        };
        if let Some(slot) = self.log_levels.lock().get_mut(h) {
            *slot = level;
        }
        tracing::info!(
            hook,
            level = level.map_or("default", LogLevel::as_str),
            "hook log level set"
        );
        true
    }

    /// Hook `h`'s own log level.
    pub(crate) fn log_level(&self, h: usize) -> Option<LogLevel> {
        self.log_levels.get(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_as_the_cli_spells_them() {
        assert_eq!(parse("debug"), Ok(Some(LogLevel::Debug)));
        assert_eq!(parse("WARNING"), Ok(Some(LogLevel::Warn)));
        assert_eq!(parse("default"), Ok(None));
        assert_eq!(parse("loud"), Err(UnknownLogLevel("loud".into())));
    }

    #[test]
    fn levels_are_per_hook_and_start_unset() {
        let levels = LogLevels::new(2);
        assert_eq!(levels.get(1), None);
        levels.lock()[1] = Some(LogLevel::Error);
        assert_eq!(
            (levels.get(0), levels.get(1)),
            (None, Some(LogLevel::Error))
        );
        assert_eq!(levels.get(7), None);
    }
}
