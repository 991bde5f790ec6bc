//! The files of shell-operator's hook protocol: the environment variable that names
//! each one, its name in a run's private directory, and the error that points at a
//! line of one of them.

/// One of the files a hook writes, with its variable and file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HookFile {
    /// The environment variable holding the path.
    pub variable: &'static str,
    /// The file's name in the run directory.
    pub file: &'static str,
}

/// `$BINDING_CONTEXT_PATH`, written by Operon.
pub(crate) const BINDING_CONTEXT: HookFile = HookFile {
    variable: "BINDING_CONTEXT_PATH",
    file: "binding-context.json",
};
/// `$KUBERNETES_PATCH_PATH`.
pub(crate) const KUBERNETES_PATCH: HookFile = HookFile {
    variable: "KUBERNETES_PATCH_PATH",
    file: "kubernetes-patch",
};
/// `$METRICS_PATH`.
pub(crate) const METRICS: HookFile = HookFile {
    variable: "METRICS_PATH",
    file: "metrics.json",
};
/// `$VALIDATING_RESPONSE_PATH`.
pub const VALIDATING_RESPONSE: HookFile = HookFile {
    variable: "VALIDATING_RESPONSE_PATH",
    file: "validating-response.json",
};
/// `$ADMISSION_RESPONSE_PATH`, the newer name of the validating response.
pub(crate) const ADMISSION_RESPONSE: HookFile = HookFile {
    variable: "ADMISSION_RESPONSE_PATH",
    file: "admission-response.json",
};
/// `$CONVERSION_RESPONSE_PATH`.
pub(crate) const CONVERSION_RESPONSE: HookFile = HookFile {
    variable: "CONVERSION_RESPONSE_PATH",
    file: "conversion-response.json",
};

/// Every file a run's hook may write, created empty before the run.
pub(crate) const OUTPUT_FILES: [HookFile; 5] = [
    KUBERNETES_PATCH,
    METRICS,
    VALIDATING_RESPONSE,
    ADMISSION_RESPONSE,
    CONVERSION_RESPONSE,
];

impl HookFile {
    /// An error about line `line` of this file.
    pub fn error(self, line: usize, reason: impl Into<String>) -> HookFileError {
        HookFileError {
            variable: self.variable,
            file: self.file,
            line,
            reason: reason.into(),
        }
    }
}

/// A file a hook wrote that Operon cannot read, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable} ({file}), line {line}: {reason}")]
pub struct HookFileError {
    /// The environment variable naming the file, e.g. `KUBERNETES_PATCH_PATH`.
    pub variable: &'static str,
    /// The file's name inside the run directory.
    pub file: &'static str,
    /// 1-based line of the problem (1 for problems of the whole file).
    pub(crate) line: usize,
    /// What is wrong.
    pub(crate) reason: String,
}
