//! [`TokenBucket`]: the per-Trigger rate limit (`spec.rateLimit`) as a pure value that
//! is told the time, so the controller and the alert receiver share one rule and tests
//! need no clock.

use operon_data::api::RateLimit;
use std::time::Instant;

/// Up to `diagnoses` tokens, refilled evenly at `diagnoses / perSeconds` per second;
/// creating a Diagnosis takes one.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    limit: RateLimit,
    /// Fractional, so that a slow refill (1 per hour) is not rounded away.
    tokens: f64,
    /// When `tokens` was last brought up to date.
    updated: Instant,
}

impl TokenBucket {
    /// A full bucket: a Trigger may use its whole burst at once.
    pub fn new(limit: RateLimit, now: Instant) -> Self {
        Self {
            limit,
            tokens: capacity(limit),
            updated: now,
        }
    }

    /// The limit the bucket enforces.
    #[cfg(test)]
    pub(crate) fn limit(&self) -> RateLimit {
        self.limit
    }

    /// Enforces `limit` from now on, keeping what was used: an edited Trigger does not
    /// get a fresh burst, and a lowered limit takes effect at once.
    pub fn set_limit(&mut self, limit: RateLimit, now: Instant) {
        if limit != self.limit {
            self.refill(now);
            self.limit = limit;
            self.tokens = self.tokens.min(capacity(limit));
        }
    }

    /// Takes a token when one is left.
    pub fn try_take(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Returns a token taken for a Diagnosis that was not created after all (it already
    /// existed, or the API server refused it): only new Diagnoses count.
    pub fn give_back(&mut self) {
        self.tokens = (self.tokens + 1.0).min(capacity(self.limit));
    }

    /// Whether the bucket is full at `now`, and so no different from a new one.
    pub fn is_full(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.tokens >= capacity(self.limit)
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        let per_second = capacity(self.limit) / f64::from(self.limit.per_seconds.max(1));
        self.tokens = (self.tokens + elapsed * per_second).min(capacity(self.limit));
        self.updated = now;
    }
}

fn capacity(limit: RateLimit) -> f64 {
    f64::from(limit.diagnoses)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limit(diagnoses: u32, per_seconds: u32) -> RateLimit {
        RateLimit {
            diagnoses,
            per_seconds,
        }
    }

    #[test]
    fn a_burst_then_an_even_refill() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(limit(3, 60), start);
        assert!(bucket.try_take(start));
        assert!(bucket.try_take(start));
        assert!(bucket.try_take(start));
        assert!(!bucket.try_take(start));
        // One token every 20 s.
        assert!(!bucket.try_take(start + Duration::from_secs(19)));
        assert!(bucket.try_take(start + Duration::from_secs(20)));
        assert!(!bucket.try_take(start + Duration::from_secs(21)));
        assert!(bucket.is_full(start + Duration::from_secs(100)));
    }

    #[test]
    fn given_back_tokens_do_not_exceed_the_burst() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(limit(1, 3600), start);
        assert!(bucket.try_take(start));
        bucket.give_back();
        bucket.give_back();
        assert!(bucket.try_take(start));
        assert!(!bucket.try_take(start));
    }

    #[test]
    fn a_lowered_limit_applies_at_once_and_a_raised_one_gives_no_fresh_burst() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(limit(10, 60), start);
        bucket.set_limit(limit(2, 60), start);
        assert!(bucket.try_take(start));
        assert!(bucket.try_take(start));
        assert!(!bucket.try_take(start));
        bucket.set_limit(limit(100, 60), start);
        assert!(!bucket.try_take(start), "no new burst from an edit");
        assert_eq!(bucket.limit(), limit(100, 60));
    }
}
