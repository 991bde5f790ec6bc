//! `operon test`: test files for hooks, Hook objects, addon-operator modules and
//! pipelines, run against the in-memory cluster, each step checked against what it
//! expects.
//!
//! A test ([`file::Test`]) names its subject, the objects the cluster starts with and
//! its steps. Each step is one action (the first runs, a watch event, a schedule tick,
//! an admission or conversion review, config values for modules, a Diagnosis) and what
//! must hold after it ([`file::Expect`]), compared as kuttl and Chainsaw compare
//! objects ([`matcher`]). [`run_test`] runs one test and reports every step
//! ([`report`]); nothing here prints.
//!
//! This crate sits above `operon-controller`: a Hook object is prepared, and a review
//! answered, exactly as `operon serve` prepares and answers them.

pub mod file;
pub mod hooks;
pub mod matcher;
pub mod record;
pub mod report;

mod check;
mod modules;
mod pipelines;

use check::Observed;
use file::{Action, Objects, Subject, Test};
use operon_addons::AddonError;
use operon_cluster::ClusterError;
use operon_cluster::local::{LocalApi, LocalApiError, LocalCluster};
use operon_hooks::engine::{Engine, HookEngineError};
use operon_hooks::load::{HookLoadError, HookLoader};
use operon_hooks::metrics::{MetricError, Metrics};
use operon_hooks::runner::{AccessScope, ClusterAccess, ClusterAccessError};
use operon_pipeline::PipelineError;
use operon_sandbox::{CallLimits, Sandbox};
use operon_script::SandboxError;
use operon_store::{ModuleError, ModuleLocator};
use report::{StepReport, TestReport};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Why a test could not run (as opposed to a step that did not hold).
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// A module reference leads to no file.
    #[error("{subject}: {source}")]
    Module {
        /// What names the module.
        subject: String,
        /// Why it was not found.
        #[source]
        source: Box<ModuleError>,
    },
    /// A Hook object does not load, as its `Loaded` condition would say.
    #[error("{name} does not load ({reason}): {message}")]
    HookObject {
        /// `Hook namespace/name`.
        name: String,
        /// The condition's reason.
        reason: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A hook does not load.
    #[error(transparent)]
    Load(Box<HookLoadError>),
    /// A hook's configuration is invalid.
    #[error("hook {hook} has an invalid configuration: {}", problems.join("; "))]
    InvalidHook {
        /// The hook.
        hook: String,
        /// Every problem.
        problems: Vec<String>,
    },
    /// The engine could not start (a binding's kind is unknown).
    #[error(transparent)]
    Engine(Box<HookEngineError>),
    /// A file the test names cannot be used.
    #[error("{}: {message}", path.display())]
    Subject {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// Objects do not load into the cluster.
    #[error("{origin}: {}", problems.join("; "))]
    Objects {
        /// Where they come from.
        origin: String,
        /// Every problem.
        problems: Vec<String>,
    },
    /// An event's object is refused by the cluster.
    #[error("event: {source}")]
    Event {
        /// Why.
        #[source]
        source: Box<ClusterError>,
    },
    /// A step names a binding the hook does not have.
    #[error("the hook has no {kind} binding {binding:?}")]
    NoBinding {
        /// Which kinds of binding were looked in.
        kind: &'static str,
        /// The name.
        binding: String,
    },
    /// The local API kubectl in script hooks talks to cannot start.
    #[error("the local API server: {0}")]
    LocalApi(#[from] LocalApiError),
    /// Script hooks cannot be given the local API.
    #[error(transparent)]
    Access(#[from] ClusterAccessError),
    /// The hook engine's metrics cannot be registered.
    #[error("metrics: {0}")]
    Metrics(#[source] MetricError),
    /// A replayed run cannot be made.
    #[error("replay: {0}")]
    Replay(String),
    /// A pipeline cannot be planned or run (why, in words).
    #[error("pipeline: {0}")]
    Pipeline(String),
    /// A pipeline's run did not reach an end.
    #[error("pipeline: {0}")]
    PipelineRun(#[source] PipelineError<std::convert::Infallible>),
    /// The modules directory or the operator cannot be used (why, in words).
    #[error("modules: {0}")]
    Modules(String),
    /// The modules' operator cannot start or answer.
    #[error("modules: {0}")]
    Operator(#[source] AddonError),
    /// The script sandbox module hooks run in cannot start.
    #[error("modules: {0}")]
    ModulesSandbox(#[source] SandboxError),
    /// A document for the modules' operator cannot be written as YAML.
    #[error("modules: {what}: {source}")]
    ModulesYaml {
        /// The document, e.g. `config.echo`.
        what: String,
        /// Why.
        #[source]
        source: yaml_serde::Error,
    },
}

// Boxed: the errors of the crates below are large, and a test's error is rare.
impl From<HookLoadError> for ScenarioError {
    fn from(error: HookLoadError) -> Self {
        Self::Load(Box::new(error))
    }
}

impl From<HookEngineError> for ScenarioError {
    fn from(error: HookEngineError) -> Self {
        Self::Engine(Box::new(error))
    }
}

impl ScenarioError {
    /// A cluster's refusal of an event's object.
    pub(crate) fn event(source: ClusterError) -> Self {
        Self::Event {
            source: Box::new(source),
        }
    }
}

/// What every test of a run shares.
pub struct Options {
    /// The wasm sandbox every test's hooks load into (modules are compiled once).
    pub sandbox: Sandbox,
    /// Where wasm modules are found by name or digest when a test does not say.
    pub modules: Option<PathBuf>,
    /// Where compiled modules are cached, for pipelines.
    pub cache_dir: Option<PathBuf>,
    /// Refuse to run scripts when a sandbox protection is unavailable.
    pub strict: bool,
    /// The `helm` program modules render with.
    pub helm: PathBuf,
}

/// Runs one test read from `path`; the report says how each step went.
pub async fn run_test(test: &Test, path: &Path, options: &Options) -> TestReport {
    let mut report = TestReport {
        file: path.to_owned(),
        name: test.name.clone(),
        error: None,
        steps: Vec::new(),
    };
    if let Err(error) = run_steps(test, path, options, &mut report.steps).await {
        report.error = Some(error.to_string());
    }
    report
}

async fn run_steps(
    test: &Test,
    path: &Path,
    options: &Options,
    steps: &mut Vec<StepReport>,
) -> Result<(), ScenarioError> {
    // Absolute: scripts get paths of the test (a node root) with another working
    // directory.
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    let base = std::path::absolute(parent.unwrap_or(Path::new("."))).map_err(|e| {
        ScenarioError::Subject {
            path: path.to_owned(),
            message: e.to_string(),
        }
    })?;
    let modules = match &test.modules {
        Some(dir) => Some(base.join(dir)),
        None => options.modules.clone(),
    };
    let locator = ModuleLocator::new(modules);
    let cluster = Arc::new(LocalCluster::new());
    if let Subject::Modules(_) = &test.subject {
        modules::register_kinds(&cluster)?;
    }
    load_objects(&cluster, &test.objects, &base)?;
    match &test.subject {
        Subject::Hook(hook) | Subject::HookObject(hook) => {
            // Script hooks that call kubectl reach this test's objects through a local
            // API server, served until the test ends.
            let api = LocalApi::start(cluster.clone()).await?;
            let access = ClusterAccess::local(AccessScope::All, api.dir())?;
            let loader = HookLoader::new(
                options.sandbox.clone(),
                CallLimits::default(),
                options.strict,
            )
            .with_cluster_access(access);
            let hook = hooks::load_hook(hook, &base, &locator, &loader, &cluster).await?;
            let metrics = Metrics::new().map_err(ScenarioError::Metrics)?;
            let engine = Engine::new(vec![hook.loaded], hook.cluster, Arc::new(metrics));
            let began = Instant::now();
            engine.start().await?;
            let mut first = Vec::new();
            engine.drain(|r| first.push(r.clone())).await;
            let first = Observed {
                runs: first.iter().map(hooks::run_json).collect(),
                ..Observed::default()
            };
            let actor = Actor::Hook(&engine);
            let started = (first, began.elapsed());
            run_after_start(test, actor, started, &cluster, &base, steps).await?;
        }
        Subject::Modules(subject) => {
            let mut modules = modules::Modules::new(
                subject,
                &base,
                cluster.clone(),
                options.helm.clone(),
                options.strict,
            )
            .await?;
            let began = Instant::now();
            let first = modules.drain().await?;
            let started = (first, began.elapsed());
            let actor = Actor::Modules(&mut modules);
            run_after_start(test, actor, started, &cluster, &base, steps).await?;
        }
        Subject::Pipeline(subject) => {
            let pipeline = pipelines::Pipeline::load(subject, &base, locator, options)?;
            for (index, step) in test.steps.iter().enumerate() {
                let started = Instant::now();
                let observed = match step.action().expect("checked when read") {
                    Action::Diagnosis(diagnosis) => pipeline.diagnose(diagnosis, index).await?,
                    _ => Observed::default(),
                };
                finish(steps, step, index, observed, &cluster, started.elapsed());
            }
        }
    }
    Ok(())
}

/// What runs the actions of a test whose subject has first runs.
enum Actor<'a> {
    /// A hook's engine.
    Hook(&'a Engine),
    /// addon-operator's queue.
    Modules(&'a mut modules::Modules),
}

impl Actor<'_> {
    async fn act(
        &mut self,
        action: Action<'_>,
        cluster: &LocalCluster,
        base: &Path,
    ) -> Result<Observed, ScenarioError> {
        match self {
            Actor::Hook(engine) => Ok(hooks::act(action, engine, cluster, base).await?.0),
            Actor::Modules(modules) => match action {
                Action::Config(config) => modules.configure(config, cluster).await,
                Action::Event(event) => {
                    let kind = hooks::watch_event(event.kind);
                    for object in objects(&event.objects, base)? {
                        cluster
                            .apply_watch_event(kind, object.clone())
                            .map_err(ScenarioError::event)?;
                        modules.object_changed(kind, &object);
                    }
                    modules.drain().await
                }
                _ => Ok(Observed::default()),
            },
        }
    }
}

/// The steps of a test after its first runs (`first`, with how long they took): a
/// `start` step checks them; otherwise their failures are reported before the first
/// step's own outcome.
async fn run_after_start(
    test: &Test,
    mut actor: Actor<'_>,
    first: (Observed, std::time::Duration),
    cluster: &LocalCluster,
    base: &Path,
    steps: &mut Vec<StepReport>,
) -> Result<(), ScenarioError> {
    let mut first = Some(first);
    for (index, step) in test.steps.iter().enumerate() {
        let started = Instant::now();
        let action = step.action().expect("checked when read");
        let (observed, elapsed) = match (action, first.take()) {
            (Action::Start, Some(first)) => first,
            (action, first) => {
                if let Some((first, _)) = first {
                    push_start(steps, &first);
                }
                let observed = actor.act(action, cluster, base).await?;
                (observed, started.elapsed())
            }
        };
        finish(steps, step, index, observed, cluster, elapsed);
    }
    Ok(())
}

/// The first runs, reported as a step of their own only when one of them failed (a
/// test without a `start` step does not check them otherwise).
fn push_start(steps: &mut Vec<StepReport>, first: &Observed) {
    let failures = check::check(&file::Expect::default(), first);
    if !failures.is_empty() {
        steps.push(StepReport {
            name: "start".to_owned(),
            elapsed: std::time::Duration::ZERO,
            failures,
            runs: first.runs.clone(),
            observed: first.answers(),
        });
    }
}

fn finish(
    steps: &mut Vec<StepReport>,
    step: &file::Step,
    index: usize,
    mut observed: Observed,
    cluster: &LocalCluster,
    elapsed: std::time::Duration,
) {
    observed.objects = cluster.objects();
    let failures = check::check(&step.expect, &observed);
    steps.push(StepReport {
        name: format!("{}. {}", index + 1, step.title()),
        elapsed,
        failures,
        observed: observed.answers(),
        runs: observed.runs,
    });
}

/// Loads a test's starting objects.
fn load_objects(
    cluster: &LocalCluster,
    sources: &[Objects],
    base: &Path,
) -> Result<(), ScenarioError> {
    for (index, source) in sources.iter().enumerate() {
        let (text, origin) = match source {
            Objects::File { file } => {
                let path = base.join(file);
                let text = std::fs::read_to_string(&path).map_err(|e| ScenarioError::Subject {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
                (text, path.display().to_string())
            }
            Objects::Object { object } | Objects::Bare(object) => {
                (object.to_string(), format!("objects[{index}]"))
            }
        };
        cluster
            .load_yaml(&text, &origin)
            .map_err(|problems| ScenarioError::Objects {
                origin: origin.clone(),
                problems: problems.iter().map(ToString::to_string).collect(),
            })?;
    }
    Ok(())
}

/// The objects of an event: each file's documents, and inline objects.
pub(crate) fn objects(sources: &[Objects], base: &Path) -> Result<Vec<Value>, ScenarioError> {
    let mut objects = Vec::new();
    for source in sources {
        match source {
            Objects::Object { object } | Objects::Bare(object) => objects.push(object.clone()),
            Objects::File { file } => {
                let path = base.join(file);
                let invalid = |message: String| ScenarioError::Subject {
                    path: path.clone(),
                    message,
                };
                let text = std::fs::read_to_string(&path).map_err(|e| invalid(e.to_string()))?;
                // As addon-operator's files are read: several documents, `kind: List`.
                let origin = path.display().to_string();
                objects.extend(operon_addons::render::documents(&text, &origin).map_err(invalid)?);
            }
        }
    }
    Ok(objects)
}
