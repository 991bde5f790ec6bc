//! Streams of JSON or YAML documents, with the line each document starts on, as
//! shell-operator hooks write them to their patch and metrics files.

use super::files::{HookFile, HookFileError};
use serde_json::Value;

/// 1-based line of byte `offset` in `text`.
fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Byte offset of the first non-whitespace byte at or after `offset`.
fn skip_space(text: &str, offset: usize) -> usize {
    offset
        + text.as_bytes()[offset.min(text.len())..]
            .iter()
            .take_while(|b| b.is_ascii_whitespace())
            .count()
}

/// The JSON documents of `text` with the line each starts on.
pub(super) fn json_stream(text: &str) -> Result<Vec<(usize, Value)>, (usize, String)> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut docs = Vec::new();
    let mut start = skip_space(text, 0);
    while let Some(next) = stream.next() {
        match next {
            Ok(value) => docs.push((line_at(text, start), value)),
            Err(e) => return Err((e.line(), e.to_string())),
        }
        start = skip_space(text, stream.byte_offset());
    }
    Ok(docs)
}

/// The documents of a multi-document YAML `text` with the line each starts on.
fn yaml_stream(text: &str) -> Result<Vec<(usize, Value)>, (usize, String)> {
    let mut docs = Vec::new();
    let mut current = String::new();
    let mut first_line = 1;
    let flush = |current: &mut String, first_line: usize, docs: &mut Vec<(usize, Value)>| {
        let doc = std::mem::take(current);
        let body: Vec<&str> = doc
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            .collect();
        if body.is_empty() {
            return Ok(());
        }
        // Lines before the first content line do not count for the document's start.
        let lead = doc
            .lines()
            .take_while(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
            .count();
        match yaml_serde::from_str::<Value>(&doc) {
            Ok(Value::Null) => Ok(()),
            Ok(value) => {
                docs.push((first_line + lead, value));
                Ok(())
            }
            Err(e) => {
                let line = e
                    .location()
                    .map_or(first_line, |l| first_line + l.line() - 1);
                Err((line, e.to_string()))
            }
        }
    };
    for (index, line) in text.lines().enumerate() {
        if line == "---" || line.starts_with("--- ") || line == "..." {
            flush(&mut current, first_line, &mut docs)?;
            first_line = index + 2;
            continue;
        }
        current.push_str(line);
        current.push('\n');
    }
    flush(&mut current, first_line, &mut docs)?;
    Ok(docs)
}

/// A JSON stream when it is one, else multi-document YAML. Text that starts like JSON
/// and has no `---` separator is JSON with a mistake, and gets the JSON error (YAML would
/// accept `{"kind": }` and report a confusing missing field instead).
pub(super) fn documents(file: HookFile, text: &str) -> Result<Vec<(usize, Value)>, HookFileError> {
    let json_error = match json_stream(text) {
        Ok(docs) => return Ok(docs),
        Err(error) => error,
    };
    let separated = text.lines().any(|l| l == "---" || l.starts_with("--- "));
    if text.trim_start().starts_with(['{', '[']) && !separated {
        let (line, reason) = json_error;
        return Err(file.error(line, reason));
    }
    yaml_stream(text).map_err(|(line, reason)| file.error(line, reason))
}
