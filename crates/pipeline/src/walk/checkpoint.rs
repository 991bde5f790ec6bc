//! Persisting a Diagnosis after every node, so that a restarted run resumes where it
//! stopped. A controller persists the Diagnosis' status; with no cluster, a
//! [`CheckpointFile`] keeps it in a YAML file, replaced atomically.

use operon_data::api::Diagnosis;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Why a checkpoint could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The file could not be read, written or replaced.
    #[error("checkpoint {}: {source}", path.display())]
    Io {
        /// The checkpoint file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The Diagnosis could not be encoded.
    #[error("cannot encode the checkpoint: {0}")]
    Encode(#[source] yaml_serde::Error),
    /// The file does not hold a Diagnosis.
    #[error("{} is not a Diagnosis checkpoint: {source}", path.display())]
    NotADiagnosis {
        /// The checkpoint file.
        path: PathBuf,
        /// Why it does not parse.
        #[source]
        source: yaml_serde::Error,
    },
    /// The file holds a run of another Diagnosis (or of the same one with another
    /// spec), which must not be resumed as this one.
    #[error(
        "{} holds a run of another Diagnosis ({found}); remove it or choose another checkpoint file",
        path.display()
    )]
    OtherDiagnosis {
        /// The checkpoint file.
        path: PathBuf,
        /// `Diagnosis/namespace/name` of what the file holds.
        found: String,
    },
    /// Anything a persister of another kind reports.
    #[error("{0}")]
    Other(String),
}

/// A Diagnosis kept in a YAML file.
#[derive(Debug, Clone)]
pub struct CheckpointFile {
    path: PathBuf,
}

impl CheckpointFile {
    /// The checkpoint at `path` (which need not exist yet).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The file's path.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The saved run of `diagnosis`, when the file holds one; `None` when there is no
    /// file. A file holding another Diagnosis, or this one with another spec, is an
    /// error: resuming it would mix two runs.
    pub fn resume(&self, diagnosis: &Diagnosis) -> Result<Option<Diagnosis>, CheckpointError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(CheckpointError::Io {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let saved: Diagnosis =
            yaml_serde::from_str(&text).map_err(|source| CheckpointError::NotADiagnosis {
                path: self.path.clone(),
                source,
            })?;
        if saved.metadata.name != diagnosis.metadata.name || saved.spec != diagnosis.spec {
            return Err(CheckpointError::OtherDiagnosis {
                path: self.path.clone(),
                found: saved.object_ref(),
            });
        }
        Ok(Some(saved))
    }

    /// Replaces the file with `diagnosis`, atomically: a crash leaves the previous
    /// checkpoint or the new one, never half of one.
    pub fn save(&self, diagnosis: &Diagnosis) -> Result<(), CheckpointError> {
        let text = yaml_serde::to_string(diagnosis).map_err(CheckpointError::Encode)?;
        let io = |source| CheckpointError::Io {
            path: self.path.clone(),
            source,
        };
        let dir = self
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
        tmp.write_all(text.as_bytes()).map_err(io)?;
        tmp.persist(&self.path).map_err(|e| io(e.error))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use operon_data::api::DiagnosisSpec;
    use std::collections::BTreeMap;

    fn diagnosis(name: &str, set: &str) -> Diagnosis {
        Diagnosis::new(
            name,
            DiagnosisSpec {
                operation_set: set.to_owned(),
                node_name: None,
                pod_reference: None,
                parameters: BTreeMap::new(),
                service_account_name: None,
                dry_run: false,
                ..Default::default()
            },
        )
    }

    #[test]
    fn saved_runs_resume_only_as_the_same_diagnosis() {
        let dir = tempfile::tempdir().unwrap();
        let file = CheckpointFile::new(dir.path().join("run.yaml"));
        let d = diagnosis("d", "set");
        assert!(file.resume(&d).unwrap().is_none());
        file.save(&d).unwrap();
        assert_eq!(file.resume(&d).unwrap().unwrap().spec, d.spec);
        let other = diagnosis("d", "another-set");
        assert!(matches!(
            file.resume(&other),
            Err(CheckpointError::OtherDiagnosis { .. })
        ));
        std::fs::write(file.path(), "- not a diagnosis\n").unwrap();
        assert!(matches!(
            file.resume(&d),
            Err(CheckpointError::NotADiagnosis { .. })
        ));
    }
}
