//! A first pass over a YAML stream, before any document is deserialized: where each
//! document starts and ends, what it claims to be (`apiVersion`, `kind`,
//! `metadata.name`), and what a deserializer would let through silently or turn into a
//! huge allocation: duplicate keys in a mapping (kubectl refuses them; a map
//! deserializer keeps the last one), numbers no JSON integer holds, and documents over
//! the [`Limits`].
//!
//! The pass reads parser events one at a time and keeps only the open collections, so
//! its memory is proportional to the nesting depth and the keys of the open mappings,
//! not to the document.

use granit_parser::{Event, Marker, Parser, ScalarStyle, Span};
use std::collections::HashMap;

/// How large and deep one YAML document may be. A document over a limit is refused
/// with the limit's name, before it is deserialized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of one document. A Kubernetes API server refuses requests over 3 MiB; the
    /// local commands accept larger files (a generated OperationSet of 100,000 nodes is
    /// about 5 MB) but not unbounded ones.
    pub document_bytes: usize,
    /// Nesting of mappings and sequences. Operon's objects are less than 10 deep;
    /// parameters and values leave room for nested JSON.
    pub depth: usize,
    /// Nodes (scalars, mappings, sequences, aliases) in one document.
    pub nodes: usize,
    /// Aliases (`*name`) in one document: each may expand to a whole subtree, which is
    /// how a few kilobytes of YAML become gigabytes.
    pub aliases: usize,
}

/// The limits `operon validate`, `operon run` and the admission webhook apply.
pub const LIMITS: Limits = Limits {
    document_bytes: 8 * 1024 * 1024,
    depth: 64,
    nodes: 2_000_000,
    aliases: 1_000,
};

/// One problem found by the scan, at a field of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The JSON path of the field (`spec.adjacencyList[3].id`), empty for the document.
    pub field: String,
    /// What is wrong, with the line and column.
    pub reason: String,
}

/// One document of the stream.
#[derive(Debug, Clone, Default)]
pub struct Document<'a> {
    /// The document's text (from the start of the line it begins on).
    pub text: &'a str,
    /// The line the document begins on, from 1.
    pub line: usize,
    /// The top-level `apiVersion`, when it is a scalar.
    pub api_version: Option<String>,
    /// The top-level `kind`, when it is a scalar.
    pub kind: Option<String>,
    /// `metadata.name`, when it is a scalar.
    pub name: Option<String>,
    /// Whether the document is empty (its root is null).
    pub empty: bool,
    /// Whether the document is over a [`Limits`] value and must not be deserialized.
    pub refused: bool,
    /// Whether a syntax error ended the document (it is the stream's last).
    pub broken: bool,
    /// Every problem found.
    pub findings: Vec<Finding>,
}

/// The documents of a stream, and the syntax error that ended it early, if any.
#[derive(Debug, Clone, Default)]
pub struct Scan<'a> {
    /// Every document up to the end or the syntax error.
    pub documents: Vec<Document<'a>>,
    /// The syntax error (with line and column); documents after it are not read.
    pub error: Option<String>,
}

/// A key of a mapping or an index of a sequence, for paths in messages.
#[derive(Debug)]
enum Segment {
    Key(String),
    /// A mapping or sequence used as a key: no JSON path names what is under it.
    Complex,
}

#[derive(Debug)]
enum Frame {
    Mapping {
        /// Each scalar key seen so far, with where it was.
        keys: HashMap<String, (usize, usize)>,
        /// The key whose value is being read, once the key is complete.
        key: Option<Segment>,
        /// Whether the next node is a value (else it is a key).
        value_next: bool,
    },
    Sequence {
        index: usize,
    },
}

/// Scans `text` with `limits`.
pub fn scan(text: &str, limits: Limits) -> Scan<'_> {
    let mut scan = Scan::default();
    let mut parser = Parser::new_from_str(text);
    let mut current: Option<(Document<'_>, State)> = None;
    while let Some(event) = parser.next_event() {
        let (event, span) = match event {
            Ok(event) => event,
            Err(e) => {
                scan.error = Some(e.to_string());
                break;
            }
        };
        match event {
            Event::DocumentStart(..) => {
                let start = line_start(text, offset(text, &span.start));
                let document = Document {
                    line: span.start.line(),
                    text: &text[start..],
                    ..Document::default()
                };
                current = Some((document, State::new(start)));
            }
            Event::DocumentEnd => {
                if let Some((mut document, state)) = current.take() {
                    let end = offset(text, &span.end).max(state.start);
                    document.text = &text[state.start..end.min(text.len())];
                    scan.documents.push(document);
                }
            }
            other => {
                if let Some((document, state)) = current.as_mut() {
                    state.event(text, &other, &span, document, limits);
                }
            }
        }
    }
    // A syntax error leaves the document it broke open: keep it, so that its findings
    // and position are reported with the error.
    if let Some((mut document, state)) = current.take() {
        document.text = &text[state.start..];
        document.broken = true;
        scan.documents.push(document);
    }
    scan
}

