//! Which program becomes the launcher of the sandbox's runs: the launcher's own small
//! binary where it is installed beside the engine and was built from the same sources,
//! else the engine's binary itself.

use super::fingerprint::FINGERPRINT;
use super::launcher::{FINGERPRINT_ARG, LAUNCHER_ARG, LAUNCHER_BINARY};
use std::path::PathBuf;

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
    /// instead of the relocated data of the whole engine.
    pub fn for_this_binary() -> std::io::Result<Self> {
        Ok(Self::beside(std::env::current_exe()?))
    }

    fn this_binary(exe: PathBuf) -> Self {
        Self {
            program: exe,
            args: vec![LAUNCHER_ARG.to_owned()],
        }
    }

    /// [`Self::for_this_binary`] for the executable `exe`.
    fn beside(exe: PathBuf) -> Self {
        let Some(own) = exe.parent().map(|dir| dir.join(LAUNCHER_BINARY)) else {
            return Self::this_binary(exe);
        };
        if !own.exists() {
            return Self::this_binary(exe);
        }
        // The launcher's env var is never set here, so the binary only answers.
        let answer = std::process::Command::new(&own)
            .arg(FINGERPRINT_ARG)
            .env_clear()
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output();
        let ours = format!("{FINGERPRINT:016x}");
        match answer {
            Ok(out)
                if out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == ours =>
            {
                Self {
                    program: own,
                    args: Vec::new(),
                }
            }
            Ok(out) => {
                tracing::warn!(
                    launcher = %own.display(),
                    fingerprint = %String::from_utf8_lossy(&out.stdout).trim(),
                    ours,
                    "the sandbox launcher beside the engine was built from other sources; \
                     the engine's own binary launches the runs instead"
                );
                Self::this_binary(exe)
            }
            Err(e) => {
                tracing::warn!(
                    launcher = %own.display(),
                    error = %e,
                    "cannot start the sandbox launcher beside the engine; the engine's own \
                     binary launches the runs instead"
                );
                Self::this_binary(exe)
            }
        }
    }
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
