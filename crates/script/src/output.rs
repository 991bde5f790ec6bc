//! The run's output: bounded capture of stdout and stderr, and the launcher's answer
//! line picked out of stdout before the program's own output starts.

use super::spec::{LaunchReport, READY_MARKER};
use std::os::fd::AsFd as _;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt as _;
use tokio::net::unix::pipe::Receiver;
use tokio::sync::watch;

/// One output pipe of a run, read until it closes or, once the run is reported
/// finished, until it is empty: then no writer is left but the launcher and `unshare`,
/// which write nothing more but hold the pipe until the kernel has torn the run's
/// namespaces down.
pub(super) struct Source {
    pipe: Receiver,
    finished: watch::Receiver<bool>,
}

impl Source {
    /// Reads `pipe`; `finished` turns true when nothing but the launcher is left.
    pub(super) fn new(pipe: Receiver, finished: watch::Receiver<bool>) -> Self {
        Self { pipe, finished }
    }

    /// The next bytes into `buf`; `None` at the end.
    async fn read(&mut self, buf: &mut [u8]) -> Option<usize> {
        let Self { pipe, finished } = self;
        let finished = async {
            if finished.wait_for(|f| *f).await.is_err() {
                // The run was abandoned without an end: only the pipe's closing ends it.
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            biased;
            read = pipe.read(buf) => match read {
                Ok(0) | Err(_) => None,
                Ok(n) => Some(n),
            },
            // Everything written is in the pipe already: read it without waiting for
            // the reactor, which may not have seen it yet.
            () = finished => loop {
                match rustix::io::read(pipe.as_fd(), &mut *buf) {
                    Ok(0) => break None,
                    Ok(n) => break Some(n),
                    Err(rustix::io::Errno::INTR) => {}
                    Err(_) => break None,
                }
            },
        }
    }
}

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
    mut reader: Source,
    limit: usize,
    report_tx: tokio::sync::oneshot::Sender<LaunchReport>,
    overflow: Arc<tokio::sync::Notify>,
) -> (Vec<u8>, bool) {
    let mut pending = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    let marker = READY_MARKER.as_bytes();
    let rest = loop {
        let Some(n) = reader.read(&mut chunk).await else {
            return (Vec::new(), false);
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
    keep_bounded(reader, rest, chunk, limit, &overflow).await
}

/// Keeps at most `limit` bytes of `reader`, signalling `overflow` past that.
pub(super) async fn read_bounded(
    reader: Source,
    limit: usize,
    overflow: Arc<tokio::sync::Notify>,
) -> (Vec<u8>, bool) {
    keep_bounded(reader, Vec::new(), vec![0u8; 64 << 10], limit, &overflow).await
}

/// Keeps `start` and then what `reader` gives, at most `limit` bytes in all, reading
/// into `chunk`; signals `overflow` past that.
async fn keep_bounded(
    mut reader: Source,
    start: Vec<u8>,
    mut chunk: Vec<u8>,
    limit: usize,
    overflow: &tokio::sync::Notify,
) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    if push_bounded(&mut out, &start, limit) {
        overflow.notify_one();
        return (out, true);
    }
    loop {
        let Some(n) = reader.read(&mut chunk).await else {
            return (out, false);
        };
        if push_bounded(&mut out, &chunk[..n], limit) {
            overflow.notify_one();
            return (out, true);
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
    async fn a_finished_run_is_read_to_the_end_of_what_was_written() {
        let (mut writer, pipe) = tokio::net::unix::pipe::pipe().unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut writer, b"last words")
            .await
            .unwrap();
        let (finish, finished) = watch::channel(false);
        finish.send(true).unwrap();
        // The writer stays open, as the launcher's copy does until it is reaped.
        let (out, overflow) = read_bounded(
            Source::new(pipe, finished),
            1024,
            Arc::new(tokio::sync::Notify::new()),
        )
        .await;
        assert_eq!(out, b"last words");
        assert!(!overflow);
        drop(writer);
    }

    #[tokio::test]
    async fn the_preamble_before_the_marker_is_dropped() {
        let report = serde_json::to_string(&LaunchReport::default()).unwrap();
        let stream = format!("running 1 test\n{READY_MARKER}{report}\nhello\n");
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (mut writer, pipe) = tokio::net::unix::pipe::pipe().unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut writer, stream.as_bytes())
            .await
            .unwrap();
        drop(writer);
        let (_finish, finished) = watch::channel(false);
        let (out, overflow) = read_marked(
            Source::new(pipe, finished),
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
