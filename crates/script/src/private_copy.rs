//! Private copies of a run's read-only paths that the run's uid may not read: a hooks
//! directory only its owner may enter (mode 0700, as a directory made under umask 077
//! is), when the engine is root and runs use an unprivileged uid.
//!
//! shell-operator runs such hooks because it execs them as its own user. Running them
//! as root would lift the sandbox's uid; a descriptor does not help, since the kernel
//! checks the directory's and the file's own modes on every lookup, open and exec,
//! whatever reached them. So the engine, which may read them, copies the path into the
//! run directory, owned by the run's uid with the same mode bits, and the launcher
//! mounts the copy over the original inside the run's mount namespace: the program
//! sees the paths it would see under shell-operator (`$0`, its working directory, its
//! siblings), read-only, and nothing of the directories above them. Without a mount
//! namespace the program and working directory are moved into the copy instead.

use super::error::SandboxError;
use serde::{Deserialize, Serialize};
use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

/// The most a copy may hold: a hooks directory with its libraries, not a data set.
const MAX_BYTES: u64 = 64 << 20;

/// The most entries a copy may hold.
const MAX_ENTRIES: usize = 10_000;

/// A read-only path of the run and its private copy in the run directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PrivateCopy {
    /// The path as the request names it.
    pub(crate) path: PathBuf,
    /// Its copy, owned by the run's uid.
    pub(crate) copy: PathBuf,
}

impl PrivateCopy {
    /// `path` moved into the copy when it lies under the original, for a launcher that
    /// could not mount the copy over it.
    pub(crate) fn relocate(&self, path: &Path) -> Option<PathBuf> {
        let rest = path.strip_prefix(&self.path).ok()?;
        Some(if rest.as_os_str().is_empty() {
            self.copy.clone()
        } else {
            self.copy.join(rest)
        })
    }
}

/// Whether a run as `uid`:`gid` (no supplementary groups, as the sandbox starts runs)
/// needs a copy of the read-only path `path` to run `program` in `cwd`: `path` itself
/// may not be listed and entered, or the program or working directory under it may
/// not be read. Modes only: the kernel's own check, without ACLs, which the engine
/// never grants on its own. A path the engine cannot stat is left to the run.
pub(crate) fn needs_copy(path: &Path, program: &Path, cwd: &Path, uid: u32, gid: u32) -> bool {
    let denied = |path: &Path, want: u32| {
        std::fs::metadata(path).is_ok_and(|meta| !permits(&meta, uid, gid, want))
    };
    let is_dir = std::fs::metadata(path).is_ok_and(|m| m.is_dir());
    if denied(path, if is_dir { 0o5 } else { 0o4 }) {
        return true;
    }
    (program.starts_with(path) && denied(program, 0o5))
        || (cwd.starts_with(path) && denied(cwd, 0o1))
}

/// Whether the mode bits of `meta` grant `want` (a mask of r=4, w=2, x=1) to `uid`:`gid`.
fn permits(meta: &std::fs::Metadata, uid: u32, gid: u32, want: u32) -> bool {
    let mode = meta.mode();
    let bits = if meta.uid() == uid {
        mode >> 6
    } else if meta.gid() == gid {
        mode >> 3
    } else {
        mode
    };
    bits & want == want
}

/// Copies `from` (a directory tree or one file) to `to`, which must not exist, owned by
/// `owner` when given, with the original's permission bits (set-id bits dropped).
/// Symlinks are copied as symlinks, so that they lead where they led and the run reads
/// their targets with its own rights; sockets, pipes and devices are left out.
pub(crate) fn copy_tree(
    from: &Path,
    to: &Path,
    owner: Option<(u32, u32)>,
) -> Result<(), SandboxError> {
    let mut budget = Budget {
        root: from.to_owned(),
        bytes: 0,
        entries: 0,
    };
    // The path itself may be a symlink (a hooks directory mounted from a ConfigMap).
    let meta = std::fs::metadata(from).map_err(io(from))?;
    copy_entry(from, to, &meta, owner, &mut budget)
}

/// What a copy has taken so far.
struct Budget {
    root: PathBuf,
    bytes: u64,
    entries: usize,
}

impl Budget {
    fn take(&mut self, bytes: u64) -> Result<(), SandboxError> {
        self.entries += 1;
        self.bytes += bytes;
        if self.entries > MAX_ENTRIES || self.bytes > MAX_BYTES {
            return Err(self.too_large());
        }
        Ok(())
    }

