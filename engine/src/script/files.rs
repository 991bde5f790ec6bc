//! shell-operator's hook files, read into the typed values a wasm hook returns.
//!
//! - `$KUBERNETES_PATCH_PATH`: a stream of JSON documents or multi-document YAML (JSON
//!   documents between `---` lines are YAML too); `object`, `mergePatch` and `jsonPatch`
//!   may be given as objects or as strings holding JSON or YAML. → [`PatchOperation`]s.
//! - `$METRICS_PATH`: JSON documents, one per line by convention, with the `add` / `set`
//!   shortcuts. → [`MetricOperation`]s.
//! - `$VALIDATING_RESPONSE_PATH` / `$ADMISSION_RESPONSE_PATH`: `{allowed, message,
//!   warnings, patch}` where `patch` is a base64 JSON Patch (or the patch itself).
//! - `$CONVERSION_RESPONSE_PATH`: `{convertedObjects}` or `{failedMessage}`.
//!
//! Every problem is a [`HookFileError`] naming the variable, the file, the line and the
//! reason. Unknown fields are errors: shell-operator would ignore a misspelt
//! `mergepatch` and silently patch nothing.

use super::error::HookFileError;
use crate::sandbox::bindings::kubernetes::{
    CreateSpec, JqPatchSpec, ObjectRef, PatchOperation, PatchSpec,
};
use crate::sandbox::bindings::metrics::{MetricOperation, Observation, Sample};
use crate::sandbox::bindings::types::{ConversionResponse, ValidatingResponse};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// One of the files a hook writes, with its variable and file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HookFile {
    /// The environment variable holding the path.
    pub variable: &'static str,
    /// The file's name in the run directory.
    pub file: &'static str,
}

/// `$BINDING_CONTEXT_PATH`, written by Operon.
pub const BINDING_CONTEXT: HookFile = HookFile {
    variable: "BINDING_CONTEXT_PATH",
    file: "binding-context.json",
};
/// `$KUBERNETES_PATCH_PATH`.
pub const KUBERNETES_PATCH: HookFile = HookFile {
    variable: "KUBERNETES_PATCH_PATH",
    file: "kubernetes-patch",
};
/// `$METRICS_PATH`.
pub const METRICS: HookFile = HookFile {
    variable: "METRICS_PATH",
    file: "metrics.json",
};
/// `$VALIDATING_RESPONSE_PATH`.
pub const VALIDATING_RESPONSE: HookFile = HookFile {
    variable: "VALIDATING_RESPONSE_PATH",
    file: "validating-response.json",
};
/// `$ADMISSION_RESPONSE_PATH`, the newer name of the validating response.
pub const ADMISSION_RESPONSE: HookFile = HookFile {
    variable: "ADMISSION_RESPONSE_PATH",
    file: "admission-response.json",
};
/// `$CONVERSION_RESPONSE_PATH`.
pub const CONVERSION_RESPONSE: HookFile = HookFile {
    variable: "CONVERSION_RESPONSE_PATH",
    file: "conversion-response.json",
};

/// Every file a run's hook may write, created empty before the run.
pub const OUTPUT_FILES: [HookFile; 5] = [
    KUBERNETES_PATCH,
    METRICS,
    VALIDATING_RESPONSE,
    ADMISSION_RESPONSE,
    CONVERSION_RESPONSE,
];

impl HookFile {
    fn error(self, line: usize, reason: impl Into<String>) -> HookFileError {
        HookFileError {
            variable: self.variable,
            file: self.file,
            line,
            reason: reason.into(),
        }
    }
}

/// 1-based line of byte `offset` in `text`.
fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Byte offset of the first non-whitespace byte at or after `offset`.
fn skip_space(text: &str, offset: usize) -> usize {
    offset
        + text.as_bytes()[offset.min(text.len())..]
            .iter()
            .take_while(|b| b.is_ascii_whitespace())
            .count()
}

/// The JSON documents of `text` with the line each starts on.
fn json_stream(text: &str) -> Result<Vec<(usize, Value)>, (usize, String)> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut docs = Vec::new();
    let mut start = skip_space(text, 0);
    while let Some(next) = stream.next() {
        match next {
            Ok(value) => docs.push((line_at(text, start), value)),
            Err(e) => return Err((e.line(), e.to_string())),
        }
        start = skip_space(text, stream.byte_offset());
    }
    Ok(docs)
}

