//! The Diagnosis controller: runs every Diagnosis through the pipeline
//! ([`operon_pipeline::execute`]) and keeps its status, in two roles.
//!
//! - [`Role::Controller`] (the leader of `operon serve`) places each Diagnosis: one
//!   naming a node or a pod is recorded as that node's (`status.nodeName`) and left to
//!   the node's agent, with a `Scheduled` condition saying whether an agent holds the
//!   node's Lease, or that the node is down (`node_down`, woken by a watch on Nodes);
//!   one naming neither, or with `spec.runOn: Controller`, runs in the controller; one
//!   with `spec.targetSelector` becomes one child Diagnosis per node (`targets`).
//! - [`Role::Agent`] (`operon agent --node-name`) runs the Diagnoses placed on its node,
//!   so that collection and repair steps run where the problem is.
//!
//! There is no channel between the two but the API server: both authenticate to it
//! with their ServiceAccounts, RBAC decides what each may do, and a restart of either
//! side resumes from the stored status. Each reconcile reads the Diagnosis afresh (a
//! cached copy may predate the last write), and every status write carries the
//! `resourceVersion` it read (`status::StatusWriter`): a node that finished is never
//! run again; a node cut off mid-run (the process killed) runs again, as it never
//! reported. The `Scheduled` condition is the controller's alone: the agent's writes
//! keep the one the API server holds.
//!
//! A Diagnosis whose OperationSet or Operations are missing or invalid waits (phase
//! `Pending`, an `Accepted` condition saying why; objects applied together arrive in
//! any order) and fails after [`Settings::wait_limit`]. One whose OperationSet changed
//! since it started fails: it cannot be resumed over another graph.

pub(crate) mod events;
pub(crate) mod metrics;
mod node_down;
pub(crate) mod placement;
pub mod status;
pub(crate) mod targets;

#[cfg(test)]
mod node_down_tests;
#[cfg(test)]
mod signed_tests;
#[cfg(test)]
mod tests;

use events::Events;
use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{EventType, Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use node_down::node_down;
use operon_data::api::{
    Condition, ConditionStatus, Diagnosis, DiagnosisPhase, DiagnosisStatus, Operation, OperationSet,
};
use operon_data::conventions::conditions::set_condition;
use operon_pipeline::{PipelineError, PlanError};
use operon_runner::processors::Processors;
use operon_store::oci_modules::{PinError, pin_operations, secret_auth};
use status::{Limits, StatusError, StatusWriter};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The condition saying where a Diagnosis runs.
pub(crate) const SCHEDULED: &str = "Scheduled";
/// The condition saying whether its OperationSet and Operations can run.
pub(crate) const ACCEPTED: &str = "Accepted";

/// How long before a reconcile that hit an API error is tried again.
const RETRY: Duration = Duration::from_secs(5);
/// How often a waiting Diagnosis looks again.
const WAIT_POLL: Duration = Duration::from_secs(10);
/// How often the controller looks whether a node's agent is still there.
const AGENT_POLL: Duration = Duration::from_secs(30);

/// Which Diagnoses this controller runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Places every Diagnosis and runs those that name no node.
    Controller,
    /// Runs the Diagnoses placed on this node.
    Agent {
        /// The node.
        node: String,
    },
}

/// How the controller behaves.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Which Diagnoses it runs.
    pub(crate) role: Role,
    /// Where results stop fitting in the status.
    pub limits: Limits,
    /// The namespace of the agents' Leases.
    pub(crate) agent_namespace: String,
    /// How long a Diagnosis waits for its OperationSet, Operations, pod or agent
    /// before it fails.
    pub wait_limit: Duration,
    /// How long a Diagnosis placed on a node that is not Ready waits for it before it
    /// fails, unless its `spec.nodeNotReadyTimeoutSeconds` says otherwise.
    pub node_wait: Duration,
    /// How many Diagnoses run at once.
    pub concurrency: u16,
    /// The name Events are reported under (the pod's name, when known).
    pub(crate) instance: Option<String>,
}

impl Settings {
    /// The defaults for `role`, with agent Leases in `agent_namespace`.
    pub fn new(role: Role, agent_namespace: &str) -> Self {
        Self {
            role,
            limits: Limits::default(),
            agent_namespace: agent_namespace.to_owned(),
            wait_limit: Duration::from_secs(300),
            node_wait: Duration::from_secs(600),
            concurrency: 16,
            instance: std::env::var("POD_NAME").ok(),
        }
    }
}

