//! Console blocks: parsing a page's transcripts, running them in a scratch copy of the
//! checkout, matching their output with wildcards; the CLI reference's coverage.

use super::*;

// ---------------------------------------------------------------------------------------
// Fenced code blocks

/// A fenced code block: its info string's first word and its lines (indentation of the
/// fence removed), with the line indices of its fences.
pub(super) struct Fence {
    pub(super) lang: String,
    indent: usize,
    open: usize,
    close: usize,
    pub(super) lines: Vec<String>,
}

pub(super) fn fences(text: &str) -> Vec<Fence> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let marker: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        if marker.len() >= 3 && marker.chars().all(|c| c == marker.chars().next().unwrap()) {
            let lang = trimmed[marker.len()..]
                .split(|c: char| c == ',' || c.is_whitespace())
                .next()
                .unwrap_or("")
                .to_owned();
            let mut j = i + 1;
            while j < lines.len() {
                let t = lines[j].trim();
                if t.starts_with(&marker) && t.chars().all(|c| c == marker.chars().next().unwrap())
                {
                    break;
                }
                j += 1;
            }
            let body = lines[i + 1..j.min(lines.len())]
                .iter()
                .map(|l| {
                    let strip = l.len() - l.trim_start().len();
                    l[strip.min(indent)..].to_owned()
                })
                .collect();
            out.push(Fence {
                lang,
                indent,
                open: i,
                close: j,
                lines: body,
            });
            i = j + 1;
        } else {
            i += 1;
        }
    }
    out
}

/// The lines of `text` outside fenced code blocks, with their indices.
pub(super) fn prose(text: &str) -> Vec<(usize, &str)> {
    let fenced: HashSet<usize> = fences(text).iter().flat_map(|f| f.open..=f.close).collect();
    text.lines()
        .enumerate()
        .filter(|(i, _)| !fenced.contains(i))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Console blocks

/// One command of a console block and what it is expected to print.
struct Step {
    /// The command's lines as written, `$ ` and continuations included.
    written: Vec<String>,
    code: i32,
    expected: Vec<String>,
}

fn steps(fence: &Fence) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    let mut code_seen = false;
    let mut i = 0;
    while i < fence.lines.len() {
        let line = &fence.lines[i];
        if line.starts_with("$ ") {
            let mut written = vec![line.clone()];
            while written.last().unwrap().trim_end().ends_with('\\') && i + 1 < fence.lines.len() {
                i += 1;
                written.push(fence.lines[i].clone());
            }
            steps.push(Step {
                written,
                code: 0,
                expected: Vec::new(),
            });
            code_seen = false;
        } else {
            let Some(step) = steps.last_mut() else {
                return Err(format!("`{line}` comes before the first `$ ` command"));
            };
            match line.strip_prefix("? ") {
                Some(code) if step.expected.is_empty() && !code_seen => {
                    step.code = code
                        .trim()
                        .parse()
                        .map_err(|_| format!("`{line}`: an exit code is a number"))?;
                    code_seen = true;
                }
                _ => step.expected.push(line.trim_end().to_owned()),
            }
        }
        i += 1;
    }
    for step in &mut steps {
        while step.expected.last().is_some_and(|l| l.is_empty()) {
            step.expected.pop();
        }
    }
    Ok(steps)
}

/// The command of a step as one line, continuations joined.
fn command_line(step: &Step) -> String {
    let mut out = String::new();
    for (n, line) in step.written.iter().enumerate() {
        let line = if n == 0 { &line[2..] } else { line.as_str() };
        let line = line.trim_end();
        out.push_str(line.strip_suffix('\\').unwrap_or(line));
        out.push(' ');
    }
    out
}

