//! The launcher's Landlock rules, built in two steps: the system paths (a hundred and
//! more `/etc` entries, each opened and added on its own) while the launcher waits for
//! its run, then the run's own paths when its spec arrives, just before the launcher
//! restricts itself. The first step is most of the rules' cost, and off the run's path.
//!
//! Rules hold inodes, not paths: an `/etc` file replaced (renamed over) while the
//! launcher waited would keep the old file's rule and deny the new one. The entries are
//! listed again, with their inode numbers, when the spec arrives (one directory read),
//! and the system rules are built afresh when anything changed.

use super::protections::ProtectionState;
use super::spec::{LaunchBase, LaunchReport, LaunchSpec};
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr as _,
    RulesetCreated, RulesetCreatedAttr as _, RulesetError, Scope,
};
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};

/// The Landlock ABI the rules are written for; older kernels get what they support.
const ABI_WANTED: ABI = ABI::V6;

/// A ruleset holding the rules every run of a sandbox shares, not yet in force.
pub(super) struct SystemRules {
    created: Result<RulesetCreated, RulesetError>,
    /// The `/etc` entries granted, with their inode numbers when the rules were made.
    etc: Vec<(PathBuf, u64)>,
}

impl SystemRules {
    /// Opens the system paths of `base` and adds their rules.
    pub(super) fn build(base: &LaunchBase) -> Self {
        let etc = etc_entries(&base.etc_hidden);
        let created = system_ruleset(base, &etc);
        Self { created, etc }
    }

    /// The rules, built again when an `/etc` entry changed since they were made.
    pub(super) fn refreshed(self, base: &LaunchBase) -> Self {
        if etc_entries(&base.etc_hidden) == self.etc {
            self
        } else {
            Self::build(base)
        }
    }