/// Why a reconcile failed (it is retried; the Diagnosis resumes from its status).
#[derive(Debug, thiserror::Error)]
pub(crate) enum DiagnosisError {
    /// Reading what the Diagnosis needs failed.
    #[error("reading {what} for {diagnosis}: {source}")]
    Read {
        /// `Diagnosis/namespace/name`.
        diagnosis: String,
        /// What was read.
        what: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
    /// Persisting the status failed.
    #[error(transparent)]
    Status(#[from] StatusError),
    /// The pipeline stopped.
    #[error(transparent)]
    Pipeline(PipelineError<StatusError>),
    /// The script store could not be brought in step with the Operations.
    #[error("the script store: {0}")]
    Scripts(#[from] operon_script::StoreError),
    /// A child Diagnosis of one with `spec.targetSelector` could not be created.
    #[error("creating {child}, the child of {diagnosis} on one of its nodes: {source}")]
    CreateChild {
        /// `Diagnosis/namespace/name` of the parent.
        diagnosis: String,
        /// The child's name.
        child: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
}

/// What a reconcile needs.
pub struct Context {
    client: Client,
    processors: Arc<Processors>,
    settings: Settings,
    recorder: Recorder,
    status_writes: Arc<AtomicU64>,
}

impl Context {
    /// The context for `client`; runners are built by `processors`.
    pub fn new(client: Client, processors: Arc<Processors>, settings: Settings) -> Self {
        let controller = match settings.role {
            Role::Controller => "operon",
            Role::Agent { .. } => "operon-agent",
        };
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: controller.to_owned(),
                instance: settings.instance.clone(),
            },
        );
        Self {
            client,
            processors,
            settings,
            recorder,
            status_writes: Arc::new(AtomicU64::new(0)),
        }
    }

    /// What builds the runners.
    pub fn processors(&self) -> &Arc<Processors> {
        &self.processors
    }

    /// Status writes made so far (every Diagnosis).
    pub fn status_writes(&self) -> u64 {
        self.status_writes.load(Ordering::Relaxed)
    }

    fn read_error<'a>(
        &'a self,
        diagnosis: &'a Diagnosis,
        what: impl Into<String> + 'a,
    ) -> impl FnOnce(kube::Error) -> DiagnosisError + 'a {
        move |source| DiagnosisError::Read {
            diagnosis: diagnosis.object_ref(),
            what: what.into(),
            source,
        }
    }

    /// A status writer for `diagnosis` (as just read), counted in [`Self::status_writes`].
    fn writer(&self, diagnosis: &Diagnosis) -> StatusWriter {
        let writer = StatusWriter::new(self.client.clone(), diagnosis, self.settings.limits)
            .counting_into(self.status_writes.clone());
        match self.settings.role {
            Role::Controller => writer,
            Role::Agent { .. } => writer.keeping_placement(),
        }
    }
}

fn finished(diagnosis: &Diagnosis) -> bool {
    matches!(
        diagnosis.status.as_ref().and_then(|s| s.phase),
        Some(DiagnosisPhase::Succeeded | DiagnosisPhase::Failed)
    )
}

fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

/// Fails `diagnosis` for good with `reason`.
fn fail(status: &mut DiagnosisStatus, type_: &str, reason: &str, message: String) {
    set_condition(
        &mut status.conditions,
        Condition::new(type_, ConditionStatus::False, reason, message.clone()),
    );
    set_condition(
        &mut status.conditions,
        Condition::new(
            operon_pipeline::COMPLETE,
            ConditionStatus::True,
            reason,
            message,
        ),
    );
    status.phase = Some(DiagnosisPhase::Failed);
    status.current_node = None;
    status.completion_time = Some(Time(now()));
}

