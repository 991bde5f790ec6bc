//! The `job` runner: a step run as a Kubernetes Job in the Diagnosis' namespace.
//!
//! A run creates a ConfigMap holding the step's input (mounted as files and referred to
//! by environment variables) and a Job, both owned by the Diagnosis, hands the
//! ConfigMap to the Job (so that the Job's TTL removes an input the engine could not),
//! then watches the Job and its pods until the container exits. The container writes its results, a
//! JSON object of strings, to its termination message (or, when the Operation says
//! so, as the last line of its log). A failed pod, a Job past its deadline, an evicted
//! pod or an image that cannot be pulled fails the step with that reason.
//!
//! The Job's name is derived from the run (Diagnosis uid and node), so a controller
//! restarted while the Job runs finds it again and waits for it instead of creating a
//! second one.

mod outcome;
mod spec;
#[cfg(test)]
mod tests;

pub use outcome::{Assessment, MAX_TERMINATION_MESSAGE, assess, parse_results};
pub use spec::{HOOK_UID_LABEL, INPUT_DIR, RESULT_PATH, input_variable, job_name};

use super::context::{Platform, RunContext};
use super::{DryRun, RunError, RunOutput, RunRequest, Runner};
use futures::StreamExt as _;
use futures::future::BoxFuture;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, LogParams, Patch, PatchParams, PostParams, PropagationPolicy,
};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use operon_data::api::{JobProcessor, JobResultSource};
use std::collections::BTreeMap;
use std::time::Duration;

/// At most this many bytes of a container's log are read for its result.
pub const MAX_LOG_RESULT: usize = 1 << 20;

/// Why a Job step could not run; every variant becomes the node's error.
#[derive(Debug, thiserror::Error)]
pub enum JobRunError {
    /// The input does not fit in a ConfigMap.
    #[error("the step's input is {bytes} bytes, more than a ConfigMap holds (1 MiB)")]
    InputTooLarge {
        /// Its size.
        bytes: usize,
    },
    /// `onDiagnosisNode` with no node to pin to.
    #[error("job.onDiagnosisNode is set but the Diagnosis names no node")]
    NoDiagnosisNode,
    /// The objects do not serialise (a bug, or a value Kubernetes' types refuse).
    #[error("cannot build the Job: {0}")]
    Build(#[from] serde_json::Error),
    /// The process has no Kubernetes client.
    #[error(
        "the job processor needs the Kubernetes API and this process has none (`operon run` has no cluster: use --dry-run to see the Job it would create)"
    )]
    NoCluster,
    /// A request failed.
    #[error("{what}: {source}")]
    Api {
        /// What was asked.
        what: String,
        /// What the API server (or the connection) said.
        #[source]
        source: kube::Error,
    },
    /// A Job of that name exists and is not this run's.
    #[error(
        "Job {job} exists and belongs to another run ({other}); delete it or rename the Diagnosis"
    )]
    Foreign {
        /// `namespace/name`.
        job: String,
        /// The other run's name.
        other: String,
    },
    /// The Job did not finish in time.
    #[error("{0}")]
    Timeout(String),
    /// The run failed, or its result cannot be read.
    #[error("{0}")]
    Result(String),
}

impl From<JobRunError> for RunError {
    fn from(e: JobRunError) -> Self {
        RunError::from_source(e)
    }
}

fn api_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> JobRunError {
    let what = what.into();
    move |source| JobRunError::Api { what, source }
}

