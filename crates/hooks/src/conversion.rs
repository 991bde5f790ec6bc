//! Conversion of custom resources through chains of hook bindings: a ConversionReview
//! for a CRD is answered by whatever sequence of `kubernetesCustomResourceConversion`
//! rules, across every hook, leads from each object's version to the desired one
//! (shell-operator's conversion chains).
//!
//! Versions are matched as shell-operator matches them: `example.com/v1` and `v1` are
//! the same version of one CRD, so a rule may name versions with or without the group.
//! Unlike shell-operator, which searches a growing cache of paths, the chain is a
//! breadth-first search over the rules: the shortest chain, and among equally short
//! ones the first in hook, binding and rule order, so the choice is deterministic.
//! Each step runs one binding with a ConversionReview whose objects are in the step's
//! `fromVersion` and whose `desiredAPIVersion` is the step's `toVersion`, so a hook
//! always converts exactly one step. Objects are grouped by their version, converted
//! group by group, and put back in the order the API server sent them.

use super::engine::{Engine, LoadedHook, RunRecord};
use serde_json::Value;
use std::collections::{HashSet, VecDeque};

/// One step of a chain: which binding of which hook converts from one version to the
/// next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConversionStep {
    /// The hook's index in the engine.
    pub(crate) hook: usize,
    /// The conversion binding's name.
    pub(crate) binding: String,
    /// The step's source version, with its group.
    pub(crate) from: String,
    /// The step's target version, with its group.
    pub(crate) to: String,
}

/// Whether two versions name the same one: equal, or one without a group and equal to
/// the other's version part. Different groups never match.
pub(crate) fn versions_match(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (a.split_once('/'), b.split_once('/')) {
        (None, Some((_, version))) => a == version,
        (Some((_, version)), None) => version == b,
        _ => false,
    }
}

