//! What one shared watch reads: the paged list, then the watch that resumes from it,
//! decoded straight off the HTTP body.
//!
//! kube-runtime's watcher copies every line of a watch into a `String`, decodes it
//! into a typed `WatchEvent` (1.6 times the cost of parsing the line, for a Pod), and
//! arms a timer per event for its idle timeout. This source finds each line's end in
//! the body's own buffers and decodes it once, into the JSON the bindings get; the
//! idle timeout is armed per body frame, which carries many events. The protocol is kube-runtime's: a
//! paged list (no streaming list, which API servers before 1.27 refuse), a watch from
//! the list's `resourceVersion` with bookmarks, a resumed watch when the server ends
//! one, a new list after `410 Gone` or a line that does not decode. Errors are items
//! of the stream, for kube-runtime's backoff to space.
//!
//! Which version a list asks for is client-go's reflector's, which shell-operator's
//! informers use: the first list at `resourceVersion=0`, which the API server answers
//! from its watch cache, whole; a later one at the last version seen, unpaged, so that the
//! cache answers it too and nothing goes back in time; after `410 Gone` a consistent,
//! paged list from etcd. kube-runtime lists from etcd every time, which costs etcd a
//! read of the whole collection at each start, and some API servers (1.24.0 here) skip
//! objects in a paged etcd list with a label selector.

use super::list_body::{ItemSplitter, ListBodyError};
use super::metadata_str;
use ::kube::Client;
use ::kube::api::{ListParams, WatchParams};
use ::kube::client::Body;
use ::kube::core::{Request, Status};
use bytes::{Bytes, BytesMut};
use futures::Stream;
use http_body_util::BodyExt as _;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use std::time::Duration;

/// Objects per list page (kube-runtime's default).
const PAGE_SIZE: u32 = 500;

/// How long the server keeps a watch open before it ends it, and how much longer the
/// source waits for the next byte before it takes the connection for dead.
const WATCH_SECONDS: u32 = 290;
const IDLE_MARGIN: Duration = Duration::from_secs(5);

/// A line longer than this is no event a real API server sends (an object is at most
/// 1.5 MiB in etcd): the watch is started again rather than buffered without end.
const MAX_LINE: usize = 16 << 20;

/// What the source saw, in the order of kube-runtime's `watcher::Event`.
#[derive(Debug)]
pub(super) enum Step {
    /// A list starts (at start, after `410 Gone`, after a failed list).
    Init,
    /// An object of the list, as the server listed it (list items lack `apiVersion`
    /// and `kind`): its text, which the watch decodes only as far as it needs.
    Listed(Box<RawValue>),
    /// The list is complete, at this `resourceVersion`.
    ListDone(String),
    /// An object was added or modified.
    Applied(Value),
    /// An object was deleted: its last state.
    Deleted(Value),
}

