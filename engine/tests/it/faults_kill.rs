//! `operon run --checkpoint` killed with SIGKILL at random points of a Diagnosis (one
//! kill after each number of finished nodes, somewhere in the next one), then run again
//! with the same checkpoint until it finishes: every node the checkpoint
//! recorded as finished keeps its record (same start time, same outcome), so it was not
//! run again; every node runs to a record at most once in the end; the Diagnosis
//! succeeds on the path it would have taken without the kills.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A chain of script steps, each taking a little time.
fn pipeline(dir: &Path, steps: usize) {
    let mut text = String::new();
    for i in 1..=steps {
        text.push_str(&format!(
            "apiVersion: operon.dev/v1alpha1\nkind: Operation\nmetadata: {{name: step-{i}}}\nspec:\n  processor:\n    timeoutSeconds: 10\n    scriptRunner:\n      script: 'sleep 0.15; echo step {i}'\n---\n"
        ));
    }
    text.push_str("apiVersion: operon.dev/v1alpha1\nkind: OperationSet\nmetadata: {name: chain}\nspec:\n  adjacencyList:\n  - id: 0\n    to: [1]\n");
    for i in 1..=steps {
        let to = if i < steps {
            format!("\n    to: [{}]", i + 1)
        } else {
            String::new()
        };
        text.push_str(&format!("  - id: {i}\n    operation: step-{i}{to}\n"));
    }
    text.push_str("---\napiVersion: operon.dev/v1alpha1\nkind: Diagnosis\nmetadata: {name: killed}\nspec: {operationSet: chain}\n");
    std::fs::write(dir.join("pipeline.yaml"), text).unwrap();
}

fn operon(dir: &Path, checkpoint: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_operon"));
    command
        .arg("run")
        .arg(dir)
        .arg("--checkpoint")
        .arg(checkpoint)
        .args(["-o", "json"])
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    command
}

/// The finished node records of a checkpoint, by node id.
fn finished(checkpoint: &Path) -> Vec<(i64, Value)> {
    let Ok(text) = std::fs::read_to_string(checkpoint) else {
        return Vec::new();
    };
    let diagnosis: Value = yaml_serde::from_str(&text).expect("a checkpoint is a Diagnosis");
    records(&diagnosis)
        .into_iter()
        .filter(|(_, r)| r["phase"] == "Succeeded" || r["phase"] == "Failed")
        .collect()
}

fn records(diagnosis: &Value) -> Vec<(i64, Value)> {
    diagnosis
        .pointer("/status/nodes")
        .and_then(Value::as_array)
        .map(|nodes| {
            nodes
                .iter()
                .map(|n| (n["id"].as_i64().expect("an id"), n.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// A small generator for the kill delays: seeded from the clock (printed) unless
/// `OPERON_FAULT_SEED` repeats a failed run.
fn delays(count: usize) -> Vec<u64> {
    let seed = std::env::var("OPERON_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    eprintln!("OPERON_FAULT_SEED={seed}");
    let mut state = seed | 1;
    (0..count)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Anywhere within one step (150 ms of sleep plus the sandbox around it).
            (state >> 33) % 250
        })
        .collect()
}

/// Waits until the checkpoint records at least `count` finished nodes.
fn wait_for(checkpoint: &Path, count: usize) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        if finished(checkpoint).len() >= count {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

#[test]
fn a_killed_run_resumes_without_running_finished_nodes_again() {
    const STEPS: usize = 6;
    let dir = tempfile::tempdir().unwrap();
    pipeline(dir.path(), STEPS);
    let checkpoint = dir.path().join("checkpoint.yaml");
    let mut seen: Vec<(i64, Value)> = Vec::new();
    // One kill after each number of finished nodes, at a random point of the next one
    // (or of the write after it).
    for (after, delay) in (0..STEPS).zip(delays(STEPS)) {
        let mut child = operon(dir.path(), &checkpoint)
            .stdout(Stdio::null())
            .spawn()
            .expect("operon starts");
        assert!(wait_for(&checkpoint, after), "no progress to {after} nodes");
        std::thread::sleep(Duration::from_millis(delay));
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        let now = finished(&checkpoint);
        eprintln!(
            "killed {delay} ms after {after} nodes had finished; {} recorded",
            now.len()
        );
        // What was finished before this kill is still there, unchanged.
        for (id, record) in &seen {
            let kept = now.iter().find(|(i, _)| i == id).map(|(_, r)| r);
            assert_eq!(kept, Some(record), "node {id} changed after a kill");
        }
        seen = now;
    }
    let output = operon(dir.path(), &checkpoint)
        .output()
        .expect("operon runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let diagnosis: Value = serde_json::from_slice(&output.stdout).expect("JSON output");
    assert_eq!(
        diagnosis.pointer("/status/phase"),
        Some(&Value::from("Succeeded"))
    );
    let last = records(&diagnosis);
    let mut ids: Vec<i64> = last.iter().map(|(id, _)| *id).collect();
    ids.sort();
    assert_eq!(
        ids,
        (1..=STEPS as i64).collect::<Vec<_>>(),
        "each node has one record"
    );
    for (id, record) in &seen {
        let kept = last.iter().find(|(i, _)| i == id).map(|(_, r)| r);
        assert_eq!(kept, Some(record), "node {id} ran again after the resume");
    }
}
