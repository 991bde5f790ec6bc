//! Failures as the API server sends them: a `Status` object (kind Status, apiVersion v1,
//! status Failure) with the HTTP code, a reason and details, and the messages worded as
//! the API server words them, since scripts grep for them.

use crate::ClusterError;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::{Value, json};

/// One failed request.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct Failure {
    /// The HTTP status code.
    pub(crate) code: u16,
    /// The `Status` reason (`NotFound`, `Conflict`...).
    pub(crate) reason: &'static str,
    /// What a client prints.
    pub(crate) message: String,
    /// `details`: the object's name, group and kind, and causes.
    pub(crate) details: Option<Value>,
}

/// What a failure is about, for `details`.
pub(crate) struct About<'a> {
    /// The API group.
    pub(crate) group: &'a str,
    /// The plural (`secrets`), as the API server names kinds in messages.
    pub(crate) plural: &'a str,
    /// The object's name.
    pub(crate) name: &'a str,
}

impl About<'_> {
    /// `secrets` or `deployments.apps`, as in the API server's messages.
    fn resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_owned()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    fn details(&self) -> Value {
        json!({"name": self.name, "group": self.group, "kind": self.plural})
    }
}

impl Failure {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Failure {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub(crate) fn not_found(about: &About<'_>) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} {:?} not found", about.resource(), about.name),
        )
        .with_details(about.details())
    }

    pub(crate) fn already_exists(about: &About<'_>) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} {:?} already exists", about.resource(), about.name),
        )
        .with_details(about.details())
    }

    /// A write from a stale `resourceVersion` (or a failed precondition).
    pub(crate) fn conflict(about: &About<'_>, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} {:?}: {why}",
                about.resource(),
                about.name
            ),
        )
        .with_details(about.details())
    }

    /// The message of a stale `resourceVersion`.
    pub(crate) const MODIFIED: &'static str = "the object has been modified; please apply your changes to the latest version and try again";

    /// Server-side apply's conflicts with other managers, each `(manager, field)`.
    pub(crate) fn apply_conflicts(
        about: &About<'_>,
        api_version: &str,
        conflicts: &[(String, String)],
    ) -> Self {
        let causes: Vec<Value> = conflicts
            .iter()
            .map(|(manager, field)| {
                json!({
                    "type": "FieldManagerConflict",
                    "message": format!("conflict with {manager:?} using {api_version}"),
                    "field": field,
                })
            })
            .collect();
        let listed: Vec<String> = conflicts
            .iter()
            .map(|(manager, field)| {
                format!("conflict with {manager:?} using {api_version}: {field}")
            })
            .collect();
        let count = conflicts.len();
        let message = format!(
            "Apply failed with {count} conflict{}: {}",
            if count == 1 { "" } else { "s" },
            listed.join("\n")
        );
        let mut details = about.details();
        details["causes"] = Value::Array(causes);
        Self::new(409, "Conflict", message).with_details(details)
    }

    /// 422: the object (of `kind`) is not valid.
    pub(crate) fn invalid(kind: &str, name: &str, field: &str, why: &str) -> Self {
        Self::new(
            422,
            "Invalid",
            format!("{kind} {name:?} is invalid: {field}: {why}"),
        )
        .with_details(json!({
            "name": name,
            "kind": kind,
            "causes": [{"reason": "FieldValueInvalid", "message": why, "field": field}],
        }))
    }

    /// 422 with a message of its own (a failed JSON patch `test`, say).
    pub(crate) fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub(crate) fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub(crate) fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// A request this server does not implement, named by method and path.
    pub(crate) fn not_implemented(method: &str, path: &str, what: &str) -> Self {
        Self::method_not_allowed(format!(
            "the local API server does not implement {method} {path}: {what}"
        ))
    }

    pub(crate) fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    /// 410: a watch from a `resourceVersion` whose changes are no longer kept.
    pub(crate) fn expired(asked: u64, oldest: u64) -> Self {
        Self::new(
            410,
            "Expired",
            format!("too old resource version: {asked} ({oldest})"),
        )
    }

    pub(crate) fn not_found_path(path: &str) -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource")
            .with_details(json!({"causes": [{"reason": "UnexpectedServerResponse", "message": format!("404 page not found: {path}")}]}))
    }

    /// The `Status` object.
    pub(crate) fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}

impl From<ClusterError> for Failure {
    fn from(error: ClusterError) -> Self {
        match error {
            ClusterError::NotFound { .. } => Self::new(404, "NotFound", error.to_string()),
            ClusterError::AlreadyExists { .. } => {
                Self::new(409, "AlreadyExists", error.to_string())
            }
            ClusterError::Invalid { .. } => Self::new(422, "Invalid", error.to_string()),
            ClusterError::UnknownKind { .. } => Self::new(404, "NotFound", error.to_string()),
            other => Self::new(500, "InternalError", other.to_string()),
        }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        json_response(code, &self.to_status())
    }
}

/// A JSON answer with the content type kubectl expects.
pub(crate) fn json_response(code: StatusCode, body: &Value) -> Response {
    (
        code,
        [(http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}
