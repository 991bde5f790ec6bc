//! Disk pressure: which filesystems are fuller than a threshold, from `df -P` output.
//!
//! Parameters:
//! - `df`: the text output of `df -P`, usually collected by an earlier step (its result
//!   `df` is used when no parameter is given);
//! - `input-key`: read the `df -P` text from this input key instead, e.g.
//!   `operation.df.output` after a script step;
//! - `threshold`: the usage percentage at which a filesystem counts as full (default 85).
//!
//! Results: `disk.pressure` (`true` when any filesystem is at or over the threshold),
//! `disk.worst_mount`, `disk.worst_percent`, `disk.over_threshold` (mount points, comma
//! separated) and `disk.threshold`. The output is a table of every filesystem, and each
//! mount's usage is also exported as the gauge `disk_used_percent`.

use operon_sdk::{Error, Input, Metric, Output, ResultExt, bail, info};

/// What `threshold` is when not given: the usual "disk almost full" alert level.
const DEFAULT_THRESHOLD: u32 = 85;

fn run(input: Input) -> Result<Output, Error> {
    // A pipeline names where the text is (a script step's output key) in the Operation's
    // `wasm.config`, so the same module serves any collection step.
    let df = match input.param("input-key") {
        Some(key) => input.require(key)?,
        None => input
            .param("df")
            .or_else(|| input.result("df"))
            .ok_or("missing required parameter `df` (the output of `df -P`)")?,
    };
    let threshold = match input.param("threshold") {
        Some(text) => parse_threshold(text)?,
        None => DEFAULT_THRESHOLD,
    };
    let filesystems = parse_df(df)?;
    let report = Report::new(&filesystems, threshold);

    for filesystem in &filesystems {
        let mut gauge = Metric::gauge("disk_used_percent")
            .label("mount", &filesystem.mount)
            .label("filesystem", &filesystem.name);
        if let Some(node) = &input.context().node {
            gauge = gauge.label("node", node);
        }
        gauge.set(f64::from(filesystem.used_percent))?;
    }
    info!(
        "{} of {} filesystems at or over {}%; fullest is {} at {}%",
        report.over.len(),
        filesystems.len(),
        threshold,
        report.worst.mount,
        report.worst.used_percent;
        pressure = report.pressure(),
    );

    Ok(report.output())
}

operon_sdk::operation!(run);

/// One line of `df -P`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Filesystem {
    /// The device or pseudo filesystem, e.g. `/dev/sda1` or `overlay`.
    name: String,
    /// Where it is mounted; what people recognise and what results name.
    mount: String,
    /// df's `Capacity` column: used / (used + available), rounded up.
    used_percent: u32,
}

/// Parses the `threshold` parameter: a percentage, with or without the `%` sign.
fn parse_threshold(text: &str) -> Result<u32, Error> {
    let number = text.trim().trim_end_matches('%');
    match number.parse::<u32>() {
        Ok(percent) if percent <= 100 => Ok(percent),
        _ => bail!("parameter `threshold` must be a percentage from 0 to 100, got `{text}`"),
    }
}

/// Parses `df -P` output; a line that is neither the header nor a filesystem is an error
/// naming the line, since a silently skipped line could hide a full disk.
fn parse_df(text: &str) -> Result<Vec<Filesystem>, Error> {
    let mut filesystems = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with("Filesystem") {
            continue;
        }
        let parsed = parse_line(line).with_context(|| {
            format!(
                "`df` line {} (`{line}`) is not `filesystem blocks used available capacity% mount`",
                index + 1
            )
        })?;
        filesystems.extend(parsed);
    }
    if filesystems.is_empty() {
        bail!("the `df` output lists no filesystems");
    }
    Ok(filesystems)
}

/// Parses one filesystem line. `None` is a filesystem without a capacity (df prints `-`
/// for pseudo filesystems with no blocks), which cannot be under pressure.
fn parse_line(line: &str) -> Result<Option<Filesystem>, String> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    // Mount points may contain spaces, so the capacity column is found by its shape rather
    // than by position: the first `N%` (or `-`) preceded by three numeric columns.
    let capacity = (4..fields.len().saturating_sub(1))
        .find(|&at| is_capacity(fields[at]) && fields[at - 3..at].iter().all(|f| is_count(f)))
        .ok_or("no capacity column")?;
    let mount = fields[capacity + 1..].join(" ");
    let name = fields[..capacity - 3].join(" ");
    let used_percent = match fields[capacity] {
        "-" => return Ok(None),
        percent => percent
            .trim_end_matches('%')
            .parse()
            .map_err(|err| format!("capacity `{percent}`: {err}"))?,
    };
    Ok(Some(Filesystem {
        name,
        mount,
        used_percent,
    }))
}

fn is_capacity(field: &str) -> bool {
    field == "-"
        || field
            .strip_suffix('%')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn is_count(field: &str) -> bool {
    field == "-" || (!field.is_empty() && field.bytes().all(|b| b.is_ascii_digit()))
}

/// The verdict over all filesystems.
struct Report<'a> {
    threshold: u32,
    filesystems: &'a [Filesystem],
    /// The fullest filesystem; the first one listed on a tie.
    worst: &'a Filesystem,
    over: Vec<&'a Filesystem>,
}

impl<'a> Report<'a> {
    /// Needs at least one filesystem, which `parse_df` guarantees.
    fn new(filesystems: &'a [Filesystem], threshold: u32) -> Self {
        let worst = filesystems
            .iter()
            .reduce(|worst, fs| {
                if fs.used_percent > worst.used_percent {
                    fs
                } else {
                    worst
                }
            })
            .expect("parse_df returns at least one filesystem");
        let over = filesystems
            .iter()
            .filter(|fs| fs.used_percent >= threshold)
            .collect();
        Self {
            threshold,
            filesystems,
            worst,
            over,
        }
    }

