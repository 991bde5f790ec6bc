//! `$KUBERNETES_PATCH_PATH`: a stream of JSON documents or multi-document YAML (JSON
//! documents between `---` lines are YAML too), read into [`PatchOperation`]s, and
//! patch operations written back in the same shape. `object`, `mergePatch` and
//! `jsonPatch` may be given as objects or as strings holding JSON or YAML. Unknown
//! fields are errors: shell-operator would ignore a misspelt `mergepatch` and silently
//! patch nothing.

use super::files::{HookFileError, KUBERNETES_PATCH};
use super::json_text;
use super::stream::documents;
use operon_data::model::{CreateSpec, JqPatchSpec, ObjectRef, PatchOperation, PatchSpec};
use serde::Deserialize;
use serde_json::{Map, Value, json};

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
pub fn parse(text: &str) -> Result<Vec<PatchOperation>, HookFileError> {
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

/// A patch operation as one `$KUBERNETES_PATCH_PATH` document: the shape [`parse`]
/// reads back. JSON text fields are written as JSON values; text that does not parse
/// (which operations checked by the sandbox or read by [`parse`] never hold) is written
/// as a string.
pub fn to_json(operation: &PatchOperation) -> Value {
    let mut map = match operation {
        PatchOperation::Create(spec)
        | PatchOperation::CreateOrUpdate(spec)
        | PatchOperation::CreateIfNotExists(spec) => {
            let mut map = Map::new();
            map.insert("object".into(), json_text(&spec.object));
            insert_subresource(&mut map, spec.subresource.as_deref());
            map
        }
        PatchOperation::Delete(target)
        | PatchOperation::DeleteInBackground(target)
        | PatchOperation::DeleteNonCascading(target) => target_json(target),
        PatchOperation::JqPatch(spec) => {
            let mut map = target_json(&spec.target);
            map.insert("jqFilter".into(), json!(spec.jq_filter));
            insert_subresource(&mut map, spec.subresource.as_deref());
            insert_ignore_missing(&mut map, spec.ignore_missing_object);
            map
        }
        PatchOperation::MergePatch(spec) | PatchOperation::JsonPatch(spec) => {
            let mut map = target_json(&spec.target);
            let field = if matches!(operation, PatchOperation::MergePatch(_)) {
                "mergePatch"
            } else {
                "jsonPatch"
            };
            map.insert(field.into(), json_text(&spec.patch));
            insert_subresource(&mut map, spec.subresource.as_deref());
            insert_ignore_missing(&mut map, spec.ignore_missing_object);
            map
        }
    };
    map.insert("operation".into(), json!(operation.name()));
    Value::Object(map)
}

/// A whole `$KUBERNETES_PATCH_PATH` file: one JSON document per line.
pub fn to_text(operations: &[PatchOperation]) -> String {
    operations
        .iter()
        .map(|operation| format!("{}\n", to_json(operation)))
        .collect()
}

fn target_json(target: &ObjectRef) -> Map<String, Value> {
    let mut map = Map::new();
    if let Some(api_version) = &target.api_version {
        map.insert("apiVersion".into(), json!(api_version));
    }
    map.insert("kind".into(), json!(target.kind));
    if let Some(namespace) = &target.namespace {
        map.insert("namespace".into(), json!(namespace));
    }
    map.insert("name".into(), json!(target.name));
    map
}

fn insert_subresource(map: &mut Map<String, Value>, subresource: Option<&str>) {
    if let Some(subresource) = subresource {
        map.insert("subresource".into(), json!(subresource));
    }
}

fn insert_ignore_missing(map: &mut Map<String, Value>, ignore: bool) {
    if ignore {
        map.insert("ignoreMissingObject".into(), json!(true));
    }
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
        let ops = parse(text).unwrap();
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
        let ops = parse(text).unwrap();
        assert!(
            matches!(&ops[1], PatchOperation::DeleteInBackground(t) if t.name == "b" && t.namespace.is_none())
        );
    }

    #[test]
    fn patch_errors_name_the_file_the_line_and_the_reason() {
        let text = "{\"operation\":\"Delete\",\"kind\":\"Pod\",\"name\":\"a\"}\n\n{\"operation\":\"Explode\",\"kind\":\"Pod\",\"name\":\"b\"}\n";
        let err = parse(text).unwrap_err();
        assert_eq!(err.variable, "KUBERNETES_PATCH_PATH");
        assert_eq!(err.line, 3);
        assert!(err.reason.contains("Explode"), "{err}");

        let err = parse("operation: MergePatch\nkind: Pod\nname: a\nmergepatch: {}\n").unwrap_err();
        assert!(err.reason.contains("mergepatch"), "{err}");

        let err = parse("{\"operation\": \"Delete\",\n \"kind\": }\n").unwrap_err();
        assert_eq!(err.line, 2, "{err}");
        assert!(
            err.to_string()
                .starts_with("KUBERNETES_PATCH_PATH (kubernetes-patch), line 2")
        );
    }

    #[test]
    fn written_operations_read_back_unchanged() {
        let target = ObjectRef {
            api_version: Some("apps/v1".to_owned()),
            kind: "Deployment".to_owned(),
            namespace: Some("default".to_owned()),
            name: "web".to_owned(),
        };
        let operations = vec![
            PatchOperation::Create(CreateSpec {
                object: r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#
                    .to_owned(),
                subresource: None,
            }),
            PatchOperation::CreateOrUpdate(CreateSpec {
                object: r#"{"kind":"ConfigMap","metadata":{"name":"b"}}"#.to_owned(),
                subresource: Some("status".to_owned()),
            }),
            PatchOperation::DeleteNonCascading(ObjectRef {
                api_version: None,
                namespace: None,
                ..target.clone()
            }),
            PatchOperation::JqPatch(JqPatchSpec {
                target: target.clone(),
                jq_filter: ".spec.replicas = 2".to_owned(),
                subresource: None,
                ignore_missing_object: true,
            }),
            PatchOperation::MergePatch(PatchSpec {
                target: target.clone(),
                patch: r#"{"metadata":{"labels":{"x":"y"}}}"#.to_owned(),
                subresource: Some("status".to_owned()),
                ignore_missing_object: false,
            }),
            PatchOperation::JsonPatch(PatchSpec {
                target,
                patch: r#"[{"op":"remove","path":"/spec/paused"}]"#.to_owned(),
                subresource: None,
                ignore_missing_object: true,
            }),
        ];
        assert_eq!(parse(&to_text(&operations)).unwrap(), operations);
        assert_eq!(to_json(&operations[4])["operation"], "MergePatch");
        assert_eq!(
            to_json(&operations[4])["mergePatch"]["metadata"]["labels"]["x"],
            "y"
        );
    }
}
