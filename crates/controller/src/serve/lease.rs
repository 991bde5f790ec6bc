//! Leader election through a coordination.k8s.io/v1 Lease, as client-go's
//! `leaderelection` does it: a replica takes a Lease that is absent, released, or not
//! renewed for its duration (measured on this replica's clock since the record last
//! changed, so clock skew between replicas does not matter); every write carries the
//! `resourceVersion` it read, so two replicas can never both win. A leader renews every
//! retry period and gives up after the renew deadline, which is shorter than the lease
//! duration: it stops running hooks before anyone else may take over.
//!
//! The leader also advertises where its admission server is (annotations of the Lease),
//! so that followers can pass on the reviews only the leader can answer
//! ([`super::webhook::forward`]); each attempt publishes what the holder advertises.

pub(crate) mod metrics;

use super::webhook::forward::LeaderAddress;
use ::kube::Client;
use ::kube::api::{Api, PostParams};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use operon_cluster::kube::FIELD_MANAGER;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// The Lease and the timing (client-go's defaults: 15 s, 10 s, 2 s).
#[derive(Debug, Clone)]
pub struct LeaseOptions {
    /// The Lease's name.
    pub(crate) name: String,
    /// Its namespace.
    pub(crate) namespace: String,
    /// Who this replica is (the pod name plus a random suffix).
    pub(crate) identity: String,
    /// How long a Lease not renewed stays its holder's.
    pub lease_duration: Duration,
    /// How long a leader keeps trying to renew before it gives up leading.
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew.
    pub retry_period: Duration,
    /// Where this replica's admission server is, advertised while it leads.
    pub advertise: Option<LeaderAddress>,
}

/// The Lease annotation with the leader's admission server URL.
const LEADER_URL: &str = "operon.dev/leader-url";
/// The Lease annotation with the name the leader's certificate carries.
const LEADER_SERVER_NAME: &str = "operon.dev/leader-server-name";

/// Writes `advertise` into `metadata`'s annotations (removing what another leader
/// advertised when there is nothing).
fn advertise_in(metadata: &mut ObjectMeta, advertise: Option<&LeaderAddress>) {
    let annotations = metadata.annotations.get_or_insert_with(Default::default);
    annotations.remove(LEADER_URL);
    annotations.remove(LEADER_SERVER_NAME);
    if let Some(address) = advertise {
        annotations.insert(LEADER_URL.to_owned(), address.url.clone());
        if let Some(name) = &address.server_name {
            annotations.insert(LEADER_SERVER_NAME.to_owned(), name.clone());
        }
    }
}

/// What the holder of `lease` advertises.
fn advertised(lease: &Lease) -> Option<LeaderAddress> {
    let annotations = lease.metadata.annotations.as_ref()?;
    Some(LeaderAddress {
        url: annotations.get(LEADER_URL)?.clone(),
        server_name: annotations.get(LEADER_SERVER_NAME).cloned(),
    })
}

impl LeaseOptions {
    /// The defaults for a Lease `name` in `namespace`, with a unique identity.
    pub fn new(name: &str, namespace: &str) -> Self {
        let host = std::env::var("POD_NAME")
            .ok()
            .or_else(|| {
                std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .ok()
                    .map(|h| h.trim().to_owned())
            })
            .unwrap_or_else(|| "operon".to_owned());
        let suffix = getrandom::u64().unwrap_or(0);
        Self {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            identity: format!("{host}_{suffix:016x}"),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            advertise: None,
        }
    }
}

/// What one attempt found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// This replica holds the Lease (acquired or renewed).
    Leading,
    /// Another replica holds it.
    Following {
        /// Its identity, when known.
        holder: String,
    },
}

/// How leading ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeadershipLost {
    /// Another replica holds the Lease now.
    #[error("lost the leader Lease to {0}")]
    TakenBy(String),
    /// Renewing failed for longer than the renew deadline.
    #[error("could not renew the leader Lease for {0:?}: {1}")]
    RenewFailed(Duration, String),
}

/// One replica's view of the Lease.
pub struct LeaderElector {
    api: Api<Lease>,
    options: LeaseOptions,
    /// The last record seen (its resourceVersion) and when it was first seen.
    observed: Option<(String, Instant)>,
    /// What the holder of the Lease last seen advertises (`None` while this replica
    /// holds it).
    leader: watch::Sender<Option<LeaderAddress>>,
}

impl LeaderElector {
    /// An elector over `client`.
    pub fn new(client: Client, options: LeaseOptions) -> Self {
        Self {
            api: Api::namespaced(client, &options.namespace),
            options,
            observed: None,
            leader: watch::Sender::new(None),
        }
    }

    /// Follows where the leader's admission server is, while another replica leads.
    pub fn leader_address(&self) -> watch::Receiver<Option<LeaderAddress>> {
        self.leader.subscribe()
    }

    /// The options.
    pub(crate) fn options(&self) -> &LeaseOptions {
        &self.options
    }

    fn post_params() -> PostParams {
        PostParams {
            dry_run: false,
            field_manager: Some(FIELD_MANAGER.to_owned()),
        }
    }

