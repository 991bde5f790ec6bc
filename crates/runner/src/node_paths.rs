//! The node's paths an Operation declares (`readOnlyPaths`), found where this process
//! sees the node's filesystem: at `/` on a machine, or under a node root (an agent pod
//! that mounts the node's `/` read-only, `--node-root`). Under a root, a declared path is
//! resolved inside it: a symbolic link of the node (`/var/run -> /run`) leads to the
//! node's target, never to the pod's own files.

use std::os::fd::AsRawFd as _;
use std::path::{Component, Path, PathBuf};

/// The environment variable that tells a script step where the node's filesystem is
/// (empty when it is at `/`): `"$OPERON_NODE_ROOT/var/log/journal"`.
pub(crate) const NODE_ROOT_ENV: &str = "OPERON_NODE_ROOT";

/// A declared path that could not be looked up under the node root.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NodePathError {
    /// The declared path is not absolute, or climbs with `..` (admission refuses both).
    #[error("{path}: not an absolute path without \"..\"")]
    NotPlain {
        /// The declared path.
        path: PathBuf,
    },
    /// The node root itself cannot be opened.
    #[error("the node's filesystem {root} (--node-root) cannot be opened: {source}")]
    Root {
        /// The node root.
        root: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The kernel refused the lookup for another reason than absence.
    #[error("{path} under the node's filesystem {root}: {source}")]
    Lookup {
        /// The declared path.
        path: PathBuf,
        /// The node root.
        root: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Where the node's files are for this process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeRoot(Option<PathBuf>);

impl NodeRoot {
    /// The node's filesystem at `root`; `None` or `/` means this process' own `/`.
    pub fn new(root: Option<PathBuf>) -> Self {
        Self(root.filter(|r| r.as_os_str() != "/" && !r.as_os_str().is_empty()))
    }

    /// The root when it is not `/`.
    #[cfg(test)]
    pub(crate) fn path(&self) -> Option<&Path> {
        self.0.as_deref()
    }

    /// The value of [`NODE_ROOT_ENV`]: the root, or empty for `/`.
    pub(crate) fn env_value(&self) -> String {
        self.0
            .as_deref()
            .map(|r| r.display().to_string())
            .unwrap_or_default()
    }

    /// Where the node's `declared` path is in this process' filesystem, or `None` when
    /// the node has no such path. At `/` the path is returned as it is (the sandbox
    /// skips one that is missing); under a root it is resolved inside the root, links
    /// included, and the result is the real path.
    pub(crate) fn resolve(&self, declared: &Path) -> Result<Option<PathBuf>, NodePathError> {
        let Some(root) = &self.0 else {
            return Ok(Some(declared.to_owned()));
        };
        let relative = declared
            .strip_prefix("/")
            .ok()
            .filter(|rel| rel.components().all(|c| matches!(c, Component::Normal(_))))
            .ok_or_else(|| NodePathError::NotPlain {
                path: declared.to_owned(),
            })?;
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        let dir = rustix::fs::open(
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| NodePathError::Root {
            root: root.clone(),
            source: e.into(),
        })?;
        let found = rustix::fs::openat2(
            &dir,
            relative,
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
        );
        let fd = match found {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(e) => {
                return Err(NodePathError::Lookup {
                    path: declared.to_owned(),
                    root: root.clone(),
                    source: e.into(),
                });
            }
        };
        // The descriptor's own path is the real one, links resolved in the root.
        let real =
            std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).map_err(|source| {
                NodePathError::Lookup {
                    path: declared.to_owned(),
                    root: root.clone(),
                    source,
                }
            })?;
        if !real.starts_with(root) {
            // Only a root that is itself reached through a link gets here (the kernel
            // kept the lookup inside it): compare against the root's real path.
            let real_root = std::fs::canonicalize(root).map_err(|source| NodePathError::Root {
                root: root.clone(),
                source,
            })?;
            if !real.starts_with(&real_root) {
                return Err(NodePathError::Lookup {
                    path: declared.to_owned(),
                    root: root.clone(),
                    source: std::io::Error::other(format!(
                        "resolved to {}, outside the node's filesystem",
                        real.display()
                    )),
                });
            }
        }
        Ok(Some(real))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_slash_paths_are_kept_as_declared() {
        let root = NodeRoot::new(Some("/".into()));
        assert_eq!(root.path(), None);
        assert_eq!(root.env_value(), "");
        assert_eq!(
            root.resolve(Path::new("/var/log/nothing-here")).unwrap(),
            Some(PathBuf::from("/var/log/nothing-here"))
        );
    }

    #[test]
    fn under_a_root_links_stay_inside_it() {
        let node = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(node.path().join("run/log")).unwrap();
        std::fs::create_dir_all(node.path().join("var")).unwrap();
        // Like a node's /var/run -> /run: absolute, so it must mean the node's /run.
        std::os::unix::fs::symlink("/run", node.path().join("var/run")).unwrap();
        // A link that climbs out is clamped to the root too.
        std::os::unix::fs::symlink(
            format!("../../../..{}", outside.path().display()),
            node.path().join("var/escape"),
        )
        .unwrap();
        let root = NodeRoot::new(Some(node.path().to_owned()));
        assert_eq!(root.env_value(), node.path().display().to_string());
        let real = std::fs::canonicalize(node.path()).unwrap();
        assert_eq!(
            root.resolve(Path::new("/var/run/log")).unwrap(),
            Some(real.join("run/log"))
        );
        assert_eq!(root.resolve(Path::new("/var/escape")).unwrap(), None);
        assert_eq!(root.resolve(Path::new("/var/log/journal")).unwrap(), None);
        assert!(matches!(
            root.resolve(Path::new("var/run")),
            Err(NodePathError::NotPlain { .. })
        ));
        assert!(matches!(
            root.resolve(Path::new("/var/../etc")),
            Err(NodePathError::NotPlain { .. })
        ));
    }

    #[test]
    fn a_missing_root_is_named() {
        let root = NodeRoot::new(Some("/nonexistent-node-root".into()));
        let err = root.resolve(Path::new("/var/log")).unwrap_err();
        assert!(
            err.to_string()
                .contains("/nonexistent-node-root (--node-root)"),
            "{err}"
        );
    }
}
