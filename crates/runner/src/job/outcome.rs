//! Reading a Job step's state from its Job and pods: finished, failed (and why, in
//! words a user can act on), or still running. No I/O: the runner feeds it what its
//! watches see.

use super::spec::CONTAINER;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use std::collections::BTreeMap;

/// The kubelet keeps at most this many bytes of a termination message.
pub const MAX_TERMINATION_MESSAGE: usize = 4096;

/// Container waiting reasons that do not get better by waiting.
const FATAL_WAITING: &[&str] = &[
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// Where a run stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assessment {
    /// Still running (or not started).
    Running,
    /// The container exited 0; its pod is named so the result can be read.
    Succeeded {
        /// The pod.
        pod: String,
        /// Its termination message.
        message: String,
    },
    /// It failed or cannot start.
    Failed(String),
}

/// The reason and message of `job`'s condition `type_`, when it is true.
pub(super) fn condition<'a>(job: &'a Job, type_: &str) -> Option<(&'a str, &'a str)> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
        .map(|c| {
            (
                c.reason.as_deref().unwrap_or(""),
                c.message.as_deref().unwrap_or(""),
            )
        })
}

fn step_status(pod: &Pod) -> Option<&ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == CONTAINER)
}

fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("<unnamed>")
}

/// Why `pod` failed or cannot start, if it did.
fn pod_failure(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    let container = step_status(pod);
    if let Some(waiting) = container
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.waiting.as_ref())
        && let Some(reason) = waiting.reason.as_deref()
        && FATAL_WAITING.contains(&reason)
    {
        let image = container.map_or("", |c| c.image.as_str());
        let what = if reason.contains("Image") {
            format!("the image {image:?} cannot be pulled")
        } else {
            "the container cannot be created".to_owned()
        };
        return Some(format!(
            "pod {} {what} ({reason}): {}",
            name(pod),
            waiting.message.as_deref().unwrap_or("no message")
        ));
    }
    if status.phase.as_deref() != Some("Failed") {
        return None;
    }
    if status.reason.as_deref() == Some("Evicted") {
        return Some(format!(
            "pod {} was evicted from node {}: {}",
            name(pod),
            pod.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .unwrap_or("?"),
            status.message.as_deref().unwrap_or("no message")
        ));
    }
    if let Some(terminated) = container
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
    {
        let mut text = format!(
            "pod {} exited with code {}",
            name(pod),
            terminated.exit_code
        );
        if let Some(reason) = terminated.reason.as_deref().filter(|r| *r != "Error") {
            text.push_str(&format!(" ({reason})"));
        }
        if let Some(message) = terminated.message.as_deref().map(str::trim)
            && !message.is_empty()
        {
            let tail = message.lines().last().unwrap_or("");
            text.push_str(&format!(": {tail}"));
        }
        return Some(text);
    }
    Some(format!(
        "pod {} failed: {}",
        name(pod),
        status
            .message
            .as_deref()
            .or(status.reason.as_deref())
            .unwrap_or("no reason given")
    ))
}

/// Where the run of `job_name` stands given its Job (`None`: it does not exist) and
/// its pods.
pub fn assess(job_name: &str, job: Option<&Job>, pods: &BTreeMap<String, Pod>) -> Assessment {
    let Some(job) = job else {
        return Assessment::Failed(format!(
            "Job {job_name} was deleted before it finished (deleting the Diagnosis deletes its Jobs)"
        ));
    };
    for pod in pods.values() {
        let succeeded = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded");
        if succeeded {
            let message = step_status(pod)
                .and_then(|c| c.state.as_ref())
                .and_then(|s| s.terminated.as_ref())
                .and_then(|t| t.message.clone())
                .unwrap_or_default();
            return Assessment::Succeeded {
                pod: name(pod).to_owned(),
                message,
            };
        }
    }
    // The pods say more than the Job's condition (which only counts failures).
    if let Some(reason) = pods.values().find_map(pod_failure) {
        return Assessment::Failed(format!("Job {job_name}: {reason}"));
    }
    if let Some((reason, message)) = condition(job, "Failed") {
        let what = match reason {
            "DeadlineExceeded" => "ran past its deadline (the Operation's timeoutSeconds)",
            "BackoffLimitExceeded" => "failed",
            _ => "failed",
        };
        return Assessment::Failed(format!("Job {job_name} {what}: {reason}: {message}"));
    }
    if condition(job, "Complete").is_some() {
        return Assessment::Failed(format!(
            "Job {job_name} completed but its pod is gone, so its results cannot be read"
        ));
    }
    Assessment::Running
}