    fn duration_seconds(&self) -> i32 {
        i32::try_from(self.options.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }

    /// One attempt to acquire the Lease or renew it.
    pub(crate) async fn try_acquire_or_renew(&mut self) -> Result<Attempt, ::kube::Error> {
        let me = self.options.identity.clone();
        let now = MicroTime(jiff::Timestamp::now());
        let Some(lease) = self.api.get_opt(&self.options.name).await? else {
            let mut metadata = ObjectMeta {
                name: Some(self.options.name.clone()),
                namespace: Some(self.options.namespace.clone()),
                ..ObjectMeta::default()
            };
            advertise_in(&mut metadata, self.options.advertise.as_ref());
            let lease = Lease {
                metadata,
                spec: Some(LeaseSpec {
                    holder_identity: Some(me),
                    lease_duration_seconds: Some(self.duration_seconds()),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&Self::post_params(), &lease).await {
                Ok(_) => {
                    self.leader.send_replace(None);
                    Ok(Attempt::Leading)
                }
                // Another replica created it first.
                Err(::kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Following {
                    holder: String::new(),
                }),
                Err(e) => Err(e),
            };
        };
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        let observed_at = match &self.observed {
            Some((seen, at)) if *seen == version => *at,
            _ => {
                let at = Instant::now();
                self.observed = Some((version, at));
                at
            }
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let duration = Duration::from_secs(
            u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
        );
        if !holder.is_empty() && holder != me && observed_at.elapsed() < duration {
            self.leader.send_if_modified(|known| {
                let now = advertised(&lease);
                let changed = *known != now;
                *known = now;
                changed
            });
            return Ok(Attempt::Following { holder });
        }
        let mut updated = lease;
        advertise_in(&mut updated.metadata, self.options.advertise.as_ref());
        let mut new_spec = spec;
        if holder != me {
            new_spec.acquire_time = Some(now.clone());
            new_spec.lease_transitions = Some(new_spec.lease_transitions.unwrap_or(0) + 1);
        }
        new_spec.holder_identity = Some(me);
        new_spec.renew_time = Some(now);
        new_spec.lease_duration_seconds = Some(self.duration_seconds());
        updated.spec = Some(new_spec);
        // `updated` carries the resourceVersion read: a concurrent write makes this a
        // 409 Conflict instead of a second leader.
        match self
            .api
            .replace(&self.options.name, &Self::post_params(), &updated)
            .await
        {
            Ok(_) => {
                self.leader.send_if_modified(|known| known.take().is_some());
                Ok(Attempt::Leading)
            }
            Err(::kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Following { holder }),
            Err(e) => Err(e),
        }
    }

    /// Waits until this replica leads (or `stop` is set: `false`).
    pub(crate) async fn acquire(&mut self, stop: &mut watch::Receiver<bool>) -> bool {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Leading) => {
                    tracing::info!(lease = %self.options.name, identity = %self.options.identity, "became the leader");
                    return true;
                }
                Ok(Attempt::Following { holder }) => {
                    tracing::debug!(lease = %self.options.name, holder = %holder, "another replica leads");
                }
                Err(e) => {
                    tracing::warn!(lease = %self.options.name, error = %e, "cannot read or take the leader Lease");
                }
            }
            if self.pause(stop).await {
                return false;
            }
        }
    }

    /// Renews while leading; returns why leading ended, or `Ok` when `stop` was set.
    pub(crate) async fn renew(
        &mut self,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<(), LeadershipLost> {
        let mut renewed = Instant::now();
        loop {
            if self.pause(stop).await {
                return Ok(());
            }
            let left = self
                .options
                .renew_deadline
                .saturating_sub(renewed.elapsed());
            let attempt = tokio::time::timeout(left, self.try_acquire_or_renew()).await;
            match attempt {
                Ok(Ok(Attempt::Leading)) => renewed = Instant::now(),
                Ok(Ok(Attempt::Following { holder })) => {
                    return Err(LeadershipLost::TakenBy(holder));
                }
                Ok(Err(e)) if renewed.elapsed() < self.options.renew_deadline => {
                    tracing::warn!(lease = %self.options.name, error = %e, "renewing the leader Lease failed; retrying");
                }
                Ok(Err(e)) => {
                    return Err(LeadershipLost::RenewFailed(
                        self.options.renew_deadline,
                        e.to_string(),
                    ));
                }
                Err(_) => {
                    return Err(LeadershipLost::RenewFailed(
                        self.options.renew_deadline,
                        "timed out".to_owned(),
                    ));
                }
            }
        }
    }

    /// Hands the Lease back (as client-go's `ReleaseOnCancel`), so a follower takes
    /// over at once instead of after the lease duration.
    pub(crate) async fn release(&mut self) -> Result<(), ::kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.options.name).await? else {
            return Ok(());
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.options.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        advertise_in(&mut lease.metadata, None);
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(jiff::Timestamp::now()));
        lease.spec = Some(spec);
        self.api
            .replace(&self.options.name, &Self::post_params(), &lease)
            .await
            .map(drop)
    }

    /// Sleeps one retry period (with up to 20% jitter, so replicas do not move in
    /// step); true if `stop` was set meanwhile.
    async fn pause(&self, stop: &mut watch::Receiver<bool>) -> bool {
        let jitter = self.options.retry_period.as_millis() as u64 / 5;
        let extra = if jitter == 0 {
            0
        } else {
            getrandom::u64().unwrap_or(0) % jitter
        };
        let wait = self.options.retry_period + Duration::from_millis(extra);
        let stopped = tokio::select! {
            () = tokio::time::sleep(wait) => None,
            _ = stop.wait_for(|s| *s) => Some(true),
        };
        stopped.unwrap_or_else(|| *stop.borrow())
    }
}

#[cfg(test)]
mod tests;