/// Splits a command into words as a POSIX shell would, refusing what would make the
/// shell do more than run one program.
fn words(command: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '#' if !in_word => break,
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("a `'` is not closed".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("a `\"` is not closed".into()),
                        },
                        Some(c @ ('$' | '`')) => {
                            return Err(format!("`{c}` in double quotes: no expansions here"));
                        }
                        Some(c) => word.push(c),
                        None => return Err("a `\"` is not closed".into()),
                    }
                }
            }
            '$' if chars.peek() == Some(&'\'') => {
                chars.next();
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some('\\') => match chars.next() {
                            Some('n') => word.push('\n'),
                            Some('t') => word.push('\t'),
                            Some(c) => word.push(c),
                            None => return Err("a `$'` is not closed".into()),
                        },
                        Some(c) => word.push(c),
                        None => return Err("a `$'` is not closed".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(c) = chars.next() {
                    word.push(c);
                }
            }
            '|' | '&' | ';' | '<' | '>' | '$' | '`' | '*' | '?' | '(' | ')' | '[' => {
                return Err(format!(
                    "`{c}`: a console block runs single commands, without shell syntax"
                ));
            }
            '~' if !in_word => return Err("`~`: write the path out".into()),
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// A scratch copy of the checkout for one page's console blocks: the repository's
/// entries linked in, `target/wasm32-wasip2/release` the guests the tests build (where
/// `cargo build --release --target wasm32-wasip2` would put them), and a `$HOME` of its
/// own. Commands may write files here without touching the repository.
struct Sandbox {
    root: tempfile::TempDir,
    home: tempfile::TempDir,
    guests: PathBuf,
}

impl Sandbox {
    fn new() -> Sandbox {
        let root = tempfile::tempdir().unwrap();
        for entry in std::fs::read_dir(repo()).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name();
            if name == "target" || name == ".git" {
                continue;
            }
            std::os::unix::fs::symlink(entry.path(), root.path().join(&name)).unwrap();
        }
        let guests = Path::new(operon_tests::DISK_PRESSURE)
            .parent()
            .unwrap()
            .to_owned();
        let release = root.path().join("target/wasm32-wasip2");
        std::fs::create_dir_all(&release).unwrap();
        std::os::unix::fs::symlink(&guests, release.join("release")).unwrap();
        Sandbox {
            root,
            home: tempfile::tempdir().unwrap(),
            guests,
        }
    }

    /// Runs one program with the environment of a fresh login (PATH only) plus `env`;
    /// returns its exit code and what it printed on stdout and stderr together.
    fn run(
        &self,
        cwd: &Path,
        env: &[(String, String)],
        args: &[String],
    ) -> Result<(i32, String), String> {
        // Compiled modules outlive the run, as for the other tests: set through
        // XDG_CACHE_HOME, since OPERON_CACHE_DIR would show in the help pages' `[env: ]`.
        let cache = operon_tests::test_cache_dir()
            .parent()
            .unwrap()
            .join("book-cache");
        let (mut reader, writer) = std::io::pipe().unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_operon"));
        command
            .args(args)
            .current_dir(cwd)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("XDG_CACHE_HOME", &cache)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(writer.try_clone().unwrap())
            .stderr(writer);
        let mut child = command.spawn().expect("operon starts");
        drop(command);
        let output = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            reader.read_to_end(&mut bytes).unwrap();
            bytes
        });
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                child.kill().unwrap();
                child.wait().unwrap();
                return Err(format!("timed out after {COMMAND_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let output = String::from_utf8_lossy(&output.join().unwrap()).into_owned();
        Ok((status.code().unwrap_or(-1), self.redact(&output)))
    }

    /// What differs from one machine or run to the next, replaced by placeholders.
    fn redact(&self, text: &str) -> String {
        static UUID: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b").unwrap()
        });
        static TIME: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})").unwrap()
        });
        static DIGEST: LazyLock<Regex> =
            LazyLock::new(|| Regex::new(r"sha256:[0-9a-f]{64}").unwrap());
        let mut text = text.replace(
            &self.guests.display().to_string(),
            "[ROOT]/target/wasm32-wasip2/release",
        );
        for (path, name) in [
            (self.root.path().to_owned(), "[ROOT]"),
            (repo(), "[ROOT]"),
            (self.home.path().to_owned(), "[HOME]"),
        ] {
            text = text.replace(&path.display().to_string(), name);
        }
        let text = UUID.replace_all(&text, "[UUID]");
        let text = TIME.replace_all(&text, "[TIMESTAMP]");
        let text = DIGEST.replace_all(&text, "sha256:[DIGEST]");
        text.lines()
            .map(str::trim_end)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

