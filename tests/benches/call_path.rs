//! Per-call cost of running one trivial operation, measured four ways in one run:
//!
//! 1. through Operon's API (`Sandbox::run_operation`: fresh store, limits, deadline,
//!    bounded output, instantiate, call, typed report);
//! 2. raw wasmtime with the same engine and component (fresh store with a default WASI
//!    context, instantiate from an `InstancePre`, call), async and sync;
//! 3. the shell-hook model: write a JSON context file and run `bash` reading it;
//! 4. the same with `bash` + `jq` reading it.
//!
//! Prints the median per call of each and the ratios. Run with
//! `cargo bench -p operon-tests --bench call_path`.

use operon::model::{OperationInput, RunnerContext};
use operon::sandbox::bindings::operation::OperationPre;
use operon::sandbox::bindings::types::{
    OperationInput as WitOperationInput, OperationOutput as WitOperationOutput,
};
use operon::sandbox::{CallLimits, Sandbox, SandboxConfig, convert};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};
use wasmtime::Store;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

operon::binary_allocator!();

struct RawState {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for RawState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

fn raw_state() -> RawState {
    RawState {
        wasi: WasiCtx::builder().build(),
        table: ResourceTable::new(),
    }
}

fn input() -> OperationInput {
    OperationInput {
        context: RunnerContext::new("bench", Duration::from_secs(5)),
        parameters: BTreeMap::from([("node".to_owned(), "node-a".to_owned())]),
        results: BTreeMap::new(),
        args: vec![],
    }
}

/// Median time per iteration over `samples` batches of `batch` iterations.
fn measure(samples: usize, batch: usize, mut f: impl FnMut()) -> Duration {
    for _ in 0..batch {
        f();
    }
    let mut times: Vec<Duration> = (0..samples)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..batch {
                f();
            }
            start.elapsed() / batch as u32
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn shell_case(script: &str, context_path: &std::path::Path, context: &str) -> impl FnMut() {
    let script = script.to_owned();
    let path = context_path.to_owned();
    let context = context.to_owned();
    move || {
        // shell-operator writes a fresh context file for every run.
        std::fs::write(&path, &context).unwrap();
        let status = Command::new("bash")
            .arg("-c")
            .arg(&script)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("BINDING_CONTEXT_PATH", &path)
            .status()
            .expect("bash runs");
        assert!(status.success());
    }
}

fn has(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn main() {
    let sandbox = Sandbox::new(SandboxConfig::default()).expect("engine");
    println!("allocator: {:?}", sandbox.allocator());
    let module = sandbox
        .load_operation_file(operon_tests::TRIVIAL.as_ref())
        .expect("trivial fixture");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let input = input();
    let limits = CallLimits::default();

    // Sanity: every path really runs the guest.
    let report = runtime.block_on(sandbox.run_operation(&module, input.clone(), &limits));
    assert!(report.outcome.is_ok(), "{:?}", report.outcome);

    // The caller owns each run's input (a runner builds a fresh one per run), so
    // Operon's figure includes making it.
    let operon = measure(31, 2_000, || {
        let report = runtime.block_on(sandbox.run_operation(&module, input.clone(), &limits));
        black_box(report.outcome.is_ok());
    });

    // The raw paths call the guest with the WIT value directly.
    let wit_input = convert::operation_input(input.clone());
    // What Operon adds for its own data model: a copy of the input, translated to the
    // WIT value.
    let conversion = measure(31, 20_000, || {
        black_box(convert::operation_input(black_box(&input).clone()));
    });
    // And the guest's output translated back (what a trivial operation returns).
    let wit_output = WitOperationOutput {
        results: vec![("ok".to_owned(), "true".to_owned())],
        output: String::new(),
    };
    let output_conversion = measure(31, 20_000, || {
        black_box(convert::operation_output(black_box(&wit_output).clone()));
    });
    let engine = sandbox.wasmtime_engine();
    let component = Component::from_file(engine, operon_tests::TRIVIAL).unwrap();

    let mut async_linker: Linker<RawState> = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut async_linker).unwrap();
    async_linker
        .define_unknown_imports_as_traps(&component)
        .unwrap();
    let async_pre = OperationPre::new(async_linker.instantiate_pre(&component).unwrap()).unwrap();
    let raw_async = measure(31, 2_000, || {
        runtime.block_on(async {
            let mut store = Store::new(engine, raw_state());
            store.set_epoch_deadline(u64::MAX / 2);
            let instance = async_pre.instantiate_async(&mut store).await.unwrap();
            let out = instance.call_run(&mut store, &wit_input).await.unwrap();
            black_box(out.is_ok());
        })
    });

    let mut sync_linker: Linker<RawState> = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut sync_linker).unwrap();
    sync_linker
        .define_unknown_imports_as_traps(&component)
        .unwrap();
    let sync_pre = sync_linker.instantiate_pre(&component).unwrap();
    let raw_sync = measure(31, 2_000, || {
        let mut store = Store::new(engine, raw_state());
        store.set_epoch_deadline(u64::MAX / 2);
        let instance = sync_pre.instantiate(&mut store).unwrap();
        let run = instance
            .get_typed_func::<(&WitOperationInput,), (Result<WitOperationOutput, String>,)>(
                &mut store, "run",
            )
            .unwrap();
        let (out,) = run.call(&mut store, (&wit_input,)).unwrap();
        black_box(out.is_ok());
    });

    let dir = tempfile::tempdir().unwrap();
    let context_path = dir.path().join("binding_context.json");
    let context = r#"[{"binding":"bench","type":"Event","watchEvent":"Added","object":{"metadata":{"name":"node-a"}}}]"#;
    let bash = measure(
        15,
        20,
        shell_case(r#"ctx=$(<"$BINDING_CONTEXT_PATH")"#, &context_path, context),
    );
    let bash_jq = has("jq").then(|| {
        measure(
            9,
            5,
            shell_case(
                r#"name=$(jq -r '.[0].object.metadata.name' "$BINDING_CONTEXT_PATH")"#,
                &context_path,
                context,
            ),
        )
    });

    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("{:<34} {:>12}", "per call (median)", "µs");
    println!(
        "{:<34} {:>12.2}",
        "operon Sandbox::run_operation",
        us(operon)
    );
    println!(
        "{:<34} {:>12.2}",
        "  of which copy + model → WIT input",
        us(conversion)
    );
    println!(
        "{:<34} {:>12.2}",
        "  and copy + WIT → model output",
        us(output_conversion)
    );
    println!("{:<34} {:>12.2}", "raw wasmtime, async call", us(raw_async));
    println!("{:<34} {:>12.2}", "raw wasmtime, sync call", us(raw_sync));
    println!("{:<34} {:>12.2}", "bash reading a context file", us(bash));
    match bash_jq {
        Some(d) => println!("{:<34} {:>12.2}", "bash + jq on a context file", us(d)),
        None => println!("{:<34} {:>12}", "bash + jq on a context file", "jq missing"),
    }
    println!();
    println!(
        "operon / raw async   = {:.2}x (target: within 2x)",
        us(operon) / us(raw_async)
    );
    println!("operon / raw sync    = {:.2}x", us(operon) / us(raw_sync));
    println!(
        "bash / operon        = {:.0}x (target: at least 100x)",
        us(bash) / us(operon)
    );
    if let Some(d) = bash_jq {
        println!("bash+jq / operon     = {:.0}x", us(d) / us(operon));
    }
}
