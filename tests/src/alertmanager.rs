//! Alertmanager's and Prometheus's alert payloads, as their webhooks and API send them:
//! for the Trigger matching tests and the engine's alert receiver alike.

/// A webhook notification with firing alerts.
pub const FIRING: &str = include_str!("../fixtures/alertmanager/firing.json");
/// A webhook notification with firing and resolved alerts.
pub const MIXED: &str = include_str!("../fixtures/alertmanager/mixed.json");
/// A webhook notification whose alerts are all resolved.
pub const RESOLVED: &str = include_str!("../fixtures/alertmanager/resolved.json");
/// Prometheus's `/api/v1/alerts` answer.
pub const LIST: &str = include_str!("../fixtures/alertmanager/prometheus-list.json");
