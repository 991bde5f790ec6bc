//! The control channel between the engine and one launcher: a unix socket that is the
//! launcher's stdin, carrying the [`LaunchSpec`](super::spec::LaunchSpec) as JSON and,
//! with its first bytes, the descriptors the engine hands over; back the other way, the
//! program's exit status once nothing of the run is left.
//!
//! A socket rather than a pipe because a launcher waiting in a pool was started before
//! its run was known: whatever the run needs that the launcher cannot open itself (a
//! hooks directory below a directory the run's uid may not enter) has to travel with
//! the spec, as an open descriptor.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// The most descriptors one spec may carry.
pub(crate) const MAX_HANDED: usize = 16;

/// A connected pair: the engine keeps the first, the launcher gets the second as stdin.
pub(crate) fn pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType, socketpair};
    Ok(socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// Sends `spec` with `fds` attached to its first bytes, then closes the sending side so
/// the launcher sees the end of the spec.
///
/// Blocking: the launcher is already waiting and reads the whole spec before it does
/// anything else, so this completes at memory speed.
pub(crate) fn send(socket: &OwnedFd, spec: &[u8], fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, Shutdown, sendmsg};
    if fds.len() > MAX_HANDED {
        return Err(std::io::Error::other(format!(
            "{} descriptors to hand over, at most {MAX_HANDED}",
            fds.len()
        )));
    }
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_HANDED))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(std::io::Error::other("the descriptors do not fit"));
    }
    // The descriptors ride on the first byte at least, so an empty spec still has one.
    let mut sent = sendmsg(
        socket,
        &[IoSlice::new(spec)],
        &mut control,
        SendFlags::NOSIGNAL,
    )?;
    while sent < spec.len() {
        sent += rustix::net::send(socket, &spec[sent..], SendFlags::NOSIGNAL)?;
    }
    rustix::net::shutdown(socket, Shutdown::Write)?;
    Ok(())
}

/// Receives a spec of at most `limit` bytes and the descriptors sent with it; the
/// descriptors are close-on-exec.
pub(crate) fn receive(
    socket: BorrowedFd<'_>,
    limit: usize,
) -> Result<(Vec<u8>, Vec<OwnedFd>), String> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, recvmsg};
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_HANDED))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut spec = Vec::new();
    let mut fds = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let message = recvmsg(
            socket.as_fd(),
            &mut [IoSliceMut::new(&mut chunk)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        );
        let message = match message {
            Ok(message) => message,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(format!("cannot read the launch spec: {e}")),
        };
        for item in control.drain() {
            if let RecvAncillaryMessage::ScmRights(received) = item {
                fds.extend(received);
            }
        }
        if message.flags.contains(ReturnFlags::CTRUNC) {
            return Err("the launch spec carried too many descriptors".to_owned());
        }
        if message.bytes == 0 {
            return Ok((spec, fds));
        }
        spec.extend_from_slice(&chunk[..message.bytes]);
        if spec.len() > limit {
            return Err(format!("the launch spec is larger than {limit} bytes"));
        }
    }
}

/// The size of a status message: the program's exit code as a little-endian `i32`.
const STATUS_BYTES: usize = 4;

/// Sends the run's exit code back to the engine, on the launcher's end.
pub(crate) fn send_status(socket: BorrowedFd<'_>, code: i32) -> std::io::Result<()> {
    use rustix::net::{SendFlags, send};
    let bytes = code.to_le_bytes();
    let mut sent = 0;
    while sent < bytes.len() {
        match send(socket, &bytes[sent..], SendFlags::NOSIGNAL) {
            Ok(n) => sent += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Waits for the launcher's status message on the engine's end; `None` when the
/// launcher closed the channel without one (it failed, was killed, or had no pid
/// namespace to make sure nothing of the run was left).
pub(crate) async fn receive_status(socket: &OwnedFd) -> Option<i32> {
    let socket = socket.try_clone().ok()?;
    rustix::io::ioctl_fionbio(&socket, true).ok()?;
    // The deprecation is about types whose raw descriptor may change or close while
    // registered; an owned descriptor, moved in, does neither.
    #[allow(deprecated)]
    let socket =
        tokio::io::unix::AsyncFd::with_interest(socket, tokio::io::Interest::READABLE).ok()?;
    let mut bytes = [0u8; STATUS_BYTES];
    let mut got = 0;
    while got < STATUS_BYTES {
        let mut ready = socket.readable().await.ok()?;
        match ready.try_io(|fd| Ok(rustix::io::read(fd, &mut bytes[got..])?)) {
            Ok(Ok(0)) | Ok(Err(_)) => return None,
            Ok(Ok(n)) => got += n,
            Err(_would_block) => {}
        }
    }
    Some(i32::from_le_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_and_its_descriptors_arrive_together() {
        let (engine, launcher) = pair().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("probe"), "inside").unwrap();
        let handed = std::fs::File::open(dir.path()).unwrap();
        // Larger than one read, so the rest arrives without descriptors.
        let spec = vec![b'x'; 200 << 10];
        let sender = {
            let spec = spec.clone();
            std::thread::spawn(move || send(&engine, &spec, &[handed.as_fd()]))
        };
        let (received, fds) = receive(launcher.as_fd(), 1 << 20).unwrap();
        sender.join().unwrap().unwrap();
        assert_eq!(received, spec);
        assert_eq!(fds.len(), 1);
        let text = std::fs::read_to_string(format!(
            "/proc/self/fd/{}/probe",
            std::os::fd::AsRawFd::as_raw_fd(&fds[0])
        ))
        .unwrap();
        assert_eq!(text, "inside");
    }

    #[test]
    fn an_oversized_spec_is_refused() {
        let (engine, launcher) = pair().unwrap();
        let sender = std::thread::spawn(move || send(&engine, &[b'x'; 4096], &[]));
        assert!(receive(launcher.as_fd(), 100).is_err());
        drop(launcher);
        let _ = sender.join();
    }
}
