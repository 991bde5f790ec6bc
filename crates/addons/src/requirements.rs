//! A module's definition file, `module.yaml`, as Deckhouse writes it beside
//! addon-operator's layout (`name`, `weight`, `tags`, `description` and `requirements`),
//! and what its requirements decide: the order of modules (a module runs after the
//! modules it requires, as addon-operator's scheduler connects a module to the parents
//! its topological extender hints at, Deckhouse's `ModuleDependency`) and whether a
//! module may run (Deckhouse's `KubernetesVersion`, `DeckhouseVersion` and
//! `ModuleDependency` extenders, which only ever disable). Operon's version takes the
//! place of Deckhouse's: `requirements.operon`.
//!
//! Ranges are Masterminds/semver constraints as Deckhouse writes them (`>= 1.27`,
//! `>=1.27, <1.31`, `>= 1.27 < 1.31`, `~1.2`, `^1.0`, `1.x`, alternatives joined by
//! `||`), checked with the `semver` crate. Versions compared to them lose their
//! pre-release and build parts first (`v1.29.3-gke.100` is 1.29.3), as Deckhouse's
//! `removePrereleaseAndMetadata` does.

use super::AddonError;
use super::layout::ModuleDir;
use petgraph::graph::{DiGraph, NodeIndex};
use semver::{Version, VersionReq};
use serde_json::Value;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt;
use std::path::Path;

/// The definition file's name.
pub const DEFINITION_FILE: &str = "module.yaml";

/// The Kubernetes version the local cluster stands for: what its API server's
/// `/version` answers (`operon_cluster`'s local server).
pub const LOCAL_KUBERNETES_VERSION: &str = "1.32.0";

/// What `module.yaml` says; every field optional, the file too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Definition {
    /// `weight`: the module's order, in place of its directory's number prefix.
    pub weight: Option<u32>,
    /// `version`: what other modules' `requirements.modules` ranges are checked
    /// against; a module without one satisfies any range (it has no release to ask).
    pub version: Option<Version>,
    /// `tags`, shown and otherwise unused.
    pub tags: Vec<String>,
    /// `description`, shown and otherwise unused.
    pub description: Option<String>,
    /// `requirements`.
    pub requirements: Requirements,
}

/// `requirements` of `module.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requirements {
    /// `kubernetes`: the API server's version range.
    pub kubernetes: Option<VersionRange>,
    /// `operon`: Operon's version range (Deckhouse's `deckhouse`).
    pub operon: Option<VersionRange>,
    /// `modules`: the modules that must be enabled before this one, each with the
    /// range its `version` must be in.
    pub modules: BTreeMap<String, VersionRange>,
}

/// A Masterminds-style version constraint: any of its alternatives matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRange {
    /// As written.
    text: String,
    alternatives: Vec<VersionReq>,
}

impl VersionRange {
    /// Parses `text`; the error says why.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.trim().is_empty() {
            return Err("an empty version range".to_owned());
        }
        let alternatives = text
            .split("||")
            .map(|alternative| {
                let normalized = normalize(alternative);
                VersionReq::parse(&normalized)
                    .map_err(|e| format!("{:?} is not a version range: {e}", alternative.trim()))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            text: text.trim().to_owned(),
            alternatives,
        })
    }

    /// Whether `version` (pre-release and build dropped) is in the range.
    pub fn matches(&self, version: &Version) -> bool {
        let release = release_of(version);
        self.alternatives.iter().any(|req| req.matches(&release))
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// One alternative in the `semver` crate's syntax: Masterminds separates comparators
/// by commas or spaces and lets an operator stand apart from its version (`>= 1.27`)
/// and versions start with `v`; the crate wants commas, operators attached.
fn normalize(alternative: &str) -> String {
    let mut comparators: Vec<String> = Vec::new();
    let mut pending_operator = String::new();
    for token in alternative
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
    {
        if token.chars().all(|c| "<>=~^!".contains(c)) {
            pending_operator.push_str(token);
            continue;
        }
        let split = token
            .find(|c: char| !"<>=~^!".contains(c))
            .unwrap_or(token.len());
        let (operator, version) = token.split_at(split);
        let version = version.strip_prefix(['v', 'V']).unwrap_or(version);
        comparators.push(format!(
            "{}{operator}{version}",
            std::mem::take(&mut pending_operator)
        ));
    }
    if !pending_operator.is_empty() {
        comparators.push(pending_operator);
    }
    comparators.join(", ")
}

/// `version` without its pre-release and build parts.
fn release_of(version: &Version) -> Version {
    Version::new(version.major, version.minor, version.patch)
}

/// A version as servers and files spell it: an optional `v`, a missing patch or minor
/// taken as 0 (`v1.29` is 1.29.0), pre-release and build dropped.
pub fn parse_version(text: &str) -> Result<Version, String> {
    let trimmed = text.trim();
    let bare = trimmed.strip_prefix(['v', 'V']).unwrap_or(trimmed);
    let version = Version::parse(bare).or_else(|first| {
        let core_end = bare.find(['-', '+']).unwrap_or(bare.len());
        let (core, rest) = bare.split_at(core_end);
        let parts = core.split('.').count();
        let padded = match parts {
            1 => format!("{core}.0.0{rest}"),
            2 => format!("{core}.0{rest}"),
            _ => return Err(first),
        };
        Version::parse(&padded).map_err(|_| first)
    });
    version
        .map(|v| release_of(&v))
        .map_err(|e| format!("{trimmed:?} is not a version: {e}"))
}

/// Reads `module.yaml` of the module `module` in `dir`; an absent file is the default.
pub(crate) fn read_definition(dir: &Path, module: &str) -> Result<Definition, AddonError> {
    let path = dir.join(DEFINITION_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Definition::default()),
        Err(source) => return Err(AddonError::Io { path, source }),
    };
    parse_definition(&text, module).map_err(|(field, reason)| AddonError::Definition {
        module: module.to_owned(),
        path: path.clone(),
        field,
        reason,
    })
}

