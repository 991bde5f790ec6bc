//! Noticing, while the process runs, that a tree of hooks or modules changed: a digest
//! of the tree's contents ([`tree_digest`]) compared on an interval, and the rule that
//! decides when a change is taken ([`Settle`]). Used by `operon serve` for its hooks
//! directory, and for addon-operator's modules and global hooks.
//!
//! A hooks directory in Kubernetes is usually a ConfigMap volume: the kubelet writes
//! the new files into a fresh hidden directory (`..2026_11_23_10_00_00.123`) and then
//! swaps the `..data` symlink to it, while each visible name (`x.sh -> ..data/x.sh`)
//! never changes. So the digest follows the visible names through their symlinks and
//! leaves out the kubelet's own `..`-prefixed entries, whose names change at every
//! update even when no content does. A change is taken once two checks in a row see
//! the same new digest (a tree still being written is not), and a tree that was tried
//! and refused is not tried again until it changes again.
//!
//! Polling instead of inotify: an inotify watch does not follow symlinks, a ConfigMap
//! swap replaces the watched directory's target, and the kernel drops events when its
//! queue fills; a digest on an interval sees every one of these.

use sha2::{Digest as _, Sha256};
use std::collections::HashSet;
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// How deep a tree is followed: a symlink loop stops here.
const MAX_DEPTH: usize = 32;

/// The digest of everything under `roots`, in order: each entry's path relative to its
/// root, its kind, its mode and its contents, symlinks followed, the kubelet's
/// `..`-prefixed entries left out. A root that does not exist, or an entry that cannot
/// be read, is part of the digest as such, so that it appearing (or becoming readable)
/// is a change.
pub fn tree_digest(roots: &[PathBuf]) -> String {
    let mut hasher = Sha256::new();
    for root in roots {
        hasher.update(root.as_os_str().as_encoded_bytes());
        hasher.update([0]);
        let mut visited = HashSet::new();
        digest_entry(&mut hasher, root, Path::new(""), 0, &mut visited);
    }
    hex(&hasher.finalize())
}

/// [`tree_digest`] on a blocking thread, off the async runtime (it reads every file).
pub async fn digest_off_runtime(roots: Vec<PathBuf>) -> String {
    tokio::task::spawn_blocking(move || tree_digest(&roots))
        .await
        .unwrap_or_default()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn digest_entry(
    hasher: &mut Sha256,
    path: &Path,
    relative: &Path,
    depth: usize,
    visited: &mut HashSet<PathBuf>,
) {
    use std::os::unix::fs::PermissionsExt as _;
    hasher.update(relative.as_os_str().as_encoded_bytes());
    hasher.update([0]);
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(e) => {
            hasher.update(format!("error:{:?}", e.kind()).as_bytes());
            return;
        }
    };
    // The executable bits decide what shell-operator runs.
    hasher.update(metadata.permissions().mode().to_le_bytes());
    if metadata.is_dir() {
        hasher.update(b"dir");
        // A directory reached twice (a symlink loop, or two links to one place) is
        // digested once per path, up to the depth limit.
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        if depth >= MAX_DEPTH || !visited.insert(canonical.clone()) {
            hasher.update(b"loop");
            return;
        }
        let mut names: Vec<std::ffi::OsString> = match std::fs::read_dir(path) {
            Ok(entries) => entries
                .filter_map(|e| e.ok().map(|e| e.file_name()))
                .collect(),
            Err(e) => {
                hasher.update(format!("error:{:?}", e.kind()).as_bytes());
                return;
            }
        };
        names.retain(|n| !n.as_encoded_bytes().starts_with(b".."));
        names.sort();
        for name in names {
            digest_entry(
                hasher,
                &path.join(&name),
                &relative.join(&name),
                depth + 1,
                visited,
            );
        }
        visited.remove(&canonical);
    } else {
        hasher.update(b"file");
        hasher.update(metadata.len().to_le_bytes());
        let opened = std::fs::File::open(path);
        let read = opened.and_then(|mut file| {
            let mut buffer = [0u8; 64 * 1024];
            loop {
                let n = file.read(&mut buffer)?;
                if n == 0 {
                    return Ok(());
                }
                hasher.update(&buffer[..n]);
            }
        });
        if let Err(e) = read {
            hasher.update(format!("error:{:?}", e.kind()).as_bytes());
        }
    }
}

