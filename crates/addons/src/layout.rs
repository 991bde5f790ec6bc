//! addon-operator's directory layout: a modules directory of `NNN-name/` modules (each
//! with `hooks/`, `values.yaml`, `openapi/`, an `enabled` program, `crds/` and a Helm
//! chart or plain manifests) beside `values.yaml`, and a global hooks directory (its hooks in
//! `hooks/` when that exists, its schemas in `openapi/`). Reading the layout runs
//! nothing.

use super::AddonError;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// What a module deploys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Payload {
    /// A Helm chart (`Chart.yaml` and `templates/`), rendered by a Helm engine.
    Chart,
    /// Plain manifests: every `*.yaml`/`*.yml`/`*.json` file of `manifests/`, applied as
    /// written.
    Manifests(PathBuf),
    /// Nothing: a module of hooks only, as addon-operator allows.
    None,
}

/// One module directory.
#[derive(Debug, Clone)]
pub struct ModuleDir {
    /// The name: the directory name without its numeric prefix (`ingress-nginx`).
    pub name: String,
    /// The key of its values and of its enabled flag (`ingressNginx`,
    /// `ingressNginxEnabled`): the name in camelCase, as addon-operator spells it.
    pub values_key: String,
    /// The numeric prefix, which orders modules; unnumbered modules come last.
    pub(crate) order: Option<u32>,
    /// The directory.
    pub(crate) path: PathBuf,
    /// `values.yaml`, read (an empty mapping when the file is absent).
    pub(crate) static_values: Value,
    /// `openapi/config-values.yaml`, read, when present.
    pub(crate) config_schema: Option<Value>,
    /// `openapi/values.yaml`, read, when present.
    pub(crate) values_schema: Option<Value>,
    /// The `enabled` program, when present and executable.
    pub(crate) enabled_script: Option<PathBuf>,
    /// `hooks/`, when present.
    pub(crate) hooks_dir: Option<PathBuf>,
    /// What it deploys.
    pub(crate) payload: Payload,
    /// The CRD files of `crds/` (`*.yaml`, `*.yml`, `*.json`, but not `doc-*` or
    /// `_*`, addon-operator's filters), in name order: applied when the module is
    /// enabled, before its first ModuleRun, and never deleted.
    pub(crate) crds: Vec<PathBuf>,
}

impl ModuleDir {
    /// The key of the module's enabled flag.
    pub(crate) fn enabled_key(&self) -> String {
        format!("{}Enabled", self.values_key)
    }
}

/// The global part: hooks and schemas of the `global` values.
#[derive(Debug, Clone, Default)]
pub(crate) struct GlobalDir {
    /// Where global hooks are looked for (`DIR/hooks` when it exists, else `DIR`).
    pub(crate) hooks_dir: Option<PathBuf>,
    /// `openapi/config-values.yaml`, when present.
    pub(crate) config_schema: Option<Value>,
    /// `openapi/values.yaml`, when present.
    pub(crate) values_schema: Option<Value>,
}

/// A whole layout, modules in their order.
#[derive(Debug, Clone)]
pub struct Layout {
    /// `MODULES_DIR/values.yaml`, read: the common static values.
    pub(crate) common_values: Value,
    /// The global hooks directory.
    pub(crate) global: GlobalDir,
    /// The modules, by order then name.
    pub modules: Vec<ModuleDir>,
}

