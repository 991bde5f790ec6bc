//! Handing the heap's free memory back to the system in the long-running commands
//! (`operon serve`, `operon agent`), when the binary runs on glibc's allocator (built
//! with `--no-default-features`). On mimalloc, the default, the allocator returns the
//! pages it frees by itself, and these are no-ops.
//!
//! glibc's allocator gives each busy thread an arena of its own and keeps what is freed
//! there for later allocations. Under churn (Pods created, updated and deleted, hooks run
//! on whichever runtime thread is free) the arenas fill with free chunks between live
//! ones that trimming the top of each heap never reaches: the resident memory of
//! `operon serve` rose steadily while its live heap, measured with heaptrack, stayed
//! flat. `malloc_trim(0)` returns the free pages inside every arena; it cannot return
//! pages that hold a single live chunk, and each arena holds some, so the number of
//! arenas is capped as well.

/// How often the free memory is handed back: often enough that growth between two
/// trims stays small, rarely enough that the walk over the arenas costs nothing.
#[cfg(all(target_os = "linux", target_env = "gnu", not(feature = "mimalloc")))]
const EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// Caps glibc's arenas at one per CPU (at least two) unless `MALLOC_ARENA_MAX` or
/// `GLIBC_TUNABLES` says otherwise; glibc's default is eight per CPU. Called before the
/// runtime starts its threads, as arenas are made when threads first allocate.
///
/// Under the soak's churn on two CPUs, `operon serve` held about ten arenas of 2 to 5
/// MiB each; capped at two, its anonymous memory stayed lower and grew more slowly.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu", not(feature = "mimalloc")))]
    {
        let set_by_user = std::env::var_os("MALLOC_ARENA_MAX").is_some()
            || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max"));
        if set_by_user {
            return;
        }
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
        let cpus = libc::c_int::try_from(cpus).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets one of the allocator's parameters, under its lock;
        // it takes no pointer.
        #[allow(unsafe_code)]
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, cpus);
        }
    }
}

/// Trims the heap every `EVERY` until the runtime ends. A no-op where the C library
/// is not glibc, or the binary does not use it.
pub fn keep_trimmed() {
    #[cfg(all(target_os = "linux", target_env = "gnu", not(feature = "mimalloc")))]
    tokio::spawn(async {
        let mut every = tokio::time::interval(EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            // Takes each arena's lock in turn: off the runtime's threads.
            let _ = tokio::task::spawn_blocking(trim).await;
        }
    });
}

#[cfg(all(target_os = "linux", target_env = "gnu", not(feature = "mimalloc")))]
fn trim() {
    // SAFETY: malloc_trim only walks and releases the allocator's own free memory,
    // under the allocator's locks; it takes no pointer and may be called from any
    // thread at any time.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}
