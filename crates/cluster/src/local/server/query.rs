//! A request's path and query as the API server reads them: which resource, namespace,
//! name and subresource a path names, and the query's selectors (label selectors in
//! their text form, `a=b,c in (x,y),!d`; field selectors `f=v,g!=w`) and options.

use super::status::Failure;
use crate::Selector;
use operon_data::model::{
    FieldOperator, FieldRequirement, LabelOperator, LabelRequirement, LabelSelector,
};
use std::collections::HashMap;

/// What a path names.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route {
    Version,
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/{group}`
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`
    Resources {
        group: String,
        version: String,
    },
    /// `/openapi/v3`
    OpenApiRoot,
    /// `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`
    OpenApi {
        group: String,
        version: String,
    },
    /// A resource, an object or one of its subresources.
    Object(Target),
}

/// A resource path's parts.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) group: String,
    pub(crate) version: String,
    /// From `/namespaces/{namespace}/...`.
    pub(crate) namespace: Option<String>,
    pub(crate) plural: String,
    pub(crate) name: Option<String>,
    pub(crate) subresource: Option<String>,
}

/// Reads a request path; `None` when it names nothing the API server serves.
pub(crate) fn route(path: &str) -> Option<Route> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match parts.as_slice() {
        ["version"] => return Some(Route::Version),
        ["api"] => return Some(Route::CoreVersions),
        ["apis"] => return Some(Route::Groups),
        ["apis", group] => return Some(Route::Group((*group).to_owned())),
        ["openapi", "v3"] => return Some(Route::OpenApiRoot),
        ["openapi", "v3", "api", version] => {
            return Some(Route::OpenApi {
                group: String::new(),
                version: (*version).to_owned(),
            });
        }
        ["openapi", "v3", "apis", group, version] => {
            return Some(Route::OpenApi {
                group: (*group).to_owned(),
                version: (*version).to_owned(),
            });
        }
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let mut target = Target {
        group: group.to_owned(),
        version: version.to_owned(),
        ..Target::default()
    };
    let rest = match rest {
        [] => {
            return Some(Route::Resources {
                group: group.to_owned(),
                version: version.to_owned(),
            });
        }
        // `/namespaces/{name}` and `/namespaces/{name}/status` are the Namespace itself.
        ["namespaces", name] => {
            target.plural = "namespaces".into();
            target.name = Some((*name).to_owned());
            return Some(Route::Object(target));
        }
        ["namespaces", name, sub @ ("status" | "finalize")] => {
            target.plural = "namespaces".into();
            target.name = Some((*name).to_owned());
            target.subresource = Some((*sub).to_owned());
            return Some(Route::Object(target));
        }
        ["namespaces", namespace, rest @ ..] => {
            target.namespace = Some((*namespace).to_owned());
            rest
        }
        rest => rest,
    };
    match rest {
        [plural] => target.plural = (*plural).to_owned(),
        [plural, name] => {
            target.plural = (*plural).to_owned();
            target.name = Some((*name).to_owned());
        }
        [plural, name, sub] => {
            target.plural = (*plural).to_owned();
            target.name = Some((*name).to_owned());
            target.subresource = Some((*sub).to_owned());
        }
        _ => return None,
    }
    if target.plural.is_empty() || target.name.as_deref() == Some("") {
        return None;
    }
    Some(Route::Object(target))
}

/// The query parameters, decoded.
pub(crate) fn params(query: Option<&str>) -> HashMap<String, String> {
    let mut params = HashMap::new();
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        params.insert(decode(key), decode(value));
    }
    params
}

