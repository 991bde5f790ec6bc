//! Node collector: the node agent's built-in `processCollector` and
//! `mountInfoCollector` (KubeDiag's processor paths), as a wasm operation that reads
//! `/proc`, the only directory its Operation grants (read-only).
//!
//! Parameters:
//! - `collect`: `processes` or `mounts` (the agent's built-in sets it);
//! - `proc`: where procfs is (default `/proc`).
//!
//! Results, with KubeDiag's keys:
//! - `collector.system.process.list`: a JSON array of the processes the agent's PID
//!   namespace shows (the node's when the agent runs with `hostPID`), each with `pid`,
//!   `ppid`, `tgid`, `name`, `command` (the command line's arguments), `status` (the
//!   state letter), `createTime` (RFC 3339, UTC), `cpuPercent` (CPU time over
//!   lifetime), `nice` and `memoryInfo` (`rss`, `vms`, `hwm`, `data`, `stack`, `locked`,
//!   `swap`, in bytes);
//! - `collector.system.mountinfo`: a JSON array of the mounts of PID 1's mount namespace
//!   (the node's, with `hostPID`; else the agent's own), with the fields of
//!   `/proc/<pid>/mountinfo` under the names KubeDiag returned (`ID`, `Parent`,
//!   `Major`, `Minor`, `Root`, `Mountpoint`, `Options`, `Optional`, `FSType`, `Source`,
//!   `VFSOptions`).
//!
//! A process that exits while the list is read is left out; a process whose files do
//! not parse is left out and counted in the output text.

mod mounts;
mod processes;

use operon_sdk::{Error, Input, Output, bail};
use std::path::PathBuf;

/// The result key of the process list.
pub const PROCESS_LIST: &str = "collector.system.process.list";
/// The result key of the mount list.
pub const MOUNT_INFO: &str = "collector.system.mountinfo";

fn run(input: Input) -> Result<Output, Error> {
    let proc = PathBuf::from(input.param("proc").unwrap_or("/proc"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    match input.param("collect") {
        Some("processes") => {
            let list = processes::collect(&proc, now)?;
            let text = list.summary();
            Ok(Output::new()
                .result(PROCESS_LIST, serde_json::Value::Array(list.processes))
                .output(text))
        }
        Some("mounts") => {
            let mounts = mounts::collect(&proc)?;
            let text = format!("{} mounts", mounts.len());
            Ok(Output::new()
                .result(MOUNT_INFO, serde_json::Value::Array(mounts))
                .output(text))
        }
        Some(other) => bail!("parameter `collect` must be processes or mounts, got {other:?}"),
        None => bail!("missing required parameter `collect` (processes or mounts)"),
    }
}

operon_sdk::operation!(run);
