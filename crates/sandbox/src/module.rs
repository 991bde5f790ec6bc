//! Loading a component: header checks, compile-or-load-from-cache, world and version
//! detection, and the `InstancePre` kept per digest.
//!
//! The host links `operon:engine@0.1.0`, `@0.2.0` and `@0.3.0` (see [`WitVersion`]). A component's
//! version is read from the names of the Operon interfaces it imports
//! (`operon:engine/log@0.1.0`, ...); a component that imports none of them (it neither
//! logs, patches nor counts) is tried against each version's typed exports, newest
//! first, and gets the first whose export types it matches.

use super::bindings;
use super::cache::ModuleDigest;
use super::engine::EngineState;
use super::error::LoadError;
use super::exports::{HookPre, OperationPre};
use super::host::CallState;
use wasmtime::component::{Component, InstancePre};

/// The world a component implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum World {
    /// `operon:engine/operation`.
    Operation,
    /// `operon:engine/hook`.
    Hook,
}

impl World {
    fn name(self) -> &'static str {
        match self {
            World::Operation => "operation",
            World::Hook => "hook",
        }
    }
}

/// A published version of the `operon:engine` WIT package, all of which the host links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum WitVersion {
    /// `0.1.0`: the first contract, without mutating admission bindings.
    #[serde(rename = "0.1.0")]
    V0_1,
    /// `0.2.0`: adds `kubernetes-mutating` bindings, and `side-effects` and
    /// `match-conditions` on validating bindings.
    #[serde(rename = "0.2.0")]
    V0_2,
    /// `0.3.0`: adds `cluster` to the runner context, the `values` interface (hooks) and
    /// addon-operator's `lifecycle` bindings in `hook-config`.
    #[serde(rename = "0.3.0")]
    V0_3,
}

impl WitVersion {
    /// Every linked version, newest first: the order in which a component that does not
    /// say its version is tried.
    pub const ALL: [WitVersion; 3] = [WitVersion::V0_3, WitVersion::V0_2, WitVersion::V0_1];

    /// The version guests built from source today get.
    pub const CURRENT: WitVersion = WitVersion::V0_3;

    /// The version as written in WIT, e.g. `0.2.0`.
    pub fn as_str(self) -> &'static str {
        match self {
            WitVersion::V0_1 => "0.1.0",
            WitVersion::V0_2 => "0.2.0",
            WitVersion::V0_3 => "0.3.0",
        }
    }

    /// The version named `version` (as written in an import, e.g. `0.1.0`), if linked.
    pub(crate) fn parse(version: &str) -> Option<WitVersion> {
        Self::ALL.into_iter().find(|v| v.as_str() == version)
    }
}

/// The linked versions as error messages name them; a test keeps it in step with
/// [`WitVersion::ALL`].
pub(super) const LINKED_VERSIONS: &str = "0.1.0, 0.2.0 or 0.3.0";

impl std::fmt::Display for WitVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An operation component ready to be called: compiled, linked and type-checked once.
#[derive(Clone)]
pub struct OperationModule {
    pub(super) digest: ModuleDigest,
    pub(super) pre: OperationPre,
}

impl OperationModule {
    /// The module's digest.
    pub fn digest(&self) -> ModuleDigest {
        self.digest
    }

    /// The version of `operon:engine` the component was built against.
    pub fn wit_version(&self) -> WitVersion {
        self.pre.version()
    }
}

impl std::fmt::Debug for OperationModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperationModule")
            .field("digest", &self.digest)
            .field("wit_version", &self.wit_version())
            .finish()
    }
}

/// A hook component ready to be called.
#[derive(Clone)]
pub struct HookModule {
    pub(super) digest: ModuleDigest,
    pub(super) pre: HookPre,
}

impl HookModule {
    /// The module's digest.
    pub fn digest(&self) -> ModuleDigest {
        self.digest
    }

    /// The version of `operon:engine` the component was built against.
    pub fn wit_version(&self) -> WitVersion {
        self.pre.version()
    }
}

impl std::fmt::Debug for HookModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookModule")
            .field("digest", &self.digest)
            .field("wit_version", &self.wit_version())
            .finish()
    }
}

/// A loaded module of either world, as kept in the registry.
#[derive(Clone)]
pub(super) enum LoadedModule {
    Operation(OperationModule),
    Hook(HookModule),
}

impl LoadedModule {
    pub(super) fn world(&self) -> World {
        match self {
            LoadedModule::Operation(_) => World::Operation,
            LoadedModule::Hook(_) => World::Hook,
        }
    }
}

/// The first four bytes of every WebAssembly binary, module or component.
pub const WASM_MAGIC: [u8; 4] = *b"\0asm";

