//! Waiting out an overloaded or silent API server: `Retry-After` and request timeouts,
//! in front of every request the client sends.
//!
//! An API server that sheds load (API Priority and Fairness, a 429) or cannot serve for
//! a while (a 5xx) says how long to wait in `Retry-After`, in seconds or as an
//! HTTP-date (RFC 9110; a proxy in front of the server may send either). Like client-go, a response
//! with a 429 or 5xx status *and* that header is waited out (at most
//! [`MAX_RETRY_AFTER`]) and the request sent again, whatever its method: the server
//! asked for it, having not acted on the request. Without the header the response goes
//! back to the caller as before: a watch's list then waits kube-runtime's backoff, a
//! write fails.
//!
//! A request whose response does not start within [`REQUEST_TIMEOUT`] fails with an
//! error naming it. A read (`GET`: gets, lists, the start of a watch) is sent again,
//! [`TIMEOUT_ATTEMPTS`] times in all; a write is not, since the server may have acted
//! on it (a create sent twice could create twice).

use ::kube::Client;
use ::kube::client::Body;
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt as _;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tower::{BoxError, Service};

/// How long the response to one request may take to start (a watch's events may then
/// stream for as long as the watch lasts).
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest `Retry-After` honoured; a longer one is waited this long.
pub(super) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// How many times a request is sent at most when the server keeps answering with
/// `Retry-After` (client-go's default).
pub(super) const RETRY_AFTER_ATTEMPTS: u32 = 10;

/// How many times a read is sent at most when it keeps timing out.
pub(super) const TIMEOUT_ATTEMPTS: u32 = 3;

/// A request that got no response in time.
#[derive(Debug, thiserror::Error)]
#[error("{method} {uri}: no response within {timeout:?} ({attempts})")]
pub(super) struct TimedOut {
    method: Method,
    uri: String,
    timeout: Duration,
    attempts: Attempts,
}

/// How often a timed-out request was sent, for its error.
#[derive(Debug)]
struct Attempts {
    sent: u32,
    /// Whether it is a read, which is sent again after a timeout.
    read: bool,
}

impl std::fmt::Display for Attempts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.read {
            write!(f, "sent {} times", self.sent)
        } else {
            write!(
                f,
                "a write is not sent again: the server may have acted on it"
            )
        }
    }
}

/// The client's service with `Retry-After` and timeouts in front of `inner`.
#[derive(Clone)]
pub(super) struct Patient {
    inner: Client,
    timeout: Duration,
}

impl Patient {
    /// Wraps `inner` with the default timeout.
    pub(super) fn new(inner: Client) -> Self {
        Self::with_timeout(inner, REQUEST_TIMEOUT)
    }

    /// Wraps `inner` with another timeout per request.
    pub(super) fn with_timeout(inner: Client, timeout: Duration) -> Self {
        Self { inner, timeout }
    }

    /// A client whose requests go through this service, in `namespace` by default.
    pub(super) fn into_client(self, namespace: &str) -> Client {
        Client::new(self, namespace.to_owned())
    }
}

impl Service<Request<Body>> for Patient {
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // The inner client queues requests itself.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { this.send(request).await })
    }
}

impl Patient {
    async fn send(&self, request: Request<Body>) -> Result<Response<Body>, BoxError> {
        let (parts, body) = request.into_parts();
        // Kept to send again; requests to the API server have small JSON bodies.
        let body = body.collect().await?.to_bytes();
        let safe = matches!(parts.method, Method::GET | Method::HEAD);
        let (mut retry_afters, mut timeouts) = (0, 0);
        loop {
            let attempt = Request::from_parts(parts.clone(), Body::from(body.to_vec()));
            match tokio::time::timeout(self.timeout, self.inner.send(attempt)).await {
                Ok(Ok(response)) => {
                    let wait = retry_after(&response);
                    match wait {
                        Some(wait) if retry_afters + 1 < RETRY_AFTER_ATTEMPTS => {
                            retry_afters += 1;
                            tracing::debug!(
                                method = %parts.method, uri = %parts.uri,
                                status = response.status().as_u16(), wait = ?wait,
                                "the API server asked to retry after a while"
                            );
                            drop(response);
                            tokio::time::sleep(wait).await;
                        }
                        _ => return Ok(response),
                    }
                }
                Ok(Err(error)) => return Err(Box::new(error)),
                Err(_) => {
                    timeouts += 1;
                    if !safe || timeouts >= TIMEOUT_ATTEMPTS {
                        return Err(Box::new(TimedOut {
                            method: parts.method.clone(),
                            uri: parts.uri.to_string(),
                            timeout: self.timeout,
                            attempts: Attempts {
                                sent: timeouts + retry_afters,
                                read: safe,
                            },
                        }));
                    }
                    tracing::warn!(
                        method = %parts.method, uri = %parts.uri, timeout = ?self.timeout,
                        "no response from the API server; sending the read again"
                    );
                }
            }
        }
    }
}

