//! The module API of `operon serve`, over HTTPS (described in
//! `api/modules.openapi.yaml`):
//!
//! - `POST /v1/modules/{name}`: the body is a wasm component; it is checked (a
//!   component of the `operation` or `hook` world this engine links), compiled, kept in
//!   the module store under its digest, and the cluster-scoped Module `name` is made to
//!   point to it. The answer gives the digest and the world.
//! - `GET /v1/modules`, `GET /v1/modules/{name}`: the Modules.
//! - `GET /v1/modules/by-digest/{sha256}`: the bytes (what replicas and agents fetch).
//! - `DELETE /v1/modules/{name}`: removes the Module; its bytes stay until nothing refers
//!   to them ([`operon_store::replica`]).
//!
//! It is mounted on the admission server's HTTPS port (the Service `operon-webhooks`,
//! whose certificate every replica shares), and reached directly (`--server`, e.g.
//! through `kubectl port-forward`) or through the API server's service proxy, which
//! drops `Authorization`: there the token comes in [`PROXIED_AUTHORIZATION`].
//!
//! Every request is authenticated and authorized ([`auth`]) before anything else is
//! read; an upload larger than the store's limit is refused from its `Content-Length`,
//! or, without one, as soon as it passes the limit.
//!
//! [`client`] is the other side: what `operon module` calls.

pub mod auth;
pub mod client;

use auth::{AuthError, Authorizer};
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt as _};
use operon_data::api::{Module, ModuleSpec, ModuleWorld};
use operon_sandbox::{LoadError, ModuleDigest, Sandbox, World};
use operon_store::replica::{ReplicaOptions, record_source};
use operon_store::{BlobError, ModuleCatalog, inspect};
use serde::Serialize;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// How many uploads compile at once; more wait (compiling takes a core).
const CONCURRENT_COMPILES: usize = 2;

/// What the module API serves from.
pub struct ModuleApi {
    auth: Authorizer,
    catalog: Arc<ModuleCatalog>,
    sandbox: Sandbox,
    modules: Api<Module>,
    replica: ReplicaOptions,
    compiles: Semaphore,
}

impl ModuleApi {
    /// The API over `catalog`'s store, checking modules with `sandbox` and requests
    /// with `auth`, writing Modules with `client`; this replica is `replica`.
    pub fn new(
        client: kube::Client,
        auth: Authorizer,
        catalog: Arc<ModuleCatalog>,
        sandbox: Sandbox,
        replica: ReplicaOptions,
    ) -> Self {
        Self {
            auth,
            catalog,
            sandbox,
            modules: Api::all(client),
            replica,
            compiles: Semaphore::new(CONCURRENT_COMPILES),
        }
    }
}

impl std::fmt::Debug for ModuleApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleApi")
            .field("store", &self.catalog.blobs().root())
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

/// The routes of the module API.
pub fn router(api: Arc<ModuleApi>) -> Router {
    Router::new()
        .route("/v1/modules", get(list))
        .route(
            "/v1/modules/{name}",
            get(get_one).post(upload).delete(remove),
        )
        .route("/v1/modules/by-digest/{digest}", get(bytes))
        .with_state(api)
}

/// A failed request, answered as a Kubernetes `Status`.
#[derive(Debug)]
struct Failure {
    code: StatusCode,
    reason: &'static str,
    message: String,
}

impl Failure {
    fn new(code: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
        }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code.as_u16(),
        });
        (self.code, axum::Json(body)).into_response()
    }
}

impl From<AuthError> for Failure {
    fn from(e: AuthError) -> Self {
        let (code, reason) = match &e {
            AuthError::NoToken | AuthError::Unauthenticated(_) => {
                (StatusCode::UNAUTHORIZED, "Unauthorized")
            }
            AuthError::Forbidden { .. } => (StatusCode::FORBIDDEN, "Forbidden"),
            AuthError::Review(_) => (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable"),
        };
        Failure::new(code, reason, e.to_string())
    }
}

fn kube_failure(what: &str, e: kube::Error) -> Failure {
    match e {
        kube::Error::Api(status) if status.code == 404 => Failure::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("{what} not found"),
        ),
        e => Failure::new(
            StatusCode::BAD_GATEWAY,
            "InternalError",
            format!("{what}: the API server: {e}"),
        ),
    }
}

