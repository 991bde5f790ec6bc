//! Writing the serving certificate and key where the webhook server's `ReloadingCert`
//! reads them. Each file is replaced whole (written aside in the same directory,
//! synced, renamed over), so a reader sees the old content or the new, never half; a
//! file whose content is already right is left alone, so the server does not reload
//! for nothing. The key is never readable by others, not even while being written.

use std::fs::{self, File, Permissions};
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::Path;

/// Creates `dir` (owner-only) when it is missing.
pub(super) fn ensure_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Makes `path` hold `contents` with permissions `mode`; `Ok(false)` when it already
/// held them and nothing was written.
pub(super) fn write_if_changed(path: &Path, contents: &[u8], mode: u32) -> io::Result<bool> {
    match fs::read(path) {
        Ok(current) if current == contents => return Ok(false),
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    // tempfile creates the file 0600, so the key is private from its first byte.
    let mut tmp = tempfile::Builder::new()
        .prefix(".operon-")
        .tempfile_in(dir)?;
    tmp.as_file()
        .set_permissions(Permissions::from_mode(mode))?;
    tmp.write_all(contents)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    // The rename is durable only once the directory is synced.
    File::open(dir)?.sync_all()?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt as _;

    #[test]
    fn the_key_is_private_and_unchanged_content_is_not_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("tls.key");
        let cert = dir.path().join("tls.crt");
        assert!(write_if_changed(&key, b"key one", 0o600).unwrap());
        assert!(write_if_changed(&cert, b"cert one", 0o644).unwrap());
        let mode = |p: &Path| fs::metadata(p).unwrap().mode() & 0o777;
        assert_eq!(mode(&key), 0o600);
        assert_eq!(mode(&cert), 0o644);

        let before = fs::metadata(&key).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!write_if_changed(&key, b"key one", 0o600).unwrap());
        let after = fs::metadata(&key).unwrap();
        assert_eq!(after.ino(), before.ino(), "the file was replaced");
        assert_eq!(after.modified().unwrap(), before.modified().unwrap());

        assert!(write_if_changed(&key, b"key two", 0o600).unwrap());
        assert_eq!(fs::read(&key).unwrap(), b"key two");
        assert_ne!(fs::metadata(&key).unwrap().ino(), before.ino());
        assert_eq!(mode(&key), 0o600);
        // Nothing is left behind in the directory.
        let mut names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["tls.crt", "tls.key"]);
    }

    #[test]
    fn a_missing_directory_is_made_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/webhook-tls");
        ensure_dir(&nested).unwrap();
        ensure_dir(&nested).unwrap();
        assert_eq!(fs::metadata(&nested).unwrap().mode() & 0o777, 0o700);
    }
}
