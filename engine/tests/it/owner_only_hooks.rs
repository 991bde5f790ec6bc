//! Hooks directories only their owner may enter (mode 0700, made under umask 077),
//! owned by the user that runs the engine: shell-operator execs such hooks as its own
//! user, and so they must run here, through the script sandbox, `operon hook test` and
//! a module's `hooks/`, with the sandbox's protections all in place.
//!
//! As root the runs use an unprivileged uid, which the directory shuts out: the engine
//! gives the run a private copy mounted over the original. As any other user the run's
//! uid owns the directory already. Both must pass.

use operon::script::{ProtectionState, RunStatus, SandboxRequest, ScriptSandbox};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn strict_sandbox() -> ScriptSandbox {
    let mut config = operon::script::ScriptSandboxConfig::new(crate::launcher());
    config.strict = true;
    ScriptSandbox::new(config).unwrap()
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A hook that sources a sibling library, prints its own path and working directory and
/// tries to write beside itself, in a 0700 `hooks` directory whose files are 0700 and
/// 0600, beside a world-readable `secret` in a world-readable parent.
struct OwnerOnly {
    root: tempfile::TempDir,
    hooks: PathBuf,
    hook: PathBuf,
}

const HOOK: &str = "#!/bin/bash\n\
    source \"$(dirname \"$0\")/lib/common.sh\"\n\
    if [ \"$1\" = --config ]; then echo 'configVersion: v1'; echo 'onStartup: 10'; exit 0; fi\n\
    echo \"$GREETING $0 $(pwd)\"\n\
    if echo x > \"$(dirname \"$0\")/written\" 2>/dev/null; then echo wrote; fi\n\
    cat \"$(dirname \"$0\")/../secret\" 2>/dev/null || echo no-secret\n";

fn owner_only(hook: &str) -> OwnerOnly {
    let root = tempfile::tempdir().unwrap();
    set_mode(root.path(), 0o755);
    std::fs::write(root.path().join("secret"), "s3cr3t\n").unwrap();
    set_mode(&root.path().join("secret"), 0o644);
    let hooks = root.path().join("hooks");
    std::fs::create_dir_all(hooks.join("lib")).unwrap();
    std::fs::write(hooks.join("lib/common.sh"), "GREETING=from-lib\n").unwrap();
    set_mode(&hooks.join("lib/common.sh"), 0o600);
    set_mode(&hooks.join("lib"), 0o700);
    let path = hooks.join("shell-hook.sh");
    std::fs::write(&path, hook).unwrap();
    set_mode(&path, 0o700);
    set_mode(&hooks, 0o700);
    OwnerOnly {
        root,
        hooks,
        hook: path,
    }
}

#[tokio::test]
async fn a_hook_in_an_owner_only_directory_runs_in_the_sandbox() {
    use operon::hooks::runner::{Hook as _, ScriptHook};
    let dir = owner_only(HOOK);
    let hook = ScriptHook::new(strict_sandbox(), &dir.hooks, &dir.hook);
    let config = hook.configure().await;
    assert!(config.is_ok(), "{:?}", config.err());

    let sandbox = strict_sandbox();
    let run = sandbox.prepare().unwrap();
    let mut request = SandboxRequest::new("owner-only", &dir.hook);
    request.cwd = Some(dir.hooks.clone());
    request.read_only = vec![dir.hooks.clone()];
    request.timeout = Duration::from_secs(10);
    let outcome = sandbox.run(&run, &request).await.unwrap();
    assert_eq!(
        outcome.status,
        RunStatus::Exited(0),
        "{}",
        String::from_utf8_lossy(&outcome.stderr)
    );
    // The paths it sees are the original ones; its directory stays read-only and the
    // parent's files out of reach, as for any hooks directory.
    assert_eq!(
        String::from_utf8_lossy(&outcome.stdout),
        format!(
            "from-lib {} {}\nno-secret\n",
            dir.hook.display(),
            dir.hooks.display()
        )
    );
    for (name, state) in outcome.protections.iter() {
        assert_eq!(state, &ProtectionState::Applied, "{name}");
    }
    assert!(!dir.hooks.join("written").exists());
    // Nothing of the original changed.
    let mode = std::fs::metadata(&dir.hooks).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    drop(dir.root);
}

#[test]
fn operon_hook_test_runs_a_hook_of_an_owner_only_directory() {
    let dir = owner_only(HOOK);
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(["hook", "test"])
        .arg(&dir.hook)
        .args(["-o", "json"])
        .env("OPERON_CACHE_DIR", operon_tests::test_cache_dir())
        .env("HOME", home.path())
        .output()
        .expect("operon runs");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["runs"][0]["stdout"],
        format!(
            "from-lib {} {}\nno-secret\n",
            dir.hook.display(),
            dir.hooks.display()
        ),
        "{report:#}"
    );
}

/// A module whose `hooks/` is 0700, in the second of two modules directories, run by
/// `operon modules run` as addon-operator would: its startup hook's output is logged.
#[test]
fn a_module_with_an_owner_only_hooks_directory_runs() {
    let root = tempfile::tempdir().unwrap();
    let (first, second) = (root.path().join("first"), root.path().join("second"));
    std::fs::create_dir_all(first.join("001-alpha")).unwrap();
    std::fs::write(first.join("values.yaml"), "alphaEnabled: true\n").unwrap();
    let hooks = second.join("002-beta/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::write(second.join("values.yaml"), "betaEnabled: true\n").unwrap();
    let hook = hooks.join("startup.sh");
    std::fs::write(
        &hook,
        "#!/bin/bash\nif [ \"$1\" = --config ]; then echo '{\"configVersion\":\"v1\",\"onStartup\":1}'; exit 0; fi\n\
         echo \"beta startup from $(basename \"$(pwd)\")\" >&2\n",
    )
    .unwrap();
    set_mode(&hook, 0o700);
    set_mode(&hooks, 0o700);
    let dirs = format!("{}:{}", first.display(), second.display());
    let out = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(["modules", "run", "--once", "--dry-run", "-n", "operon-demo"])
        .env("MODULES_DIR", &dirs)
        .env("LOG_TYPE", "json")
        .env_remove("OPERON_LOG")
        .output()
        .expect("operon runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("ModuleRun:alpha: ok in ") && stdout.contains("ModuleRun:beta: ok in "),
        "{stdout}"
    );
    let printed = stderr
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|r| r["output"] == "stderr")
        .unwrap_or_else(|| panic!("no hook output in the log: {stderr}"));
    assert_eq!(printed["message"], "beta startup from hooks", "{printed}");
}
