//! Why a hook could not be configured or run: [`HookError`], the one error of the hook
//! contract, which keeps the error of whichever runner failed as its source.

use super::cluster_access::CLUSTER_CALL_HINT;
use super::job::JobHookError;
use super::script::ScriptHookError;
use operon_data::model::config::ConfigProblem;
use operon_sandbox::CallError;
use operon_script::{RunStatus, SandboxError};
use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// Why a hook could not be configured or run.
///
/// `Clone`, since a run's outcome is kept in run histories and read by several
/// consumers: the errors it keeps that are not `Clone` are shared behind an `Arc`, and
/// [`Error::source`] hands out the error itself, so that a downcast finds its type.
/// Equal when of the same variant with the same message ([`PartialEq`]): the kept
/// errors cannot be compared.
#[derive(Debug, Clone)]
pub enum HookError {
    /// The hook's program failed to give its configuration.
    Configure {
        /// The hook's name.
        hook: String,
        /// Why.
        reason: Arc<ConfigureError>,
    },
    /// A run failed and its message is all that is known of why: an offloaded run's
    /// report carries its error as text.
    Run(String),
    /// A script hook's run failed: it could not start, exited non-zero, was killed at
    /// its deadline or its output bound, or wrote a file that cannot be read.
    Script {
        /// The failure.
        error: Arc<ScriptHookError>,
        /// Whether the hook, which has no cluster access, seems to have tried to reach
        /// the API server: the message then says how to grant it.
        cluster_hint: bool,
    },
    /// A wasm hook's call failed: the guest returned an error, trapped, ran out of
    /// time, memory, stack or output, or the call could not start. Transparent: its
    /// message is the call's, written once in an error chain.
    Call(CallError),
    /// An offloaded run's Job could not run or left no report that can be read.
    Job(Arc<JobHookError>),
    /// The run succeeded but its caller could not take what it returned (an addon
    /// hook's values patch that does not parse, say): the caller's error.
    Output(Arc<dyn Error + Send + Sync>),
}

impl HookError {
    /// Whether the run failed on a per-run limit that a run with fewer binding
    /// contexts may stay within: its time budget or the bound of its output.
    pub(crate) fn is_limit(&self) -> bool {
        match self {
            Self::Call(e) => matches!(
                e,
                CallError::Timeout { .. } | CallError::OutputTooLarge { .. }
            ),
            Self::Script { error, .. } => error.is_limit(),
            _ => false,
        }
    }
}

impl fmt::Display for HookError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Configure { hook, reason } => {
                write!(f, "hook {hook}: cannot get its configuration: {reason}")
            }
            Self::Run(message) => f.write_str(message),
            Self::Script {
                error,
                cluster_hint,
            } => {
                write!(f, "{error}")?;
                if *cluster_hint {
                    write!(f, " ({CLUSTER_CALL_HINT})")?;
                }
                Ok(())
            }
            Self::Call(e) => e.fmt(f),
            Self::Job(e) => e.fmt(f),
            Self::Output(e) => e.fmt(f),
        }
    }
}

impl Error for HookError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Configure { reason, .. } => Some(&**reason),
            Self::Run(_) => None,
            Self::Script { error, .. } => Some(&**error),
            Self::Call(e) => e.source(),
            Self::Job(e) => Some(&**e),
            Self::Output(e) => Some(&**e),
        }
    }
}

impl PartialEq for HookError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Run(a), Self::Run(b)) => a == b,
            (Self::Call(a), Self::Call(b)) => a == b,
            _ => {
                std::mem::discriminant(self) == std::mem::discriminant(other)
                    && self.to_string() == other.to_string()
            }
        }
    }
}

impl From<CallError> for HookError {
    fn from(error: CallError) -> Self {
        Self::Call(error)
    }
}

impl From<ScriptHookError> for HookError {
    fn from(error: ScriptHookError) -> Self {
        Self::Script {
            error: Arc::new(error),
            cluster_hint: false,
        }
    }
}

