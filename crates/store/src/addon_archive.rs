//! The layer of an addon-operator module artifact: a tar of the module directory (its
//! `Chart.yaml`, `templates/`, `hooks/`, `values.yaml`, `openapi/`, `module.yaml`,
//! `enabled` at the archive's root, as Deckhouse's module images hold them), gzipped
//! or not. [`pack`] writes one reproducibly (entries in name order, no owners, no
//! times); [`unpack`] reads one that may be hostile: every entry is checked before
//! anything of it is written, and the first one refused stops the unpacking with an
//! [`ArchiveError`] naming the entry and the reason.
//!
//! What is refused: absolute paths and `..`; device files, FIFOs and anything else but
//! files, directories, symlinks and hard links; symlinks whose target is absolute or
//! leaves the module; hard links to anything but a file unpacked before; an entry
//! under a symlink or given twice (either would let a later entry write outside);
//! more entries, more bytes in one file or more bytes in all than [`Limits`] allow
//! (a gzip bomb stops at the byte that passes the limit). Modes keep only their
//! permission bits, the owner's executable bit spread to all (hooks and `enabled`
//! must run), never setuid, setgid or sticky.

use std::collections::BTreeSet;
use std::io::{Read, Write as _};
use std::path::{Component, Path, PathBuf};

/// How much an archive may hold once unpacked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Entries of every kind.
    pub entries: usize,
    /// Bytes of one file.
    pub file_bytes: u64,
    /// Bytes of all files.
    pub total_bytes: u64,
}

impl Default for Limits {
    /// 10,000 entries, 64 MiB a file, 256 MiB in all: a big module (Deckhouse's
    /// largest charts with their CRDs) is a few MiB.
    fn default() -> Self {
        Self {
            entries: 10_000,
            file_bytes: 64 << 20,
            total_bytes: 256 << 20,
        }
    }
}

