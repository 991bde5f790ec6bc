//! A hostile JQPatch filter fails by its limit without stalling the runtime, and a
//! write made while a filter runs is not lost.

use crate::local::LocalCluster;
use crate::{Cluster, ClusterError};
use operon_data::model::{JqPatchSpec, ObjectRef, PatchOperation, PatchSpec};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const CONFIG_MAP: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: prod
data:
  a: "1"
"#;

fn cluster() -> LocalCluster {
    let cluster = LocalCluster::new();
    cluster.load_yaml(CONFIG_MAP, "fixtures.yaml").unwrap();
    cluster
}

fn settings() -> ObjectRef {
    ObjectRef {
        api_version: None,
        kind: "ConfigMap".to_owned(),
        namespace: Some("prod".to_owned()),
        name: "settings".to_owned(),
    }
}

fn jq_patch(filter: &str) -> PatchOperation {
    PatchOperation::JqPatch(JqPatchSpec {
        target: settings(),
        jq_filter: filter.to_owned(),
        subresource: None,
        ignore_missing_object: false,
    })
}

fn labels(cluster: &LocalCluster) -> Value {
    let resource = cluster.resolve(None, "ConfigMap").unwrap();
    let object = futures::executor::block_on(cluster.get(&resource, Some("prod"), "settings"))
        .unwrap()
        .unwrap();
    object["metadata"]["labels"].clone()
}

/// A filter running to its time limit in a JQPatch of a local run leaves the runtime
/// worker's other tasks running: on a runtime of one worker, a ticking task goes on.
#[test]
fn a_hostile_filter_fails_by_its_limit_and_the_runtime_keeps_ticking() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let cluster = Arc::new(cluster());
    let hostile = "last(range(1e18))";
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
        tokio::time::sleep(Duration::from_millis(30)).await;
        let run = {
            let cluster = cluster.clone();
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                let result = cluster.apply(&jq_patch(hostile)).await;
                (result, started.elapsed())
            })
        };
        let at_start = ticks.load(Ordering::SeqCst);
        let (result, took) = run.await.unwrap();
        let during = ticks.load(Ordering::SeqCst) - at_start;
        ticker.abort();
        let limits = operon_jq::configured_limits();
        match result {
            Err(ClusterError::Invalid { what, reason }) => {
                assert_eq!(what, "JQPatch of ConfigMap prod/settings");
                assert!(
                    reason.contains(&format!("jq filter {hostile:?}"))
                        && reason.contains("ran longer than its time limit"),
                    "{reason}"
                );
            }
            other => panic!("expected the time limit, got {other:?}"),
        }
        assert!(took >= limits.time, "{took:?}");
        // A starved ticker gets no tick while the filter runs (a hundred fit in 1 s).
        assert!(
            during >= 10,
            "the other task ticked {during} times during the run"
        );
    });
    assert_eq!(
        labels(&cluster),
        Value::Null,
        "a failed JQPatch writes nothing"
    );
}

/// A write that lands while the filter runs is kept: the filter runs again on the
/// object that write left, and its output keeps the write.
#[test]
fn a_write_during_the_filter_is_not_lost() {
    let cluster = Arc::new(cluster());
    // Busy for 300 ms, so the other thread's write lands while it runs.
    let slow = r#"now as $t | until(now > $t + 0.3; .) | .metadata.labels.jq = "yes""#;
    let writer = {
        let cluster = cluster.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let merge = PatchOperation::MergePatch(PatchSpec {
                target: settings(),
                patch: r#"{"metadata": {"labels": {"merged": "yes"}}}"#.to_owned(),
                subresource: None,
                ignore_missing_object: false,
            });
            futures::executor::block_on(cluster.apply(&merge)).unwrap();
        })
    };
    futures::executor::block_on(cluster.apply(&jq_patch(slow))).unwrap();
    writer.join().unwrap();
    assert_eq!(
        labels(&cluster),
        serde_json::json!({"jq": "yes", "merged": "yes"})
    );
}

/// A JQPatch of an object that is not there fails as other patches do, or does nothing
/// with `ignoreMissingObject`, without running the filter.
#[test]
fn a_missing_object_is_not_found_or_ignored() {
    let cluster = cluster();
    let missing = JqPatchSpec {
        target: ObjectRef {
            name: "gone".to_owned(),
            ..settings()
        },
        jq_filter: r#"error("the filter ran")"#.to_owned(),
        subresource: None,
        ignore_missing_object: false,
    };
    let err = futures::executor::block_on(cluster.apply(&PatchOperation::JqPatch(missing.clone())))
        .unwrap_err();
    assert!(matches!(err, ClusterError::NotFound { .. }), "{err}");
    let ignored = JqPatchSpec {
        ignore_missing_object: true,
        ..missing
    };
    futures::executor::block_on(cluster.apply(&PatchOperation::JqPatch(ignored))).unwrap();
}
