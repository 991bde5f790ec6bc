//! One request: authentication, routing, and each verb on a resource (get, list,
//! create, update, patch, delete, deletecollection; watch is [`super::watch`]), every
//! write going through [`LocalCluster::write_with`](super::super::LocalCluster) so that
//! the check of the current object and the write are one step.

use super::super::access::Write;
use super::super::fixtures;
use super::super::resources::ResourceInfo;
use super::super::write::{self, ObjectKey, Subresource};
use super::patch::{self, PatchKind};
use super::protobuf::{self, ProtobufError};
use super::query::{self, Route, Target};
use super::status::{About, Failure, json_response};
use super::{Shared, discovery, managed, watch};
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use http::{HeaderMap, Method, StatusCode};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// The largest request body read (the API server's limit is 3 MiB per object).
const MAX_BODY: usize = 16 << 20;

/// Serves one request.
pub(crate) async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let authorized = parts
        .headers
        .get(http::header::AUTHORIZATION)
        .is_some_and(|value| value.as_bytes() == shared.authorization.as_bytes());
    if !authorized {
        return Failure::unauthorized().into_response();
    }
    let path = parts.uri.path().to_owned();
    let params = query::params(parts.uri.query());
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(body) => body,
        Err(e) => {
            return Failure::bad_request(format!("cannot read the body: {e}")).into_response();
        }
    };
    let request = Call {
        shared: &shared,
        method: &parts.method,
        path: &path,
        headers: &parts.headers,
        params: &params,
        body: &body,
    };
    match request.answer() {
        Ok(response) => response,
        Err(failure) => failure.into_response(),
    }
}

struct Call<'a> {
    shared: &'a Arc<Shared>,
    method: &'a Method,
    path: &'a str,
    headers: &'a HeaderMap,
    params: &'a HashMap<String, String>,
    body: &'a [u8],
}

/// A resolved resource path.
struct Resolved {
    info: ResourceInfo,
    target: Target,
}

impl Resolved {
    fn about<'a>(&'a self, name: &'a str) -> About<'a> {
        About {
            group: &self.info.resource.group,
            plural: &self.info.resource.plural,
            name,
        }
    }

    fn key(&self, name: &str) -> ObjectKey {
        (
            self.target.namespace.clone().unwrap_or_default(),
            name.to_owned(),
        )
    }
}

