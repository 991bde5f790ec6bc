//! Who may use the module API: the caller's bearer token is checked by the API server
//! (a TokenReview), and what it asks by a SubjectAccessReview on the resource
//! `modules` of group `operon.dev`, so access is granted with ordinary RBAC (verbs
//! `create`, `get`, `list`, `delete`). There is no anonymous access.
//!
//! Modules are cluster-scoped, so the review asks without a namespace and only a
//! ClusterRoleBinding answers it. Reading is also granted per namespace to a
//! ServiceAccount: the pods of offloaded steps fetch their module with their
//! ServiceAccount's token, and the deploy docs grant that with a RoleBinding of
//! `operon-module-reader` in the account's namespace. So a `get` or `list` by
//! `system:serviceaccount:NAMESPACE:NAME` that is refused cluster-wide is asked again
//! with `NAMESPACE` in the review. Nobody else is asked in a namespace (a user has
//! none), and `create` and `delete` stay cluster-wide: a RoleBinding must not let a
//! namespace's account replace or remove the modules every namespace runs.
//!
//! Answers are cached briefly, as kube-apiserver caches its webhook authenticator's and
//! authorizer's: a push followed by `operon module ls` asks the API server once. The
//! cache is keyed by the SHA-256 of the token, never the token; a token accepted or an
//! access allowed is kept `AUTHENTICATED_TTL` / `ALLOWED_TTL`, a refusal only
//! `DENIED_TTL`, so that a new RoleBinding takes effect within seconds. A review that
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
pub(crate) const AUTHENTICATED_TTL: Duration = Duration::from_secs(60);
/// How long an allowed access is taken without asking again.
pub(crate) const ALLOWED_TTL: Duration = Duration::from_secs(60);
/// How long a rejected token or a denied access is remembered.
pub(crate) const DENIED_TTL: Duration = Duration::from_secs(10);
/// The most answers kept; past it, expired ones go, then all.
const CACHE_ENTRIES: usize = 4096;

/// The verbs a ServiceAccount may also be granted in its own namespace.
pub(crate) const NAMESPACED_READS: [&str; 2] = ["get", "list"];

/// The user name prefix of ServiceAccounts: `system:serviceaccount:NAMESPACE:NAME`.
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// SHA-256 of a token: what the cache keeps instead of the token.
type TokenHash = [u8; 32];

/// A SubjectAccessReview's question, as the cache keys its answer: the same token
/// asking the same thing in another namespace (or none) is another question.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Question {
    token: TokenHash,
    verb: &'static str,
    /// The module, for requests about one.
    name: Option<String>,
    /// `None`: cluster-wide.
    namespace: Option<String>,
}

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
pub(crate) enum AuthError {
    /// No `Authorization: Bearer` header.
    #[error(
        "no bearer token: send `Authorization: Bearer <token>` (e.g. from `kubectl create token`)"
    )]
    NoToken,
    /// The API server did not accept the token.
    #[error("the bearer token is not valid{}", suffix(.0))]
    Unauthenticated(String),
    /// The user may not do this.
    #[error("{user} may not {verb} modules.operon.dev{}{}{}",
        name.as_ref().map(|n| format!(" {n:?}")).unwrap_or_default(),
        namespace.as_ref().map(|ns| format!(
            " (neither cluster-wide nor in namespace {ns}, where a RoleBinding can grant it)"
        )).unwrap_or_default(),
        suffix(.reason))]
    Forbidden {
        /// The authenticated user.
        user: String,
        /// The verb.
        verb: &'static str,
        /// The module, for requests about one.
        name: Option<String>,
        /// The ServiceAccount's namespace, when it was asked there too.
        namespace: Option<String>,
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

/// The namespace of a ServiceAccount's user name (`system:serviceaccount:NS:NAME`);
/// `None` for any other user.
pub(crate) fn service_account_namespace(user: &str) -> Option<&str> {
    let (namespace, name) = user.strip_prefix(SERVICE_ACCOUNT_PREFIX)?.split_once(':')?;
    let valid = !namespace.is_empty() && !name.is_empty() && !name.contains(':');
    valid.then_some(namespace)
}

/// The caller, as the API server authenticated them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Caller {
    /// Their user name, e.g. `system:serviceaccount:ns:name`.
    pub(crate) user: String,
    user_info: UserInfo,
}

