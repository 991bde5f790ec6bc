//! A hook whose runs are Kubernetes Jobs (`Hook.spec.runOn: Job`), for hooks whose
//! work outgrows the engine: minutes of CPU, more memory than the engine grants, a
//! node of their own.
//!
//! The engine keeps everything but the run: it asks the module for its configuration
//! in its own sandbox, watches, queues, and applies the patches and metrics a run
//! returns through the Hook's permissions, as for a hook run in-process. Each run is a
//! Job of Operon's own image in the Hook's namespace, owned by the Hook: its container
//! (`operon hook handle --digest ...`) fetches the module by digest from the module
//! API, runs it on the binding contexts the Job's ConfigMap holds, and leaves what the
//! run produced as a [`HookReport`]: as its termination message when the report fits
//! there (4 KiB), else as the last line of its log, read through the API server (the
//! termination message then says so).

use super::{Hook, HookError, HookRun};
use futures::future::BoxFuture;
use operon_data::api::{JobProcessor, JobResultSource, WasmJob};
use operon_data::model::{
    HookConfig, HookInput, HookOutput, LogRecord, MetricOperation, PatchOperation,
};
use operon_runner::RunRequest;
use operon_runner::context::Platform;
use operon_runner::job::{INPUT_DIR, JobRunError, JobRunner, MAX_LOG_RESULT, RESULT_PATH};
use operon_runner::offload::{CA_FILE, OffloadTarget, TOKEN_FILE};
use operon_sandbox::{CallLimits, ModuleDigest};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The Job's ConfigMap key holding the run's [`HookInput`] as JSON.
pub(crate) const INPUT_FILE: &str = "hook-input.json";
/// How a termination message starts when the report is in the log instead.
pub const REPORT_IN_LOG: &str = "report in the log: ";
/// The version of [`HookReport`] this engine reads and its container writes.
pub(crate) const REPORT_FORMAT: u32 = 1;
/// Captured stdout and stderr travel back cut to their last this many bytes: they are
/// for the engine's log, and the whole report must fit in [`MAX_LOG_RESULT`].
pub(crate) const MAX_REPORTED_OUTPUT: usize = 64 * 1024;

/// Why an offloaded run failed before its report was read: the hook's own failure
/// comes back in the report, as text ([`HookError::Run`]).
#[derive(Debug, thiserror::Error)]
pub enum JobHookError {
    /// The run's input cannot be encoded for the Job's ConfigMap.
    #[error("{0}")]
    Input(#[source] serde_json::Error),
    /// The Job could not be run, or failed, or its result cannot be read.
    #[error("{0}")]
    Job(#[source] JobRunError),
    /// The report is in the log of the Job's pod, which cannot be read.
    #[error("Job {job}: the report is in the log, which {source}")]
    Log {
        /// The Job, `namespace/name`.
        job: String,
        /// Why.
        #[source]
        source: JobRunError,
    },
    /// What the Job left is not a report this engine reads.
    #[error("Job {job} (pod {pod}): {source}")]
    Report {
        /// The Job, `namespace/name`.
        job: String,
        /// Its pod.
        pod: String,
        /// Why.
        #[source]
        source: ReportError,
    },
}

/// Why a [`HookReport`] cannot be sent or read.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The report cannot be encoded.
    #[error("{0}")]
    Encode(#[source] serde_json::Error),
    /// The report is larger than an offloaded run can return.
    #[error(
        "the run's report is {bytes} bytes ({patches} patches, {metrics} metrics, {logs} log records), more than an offloaded run returns ({MAX_LOG_RESULT} bytes); submit fewer or smaller patches per run"
    )]
    TooLarge {
        /// The report's size.
        bytes: usize,
        /// Its patch operations.
        patches: usize,
        /// Its metric operations.
        metrics: usize,
        /// Its log records.
        logs: usize,
    },
    /// The container printed nothing.
    #[error("the container printed no report (is the Job's image Operon's own?)")]
    Empty,
    /// The last line is not a report.
    #[error("the last line of the log is not a hook report ({source}): {excerpt:?}")]
    NotAReport {
        /// Why it does not decode.
        #[source]
        source: serde_json::Error,
        /// The line's first 120 characters.
        excerpt: String,
    },
    /// The report is of a format this engine does not read.
    #[error(
        "the report is of format {format}, this engine reads format {REPORT_FORMAT}: the Job ran another version of Operon's image"
    )]
    Format {
        /// The report's format.
        format: u32,
    },
}

