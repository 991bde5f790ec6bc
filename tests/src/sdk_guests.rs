//! The example guests written with the Python and TypeScript SDKs, built on demand.
//!
//! `sdk/python/build.sh` (componentize-py) and `sdk/js/build.sh` (jco and componentize-js
//! from `sdk/js`'s lockfile) build them; when a language's tools are not installed,
//! [`build`] says so and gives `None`, so tests can skip rather than fail (`.ci/setup`
//! installs the tools). Built components are kept in `target/guests/sdk-languages`,
//! named by a hash of everything they are built from: neither toolchain builds
//! reproducibly, so reusing them is what lets the engine's compiled-module cache (keyed
//! by digest) work across runs.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A guest language whose toolchain may be missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    /// Python through componentize-py.
    Python,
    /// TypeScript through jco and componentize-js.
    TypeScript,
}

/// The repository's root directory.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_owned()
}

impl Language {
    /// Why this language's guests cannot be built here, if they cannot.
    pub fn missing(self) -> Option<String> {
        let ok = |command: &mut Command| command.output().is_ok_and(|out| out.status.success());
        let (found, why) = match self {
            Language::Python => (
                ok(Command::new("python3").args(["-c", "import componentize_py"])),
                "componentize-py is not installed (pip install componentize-py==0.25.1, or run \
                 .ci/setup)",
            ),
            Language::TypeScript => (
                ok(Command::new("node").arg("--version"))
                    && repo().join("sdk/js/node_modules/.bin/jco").is_file(),
                "node or sdk/js's npm packages are not installed (cd sdk/js && npm install, or \
                 run .ci/setup)",
            ),
        };
        (!found).then(|| why.to_owned())
    }

    fn build_script(self) -> PathBuf {
        match self {
            Language::Python => repo().join("sdk/python/build.sh"),
            Language::TypeScript => repo().join("sdk/js/build.sh"),
        }
    }

    /// Everything a build of this language reads besides the guest itself.
    fn inputs(self) -> Vec<PathBuf> {
        let sdk: &[&str] = match self {
            Language::Python => &["sdk/python/operon_sdk", "sdk/python/operon_build.py"],
            Language::TypeScript => &[
                "sdk/js/src",
                "sdk/js/bundle.config.js",
                "sdk/js/package-lock.json",
                "sdk/js/build.sh",
            ],
        };
        sdk.iter()
            .chain(&["wit"])
            .map(|path| repo().join(path))
            .collect()
    }
}

/// Feeds every file under `path` (sorted, by name and content) to `hasher`.
fn hash_tree(path: &Path, hasher: &mut DefaultHasher) {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .unwrap_or_else(|err| panic!("reading {}: {err}", path.display()))
            .map(|entry| entry.expect("a directory entry").path())
            .filter(|entry| entry.file_name().is_some_and(|name| name != "__pycache__"))
            .collect();
        entries.sort();
        for entry in entries {
            hash_tree(&entry, hasher);
        }
    } else if let Ok(bytes) = std::fs::read(path) {
        path.file_name().hash(hasher);
        bytes.hash(hasher);
    }
}

/// Builds `guest` (a path relative to the repository) into a component, or reuses the one
/// built from the same inputs; `None`, after printing why, when the tools are missing.
///
/// # Panics
///
/// If the build fails.
pub fn build(language: Language, guest: &str) -> Option<PathBuf> {
    if let Some(why) = language.missing() {
        eprintln!("skipping the {language:?} guest {guest}: {why}");
        return None;
    }
    let mut hasher = DefaultHasher::new();
    for input in language.inputs().iter().chain([&repo().join(guest)]) {
        hash_tree(input, &mut hasher);
    }
    let cache = crate::test_cache_dir();
    let dir = cache
        .parent()
        .expect("the cache is inside target/guests")
        .join("sdk-languages");
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|err| panic!("cannot create {}: {err}", dir.display()));
    let stem = Path::new(guest)
        .file_stem()
        .expect("a guest file")
        .to_string_lossy();
    let component = dir.join(format!("{stem}-{language:?}-{:016x}.wasm", hasher.finish()));
    if component.is_file() {
        return Some(component);
    }
    let partial = component.with_extension("partial.wasm");
    let out = Command::new(language.build_script())
        .arg(repo().join(guest))
        .arg("-o")
        .arg(&partial)
        .output()
        .unwrap_or_else(|err| panic!("running the {language:?} build: {err}"));
    assert!(
        out.status.success(),
        "building {guest}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&partial, &component)
        .unwrap_or_else(|err| panic!("keeping {}: {err}", component.display()));
    Some(component)
}

fn once(
    cell: &'static OnceLock<Option<PathBuf>>,
    language: Language,
    guest: &str,
) -> Option<&'static Path> {
    cell.get_or_init(|| build(language, guest)).as_deref()
}

/// `operations/pod-labeler-py`, built once per process; `None` without componentize-py.
pub fn python_pod_labeler() -> Option<&'static Path> {
    static CELL: OnceLock<Option<PathBuf>> = OnceLock::new();
    once(
        &CELL,
        Language::Python,
        "operations/pod-labeler-py/pod_labeler.py",
    )
}

/// `operations/pod-labeler-ts`, built once per process; `None` without the npm tools.
pub fn typescript_pod_labeler() -> Option<&'static Path> {
    static CELL: OnceLock<Option<PathBuf>> = OnceLock::new();
    once(
        &CELL,
        Language::TypeScript,
        "operations/pod-labeler-ts/pod_labeler.ts",
    )
}

/// `operations/disk-pressure-py`, built once per process; `None` without componentize-py.
pub fn python_disk_pressure() -> Option<&'static Path> {
    static CELL: OnceLock<Option<PathBuf>> = OnceLock::new();
    once(
        &CELL,
        Language::Python,
        "operations/disk-pressure-py/disk_pressure.py",
    )
}

/// `operations/disk-pressure-ts`, built once per process; `None` without the npm tools.
pub fn typescript_disk_pressure() -> Option<&'static Path> {
    static CELL: OnceLock<Option<PathBuf>> = OnceLock::new();
    once(
        &CELL,
        Language::TypeScript,
        "operations/disk-pressure-ts/disk_pressure.ts",
    )
}

/// `operations/values-hook-py` (the twin of the values-hook fixture), built once per
/// process; `None` without componentize-py.
pub fn python_values_hook() -> Option<&'static Path> {
    static CELL: OnceLock<Option<PathBuf>> = OnceLock::new();
    once(
        &CELL,
        Language::Python,
        "operations/values-hook-py/values_hook.py",
    )
}

/// `operations/values-hook-ts` (the twin of the values-hook fixture), built once per
/// process; `None` without the npm tools.
pub fn typescript_values_hook() -> Option<&'static Path> {
    static CELL: OnceLock<Option<PathBuf>> = OnceLock::new();
    once(
        &CELL,
        Language::TypeScript,
        "operations/values-hook-ts/values_hook.ts",
    )
}
