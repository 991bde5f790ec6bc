//! addon-operator modules from `oci://` references end to end with the binary:
//! `operon module push DIR oci://...` to a registry served in the test
//! (`operon_tests::registry`), then `operon modules list --module-source PINNED` beside
//! a modules directory (addon-operator's `202-module-symlinks` example, its `frontend`
//! module published on its own). A tag alone is refused; a source that cannot be
//! pulled is listed as unavailable while the other modules are listed as usual.

use operon_tests::registry::FakeRegistry;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/addons/testdata/module-symlinks")
}

/// `operon ARGS` with its caches in `cache`, off the runtime serving the registry.
async fn operon(cache: &Path, args: Vec<String>) -> Output {
    let cache = cache.to_owned();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_operon"))
            .args(&args)
            .env("XDG_CACHE_HOME", &cache)
            .env_remove("DOCKER_CONFIG")
            .env("HOME", &cache)
            .output()
            .expect("operon runs")
    })
    .await
    .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_pushed_from_its_directory_is_listed_from_its_source() {
    let registry = FakeRegistry::new(None);
    let host = registry.serve().await;
    let cache = tempfile::tempdir().unwrap();
    let frontend = example().join("module_storage/002-frontend");
    let tag = format!("oci://{host}/mods/frontend:1.0");
    let pushed = operon(
        cache.path(),
        args(&[
            "module",
            "push",
            frontend.to_str().unwrap(),
            &tag,
            "--plain-http",
            &host,
        ]),
    )
    .await;
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));
    let stdout = text(&pushed.stdout);
    assert!(
        stdout.starts_with(&format!("module frontend: {tag} sha256:")),
        "{stdout}"
    );
    let pinned = stdout
        .lines()
        .find_map(|l| l.strip_prefix("pinned: "))
        .unwrap_or_else(|| panic!("no pinned reference in {stdout}"))
        .to_owned();
    assert!(pinned.starts_with(&format!("{tag}@sha256:")), "{pinned}");

    let modules_dir = example().join("module_dir_1");
    let list = |sources: Vec<String>, format: &str| {
        let mut list = args(&["modules", "list", "--plain-http", &host, "-o", format]);
        list.extend([
            "--modules-dir".to_owned(),
            modules_dir.display().to_string(),
        ]);
        for source in sources {
            list.extend(["--module-source".to_owned(), source]);
        }
        operon(cache.path(), list)
    };
    let out = list(vec![pinned.clone()], "json").await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let modules: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let rows: Vec<(&str, &str, &str)> = (modules.iter())
        .map(|m| {
            (
                m["name"].as_str().unwrap(),
                m["state"].as_str().unwrap(),
                m["source"].as_str().unwrap(),
            )
        })
        .collect();
    let backend = modules_dir.join("001-backend").display().to_string();
    assert_eq!(
        rows,
        [
            ("backend", "enabled", backend.as_str()),
            ("frontend", "enabled", pinned.as_str())
        ]
    );
    let unpacked = cache.path().join("operon/addon-modules");
    assert_eq!(std::fs::read_dir(&unpacked).unwrap().count(), 1);

    // The table shows the source once some come from a registry.
    let out = list(vec![pinned.clone()], "table").await;
    let table = text(&out.stdout);
    assert!(table.lines().next().unwrap().ends_with("SOURCE"), "{table}");

    // A tag alone can never be pinned: refused before anything runs.
    let out = list(vec![tag.clone()], "json").await;
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("--module-source: {tag}: not pinned")),
        "{stderr}"
    );

    // A source that cannot be pulled is listed as unavailable; the others run.
    let missing = format!("oci://{host}/mods/gone:1.0@sha256:{}", "0".repeat(64));
    let out = list(vec![missing.clone(), pinned.clone()], "json").await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let modules: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = modules
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["backend", "frontend", "gone"]);
    assert_eq!(modules[2]["enabled"], false);
    let state = modules[2]["state"].as_str().unwrap();
    assert!(
        state.starts_with(&format!(
            "unavailable (ModuleNotFound: {missing}: not found"
        )),
        "{state}"
    );
    assert_eq!(modules[2]["source"], missing.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_archive_that_climbs_out_is_listed_unavailable_naming_the_entry() {
    let registry = FakeRegistry::new(None);
    let host = registry.serve().await;
    let cache = tempfile::tempdir().unwrap();
    let mut header = tar::Header::new_old();
    header.as_old_mut().name[..14].copy_from_slice(b"hooks/../../up");
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(2);
    header.set_mode(0o755);
    header.set_cksum();
    let mut builder = tar::Builder::new(Vec::new());
    builder.append(&header, &b"x\n"[..]).unwrap();
    let manifest = registry.publish(
        "mods/evil",
        "1",
        &builder.into_inner().unwrap(),
        "application/vnd.oci.image.config.v1+json",
        "application/vnd.oci.image.layer.v1.tar",
    );
    let reference = format!("oci://{host}/mods/evil:1@{manifest}");
    let out = operon(
        cache.path(),
        args(&[
            "modules",
            "list",
            "--plain-http",
            &host,
            "-o",
            "json",
            "--module-source",
            &reference,
        ]),
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let modules: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        modules[0]["state"],
        format!(
            "unavailable (UnsafeModuleArchive: {reference}: entry \"hooks/../../up\": a path with `..`)"
        )
    );
    assert!(!cache.path().join("operon/up").exists());
    assert!(!cache.path().join("up").exists());
}
