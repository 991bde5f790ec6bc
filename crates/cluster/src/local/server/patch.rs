//! A PATCH request's type (from its Content-Type) and body, and the three patch types
//! that transform the current object by themselves: JSON patch (RFC 6902, `test`
//! included), JSON merge patch (RFC 7386) and strategic merge ([`super::strategic`]).
//! Server-side apply needs the field managers too: [`super::managed`].

use super::super::resources::ResourceInfo;
use super::status::Failure;
use super::strategic::{self, APPLY, JSON_PATCH, MERGE, STRATEGIC};
use serde_json::Value;

/// The four patch types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchKind {
    Json,
    Merge,
    Strategic,
    Apply,
}

/// The patch type of a Content-Type, refused with 415 as the API server refuses it
/// (strategic merge for a custom resource included).
pub(crate) fn kind_of(content_type: &str, info: &ResourceInfo) -> Result<PatchKind, Failure> {
    let media = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let kind = match media.as_str() {
        JSON_PATCH => PatchKind::Json,
        MERGE => PatchKind::Merge,
        STRATEGIC if strategic::is_builtin(&info.resource) => PatchKind::Strategic,
        APPLY => PatchKind::Apply,
        _ => {
            return Err(Failure::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                strategic::patch_types(info).join(", ")
            )));
        }
    };
    Ok(kind)
}

/// The patch document: YAML or JSON for apply, JSON for the others.
pub(crate) fn parse(kind: PatchKind, body: &[u8]) -> Result<Value, Failure> {
    let text = std::str::from_utf8(body)
        .map_err(|_| Failure::bad_request("the patch is not UTF-8 text"))?;
    let parsed: Result<Value, String> = match kind {
        PatchKind::Apply => yaml_serde::from_str(text).map_err(|e| e.to_string()),
        _ => serde_json::from_str(text).map_err(|e| e.to_string()),
    };
    let value = parsed.map_err(|e| Failure::bad_request(format!("error decoding patch: {e}")))?;
    match (kind, &value) {
        (PatchKind::Json, Value::Array(_)) => Ok(value),
        (PatchKind::Json, _) => Err(Failure::bad_request(
            "a JSON patch must be a list of operations",
        )),
        (_, Value::Object(_)) => Ok(value),
        _ => Err(Failure::bad_request("the patch must be a JSON object")),
    }
}

/// `current` with a JSON, merge or strategic merge `patch` applied.
pub(crate) fn transform(
    kind: PatchKind,
    info: &ResourceInfo,
    current: &Value,
    patch: &Value,
) -> Result<Value, Failure> {
    let mut object = current.clone();
    match kind {
        PatchKind::Json => {
            let operations: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| Failure::bad_request(format!("invalid JSON patch: {e}")))?;
            json_patch::patch(&mut object, &operations)
                .map_err(|e| Failure::unprocessable(e.to_string()))?;
        }
        PatchKind::Merge => json_patch::merge(&mut object, patch),
        PatchKind::Strategic => {
            object = strategic::patch(&info.resource, current, patch)
                .map_err(|e| Failure::unprocessable(e.to_string()))?;
        }
        PatchKind::Apply => {
            return Err(Failure::bad_request(
                "server-side apply is not a plain transform",
            ));
        }
    }
    Ok(object)
}
