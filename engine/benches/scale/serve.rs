//! `operon serve` as the scale runs start and watch it: its process, health port and
//! resident size, and the Prometheus text of its `/metrics` and the API server's.

use std::path::{Path, PathBuf};

/// A running `operon serve`, killed with its process group when dropped.
pub struct Serve {
    child: std::process::Child,
    port: u16,
}

impl Serve {
    pub fn start(kubeconfig: &Path, hooks: &Path, dir: &Path, qps: u32) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        // A profiler to start it under, e.g. `heaptrack -o /tmp/serve` (its figures
        // then include the profiler's).
        let wrapper = std::env::var("OPERON_SCALE_WRAPPER").unwrap_or_default();
        // Another build of the same source, e.g. the container image's (`cargo build
        // --profile image`: what runs in a cluster).
        let operon = std::env::var_os("OPERON_SCALE_BINARY").map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_operon")),
            PathBuf::from,
        );
        let mut words = wrapper.split_whitespace();
        let mut command = match words.next() {
            Some(program) => {
                let mut command = std::process::Command::new(program);
                command.args(words).arg(&operon);
                command
            }
            None => std::process::Command::new(&operon),
        };
        // Its own process group, so that a wrapper's child dies with it.
        use std::os::unix::process::CommandExt as _;
        command.process_group(0);
        let child = command
            .arg("serve")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--hooks-dir")
            .arg(hooks)
            .args(["--listen-address", "127.0.0.1", "--listen-port"])
            .arg(port.to_string())
            .arg("--debug-unix-socket")
            .arg(dir.join("debug.socket"))
            .args(["--kube-client-qps", &qps.to_string()])
            .args(["--kube-client-burst", &(qps * 2).to_string()])
            .env("OPERON_CACHE_DIR", dir.join("cache"))
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.join("serve.log")).expect("the log"))
            .spawn()
            .expect("operon serve starts");
        Self { child, port }
    }

    /// The answer to `GET path` on its health and metrics port, status line first.
    pub fn get(&self, path: &str) -> String {
        use std::io::{Read as _, Write as _};
        let mut answer = String::new();
        if let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
            let _ = stream.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes());
            let _ = stream.read_to_string(&mut answer);
        }
        answer
    }

    /// Waits until `/readyz` answers 200 (every binding's Synchronization done) and
    /// says how long that took; panics, naming its log, if it exits or takes ten
    /// minutes.
    pub async fn wait_ready(&mut self, log: &Path) -> std::time::Duration {
        let started = std::time::Instant::now();
        while !self.ready() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(600),
                "operon serve not ready after 10 minutes; see {}",
                log.display()
            );
            assert!(self.alive(), "operon serve exited; see {}", log.display());
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        started.elapsed()
    }

    pub fn ready(&self) -> bool {
        let answer = self.get("/readyz");
        answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200")
    }

    /// The sum of a gauge family on its `/metrics`.
    pub fn metric_sum(&self, family: &str) -> f64 {
        family_sum(&self.get("/metrics"), family, "")
    }

    pub fn snapshot_mib(&self) -> f64 {
        self.metric_sum("operon_kube_snapshot_bytes") / (1024.0 * 1024.0)
    }

    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Its resident size now, in MiB.
    pub fn rss_mib(&self) -> f64 {
        self.status_kib("VmRSS:") / 1024.0
    }

    /// The largest resident size it has had, in MiB: the peak of the first list and
    /// the Synchronization runs, which the samples may fall between.
    pub fn peak_rss_mib(&self) -> f64 {
        self.status_kib("VmHWM:") / 1024.0
    }

    fn status_kib(&self, field: &str) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        // The whole group: `operon serve` itself when it runs under a wrapper.
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value at the end of a sample line.
pub fn sample_value(line: &str) -> f64 {
    line.rsplit(' ')
        .next()
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// The value of label `name` in a sample line.
pub fn label_value<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split(&format!("{name}=\"")).nth(1)?.split('"').next()
}

/// A family's samples whose line holds `label` (anything, when empty), summed.
pub fn family_sum(text: &str, family: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(family) && l[family.len()..].starts_with(['{', ' ']))
        .filter(|l| l.contains(label))
        .map(sample_value)
        .sum()
}

/// A histogram's cumulative buckets (upper bound, count) summed over the series whose
/// labels hold every one of `labels`, from `after` minus `before`, by bound.
pub fn histogram_delta(
    before: &str,
    after: &str,
    family: &str,
    labels: &[&str],
) -> Vec<(f64, f64)> {
    let prefix = format!("{family}_bucket{{");
    let buckets = |text: &str| {
        let mut by_bound: Vec<(f64, f64)> = Vec::new();
        for line in text.lines().filter(|l| l.starts_with(&prefix)) {
            if !labels.iter().all(|label| line.contains(label)) {
                continue;
            }
            let Some(bound) = label_value(line, "le").and_then(|b| b.parse::<f64>().ok()) else {
                continue;
            };
            match by_bound.iter_mut().find(|(b, _)| *b == bound) {
                Some((_, count)) => *count += sample_value(line),
                None => by_bound.push((bound, sample_value(line))),
            }
        }
        by_bound.sort_by(|a, b| a.0.total_cmp(&b.0));
        by_bound
    };
    let before = buckets(before);
    buckets(after)
        .into_iter()
        .map(|(bound, count)| {
            let earlier = before
                .iter()
                .find(|(b, _)| *b == bound)
                .map_or(0.0, |(_, n)| *n);
            (bound, count - earlier)
        })
        .collect()
}

/// p50 and p99 of cumulative buckets, as the bucket bounds they fall under.
pub fn quantiles(buckets: &[(f64, f64)]) -> String {
    let total = buckets.last().map_or(0.0, |(_, n)| *n);
    if total == 0.0 {
        return "no samples".to_owned();
    }
    let at = |q: f64| {
        let bound = buckets
            .iter()
            .find(|(_, n)| *n >= q * total)
            .map_or(f64::INFINITY, |(b, _)| *b);
        if bound.is_finite() {
            format!("<= {:.1} ms", bound * 1e3)
        } else {
            "over the last bound".to_owned()
        }
    };
    format!("p50 {}, p99 {}", at(0.50), at(0.99))
}
