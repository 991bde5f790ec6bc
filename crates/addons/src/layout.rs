//! addon-operator's directory layout: one or several modules directories (`MODULES_DIR`,
//! `:`-joined) of `NNN-name/` modules (each with `hooks/`, `values.yaml`, `openapi/`
//! with Deckhouse's settings conversions, an `enabled` program, `crds/` and a Helm
//! chart or plain manifests) beside their `values.yaml`, and a global hooks directory
//! (its hooks in `hooks/` when that exists, its schemas and conversions in
//! `openapi/`); after the directories, the modules pulled from `oci://` module sources
//! ([`super::sources`]), each an unpacked module directory. Reading the layout runs
//! nothing.

use super::AddonError;
use serde_json::Value;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
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
    /// The numeric prefix (or `module.yaml`'s `weight`), which orders modules;
    /// unnumbered modules come last.
    pub(crate) order: Option<u32>,
    /// The directory; for a symlinked module, the directory the link resolves to, as
    /// addon-operator's loader keeps it.
    pub(crate) path: PathBuf,
    /// The `values.yaml` of the modules directory this module was found in: with
    /// several directories each module takes its section from its own directory's file
    /// only (addon-operator's `LoadModules`).
    pub(crate) common_values: Value,
    /// `values.yaml`, read (an empty mapping when the file is absent).
    pub(crate) static_values: Value,
    /// `openapi/config-values.yaml`, read, when present.
    pub(crate) config_schema: Option<Value>,
    /// `openapi/values.yaml`, read, when present.
    pub(crate) values_schema: Option<Value>,
    /// `openapi/conversions/*.yaml`: how settings of older versions become the latest
    /// (a ModuleConfig's `spec.version`).
    pub(crate) conversions: super::conversions::Conversions,
    /// The `enabled` program, when present and executable.
    pub(crate) enabled_script: Option<PathBuf>,
    /// `hooks/`, when present.
    pub(crate) hooks_dir: Option<PathBuf>,
    /// What it deploys.
    pub(crate) payload: Payload,
    /// `module.yaml`, read (the default when the file is absent).
    pub definition: super::requirements::Definition,
    /// Where it came from.
    pub origin: Origin,
    /// The CRD files of `crds/` (`*.yaml`, `*.yml`, `*.json`, but not `doc-*` or
    /// `_*`, addon-operator's filters), in name order: applied when the module is
    /// enabled, before its first ModuleRun, and never deleted.
    pub(crate) crds: Vec<PathBuf>,
}

/// Where a module came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A directory of `MODULES_DIR` (the module's own path is `ModuleDir::path`).
    Directory,
    /// An `oci://` module source, unpacked into the cache.
    Oci {
        /// The reference as given (`oci://REGISTRY/REPOSITORY:TAG@sha256:...`).
        reference: String,
    },
}

/// A module source pulled and unpacked: what [`Layout::read_with_sources`] reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceModule {
    /// The reference as given.
    pub reference: String,
    /// The unpacked module directory.
    pub path: PathBuf,
}

/// A module source that could not be had: not pulled, not verified, not unpacked, or
/// its directory unreadable. The other modules run without it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnavailableModule {
    /// The reference as given.
    pub reference: String,
    /// The name it would have, as its reference suggests (the repository's last
    /// segment): its `module.yaml` is not at hand.
    pub name: String,
    /// A short CamelCase reason (`SignatureNotVerified`, `UnsafeModuleArchive`).
    pub reason: &'static str,
    /// The whole message.
    pub message: String,
}

impl ModuleDir {
    /// Where the module came from, as `operon modules list` shows it: its directory,
    /// or its `oci://` reference.
    pub fn source(&self) -> String {
        match &self.origin {
            Origin::Directory => self.path.display().to_string(),
            Origin::Oci { reference } => reference.clone(),
        }
    }

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
    /// `openapi/conversions/*.yaml` of the global settings.
    pub(crate) conversions: super::conversions::Conversions,
}

/// A whole layout, modules in their order.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Every modules directory's `values.yaml`, deep-merged in `MODULES_DIR` order (a
    /// later directory wins): where the `global` section and the `*Enabled` flags come
    /// from, as addon-operator's `loadGlobalValues` and static extender read them.
    pub(crate) common_values: Value,
    /// The global hooks directory.
    pub(crate) global: GlobalDir,
    /// The modules, by order then name, each after the modules it requires.
    pub modules: Vec<ModuleDir>,
    /// Module directories not used because an earlier one has the same module name.
    pub shadowed: Vec<ShadowedModule>,
    /// Module sources that could not be had.
    pub unavailable: Vec<UnavailableModule>,
}