/// What a check of a tree's digest says to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing changed since the tree in use, or since the last refused one.
    Unchanged,
    /// The tree changed and may still be being written: look again next time.
    Settling,
    /// The tree changed and stayed the same for a whole interval: load it.
    Load(String),
}

/// When a changed tree is loaded: once its digest is the same at two checks in a row,
/// and never again after it was refused, until it changes.
#[derive(Debug, Clone)]
pub struct Settle {
    /// The digest of the tree in use.
    applied: String,
    /// The digest seen at the last check.
    seen: String,
    /// The last digest that was loaded and refused.
    refused: Option<String>,
}

impl Settle {
    /// Starting from the tree in use, whose digest is `applied`.
    pub fn new(applied: String) -> Self {
        Self {
            seen: applied.clone(),
            applied,
            refused: None,
        }
    }

    /// What to do about the tree now digested as `digest`.
    pub fn check(&mut self, digest: String) -> Step {
        let stable = digest == self.seen;
        self.seen = digest.clone();
        if digest == self.applied || self.refused.as_ref() == Some(&digest) {
            return Step::Unchanged;
        }
        if stable {
            Step::Load(digest)
        } else {
            Step::Settling
        }
    }

    /// The tree digested as `digest` is in use now.
    pub fn applied(&mut self, digest: String) {
        self.refused = None;
        self.applied = digest;
    }

    /// The tree digested as `digest` was loaded and refused: the one in use stays.
    pub fn refused(&mut self, digest: String) {
        self.refused = Some(digest);
    }
}

/// What a reload of one source did, for logs, the debug socket and tests.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReloadEntry {
    /// What was reloaded: `hooks directory`, `modules` or `modules and global hooks`.
    pub source: String,
    /// When.
    pub at: jiff::Timestamp,
    /// `loaded` (at start), `applied` or `refused`.
    pub outcome: String,
    /// What came in.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<String>,
    /// What changed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
    /// What went.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
    /// Why it was refused (the file and the reason).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// How many reloads [`ReloadLog`] keeps.
const KEPT: usize = 50;

/// The last reloads of a process, newest last; clones share them.
#[derive(Debug, Clone, Default)]
pub struct ReloadLog(std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<ReloadEntry>>>);

