//! The script runner: a KubeDiag `scriptRunner` script run as a local process.
//!
//! Unlike KubeDiag, a non-zero exit or a timeout is a failure, the script's shebang is
//! honoured, a missing `argKeys` value is an error instead of silently shifting the
//! other arguments, and the whole process group is killed at the deadline. The
//! environment is cleared. (Confinement with namespaces and Landlock is the script
//! sandbox's job; this runner only bounds time and output.)

use super::{BoxFuture, RunError, RunOutput, RunRequest, Runner};
use std::collections::BTreeMap;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The PATH scripts get: the usual system directories, nothing from the caller.
const SCRIPT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Runs a shell script once per request.
#[derive(Debug, Clone)]
pub struct ScriptRunner {
    /// The script text.
    script: String,
    /// Input keys whose values are the positional arguments.
    arg_keys: Vec<String>,
    /// The key of `operation.<key>.output` / `operation.<key>.error`.
    result_key: Option<String>,
    /// Combined stdout and stderr beyond this many bytes fails the run.
    output_limit: usize,
}

impl ScriptRunner {
    /// A runner for `script`, KubeDiag style.
    pub fn new(script: String, arg_keys: Vec<String>, result_key: Option<String>) -> Self {
        Self {
            script,
            arg_keys,
            result_key,
            output_limit: 1 << 20,
        }
    }

    /// Changes the output bound (default 1 MiB).
    pub fn with_output_limit(mut self, bytes: usize) -> Self {
        self.output_limit = bytes;
        self
    }

    fn args(&self, input: &BTreeMap<String, String>) -> Result<Vec<String>, RunError> {
        self.arg_keys
            .iter()
            .enumerate()
            .map(|(i, key)| {
                input.get(key).cloned().ok_or_else(|| {
                    RunError::new(format!(
                        "argKeys[{i}] is {key:?}, which is not among the input keys; \
                         pass it as a parameter or produce it in an earlier operation"
                    ))
                })
            })
            .collect()
    }

    fn failure(&self, message: String, output: &str, error: &str) -> RunError {
        let mut results = BTreeMap::new();
        if let Some(key) = &self.result_key {
            results.insert(format!("operation.{key}.output"), output.to_owned());
            results.insert(format!("operation.{key}.error"), error.to_owned());
        }
        RunError { message, results }
    }

    /// Runs the script to completion or the deadline; blocking, so it runs on a
    /// blocking thread.
    fn run_blocking(&self, args: Vec<String>, timeout: Duration) -> Result<RunOutput, RunError> {
        let dir = tempfile::Builder::new()
            .prefix("operon-script-")
            .tempdir()
            .map_err(|e| RunError::new(format!("cannot create the run directory: {e}")))?;
        let path = dir.path().join("script");
        write_script(&path, &self.script)
            .map_err(|e| RunError::new(format!("cannot write the script: {e}")))?;

        let mut command = if self.script.starts_with("#!") {
            Command::new(&path)
        } else {
            let mut c = Command::new("/bin/sh");
            c.arg(&path);
            c
        };
        // One pipe for both streams keeps stdout and stderr interleaved as the user
        // would see them in a terminal (KubeDiag's combined output).
        let (reader, writer) =
            std::io::pipe().map_err(|e| RunError::new(format!("cannot create a pipe: {e}")))?;
        let writer_err = writer
            .try_clone()
            .map_err(|e| RunError::new(format!("cannot create a pipe: {e}")))?;
        command
            .args(&args)
            .current_dir(dir.path())
            .env_clear()
            .env("PATH", SCRIPT_PATH)
            .env("HOME", dir.path())
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null())
            .stdout(writer)
            .stderr(writer_err)
            .process_group(0);
        let started = Instant::now();
        let mut child = command
            .spawn()
            .map_err(|e| RunError::new(format!("cannot start the script: {e}")))?;
        // The parent's copies of the write end are gone with `command`, so the reader
        // sees EOF once every process of the group has exited or been killed.
        drop(command);
        let pgid = rustix::process::Pid::from_child(&child);
        let limit = self.output_limit;
        let collector = std::thread::spawn(move || read_bounded(reader, limit));

        let deadline = started + timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() >= deadline => break None,
                Ok(None) if collector.is_finished() => {
                    // Output overflowed (the reader stopped): stop the script now.
                    break None;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(2)),
                Err(e) => {
                    kill_group(pgid);
                    return Err(RunError::new(format!("cannot wait for the script: {e}")));
                }
            }
        };
        // Background children must not outlive the run, whatever the outcome.
        kill_group(pgid);
        let _ = child.wait();
        let (bytes, overflowed) = collector.join().unwrap_or_else(|_| (Vec::new(), false));
        let output = String::from_utf8_lossy(&bytes).into_owned();
        if overflowed {
            return Err(self.failure(
                format!("script output exceeded {limit} bytes; the script was killed"),
                &output,
                "output too large",
            ));
        }
        let Some(status) = status else {
            return Err(self.failure(
                format!(
                    "script timed out after {}; its process group was killed",
                    humantime::format_duration(timeout)
                ),
                &output,
                "timeout",
            ));
        };
        if !status.success() {
            let tail = output
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            return Err(self.failure(
                format!(
                    "script failed ({status}){}",
                    if tail.is_empty() {
                        String::new()
                    } else {
                        format!(": {tail}")
                    }
                ),
                &output,
                &status.to_string(),
            ));
        }
        let mut results = BTreeMap::new();
        if let Some(key) = &self.result_key {
            results.insert(format!("operation.{key}.output"), output.clone());
        }
        Ok(RunOutput { results, output })
    }
}