/// A Module as the API shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ModuleView {
    name: String,
    #[serde(flatten)]
    spec: ModuleSpec,
    /// How many replicas serve its current bytes.
    sources: usize,
}

impl From<&Module> for ModuleView {
    fn from(module: &Module) -> Self {
        let sources = module
            .status
            .iter()
            .flat_map(|s| &s.sources)
            .filter(|s| s.digest == module.spec.digest)
            .count();
        Self {
            name: module.name_any(),
            spec: module.spec.clone(),
            sources,
        }
    }
}

/// The header carrying the caller's token through the API server's service proxy,
/// which removes `Authorization` before passing a request on.
pub const PROXIED_AUTHORIZATION: &str = "x-operon-authorization";

fn authorization(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .or_else(|| headers.get(PROXIED_AUTHORIZATION))
        .and_then(|v| v.to_str().ok())
}

async fn list(State(api): State<Arc<ModuleApi>>, headers: HeaderMap) -> Result<Response, Failure> {
    api.auth
        .allow(authorization(&headers), "list", None)
        .await?;
    let modules = api
        .modules
        .list(&ListParams::default())
        .await
        .map_err(|e| kube_failure("Modules", e))?;
    let items: Vec<ModuleView> = modules.items.iter().map(ModuleView::from).collect();
    Ok(axum::Json(serde_json::json!({ "items": items })).into_response())
}

async fn get_one(
    State(api): State<Arc<ModuleApi>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Failure> {
    api.auth
        .allow(authorization(&headers), "get", Some(&name))
        .await?;
    let module = api
        .modules
        .get(&name)
        .await
        .map_err(|e| kube_failure(&format!("Module {name:?}"), e))?;
    Ok(axum::Json(ModuleView::from(&module)).into_response())
}

async fn remove(
    State(api): State<Arc<ModuleApi>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Failure> {
    api.auth
        .allow(authorization(&headers), "delete", Some(&name))
        .await?;
    let module = api
        .modules
        .get(&name)
        .await
        .map_err(|e| kube_failure(&format!("Module {name:?}"), e))?;
    let params = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: module.metadata.uid.clone(),
            resource_version: module.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    api.modules
        .delete(&name, &params)
        .await
        .map_err(|e| kube_failure(&format!("Module {name:?}"), e))?;
    tracing::info!(module = %name, digest = %module.spec.digest, "module removed");
    Ok(
        axum::Json(serde_json::json!({ "name": name, "digest": module.spec.digest }))
            .into_response(),
    )
}

async fn bytes(
    State(api): State<Arc<ModuleApi>>,
    Path(digest): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Failure> {
    api.auth.allow(authorization(&headers), "get", None).await?;
    let text = match digest.starts_with("sha256:") {
        true => digest.clone(),
        false => format!("sha256:{digest}"),
    };
    let wanted = ModuleDigest::parse(&text).ok_or_else(|| {
        Failure::new(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!(
                "{digest:?} is not a sha256 digest (64 hex digits, optionally after `sha256:`)"
            ),
        )
    })?;
    let blobs = api.catalog.blobs().clone();
    let found = tokio::task::spawn_blocking(move || blobs.get(&wanted))
        .await
        .map_err(|e| {
            Failure::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                e.to_string(),
            )
        })?
        .map_err(|e| {
            Failure::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                e.to_string(),
            )
        })?;
    match found {
        Some(bytes) => Ok((
            [
                (header::CONTENT_TYPE, "application/wasm".to_owned()),
                (header::ETAG, format!("\"{wanted}\"")),
            ],
            bytes,
        )
            .into_response()),
        None => Err(Failure::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("this replica does not hold {wanted}"),
        )),
    }
}

/// What an upload answers.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Uploaded {
    name: String,
    digest: String,
    world: World,
    wit_version: String,
    size: u64,
    imports: Vec<String>,
    uploaded_by: String,
    /// Whether the Module pointed to other bytes (or did not exist) before.
    changed: bool,
}