/// Makes the Job `job` the only owner of its input ConfigMap `name`, which was created
/// owned by the run's owner (the pod needs it before the Job exists). The engine
/// deletes the input once the run ends; when the engine stops or dies first, the Job's
/// TTL now removes the input with the Job, where the run's owner (a Hook, a Diagnosis)
/// would have kept it as long as it lives. A failure is logged: the input then stays
/// owned as before.
async fn hand_input_to_job(maps: &Api<ConfigMap>, name: &str, job: &Job) {
    let Some(uid) = job.metadata.uid.as_deref() else {
        return;
    };
    let patch = serde_json::json!({"metadata": {"ownerReferences": [{
        "apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid,
        "blockOwnerDeletion": false, "controller": false,
    }]}});
    let params = PatchParams {
        field_manager: Some(operon_cluster::kube::FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    if let Err(e) = maps.patch(name, &params, &Patch::Merge(&patch)).await {
        tracing::warn!(config_map = name, error = %e,
            "cannot hand the input ConfigMap to its Job; it stays owned by the run's owner");
    }
}

/// Deletes the input ConfigMaps in `namespace` labelled `selector` that `owner_uid`
/// still owns: their run was cut off between creating its input and handing it to its
/// Job (which a run does once the Job exists), by an engine that stopped or died, and
/// nothing else would delete them before their owner goes. Call it before the owner's first run of
/// a new engine. Returns how many were deleted.
pub async fn remove_interrupted_inputs(
    client: kube::Client,
    namespace: &str,
    selector: &str,
    owner_uid: &str,
) -> Result<usize, kube::Error> {
    let maps: Api<ConfigMap> = Api::namespaced(client, namespace);
    let listed = maps.list(&ListParams::default().labels(selector)).await?;
    let mut removed = 0;
    for map in listed {
        let owned = (map.metadata.owner_references.iter().flatten()).any(|o| o.uid == owner_uid);
        let Some(name) = map.metadata.name.as_deref().filter(|_| owned) else {
            continue;
        };
        match maps.delete(name, &DeleteParams::default()).await {
            Ok(_) => removed += 1,
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn post_params(dry_run: bool) -> PostParams {
    PostParams {
        dry_run,
        field_manager: Some(operon_cluster::kube::FIELD_MANAGER.to_owned()),
    }
}

/// Runs one Operation's steps as Jobs.
#[derive(Clone)]
pub struct JobRunner {
    client: Option<kube::Client>,
    operation: String,
    processor: JobProcessor,
    platform: Platform,
    /// How long after the Job's deadline the runner still waits for the Job
    /// controller to report it, before deleting the Job itself.
    grace: Duration,
    /// Files besides the input and the context in the input ConfigMap (an offloaded
    /// wasm step's module API CA).
    files: BTreeMap<String, String>,
    /// The ConfigMap key holding the earlier steps' results alone, when the container
    /// needs them apart from the input.
    results_file: Option<String>,
    /// What the container runs, for the dry run's report (the image when unset).
    description: Option<String>,
}

impl std::fmt::Debug for JobRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobRunner")
            .field("operation", &self.operation)
            .field("image", &self.processor.image)
            .field("cluster", &self.client.is_some())
            .finish_non_exhaustive()
    }
}

impl JobRunner {
    /// A runner for `operation`'s `processor`; without a client it can only dry-run.
    pub fn new(
        client: Option<kube::Client>,
        operation: impl Into<String>,
        processor: JobProcessor,
        platform: Platform,
    ) -> Self {
        Self {
            client,
            operation: operation.into(),
            processor,
            platform,
            grace: Duration::from_secs(30),
            files: BTreeMap::new(),
            results_file: None,
            description: None,
        }
    }

    /// Says what the container runs in the dry run's report, instead of its image.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Adds a file to the input ConfigMap (mounted with the input at `INPUT_DIR`).
    pub fn with_file(mut self, name: impl Into<String>, content: impl Into<String>) -> Self {
        self.files.insert(name.into(), content.into());
        self
    }

    /// Adds the earlier steps' results alone, as JSON, to the input ConfigMap as
    /// `name`.
    pub(crate) fn with_results_file(mut self, name: impl Into<String>) -> Self {
        self.results_file = Some(name.into());
        self
    }

    /// The extra files of the input ConfigMap of `request`, with the run's own
    /// `extra` files.
    fn files(
        &self,
        request: &RunRequest,
        extra: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, JobRunError> {
        let mut files = self.files.clone();
        files.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        if let Some(name) = &self.results_file {
            files.insert(
                name.clone(),
                serde_json::to_string_pretty(&request.results)?,
            );
        }
        Ok(files)
    }

    fn namespace(&self, request: &RunRequest) -> String {
        crate::context::namespace(request, self.client.as_ref())
    }

    /// The input ConfigMap and the Job of `request`.
    fn objects(
        &self,
        request: &RunRequest,
        extra: &BTreeMap<String, String>,
    ) -> Result<(String, ConfigMap, Job), JobRunError> {
        let namespace = self.namespace(request);
        let name = job_name(request);
        let context = RunContext::new(request, &self.platform);
        let files = self.files(request, extra)?;
        let input = spec::input_config_map(&name, &namespace, request, &context, &files)?;
        let job = spec::job(
            &name,
            &namespace,
            &self.operation,
            &self.processor,
            request,
            &context,
        )?;
        Ok((name, input, job))
    }

    async fn run_job(&self, request: &RunRequest) -> Result<RunOutput, JobRunError> {
        let (job_ref, pod, text, bound) = self.run_for_text(request, &BTreeMap::new()).await?;
        let results = parse_results(&text, bound).map_err(|reason| {
            JobRunError::Result(format!("Job {job_ref} (pod {pod}): {reason}"))
        })?;
        Ok(RunOutput {
            results,
            output: text,
        })
    }

    /// Runs `request` as a Job whose input ConfigMap also holds `files`, and returns
    /// what its container left: the Job (`namespace/name`), the pod, the text (its
    /// termination message, or the last line of its log) and the bound that text was
    /// read under. The caller parses the text: a step's results, a hook's report.
    pub async fn run_for_text(
        &self,
        request: &RunRequest,
        files: &BTreeMap<String, String>,
    ) -> Result<(String, String, String, usize), JobRunError> {
        let client = self.client.clone().ok_or(JobRunError::NoCluster)?;
        let namespace = self.namespace(request);
        let (name, input, job) = self.objects(request, files)?;
        let jobs: Api<Job> = Api::namespaced(client.clone(), &namespace);
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
        let pods: Api<Pod> = Api::namespaced(client, &namespace);
        let job_ref = format!("{namespace}/{name}");

        let existing = jobs
            .get_opt(&name)
            .await
            .map_err(api_error(format!("reading Job {job_ref}")))?;
        match existing {
            Some(existing) => {
                self.check_owner(&existing, &job_ref, request)?;
                tracing::info!(job = %job_ref, run = %request.name, "re-attaching to the run's Job");
            }
            None => {
                // The input first: the pod refers to it, and creating it after the
                // Job would make the kubelet report a missing ConfigMap meanwhile.
                if let Err(e) = maps.create(&post_params(false), &input).await
                    && !is_conflict(&e)
                {
                    return Err(api_error(format!("creating ConfigMap {job_ref}"))(e));
                }
                match jobs.create(&post_params(false), &job).await {
                    Ok(created) => {
                        tracing::info!(job = %job_ref, run = %request.name, "Job created");
                        hand_input_to_job(&maps, &name, &created).await;
                    }
                    // Another instance created it in between: it is this run's.
                    Err(e) if is_conflict(&e) => {}
                    Err(e) => return Err(api_error(format!("creating Job {job_ref}"))(e)),
                }
            }
        }

        let budget = request.timeout + self.grace;
        let watched = tokio::time::timeout(budget, watch(&jobs, &pods, &name)).await;
        let (assessment, finished) = match watched {
            Ok(result) => result?,
            Err(_) => {
                self.delete(&jobs, &maps, &name, true).await;
                return Err(JobRunError::Timeout(format!(
                    "Job {job_ref} did not finish within {} (timeoutSeconds plus {} for the Job controller); it was deleted",
                    humantime::format_duration(request.timeout),
                    humantime::format_duration(self.grace)
                )));
            }
        };
        // A Job that cannot start (an image that cannot be pulled) would otherwise
        // hold its pod until the deadline; any other Job stays for its TTL, for
        // `kubectl logs`.
        let stuck = matches!(assessment, Assessment::Failed(_)) && !finished;
        let outcome = match assessment {
            Assessment::Succeeded { pod, message } => self
                .result_text(&pods, &job_ref, &pod, message)
                .await
                .map(|(text, bound)| (job_ref.clone(), pod, text, bound)),
            Assessment::Failed(reason) => Err(JobRunError::Result(reason)),
            Assessment::Running => unreachable!("watch returns only a decided assessment"),
        };
        self.delete(&jobs, &maps, &name, stuck).await;
        outcome
    }

    /// The text the container of `pod` left for its caller, with the bound it was
    /// read under: its termination `message`, or the last line of its log.
    async fn result_text(
        &self,
        pods: &Api<Pod>,
        job_ref: &str,
        pod: &str,
        message: String,
    ) -> Result<(String, usize), JobRunError> {
        match self.processor.result_from {
            Some(JobResultSource::Logs) => {
                let text = last_log_line(pods, pod).await.map_err(api_error(format!(
                    "reading the log of pod {pod} of Job {job_ref}"
                )))?;
                Ok((text, MAX_LOG_RESULT))
            }
            Some(JobResultSource::TerminationMessage) | None => {
                Ok((message, MAX_TERMINATION_MESSAGE))
            }
        }
    }

    /// The last line of the log of the run's `pod` in `namespace`, whole (see
    /// `last_log_line`), for a caller whose container left its result there.
    pub async fn log_line(&self, namespace: &str, pod: &str) -> Result<String, JobRunError> {
        let client = self.client.clone().ok_or(JobRunError::NoCluster)?;
        let pods: Api<Pod> = Api::namespaced(client, namespace);
        last_log_line(&pods, pod).await.map_err(api_error(format!(
            "reading the log of pod {namespace}/{pod}"
        )))
    }

    fn check_owner(
        &self,
        existing: &Job,
        job_ref: &str,
        request: &RunRequest,
    ) -> Result<(), JobRunError> {
        let theirs = existing
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(spec::RUN_NAME_ANNOTATION))
            .cloned()
            .unwrap_or_default();
        if theirs == request.name {
            Ok(())
        } else {
            Err(JobRunError::Foreign {
                job: job_ref.to_owned(),
                other: if theirs.is_empty() {
                    "not created by Operon".to_owned()
                } else {
                    theirs
                },
            })
        }
    }

    /// Deletes the run's input ConfigMap (not needed once the pod ran) and, when
    /// `job` is set, the Job with its pods. Failures are logged: TTL and the owner
    /// reference remove both eventually.
    async fn delete(&self, jobs: &Api<Job>, maps: &Api<ConfigMap>, name: &str, job: bool) {
        if job {
            let params = DeleteParams {
                propagation_policy: Some(PropagationPolicy::Background),
                ..DeleteParams::default()
            };
            if let Err(e) = jobs.delete(name, &params).await
                && !matches!(&e, kube::Error::Api(s) if s.code == 404)
            {
                tracing::warn!(job = name, error = %e, "cannot delete the Job");
            }
        }
        if let Err(e) = maps.delete(name, &DeleteParams::default()).await
            && !matches!(&e, kube::Error::Api(s) if s.code == 404)
        {
            tracing::warn!(config_map = name, error = %e, "cannot delete the input ConfigMap");
        }
    }

    async fn dry_run_job(&self, request: &RunRequest) -> Result<DryRun, JobRunError> {
        // The object a real run would create: the same, but not told to dry-run.
        let real = RunRequest {
            dry_run: false,
            ..request.clone()
        };
        let namespace = self.namespace(request);
        let (name, input, job) = self.objects(&real, &BTreeMap::new())?;
        let job_ref = format!("{namespace}/{name}");
        let mut checked = "rendered locally: no cluster to check it against";
        if let Some(client) = &self.client {
            // The API server validates and admits both without storing them, as
            // `kubectl create --dry-run=server` does.
            let jobs: Api<Job> = Api::namespaced(client.clone(), &namespace);
            let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
            match maps.create(&post_params(true), &input).await {
                Ok(_) => {}
                Err(e) if is_conflict(&e) => {}
                Err(e) => return Err(api_error(format!("ConfigMap {job_ref} (dry run)"))(e)),
            }
            checked = match jobs.create(&post_params(true), &job).await {
                Ok(_) => "accepted by the API server in a server-side dry run",
                Err(e) if is_conflict(&e) => "the Job exists already: a run would wait for it",
                Err(e) => return Err(api_error(format!("Job {job_ref} (dry run)"))(e)),
            };
        }
        let keys: Vec<&String> = request.input.keys().collect();
        let mut files = vec!["input.json".to_owned(), "context.json".to_owned()];
        files.extend(self.files(request, &BTreeMap::new())?.into_keys());
        let detail = serde_json::json!({
            "job": job,
            // Input values are the Diagnosis' own; the report names their keys.
            "configMap": {"name": name, "namespace": namespace, "keys": files,
                       "inputKeys": keys},
        });
        Ok(DryRun {
            action: format!(
                "would create Job {job_ref} running {} (deadline {}s) with its input in ConfigMap {job_ref} ({} keys); {checked}",
                self.description.as_deref().unwrap_or(&self.processor.image),
                request.timeout.as_secs().max(1),
                keys.len()
            ),
            detail: Some(detail),
            output: RunOutput::default(),
        })
    }
}

/// The last line of the log of `pod`'s step container, whole. The container runtime
/// splits a line longer than 16 KiB into parts that the kubelet joins again when it
/// serves the whole log, but a request for the last line gets only the last part: so
/// when that line is not a whole JSON value, the log is read from its start (up to
/// [`MAX_LOG_RESULT`] bytes) and its last line taken.
async fn last_log_line(pods: &Api<Pod>, pod: &str) -> Result<String, kube::Error> {
    let params = LogParams {
        container: Some(spec::CONTAINER.to_owned()),
        limit_bytes: Some(MAX_LOG_RESULT as i64),
        tail_lines: Some(1),
        ..LogParams::default()
    };
    let tail = pods.logs(pod, &params).await?;
    if tail.trim().is_empty() || serde_json::from_str::<serde::de::IgnoredAny>(tail.trim()).is_ok()
    {
        return Ok(tail);
    }
    let whole = pods
        .logs(
            pod,
            &LogParams {
                tail_lines: None,
                ..params
            },
        )
        .await?;
    Ok(last_line(&whole).to_owned())
}

/// The last non-empty line of `log`.
fn last_line(log: &str) -> &str {
    log.lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("")
}

/// What one watcher has seen: the objects as of its last event, and whether its
/// initial list is complete.
struct Seen<K> {
    objects: BTreeMap<String, K>,
    listing: BTreeMap<String, K>,
    listed: bool,
}

impl<K: kube::Resource> Seen<K> {
    fn new() -> Self {
        Self {
            objects: BTreeMap::new(),
            listing: BTreeMap::new(),
            listed: false,
        }
    }

    fn apply(&mut self, event: Event<K>) {
        let key = |k: &K| k.meta().name.clone().unwrap_or_default();
        match event {
            Event::Init => self.listing.clear(),
            Event::InitApply(k) => {
                self.listing.insert(key(&k), k);
            }
            Event::InitDone => {
                self.objects = std::mem::take(&mut self.listing);
                self.listed = true;
            }
            Event::Apply(k) => {
                self.objects.insert(key(&k), k);
            }
            Event::Delete(k) => {
                self.objects.remove(&key(&k));
            }
        }
    }
}

fn complete(job: &Job) -> bool {
    outcome::condition(job, "Complete").is_some()
}

fn finished(job: &Job) -> bool {
    complete(job) || outcome::condition(job, "Failed").is_some()
}

/// Watches the Job `name` and its pods until the run is decided. Returns the
/// assessment and whether the Job itself has finished.
async fn watch(
    jobs: &Api<Job>,
    pods: &Api<Pod>,
    name: &str,
) -> Result<(Assessment, bool), JobRunError> {
    // Boxed: a Pod event is far larger than a Job event.
    enum Change {
        Job(Box<Result<Event<Job>, watcher::Error>>),
        Pod(Box<Result<Event<Pod>, watcher::Error>>),
    }
    let job_events = watcher::watcher(
        jobs.clone(),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .default_backoff()
    .map(|event| Change::Job(Box::new(event)))
    .boxed();
    let pod_events = watcher::watcher(
        pods.clone(),
        watcher::Config::default().labels(&format!("{}={name}", spec::RUN_LABEL)),
    )
    .default_backoff()
    .map(|event| Change::Pod(Box::new(event)))
    .boxed();
    let mut events = futures::stream::select(job_events, pod_events);
    let (mut job_seen, mut pods_seen) = (Seen::<Job>::new(), Seen::<Pod>::new());
    while let Some(change) = events.next().await {
        let failed = match change {
            Change::Job(event) => (*event).map(|e| job_seen.apply(e)).err(),
            Change::Pod(event) => (*event).map(|e| pods_seen.apply(e)).err(),
        };
        if let Some(e) = failed {
            tracing::warn!(job = name, error = %e, "watching the Job's progress failed; retrying");
            continue;
        }
        if job_seen.listed && pods_seen.listed {
            let job = job_seen.objects.get(name);
            let mut assessment = assess(name, job, &pods_seen.objects);
            // The two watches are independent streams: the Job's completion can arrive
            // before its pod's last change, which would read as a pod gone. The pods
            // as the API server has them now decide.
            if let (Assessment::Failed(_), Some(job)) = (&assessment, job)
                && complete(job)
            {
                let selector = format!("{}={name}", spec::RUN_LABEL);
                match pods.list(&ListParams::default().labels(&selector)).await {
                    Ok(list) => {
                        let now: BTreeMap<String, Pod> = list
                            .items
                            .into_iter()
                            .map(|p| (p.metadata.name.clone().unwrap_or_default(), p))
                            .collect();
                        assessment = assess(name, Some(job), &now);
                    }
                    Err(e) => {
                        tracing::warn!(job = name, error = %e, "cannot list the Job's pods");
                    }
                }
            }
            if assessment != Assessment::Running {
                return Ok((assessment, job.is_none_or(finished)));
            }
        }
    }
    Ok((
        Assessment::Failed(format!("the watch of Job {name} ended")),
        false,
    ))
}

impl Runner for JobRunner {
    fn run<'a>(&'a self, request: &'a RunRequest) -> BoxFuture<'a, Result<RunOutput, RunError>> {
        Box::pin(async move { Ok(self.run_job(request).await?) })
    }

    fn dry_run<'a>(&'a self, request: &'a RunRequest) -> BoxFuture<'a, Result<DryRun, RunError>> {
        Box::pin(async move { Ok(self.dry_run_job(request).await?) })
    }
}
