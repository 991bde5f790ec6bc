//! What is POSTed to the alert receiver: Alertmanager's webhook message (version 4),
//! or the plain list of alerts Prometheus and `amtool` POST to an Alertmanager's
//! `/api/v1/alerts` and `/api/v2/alerts`.

use super::PrometheusAlert;
use serde::Deserialize;

/// A parsed POST body.
#[derive(Debug, Clone, PartialEq)]
pub enum AlertPost {
    /// Alertmanager's `webhook_config` message.
    Webhook {
        /// `version`, `"4"` for every Alertmanager since 0.8; other versions are read
        /// the same way, as far as their alerts have the same shape.
        version: String,
        /// The Alertmanager receiver that sent it, for the log.
        receiver: String,
        /// The group the alerts belong to, for the log.
        group_key: String,
        /// The alerts, firing and resolved.
        alerts: Vec<PrometheusAlert>,
    },
    /// A JSON array of alerts, as Prometheus POSTs them to an Alertmanager.
    List(Vec<PrometheusAlert>),
}

/// Why a POST body is not alerts.
#[derive(Debug, thiserror::Error)]
pub enum AlertPostError {
    /// The body is neither a JSON object nor a JSON array.
    #[error("expected Alertmanager's webhook message (a JSON object) or a JSON array of alerts")]
    NotAlerts,
    /// The JSON does not have the expected shape; the path says where.
    #[error("{path}: {source}")]
    Json {
        /// Where in the document, e.g. `alerts[2].labels`.
        path: String,
        /// What is wrong there.
        #[source]
        source: serde_json::Error,
    },
}

/// The fields of a webhook message the receiver uses; the others (`groupLabels`,
/// `commonLabels`, `externalURL`, `truncatedAlerts`, ...) are ignored.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WebhookMessage {
    #[serde(default)]
    version: String,
    #[serde(default)]
    receiver: String,
    #[serde(default)]
    group_key: String,
    alerts: Vec<PrometheusAlert>,
}

impl AlertPost {
    /// Parses `body`: an object is a webhook message, an array a list of alerts.
    pub fn parse(body: &[u8]) -> Result<Self, AlertPostError> {
        let first = body.iter().find(|b| !b.is_ascii_whitespace());
        match first {
            Some(b'{') => {
                let message: WebhookMessage = from_slice(body)?;
                Ok(Self::Webhook {
                    version: message.version,
                    receiver: message.receiver,
                    group_key: message.group_key,
                    alerts: message.alerts,
                })
            }
            Some(b'[') => Ok(Self::List(from_slice(body)?)),
            _ => Err(AlertPostError::NotAlerts),
        }
    }

    /// The alerts.
    pub fn alerts(&self) -> &[PrometheusAlert] {
        match self {
            Self::Webhook { alerts, .. } | Self::List(alerts) => alerts,
        }
    }
}

fn from_slice<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, AlertPostError> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        AlertPostError::Json {
            path,
            source: e.into_inner(),
        }
    })?;
    deserializer.end().map_err(|source| AlertPostError::Json {
        path: ".".to_owned(),
        source,
    })?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;

    use operon_tests::alertmanager::{FIRING, LIST, MIXED, RESOLVED};

    fn now() -> Timestamp {
        "2024-05-01T10:30:00Z".parse().unwrap()
    }

    #[test]
    fn reads_alertmanager_webhook_messages() {
        let post = AlertPost::parse(FIRING.as_bytes()).unwrap();
        let AlertPost::Webhook {
            version,
            receiver,
            group_key,
            alerts,
        } = &post
        else {
            panic!("{post:?}")
        };
        assert_eq!(version, "4");
        assert_eq!(receiver, "operon");
        assert!(group_key.contains("NodeFilesystemSpaceFillingUp"));
        assert_eq!(alerts.len(), 2);
        assert_eq!(alerts[0].labels["node"], "worker-1");
        assert_eq!(alerts[0].status, "firing");
        assert!(
            alerts[0]
                .generator_url
                .starts_with("http://prometheus-k8s-0")
        );
        assert!(alerts.iter().all(|a| !a.is_resolved_at(now())));
    }

    #[test]
    fn resolved_alerts_are_told_apart() {
        let post = AlertPost::parse(MIXED.as_bytes()).unwrap();
        let resolved: Vec<bool> = post
            .alerts()
            .iter()
            .map(|a| a.is_resolved_at(now()))
            .collect();
        assert_eq!(resolved, [true, false]);
        let post = AlertPost::parse(RESOLVED.as_bytes()).unwrap();
        assert!(post.alerts().iter().all(|a| a.is_resolved_at(now())));
    }

    #[test]
    fn reads_a_plain_list() {
        let post = AlertPost::parse(LIST.as_bytes()).unwrap();
        assert!(matches!(post, AlertPost::List(_)));
        assert_eq!(post.alerts().len(), 1);
        assert_eq!(post.alerts()[0].status, "");
        assert!(!post.alerts()[0].is_resolved_at(now()));
    }

    #[test]
    fn errors_say_where() {
        let error =
            AlertPost::parse(br#"{"version":"4","alerts":[{"labels":{"a":1}}]}"#).unwrap_err();
        assert!(
            error.to_string().starts_with("alerts[0].labels.a: "),
            "{error}"
        );
        let error = AlertPost::parse(br#"{"version":"4"}"#).unwrap_err();
        assert!(
            error.to_string().contains("missing field `alerts`"),
            "{error}"
        );
        assert!(matches!(
            AlertPost::parse(b"  \"x\""),
            Err(AlertPostError::NotAlerts)
        ));
        assert!(AlertPost::parse(b"[] []").is_err(), "trailing data");
    }
}