/// How long a 429 or 5xx response asks to wait before the request is sent again:
/// `Retry-After` in either form of RFC 9110, delay-seconds (`7`) or an HTTP-date
/// (`Fri, 31 Dec 1999 23:59:59 GMT`), at most [`MAX_RETRY_AFTER`]; `None` for other
/// responses or without a readable header. A date is taken relative to the response's
/// own `Date` when it has one, so that the two clocks need not agree, else to this
/// machine's clock; a date already past asks for no wait.
fn retry_after<B>(response: &Response<B>) -> Option<Duration> {
    let status = response.status();
    if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return None;
    }
    let value = response
        .headers()
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    let wait = match value.parse::<u64>() {
        Ok(seconds) => Duration::from_secs(seconds),
        Err(_) => {
            let until = httpdate::parse_http_date(value).ok()?;
            let now = response
                .headers()
                .get(http::header::DATE)
                .and_then(|date| date.to_str().ok())
                .and_then(|date| httpdate::parse_http_date(date.trim()).ok())
                .unwrap_or_else(std::time::SystemTime::now);
            until.duration_since(now).unwrap_or(Duration::ZERO)
        }
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16, retry_after: Option<&str>) -> Response<()> {
        let mut builder = Response::builder().status(status);
        if let Some(value) = retry_after {
            builder = builder.header("Retry-After", value);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn retry_after_is_read_on_429_and_5xx_only_and_bounded() {
        assert_eq!(
            retry_after(&response(429, Some("7"))),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(&response(503, Some(" 2 "))),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            retry_after(&response(429, Some("3600"))),
            Some(MAX_RETRY_AFTER)
        );
        assert_eq!(retry_after(&response(429, None)), None);
        assert_eq!(retry_after(&response(429, Some("soon"))), None);
        assert_eq!(
            retry_after(&response(429, Some("Wed, 21 Oct 2015 07:28:00 GMT"))),
            Some(Duration::ZERO),
            "a date already past asks for no wait"
        );
        assert_eq!(
            retry_after(&response(429, Some("Fri, 31 Dec 1999 25:00:00 GMT"))),
            None
        );
        assert_eq!(retry_after(&response(429, Some("-3"))), None);
        assert_eq!(retry_after(&response(409, Some("1"))), None);
        assert_eq!(retry_after(&response(200, Some("1"))), None);
    }

    fn dated(retry_after: &str, date: Option<&str>) -> Response<()> {
        let mut builder = Response::builder()
            .status(503)
            .header("Retry-After", retry_after);
        if let Some(date) = date {
            builder = builder.header("Date", date);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn an_http_date_is_read_against_the_responses_date_and_bounded() {
        let date = Some("Fri, 31 Dec 1999 23:59:52 GMT");
        // The three forms RFC 9110 lets a recipient read.
        for form in [
            "Fri, 31 Dec 1999 23:59:59 GMT",
            "Friday, 31-Dec-99 23:59:59 GMT",
            "Fri Dec 31 23:59:59 1999",
        ] {
            assert_eq!(
                retry_after(&dated(form, date)),
                Some(Duration::from_secs(7)),
                "{form}"
            );
        }
        assert_eq!(
            retry_after(&dated("Sat, 01 Jan 2000 01:00:00 GMT", date)),
            Some(MAX_RETRY_AFTER)
        );
        assert_eq!(
            retry_after(&dated("Fri, 31 Dec 1999 23:00:00 GMT", date)),
            Some(Duration::ZERO)
        );
        // Without a Date, against this machine's clock.
        let soon = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(30));
        let wait = retry_after(&dated(&soon, None)).expect("a date");
        assert!(
            wait > Duration::from_secs(27) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
    }
}