async fn upload(
    State(api): State<Arc<ModuleApi>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Failure> {
    let caller = api
        .auth
        .allow(authorization(&headers), "create", Some(&name))
        .await?;
    check_name(&name)?;
    let limit = api.catalog.blobs().max_bytes();
    let too_large = |size: Option<u64>| {
        let size = size.map_or_else(|| "more than that".to_owned(), |s| format!("{s} bytes"));
        Failure::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLarge",
            format!("the module may be at most {limit} bytes; this one is {size}"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if let Some(size) = declared.filter(|s| *s > limit) {
        return Err(too_large(Some(size)));
    }
    let bytes = match axum::body::to_bytes(body, limit as usize).await {
        Ok(bytes) => bytes,
        Err(e) if over_limit(&e) => return Err(too_large(None)),
        Err(e) => {
            return Err(Failure::new(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                format!("reading the body: {e}"),
            ));
        }
    };
    let permit = api.compiles.acquire().await.map_err(|e| {
        Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            e.to_string(),
        )
    })?;
    let sandbox = api.sandbox.clone();
    let blobs = api.catalog.blobs().clone();
    let label = format!("module {name:?}");
    let checked = tokio::task::spawn_blocking(move || {
        let info = inspect(&sandbox, &label, &bytes).map_err(Err)?;
        blobs.put(&bytes).map_err(Ok)?;
        Ok::<_, Result<BlobError, LoadError>>(info)
    })
    .await
    .map_err(|e| {
        Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            e.to_string(),
        )
    })?;
    drop(permit);
    let info = match checked {
        Ok(info) => info,
        Err(Err(invalid)) => {
            return Err(Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                invalid.to_string(),
            ));
        }
        Err(Ok(BlobError::TooLarge { size, .. })) => return Err(too_large(Some(size))),
        Err(Ok(e)) => {
            return Err(Failure::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                e.to_string(),
            ));
        }
    };
    let digest = info.digest.to_string();
    let before = api.modules.get_opt(&name).await.ok().flatten();
    let changed = before.as_ref().is_none_or(|m| m.spec.digest != digest);
    let spec = ModuleSpec {
        digest: digest.clone(),
        world: match info.world {
            World::Operation => ModuleWorld::Operation,
            World::Hook => ModuleWorld::Hook,
        },
        wit_version: info.wit_version.to_string(),
        size: info.size as i64,
        imports: info.imports.clone(),
        uploaded_by: caller.user.clone(),
        uploaded_at: Time(jiff::Timestamp::now()),
    };
    // An upload of the bytes a Module already names keeps its record of who uploaded
    // them and when.
    let spec = match before {
        Some(existing) if !changed => existing.spec,
        _ => spec,
    };
    let module = Module::new(&name, spec);
    let params = PatchParams::apply(operon_cluster::kube::FIELD_MANAGER).force();
    api.modules
        .patch(&name, &params, &Patch::Apply(&module))
        .await
        .map_err(|e| kube_failure(&format!("Module {name:?}"), e))?;
    api.catalog.set(&name, info.digest);
    if let Some(source) = api.replica.source(&info.digest)
        && let Err(e) = record_source(&api.modules, &name, &source).await
    {
        tracing::warn!(module = %name, error = %e, "cannot list this replica as a source");
    }
    tracing::info!(module = %name, digest = %digest, world = ?info.world, size = info.size,
        user = %caller.user, changed, "module uploaded");
    let answer = Uploaded {
        name,
        digest,
        world: info.world,
        wit_version: info.wit_version.to_string(),
        size: info.size,
        imports: info.imports,
        uploaded_by: caller.user,
        changed,
    };
    let code = if changed {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((code, axum::Json(answer)).into_response())
}

/// Whether reading a body stopped at its limit.
fn over_limit(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = err.source();
    }
    false
}

/// A Module's name is a DNS subdomain (lower-case letters, digits, `-` and `.`).
fn check_name(name: &str) -> Result<(), Failure> {
    if operon_data::conventions::names::is_dns_subdomain(name) {
        return Ok(());
    }
    Err(Failure::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid",
        format!(
            "Module/{name}: metadata.name: must be a DNS subdomain: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters"
        ),
    ))
}

#[cfg(test)]
mod tests;