/// `module.yaml`'s text, or the field that is wrong and why. Fields Operon does not use
/// (`stage`, `critical`, `namespace`, `subsystems`, `descriptions`, `accessibility`,
/// ...) are left alone, as addon-operator leaves the whole file alone.
fn parse_definition(text: &str, module: &str) -> Result<Definition, (String, String)> {
    let document = super::layout::parse_yaml_mapping(text).map_err(|r| (String::new(), r))?;
    let mut definition = Definition::default();
    let string = |field: &str, value: &Value| {
        value.as_str().map(str::to_owned).ok_or_else(|| {
            (
                field.to_owned(),
                format!("expected a string, found {value}"),
            )
        })
    };
    for (key, value) in document.as_object().into_iter().flatten() {
        if value.is_null() {
            continue;
        }
        match key.as_str() {
            "name" => {
                let name = string("name", value)?;
                if name != module {
                    return Err((
                        "name".to_owned(),
                        format!("{name:?} is not the module's name {module:?} (its directory)"),
                    ));
                }
            }
            "weight" => {
                let weight = value
                    .as_u64()
                    .and_then(|w| u32::try_from(w).ok())
                    .ok_or_else(|| {
                        (
                            "weight".to_owned(),
                            format!(
                                "expected a whole number from 0 to {}, found {value}",
                                u32::MAX
                            ),
                        )
                    })?;
                definition.weight = Some(weight);
            }
            "version" => {
                let text = string("version", value)?;
                definition.version =
                    Some(parse_version(&text).map_err(|r| ("version".to_owned(), r))?);
            }
            "description" => definition.description = Some(string("description", value)?),
            "tags" => {
                let tags = value.as_array().ok_or_else(|| {
                    ("tags".to_owned(), format!("expected a list, found {value}"))
                })?;
                for (i, tag) in tags.iter().enumerate() {
                    definition.tags.push(string(&format!("tags[{i}]"), tag)?);
                }
            }
            "requirements" => definition.requirements = parse_requirements(value, module)?,
            _ => {}
        }
    }
    Ok(definition)
}

fn parse_requirements(value: &Value, module: &str) -> Result<Requirements, (String, String)> {
    let fields = value.as_object().ok_or_else(|| {
        (
            "requirements".to_owned(),
            format!("expected a mapping, found {value}"),
        )
    })?;
    let range = |field: String, value: &Value| {
        let text = value.as_str().ok_or_else(|| {
            (
                field.clone(),
                format!("expected a version range, found {value}"),
            )
        })?;
        VersionRange::parse(text).map_err(|reason| (field, reason))
    };
    let mut requirements = Requirements::default();
    for (key, value) in fields {
        if value.is_null() {
            continue;
        }
        let field = format!("requirements.{key}");
        match key.as_str() {
            "kubernetes" => requirements.kubernetes = Some(range(field, value)?),
            "operon" => requirements.operon = Some(range(field, value)?),
            "modules" => {
                let modules = value
                    .as_object()
                    .ok_or_else(|| (field.clone(), format!("expected a mapping, found {value}")))?;
                for (name, value) in modules {
                    let range = range(format!("{field}.{name}"), value)?;
                    if name == module {
                        // Deckhouse's ModuleDependency drops it the same way.
                        tracing::warn!(module, "a module's requirement on itself is ignored");
                        continue;
                    }
                    requirements.modules.insert(name.clone(), range);
                }
            }
            // Deckhouse's own platform: not Operon's to check.
            "deckhouse" | "bootstrapped" => {
                tracing::warn!(module, field, "a Deckhouse requirement is ignored");
            }
            other => {
                return Err((
                    field,
                    format!(
                        "unknown requirement {other:?}: expected kubernetes, operon or modules"
                    ),
                ));
            }
        }
    }
    Ok(requirements)
}