impl From<JobHookError> for HookError {
    fn from(error: JobHookError) -> Self {
        Self::Job(Arc::new(error))
    }
}

/// Why a hook's program did not give its configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigureError {
    /// A wasm hook's configure call failed.
    #[error("{0}")]
    Call(#[source] CallError),
    /// The script sandbox could not prepare or start the `--config` run.
    #[error("{0}")]
    Sandbox(#[source] SandboxError),
    /// `--config` exited non-zero, was killed or timed out.
    #[error("--config failed ({status}){tail}")]
    Failed {
        /// How it ended.
        status: RunStatus,
        /// `": <last line of stderr>"`, or empty.
        tail: String,
    },
    /// The caller's filter refused what `--config` printed.
    #[error("{0}")]
    Filter(#[source] Box<dyn Error + Send + Sync>),
    /// What `--config` printed is not a valid configuration.
    #[error("{}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid {
        /// Every problem, in order.
        problems: Vec<ConfigProblem>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use operon_sandbox::OutputKind;
    use std::time::Duration;

    #[test]
    fn limits_are_the_calls_and_the_scripts_time_and_output_bounds() {
        let timeout = HookError::Call(CallError::Timeout {
            limit: Duration::from_secs(1),
        });
        assert!(timeout.is_limit());
        let output = HookError::Call(CallError::OutputTooLarge {
            what: OutputKind::Stdout,
            detail: "1 MiB".into(),
        });
        assert!(output.is_limit());
        assert!(!HookError::Call(CallError::Failed("no".into())).is_limit());
        let killed = |status| {
            HookError::from(ScriptHookError::Failed {
                hook: "a.sh".into(),
                status,
                tail: String::new(),
            })
        };
        assert!(killed(RunStatus::TimedOut).is_limit());
        assert!(killed(RunStatus::OutputExceeded).is_limit());
        assert!(!killed(RunStatus::Exited(1)).is_limit());
        assert!(!HookError::Run("timed out".into()).is_limit());
    }

    #[test]
    fn the_runners_errors_are_kept_as_sources() {
        let script = HookError::Script {
            error: Arc::new(ScriptHookError::Failed {
                hook: "a.sh".into(),
                status: RunStatus::Exited(2),
                tail: ": no such pod".into(),
            }),
            cluster_hint: true,
        };
        assert_eq!(
            script.to_string(),
            format!("hook a.sh failed (exit code 2): no such pod ({CLUSTER_CALL_HINT})")
        );
        let source = script.source().unwrap();
        assert!(matches!(
            source.downcast_ref::<ScriptHookError>(),
            Some(ScriptHookError::Failed {
                status: RunStatus::Exited(2),
                ..
            })
        ));

        let configure = HookError::Configure {
            hook: "a.wasm".into(),
            reason: Arc::new(ConfigureError::Call(CallError::Failed("bad".into()))),
        };
        assert_eq!(
            configure.to_string(),
            "hook a.wasm: cannot get its configuration: bad"
        );
        let reason = configure.source().unwrap();
        assert!(reason.downcast_ref::<ConfigureError>().is_some());
        let call = reason.source().unwrap().downcast_ref::<CallError>();
        assert_eq!(call, Some(&CallError::Failed("bad".into())));

        let io = std::io::Error::other("values patch: not JSON");
        let output = HookError::Output(Arc::new(io));
        assert_eq!(output.to_string(), "values patch: not JSON");
        assert!(output.source().unwrap().is::<std::io::Error>());
    }

    #[test]
    fn errors_are_equal_by_variant_and_message() {
        let failed = |tail: &str| {
            HookError::from(ScriptHookError::Failed {
                hook: "a.sh".into(),
                status: RunStatus::Exited(1),
                tail: tail.into(),
            })
        };
        assert_eq!(failed(": x"), failed(": x"));
        assert_ne!(failed(": x"), failed(": y"));
        // The same words from another runner are another error.
        assert_ne!(failed(": x"), HookError::Run(failed(": x").to_string()));
    }
}
