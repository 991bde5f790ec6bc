//! Preparing a Diagnosis run: the OperationSet's graph checked, every Operation it uses
//! checked, and a [`Step`] built for each through [`Processors`]. `operon run` and the
//! Diagnosis controller make the same call, so a set runs the same way in both.

use super::Step;
use crate::graph::{self, Graph};
use operon_data::api::{Operation, OperationSet, Problem};
use operon_runner::processors::{self, Processors};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

/// Where a plan finds the Operations a set names.
pub trait Operations {
    /// The Operation called `name`, if there is one.
    fn get(&self, name: &str) -> Option<&Operation>;

    /// The directory relative module paths of `name` are resolved against.
    fn base_dir(&self, _name: &str) -> &Path {
        Path::new(".")
    }

    /// Where `name` was read from (e.g. `ops.yaml#2`), for messages.
    fn origin(&self, _name: &str) -> Option<String> {
        None
    }
}

impl Operations for BTreeMap<String, Operation> {
    fn get(&self, name: &str) -> Option<&Operation> {
        BTreeMap::get(self, name)
    }
}

/// A set ready to run.
#[derive(Debug)]
pub struct Plan {
    /// The checked graph.
    pub graph: Graph,
    /// The step of every Operation the graph uses, by name.
    pub steps: BTreeMap<String, Step>,
}

/// Why a set cannot run; every problem found is listed.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The graph is invalid.
    #[error("{set} is invalid; nothing ran")]
    InvalidGraph {
        /// `OperationSet/name`.
        set: String,
        /// Every problem of the graph.
        problems: Vec<Problem>,
    },
    /// An Operation the graph uses is invalid or its processor cannot be built.
    #[error("the Operations of {set} cannot run; nothing ran")]
    InvalidOperations {
        /// `OperationSet/name`.
        set: String,
        /// Every problem of the Operations the graph uses.
        problems: Vec<Problem>,
    },
}

impl PlanError {
    /// Every problem found.
    pub fn problems(&self) -> &[Problem] {
        match self {
            Self::InvalidGraph { problems, .. } | Self::InvalidOperations { problems, .. } => {
                problems
            }
        }
    }
}

/// Checks `set` and the Operations it uses, and builds their steps. Problems of
/// Operations the set does not use are not looked at.
pub fn plan(
    set: &OperationSet,
    operations: &dyn Operations,
    processors: &Processors,
) -> Result<Plan, PlanError> {
    let graph =
        graph::validate(set, |name| operations.get(name).is_some()).map_err(|problems| {
            PlanError::InvalidGraph {
                set: set.object_ref(),
                problems,
            }
        })?;
    // In node order, each Operation once (a set may have 100,000 nodes).
    let mut seen = HashSet::new();
    let used: Vec<(&str, &Operation)> = (0..graph.len())
        .filter_map(|id| graph.operation(id))
        .filter(|name| seen.insert(*name))
        .filter_map(|name| operations.get(name).map(|op| (name, op)))
        .collect();
    let invalid = |problems| PlanError::InvalidOperations {
        set: set.object_ref(),
        problems,
    };
    let problems: Vec<Problem> = used.iter().flat_map(|(_, op)| op.validate()).collect();
    if !problems.is_empty() {
        return Err(invalid(problems));
    }
    let mut steps = BTreeMap::new();
    let mut problems = Vec::new();
    for (name, op) in used {
        match processors.runner(op, operations.base_dir(name)) {
            Ok(runner) => {
                let storage = op
                    .spec
                    .storage
                    .as_ref()
                    .and_then(|s| s.host_path.as_ref())
                    .map(|h| PathBuf::from(&h.path));
                steps.insert(
                    name.to_owned(),
                    Step {
                        runner,
                        timeout: processors::timeout(op),
                        storage,
                    },
                );
            }
            Err(reason) => {
                let object = match operations.origin(name) {
                    Some(origin) => format!("{} ({origin})", op.object_ref()),
                    None => op.object_ref(),
                };
                problems.push(Problem::new(object, "spec.processor", reason.to_string()));
            }
        }
    }
    if problems.is_empty() {
        Ok(Plan { graph, steps })
    } else {
        Err(invalid(problems))
    }
}