/// `modules` (sorted by order then name) reordered so that each comes after the
/// modules it requires, and otherwise keeps its place; requirements on modules that
/// are not there order nothing (discovery disables their module). A cycle is refused,
/// naming every module in it.
pub(crate) fn order_by_requirements(modules: Vec<ModuleDir>) -> Result<Vec<ModuleDir>, AddonError> {
    let mut graph: DiGraph<usize, ()> = DiGraph::new();
    let nodes: Vec<NodeIndex> = (0..modules.len()).map(|i| graph.add_node(i)).collect();
    let index: BTreeMap<&str, usize> = modules
        .iter()
        .enumerate()
        .map(|(i, m)| (m.name.as_str(), i))
        .collect();
    for (i, module) in modules.iter().enumerate() {
        for needed in module.definition.requirements.modules.keys() {
            if let Some(&j) = index.get(needed.as_str()) {
                graph.add_edge(nodes[j], nodes[i], ());
            }
        }
    }
    let mut cycles: Vec<Vec<String>> = petgraph::algo::tarjan_scc(&graph)
        .into_iter()
        .filter(|scc| scc.len() > 1)
        .map(|scc| {
            let mut names: Vec<String> = scc
                .iter()
                .map(|n| modules[graph[*n]].name.clone())
                .collect();
            names.sort();
            names
        })
        .collect();
    if !cycles.is_empty() {
        cycles.sort();
        return Err(AddonError::RequirementCycle { cycles });
    }
    // Kahn's algorithm, always taking the ready module that comes first by order.
    let mut waiting_for: Vec<usize> = nodes
        .iter()
        .map(|n| {
            graph
                .neighbors_directed(*n, petgraph::Direction::Incoming)
                .count()
        })
        .collect();
    let mut ready: BinaryHeap<Reverse<usize>> = (0..modules.len())
        .filter(|i| waiting_for[*i] == 0)
        .map(Reverse)
        .collect();
    let mut sorted = Vec::with_capacity(modules.len());
    while let Some(Reverse(i)) = ready.pop() {
        sorted.push(i);
        for next in graph.neighbors_directed(nodes[i], petgraph::Direction::Outgoing) {
            let j = graph[next];
            waiting_for[j] -= 1;
            if waiting_for[j] == 0 {
                ready.push(Reverse(j));
            }
        }
    }
    let mut slots: Vec<Option<ModuleDir>> = modules.into_iter().map(Some).collect();
    Ok(sorted.into_iter().filter_map(|i| slots[i].take()).collect())
}

/// What requirements are checked against.
#[derive(Debug, Clone)]
pub struct Platform {
    /// The API server's version, or why it is not known.
    pub kubernetes: Result<Version, String>,
    /// Operon's version.
    pub operon: Version,
}

impl Platform {
    /// Operon's own version and the given Kubernetes version.
    pub fn new(kubernetes: Result<Version, String>) -> Self {
        Self {
            kubernetes,
            operon: parse_version(env!("CARGO_PKG_VERSION"))
                .expect("the package version is a semantic version"),
        }
    }
}

/// Why `module` may not run: one reason per unmet requirement, in the order
/// Kubernetes, Operon, modules (by name). `enabled` lists the modules enabled so far
/// (all those it requires come before it), `version_of` a module's `version` when the
/// module exists (`Some(None)`: it declares none).
pub(crate) fn unmet(
    module: &ModuleDir,
    platform: &Platform,
    enabled: &[String],
    version_of: impl Fn(&str) -> Option<Option<Version>>,
) -> Vec<String> {
    let requirements = &module.definition.requirements;
    let mut reasons = Vec::new();
    if let Some(range) = &requirements.kubernetes {
        match &platform.kubernetes {
            Ok(version) if range.matches(version) => {}
            Ok(version) => reasons.push(format!(
                "needs Kubernetes {range}, the cluster runs {version}"
            )),
            Err(why) => reasons.push(format!(
                "needs Kubernetes {range}, the cluster's version is unknown: {why}"
            )),
        }
    }
    if let Some(range) = &requirements.operon
        && !range.matches(&platform.operon)
    {
        reasons.push(format!("needs Operon {range}, this is {}", platform.operon));
    }
    for (needed, range) in &requirements.modules {
        match version_of(needed) {
            None => reasons.push(format!(
                "needs module {needed}, which is not in the modules directory"
            )),
            Some(_) if !enabled.contains(needed) => {
                reasons.push(format!("needs module {needed}, which is disabled"));
            }
            Some(Some(version)) if !range.matches(&version) => reasons.push(format!(
                "needs module {needed} {range}, which is at {version}"
            )),
            Some(_) => {}
        }
    }
    reasons
}

#[cfg(test)]
mod tests;