/// Checks tokens and permissions with the API server.
#[derive(Clone)]
pub struct Authorizer {
    client: Client,
    /// TokenReview answers: the caller, or why the token was rejected.
    tokens: Arc<Cache<TokenHash, Result<Caller, String>>>,
    /// SubjectAccessReview answers per question: `Err` holds the reason.
    access: Arc<Cache<Question, Result<(), String>>>,
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
    /// `verb` the modules (the module `name`, when the request is about one):
    /// cluster-wide, or, for a ServiceAccount reading, in its own namespace.
    pub(crate) async fn allow(
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
        let [authenticated_ttl, _, denied_ttl] = self.ttls;
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
        let mut question = Question {
            token: hash,
            verb,
            name: name.map(str::to_owned),
            namespace: None,
        };
        let refusal = match self.ask(&caller, &question).await? {
            Ok(()) => return Ok(caller),
            Err(reason) => reason,
        };
        let forbidden = |namespace: Option<String>, reason: String| AuthError::Forbidden {
            user: caller.user.clone(),
            verb,
            name: name.map(str::to_owned),
            namespace,
            reason,
        };
        let namespace = service_account_namespace(&caller.user)
            .filter(|_| NAMESPACED_READS.contains(&verb))
            .map(str::to_owned);
        let Some(namespace) = namespace else {
            return Err(forbidden(None, refusal));
        };
        question.namespace = Some(namespace.clone());
        match self.ask(&caller, &question).await? {
            Ok(()) => Ok(caller),
            // RBAC gives no reason for a plain "no"; keep whichever answer said more.
            Err(reason) if reason.is_empty() => Err(forbidden(Some(namespace), refusal)),
            Err(reason) => Err(forbidden(Some(namespace), reason)),
        }
    }