/// The documents of a multi-document YAML `text` with the line each starts on.
fn yaml_stream(text: &str) -> Result<Vec<(usize, Value)>, (usize, String)> {
    let mut docs = Vec::new();
    let mut current = String::new();
    let mut first_line = 1;
    let flush = |current: &mut String, first_line: usize, docs: &mut Vec<(usize, Value)>| {
        let doc = std::mem::take(current);
        let body: Vec<&str> = doc
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            .collect();
        if body.is_empty() {
            return Ok(());
        }
        // Lines before the first content line do not count for the document's start.
        let lead = doc
            .lines()
            .take_while(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
            .count();
        match yaml_serde::from_str::<Value>(&doc) {
            Ok(Value::Null) => Ok(()),
            Ok(value) => {
                docs.push((first_line + lead, value));
                Ok(())
            }
            Err(e) => {
                let line = e
                    .location()
                    .map_or(first_line, |l| first_line + l.line() - 1);
                Err((line, e.to_string()))
            }
        }
    };
    for (index, line) in text.lines().enumerate() {
        if line == "---" || line.starts_with("--- ") || line == "..." {
            flush(&mut current, first_line, &mut docs)?;
            first_line = index + 2;
            continue;
        }
        current.push_str(line);
        current.push('\n');
    }
    flush(&mut current, first_line, &mut docs)?;
    Ok(docs)
}

/// A JSON stream when it is one, else multi-document YAML. Text that starts like JSON
/// and has no `---` separator is JSON with a mistake, and gets the JSON error (YAML would
/// accept `{"kind": }` and report a confusing missing field instead).
fn documents(file: HookFile, text: &str) -> Result<Vec<(usize, Value)>, HookFileError> {
    let json_error = match json_stream(text) {
        Ok(docs) => return Ok(docs),
        Err(error) => error,
    };
    let separated = text.lines().any(|l| l == "---" || l.starts_with("--- "));
    if text.trim_start().starts_with(['{', '[']) && !separated {
        let (line, reason) = json_error;
        return Err(file.error(line, reason));
    }
    yaml_stream(text).map_err(|(line, reason)| file.error(line, reason))
}

/// One document of `$KUBERNETES_PATCH_PATH`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PatchDocument {
    operation: String,
    api_version: Option<String>,
    kind: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
    object: Option<Value>,
    jq_filter: Option<String>,
    merge_patch: Option<Value>,
    json_patch: Option<Value>,
    #[serde(default)]
    ignore_missing_object: bool,
    /// Accepted for compatibility; Operon applies nothing from a failed run.
    #[serde(default)]
    #[allow(
        dead_code,
        reason = "read so that the field is not an unknown-field error"
    )]
    ignore_hook_error: bool,
}

/// Reads `$KUBERNETES_PATCH_PATH`.
pub fn parse_patches(text: &str) -> Result<Vec<PatchOperation>, HookFileError> {
    let file = KUBERNETES_PATCH;
    documents(file, text)?
        .into_iter()
        .map(|(line, value)| {
            let doc: PatchDocument =
                serde_json::from_value(value).map_err(|e| file.error(line, e.to_string()))?;
            patch_operation(doc).map_err(|reason| file.error(line, reason))
        })
        .collect()
}

