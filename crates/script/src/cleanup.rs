//! Removing finished runs' directories off the runs' path: a thread per sandbox takes
//! them one at a time, and whatever is still queued when the sandbox is dropped is
//! removed then, so that a short-lived process (`operon run`, `operon hook test`)
//! leaves nothing behind.

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
    pending: VecDeque<PathBuf>,
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
                while let Some(dir) = next(&worker) {
                    remove(&dir);
                    if let Some(cleaner) = worker.upgrade() {
                        cleaner.lock().busy = false;
                        cleaner.queued.notify_all();
                    }
                }
            });
        cleaner.lock().running = started.is_ok();
        cleaner
    }

    /// Removes `dir`, later on the thread when it runs.
    pub(crate) fn remove(&self, dir: PathBuf) {
        {
            let mut state = self.lock();
            if state.running && !state.closed {
                state.pending.push_back(dir);
                self.queued.notify_one();
                return;
            }
        }
        remove(&dir);
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
        for dir in pending {
            remove(&dir);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The next directory for the thread; `None` once the sandbox closed the cleaner.
fn next(cleaner: &std::sync::Weak<Cleaner>) -> Option<PathBuf> {
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

fn remove(dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(dir)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(dir = %dir.display(), error = %e, "cannot remove a finished run's directory");
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
        for dir in &dirs {
            cleaner.remove(dir.clone());
        }
        // Whatever the thread did not reach yet goes now.
        cleaner.close();
        let left: Vec<&PathBuf> = dirs.iter().filter(|d| d.exists()).collect();
        assert!(left.is_empty(), "left behind: {left:?}");
        // After close, removal happens in the caller.
        let late = root.path().join("late");
        std::fs::create_dir(&late).unwrap();
        cleaner.remove(late.clone());
        assert!(!late.exists());
    }
}
