//! Rules of the workspace's layout: the crates keep the layering ARCHITECTURE.md draws
//! (cargo refuses a cycle, but not a dependency on a sibling or on a crate above), and
//! the WIT-generated types stay inside the wasm sandbox crate (everything else speaks
//! `operon::model`), so that a new version of the WIT package changes
//! `sandbox::convert` and nothing else.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable source tree") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every engine crate's directory, and the binary's.
fn crate_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(workspace().join("crates"))
        .expect("crates/ is readable")
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.join("Cargo.toml").is_file())
        .collect();
    dirs.push(workspace().join("engine"));
    dirs.sort();
    dirs
}

/// The operon crates a manifest's `[dependencies]` names (not its dev-dependencies:
/// a crate's tests may use the test-support crate and features of the ones below).
fn operon_dependencies(manifest: &Path) -> (String, BTreeSet<String>) {
    let text = std::fs::read_to_string(manifest).expect("readable Cargo.toml");
    let mut name = None;
    let mut section = String::new();
    let mut deps = BTreeSet::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_owned();
            continue;
        }
        let key = line.split(['=', '.', ' ']).next().unwrap_or_default();
        if section == "[package]" && key == "name" {
            name = line.split('"').nth(1).map(str::to_owned);
        }
        if section == "[dependencies]" && key.starts_with("operon-") {
            deps.insert(key.to_owned());
        }
    }
    (name.expect("the package has a name"), deps)
}

/// The layering of ARCHITECTURE.md, from the bottom up: a crate may depend on the crates
/// of the layers below its own, and on none of its own layer.
const LAYERS: &[&[&str]] = &[
    &["operon-data", "operon-jq"],
    &["operon-sandbox", "operon-script"],
    &["operon-cluster", "operon-store"],
    &["operon-runner"],
    &["operon-pipeline", "operon-hooks"],
    &["operon-addons", "operon-manifest"],
    &["operon-controller"],
    &["operon-scenario"],
    &["operon-engine"],
];

/// What each crate may depend on.
fn allowed() -> BTreeMap<&'static str, BTreeSet<&'static str>> {
    let mut below = BTreeSet::new();
    let mut allowed = BTreeMap::new();
    for layer in LAYERS {
        for name in *layer {
            allowed.insert(*name, below.clone());
        }
        below.extend(layer.iter().copied());
    }
    allowed
}

