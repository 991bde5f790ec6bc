use super::*;
use std::os::unix::fs::PermissionsExt as _;

/// One entry of a hand-made archive: its raw name, kind, link name and bytes.
struct Raw<'a> {
    name: &'a [u8],
    kind: tar::EntryType,
    link: &'a [u8],
    data: &'a [u8],
    mode: u32,
}

fn file<'a>(name: &'a str, data: &'a [u8]) -> Raw<'a> {
    Raw {
        name: name.as_bytes(),
        kind: tar::EntryType::Regular,
        link: b"",
        data,
        mode: 0o644,
    }
}

fn of_kind<'a>(name: &'a str, kind: tar::EntryType, link: &'a str) -> Raw<'a> {
    Raw {
        name: name.as_bytes(),
        kind,
        link: link.as_bytes(),
        data: b"",
        mode: 0o644,
    }
}

/// A tar written header by header, so that names the tar crate's builder refuses
/// (`..`, absolute ones) can be written too.
fn archive(entries: &[Raw]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for entry in entries {
        let mut header = tar::Header::new_old();
        let old = header.as_old_mut();
        old.name[..entry.name.len()].copy_from_slice(entry.name);
        old.linkname[..entry.link.len()].copy_from_slice(entry.link);
        header.set_entry_type(entry.kind);
        header.set_mode(entry.mode);
        header.set_size(entry.data.len() as u64);
        header.set_cksum();
        builder.append(&header, entry.data).unwrap();
    }
    builder.into_inner().unwrap()
}

fn refusal(bytes: &[u8], limits: &Limits) -> (String, Refusal) {
    let root = tempfile::tempdir().unwrap();
    match unpack(bytes, &root.path().join("m"), limits).unwrap_err() {
        ArchiveError::Refused { entry, reason } => (entry, reason),
        other => panic!("expected a refusal, got {other}"),
    }
}

