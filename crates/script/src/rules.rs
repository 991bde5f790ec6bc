//! The launcher's Landlock rules, built in two steps: the system paths (a hundred and
//! more `/etc` entries, each opened and added on its own) while the launcher waits for
//! its run, then the run's own paths when its spec arrives, just before the launcher
//! restricts itself. The first step is most of the rules' cost, and off the run's path.
//!
//! Rules hold inodes, not paths: an `/etc` file replaced (renamed over) while the
//! launcher waited would keep the old file's rule and deny the new one. Adding,
//! removing or renaming an entry changes its directory's status-change time (which,
//! unlike the modification time, no program can set back), so when the spec arrives the
//! launcher compares the times of `/etc` (and of the directories whose entries are
//! granted one by one) with those it saw. When one moved, or is within a second of the
//! listing (a later change in the same clock tick would leave it as it was), the
//! entries are listed again with their inode numbers, and the system rules are built
//! afresh when anything changed.

use super::protections::ProtectionState;
use super::spec::{LaunchBase, LaunchReport, LaunchSpec};
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr as _,
    RulesetCreated, RulesetCreatedAttr as _, RulesetError, Scope,
};
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};

/// The directory whose entries are granted one by one, minus the hidden ones.
const ETC: &str = "/etc";

/// The Landlock ABI the rules are written for; older kernels get what they support.
const ABI_WANTED: ABI = ABI::V6;

/// A ruleset holding the rules every run of a sandbox shares, not yet in force.
pub(super) struct SystemRules {
    created: Result<RulesetCreated, RulesetError>,
    /// The `/etc` entries granted, with their inode numbers when the rules were made.
    etc: Vec<(PathBuf, u64)>,
    /// The directories those entries were listed from, as they were before the listing.
    stamps: Vec<DirStamp>,
    /// When the listing was made.
    built: std::time::SystemTime,
}

/// What changes when a directory gains, loses or renames an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DirStamp {
    dev: u64,
    ino: u64,
    /// The status-change time: seconds and nanoseconds since the epoch.
    changed: (i64, u32),
}

impl SystemRules {
    /// Opens the system paths of `base` and adds their rules.
    pub(super) fn build(base: &LaunchBase) -> Self {
        // Stamped before the listing: a change made during it moves a time past these.
        let built = std::time::SystemTime::now();
        let stamps = etc_stamps(Path::new(ETC), &base.etc_hidden);
        let etc = etc_entries(Path::new(ETC), &base.etc_hidden);
        let created = system_ruleset(base, &etc);
        Self {
            created,
            etc,
            stamps,
            built,
        }
    }

    /// The rules, built again when an `/etc` entry changed since they were made.
    pub(super) fn refreshed(self, base: &LaunchBase) -> Self {
        let now = etc_stamps(Path::new(ETC), &base.etc_hidden);
        if !needs_listing(&self.stamps, &now, self.built) {
            return self;
        }
        if etc_entries(Path::new(ETC), &base.etc_hidden) == self.etc {
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

/// Whether the directories' stamps `now` may hide a change since `then`, taken just
/// before a listing made at `built`: a stamp moved, a directory became unreadable, or a
/// time is within a second of the listing, where a later change of the same clock tick
/// (file times are as coarse as the kernel's tick) would leave it as it was.
fn needs_listing(then: &[DirStamp], now: &[DirStamp], built: std::time::SystemTime) -> bool {
    use std::time::{Duration, UNIX_EPOCH};
    then != now
        || then.iter().any(|stamp| {
            let (secs, nanos) = stamp.changed;
            let changed = u64::try_from(secs).ok().and_then(|secs| {
                UNIX_EPOCH.checked_add(Duration::new(secs, 0) + Duration::from_nanos(nanos.into()))
            });
            changed.is_none_or(|changed| changed + Duration::from_secs(1) >= built)
        })
}

/// The stamps of `/etc` and of each directory below it whose entries are granted one by
/// one (the parents of nested hidden paths), in that order; a directory that cannot be
/// read has no stamp, which differs from any it had.
fn etc_stamps(etc: &Path, hidden: &[String]) -> Vec<DirStamp> {
    let mut dirs: Vec<PathBuf> = vec![etc.to_owned()];
    for nested in hidden {
        if let Some((parent, _)) = nested.split_once('/') {
            let dir = etc.join(parent);
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    use std::os::unix::fs::MetadataExt as _;
    dirs.iter()
        .filter_map(|dir| {
            let meta = std::fs::metadata(dir).ok()?;
            Some(DirStamp {
                dev: meta.dev(),
                ino: meta.ino(),
                changed: (meta.ctime(), u32::try_from(meta.ctime_nsec()).unwrap_or(0)),
            })
        })
        .collect()
}

/// The entries of `/etc` minus the hidden ones, with their inode numbers. `hidden`
/// holds names (`shadow`) and nested paths (`ssl/private`), whose parent is then
/// granted entry by entry.
fn etc_entries(etc: &Path, hidden: &[String]) -> Vec<(PathBuf, u64)> {
    use std::os::unix::fs::DirEntryExt as _;
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
        let entries = etc_entries(
            Path::new(ETC),
            &["shadow".to_owned(), "ssl/private".to_owned()],
        );
        let has = |end: &str| entries.iter().any(|(p, _)| p.ends_with(end));
        assert!(!has("shadow"));
        assert!(!has("ssl/private"));
        assert!(!entries.iter().any(|(p, _)| p == Path::new("/etc/ssl")));
        if Path::new("/etc/passwd").exists() {
            assert!(has("passwd"));
        }
    }

    #[test]
    fn a_moved_missing_or_recent_stamp_means_listing_again() {
        use std::time::{Duration, UNIX_EPOCH};
        let built = UNIX_EPOCH + Duration::from_secs(2_000_000_000);
        let stamp = |ino: u64, secs: i64| DirStamp {
            dev: 1,
            ino,
            changed: (secs, 500),
        };
        let then = [stamp(10, 1_000_000_000), stamp(11, 1_000_000_000)];
        assert!(!needs_listing(&then, &then, built), "old and unchanged");
        let moved = [stamp(10, 1_000_000_000), stamp(11, 1_999_999_000)];
        assert!(needs_listing(&then, &moved, built), "a directory changed");
        assert!(needs_listing(&then, &then[..1], built), "a directory went");
        let recent = [stamp(10, 1_000_000_000), stamp(11, 1_999_999_999)];
        assert!(
            needs_listing(&recent, &recent, built),
            "changed within a second before the listing"
        );
        let later = [stamp(10, 2_000_000_001)];
        assert!(needs_listing(&later, &later, built), "a clock set back");
    }

    #[test]
    fn etc_and_the_parents_of_nested_hidden_paths_are_stamped() {
        use std::os::unix::fs::MetadataExt as _;
        let etc = tempfile::tempdir().unwrap();
        std::fs::create_dir(etc.path().join("ssl")).unwrap();
        let hidden = [
            "shadow".to_owned(),
            "ssl/private".to_owned(),
            "ssl/other".to_owned(),
        ];
        let inos: Vec<u64> = etc_stamps(etc.path(), &hidden)
            .iter()
            .map(|s| s.ino)
            .collect();
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        assert_eq!(inos, [ino(etc.path()), ino(&etc.path().join("ssl"))]);
        std::fs::remove_dir(etc.path().join("ssl")).unwrap();
        assert_eq!(etc_stamps(etc.path(), &hidden).len(), 1);
    }
}
