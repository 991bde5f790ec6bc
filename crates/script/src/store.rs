//! The agent-side script store: KubeDiag `scriptRunner` scripts kept as files under the
//! data root, created, replaced and removed as Operations appear, change and disappear.
//!
//! Every access goes through a cap-std [`Dir`] opened on the store's directory, so no
//! name (`../x`, an absolute path, a symlink planted in the store) can reach outside it.
//! The directory is 0700 and scripts are 0600: no other user may read or replace what
//! the agent is about to run. Replacing is atomic (write a temporary file, rename), so a
//! run never sees half a script.

use super::error::StoreError;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt as _, Permissions, PermissionsExt as _};
use operon_data::conventions::names;
use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Prefix of the temporary files of an atomic replace; never a valid script name.
const TEMP_PREFIX: &str = ".tmp-";

/// What [`ScriptStore::sync`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Scripts written because they were new.
    pub created: Vec<String>,
    /// Scripts rewritten because their text changed.
    pub replaced: Vec<String>,
    /// Scripts removed because their Operation is gone.
    pub removed: Vec<String>,
}

/// What [`ScriptStore::ensure`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ensured {
    /// The store already held the text.
    Unchanged,
    /// The script was new.
    Created,
    /// The script's text changed.
    Replaced,
}

/// Scripts under one directory of the data root, one file per Operation.
#[derive(Debug)]
pub struct ScriptStore {
    /// The store's directory, for messages.
    path: PathBuf,
    /// The capability every access goes through.
    dir: Dir,
}

impl ScriptStore {
    /// Opens (creating it 0700 when missing) the store at `path`, e.g.
    /// `/var/lib/operon/scripts`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
        let err = |source| StoreError::Open {
            path: path.to_owned(),
            source,
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)
            .map_err(err)?;
        // An existing directory may have been created looser by someone else.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
        let dir = Dir::open_ambient_dir(path, cap_std::ambient_authority()).map_err(err)?;
        Ok(Self {
            path: path.to_owned(),
            dir,
        })
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates or atomically replaces the script `name`.
    pub fn put(&self, name: &str, text: &str) -> Result<(), StoreError> {
        check_name(name)?;
        let io = |source| StoreError::Io {
            name: name.to_owned(),
            source,
        };
        let temp = format!("{TEMP_PREFIX}{name}");
        // A crash mid-write leaves a temporary file behind; it is ours to replace.
        match self.dir.remove_file(&temp) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        let mut options = OpenOptions::new();
        options.write(true).create_new(true).mode(0o600);
        let mut file = self.dir.open_with(&temp, &options).map_err(io)?;
        file.write_all(text.as_bytes()).map_err(io)?;
        file.sync_all().map_err(io)?;
        // The mode given at creation is filtered by the umask; make it exact.
        file.set_permissions(Permissions::from_mode(0o600))
            .map_err(io)?;
        drop(file);
        self.dir.rename(&temp, &self.dir, name).map_err(io)
    }

