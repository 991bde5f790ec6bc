//! The order runs keep at start, as shell-operator keeps it: onStartup runs by their
//! order, then every Synchronization run on the `main` queue one after the other in
//! hook order, never two at once; only a binding with `waitForSynchronization: false`
//! has its Synchronization run on its own queue, beside `main`. Hooks here pause in
//! each run on the paused clock, long enough for any run the engine would start beside
//! it to begin; none of it is real time.

use super::{PODS, hook_config, pods_binding};
use crate::config;
use crate::engine::{Engine, LoadedHook, RunRecord};
use crate::metrics::Metrics;
use crate::runner::{Hook, HookError, HookRun};
use futures::future::BoxFuture;
use operon_cluster::local::LocalCluster;
use operon_data::model::{HookConfig, HookInput, HookOutput};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;

/// What the hooks of one test did, in order: `"<hook> <binding type> start|end"`.
type Journal = Arc<Mutex<Vec<String>>>;

/// A hook noting when each run starts and ends; a run first waits until the hook
/// `partner` started a run, if it has one.
struct Probe {
    name: &'static str,
    config: HookConfig,
    journal: Journal,
    /// Opened when a run of this hook starts.
    started: Arc<Semaphore>,
    /// The gate of the hook each run waits for.
    partner: Option<Arc<Semaphore>>,
}

impl Hook for Probe {
    fn name(&self) -> &str {
        self.name
    }

    fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
        Box::pin(async move { Ok(self.config.clone()) })
    }

    fn handle(&self, input: HookInput, _: Duration) -> BoxFuture<'_, (HookRun, HookInput)> {
        Box::pin(async move {
            let kind = input.binding_contexts[0].type_;
            let note = |what: &str| {
                (self.journal.lock().unwrap()).push(format!("{} {kind:?} {what}", self.name))
            };
            note("start");
            self.started.add_permits(Semaphore::MAX_PERMITS / 2);
            if let Some(partner) = &self.partner {
                let _ = partner.acquire().await.expect("the gate stays open");
            }
            // Virtual time: every other task that can start does so meanwhile.
            tokio::time::sleep(Duration::from_secs(1)).await;
            note("end");
            let run = HookRun {
                outcome: Ok(HookOutput {
                    validating: None,
                    conversion: None,
                }),
                patches: vec![],
                metrics: vec![],
                logs: vec![],
                stdout: String::new(),
                stderr: String::new(),
                elapsed: Duration::from_millis(1),
            };
            (run, input)
        })
    }
}

/// An engine over two Pods for `hooks` (name, configuration, index of the partner whose
/// run each run waits for), run for a virtual minute; what the hooks noted and every
/// run.
async fn run(
    hooks: Vec<(&'static str, HookConfig, Option<usize>)>,
) -> (Vec<String>, Vec<RunRecord>) {
    let journal = Journal::default();
    let gates: Vec<Arc<Semaphore>> = hooks.iter().map(|_| Arc::new(Semaphore::new(0))).collect();
    let loaded = hooks
        .into_iter()
        .enumerate()
        .map(|(i, (name, declared, partner))| {
            let config = config::validate(name, &declared, &config::any_kind).unwrap();
            let hook = Arc::new(Probe {
                name,
                config: declared,
                journal: journal.clone(),
                started: gates[i].clone(),
                partner: partner.map(|p| gates[p].clone()),
            });
            LoadedHook { hook, config }
        })
        .collect();
    let cluster = Arc::new(LocalCluster::new());
    cluster.load_yaml(PODS, "fixtures").unwrap();
    let metrics = Arc::new(Metrics::new().unwrap());
    let engine = Arc::new(Engine::new(loaded, cluster, metrics));
    engine.start().await.unwrap();
    let records = Arc::new(Mutex::new(Vec::new()));
    let sink = records.clone();
    engine
        .run_for(Duration::from_secs(60), move |r| {
            sink.lock().unwrap().push(r.clone())
        })
        .await;
    let journal = journal.lock().unwrap().clone();
    let records = records.lock().unwrap().clone();
    (journal, records)
}

fn on_startup(order: i32, config: HookConfig) -> HookConfig {
    HookConfig {
        on_startup: Some(order),
        ..config
    }
}

#[tokio::test(start_paused = true)]
async fn on_startup_then_synchronization_on_main_one_run_at_a_time_in_hook_order() {
    // `b`'s binding names a queue of its own but waits for synchronization (the
    // default): its Synchronization run is on `main` all the same.
    let mut queued = pods_binding("pods");
    queued.queue = Some("b-queue".to_owned());
    let (journal, records) = run(vec![
        ("a", hook_config(vec![pods_binding("pods")]), None),
        ("b", on_startup(5, hook_config(vec![queued])), None),
        ("c", on_startup(1, hook_config(vec![])), None),
    ])
    .await;
    assert_eq!(
        journal,
        [
            "c OnStartup start",
            "c OnStartup end",
            "b OnStartup start",
            "b OnStartup end",
            "a Synchronization start",
            "a Synchronization end",
            "b Synchronization start",
            "b Synchronization end",
        ],
        "every start is followed by its own end: no two runs of main overlap"
    );
    assert!(records.iter().all(|r| r.queue == "main"), "{records:?}");
}

#[tokio::test(start_paused = true)]
async fn a_synchronization_that_does_not_wait_runs_beside_main() {
    // Each run waits until the other hook's run started: both end only if the two
    // Synchronization runs overlap.
    let mut own = pods_binding("pods");
    own.queue = Some("own".to_owned());
    own.wait_for_synchronization = Some(false);
    let (journal, records) = run(vec![
        ("a", hook_config(vec![pods_binding("pods")]), Some(1)),
        ("b", hook_config(vec![own]), Some(0)),
    ])
    .await;
    assert_eq!(records.len(), 2, "both runs ended: {journal:?}");
    let queues: Vec<(&str, &str)> = (records.iter())
        .map(|r| (r.hook.as_str(), r.queue.as_str()))
        .collect();
    assert!(queues.contains(&("a", "main")), "{queues:?}");
    assert!(queues.contains(&("b", "own")), "{queues:?}");
    assert_eq!(
        journal[..2].iter().filter(|n| n.ends_with("start")).count(),
        2,
        "both started before either ended: {journal:?}"
    );
}
