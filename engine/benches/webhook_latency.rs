//! AdmissionReview round trips over HTTPS on loopback, through `operon serve`'s webhook
//! server, at a fixed request rate: p50 and p99 latency for the wasm validating hook
//! (`fixture-admission`) and for its shell twin (`admission.sh`, run in the script
//! sandbox the way `operon serve` runs it), measured in the same run.
//!
//! Requests are sent on a schedule (200, 1,000 and 5,000 per second) over 8 kept-alive TLS
//! connections, whatever the answers' pace; each latency is counted from the moment the
//! client was ready to send, including any wait for a connection still busy with an
//! earlier request, so a server that falls behind is charged for the queue it builds.
//!
//! Run with `cargo bench -p operon-engine --bench webhook_latency`.

use http_body_util::BodyExt as _;
use operon::cluster::local::LocalCluster;
use operon::hooks::engine::Engine;
use operon::hooks::load::{self, HookLoader};
use operon::metrics::Metrics;
use operon::sandbox::{CallLimits, Sandbox, SandboxConfig};
use operon::serve::webhook::tls::{ReloadingCert, TlsFiles};
use operon::serve::webhook::{WebhookKind, serve_engine};
use operon_tests::pki::TestPki;
use rustls::pki_types::ServerName;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, watch};

operon::binary_allocator!();

const CONNECTIONS: usize = 8;

fn main() {
    // The script sandbox starts this binary as its launcher.
    operon::script::launcher::run_if_invoked();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(bench());
}

type Sender = hyper::client::conn::http1::SendRequest<http_body_util::Full<bytes::Bytes>>;

async fn connect(pki: &TestPki, address: SocketAddr) -> Sender {
    let tcp = tokio::net::TcpStream::connect(address).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let tls = pki
        .connector()
        .connect(ServerName::IpAddress(address.ip().into()), tcp)
        .await
        .unwrap();
    let (sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(connection);
    sender
}

fn review(i: usize) -> bytes::Bytes {
    let image = if i.is_multiple_of(4) {
        "docker.io/nginx:1.27"
    } else {
        "registry.example.com/web:1.4"
    };
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": format!("uid-{i}"), "operation": "CREATE", "namespace": "default",
                    "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "object": {"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": format!("web-{i}"), "namespace": "default"},
                               "spec": {"containers": [{"name": "app", "image": image}]}}}});
    bytes::Bytes::from(body.to_string())
}

