//! Log triage: names the known failure behind a container log.
//!
//! Parameter `log` is the container's log text; `input-key` names another input key to
//! read it from instead, e.g. `operation.kubelet-log.output` after a script step. Every line is checked against the
//! signatures below; the category reported is the matched one listed first, because
//! causes (out of memory, a refused connection) are listed before the symptoms they
//! produce (a panic, a crash loop).
//!
//! Results: `triage.category` (`none` when nothing matched), `triage.evidence` (the first
//! line of that category), `triage.recommendation`, `triage.categories` (every matched
//! category, comma separated, most likely cause first), `triage.count.<category>` (lines
//! per matched category) and `triage.lines` (lines read).

use operon_sdk::{Error, Input, Output, info};

/// Evidence longer than this is cut, so a huge single-line log cannot bloat the results.
const MAX_EVIDENCE_CHARS: usize = 500;

/// A known failure: the lowercase fragments that betray it and what to do about it.
#[derive(Debug)]
struct Signature {
    category: &'static str,
    patterns: &'static [&'static str],
    recommendation: &'static str,
}

impl Signature {
    fn matches(&self, lowercase_line: &str) -> bool {
        self.patterns
            .iter()
            .any(|pattern| lowercase_line.contains(pattern))
    }
}

/// Most likely cause first: when a log matches several signatures the first one wins.
const SIGNATURES: &[Signature] = &[
    Signature {
        category: "oom",
        patterns: &[
            "oomkilled",
            "oom-kill",
            "out of memory",
            "outofmemoryerror",
            "cannot allocate memory",
            "memory allocation failed",
        ],
        recommendation: "The container ran out of memory: raise its memory limit or find what grows (leak, unbounded cache, oversized batch).",
    },
    Signature {
        category: "disk-full",
        patterns: &["no space left on device", "disk quota exceeded"],
        recommendation: "A volume is full: free space or grow the volume, and check the node's disk pressure.",
    },
    Signature {
        category: "image-pull",
        patterns: &[
            "errimagepull",
            "imagepullbackoff",
            "manifest unknown",
            "pull access denied",
        ],
        recommendation: "The image cannot be pulled: check the image name and tag, the registry's availability and the pull secret.",
    },
    Signature {
        category: "permission-denied",
        patterns: &[
            "permission denied",
            "operation not permitted",
            "eacces",
            "is forbidden",
        ],
        recommendation: "Access was refused: check the securityContext (user, fsGroup, capabilities), file modes on volumes, and RBAC for API calls.",
    },
    Signature {
        category: "dns",
        patterns: &[
            "no such host",
            "could not resolve",
            "name or service not known",
            "temporary failure in name resolution",
            "nxdomain",
            "server misbehaving",
            "getaddrinfo",
            "eai_again",
        ],
        recommendation: "A name did not resolve: check the service name and namespace, CoreDNS health, and the pod's dnsPolicy.",
    },
    Signature {
        category: "tls",
        patterns: &[
            "x509:",
            "certificate has expired",
            "certificate verify failed",
            "tls handshake",
            "unknown authority",
        ],
        recommendation: "A TLS handshake failed: check certificate expiry, the CA bundle mounted in the pod, and the server name used.",
    },
    Signature {
        category: "connection-refused",
        patterns: &["connection refused", "econnrefused"],
        recommendation: "A dependency refused connections: check that its pods are ready, that the Service selects them and that the port is right.",
    },
    Signature {
        category: "timeout",
        patterns: &["i/o timeout", "deadline exceeded", "timed out", "etimedout"],
        recommendation: "A call timed out: check the dependency's latency and NetworkPolicies that may silently drop traffic.",
    },
    Signature {
        category: "panic",
        patterns: &[
            "panic:",
            "panicked at",
            "[running]:",
            "traceback (most recent call last)",
            "exception in thread",
            "unhandled exception",
            "segmentation fault",
            "sigsegv",
        ],
        recommendation: "The program crashed: read the stack trace around the evidence line; the lines just before it usually say why.",
    },
    Signature {
        category: "crash-loop",
        patterns: &["crashloopbackoff", "back-off restarting failed container"],
        recommendation: "The container keeps restarting: read the previous container's log (`kubectl logs --previous`) for the first error.",
    },
];

fn run(input: Input) -> Result<Output, Error> {
    // A pipeline names where the text is (a script step's output key) in the Operation's
    // `wasm.config`, so the same module serves any collection step.
    let key = input.param("input-key").unwrap_or("log");
    let log = input.require(key)?;
    let triage = triage(log);
    info!(
        "triaged {} log lines as `{}`",
        triage.lines,
        triage.category();
        categories = triage.categories().join(","),
    );
    Ok(triage.output())
}

operon_sdk::operation!(run);

/// How often one signature matched, and where first.
#[derive(Debug)]
struct Match<'a> {
    signature: &'static Signature,
    lines: usize,
    first_line: &'a str,
}

/// The matches of a whole log, in [`SIGNATURES`] order.
#[derive(Debug)]
struct Triage<'a> {
    lines: usize,
    matches: Vec<Match<'a>>,
}