/// Why an archive cannot be packed or unpacked.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// An entry is refused.
    #[error("entry {entry:?}: {reason}")]
    Refused {
        /// The entry's path as the archive gives it.
        entry: String,
        /// Why.
        reason: Refusal,
    },
    /// The archive is not a tar (or its gzip is broken).
    #[error("not a tar archive of a module directory: {0}")]
    Malformed(#[source] std::io::Error),
    /// A file cannot be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Why an entry is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Its path is absolute.
    #[error("an absolute path")]
    Absolute,
    /// Its path has a `..` component.
    #[error("a path with `..`")]
    ParentDirectory,
    /// It is a device file, a FIFO or another kind the module has no use for.
    #[error("a {0}, not a file, directory or symlink")]
    Kind(&'static str),
    /// A symlink whose target is absolute or outside the module.
    #[error("a symlink to {0:?}, outside the module")]
    SymlinkOutside(String),
    /// A hard link to something that is not a file unpacked before it.
    #[error("a hard link to {0:?}, which is not a file earlier in the archive")]
    HardLink(String),
    /// The path goes through a symlink of the archive.
    #[error("under the symlink {0:?}")]
    UnderSymlink(String),
    /// The path was given before.
    #[error("given twice")]
    Duplicate,
    /// More entries than the limit.
    #[error("more than {0} entries")]
    TooManyEntries(usize),
    /// A file larger than the limit.
    #[error("a file of more than {0} bytes")]
    FileTooLarge(u64),
    /// All files together larger than the limit.
    #[error("the files pass {0} bytes in all")]
    TotalTooLarge(u64),
}

/// Unpacks `archive` (a tar, gzipped or not) into `dest`, which must not exist yet
/// (its parent must).
pub fn unpack(archive: &[u8], dest: &Path, limits: &Limits) -> Result<(), ArchiveError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| ArchiveError::Io { path, source }
    };
    std::fs::create_dir(dest).map_err(io(dest))?;
    let reader: Box<dyn Read + '_> = if archive.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::GzDecoder::new(archive))
    } else {
        Box::new(archive)
    };
    // Headers and padding on top of the files' bytes; past that the stream is cut, so
    // that no header (a GNU long name, a PAX record) can make the reader hold more.
    let bound = limits
        .total_bytes
        .saturating_add((limits.entries as u64).saturating_mul(4096));
    let mut tar = tar::Archive::new(Bounded {
        inner: reader,
        left: bound,
        bound,
    });
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
    let mut symlinks: BTreeSet<PathBuf> = BTreeSet::new();
    let mut files: BTreeSet<PathBuf> = BTreeSet::new();
    let mut total: u64 = 0;
    for (index, entry) in tar.entries().map_err(ArchiveError::Malformed)?.enumerate() {
        let mut entry = entry.map_err(ArchiveError::Malformed)?;
        let raw = entry.path_bytes().into_owned();
        let name = String::from_utf8_lossy(&raw).into_owned();
        let refused = |reason| ArchiveError::Refused {
            entry: name.clone(),
            reason,
        };
        if index >= limits.entries {
            return Err(refused(Refusal::TooManyEntries(limits.entries)));
        }
        let Some(relative) = relative_path(&raw).map_err(refused)? else {
            continue; // the root itself (`./`)
        };
        if let Some(link) = symlinks.iter().find(|link| relative.starts_with(link)) {
            return Err(refused(Refusal::UnderSymlink(link.display().to_string())));
        }
        let kind = entry.header().entry_type();
        let is_dir = kind == tar::EntryType::Directory;
        if !seen.insert(relative.clone()) && !is_dir {
            return Err(refused(Refusal::Duplicate));
        }
        let target = dest.join(&relative);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let mode = entry.header().mode().unwrap_or(0o644);
        match kind {
            tar::EntryType::Directory => {
                if files.contains(&relative) {
                    return Err(refused(Refusal::Duplicate));
                }
                match std::fs::create_dir(&target) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && target.is_dir() => {}
                    Err(e) => return Err(io(&target)(e)),
                }
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let size = entry.header().size().map_err(ArchiveError::Malformed)?;
                if size > limits.file_bytes {
                    return Err(refused(Refusal::FileTooLarge(limits.file_bytes)));
                }
                if total.saturating_add(size) > limits.total_bytes {
                    return Err(refused(Refusal::TotalTooLarge(limits.total_bytes)));
                }
                let mut file = create_new(&target, file_mode(mode)).map_err(io(&target))?;
                // The header's size bounds what is read, whatever the stream holds.
                let copied = std::io::copy(&mut (&mut entry).take(size), &mut file)
                    .map_err(ArchiveError::Malformed)?;
                file.flush().map_err(io(&target))?;
                total += copied;
                files.insert(relative);
            }
            tar::EntryType::Symlink => {
                let link = entry
                    .link_name_bytes()
                    .map(|l| l.into_owned())
                    .unwrap_or_default();
                let link_text = String::from_utf8_lossy(&link).into_owned();
                if !symlink_stays_inside(&relative, Path::new(&*link_text)) {
                    return Err(refused(Refusal::SymlinkOutside(link_text)));
                }
                std::os::unix::fs::symlink(&link_text, &target).map_err(io(&target))?;
                symlinks.insert(relative);
            }
            tar::EntryType::Link => {
                let link = entry
                    .link_name_bytes()
                    .map(|l| l.into_owned())
                    .unwrap_or_default();
                let link_text = String::from_utf8_lossy(&link).into_owned();
                let source = match relative_path(&link) {
                    Ok(Some(source)) if files.contains(&source) => source,
                    _ => return Err(refused(Refusal::HardLink(link_text))),
                };
                // A copy, not a link: the cache holds no two names for one inode.
                let from = dest.join(&source);
                let bytes = std::fs::read(&from).map_err(io(&from))?;
                if total.saturating_add(bytes.len() as u64) > limits.total_bytes {
                    return Err(refused(Refusal::TotalTooLarge(limits.total_bytes)));
                }
                let mut file = create_new(&target, file_mode(mode)).map_err(io(&target))?;
                file.write_all(&bytes).map_err(io(&target))?;
                total += bytes.len() as u64;
                files.insert(relative);
            }
            // Headers the tar crate has not folded into the next entry already.
            tar::EntryType::XGlobalHeader => {}
            other => return Err(refused(Refusal::Kind(kind_name(other)))),
        }
    }
    Ok(())
}

/// A reader that fails past `bound` bytes.
struct Bounded<R> {
    inner: R,
    left: u64,
    bound: u64,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Err(std::io::Error::other(format!(
                "the archive unpacks to more than {} bytes",
                self.bound
            )));
        }
        let wanted = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let read = self.inner.read(&mut buf[..wanted])?;
        self.left -= read as u64;
        Ok(read)
    }
}