fn write_script(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    // Owner-only: other users must not read or replace what is about to run.
    let mut file = std::fs::File::options()
        .write(true)
        .create_new(true)
        .mode(0o700)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    file.set_permissions(std::fs::Permissions::from_mode(0o700))
}

/// Reads up to `limit` bytes; returns early, flagging the overflow, past it.
fn read_bounded(mut reader: impl std::io::Read, limit: usize) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match reader.read(&mut chunk) {
            Ok(0) | Err(_) => return (out, false),
            Ok(n) if out.len() + n > limit => {
                out.extend_from_slice(&chunk[..limit - out.len()]);
                return (out, true);
            }
            Ok(n) => out.extend_from_slice(&chunk[..n]),
        }
    }
}

fn kill_group(pgid: rustix::process::Pid) {
    // ESRCH (already gone) is the common, fine case.
    let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
}

impl Runner for ScriptRunner {
    fn run<'a>(&'a self, request: &'a RunRequest) -> BoxFuture<'a, Result<RunOutput, RunError>> {
        Box::pin(async move {
            let args = self.args(&request.input)?;
            let this = self.clone();
            let timeout = request.timeout;
            tokio::task::spawn_blocking(move || this.run_blocking(args, timeout))
                .await
                .map_err(|e| RunError::new(format!("script runner crashed: {e}")))?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(input: &[(&str, &str)], timeout: Duration) -> RunRequest {
        RunRequest {
            name: "t".to_owned(),
            input: input
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            results: BTreeMap::new(),
            node: None,
            namespace: None,
            owner: None,
            dry_run: false,
            timeout,
        }
    }

    fn run(runner: &ScriptRunner, req: &RunRequest) -> Result<RunOutput, RunError> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(runner.run(req))
    }

    #[test]
    fn arg_keys_become_positional_arguments_and_output_a_result() {
        let runner = ScriptRunner::new(
            "echo \"first=$1 second=$2\"; echo oops >&2".to_owned(),
            vec!["a".to_owned(), "b".to_owned()],
            Some("probe".to_owned()),
        );
        let out = run(
            &runner,
            &request(&[("a", "x y"), ("b", "z")], Duration::from_secs(5)),
        )
        .unwrap();
        assert_eq!(
            out.results["operation.probe.output"],
            "first=x y second=z\noops\n"
        );
    }

    #[test]
    fn a_missing_arg_key_is_an_error_not_a_shift() {
        let runner = ScriptRunner::new("echo $1".to_owned(), vec!["absent".to_owned()], None);
        let err = run(&runner, &request(&[], Duration::from_secs(5))).unwrap_err();
        assert!(err.message.contains("argKeys[0]"), "{}", err.message);
    }

    #[test]
    fn non_zero_exit_fails_and_keeps_kubediag_keys() {
        let runner = ScriptRunner::new(
            "echo partial; exit 3".to_owned(),
            vec![],
            Some("k".to_owned()),
        );
        let err = run(&runner, &request(&[], Duration::from_secs(5))).unwrap_err();
        assert!(err.message.contains("exit status: 3"), "{}", err.message);
        assert_eq!(err.results["operation.k.output"], "partial\n");
        assert!(err.results["operation.k.error"].contains('3'));
    }

    #[test]
    fn shebang_is_honoured() {
        let runner = ScriptRunner::new(
            "#!/bin/bash\necho \"${BASH_VERSION:+bash}\"".to_owned(),
            vec![],
            None,
        );
        let out = run(&runner, &request(&[], Duration::from_secs(5))).unwrap();
        assert_eq!(out.output, "bash\n");
    }

    #[test]
    fn timeout_kills_the_whole_group_including_background_children() {
        let marker = tempfile::tempdir().unwrap();
        let file = marker.path().join("survivor");
        let script = format!("(sleep 1; touch {}) & sleep 30", file.display());
        let runner = ScriptRunner::new(script, vec![], None);
        let started = Instant::now();
        let err = run(&runner, &request(&[], Duration::from_millis(200))).unwrap_err();
        assert!(err.message.contains("timed out"), "{}", err.message);
        assert!(started.elapsed() < Duration::from_secs(3));
        std::thread::sleep(Duration::from_millis(1500));
        assert!(!file.exists(), "a background child outlived the run");
    }

    #[test]
    fn flooding_output_is_stopped() {
        let runner = ScriptRunner::new("yes".to_owned(), vec![], None).with_output_limit(64 << 10);
        let err = run(&runner, &request(&[], Duration::from_secs(10))).unwrap_err();
        assert!(err.message.contains("exceeded"), "{}", err.message);
    }

    #[test]
    fn environment_is_cleared() {
        // SAFETY-free check: the runner passes only PATH, HOME and LANG.
        let runner = ScriptRunner::new(
            "env | cut -d= -f1 | sort | tr '\\n' ' '".to_owned(),
            vec![],
            None,
        );
        let out = run(&runner, &request(&[], Duration::from_secs(5))).unwrap();
        for name in out.output.split_whitespace() {
            assert!(
                ["HOME", "LANG", "PATH", "PWD", "SHLVL", "_", "OLDPWD"].contains(&name),
                "{name} leaked"
            );
        }
    }
}
