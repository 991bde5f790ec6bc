//! Settings conversions as Deckhouse writes them: a module's (or the global hooks
//! directory's) `openapi/conversions/vN.yaml` files, each `version: N` with a list of jq
//! `conversions` that turn settings written for version N-1 into version N. The
//! latest settings version is the highest N (1 without files); a ModuleConfig written
//! for an older version is converted step by step, and one written for a version no
//! chain of files reaches is refused, naming the file that is missing. Deckhouse's
//! rules, with two more checks at reading: a version is given once, and is 2 or more
//! (version 1 is where settings start). Filters run in `operon-jq` within its limits.

use super::AddonError;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The directory of a module's conversion files, under the module's directory.
pub(crate) const DIR: &str = "openapi/conversions";

/// One step: settings of version N-1 to version N.
#[derive(Debug, Clone)]
struct Step {
    /// The file, for messages.
    file: PathBuf,
    /// Its conversions joined by `|`, as Deckhouse runs them.
    filter: operon_jq::Filter,
}

/// A module's conversions, by the version each step produces.
#[derive(Debug, Clone, Default)]
pub(crate) struct Conversions {
    steps: BTreeMap<u32, Step>,
}

/// A step that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConversionError {
    /// The version the step was to produce.
    pub(crate) to: u32,
    /// Why.
    pub(crate) reason: String,
}

impl Conversions {
    /// Reads `dir/openapi/conversions/*.yaml` of module `owner` (`global` for the
    /// global hooks directory); no directory is no conversion.
    pub(crate) fn read(dir: &Path, owner: &str) -> Result<Self, AddonError> {
        let dir = dir.join(DIR);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => return Err(AddonError::Io { path: dir, source }),
        };
        let mut files = Vec::new();
        for entry in entries {
            let path = entry
                .map_err(|source| AddonError::Io {
                    path: dir.clone(),
                    source,
                })?
                .path();
            if path.is_file() && path.extension().is_some_and(|x| x == "yaml") {
                files.push(path);
            }
        }
        files.sort();
        let mut steps = BTreeMap::new();
        for file in files {
            let problem = |field: &str, reason: String| AddonError::Definition {
                module: owner.to_owned(),
                path: file.clone(),
                field: field.to_owned(),
                reason,
            };
            let text = std::fs::read_to_string(&file).map_err(|source| AddonError::Io {
                path: file.clone(),
                source,
            })?;
            let (version, filter) =
                parse(&text).map_err(|(field, reason)| problem(field, reason))?;
            if let Some(first) = steps.get(&version) {
                let first: &Step = first;
                return Err(problem(
                    "version",
                    format!(
                        "version {version} is converted to by {} already",
                        first.file.display()
                    ),
                ));
            }
            steps.insert(version, Step { file, filter });
        }
        Ok(Self { steps })
    }

    /// The latest settings version: the highest a conversion produces, 1 without any.
    pub(crate) fn latest(&self) -> u32 {
        self.steps.keys().next_back().copied().unwrap_or(1)
    }

    /// The versions settings may be written for: the latest, and every older one from
    /// which a step exists to each version up to the latest, oldest first.
    pub(crate) fn supported(&self) -> Vec<u32> {
        let latest = self.latest();
        let mut versions = vec![latest];
        let mut version = latest;
        while version > 1 && self.steps.contains_key(&version) {
            version -= 1;
            versions.push(version);
        }
        versions.reverse();
        versions
    }

    /// The file that would convert settings to `version`, for messages (whether it
    /// exists or not).
    pub(crate) fn file_for(version: u32) -> String {
        format!("{DIR}/v{version}.yaml")
    }

    /// `settings` written for `from` converted to the latest version, step by step.
    /// `from` must be [`Conversions::supported`].
    pub(crate) fn to_latest(&self, from: u32, settings: Value) -> Result<Value, ConversionError> {
        let mut settings = settings;
        for to in from.saturating_add(1)..=self.latest() {
            let Some(step) = self.steps.get(&to) else {
                return Err(ConversionError {
                    to,
                    reason: format!("no {}", Self::file_for(to)),
                });
            };
            let failed = |reason: String| ConversionError {
                to,
                reason: format!("{}: {reason}", step.file.display()),
            };
            let output = step
                .filter
                .run_one_in_task(&settings)
                .map_err(|e| failed(e.to_string()))?;
            settings = match output {
                Value::Object(_) => output,
                // Deckhouse takes no output as no settings.
                Value::Null => Value::Object(Default::default()),
                other => {
                    return Err(failed(format!(
                        "the conversions gave {other}, not an object of settings"
                    )));
                }
            };
        }
        Ok(settings)
    }
}

