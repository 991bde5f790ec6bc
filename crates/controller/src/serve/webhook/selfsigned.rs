//! Self-signed webhook certificates (`operon serve --webhook-self-signed`): a CA and a
//! serving certificate for the webhook Service's names, kept in one Secret in the
//! engine's namespace so that every replica serves a certificate of the same CA, the one
//! the webhook configurations' `caBundle` names.
//!
//! The Secret (type `kubernetes.io/tls`, label `app.kubernetes.io/managed-by: operon`)
//! holds `tls.crt`/`tls.key` (the serving certificate) and `ca.crt`/`ca.key` (the CA,
//! whose key lets any replica renew the serving certificate under the same CA, so the
//! `caBundle` does not change when it is renewed). A replica that finds no Secret
//! creates it; one that loses that race reads the winner's. A renewal is written with
//! the `resourceVersion` it read as precondition; a replica that loses reads again and
//! re-checks. A Secret Operon did not make (cert-manager's, say) is never written.
//!
//! Each replica copies the serving certificate into files that the webhook server's
//! [`ReloadingCert`](super::tls::ReloadingCert) follows, and looks at the Secret again
//! every `check_every`, so another replica's renewal reaches it without a restart. The
//! CA bundle is published on a watch channel for whoever writes the configurations.
//! When the CA itself nears its end, a new one joins `ca.crt` a renewal window before
//! it signs anything, so the `caBundle` names both while replicas switch over. What to
//! renew and when is decided in `certs`, without I/O.

mod certs;
mod files;
#[cfg(test)]
mod tests;

pub use certs::CertError;

use certs::{Material, Names, Plan, Policy};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};
use operon_cluster::kube::FIELD_MANAGER;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::watch;

/// The label that marks the Secret as Operon's to write.
pub(crate) const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Its value.
pub(crate) const MANAGED_BY: &str = "operon";
/// The annotation recording the names the serving certificate was made for.
pub(crate) const NAMES_ANNOTATION: &str = "operon.dev/webhook-certificate-names";
/// The Secret's type: the one kubectl, cert-manager and Ingress controllers know.
pub(crate) const SECRET_TYPE: &str = "kubernetes.io/tls";
/// The serving certificate's file name, in the Secret and in the directory.
pub(crate) const CERT_FILE: &str = "tls.crt";
/// Its key's file name.
pub(crate) const KEY_FILE: &str = "tls.key";
const CA_CERT_KEY: &str = "ca.crt";
const CA_KEY_KEY: &str = "ca.key";

/// A renewal window of 30 days: the certificate is renewed well before it expires, and
/// a replica that cannot reach the API server keeps serving for a month.
pub(crate) const DEFAULT_RENEW_BEFORE: Duration = Duration::from_secs(30 * 86_400);
/// How often each replica looks at the Secret.
pub(crate) const DEFAULT_CHECK_EVERY: Duration = Duration::from_secs(3600);

/// Read-check-write rounds before giving up when other replicas keep winning.
const ATTEMPTS: usize = 5;
/// The first wait after a failed look; it doubles up to `check_every`.
const FIRST_RETRY: Duration = Duration::from_secs(30);

/// Where the certificate lives and what it is for.
#[derive(Debug, Clone)]
pub struct SelfSignedOptions {
    /// The engine's namespace, where the Secret is.
    pub(crate) namespace: String,
    /// The Secret's name.
    pub(crate) secret: String,
    /// The DNS names the API server calls the webhooks by (see [`service_dns_names`]).
    pub dns_names: Vec<String>,
    /// IP addresses the API server calls the webhooks by (an engine outside the cluster
    /// reached through `--webhook-url-base https://127.0.0.1:PORT`).
    pub ip_addresses: Vec<IpAddr>,
    /// The directory the serving certificate and key are written to (`tls.crt`,
    /// `tls.key`); made when missing.
    pub(crate) dir: PathBuf,
    /// Renew a serving certificate that expires within this; replace a CA that expires
    /// within twice this.
    pub(crate) renew_before: Duration,
    /// How often [`SelfSigned::run`] looks at the Secret (plus up to a tenth of it at
    /// random, so replicas do not look at once).
    pub(crate) check_every: Duration,
}