/// `version` with `group` when it has none.
fn qualified(version: &str, group: &str) -> String {
    if version.contains('/') || group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

/// The shortest chain of conversion rules of `hooks` for CRD `crd` from version `from`
/// to version `to`; an empty chain when they match; `None` when no chain exists.
pub(crate) fn chain(
    hooks: &[LoadedHook],
    crd: &str,
    from: &str,
    to: &str,
) -> Option<Vec<ConversionStep>> {
    if versions_match(from, to) {
        return Some(Vec::new());
    }
    let group = to
        .split_once('/')
        .or_else(|| from.split_once('/'))
        .map_or("", |(group, _)| group);
    let edges: Vec<ConversionStep> = hooks
        .iter()
        .enumerate()
        .flat_map(|(h, loaded)| {
            (loaded.config.conversions.iter())
                .filter(|b| b.crd_name == crd)
                .flat_map(move |b| {
                    b.conversions.iter().map(move |rule| ConversionStep {
                        hook: h,
                        binding: b.name.clone(),
                        from: qualified(&rule.from_version, group),
                        to: qualified(&rule.to_version, group),
                    })
                })
        })
        .collect();
    let start = qualified(from, group);
    let mut seen = HashSet::from([start.clone()]);
    let mut queue = VecDeque::from([(start, Vec::<usize>::new())]);
    while let Some((version, path)) = queue.pop_front() {
        for (e, edge) in edges.iter().enumerate() {
            if !versions_match(&edge.from, &version) || !seen.insert(edge.to.clone()) {
                continue;
            }
            let mut next = path.clone();
            next.push(e);
            if versions_match(&edge.to, to) {
                return Some(next.into_iter().map(|e| edges[e].clone()).collect());
            }
            queue.push_back((edge.to.clone(), next));
        }
    }
    None
}

/// What converting a review came to: the converted objects in request order, or why
/// not; and every hook run it took, in order.
#[derive(Debug)]
pub struct Converted {
    /// The objects as JSON text, or the failure message the API server reports.
    pub outcome: Result<Vec<String>, String>,
    /// The runs, one per step of each chain.
    pub runs: Vec<RunRecord>,
}

impl Engine {
    /// Answers the ConversionReview `review` for CRD `crd` through the chains of every
    /// hook's conversion bindings (see the module doc). Runs outside the queues, as
    /// admission does: the API server is waiting.
    pub async fn convert(&self, crd: &str, review: &Value) -> Converted {
        let mut runs = Vec::new();
        let outcome = self.convert_objects(crd, review, &mut runs).await;
        Converted { outcome, runs }
    }

    async fn convert_objects(
        &self,
        crd: &str,
        review: &Value,
        runs: &mut Vec<RunRecord>,
    ) -> Result<Vec<String>, String> {
        let desired = (review.pointer("/request/desiredAPIVersion"))
            .and_then(Value::as_str)
            .ok_or("the review has no request.desiredAPIVersion")?;
        let mut objects: Vec<Value> = (review.pointer("/request/objects"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        // Indices of the objects of each version, in the order versions first appear.
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        for (i, object) in objects.iter().enumerate() {
            let version = object
                .get("apiVersion")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("object {i} of the review has no apiVersion"))?;
            match groups.iter_mut().find(|(v, _)| v == version) {
                Some((_, indices)) => indices.push(i),
                None => groups.push((version.to_owned(), vec![i])),
            }
        }
        for (version, indices) in groups {
            let steps = chain(self.hooks(), crd, &version, desired).ok_or_else(|| {
                format!("no hook converts {crd} from {version} to {desired} (no chain of conversion rules leads there)")
            })?;
            let mut current: Vec<Value> = indices.iter().map(|&i| objects[i].take()).collect();
            for step in steps {
                current = self.convert_step(&step, review, current, runs).await?;
            }
            for (i, object) in indices.into_iter().zip(current) {
                objects[i] = object;
            }
        }
        Ok(objects.iter().map(Value::to_string).collect())
    }

    /// Runs one step: the review with this step's objects and target, checked answer.
    async fn convert_step(
        &self,
        step: &ConversionStep,
        review: &Value,
        objects: Vec<Value>,
        runs: &mut Vec<RunRecord>,
    ) -> Result<Vec<Value>, String> {
        let asked = objects.len();
        let mut request = review.clone();
        request["request"]["objects"] = Value::Array(objects);
        request["request"]["desiredAPIVersion"] = Value::String(step.to.clone());
        let hook = self.hooks()[step.hook].hook.name().to_owned();
        let record = self
            .review(step.hook, &step.binding, request.to_string())
            .await
            .ok_or_else(|| format!("hook {hook} has no conversion binding {}", step.binding))?;
        let answer = match &record.run.outcome {
            Err(e) => Err(format!(
                "hook {hook} failed to convert from {} to {}: {e}",
                step.from, step.to
            )),
            Ok(output) => match &output.conversion {
                None => Err(format!(
                    "hook {hook} gave no answer for binding {}",
                    step.binding
                )),
                Some(answer) => match &answer.failed_message {
                    Some(message) => Err(message.clone()),
                    None => Ok(answer.converted_objects.clone()),
                },
            },
        };
        runs.push(record);
        let converted = answer?;
        if converted.len() != asked {
            return Err(format!(
                "hook {hook} returned {} objects instead of {asked} converting to {}",
                converted.len(),
                step.to
            ));
        }
        converted
            .iter()
            .map(|text| {
                let object: Value = serde_json::from_str(text).map_err(|e| {
                    format!("hook {hook} returned an object that is not JSON: {e}")
                })?;
                let version = object.get("apiVersion").and_then(Value::as_str);
                if version.is_none_or(|v| !versions_match(v, &step.to)) {
                    return Err(format!(
                        "hook {hook} was asked to convert to {} and returned an object of apiVersion {}",
                        step.to,
                        version.unwrap_or("(none)")
                    ));
                }
                Ok(object)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config;
    use crate::{Hook, HookError, HookRun};
    use futures::future::BoxFuture;
    use operon_data::model::{ConversionBindingConfig, ConversionRule, HookConfig, HookInput};
    use std::sync::Arc;
    use std::time::Duration;

    struct Declares(HookConfig);

    impl Hook for Declares {
        fn name(&self) -> &str {
            "declares"
        }
        fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
            Box::pin(async move { Ok(self.0.clone()) })
        }
        fn handle(&self, _: HookInput, _: Duration) -> BoxFuture<'_, (HookRun, HookInput)> {
            unreachable!("chains are found without running hooks")
        }
    }

    /// A hook with one conversion binding per (crd, rules) item.
    fn hook(bindings: &[(&str, &[(&str, &str)])]) -> LoadedHook {
        let raw = HookConfig {
            kubernetes_conversion: bindings
                .iter()
                .enumerate()
                .map(|(i, (crd, rules))| ConversionBindingConfig {
                    name: format!("b{i}"),
                    crd_name: (*crd).to_owned(),
                    conversions: rules
                        .iter()
                        .map(|(from, to)| ConversionRule {
                            from_version: (*from).to_owned(),
                            to_version: (*to).to_owned(),
                        })
                        .collect(),
                    group: None,
                    include_snapshots_from: vec![],
                })
                .collect(),
            ..HookConfig::default()
        };
        let config = config::validate("declares", &raw, &config::any_kind).unwrap();
        LoadedHook {
            hook: Arc::new(Declares(raw)),
            config,
        }
    }

    fn steps(chain: Option<Vec<ConversionStep>>) -> Option<Vec<(usize, String, String)>> {
        chain.map(|steps| steps.into_iter().map(|s| (s.hook, s.from, s.to)).collect())
    }

    #[test]
    fn chains_cross_hooks_prefer_the_shortest_and_skip_other_crds() {
        const CRD: &str = "widgets.example.com";
        let hooks = [
            hook(&[
                (CRD, &[("v1", "v2")]),
                ("gadgets.example.com", &[("v2", "v9")]),
            ]),
            hook(&[(CRD, &[("example.com/v2", "example.com/v3"), ("v3", "v4")])]),
        ];
        let g = |v: &str| format!("example.com/{v}");
        assert_eq!(
            steps(chain(&hooks, CRD, "example.com/v1", "example.com/v4")),
            Some(vec![
                (0, g("v1"), g("v2")),
                (1, g("v2"), g("v3")),
                (1, g("v3"), g("v4"))
            ])
        );
        assert_eq!(
            steps(chain(&hooks, CRD, "example.com/v2", "v2")),
            Some(vec![])
        );
        // Another CRD's rules are not steps of this one.
        assert_eq!(
            steps(chain(&hooks, CRD, "example.com/v2", "example.com/v9")),
            None
        );
        assert_eq!(
            steps(chain(&hooks, CRD, "example.com/v4", "example.com/v1")),
            None
        );
        // A shortcut wins over the long way.
        let shortcut = [
            hooks[0].clone(),
            hooks[1].clone(),
            hook(&[(CRD, &[("v1", "v4")])]),
        ];
        assert_eq!(
            steps(chain(&shortcut, CRD, "example.com/v1", "example.com/v4")),
            Some(vec![(2, g("v1"), g("v4"))])
        );
        // A cycle of rules ends the search instead of looping.
        let cycle = [hook(&[(CRD, &[("v1", "v2"), ("v2", "v1")])])];
        assert_eq!(
            steps(chain(&cycle, CRD, "example.com/v1", "example.com/v5")),
            None
        );
    }

    #[test]
    fn versions_match_with_or_without_their_group() {
        assert!(versions_match("example.com/v1", "v1"));
        assert!(versions_match("v1", "example.com/v1"));
        assert!(versions_match("v1", "v1"));
        assert!(!versions_match("example.com/v1", "other.io/v1"));
        assert!(!versions_match("example.com/v1", "example.com/v2"));
    }
}