impl Layout {
    /// Reads `modules_dir` and, when given, `global_hooks_dir`.
    pub fn read(modules_dir: &Path, global_hooks_dir: Option<&Path>) -> Result<Self, AddonError> {
        let common_values = read_yaml_or_empty(&modules_dir.join("values.yaml"))?;
        let global = match global_hooks_dir {
            Some(dir) => read_global(dir)?,
            None => GlobalDir::default(),
        };
        let entries = std::fs::read_dir(modules_dir).map_err(|source| AddonError::Io {
            path: modules_dir.to_owned(),
            source,
        })?;
        let mut modules = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| AddonError::Io {
                path: modules_dir.to_owned(),
                source,
            })?;
            let path = entry.path();
            let dir_name = entry.file_name().to_string_lossy().into_owned();
            // Symlinked modules count as what they point to, as in addon-operator.
            if dir_name.starts_with('.') || !path.is_dir() {
                continue;
            }
            modules.push(read_module(&path, &dir_name)?);
        }
        modules.sort_by(|a, b| {
            (a.order.is_none(), a.order, &a.name).cmp(&(b.order.is_none(), b.order, &b.name))
        });
        for pair in modules.windows(2) {
            if pair[0].name == pair[1].name {
                return Err(AddonError::DuplicateModule {
                    name: pair[0].name.clone(),
                    first: pair[0].path.clone(),
                    second: pair[1].path.clone(),
                });
            }
        }
        Ok(Self {
            common_values,
            global,
            modules,
        })
    }

    /// The module named `name` (its name or its values key).
    pub fn module(&self, name: &str) -> Option<&ModuleDir> {
        self.modules
            .iter()
            .find(|m| m.name == name || m.values_key == name)
    }
}

/// The module name and order of a directory name: `001-ingress-nginx` →
/// (`ingress-nginx`, 1), addon-operator's `^(([0-9]+)-)?(.+)$`.
pub(crate) fn split_dir_name(dir_name: &str) -> (String, Option<u32>) {
    if let Some((digits, rest)) = dir_name.split_once('-')
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !rest.is_empty()
        && let Ok(order) = digits.parse()
    {
        return (rest.to_owned(), Some(order));
    }
    (dir_name.to_owned(), None)
}

/// `ingress-nginx` → `ingressNginx`: words split at `-`, `_`, `.` and spaces, the first
/// lower-cased, the others capitalised (addon-operator's `ModuleNameToValuesKey`).
pub fn values_key(name: &str) -> String {
    let mut key = String::with_capacity(name.len());
    for (i, word) in name
        .split(['-', '_', '.', ' '])
        .filter(|w| !w.is_empty())
        .enumerate()
    {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            if i == 0 {
                key.extend(first.to_lowercase());
            } else {
                key.extend(first.to_uppercase());
            }
            key.push_str(chars.as_str());
        }
    }
    key
}

