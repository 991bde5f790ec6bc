//! `$METRICS_PATH`: JSON documents, one per line by convention, with the `add` / `set`
//! shortcuts, read into [`MetricOperation`]s, and metric operations written back in
//! the same shape.

use super::files::{HookFileError, METRICS};
use super::stream::json_stream;
use operon_data::model::{MetricOperation, Observation, Sample};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// One document of `$METRICS_PATH`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MetricDocument {
    name: Option<String>,
    action: Option<String>,
    value: Option<f64>,
    buckets: Option<Vec<f64>>,
    labels: Option<BTreeMap<String, String>>,
    group: Option<String>,
    add: Option<f64>,
    set: Option<f64>,
}

/// Reads `$METRICS_PATH`.
pub fn parse(text: &str) -> Result<Vec<MetricOperation>, HookFileError> {
    let file = METRICS;
    let docs = json_stream(text).map_err(|(line, reason)| file.error(line, reason))?;
    docs.into_iter()
        .map(|(line, value)| {
            let doc: MetricDocument =
                serde_json::from_value(value).map_err(|e| file.error(line, e.to_string()))?;
            metric_operation(doc).map_err(|reason| file.error(line, reason))
        })
        .collect()
}

fn metric_operation(doc: MetricDocument) -> Result<MetricOperation, String> {
    let group = doc.group.filter(|g| !g.is_empty());
    let (action, value) = match (doc.action.as_deref(), doc.add, doc.set) {
        (Some(action), None, None) => (action, doc.value),
        (None, Some(add), None) => ("add", Some(add)),
        (None, None, Some(set)) => ("set", Some(set)),
        (None, None, None) => return Err("no action (add, set, observe or expire)".to_owned()),
        _ => return Err("give one of action, add and set".to_owned()),
    };
    if action == "expire" {
        return group
            .map(MetricOperation::ExpireGroup)
            .ok_or_else(|| "expire needs a group".to_owned());
    }
    let name = doc
        .name
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("{action} needs a name"))?;
    let value = value.ok_or_else(|| format!("{action} needs a value"))?;
    let labels: Vec<(String, String)> = doc.labels.unwrap_or_default().into_iter().collect();
    match action {
        "add" => Ok(MetricOperation::Add(Sample {
            name,
            value,
            labels,
            group,
        })),
        "set" => Ok(MetricOperation::Set(Sample {
            name,
            value,
            labels,
            group,
        })),
        "observe" => Ok(MetricOperation::Observe(Observation {
            name,
            value,
            buckets: doc.buckets.ok_or("observe needs buckets")?,
            labels,
            group,
        })),
        other => Err(format!(
            "unknown action {other:?}; expected add, set, observe or expire"
        )),
    }
}

/// A metric operation as one `$METRICS_PATH` document: the shape [`parse`] reads back.
pub fn to_json(operation: &MetricOperation) -> Value {
    let labels = |labels: &[(String, String)]| -> Value {
        Value::Object(
            labels
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        )
    };
    match operation {
        MetricOperation::Add(s) | MetricOperation::Set(s) => json!({
            "name": s.name,
            "action": if matches!(operation, MetricOperation::Add(_)) { "add" } else { "set" },
            "value": s.value,
            "labels": labels(&s.labels),
            "group": s.group,
        }),
        MetricOperation::Observe(o) => json!({
            "name": o.name,
            "action": "observe",
            "value": o.value,
            "buckets": o.buckets,
            "labels": labels(&o.labels),
            "group": o.group,
        }),
        MetricOperation::ExpireGroup(group) => json!({"action": "expire", "group": group}),
    }
}

/// A whole `$METRICS_PATH` file: one JSON document per line.
pub fn to_text(operations: &[MetricOperation]) -> String {
    operations
        .iter()
        .map(|operation| format!("{}\n", to_json(operation)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_with_shortcuts_groups_and_expiry() {
        let text = r#"{"name":"hook_metric_count","action":"add","value":1,"labels":{"label1":"value1"}}
{"name":"metric_name","add":2}
{"group":"group1","name":"items","set":12,"labels":{"kind":"pod"}}
{"name":"latency","action":"observe","value":0.3,"buckets":[0.1,1]}
{"group":"group1","action":"expire"}
"#;
        let ops = parse(text).unwrap();
        assert!(
            matches!(&ops[0], MetricOperation::Add(s) if s.value == 1.0 && s.labels == [("label1".to_owned(), "value1".to_owned())])
        );
        assert!(matches!(&ops[1], MetricOperation::Add(s) if s.value == 2.0 && s.group.is_none()));
        assert!(matches!(&ops[2], MetricOperation::Set(s) if s.group.as_deref() == Some("group1")));
        assert!(matches!(&ops[3], MetricOperation::Observe(o) if o.buckets == [0.1, 1.0]));
        assert_eq!(ops[4], MetricOperation::ExpireGroup("group1".to_owned()));
    }

    #[test]
    fn metric_errors_have_lines() {
        let err = parse("{\"name\":\"a\",\"add\":1}\n{\"name\":\"b\"}\n").unwrap_err();
        assert_eq!((err.variable, err.line), ("METRICS_PATH", 2));
        let err = parse("{\"name\":\"a\",\"add\":1}\nnot json\n").unwrap_err();
        assert_eq!(err.line, 2);
    }

    #[test]
    fn written_operations_read_back_unchanged() {
        let labels = vec![
            ("a".to_owned(), "1".to_owned()),
            ("b".to_owned(), "2".to_owned()),
        ];
        let operations = vec![
            MetricOperation::Add(Sample {
                name: "runs_total".to_owned(),
                value: 1.0,
                labels: labels.clone(),
                group: None,
            }),
            MetricOperation::Set(Sample {
                name: "items".to_owned(),
                value: -2.5,
                labels: vec![],
                group: Some("g".to_owned()),
            }),
            MetricOperation::Observe(Observation {
                name: "latency".to_owned(),
                value: 0.3,
                buckets: vec![0.1, 1.0],
                labels,
                group: Some("g".to_owned()),
            }),
            MetricOperation::ExpireGroup("g".to_owned()),
        ];
        assert_eq!(parse(&to_text(&operations)).unwrap(), operations);
    }
}