/// What one offloaded run produced, as its container prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookReport {
    /// [`REPORT_FORMAT`]: an engine refuses a report of another format (an image of
    /// another version) rather than misreading it.
    pub(crate) format: u32,
    /// Why the run failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The hook's answer, when it succeeded.
    #[serde(default)]
    pub(crate) output: HookOutput,
    /// Patch operations submitted, in order.
    #[serde(default)]
    pub patches: Vec<PatchOperation>,
    /// Metric operations submitted, in order.
    #[serde(default)]
    pub metrics: Vec<MetricOperation>,
    /// Log records.
    #[serde(default)]
    pub logs: Vec<LogRecord>,
    /// The end of the captured stdout.
    #[serde(default)]
    pub stdout: String,
    /// The end of the captured stderr.
    #[serde(default)]
    pub stderr: String,
    /// How long the run took in the container, in milliseconds.
    #[serde(default)]
    pub elapsed_ms: u64,
}

impl HookReport {
    /// The report of `run`, its captured output cut to 64 KiB.
    pub fn of(run: &HookRun) -> Self {
        let (output, error) = match &run.outcome {
            Ok(output) => (output.clone(), None),
            Err(e) => (HookOutput::default(), Some(e.to_string())),
        };
        Self {
            format: REPORT_FORMAT,
            error,
            output,
            patches: run.patches.clone(),
            metrics: run.metrics.clone(),
            logs: run.logs.clone(),
            stdout: tail(&run.stdout, MAX_REPORTED_OUTPUT),
            stderr: tail(&run.stderr, MAX_REPORTED_OUTPUT),
            elapsed_ms: u64::try_from(run.elapsed.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// The report as the one line the container prints, or why it cannot be sent.
    pub fn to_line(&self) -> Result<String, ReportError> {
        let line = serde_json::to_string(self).map_err(ReportError::Encode)?;
        if line.len() > MAX_LOG_RESULT {
            return Err(ReportError::TooLarge {
                bytes: line.len(),
                patches: self.patches.len(),
                metrics: self.metrics.len(),
                logs: self.logs.len(),
            });
        }
        Ok(line)
    }

    /// Reads the report a container printed.
    pub(crate) fn parse(text: &str) -> Result<Self, ReportError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(ReportError::Empty);
        }
        let report: Self =
            serde_json::from_str(text).map_err(|source| ReportError::NotAReport {
                source,
                excerpt: text.chars().take(120).collect(),
            })?;
        if report.format != REPORT_FORMAT {
            return Err(ReportError::Format {
                format: report.format,
            });
        }
        Ok(report)
    }

    /// The run this report describes; `elapsed` is the time the engine waited.
    pub(crate) fn into_run(self, elapsed: Duration) -> HookRun {
        HookRun {
            outcome: match self.error {
                Some(e) => Err(HookError::Run(e)),
                None => Ok(self.output),
            },
            patches: self.patches,
            metrics: self.metrics,
            logs: self.logs,
            stdout: self.stdout,
            stderr: self.stderr,
            elapsed,
        }
    }
}

/// The last `bound` bytes of `text`, on a character boundary.
fn tail(text: &str, bound: usize) -> String {
    if text.len() <= bound {
        return text.to_owned();
    }
    let mut start = text.len() - bound;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_owned()
}

/// Who a hook's Jobs belong to: the Hook object, which owns them (deleting it deletes
/// its Jobs) and whose namespace they run in.
#[derive(Debug, Clone)]
pub struct JobOwner {
    /// The Hook's namespace.
    pub namespace: String,
    /// The Hook's name.
    pub name: String,
    /// The Hook's uid.
    pub uid: String,
}

/// A hook configured in the engine and run in Jobs.
pub struct JobHook {
    /// Answers `configure` (the module in the engine's sandbox).
    configured: Arc<dyn Hook>,
    runner: JobRunner,
    owner: JobOwner,
    /// When this engine started, in milliseconds since the epoch: run names (and so
    /// Job names) of an engine started later never meet this one's.
    epoch: u128,
    runs: AtomicU64,
}

impl JobHook {
    /// A hook configured by `configured` whose runs are Jobs of `runner`, owned by
    /// `owner`. The runner's container must print a [`HookReport`] as its last line.
    pub fn new(configured: Arc<dyn Hook>, runner: JobRunner, owner: JobOwner) -> Self {
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        Self {
            configured,
            runner,
            owner,
            epoch,
            runs: AtomicU64::new(0),
        }
    }

    /// The request of the next run, with `timeout`.
    fn request(&self, timeout: Duration) -> RunRequest {
        let run = self.runs.fetch_add(1, Ordering::Relaxed) + 1;
        RunRequest {
            name: format!(
                "{}/{}/run-{}-{run}",
                self.owner.namespace, self.owner.name, self.epoch
            ),
            input: BTreeMap::new(),
            results: BTreeMap::new(),
            node: None,
            namespace: Some(self.owner.namespace.clone()),
            owner: Some((
                "Hook".to_owned(),
                self.owner.name.clone(),
                self.owner.uid.clone(),
            )),
            dry_run: false,
            timeout,
        }
    }