pub(super) fn output_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(|l| l.trim_end().to_owned()).collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines
}

fn is_ellipsis(pattern: &str) -> bool {
    pattern.trim() == "..."
}

/// Whether `line` matches `pattern`, where `[..]` stands for any text.
fn line_matches(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split("[..]").collect();
    if parts.len() == 1 {
        return pattern == line;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !line.starts_with(first) {
        return false;
    }
    let mut at = first.len();
    for part in &parts[1..parts.len() - 1] {
        match line[at..].find(part) {
            Some(found) => at += found + part.len(),
            None => return false,
        }
    }
    line.len() >= at + last.len() && line[at..].ends_with(last)
}

/// Whether every line of `actual` is matched by `expected`, in order.
fn output_matches(expected: &[String], actual: &[String]) -> bool {
    let (n, m) = (expected.len(), actual.len());
    // full[i][j]: expected[i..] matches actual[j..].
    let mut full = vec![vec![false; m + 1]; n + 1];
    full[n][m] = true;
    for i in (0..n).rev() {
        for j in (0..=m).rev() {
            full[i][j] = if is_ellipsis(&expected[i]) {
                full[i + 1][j] || (j < m && full[i][j + 1])
            } else {
                j < m && line_matches(&expected[i], &actual[j]) && full[i + 1][j + 1]
            };
        }
    }
    full[0][0]
}

pub(super) enum Edit {
    /// An expected line that matched (kept as written, wildcards and all).
    Kept(String),
    /// A `...` line, with the actual lines it stands for.
    Ellipsis(String),
    /// An expected line nothing matched.
    Removed(String),
    /// An actual line no expected line matched.
    Added(String),
}

/// The alignment of `expected` and `actual` that matches the most expected lines: what
/// blessing writes (matched lines keep their wildcards) and what a failure shows.
pub(super) fn align(expected: &[String], actual: &[String]) -> Vec<Edit> {
    let (n, m) = (expected.len(), actual.len());
    let mut best = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..=m).rev() {
            best[i][j] = if is_ellipsis(&expected[i]) {
                let absorb = if j < m { best[i][j + 1] } else { 0 };
                absorb.max(best[i + 1][j])
            } else {
                let matched = if j < m && line_matches(&expected[i], &actual[j]) {
                    1 + best[i + 1][j + 1]
                } else {
                    0
                };
                let added = if j < m { best[i][j + 1] } else { 0 };
                matched.max(added).max(best[i + 1][j])
            };
        }
    }
    let mut edits = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i == n {
            edits.push(Edit::Added(actual[j].clone()));
            j += 1;
        } else if is_ellipsis(&expected[i]) {
            if j < m && best[i][j + 1] == best[i][j] {
                j += 1;
            } else {
                edits.push(Edit::Ellipsis(expected[i].clone()));
                i += 1;
            }
        } else if j < m
            && line_matches(&expected[i], &actual[j])
            && best[i][j] == 1 + best[i + 1][j + 1]
        {
            edits.push(Edit::Kept(expected[i].clone()));
            i += 1;
            j += 1;
        } else if j < m && best[i][j] == best[i][j + 1] {
            edits.push(Edit::Added(actual[j].clone()));
            j += 1;
        } else {
            edits.push(Edit::Removed(expected[i].clone()));
            i += 1;
        }
    }
    edits
}

fn blessed(edits: &[Edit]) -> Vec<String> {
    edits
        .iter()
        .filter_map(|edit| match edit {
            Edit::Kept(line) | Edit::Ellipsis(line) | Edit::Added(line) => Some(line.clone()),
            Edit::Removed(_) => None,
        })
        .collect()
}