/// Brings one Diagnosis forward: places it, waits, or runs (resumes) it to its end.
pub(crate) async fn reconcile(
    cached: Arc<Diagnosis>,
    ctx: Arc<Context>,
) -> Result<Action, DiagnosisError> {
    // Every agent sees every Diagnosis: those placed elsewhere are skipped from the
    // cache, without a request (the placement is written once and never changes; the
    // write that makes it this node's wakes this reconcile again).
    if let Role::Agent { node } = &ctx.settings.role {
        let placed = cached.status.as_ref().and_then(|s| s.node_name.as_deref());
        if placed != Some(node.as_str()) {
            return Ok(Action::await_change());
        }
    }
    let namespace = cached.namespace().unwrap_or_default();
    let api: Api<Diagnosis> = Api::namespaced(ctx.client.clone(), &namespace);
    let fresh = api
        .get_opt(&cached.name_any())
        .await
        .map_err(ctx.read_error(&cached, "the Diagnosis"))?;
    let Some(mut diagnosis) = fresh else {
        return Ok(Action::await_change());
    };
    if finished(&diagnosis) {
        return Ok(Action::await_change());
    }
    if let Role::Agent { node } = &ctx.settings.role {
        let placed = diagnosis
            .status
            .as_ref()
            .and_then(|s| s.node_name.as_deref());
        if placed != Some(node.as_str()) {
            return Ok(Action::await_change());
        }
        return run(diagnosis, &ctx).await;
    }
    // A Diagnosis about several nodes runs nothing itself: its children do. It never
    // gets a `status.nodeName`, so no agent takes it.
    if let Some(selector) = diagnosis.spec.target_selector.clone() {
        return targets::reconcile(diagnosis, &selector, &ctx).await;
    }
    let mut writer = ctx.writer(&diagnosis);
    let status = diagnosis.status.get_or_insert_with(Default::default);
    if status.node_name.is_none() {
        let placed = placement::resolve(&ctx.client, &diagnosis)
            .await
            .map_err(ctx.read_error(&cached, "its node or pod"))?;
        match placed {
            Ok(None) => return run(diagnosis, &ctx).await,
            Ok(Some(node)) => {
                let status = diagnosis.status.get_or_insert_with(Default::default);
                status.node_name = Some(node);
            }
            Err(unplaced) => {
                return wait(
                    &ctx,
                    &mut diagnosis,
                    &mut writer,
                    SCHEDULED,
                    unplaced.reason(),
                    unplaced.message(),
                    if unplaced.may_resolve() {
                        Patience::Limited
                    } else {
                        Patience::Never
                    },
                )
                .await;
            }
        }
    }
    let status = diagnosis.status.get_or_insert_with(Default::default);
    let node = status.node_name.clone().unwrap_or_default();
    // An agent renewing its Lease runs the Diagnosis whatever its node's Ready condition
    // says (a kubelet that crashed leaves its Pods running); without one, a node that is
    // down is why.
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), &ctx.settings.agent_namespace);
    let alive = placement::agent_alive(&leases, &node, now())
        .await
        .map_err(ctx.read_error(&cached, "the agent's Lease"))?;
    if !alive {
        let nodes: Api<Node> = Api::all(ctx.client.clone());
        let health = placement::node_health(&nodes, &node)
            .await
            .map_err(ctx.read_error(&cached, format!("Node {node}")))?;
        if health.is_down() {
            return node_down(&ctx, &mut diagnosis, &mut writer, &node, &health).await;
        }
    }
    if alive {
        let status = diagnosis.status.get_or_insert_with(Default::default);
        set_condition(
            &mut status.conditions,
            Condition::new(
                SCHEDULED,
                ConditionStatus::True,
                "AgentRunning",
                format!("the agent of node {node} runs this Diagnosis"),
            ),
        );
        if status.phase.is_none() {
            status.phase = Some(DiagnosisPhase::Pending);
        }
        writer.write(&diagnosis).await?;
        return Ok(Action::requeue(AGENT_POLL));
    }
    let message = format!(
        "no agent holds Lease {}/{} for node {node}: is the operon agent DaemonSet running on it?",
        ctx.settings.agent_namespace,
        placement::agent_lease_name(&node)
    );
    let started = diagnosis
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .is_some();
    // A run the agent started waits for it however long it takes (the DaemonSet brings
    // it back); one that never started fails after the wait limit.
    let patience = if started {
        Patience::Always(AGENT_POLL)
    } else {
        Patience::Limited
    };
    wait(
        &ctx,
        &mut diagnosis,
        &mut writer,
        SCHEDULED,
        "NoAgent",
        message,
        patience,
    )
    .await
}

