//! The process list: one entry per numeric directory of procfs, from its `stat`,
//! `status` and `cmdline`.

use operon_sdk::Error;
use serde_json::{Value, json};
use std::path::Path;

/// Clock ticks per second of `stat`'s times: USER_HZ, 100 on every architecture
/// Kubernetes nodes run (a guest cannot ask `sysconf`).
const TICKS_PER_SECOND: f64 = 100.0;

/// The processes read, and how many could not be parsed.
pub struct ProcessList {
    /// One JSON object per process, by pid.
    pub processes: Vec<Value>,
    /// Processes whose files did not parse.
    pub unreadable: usize,
}

impl ProcessList {
    /// A line for the output text: how many, and the largest by resident memory.
    pub fn summary(&self) -> String {
        let largest = self
            .processes
            .iter()
            .max_by_key(|p| p["memoryInfo"]["rss"].as_u64().unwrap_or(0));
        let mut text = format!("{} processes", self.processes.len());
        if let Some(p) = largest {
            text.push_str(&format!(
                "; largest resident: {} (pid {}) at {} KiB",
                p["name"].as_str().unwrap_or("?"),
                p["pid"],
                p["memoryInfo"]["rss"].as_u64().unwrap_or(0) / 1024
            ));
        }
        if self.unreadable > 0 {
            text.push_str(&format!("; {} could not be parsed", self.unreadable));
        }
        text
    }
}

/// How many times the listing is read again after a process vanished mid-listing.
const LISTING_ATTEMPTS: usize = 5;

/// The pids of `proc`. A process that exits while the directory is read makes the host
/// fail that entry, and the standard library ends the listing at the first failure: on a
/// busy node that cut the list short, so it is read again (the gone process no longer
/// listed), keeping every pid seen.
fn list_pids(proc: &Path) -> Result<Vec<u32>, Error> {
    let mut pids = std::collections::BTreeSet::new();
    for _ in 0..LISTING_ATTEMPTS {
        let entries = std::fs::read_dir(proc)
            .map_err(|e| Error::new(format!("cannot list {}: {e}", proc.display())))?;
        let mut complete = true;
        for entry in entries {
            match entry {
                Ok(entry) => {
                    if let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) {
                        pids.insert(pid);
                    }
                }
                Err(_) => {
                    complete = false;
                    break;
                }
            }
        }
        if complete {
            break;
        }
    }
    Ok(pids.into_iter().collect())
}

/// Reads every process under `proc`; `now` is the wall clock in seconds since the epoch.
pub fn collect(proc: &Path, now: f64) -> Result<ProcessList, Error> {
    let boot_time = std::fs::read_to_string(proc.join("stat"))
        .map_err(|e| Error::new(format!("cannot read {}/stat: {e}", proc.display())))?
        .lines()
        .find_map(|line| line.strip_prefix("btime ")?.trim().parse::<f64>().ok())
        .ok_or_else(|| Error::new(format!("{}/stat has no btime line", proc.display())))?;
    // In pid order.
    let pids = list_pids(proc)?;
    let mut list = ProcessList {
        processes: Vec::with_capacity(pids.len()),
        unreadable: 0,
    };
    for pid in pids {
        let dir = proc.join(pid.to_string());
        // A process may exit between the listing and these reads: it is gone, not broken.
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
            continue;
        };
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
        match process(pid, &stat, &status, &cmdline, boot_time, now) {
            Some(p) => list.processes.push(p),
            None => list.unreadable += 1,
        }
    }
    Ok(list)
}

