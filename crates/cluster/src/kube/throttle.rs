//! Client-side request rate limiting (shell-operator's `--kube-client-qps` and
//! `--kube-client-burst`): a token bucket in front of the client's HTTP service, so a
//! storm of hook patches cannot flood the API server.

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tower::{Layer, Service};

/// The layer; `qps` 0 (or less) lets every request through.
#[derive(Clone)]
pub(super) struct Throttle {
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
}

impl Throttle {
    /// `qps` sustained requests per second, `burst` more at once after a quiet period.
    pub(super) fn new(qps: f32, burst: u32) -> Self {
        let limiter = (qps > 0.0 && qps.is_finite()).then(|| {
            let period = Duration::from_secs_f64(1.0 / f64::from(qps));
            let burst = NonZeroU32::new(burst.max(1)).unwrap_or(NonZeroU32::MIN);
            // `with_period` only fails for a zero period, which a finite qps never gives.
            let quota = Quota::with_period(period)
                .unwrap_or_else(|| Quota::per_second(NonZeroU32::MAX))
                .allow_burst(burst);
            Arc::new(RateLimiter::direct(quota))
        });
        Self { limiter }
    }
}

impl<S> Layer<S> for Throttle {
    type Service = Throttled<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Throttled {
            inner,
            limiter: self.limiter.clone(),
            wait: None,
            permitted: false,
        }
    }
}

/// The service the layer wraps: a request is only sent once a token is taken.
pub(super) struct Throttled<S> {
    inner: S,
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
    wait: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    /// A token was taken for the next call.
    permitted: bool,
}

impl<S, R> Service<R> for Throttled<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if let Some(limiter) = &self.limiter
            && !self.permitted
        {
            let wait = self.wait.get_or_insert_with(|| {
                let limiter = limiter.clone();
                Box::pin(async move { limiter.until_ready().await })
            });
            ready!(wait.as_mut().poll(cx));
            self.wait = None;
            self.permitted = true;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.permitted = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt as _;

    #[tokio::test]
    async fn a_burst_passes_then_requests_wait_for_a_token() {
        let service =
            tower::service_fn(|n: u32| async move { Ok::<_, std::convert::Infallible>(n) });
        // One token every 500 ms, three at once.
        let mut throttled = Throttle::new(2.0, 3).layer(service);
        for n in 0..3 {
            let ready = futures::poll!(throttled.ready());
            assert!(ready.is_ready(), "request {n} of the burst had to wait");
            throttled.call(n).await.unwrap();
        }
        assert!(futures::poll!(throttled.ready()).is_pending());
        let started = std::time::Instant::now();
        throttled.ready().await.unwrap().call(3).await.unwrap();
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(300),
            "waited only {waited:?}"
        );
    }

    #[tokio::test]
    async fn zero_qps_means_no_limit() {
        let service =
            tower::service_fn(|n: u32| async move { Ok::<_, std::convert::Infallible>(n) });
        let mut throttled = Throttle::new(0.0, 0).layer(service);
        for n in 0..1000 {
            throttled.ready().await.unwrap().call(n).await.unwrap();
        }
    }
}