/// How long a Diagnosis may wait for what it lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Patience {
    /// Waiting cannot help: it fails at once.
    Never,
    /// Up to the wait limit, looking again every [`WAIT_POLL`].
    Limited,
    /// However long it takes, looking again this often.
    Always(Duration),
}

/// Records why `diagnosis` cannot go on; fails it when its patience has run out.
async fn wait(
    ctx: &Context,
    diagnosis: &mut Diagnosis,
    writer: &mut StatusWriter,
    type_: &str,
    reason: &str,
    message: String,
    patience: Patience,
) -> Result<Action, DiagnosisError> {
    let created = diagnosis
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or_else(now, |t| t.0);
    let waited = now().duration_since(created);
    let limit = jiff::SignedDuration::try_from(ctx.settings.wait_limit).unwrap_or_default();
    let again = match patience {
        Patience::Never => None,
        Patience::Limited => (waited < limit).then_some(WAIT_POLL),
        Patience::Always(poll) => Some(poll),
    };
    let status = diagnosis.status.get_or_insert_with(Default::default);
    let gave_up = again.is_none();
    let action = if let Some(poll) = again {
        set_condition(
            &mut status.conditions,
            Condition::new(type_, ConditionStatus::False, reason, message),
        );
        if status.phase.is_none() {
            status.phase = Some(DiagnosisPhase::Pending);
        }
        Action::requeue(poll)
    } else {
        let message = if patience == Patience::Limited {
            format!("{message} (waited {}s)", waited.as_secs())
        } else {
            message
        };
        fail(status, type_, reason, message);
        Action::await_change()
    };
    writer.write(diagnosis).await?;
    if gave_up {
        metrics::finished(&ctx.settings.role, DiagnosisPhase::Failed);
    }
    Ok(action)
}

