//! A run's private directory: created for one run of the script sandbox, holding the
//! files the engine hands the run and its scratch directory, and given to the sandbox's
//! cleaner when dropped.

use super::cleanup::Cleaner;
use super::error::SandboxError;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The scratch directory's name inside a run directory.
const WORK_DIR: &str = "work";

/// A private run directory: 0700, owned by the run's uid, removed when dropped. Files
/// the engine puts here before the run are the only files the run may write besides its
/// scratch directory.
#[derive(Debug)]
pub struct RunDir {
    /// `run-N` in the runs' path, N a number the cleaner hands out again once the
    /// directory is gone.
    dir: PathBuf,
    name: u64,
    /// The run's host uid and gid when they differ from the engine's.
    owner: Option<(u32, u32)>,
    /// Removes the directory once the run is dropped.
    cleaner: Arc<Cleaner>,
}

impl Drop for RunDir {
    /// Leaves the removal to the sandbox's cleaner thread: a run's result is complete
    /// without it, and deleting a few files and directories costs a run's caller a
    /// quarter of a millisecond and more on a journalled file system.
    fn drop(&mut self) {
        self.cleaner
            .remove(std::mem::take(&mut self.dir), self.name);
    }
}

impl RunDir {
    /// Creates a fresh run directory `run-N` in `runs_dir` (N from `cleaner`) with an
    /// empty scratch directory, both 0700 and owned by `owner` when given.
    pub(crate) fn create(
        runs_dir: &Path,
        owner: Option<(u32, u32)>,
        cleaner: &Arc<Cleaner>,
    ) -> Result<Self, SandboxError> {
        use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
        let run = loop {
            let name = cleaner.name();
            let dir = runs_dir.join(format!("run-{name}"));
            // Only the engine can create entries in the runs' path (0711, its own),
            // and creating fails on anything already there, so a reused name is as
            // private as a random one.
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => {
                    break Self {
                        dir,
                        name,
                        owner,
                        cleaner: cleaner.clone(),
                    };
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(source) => {
                    cleaner.unused(name);
                    return Err(SandboxError::RunDir { path: dir, source });
                }
            }
        };
        std::fs::set_permissions(run.path(), std::fs::Permissions::from_mode(0o700)).map_err(
            |source| SandboxError::RunDir {
                path: run.path().to_owned(),
                source,
            },
        )?;
        let work = run.work_dir();
        let err = |path: &Path| {
            let path = path.to_owned();
            move |source| SandboxError::RunDir { path, source }
        };
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&work)
            .map_err(err(&work))?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(run.path(), Some(uid), Some(gid)).map_err(err(run.path()))?;
            std::os::unix::fs::chown(&work, Some(uid), Some(gid)).map_err(err(&work))?;
        }
        Ok(run)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The scratch directory: cwd, HOME and TMPDIR of the run.
    pub fn work_dir(&self) -> PathBuf {
        self.dir.join(WORK_DIR)
    }

    /// Creates `name` with `contents`, readable and writable by the run (0600), or
    /// executable (0700) when `executable`.
    pub fn create_file(
        &self,
        name: &str,
        contents: &[u8],
        executable: bool,
    ) -> Result<PathBuf, SandboxError> {
        self.write_file(name, executable, |file| file.write_all(contents))
    }

    /// Creates `name` as [`Self::create_file`] does, its contents written by `write`
    /// (through a buffer) as they are made.
    pub fn write_file(
        &self,
        name: &str,
        executable: bool,
        write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
    ) -> Result<PathBuf, SandboxError> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let path = self.dir.join(name);
        let err = |source| SandboxError::RunDir {
            path: path.clone(),
            source,
        };
        let file = std::fs::File::options()
            .write(true)
            .create_new(true)
            .mode(if executable { 0o700 } else { 0o600 })
            .open(&path)
            .map_err(err)?;
        let mut buffered = std::io::BufWriter::with_capacity(64 << 10, file);
        write(&mut buffered).map_err(err)?;
        buffered.flush().map_err(err)?;
        drop(buffered);
        if let Some((uid, gid)) = self.owner {
            std::os::unix::fs::chown(&path, Some(uid), Some(gid)).map_err(err)?;
        }
        Ok(path)
    }

    /// Copies `from` to `name`, owned by the run's uid with `from`'s mode bits (see
    /// `private_copy`).
    pub(crate) fn copy_in(&self, name: &str, from: &Path) -> Result<PathBuf, SandboxError> {
        let path = self.dir.join(name);
        super::private_copy::copy_tree(from, &path, self.owner)?;
        Ok(path)
    }

    /// Reads `name` back, at most `limit` bytes (more is an error). Goes through cap-std
    /// so that nothing the run did (a symlink, say) can make the engine read elsewhere.
    pub fn read_file(&self, name: &str, limit: u64) -> Result<Vec<u8>, SandboxError> {
        let path = self.dir.join(name);
        let err = |source| SandboxError::RunDir {
            path: path.clone(),
            source,
        };
        let dir = cap_std::fs::Dir::open_ambient_dir(&self.dir, cap_std::ambient_authority())
            .map_err(err)?;
        let file = dir.open(name).map_err(err)?;
        let mut bytes = Vec::new();
        file.take(limit + 1).read_to_end(&mut bytes).map_err(err)?;
        if bytes.len() as u64 > limit {
            return Err(err(std::io::Error::other(format!(
                "larger than {limit} bytes"
            ))));
        }
        Ok(bytes)
    }
}
