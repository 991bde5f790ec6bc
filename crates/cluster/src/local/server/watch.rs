//! `?watch=true`: one JSON event per line (`{"type":"ADDED","object":{...}}`) on a
//! chunked answer, as the API server streams them. With no `resourceVersion` (or `0`)
//! the watch starts with an `ADDED` event per current object; from a given one it
//! replays what changed since (410 Gone when that is no longer kept); with
//! `sendInitialEvents=true` the initial events end with a bookmark annotated
//! `k8s.io/initial-events-end`. Bookmarks come every few seconds when asked for;
//! `timeoutSeconds` ends the stream.

use super::super::access::WatchStart;
use super::super::resources::ResourceInfo;
use super::Shared;
use super::status::Failure;
use crate::{Event, Selector};
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use operon_data::model::WatchEvent;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// How often a watch that allows bookmarks gets one.
const BOOKMARK_EVERY: Duration = Duration::from_secs(5);

/// The longest a watch lasts without `timeoutSeconds` (the API server's default is
/// 30-60 minutes; hooks are shorter).
const LONGEST: Duration = Duration::from_secs(1800);

/// Starts a watch of `info`'s objects picked by `selector`.
pub(crate) fn serve(
    shared: &Arc<Shared>,
    info: &ResourceInfo,
    selector: &Selector,
    params: &HashMap<String, String>,
) -> Result<Response, Failure> {
    let flag = |name: &str| params.get(name).is_some_and(|v| v == "true" || v == "1");
    let bookmarks = flag("allowWatchBookmarks");
    let initial_events = flag("sendInitialEvents");
    let since = match params.get("resourceVersion").map(String::as_str) {
        None | Some("" | "0") => None,
        Some(text) => Some(text.parse::<u64>().map_err(|_| {
            Failure::bad_request(format!("invalid resourceVersion {text:?}: not a number"))
        })?),
    };
    let timeout = match params.get("timeoutSeconds") {
        Some(text) => Duration::from_secs(
            text.parse::<u64>()
                .map_err(|_| Failure::bad_request(format!("invalid timeoutSeconds {text:?}")))?,
        ),
        None => LONGEST,
    };
    let resource = &info.resource;
    let cluster = &shared.cluster;
    let mut first: Vec<Value> = Vec::new();
    let (replay, events, current) = if since.is_none() || initial_events {
        let (objects, at) = cluster.list_at(resource, selector)?;
        first.extend(
            objects
                .into_iter()
                .map(|o| json!({"type": "ADDED", "object": o})),
        );
        cluster
            .watch_since(resource, selector, Some(at))
            .map_err(start_failure(at))?
    } else {
        let since = since.unwrap_or_default();
        cluster
            .watch_since(resource, selector, Some(since))
            .map_err(start_failure(since))?
    };
    first.extend(replay.iter().map(event_json));
    let bookmark = {
        let api_version = resource.api_version();
        let kind = resource.kind.clone();
        move |version: u64, end_of_initial: bool| {
            let mut object = json!({
                "kind": kind,
                "apiVersion": api_version,
                "metadata": {"resourceVersion": version.to_string()},
            });
            if end_of_initial {
                object["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
            }
            json!({"type": "BOOKMARK", "object": object})
        }
    };
    if initial_events && bookmarks {
        first.push(bookmark(current, true));
    }
    let state = Stream {
        events,
        first: first.into_iter(),
        deadline: tokio::time::Instant::now() + timeout,
        bookmarks,
        last: current,
        shared: Arc::clone(shared),
    };
    let stream = futures::stream::unfold(state, move |mut state| {
        let bookmark = bookmark.clone();
        async move {
            if let Some(line) = state.first.next() {
                return Some((Ok::<_, std::convert::Infallible>(line_of(&line)), state));
            }
            let tick = tokio::time::sleep(if state.bookmarks {
                BOOKMARK_EVERY
            } else {
                LONGEST
            });
            tokio::select! {
                event = state.events.recv() => {
                    let event = event?;
                    state.last = version_of(&event).unwrap_or(state.last);
                    Some((Ok(line_of(&event_json(&event))), state))
                }
                () = tokio::time::sleep_until(state.deadline) => None,
                () = tick => {
                    let version = state.shared.cluster.current_resource_version().max(state.last);
                    Some((Ok(line_of(&bookmark(version, false))), state))
                }
            }
        }
    });
    Response::builder()
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .map_err(|e| Failure::bad_request(e.to_string()))
}

struct Stream {
    events: crate::EventStream,
    first: std::vec::IntoIter<Value>,
    deadline: tokio::time::Instant,
    bookmarks: bool,
    /// The newest `resourceVersion` sent, for bookmarks.
    last: u64,
    shared: Arc<Shared>,
}

fn start_failure(asked: u64) -> impl FnOnce(WatchStart) -> Failure {
    move |start| match start {
        WatchStart::Expired { oldest } => Failure::expired(asked, oldest),
        WatchStart::Cluster(error) => error.into(),
    }
}

fn version_of(event: &Event) -> Option<u64> {
    event
        .object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.parse().ok())
}

fn event_json(event: &Event) -> Value {
    let kind = match event.kind {
        WatchEvent::Added => "ADDED",
        WatchEvent::Modified => "MODIFIED",
        WatchEvent::Deleted => "DELETED",
    };
    json!({"type": kind, "object": &*event.object})
}

fn line_of(value: &Value) -> Bytes {
    let mut line = value.to_string().into_bytes();
    line.push(b'\n');
    Bytes::from(line)
}