/// One process from the text of its files; `None` when `stat` does not parse.
pub fn process(
    pid: u32,
    stat: &str,
    status: &str,
    cmdline: &[u8],
    boot_time: f64,
    now: f64,
) -> Option<Value> {
    // The name is in parentheses and may itself hold spaces and parentheses: it ends at
    // the last ')'.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?;
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let number = |i: usize| fields.get(i)?.parse::<i64>().ok();
    let state = *fields.first()?;
    let ppid = number(1)?;
    let cpu_ticks = number(11)? + number(12)?;
    let nice = number(16)?;
    let start_ticks = number(19)?;
    let created = boot_time + start_ticks as f64 / TICKS_PER_SECOND;
    let lifetime = now - created;
    let cpu_percent = if lifetime > 0.0 {
        cpu_ticks as f64 / TICKS_PER_SECOND / lifetime * 100.0
    } else {
        0.0
    };
    let kib = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|line| {
                let rest = line.strip_prefix(key)?.strip_prefix(':')?;
                rest.split_whitespace().next()?.parse::<u64>().ok()
            })
            .unwrap_or(0)
            * 1024
    };
    let tgid = status
        .lines()
        .find_map(|line| line.strip_prefix("Tgid:")?.trim().parse::<u64>().ok())
        .unwrap_or(u64::from(pid));
    // Arguments end with a NUL each; a kernel thread has none.
    let mut command: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect();
    while command.last().is_some_and(String::is_empty) {
        command.pop();
    }
    Some(json!({
        "pid": pid,
        "ppid": ppid,
        "tgid": tgid,
        "name": name,
        "command": command,
        "status": state,
        "createTime": rfc3339(created),
        "cpuPercent": cpu_percent,
        "nice": nice,
        "memoryInfo": {
            "rss": kib("VmRSS"),
            "vms": kib("VmSize"),
            "hwm": kib("VmHWM"),
            "data": kib("VmData"),
            "stack": kib("VmStk"),
            "locked": kib("VmLck"),
            "swap": kib("VmSwap"),
        },
    }))
}

/// Seconds since the epoch as an RFC 3339 UTC timestamp (whole seconds).
pub fn rfc3339(seconds: f64) -> String {
    let total = seconds.max(0.0) as i64;
    let (days, secs) = (total.div_euclid(86_400), total.rem_euclid(86_400));
    // Civil date from days since 1970-01-01, in 400-year eras of 146,097 days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3_600,
        secs % 3_600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                        250 50 0 0 20 -5 1 0 10000 10000000 500 18446744073709551615";
    const STATUS: &str = "Name:\tmy\nTgid:\t4242\nVmSize:\t  9765 kB\nVmHWM:\t 2100 kB\n\
                          VmRSS:\t 2000 kB\nVmData:\t 300 kB\nVmStk:\t 132 kB\nVmLck:\t 0 kB\n\
                          VmSwap:\t 4 kB\n";

    #[test]
    fn a_process_is_read_from_its_files() {
        let boot = 1_700_000_000.0;
        // Started 100 s after boot (10,000 ticks), 300 ticks of CPU, 200 s alive.
        let p = process(
            4242,
            STAT,
            STATUS,
            b"/bin/my\0--flag\0x y\0",
            boot,
            boot + 300.0,
        )
        .unwrap();
        assert_eq!(p["name"], "my (odd) name");
        assert_eq!(p["ppid"], 1);
        assert_eq!(p["tgid"], 4242);
        assert_eq!(p["status"], "S");
        assert_eq!(p["nice"], -5);
        assert_eq!(p["command"], json!(["/bin/my", "--flag", "x y"]));
        assert_eq!(p["createTime"], "2023-11-14T22:15:00Z");
        assert!((p["cpuPercent"].as_f64().unwrap() - 1.5).abs() < 1e-9);
        assert_eq!(p["memoryInfo"]["rss"], 2000 * 1024);
        assert_eq!(p["memoryInfo"]["vms"], 9765 * 1024);
        assert_eq!(p["memoryInfo"]["swap"], 4 * 1024);
    }

    #[test]
    fn a_kernel_thread_has_no_command_line_and_no_memory() {
        let stat = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 2 0 0 0";
        let p = process(2, stat, "Name:\tkthreadd\n", b"", 0.0, 10.0).unwrap();
        assert_eq!(p["command"], json!([]));
        assert_eq!(p["memoryInfo"]["rss"], 0);
        assert_eq!(p["tgid"], 2, "the pid when status has no Tgid");
    }

    #[test]
    fn a_truncated_stat_is_not_a_process() {
        assert!(process(1, "1 (init) S 0", "", b"", 0.0, 1.0).is_none());
        assert!(process(1, "garbage", "", b"", 0.0, 1.0).is_none());
    }

    #[test]
    fn timestamps_are_utc_civil_dates() {
        assert_eq!(rfc3339(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400.0), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_478_400.0 + 86_399.0), "2026-11-24T23:59:59Z");
    }

    #[test]
    fn this_machine_s_processes_are_listed() {
        let list = collect(Path::new("/proc"), 2e9).unwrap();
        let me = std::process::id();
        assert!(
            list.processes.iter().any(|p| p["pid"] == me),
            "the test's own process is listed"
        );
        assert_eq!(list.unreadable, 0);
    }
}
