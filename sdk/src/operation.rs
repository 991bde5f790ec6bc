//! Operations: one step of a diagnosis pipeline, written as `fn(Input) -> Result<Output, Error>`.

use std::fmt;
use std::str::FromStr;

use crate::Error;
use crate::types::{OperationInput, OperationOutput, RunnerContext};

/// What an operation receives: parameters, earlier results, arguments and the run's context.
///
/// Lookups follow the contract's rule that the last of repeated keys wins.
///
/// ```
/// use operon_sdk::Input;
///
/// // Inputs can be built by hand to unit-test an operation's logic on the host.
/// let input = Input::default()
///     .with_param("threshold", "90")
///     .with_arg("/var");
/// assert_eq!(input.param("threshold"), Some("90"));
/// assert_eq!(input.args(), ["/var"]);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Input {
    /// Kept whole so that nothing the host sends is lost to a guest that needs it.
    raw: OperationInput,
}

impl Input {
    /// The parameter `key`, if given. Parameters include earlier operations' results.
    ///
    /// ```
    /// let input = operon_sdk::Input::default().with_param("node", "worker-1");
    /// assert_eq!(input.param("node"), Some("worker-1"));
    /// assert_eq!(input.param("pod.name"), None);
    /// ```
    pub fn param(&self, key: &str) -> Option<&str> {
        lookup(&self.raw.parameters, key)
    }

    /// The parameter `key`, or an error naming it when it is missing.
    ///
    /// ```
    /// let input = operon_sdk::Input::default();
    /// let err = input.require("log").unwrap_err();
    /// assert_eq!(err.message(), "missing required parameter `log`");
    /// ```
    pub fn require(&self, key: &str) -> Result<&str, Error> {
        self.param(key)
            .ok_or_else(|| Error::new(format_args!("missing required parameter `{key}`")))
    }

    /// The parameter `key` parsed as `T`; `Ok(None)` when it is missing, an error naming the
    /// parameter when it does not parse.
    ///
    /// ```
    /// let input = operon_sdk::Input::default().with_param("threshold", "high");
    /// assert_eq!(input.param_as::<u8>("missing"), Ok(None));
    /// assert_eq!(
    ///     input.param_as::<u8>("threshold").unwrap_err().message(),
    ///     "parameter `threshold`: invalid digit found in string (got `high`)",
    /// );
    /// ```
    pub fn param_as<T>(&self, key: &str) -> Result<Option<T>, Error>
    where
        T: FromStr,
        T::Err: fmt::Display,
    {
        self.param(key)
            .map(|text| {
                text.trim().parse().map_err(|err| {
                    Error::new(format_args!("parameter `{key}`: {err} (got `{text}`)"))
                })
            })
            .transpose()
    }

    /// The result `key` of an earlier operation, ignoring plain parameters.
    ///
    /// ```
    /// let input = operon_sdk::Input::default()
    ///     .with_param("df", "given")
    ///     .with_result("collected", "yes");
    /// assert_eq!(input.result("df"), None);
    /// assert_eq!(input.result("collected"), Some("yes"));
    /// ```
    pub fn result(&self, key: &str) -> Option<&str> {
        lookup(&self.raw.results, key)
    }

    /// Every parameter in the order the host sent them.
    ///
    /// ```
    /// let input = operon_sdk::Input::default().with_param("a", "1").with_param("b", "2");
    /// let keys: Vec<&str> = input.params().map(|(key, _)| key).collect();
    /// assert_eq!(keys, ["a", "b"]);
    /// ```
    pub fn params(&self) -> impl Iterator<Item = (&str, &str)> {
        pairs(&self.raw.parameters)
    }

    /// Every result of earlier operations in the order the host sent them.
    ///
    /// ```
    /// let input = operon_sdk::Input::default().with_result("df", "...");
    /// assert_eq!(input.results().count(), 1);
    /// ```
    pub fn results(&self) -> impl Iterator<Item = (&str, &str)> {
        pairs(&self.raw.results)
    }

    /// The positional arguments resolved from the Operation's `argKeys`.
    ///
    /// ```
    /// let input = operon_sdk::Input::default().with_arg("-P");
    /// assert_eq!(input.args(), ["-P"]);
    /// ```
    pub fn args(&self) -> &[String] {
        &self.raw.args
    }

    /// The positional argument at `index`, if there is one.
    ///
    /// ```
    /// let input = operon_sdk::Input::default().with_arg("first");
    /// assert_eq!(input.arg(0), Some("first"));
    /// assert_eq!(input.arg(1), None);
    /// ```
    pub fn arg(&self, index: usize) -> Option<&str> {
        self.raw.args.get(index).map(String::as_str)
    }

    /// Where and how the operation runs: its name, dry-run flag, budget, node and namespace.
    ///
    /// ```
    /// let input = operon_sdk::Input::default();
    /// assert!(!input.context().dry_run);
    /// assert_eq!(input.context().node, None);
    /// ```
    pub fn context(&self) -> &RunnerContext {
        &self.raw.context
    }

    /// Adds a parameter, for building inputs in tests.
    ///
    /// ```
    /// let input = operon_sdk::Input::default().with_param("k", "old").with_param("k", "new");
    /// assert_eq!(input.param("k"), Some("new"));
    /// ```
    pub fn with_param(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.raw.parameters.push((key.into(), value.into()));
        self
    }

    /// Adds an earlier result, for building inputs in tests. Like the host, this also
    /// overlays it on the parameters.
    ///
    /// ```
    /// let input = operon_sdk::Input::default().with_result("df", "text");
    /// assert_eq!(input.param("df"), Some("text"));
    /// assert_eq!(input.result("df"), Some("text"));
    /// ```
    pub fn with_result(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let (key, value) = (key.into(), value.into());
        self.raw.parameters.push((key.clone(), value.clone()));
        self.raw.results.push((key, value));
        self
    }

