//! A list's answer read as it arrives: each element of its `items` is cut out of the
//! body once its last byte has come, and the rest (kind, metadata) is kept to be
//! decoded at the end.
//!
//! Decoding the whole answer at once holds the body and a copy of every item together:
//! for 50,000 ConfigMaps answered from the watch cache in one piece, 23 MB of each. Read
//! this way, a frame of the body is dropped once it is read, and only the items stay.

use serde_json::value::RawValue;

/// No item of a real API server is this large (an object is at most 1.5 MiB in etcd):
/// a larger one is refused rather than buffered without end.
const MAX_ITEM: usize = 16 << 20;

/// The answer's top level outside its items (kind, apiVersion, metadata) has no reason
/// to be large either.
const MAX_REST: usize = 1 << 20;

/// Why a list's answer could not be read.
#[derive(Debug, thiserror::Error)]
pub(super) enum ListBodyError {
    #[error("an item of the list is longer than {MAX_ITEM} bytes")]
    ItemTooLong,
    #[error("the list's answer outside its items is longer than {MAX_REST} bytes")]
    RestTooLong,
    #[error("the list's answer is not balanced JSON")]
    Unbalanced,
    #[error("an item of the list is not UTF-8")]
    NotUtf8,
    #[error("an item of the list is not JSON: {0}")]
    Item(#[source] serde_json::Error),
}

/// Reads a list's answer frame by frame (see the module's doc).
#[derive(Default)]
pub(super) struct ItemSplitter {
    /// How many objects and arrays are open.
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// Inside the top-level `items` array.
    in_items: bool,
    /// An item is being read; its bytes so far.
    reading_item: bool,
    item: Vec<u8>,
    /// The last string of the top level, while it is read and after: the key of the
    /// value that follows it.
    key: Vec<u8>,
    reading_key: bool,
    /// The answer without its items.
    rest: Vec<u8>,
    items: Vec<Box<RawValue>>,
}

impl ItemSplitter {
    /// Reads the next frame of the answer.
    pub(super) fn push(&mut self, mut bytes: &[u8]) -> Result<(), ListBodyError> {
        while !bytes.is_empty() {
            if self.in_string {
                // Most of an answer is strings: copied up to the next quote or escape.
                let plain = memchr::memchr2(b'"', b'\\', bytes).unwrap_or(bytes.len());
                if plain > 0 && !self.escaped {
                    self.write(&bytes[..plain])?;
                    bytes = &bytes[plain..];
                    continue;
                }
                let b = bytes[0];
                bytes = &bytes[1..];
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                    self.reading_key = false;
                }
                self.write(&[b])?;
                continue;
            }
            let b = bytes[0];
            bytes = &bytes[1..];
            match b {
                b'"' => {
                    self.put(b)?;
                    self.in_string = true;
                    if self.depth == 1 {
                        self.key.clear();
                        self.reading_key = true;
                    }
                    continue;
                }
                b'{' | b'[' => {
                    if self.in_items && self.depth == 2 {
                        self.reading_item = true;
                    }
                    if self.depth == 1 && b == b'[' && self.key == b"items" {
                        self.in_items = true;
                    }
                    self.depth += 1;
                }
                b'}' | b']' => {
                    self.depth = self.depth.checked_sub(1).ok_or(ListBodyError::Unbalanced)?;
                    if self.reading_item && self.depth == 2 {
                        self.item.push(b);
                        self.finish_item()?;
                        continue;
                    }
                    if self.in_items && self.depth == 1 {
                        self.in_items = false;
                    }
                }
                // The commas between items stay out of the rest, which keeps `[]`.
                b',' if self.in_items && self.depth == 2 => continue,
                _ => {}
            }
            self.put(b)?;
        }
        Ok(())
    }

    /// The answer once its last frame was read: its items, and the rest of it (with
    /// `"items": []`) to decode into the page.
    pub(super) fn finish(self) -> Result<(Vec<Box<RawValue>>, Vec<u8>), ListBodyError> {
        if self.depth != 0 || self.in_string {
            return Err(ListBodyError::Unbalanced);
        }
        Ok((self.items, self.rest))
    }

    /// One byte outside strings.
    fn put(&mut self, b: u8) -> Result<(), ListBodyError> {
        self.write(&[b])
    }