    /// Removes the script `name`; false when there was none.
    pub(crate) fn remove(&self, name: &str) -> Result<bool, StoreError> {
        check_name(name)?;
        match self.dir.remove_file(name) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(StoreError::Io {
                name: name.to_owned(),
                source,
            }),
        }
    }

    /// The text of the script `name`.
    pub fn read(&self, name: &str) -> Result<String, StoreError> {
        check_name(name)?;
        match self.dir.read_to_string(name) {
            Ok(text) => Ok(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(StoreError::NotFound(name.to_owned()))
            }
            Err(source) => Err(StoreError::Io {
                name: name.to_owned(),
                source,
            }),
        }
    }

    /// The names of the stored scripts, sorted.
    pub(crate) fn names(&self) -> Result<Vec<String>, StoreError> {
        let io = |source| StoreError::Open {
            path: self.path.clone(),
            source,
        };
        let mut names = Vec::new();
        for entry in self.dir.entries().map_err(io)? {
            let entry = entry.map_err(io)?;
            if let Some(name) = entry.file_name().to_str()
                && check_name(name).is_ok()
            {
                names.push(name.to_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    /// Makes the store hold `text` as `name`, writing only when it does not already.
    pub fn ensure(&self, name: &str, text: &str) -> Result<Ensured, StoreError> {
        check_name(name)?;
        match self.read(name) {
            Ok(existing) if existing == text => Ok(Ensured::Unchanged),
            Ok(_) => self.put(name, text).map(|()| Ensured::Replaced),
            Err(StoreError::NotFound(_)) => self.put(name, text).map(|()| Ensured::Created),
            Err(e) => Err(e),
        }
    }

    /// Makes the store hold exactly `scripts` (name → text): writes new and changed
    /// scripts and removes the others, as a reconcile loop over Operations does.
    pub fn sync<'a>(
        &self,
        scripts: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<SyncReport, StoreError> {
        let mut report = SyncReport::default();
        let mut wanted = BTreeSet::new();
        for (name, text) in scripts {
            wanted.insert(name.to_owned());
            match self.ensure(name, text)? {
                Ensured::Unchanged => {}
                Ensured::Replaced => report.replaced.push(name.to_owned()),
                Ensured::Created => report.created.push(name.to_owned()),
            }
        }
        for name in self.names()? {
            if !wanted.contains(&name) && self.remove(&name)? {
                report.removed.push(name);
            }
        }
        Ok(report)
    }
}

/// A script's file name is its Operation's name: a Kubernetes object name (lower-case
/// letters, digits, `-` and `.`), which can never be a path.
fn check_name(name: &str) -> Result<(), StoreError> {
    let invalid = |reason| {
        Err(StoreError::InvalidName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("it is empty");
    }
    if name.len() > names::MAX_SUBDOMAIN {
        return invalid("it is longer than 253 characters");
    }
    if name.starts_with('.') {
        return invalid("it starts with a dot");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    {
        return invalid("only lower-case letters, digits, '-' and '.' are allowed");
    }
    if !names::is_dns_subdomain(name) {
        return invalid("each dot-separated part must start and end with a letter or digit");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn scripts_are_created_replaced_and_removed_privately() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("data/scripts");
        let store = ScriptStore::open(&path).unwrap();
        assert_eq!(mode(&path), 0o700);

        store.put("dump-sysctl", "#!/bin/sh\nsysctl -a\n").unwrap();
        assert_eq!(mode(&path.join("dump-sysctl")), 0o600);
        assert_eq!(store.read("dump-sysctl").unwrap(), "#!/bin/sh\nsysctl -a\n");

        store.put("dump-sysctl", "echo v2").unwrap();
        assert_eq!(store.read("dump-sysctl").unwrap(), "echo v2");
        assert_eq!(mode(&path.join("dump-sysctl")), 0o600);

        assert!(store.remove("dump-sysctl").unwrap());
        assert!(!store.remove("dump-sysctl").unwrap());
        assert!(matches!(
            store.read("dump-sysctl"),
            Err(StoreError::NotFound(_))
        ));
    }

    #[test]
    fn names_that_could_escape_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let store = ScriptStore::open(root.path()).unwrap();
        for name in [
            "../evil",
            "/etc/passwd",
            "a/b",
            ".hidden",
            "",
            "UPPER",
            "a..b",
            "a-",
            "a.-b",
        ] {
            assert!(
                matches!(store.put(name, "x"), Err(StoreError::InvalidName { .. })),
                "{name:?}"
            );
        }
        assert!(!root.path().parent().unwrap().join("evil").exists());
    }

    #[test]
    fn a_planted_symlink_is_not_followed_out_of_the_store() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("victim");
        std::fs::write(&target, "original").unwrap();
        let store = ScriptStore::open(&root.path().join("s")).unwrap();
        std::os::unix::fs::symlink(&target, root.path().join("s/evil")).unwrap();
        assert!(store.read("evil").is_err());
        // Replacing renames over the link itself; the target is untouched.
        store.put("evil", "new").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "original");
        assert_eq!(store.read("evil").unwrap(), "new");
    }

    #[test]
    fn sync_reconciles_with_the_operations() {
        let root = tempfile::tempdir().unwrap();
        let store = ScriptStore::open(root.path()).unwrap();
        store.put("old", "x").unwrap();
        store.put("same", "s").unwrap();
        store.put("changed", "1").unwrap();
        let report = store
            .sync([("same", "s"), ("changed", "2"), ("new", "n")])
            .unwrap();
        assert_eq!(report.created, ["new"]);
        assert_eq!(report.replaced, ["changed"]);
        assert_eq!(report.removed, ["old"]);
        assert_eq!(store.names().unwrap(), ["changed", "new", "same"]);
    }
}
