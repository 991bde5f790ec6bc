//! Helpers shared by the sandbox integration tests: the limits their calls run under
//! and a runtime to wait on a call.

use operon::sandbox::CallLimits;
use std::time::Duration;

/// Five seconds and 32 MiB: far above what the fixtures need, low enough that a
/// runaway guest is stopped quickly.
pub fn limits() -> CallLimits {
    CallLimits {
        timeout: Duration::from_secs(5),
        memory_bytes: 32 << 20,
        ..CallLimits::default()
    }
}

/// Runs `fut` to completion on a fresh current-thread runtime with timers.
pub fn block_on<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(fut)
}
