//! What jq filters cost per run and per compile, the run limits included.
//!
//! Each case runs a compiled filter on a Pod (about 1 KB of JSON) in batches of
//! `BATCH` runs and prints the median time per run over `ROUNDS` batches; compiling is
//! measured the same way without the cache (`jq::compile_uncached`). The run limits
//! (`jq::budget`: a guard at the start of every definition and loop, arrays and
//! objects checked as they are built; `jq::memory`: `+`, `*`, `/`, interpolation and
//! the natives that build strings charging what they build) are what this watches.
//! Beside each, the baseline: the same filter compiled by jaq alone (its standard
//! library, none of Operon's definitions or limits) run on the Pod converted once, so
//! the difference is what Operon adds: the limits, jq's path semantics and the
//! conversion from and to `serde_json`.
//!
//! `cargo bench -p operon-jq --bench jq_filters`

use operon_jq as jq;
use serde_json::{Value, json};
use std::hint::black_box;
use std::time::{Duration, Instant};

const ROUNDS: usize = 31;
const BATCH: usize = 200;

fn pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-1", "namespace": "default", "uid": "6f1b6a51-9c1e-4a43-9d8e-0a6f6b0f2c11",
            "resourceVersion": "123456",
            "labels": {"app": "web", "tier": "front", "pod-template-hash": "7d4b9c8f6"},
            "annotations": {"checksum/config": "0f3a9b", "prometheus.io/scrape": "true"}
        },
        "spec": {
            "nodeName": "node-1",
            "containers": [
                {"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
                 "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}}},
                {"name": "sidecar", "image": "envoy:1.31", "args": ["--config", "/etc/envoy.yaml"]}
            ]
        },
        "status": {"phase": "Running", "podIP": "10.0.0.7",
                   "conditions": [{"type": "Ready", "status": "True"}]}
    })
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn per_call(mut call: impl FnMut()) -> Duration {
    for _ in 0..BATCH {
        call();
    }
    let samples = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..BATCH {
                call();
            }
            started.elapsed() / BATCH as u32
        })
        .collect();
    median(samples)
}

/// A filter compiled by jaq alone.
type PlainFilter = jaq_core::Filter<jaq_core::data::JustLut<jaq_json::Val>>;

fn plain_compile(text: &str) -> PlainFilter {
    use jaq_core::load::{Arena, File, Loader};
    let arena = Arena::default();
    let defs = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs());
    let funs = jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs());
    let modules = Loader::new(defs)
        .load(
            &arena,
            File {
                code: text,
                path: (),
            },
        )
        .unwrap_or_else(|_| panic!("jaq loads {text}"));
    jaq_core::Compiler::default()
        .with_funs(funs)
        .compile(modules)
        .unwrap_or_else(|_| panic!("jaq compiles {text}"))
}

fn plain_run(filter: &PlainFilter, input: &jaq_json::Val) -> usize {
    use jaq_core::{Ctx, Vars};
    let ctx = Ctx::<jaq_core::data::JustLut<jaq_json::Val>>::new(&filter.lut, Vars::new([]));
    let mut outputs = 0;
    for output in filter.id.run((ctx, input.clone())) {
        black_box(output.map_err(|_| ()).expect("runs"));
        outputs += 1;
    }
    outputs
}

fn main() {
    let pod = pod();
    let plain_pod =
        jaq_json::read::parse_single(pod.to_string().as_bytes()).expect("the Pod is JSON");
    let cases = [
        r#".metadata.labels.foo = "bar""#,
        ".metadata.labels.app",
        "{name: .metadata.name, labels: .metadata.labels}",
        "[.spec.containers[] | .image]",
        r#".spec.containers |= map(select(.name != "sidecar"))"#,
        r#"walk(if type == "string" then ascii_downcase else . end)"#,
        // `+`, `*` and interpolation, which charge the memory budget.
        r#""\(.metadata.namespace)/\(.metadata.name)""#,
        r#".metadata.labels + {"x": "y"} | to_entries | map("\(.key)=\(.value)") | join(",")"#,
        r#"reduce .spec.containers[] as $c (0; . + ($c.ports // [] | length)) * 2"#,
        // Natives charged as they build (`/`, `ascii_downcase`, `@base64`, regexes).
        r#".spec.containers[0].image / ":" | .[0] | ascii_downcase"#,
        r#".metadata.name | @base64 | @base64d"#,
        r#".spec.containers[].image | test("^nginx")"#,
    ];
    println!(
        "{:<62} {:>12} {:>12}",
        "run (median per run)", "operon", "jaq alone"
    );
    for text in cases {
        let filter = jq::compile(text).expect("the bench's filters compile");
        let time = per_call(|| {
            black_box(filter.run(black_box(&pod)).expect("runs"));
        });
        let plain = plain_compile(text);
        let baseline = per_call(|| {
            black_box(plain_run(&plain, black_box(&plain_pod)));
        });
        println!(
            "{text:<62} {:>9.2} µs {:>9.2} µs",
            time.as_secs_f64() * 1e6,
            baseline.as_secs_f64() * 1e6
        );
    }
    let text = r#".metadata.labels.foo = "bar""#;
    let time = per_call(|| {
        black_box(jq::compile_uncached(black_box(text)).expect("compiles"));
    });
    let baseline = per_call(|| {
        black_box(plain_compile(black_box(text)));
    });
    println!(
        "{:<62} {:>9.2} µs {:>9.2} µs",
        format!("compile {text} (uncached)"),
        time.as_secs_f64() * 1e6,
        baseline.as_secs_f64() * 1e6
    );
}