/// Why a step failed; the source goes on after it.
#[derive(Debug, thiserror::Error)]
pub(super) enum SourceError {
    /// A page of the list failed; the list starts again.
    #[error("list failed: {0}")]
    List(#[source] ::kube::Error),
    /// The watch request failed; it is sent again.
    #[error("starting the watch failed: {0}")]
    Start(#[source] ::kube::Error),
    /// The connection failed mid-way; the watch resumes from its last version.
    #[error("the watch stream failed: {0}")]
    Stream(#[source] ::kube::Error),
    /// The server sent an `ERROR` event (`410 Gone` starts a new list).
    #[error("the API server ended the watch: {} {}: {}", .0.code, .0.reason, .0.message)]
    Server(Box<Status>),
    /// A line that is no watch event; a new list makes up for whatever it held.
    #[error("a watch line is no watch event ({0}); listing again")]
    Decode(#[source] serde_json::Error),
    /// A list page or an event without `resourceVersion`; a new list follows.
    #[error("the API server sent no resourceVersion; listing again")]
    NoResourceVersion,
    /// Nothing came for longer than the server keeps a watch open.
    #[error("no data from the watch for {0:?}; starting it again")]
    Idle(Duration),
    /// A line longer than [`MAX_LINE`].
    #[error("a watch line longer than {MAX_LINE} bytes; starting the watch again")]
    LineTooLong,
}

/// The list and watch of one collection with its selectors.
pub(super) struct Source {
    target: Target,
    state: State,
    /// The last `resourceVersion` seen, listed or watched: a list starts there, and
    /// nothing it returns is older than what the bindings have seen.
    seen: Option<String>,
    /// The last list or watch ended in `410 Gone`: the next list reads etcd.
    seen_expired: bool,
}

/// Where a list starts, as client-go's reflector chooses it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ListFrom {
    /// `resourceVersion=0`: any version, from the API server's watch cache, unpaged.
    Any,
    /// At least this version, without `limit`: from the watch cache once it has it.
    NotOlderThan(String),
    /// A consistent, paged read from etcd.
    MostRecent,
}

/// What the requests ask for. Apart from the state, which holds a body that is not
/// `Sync`, so that a request in flight borrows only this.
struct Target {
    client: Client,
    request: Request,
    labels: Option<String>,
    fields: Option<String>,
}

enum State {
    /// A list is to start.
    Empty,
    /// Listing: what is left of the current page, and where the next page starts.
    Listing {
        items: std::vec::IntoIter<Box<RawValue>>,
        continue_token: Option<String>,
        version: Option<String>,
    },
    /// Listed or watched up to `version`: a watch is to start there.
    Listed { version: String },
    /// Watching: the body being read and its unread bytes.
    Watching {
        version: String,
        body: Body,
        lines: Lines,
    },
}

/// Keeps `version` as the last one seen, in the string already there: watch events
/// come by the thousand a second.
pub(super) fn remember(seen: &mut Option<String>, version: &str) {
    match seen {
        Some(seen) => {
            seen.clear();
            seen.push_str(version);
        }
        None => *seen = Some(version.to_owned()),
    }
}

/// Which page of a list to ask for.
enum Page {
    /// The first, from where the list starts.
    First(ListFrom),
    /// The one after the page that answered this token.
    Continue(String),
}

/// Whether a failed list asked for a version the server no longer has (`410 Gone`,
/// `Expired`) or does not have yet (`504` "Too large resource version", from an API
/// server behind the one that answered before): the next list reads etcd, as
/// client-go's reflector does.
fn version_unavailable(error: &::kube::Error) -> bool {
    let ::kube::Error::Api(status) = error else {
        return false;
    };
    status.code == 410
        || status.reason == "Expired"
        || status.reason == "Gone"
        || (status.code == 504 && status.message.contains("Too large resource version"))
}

/// A page of a list: only what the source reads is decoded by type.
#[derive(Deserialize)]
struct ListPage {
    metadata: PageMeta,
    #[serde(default, deserialize_with = "null_is_empty")]
    items: Vec<Box<RawValue>>,
}

#[derive(Deserialize)]
struct PageMeta {
    #[serde(default, rename = "resourceVersion")]
    resource_version: Option<String>,
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
}

fn null_is_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Box<RawValue>>, D::Error> {
    Ok(Option::<Vec<Box<RawValue>>>::deserialize(d)?.unwrap_or_default())
}

/// One line of a watch.
#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: LineKind,
    object: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "UPPERCASE")]
enum LineKind {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
}

impl Source {
    /// The source of the collection `path` (`/api/v1/namespaces/NS/pods`), with label
    /// and field selectors in the API's query syntax (empty: none); `seen` is the last
    /// version an earlier source of the same watch saw, which its first list may not go
    /// back before.
    pub(super) fn new(
        client: Client,
        path: String,
        labels: &str,
        fields: &str,
        seen: Option<String>,
    ) -> Self {
        let selector = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Self {
            target: Target {
                client,
                request: Request::new(path),
                labels: selector(labels),
                fields: selector(fields),
            },
            state: State::Empty,
            seen,
            seen_expired: false,
        }
    }

    /// Where the next list starts: client-go's `relistResourceVersion`.
    fn list_from(&self) -> ListFrom {
        match &self.seen {
            _ if self.seen_expired => ListFrom::MostRecent,
            None => ListFrom::Any,
            Some(version) => ListFrom::NotOlderThan(version.clone()),
        }
    }

    /// The version the bindings have now seen everything up to.
    fn saw(&mut self, version: &str) {
        remember(&mut self.seen, version);
    }

    /// The source as a stream that never ends by itself.
    pub(super) fn into_stream(self) -> impl Stream<Item = Result<Step, SourceError>> + Send {
        futures::stream::unfold(self, |mut source| async move {
            let item = source.step().await;
            Some((item, source))
        })
    }

