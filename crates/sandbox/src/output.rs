//! Bounded capture of a guest's stdout and stderr.
//!
//! A guest that writes past the bound is stopped with a trap and the run fails with
//! "output too large": keeping the first bytes and silently dropping the rest would hide
//! what the guest was doing when it misbehaved.

use bytes::Bytes;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// A capped in-memory output stream shared between the WASI context and the host.
#[derive(Debug, Clone)]
pub(crate) struct BoundedOutput {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    capacity: usize,
    buffer: Mutex<Vec<u8>>,
    /// Set when the guest tried to write past `capacity`.
    overflowed: AtomicBool,
}

impl BoundedOutput {
    /// An empty stream that accepts at most `capacity` bytes.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                capacity,
                buffer: Mutex::new(Vec::new()),
                overflowed: AtomicBool::new(false),
            }),
        }
    }

    /// The bound this stream was created with.
    pub(crate) fn capacity(&self) -> usize {
        self.inner.capacity
    }

    /// Whether the guest tried to write more than the bound.
    pub(crate) fn overflowed(&self) -> bool {
        self.inner.overflowed.load(Ordering::Relaxed)
    }

    /// What was written so far, decoded lossily as UTF-8.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.lock()).into_owned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        // A poisoned buffer still holds valid bytes; the panic that poisoned it is
        // reported elsewhere.
        self.inner.buffer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends `bytes`, or records the overflow and refuses them.
    fn append(&self, bytes: &[u8]) -> Result<(), StreamError> {
        let mut buffer = self.lock();
        if bytes.len() > self.inner.capacity - buffer.len() {
            self.inner.overflowed.store(true, Ordering::Relaxed);
            return Err(StreamError::Trap(wasmtime::format_err!(
                "output exceeded {} bytes",
                self.inner.capacity
            )));
        }
        buffer.extend_from_slice(bytes);
        Ok(())
    }
}

impl IsTerminal for BoundedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for BoundedOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for BoundedOutput {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.append(&bytes)
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        // Always offer room for one more write so that a guest that floods the stream
        // reaches `write` and is stopped there, instead of blocking on a full stream.
        let used = self.lock().len();
        Ok((self.inner.capacity - used).max(1))
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for BoundedOutput {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for BoundedOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(
            self.append(buf)
                .map(|()| buf.len())
                .map_err(|_| std::io::Error::other("output limit exceeded")),
        )
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_bytes_up_to_the_bound_then_flags_overflow() {
        let mut out = BoundedOutput::new(8);
        assert!(out.write(Bytes::from_static(b"hello")).is_ok());
        assert!(!out.overflowed());
        assert!(out.write(Bytes::from_static(b"world")).is_err());
        assert!(out.overflowed());
        assert_eq!(out.text(), "hello");
        assert_eq!(out.capacity(), 8);
    }
}
