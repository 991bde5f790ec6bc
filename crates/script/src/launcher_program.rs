//! Which program becomes the launcher of the sandbox's runs: the launcher's own small
//! binary where it is installed beside the engine and was built from the same sources,
//! else the engine's binary itself.

use super::fingerprint::FINGERPRINT;
use super::launcher::{FINGERPRINT_ARG, LAUNCHER_ARG, LAUNCHER_BINARY};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The program that becomes the launcher, and the arguments that make it one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launcher {
    /// The executable: `operon-sandbox-exec`, the `operon` binary, or any binary whose
    /// `main` first calls [`super::launcher::run_if_invoked`].
    pub program: PathBuf,
    /// Arguments; informational, the environment marks a launcher.
    pub args: Vec<String>,
}

impl Launcher {
    /// The running executable with the hidden `__sandbox-exec` argument: right for the
    /// `operon` binary, benchmarks and any binary that calls `run_if_invoked` first.
    pub fn current_exe() -> std::io::Result<Self> {
        Ok(Self::this_binary(std::env::current_exe()?))
    }

    /// The launcher's own binary when it is installed beside the running executable and
    /// was built from the same sources, else the running executable (see
    /// [`Self::current_exe`]). Each waiting launcher then holds a fraction of a MiB
    /// instead of the relocated data of the whole engine. Chosen once per process, as
    /// every sandbox of it asks; a launcher binary replaced afterwards by another build's
    /// refuses this engine's runs, naming both fingerprints.
    pub fn for_this_binary() -> std::io::Result<Self> {
        static CHOSEN: OnceLock<Launcher> = OnceLock::new();
        if let Some(chosen) = CHOSEN.get() {
            return Ok(chosen.clone());
        }
        let chosen = Self::beside(std::env::current_exe()?);
        Ok(CHOSEN.get_or_init(|| chosen).clone())
    }

    fn this_binary(exe: PathBuf) -> Self {
        Self {
            program: exe,
            args: vec![LAUNCHER_ARG.to_owned()],
        }
    }

    /// [`Self::for_this_binary`] for the executable `exe`.
    fn beside(exe: PathBuf) -> Self {
        match own_binary_beside(&exe) {
            Some(own) => Self {
                program: own,
                args: Vec::new(),
            },
            None => Self::this_binary(exe),
        }
    }
}

/// The launcher's own binary beside `exe`, when it is there and answers with this
/// build's fingerprint; a warning says why one that is there is not used.
fn own_binary_beside(exe: &Path) -> Option<PathBuf> {
    let own = exe.parent()?.join(LAUNCHER_BINARY);
    if !own.exists() {
        return None;
    }
    // The launcher's env var is never set here, so the binary only answers.
    let answer = std::process::Command::new(&own)
        .arg(FINGERPRINT_ARG)
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    let ours = format!("{FINGERPRINT:016x}");
    let why = match answer {
        Ok(out) => {
            let theirs = String::from_utf8_lossy(&out.stdout);
            if out.status.success() && theirs.trim() == ours {
                return Some(own);
            }
            format!(
                "it was built from other sources (fingerprint {:?}, ours {ours})",
                theirs.trim()
            )
        }
        Err(e) => format!("it cannot be started: {e}"),
    };
    tracing::warn!(
        launcher = %own.display(),
        "the sandbox launcher beside the engine is not used, {why}; the engine's own \
         binary launches the runs instead"
    );
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    /// A directory holding `operon` and, when `answer` is given, a launcher binary
    /// beside it that prints `answer` and exits with `code`.
    fn installed(answer: Option<(&str, i32)>) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("operon");
        std::fs::write(&exe, "").unwrap();
        if let Some((text, code)) = answer {
            let own = dir.path().join(LAUNCHER_BINARY);
            std::fs::write(&own, format!("#!/bin/sh\necho '{text}'\nexit {code}\n")).unwrap();
            std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o755)).unwrap();
            // Another test's fork may briefly hold the just-written file open, and exec
            // then fails with ETXTBSY: wait until it runs, so the choice sees the answer.
            while let Err(e) = std::process::Command::new(&own).output() {
                assert_eq!(e.raw_os_error(), Some(26), "{e}");
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        (dir, exe)
    }

    #[test]
    fn without_the_launchers_binary_the_engine_launches_itself() {
        let (_dir, exe) = installed(None);
        let launcher = Launcher::beside(exe.clone());
        assert_eq!(launcher.program, exe);
        assert_eq!(launcher.args, [LAUNCHER_ARG]);
    }

    #[test]
    fn the_launchers_binary_of_the_same_build_is_chosen() {
        let ours = format!("{FINGERPRINT:016x}");
        let (dir, exe) = installed(Some((&ours, 0)));
        let launcher = Launcher::beside(exe);
        assert_eq!(launcher.program, dir.path().join(LAUNCHER_BINARY));
        assert!(launcher.args.is_empty());
    }

    #[test]
    fn a_launchers_binary_of_another_build_is_passed_over() {
        let other = format!("{:016x}", FINGERPRINT ^ 1);
        for answer in [(other.as_str(), 0), ("", 2)] {
            let (_dir, exe) = installed(Some(answer));
            let launcher = Launcher::beside(exe.clone());
            assert_eq!(launcher.program, exe, "{answer:?}");
            assert_eq!(launcher.args, [LAUNCHER_ARG]);
        }
    }
}
