//! Which patches of one run are sent together.
//!
//! shell-operator applies a run's patches one after another, and the queue waits for
//! each round trip: a combined run of 50 events with a patch each waits 50 round
//! trips before the next task starts. Patches that change existing objects
//! (`MergePatch`, `JSONPatch`, `JQPatch`) and follow each other are sent together as
//! long as no two of them name the same object, so each object still sees its patches
//! in the run's order. A `Create…` or `Delete…` is sent alone, after everything before
//! it answered and before anything after it: a later patch may need what it creates
//! (a Namespace, then a ConfigMap in it) or must not meet what it deletes.
//!
//! The first failing patch by position fails the run, as when they are sent one at a
//! time; the other patches of its batch were already in flight and may have been
//! applied, which a retry of the run applies again, as it does the patches before a
//! failing one in shell-operator.

use operon_data::model::{ObjectRef, PatchOperation};
use std::collections::HashSet;
use std::ops::Range;

/// At most this many patches of one run are in flight at once; the client's own rate
/// limit (`--kube-client-qps`, `--kube-client-burst`) still paces them.
pub(crate) const MAX_IN_FLIGHT: usize = 32;

/// The positions of `patches` in batches, in order: the patches of a batch may be sent
/// together, a batch only once the one before it answered.
pub(crate) fn batches(patches: &[PatchOperation]) -> Vec<Range<usize>> {
    let mut batches = Vec::new();
    let mut start = 0;
    // Objects named in the current batch, by namespace and name only: two kinds of the
    // same name are kept in order too, rather than guessing whether "pods" is "Pod".
    let mut named: HashSet<(Option<&str>, &str)> = HashSet::new();
    for (i, patch) in patches.iter().enumerate() {
        let together = match changed(patch) {
            Some(target) => {
                i - start < MAX_IN_FLIGHT
                    && named.insert((target.namespace.as_deref(), target.name.as_str()))
            }
            None => false,
        };
        if !together {
            if i > start {
                batches.push(start..i);
            }
            start = i;
            named.clear();
            if let Some(target) = changed(patch) {
                named.insert((target.namespace.as_deref(), target.name.as_str()));
            } else {
                batches.push(i..i + 1);
                start = i + 1;
            }
        }
    }
    if start < patches.len() {
        batches.push(start..patches.len());
    }
    batches
}

/// The existing object a patch changes, or `None` for a create or delete.
fn changed(patch: &PatchOperation) -> Option<&ObjectRef> {
    match patch {
        PatchOperation::MergePatch(spec) | PatchOperation::JsonPatch(spec) => Some(&spec.target),
        PatchOperation::JqPatch(spec) => Some(&spec.target),
        PatchOperation::Create(_)
        | PatchOperation::CreateOrUpdate(_)
        | PatchOperation::CreateIfNotExists(_)
        | PatchOperation::Delete(_)
        | PatchOperation::DeleteInBackground(_)
        | PatchOperation::DeleteNonCascading(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use operon_data::model::{CreateSpec, JqPatchSpec, PatchSpec};

    fn target(namespace: Option<&str>, kind: &str, name: &str) -> ObjectRef {
        ObjectRef {
            api_version: None,
            kind: kind.to_owned(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        }
    }

    fn merge(name: &str) -> PatchOperation {
        PatchOperation::MergePatch(PatchSpec {
            target: target(Some("ns"), "Pod", name),
            patch: "{}".to_owned(),
            subresource: None,
            ignore_missing_object: false,
        })
    }

    fn create() -> PatchOperation {
        PatchOperation::Create(CreateSpec {
            object: "{}".to_owned(),
            subresource: None,
        })
    }

    #[test]
    fn patches_of_different_objects_go_together_and_each_object_keeps_its_order() {
        assert_eq!(batches(&[]), Vec::<Range<usize>>::new());
        assert_eq!(batches(&[merge("a"), merge("b"), merge("c")]), vec![(0..3)]);
        // The second patch of `a` waits for the first.
        assert_eq!(
            batches(&[merge("a"), merge("b"), merge("a"), merge("c")]),
            [0..2, 2..4]
        );
        let jq = PatchOperation::JqPatch(JqPatchSpec {
            target: target(Some("ns"), "pods", "a"),
            jq_filter: ".".to_owned(),
            subresource: None,
            ignore_missing_object: false,
        });
        // The same namespace and name under another spelling of the kind: in order.
        assert_eq!(batches(&[merge("a"), jq]), [0..1, 1..2]);
        // The same name in another namespace, or cluster-wide, is another object.
        let elsewhere = PatchOperation::JsonPatch(PatchSpec {
            target: target(None, "Node", "a"),
            patch: "[]".to_owned(),
            subresource: None,
            ignore_missing_object: false,
        });
        assert_eq!(batches(&[merge("a"), elsewhere]), vec![(0..2)]);
    }

    #[test]
    fn creates_and_deletes_go_alone_between_what_comes_before_and_after() {
        let delete = PatchOperation::Delete(target(Some("ns"), "Pod", "z"));
        assert_eq!(
            batches(&[
                merge("a"),
                merge("b"),
                create(),
                merge("c"),
                delete,
                merge("d")
            ]),
            [0..2, 2..3, 3..4, 4..5, 5..6]
        );
        assert_eq!(batches(&[create(), create()]), [0..1, 1..2]);
    }

    #[test]
    fn a_batch_holds_at_most_the_patches_allowed_in_flight() {
        let many: Vec<PatchOperation> = (0..MAX_IN_FLIGHT * 2 + 1)
            .map(|i| merge(&format!("p{i}")))
            .collect();
        assert_eq!(
            batches(&many),
            [
                0..MAX_IN_FLIGHT,
                MAX_IN_FLIGHT..MAX_IN_FLIGHT * 2,
                MAX_IN_FLIGHT * 2..MAX_IN_FLIGHT * 2 + 1
            ]
        );
    }
}