/// Runs (or resumes) `diagnosis` here.
async fn run(mut diagnosis: Diagnosis, ctx: &Context) -> Result<Action, DiagnosisError> {
    status::restore_results(&ctx.client, &mut diagnosis).await?;
    let mut writer = ctx.writer(&diagnosis);
    let set_name = diagnosis.spec.operation_set.clone();
    let sets: Api<OperationSet> = Api::all(ctx.client.clone());
    let Some(set) = sets
        .get_opt(&set_name)
        .await
        .map_err(ctx.read_error(&diagnosis, format!("OperationSet {set_name}")))?
    else {
        let message = format!("spec.operationSet: there is no OperationSet {set_name:?}");
        return wait(
            ctx,
            &mut diagnosis,
            &mut writer,
            ACCEPTED,
            "OperationSetNotFound",
            message,
            Patience::Limited,
        )
        .await;
    };
    let generation = set.metadata.generation;
    let recorded = diagnosis
        .status
        .as_ref()
        .and_then(|s| s.operation_set_generation);
    if let (Some(recorded), Some(generation)) = (recorded, generation)
        && recorded != generation
    {
        let message = format!(
            "OperationSet {set_name} changed (generation {recorded} → {generation}) since this Diagnosis started; its run cannot be resumed over another graph"
        );
        let status = diagnosis.status.get_or_insert_with(Default::default);
        fail(status, ACCEPTED, "OperationSetChanged", message);
        writer.write(&diagnosis).await?;
        metrics::finished(&ctx.settings.role, DiagnosisPhase::Failed);
        return Ok(Action::await_change());
    }

    let used: BTreeSet<&str> = set
        .spec
        .adjacency_list
        .iter()
        .filter_map(|node| node.operation.as_deref())
        .collect();
    // Only the Operations the set names, read afresh and at once: a list of every
    // Operation would grow with the cluster, not with the graph.
    let operations: Api<Operation> = Api::all(ctx.client.clone());
    let mut operations: BTreeMap<String, Operation> =
        futures::future::try_join_all(used.iter().map(|name| operations.get_opt(name)))
            .await
            .map_err(ctx.read_error(&diagnosis, "the Operations"))?
            .into_iter()
            .flatten()
            .map(|op| (op.name_any(), op))
            .collect();
    let missing: Vec<&str> = used
        .iter()
        .copied()
        .filter(|name| !operations.contains_key(*name))
        .collect();
    if !missing.is_empty() {
        let message = format!(
            "OperationSet {set_name} names Operations that do not exist: {}",
            missing.join(", ")
        );
        return wait(
            ctx,
            &mut diagnosis,
            &mut writer,
            ACCEPTED,
            "OperationNotFound",
            message,
            Patience::Limited,
        )
        .await;
    }
    let pins = match pin_modules(ctx, &diagnosis, &mut operations).await {
        Ok(pins) => pins,
        Err(e) => {
            let patience = match e.error.may_resolve() {
                true => Patience::Limited,
                false => Patience::Never,
            };
            let reason = e.error.reason();
            let message = e.to_string();
            return wait(
                ctx,
                &mut diagnosis,
                &mut writer,
                ACCEPTED,
                reason,
                message,
                patience,
            )
            .await;
        }
    };
    // The agent runs script steps from its store: the current text of every script the
    // set uses is there before a step runs (the agent's watch keeps the rest in step and
    // removes the scripts of deleted Operations).
    if let Some(store) = ctx.processors.script_store() {
        for name in used {
            if let Some(script) = &operations[name].spec.processor.script_runner {
                store.ensure(name, &script.script)?;
            }
        }
    }
    let plan = match operon_pipeline::plan(&set, &operations, &ctx.processors) {
        Ok(plan) => plan,
        Err(e) => {
            let reason = match e {
                PlanError::InvalidGraph { .. } => "OperationSetNotReady",
                PlanError::InvalidOperations { .. } => "OperationInvalid",
            };
            let problems: Vec<String> = e.problems().iter().map(ToString::to_string).collect();
            let message = format!("{e}: {}", problems.join("; "));
            return wait(
                ctx,
                &mut diagnosis,
                &mut writer,
                ACCEPTED,
                reason,
                message,
                Patience::Limited,
            )
            .await;
        }
    };

    let status = diagnosis.status.get_or_insert_with(Default::default);
    status.operation_set_generation = generation;
    status.pinned_modules = pins;
    set_condition(
        &mut status.conditions,
        Condition::new(
            ACCEPTED,
            ConditionStatus::True,
            "OperationSetReady",
            format!(
                "OperationSet {set_name}: {} nodes, {} paths",
                plan.graph.len(),
                plan.graph.path_count()
            ),
        ),
    );
    let events = Events::new(ctx.recorder.clone(), &diagnosis);
    let mut writer = writer.with_events(events.clone());
    let outcome =
        operon_pipeline::execute(&mut diagnosis, &plan.graph, &plan.steps, &mut writer).await;
    match outcome {
        Ok(phase) => {
            let complete = diagnosis.status.as_ref().and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == operon_pipeline::COMPLETE)
                    .map(|c| c.message.clone())
            });
            let (type_, reason) = match phase {
                DiagnosisPhase::Succeeded => (EventType::Normal, "Succeeded"),
                _ => (EventType::Warning, "Failed"),
            };
            events.publish(type_, reason, "Diagnose", complete.unwrap_or_default());
            metrics::finished(&ctx.settings.role, phase);
            tracing::info!(diagnosis = %diagnosis.object_ref(), phase = ?phase, "Diagnosis finished");
            Ok(Action::await_change())
        }
        Err(PipelineError::Checkpoint {
            source: e @ StatusError::ResultsTooLarge { .. },
            ..
        }) => results_too_large(ctx, diagnosis, &mut writer, e.to_string()).await,
        Err(e) => Err(DiagnosisError::Pipeline(e)),
    }
}

/// Pulls the `oci://` modules of `operations` and points each at its pinned reference.
/// A tag is pinned once, by whoever starts the Diagnosis (its `status.pinnedModules`),
/// and every later step and resumption, here or on an agent, pulls the digest
/// recorded; the credentials come from the Secrets each Operation names, in the
/// engine's namespace. The pins to record.
async fn pin_modules(
    ctx: &Context,
    diagnosis: &Diagnosis,
    operations: &mut BTreeMap<String, Operation>,
) -> Result<BTreeMap<String, String>, PinError> {
    let mut pins = diagnosis
        .status
        .as_ref()
        .map(|s| s.pinned_modules.clone())
        .unwrap_or_default();
    let Some(oci) = ctx.processors.modules().oci().cloned() else {
        return Ok(pins);
    };
    let (client, namespace) = (ctx.client.clone(), ctx.settings.agent_namespace.clone());
    pin_operations(&oci, operations.values_mut(), &mut pins, |op, reference| {
        let secrets = op
            .spec
            .processor
            .wasm
            .as_ref()
            .map(|wasm| wasm.image_pull_secrets.clone())
            .unwrap_or_default();
        let (client, namespace) = (client.clone(), namespace.clone());
        async move {
            let field = "spec.processor.wasm.imagePullSecrets";
            secret_auth(&client, &namespace, field, &secrets, &reference).await
        }
    })
    .await?;
    Ok(pins)
}