/// The byte offset of `marker` in `text` (the parser counts characters; a marker
/// without a byte offset is converted).
fn offset(text: &str, marker: &Marker) -> usize {
    marker.byte_offset().unwrap_or_else(|| {
        text.char_indices()
            .nth(marker.index())
            .map_or(text.len(), |(i, _)| i)
    })
}

/// The byte offset of the start of the line holding `index`.
fn line_start(text: &str, index: usize) -> usize {
    let index = index.min(text.len());
    text[..index].rfind('\n').map_or(0, |i| i + 1)
}

/// What the scan of one document keeps.
struct State {
    start: usize,
    stack: Vec<Frame>,
    nodes: usize,
    aliases: usize,
    /// Set once a limit is exceeded: the rest of the document is skipped.
    done: bool,
}

impl State {
    fn new(start: usize) -> Self {
        Self {
            start,
            stack: Vec::new(),
            nodes: 0,
            aliases: 0,
            done: false,
        }
    }

    fn event(
        &mut self,
        text: &str,
        event: &Event<'_>,
        span: &Span,
        document: &mut Document<'_>,
        limits: Limits,
    ) {
        if self.done {
            return;
        }
        let (line, column) = (span.start.line(), span.start.col() + 1);
        if offset(text, &span.end).saturating_sub(self.start) > limits.document_bytes {
            self.refuse(
                document,
                format!(
                    "the document is larger than {} bytes (at line {line}); split it or \
                     make it smaller",
                    limits.document_bytes
                ),
            );
            return;
        }
        let node = matches!(
            event,
            Event::Scalar(..)
                | Event::SequenceStart(..)
                | Event::MappingStart(..)
                | Event::Alias(_)
        );
        if node {
            self.nodes += 1;
            if self.nodes > limits.nodes {
                self.refuse(
                    document,
                    format!(
                        "the document has more than {} nodes (at line {line}); split it",
                        limits.nodes
                    ),
                );
                return;
            }
        }
        match event {
            Event::Scalar(value, style, _, tag) => {
                if self.stack.is_empty() && *style == ScalarStyle::Plain && is_null(value) {
                    document.empty = true;
                }
                if self.is_key() {
                    self.key(value, line, column, document);
                    return;
                }
                if *style == ScalarStyle::Plain && tag.is_none() {
                    self.check_number(value, line, column, document);
                }
                self.header(value, document);
                self.complete();
            }
            Event::Alias(_) => {
                self.aliases += 1;
                if self.aliases > limits.aliases {
                    self.refuse(
                        document,
                        format!(
                            "the document has more than {} aliases (at line {line} column \
                             {column}); each may expand to a copy of its anchor",
                            limits.aliases
                        ),
                    );
                    return;
                }
                if self.is_key() {
                    self.set_key(Segment::Complex);
                } else {
                    self.complete();
                }
            }
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                if self.stack.len() >= limits.depth {
                    self.refuse(
                        document,
                        format!(
                            "the document is nested deeper than {} levels (at line {line} \
                             column {column})",
                            limits.depth
                        ),
                    );
                    return;
                }
                if matches!(event, Event::SequenceStart(..)) {
                    self.stack.push(Frame::Sequence { index: 0 });
                } else {
                    self.stack.push(Frame::Mapping {
                        keys: HashMap::new(),
                        key: None,
                        value_next: false,
                    });
                }
            }
            Event::SequenceEnd | Event::MappingEnd => {
                self.stack.pop();
                if self.is_key() {
                    // A collection used as a key: its value comes next.
                    self.set_key(Segment::Complex);
                } else {
                    self.complete();
                }
            }
            _ => {}
        }
    }

    fn refuse(&mut self, document: &mut Document<'_>, reason: String) {
        document.refused = true;
        document.findings.push(Finding {
            field: String::new(),
            reason,
        });
        self.done = true;
        self.stack = Vec::new();
    }

    /// Whether the next node is a mapping key.
    fn is_key(&self) -> bool {
        matches!(
            self.stack.last(),
            Some(Frame::Mapping {
                value_next: false,
                ..
            })
        )
    }

    fn set_key(&mut self, segment: Segment) {
        if let Some(Frame::Mapping {
            key, value_next, ..
        }) = self.stack.last_mut()
        {
            *key = Some(segment);
            *value_next = true;
        }
    }

    fn key(&mut self, value: &str, line: usize, column: usize, document: &mut Document<'_>) {
        let Some(Frame::Mapping { keys, .. }) = self.stack.last_mut() else {
            return;
        };
        if let Some(&(first_line, first_column)) = keys.get(value) {
            let field = path(&self.stack, Some(value));
            document.findings.push(Finding {
                field,
                reason: format!(
                    "duplicate key {value:?} in one mapping: first at line {first_line} \
                     column {first_column}, again at line {line} column {column}; a key may \
                     appear once"
                ),
            });
        } else {
            keys.insert(value.to_owned(), (line, column));
        }
        self.set_key(Segment::Key(value.to_owned()));
    }

    /// Counts a finished value in its parent.
    fn complete(&mut self) {
        match self.stack.last_mut() {
            Some(Frame::Mapping {
                key, value_next, ..
            }) => {
                *key = None;
                *value_next = false;
            }
            Some(Frame::Sequence { index }) => *index += 1,
            None => {}
        }
    }

    /// Notes `apiVersion`, `kind` and `metadata.name`.
    fn header(&self, value: &str, document: &mut Document<'_>) {
        fn key(frame: &Frame) -> Option<&str> {
            match frame {
                Frame::Mapping {
                    key: Some(Segment::Key(k)),
                    ..
                } => Some(k.as_str()),
                _ => None,
            }
        }
        let keys: Vec<Option<&str>> = self.stack.iter().take(3).map(key).collect();
        let slot = match (self.stack.len(), keys.as_slice()) {
            (1, [Some("apiVersion")]) => &mut document.api_version,
            (1, [Some("kind")]) => &mut document.kind,
            (2, [Some("metadata"), Some("name")]) => &mut document.name,
            _ => return,
        };
        *slot = Some(value.to_owned());
    }

    /// Reports a plain scalar that reads as a number JSON cannot hold: an integer
    /// outside 64 bits, or an infinity or NaN.
    fn check_number(&self, value: &str, line: usize, column: usize, document: &mut Document<'_>) {
        let reason = if is_integer(value) && !fits_64_bits(value) {
            format!(
                "the number {value} at line {line} column {column} is out of range: whole \
                 numbers must lie between -9223372036854775808 and 18446744073709551615 \
                 (quote it if it is text)"
            )
        } else if is_non_finite(value) {
            format!(
                "{value} at line {line} column {column} is not a finite number, and JSON has \
                 no infinities or NaN (quote it if it is text)"
            )
        } else {
            return;
        };
        document.findings.push(Finding {
            field: path(&self.stack, None),
            reason,
        });
    }
}