    /// Adds a positional argument, for building inputs in tests.
    ///
    /// ```
    /// let input = operon_sdk::Input::default().with_arg("a").with_arg("b");
    /// assert_eq!(input.args(), ["a", "b"]);
    /// ```
    pub fn with_arg(mut self, arg: impl Into<String>) -> Self {
        self.raw.args.push(arg.into());
        self
    }

    /// Replaces the runner context, for building inputs in tests.
    ///
    /// ```
    /// use operon_sdk::{Input, RunnerContext};
    ///
    /// let input = Input::default().with_context(RunnerContext {
    ///     dry_run: true,
    ///     ..RunnerContext::default()
    /// });
    /// assert!(input.context().dry_run);
    /// ```
    pub fn with_context(mut self, context: RunnerContext) -> Self {
        self.raw.context = context;
        self
    }
}

impl From<OperationInput> for Input {
    fn from(raw: OperationInput) -> Self {
        Self { raw }
    }
}

/// What an operation returns: results for later operations and text for people.
///
/// ```
/// use operon_sdk::Output;
///
/// let output = Output::new()
///     .result("disk.pressure", true)
///     .result("disk.worst_percent", 91)
///     .output("/var is 91% full");
/// assert_eq!(output.get("disk.pressure"), Some("true"));
/// assert_eq!(output.text(), "/var is 91% full");
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Output {
    /// Kept unique by key, as the contract asks, so later operations see one value.
    results: Vec<(String, String)>,
    /// Shown by the CLI and stored with the run.
    text: String,
}

impl Output {
    /// An output with no results and no text.
    ///
    /// ```
    /// assert!(operon_sdk::Output::new().results().is_empty());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the result `key` to `value` (anything printable), replacing an earlier value.
    ///
    /// ```
    /// let output = operon_sdk::Output::new().result("count", 1).result("count", 2);
    /// assert_eq!(output.results(), [("count".to_string(), "2".to_string())]);
    /// ```
    pub fn result(mut self, key: impl Into<String>, value: impl fmt::Display) -> Self {
        self.set(key, value);
        self
    }

    /// Sets the result `key` in place, for outputs built in a loop.
    ///
    /// ```
    /// let mut output = operon_sdk::Output::new();
    /// for (mount, percent) in [("/", 40), ("/var", 91)] {
    ///     output.set(format!("disk.{mount}"), percent);
    /// }
    /// assert_eq!(output.get("disk./var"), Some("91"));
    /// ```
    pub fn set(&mut self, key: impl Into<String>, value: impl fmt::Display) -> &mut Self {
        let (key, value) = (key.into(), value.to_string());
        match self.results.iter_mut().find(|(k, _)| *k == key) {
            Some((_, existing)) => *existing = value,
            None => self.results.push((key, value)),
        }
        self
    }

    /// Sets the human-readable text, replacing earlier text.
    ///
    /// ```
    /// let output = operon_sdk::Output::new().output("all good");
    /// assert_eq!(output.text(), "all good");
    /// ```
    pub fn output(mut self, text: impl Into<String>) -> Self {
        self.text = text.into();
        self
    }

    /// The result `key`, if set.
    ///
    /// ```
    /// let output = operon_sdk::Output::new().result("ok", true);
    /// assert_eq!(output.get("ok"), Some("true"));
    /// ```
    pub fn get(&self, key: &str) -> Option<&str> {
        lookup(&self.results, key)
    }

    /// Every result, in the order they were first set.
    ///
    /// ```
    /// let output = operon_sdk::Output::new().result("a", 1).result("b", 2);
    /// assert_eq!(output.results().len(), 2);
    /// ```
    pub fn results(&self) -> &[(String, String)] {
        &self.results
    }

    /// The human-readable text.
    ///
    /// ```
    /// assert_eq!(operon_sdk::Output::new().text(), "");
    /// ```
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl From<Output> for OperationOutput {
    fn from(output: Output) -> Self {
        Self {
            results: output.results,
            output: output.text,
        }
    }
}

fn lookup<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, value)| value.as_str())
}

fn pairs(pairs: &[(String, String)]) -> impl Iterator<Item = (&str, &str)> {
    pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
}

/// Adapts a plain operation function to the generated `Guest::run`; used by `operation!`.
#[doc(hidden)]
pub fn run(
    input: OperationInput,
    operation: fn(Input) -> Result<Output, Error>,
) -> Result<OperationOutput, String> {
    operation(Input::from(input))
        .map(OperationOutput::from)
        .map_err(String::from)
}

/// Exports a function `fn(Input) -> Result<Output, Error>` as the component's `run`.
///
/// Use it once, at the top level of a `cdylib` crate built for `wasm32-wasip2`.
///
/// ```standalone_crate
/// use operon_sdk::{Error, Input, Output};
///
/// fn run(input: Input) -> Result<Output, Error> {
///     let name = input.require("name")?;
///     Ok(Output::new().result("greeting", format!("hello, {name}")))
/// }
///
/// operon_sdk::operation!(run);
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! operation {
    ($run:path) => {
        // The export macro wants a type to implement the generated trait on; a private one,
        // in an anonymous const, keeps that type out of the guest's namespace.
        const _: () = {
            struct Operation;

            impl $crate::__private::OperationGuest for Operation {
                fn run(
                    input: $crate::types::OperationInput,
                ) -> ::core::result::Result<$crate::types::OperationOutput, ::std::string::String>
                {
                    $crate::__private::run_operation(input, $run)
                }
            }

            $crate::__private::operation::__export_operation!(
                Operation with_types_in $crate::__private::operation
            );
        };
    };
}