fn patch_operation(doc: PatchDocument) -> Result<PatchOperation, String> {
    let subresource = doc.subresource.clone().filter(|s| !s.is_empty());
    let target = || -> Result<ObjectRef, String> {
        let kind = doc.kind.clone().filter(|k| !k.is_empty());
        let name = doc.name.clone().filter(|n| !n.is_empty());
        match (kind, name) {
            (Some(kind), Some(name)) => Ok(ObjectRef {
                api_version: doc.api_version.clone().filter(|v| !v.is_empty()),
                kind,
                namespace: doc.namespace.clone().filter(|n| !n.is_empty()),
                name,
            }),
            _ => Err(format!("{} needs kind and name", doc.operation)),
        }
    };
    let create = |doc: &PatchDocument| -> Result<CreateSpec, String> {
        let object = doc
            .object
            .clone()
            .ok_or_else(|| format!("{} needs object", doc.operation))?;
        let object = embedded(object, "object")?;
        if !object.is_object() {
            return Err("object must be an object".to_owned());
        }
        Ok(CreateSpec {
            object: object.to_string(),
            subresource: subresource.clone(),
        })
    };
    Ok(match doc.operation.as_str() {
        "Create" => PatchOperation::Create(create(&doc)?),
        "CreateOrUpdate" => PatchOperation::CreateOrUpdate(create(&doc)?),
        "CreateIfNotExists" => PatchOperation::CreateIfNotExists(create(&doc)?),
        "Delete" => PatchOperation::Delete(target()?),
        "DeleteInBackground" => PatchOperation::DeleteInBackground(target()?),
        "DeleteNonCascading" => PatchOperation::DeleteNonCascading(target()?),
        "JQPatch" => PatchOperation::JqPatch(JqPatchSpec {
            target: target()?,
            jq_filter: doc
                .jq_filter
                .clone()
                .filter(|f| !f.trim().is_empty())
                .ok_or("JQPatch needs jqFilter")?,
            subresource,
            ignore_missing_object: doc.ignore_missing_object,
        }),
        "MergePatch" => {
            let patch = doc
                .merge_patch
                .clone()
                .ok_or("MergePatch needs mergePatch")?;
            let patch = embedded(patch, "mergePatch")?;
            if !patch.is_object() {
                return Err("mergePatch must be an object".to_owned());
            }
            PatchOperation::MergePatch(PatchSpec {
                target: target()?,
                patch: patch.to_string(),
                subresource,
                ignore_missing_object: doc.ignore_missing_object,
            })
        }
        "JSONPatch" => {
            let patch = doc.json_patch.clone().ok_or("JSONPatch needs jsonPatch")?;
            let patch = embedded(patch, "jsonPatch")?;
            if !patch.is_array() {
                return Err("jsonPatch must be an array of operations".to_owned());
            }
            PatchOperation::JsonPatch(PatchSpec {
                target: target()?,
                patch: patch.to_string(),
                subresource,
                ignore_missing_object: doc.ignore_missing_object,
            })
        }
        other => {
            return Err(format!(
                "unknown operation {other:?}; expected Create, CreateOrUpdate, \
                 CreateIfNotExists, Delete, DeleteInBackground, DeleteNonCascading, JQPatch, \
                 MergePatch or JSONPatch"
            ));
        }
    })
}

/// A field given as a value or as a string holding JSON or YAML.
fn embedded(value: Value, field: &str) -> Result<Value, String> {
    let Value::String(text) = value else {
        return Ok(value);
    };
    serde_json::from_str(&text)
        .or_else(|_| yaml_serde::from_str(&text))
        .map_err(|e| format!("{field} is a string but neither JSON nor YAML: {e}"))
}

/// One document of `$METRICS_PATH`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MetricDocument {
    name: Option<String>,
    action: Option<String>,
    value: Option<f64>,
    buckets: Option<Vec<f64>>,
    labels: Option<BTreeMap<String, String>>,
    group: Option<String>,
    add: Option<f64>,
    set: Option<f64>,
}

/// Reads `$METRICS_PATH`.
pub fn parse_metrics(text: &str) -> Result<Vec<MetricOperation>, HookFileError> {
    let file = METRICS;
    let docs = json_stream(text).map_err(|(line, reason)| file.error(line, reason))?;
    docs.into_iter()
        .map(|(line, value)| {
            let doc: MetricDocument =
                serde_json::from_value(value).map_err(|e| file.error(line, e.to_string()))?;
            metric_operation(doc).map_err(|reason| file.error(line, reason))
        })
        .collect()
}

fn metric_operation(doc: MetricDocument) -> Result<MetricOperation, String> {
    let group = doc.group.filter(|g| !g.is_empty());
    let (action, value) = match (doc.action.as_deref(), doc.add, doc.set) {
        (Some(action), None, None) => (action, doc.value),
        (None, Some(add), None) => ("add", Some(add)),
        (None, None, Some(set)) => ("set", Some(set)),
        (None, None, None) => return Err("no action (add, set, observe or expire)".to_owned()),
        _ => return Err("give one of action, add and set".to_owned()),
    };
    if action == "expire" {
        return group
            .map(MetricOperation::ExpireGroup)
            .ok_or_else(|| "expire needs a group".to_owned());
    }
    let name = doc
        .name
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("{action} needs a name"))?;
    let value = value.ok_or_else(|| format!("{action} needs a value"))?;
    let labels: Vec<(String, String)> = doc.labels.unwrap_or_default().into_iter().collect();
    match action {
        "add" => Ok(MetricOperation::Add(Sample {
            name,
            value,
            labels,
            group,
        })),
        "set" => Ok(MetricOperation::Set(Sample {
            name,
            value,
            labels,
            group,
        })),
        "observe" => Ok(MetricOperation::Observe(Observation {
            name,
            value,
            buckets: doc.buckets.ok_or("observe needs buckets")?,
            labels,
            group,
        })),
        other => Err(format!(
            "unknown action {other:?}; expected add, set, observe or expire"
        )),
    }
}

