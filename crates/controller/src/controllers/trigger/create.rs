//! [`DiagnosisCreator`]: turns what a Trigger matched ([`NewDiagnosis`]) into a created
//! Diagnosis, under the Trigger's rate limit, with an owner reference to the Trigger,
//! counting what happened. Shared by the controller (cron, events) and the alert
//! receiver.

use super::DiagnosesCounter;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Client;
use kube::api::{Api, PostParams};
use operon_cluster::kube::FIELD_MANAGER;
use operon_data::api::{API_VERSION, Diagnosis, Trigger};
use operon_pipeline::triggers::{CompiledTrigger, NewDiagnosis, TokenBucket};
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::time::Instant;

/// Buckets kept before full ones (no different from new ones) are dropped.
const MAX_IDLE_BUCKETS: usize = 1024;

/// What became of one Diagnosis a Trigger asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It was created.
    Created,
    /// A Diagnosis of that name exists: the same alert, event occurrence or slot was
    /// seen before (a redelivery, a re-list, another replica).
    AlreadyExists,
    /// The Trigger is over its `rateLimit`; nothing was sent.
    RateLimited,
}

impl Outcome {
    /// The `outcome` label of `operon_trigger_diagnoses_total`.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::AlreadyExists => "already_exists",
            Self::RateLimited => "rate_limited",
        }
    }
}

/// Why a Diagnosis could not be created (worth retrying, unlike [`Outcome`]s).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CreateError {
    /// The Trigger has no uid (it was not read from an API server), so no owner
    /// reference can point at it.
    #[error("{trigger} has no uid")]
    NoUid {
        /// `Trigger/<name>`.
        trigger: String,
    },
    /// The API server refused the creation or could not be reached.
    #[error("creating Diagnosis {namespace}/{name}: {source}")]
    Api {
        /// The Diagnosis' namespace.
        namespace: String,
        /// The Diagnosis' name.
        name: String,
        /// What the API server said.
        #[source]
        source: kube::Error,
    },
}

/// Creates Diagnoses for Triggers.
pub(crate) struct DiagnosisCreator {
    client: Client,
    /// Per Trigger uid, so a Trigger deleted and created again starts with a full
    /// bucket, and one edited keeps what it used.
    buckets: Mutex<HashMap<String, TokenBucket>>,
    /// `operon_trigger_diagnoses_total`, when the process serves metrics.
    counter: Option<DiagnosesCounter>,
}

impl DiagnosisCreator {
    /// A creator that talks to `client` and counts into `counter`, if any.
    pub(crate) fn new(client: Client, counter: Option<DiagnosesCounter>) -> Self {
        Self {
            client,
            buckets: Mutex::new(HashMap::new()),
            counter,
        }
    }

    /// Creates `new` for `trigger` (compiled as `compiled`), unless the Trigger is over
    /// its rate limit. A Diagnosis that already exists is not an error: the names are
    /// deterministic, so it is this very match seen again.
    pub(crate) async fn create(
        &self,
        trigger: &Trigger,
        compiled: &CompiledTrigger,
        new: NewDiagnosis,
    ) -> Result<Outcome, CreateError> {
        let source = new
            .labels
            .get(operon_pipeline::triggers::SOURCE_LABEL)
            .cloned()
            .unwrap_or_default();
        let result = self.try_create(trigger, compiled, new).await;
        if let Some(counter) = self.counter {
            let outcome = match &result {
                Ok(outcome) => outcome.label(),
                Err(_) => "failed",
            };
            counter.count(compiled.name(), &source, outcome);
        }
        result
    }

    async fn try_create(
        &self,
        trigger: &Trigger,
        compiled: &CompiledTrigger,
        new: NewDiagnosis,
    ) -> Result<Outcome, CreateError> {
        let uid = trigger
            .metadata
            .uid
            .clone()
            .filter(|uid| !uid.is_empty())
            .ok_or_else(|| CreateError::NoUid {
                trigger: trigger.object_ref(),
            })?;
        if !self.take_token(&uid, compiled) {
            let limit = compiled.rate_limit();
            tracing::warn!(
                trigger = %compiled.name(), diagnosis = %new.name,
                limit = limit.diagnoses, per_seconds = limit.per_seconds,
                "Trigger over its rate limit: Diagnosis not created"
            );
            return Ok(Outcome::RateLimited);
        }
        let (namespace, name) = (new.namespace.clone(), new.name.clone());
        let mut diagnosis = new.into_diagnosis();
        diagnosis.metadata.owner_references = Some(vec![owner_reference(trigger, uid.clone())]);
        let api: Api<Diagnosis> = Api::namespaced(self.client.clone(), &namespace);
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        };
        match api.create(&params, &diagnosis).await {
            Ok(_) => {
                tracing::info!(trigger = %compiled.name(), diagnosis = %name, namespace = %namespace,
                    "Diagnosis created");
                Ok(Outcome::Created)
            }
            Err(kube::Error::Api(status))
                if status.code == 409 && status.reason == "AlreadyExists" =>
            {
                self.give_back(&uid);
                tracing::debug!(trigger = %compiled.name(), diagnosis = %name, namespace = %namespace,
                    "Diagnosis exists already (seen before)");
                Ok(Outcome::AlreadyExists)
            }
            Err(source) => {
                self.give_back(&uid);
                Err(CreateError::Api {
                    namespace,
                    name,
                    source,
                })
            }
        }
    }

    fn take_token(&self, uid: &str, compiled: &CompiledTrigger) -> bool {
        let now = Instant::now().into_std();
        let limit = compiled.rate_limit();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() > MAX_IDLE_BUCKETS {
            buckets.retain(|_, bucket| !bucket.is_full(now));
        }
        let bucket = buckets
            .entry(uid.to_owned())
            .or_insert_with(|| TokenBucket::new(limit, now));
        bucket.set_limit(limit, now);
        bucket.try_take(now)
    }

    fn give_back(&self, uid: &str) {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bucket) = buckets.get_mut(uid) {
            bucket.give_back();
        }
    }
}

/// The Diagnosis' reference to its Trigger.
///
/// `controller: true`, as a CronJob's Jobs have: the Trigger made the Diagnosis and is
/// its only owner, `kubectl describe` shows it as "Controlled By", and no other
/// controller may claim it. `blockOwnerDeletion: false`: setting it true needs
/// `update` on `triggers/finalizers` where the OwnerReferencesPermissionEnforcement
/// admission plugin runs, and a Trigger's deletion need not wait for its Diagnoses; the
/// garbage collector deletes them in the background either way.
pub(crate) fn owner_reference(trigger: &Trigger, uid: String) -> OwnerReference {
    OwnerReference {
        api_version: API_VERSION.to_owned(),
        kind: "Trigger".to_owned(),
        name: trigger.metadata.name.clone().unwrap_or_default(),
        uid,
        controller: Some(true),
        block_owner_deletion: Some(false),
    }
}