    fn pressure(&self) -> bool {
        !self.over.is_empty()
    }

    fn output(&self) -> Output {
        let over: Vec<&str> = self.over.iter().map(|fs| fs.mount.as_str()).collect();
        Output::new()
            .result("disk.pressure", self.pressure())
            .result("disk.worst_mount", &self.worst.mount)
            .result("disk.worst_percent", self.worst.used_percent)
            .result("disk.over_threshold", over.join(","))
            .result("disk.threshold", self.threshold)
            .output(self.table())
    }

    fn table(&self) -> String {
        let mount_width = self.column_width("MOUNT", |fs| &fs.mount);
        let name_width = self.column_width("FILESYSTEM", |fs| &fs.name);
        let mut table = format!(
            "{:mount_width$}  {:name_width$}  USE%\n",
            "MOUNT", "FILESYSTEM"
        );
        for fs in self.filesystems {
            let flag = if fs.used_percent >= self.threshold {
                format!("  >= {}%", self.threshold)
            } else {
                String::new()
            };
            table += &format!(
                "{:mount_width$}  {:name_width$}  {:>3}%{flag}\n",
                fs.mount, fs.name, fs.used_percent
            );
        }
        table
    }

    fn column_width(&self, header: &str, field: impl Fn(&Filesystem) -> &str) -> usize {
        self.filesystems
            .iter()
            .map(|fs| field(fs).chars().count())
            .chain([header.len()])
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GNU_DF: &str = "\
Filesystem     1024-blocks      Used Available Capacity Mounted on
/dev/sda1         41152812  36000000   3000000      93% /
tmpfs              8192000         0   8192000       0% /dev/shm
/dev/sdb1        103081248  87000000  10800000      89% /var/lib/containerd
/dev/sda2          1020580    300000    650000      32% /boot
";

    fn fs(name: &str, mount: &str, used_percent: u32) -> Filesystem {
        Filesystem {
            name: name.into(),
            mount: mount.into(),
            used_percent,
        }
    }

    #[test]
    fn parses_gnu_df() {
        let filesystems = parse_df(GNU_DF).unwrap();
        assert_eq!(filesystems.len(), 4);
        assert_eq!(filesystems[0], fs("/dev/sda1", "/", 93));
        assert_eq!(filesystems[2], fs("/dev/sdb1", "/var/lib/containerd", 89));
    }

    #[test]
    fn keeps_spaces_in_mount_points() {
        let df = "//server/share 1000 900 100 90% /mnt/My Share\n";
        assert_eq!(
            parse_df(df).unwrap(),
            [fs("//server/share", "/mnt/My Share", 90)]
        );
    }

    #[test]
    fn skips_filesystems_without_capacity() {
        let df = "proc - - - - /proc\noverlay 100 50 50 50% /\n";
        assert_eq!(parse_df(df).unwrap(), [fs("overlay", "/", 50)]);
    }

    #[test]
    fn tolerates_blank_lines_and_crlf() {
        let df = "Filesystem 1024-blocks Used Available Capacity Mounted on\r\n\r\n/dev/vda1 10 9 1 90% /\r\n";
        assert_eq!(parse_df(df).unwrap(), [fs("/dev/vda1", "/", 90)]);
    }

    #[test]
    fn names_the_bad_line() {
        let df = "/dev/sda1 100 50 50 50% /\nsomething went wrong\n";
        let err = parse_df(df).unwrap_err();
        assert!(
            err.message().contains("line 2 (`something went wrong`)"),
            "{err}"
        );
    }

    #[test]
    fn rejects_a_line_without_mount_point() {
        let err = parse_df("/dev/sda1 100 50 50 50%").unwrap_err();
        assert!(err.message().contains("line 1"), "{err}");
    }

    #[test]
    fn rejects_output_without_filesystems() {
        let err =
            parse_df("Filesystem 1024-blocks Used Available Capacity Mounted on\n").unwrap_err();
        assert_eq!(err.message(), "the `df` output lists no filesystems");
    }

    #[test]
    fn parses_thresholds() {
        assert_eq!(parse_threshold("90").unwrap(), 90);
        assert_eq!(parse_threshold(" 75% ").unwrap(), 75);
        assert!(parse_threshold("101").is_err());
        assert!(
            parse_threshold("high")
                .unwrap_err()
                .message()
                .contains("`high`")
        );
    }

    #[test]
    fn reports_pressure() {
        let filesystems = parse_df(GNU_DF).unwrap();
        let output = Report::new(&filesystems, 85).output();
        assert_eq!(output.get("disk.pressure"), Some("true"));
        assert_eq!(output.get("disk.worst_mount"), Some("/"));
        assert_eq!(output.get("disk.worst_percent"), Some("93"));
        assert_eq!(
            output.get("disk.over_threshold"),
            Some("/,/var/lib/containerd")
        );
        assert!(
            output
                .text()
                .contains("/var/lib/containerd  /dev/sdb1    89%  >= 85%"),
            "{}",
            output.text()
        );
    }

    #[test]
    fn reports_no_pressure_under_the_threshold() {
        let filesystems = parse_df(GNU_DF).unwrap();
        let output = Report::new(&filesystems, 95).output();
        assert_eq!(output.get("disk.pressure"), Some("false"));
        assert_eq!(output.get("disk.over_threshold"), Some(""));
        assert_eq!(output.get("disk.worst_percent"), Some("93"));
    }
}