#[test]
fn each_crate_depends_only_on_the_layers_below_it() {
    let allowed = allowed();
    let mut seen = BTreeSet::new();
    let mut wrong = Vec::new();
    for dir in crate_dirs() {
        let (name, deps) = operon_dependencies(&dir.join("Cargo.toml"));
        let Some(may) = allowed.get(name.as_str()) else {
            panic!(
                "{name} ({}) has no place in the layering: add it to ARCHITECTURE.md and to \
                 this test",
                dir.display()
            );
        };
        seen.insert(name.clone());
        for dep in deps.iter().filter(|dep| !may.contains(&dep.as_str())) {
            wrong.push(format!("{name} depends on {dep}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "dependencies that run back up or sideways: {wrong:?}"
    );
    let missing: Vec<_> = allowed
        .keys()
        .filter(|name| !seen.contains(**name))
        .collect();
    assert!(missing.is_empty(), "crates not found: {missing:?}");
}

/// The file tree is the module tree: a module with submodules is `name.rs` beside
/// `name/`, so no file is a `mod.rs` and none is found through `#[path]`.
#[test]
fn modules_are_files_named_for_them_without_mod_rs_or_path_attributes() {
    let mut files = Vec::new();
    for dir in ["crates", "engine", "tests"] {
        rust_files(&workspace().join(dir), &mut files);
    }
    let stray: Vec<String> = files
        .iter()
        .filter(|file| {
            file.file_name().is_some_and(|n| n == "mod.rs")
                || std::fs::read_to_string(file).is_ok_and(|text| {
                    text.lines()
                        .any(|line| line.trim_start().starts_with("#[path"))
                })
        })
        .map(|file| file.display().to_string())
        .collect();
    assert!(
        files.len() > 100,
        "the tree was read: {} files",
        files.len()
    );
    assert!(stray.is_empty(), "mod.rs or #[path]: {stray:#?}");
}

/// No path repeats its crate's name: a crate's main module is its root
/// (`operon_hooks::engine`, never `operon_hooks::hooks::engine`).
#[test]
fn no_crate_has_a_module_named_for_the_crate() {
    let mut stutter = Vec::new();
    for dir in crate_dirs() {
        let (name, _) = operon_dependencies(&dir.join("Cargo.toml"));
        let short = name.trim_start_matches("operon-").replace('-', "_");
        let lib =
            std::fs::read_to_string(dir.join("src/lib.rs")).expect("every crate has a lib.rs");
        let declared = lib.lines().map(str::trim).any(|line| {
            let line = line.strip_prefix("pub ").unwrap_or(line);
            let line = line.strip_prefix("pub(crate) ").unwrap_or(line);
            line == format!("mod {short};") || line == format!("mod {short} {{")
        });
        if declared || dir.join("src").join(format!("{short}.rs")).exists() {
            stutter.push(format!("{name}: {short}"));
        }
    }
    assert!(
        stutter.is_empty(),
        "modules named for their crate: {stutter:?}"
    );
}

#[test]
fn the_sdk_and_guests_depend_on_nothing_of_the_engine() {
    let mut manifests = vec![workspace().join("sdk/Cargo.toml")];
    for dir in ["operations", "operations/fixtures"] {
        for entry in std::fs::read_dir(workspace().join(dir)).unwrap().flatten() {
            let manifest = entry.path().join("Cargo.toml");
            if manifest.is_file() {
                manifests.push(manifest);
            }
        }
    }
    assert!(manifests.len() > 10, "found only {manifests:?}");
    for manifest in manifests {
        let (name, deps) = operon_dependencies(&manifest);
        let engine: Vec<_> = deps.iter().filter(|dep| *dep != "operon-sdk").collect();
        assert!(engine.is_empty(), "{name} depends on {engine:?}");
    }
}

#[test]
fn only_the_sandbox_uses_the_wit_generated_types() {
    let sandbox = workspace().join("crates/sandbox");
    let mut files = Vec::new();
    for dir in crate_dirs() {
        rust_files(&dir.join("src"), &mut files);
    }
    assert!(files.len() > 200, "found only {} files", files.len());
    let offenders: Vec<String> = files
        .iter()
        .filter(|path| !path.starts_with(&sandbox))
        .filter(|path| {
            let text = std::fs::read_to_string(path).expect("readable file");
            text.lines()
                .filter(|line| !line.trim_start().starts_with("//"))
                .any(|line| line.contains("sandbox::bindings") || line.contains("bindgen!"))
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "these files use the WIT-generated types; use operon::model and translate in \
         sandbox::convert instead: {offenders:?}"
    );
}

/// Whether a doc comment's code fence holds Rust that rustdoc would compile: an empty
/// info string, or one made only of rustdoc's own attributes.
fn is_rust_fence(info: &str) -> bool {
    info.split([',', ' ', '\t'])
        .filter(|token| !token.is_empty())
        .all(|token| {
            matches!(
                token,
                "rust"
                    | "ignore"
                    | "no_run"
                    | "should_panic"
                    | "compile_fail"
                    | "standalone_crate"
                    | "test_harness"
            ) || token.starts_with("edition")
                || token.starts_with("ignore-")
        })
}

#[test]
fn crates_without_doc_tests_have_no_rust_examples_in_their_docs() {
    let mut manifests: Vec<PathBuf> = crate_dirs()
        .into_iter()
        .map(|dir| dir.join("Cargo.toml"))
        .collect();
    manifests.push(workspace().join("sdk/Cargo.toml"));
    manifests.push(workspace().join("tests/Cargo.toml"));
    manifests.push(workspace().join("fuzz/checks/Cargo.toml"));
    let mut off = 0;
    let mut offenders = Vec::new();
    for manifest in manifests {
        let text = std::fs::read_to_string(&manifest).expect("readable Cargo.toml");
        if !text.lines().any(|l| l.replace(' ', "") == "doctest=false") {
            continue;
        }
        off += 1;
        let mut files = Vec::new();
        rust_files(&manifest.parent().unwrap().join("src"), &mut files);
        for file in files {
            let source = std::fs::read_to_string(&file).expect("readable file");
            let mut in_block = false;
            for (number, line) in source.lines().enumerate() {
                let line = line.trim_start();
                let Some(doc) = line
                    .strip_prefix("///")
                    .or_else(|| line.strip_prefix("//!"))
                else {
                    continue;
                };
                let Some(info) = doc.trim_start().strip_prefix("```") else {
                    continue;
                };
                // A closing fence has an empty info string too: only openings count.
                if !in_block && is_rust_fence(info.trim()) {
                    offenders.push(format!("{}:{}", file.display(), number + 1));
                }
                in_block = !in_block;
            }
        }
    }
    assert!(off >= 10, "only {off} crates have doctest = false");
    assert!(
        offenders.is_empty(),
        "Rust examples in the docs of a crate whose doc tests are off (they would never be \
         compiled): remove `doctest = false` from its Cargo.toml or mark the block `text`: \
         {offenders:?}"
    );
}

#[test]
fn rust_fences_are_told_from_other_languages() {
    for rust in [
        "",
        "rust",
        "no_run",
        "rust,ignore",
        "edition2024",
        "should_panic",
    ] {
        assert!(is_rust_fence(rust), "{rust:?}");
    }
    for other in ["text", "console", "yaml", "json", "rust,text", "sh"] {
        assert!(!is_rust_fence(other), "{other:?}");
    }
}

/// The `name@version` keys of `[profile.*.package."..."]` in the workspace manifest.
fn versioned_profile_overrides(manifest: &str) -> Vec<(String, String)> {
    manifest
        .lines()
        .filter_map(|line| line.trim().strip_prefix("[profile."))
        .filter_map(|rest| rest.split_once(".package.\"")?.1.split_once("\"]"))
        .filter_map(|(spec, _)| spec.split_once('@'))
        .map(|(name, version)| (name.to_owned(), version.to_owned()))
        .collect()
}

/// Whether Cargo.lock holds `name` at a version starting with `version` (a spec's partial
/// version matches the releases it prefixes, as cargo matches it).
fn locked(lock: &str, name: &str, version: &str) -> bool {
    let mut current = None;
    lock.lines().any(|line| {
        if let Some(value) = line.strip_prefix("name = ") {
            current = Some(value.trim_matches('"'));
        } else if let Some(value) = line.strip_prefix("version = ")
            && current == Some(name)
        {
            let locked = value.trim_matches('"');
            return locked == version || locked.starts_with(&format!("{version}."));
        }
        false
    })
}

#[test]
fn each_versioned_profile_override_names_a_locked_package() {
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
    let lock = std::fs::read_to_string(workspace().join("Cargo.lock")).unwrap();
    let overrides = versioned_profile_overrides(&manifest);
    assert!(
        overrides.iter().any(|(name, _)| name == "wasmparser"),
        "{overrides:?}"
    );
    // A stale version is only a cargo warning, and the crate silently goes unoptimised:
    // the big guests of the SDK suite then take twice as long to compile.
    let stale: Vec<_> = overrides
        .iter()
        .filter(|(name, version)| !locked(&lock, name, version))
        .collect();
    assert!(
        stale.is_empty(),
        "Cargo.toml optimises versions that Cargo.lock no longer has (wasmtime moved to \
         a newer wasm-tools?): {stale:?}"
    );
}

#[test]
fn a_partial_version_matches_only_the_releases_it_prefixes() {
    let lock = "[[package]]\nname = \"wasmparser\"\nversion = \"0.254.2\"\n\n\
                [[package]]\nname = \"other\"\nversion = \"0.262.0\"\n";
    assert!(locked(lock, "wasmparser", "0.254"));
    assert!(locked(lock, "wasmparser", "0.254.2"));
    assert!(!locked(lock, "wasmparser", "0.25"));
    assert!(!locked(lock, "wasmparser", "0.262"));
    assert!(!locked(lock, "missing", "0.254"));
}