/// A gzipped tar of the module directory `dir`, its entries at the archive's root in
/// name order, without owners or times (the same directory gives the same bytes, so
/// the same digest). Symlinks are kept as symlinks; anything else but files and
/// directories is an error naming it, as is a name that is not UTF-8.
pub fn pack(dir: &Path) -> Result<Vec<u8>, ArchiveError> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::default(),
    ));
    builder.follow_symlinks(false);
    let mut entries = Vec::new();
    walk(dir, Path::new(""), &mut entries)?;
    for (relative, metadata) in entries {
        let path = dir.join(&relative);
        let io = |source| ArchiveError::Io {
            path: path.clone(),
            source,
        };
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        let file_type = metadata.file_type();
        use std::os::unix::fs::PermissionsExt as _;
        let mode = metadata.permissions().mode();
        if file_type.is_dir() {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(0o755);
            header.set_size(0);
            builder
                .append_data(&mut header, &relative, std::io::empty())
                .map_err(io)?;
        } else if file_type.is_symlink() {
            let target = std::fs::read_link(&path).map_err(io)?;
            header.set_entry_type(tar::EntryType::Symlink);
            header.set_mode(0o777);
            header.set_size(0);
            builder
                .append_link(&mut header, &relative, &target)
                .map_err(io)?;
        } else if file_type.is_file() {
            let bytes = std::fs::read(&path).map_err(io)?;
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(file_mode(mode));
            header.set_size(bytes.len() as u64);
            builder
                .append_data(&mut header, &relative, bytes.as_slice())
                .map_err(io)?;
        } else {
            return Err(ArchiveError::Refused {
                entry: relative.display().to_string(),
                reason: Refusal::Kind("special file"),
            });
        }
    }
    let encoder = builder.into_inner().map_err(|source| ArchiveError::Io {
        path: dir.to_owned(),
        source,
    })?;
    encoder.finish().map_err(|source| ArchiveError::Io {
        path: dir.to_owned(),
        source,
    })
}

/// Every entry under `dir/prefix`, depth first in name order, directories before what
/// they hold; names starting with `.` are left out (a checkout's `.git`, an editor's
/// files, a ConfigMap volume's `..data`).
fn walk(
    dir: &Path,
    prefix: &Path,
    into: &mut Vec<(PathBuf, std::fs::Metadata)>,
) -> Result<(), ArchiveError> {
    let here = dir.join(prefix);
    let io = |source| ArchiveError::Io {
        path: here.clone(),
        source,
    };
    let mut names: Vec<_> = std::fs::read_dir(&here)
        .map_err(io)?
        .map(|entry| entry.map(|e| e.file_name()))
        .collect::<Result<_, _>>()
        .map_err(io)?;
    names.sort();
    for name in names {
        if name.as_encoded_bytes().starts_with(b".") {
            continue;
        }
        let relative = prefix.join(&name);
        if name.to_str().is_none() {
            return Err(ArchiveError::Refused {
                entry: relative.display().to_string(),
                reason: Refusal::Kind("name that is not UTF-8"),
            });
        }
        let path = dir.join(&relative);
        let metadata = std::fs::symlink_metadata(&path).map_err(|source| ArchiveError::Io {
            path: path.clone(),
            source,
        })?;
        let is_dir = metadata.is_dir();
        into.push((relative.clone(), metadata));
        if is_dir {
            walk(dir, &relative, into)?;
        }
    }
    Ok(())
}

/// The entry's path relative to the module root (`./` and empty components dropped);
/// `None` for the root itself.
fn relative_path(raw: &[u8]) -> Result<Option<PathBuf>, Refusal> {
    if raw.starts_with(b"/") {
        return Err(Refusal::Absolute);
    }
    use std::os::unix::ffi::OsStrExt as _;
    let path = Path::new(std::ffi::OsStr::from_bytes(raw));
    let mut relative = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => relative.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err(Refusal::ParentDirectory),
            Component::RootDir | Component::Prefix(_) => return Err(Refusal::Absolute),
        }
    }
    Ok((!relative.as_os_str().is_empty()).then_some(relative))
}

/// Whether a symlink at `at` (relative to the root) pointing to `target` resolves,
/// lexically, inside the root. Lexically is enough: every symlink of the archive is
/// checked the same way and nothing is unpacked under one, so no chain leads out.
fn symlink_stays_inside(at: &Path, target: &Path) -> bool {
    if target.as_os_str().is_empty() || target.is_absolute() {
        return false;
    }
    let mut depth: Vec<&std::ffi::OsStr> = at
        .parent()
        .map(|p| p.components().map(Component::as_os_str).collect())
        .unwrap_or_default();
    for component in target.components() {
        match component {
            Component::Normal(part) => depth.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if depth.pop().is_none() {
                    return false;
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// A file's mode: its permission bits for reading and writing as given, executable for
/// all when the owner may execute it, and nothing else (no setuid, setgid or sticky).
fn file_mode(mode: u32) -> u32 {
    let base = 0o644;
    match mode & 0o100 {
        0 => base,
        _ => base | 0o111,
    }
}

fn create_new(path: &Path, mode: u32) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    // create_new never follows a symlink left at the path, and refuses an existing
    // file.
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
}

fn kind_name(kind: tar::EntryType) -> &'static str {
    match kind {
        tar::EntryType::Char => "character device",
        tar::EntryType::Block => "block device",
        tar::EntryType::Fifo => "FIFO",
        tar::EntryType::GNUSparse => "sparse file",
        _ => "special entry",
    }
}

#[cfg(test)]
mod tests;
