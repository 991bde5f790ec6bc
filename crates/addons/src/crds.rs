//! A module's `crds/` (addon-operator's ModuleEnsureCRDs): the CustomResourceDefinitions
//! a module's chart or manifests rely on, applied by server-side apply when the module
//! is enabled, before its first ModuleRun, and waited for until the API server serves
//! them (`Established`). They are not part of the release: disabling a module keeps
//! its CRDs (and so the custom resources users made), as addon-operator does.

use super::AddonError;
use super::apply::{ApplyError, ObjectWriter, failed};
use super::layout::ModuleDir;
use super::render::documents;
use serde_json::Value;
use std::time::{Duration, Instant};

/// How long a CRD may take to be established.
const ESTABLISHED_WITHIN: Duration = Duration::from_secs(30);

impl ObjectWriter {
    /// Applies every CRD of `module`'s `crds/` and waits until each is established;
    /// returns their names. Anything but a `CustomResourceDefinition` there is an
    /// error naming the file.
    pub(crate) async fn ensure_crds(&self, module: &ModuleDir) -> Result<Vec<String>, AddonError> {
        let refused = |reason: String| failed(&module.name, "", ApplyError::Refused(reason));
        let mut crds = Vec::new();
        for file in &module.crds {
            let origin = file.display().to_string();
            let text = std::fs::read_to_string(file).map_err(|source| AddonError::Io {
                path: file.clone(),
                source,
            })?;
            for crd in documents(&text, &origin).map_err(refused)? {
                let kind = crd["kind"].as_str().unwrap_or_default();
                let group = crd["apiVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .split('/')
                    .next()
                    .unwrap_or_default();
                if kind != "CustomResourceDefinition" || group != "apiextensions.k8s.io" {
                    return Err(refused(format!(
                        "crds/: {origin}: {} {} is not a CustomResourceDefinition of \
                         apiextensions.k8s.io",
                        crd["apiVersion"].as_str().unwrap_or_default(),
                        kind
                    )));
                }
                crds.push(crd);
            }
        }
        let mut names = Vec::new();
        for crd in crds {
            let name = crd["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let version = crd["apiVersion"].as_str().map(str::to_owned);
            let resource = self
                .cluster()
                .resolve(version.as_deref(), "CustomResourceDefinition")
                .await
                .map_err(|e| failed(&module.name, format!("CustomResourceDefinition {name}"), e))?;
            self.apply_one(&resource, &crd).await.map_err(|e| {
                failed(
                    &module.name,
                    format!("apply CustomResourceDefinition {name}"),
                    e,
                )
            })?;
            names.push(name);
        }
        if self.server_side() {
            self.wait_established(module, &names).await?;
        }
        Ok(names)
    }

    async fn wait_established(
        &self,
        module: &ModuleDir,
        names: &[String],
    ) -> Result<(), AddonError> {
        let resource = self
            .cluster()
            .resolve(Some("apiextensions.k8s.io/v1"), "CustomResourceDefinition")
            .await
            .map_err(|e| failed(&module.name, "", e))?;
        let deadline = Instant::now() + ESTABLISHED_WITHIN;
        for name in names {
            loop {
                let crd = self
                    .cluster()
                    .get(&resource, None, name)
                    .await
                    .map_err(|e| {
                        failed(&module.name, format!("CustomResourceDefinition {name}"), e)
                    })?;
                if crd.as_ref().is_some_and(established) {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(failed(
                        &module.name,
                        "",
                        ApplyError::Refused(format!(
                            "CustomResourceDefinition {name} is not established after {ESTABLISHED_WITHIN:?}"
                        )),
                    ));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(())
    }
}

/// Whether a CRD's `Established` condition is true.
fn established(crd: &Value) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn established_reads_the_condition() {
        assert!(established(&json!({"status": {"conditions": [
            {"type": "NamesAccepted", "status": "True"},
            {"type": "Established", "status": "True"}]}})));
        assert!(!established(&json!({"status": {"conditions": [
            {"type": "Established", "status": "False"}]}})));
        assert!(!established(&json!({})));
    }
}