    /// Bytes to the item being read, or to the rest (and the key being read).
    fn write(&mut self, bytes: &[u8]) -> Result<(), ListBodyError> {
        if self.reading_item {
            if self.item.len() + bytes.len() > MAX_ITEM {
                return Err(ListBodyError::ItemTooLong);
            }
            self.item.extend_from_slice(bytes);
            return Ok(());
        }
        if self.reading_key && self.in_string {
            self.key.extend_from_slice(bytes);
        }
        if self.rest.len() + bytes.len() > MAX_REST {
            return Err(ListBodyError::RestTooLong);
        }
        self.rest.extend_from_slice(bytes);
        Ok(())
    }

    fn finish_item(&mut self) -> Result<(), ListBodyError> {
        self.reading_item = false;
        let text = std::str::from_utf8(&self.item).map_err(|_| ListBodyError::NotUtf8)?;
        // Copied at its length; the buffer is kept for the next item.
        let item = RawValue::from_string(text.to_owned()).map_err(ListBodyError::Item)?;
        self.items.push(item);
        self.item.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Page {
        metadata: serde_json::Value,
        #[serde(default)]
        items: Vec<Box<RawValue>>,
    }

    fn split(frames: &[&[u8]]) -> Result<Page, String> {
        let mut splitter = ItemSplitter::default();
        for frame in frames {
            splitter.push(frame).map_err(|e| e.to_string())?;
        }
        let (mut items, rest) = splitter.finish().map_err(|e| e.to_string())?;
        let mut page: Page = serde_json::from_slice(&rest).map_err(|e| e.to_string())?;
        items.append(&mut page.items);
        page.items = items;
        Ok(page)
    }

    const BODY: &str = r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"12","continue":"a]b}"},"items":[{"metadata":{"name":"a","labels":{"items":"[x"}},"data":{"k":"v \"quoted\" \\ {"}} , {"metadata":{"name":"b"},"data":{"list":[1,{"items":[]}]}}
    ,{"metadata":{"name":"c\u00e9"}}]}"#;

    #[test]
    fn items_are_cut_out_whole_whatever_the_frames_and_the_rest_keeps_the_metadata() {
        let expected: serde_json::Value = serde_json::from_str(BODY).unwrap();
        let expected_items: Vec<String> = expected["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.to_string())
            .collect();
        let body = BODY.as_bytes();
        for first in 0..=body.len() {
            for second in (first..=body.len()).step_by(7) {
                let page = split(&[&body[..first], &body[first..second], &body[second..]])
                    .unwrap_or_else(|e| panic!("frames split at {first} and {second}: {e}"));
                assert_eq!(page.metadata, expected["metadata"], "{first} {second}");
                let items: Vec<String> = (page.items.iter())
                    .map(|i| {
                        serde_json::from_str::<serde_json::Value>(i.get())
                            .unwrap()
                            .to_string()
                    })
                    .collect();
                assert_eq!(
                    items, expected_items,
                    "frames split at {first} and {second}"
                );
            }
        }
    }

    #[test]
    fn an_empty_or_null_list_has_no_items() {
        for body in [
            r#"{"metadata":{"resourceVersion":"1"},"items":[]}"#,
            r#"{"items":[],"metadata":{"resourceVersion":"1"}}"#,
            r#"{"metadata":{"resourceVersion":"1"}}"#,
        ] {
            let page = split(&[body.as_bytes()]).unwrap();
            assert!(page.items.is_empty(), "{body}");
            assert_eq!(page.metadata["resourceVersion"], "1");
        }
    }

    #[test]
    fn a_broken_answer_is_an_error_not_a_shorter_list() {
        for body in [
            &br#"{"metadata":{},"items":[{"metadata":{"name":"a"}}"#[..],
            br#"{"metadata":{},"items":[{"metadata":{"name":"a}]}"#,
            br#"{"metadata":{}}]]"#,
            br#"{"metadata":{},"items":[{"metadata":{"name":tru}}]}"#,
            b"<html>",
        ] {
            assert!(split(&[body]).is_err(), "{}", String::from_utf8_lossy(body));
        }
        let mut huge = br#"{"items":[{"a":""#.to_vec();
        huge.resize(MAX_ITEM + 100, b'x');
        assert_eq!(
            split(&[&huge]).err().as_deref(),
            Some(ListBodyError::ItemTooLong.to_string().as_str())
        );
    }
}