    async fn run(&self, input: &HookInput, timeout: Duration) -> Result<HookReport, JobHookError> {
        let text = serde_json::to_string(input).map_err(JobHookError::Input)?;
        let files = BTreeMap::from([(INPUT_FILE.to_owned(), text)]);
        let request = self.request(timeout);
        let (job, pod, text, _) = self
            .runner
            .run_for_text(&request, &files)
            .await
            .map_err(JobHookError::Job)?;
        let text = match text.starts_with(REPORT_IN_LOG) {
            true => self
                .runner
                .log_line(&self.owner.namespace, &pod)
                .await
                .map_err(|source| JobHookError::Log {
                    job: job.clone(),
                    source,
                })?,
            false => text,
        };
        HookReport::parse(&text).map_err(|source| JobHookError::Report { job, pod, source })
    }
}

impl Hook for JobHook {
    fn name(&self) -> &str {
        self.configured.name()
    }

    fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
        self.configured.configure()
    }

    fn handle(&self, input: HookInput, timeout: Duration) -> BoxFuture<'_, (HookRun, HookInput)> {
        Box::pin(async move {
            let started = Instant::now();
            let run = match self.run(&input, timeout).await {
                Ok(report) => report.into_run(started.elapsed()),
                Err(e) => HookRun {
                    outcome: Err(HookError::from(e)),
                    patches: Vec::new(),
                    metrics: Vec::new(),
                    logs: Vec::new(),
                    stdout: String::new(),
                    stderr: String::new(),
                    elapsed: started.elapsed(),
                },
            };
            (run, input)
        })
    }
}

/// The memory a guest in a Job of `job` may use: `engine`'s limit, or three quarters of
/// the container's memory limit when that is more.
fn guest_memory(job: &WasmJob, engine: u64) -> u64 {
    let limit = job
        .resources
        .as_ref()
        .and_then(|r| r.limits.get("memory"))
        .and_then(|q| quantity_bytes(q));
    limit.map_or(engine, |bytes| engine.max(bytes / 4 * 3))
}

/// A Kubernetes memory quantity in bytes (`512Mi`, `2Gi`, `1G`, `1048576`); `None`
/// for forms this does not read (the API server has checked the quantity; the guest
/// then keeps the engine's limit).
pub(crate) fn quantity_bytes(quantity: &str) -> Option<u64> {
    let quantity = quantity.trim();
    let split = quantity
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(quantity.len());
    let (number, suffix) = quantity.split_at(split);
    let factor: u64 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        _ => return None,
    };
    let value: f64 = number.parse().ok()?;
    let bytes = value * factor as f64;
    (bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

/// The Job runner of a hook offloaded to `target`: Operon's image running `operon
/// hook handle` on the module `digest`, in the pod settings `job` gives. The guest's
/// memory is `limits`' unless the container's memory limit allows more: then three
/// quarters of it (the rest is the runtime's and the compiled module's). `name` is the
/// hook's (for the Jobs' annotation).
pub fn job_runner(
    target: &OffloadTarget,
    client: Option<kube::Client>,
    name: &str,
    job: &WasmJob,
    digest: &ModuleDigest,
    limits: &CallLimits,
    platform: Platform,
) -> JobRunner {
    let file = |name: &str| format!("{INPUT_DIR}/{name}");
    let mut args: Vec<String> = vec![
        "hook".into(),
        "handle".into(),
        "--digest".into(),
        digest.to_string(),
        "--module-url".into(),
        target.module_url.clone(),
    ];
    if let Some(server_name) = &target.server_name {
        args.extend(["--module-server-name".into(), server_name.clone()]);
    }
    args.extend([
        "--module-ca".into(),
        file(CA_FILE),
        "--token-file".into(),
        TOKEN_FILE.into(),
        "--input-file".into(),
        file(INPUT_FILE),
        "--result-file".into(),
        RESULT_PATH.into(),
        "--memory".into(),
        guest_memory(job, limits.memory_bytes).to_string(),
        "--no-cache".into(),
    ]);
    let processor = JobProcessor {
        image: target.image.clone(),
        command: vec!["operon".to_owned()],
        args,
        env: Vec::new(),
        resources: job.resources.clone(),
        node_selector: job.node_selector.clone(),
        on_diagnosis_node: false,
        service_account_name: job.service_account_name.clone(),
        image_pull_policy: job.image_pull_policy.clone(),
        ttl_seconds_after_finished: job.ttl_seconds_after_finished,
        // The report, or where it is instead.
        result_from: Some(JobResultSource::TerminationMessage),
    };
    let ca = String::from_utf8_lossy(&target.ca.borrow()).into_owned();
    JobRunner::new(client, name, processor, platform)
        .with_file(CA_FILE, ca)
        .with_description(format!(
            "`operon hook handle` on module {digest} in {}",
            target.image
        ))
}

#[cfg(test)]
mod tests;
