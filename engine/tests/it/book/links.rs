//! Links and anchors of the book, the README and deploy/README.md; SUMMARY.md's pages.

use super::*;
use console::prose;

// ---------------------------------------------------------------------------------------
// Links

/// The ids mdBook (and GitHub) give the headings of a page: the heading's text, in
/// lower case, its whitespace as `-`, other punctuation but `-` and `_` dropped; a
/// repeated id gets `-1`, `-2`...
fn heading_ids(text: &str) -> HashSet<String> {
    static LINK: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\[([^\]]*)\]\([^)]*\)").unwrap());
    let mut ids = HashSet::new();
    for (_, line) in prose(text) {
        let Some(heading) = line
            .strip_prefix('#')
            .map(|l| l.trim_start_matches('#'))
            .filter(|l| l.starts_with(' '))
        else {
            continue;
        };
        let heading = LINK.replace_all(heading, "$1").replace('`', "");
        let id: String = heading
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| {
                if c.is_alphanumeric() || c == '_' || c == '-' {
                    Some(c)
                } else if c.is_whitespace() {
                    Some('-')
                } else {
                    None
                }
            })
            .collect();
        let mut unique = id.clone();
        let mut n = 0;
        while !ids.insert(unique.clone()) {
            n += 1;
            unique = format!("{id}-{n}");
        }
    }
    ids
}

/// The link targets of a Markdown text outside code, with their line numbers.
fn link_targets(text: &str) -> Vec<(usize, String)> {
    static INLINE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r#"\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)"#).unwrap());
    static DEFINITION: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)").unwrap());
    static CODE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"`+[^`]*`+").unwrap());
    let mut out = Vec::new();
    for (n, line) in prose(text) {
        let line = CODE.replace_all(line, "``");
        for found in INLINE
            .captures_iter(&line)
            .chain(DEFINITION.captures_iter(&line))
        {
            out.push((n + 1, found[1].to_owned()));
        }
    }
    out
}

/// The repository's URL (`repository` of the workspace's Cargo.toml): links to files
/// outside the book are written with it, so that they work in the built book as well.
fn repository_url() -> String {
    let manifest = read(&repo().join("Cargo.toml"));
    let line = manifest
        .lines()
        .find(|l| l.starts_with("repository = "))
        .expect("Cargo.toml names the repository");
    line.split('"')
        .nth(1)
        .unwrap()
        .trim_end_matches('/')
        .to_owned()
}

/// `path` with `.` and `..` resolved, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// What is wrong with one link of `file`, if anything.
fn check_link(file: &Path, target: &str, repository: &str) -> Option<String> {
    let in_book = file.starts_with(book_src());
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let resolved = if path.is_empty() {
        file.to_owned()
    } else if let Some(rest) = [
        format!("{repository}/blob/main/"),
        format!("{repository}/tree/main/"),
    ]
    .iter()
    .find_map(|prefix| path.strip_prefix(prefix.as_str()))
    {
        repo().join(rest)
    } else if path.contains("://") || path.starts_with("mailto:") {
        return None;
    } else if path.starts_with(repository) {
        return Some(format!(
            "`{target}`: link to the repository's files as {repository}/blob/main/PATH"
        ));
    } else {
        normalize(&file.parent().unwrap().join(path))
    };
    if !resolved.starts_with(repo()) {
        return Some(format!("`{target}` leads outside the repository"));
    }
    if !resolved.exists() {
        return Some(format!(
            "`{target}`: {} does not exist",
            relative(&resolved)
        ));
    }
    let relative_link = !path.is_empty() && !path.contains("://");
    if in_book && relative_link && !resolved.starts_with(book_src()) {
        return Some(format!(
            "`{target}` leads out of the book, which breaks in the built HTML: \
             write it as {repository}/blob/main/{}",
            relative(&resolved)
        ));
    }
    if let Some(anchor) = anchor {
        if resolved.extension().is_some_and(|e| e == "md") {
            if !heading_ids(&read(&resolved)).contains(anchor) {
                return Some(format!(
                    "`{target}`: {} has no heading with the id `{anchor}`",
                    relative(&resolved)
                ));
            }
        } else if resolved.is_dir() || !anchor.starts_with('L') {
            return Some(format!("`{target}`: an anchor into a file that is no page"));
        }
    }
    None
}

#[test]
fn links_lead_to_files_and_headings_that_exist() {
    let repository = repository_url();
    let mut files = pages();
    files.extend(["README.md", "deploy/README.md"].map(|f| repo().join(f)));
    let mut broken = Vec::new();
    let mut count = 0;
    for file in &files {
        for (line, target) in link_targets(&read(file)) {
            count += 1;
            if let Some(problem) = check_link(file, &target, &repository) {
                broken.push(format!("{}:{line}: {problem}", relative(file)));
            }
        }
    }
    assert!(count > 0, "no link found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_summary_lists_every_page_and_only_pages_that_exist() {
    let summary_path = book_src().join("SUMMARY.md");
    let summary = read(&summary_path);
    let mut listed = BTreeSet::new();
    let mut problems = Vec::new();
    for (line, target) in link_targets(&summary) {
        if target.is_empty() {
            problems.push(format!("SUMMARY.md:{line}: an entry without a page"));
            continue;
        }
        let path = normalize(&book_src().join(&target));
        if !path.is_file() {
            problems.push(format!("SUMMARY.md:{line}: `{target}` does not exist"));
        }
        if !listed.insert(path) {
            problems.push(format!("SUMMARY.md:{line}: `{target}` is listed twice"));
        }
    }
    for page in pages() {
        if page != summary_path && !listed.contains(&page) {
            problems.push(format!(
                "{} is not in SUMMARY.md, so mdBook leaves it out",
                relative(&page)
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
