//! Persisting a Diagnosis in the cluster: its status through the status subresource,
//! and the results too large for it in a ConfigMap the Diagnosis owns.
//!
//! Every status write is a `PUT …/status` carrying the `resourceVersion` last seen, so a
//! second writer (an old leader that has not noticed it lost, a second agent on the
//! node) can never overwrite a newer record: on a conflict the writer reads the object
//! again and retries only when its status is still the one this writer stored (someone
//! changed a label, not the record); otherwise the run stops and is resumed from what
//! the API server holds. A status equal to the one last written costs no request.
//!
//! Results over [`Limits::per_value`], and the largest ones while the rest exceed
//! [`Limits::per_diagnosis`], go to the ConfigMap `<diagnosis>-results` instead of the
//! status (listed in `status.resultsInConfigMap`), so a Diagnosis never grows past what
//! the API server stores; the ConfigMap is written (server-side apply, field manager
//! `operon`) before the status that names it.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use operon_cluster::kube::FIELD_MANAGER;
use operon_data::api::{API_VERSION, Condition, Diagnosis, DiagnosisStatus};
use operon_pipeline::{CheckpointFuture, Progress};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where large results stop fitting in the status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A result value longer than this (bytes) goes to the ConfigMap.
    pub per_value: usize,
    /// The results kept in the status stay under this many bytes (keys and values).
    pub per_diagnosis: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            per_value: 64 * 1024,
            per_diagnosis: 512 * 1024,
        }
    }
}

/// The most a results ConfigMap holds: the API server refuses a ConfigMap whose data
/// exceeds 1 MiB; the rest is room for its metadata.
pub(crate) const CONFIG_MAP_MAX: usize = 1024 * 1024 - 16 * 1024;

/// How often a conflicting status write is retried when only metadata changed.
const CONFLICT_RETRIES: usize = 3;

/// Why the status could not be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StatusError {
    /// The API server refused or could not be reached.
    #[error("writing the status of {diagnosis}: {source}")]
    Api {
        /// `Diagnosis/namespace/name`.
        diagnosis: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
    /// Another writer changed the status since this one wrote it.
    #[error(
        "the status of {diagnosis} was changed by another writer; this run stops and resumes from the stored status"
    )]
    Conflict {
        /// `Diagnosis/namespace/name`.
        diagnosis: String,
    },
    /// The Diagnosis was deleted while it ran.
    #[error("{diagnosis} was deleted")]
    Deleted {
        /// `Diagnosis/namespace/name`.
        diagnosis: String,
    },
    /// The results do not fit even in the ConfigMap.
    #[error(
        "the results of {diagnosis} take {size} bytes beyond what its status holds; a ConfigMap holds at most {CONFIG_MAP_MAX}"
    )]
    ResultsTooLarge {
        /// `Diagnosis/namespace/name`.
        diagnosis: String,
        /// The bytes that had to go to the ConfigMap.
        size: usize,
    },
    /// The results ConfigMap could not be written or read.
    #[error("the results ConfigMap {config_map} of {diagnosis}: {source}")]
    ConfigMap {
        /// `Diagnosis/namespace/name`.
        diagnosis: String,
        /// The ConfigMap's name.
        config_map: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
}

/// The name of the ConfigMap holding `diagnosis`' large results.
pub(crate) fn config_map_name(diagnosis: &Diagnosis) -> String {
    let name = diagnosis.name_any();
    // Object names stop at 253 characters; the uid keeps a long name's ConfigMap unique.
    if name.len() + "-results".len() <= operon_data::conventions::names::MAX_SUBDOMAIN {
        format!("{name}-results")
    } else {
        format!(
            "diagnosis-{}-results",
            diagnosis.metadata.uid.as_deref().unwrap_or("unknown")
        )
    }
}

/// `status` as stored: the results that fit, and apart those that go to the ConfigMap.
pub(crate) fn split(
    status: &DiagnosisStatus,
    limits: Limits,
    config_map: &str,
) -> (DiagnosisStatus, BTreeMap<String, String>) {
    let mut stored = status.clone();
    let mut offloaded = BTreeMap::new();
    let mut results = std::mem::take(&mut stored.operation_results);
    results.retain(|key, value| {
        if value.len() > limits.per_value {
            offloaded.insert(key.clone(), std::mem::take(value));
            false
        } else {
            true
        }
    });
    let mut total: usize = results.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > limits.per_diagnosis {
        // Largest first (then by key, so the choice is the same at every write).
        let mut by_size: Vec<(usize, String)> =
            results.iter().map(|(k, v)| (v.len(), k.clone())).collect();
        by_size.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        for (size, key) in by_size {
            if total <= limits.per_diagnosis {
                break;
            }
            if let Some(value) = results.remove(&key) {
                total -= key.len() + size;
                offloaded.insert(key, value);
            }
        }
    }
    stored.operation_results = results;
    stored.results_in_config_map = offloaded.keys().cloned().collect();
    stored.results_config_map = (!offloaded.is_empty()).then(|| config_map.to_owned());
    (stored, offloaded)
}

