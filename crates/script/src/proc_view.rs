//! The `/proc` a run sees when it cannot have a private one.
//!
//! In a container the runtime masks parts of `/proc`, and the kernel then refuses a new
//! proc mount in a user namespace: the run's pid namespace exists, but the only `/proc`
//! it could see is the pod's, listing the engine and every other run with their command
//! lines. Landlock keeps that one unreadable; tools that read the mount table (`df`,
//! `findmnt`) or the machine's figures (`free`, `uptime`, `nproc`) would fail on it.
//! So the launcher mounts a small read-only tmpfs over `/proc` holding copies, taken as
//! the run starts, of its own mount table and of the machine's memory, CPU, load and
//! uptime figures. No process is listed in it, and nothing in it changes during the run.

use std::path::Path;

/// Files copied from the real `/proc`, by their path below it.
const COPIED: &[&str] = &[
    "meminfo",
    "cpuinfo",
    "loadavg",
    "uptime",
    "stat",
    "version",
    "filesystems",
    "self/mounts",
    "self/mountinfo",
];

/// The tmpfs's size: every copy is far smaller.
const SIZE: &std::ffi::CStr = c"size=4m,mode=0555";

/// Replaces `/proc` in this (the run's) mount namespace with the copies; the reason when
/// it could not.
pub(super) fn mount_snapshot() -> Result<(), String> {
    use rustix::mount::{MountFlags, mount, mount_remount};
    let proc = Path::new("/proc");
    // Read before the mount covers them.
    let copies: Vec<(&str, Vec<u8>)> = COPIED
        .iter()
        .filter_map(|name| Some((*name, std::fs::read(proc.join(name)).ok()?)))
        .collect();
    let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    mount("operon-proc", proc, "tmpfs", flags, SIZE)
        .map_err(|e| format!("cannot mount a tmpfs on /proc: {e}"))?;
    let write = || -> std::io::Result<()> {
        std::fs::create_dir(proc.join("self"))?;
        for (name, bytes) in &copies {
            std::fs::write(proc.join(name), bytes)?;
        }
        std::os::unix::fs::symlink("self/mounts", proc.join("mounts"))
    };
    write().map_err(|e| format!("cannot fill the /proc snapshot: {e}"))?;
    mount_remount(proc, flags | MountFlags::RDONLY, SIZE)
        .map_err(|e| format!("cannot make the /proc snapshot read-only: {e}"))
}
