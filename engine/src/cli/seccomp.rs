//! `operon seccomp-profile`: prints the `Localhost` seccomp profile Operon's pods run
//! under, or installs it in a kubelet's seccomp directory and keeps it there (the
//! DaemonSet `operon-seccomp` does this on every node).

use operon::script::seccomp::{self, Installed};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Print or install the seccomp profile of Operon's pods.
#[derive(Debug, clap::Args)]
pub struct SeccompArgs {
    /// Install the profile below this directory (a kubelet's seccomp directory, by
    /// default /var/lib/kubelet/seccomp, mounted into the pod) instead of printing it;
    /// pods name it as `localhostProfile: operon/sandbox-v1.json`.
    #[arg(long, env = "OPERON_SECCOMP_DIR")]
    install_dir: Option<PathBuf>,
    /// After installing, check the file this often and write it again when it was
    /// removed or changed, until stopped (what a DaemonSet's container does); `0s`
    /// installs once and exits.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration, requires = "install_dir")]
    keep: Duration,
}

/// Runs the command.
pub fn run(args: SeccompArgs) -> anyhow::Result<ExitCode> {
    let Some(dir) = args.install_dir else {
        print!("{}", seccomp::pod_profile_text());
        return Ok(ExitCode::SUCCESS);
    };
    report(seccomp::install(&dir)?);
    if args.keep.is_zero() {
        return Ok(ExitCode::SUCCESS);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut stop = std::pin::pin!(super::serve::shutdown_signal());
        loop {
            tokio::select! {
                _ = &mut stop => return Ok(ExitCode::SUCCESS),
                _ = tokio::time::sleep(args.keep) => {}
            }
            // A failure here is logged and tried again: the pods already admitted keep
            // the profile they were created with.
            match seccomp::install(&dir) {
                Ok(installed) => report(installed),
                Err(e) => tracing::error!(error = %e, "cannot keep the seccomp profile"),
            }
        }
    })
}

fn report(installed: Installed) {
    match installed {
        Installed::Written(path) => {
            tracing::info!(path = %path.display(), "seccomp profile written")
        }
        Installed::Unchanged(path) => {
            tracing::debug!(path = %path.display(), "seccomp profile in place")
        }
    }
}
