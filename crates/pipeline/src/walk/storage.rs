//! Writing a node's results under an Operation's `storage.hostPath`, through cap-std so
//! that nothing — a result key like `../../etc/passwd`, a Diagnosis name, a symlink
//! planted in the directory — can make a write land outside it.
//!
//! Layout: `<hostPath>/<diagnosis namespace>/<diagnosis name>/<node id>/<result key>`.

use cap_std::ambient_authority;
use cap_std::fs::{Dir, DirBuilder};
use operon_data::api::Diagnosis;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why results could not be stored.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StorageError {
    /// A name that would not be a single path component.
    #[error("cannot store results under {root}: {what} {name:?} is not a plain file name")]
    BadName {
        /// The storage root.
        root: PathBuf,
        /// What the name is (a result key, the Diagnosis name...).
        what: &'static str,
        /// The name.
        name: String,
    },
    /// The file system refused.
    #[error("cannot store results under {root}: {source}")]
    Io {
        /// The storage root.
        root: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

fn plain(root: &Path, what: &'static str, name: &str) -> Result<(), StorageError> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(StorageError::BadName {
            root: root.to_owned(),
            what,
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// Writes each result of node `id` as one file (mode 0640, directories 0750).
pub(crate) fn store_results(
    root: &Path,
    diagnosis: &Diagnosis,
    id: usize,
    results: &BTreeMap<String, String>,
) -> Result<(), StorageError> {
    use cap_std::fs::{DirBuilderExt as _, OpenOptions, OpenOptionsExt as _};
    let namespace = diagnosis.metadata.namespace.as_deref().unwrap_or("default");
    let name = diagnosis.metadata.name.as_deref().unwrap_or("");
    plain(root, "the Diagnosis namespace", namespace)?;
    plain(root, "the Diagnosis name", name)?;
    for key in results.keys() {
        plain(root, "the result key", key)?;
    }
    let io = |source| StorageError::Io {
        root: root.to_owned(),
        source,
    };
    let mut builder = std::fs::DirBuilder::new();
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o750);
    builder.recursive(true).create(root).map_err(io)?;
    let dir = Dir::open_ambient_dir(root, ambient_authority()).map_err(io)?;
    let relative = format!("{namespace}/{name}/{id}");
    let mut sub_builder = DirBuilder::new();
    sub_builder.recursive(true).mode(0o750);
    dir.create_dir_with(&relative, &sub_builder).map_err(io)?;
    let node_dir = dir.open_dir(&relative).map_err(io)?;
    for (key, value) in results {
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(true).mode(0o640);
        let mut file = node_dir.open_with(key, &options).map_err(io)?;
        std::io::Write::write_all(&mut file, value.as_bytes()).map_err(io)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use operon_data::api::DiagnosisSpec;

    fn diagnosis(name: &str) -> Diagnosis {
        let mut d = Diagnosis::new(
            name,
            DiagnosisSpec {
                operation_set: "s".to_owned(),
                node_name: None,
                pod_reference: None,
                parameters: BTreeMap::new(),
                service_account_name: None,
                dry_run: false,
                ..Default::default()
            },
        );
        d.metadata.namespace = Some("ops".to_owned());
        d
    }

    #[test]
    fn results_land_under_the_root() {
        let root = tempfile::tempdir().unwrap();
        let results = [("operation.df.output".to_owned(), "42%".to_owned())].into();
        store_results(root.path(), &diagnosis("d1"), 3, &results).unwrap();
        let text =
            std::fs::read_to_string(root.path().join("ops/d1/3/operation.df.output")).unwrap();
        assert_eq!(text, "42%");
    }

    #[test]
    fn nothing_escapes_the_root() {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("store");
        for (name, key) in [
            ("d1", "../../escape"),
            ("..", "k"),
            ("d1", "a/b"),
            ("d1", ".."),
        ] {
            let results = [(key.to_owned(), "x".to_owned())].into();
            let err = store_results(&root, &diagnosis(name), 1, &results).unwrap_err();
            assert!(matches!(err, StorageError::BadName { .. }), "{err}");
        }
        // A symlink planted inside the root that points outside is not followed.
        std::fs::create_dir_all(root.join("ops")).unwrap();
        std::os::unix::fs::symlink(outer.path(), root.join("ops/d2")).unwrap();
        let results = [("k".to_owned(), "x".to_owned())].into();
        let err = store_results(&root, &diagnosis("d2"), 1, &results).unwrap_err();
        assert!(matches!(err, StorageError::Io { .. }), "{err}");
        assert!(!outer.path().join("1").exists());
        let entries: Vec<_> = std::fs::read_dir(outer.path()).unwrap().collect();
        assert_eq!(entries.len(), 1, "only the store directory exists outside");
    }
}
