//! Running a filter from async code without stalling the runtime it runs on.
//!
//! A run may take up to its time limit (1 s by default). On a worker of a multi-thread
//! tokio runtime that would stall every task queued on the worker, so such a run must
//! leave the worker (`tokio::task::block_in_place`, which hands the worker's tasks to
//! another thread). Handing them over wakes or starts a thread each time, though, and a
//! binding's `jqFilter` runs once per watch event in microseconds: doing it for every
//! run cost a thread switch per event, and kept more threads alive (`operon serve`
//! under a churn of Pods had 10 threads with it, 8 without).
//!
//! So a run first goes on the worker within [`ON_WORKER`], a limit far below what it
//! may take. Only a run that reaches it is run again off the worker, within its whole
//! limits, and its filter is marked slow so that its later runs leave the worker at
//! once. Filters are pure, so the second run yields what the first would have, and no
//! run holds a worker for much longer than [`ON_WORKER`].

use super::{Filter, JqError, Limit, Limits, configured_limits};
use serde_json::Value;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::runtime::{Handle, RuntimeFlavor};

/// How long a run may hold a runtime worker before it is run again off it: far above
/// what a binding's filter takes on an object (microseconds), short enough that the
/// worker's other tasks hardly notice.
pub(crate) const ON_WORKER: Duration = Duration::from_millis(1);

impl Filter {
    /// [`Filter::run`] from async code: on a runtime worker it runs there while it is
    /// quick, and off it once it is not (see the module's doc).
    pub fn run_in_task(&self, input: &Value) -> Result<Vec<Value>, JqError> {
        self.in_task(&configured_limits(), |limits| {
            self.run_within(input, limits)
        })
    }

    /// [`Filter::run_one`] from async code, as [`Filter::run_in_task`].
    pub fn run_one_in_task(&self, input: &Value) -> Result<Value, JqError> {
        self.in_task(&configured_limits(), |limits| {
            self.run_one_within(input, limits)
        })
    }

    /// Calls `run` (a run of this filter within the limits it is given) on this thread
    /// within [`ON_WORKER`], then off the worker within `limits` if that was not enough.
    /// Outside a multi-thread runtime's worker it just runs within `limits`.
    pub(crate) fn in_task<T>(
        &self,
        limits: &Limits,
        run: impl Fn(&Limits) -> Result<T, JqError>,
    ) -> Result<T, JqError> {
        let on_worker = Handle::try_current()
            .is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::MultiThread);
        if !on_worker {
            return run(limits);
        }
        if !self.inner.slow.load(Ordering::Relaxed) {
            let short = Limits {
                time: limits.time.min(ON_WORKER),
                ..*limits
            };
            match run(&short) {
                Err(JqError::Limit {
                    limit: Limit::Time(_),
                    ..
                }) if limits.time > ON_WORKER => self.inner.slow.store(true, Ordering::Relaxed),
                outcome => return outcome,
            }
        }
        tokio::task::block_in_place(|| run(limits))
    }
}

#[cfg(test)]
mod tests {
    use crate::{JqError, Limit, Limits, compile_uncached};
    use serde_json::{Value, json};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
    use std::time::Duration;

    /// A runtime of one worker, and how many threads it has started (the worker, then
    /// every blocking thread).
    fn one_worker() -> (tokio::runtime::Runtime, Arc<AtomicUsize>) {
        let started = Arc::new(AtomicUsize::new(0));
        let counter = started.clone();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .on_thread_start(move || {
                counter.fetch_add(1, Ordering::SeqCst);
            })
            .build()
            .unwrap();
        (runtime, started)
    }

    /// Quick runs stay on the worker: no thread is woken or started for them.
    #[test]
    fn quick_runs_stay_on_the_worker() {
        let (runtime, started) = one_worker();
        let outputs = runtime.block_on(async {
            tokio::spawn(async {
                let filter = compile_uncached(".metadata.labels | keys").unwrap();
                let pod = json!({"metadata": {"labels": {"b": "1", "a": "2"}}});
                (0..200)
                    .map(|_| filter.run_in_task(&pod).unwrap())
                    .collect::<Vec<_>>()
            })
            .await
            .unwrap()
        });
        assert!(outputs.iter().all(|o| *o == [json!(["a", "b"])]));
        assert_eq!(started.load(Ordering::SeqCst), 1, "threads started");
    }

    /// A run that outlasts [`super::ON_WORKER`] is run again off the worker within its
    /// whole time limit, which its error names; the filter's later runs leave the worker
    /// at once, and still give the outputs of a run on it.
    #[test]
    fn a_slow_run_leaves_the_worker_with_its_whole_limit() {
        let (runtime, _) = one_worker();
        let filter = compile_uncached("if . then last(range(1e18)) else 1 end").unwrap();
        let limits = Limits {
            time: Duration::from_millis(200),
            ..Limits::default()
        };
        let run = |input: Value| {
            let filter = filter.clone();
            runtime.block_on(async move {
                tokio::spawn(async move {
                    let before = std::time::Instant::now();
                    let outcome = filter.in_task(&limits, |l| filter.run_within(&input, l));
                    (outcome, before.elapsed())
                })
                .await
                .unwrap()
            })
        };
        let (quick, _) = run(json!(false));
        assert_eq!(quick, Ok(vec![json!(1)]));
        assert!(!filter.inner.slow.load(Ordering::Relaxed));
        let (slow, took) = run(json!(true));
        assert!(
            matches!(
                &slow,
                Err(JqError::Limit { limit: Limit::Time(t), .. }) if *t == limits.time
            ),
            "{slow:?}"
        );
        assert!(took >= limits.time, "took {took:?}");
        assert!(filter.inner.slow.load(Ordering::Relaxed));
        assert_eq!(run(json!(false)).0, Ok(vec![json!(1)]));
    }

    /// A filter running to its time limit on a runtime worker leaves the worker's other
    /// tasks running: on a runtime of one worker, a ticking task goes on while it runs.
    #[test]
    fn a_long_run_does_not_starve_the_runtime() {
        let (runtime, _) = one_worker();
        runtime.block_on(async {
            let ticks = Arc::new(AtomicU32::new(0));
            let ticker = {
                let ticks = ticks.clone();
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        ticks.fetch_add(1, Ordering::SeqCst);
                    }
                })
            };
            // Let the ticker start, then run a hostile filter on the only worker.
            tokio::time::sleep(Duration::from_millis(30)).await;
            let hostile = tokio::spawn(async {
                let filter = compile_uncached("last(range(1e18))").unwrap();
                let limits = Limits {
                    time: Duration::from_millis(500),
                    ..Limits::default()
                };
                let before = std::time::Instant::now();
                let result = filter.in_task(&limits, |l| filter.run_within(&Value::Null, l));
                (result, before.elapsed())
            });
            let at_start = ticks.load(Ordering::SeqCst);
            let (result, took) = hostile.await.unwrap();
            let during = ticks.load(Ordering::SeqCst) - at_start;
            ticker.abort();
            assert!(
                matches!(
                    result,
                    Err(JqError::Limit {
                        limit: Limit::Time(_),
                        ..
                    })
                ),
                "{result:?}"
            );
            assert!(took >= Duration::from_millis(500));
            // 50 ticks fit in the run; a starved ticker gets none.
            assert!(
                during >= 10,
                "the other task ticked {during} times during the run"
            );
        });
    }
}