    async fn step(&mut self) -> Result<Step, SourceError> {
        loop {
            match std::mem::replace(&mut self.state, State::Empty) {
                State::Empty => {
                    self.state = State::Listing {
                        items: Vec::new().into_iter(),
                        continue_token: None,
                        version: None,
                    };
                    return Ok(Step::Init);
                }
                State::Listing {
                    mut items,
                    continue_token,
                    version,
                } => {
                    if let Some(item) = items.next() {
                        self.state = State::Listing {
                            items,
                            continue_token,
                            version,
                        };
                        return Ok(Step::Listed(item));
                    }
                    if continue_token.is_none()
                        && let Some(version) = version
                    {
                        self.saw(&version);
                        self.seen_expired = false;
                        self.state = State::Listed {
                            version: version.clone(),
                        };
                        return Ok(Step::ListDone(version));
                    }
                    let from = match continue_token {
                        Some(token) => Page::Continue(token),
                        None => Page::First(self.list_from()),
                    };
                    // A failed page leaves the state Empty: the list starts over, from
                    // etcd if the version it asked for is gone.
                    let page = match self.target.page(from).await {
                        Ok(page) => page,
                        Err(error) => {
                            if version_unavailable(&error) {
                                self.seen_expired = true;
                            }
                            return Err(SourceError::List(error));
                        }
                    };
                    let version = page.metadata.resource_version.filter(|v| !v.is_empty());
                    let continue_token = page.metadata.continue_token.filter(|c| !c.is_empty());
                    if version.is_none() && continue_token.is_none() {
                        return Err(SourceError::NoResourceVersion);
                    }
                    self.state = State::Listing {
                        items: page.items.into_iter(),
                        continue_token,
                        version,
                    };
                }
                State::Listed { version } => match self.target.open(&version).await {
                    Ok(body) => {
                        self.state = State::Watching {
                            version,
                            body,
                            lines: Lines::default(),
                        }
                    }
                    Err(error) => {
                        self.state = State::Listed { version };
                        return Err(SourceError::Start(error));
                    }
                },
                State::Watching {
                    version,
                    mut body,
                    mut lines,
                } => {
                    let Some(line) = lines.next_line() else {
                        match read_frame(&mut body, &mut lines).await {
                            Ok(true) => {
                                self.state = State::Watching {
                                    version,
                                    body,
                                    lines,
                                }
                            }
                            // The server ended the watch (its timeout, a restart): it
                            // resumes where it stopped. An unfinished line is dropped, as
                            // the server never finished sending that event.
                            Ok(false) => self.state = State::Listed { version },
                            Err(error) => {
                                self.state = State::Listed { version };
                                return Err(error);
                            }
                        }
                        continue;
                    };
                    // On an error here the state stays Empty: a new list.
                    let (step, version) = match decode(&line)? {
                        None => (None, version),
                        Some(Decoded::Bookmark(at)) => (None, at.unwrap_or(version)),
                        Some(Decoded::Applied(object, at)) => (Some(Step::Applied(object)), at),
                        Some(Decoded::Deleted(object, at)) => (Some(Step::Deleted(object)), at),
                        Some(Decoded::Error(status)) => {
                            // The server ends the stream after an error; until it does,
                            // the watch reads on. `410 Gone`: its version is compacted
                            // away, so a new list follows, from etcd.
                            if status.code == 410 {
                                self.seen_expired = true;
                            } else {
                                self.state = State::Watching {
                                    version,
                                    body,
                                    lines,
                                };
                            }
                            return Err(SourceError::Server(status));
                        }
                    };
                    self.saw(&version);
                    self.state = State::Watching {
                        version,
                        body,
                        lines,
                    };
                    if let Some(step) = step {
                        return Ok(step);
                    }
                }
            }
        }
    }
}

impl Target {
    /// One page of the list. Versions are asked for without `resourceVersionMatch`, as
    /// client-go does: `0` means any, another version "not older than" when no `limit`
    /// is set, on every API server version.
    async fn page(&self, page: Page) -> Result<ListPage, ::kube::Error> {
        let (resource_version, limit, continue_token) = match page {
            // kube leaves `resourceVersion=0` out beside a `limit`; before 1.33 the
            // cache ignored the limit at that version anyway.
            Page::First(ListFrom::Any) => (Some("0".to_owned()), None, None),
            Page::First(ListFrom::NotOlderThan(version)) => (Some(version), None, None),
            Page::First(ListFrom::MostRecent) => (None, Some(PAGE_SIZE), None),
            Page::Continue(token) => (None, Some(PAGE_SIZE), Some(token)),
        };
        let params = ListParams {
            label_selector: self.labels.clone(),
            field_selector: self.fields.clone(),
            resource_version,
            limit,
            continue_token,
            ..ListParams::default()
        };
        let request = self
            .request
            .list(&params)
            .map_err(::kube::Error::BuildRequest)?;
        let response = self.client.send(request.map(Body::from)).await?;
        if !response.status().is_success() {
            return Err(failure(response).await);
        }
        // Read as it comes: the body's frames are not held together with the items.
        let mut body = response.into_body();
        let mut splitter = ItemSplitter::default();
        let custom = |e: ListBodyError| ::kube::Error::SerdeError(serde::de::Error::custom(e));
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame?.into_data() {
                splitter.push(&data).map_err(custom)?;
            }
        }
        let (mut items, rest) = splitter.finish().map_err(custom)?;
        let mut page: ListPage =
            serde_json::from_slice(&rest).map_err(::kube::Error::SerdeError)?;
        // Items the rest still holds (none a real server sends) follow the ones cut out.
        items.append(&mut page.items);
        page.items = items;
        Ok(page)
    }

