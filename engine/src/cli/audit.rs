//! `operon audit`: the validating bindings of a hooks directory review the objects
//! that exist, once, as `operon serve --audit-interval` does on its leader; a
//! cluster's objects (the reports written, or printed with `--dry-run` and `-o`) or
//! the objects of files (the reports printed).

use super::engine_args::KubeArgs;
use super::output::{self, Format};
use anyhow::{Context as _, bail};
use operon::cluster::Cluster;
use operon::cluster::local::LocalCluster;
use operon::error_text::error_chain as chain;
use operon::hooks::engine::Engine;
use operon::hooks::load::{self, HookLoadError};
use operon::metrics::Metrics;
use operon::serve::audit::report::{self, Report, Verdict};
use operon::serve::audit::store::ReportStore;
use operon::serve::audit::{self, Audit, AuditSettings, AuditedEngine, DEFAULT_RATE};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `operon audit`.
#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    #[command(flatten)]
    jq: super::hook::JqArgs,
    /// The hooks whose validating bindings review the objects (found as `operon serve
    /// --hooks-dir` finds them).
    #[arg(long, env = "OPERON_HOOKS_DIR", default_value = "/hooks")]
    hooks_dir: PathBuf,
    /// Audit the objects of this file instead of a cluster's (multi-document YAML,
    /// `kind: List` accepted; repeatable): the reports are printed, never written.
    #[arg(long, conflicts_with_all = ["kubeconfig", "context"])]
    objects: Vec<PathBuf>,
    #[command(flatten)]
    kube: KubeArgs,
    /// With a cluster, print what the audit found without writing the reports.
    #[arg(long)]
    dry_run: bool,
    /// Output format: a table of the reports and of what did not pass, or the reports
    /// themselves as a YAML or JSON List (then nothing is written).
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    output: Format,
    /// Reviews per second at most (one at a time).
    #[arg(long, default_value_t = DEFAULT_RATE, value_parser = rate)]
    rate: f64,
    /// How long a review waits for its hook.
    #[arg(long, default_value = "9s", value_parser = humantime::parse_duration)]
    webhook_timeout: Duration,
    /// The enforcement of bindings that declare none, as `operon serve
    /// --webhook-enforcement`: a denial fails under Deny and warns under Warn and DryRun.
    #[arg(long, env = "OPERON_WEBHOOK_ENFORCEMENT", default_value = "Deny")]
    webhook_enforcement: operon::model::Enforcement,
    /// Refuse to run a script hook when any sandbox protection is unavailable.
    #[arg(long)]
    strict: bool,
    /// Where compiled modules are cached [default: $XDG_CACHE_HOME/operon/modules].
    #[arg(long, env = "OPERON_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
}

/// A rate of reviews: a positive number of reviews per second.
pub(super) fn rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(rate) if rate > 0.0 && rate.is_finite() => Ok(rate),
        _ => Err(format!(
            "{text:?} is not a number of reviews per second above 0, such as 20 or 0.5"
        )),
    }
}