pub(super) fn diff(edits: &[Edit]) -> String {
    let mut out = String::new();
    for edit in edits {
        let (sign, line) = match edit {
            Edit::Kept(line) | Edit::Ellipsis(line) => (' ', line),
            Edit::Removed(line) => ('-', line),
            Edit::Added(line) => ('+', line),
        };
        writeln!(out, "    {sign} {line}").unwrap();
    }
    out
}

/// A difference between a page and what its commands do.
struct Failure {
    message: String,
    /// Whether blessing fixes it (an output or an exit code), or the page must change (a
    /// block that cannot run).
    blessable: bool,
}

/// Runs the console blocks of one page; returns its text with the outputs blessed, the
/// failures and the number of commands run.
fn run_page(page: &Path) -> (String, Vec<Failure>, usize) {
    let text = read(page);
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut failures = Vec::new();
    let mut sandbox = None;
    let mut commands = 0;
    // Last block first, so that rewriting one leaves the line numbers of the others.
    for fence in fences(&text).iter().rev().filter(|f| f.lang == "console") {
        let place = format!("{}:{}", relative(page), fence.open + 1);
        let steps = match steps(fence) {
            Ok(steps) => steps,
            Err(e) => {
                failures.push(Failure {
                    message: format!("{place}: {e}"),
                    blessable: false,
                });
                continue;
            }
        };
        let sandbox: &Sandbox = sandbox.get_or_insert_with(Sandbox::new);
        let mut cwd = sandbox.root.path().to_owned();
        let mut body = Vec::new();
        for step in &steps {
            commands += 1;
            let command = command_line(step);
            let (code, output) = match run_step(sandbox, &mut cwd, &command) {
                Ok(result) => result,
                Err(e) => {
                    failures.push(Failure {
                        message: format!("{place}: `{}`: {e}", command.trim()),
                        blessable: false,
                    });
                    (step.code, step.expected.join("\n"))
                }
            };
            let actual = output_lines(&output);
            body.extend(step.written.iter().cloned());
            if code != 0 {
                body.push(format!("? {code}"));
            }
            if code != step.code {
                failures.push(Failure {
                    message: format!(
                        "{place}: `{}` exited with {code}, not {}; it printed:\n{output}",
                        command.trim(),
                        step.code
                    ),
                    blessable: true,
                });
            }
            if output_matches(&step.expected, &actual) {
                body.extend(step.expected.iter().cloned());
            } else {
                let edits = align(&step.expected, &actual);
                failures.push(Failure {
                    message: format!(
                        "{place}: `{}` printed something else (- the page, + the command):\n{}",
                        command.trim(),
                        diff(&edits)
                    ),
                    blessable: true,
                });
                body.extend(blessed(&edits));
            }
        }
        let indent = " ".repeat(fence.indent);
        let body = body.into_iter().map(|l| {
            if l.is_empty() {
                l
            } else {
                format!("{indent}{l}")
            }
        });
        lines.splice(fence.open + 1..fence.close, body);
    }
    let mut blessed = lines.join("\n");
    blessed.push('\n');
    (blessed, failures, commands)
}

/// Runs one command of a block in `cwd` (which `cd` changes).
fn run_step(sandbox: &Sandbox, cwd: &mut PathBuf, command: &str) -> Result<(i32, String), String> {
    let mut words = words(command)?.into_iter().peekable();
    let mut env = Vec::new();
    while let Some(word) = words.next_if(|w| {
        w.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    }) {
        let (name, value) = word.split_once('=').unwrap();
        env.push((name.to_owned(), value.to_owned()));
    }
    let program = words.next().ok_or("no command")?;
    let args: Vec<String> = words.collect();
    match program.as_str() {
        "operon" => sandbox.run(cwd, &env, &args),
        "cd" => {
            let [dir] = args.as_slice() else {
                return Err("`cd` takes one directory".into());
            };
            let target = cwd.join(dir);
            if Path::new(dir).is_absolute()
                || !target.is_dir()
                || Path::new(dir)
                    .components()
                    .any(|c| matches!(c, Component::ParentDir))
            {
                return Err(format!(
                    "`cd {dir}`: a directory of the checkout, without `..`"
                ));
            }
            *cwd = target;
            Ok((0, String::new()))
        }
        other => Err(format!(
            "`{other}`: console blocks run `operon` and `cd` only; show other commands in a `sh` block"
        )),
    }
}