    /// Starts a watch from `version`: the body of its answer.
    async fn open(&self, version: &str) -> Result<Body, ::kube::Error> {
        let params = WatchParams {
            label_selector: self.labels.clone(),
            field_selector: self.fields.clone(),
            timeout: Some(WATCH_SECONDS),
            bookmarks: true,
            ..WatchParams::default()
        };
        let mut request = self
            .request
            .watch(&params, version)
            .map_err(::kube::Error::BuildRequest)?;
        // As kube-client does for watches: a gzip member per event would not be decoded.
        request.headers_mut().insert(
            http::header::ACCEPT_ENCODING,
            http::HeaderValue::from_static("identity"),
        );
        let response = self.client.send(request.map(Body::from)).await?;
        if response.status().is_success() {
            return Ok(response.into_body());
        }
        Err(failure(response).await)
    }
}

/// The error of an answer that is no success: its `Status`, or its text as one.
async fn failure(response: http::Response<Body>) -> ::kube::Error {
    let code = response.status();
    let text = match response.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) => return error,
    };
    let status = serde_json::from_slice::<Status>(&text).unwrap_or_else(|_| {
        Status::failure(String::from_utf8_lossy(&text).trim(), "Unknown").with_code(code.as_u16())
    });
    ::kube::Error::Api(Box::new(status))
}

/// What a line of a watch says.
enum Decoded {
    Applied(Value, String),
    Deleted(Value, String),
    Bookmark(Option<String>),
    Error(Box<Status>),
}

/// Decodes one line of a watch; `None` for a blank line.
fn decode(line: &[u8]) -> Result<Option<Decoded>, SourceError> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let line: Line = serde_json::from_slice(line).map_err(SourceError::Decode)?;
    let version = version_of(&line.object);
    Ok(Some(match line.kind {
        LineKind::Added | LineKind::Modified => {
            Decoded::Applied(line.object, version.ok_or(SourceError::NoResourceVersion)?)
        }
        LineKind::Deleted => {
            Decoded::Deleted(line.object, version.ok_or(SourceError::NoResourceVersion)?)
        }
        LineKind::Bookmark => Decoded::Bookmark(version),
        LineKind::Error => Decoded::Error(Box::new(
            Status::deserialize(&line.object)
                .unwrap_or_else(|_| Status::failure(&line.object.to_string(), "Unknown")),
        )),
    }))
}