/// The JSON path of the node being read (`last` appended as a key).
fn path(stack: &[Frame], last: Option<&str>) -> String {
    let mut out = String::new();
    let push_key = |out: &mut String, k: &str| {
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(k);
    };
    for frame in stack {
        match frame {
            Frame::Mapping {
                key: Some(Segment::Key(k)),
                ..
            } => push_key(&mut out, k),
            Frame::Mapping {
                key: Some(Segment::Complex),
                ..
            } => push_key(&mut out, "?"),
            Frame::Mapping { key: None, .. } => {}
            Frame::Sequence { index } => out.push_str(&format!("[{index}]")),
        }
    }
    if let Some(k) = last {
        push_key(&mut out, k);
    }
    out
}

fn is_null(value: &str) -> bool {
    matches!(value, "" | "~" | "null" | "Null" | "NULL")
}

/// Whether a plain scalar resolves to an integer (YAML 1.2 core schema, as the YAML
/// library resolves it: decimal without a leading zero, `0x` hexadecimal, `0o` octal).
fn is_integer(value: &str) -> bool {
    let digits = value.strip_prefix(['-', '+']).unwrap_or(value);
    if let Some(hex) = digits.strip_prefix("0x") {
        return !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit());
    }
    if let Some(oct) = digits.strip_prefix("0o") {
        return !oct.is_empty() && oct.bytes().all(|b| (b'0'..=b'7').contains(&b));
    }
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
}

fn fits_64_bits(value: &str) -> bool {
    let (negative, digits) = match value.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, value.strip_prefix('+').unwrap_or(value)),
    };
    let parsed = if let Some(hex) = digits.strip_prefix("0x") {
        u64::from_str_radix(hex, 16)
    } else if let Some(oct) = digits.strip_prefix("0o") {
        u64::from_str_radix(oct, 8)
    } else {
        digits.parse::<u64>()
    };
    match parsed {
        Ok(n) if negative => n <= 1 << 63,
        Ok(_) => true,
        Err(_) => false,
    }
}