    /// Adds the run's rules (its directory, its scratch directory, the handed paths, the
    /// `/proc` snapshot when `proc_snapshot`), restricts the launcher and so everything
    /// it starts, and reports the outcome.
    pub(super) fn restrict(
        self,
        base: &LaunchBase,
        spec: &LaunchSpec,
        handed: &[(&Path, BorrowedFd<'_>)],
        proc_snapshot: bool,
        report: &mut LaunchReport,
    ) {
        let restricted = self
            .created
            .and_then(|created| run_rules(created, spec, handed, proc_snapshot))
            .and_then(RulesetCreated::restrict_self);
        let network = |state: ProtectionState| {
            if base.network {
                ProtectionState::NotRequested
            } else {
                state
            }
        };
        match restricted {
            Ok(status) => {
                use landlock::{LandlockStatus, RulesetStatus};
                let abi = match status.landlock {
                    LandlockStatus::Available { effective_abi, .. } => Some(effective_abi),
                    _ => None,
                };
                let needs = |min: ABI, what: &str| match abi {
                    _ if status.ruleset == RulesetStatus::NotEnforced => {
                        ProtectionState::unavailable(format!(
                            "Landlock is not enforced ({:?})",
                            status.landlock
                        ))
                    }
                    Some(abi) if abi >= min => ProtectionState::Applied,
                    Some(abi) => ProtectionState::unavailable(format!(
                        "the kernel's Landlock ABI {abi:?} is older than {min:?}, which {what}"
                    )),
                    None => ProtectionState::unavailable(format!(
                        "Landlock is unavailable ({:?})",
                        status.landlock
                    )),
                };
                report.landlock_filesystem = needs(ABI::V3, "restricts truncation");
                report.landlock_network = network(needs(ABI::V4, "restricts TCP"));
                report.landlock_scopes = needs(ABI::V6, "scopes signals and abstract sockets");
            }
            Err(e) => {
                let state = ProtectionState::unavailable(format!("Landlock: {e}"));
                report.landlock_filesystem = state.clone();
                report.landlock_network = network(state.clone());
                report.landlock_scopes = state;
            }
        }
    }
}

/// A path's rule; paths missing on this system (no /lib32, no /usr/local) are simply
/// not granted.
fn allow(path: &Path, access: BitFlags<AccessFs>) -> Option<PathBeneath<PathFd>> {
    PathFd::new(path)
        .ok()
        .map(|fd| PathBeneath::new(fd, access))
}

fn system_ruleset(
    base: &LaunchBase,
    etc: &[(PathBuf, u64)],
) -> Result<RulesetCreated, RulesetError> {
    let read = AccessFs::from_read(ABI_WANTED);
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(ABI_WANTED))?;
    if !base.network {
        ruleset = ruleset.handle_access(AccessNet::from_all(ABI_WANTED))?;
    }
    let mut created = ruleset.scope(Scope::from_all(ABI_WANTED))?.create()?;
    let mut rules = Vec::new();
    for path in &base.read_only {
        rules.extend(allow(path, read));
    }
    for (path, _) in etc {
        rules.extend(allow(path, read));
    }
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate;
    for path in &base.devices {
        rules.extend(allow(path, device));
    }
    if base.private_proc == ProtectionState::Applied {
        rules.extend(allow(
            "/proc".as_ref(),
            AccessFs::ReadFile | AccessFs::ReadDir,
        ));
    }
    for rule in rules {
        created = created.add_rule(rule)?;
    }
    Ok(created)
}

fn run_rules(
    mut created: RulesetCreated,
    spec: &LaunchSpec,
    handed: &[(&Path, BorrowedFd<'_>)],
    proc_snapshot: bool,
) -> Result<RulesetCreated, RulesetError> {
    // Made now: the snapshot's tmpfs was mounted over /proc after the system rules.
    if proc_snapshot
        && let Some(rule) = allow("/proc".as_ref(), AccessFs::ReadFile | AccessFs::ReadDir)
    {
        created = created.add_rule(rule)?;
    }
    let read = AccessFs::from_read(ABI_WANTED);
    // The contract files exist already: the run may fill them, not create new files
    // beside them, which would escape the scratch directory's size budget.
    let run_dir = AccessFs::ReadFile
        | AccessFs::ReadDir
        | AccessFs::WriteFile
        | AccessFs::Truncate
        | AccessFs::Execute;
    // The scratch directory's rule is made here, after its tmpfs was mounted, so that
    // it names the tmpfs and not the directory underneath.
    for rule in [
        allow(&spec.run_dir, run_dir),
        allow(&spec.work_dir, AccessFs::from_all(ABI_WANTED)),
    ]
    .into_iter()
    .flatten()
    {
        created = created.add_rule(rule)?;
    }
    for (_, fd) in handed {
        created = created.add_rule(PathBeneath::new(*fd, read))?;
    }
    Ok(created)
}

/// The entries of `/etc` minus the hidden ones, with their inode numbers. `hidden`
/// holds names (`shadow`) and nested paths (`ssl/private`), whose parent is then
/// granted entry by entry.
fn etc_entries(hidden: &[String]) -> Vec<(PathBuf, u64)> {
    use std::os::unix::fs::DirEntryExt as _;
    let etc = Path::new("/etc");
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(etc) else {
        return out;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if hidden.iter().any(|h| h == name) {
            continue;
        }
        let prefix = format!("{name}/");
        let nested: Vec<&str> = hidden
            .iter()
            .filter_map(|h| h.strip_prefix(&prefix))
            .collect();
        if nested.is_empty() {
            out.push((entry.path(), entry.ino()));
            continue;
        }
        if let Ok(children) = std::fs::read_dir(entry.path()) {
            for child in children.flatten() {
                let child_name = child.file_name();
                if !nested.iter().any(|n| child_name.to_str() == Some(n)) {
                    out.push((child.path(), child.ino()));
                }
            }
        }
    }
    // Directory order may change without any entry changing.
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_etc_entries_are_left_out() {
        let entries = etc_entries(&["shadow".to_owned(), "ssl/private".to_owned()]);
        let has = |end: &str| entries.iter().any(|(p, _)| p.ends_with(end));
        assert!(!has("shadow"));
        assert!(!has("ssl/private"));
        assert!(!entries.iter().any(|(p, _)| p == Path::new("/etc/ssl")));
        if Path::new("/etc/passwd").exists() {
            assert!(has("passwd"));
        }
    }
}