/// Percent-decoding, with `+` as a space (as Go's url.ParseQuery).
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() && text.is_char_boundary(i + 3) => {
                match u8::from_str_radix(&text[i + 1..i + 3], 16) {
                    Ok(byte) => {
                        out.push(byte);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The selector of a list, watch or deletecollection: the path's namespace and the
/// query's `labelSelector` and `fieldSelector`.
pub(crate) fn selector(
    namespace: Option<&str>,
    params: &HashMap<String, String>,
) -> Result<Selector, Failure> {
    let mut selector = Selector {
        namespaces: namespace.map(|ns| vec![ns.to_owned()]),
        ..Selector::default()
    };
    if let Some(text) = params.get("labelSelector").filter(|t| !t.trim().is_empty()) {
        selector.labels = Some(label_selector(text).map_err(|why| {
            Failure::bad_request(format!(
                "unable to parse requirement: {why} (labelSelector {text:?})"
            ))
        })?);
    }
    if let Some(text) = params.get("fieldSelector").filter(|t| !t.trim().is_empty()) {
        selector.fields = field_selector(text).map_err(|why| {
            Failure::bad_request(format!("invalid field selector {text:?}: {why}"))
        })?;
    }
    Ok(selector)
}

/// Splits at commas outside parentheses.
fn requirements(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(text[start..].trim());
    parts.into_iter().filter(|p| !p.is_empty()).collect()
}

/// A label selector in its text form.
pub(crate) fn label_selector(text: &str) -> Result<LabelSelector, String> {
    let mut selector = LabelSelector::default();
    let mut expression = |key: &str, operator, values: Vec<String>| {
        selector.match_expressions.push(LabelRequirement {
            key: key.trim().to_owned(),
            operator,
            values,
        });
    };
    for part in requirements(text) {
        let set = |rest: &str| -> Result<Vec<String>, String> {
            let inner = rest
                .trim()
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| format!("{part:?}: expected a set of values in parentheses"))?;
            Ok(inner
                .split(',')
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .collect())
        };
        if let Some(key) = part.strip_prefix('!') {
            expression(key, LabelOperator::DoesNotExist, Vec::new());
        } else if let Some((key, rest)) = part.split_once(" notin ") {
            expression(key, LabelOperator::NotIn, set(rest)?);
        } else if let Some((key, rest)) = part.split_once(" in ") {
            expression(key, LabelOperator::In, set(rest)?);
        } else if let Some((key, value)) = part.split_once("!=") {
            expression(key, LabelOperator::NotIn, vec![value.trim().to_owned()]);
        } else if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
            expression(key, LabelOperator::In, vec![value.trim().to_owned()]);
        } else if part.contains([' ', '(', ')', '<', '>']) {
            return Err(format!("{part:?} is not a requirement"));
        } else {
            expression(part, LabelOperator::Exists, Vec::new());
        }
    }
    if selector.match_expressions.iter().any(|r| r.key.is_empty()) {
        return Err("a requirement has no key".to_owned());
    }
    Ok(selector)
}

/// A field selector in its text form.
pub(crate) fn field_selector(text: &str) -> Result<Vec<FieldRequirement>, String> {
    requirements(text)
        .into_iter()
        .map(|part| {
            let (field, operator, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, FieldOperator::NotEquals, v)
            } else if let Some((f, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (f, FieldOperator::Equals, v)
            } else {
                return Err(format!("{part:?} has no operator (=, == or !=)"));
            };
            Ok(FieldRequirement {
                field: field.trim().to_owned(),
                operator,
                value: value.trim().to_owned(),
            })
        })
        .collect()
}

/// The fields a kind may be selected by besides `metadata.name` and
/// `metadata.namespace`, as the API server registers them.
fn selectable_fields(group: &str, kind: &str) -> &'static [&'static str] {
    match (group, kind) {
        ("", "Pod") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "Secret") => &["type"],
        ("", "Namespace") => &["status.phase"],
        ("", "Node") => &["spec.unschedulable"],
        ("", "Event") | ("events.k8s.io", "Event") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("", "ReplicationController") | ("apps", "ReplicaSet") => &["status.replicas"],
        ("batch", "Job") => &["status.successful"],
        _ => &[],
    }
}

/// Refuses a field selector on a field the API server does not index, with its message.
pub(crate) fn check_fields(group: &str, kind: &str, selector: &Selector) -> Result<(), Failure> {
    for requirement in &selector.fields {
        let field = requirement.field.as_str();
        if field != "metadata.name"
            && field != "metadata.namespace"
            && !selectable_fields(group, kind).contains(&field)
        {
            return Err(Failure::bad_request(format!(
                "field label not supported: {field}"
            )));
        }
    }
    Ok(())
}
