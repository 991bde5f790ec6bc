//! Checking a module before the store takes it: a component of the `operation` or
//! `hook` world that this engine links, with the interfaces it imports listed.
//!
//! The check loads the component into the sandbox, which compiles it once and caches
//! the compiled artifact by digest: a module that passed is ready to run, and the
//! first run pays no compilation.

use operon_sandbox::{LoadError, ModuleDigest, Sandbox, WitVersion, World};
use wasmparser::{Parser, Payload};

/// What the store records about a module.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleInfo {
    /// The sha256 of its bytes.
    #[serde(serialize_with = "display")]
    pub digest: ModuleDigest,
    /// The world it implements.
    pub world: World,
    /// The version of `operon:engine` it was built against.
    pub wit_version: WitVersion,
    /// Its size in bytes.
    pub size: u64,
    /// The interfaces it imports, e.g. `operon:engine/log@0.2.0`, `wasi:io/streams@0.2.6`.
    pub imports: Vec<String>,
}

fn display<S: serde::Serializer>(digest: &ModuleDigest, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(digest)
}

/// Validates `bytes` as a module named `name` (in messages) and says what it is.
pub fn inspect(sandbox: &Sandbox, name: &str, bytes: &[u8]) -> Result<ModuleInfo, LoadError> {
    let (digest, world, wit_version) = match sandbox.load_operation(name, bytes) {
        Ok(module) => (module.digest(), World::Operation, module.wit_version()),
        Err(LoadError::WrongWorld { found, .. }) if found == "hook" => {
            let module = sandbox.load_hook(name, bytes)?;
            (module.digest(), World::Hook, module.wit_version())
        }
        Err(e) => return Err(e),
    };
    Ok(ModuleInfo {
        digest,
        world,
        wit_version,
        size: bytes.len() as u64,
        imports: imports(bytes),
    })
}

/// The names the component imports at its top level (nested components and core
/// modules import from their parent, not from the host).
pub fn imports(bytes: &[u8]) -> Vec<String> {
    let mut names = Vec::new();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let Ok(payload) = payload else { break };
        match payload {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 0 => {
                names.extend(reader.into_iter().flatten().map(|i| i.name.name.to_owned()));
            }
            _ => {}
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junk_and_core_modules_are_named_in_the_error() {
        let sandbox = Sandbox::new(operon_sandbox::SandboxConfig {
            cache_dir: None,
            ..Default::default()
        })
        .unwrap();
        let err = inspect(&sandbox, "probe", b"#!/bin/sh").unwrap_err();
        assert!(matches!(err, LoadError::NotWasm { .. }), "{err}");
        assert!(err.to_string().contains("probe"), "{err}");
        let err = inspect(&sandbox, "core", b"\0asm\x01\0\0\0").unwrap_err();
        assert!(matches!(err, LoadError::CoreModule { .. }), "{err}");
    }

    #[test]
    fn imports_of_junk_are_empty() {
        assert!(imports(b"not wasm").is_empty());
    }
}
