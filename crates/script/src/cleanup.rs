//! Naming runs' directories and removing them off the runs' path: a thread per sandbox
//! takes finished ones one at a time, and whatever is still queued when the sandbox is
//! dropped is removed then, so that a short-lived process (`operon run`, `operon hook
//! test`) leaves nothing behind.
//!
//! Names are reused: a directory's name is handed out again once the directory is gone.
//! The kernel keeps the name of a removed file as a negative dentry, charged to the
//! engine's memory cgroup and reclaimed only under pressure; with a fresh name per run,
//! a controller running scripts all day shows a working set that grows by about 200
//! bytes a run. With reused names it stays at the few names that were ever in use at once.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

/// The queue of directories to remove, shared by a sandbox, its runs and its thread.
#[derive(Debug, Default)]
pub(crate) struct Cleaner {
    state: Mutex<State>,
    queued: Condvar,
}

#[derive(Debug, Default)]
struct State {
    pending: VecDeque<(PathBuf, u64)>,
    /// Names (numbers) whose directory is gone, handed out again first.
    free: Vec<u64>,
    /// The next number never handed out.
    next: u64,
    /// Whether the thread runs; without one, removals happen in the caller.
    running: bool,
    /// Set when the sandbox is gone: the thread ends and removals happen in the caller.
    closed: bool,
    /// Whether the thread is removing a directory.
    busy: bool,
}

impl Cleaner {
    /// A cleaner with its thread, or removing in the caller if no thread can start.
    pub(crate) fn start() -> Arc<Self> {
        let cleaner = Arc::new(Self::default());
        let worker = Arc::downgrade(&cleaner);
        let started = std::thread::Builder::new()
            .name("operon-sandbox-clean".to_owned())
            .spawn(move || {
                while let Some((dir, name)) = next(&worker) {
                    let removed = remove(&dir);
                    if let Some(cleaner) = worker.upgrade() {
                        let mut state = cleaner.lock();
                        state.busy = false;
                        if removed {
                            state.free.push(name);
                        }
                        drop(state);
                        cleaner.queued.notify_all();
                    }
                }
            });
        cleaner.lock().running = started.is_ok();
        cleaner
    }

    /// A number for a new run's directory name: one whose directory is gone, else a
    /// new one. A number that turns out to be taken (by another sandbox on the same
    /// path, or by an engine that died) is simply not given back.
    pub(crate) fn name(&self) -> u64 {
        let mut state = self.lock();
        state.free.pop().unwrap_or_else(|| {
            state.next += 1;
            state.next - 1
        })
    }

    /// Gives back `name`, whose directory is gone or was never created.
    pub(crate) fn unused(&self, name: u64) {
        self.lock().free.push(name);
    }

    /// Removes `dir`, named with `name`, later on the thread when it runs; `name` is
    /// handed out again once the directory is gone.
    pub(crate) fn remove(&self, dir: PathBuf, name: u64) {
        {
            let mut state = self.lock();
            if state.running && !state.closed {
                state.pending.push_back((dir, name));
                self.queued.notify_one();
                return;
            }
        }
        self.remove_now(&dir, name);
    }

    /// Removes `dir` in the caller and gives `name` back once it is gone.
    fn remove_now(&self, dir: &Path, name: u64) {
        if remove(dir) {
            self.unused(name);
        }
    }

    /// Ends the thread and removes what it had not yet, once the one it is removing,
    /// if any, is gone.
    pub(crate) fn close(&self) {
        let pending = {
            let mut state = self.lock();
            state.closed = true;
            self.queued.notify_all();
            while state.busy {
                state = self.queued.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            std::mem::take(&mut state.pending)
        };
        for (dir, name) in pending {
            self.remove_now(&dir, name);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The next directory for the thread; `None` once the sandbox closed the cleaner.
fn next(cleaner: &std::sync::Weak<Cleaner>) -> Option<(PathBuf, u64)> {
    let cleaner = cleaner.upgrade()?;
    let mut state = cleaner.lock();
    loop {
        if state.closed {
            return None;
        }
        if let Some(dir) = state.pending.pop_front() {
            state.busy = true;
            return Some(dir);
        }
        state = cleaner
            .queued
            .wait(state)
            .unwrap_or_else(|e| e.into_inner());
    }
}

/// Whether `dir` is gone, so that its name can be used again.
fn remove(dir: &Path) -> bool {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot remove a finished run's directory");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queued_directories_are_removed_and_none_is_left_at_close() {
        let root = tempfile::tempdir().unwrap();
        let dirs: Vec<PathBuf> = (0..50)
            .map(|i| {
                let dir = root.path().join(format!("run-{i}"));
                std::fs::create_dir_all(dir.join("work")).unwrap();
                std::fs::write(dir.join("work/out"), "x").unwrap();
                dir
            })
            .collect();
        let cleaner = Cleaner::start();
        for (i, dir) in dirs.iter().enumerate() {
            cleaner.remove(dir.clone(), i as u64);
        }
        // Whatever the thread did not reach yet goes now.
        cleaner.close();
        let left: Vec<&PathBuf> = dirs.iter().filter(|d| d.exists()).collect();
        assert!(left.is_empty(), "left behind: {left:?}");
        // After close, removal happens in the caller.
        let late = root.path().join("late");
        std::fs::create_dir(&late).unwrap();
        cleaner.remove(late.clone(), 50);
        assert!(!late.exists());
    }

    #[test]
    fn a_name_comes_back_once_its_directory_is_gone() {
        let root = tempfile::tempdir().unwrap();
        let cleaner = Cleaner::start();
        let (first, second) = (cleaner.name(), cleaner.name());
        assert_ne!(first, second);
        let dir = root.path().join("first");
        std::fs::create_dir_all(dir.join("work")).unwrap();
        cleaner.remove(dir.clone(), first);
        cleaner.close();
        assert!(!dir.exists());
        assert_eq!(
            cleaner.name(),
            first,
            "the removed directory's name is reused"
        );
        // A name never used comes back as well; one whose removal failed does not.
        cleaner.unused(second);
        assert_eq!(cleaner.name(), second);
        let third = cleaner.name();
        assert!(third > second, "a new name once none is free");
    }
}