fn is_non_finite(value: &str) -> bool {
    matches!(
        value,
        ".inf"
            | ".Inf"
            | ".INF"
            | "+.inf"
            | "+.Inf"
            | "+.INF"
            | "-.inf"
            | "-.Inf"
            | "-.INF"
            | ".nan"
            | ".NaN"
            | ".NAN"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn findings(text: &str) -> Vec<(String, String)> {
        scan(text, LIMITS)
            .documents
            .into_iter()
            .flat_map(|d| d.findings)
            .map(|f| (f.field, f.reason))
            .collect()
    }

    #[test]
    fn documents_are_split_with_their_header_and_first_line() {
        let text = "apiVersion: v1\nkind: A\nmetadata: {name: a}\n---\n---\n# c\nkind: B\nmetadata:\n  labels: {name: x}\n  name: b\n";
        let scan = scan(text, LIMITS);
        assert_eq!(scan.error, None);
        let d = &scan.documents;
        assert_eq!(d.len(), 3);
        assert_eq!(
            (d[0].kind.as_deref(), d[0].name.as_deref(), d[0].line),
            (Some("A"), Some("a"), 1)
        );
        assert!(d[0].text.starts_with("apiVersion") && d[0].text.ends_with("{name: a}\n"));
        assert!(d[1].empty);
        assert_eq!(
            (d[2].kind.as_deref(), d[2].name.as_deref()),
            (Some("B"), Some("b"))
        );
        assert!(d[2].text.starts_with("---\n# c"), "{:?}", d[2].text);
    }

    #[test]
    fn documents_after_text_beyond_ascii_are_cut_at_byte_offsets() {
        let text = "# a → b — c\nkind: A\n---\nkind: B # ü\nname: é\n";
        let scan = scan(text, LIMITS);
        let d = &scan.documents;
        assert_eq!(d.len(), 2);
        // An implicit document starts at its first content.
        assert_eq!(d[0].text, "kind: A\n");
        assert_eq!(d[1].text, "---\nkind: B # ü\nname: é\n");
        assert_eq!(d[1].kind.as_deref(), Some("B"));
    }

    #[test]
    fn duplicate_keys_name_both_places() {
        let f = findings("spec:\n  adjacencyList:\n  - id: 0\n    to: [1]\n    \"id\": 2\n");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].0, "spec.adjacencyList[0].id");
        assert!(
            f[0].1
                .contains("first at line 3 column 5, again at line 5 column 5"),
            "{}",
            f[0].1
        );
        assert_eq!(findings("a: {b: 1}\nc: {b: 1}\n"), []);
    }

    #[test]
    fn numbers_json_cannot_hold_are_reported_at_their_field() {
        let f = findings(
            "a: [1, 99999999999999999999, -9223372036854775808, -9223372036854775809]\nb: .inf\nc: '99999999999999999999'\nd: 0x1ffffffffffffffff\ne: 007\n",
        );
        let fields: Vec<&str> = f.iter().map(|f| f.0.as_str()).collect();
        assert_eq!(fields, ["a[1]", "a[3]", "b", "d"], "{f:?}");
        assert!(f[0].1.contains("out of range"), "{}", f[0].1);
        assert!(f[2].1.contains("not a finite number"), "{}", f[2].1);
    }

    #[test]
    fn limits_refuse_the_document_and_name_the_limit() {
        let tight = Limits {
            document_bytes: 64,
            depth: 3,
            nodes: 10,
            aliases: 1,
        };
        let cases = [
            ("a: [[[[1]]]]\n", "deeper than 3 levels"),
            ("a: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n", "more than 10 nodes"),
            ("a: &x 1\nb: *x\nc: *x\n", "more than 1 aliases"),
            (
                "a: 'a long string that is longer than sixty-four bytes, which is the limit'\n",
                "larger than 64 bytes",
            ),
        ];
        for (text, expected) in cases {
            let scan = scan(text, tight);
            let d = &scan.documents[0];
            assert!(d.refused, "{text}");
            assert!(d.findings[0].reason.contains(expected), "{:?}", d.findings);
        }
        // Limits are per document.
        let scan = scan("a: [1, 2, 3]\n---\nb: [1, 2, 3]\n", tight);
        assert!(scan.documents.iter().all(|d| !d.refused));
    }

    #[test]
    fn a_syntax_error_ends_the_stream_with_its_position() {
        let scan = scan("a: 1\n---\nb: [unclosed\n", LIMITS);
        assert_eq!(scan.documents.len(), 2);
        let error = scan.error.expect("an error");
        assert!(error.contains("line"), "{error}");
    }
}