/// Layer/version field of a component binary (core modules have `01 00 00 00`).
const COMPONENT_VERSION: [u8; 4] = [0x0d, 0x00, 0x01, 0x00];

fn check_header(name: &str, bytes: &[u8]) -> Result<(), LoadError> {
    if bytes.len() < 8 || bytes[..4] != WASM_MAGIC {
        return Err(LoadError::NotWasm {
            name: name.to_owned(),
        });
    }
    if bytes[4..8] != COMPONENT_VERSION {
        return Err(LoadError::CoreModule {
            name: name.to_owned(),
        });
    }
    Ok(())
}

fn compile(
    state: &EngineState,
    name: &str,
    digest: &ModuleDigest,
    bytes: &[u8],
) -> Result<Component, LoadError> {
    if let Some(cache) = &state.cache
        && let Some(artifact) = cache.get(digest)
    {
        // SAFETY: `ArtifactCache::get` only returns bytes whose HMAC was made with this
        // cache's private key, i.e. bytes this engine serialized itself, and wasmtime
        // checks that they match this engine's configuration.
        #[allow(unsafe_code)]
        match unsafe { Component::deserialize(&state.engine, &artifact) } {
            Ok(component) => return Ok(component),
            Err(e) => {
                tracing::warn!(%digest, error = %format!("{e:#}"), "recompiling a cached artifact wasmtime refused")
            }
        }
    }
    let component = Component::new(&state.engine, bytes).map_err(|e| LoadError::Invalid {
        name: name.to_owned(),
        reason: format!("{e:#}"),
    })?;
    if let Some(cache) = &state.cache {
        match component.serialize() {
            Ok(artifact) => cache.put(digest, &artifact),
            Err(e) => {
                tracing::warn!(%digest, error = %format!("{e:#}"), "cannot serialize a compiled component")
            }
        }
    }
    Ok(component)
}

/// `bytes` compiled (or read from the artifact cache) once their header says they are a
/// component.
pub(super) fn checked_component(
    state: &EngineState,
    name: &str,
    digest: &ModuleDigest,
    bytes: &[u8],
) -> Result<Component, LoadError> {
    check_header(name, bytes)?;
    compile(state, name, digest, bytes)
}

/// What a component's exports say about the world it implements.
fn detect_world(state: &EngineState, component: &Component) -> Option<String> {
    let ty = component.component_type();
    let names: Vec<&str> = ty.exports(&state.engine).map(|(name, _)| name).collect();
    if names.contains(&"run") {
        Some("operation".to_owned())
    } else if names.contains(&"handle") || names.contains(&"configure") {
        Some("hook".to_owned())
    } else if names.contains(&"enabled") {
        Some("module-enabled".to_owned())
    } else if names.iter().any(|n| n.starts_with("wasi:cli/run")) {
        Some("wasi:cli/command".to_owned())
    } else if names
        .iter()
        .any(|n| n.starts_with("wasi:http/incoming-handler"))
    {
        Some("wasi:http/proxy".to_owned())
    } else {
        None
    }
}