impl Call<'_> {
    fn answer(&self) -> Result<Response, Failure> {
        let route = query::route(self.path).ok_or_else(|| Failure::not_found_path(self.path))?;
        let types = || self.shared.cluster.resource_types();
        let discovery = |found: Option<Value>| -> Result<Response, Failure> {
            if self.method != Method::GET {
                return Err(Failure::method_not_allowed(format!(
                    "{} is not allowed on {}",
                    self.method, self.path
                )));
            }
            let found = found.ok_or_else(|| Failure::not_found_path(self.path))?;
            Ok(json_response(StatusCode::OK, &found))
        };
        match route {
            Route::Version => discovery(Some(discovery::version())),
            Route::CoreVersions => discovery(Some(discovery::core_versions(&self.shared.address))),
            Route::Groups => discovery(Some(discovery::group_list(&types()))),
            Route::Group(name) => discovery(discovery::group(&types(), &name)),
            Route::Resources { group, version } => {
                discovery(discovery::resource_list(&types(), &group, &version))
            }
            Route::OpenApiRoot => discovery(Some(discovery::openapi_root(&types()))),
            Route::OpenApi { group, version } => {
                discovery(discovery::openapi_group_version(&types(), &group, &version))
            }
            Route::Object(target) => self.object(target),
        }
    }

    fn object(&self, target: Target) -> Result<Response, Failure> {
        let info = self
            .shared
            .cluster
            .type_by_plural(&target.group, &target.version, &target.plural)
            .ok_or_else(|| Failure::not_found_path(self.path))?;
        let namespaced = info.resource.namespaced;
        if !namespaced && target.namespace.is_some() {
            return Err(Failure::not_found_path(self.path));
        }
        if namespaced && target.name.is_some() && target.namespace.is_none() {
            return Err(Failure::not_found_path(self.path));
        }
        let subresource = match target.subresource.as_deref() {
            None => Subresource::Main,
            Some("status") if info.status_subresource => Subresource::Status,
            Some(other) => {
                return Err(Failure::not_implemented(
                    self.method.as_str(),
                    self.path,
                    &format!("the subresource {other:?} of {}", info.resource.plural),
                ));
            }
        };
        let resolved = Resolved { info, target };
        let dry_run = match self.params.get("dryRun").map(String::as_str) {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(Failure::bad_request(format!(
                    "Invalid dry run value {other:?}: only \"All\" is supported"
                )));
            }
        };
        let name = resolved.target.name.clone();
        match (self.method.clone(), name) {
            (Method::GET, Some(name)) => self.get(&resolved, &name),
            (Method::GET, None) if self.flag("watch") => {
                let selector = self.selector(&resolved)?;
                watch::serve(self.shared, &resolved.info, &selector, self.params)
            }
            (Method::GET, None) => self.list(&resolved),
            (Method::POST, None) => self.create(&resolved, dry_run),
            (Method::PUT, Some(name)) => self.update(&resolved, &name, subresource, dry_run),
            (Method::PATCH, Some(name)) => self.patch(&resolved, &name, subresource, dry_run),
            (Method::DELETE, Some(name)) => self.delete(&resolved, &name, dry_run),
            (Method::DELETE, None) => self.delete_collection(&resolved, dry_run),
            (method, _) => Err(Failure::not_implemented(
                method.as_str(),
                self.path,
                "this verb on this path",
            )),
        }
    }

    fn flag(&self, name: &str) -> bool {
        self.params
            .get(name)
            .is_some_and(|v| v == "true" || v == "1")
    }

    fn selector(&self, resolved: &Resolved) -> Result<crate::Selector, Failure> {
        let selector = query::selector(resolved.target.namespace.as_deref(), self.params)?;
        query::check_fields(
            &resolved.info.resource.group,
            &resolved.info.resource.kind,
            &selector,
        )?;
        Ok(selector)
    }

    /// Who writes: `?fieldManager=`, else the client's name from its User-Agent, as
    /// the API server defaults it.
    fn manager(&self) -> String {
        if let Some(manager) = self.params.get("fieldManager").filter(|m| !m.is_empty()) {
            return manager.clone();
        }
        self.headers
            .get(http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split('/').next())
            .filter(|v| !v.is_empty())
            .unwrap_or("unknown")
            .to_owned()
    }

    fn body_object(&self) -> Result<Value, Failure> {
        let content_type = self
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json");
        if content_type.contains(PROTOBUF) {
            return protobuf_object(self.body);
        }
        if !content_type.contains("yaml") && !content_type.contains("json") {
            return Err(Failure::unsupported_media_type(format!(
                "the local API server does not implement {content_type} bodies: send JSON, \
                 YAML or protobuf - accepted media types include: application/json, \
                 application/yaml, {PROTOBUF}"
            )));
        }
        let text = std::str::from_utf8(self.body)
            .map_err(|_| Failure::bad_request("the body is not UTF-8 text"))?;
        let value: Value = if content_type.contains("yaml") {
            yaml_serde::from_str(text).map_err(|e| Failure::bad_request(e.to_string()))?
        } else {
            serde_json::from_str(text)
                .map_err(|e| Failure::bad_request(format!("error decoding the body: {e}")))?
        };
        if !value.is_object() {
            return Err(Failure::bad_request("the body must be a JSON object"));
        }
        Ok(value)
    }

    /// Checks that a body's apiVersion, kind and namespace are the URL's, fills them
    /// in when missing.
    fn check_body(&self, resolved: &Resolved, object: &mut Value) -> Result<(), Failure> {
        let resource = &resolved.info.resource;
        let expected = resource.api_version();
        for (field, wanted) in [("apiVersion", &expected), ("kind", &resource.kind)] {
            match object.get(field).and_then(Value::as_str) {
                None | Some("") => object[field] = Value::String(wanted.clone()),
                Some(given) if given != wanted => {
                    return Err(Failure::bad_request(format!(
                        "the {field} in the data ({given}) does not match the expected {field} ({wanted})"
                    )));
                }
                Some(_) => {}
            }
        }
        if let Some(namespace) = &resolved.target.namespace {
            let metadata = write::metadata_mut(object);
            match metadata.get("namespace").and_then(Value::as_str) {
                None | Some("") => {
                    metadata.insert("namespace".into(), namespace.clone().into());
                }
                Some(given) if given != namespace => {
                    return Err(Failure::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    fn get(&self, resolved: &Resolved, name: &str) -> Result<Response, Failure> {
        let object = self
            .shared
            .cluster
            .object(&resolved.info.resource, &resolved.key(name))?
            .ok_or_else(|| Failure::not_found(&resolved.about(name)))?;
        Ok(json_response(StatusCode::OK, &object))
    }

    fn list(&self, resolved: &Resolved) -> Result<Response, Failure> {
        if self.params.get("resourceVersionMatch").map(String::as_str) == Some("Exact") {
            return Err(Failure::not_implemented(
                "GET",
                self.path,
                "resourceVersionMatch=Exact (lists are always current)",
            ));
        }
        let selector = self.selector(resolved)?;
        let (mut objects, version) = self
            .shared
            .cluster
            .list_at(&resolved.info.resource, &selector)?;
        let key_of = |o: &Value| {
            let text = |f: &str| {
                o.pointer(&format!("/metadata/{f}"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            format!("{}/{}", text("namespace"), text("name"))
        };
        if let Some(token) = self.params.get("continue").filter(|t| !t.is_empty()) {
            let after = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(token)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| Failure::bad_request("invalid continue token"))?;
            objects.retain(|o| key_of(o) > after);
        }
        let mut metadata = json!({"resourceVersion": version.to_string()});
        let limit = self
            .params
            .get("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0);
        if let Some(limit) = limit
            && objects.len() > limit
        {
            let remaining = objects.len() - limit;
            objects.truncate(limit);
            let last = objects.last().map(key_of).unwrap_or_default();
            metadata["continue"] = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(last)
                .into();
            metadata["remainingItemCount"] = remaining.into();
        }
        let resource = &resolved.info.resource;
        let list = json!({
            "kind": format!("{}List", resource.kind),
            "apiVersion": resource.api_version(),
            "metadata": metadata,
            "items": objects,
        });
        Ok(json_response(StatusCode::OK, &list))
    }

    fn create(&self, resolved: &Resolved, dry_run: bool) -> Result<Response, Failure> {
        let mut object = self.body_object()?;
        self.check_body(resolved, &mut object)?;
        let kind = resolved.info.resource.kind.clone();
        if object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| !v.is_empty())
        {
            return Err(Failure {
                code: 500,
                reason: "InternalError",
                message: "resourceVersion should not be set on objects to be created".into(),
                details: None,
            });
        }
        let metadata = write::metadata_mut(&mut object);
        metadata.remove("managedFields");
        let name = metadata
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let generate = metadata
            .get("generateName")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let name = match (name.is_empty(), generate.is_empty()) {
            (false, _) => name,
            (true, false) => self.generated_name(resolved, &generate)?,
            (true, true) => {
                return Err(Failure::invalid(
                    &kind,
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required",
                ));
            }
        };
        write::metadata_mut(&mut object).insert("name".into(), name.clone().into());
        fixtures::check_object(&object)
            .map_err(|why| Failure::invalid(&kind, &name, "metadata", &why))?;
        let manager = self.manager();
        let written = self.shared.cluster.write_with::<Failure>(
            &resolved.info.resource,
            &resolved.key(&name),
            Subresource::Main,
            dry_run,
            |current, info| {
                if current.is_some() {
                    return Err(Failure::already_exists(&resolved.about(&name)));
                }
                managed::record_update(info, None, &mut object, &manager);
                Ok(Write::Put(object))
            },
        )?;
        Ok(json_response(StatusCode::CREATED, &written.object))
    }

    /// `generateName` plus five random characters, not taken by an existing object.
    fn generated_name(&self, resolved: &Resolved, prefix: &str) -> Result<String, Failure> {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        for _ in 0..16 {
            let mut bytes = [0u8; 5];
            getrandom::fill(&mut bytes)
                .map_err(|e| Failure::bad_request(format!("no randomness: {e}")))?;
            let suffix: String = bytes
                .iter()
                .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
                .collect();
            let name = format!("{prefix}{suffix}");
            let taken = self
                .shared
                .cluster
                .object(&resolved.info.resource, &resolved.key(&name))?;
            if taken.is_none() {
                return Ok(name);
            }
        }
        Err(Failure::already_exists(&resolved.about(prefix)))
    }

    fn update(
        &self,
        resolved: &Resolved,
        name: &str,
        subresource: Subresource,
        dry_run: bool,
    ) -> Result<Response, Failure> {
        let mut object = self.body_object()?;
        self.check_body(resolved, &mut object)?;
        let given = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if given != name {
            return Err(Failure::bad_request(format!(
                "the name of the object ({given}) does not match the name on the URL ({name})"
            )));
        }
        let manager = self.manager();
        let written = self.shared.cluster.write_with::<Failure>(
            &resolved.info.resource,
            &resolved.key(name),
            subresource,
            dry_run,
            |current, info| {
                let current = current.ok_or_else(|| Failure::not_found(&resolved.about(name)))?;
                precondition(resolved, name, current, &object)?;
                fixtures::check_object(&object)
                    .map_err(|why| Failure::invalid(&info.resource.kind, name, "metadata", &why))?;
                write::metadata_mut(&mut object).remove("managedFields");
                if subresource == Subresource::Main {
                    managed::record_update(info, Some(current), &mut object, &manager);
                }
                Ok(Write::Put(object))
            },
        )?;
        Ok(json_response(StatusCode::OK, &written.object))
    }

    fn patch(
        &self,
        resolved: &Resolved,
        name: &str,
        subresource: Subresource,
        dry_run: bool,
    ) -> Result<Response, Failure> {
        let content_type = self
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let kind = patch::kind_of(content_type, &resolved.info)?;
        let document = patch::parse(kind, self.body)?;
        let manager = self.manager();
        if kind == PatchKind::Apply {
            if !self.params.contains_key("fieldManager") {
                return Err(Failure::unprocessable(
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                ));
            }
            if subresource == Subresource::Status {
                return Err(Failure::not_implemented(
                    "PATCH",
                    self.path,
                    "server-side apply to the status subresource",
                ));
            }
        }
        let force = self.flag("force");
        let written = self.shared.cluster.write_with::<Failure>(
            &resolved.info.resource,
            &resolved.key(name),
            subresource,
            dry_run,
            |current, info| {
                let mut object = match (kind, current) {
                    (PatchKind::Apply, current) => {
                        let mut applied = document.clone();
                        self.check_body(resolved, &mut applied)?;
                        check_name(&applied, name)?;
                        managed::apply(info, current, &applied, &manager, force).map_err(
                            |conflicts| {
                                Failure::apply_conflicts(
                                    &resolved.about(name),
                                    &info.resource.api_version(),
                                    &conflicts.0,
                                )
                            },
                        )?
                    }
                    (_, None) => return Err(Failure::not_found(&resolved.about(name))),
                    (kind, Some(current)) => patch::transform(kind, info, current, &document)?,
                };
                if let Some(current) = current {
                    precondition(resolved, name, current, &object)?;
                    write::keep_identity(&mut object, current).map_err(|why| {
                        Failure::invalid(&info.resource.kind, name, "metadata", &why)
                    })?;
                }
                fixtures::check_object(&object)
                    .map_err(|why| Failure::invalid(&info.resource.kind, name, "metadata", &why))?;
                if kind != PatchKind::Apply && subresource == Subresource::Main {
                    write::metadata_mut(&mut object).remove("managedFields");
                    managed::record_update(info, current, &mut object, &manager);
                }
                Ok(Write::Put(object))
            },
        )?;
        let code = if written.created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        Ok(json_response(code, &written.object))
    }

    fn delete(&self, resolved: &Resolved, name: &str, dry_run: bool) -> Result<Response, Failure> {
        let options: Value = if self.body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(self.body)
                .map_err(|e| Failure::bad_request(format!("error decoding DeleteOptions: {e}")))?
        };
        let dry_run = dry_run
            || options
                .get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|d| d.iter().any(|v| v == "All"));
        let written = self.shared.cluster.write_with::<Failure>(
            &resolved.info.resource,
            &resolved.key(name),
            Subresource::Main,
            dry_run,
            |current, _| {
                let current = current.ok_or_else(|| Failure::not_found(&resolved.about(name)))?;
                for (field, pointer) in [("uid", "/metadata/uid"), ("resourceVersion", "/metadata/resourceVersion")] {
                    let wanted = options
                        .pointer(&format!("/preconditions/{field}"))
                        .and_then(Value::as_str);
                    let actual = current.pointer(pointer).and_then(Value::as_str).unwrap_or_default();
                    if let Some(wanted) = wanted
                        && wanted != actual
                    {
                        let label = if field == "uid" { "UID" } else { "ResourceVersion" };
                        return Err(Failure::conflict(
                            &resolved.about(name),
                            &format!(
                                "Precondition failed: {label} in precondition: {wanted}, {label} in object meta: {actual}"
                            ),
                        ));
                    }
                }
                Ok(Write::Delete)
            },
        )?;
        let uid = written.object.pointer("/metadata/uid").cloned();
        let status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {
                "name": name,
                "group": resolved.info.resource.group,
                "kind": resolved.info.resource.plural,
                "uid": uid,
            },
        });
        Ok(json_response(StatusCode::OK, &status))
    }

    fn delete_collection(&self, resolved: &Resolved, dry_run: bool) -> Result<Response, Failure> {
        let selector = self.selector(resolved)?;
        let cluster = &self.shared.cluster;
        let (objects, _) = cluster.list_at(&resolved.info.resource, &selector)?;
        let mut deleted = Vec::new();
        for object in objects {
            let text = |f: &str| {
                object
                    .pointer(&format!("/metadata/{f}"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let key = (text("namespace"), text("name"));
            let gone = cluster.write_with::<Failure>(
                &resolved.info.resource,
                &key,
                Subresource::Main,
                dry_run,
                |current, _| match current {
                    Some(_) => Ok(Write::Delete),
                    None => Err(Failure::not_found(&resolved.about(&key.1))),
                },
            );
            // Deleted by someone else meanwhile: gone all the same.
            if let Ok(written) = gone {
                deleted.push(written.object);
            }
        }
        let resource = &resolved.info.resource;
        let list = json!({
            "kind": format!("{}List", resource.kind),
            "apiVersion": resource.api_version(),
            "metadata": {"resourceVersion": cluster.current_resource_version().to_string()},
            "items": deleted,
        });
        Ok(json_response(StatusCode::OK, &list))
    }
}

/// The protobuf media type, which kubectl sends for built-in kinds.
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The object of a protobuf body; a kind not read from protobuf gets 415, as any
/// body this server cannot read.
fn protobuf_object(body: &[u8]) -> Result<Value, Failure> {
    match protobuf::decode(body) {
        Ok(object) => Ok(object),
        Err(ProtobufError::UnknownKind { api_version, kind }) => {
            Err(Failure::unsupported_media_type(format!(
                "the local API server does not decode {kind} ({api_version}) from protobuf: \
                 write it as YAML or JSON and send it with `kubectl create -f` or \
                 `kubectl apply -f`"
            )))
        }
        Err(e) => Err(Failure::bad_request(error_chain(&e))),
    }
}

/// An error with its sources, `: `-separated, as the API server's messages read.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A write whose object names a `resourceVersion` other than the current one is from
/// a stale read: 409 Conflict, as the API server's optimistic concurrency answers.
fn precondition(
    resolved: &Resolved,
    name: &str,
    current: &Value,
    object: &Value,
) -> Result<(), Failure> {
    let version = |o: &Value| {
        o.pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let given = version(object);
    if !given.is_empty() && given != version(current) {
        return Err(Failure::conflict(&resolved.about(name), Failure::MODIFIED));
    }
    Ok(())
}

fn check_name(object: &Value, name: &str) -> Result<(), Failure> {
    match object.pointer("/metadata/name").and_then(Value::as_str) {
        Some(given) if given == name => Ok(()),
        given => Err(Failure::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            given.unwrap_or_default()
        ))),
    }
}
