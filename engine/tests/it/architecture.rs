//! Rules of the engine's layout that the compiler does not enforce: the WIT-generated
//! types stay inside the sandbox (everything else speaks `operon::model`), so that a
//! new version of the WIT package changes `sandbox::convert` and nothing else.

use std::path::{Path, PathBuf};

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

#[test]
fn only_the_sandbox_uses_the_wit_generated_types() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let sandbox = src.join("sandbox");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 50, "found only {} files", files.len());
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
