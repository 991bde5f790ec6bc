//! Prometheus metrics: hook metrics with groups, and the built-in engine metrics.