    /// The answer to `question`, from the cache or the API server (then cached):
    /// `Err` holds the authorizer's reason for a refusal.
    async fn ask(
        &self,
        caller: &Caller,
        question: &Question,
    ) -> Result<Result<(), String>, AuthError> {
        if let Some(known) = self.access.get(question) {
            return Ok(known);
        }
        let [_, allowed_ttl, denied_ttl] = self.ttls;
        let answer = self.authorize(caller, question).await?;
        let ttl = match answer {
            Ok(()) => allowed_ttl,
            Err(_) => denied_ttl,
        };
        self.access.put(question.clone(), answer.clone(), ttl);
        Ok(answer)
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

    /// Asks the API server `question` about `caller`.
    async fn authorize(
        &self,
        caller: &Caller,
        question: &Question,
    ) -> Result<Result<(), String>, AuthError> {
        let info = &caller.user_info;
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: info.username.clone(),
                groups: info.groups.clone(),
                uid: info.uid.clone(),
                extra: info.extra.clone(),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(operon_data::api::GROUP.to_owned()),
                    version: Some(operon_data::api::VERSION.to_owned()),
                    resource: Some("modules".to_owned()),
                    verb: Some(question.verb.to_owned()),
                    name: question.name.clone(),
                    namespace: question.namespace.clone(),
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
            return Ok(Ok(()));
        }
        Ok(Err(status
            .reason
            .or(status.evaluation_error)
            .unwrap_or_default()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use operon_cluster::kube::mock::{MockApi, pair};
    use serde_json::{Value, json};

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

    const SA: &str = "system:serviceaccount:team-a:offloader";

    /// Answers the TokenReview of `token` as `user`, with groups as the API server
    /// gives them.
    async fn authenticated(api: &mut MockApi, token: &str, user: &str, groups: &[&str]) {
        let call = api.next().await;
        assert_eq!(
            (call.method.as_str(), call.uri.as_str()),
            ("POST", "/apis/authentication.k8s.io/v1/tokenreviews?")
        );
        let mut body = call.json();
        assert_eq!(body["spec"]["token"], token);
        body["status"] = json!({"authenticated": true,
            "user": {"username": user, "uid": "uid-7", "groups": groups}});
        call.answer(201, body);
    }

    /// Answers the next request, a SubjectAccessReview, with `allowed`; returns its
    /// spec as sent.
    async fn access_review(api: &mut MockApi, allowed: bool) -> Value {
        let call = api.next().await;
        assert_eq!(
            (call.method.as_str(), call.uri.as_str()),
            (
                "POST",
                "/apis/authorization.k8s.io/v1/subjectaccessreviews?"
            )
        );
        let mut body = call.json();
        let spec = body["spec"].clone();
        body["status"] = match allowed {
            true => json!({"allowed": true, "reason": "RBAC: allowed by RoleBinding"}),
            false => json!({"allowed": false}),
        };
        call.answer(201, body);
        spec
    }

    fn sa_groups() -> [&'static str; 3] {
        [
            "system:serviceaccounts",
            "system:serviceaccounts:team-a",
            "system:authenticated",
        ]
    }

    /// The spec of a review of the ServiceAccount reading the module bytes.
    fn sa_review(verb: &str, name: Option<&str>, namespace: Option<&str>) -> Value {
        let mut attributes = json!({"group": "operon.dev", "version": "v1alpha1",
            "resource": "modules", "verb": verb});
        if let Some(name) = name {
            attributes["name"] = json!(name);
        }
        if let Some(namespace) = namespace {
            attributes["namespace"] = json!(namespace);
        }
        json!({"user": SA, "uid": "uid-7", "groups": sa_groups(),
               "resourceAttributes": attributes})
    }

    fn ask(
        auth: &Authorizer,
        token: &'static str,
        verb: &'static str,
        name: Option<&'static str>,
    ) -> tokio::task::JoinHandle<Result<Caller, AuthError>> {
        let auth = auth.clone();
        tokio::spawn(async move {
            auth.allow(Some(&format!("Bearer {token}")), verb, name)
                .await
        })
    }

    #[test]
    fn only_service_account_names_have_a_namespace() {
        assert_eq!(service_account_namespace(SA), Some("team-a"));
        assert_eq!(
            service_account_namespace("system:serviceaccount:kube-system:default"),
            Some("kube-system")
        );
        for other in [
            "alice",
            "system:admin",
            "system:serviceaccount:team-a",
            "system:serviceaccount::offloader",
            "system:serviceaccount:team-a:",
            "system:serviceaccount:team-a:x:y",
            "system:serviceaccounts:team-a",
            "system:node:worker-1",
            "",
        ] {
            assert_eq!(service_account_namespace(other), None, "{other:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_service_account_refused_cluster_wide_may_read_through_its_namespace() {
        let (client, mut api) = pair();
        let auth = Authorizer::new(client);
        let fetch = ask(&auth, "sa-token", "get", None);
        authenticated(&mut api, "sa-token", SA, &sa_groups()).await;
        // First cluster-wide, exactly as before; then the same in team-a.
        assert_eq!(
            access_review(&mut api, false).await,
            sa_review("get", None, None)
        );
        assert_eq!(
            access_review(&mut api, true).await,
            sa_review("get", None, Some("team-a"))
        );
        assert_eq!(fetch.await.unwrap().unwrap().user, SA);
        api.quiet().await;
        // Both answers are cached: the next fetch asks nothing.
        auth.allow(Some("Bearer sa-token"), "get", None)
            .await
            .unwrap();
        api.quiet().await;
        // A question about one module is another question, asked the same two ways.
        let named = ask(&auth, "sa-token", "get", Some("echo"));
        assert_eq!(
            access_review(&mut api, false).await,
            sa_review("get", Some("echo"), None)
        );
        assert_eq!(
            access_review(&mut api, true).await,
            sa_review("get", Some("echo"), Some("team-a"))
        );
        named.await.unwrap().unwrap();
        api.quiet().await;
        // Listing reads too.
        let list = ask(&auth, "sa-token", "list", None);
        assert_eq!(
            access_review(&mut api, false).await,
            sa_review("list", None, None)
        );
        assert_eq!(
            access_review(&mut api, true).await,
            sa_review("list", None, Some("team-a"))
        );
        list.await.unwrap().unwrap();
        api.quiet().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_service_account_allowed_cluster_wide_is_asked_once() {
        let (client, mut api) = pair();
        let auth = Authorizer::new(client);
        let fetch = ask(&auth, "sa-token", "get", None);
        authenticated(&mut api, "sa-token", SA, &sa_groups()).await;
        assert_eq!(
            access_review(&mut api, true).await,
            sa_review("get", None, None)
        );
        fetch.await.unwrap().unwrap();
        api.quiet().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_service_account_refused_both_ways_is_forbidden_naming_its_namespace() {
        let (client, mut api) = pair();
        let auth = Authorizer::new(client);
        let fetch = ask(&auth, "sa-token", "get", Some("echo"));
        authenticated(&mut api, "sa-token", SA, &sa_groups()).await;
        assert_eq!(
            access_review(&mut api, false).await,
            sa_review("get", Some("echo"), None)
        );
        assert_eq!(
            access_review(&mut api, false).await,
            sa_review("get", Some("echo"), Some("team-a"))
        );
        let err = fetch.await.unwrap().unwrap_err();
        let AuthError::Forbidden { namespace, .. } = &err else {
            panic!("{err}");
        };
        assert_eq!(namespace.as_deref(), Some("team-a"));
        assert_eq!(
            err.to_string(),
            "system:serviceaccount:team-a:offloader may not get modules.operon.dev \"echo\" \
             (neither cluster-wide nor in namespace team-a, where a RoleBinding can grant it)"
        );
        // Both refusals are remembered for DENIED_TTL, then asked again.
        let again = auth
            .allow(Some("Bearer sa-token"), "get", Some("echo"))
            .await
            .unwrap_err();
        assert!(matches!(again, AuthError::Forbidden { .. }), "{again}");
        api.quiet().await;
        tokio::time::advance(DENIED_TTL).await;
        let later = ask(&auth, "sa-token", "get", Some("echo"));
        access_review(&mut api, false).await;
        assert_eq!(
            access_review(&mut api, true).await,
            sa_review("get", Some("echo"), Some("team-a")),
            "a RoleBinding made meanwhile counts"
        );
        later.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_user_that_is_no_service_account_is_asked_cluster_wide_only() {
        let (client, mut api) = pair();
        let auth = Authorizer::new(client);
        let fetch = ask(&auth, "alice-token", "get", None);
        authenticated(
            &mut api,
            "alice-token",
            "alice",
            &["devs", "system:authenticated"],
        )
        .await;
        let spec = access_review(&mut api, false).await;
        assert_eq!(spec["user"], "alice");
        assert_eq!(spec["groups"], json!(["devs", "system:authenticated"]));
        assert_eq!(
            spec["resourceAttributes"],
            json!({"group": "operon.dev", "version": "v1alpha1", "resource": "modules",
                   "verb": "get"})
        );
        let err = fetch.await.unwrap().unwrap_err();
        assert_eq!(err.to_string(), "alice may not get modules.operon.dev");
        api.quiet().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_service_account_pushing_or_deleting_is_asked_cluster_wide_only() {
        let (client, mut api) = pair();
        let auth = Authorizer::new(client);
        let push = ask(&auth, "sa-token", "create", Some("echo"));
        authenticated(&mut api, "sa-token", SA, &sa_groups()).await;
        assert_eq!(
            access_review(&mut api, false).await,
            sa_review("create", Some("echo"), None)
        );
        let err = push.await.unwrap().unwrap_err();
        assert_eq!(
            err.to_string(),
            "system:serviceaccount:team-a:offloader may not create modules.operon.dev \"echo\""
        );
        api.quiet().await;
        let delete = ask(&auth, "sa-token", "delete", Some("echo"));
        assert_eq!(
            access_review(&mut api, false).await,
            sa_review("delete", Some("echo"), None)
        );
        assert!(matches!(
            delete.await.unwrap(),
            Err(AuthError::Forbidden {
                namespace: None,
                ..
            })
        ));
        api.quiet().await;
        // A read allowed through the namespace grants no push: the push's answer,
        // cached under its own question, stays a refusal.
        let fetch = ask(&auth, "sa-token", "get", Some("echo"));
        access_review(&mut api, false).await;
        access_review(&mut api, true).await;
        fetch.await.unwrap().unwrap();
        let err = auth
            .allow(Some("Bearer sa-token"), "create", Some("echo"))
            .await
            .unwrap_err();
        assert!(matches!(err, AuthError::Forbidden { .. }), "{err}");
        api.quiet().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_namespaced_review_that_cannot_be_made_is_an_error_not_a_refusal() {
        let (client, mut api) = pair();
        let auth = Authorizer::new(client);
        let fetch = ask(&auth, "sa-token", "get", None);
        authenticated(&mut api, "sa-token", SA, &sa_groups()).await;
        access_review(&mut api, false).await;
        let call = api.next().await;
        assert_eq!(
            call.json()["spec"]["resourceAttributes"]["namespace"],
            "team-a"
        );
        call.fail(500, "InternalError", "etcd is gone");
        let err = fetch.await.unwrap().unwrap_err();
        assert!(matches!(err, AuthError::Review(_)), "{err}");
        // Not cached: the next request asks again in the namespace.
        let again = ask(&auth, "sa-token", "get", None);
        assert_eq!(
            access_review(&mut api, true).await,
            sa_review("get", None, Some("team-a"))
        );
        again.await.unwrap().unwrap();
    }
}
