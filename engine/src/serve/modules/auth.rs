//! Who may use the module API: the caller's bearer token is checked by the API server
//! (a TokenReview), and what it asks by a SubjectAccessReview on the resource
//! `modules` of group `operon.dev`, so access is granted with ordinary RBAC (verbs
//! `create`, `get`, `list`, `delete`). There is no anonymous access.
//!
//! Answers are cached briefly, as kube-apiserver caches its webhook authenticator's and
//! authorizer's: a push followed by `operon module ls` asks the API server once. The
//! cache is keyed by the SHA-256 of the token, never the token; a token accepted or an
//! access allowed is kept [`AUTHENTICATED_TTL`] / [`ALLOWED_TTL`], a refusal only
//! [`DENIED_TTL`], so that a new RoleBinding takes effect within seconds. A review that
//! could not be made is not cached.

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};
use sha2::Digest as _;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// How long an accepted token is taken without asking again (kube-apiserver's
/// `--authentication-token-webhook-cache-ttl` is 2 minutes; this is shorter).
pub const AUTHENTICATED_TTL: Duration = Duration::from_secs(60);
/// How long an allowed access is taken without asking again.
pub const ALLOWED_TTL: Duration = Duration::from_secs(60);
/// How long a rejected token or a denied access is remembered.
pub const DENIED_TTL: Duration = Duration::from_secs(10);
/// The most answers kept; past it, expired ones go, then all.
const CACHE_ENTRIES: usize = 4096;

/// SHA-256 of a token: what the cache keeps instead of the token.
type TokenHash = [u8; 32];
/// A SubjectAccessReview's question: the token's hash, the verb, the module.
type AccessKey = (TokenHash, &'static str, Option<String>);

/// Answers by key, each until its expiry.
struct Cache<K, V> {
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: std::hash::Hash + Eq, V: Clone> Cache<K, V> {
    fn new() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .filter(|(expires, _)| *expires > Instant::now())
            .map(|(_, value)| value.clone())
    }

    fn put(&self, key: K, value: V, ttl: Duration) {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= CACHE_ENTRIES {
            entries.retain(|_, (expires, _)| *expires > now);
            if entries.len() >= CACHE_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, (now + ttl, value));
    }
}

/// Why a request was not allowed.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// No `Authorization: Bearer` header.
    #[error(
        "no bearer token: send `Authorization: Bearer <token>` (e.g. from `kubectl create token`)"
    )]
    NoToken,
    /// The API server did not accept the token.
    #[error("the bearer token is not valid{}", suffix(.0))]
    Unauthenticated(String),
    /// The user may not do this.
    #[error("{user} may not {verb} modules.operon.dev{}{}", name.as_ref().map(|n| format!(" {n:?}")).unwrap_or_default(), suffix(.reason))]
    Forbidden {
        /// The authenticated user.
        user: String,
        /// The verb.
        verb: &'static str,
        /// The module, for requests about one.
        name: Option<String>,
        /// What the authorizer said.
        reason: String,
    },
    /// The API server could not be asked.
    #[error("cannot check the request with the API server: {0}")]
    Review(#[source] kube::Error),
}

fn suffix(text: &str) -> String {
    match text {
        "" => String::new(),
        text => format!(": {text}"),
    }
}

/// The caller, as the API server authenticated them.
#[derive(Debug, Clone, PartialEq)]
pub struct Caller {
    /// Their user name, e.g. `system:serviceaccount:ns:name`.
    pub user: String,
    user_info: UserInfo,
}

/// Checks tokens and permissions with the API server.
#[derive(Clone)]
pub struct Authorizer {
    client: Client,
    /// TokenReview answers: the caller, or why the token was rejected.
    tokens: Arc<Cache<TokenHash, Result<Caller, String>>>,
    /// SubjectAccessReview answers per (token, verb, module): `Err` holds the reason.
    access: Arc<Cache<AccessKey, Result<(), String>>>,
    /// How long accepted tokens, allowed accesses and refusals are kept.
    ttls: [Duration; 3],
}