/// `$VALIDATING_RESPONSE_PATH` / `$ADMISSION_RESPONSE_PATH`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ValidatingDocument {
    allowed: bool,
    message: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
    patch: Option<Value>,
}

/// Reads a validating (or admission) response; `None` when the hook wrote nothing.
pub fn parse_validating(
    file: HookFile,
    text: &str,
) -> Result<Option<ValidatingResponse>, HookFileError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let doc: ValidatingDocument =
        serde_json::from_str(text).map_err(|e| file.error(e.line(), e.to_string()))?;
    let patch = match doc.patch {
        None | Some(Value::Null) => None,
        Some(Value::String(encoded)) => {
            let bytes = base64_decode(&encoded)
                .ok_or_else(|| file.error(1, "patch is not valid base64"))?;
            let patch: Value = serde_json::from_slice(&bytes)
                .map_err(|e| file.error(1, format!("patch is not a JSON Patch: {e}")))?;
            Some(patch)
        }
        Some(patch) => Some(patch),
    };
    if let Some(patch) = &patch
        && !patch.is_array()
    {
        return Err(file.error(1, "patch must be a JSON Patch (an array of operations)"));
    }
    Ok(Some(ValidatingResponse {
        allowed: doc.allowed,
        message: doc.message.filter(|m| !m.is_empty()),
        warnings: doc.warnings,
        patch: patch.map(|p| p.to_string()),
    }))
}

/// `$CONVERSION_RESPONSE_PATH`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConversionDocument {
    #[serde(default)]
    converted_objects: Vec<Value>,
    failed_message: Option<String>,
}

/// Reads a conversion response; `None` when the hook wrote nothing.
pub fn parse_conversion(text: &str) -> Result<Option<ConversionResponse>, HookFileError> {
    let file = CONVERSION_RESPONSE;
    if text.trim().is_empty() {
        return Ok(None);
    }
    let doc: ConversionDocument =
        serde_json::from_str(text).map_err(|e| file.error(e.line(), e.to_string()))?;
    if let Some(index) = doc.converted_objects.iter().position(|o| !o.is_object()) {
        return Err(file.error(1, format!("convertedObjects[{index}] is not an object")));
    }
    Ok(Some(ConversionResponse {
        failed_message: doc.failed_message.filter(|m| !m.is_empty()),
        converted_objects: doc.converted_objects.iter().map(Value::to_string).collect(),
    }))
}

