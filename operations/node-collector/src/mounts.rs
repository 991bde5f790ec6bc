//! The mount list, from `mountinfo` (proc(5)): PID 1's when readable, else the reading
//! process's own.

use operon_sdk::Error;
use serde_json::{Value, json};
use std::path::Path;

/// Reads the mounts of PID 1's mount namespace (or this process's) under `proc`.
pub fn collect(proc: &Path) -> Result<Vec<Value>, Error> {
    let text = std::fs::read_to_string(proc.join("1/mountinfo"))
        .or_else(|_| std::fs::read_to_string(proc.join("self/mountinfo")))
        .map_err(|e| {
            Error::new(format!(
                "cannot read mountinfo under {}: {e}",
                proc.display()
            ))
        })?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            mount(line).ok_or_else(|| {
                Error::new(format!("mountinfo line {} does not parse: {line:?}", i + 1))
            })
        })
        .collect()
}

/// One line of mountinfo: `ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...] -
/// FSTYPE SOURCE SUPEROPTIONS`.
pub fn mount(line: &str) -> Option<Value> {
    let fields: Vec<&str> = line.split(' ').collect();
    let separator = fields.iter().position(|f| *f == "-")?;
    if separator < 6 || fields.len() < separator + 4 {
        return None;
    }
    let (major, minor) = fields[2].split_once(':')?;
    Some(json!({
        "ID": fields[0].parse::<u64>().ok()?,
        "Parent": fields[1].parse::<u64>().ok()?,
        "Major": major.parse::<u64>().ok()?,
        "Minor": minor.parse::<u64>().ok()?,
        "Root": unescape(fields[3]),
        "Mountpoint": unescape(fields[4]),
        "Options": fields[5],
        "Optional": fields[6..separator].join(" "),
        "FSType": fields[separator + 1],
        "Source": unescape(fields[separator + 2]),
        "VFSOptions": fields[separator + 3],
    }))
}

/// Undoes the kernel's octal escapes of space, tab, newline and backslash (`\040`).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(digits) => {
                let value = digits
                    .iter()
                    .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mountinfo_line_is_read_with_its_optional_fields_and_escapes() {
        let m = mount(
            "36 35 98:0 /mnt1 /mnt\\040two rw,noatime master:1 shared:2 - ext3 /dev/root rw,errors=continue",
        )
        .unwrap();
        assert_eq!(m["ID"], 36);
        assert_eq!(m["Parent"], 35);
        assert_eq!(m["Major"], 98);
        assert_eq!(m["Minor"], 0);
        assert_eq!(m["Mountpoint"], "/mnt two");
        assert_eq!(m["Optional"], "master:1 shared:2");
        assert_eq!(m["FSType"], "ext3");
        assert_eq!(m["Source"], "/dev/root");
        assert_eq!(m["VFSOptions"], "rw,errors=continue");
    }

    #[test]
    fn a_line_without_its_separator_or_fields_does_not_parse() {
        assert!(mount("36 35 98:0 /mnt1 /mnt2 rw ext3 /dev/root rw").is_none());
        assert!(mount("36 35 98:0 /mnt1 /mnt2 rw - ext3").is_none());
    }

    #[test]
    fn this_machine_s_mounts_are_listed() {
        let mounts = collect(Path::new("/proc")).unwrap();
        assert!(mounts.iter().any(|m| m["Mountpoint"] == "/"));
    }
}
