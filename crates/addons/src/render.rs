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
        let failed = |failure: RenderFailure| AddonError::Render {
            module: module.name.clone(),
            reason: failure.reason,
            cause: failure.cause,
        };
        match &module.payload {
            Payload::None => Ok(Vec::new()),
            Payload::Manifests(dir) => read_manifests(dir).map_err(failed),
            Payload::Chart => {
                let text = self.helm_template(module, values).await.map_err(failed)?;
                documents(&text, "helm template output").map_err(|reason| failed(reason.into()))
            }
        }
    }

    async fn helm_template(
        &self,
        module: &ModuleDir,
        values: &Value,
    ) -> Result<String, RenderFailure> {
        let file = tempfile::Builder::new()
            .prefix("values-")
            .suffix(".json")
            .tempfile()
            .map_err(|e| because(format!("cannot write the values file: {e}"), e))?;
        std::fs::write(file.path(), values.to_string())
            .map_err(|e| because(format!("cannot write the values file: {e}"), e))?;
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
            .map_err(|e| because(format!("cannot run {}: {e}", self.helm.display()), e))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(RenderFailure::from(format!(
                "{} template failed ({}): {}",
                self.helm.display(),
                output.status,
                stderr.trim()
            )));
        }
        String::from_utf8(output.stdout)
            .map_err(|e| because(format!("helm printed non-UTF-8: {e}"), e))
    }
}

/// Why rendering failed, in words, and the error behind it when there is one.
struct RenderFailure {
    reason: String,
    cause: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl From<String> for RenderFailure {
    fn from(reason: String) -> Self {
        Self {
            reason,
            cause: None,
        }
    }
}

/// A failure `cause` made, said in `reason` (which holds its text).
fn because(reason: String, cause: impl std::error::Error + Send + Sync + 'static) -> RenderFailure {
    RenderFailure {
        reason,
        cause: Some(Box::new(cause)),
    }
}

/// Every object of the `*.yaml`, `*.yml` and `*.json` files of `dir`, files in name
/// order.
fn read_manifests(dir: &Path) -> Result<Vec<Value>, RenderFailure> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| because(format!("{}: {e}", dir.display()), e))?
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
        let text = std::fs::read_to_string(&file)
            .map_err(|e| because(format!("{}: {e}", file.display()), e))?;
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

    /// A failure that came from an error keeps it as the source, below the same words.
    #[tokio::test]
    async fn a_render_that_fails_keeps_the_error_behind_it() {
        use std::error::Error as _;
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("010-web/templates")).unwrap();
        std::fs::write(
            root.path().join("010-web/Chart.yaml"),
            "name: web\nversion: 0.1.0\n",
        )
        .unwrap();
        let layout = crate::layout::Layout::read(root.path(), None).unwrap();
        let module = layout.module("web").expect("the module is read");
        let renderer = Renderer {
            helm: root.path().join("no-helm"),
            namespace: "ops".into(),
            timeout: Duration::from_secs(10),
        };
        let err = renderer.render(module, &Value::Null).await.unwrap_err();
        assert!(
            matches!(&err, AddonError::Render { module, reason, .. }
                if module == "web" && reason.starts_with("cannot run ")),
            "{err:?}"
        );
        let io = err
            .source()
            .and_then(|e| e.downcast_ref::<std::io::Error>());
        assert_eq!(
            io.map(std::io::Error::kind),
            Some(std::io::ErrorKind::NotFound)
        );

        let failure = read_manifests(&root.path().join("absent")).err().unwrap();
        let cause = failure.cause.expect("the directory's error");
        assert!(cause.is::<std::io::Error>(), "{cause:?}");
    }

    #[test]
    fn objects_without_a_name_are_refused() {
        let err = documents("apiVersion: v1\nkind: ConfigMap\n", "t").unwrap_err();
        assert_eq!(err, "t: document 1: the ConfigMap has no metadata.name");
    }
}