impl SelfSignedOptions {
    /// Options for the Service `service` in `namespace`, with the default timings.
    pub fn for_service(namespace: &str, secret: &str, service: &str, dir: PathBuf) -> Self {
        Self {
            namespace: namespace.to_owned(),
            secret: secret.to_owned(),
            dns_names: service_dns_names(service, namespace),
            ip_addresses: Vec::new(),
            dir,
            renew_before: DEFAULT_RENEW_BEFORE,
            check_every: DEFAULT_CHECK_EVERY,
        }
    }
}

/// The names a Service answers to inside the cluster: `NAME`, `NAME.NS`, `NAME.NS.svc`
/// and `NAME.NS.svc.cluster.local`. The API server uses `NAME.NS.svc`; the others serve
/// clients that resolve the short forms.
pub fn service_dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// The certificate this replica serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    /// The CA certificates (PEM) the API server must trust: the `caBundle` of the webhook
    /// configurations.
    pub(crate) ca_pem: Vec<u8>,
    /// The serving certificate's file.
    pub cert_path: PathBuf,
    /// Its key's file (mode 0600).
    pub key_path: PathBuf,
    /// When the serving certificate expires.
    pub(crate) not_after: jiff::Timestamp,
}

/// Why the certificate could not be ensured; every message names the Secret.
#[derive(Debug, thiserror::Error)]
pub enum SelfSignedError {
    /// The options cannot work.
    #[error("self-signed webhook certificate in Secret {secret}: {reason}")]
    Options {
        /// `namespace/name`.
        secret: String,
        /// What is wrong.
        reason: String,
    },
    /// The Secret exists and Operon did not make it.
    #[error(
        "Secret {secret} exists and is not managed by Operon (it has no label \
         {MANAGED_BY_LABEL}={MANAGED_BY}); it is left alone: drop --webhook-self-signed to \
         serve the certificate it holds, or choose another Secret name"
    )]
    NotManaged {
        /// `namespace/name`.
        secret: String,
    },
    /// The API server refused or failed a request.
    #[error("{action} Secret {secret}: {source}")]
    Api {
        /// `namespace/name`.
        secret: String,
        /// What was being done: reading, creating or updating.
        action: &'static str,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// Other writers changed the Secret under every attempt to update it.
    #[error("Secret {secret} changed under each of {ATTEMPTS} attempts to update it")]
    Contended {
        /// `namespace/name`.
        secret: String,
    },
    /// The certificates could not be made.
    #[error("making the certificates for Secret {secret}: {source}")]
    Generate {
        /// `namespace/name`.
        secret: String,
        /// Why.
        #[source]
        source: CertError,
    },
    /// A file could not be written.
    #[error("writing {} from Secret {secret}: {source}", path.display())]
    Write {
        /// `namespace/name`.
        secret: String,
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The self-signed certificate of one replica: ensures it, refreshes it.
pub struct SelfSigned {
    secrets: Api<Secret>,
    options: SelfSignedOptions,
    /// The CA bundle last ensured (empty before the first success), for the caller
    /// that writes it into the webhook configurations.
    ca: watch::Sender<Vec<u8>>,
}

impl SelfSigned {
    /// A certificate kept in `options.secret` through `client`.
    pub fn new(client: Client, options: SelfSignedOptions) -> Self {
        Self {
            secrets: Api::namespaced(client, &options.namespace),
            options,
            ca: watch::Sender::new(Vec::new()),
        }
    }

    /// The CA bundle (PEM), updated whenever [`ensure`](Self::ensure) finds it changed;
    /// empty until it first succeeds.
    pub fn ca_bundle(&self) -> watch::Receiver<Vec<u8>> {
        self.ca.subscribe()
    }

    /// Makes the Secret hold a CA and a serving certificate good for the requested
    /// names beyond the renewal window (creating or renewing it as needed), writes the
    /// serving certificate and key to the directory, and publishes the CA bundle.
    pub async fn ensure(&self) -> Result<Bundle, SelfSignedError> {
        self.ensure_at(jiff::Timestamp::now().as_second()).await
    }

    async fn ensure_at(&self, now: i64) -> Result<Bundle, SelfSignedError> {
        let (material, not_after) = self.reconcile(now).await?;
        let dir = &self.options.dir;
        let written = |path: PathBuf| {
            move |source| SelfSignedError::Write {
                secret: self.secret_ref(),
                path,
                source,
            }
        };
        files::ensure_dir(dir).map_err(written(dir.clone()))?;
        let cert_path = dir.join(CERT_FILE);
        let key_path = dir.join(KEY_FILE);
        // The key first: a server that reloads between the two renames finds a key that
        // does not fit, keeps its certificate and tries again.
        let key_changed = files::write_if_changed(&key_path, &material.tls_key, 0o600)
            .map_err(written(key_path.clone()))?;
        let cert_changed = files::write_if_changed(&cert_path, &material.tls_crt, 0o644)
            .map_err(written(cert_path.clone()))?;
        if key_changed || cert_changed {
            tracing::info!(secret = %self.secret_ref(), dir = %dir.display(),
                not_after = %certs::timestamp(not_after), "webhook certificate files written");
        }
        self.ca.send_if_modified(|ca| {
            let changed = *ca != material.ca_crt;
            if changed {
                ca.clone_from(&material.ca_crt);
            }
            changed
        });
        Ok(Bundle {
            ca_pem: material.ca_crt,
            cert_path,
            key_path,
            not_after: jiff::Timestamp::from_second(not_after).unwrap_or(jiff::Timestamp::MAX),
        })
    }

    /// Looks at the Secret every `check_every` (with jitter) until `stopped` turns
    /// true; a failed look is logged and retried sooner, while the files keep the
    /// current certificate. Call [`ensure`](Self::ensure) once before, to have files to
    /// serve.
    pub async fn run(&self, mut stopped: watch::Receiver<bool>) {
        let check_every = self.options.check_every;
        let mut retry = None::<Duration>;
        loop {
            let wait = retry.unwrap_or_else(|| check_every + jitter(check_every / 10));
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = stopped.wait_for(|s| *s) => return,
            }
            match self.ensure().await {
                Ok(_) => {
                    if retry.take().is_some() {
                        tracing::info!(secret = %self.secret_ref(), "webhook certificate checked again");
                    }
                }
                Err(e) => {
                    let next = retry.map_or(FIRST_RETRY, |r| r * 2).min(check_every);
                    retry = Some(next);
                    tracing::warn!(error = %e, retry_in_s = next.as_secs(),
                        "cannot check the webhook certificate; still serving the current one");
                }
            }
        }
    }

    fn secret_ref(&self) -> String {
        format!("{}/{}", self.options.namespace, self.options.secret)
    }

    fn api_error(&self, action: &'static str) -> impl FnOnce(kube::Error) -> SelfSignedError {
        let secret = self.secret_ref();
        move |source| SelfSignedError::Api {
            secret,
            action,
            source,
        }
    }

    fn policy(&self) -> Result<(Names, Policy), SelfSignedError> {
        let options = &self.options;
        let invalid = |reason: &str| SelfSignedError::Options {
            secret: self.secret_ref(),
            reason: reason.to_owned(),
        };
        let names = Names {
            dns: options.dns_names.clone(),
            ips: options.ip_addresses.clone(),
        };
        if names.is_empty() {
            return Err(invalid("no DNS name or IP address to make it for"));
        }
        let renew_before = seconds(options.renew_before);
        // A window as long as the certificate would renew it at every look.
        if renew_before >= certs::LEAF_VALIDITY / 2 {
            return Err(invalid(
                "the renewal window must be shorter than half the certificate's 365 days",
            ));
        }
        // Two looks of every replica, so each has put a new CA in its bundle before a
        // serving certificate of that CA is handed out.
        let settle = seconds(options.check_every).saturating_mul(2);
        Ok((
            names,
            Policy {
                renew_before,
                settle,
            },
        ))
    }

    /// Reads the Secret and writes it when it needs to; what it holds then, and when
    /// its serving certificate expires.
    async fn reconcile(&self, now: i64) -> Result<(Material, i64), SelfSignedError> {
        let (wanted, policy) = self.policy()?;
        let name = &self.options.secret;
        let generate = |source| SelfSignedError::Generate {
            secret: self.secret_ref(),
            source,
        };
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        };
        for _ in 0..ATTEMPTS {
            let read = self
                .secrets
                .get_opt(name)
                .await
                .map_err(self.api_error("reading"))?;
            let Some(mut secret) = read else {
                let (material, not_after) = certs::fresh(&wanted, now).map_err(generate)?;
                match self
                    .secrets
                    .create(&params, &self.new_secret(&material, &wanted))
                    .await
                {
                    Ok(_) => {
                        tracing::info!(secret = %self.secret_ref(), names = %wanted.joined(),
                            "webhook CA and certificate created");
                        return Ok((material, not_after));
                    }
                    // Another replica created it first: use theirs.
                    Err(kube::Error::Api(s)) if s.is_already_exists() => continue,
                    Err(e) => return Err(self.api_error("creating")(e)),
                }
            };
            if !managed(&secret) {
                return Err(SelfSignedError::NotManaged {
                    secret: self.secret_ref(),
                });
            }
            let stored = material(&secret);
            let (material, names, not_after, reasons) =
                match certs::plan(&stored, &wanted, &policy, now).map_err(generate)? {
                    Plan::Keep { not_after } => return Ok((stored, not_after)),
                    Plan::Replace {
                        material,
                        names,
                        not_after,
                        reasons,
                    } => (material, names, not_after, reasons),
                };
            update(&mut secret, &material, &names);
            // The read resourceVersion stays in the body: the write fails with 409 if
            // another replica wrote in between, and is then re-planned from its result.
            match self.secrets.replace(name, &params, &secret).await {
                Ok(_) => {
                    tracing::info!(secret = %self.secret_ref(), reasons = %reasons.join("; "),
                        not_after = %certs::timestamp(not_after), "webhook certificate renewed");
                    return Ok((material, not_after));
                }
                Err(kube::Error::Api(s)) if s.is_conflict() => continue,
                Err(e) => return Err(self.api_error("updating")(e)),
            }
        }
        Err(SelfSignedError::Contended {
            secret: self.secret_ref(),
        })
    }

    fn new_secret(&self, material: &Material, names: &Names) -> Secret {
        let mut secret = Secret {
            metadata: ObjectMeta {
                name: Some(self.options.secret.clone()),
                namespace: Some(self.options.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    MANAGED_BY_LABEL.to_owned(),
                    MANAGED_BY.to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            type_: Some(SECRET_TYPE.to_owned()),
            ..Secret::default()
        };
        update(&mut secret, material, names);
        secret
    }
}

fn managed(secret: &Secret) -> bool {
    secret
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .is_some_and(|v| v == MANAGED_BY)
}

/// The four documents of a Secret; a missing key reads as empty (and so as unusable).
fn material(secret: &Secret) -> Material {
    let get = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| b.0.clone())
            .unwrap_or_default()
    };
    Material {
        ca_crt: get(CA_CERT_KEY),
        ca_key: get(CA_KEY_KEY),
        tls_crt: get(CERT_FILE),
        tls_key: get(KEY_FILE),
    }
}

/// Puts `material` and the names annotation into `secret`, keeping whatever else it
/// holds (other keys, labels, annotations).
fn update(secret: &mut Secret, material: &Material, names: &Names) {
    let data = secret.data.get_or_insert_with(BTreeMap::new);
    for (key, value) in [
        (CA_CERT_KEY, &material.ca_crt),
        (CA_KEY_KEY, &material.ca_key),
        (CERT_FILE, &material.tls_crt),
        (KEY_FILE, &material.tls_key),
    ] {
        data.insert(key.to_owned(), ByteString(value.clone()));
    }
    secret
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(NAMES_ANNOTATION.to_owned(), names.joined());
    // Left out, the server keeps the field ownership it has; sent back, it would be
    // checked for nothing.
    secret.metadata.managed_fields = None;
}

fn seconds(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// A random wait of at most `max`.
fn jitter(max: Duration) -> Duration {
    let max_ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
    if max_ms == 0 {
        return Duration::ZERO;
    }
    Duration::from_millis(getrandom::u64().unwrap_or(0) % max_ms)
}