/// A module directory left out because its name was found first elsewhere: addon-operator
/// registers the first and warns about the others ("module is not registered, because it
/// has a duplicate").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowedModule {
    /// The module name.
    pub name: String,
    /// The directory left out.
    pub path: PathBuf,
    /// The directory used instead.
    pub used: PathBuf,
}

/// `MODULES_DIR` as addon-operator's `utils.SplitToPaths` reads it: split at every `:`,
/// empty parts dropped.
pub fn split_to_paths(dirs: &OsStr) -> Vec<PathBuf> {
    dirs.as_bytes()
        .split(|b| *b == b':')
        .filter(|part| !part.is_empty())
        .map(|part| PathBuf::from(OsStr::from_bytes(part)))
        .collect()
}

impl Layout {
    /// Reads `modules_dirs` (one directory or several joined by `:`, `MODULES_DIR`) and,
    /// when given, `global_hooks_dir`.
    ///
    /// Directories are read in order and each one's entries in name order; a module is
    /// a directory or a symlink to one (a dangling symlink is skipped with a warning);
    /// the first directory that gives a module name is used and later ones are
    /// [`Layout::shadowed`]. Entries starting with `.` are skipped (a ConfigMap volume's
    /// `..data` links), which addon-operator does not do.
    pub fn read(modules_dirs: &Path, global_hooks_dir: Option<&Path>) -> Result<Self, AddonError> {
        Self::read_with_sources(modules_dirs, &[], global_hooks_dir)
    }