#[test]
fn console_examples_print_what_the_book_shows() {
    let mut failures = Vec::new();
    let mut commands = 0;
    let mut rewritten = Vec::new();
    for page in pages() {
        let (text, page_failures, page_commands) = run_page(&page);
        commands += page_commands;
        if blessing() && page_failures.iter().any(|f| f.blessable) {
            std::fs::write(&page, text).unwrap();
            rewritten.push(relative(&page));
        }
        failures.extend(
            page_failures
                .into_iter()
                .filter(|f| !(blessing() && f.blessable))
                .map(|f| f.message),
        );
    }
    assert!(commands > 0, "no console block found under docs/src");
    if blessing() {
        eprintln!(
            "{commands} commands run; rewritten: {}",
            rewritten.join(", ")
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {commands} book commands differ from the book ({BLESS_HINT} rewrites the outputs):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

// ---------------------------------------------------------------------------------------
// The CLI reference

/// The subcommands listed in the `Commands:` section of a help page (`help` aside).
fn subcommands_of(path: &[String]) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_operon"))
        .args(path)
        .arg("--help")
        .env_clear()
        .output()
        .unwrap();
    assert!(out.status.success(), "operon {path:?} --help");
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_cli_reference_shows_the_help_of_every_subcommand() {
    let page = book_src().join("reference/cli.md");
    let text = read(&page);
    let shown: BTreeSet<String> = fences(&text)
        .iter()
        .filter(|f| f.lang == "console")
        .flat_map(|f| steps(f).unwrap())
        .map(|step| {
            command_line(&step)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let mut missing = Vec::new();
    let mut queue = vec![Vec::<String>::new()];
    while let Some(path) = queue.pop() {
        let command = ["operon"]
            .into_iter()
            .chain(path.iter().map(String::as_str))
            .chain(["--help"])
            .collect::<Vec<_>>()
            .join(" ");
        if !shown.contains(&command) {
            missing.push(command);
        }
        for sub in subcommands_of(&path) {
            let mut next = path.clone();
            next.push(sub);
            queue.push(next);
        }
    }
    assert!(
        missing.is_empty(),
        "docs/src/reference/cli.md has no console block for:\n  {}\n(add `$ COMMAND` blocks, then {BLESS_HINT})",
        missing.join("\n  ")
    );
}

// ---------------------------------------------------------------------------------------
// The runner's own rules

#[test]
fn wildcards_match_as_documented() {
    let lines = |s: &str| s.lines().map(str::to_owned).collect::<Vec<_>>();
    assert!(line_matches("took [..] ms", "took 12 ms"));
    assert!(line_matches("[..]", ""));
    assert!(line_matches("a [..] b [..] c", "a 1 b 2 b 3 c"));
    assert!(!line_matches("took [..] ms", "took 12 s"));
    assert!(output_matches(&lines("a\n...\nd"), &lines("a\nb\nc\nd")));
    assert!(output_matches(&lines("a\n...\nd"), &lines("a\nd")));
    assert!(output_matches(&lines("...\nd"), &lines("d")));
    assert!(!output_matches(&lines("a\nd"), &lines("a\nb\nd")));
    let edits = align(&lines("a\n...\nd\n[..] ms"), &lines("a\nb\nd\n3 ms\nnew"));
    assert_eq!(blessed(&edits), lines("a\n...\nd\n[..] ms\nnew"));
    assert_eq!(
        words(r#"operon run "a b" 'c d' $'e\nf' g\ h # comment"#).unwrap(),
        ["operon", "run", "a b", "c d", "e\nf", "g h"]
    );
    assert!(words("operon run | less").is_err());
    assert!(words("operon run \"$HOME\"").is_err());
}