fn version_of(object: &Value) -> Option<String> {
    metadata_str(object, "resourceVersion")
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// Reads the next frame of a watch's body into `lines`: false when the body ended.
async fn read_frame(body: &mut Body, lines: &mut Lines) -> Result<bool, SourceError> {
    let idle = Duration::from_secs(WATCH_SECONDS.into()) + IDLE_MARGIN;
    match tokio::time::timeout(idle, body.frame()).await {
        Ok(Some(Ok(frame))) => {
            if let Ok(data) = frame.into_data() {
                lines.push(data)?;
            }
            Ok(true)
        }
        Ok(None) => Ok(false),
        Ok(Some(Err(error))) => Err(SourceError::Stream(error)),
        Err(_) => Err(SourceError::Idle(idle)),
    }
}

/// The unread bytes of a watch's body: the current frame, and the start of a line
/// that an earlier frame left unfinished.
#[derive(Default)]
struct Lines {
    frame: Bytes,
    partial: BytesMut,
}

impl Lines {
    /// The next complete line, without its newline; `None` when the frames so far hold
    /// no further complete line.
    fn next_line(&mut self) -> Option<Bytes> {
        let end = memchr::memchr(b'\n', &self.frame)?;
        let mut line = self.frame.split_to(end + 1);
        line.truncate(end);
        if self.partial.is_empty() {
            return Some(line);
        }
        self.partial.extend_from_slice(&line);
        Some(self.partial.split().freeze())
    }

    /// A frame read after the last complete line.
    fn push(&mut self, frame: Bytes) -> Result<(), SourceError> {
        if !self.frame.is_empty() {
            if self.partial.len() + self.frame.len() > MAX_LINE {
                return Err(SourceError::LineTooLong);
            }
            self.partial.extend_from_slice(&self.frame);
        }
        self.frame = frame;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lines_of(frames: &[&[u8]]) -> Vec<String> {
        let mut lines = Lines::default();
        let mut out = Vec::new();
        for frame in frames {
            lines.push(Bytes::copy_from_slice(frame)).unwrap();
            while let Some(line) = lines.next_line() {
                out.push(String::from_utf8(line.to_vec()).unwrap());
            }
        }
        out
    }

    #[test]
    fn lines_come_out_whole_wherever_the_frames_split_them() {
        let body = b"{\"a\":1}\n\n{\"b\":[2,3]}\n{\"c\":\"x\\ny\"}\n{\"unfinished\"";
        let whole = lines_of(&[body]);
        assert_eq!(
            whole,
            ["{\"a\":1}", "", "{\"b\":[2,3]}", "{\"c\":\"x\\ny\"}"]
        );
        for first in 0..=body.len() {
            for second in first..=body.len() {
                let split = lines_of(&[&body[..first], &body[first..second], &body[second..]]);
                assert_eq!(split, whole, "frames split at {first} and {second}");
            }
        }
    }

    #[test]
    fn a_line_longer_than_the_limit_is_refused() {
        let mut lines = Lines::default();
        let chunk = Bytes::from(vec![b'x'; 1 << 20]);
        let mut pushed = 0;
        let refused = loop {
            if let Err(error) = lines.push(chunk.clone()) {
                break error;
            }
            assert!(lines.next_line().is_none());
            pushed += 1;
            assert!(pushed <= 17, "a line of {pushed} MiB was buffered");
        };
        assert!(matches!(refused, SourceError::LineTooLong), "{refused}");
    }

    #[test]
    fn watch_lines_decode_into_events_bookmarks_and_errors() {
        let line = |v: Value| serde_json::to_vec(&v).unwrap();
        let pod = json!({"metadata": {"name": "a", "resourceVersion": "7"}});
        match decode(&line(json!({"type": "MODIFIED", "object": pod}))).unwrap() {
            Some(Decoded::Applied(object, version)) => {
                assert_eq!((object, version.as_str()), (pod.clone(), "7"));
            }
            _ => panic!("not applied"),
        }
        assert!(matches!(
            decode(&line(json!({"type": "DELETED", "object": pod}))).unwrap(),
            Some(Decoded::Deleted(_, v)) if v == "7"
        ));
        assert!(matches!(
            decode(&line(json!({"type": "BOOKMARK",
                "object": {"kind": "Pod", "metadata": {"resourceVersion": "9"}}}))).unwrap(),
            Some(Decoded::Bookmark(Some(v))) if v == "9"
        ));
        let gone = json!({"type": "ERROR", "object": {"kind": "Status", "code": 410,
            "reason": "Expired", "message": "too old resource version", "status": "Failure"}});
        assert!(matches!(decode(&line(gone)).unwrap(),
            Some(Decoded::Error(status)) if status.code == 410 && status.reason == "Expired"));
        assert!(decode(b"  \r").unwrap().is_none());
        let no_version = json!({"type": "ADDED", "object": {"metadata": {"name": "a"}}});
        assert!(matches!(
            decode(&line(no_version)),
            Err(SourceError::NoResourceVersion)
        ));
        for bad in [
            &b"{\"type\": \"RENAMED\", \"object\": {}}"[..],
            b"{\"type\": \"ADDED\"",
            b"<html>",
        ] {
            assert!(
                matches!(decode(bad), Err(SourceError::Decode(_))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