/// A conversion file's version and its conversions as one filter; or the field that
/// is wrong and why.
fn parse(text: &str) -> Result<(u32, operon_jq::Filter), (&'static str, String)> {
    let document = super::layout::parse_yaml_mapping(text).map_err(|reason| ("", reason))?;
    let version = match document.get("version") {
        None => {
            return Err((
                "version",
                "missing: the version this file converts to".into(),
            ));
        }
        Some(v) => v
            .as_u64()
            .and_then(|v| u32::try_from(v).ok())
            .filter(|v| *v >= 2)
            .ok_or_else(|| {
                (
                    "version",
                    format!(
                        "{v} is not a version of 2 or more (version 1 is where settings start)"
                    ),
                )
            })?,
    };
    let Some(Value::Array(list)) = document.get("conversions") else {
        return Err((
            "conversions",
            "missing or not a list: the jq filters that turn the previous version's settings into this one's".into(),
        ));
    };
    let mut filters = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let Some(text) = item.as_str() else {
            return Err((
                "conversions",
                format!("item {i}: {item} is not a jq filter"),
            ));
        };
        // Each alone first, so that an error names the one that is wrong.
        operon_jq::compile(text).map_err(|e| ("conversions", format!("item {i}: {e}")))?;
        filters.push(format!("({text})"));
    }
    if filters.is_empty() {
        filters.push(".".to_owned());
    }
    let filter =
        operon_jq::compile(&filters.join(" | ")).map_err(|e| ("conversions", e.to_string()))?;
    Ok((version, filter))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn module(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let conversions = dir.path().join(DIR);
        std::fs::create_dir_all(conversions.join("testdata")).unwrap();
        for (name, text) in files {
            std::fs::write(conversions.join(name), text).unwrap();
        }
        dir
    }

    #[test]
    fn settings_are_converted_step_by_step_as_deckhouse_writes_the_steps() {
        // Deckhouse's prometheus v2 (drop auth.password, then an empty auth) and a v3.
        let dir = module(&[
            (
                "v2.yaml",
                "version: 2\nconversions:\n  - del(.auth.password) | if .auth == {} then del(.auth) end\n",
            ),
            (
                "v3.yaml",
                "version: 3\nconversions:\n  - .retentionDays = (.retention // 15)\n  - del(.retention)\n",
            ),
            ("conversions_test.go", "package conversions\n"),
        ]);
        let conversions = Conversions::read(dir.path(), "prometheus").unwrap();
        assert_eq!(conversions.latest(), 3);
        assert_eq!(conversions.supported(), [1, 2, 3]);
        let v1 = json!({"auth": {"password": "x"}, "retention": 7});
        assert_eq!(
            conversions.to_latest(1, v1).unwrap(),
            json!({"retentionDays": 7})
        );
        let v2 = json!({"auth": {"allowedUserGroups": ["a"]}});
        assert_eq!(
            conversions.to_latest(2, v2).unwrap(),
            json!({"auth": {"allowedUserGroups": ["a"]}, "retentionDays": 15})
        );
        let v3 = json!({"retentionDays": 1});
        assert_eq!(conversions.to_latest(3, v3.clone()).unwrap(), v3);
    }

    #[test]
    fn a_gap_in_the_steps_limits_the_versions_supported() {
        let dir = module(&[("v3.yaml", "version: 3\nconversions: [\".b = .a\"]\n")]);
        let conversions = Conversions::read(dir.path(), "m").unwrap();
        assert_eq!(conversions.latest(), 3);
        assert_eq!(conversions.supported(), [2, 3]);
        let err = conversions.to_latest(1, json!({})).unwrap_err();
        assert_eq!(err.to, 2);
        assert_eq!(err.reason, "no openapi/conversions/v2.yaml");
        assert_eq!(
            Conversions::read(tempfile::tempdir().unwrap().path(), "m")
                .unwrap()
                .supported(),
            [1]
        );
    }

    #[test]
    fn a_conversion_that_fails_or_gives_no_object_names_its_file() {
        let dir = module(&[(
            "v2.yaml",
            "version: 2\nconversions: ['if .bad then error(\"bad settings\") else .items end']\n",
        )]);
        let conversions = Conversions::read(dir.path(), "m").unwrap();
        let err = conversions.to_latest(1, json!({"bad": true})).unwrap_err();
        assert!(
            err.reason.contains("v2.yaml") && err.reason.contains("bad settings"),
            "{}",
            err.reason
        );
        let err = conversions.to_latest(1, json!({"items": [1]})).unwrap_err();
        assert!(
            err.reason.ends_with("gave [1], not an object of settings"),
            "{}",
            err.reason
        );
    }

    #[test]
    fn bad_files_are_refused_naming_the_module_file_and_field() {
        for (text, field, reason) in [
            ("conversions: []\n", "version", "missing"),
            ("version: 1\nconversions: []\n", "version", "2 or more"),
            ("version: 2\n", "conversions", "not a list"),
            (
                "version: 2\nconversions: ['.a |']\n",
                "conversions",
                "item 0: jq filter",
            ),
        ] {
            let dir = module(&[("v2.yaml", text)]);
            let err = Conversions::read(dir.path(), "echo")
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with("module echo: ")
                    && err.contains("v2.yaml: ")
                    && err.contains(&format!("{field}: "))
                    && err.contains(reason),
                "{text}: {err}"
            );
        }
        let dir = module(&[
            ("a.yaml", "version: 2\nconversions: ['.']\n"),
            ("b.yaml", "version: 2\nconversions: ['.']\n"),
        ]);
        let err = Conversions::read(dir.path(), "echo")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("b.yaml: version: version 2 is converted to by "),
            "{err}"
        );
    }
}
