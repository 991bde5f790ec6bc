//! Binding contexts built from arbitrary objects, and read back from the JSON a script
//! hook receives in `$BINDING_CONTEXT_PATH`.
//!
//! The input is JSON: an array of objects (anything else is also read as a context
//! file). Each object passes through a jq filter and becomes a snapshot entry, the way
//! a `kubernetes` binding keeps what it watches; the context built from them, written
//! as shell-operator's JSON, reads back as the same context, and its snapshot is
//! sorted by namespace and name. Whatever reads as a context file writes out and reads
//! back the same.

use operon_data::model::{BindingContext, BindingType, WatchEvent};
use operon_hooks::context::{SnapshotEntry, Snapshots, sorted_items};
use operon_hooks::shell_operator::context;
use serde_json::Value;

/// Checks one input; panics on a finding.
pub fn check(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let Ok(value) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    if let Ok(contexts) = context::from_json(&value) {
        let written = context::to_json(&contexts);
        let again = context::from_json(&written)
            .unwrap_or_else(|e| panic!("{written} does not read again: {e}"));
        assert_eq!(again, contexts);
    }
    let Value::Array(objects) = value else {
        return;
    };
    let keep_full_objects = flags & 1 == 1;
    let filter = operon_jq::compile(".metadata.labels").expect("a valid filter");
    let entries: Vec<SnapshotEntry> = objects
        .iter()
        .map(|object| {
            let outputs = filter.run(object).ok();
            SnapshotEntry::new(object, outputs.as_deref(), keep_full_objects)
        })
        .collect();
    let mut snapshots = Snapshots::new();
    snapshots.insert("pods", entries.clone());
    let items = sorted_items(entries);
    assert_eq!(items.len(), objects.len());
    let built = BindingContext {
        binding: "pods".to_owned(),
        type_: if flags & 2 == 0 {
            BindingType::Synchronization
        } else {
            BindingType::Event
        },
        group: None,
        watch_event: (flags & 2 != 0).then_some(WatchEvent::Modified),
        object: (flags & 2 != 0).then(|| items.first().cloned()).flatten(),
        objects: if flags & 2 == 0 { items } else { Vec::new() },
        snapshots: snapshots.into_snapshots(),
        review: None,
    };
    let written = context::to_json(std::slice::from_ref(&built));
    let again = context::from_json(&written)
        .unwrap_or_else(|e| panic!("{written} does not read again: {e}"));
    assert_eq!(again, vec![built]);
}