    /// [`Layout::read`], then the modules of `sources` in their order, as if each were
    /// the one module of one more directory after the last: a name found before wins
    /// (a local directory shadows a pulled module). A pulled module is named by its
    /// `module.yaml`'s `name`, else by its repository's last segment (Deckhouse's
    /// `REPO/NAME` images); one that cannot be read is [`Layout::unavailable`], not
    /// an error, as the others can run without it.
    pub fn read_with_sources(
        modules_dirs: &Path,
        sources: &[SourceModule],
        global_hooks_dir: Option<&Path>,
    ) -> Result<Self, AddonError> {
        let global = match global_hooks_dir {
            Some(dir) => read_global(dir)?,
            None => GlobalDir::default(),
        };
        let mut common_values = Value::Object(Default::default());
        let mut modules: Vec<ModuleDir> = Vec::new();
        let mut shadowed = Vec::new();
        for dir in split_to_paths(modules_dirs.as_os_str()) {
            let dir_values = read_yaml_or_empty(&dir.join("values.yaml"))?;
            merge_values(&mut common_values, &dir_values);
            for (dir_name, path) in module_entries(&dir)? {
                let mut module = read_module(&path, &dir_name)?;
                if let Some(first) = modules.iter().find(|m| m.name == module.name) {
                    tracing::warn!(
                        module = %module.name,
                        path = %path.display(),
                        used = %first.path.display(),
                        "module is not registered, because it has a duplicate"
                    );
                    shadowed.push(ShadowedModule {
                        name: module.name,
                        path,
                        used: first.path.clone(),
                    });
                    continue;
                }
                module.common_values = dir_values.clone();
                modules.push(module);
            }
        }
        let mut unavailable = Vec::new();
        for source in sources {
            let name = super::sources::module_name(&source.path, &source.reference);
            let mut module = match read_module(&source.path, &name) {
                Ok(module) => module,
                Err(e) => {
                    tracing::warn!(module = %source.reference, error = %e, "module source unreadable");
                    unavailable.push(UnavailableModule {
                        reference: source.reference.clone(),
                        name,
                        reason: "ModuleUnreadable",
                        message: e.to_string(),
                    });
                    continue;
                }
            };
            module.origin = Origin::Oci {
                reference: source.reference.clone(),
            };
            if let Some(first) = modules.iter().find(|m| m.name == module.name) {
                tracing::warn!(module = %module.name, source = %source.reference,
                    used = %first.source(), "module is not registered, because it has a duplicate");
                shadowed.push(ShadowedModule {
                    name: module.name,
                    path: source.path.clone(),
                    used: first.path.clone(),
                });
                continue;
            }
            // No directory, so no directory's values.yaml: its own values.yaml only.
            modules.push(module);
        }
        modules.sort_by(|a, b| {
            (a.order.is_none(), a.order, &a.name).cmp(&(b.order.is_none(), b.order, &b.name))
        });
        let modules = super::requirements::order_by_requirements(modules)?;
        Ok(Self {
            common_values,
            global,
            modules,
            shadowed,
            unavailable,
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

/// The module candidates of one modules directory in name order (Go's `os.ReadDir`
/// order): each directory name with the directory to read, a symlink's resolved target
/// for a symlinked module (addon-operator's `resolveDirEntry`).
fn module_entries(dir: &Path) -> Result<Vec<(String, PathBuf)>, AddonError> {
    let io = |source| AddonError::Io {
        path: dir.to_owned(),
        source,
    };
    let mut entries = std::fs::read_dir(dir)
        .map_err(io)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(io)?;
    entries.sort_by_key(|e| e.file_name());
    let mut found = Vec::new();
    for entry in entries {
        let dir_name = entry.file_name().to_string_lossy().into_owned();
        if dir_name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let file_type = entry.file_type().map_err(|source| AddonError::Io {
            path: path.clone(),
            source,
        })?;
        if file_type.is_dir() {
            found.push((dir_name, path));
        } else if file_type.is_symlink() {
            match std::fs::canonicalize(&path) {
                Ok(target) if target.is_dir() => found.push((dir_name, target)),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    tracing::warn!(
                        path = %path.display(),
                        "symlink target does not exist, module ignored"
                    );
                }
                Err(source) => return Err(AddonError::Io { path, source }),
            }
        }
    }
    Ok(found)
}

/// Deep merge as addon-operator's `MergeValues`: mappings merge key by key, anything
/// else replaces.
fn merge_values(target: &mut Value, layer: &Value) {
    match (target, layer) {
        (Value::Object(target), Value::Object(layer)) => {
            for (key, value) in layer {
                match target.get_mut(key) {
                    Some(existing) if existing.is_object() && value.is_object() => {
                        merge_values(existing, value);
                    }
                    _ => {
                        target.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (target, layer) => *target = layer.clone(),
    }
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
    let definition = super::requirements::read_definition(path, &name)?;
    // Deckhouse's module.yaml weight orders the module in place of its prefix.
    let order = definition.weight.or(order);
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
        definition,
        origin: Origin::Directory,
        crds: crd_files(&path.join("crds"))?,
        common_values: Value::Object(Default::default()),
        static_values: read_yaml_or_empty(&path.join("values.yaml"))?,
        config_schema: read_yaml_if_present(&path.join("openapi/config-values.yaml"))?,
        values_schema: read_yaml_if_present(&path.join("openapi/values.yaml"))?,
        conversions: super::conversions::Conversions::read(path, &name)?,
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
        conversions: super::conversions::Conversions::read(dir, "global")?,
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
    fn modules_dir_splits_as_split_to_paths() {
        assert_eq!(
            split_to_paths(OsStr::new("/a::/b:")),
            [PathBuf::from("/a"), PathBuf::from("/b")]
        );
        assert!(split_to_paths(OsStr::new(":")).is_empty());
    }

    fn joined(dirs: &[&Path]) -> PathBuf {
        let parts: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        PathBuf::from(parts.join(":"))
    }

    #[test]
    fn two_directories_give_their_modules_and_their_own_common_values() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        std::fs::create_dir_all(a.join("002-echo")).unwrap();
        std::fs::create_dir_all(b.join("001-hello")).unwrap();
        std::fs::write(
            a.join("values.yaml"),
            "global: {x: 1, keep: a}\necho: {from: a}\nhello: {from: a}\nechoEnabled: true\n",
        )
        .unwrap();
        std::fs::write(
            b.join("values.yaml"),
            "global: {x: 2}\nhello: {from: b}\nechoEnabled: false\n",
        )
        .unwrap();
        let layout = Layout::read(&joined(&[&a, &b]), None).unwrap();
        let names: Vec<&str> = layout.modules.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["hello", "echo"]);
        assert_eq!(
            layout.common_values["global"],
            serde_json::json!({"x": 2, "keep": "a"})
        );
        assert_eq!(layout.common_values["echoEnabled"], false);
        let echo = layout.module("echo").unwrap();
        assert_eq!(echo.common_values["echo"]["from"], "a");
        let hello = layout.module("hello").unwrap();
        assert_eq!(hello.common_values["hello"]["from"], "b");
        assert!(layout.shadowed.is_empty());
    }

    #[test]
    fn symlinked_modules_are_read_from_their_target() {
        let root = tempfile::tempdir().unwrap();
        let (dir, storage) = (root.path().join("modules"), root.path().join("storage"));
        std::fs::create_dir_all(storage.join("frontend/hooks")).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink("../storage/frontend", dir.join("002-frontend")).unwrap();
        std::os::unix::fs::symlink("../storage/missing", dir.join("003-gone")).unwrap();
        std::fs::write(storage.join("file"), "").unwrap();
        std::os::unix::fs::symlink("../storage/file", dir.join("004-file")).unwrap();
        let layout = Layout::read(&dir, None).unwrap();
        assert_eq!(layout.modules.len(), 1);
        let frontend = &layout.modules[0];
        assert_eq!(
            (frontend.name.as_str(), frontend.order),
            ("frontend", Some(2))
        );
        let target = std::fs::canonicalize(storage.join("frontend")).unwrap();
        assert_eq!(frontend.path, target);
        assert_eq!(frontend.hooks_dir, Some(target.join("hooks")));
    }

    #[test]
    fn the_first_directory_of_a_module_name_wins() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        for dir in [a.join("100-echo"), b.join("001-echo"), b.join("002-echo")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let layout = Layout::read(&joined(&[&a, &b]), None).unwrap();
        assert_eq!(layout.modules.len(), 1);
        assert_eq!(layout.modules[0].path, a.join("100-echo"));
        assert_eq!(layout.modules[0].order, Some(100));
        let left_out: Vec<&Path> = layout.shadowed.iter().map(|s| s.path.as_path()).collect();
        assert_eq!(left_out, [b.join("001-echo"), b.join("002-echo")]);
        assert!(layout.shadowed.iter().all(|s| s.used == a.join("100-echo")));

        // Within one directory, name order decides.
        let layout = Layout::read(&b, None).unwrap();
        assert_eq!(layout.modules[0].path, b.join("001-echo"));
        assert_eq!(layout.shadowed[0].path, b.join("002-echo"));
    }

    #[test]
    fn a_missing_directory_of_several_is_named() {
        let root = tempfile::tempdir().unwrap();
        let missing = root.path().join("missing");
        let err = Layout::read(&joined(&[root.path(), &missing]), None).unwrap_err();
        assert!(
            err.to_string().contains(&*missing.display().to_string()),
            "{err}"
        );
    }

    /// The shape of addon-operator's `examples/202-module-symlinks`: `backend` in one
    /// directory, `frontend` in a storage directory linked from a second one.
    #[test]
    fn the_module_symlinks_example_reads_both_modules() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/module-symlinks");
        let dirs = joined(&[&root.join("module_dir_1"), &root.join("module_dir_2")]);
        let layout = Layout::read(&dirs, None).unwrap();
        let names: Vec<&str> = layout.modules.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["backend", "frontend"]);
        let frontend = layout.module("frontend").unwrap();
        assert_eq!(
            frontend.path,
            std::fs::canonicalize(root.join("module_storage/002-frontend")).unwrap()
        );
        assert_eq!(frontend.payload, Payload::Chart);
        assert!(frontend.hooks_dir.is_some());
        assert_eq!(frontend.static_values["frontendEnabled"], true);
    }
}

#[cfg(test)]
mod source_tests {
    use super::*;

    fn source(root: &Path, dir: &str, module_yaml: &str) -> SourceModule {
        let path = root.join(dir);
        std::fs::create_dir_all(path.join("hooks")).unwrap();
        std::fs::write(path.join("module.yaml"), module_yaml).unwrap();
        SourceModule {
            reference: format!("oci://r.example.com/mods/{dir}@sha256:{}", "a".repeat(64)),
            path,
        }
    }

    #[test]
    fn pulled_modules_come_after_the_directories_which_win_a_name() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("modules");
        std::fs::create_dir_all(dir.join("001-echo")).unwrap();
        let sources = [
            source(root.path(), "echo", "weight: 5\n"),
            source(root.path(), "from-repo", "name: hello\nweight: 2\n"),
            source(root.path(), "unnamed", ""),
        ];
        let layout = Layout::read_with_sources(&dir, &sources, None).unwrap();
        let names: Vec<(&str, Option<u32>)> = (layout.modules.iter())
            .map(|m| (m.name.as_str(), m.order))
            .collect();
        assert_eq!(
            names,
            [("echo", Some(1)), ("hello", Some(2)), ("unnamed", None)]
        );
        assert_eq!(layout.module("echo").unwrap().origin, Origin::Directory);
        let hello = layout.module("hello").unwrap();
        assert_eq!(
            hello.origin,
            Origin::Oci {
                reference: sources[1].reference.clone()
            }
        );
        assert_eq!(hello.source(), sources[1].reference);
        assert_eq!(hello.hooks_dir, Some(sources[1].path.join("hooks")));
        assert_eq!(
            layout.shadowed,
            [ShadowedModule {
                name: "echo".to_owned(),
                path: sources[0].path.clone(),
                used: dir.join("001-echo"),
            }]
        );
    }

    #[test]
    fn a_pulled_module_that_cannot_be_read_is_unavailable_not_fatal() {
        let root = tempfile::tempdir().unwrap();
        let sources = [
            source(root.path(), "broken", "weight: heavy\n"),
            source(root.path(), "fine", ""),
        ];
        let layout = Layout::read_with_sources(Path::new(""), &sources, None).unwrap();
        let names: Vec<&str> = layout.modules.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["fine"]);
        let [broken] = layout.unavailable.as_slice() else {
            panic!("{:?}", layout.unavailable)
        };
        assert_eq!(
            (broken.name.as_str(), broken.reason),
            ("broken", "ModuleUnreadable")
        );
        assert!(broken.message.contains("weight"), "{}", broken.message);
    }
}