impl ReloadLog {
    /// Keeps `entry` as the newest; the oldest past 50 goes.
    pub fn push(&self, entry: ReloadEntry) {
        let mut entries = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if entries.len() == KEPT {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    /// The reloads kept, oldest first.
    pub fn entries(&self) -> Vec<ReloadEntry> {
        let entries = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.iter().cloned().collect()
    }
}

impl ReloadEntry {
    /// An entry of `source` now, with `outcome` and nothing else.
    pub fn now(source: &str, outcome: &str) -> Self {
        Self {
            source: source.to_owned(),
            at: jiff::Timestamp::now(),
            outcome: outcome.to_owned(),
            added: Vec::new(),
            changed: Vec::new(),
            removed: Vec::new(),
            error: None,
        }
    }
}

/// Names in `new` and not in `old`, in both with another digest, and in `old` only:
/// (added, changed, removed), each sorted.
pub fn diff<'a>(
    old: impl IntoIterator<Item = (&'a str, &'a str)>,
    new: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let old: std::collections::BTreeMap<&str, &str> = old.into_iter().collect();
    let new: std::collections::BTreeMap<&str, &str> = new.into_iter().collect();
    let added = (new.keys().filter(|n| !old.contains_key(*n)))
        .map(|n| (*n).to_owned())
        .collect();
    let changed = (new.iter())
        .filter(|(n, d)| old.get(*n).is_some_and(|o| o != *d))
        .map(|(n, _)| (*n).to_owned())
        .collect();
    let removed = (old.keys().filter(|n| !new.contains_key(*n)))
        .map(|n| (*n).to_owned())
        .collect();
    (added, changed, removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt as _, symlink};

    fn digest(dir: &Path) -> String {
        tree_digest(&[dir.to_owned()])
    }

    #[test]
    fn the_digest_follows_contents_and_modes_and_a_missing_root_counts() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("hooks");
        let missing = digest(&root);
        std::fs::create_dir(&root).unwrap();
        let empty = digest(&root);
        assert_ne!(missing, empty);
        std::fs::write(root.join("a.sh"), "#!/bin/sh\n").unwrap();
        let one = digest(&root);
        assert_ne!(one, empty);
        assert_eq!(one, digest(&root), "the same tree, the same digest");
        std::fs::set_permissions(root.join("a.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let executable = digest(&root);
        assert_ne!(executable, one, "a mode is part of the tree");
        std::fs::create_dir(root.join("lib")).unwrap();
        std::fs::write(root.join("lib/x"), "1").unwrap();
        let nested = digest(&root);
        std::fs::write(root.join("lib/x"), "2").unwrap();
        assert_ne!(digest(&root), nested, "nested contents count");
    }

    /// A ConfigMap volume as the kubelet writes it, `..data` pointing at `version`.
    fn config_map(root: &Path, version: &str, files: &[(&str, &str)]) {
        let data = root.join(version);
        std::fs::create_dir_all(&data).unwrap();
        for (name, text) in files {
            std::fs::write(data.join(name), text).unwrap();
            let visible = root.join(name);
            if std::fs::symlink_metadata(&visible).is_err() {
                symlink(format!("..data/{name}"), visible).unwrap();
            }
        }
        let swap = root.join("..data_tmp");
        symlink(version, &swap).unwrap();
        std::fs::rename(&swap, root.join("..data")).unwrap();
    }

    #[test]
    fn a_config_map_swap_changes_the_digest_only_when_contents_change() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        config_map(root, "..2026_01_01_00_00_00.1", &[("a.sh", "echo 1")]);
        let first = digest(root);
        // The same contents under a new timestamped directory: no change.
        config_map(root, "..2026_01_01_00_01_00.2", &[("a.sh", "echo 1")]);
        assert_eq!(digest(root), first);
        config_map(root, "..2026_01_01_00_02_00.3", &[("a.sh", "echo 2")]);
        assert_ne!(digest(root), first);
    }

    #[test]
    fn a_symlink_loop_ends() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        symlink("..", dir.path().join("a/up")).unwrap();
        let once = digest(dir.path());
        assert_eq!(once, digest(dir.path()));
    }

    #[test]
    fn a_change_is_loaded_once_it_settles_and_a_refused_tree_waits_for_the_next() {
        let mut settle = Settle::new("a".into());
        assert_eq!(settle.check("a".into()), Step::Unchanged);
        assert_eq!(settle.check("b".into()), Step::Settling);
        assert_eq!(
            settle.check("c".into()),
            Step::Settling,
            "still being written"
        );
        assert_eq!(settle.check("c".into()), Step::Load("c".into()));
        settle.refused("c".into());
        assert_eq!(settle.check("c".into()), Step::Unchanged);
        assert_eq!(settle.check("d".into()), Step::Settling);
        assert_eq!(settle.check("d".into()), Step::Load("d".into()));
        settle.applied("d".into());
        assert_eq!(settle.check("d".into()), Step::Unchanged);
        // Back to the tree that was refused before: it is tried again.
        assert_eq!(settle.check("c".into()), Step::Settling);
        assert_eq!(settle.check("c".into()), Step::Load("c".into()));
    }

    #[test]
    fn diff_names_what_came_changed_and_went() {
        let (added, changed, removed) = diff(
            [("a", "1"), ("b", "1"), ("c", "1")],
            [("b", "1"), ("c", "2"), ("d", "1")],
        );
        assert_eq!(added, ["d"]);
        assert_eq!(changed, ["c"]);
        assert_eq!(removed, ["a"]);
    }
}
