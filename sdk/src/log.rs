//! Levelled, structured logging through the host's `log` import.
//!
//! The macros [`trace!`](crate::trace), [`debug!`](crate::debug), [`info!`](crate::info),
//! [`warn!`](crate::warn) and [`error!`](crate::error) format a message like `format!` and
//! take optional `key = value` fields after a `;`. The host keeps the records with the run
//! and forwards them to its own log under the run's name.

use crate::bindings::operation::operon::engine::log as wit;

pub use wit::Level;

/// Emits one record; the macros call this, use it directly when the level is dynamic.
///
/// ```no_run
/// use operon_sdk::log::{emit, Level};
///
/// emit(Level::Info, "labelled 3 pods", &[("namespace".into(), "default".into())]);
/// ```
pub fn emit(level: Level, message: &str, fields: &[(String, String)]) {
    wit::log(level, message, fields);
}

/// Logs at a level chosen at run time: `log!(level, "format", args...; key = value, ...)`.
///
/// Field keys are identifiers or string literals (for keys such as `"disk.mount"`); values
/// are anything that implements `Display`.
///
/// ```no_run
/// use operon_sdk::log::Level;
///
/// let level = if 3 > 2 { Level::Warn } else { Level::Info };
/// operon_sdk::log!(level, "{} pods over quota", 3; namespace = "default", "quota.kind" = "cpu");
/// ```
#[macro_export]
macro_rules! log {
    ($level:expr, $format:literal $(, $arg:expr)* $(,)?) => {
        $crate::log::emit($level, &::std::format!($format $(, $arg)*), &[])
    };
    ($level:expr, $format:literal $(, $arg:expr)* $(,)? ; $($key:tt = $value:expr),+ $(,)?) => {
        $crate::log::emit(
            $level,
            &::std::format!($format $(, $arg)*),
            &[$((
                ::std::string::String::from($crate::__field_key!($key)),
                ::std::string::ToString::to_string(&$value),
            )),+],
        )
    };
}

/// Turns a field key written as an identifier or a string literal into a `&str`.
#[doc(hidden)]
#[macro_export]
macro_rules! __field_key {
    ($key:ident) => {
        ::core::stringify!($key)
    };
    ($key:literal) => {
        $key
    };
}

/// Logs very detailed tracing.
///
/// ```no_run
/// operon_sdk::trace!("parsed line {}", 4);
/// ```
#[macro_export]
macro_rules! trace {
    ($($tokens:tt)+) => { $crate::log!($crate::log::Level::Trace, $($tokens)+) };
}

/// Logs debugging detail.
///
/// ```no_run
/// let mounts = 5;
/// operon_sdk::debug!("parsed df"; mounts = mounts);
/// ```
#[macro_export]
macro_rules! debug {
    ($($tokens:tt)+) => { $crate::log!($crate::log::Level::Debug, $($tokens)+) };
}

/// Logs normal progress.
///
/// ```no_run
/// let (pods, namespace) = (3, "default");
/// operon_sdk::info!("labelled {pods} pods"; namespace = namespace);
/// ```
#[macro_export]
macro_rules! info {
    ($($tokens:tt)+) => { $crate::log!($crate::log::Level::Info, $($tokens)+) };
}

/// Logs something unexpected that the guest handled.
///
/// ```no_run
/// operon_sdk::warn!("pod has no namespace, skipping"; pod = "web-0");
/// ```
#[macro_export]
macro_rules! warn {
    ($($tokens:tt)+) => { $crate::log!($crate::log::Level::Warn, $($tokens)+) };
}

/// Logs a failure.
///
/// ```no_run
/// operon_sdk::error!("submit failed: {}", "limit reached");
/// ```
#[macro_export]
macro_rules! error {
    ($($tokens:tt)+) => { $crate::log!($crate::log::Level::Error, $($tokens)+) };
}