pub(super) fn load(
    state: &EngineState,
    name: &str,
    digest: ModuleDigest,
    bytes: &[u8],
    world: World,
) -> Result<LoadedModule, LoadError> {
    check_header(name, bytes)?;
    let component = compile(state, name, &digest, bytes)?;
    if let Some(found) = detect_world(state, &component)
        && found != world.name()
    {
        let hint = match (world, found.as_str()) {
            (_, "hook") => "; run hooks with `operon hook test`",
            (_, "operation") => "; run operations with `operon op run`",
            (_, "module-enabled") => "; it is an addon module's `enabled` program",
            (_, "wasi:cli/command") => {
                "; a program with `fn main` is a command: export `run` with `operon_sdk::operation!` instead"
            }
            _ => "",
        };
        return Err(LoadError::WrongWorld {
            name: name.to_owned(),
            expected: world.name(),
            found,
            hint,
        });
    }
    let pre = state
        .linker
        .instantiate_pre(&component)
        .map_err(|e| LoadError::Incompatible {
            name: name.to_owned(),
            reason: format!("{e:#}"),
        })?;
    let mut first_error = None;
    for version in candidate_versions(state, &component) {
        match typed(&pre, world, version) {
            Ok(module) => {
                return Ok(match module {
                    Typed::Operation(pre) => {
                        LoadedModule::Operation(OperationModule { digest, pre })
                    }
                    Typed::Hook(pre) => LoadedModule::Hook(HookModule { digest, pre }),
                });
            }
            // The first candidate is the version the component declares, when it
            // declares one: its error is the one that explains what is wrong.
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Err(LoadError::MissingExport {
        name: name.to_owned(),
        world: world.name(),
        reason: first_error.map_or_else(String::new, |e| format!("{e:#}")),
        macro_name: world.name(),
    })
}

/// A component prepared with the typed exports of one world and version.
enum Typed {
    Operation(OperationPre),
    Hook(HookPre),
}

/// Type-checks the exports of `pre` against `world` in `version`.
fn typed(
    pre: &InstancePre<CallState>,
    world: World,
    version: WitVersion,
) -> wasmtime::Result<Typed> {
    let pre = pre.clone();
    Ok(match (world, version) {
        (World::Operation, WitVersion::V0_3) => Typed::Operation(OperationPre::V0_3(
            bindings::operation::OperationPre::new(pre)?,
        )),
        (World::Operation, WitVersion::V0_2) => Typed::Operation(OperationPre::V0_2(
            bindings::v0_2::operation::OperationPre::new(pre)?,
        )),
        (World::Operation, WitVersion::V0_1) => Typed::Operation(OperationPre::V0_1(
            bindings::v0_1::operation::OperationPre::new(pre)?,
        )),
        (World::Hook, WitVersion::V0_3) => {
            Typed::Hook(HookPre::V0_3(bindings::hook::HookPre::new(pre)?))
        }
        (World::Hook, WitVersion::V0_2) => {
            Typed::Hook(HookPre::V0_2(bindings::v0_2::hook::HookPre::new(pre)?))
        }
        (World::Hook, WitVersion::V0_1) => {
            Typed::Hook(HookPre::V0_1(bindings::v0_1::hook::HookPre::new(pre)?))
        }
    })
}

/// The versions to try for `component`, most likely first: the one its Operon imports
/// name, then every other linked version, newest first.
fn candidate_versions(state: &EngineState, component: &Component) -> Vec<WitVersion> {
    let ty = component.component_type();
    let declared = declared_version(ty.imports(&state.engine).map(|(name, _)| name));
    let mut versions: Vec<WitVersion> = declared.into_iter().collect();
    versions.extend(WitVersion::ALL.into_iter().filter(|v| Some(*v) != declared));
    versions
}

/// The linked version named by the `operon:engine/...@VERSION` imports among `imports`,
/// when they name exactly one. A component importing two versions at once (possible
/// for a composition of components) or an unknown one gets `None`: its exports decide.
fn declared_version<'a>(imports: impl Iterator<Item = &'a str>) -> Option<WitVersion> {
    let mut found = None;
    for name in imports {
        let Some((_, version)) = name
            .strip_prefix("operon:engine/")
            .and_then(|rest| rest.split_once('@'))
        else {
            continue;
        };
        let version = WitVersion::parse(version)?;
        if found.is_some_and(|f| f != version) {
            return None;
        }
        found = Some(version);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_tells_core_modules_and_junk_apart() {
        assert!(matches!(
            check_header("m", b"\0asm\x01\0\0\0"),
            Err(LoadError::CoreModule { .. })
        ));
        assert!(matches!(
            check_header("m", b"#!/bin/sh\necho"),
            Err(LoadError::NotWasm { .. })
        ));
        assert!(check_header("m", b"\0asm\x0d\0\x01\0").is_ok());
    }

    #[test]
    fn the_version_comes_from_the_operon_imports() {
        let legacy = [
            "wasi:io/streams@0.2.6",
            "operon:engine/types@0.1.0",
            "operon:engine/log@0.1.0",
        ];
        assert_eq!(declared_version(legacy.into_iter()), Some(WitVersion::V0_1));
        let previous = ["operon:engine/kubernetes@0.2.0", "wasi:cli/stderr@0.2.6"];
        assert_eq!(
            declared_version(previous.into_iter()),
            Some(WitVersion::V0_2)
        );
        let current = ["operon:engine/values@0.3.0", "operon:engine/log@0.3.0"];
        assert_eq!(
            declared_version(current.into_iter()),
            Some(WitVersion::V0_3)
        );
        assert_eq!(
            declared_version(["wasi:cli/stdout@0.2.6"].into_iter()),
            None
        );
        let mixed = ["operon:engine/log@0.1.0", "operon:engine/log@0.2.0"];
        assert_eq!(declared_version(mixed.into_iter()), None);
        let unknown = ["operon:engine/log@9.0.0"];
        assert_eq!(declared_version(unknown.into_iter()), None);
    }

    #[test]
    fn versions_round_trip_through_their_names() {
        for version in WitVersion::ALL {
            assert_eq!(WitVersion::parse(version.as_str()), Some(version));
        }
        assert_eq!(WitVersion::ALL[0], WitVersion::CURRENT);
        for version in WitVersion::ALL {
            assert!(LINKED_VERSIONS.contains(version.as_str()), "{version}");
        }
    }
}
