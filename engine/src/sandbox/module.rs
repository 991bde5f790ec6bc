//! Loading a component: header checks, compile-or-load-from-cache, world detection,
//! and the `InstancePre` kept per digest.

use super::bindings::hook::HookPre;
use super::bindings::operation::OperationPre;
use super::cache::ModuleDigest;
use super::engine::EngineState;
use super::error::LoadError;
use super::host::CallState;
use wasmtime::component::Component;

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

/// An operation component ready to be called: compiled, linked and type-checked once.
#[derive(Clone)]
pub struct OperationModule {
    pub(super) digest: ModuleDigest,
    pub(super) pre: OperationPre<CallState>,
}

impl OperationModule {
    /// The module's digest.
    pub fn digest(&self) -> ModuleDigest {
        self.digest
    }
}

impl std::fmt::Debug for OperationModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperationModule")
            .field("digest", &self.digest)
            .finish()
    }
}

/// A hook component ready to be called.
#[derive(Clone)]
pub struct HookModule {
    pub(super) digest: ModuleDigest,
    pub(super) pre: HookPre<CallState>,
}

impl HookModule {
    /// The module's digest.
    pub fn digest(&self) -> ModuleDigest {
        self.digest
    }
}

impl std::fmt::Debug for HookModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookModule")
            .field("digest", &self.digest)
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

/// What a component's exports say about the world it implements.
fn detect_world(state: &EngineState, component: &Component) -> Option<String> {
    let ty = component.component_type();
    let names: Vec<&str> = ty.exports(&state.engine).map(|(name, _)| name).collect();
    if names.contains(&"run") {
        Some("operation".to_owned())
    } else if names.contains(&"handle") || names.contains(&"configure") {
        Some("hook".to_owned())
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
    let missing = |e: wasmtime::Error, macro_name| LoadError::MissingExport {
        name: name.to_owned(),
        world: world.name(),
        reason: format!("{e:#}"),
        macro_name,
    };
    Ok(match world {
        World::Operation => LoadedModule::Operation(OperationModule {
            digest,
            pre: OperationPre::new(pre).map_err(|e| missing(e, "operation"))?,
        }),
        World::Hook => LoadedModule::Hook(HookModule {
            digest,
            pre: HookPre::new(pre).map_err(|e| missing(e, "hook"))?,
        }),
    })
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
}