    fn too_large(&self) -> SandboxError {
        SandboxError::CopyTooLarge {
            path: self.root.clone(),
            max_bytes: MAX_BYTES,
            max_entries: MAX_ENTRIES,
        }
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> SandboxError + '_ {
    move |source| SandboxError::RunDir {
        path: path.to_owned(),
        source,
    }
}

fn copy_entry(
    from: &Path,
    to: &Path,
    meta: &std::fs::Metadata,
    owner: Option<(u32, u32)>,
    budget: &mut Budget,
) -> Result<(), SandboxError> {
    use std::os::unix::fs::DirBuilderExt as _;
    let mode = meta.mode() & 0o777;
    let file_type = meta.file_type();
    if file_type.is_dir() {
        budget.take(0)?;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(to)
            .map_err(io(to))?;
        let mut entries = std::fs::read_dir(from)
            .map_err(io(from))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(io(from))?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).map_err(io(&path))?;
            copy_entry(&path, &to.join(entry.file_name()), &meta, owner, budget)?;
        }
    } else if file_type.is_file() {
        budget.take(meta.len())?;
        // Not following a symlink put in the file's place since it was listed.
        let mut source = std::fs::File::options()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(from)
            .map_err(io(from))?;
        let mut target = std::fs::File::options()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(to)
            .map_err(io(to))?;
        // The file may have grown since its size was counted.
        let room = MAX_BYTES - budget.bytes + meta.len();
        let copied =
            std::io::copy(&mut (&mut source).take(room + 1), &mut target).map_err(io(from))?;
        if copied > room {
            return Err(budget.too_large());
        }
    } else if file_type.is_symlink() {
        budget.take(0)?;
        let target = std::fs::read_link(from).map_err(io(from))?;
        std::os::unix::fs::symlink(target, to).map_err(io(to))?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::lchown(to, Some(uid), Some(gid)).map_err(io(to))?;
        }
        return Ok(());
    } else {
        return Ok(());
    }
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(to, Some(uid), Some(gid)).map_err(io(to))?;
    }
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode)).map_err(io(to))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    #[test]
    fn a_copy_keeps_modes_links_and_contents() {
        let root = tempfile::tempdir().unwrap();
        let hooks = root.path().join("hooks");
        std::fs::create_dir_all(hooks.join("lib")).unwrap();
        std::fs::write(hooks.join("hook.sh"), "#!/bin/sh\necho hi\n").unwrap();
        std::fs::write(hooks.join("lib/common.sh"), "X=1\n").unwrap();
        std::os::unix::fs::symlink("lib/common.sh", hooks.join("link")).unwrap();
        std::fs::set_permissions(
            hooks.join("hook.sh"),
            std::fs::Permissions::from_mode(0o4700),
        )
        .unwrap();
        std::fs::set_permissions(&hooks, std::fs::Permissions::from_mode(0o700)).unwrap();
        let copy = root.path().join("copy");
        copy_tree(&hooks, &copy, None).unwrap();
        assert_eq!(mode(&copy), 0o700);
        assert_eq!(mode(&copy.join("hook.sh")), 0o700, "set-id bits dropped");
        assert_eq!(
            std::fs::read_to_string(copy.join("lib/common.sh")).unwrap(),
            "X=1\n"
        );
        assert_eq!(
            std::fs::read_link(copy.join("link")).unwrap(),
            Path::new("lib/common.sh")
        );
    }

    #[test]
    fn only_paths_the_run_may_not_read_are_copied() {
        let root = tempfile::tempdir().unwrap();
        let hooks = root.path().join("hooks");
        std::fs::create_dir(&hooks).unwrap();
        let hook = hooks.join("hook.sh");
        std::fs::write(&hook, "").unwrap();
        let set = |path: &Path, mode| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        let meta = std::fs::metadata(&hooks).unwrap();
        let (owner, group) = (meta.uid(), meta.gid());
        let (other, other_group) = (owner.wrapping_add(4242), group.wrapping_add(4242));
        set(&hooks, 0o755);
        set(&hook, 0o755);
        assert!(!needs_copy(&hooks, &hook, &hooks, other, other_group));
        set(&hook, 0o700);
        assert!(needs_copy(&hooks, &hook, &hooks, other, other_group));
        assert!(!needs_copy(&hooks, &hook, &hooks, owner, other_group));
        set(&hook, 0o755);
        set(&hooks, 0o700);
        assert!(needs_copy(&hooks, &hook, &hooks, other, other_group));
        set(&hooks, 0o750);
        assert!(!needs_copy(&hooks, &hook, &hooks, other, group));
        assert!(!needs_copy(
            &root.path().join("gone"),
            &hook,
            &hooks,
            other,
            group
        ));
    }

    #[test]
    fn a_copy_past_its_budget_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let big = root.path().join("big");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_BYTES + 1)
            .unwrap();
        let err = copy_tree(&big, &root.path().join("copy"), None).unwrap_err();
        assert!(matches!(err, SandboxError::CopyTooLarge { .. }), "{err}");
    }

    #[test]
    fn paths_under_the_original_move_into_the_copy() {
        let copy = PrivateCopy {
            path: PathBuf::from("/hooks"),
            copy: PathBuf::from("/runs/run-1/private-copy-0"),
        };
        assert_eq!(
            copy.relocate(Path::new("/hooks/a/b.sh")),
            Some(PathBuf::from("/runs/run-1/private-copy-0/a/b.sh"))
        );
        assert_eq!(
            copy.relocate(Path::new("/hooks")),
            Some(PathBuf::from("/runs/run-1/private-copy-0"))
        );
        assert_eq!(copy.relocate(Path::new("/hooksx/a")), None);
    }
}