/// The results `diagnosis` keeps in its ConfigMap, read back for a resumed run.
pub(crate) async fn restore_results(
    client: &Client,
    diagnosis: &mut Diagnosis,
) -> Result<(), StatusError> {
    let Some(name) = diagnosis
        .status
        .as_ref()
        .and_then(|s| s.results_config_map.clone())
    else {
        return Ok(());
    };
    let namespace = diagnosis.metadata.namespace.clone().unwrap_or_default();
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let data = config_maps
        .get(&name)
        .await
        .map_err(|source| StatusError::ConfigMap {
            diagnosis: diagnosis.object_ref(),
            config_map: name,
            source,
        })?
        .data
        .unwrap_or_default();
    let Some(status) = diagnosis.status.as_mut() else {
        return Ok(());
    };
    for key in &status.results_in_config_map {
        if let Some(value) = data.get(key) {
            status.operation_results.insert(key.clone(), value.clone());
        }
    }
    Ok(())
}

/// Persists a Diagnosis as it runs; the [`Progress`] the controller hands the pipeline.
pub(crate) struct StatusWriter {
    diagnoses: Api<Diagnosis>,
    config_maps: Api<ConfigMap>,
    limits: Limits,
    object: String,
    config_map: String,
    resource_version: Option<String>,
    /// The status last sent, to skip writes that change nothing.
    sent: Option<DiagnosisStatus>,
    /// The status as the API server returned it after the last write (or as read).
    stored: Value,
    offloaded: BTreeMap<String, String>,
    /// Status writes that reached the API server (shared by the writers of one
    /// controller when it counts them all).
    writes: Arc<AtomicU64>,
    events: Option<super::events::Events>,
    /// Set for the agent: the `Scheduled` condition is the controller's (it says
    /// whether the node is up), so this writer keeps the one the API server holds
    /// instead of its own copy, and a conflict that only that condition caused is not
    /// a conflict: a node that comes back does not lose the step that just finished.
    placement_foreign: bool,
    /// The `Scheduled` condition the API server holds, as last read or written.
    placement: Option<Condition>,
}

impl StatusWriter {
    /// A writer for `diagnosis` as just read from the API server (with the results of
    /// its ConfigMap restored, [`restore_results`]).
    pub(crate) fn new(client: Client, diagnosis: &Diagnosis, limits: Limits) -> Self {
        let namespace = diagnosis.metadata.namespace.clone().unwrap_or_default();
        let config_map = config_map_name(diagnosis);
        let (sent, offloaded) = match &diagnosis.status {
            Some(status) => {
                let (stored, offloaded) = split(status, limits, &config_map);
                (Some(stored), offloaded)
            }
            None => (None, BTreeMap::new()),
        };
        Self {
            diagnoses: Api::namespaced(client.clone(), &namespace),
            config_maps: Api::namespaced(client, &namespace),
            limits,
            object: diagnosis.object_ref(),
            config_map,
            resource_version: diagnosis.metadata.resource_version.clone(),
            sent,
            stored: status_value(diagnosis),
            offloaded,
            writes: Arc::new(AtomicU64::new(0)),
            events: None,
            placement_foreign: false,
            placement: placement_of(diagnosis.status.as_ref()),
        }
    }

    /// Leaves the `Scheduled` condition to the controller (the agent's writer).
    pub(crate) fn keeping_placement(mut self) -> Self {
        self.placement_foreign = true;
        self
    }

    /// Emits Events on the Diagnosis as nodes start and fail.
    pub(crate) fn with_events(mut self, events: super::events::Events) -> Self {
        self.events = Some(events);
        self
    }

    /// Counts this writer's status writes into `total` instead of a counter of its own.
    pub(crate) fn counting_into(mut self, total: Arc<AtomicU64>) -> Self {
        self.writes = total;
        self
    }

