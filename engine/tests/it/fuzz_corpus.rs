//! Every input of `fuzz/corpus/TARGET` through that target's check, once: each input
//! there once found new coverage, and must still pass the target's assertions. This is
//! the corpus replay CI runs; `fuzz/run.sh` does the fuzzing itself, with libFuzzer.
//!
//! An input gets the 10 seconds libFuzzer's `-timeout=10` gave it: a check still running
//! then fails the test, naming the input, instead of holding the run up.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// How long one input may take, as `fuzz/run.sh` tells libFuzzer.
const PER_INPUT: Duration = Duration::from_secs(10);

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .collect();
    inputs.sort();
    inputs
}

/// Runs every corpus input of `target`, each on a thread of its own.
fn replay(target: &str) {
    let (_, check) = operon_fuzz_checks::TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .unwrap_or_else(|| panic!("no fuzz target {target}"));
    let check = *check;
    let inputs = corpus(target);
    assert!(!inputs.is_empty(), "fuzz/corpus/{target} is empty");
    for input in &inputs {
        let data = std::fs::read(input).unwrap_or_else(|e| panic!("{}: {e}", input.display()));
        let (done, finished) = mpsc::channel();
        let worker = std::thread::spawn(move || {
            check(&data);
            let _ = done.send(());
        });
        match finished.recv_timeout(PER_INPUT) {
            Ok(()) => worker.join().expect("the check finished"),
            // The worker panicked: its message is above; name the input.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let _ = worker.join();
                panic!("fuzz target {target} fails on {}", input.display());
            }
            Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                "fuzz target {target} took more than {PER_INPUT:?} on {}",
                input.display()
            ),
        }
    }
}

#[test]
fn every_fuzz_target_has_a_corpus_and_a_binary() {
    let targets =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/Cargo.toml"))
            .expect("fuzz/Cargo.toml");
    for (name, _) in operon_fuzz_checks::TARGETS {
        assert!(
            targets.contains(&format!("path = \"fuzz_targets/{name}.rs\"")),
            "fuzz/Cargo.toml has no binary for target {name}"
        );
        assert!(!corpus(name).is_empty(), "fuzz/corpus/{name} is empty");
    }
}

#[test]
fn manifests_corpus() {
    replay("manifests");
}

#[test]
fn hook_config_corpus() {
    replay("hook_config");
}

#[test]
fn hook_files_corpus() {
    replay("hook_files");
}

#[test]
fn binding_context_corpus() {
    replay("binding_context");
}

#[test]
fn jq_corpus() {
    replay("jq");
}

#[test]
fn reviews_corpus() {
    replay("reviews");
}

#[test]
fn module_corpus() {
    replay("module");
}
