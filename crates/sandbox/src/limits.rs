//! The limits of one call and the memory limiter that enforces them.

use std::path::PathBuf;
use std::time::Duration;
use wasmtime::ResourceLimiter;

/// Everything one call may consume. A guest that exceeds any of these is stopped and
/// the call fails with an error naming the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallLimits {
    /// Wall-clock budget of the call, instantiation included.
    pub timeout: Duration,
    /// Linear memory plus tables the guest may hold, across all its instances.
    pub memory_bytes: u64,
    /// Bytes the guest may write to stdout.
    pub stdout_bytes: usize,
    /// Bytes the guest may write to stderr.
    pub stderr_bytes: usize,
    /// Bytes of results and output text the guest may return.
    pub result_bytes: usize,
    /// Bytes of log messages and fields the guest may emit.
    pub log_bytes: usize,
    /// Patch operations the guest may submit.
    pub patch_operations: usize,
    /// Bytes of JSON and filters across the submitted patch operations.
    pub patch_bytes: usize,
    /// Metric operations the guest may submit.
    pub metric_operations: usize,
    /// Host directories the guest may read, read-only (an Operation's
    /// `wasm.readOnlyPaths`). Empty by default: no files at all.
    pub read_only_dirs: Vec<ReadOnlyDir>,
}

/// A host directory a guest may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOnlyDir {
    /// Where it is in this process' filesystem.
    pub host: PathBuf,
    /// The path the guest opens it by (the node's path, where the node's filesystem is
    /// mounted elsewhere).
    pub guest: String,
}

impl Default for CallLimits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            memory_bytes: 64 << 20,
            stdout_bytes: 1 << 20,
            stderr_bytes: 1 << 20,
            result_bytes: 1 << 20,
            log_bytes: 1 << 20,
            // A hook's Synchronization may label every object of a big cluster in one
            // run (10,000 Pods is about 1.5 MB of merge patches): the bytes bound the
            // memory, the count only a runaway loop of tiny operations.
            patch_operations: 100_000,
            patch_bytes: 16 << 20,
            metric_operations: 10_000,
            read_only_dirs: Vec::new(),
        }
    }
}

/// Caps the memory of one store and remembers whether a growth was refused, so a
/// guest that aborts after a failed allocation is reported as out of memory rather
/// than as a generic trap.
#[derive(Debug)]
pub(crate) struct MemoryLimiter {
    limit: u64,
    used: u64,
    /// The largest total the guest asked for and was refused.
    refused: Option<u64>,
}

impl MemoryLimiter {
    /// A limiter allowing `limit` bytes in total.
    pub(crate) fn new(limit: u64) -> Self {
        Self {
            limit,
            used: 0,
            refused: None,
        }
    }

    /// The linear memory and tables the guest holds now.
    pub(crate) fn used(&self) -> u64 {
        self.used
    }

    /// The total the guest asked for when it was refused, if it ever was.
    pub(crate) fn refused(&self) -> Option<u64> {
        self.refused
    }

    fn grow(&mut self, current: u64, desired: u64) -> bool {
        let wanted = self.used.saturating_add(desired.saturating_sub(current));
        if wanted > self.limit {
            self.refused = Some(self.refused.map_or(wanted, |r| r.max(wanted)));
            return false;
        }
        self.used = wanted;
        true
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if maximum.is_some_and(|max| desired > max) {
            return Ok(false);
        }
        Ok(self.grow(current as u64, desired as u64))
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if maximum.is_some_and(|max| desired > max) {
            return Ok(false);
        }
        // A table element is a pointer; count it so tables cannot dodge the limit.
        let size = std::mem::size_of::<usize>() as u64;
        Ok(self.grow(current as u64 * size, desired as u64 * size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_is_shared_across_memories_and_refusal_is_remembered() {
        let mut limiter = MemoryLimiter::new(100);
        assert!(limiter.memory_growing(0, 60, None).unwrap());
        assert!(limiter.memory_growing(0, 30, None).unwrap());
        assert!(!limiter.memory_growing(30, 50, None).unwrap());
        assert_eq!(limiter.refused(), Some(110));
        assert!(limiter.memory_growing(30, 40, None).unwrap());
    }
}