impl Authorizer {
    /// An authorizer asking the API server behind `client` (whose account needs
    /// `create` on tokenreviews and subjectaccessreviews).
    pub fn new(client: Client) -> Self {
        Self {
            client,
            tokens: Arc::new(Cache::new()),
            access: Arc::new(Cache::new()),
            ttls: [AUTHENTICATED_TTL, ALLOWED_TTL, DENIED_TTL],
        }
    }

    /// An authorizer that asks the API server every time (tests that follow each
    /// request's reviews).
    #[cfg(test)]
    pub(crate) fn uncached(client: Client) -> Self {
        Self {
            ttls: [Duration::ZERO; 3],
            ..Self::new(client)
        }
    }

    /// Authenticates `authorization` (the header's value) and checks that the caller may
    /// `verb` the modules (the module `name`, when the request is about one).
    pub async fn allow(
        &self,
        authorization: Option<&str>,
        verb: &'static str,
        name: Option<&str>,
    ) -> Result<Caller, AuthError> {
        let token = authorization
            .and_then(|h| {
                h.strip_prefix("Bearer ")
                    .or_else(|| h.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(AuthError::NoToken)?;
        let [authenticated_ttl, allowed_ttl, denied_ttl] = self.ttls;
        let hash: TokenHash = sha2::Sha256::digest(token.as_bytes()).into();
        let caller = match self.tokens.get(&hash) {
            Some(known) => known.map_err(AuthError::Unauthenticated)?,
            None => match self.authenticate(token).await {
                Ok(caller) => {
                    self.tokens.put(hash, Ok(caller.clone()), authenticated_ttl);
                    caller
                }
                Err(AuthError::Unauthenticated(reason)) => {
                    self.tokens.put(hash, Err(reason.clone()), denied_ttl);
                    return Err(AuthError::Unauthenticated(reason));
                }
                Err(e) => return Err(e),
            },
        };
        let key = (hash, verb, name.map(str::to_owned));
        let forbidden = |reason: String| AuthError::Forbidden {
            user: caller.user.clone(),
            verb,
            name: name.map(str::to_owned),
            reason,
        };
        match self.access.get(&key) {
            Some(Ok(())) => return Ok(caller),
            Some(Err(reason)) => return Err(forbidden(reason)),
            None => {}
        }
        match self.authorize(&caller, verb, name).await {
            Ok(()) => {
                self.access.put(key, Ok(()), allowed_ttl);
                Ok(caller)
            }
            Err(AuthError::Forbidden { reason, .. }) => {
                self.access.put(key, Err(reason.clone()), denied_ttl);
                Err(forbidden(reason))
            }
            Err(e) => Err(e),
        }
    }

    async fn authenticate(&self, token: &str) -> Result<Caller, AuthError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(AuthError::Review)?;
        let status = answer.status.unwrap_or_default();
        match (status.authenticated, status.user) {
            (Some(true), Some(user)) => Ok(Caller {
                user: user.username.clone().unwrap_or_default(),
                user_info: user,
            }),
            _ => Err(AuthError::Unauthenticated(status.error.unwrap_or_default())),
        }
    }

    async fn authorize(
        &self,
        caller: &Caller,
        verb: &'static str,
        name: Option<&str>,
    ) -> Result<(), AuthError> {
        let info = &caller.user_info;
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: info.username.clone(),
                groups: info.groups.clone(),
                uid: info.uid.clone(),
                extra: info.extra.clone(),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(crate::api::GROUP.to_owned()),
                    version: Some(crate::api::VERSION.to_owned()),
                    resource: Some("modules".to_owned()),
                    verb: Some(verb.to_owned()),
                    name: name.map(str::to_owned),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(AuthError::Review)?;
        let status = answer.status.unwrap_or_default();
        if status.allowed && status.denied != Some(true) {
            return Ok(());
        }
        Err(AuthError::Forbidden {
            user: caller.user.clone(),
            verb,
            name: name.map(str::to_owned),
            reason: status
                .reason
                .or(status.evaluation_error)
                .unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::kube::mock::{MockApi, pair};
    use serde_json::json;

    /// Answers one TokenReview (accepting the token when `user` is given) and, for an
    /// accepted one, the SubjectAccessReview that follows with `allowed`.
    async fn reviews(api: &mut MockApi, token: &str, user: Option<&str>, allowed: bool) {
        let call = api.next().await;
        assert_eq!(call.uri, "/apis/authentication.k8s.io/v1/tokenreviews?");
        let mut body = call.json();
        assert_eq!(body["spec"]["token"], token);
        body["status"] = match user {
            Some(user) => json!({"authenticated": true, "user": {"username": user}}),
            None => json!({"authenticated": false, "error": "invalid bearer token"}),
        };
        call.answer(201, body);
        if user.is_none() {
            return;
        }
        let call = api.next().await;
        assert_eq!(
            call.uri,
            "/apis/authorization.k8s.io/v1/subjectaccessreviews?"
        );
        let mut body = call.json();
        body["status"] = json!({"allowed": allowed, "reason": if allowed { "" } else { "no RBAC policy matched" }});
        call.answer(201, body);
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_request_asks_the_api_server_nothing() {
        let (client, mut api) = pair();
        let auth = Authorizer::new(client);
        let first = tokio::spawn({
            let auth = auth.clone();
            async move { auth.allow(Some("Bearer t-1"), "list", None).await }
        });
        reviews(&mut api, "t-1", Some("alice"), true).await;
        assert_eq!(first.await.unwrap().unwrap().user, "alice");
        let again = auth.allow(Some("Bearer t-1"), "list", None).await.unwrap();
        assert_eq!(again.user, "alice");
        api.quiet().await;
        // Another verb is another question, but the token is known.
        let get = tokio::spawn({
            let auth = auth.clone();
            async move { auth.allow(Some("Bearer t-1"), "get", Some("probe")).await }
        });
        let call = api.next().await;
        assert_eq!(
            call.uri,
            "/apis/authorization.k8s.io/v1/subjectaccessreviews?"
        );
        let mut body = call.json();
        assert_eq!(body["spec"]["resourceAttributes"]["name"], "probe");
        body["status"] = json!({"allowed": true});
        call.answer(201, body);
        get.await.unwrap().unwrap();
        api.quiet().await;
        // After the TTL, both are asked again.
        tokio::time::advance(AUTHENTICATED_TTL.max(ALLOWED_TTL)).await;
        let later = tokio::spawn({
            let auth = auth.clone();
            async move { auth.allow(Some("Bearer t-1"), "list", None).await }
        });
        reviews(&mut api, "t-1", Some("alice"), true).await;
        later.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn refusals_are_remembered_for_less_time() {
        let (client, mut api) = pair();
        let auth = Authorizer::new(client);
        let forged = tokio::spawn({
            let auth = auth.clone();
            async move { auth.allow(Some("Bearer forged"), "list", None).await }
        });
        reviews(&mut api, "forged", None, false).await;
        assert!(matches!(
            forged.await.unwrap(),
            Err(AuthError::Unauthenticated(_))
        ));
        let denied = tokio::spawn({
            let auth = auth.clone();
            async move { auth.allow(Some("Bearer bob"), "create", Some("m")).await }
        });
        reviews(&mut api, "bob", Some("bob"), false).await;
        let err = denied.await.unwrap().unwrap_err();
        assert_eq!(
            err.to_string(),
            "bob may not create modules.operon.dev \"m\": no RBAC policy matched"
        );
        // Within DENIED_TTL: the same answers, no request.
        let err = auth
            .allow(Some("Bearer forged"), "list", None)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the bearer token is not valid: invalid bearer token"
        );
        let err = auth
            .allow(Some("Bearer bob"), "create", Some("m"))
            .await
            .unwrap_err();
        assert!(matches!(err, AuthError::Forbidden { .. }), "{err}");
        api.quiet().await;
        // Past it, a RoleBinding made meanwhile counts: the access is asked again
        // (the token, accepted for longer, is not).
        tokio::time::advance(DENIED_TTL).await;
        let retried = tokio::spawn({
            let auth = auth.clone();
            async move { auth.allow(Some("Bearer bob"), "create", Some("m")).await }
        });
        let call = api.next().await;
        assert_eq!(
            call.uri,
            "/apis/authorization.k8s.io/v1/subjectaccessreviews?"
        );
        let mut body = call.json();
        body["status"] = json!({"allowed": true});
        call.answer(201, body);
        retried.await.unwrap().unwrap();
        api.quiet().await;
    }
}