/// Sends `rate` requests per second for `seconds` to `path`; returns sorted latencies.
async fn load(
    pki: &TestPki,
    address: SocketAddr,
    path: &str,
    rate: u32,
    seconds: u32,
) -> Vec<Duration> {
    let mut senders = Vec::new();
    for _ in 0..CONNECTIONS {
        senders.push(Arc::new(Mutex::new(connect(pki, address).await)));
    }
    let total = (rate * seconds) as usize;
    let interval = Duration::from_secs_f64(1.0 / f64::from(rate));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..total {
        let scheduled = started + interval * i as u32;
        tokio::time::sleep_until(scheduled.into()).await;
        let sender = senders[i % CONNECTIONS].clone();
        let path = path.to_owned();
        tasks.spawn(async move {
            // Counted from when the client was ready to send (the timer fires up to 1 ms
            // late; that lateness is the client's), including any wait for the
            // connection, which is the server's backlog.
            let ready = Instant::now().max(scheduled);
            let mut sender = sender.lock().await;
            sender.ready().await.unwrap();
            let request = hyper::Request::post(path)
                .header("host", "operon")
                .header("content-type", "application/json")
                .body(http_body_util::Full::new(review(i)))
                .unwrap();
            let response = sender.send_request(request).await.unwrap();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            let answer: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(
                answer["response"]["allowed"],
                !i.is_multiple_of(4),
                "{answer}"
            );
            ready.elapsed()
        });
    }
    let mut latencies = Vec::with_capacity(total);
    while let Some(latency) = tasks.join_next().await {
        latencies.push(latency.unwrap());
    }
    latencies.sort();
    latencies
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn bench() {
    let pki = TestPki::new();
    let issued = pki.issue(1);
    let files = TlsFiles {
        cert: issued.cert,
        key: issued.key,
        client_ca: None,
    };
    let hooks = tempfile::tempdir().unwrap();
    std::fs::copy(operon_tests::ADMISSION, hooks.path().join("admission.wasm")).unwrap();
    let twin = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../operations/fixtures/shell-hooks/admission.sh"
    );
    std::fs::copy(twin, hooks.path().join("admission.sh")).unwrap();
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(operon_tests::test_cache_dir()),
        max_concurrent_calls: 64,
        ..SandboxConfig::default()
    })
    .unwrap();
    let loader = HookLoader::new(sandbox, CallLimits::default(), false);
    let cluster = Arc::new(LocalCluster::new());
    let mut loaded = Vec::new();
    for hook in loader.hooks_in(hooks.path()).unwrap() {
        loaded.push(load::configure(hook, cluster.as_ref()).await.unwrap().0);
    }
    let metrics = Arc::new(Metrics::new().unwrap());
    let engine = Arc::new(Engine::new(loaded, cluster, metrics.clone()));
    // The hook call alone, without HTTP and TLS: where the time goes.
    let h = engine
        .hooks()
        .iter()
        .position(|l| l.hook.name() == "admission.wasm")
        .unwrap();
    let one = String::from_utf8(review(1).to_vec()).unwrap();
    let mut direct = Vec::new();
    for _ in 0..500 {
        let started = Instant::now();
        let record = engine
            .review(h, "images.operon.dev", one.clone())
            .await
            .unwrap();
        assert!(record.run.outcome.is_ok());
        direct.push(started.elapsed());
    }
    direct.sort();
    let cert = ReloadingCert::load(files).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (_stop, stopped) = watch::channel(false);
    tokio::spawn(serve_engine(
        engine,
        metrics,
        WebhookKind::Admission,
        listener,
        cert.server_config().unwrap(),
        Duration::from_secs(30),
        stopped,
    ));

    println!(
        "AdmissionReview over HTTPS on loopback, {CONNECTIONS} kept-alive connections, sent on a fixed schedule"
    );
    println!(
        "{:<34} {:>8} {:>9} {:>10} {:>10}",
        "hook", "req/s", "requests", "p50", "p99"
    );
    let mut p99 = std::collections::HashMap::new();
    for (name, path, runs) in [
        (
            "wasm (fixture-admission)",
            "/validate/admission.wasm/images.operon.dev",
            vec![(200, 3), (1000, 3), (5000, 3)],
        ),
        (
            "shell twin (bash + jq, sandboxed)",
            "/validate/admission.sh/images.operon.dev",
            // 10 req/s is what it sustains; above that its queue grows for as long as
            // the load lasts.
            vec![(10, 3), (200, 2), (1000, 1), (5000, 1)],
        ),
    ] {
        // Warm up: compile caches, first sandbox start.
        load(&pki, address, path, 50, 1).await;
        for (rate, seconds) in runs {
            let latencies = load(&pki, address, path, rate, seconds).await;
            println!(
                "{name:<34} {rate:>8} {:>9} {:>8.2}ms {:>8.2}ms",
                latencies.len(),
                ms(percentile(&latencies, 0.50)),
                ms(percentile(&latencies, 0.99)),
            );
            p99.insert(
                (name.starts_with("wasm"), rate),
                percentile(&latencies, 0.99),
            );
        }
    }
    println!(
        "the wasm hook called directly (Engine::review, no HTTP): p50 {:.3}ms, p99 {:.3}ms",
        ms(percentile(&direct, 0.50)),
        ms(percentile(&direct, 0.99))
    );
    for rate in [200, 1000, 5000] {
        let (wasm, shell) = (p99[&(true, rate)], p99[&(false, rate)]);
        println!(
            "p99 at {rate} req/s: shell twin / wasm = {:.0}x",
            shell.as_secs_f64() / wasm.as_secs_f64()
        );
    }
}
