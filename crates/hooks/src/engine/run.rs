//! The engine's loops: [`Engine::drain`] (everything queued, one task at a time, for
//! `operon hook test`), and [`Engine::run_until`] (workers per queue, event pumps,
//! schedules, retries, and a graceful stop, for `operon hook run` and `operon serve`).

use super::{Engine, MAIN_QUEUE, RunRecord};
use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

impl Engine {
    /// Starts one task per watch stream not yet pumped, handing its events to the
    /// engine; abort the set to stop taking events.
    pub fn spawn_pumps(self: &Arc<Self>) -> tokio::task::JoinSet<()> {
        let mut pumps = tokio::task::JoinSet::new();
        let streams = std::mem::take(&mut self.lock().streams);
        for (key, mut stream) in streams {
            let engine = self.clone();
            pumps.spawn(async move {
                while let Some(event) = stream.recv().await {
                    engine.handle_event(key, event);
                }
            });
        }
        pumps
    }

    /// Runs everything queued and everything it causes, one task at a time, queues in
    /// name order with `main` first; a failed task is reported and dropped instead of
    /// retried (a test scenario must end). Rate limits are ignored: a scenario has no
    /// time between events.
    pub async fn drain(&self, mut on_run: impl FnMut(&RunRecord)) {
        loop {
            self.pump();
            let mut names = self.queue_names();
            names.sort_by_key(|n| (n != MAIN_QUEUE, n.clone()));
            let Some(queue) = names
                .into_iter()
                .find(|n| self.lock().queues.get(n).is_some_and(|q| !q.is_empty()))
            else {
                return;
            };
            {
                // A scenario has no time between events: reset the buckets.
                self.lock().limits.clear();
            }
            if let Ok(Some(record)) = self.run_head(&queue).await {
                if record.retry_in.is_some() {
                    let mut state = self.lock();
                    if let Some(q) = state.queues.get_mut(&queue) {
                        q.done();
                    }
                    state.busy.remove(&queue);
                    // The scenario goes on: a binding whose Synchronization failed
                    // still shows what its events would do.
                    for &b in &record.synchronizes {
                        self.release(&mut state, (record.hook_index, b));
                    }
                }
                on_run(&record);
            }
        }
    }

    /// The full loop for `duration`: one worker per queue (queues run in parallel, each
    /// strictly sequential), schedules firing on their crontabs, failed tasks retried
    /// with backoff, rate limits honoured. `on_run` sees every run.
    pub async fn run_for(
        self: &Arc<Self>,
        duration: Duration,
        on_run: impl Fn(&RunRecord) + Send + Sync + 'static,
    ) {
        self.run_until(tokio::time::sleep(duration), Duration::ZERO, on_run)
            .await;
    }

    /// The full loop (as [`Engine::run_for`]) until `shutdown` resolves; then no event
    /// or schedule is taken any more, and runs in progress get up to `grace` to finish
    /// before they are cancelled.
    pub async fn run_until(
        self: &Arc<Self>,
        shutdown: impl Future<Output = ()>,
        grace: Duration,
        on_run: impl Fn(&RunRecord) + Send + Sync + 'static,
    ) {
        let on_run = Arc::new(on_run);
        let mut inputs = self.spawn_pumps();
        // Schedules.
        for (h, loaded) in self.hooks.iter().enumerate() {
            for (s, binding) in loaded.config.schedules.iter().enumerate() {
                let engine = self.clone();
                let crontab = binding.crontab.clone();
                inputs.spawn(async move {
                    loop {
                        let now = jiff::Timestamp::now();
                        let Some(next) = crontab.next_after(now) else {
                            return;
                        };
                        let wait = Duration::try_from(next.duration_since(now)).unwrap_or_default();
                        tokio::time::sleep(wait).await;
                        engine.fire_schedule(h, s);
                    }
                });
            }
        }
        // Queue workers, started as queues appear.
        let mut workers = tokio::task::JoinSet::new();
        let mut started: HashSet<String> = HashSet::new();
        let live = self.metrics.live_ticks.clone();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            for queue in self.queue_names() {
                if started.insert(queue.clone()) {
                    let engine = self.clone();
                    let on_run = on_run.clone();
                    workers.spawn(async move { engine.worker(queue, on_run).await });
                }
            }
            live.inc();
            let tick = tokio::time::sleep(Duration::from_secs(1));
            tokio::select! {
                () = &mut shutdown => break,
                () = self.wake.notified() => {}
                () = tick => {}
            }
        }
        inputs.abort_all();
        self.stopping.store(true, Ordering::SeqCst);
        self.wake.notify_waiters();
        // Workers return once their current run is over; whatever still runs after the
        // grace period is cancelled (a script's process group is killed on drop).
        let finished = async { while workers.join_next().await.is_some() {} };
        if tokio::time::timeout(grace, finished).await.is_err() {
            let running: Vec<String> = self.lock().busy.iter().cloned().collect();
            tracing::warn!(queues = ?running, "grace period over; cancelling the runs in progress");
        }
        workers.abort_all();
    }

    async fn worker(
        self: Arc<Self>,
        queue: String,
        on_run: Arc<impl Fn(&RunRecord) + Send + Sync>,
    ) {
        loop {
            let notified = self.wake.notified();
            if self.stopping.load(Ordering::SeqCst) {
                return;
            }
            match self.run_head(&queue).await {
                Ok(Some(record)) => {
                    on_run(&record);
                    if let Some(wait) = record.retry_in {
                        tokio::time::sleep(wait).await;
                    }
                }
                Ok(None) => notified.await,
                Err(wait) => tokio::time::sleep(wait).await,
            }
        }
    }
}
