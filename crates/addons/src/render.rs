//! A module's objects: its Helm chart rendered by a real Helm engine (the `helm`
//! binary's `helm template`, as earlier addon-operator versions ran it, with the
//! module's values as `{"global": ..., "<moduleKey>": ...}`), or its plain manifests
//! read as written. Never a template engine of our own.

use super::AddonError;
use super::layout::{ModuleDir, Payload};
use serde::Deserialize as _;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How charts are rendered.
#[derive(Debug, Clone)]
pub struct Renderer {
    /// The `helm` program (anything that answers `helm template` the same way).
    pub helm: PathBuf,
    /// The release namespace.
    pub namespace: String,
    /// The deadline of one render.
    pub timeout: Duration,
}

impl Renderer {
    /// The objects `module` deploys with `values` (the whole values document).
    pub async fn render(
        &self,
        module: &ModuleDir,
        values: &Value,
    ) -> Result<Vec<Value>, AddonError> {
        let failed = |reason: String| AddonError::Render {
            module: module.name.clone(),
            reason,
        };
        match &module.payload {
            Payload::None => Ok(Vec::new()),
            Payload::Manifests(dir) => read_manifests(dir).map_err(failed),
            Payload::Chart => {
                let text = self.helm_template(module, values).await.map_err(failed)?;
                documents(&text, "helm template output").map_err(failed)
            }
        }
    }

    async fn helm_template(&self, module: &ModuleDir, values: &Value) -> Result<String, String> {
        let file = tempfile::Builder::new()
            .prefix("values-")
            .suffix(".json")
            .tempfile()
            .map_err(|e| format!("cannot write the values file: {e}"))?;
        std::fs::write(file.path(), values.to_string())
            .map_err(|e| format!("cannot write the values file: {e}"))?;
        let mut command = tokio::process::Command::new(&self.helm);
        command
            .arg("template")
            .arg(&module.name)
            .arg(&module.path)
            .arg("--namespace")
            .arg(&self.namespace)
            .arg("--values")
            .arg(file.path())
            .kill_on_drop(true)
            .stdin(std::process::Stdio::null());
        let output = tokio::time::timeout(self.timeout, command.output())
            .await
            .map_err(|_| {
                format!(
                    "{} template timed out after {:?}",
                    self.helm.display(),
                    self.timeout
                )
            })?
            .map_err(|e| format!("cannot run {}: {e}", self.helm.display()))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(format!(
                "{} template failed ({}): {}",
                self.helm.display(),
                output.status,
                stderr.trim()
            ));
        }
        String::from_utf8(output.stdout).map_err(|e| format!("helm printed non-UTF-8: {e}"))
    }
}

/// Every object of the `*.yaml`, `*.yml` and `*.json` files of `dir`, files in name
/// order.
fn read_manifests(dir: &Path) -> Result<Vec<Value>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| matches!(x, "yaml" | "yml" | "json"))
        })
        .collect();
    files.sort();
    let mut objects = Vec::new();
    for file in files {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        objects.extend(documents(&text, &file.display().to_string())?);
    }
    Ok(objects)
}

/// The objects of a YAML stream; empty documents are skipped and `kind: List` is
/// flattened. Every object needs `apiVersion`, `kind` and `metadata.name`.
pub fn documents(text: &str, origin: &str) -> Result<Vec<Value>, String> {
    let mut objects = Vec::new();
    for (index, document) in yaml_serde::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(document)
            .map_err(|e| format!("{origin}: document {}: {e}", index + 1))?;
        let items = match value {
            Value::Null => continue,
            Value::Object(ref map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
                map.get("items")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
            }
            other => vec![other],
        };
        for item in items {
            for field in ["apiVersion", "kind"] {
                if item
                    .get(field)
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    return Err(format!(
                        "{origin}: document {}: the object has no {field}",
                        index + 1
                    ));
                }
            }
            if item
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                return Err(format!(
                    "{origin}: document {}: the {} has no metadata.name",
                    index + 1,
                    item["kind"].as_str().unwrap_or_default()
                ));
            }
            objects.push(item);
        }
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_skip_empty_ones_and_flatten_lists() {
        let text = "---\n# Source: x\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n\
                    ---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: b}}\n";
        let objects = documents(text, "t").unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[1]["kind"], "Secret");
    }

    #[test]
    fn objects_without_a_name_are_refused() {
        let err = documents("apiVersion: v1\nkind: ConfigMap\n", "t").unwrap_err();
        assert_eq!(err, "t: document 1: the ConfigMap has no metadata.name");
    }
}