    /// How many status writes reached the API server.
    #[cfg(test)]
    pub(crate) fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Writes `diagnosis`' status (and its large results) unless the API server already
    /// holds it.
    pub(crate) async fn write(&mut self, diagnosis: &Diagnosis) -> Result<(), StatusError> {
        let mut status = diagnosis.status.clone().unwrap_or_default();
        if self.placement_foreign {
            with_placement(&mut status, self.placement.as_ref());
        }
        let (mut stored, offloaded) = split(&status, self.limits, &self.config_map);
        if offloaded != self.offloaded {
            // A status that no longer names the ConfigMap needs nothing written there.
            if !offloaded.is_empty() {
                self.write_config_map(diagnosis, &offloaded).await?;
            }
            self.offloaded = offloaded;
        }
        if self.sent.as_ref() == Some(&stored) {
            return Ok(());
        }
        let mut body = Diagnosis::new(&diagnosis.name_any(), diagnosis.spec.clone());
        body.metadata.namespace = diagnosis.metadata.namespace.clone();
        body.metadata.resource_version = self.resource_version.clone();
        body.status = Some(stored.clone());
        let name = diagnosis.name_any();
        let params = PostParams {
            dry_run: false,
            field_manager: Some(FIELD_MANAGER.to_owned()),
        };
        for _ in 0..=CONFLICT_RETRIES {
            match self.diagnoses.replace_status(&name, &params, &body).await {
                Ok(written) => {
                    self.writes.fetch_add(1, Ordering::Relaxed);
                    self.resource_version = written.metadata.resource_version.clone();
                    self.stored = status_value(&written);
                    self.placement = placement_of(written.status.as_ref());
                    self.sent = Some(stored);
                    return Ok(());
                }
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    let current =
                        self.diagnoses
                            .get_opt(&name)
                            .await
                            .map_err(|source| StatusError::Api {
                                diagnosis: self.object.clone(),
                                source,
                            })?;
                    let Some(current) = current else {
                        return Err(StatusError::Deleted {
                            diagnosis: self.object.clone(),
                        });
                    };
                    let changed = if self.placement_foreign {
                        without_placement(status_value(&current))
                            != without_placement(self.stored.clone())
                    } else {
                        status_value(&current) != self.stored
                    };
                    if changed {
                        return Err(StatusError::Conflict {
                            diagnosis: self.object.clone(),
                        });
                    }
                    if self.placement_foreign {
                        self.placement = placement_of(current.status.as_ref());
                        with_placement(&mut stored, self.placement.as_ref());
                        body.status = Some(stored.clone());
                        self.stored = status_value(&current);
                    }
                    self.resource_version = current.metadata.resource_version.clone();
                    body.metadata.resource_version = self.resource_version.clone();
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    return Err(StatusError::Deleted {
                        diagnosis: self.object.clone(),
                    });
                }
                Err(source) => {
                    return Err(StatusError::Api {
                        diagnosis: self.object.clone(),
                        source,
                    });
                }
            }
        }
        Err(StatusError::Conflict {
            diagnosis: self.object.clone(),
        })
    }

    async fn write_config_map(
        &self,
        diagnosis: &Diagnosis,
        data: &BTreeMap<String, String>,
    ) -> Result<(), StatusError> {
        let size: usize = data.iter().map(|(k, v)| k.len() + v.len()).sum();
        if size > CONFIG_MAP_MAX {
            return Err(StatusError::ResultsTooLarge {
                diagnosis: self.object.clone(),
                size,
            });
        }
        let name = diagnosis.name_any();
        // No blockOwnerDeletion: setting it needs the right to update the Diagnosis'
        // finalizers, and the garbage collector removes the ConfigMap either way.
        let config_map = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.config_map,
                "namespace": diagnosis.metadata.namespace,
                "labels": {"operon.dev/diagnosis": name},
                "ownerReferences": [{
                    "apiVersion": API_VERSION,
                    "kind": "Diagnosis",
                    "name": name,
                    "uid": diagnosis.metadata.uid,
                    "controller": true,
                }],
            },
            "data": data,
        });
        self.config_maps
            .patch(
                &self.config_map,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&config_map),
            )
            .await
            .map_err(|source| StatusError::ConfigMap {
                diagnosis: self.object.clone(),
                config_map: self.config_map.clone(),
                source,
            })?;
        Ok(())
    }
}

/// The `Scheduled` condition of `status`.
fn placement_of(status: Option<&DiagnosisStatus>) -> Option<Condition> {
    status?
        .conditions
        .iter()
        .find(|c| c.type_ == super::SCHEDULED)
        .cloned()
}

/// `status` with `placement` as its `Scheduled` condition (none when `None`).
fn with_placement(status: &mut DiagnosisStatus, placement: Option<&Condition>) {
    let at = status
        .conditions
        .iter()
        .position(|c| c.type_ == super::SCHEDULED);
    match (at, placement) {
        (Some(i), Some(c)) => status.conditions[i] = c.clone(),
        (Some(i), None) => {
            status.conditions.remove(i);
        }
        (None, Some(c)) => status.conditions.push(c.clone()),
        (None, None) => {}
    }
}

/// A stored status (as JSON) without its `Scheduled` condition.
fn without_placement(mut status: Value) -> Value {
    if let Some(Value::Array(conditions)) = status.get_mut("conditions") {
        conditions.retain(|c| c.get("type").and_then(Value::as_str) != Some(super::SCHEDULED));
    }
    status
}

fn status_value(diagnosis: &Diagnosis) -> Value {
    serde_json::to_value(&diagnosis.status).unwrap_or(Value::Null)
}

impl Progress for StatusWriter {
    type Error = StatusError;

    fn node_started(&mut self, id: usize, operation: &str) {
        if let Some(events) = &self.events {
            events.node_started(id, operation);
        }
    }

    fn node_finished(&mut self, record: &operon_data::api::NodeRecord) {
        if let Some(events) = &self.events {
            events.node_finished(record);
        }
    }

    fn checkpoint<'a>(&'a mut self, diagnosis: &'a Diagnosis) -> CheckpointFuture<'a, StatusError> {
        Box::pin(self.write(diagnosis))
    }
}