/// Fails a Diagnosis whose results fit nowhere, keeping the results that fit.
async fn results_too_large(
    ctx: &Context,
    mut diagnosis: Diagnosis,
    writer: &mut StatusWriter,
    message: String,
) -> Result<Action, DiagnosisError> {
    let limits = ctx.settings.limits;
    let status = diagnosis.status.get_or_insert_with(Default::default);
    let (kept, dropped) = status::split(status, limits, "");
    status.operation_results = kept.operation_results;
    let dropped: Vec<&str> = dropped.keys().map(String::as_str).collect();
    fail(
        status,
        operon_pipeline::COMPLETE,
        "ResultsTooLarge",
        format!("{message}; results not kept: {}", dropped.join(", ")),
    );
    // The run's writer: it holds the resourceVersion of its last write, and with no
    // result left for the ConfigMap it writes the status alone.
    writer.write(&diagnosis).await?;
    metrics::finished(&ctx.settings.role, DiagnosisPhase::Failed);
    Ok(Action::await_change())
}

fn error_policy(diagnosis: Arc<Diagnosis>, error: &DiagnosisError, _: Arc<Context>) -> Action {
    tracing::warn!(diagnosis = %diagnosis.object_ref(), error = %error, "Diagnosis not reconciled; retrying");
    Action::requeue(RETRY)
}

/// The waiting Diagnoses that name `set`.
fn waiting_for(diagnoses: &[Arc<Diagnosis>], set: &str) -> Vec<ObjectRef<Diagnosis>> {
    diagnoses
        .iter()
        .filter(|d| d.spec.operation_set == set && !finished(d))
        .map(|d| ObjectRef::from_obj(d.as_ref()))
        .collect()
}

/// The unfinished Diagnoses placed on `node`.
fn placed_on(diagnoses: &[Arc<Diagnosis>], node: &str) -> Vec<ObjectRef<Diagnosis>> {
    diagnoses
        .iter()
        .filter(|d| {
            !finished(d) && d.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
        })
        .map(|d| ObjectRef::from_obj(d.as_ref()))
        .collect()
}

/// Runs the controller until `shutdown` completes; Diagnoses running then finish their
/// current node first (the caller aborts the task to stop at once).
pub async fn run_controller(
    ctx: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let diagnoses: Api<Diagnosis> = Api::all(ctx.client.clone());
    let sets: Api<OperationSet> = Api::all(ctx.client.clone());
    let config = controller::Config::default().concurrency(ctx.settings.concurrency);
    let controller = Controller::new(diagnoses, watcher::Config::default()).with_config(config);
    let store = controller.store();
    let on_node = store.clone();
    let controller = controller.watches(
        sets,
        watcher::Config::default(),
        move |set: OperationSet| waiting_for(&store.state(), &set.name_any()),
    );
    // The controller follows the nodes Diagnoses are placed on, to say at once when one
    // goes down or comes back; an agent has nothing to do for another node.
    let controller = match ctx.settings.role {
        Role::Controller => controller.watches(
            Api::<Node>::all(ctx.client.clone()),
            watcher::Config::default(),
            move |node: Node| placed_on(&on_node.state(), &node.name_any()),
        ),
        Role::Agent { .. } => controller,
    };
    // A Diagnosis about several nodes hears from its children (kube-runtime maps an
    // owned Diagnosis to its owning Diagnosis as to any owner); only the controller
    // runs parents.
    let controller = match ctx.settings.role {
        Role::Controller => controller.owns(
            Api::<Diagnosis>::all(ctx.client.clone()),
            targets::children_watch(),
        ),
        Role::Agent { .. } => controller,
    };
    controller
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}