#[test]
fn a_packed_module_unpacks_the_same_and_packs_reproducibly() {
    let root = tempfile::tempdir().unwrap();
    let module = root.path().join("echo");
    std::fs::create_dir_all(module.join("hooks")).unwrap();
    std::fs::create_dir_all(module.join("templates")).unwrap();
    std::fs::write(module.join("Chart.yaml"), "name: echo\nversion: 0.1.0\n").unwrap();
    std::fs::write(module.join("templates/cm.yaml"), "kind: ConfigMap\n").unwrap();
    std::fs::write(module.join("hooks/a.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(
        module.join("hooks/a.sh"),
        std::fs::Permissions::from_mode(0o4700),
    )
    .unwrap();
    std::os::unix::fs::symlink("templates/cm.yaml", module.join("link.yaml")).unwrap();
    std::fs::write(module.join(".hidden"), "left out").unwrap();

    let packed = pack(&module).unwrap();
    assert_eq!(packed, pack(&module).unwrap(), "packing is reproducible");
    let dest = root.path().join("unpacked");
    unpack(&packed, &dest, &Limits::default()).unwrap();
    assert_eq!(
        std::fs::read_to_string(dest.join("Chart.yaml")).unwrap(),
        "name: echo\nversion: 0.1.0\n"
    );
    let hook = std::fs::metadata(dest.join("hooks/a.sh")).unwrap();
    assert_eq!(
        hook.permissions().mode() & 0o7777,
        0o755,
        "no setuid, but runnable"
    );
    assert_eq!(
        std::fs::read_link(dest.join("link.yaml")).unwrap(),
        Path::new("templates/cm.yaml")
    );
    assert!(!dest.join(".hidden").exists());
}

#[test]
fn paths_that_leave_the_module_are_refused() {
    let limits = Limits::default();
    let (entry, reason) = refusal(&archive(&[file("../evil", b"x")]), &limits);
    assert_eq!(
        (entry.as_str(), reason),
        ("../evil", Refusal::ParentDirectory)
    );
    let (entry, reason) = refusal(&archive(&[file("hooks/../../x", b"x")]), &limits);
    assert_eq!(
        (entry.as_str(), reason),
        ("hooks/../../x", Refusal::ParentDirectory)
    );
    let (entry, reason) = refusal(&archive(&[file("/etc/passwd", b"x")]), &limits);
    assert_eq!((entry.as_str(), reason), ("/etc/passwd", Refusal::Absolute));
}

#[test]
fn device_files_and_fifos_are_refused() {
    for (kind, name) in [
        (tar::EntryType::Char, "character device"),
        (tar::EntryType::Block, "block device"),
        (tar::EntryType::Fifo, "FIFO"),
    ] {
        let (entry, reason) = refusal(&archive(&[of_kind("dev", kind, "")]), &Limits::default());
        assert_eq!((entry.as_str(), reason), ("dev", Refusal::Kind(name)));
    }
}

#[test]
fn symlinks_stay_inside_the_module() {
    let limits = Limits::default();
    for target in ["/etc/passwd", "../../outside", "x/../../../outside", ""] {
        let bytes = archive(&[of_kind("hooks/link", tar::EntryType::Symlink, target)]);
        let (entry, reason) = refusal(&bytes, &limits);
        assert_eq!(
            (entry.as_str(), reason),
            ("hooks/link", Refusal::SymlinkOutside(target.to_owned()))
        );
    }
    // Inside is fine, even up and down again.
    let root = tempfile::tempdir().unwrap();
    let bytes = archive(&[
        file("values.yaml", b"{}"),
        of_kind("hooks/values", tar::EntryType::Symlink, "../values.yaml"),
    ]);
    unpack(&bytes, &root.path().join("m"), &limits).unwrap();
    assert_eq!(
        std::fs::read(root.path().join("m/hooks/values")).unwrap(),
        b"{}"
    );
}

#[test]
fn nothing_is_written_through_a_symlink_or_over_an_entry() {
    let limits = Limits::default();
    // A symlink to a directory inside, then a file under it: refused, though the link
    // itself stays inside (a second link could be swapped in otherwise).
    let bytes = archive(&[
        of_kind("dir", tar::EntryType::Directory, ""),
        of_kind("link", tar::EntryType::Symlink, "dir"),
        file("link/file", b"x"),
    ]);
    let (entry, reason) = refusal(&bytes, &limits);
    assert_eq!(
        (entry.as_str(), reason),
        ("link/file", Refusal::UnderSymlink("link".to_owned()))
    );
    let bytes = archive(&[
        of_kind("x", tar::EntryType::Symlink, "y"),
        file("x", b"over"),
    ]);
    let (entry, reason) = refusal(&bytes, &limits);
    assert_eq!(
        (entry.as_str(), reason),
        ("x", Refusal::UnderSymlink("x".to_owned()))
    );
    let (entry, reason) = refusal(&archive(&[file("a", b"1"), file("a", b"2")]), &limits);
    assert_eq!((entry.as_str(), reason), ("a", Refusal::Duplicate));
}

#[test]
fn hard_links_copy_files_of_the_archive_only() {
    let limits = Limits::default();
    let (entry, reason) = refusal(
        &archive(&[of_kind("h", tar::EntryType::Link, "/etc/passwd")]),
        &limits,
    );
    assert_eq!(
        (entry.as_str(), reason),
        ("h", Refusal::HardLink("/etc/passwd".to_owned()))
    );
    let root = tempfile::tempdir().unwrap();
    let bytes = archive(&[file("a", b"same"), of_kind("b", tar::EntryType::Link, "a")]);
    unpack(&bytes, &root.path().join("m"), &limits).unwrap();
    assert_eq!(std::fs::read(root.path().join("m/b")).unwrap(), b"same");
}

#[test]
fn limits_stop_a_hostile_archive() {
    let small = Limits {
        entries: 3,
        file_bytes: 10,
        total_bytes: 15,
    };
    let (entry, reason) = refusal(&archive(&[file("big", &[b'x'; 11])]), &small);
    assert_eq!((entry.as_str(), reason), ("big", Refusal::FileTooLarge(10)));
    let (entry, reason) = refusal(
        &archive(&[file("a", &[b'x'; 10]), file("b", &[b'x'; 10])]),
        &small,
    );
    assert_eq!((entry.as_str(), reason), ("b", Refusal::TotalTooLarge(15)));
    let many: Vec<String> = (0..4).map(|i| format!("f{i}")).collect();
    let entries: Vec<Raw> = many.iter().map(|n| file(n, b"")).collect();
    let (entry, reason) = refusal(&archive(&entries), &small);
    assert_eq!((entry.as_str(), reason), ("f3", Refusal::TooManyEntries(3)));

    // A gzip bomb: a megabyte of zeros in a file header that claims it all, gzipped
    // to a few kilobytes; refused from the header, before the bytes are inflated.
    let bomb = vec![0u8; 1 << 20];
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut gz, &archive(&[file("zeros", &bomb)])).unwrap();
    let gz = gz.finish().unwrap();
    assert!(gz.len() < 16 * 1024, "{}", gz.len());
    let (entry, reason) = refusal(&gz, &Limits::default_with_total(1 << 16));
    assert_eq!(
        (entry.as_str(), reason),
        ("zeros", Refusal::FileTooLarge(1 << 16))
    );
}

#[test]
fn something_that_is_no_tar_is_malformed() {
    let root = tempfile::tempdir().unwrap();
    let err = unpack(
        b"\x1f\x8bnot gzip",
        &root.path().join("m"),
        &Limits::default(),
    )
    .unwrap_err();
    assert!(matches!(err, ArchiveError::Malformed(_)), "{err}");
}

impl Limits {
    fn default_with_total(total: u64) -> Self {
        Self {
            file_bytes: total,
            total_bytes: total,
            ..Self::default()
        }
    }
}