fn read_module(path: &Path, dir_name: &str) -> Result<ModuleDir, AddonError> {
    use std::os::unix::fs::PermissionsExt as _;
    let (name, order) = split_dir_name(dir_name);
    let values_key = values_key(&name);
    if values_key.is_empty() {
        return Err(AddonError::Layout {
            path: path.to_owned(),
            reason: "the directory name gives no module name".to_owned(),
        });
    }
    let enabled = path.join("enabled");
    let enabled_script = std::fs::metadata(&enabled)
        .ok()
        .filter(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .map(|_| enabled);
    let hooks = path.join("hooks");
    let payload = if path.join("Chart.yaml").is_file() {
        Payload::Chart
    } else if path.join("manifests").is_dir() {
        Payload::Manifests(path.join("manifests"))
    } else {
        Payload::None
    };
    Ok(ModuleDir {
        crds: crd_files(&path.join("crds"))?,
        static_values: read_yaml_or_empty(&path.join("values.yaml"))?,
        config_schema: read_yaml_if_present(&path.join("openapi/config-values.yaml"))?,
        values_schema: read_yaml_if_present(&path.join("openapi/values.yaml"))?,
        enabled_script,
        hooks_dir: hooks.is_dir().then_some(hooks),
        payload,
        name,
        values_key,
        order,
        path: path.to_owned(),
    })
}

fn crd_files(dir: &Path) -> Result<Vec<PathBuf>, AddonError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(AddonError::Io {
                path: dir.to_owned(),
                source,
            });
        }
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|source| AddonError::Io {
                path: dir.to_owned(),
                source,
            })?
            .path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let manifest = path
            .extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| matches!(x, "yaml" | "yml" | "json"));
        if manifest && path.is_file() && !name.starts_with("doc-") && !name.starts_with('_') {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

fn read_global(dir: &Path) -> Result<GlobalDir, AddonError> {
    if !dir.is_dir() {
        return Err(AddonError::Layout {
            path: dir.to_owned(),
            reason: "the global hooks directory does not exist".to_owned(),
        });
    }
    let hooks = dir.join("hooks");
    Ok(GlobalDir {
        hooks_dir: Some(if hooks.is_dir() {
            hooks
        } else {
            dir.to_owned()
        }),
        config_schema: read_yaml_if_present(&dir.join("openapi/config-values.yaml"))?,
        values_schema: read_yaml_if_present(&dir.join("openapi/values.yaml"))?,
    })
}

/// A YAML document as JSON values; an absent file or an empty document is `{}`.
fn read_yaml_or_empty(path: &Path) -> Result<Value, AddonError> {
    Ok(read_yaml_if_present(path)?.unwrap_or_else(|| Value::Object(Default::default())))
}

fn read_yaml_if_present(path: &Path) -> Result<Option<Value>, AddonError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(AddonError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    parse_yaml_mapping(&text)
        .map(Some)
        .map_err(|reason| AddonError::Layout {
            path: path.to_owned(),
            reason,
        })
}

/// A YAML (or JSON) mapping as a JSON value; empty text is `{}`.
pub(crate) fn parse_yaml_mapping(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    let value: Value = yaml_serde::from_str(text).map_err(|e| format!("not valid YAML: {e}"))?;
    match value {
        Value::Object(_) => Ok(value),
        Value::Null => Ok(Value::Object(Default::default())),
        other => Err(format!("expected a mapping, found {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_names_give_name_and_order() {
        assert_eq!(
            split_dir_name("001-ingress-nginx"),
            ("ingress-nginx".to_owned(), Some(1))
        );
        assert_eq!(split_dir_name("echo"), ("echo".to_owned(), None));
        assert_eq!(split_dir_name("x1-echo"), ("x1-echo".to_owned(), None));
        assert_eq!(split_dir_name("20-"), ("20-".to_owned(), None));
    }

    #[test]
    fn values_keys_are_camel_case() {
        assert_eq!(values_key("ingress-nginx"), "ingressNginx");
        assert_eq!(values_key("very-simple-module"), "verySimpleModule");
        assert_eq!(values_key("echo"), "echo");
        assert_eq!(values_key("cert_manager"), "certManager");
    }

    #[test]
    fn modules_are_ordered_by_number_then_unnumbered() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["010-b", "002-c", "a", "001-d"] {
            std::fs::create_dir(dir.path().join(name)).unwrap();
        }
        std::fs::write(dir.path().join("values.yaml"), "dEnabled: true\n").unwrap();
        let layout = Layout::read(dir.path(), None).unwrap();
        let names: Vec<&str> = layout.modules.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["d", "c", "b", "a"]);
        assert_eq!(layout.common_values["dEnabled"], true);
    }

    #[test]
    fn crd_files_skip_docs_and_underscored_files() {
        let dir = tempfile::tempdir().unwrap();
        let crds = dir.path().join("001-echo/crds");
        std::fs::create_dir_all(&crds).unwrap();
        for name in ["b.yaml", "a.json", "doc-b.yaml", "_draft.yaml", "notes.txt"] {
            std::fs::write(crds.join(name), "{}").unwrap();
        }
        let layout = Layout::read(dir.path(), None).unwrap();
        let names: Vec<String> = layout.modules[0]
            .crds
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.json", "b.yaml"]);
    }

    #[test]
    fn two_directories_of_one_module_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["001-echo", "002-echo"] {
            std::fs::create_dir(dir.path().join(name)).unwrap();
        }
        let err = Layout::read(dir.path(), None).unwrap_err();
        assert!(err.to_string().contains("echo"), "{err}");
    }
}