/// The pause between two audits: a duration above zero, such as `1h` (zero would
/// audit without pause).
pub(super) fn interval(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text) {
        Ok(interval) if !interval.is_zero() => Ok(interval),
        Ok(_) => Err(format!(
            "{text:?} is no pause: give a duration above zero, such as 1h"
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// Runs `operon audit`.
pub fn run(args: AuditArgs) -> anyhow::Result<ExitCode> {
    args.jq.apply();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(audit_once(args))
}

async fn audit_once(args: AuditArgs) -> anyhow::Result<ExitCode> {
    let loader = super::hook::loader(args.cache_dir.clone(), args.strict)?;
    let (cluster, store): (Arc<dyn Cluster>, Option<ReportStore>) = if args.objects.is_empty() {
        let kube = args.kube.connect().await?;
        let store = ReportStore::new(kube.client().clone());
        (Arc::new(kube), Some(store))
    } else {
        let local = Arc::new(LocalCluster::new());
        super::hook::load_fixtures(&local, &args.objects)?;
        (local, None)
    };
    let store = store.filter(|_| !args.dry_run && args.output == Format::Table);
    if let Some(store) = &store
        && !store.installed().await?
    {
        bail!(
            "the PolicyReport and ClusterPolicyReport CRDs ({}) are not installed: \
             kubectl apply -f deploy/crds/wgpolicyk8s.io.yaml, or see what an audit finds \
             with --dry-run",
            report::API_VERSION
        );
    }
    let found = match loader.hooks_in(&args.hooks_dir) {
        Err(HookLoadError::NoHooks { dir }) => {
            bail!("no hooks in {}: nothing to audit", dir.display())
        }
        other => other?,
    };
    let mut hooks = Vec::new();
    for hook in found {
        let (loaded, _) = match load::configure(hook, cluster.as_ref()).await {
            Err(HookLoadError::Invalid { hook, problems }) => {
                return Err(super::hook::invalid_configuration(&hook, &problems));
            }
            other => other?,
        };
        for warning in &loaded.config.warnings {
            eprintln!("warning: {warning}");
        }
        hooks.push(loaded);
    }
    let engine = Arc::new(Engine::new(
        hooks,
        cluster.clone(),
        Arc::new(Metrics::new()?),
    ));
    // The snapshots of the bindings' includeSnapshotsFrom, as the webhooks see them.
    engine
        .observe()
        .await
        .context("listing the hooks' kubernetes bindings")?;
    let settings = AuditSettings {
        rate: args.rate,
        timeout: args.webhook_timeout,
        enforcement: args.webhook_enforcement,
    };
    let engines = [AuditedEngine {
        source: audit::HOOKS_DIRECTORY.to_owned(),
        engine,
        namespaces: Default::default(),
    }];
    let audit = audit::audit(cluster.as_ref(), &engines, &settings).await;
    let reports = report::reports(&audit.findings);
    let mut failed = !audit.complete();
    for unlisted in &audit.unlisted {
        eprintln!("error: {}", chain(unlisted));
    }
    if args.output != Format::Table {
        let items: Vec<_> = reports.iter().map(Report::to_value).collect();
        output::print_structured(
            args.output,
            &json!({"apiVersion": "v1", "kind": "List", "items": items}),
        )?;
        return Ok(exit(failed));
    }
    print!("{}", table(&audit, &reports));
    match &store {
        Some(store) => {
            let synced = store.sync(&reports, audit.complete()).await?;
            println!(
                "reports: {} written, {} unchanged, {} stale deleted",
                synced.written, synced.unchanged, synced.deleted
            );
            if !audit.complete() {
                println!("(stale reports kept: some objects could not be listed)");
            }
            for write in &synced.failed {
                eprintln!("error: {}", chain(write));
                failed = true;
            }
        }
        None if args.objects.is_empty() => println!("(dry run: no report written)"),
        None => {}
    }
    Ok(exit(failed))
}

fn exit(failed: bool) -> ExitCode {
    match failed {
        true => ExitCode::FAILURE,
        false => ExitCode::SUCCESS,
    }
}

/// The reports' counts, what did not pass, what was not audited, and the totals.
fn table(audit: &Audit, reports: &[Report]) -> String {
    let mut out = String::new();
    if !reports.is_empty() {
        let rows: Vec<Vec<String>> = reports
            .iter()
            .map(|r| {
                let s = r.summary;
                vec![
                    r.scope.namespace.clone().unwrap_or_default(),
                    r.scope.kind.clone().unwrap_or_default(),
                    r.scope.name.clone().unwrap_or_default(),
                    s.pass.to_string(),
                    s.fail.to_string(),
                    s.warn.to_string(),
                    s.error.to_string(),
                    s.skip.to_string(),
                ]
            })
            .collect();
        out.push_str(&output::table(
            &[
                "NAMESPACE",
                "KIND",
                "NAME",
                "PASS",
                "FAIL",
                "WARN",
                "ERROR",
                "SKIP",
            ],
            &rows,
        ));
    }
    let mut noted: Vec<String> = audit
        .findings
        .iter()
        .filter(|f| f.judged.verdict != Verdict::Pass)
        .map(|f| {
            format!(
                "{} {}: {} {} ({}): {}",
                f.judged.verdict.as_str(),
                f.subject.describe(),
                f.hook,
                f.binding,
                f.enforcement,
                f.judged.message
            )
        })
        .collect();
    noted.sort();
    if !noted.is_empty() {
        out.push('\n');
        for line in noted {
            out.push_str(&line);
            out.push('\n');
        }
    }
    if !audit.skipped.is_empty() {
        out.push('\n');
        for skipped in &audit.skipped {
            out.push_str(&format!(
                "not audited: {} {}: {}\n",
                skipped.hook, skipped.binding, skipped.reason
            ));
        }
    }
    let counts: Vec<String> = Verdict::ALL
        .iter()
        .map(|v| format!("{} {}", audit.count(*v), v.as_str()))
        .collect();
    out.push_str(&format!(
        "\n{} objects, {} reviews: {}\n",
        reports.len(),
        audit.reviews,
        counts.join(", ")
    ));
    out
}
