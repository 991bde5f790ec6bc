//! The error a guest returns: a message the host records as the run's failure.

use std::fmt;

/// Why an operation or a hook failed.
///
/// The WIT contract carries failures as plain strings, so an `Error` is a message and
/// nothing more; build it from a `&str`, a `String`, `format!`, [`bail!`](crate::bail) or
/// [`ResultExt::context`].
///
/// ```
/// use operon_sdk::Error;
///
/// let missing = Error::from("no pods found");
/// let formatted = Error::new(format!("{} pods over quota", 3));
/// assert_eq!(missing.to_string(), "no pods found");
/// assert_eq!(formatted.message(), "3 pods over quota");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// Shown to the user as the reason the run failed, so it should name what was wrong.
    message: String,
}

impl Error {
    /// An error with this message.
    ///
    /// ```
    /// let err = operon_sdk::Error::new(format_args!("line {}: too short", 4));
    /// assert_eq!(err.message(), "line 4: too short");
    /// ```
    pub fn new(message: impl fmt::Display) -> Self {
        Self {
            message: message.to_string(),
        }
    }

    /// The message, as the host will record it.
    ///
    /// ```
    /// assert_eq!(operon_sdk::Error::from("boom").message(), "boom");
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Prefixes the message with what was being done, e.g. `parsing df: ...`.
    ///
    /// ```
    /// let err = operon_sdk::Error::from("unexpected end of input").context("parsing df");
    /// assert_eq!(err.message(), "parsing df: unexpected end of input");
    /// ```
    pub fn context(self, context: impl fmt::Display) -> Self {
        Self {
            message: format!("{context}: {}", self.message),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<&str> for Error {
    fn from(message: &str) -> Self {
        Self::new(message)
    }
}

impl From<String> for Error {
    fn from(message: String) -> Self {
        Self { message }
    }
}

impl From<serde_json::Error> for Error {
    fn from(err: serde_json::Error) -> Self {
        Self::new(format_args!("invalid JSON: {err}"))
    }
}

impl From<Error> for String {
    fn from(err: Error) -> Self {
        err.message
    }
}

/// Turns any `Result` whose error is printable into a `Result<T, Error>` with context.
///
/// A blanket `From` for every error type would collide with `From<String>`, so errors from
/// other libraries go through this trait instead.
///
/// ```
/// use operon_sdk::{Error, ResultExt};
///
/// fn threshold(text: &str) -> Result<u8, Error> {
///     text.parse::<u8>().context("parameter `threshold`")
/// }
///
/// assert_eq!(threshold("85"), Ok(85));
/// assert_eq!(
///     threshold("lots").unwrap_err().message(),
///     "parameter `threshold`: invalid digit found in string",
/// );
/// ```
pub trait ResultExt<T> {
    /// Converts the error into an [`Error`] prefixed with `context`.
    ///
    /// ```
    /// use operon_sdk::ResultExt;
    ///
    /// let err = "x".parse::<f64>().context("reading the ratio").unwrap_err();
    /// assert_eq!(err.message(), "reading the ratio: invalid float literal");
    /// ```
    fn context(self, context: impl fmt::Display) -> Result<T, Error>;

    /// Like [`context`](ResultExt::context), building the context only on failure.
    ///
    /// ```
    /// use operon_sdk::ResultExt;
    ///
    /// let line = 7;
    /// let err = "x".parse::<u64>().with_context(|| format!("line {line}")).unwrap_err();
    /// assert_eq!(err.message(), "line 7: invalid digit found in string");
    /// ```
    fn with_context<C: fmt::Display>(self, context: impl FnOnce() -> C) -> Result<T, Error>;
}

impl<T, E: fmt::Display> ResultExt<T> for Result<T, E> {
    fn context(self, context: impl fmt::Display) -> Result<T, Error> {
        self.map_err(|err| Error::new(err).context(context))
    }

    fn with_context<C: fmt::Display>(self, context: impl FnOnce() -> C) -> Result<T, Error> {
        self.map_err(|err| Error::new(err).context(context()))
    }
}

/// Returns early with an [`Error`] built like `format!`.
///
/// ```
/// fn check(mode: &str) -> Result<(), operon_sdk::Error> {
///     if mode != "fast" {
///         operon_sdk::bail!("unknown mode `{mode}`");
///     }
///     Ok(())
/// }
///
/// assert_eq!(check("slow").unwrap_err().message(), "unknown mode `slow`");
/// ```
#[macro_export]
macro_rules! bail {
    ($($format:tt)+) => {
        return ::core::result::Result::Err($crate::Error::new(::std::format!($($format)+)))
    };
}
