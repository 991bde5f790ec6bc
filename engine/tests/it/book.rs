//! The book under `docs/` kept true to the code: every `console` block of its pages runs
//! and prints what the page shows, the CLI reference covers every subcommand clap knows,
//! the CRD reference is what the API types produce, and every link leads to a page, a
//! file or a heading that exists.
//!
//! `OPERON_BLESS=1 cargo test -p operon-engine --test it book::` rewrites what drifted: the
//! outputs of the console blocks (keeping the wildcards that still match) and
//! `docs/src/reference/crds.md`. Read the diff before committing it.
//!
//! A console block is a transcript. `$ ` starts a command (a line ending in `\` goes on
//! to the next), the lines after it are what it prints, stdout and stderr interleaved as
//! a terminal shows them, and `? N` as the first of them is its exit code (0 when
//! absent). Commands are `operon ...` (optionally after `NAME=value` words) and `cd DIR`;
//! quoting is the shell's (`'...'`, `"..."`, `$'...\n...'`), with no pipes, redirections
//! or expansions, so each block can be pasted into a shell at the repository's root. In
//! the expected output, `[..]` matches any text within a line and a line `...` any
//! number of lines; paths under the checkout print as `[ROOT]`, `$HOME` as `[HOME]`, and
//! uids, RFC 3339 times and sha256 digests as `[UUID]`, `[TIMESTAMP]` and
//! `sha256:[DIGEST]`. Commands that need a cluster, a registry or other programs belong in
//! `sh` blocks, which are not run.

use regex::Regex;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

/// How long one command of a console block may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(180);

/// The workspace's root: the directory above this package that holds the book.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("docs/book.toml").is_file())
        .expect("docs/book.toml above the package")
        .to_owned()
}

fn book_src() -> PathBuf {
    repo().join("docs/src")
}

fn blessing() -> bool {
    std::env::var("OPERON_BLESS").is_ok_and(|v| v == "1")
}

const BLESS_HINT: &str = "OPERON_BLESS=1 cargo test -p operon-engine --test it book::";

/// Every page of the book, sorted.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&book_src(), &mut out);
    out.sort();
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn relative(path: &Path) -> String {
    path.strip_prefix(repo())
        .unwrap_or(path)
        .display()
        .to_string()
}

mod console;
mod crds;
mod links;

use console::fences;

// ---------------------------------------------------------------------------------------
// The README

#[test]
fn the_readme_is_a_front_page_whose_commands_the_book_repeats() {
    let readme = read(&repo().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines < 200,
        "README.md has {lines} lines: it is the front page, the book under docs/ holds the rest"
    );
    let started = read(&book_src().join("getting-started.md"));
    let commands: Vec<String> = fences(&readme)
        .into_iter()
        .filter(|f| f.lang == "sh")
        .take(2)
        .map(|f| f.lines.join("\n"))
        .collect();
    assert_eq!(commands.len(), 2, "the README's first two sh blocks");
    for command in &commands {
        assert!(
            started.contains(command.as_str()),
            "docs/src/getting-started.md does not give the README's command:\n{command}"
        );
    }
}
