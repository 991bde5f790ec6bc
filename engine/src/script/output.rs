//! The run's output: bounded capture of stdout and stderr, and the launcher's answer
//! line picked out of stdout before the program's own output starts.

use super::spec::{LaunchReport, READY_MARKER};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt as _};

/// How long the engine waits for the output pipes to close after the run ended.
pub(super) const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// Junk allowed before the launcher's answer line (a test harness banner).
const MAX_PREAMBLE: usize = 64 << 10;

pub(super) async fn drain(task: tokio::task::JoinHandle<(Vec<u8>, bool)>) -> (Vec<u8>, bool) {
    // Without a pid namespace an escaped process could hold the pipe open forever.
    match tokio::time::timeout(DRAIN_GRACE, task).await {
        Ok(Ok(result)) => result,
        _ => (Vec::new(), false),
    }
}

/// Reads stdout: skips to the launcher's answer line, hands the report over, then keeps
/// at most `limit` bytes of the program's output.
pub(super) async fn read_marked(
    mut reader: impl AsyncRead + Unpin,
    limit: usize,
    report_tx: tokio::sync::oneshot::Sender<LaunchReport>,
    overflow: Arc<tokio::sync::Notify>,
) -> (Vec<u8>, bool) {
    let mut pending = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    let marker = READY_MARKER.as_bytes();
    let rest = loop {
        let n = match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => return (Vec::new(), false),
            Ok(n) => n,
        };
        pending.extend_from_slice(&chunk[..n]);
        if let Some(start) = find(&pending, marker)
            && let Some(end) = pending[start..].iter().position(|b| *b == b'\n')
        {
            let line = &pending[start + marker.len()..start + end];
            if let Ok(report) = serde_json::from_slice::<LaunchReport>(line) {
                let _ = report_tx.send(report);
            }
            break pending.split_off(start + end + 1);
        }
        if pending.len() > MAX_PREAMBLE + marker.len() + (64 << 10) {
            overflow.notify_one();
            return (Vec::new(), true);
        }
    };
    let mut out = Vec::new();
    if push_bounded(&mut out, &rest, limit) {
        overflow.notify_one();
        return (out, true);
    }
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => return (out, false),
            Ok(n) => {
                if push_bounded(&mut out, &chunk[..n], limit) {
                    overflow.notify_one();
                    return (out, true);
                }
            }
        }
    }
}

/// Keeps at most `limit` bytes of `reader`, signalling `overflow` past that.
pub(super) async fn read_bounded(
    mut reader: impl AsyncRead + Unpin,
    limit: usize,
    overflow: Arc<tokio::sync::Notify>,
) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => return (out, false),
            Ok(n) => {
                if push_bounded(&mut out, &chunk[..n], limit) {
                    overflow.notify_one();
                    return (out, true);
                }
            }
        }
    }
}

/// Appends up to `limit` bytes in total; true when `bytes` did not fit.
fn push_bounded(out: &mut Vec<u8>, bytes: &[u8], limit: usize) -> bool {
    let room = limit.saturating_sub(out.len());
    if bytes.len() > room {
        out.extend_from_slice(&bytes[..room]);
        return true;
    }
    out.extend_from_slice(bytes);
    false
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_push_reports_overflow() {
        let mut out = Vec::new();
        assert!(!push_bounded(&mut out, b"abc", 4));
        assert!(push_bounded(&mut out, b"de", 4));
        assert_eq!(out, b"abcd");
    }

    #[tokio::test]
    async fn the_preamble_before_the_marker_is_dropped() {
        let report = serde_json::to_string(&LaunchReport::default()).unwrap();
        let stream = format!("running 1 test\n{READY_MARKER}{report}\nhello\n");
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (out, overflow) = read_marked(
            stream.as_bytes(),
            1024,
            tx,
            Arc::new(tokio::sync::Notify::new()),
        )
        .await;
        assert_eq!(out, b"hello\n");
        assert!(!overflow);
        assert!(rx.await.is_ok());
    }
}
