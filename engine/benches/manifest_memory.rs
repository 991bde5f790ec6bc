//! Memory to load and validate a large OperationSet, against the size of its text.
//!
//! A generated OperationSet of 100,000 nodes (about 5 MB of YAML) is loaded the way
//! `operon validate` loads it (`manifest::load_text`) and validated
//! (`Manifests::validate`, which builds and checks the graph). A counting allocator
//! records the peak of live heap bytes above what was live before each step; the bench
//! prints each peak and its ratio to the text's size, and the same for reading the text
//! through a JSON tree (`yaml_serde` to `serde_json::Value` to the typed object), the
//! way every document was read before OperationSets were read straight from their
//! text.
//!
//! `cargo bench -p operon-engine --bench manifest_memory` (NODES=N changes the size).
//! It fails (exit 1) when loading and validating peaks above `MAX_RATIO` times the text.

// A global allocator is an `unsafe impl`; this one only counts and forwards to the
// system allocator.
#![allow(unsafe_code)]

use operon::manifest::{self, Manifests};
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The most the load plus validation may peak at, as a multiple of the text's size.
const MAX_RATIO: f64 = 8.0;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            let live = if new_size >= layout.size() {
                LIVE.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size
                    - layout.size()
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed) - layout.size()
                    + new_size
            };
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns its result with the peak of heap bytes above the live bytes
/// at its start.
fn peak<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed) - base)
}

/// An Operation and an OperationSet of `nodes` nodes: a chain with a branch at every
/// tenth node, so the graph has many paths but the text grows linearly.
fn manifest(nodes: usize) -> String {
    let mut text = String::from(
        "apiVersion: operon.dev/v1alpha1\nkind: Operation\nmetadata:\n  name: check\nspec:\n  processor:\n    scriptRunner:\n      script: 'true'\n---\napiVersion: operon.dev/v1alpha1\nkind: OperationSet\nmetadata:\n  name: large\nspec:\n  adjacencyList:\n  - id: 0\n    to: [1]\n",
    );
    for id in 1..nodes {
        let next = id + 1;
        let to = if next >= nodes {
            String::new()
        } else if id % 10 == 0 && next + 1 < nodes {
            format!("\n    to: [{next}, {}]", next + 1)
        } else {
            format!("\n    to: [{next}]")
        };
        text.push_str(&format!("  - id: {id}\n    operation: check{to}\n"));
    }
    text
}

fn mb(bytes: usize) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

fn main() {
    let nodes: usize = std::env::var("NODES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let text = manifest(nodes);
    let size = text.len();
    println!("OperationSet of {nodes} nodes: {} of YAML", mb(size));

    let ((manifests, problems), load) = peak(|| {
        let mut manifests = Manifests::default();
        let mut problems = Vec::new();
        manifest::load_text(
            Path::new("large.yaml"),
            &text,
            &mut manifests,
            &mut problems,
        );
        (manifests, problems)
    });
    assert!(problems.is_empty(), "{problems:?}");
    let (problems, validate) = peak(|| manifests.validate());
    assert!(problems.is_empty(), "{problems:?}");
    let held = {
        let before = LIVE.load(Ordering::Relaxed);
        drop(manifests);
        before - LIVE.load(Ordering::Relaxed)
    };
    let total = peak(|| {
        let mut manifests = Manifests::default();
        let mut problems = Vec::new();
        manifest::load_text(
            Path::new("large.yaml"),
            &text,
            &mut manifests,
            &mut problems,
        );
        manifests.validate().len() + problems.len()
    })
    .1;

    let set_text = &text[text.find("---\n").unwrap_or(0) + 4..];
    let (_, tree) = peak(|| {
        let value: serde_json::Value = yaml_serde::from_str(set_text).expect("YAML");
        serde_json::from_value::<operon::api::OperationSet>(value).expect("typed")
    });

    let ratio = |bytes: usize| bytes as f64 / size as f64;
    println!(
        "load (manifest::load_text):       peak {:>9}  {:5.1}x the text",
        mb(load),
        ratio(load)
    );
    println!(
        "validate (Manifests::validate):   peak {:>9}  {:5.1}x the text",
        mb(validate),
        ratio(validate)
    );
    println!(
        "loaded objects held:                   {:>9}  {:5.1}x the text",
        mb(held),
        ratio(held)
    );
    println!(
        "load + validate:                  peak {:>9}  {:5.1}x the text (limit {MAX_RATIO}x)",
        mb(total),
        ratio(total)
    );
    println!(
        "through a JSON tree (before):     peak {:>9}  {:5.1}x the text",
        mb(tree),
        ratio(tree)
    );
    if ratio(total) > MAX_RATIO {
        eprintln!(
            "load + validate peaked at {:.1}x the text, over {MAX_RATIO}x",
            ratio(total)
        );
        std::process::exit(1);
    }
}