/// The results a container wrote: a JSON object of strings, or nothing.
pub fn parse_results(text: &str, bound: usize) -> Result<BTreeMap<String, String>, String> {
    if text.len() > bound {
        return Err(format!(
            "the result is {} bytes, more than the {bound} bytes read",
            text.len()
        ));
    }
    if text.trim().is_empty() {
        return Ok(BTreeMap::new());
    }
    serde_json::from_str(text.trim()).map_err(|e| {
        let excerpt: String = text.chars().take(120).collect();
        format!(
            "the result is not a JSON object of strings ({e}): {excerpt:?}; write one, e.g. {{\"key\":\"value\"}}, to $OPERON_RESULT_PATH"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(conditions: serde_json::Value) -> Job {
        serde_json::from_value(
            json!({"metadata": {"name": "j"}, "status": {"conditions": conditions}}),
        )
        .unwrap()
    }

    fn pod(status: serde_json::Value) -> BTreeMap<String, Pod> {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "j-abc"}, "spec": {"nodeName": "n1", "containers": []},
            "status": status,
        }))
        .unwrap();
        [("j-abc".to_owned(), pod)].into()
    }

    fn terminated(code: i32, reason: &str, message: &str) -> serde_json::Value {
        json!([{"name": "step", "image": "img:1", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": code, "reason": reason, "message": message}}}])
    }

    #[test]
    fn success_carries_the_termination_message() {
        let pods = pod(json!({"phase": "Succeeded",
            "containerStatuses": terminated(0, "Completed", r#"{"a":"1"}"#)}));
        assert_eq!(
            assess("j", Some(&job(json!([]))), &pods),
            Assessment::Succeeded {
                pod: "j-abc".into(),
                message: r#"{"a":"1"}"#.into()
            }
        );
    }

    #[test]
    fn failures_say_why() {
        let running = job(json!([]));
        let cases = [
            (
                json!({"phase": "Pending", "containerStatuses": [{"name": "step", "image": "nope:1",
                    "imageID": "", "ready": false, "restartCount": 0, "state": {"waiting": {
                    "reason": "ImagePullBackOff", "message": "Back-off pulling image"}}}]}),
                "Job j: pod j-abc the image \"nope:1\" cannot be pulled (ImagePullBackOff): Back-off pulling image",
            ),
            (
                json!({"phase": "Failed", "reason": "Evicted", "message": "low on memory"}),
                "Job j: pod j-abc was evicted from node n1: low on memory",
            ),
            (
                json!({"phase": "Failed", "containerStatuses": terminated(137, "OOMKilled", "")}),
                "Job j: pod j-abc exited with code 137 (OOMKilled)",
            ),
            (
                json!({"phase": "Failed", "containerStatuses": terminated(2, "Error", "x\ndisk full")}),
                "Job j: pod j-abc exited with code 2: disk full",
            ),
        ];
        for (status, expected) in cases {
            assert_eq!(
                assess("j", Some(&running), &pod(status)),
                Assessment::Failed(expected.into())
            );
        }
        let deadline = job(json!([{"type": "Failed", "status": "True",
            "reason": "DeadlineExceeded", "message": "Job was active longer than specified deadline"}]));
        assert_eq!(
            assess("j", Some(&deadline), &BTreeMap::new()),
            Assessment::Failed("Job j ran past its deadline (the Operation's timeoutSeconds): DeadlineExceeded: Job was active longer than specified deadline".into())
        );
        assert!(
            matches!(assess("j", None, &BTreeMap::new()), Assessment::Failed(m) if m.contains("was deleted"))
        );
        let waiting = pod(
            json!({"phase": "Pending", "containerStatuses": [{"name": "step",
            "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ContainerCreating"}}}]}),
        );
        assert_eq!(assess("j", Some(&running), &waiting), Assessment::Running);
    }

    #[test]
    fn results_are_bounded_json_objects_of_strings() {
        assert_eq!(parse_results("", 10).unwrap(), BTreeMap::new());
        assert_eq!(parse_results(r#" {"a":"b"} "#, 100).unwrap()["a"], "b");
        assert!(
            parse_results(r#"{"a":1}"#, 100)
                .unwrap_err()
                .contains("JSON object of strings")
        );
        assert!(
            parse_results(&"x".repeat(11), 10)
                .unwrap_err()
                .contains("more than the 10 bytes")
        );
    }
}