/// Standard base64 with optional padding, whitespace ignored (`base64 -w0` or not).
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut buffer = 0u32;
    let mut bits = 0;
    for byte in text.bytes().filter(|b| !b.is_ascii_whitespace()) {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => return None,
        };
        buffer = (buffer << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_stream_mixes_json_and_yaml_and_embedded_strings() {
        let text = r#"{"operation": "Delete", "kind": "Pod", "namespace": "default", "name": "nginx"}
---
operation: MergePatch
kind: Deployment
namespace: default
name: nginx
ignoreMissingObject: true
mergePatch: |
  spec:
    replicas: 1
---
{"operation": "JSONPatch", "kind": "Deployment", "name": "nginx",
 "jsonPatch": "[{\"op\": \"replace\", \"path\": \"/spec/replicas\", \"value\": 1}]"}
---
operation: Create
object: |
  {"apiVersion":"v1", "kind":"ConfigMap", "metadata":{"namespace":"default","name":"testcm"}}
"#;
        let ops = parse_patches(text).unwrap();
        assert_eq!(ops.len(), 4);
        assert!(
            matches!(&ops[0], PatchOperation::Delete(t) if t.name == "nginx" && t.namespace.as_deref() == Some("default"))
        );
        let PatchOperation::MergePatch(spec) = &ops[1] else {
            panic!("{:?}", ops[1]);
        };
        assert_eq!(spec.patch, r#"{"spec":{"replicas":1}}"#);
        assert!(spec.ignore_missing_object);
        let PatchOperation::JsonPatch(spec) = &ops[2] else {
            panic!("{:?}", ops[2]);
        };
        assert_eq!(
            spec.patch,
            r#"[{"op":"replace","path":"/spec/replicas","value":1}]"#
        );
        assert!(matches!(&ops[3], PatchOperation::Create(c) if c.object.contains("testcm")));
    }

    #[test]
    fn a_json_stream_without_separators_is_read() {
        let text = "{\"operation\":\"Delete\",\"kind\":\"Pod\",\"name\":\"a\"}\n{\"operation\":\"DeleteInBackground\",\"kind\":\"Pod\",\"name\":\"b\"}\n";
        let ops = parse_patches(text).unwrap();
        assert!(
            matches!(&ops[1], PatchOperation::DeleteInBackground(t) if t.name == "b" && t.namespace.is_none())
        );
    }

    #[test]
    fn patch_errors_name_the_file_the_line_and_the_reason() {
        let text = "{\"operation\":\"Delete\",\"kind\":\"Pod\",\"name\":\"a\"}\n\n{\"operation\":\"Explode\",\"kind\":\"Pod\",\"name\":\"b\"}\n";
        let err = parse_patches(text).unwrap_err();
        assert_eq!(err.variable, "KUBERNETES_PATCH_PATH");
        assert_eq!(err.line, 3);
        assert!(err.reason.contains("Explode"), "{err}");

        let err = parse_patches("operation: MergePatch\nkind: Pod\nname: a\nmergepatch: {}\n")
            .unwrap_err();
        assert!(err.reason.contains("mergepatch"), "{err}");

        let err = parse_patches("{\"operation\": \"Delete\",\n \"kind\": }\n").unwrap_err();
        assert_eq!(err.line, 2, "{err}");
        assert!(
            err.to_string()
                .starts_with("KUBERNETES_PATCH_PATH (kubernetes-patch), line 2")
        );
    }

    #[test]
    fn metrics_with_shortcuts_groups_and_expiry() {
        let text = r#"{"name":"hook_metric_count","action":"add","value":1,"labels":{"label1":"value1"}}
{"name":"metric_name","add":2}
{"group":"group1","name":"items","set":12,"labels":{"kind":"pod"}}
{"name":"latency","action":"observe","value":0.3,"buckets":[0.1,1]}
{"group":"group1","action":"expire"}
"#;
        let ops = parse_metrics(text).unwrap();
        assert!(
            matches!(&ops[0], MetricOperation::Add(s) if s.value == 1.0 && s.labels == [("label1".to_owned(), "value1".to_owned())])
        );
        assert!(matches!(&ops[1], MetricOperation::Add(s) if s.value == 2.0 && s.group.is_none()));
        assert!(matches!(&ops[2], MetricOperation::Set(s) if s.group.as_deref() == Some("group1")));
        assert!(matches!(&ops[3], MetricOperation::Observe(o) if o.buckets == [0.1, 1.0]));
        assert_eq!(ops[4], MetricOperation::ExpireGroup("group1".to_owned()));
    }

    #[test]
    fn metric_errors_have_lines() {
        let err = parse_metrics("{\"name\":\"a\",\"add\":1}\n{\"name\":\"b\"}\n").unwrap_err();
        assert_eq!((err.variable, err.line), ("METRICS_PATH", 2));
        let err = parse_metrics("{\"name\":\"a\",\"add\":1}\nnot json\n").unwrap_err();
        assert_eq!(err.line, 2);
    }

    #[test]
    fn validating_responses_with_warnings_and_base64_patches() {
        assert_eq!(parse_validating(VALIDATING_RESPONSE, "  \n").unwrap(), None);
        let r = parse_validating(
            VALIDATING_RESPONSE,
            r#"{"allowed": true, "warnings": ["It is Tuesday"]}"#,
        )
        .unwrap()
        .unwrap();
        assert!(r.allowed);
        assert_eq!(r.warnings, ["It is Tuesday"]);
        // [{"op":"add","path":"/x","value":1}]
        let r = parse_validating(
            ADMISSION_RESPONSE,
            r#"{"allowed": true, "patch": "W3sib3AiOiJhZGQiLCJwYXRoIjoiL3giLCJ2YWx1ZSI6MX1d"}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            r.patch.as_deref(),
            Some(r#"[{"op":"add","path":"/x","value":1}]"#)
        );
        let err = parse_validating(VALIDATING_RESPONSE, "{\"message\": \"no\"}").unwrap_err();
        assert!(err.reason.contains("allowed"), "{err}");
    }

    #[test]
    fn conversion_responses() {
        let r = parse_conversion(r#"{"convertedObjects": [{"apiVersion": "v2", "kind": "X"}]}"#)
            .unwrap()
            .unwrap();
        assert_eq!(r.converted_objects, [r#"{"apiVersion":"v2","kind":"X"}"#]);
        let r = parse_conversion(r#"{"failedMessage": "nope"}"#)
            .unwrap()
            .unwrap();
        assert_eq!(r.failed_message.as_deref(), Some("nope"));
        assert!(parse_conversion("[1]").is_err());
    }
}
