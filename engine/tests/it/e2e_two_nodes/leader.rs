//! The leader's node stopped or partitioned under load, and the Lease changing hands.

use super::*;

/// The first RFC 3339 time in a log line (text or JSON).
fn timestamp_in(line: &str) -> Option<jiff::Timestamp> {
    line.split(|c: char| c.is_whitespace() || c == '"')
        .find_map(|word| word.trim_end_matches(',').parse().ok())
}

/// The Lease changing hands: the new holder, when it took the Lease, and how long after
/// the old holder's last renewal.
struct Handover {
    holder: String,
    acquired: jiff::Timestamp,
    gap: Duration,
}

/// Polls the controller's Lease every 200 ms until a replica other than `old` holds it.
async fn handover(config: &Path, old: &str) -> Handover {
    let mut last_renewal = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (ok, out, _) = try_kubectl(
            config,
            &["-n", "operon", "get", "lease", "operon", "-o", "json"],
        );
        if ok {
            let lease: Value = serde_json::from_str(&out).unwrap();
            let spec = &lease["spec"];
            let holder = spec["holderIdentity"].as_str().unwrap_or_default();
            let pod = holder.rsplit_once('_').map_or(holder, |(pod, _)| pod);
            let time =
                |field: &str| -> Option<jiff::Timestamp> { spec[field].as_str()?.parse().ok() };
            if pod == old {
                last_renewal = time("renewTime").or(last_renewal);
            } else if !pod.is_empty() {
                let acquired = time("acquireTime").expect("the Lease's acquireTime");
                let renewed = last_renewal.expect("the old leader's renewal was seen");
                return Handover {
                    holder: pod.to_owned(),
                    acquired,
                    gap: acquired.duration_since(renewed).unsigned_abs(),
                };
            }
        }
        assert!(
            Instant::now() < deadline,
            "no replica but {old} took the Lease"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Makes a replica on `node` the leader. Nothing moves a replica back to a node that
/// returned, so a standby elsewhere is deleted first: its replacement is spread onto
/// `node`; then the leader, while it is elsewhere.
pub(super) async fn leader_on(config: &Path, node: &str) -> String {
    for _ in 0..4 {
        rolled_out(config);
        let replicas = pods_by_node(config, CONTROLLER);
        let leader = leader_pod(config);
        // Both replicas on `node` would both die with it.
        let elsewhere = replicas.keys().any(|n| n != node);
        if !replicas.contains_key(node) || !elsewhere {
            let standby = replicas
                .values()
                .find(|pods| pods.len() > 1)
                .or_else(|| replicas.values().next())
                .into_iter()
                .flatten()
                .find(|p| **p != leader)
                .unwrap_or(&leader)
                .clone();
            force_delete(config, &standby);
            // Wait for the Deployment to see the deletion before waiting for its rollout.
            tokio::time::sleep(Duration::from_secs(2)).await;
            continue;
        }
        if node_of(config, &leader) == node {
            return leader;
        }
        force_delete(config, &leader);
        new_leader(config, &leader).await;
    }
    panic!(
        "no leader on node {node}: replicas {:?}",
        pods_by_node(config, CONTROLLER)
    );
}

/// The leader's node stopped, then partitioned, under load.
pub(super) async fn leader_node_fails(
    node: &Node,
    second: &Second,
    client: &kube::Client,
    namespace: &str,
    action: &'static str,
    undo: &'static str,
) {
    let config = node.kubeconfig.as_path();
    let leader = leader_on(config, &second.name).await;
    let load = Load::start(client, namespace, action, &node.pod_image);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let fault = Instant::now();
    let down = second.down(action, undo);
    let handover = handover(config, &leader).await;
    let took = fault.elapsed();
    let next = &handover.holder;
    eprintln!(
        "leader {leader}'s node {action}: {next} holds the Lease {:.1} s later, acquired \
         {:.1} s after the cut-off leader's last renewal",
        took.as_secs_f64(),
        handover.gap.as_secs_f64()
    );
    // A leader that cannot renew stops leading at its renew deadline (10 s after its
    // last renewal, operon serve's client-go timing), before the Lease it held can be
    // taken (15 s): no two leaders write at once.
    assert!(
        handover.gap >= Duration::from_secs(10),
        "the Lease was taken {:?} after the cut-off leader's last renewal, before its \
         renew deadline",
        handover.gap
    );
    // Past the Pods' eviction, so that the Service has dropped the dead replica.
    tokio::time::sleep(Duration::from_secs(40).saturating_sub(fault.elapsed())).await;
    let report = load
        .finish(
            &format!("leader's node {action}"),
            fault,
            Duration::from_secs(180),
        )
        .await;
    report.print();
    down.undo();
    if action == "partition" {
        // Its own log, when the kubelet still has it (it deletes the evicted Pod once
        // it hears of it again), says when it stopped leading.
        let (_, before, _) = try_kubectl(config, &["-n", "operon", "logs", "--previous", &leader]);
        let (_, now, _) = try_kubectl(config, &["-n", "operon", "logs", &leader]);
        let line = format!("{before}{now}")
            .lines()
            .find(|l| l.contains("stopped leading"))
            .map(str::to_owned);
        match line.as_deref().and_then(timestamp_in) {
            Some(at) => {
                assert!(
                    at <= handover.acquired,
                    "the cut-off replica stopped leading at {at}, after the other took the \
                     Lease at {}",
                    handover.acquired
                );
                eprintln!(
                    "the cut-off replica stopped leading at {at}, {:.1} s before the other \
                     took the Lease",
                    handover.acquired.duration_since(at).as_secs_f64()
                );
            }
            None => eprintln!("the cut-off replica's log was gone after the partition healed"),
        }
    }
    rolled_out(config);
}