fn triage(log: &str) -> Triage<'_> {
    let mut found: Vec<Option<Match<'_>>> = SIGNATURES.iter().map(|_| None).collect();
    let mut lines = 0;
    for line in log.lines() {
        lines += 1;
        let lowercase = line.to_ascii_lowercase();
        for (signature, found) in SIGNATURES.iter().zip(&mut found) {
            if signature.matches(&lowercase) {
                found
                    .get_or_insert(Match {
                        signature,
                        lines: 0,
                        first_line: line.trim(),
                    })
                    .lines += 1;
            }
        }
    }
    Triage {
        lines,
        matches: found.into_iter().flatten().collect(),
    }
}

impl Triage<'_> {
    fn category(&self) -> &'static str {
        self.matches
            .first()
            .map_or("none", |found| found.signature.category)
    }

    fn categories(&self) -> Vec<&'static str> {
        self.matches
            .iter()
            .map(|found| found.signature.category)
            .collect()
    }

    fn evidence(&self) -> String {
        let line = self.matches.first().map_or("", |found| found.first_line);
        match line.char_indices().nth(MAX_EVIDENCE_CHARS) {
            Some((cut, _)) => format!("{}…", &line[..cut]),
            None => line.to_owned(),
        }
    }

    fn recommendation(&self) -> &'static str {
        self.matches.first().map_or(
            "No known failure signature found: read the full log, and the events of the pod.",
            |found| found.signature.recommendation,
        )
    }

    fn output(&self) -> Output {
        let mut output = Output::new()
            .result("triage.category", self.category())
            .result("triage.evidence", self.evidence())
            .result("triage.recommendation", self.recommendation())
            .result("triage.categories", self.categories().join(","))
            .result("triage.lines", self.lines);
        let mut text = format!("{} lines read, category: {}\n", self.lines, self.category());
        for found in &self.matches {
            output.set(
                format!("triage.count.{}", found.signature.category),
                found.lines,
            );
            text += &format!(
                "  {:<18} {:>6} lines, first: {}\n",
                found.signature.category, found.lines, found.first_line
            );
        }
        text += &format!("{}\n", self.recommendation());
        output.output(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nothing_in_a_healthy_log() {
        let triage = triage("starting server\nlistening on :8080\nGET /healthz 200\n");
        assert_eq!(triage.category(), "none");
        assert_eq!(triage.lines, 3);
        let output = triage.output();
        assert_eq!(output.get("triage.evidence"), Some(""));
        assert_eq!(output.get("triage.categories"), Some(""));
    }

    #[test]
    fn classifies_each_signature() {
        let cases = [
            ("Last State: Terminated, Reason: OOMKilled", "oom"),
            ("fatal error: runtime: out of memory", "oom"),
            ("java.lang.OutOfMemoryError: Java heap space", "oom"),
            ("write /data/wal: no space left on device", "disk-full"),
            ("Failed to pull image: ErrImagePull", "image-pull"),
            (
                "open /var/lib/app/db: permission denied",
                "permission-denied",
            ),
            (
                "dial tcp: lookup db.shop.svc on 10.96.0.10:53: no such host",
                "dns",
            ),
            ("x509: certificate has expired or is not yet valid", "tls"),
            (
                "dial tcp 10.0.0.7:5432: connect: connection refused",
                "connection-refused",
            ),
            ("context deadline exceeded", "timeout"),
            ("thread 'main' panicked at src/main.rs:4:5:", "panic"),
            ("Traceback (most recent call last):", "panic"),
            ("Back-off restarting failed container app", "crash-loop"),
        ];
        for (line, category) in cases {
            assert_eq!(triage(line).category(), category, "{line}");
        }
    }

    #[test]
    fn prefers_the_cause_to_the_symptom() {
        let log = "\
2024-05-01T10:00:00Z starting
panic: failed to connect: dial tcp 10.0.0.7:5432: connect: connection refused

goroutine 1 [running]:
main.main()
Warning  BackOff  pod/web-0  Back-off restarting failed container
";
        let triage = triage(log);
        assert_eq!(triage.category(), "connection-refused");
        assert_eq!(
            triage.categories(),
            ["connection-refused", "panic", "crash-loop"]
        );
        let output = triage.output();
        assert_eq!(
            output.get("triage.evidence"),
            Some("panic: failed to connect: dial tcp 10.0.0.7:5432: connect: connection refused")
        );
        assert_eq!(output.get("triage.count.panic"), Some("2"));
        assert_eq!(output.get("triage.count.connection-refused"), Some("1"));
        assert_eq!(output.get("triage.count.oom"), None);
        assert_eq!(output.get("triage.lines"), Some("6"));
    }

    #[test]
    fn counts_every_matching_line_and_keeps_the_first() {
        let log = "ECONNREFUSED 1\nok\nECONNREFUSED 2\n";
        let output = triage(log).output();
        assert_eq!(output.get("triage.count.connection-refused"), Some("2"));
        assert_eq!(output.get("triage.evidence"), Some("ECONNREFUSED 1"));
    }

    #[test]
    fn cuts_long_evidence_on_a_char_boundary() {
        let line = format!("out of memory {}", "é".repeat(1000));
        let evidence = triage(&line).evidence();
        assert_eq!(evidence.chars().count(), MAX_EVIDENCE_CHARS + 1);
        assert!(evidence.ends_with('…'));
    }
}
