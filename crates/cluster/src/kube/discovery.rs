//! Kind resolution through API discovery, cached: a group version's resource list is
//! fetched once, and everything again when a kind is unknown (a CRD created after the
//! engine started resolves without a restart).

use super::api_error;
use crate::{ClusterError, Resource, split_api_version};
use ::kube::Client;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// A miss refreshes discovery at most this often, so a hook that keeps naming an
/// unknown kind does not hammer the API server.
const REFRESH_INTERVAL: Duration = Duration::from_secs(1);

/// One resource of a group version, with the other names it answers to (its singular
/// and short names).
#[derive(Debug, Clone)]
struct Entry {
    resource: Resource,
    aliases: Vec<String>,
}

#[derive(Default)]
struct State {
    /// Resources per group version (`v1`, `apps/v1`); `None` for a group version the
    /// server does not serve.
    versions: HashMap<String, Option<Vec<Entry>>>,
    /// The preferred version of every group, the core group first, in the server's
    /// order: where a kind given without `apiVersion` is looked up.
    preferred: Option<Vec<String>>,
    /// When everything was last thrown away.
    refreshed: Option<Instant>,
    /// What each (apiVersion, lowercase name) asked for resolved to: a patch names its
    /// target's kind every time, and a kind without apiVersion would otherwise be looked
    /// for through every group again.
    resolved: HashMap<(Option<String>, String), Resource>,
}

/// The discovery cache of one client.
pub(super) struct Discovery {
    client: Client,
    state: Mutex<State>,
}

impl Discovery {
    pub(super) fn new(client: Client) -> Self {
        Self {
            client,
            state: Mutex::new(State::default()),
        }
    }

    /// Resolves a kind, plural, singular or short name (case-insensitive), in the given
    /// `apiVersion` or, without one, in the preferred version of every group (the core
    /// group first).
    pub(super) async fn resolve(
        &self,
        api_version: Option<&str>,
        kind: &str,
    ) -> Result<Resource, ClusterError> {
        let key = (api_version.map(str::to_owned), kind.to_ascii_lowercase());
        let mut state = self.state.lock().await;
        if let Some(found) = state.resolved.get(&key) {
            return Ok(found.clone());
        }
        if let Some(found) = self.lookup(&mut state, api_version, kind).await? {
            state.resolved.insert(key, found.clone());
            return Ok(found);
        }
        let stale = state
            .refreshed
            .is_none_or(|at| at.elapsed() >= REFRESH_INTERVAL);
        if stale {
            *state = State {
                refreshed: Some(Instant::now()),
                ..State::default()
            };
            if let Some(found) = self.lookup(&mut state, api_version, kind).await? {
                state.resolved.insert(key, found.clone());
                return Ok(found);
            }
        }
        Err(ClusterError::UnknownKind {
            kind: kind.to_owned(),
            api_version: api_version.map(str::to_owned),
        })
    }

    async fn lookup(
        &self,
        state: &mut State,
        api_version: Option<&str>,
        kind: &str,
    ) -> Result<Option<Resource>, ClusterError> {
        if let Some(api_version) = api_version {
            let entries = self.group_version(state, api_version).await?;
            return Ok(find(entries, kind));
        }
        if state.preferred.is_none() {
            state.preferred = Some(self.preferred_versions().await?);
        }
        // Cloned once per cache miss: the loop fills `state.versions` as it goes.
        let preferred = state.preferred.clone().unwrap_or_default();
        for group_version in &preferred {
            match self.group_version(state, group_version).await {
                Ok(entries) => {
                    if let Some(found) = find(entries, kind) {
                        return Ok(Some(found));
                    }
                }
                // An aggregated API that is down (metrics-server, say) must not make
                // every other kind unresolvable.
                Err(e) => {
                    tracing::warn!(group_version = %group_version, error = %e, "API discovery failed for a group version; skipping it");
                }
            }
        }
        Ok(None)
    }

    async fn group_version<'s>(
        &self,
        state: &'s mut State,
        group_version: &str,
    ) -> Result<Option<&'s [Entry]>, ClusterError> {
        if !state.versions.contains_key(group_version) {
            let entries = self.fetch(group_version).await?;
            state.versions.insert(group_version.to_owned(), entries);
        }
        Ok(state.versions.get(group_version).and_then(|e| e.as_deref()))
    }

    async fn fetch(&self, group_version: &str) -> Result<Option<Vec<Entry>>, ClusterError> {
        let list = if group_version.contains('/') {
            self.client.list_api_group_resources(group_version).await
        } else {
            self.client.list_core_api_resources(group_version).await
        };
        match list {
            Ok(list) => Ok(Some(entries(&list))),
            // A group the server does not serve is answered with a plain-text 404
            // ("404 page not found"), which has no Status reason: the code says it.
            Err(::kube::Error::Api(status)) if status.is_not_found() || status.code == 404 => {
                Ok(None)
            }
            Err(e) => Err(api_error(e, &format!("discovery of {group_version}"))),
        }
    }

    async fn preferred_versions(&self) -> Result<Vec<String>, ClusterError> {
        let core = self
            .client
            .list_core_api_versions()
            .await
            .map_err(|e| api_error(e, "discovery of /api"))?;
        let groups = self
            .client
            .list_api_groups()
            .await
            .map_err(|e| api_error(e, "discovery of /apis"))?;
        let mut preferred = core.versions;
        for group in groups.groups {
            let version = group
                .preferred_version
                .or_else(|| group.versions.into_iter().next());
            if let Some(version) = version {
                preferred.push(version.group_version);
            }
        }
        Ok(preferred)
    }
}

fn find(entries: Option<&[Entry]>, name: &str) -> Option<Resource> {
    let entries = entries?;
    // The kind wins over another resource's short name.
    entries
        .iter()
        .find(|e| e.resource.kind.eq_ignore_ascii_case(name))
        .or_else(|| {
            entries
                .iter()
                .find(|e| e.resource.answers_to(name, &e.aliases))
        })
        .map(|e| e.resource.clone())
}

fn entries(list: &APIResourceList) -> Vec<Entry> {
    let (group, version) = split_api_version(&list.group_version).unwrap_or_default();
    list.resources
        .iter()
        // `pods/status`, `pods/log`: subresources are not kinds of their own.
        .filter(|r| !r.name.contains('/'))
        .map(|r| Entry {
            resource: Resource {
                group: r.group.clone().unwrap_or_else(|| group.clone()),
                version: r.version.clone().unwrap_or_else(|| version.clone()),
                kind: r.kind.clone(),
                plural: r.name.clone(),
                namespaced: r.namespaced,
            },
            aliases: {
                let mut aliases = r.short_names.clone().unwrap_or_default();
                // Before 1.27 built-in resources leave singularName empty (the kind in
                // lowercase, which the kind already matches).
                if !r.singular_name.is_empty() {
                    aliases.push(r.singular_name.clone());
                }
                aliases
            },
        })
        .collect()
}
