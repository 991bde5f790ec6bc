//! Who may use the module API: the caller's bearer token is checked by the API server
//! (a TokenReview), and what it asks by a SubjectAccessReview on the resource
//! `modules` of group `operon.dev`, so access is granted with ordinary RBAC (verbs
//! `create`, `get`, `list`, `delete`). There is no anonymous access.

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

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
}

impl Authorizer {
    /// An authorizer asking the API server behind `client` (whose account needs
    /// `create` on tokenreviews and subjectaccessreviews).
    pub fn new(client: Client) -> Self {
        Self { client }
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
        let caller = self.authenticate(token).await?;
        self.authorize(&caller, verb, name).await?;
        Ok(caller)
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
