//! Operon's alerts and Grafana dashboard (`deploy/servicemonitor/`, copied into the Helm
//! chart's `files/monitoring/`), with no cluster: `promtool check rules` on the
//! PrometheusRule's groups, `promtool test rules` on `operon-rules.test.yaml` (every alert
//! fires there and stays quiet there), every dashboard query parsed by promtool, every
//! metric the rules and the dashboard name one that `operon::serve::metrics_catalog::catalog()` lists
//! (and every family listed on the dashboard), the chart rendering the same
//! PrometheusRule, PodMonitor and dashboard ConfigMap as the kustomization, its copies
//! byte for byte, and the alerts documented in deploy/README.md.
//!
//! Needs `promtool` (Debian's `prometheus` package; `.ci/setup` installs it): without it
//! the tests fail, they do not skip.

use crate::deploy_support::{
    CHART, KUSTOMIZATION, assert_same, deploy, find, helm, kind, kinds_and_names, kustomize, name,
    normalized, of_kind, render_chart, selects, text,
};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::LazyLock;

/// `kubectl kustomize deploy/servicemonitor`.
static MONITORING: LazyLock<Vec<Value>> =
    LazyLock::new(|| kustomize(&deploy().join("servicemonitor")));

/// The chart's values that turn every monitoring object on.
const MONITORING_ON: [&str; 6] = [
    "--set",
    "serviceMonitor.enabled=true",
    "--set",
    "prometheusRule.enabled=true",
    "--set",
    "grafanaDashboard.enabled=true",
];

/// The chart with every monitoring object on.
static CHART_MONITORING: LazyLock<Vec<Value>> = LazyLock::new(|| helm(&MONITORING_ON));

const RULE_FILE: &str = "prometheusrule.yaml";
const DASHBOARD_FILE: &str = "operon-dashboard.json";
const DASHBOARD_KEY: &str = "operon.json";
const UNIT_TESTS: &str = "operon-rules.test.yaml";

/// `promtool ARGS` in `dir`.
fn promtool(dir: &Path, args: &[&str]) -> Output {
    Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "promtool cannot run ({e}): run .ci/setup, which installs it (Debian's \
                 prometheus package, without recommends)"
            )
        })
}

/// Asserts promtool succeeded, showing what it said either way.
fn check(what: &str, out: &Output) -> String {
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    eprintln!("{what}:\n{said}");
    assert!(out.status.success(), "{what} failed:\n{said}");
    said
}

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("prometheus")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

fn rule() -> &'static Value {
    find(&MONITORING, "PrometheusRule", "operon")
}

/// The PrometheusRule's groups as a Prometheus rules file (JSON is YAML).
fn rules_file(rule: &Value) -> String {
    json!({"groups": rule["spec"]["groups"]}).to_string()
}

/// Every rule of every group.
fn rules(rule: &Value) -> Vec<&Value> {
    rule["spec"]["groups"]
        .as_array()
        .expect("spec.groups")
        .iter()
        .flat_map(|group| group["rules"].as_array().expect("rules"))
        .collect()
}

fn alert_names() -> Vec<String> {
    rules(rule())
        .iter()
        .map(|r| {
            r["alert"]
                .as_str()
                .expect("every rule is an alert")
                .to_owned()
        })
        .collect()
}

/// The dashboard the kustomization's ConfigMap holds.
fn dashboard() -> Value {
    let configmap = find(&MONITORING, "ConfigMap", "operon-dashboard");
    serde_json::from_str(configmap["data"][DASHBOARD_KEY].as_str().unwrap())
        .expect("the dashboard is JSON")
}

/// The dashboard's panels, those inside collapsed rows too.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        out.push(panel);
        out.extend(panel["panels"].as_array().into_iter().flatten());
    }
    out
}

/// Every PromQL query of the dashboard, with the panel (or variable) it belongs to.
fn dashboard_queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for panel in panels(dashboard) {
        for target in panel["targets"].as_array().into_iter().flatten() {
            out.push((
                format!(
                    "panel {} ({}) {}",
                    panel["id"], panel["title"], target["refId"]
                ),
                target["expr"].as_str().expect("a query").to_owned(),
            ));
        }
    }
    out
}

/// The dashboard's PromQL as Prometheus evaluates it once Grafana has put its variables
/// in.
fn as_prometheus_sees_it(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
        .replace("$namespace", ".*")
}

/// The metric names an expression refers to: identifiers starting with `operon_`
/// outside quoted strings (no label name starts so).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut chars = expr.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        match c {
            '"' | '\'' | '`' => {
                let mut escaped = false;
                for (_, d) in chars.by_ref() {
                    if escaped {
                        escaped = false;
                    } else if d == '\\' {
                        escaped = true;
                    } else if d == c {
                        break;
                    }
                }
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let mut end = start + c.len_utf8();
                while let Some(&(i, d)) = chars.peek() {
                    if d.is_ascii_alphanumeric() || d == '_' || d == ':' {
                        end = i + d.len_utf8();
                        chars.next();
                    } else {
                        break;
                    }
                }
                let word = &expr[start..end];
                if word.starts_with("operon_") {
                    names.insert(word.to_owned());
                }
            }
            _ => {}
        }
    }
    names
}

/// The family a series name belongs to: itself, or a histogram's without `_bucket`,
/// `_sum` or `_count`.
fn family<'a>(series: &'a str, families: &BTreeSet<String>) -> Option<&'a str> {
    if families.contains(series) {
        return Some(series);
    }
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|suffix| series.strip_suffix(suffix))
        .filter(|base| families.contains(*base))
}

fn catalog() -> BTreeSet<String> {
    operon::serve::metrics_catalog::catalog()
        .expect("the metrics register")
        .into_iter()
        .map(|(name, _help)| name)
        .collect()
}

// ---- the alerts -------------------------------------------------------------------------

#[test]
fn alerting_rules_pass_promtool_check_rules() {
    let dir = temp_dir();
    std::fs::write(dir.path().join("operon-rules.yaml"), rules_file(rule())).unwrap();
    let said = check(
        "promtool check rules",
        &promtool(dir.path(), &["check", "rules", "operon-rules.yaml"]),
    );
    let alerts = alert_names();
    assert!(
        said.contains(&format!("SUCCESS: {} rules found", alerts.len())),
        "{said}"
    );
    assert_eq!(
        alerts.iter().collect::<BTreeSet<_>>().len(),
        alerts.len(),
        "alert names are unique: {alerts:?}"
    );
}

#[test]
fn every_alert_fires_and_stays_quiet_in_its_unit_tests() {
    let dir = temp_dir();
    let unit_tests = deploy().join("servicemonitor").join(UNIT_TESTS);
    std::fs::write(dir.path().join("operon-rules.yaml"), rules_file(rule())).unwrap();
    std::fs::copy(&unit_tests, dir.path().join(UNIT_TESTS)).unwrap();
    check(
        "promtool test rules",
        &promtool(dir.path(), &["test", "rules", UNIT_TESTS]),
    );

    // Each alert has a case where it fires and one where it must not.
    let tests: Value =
        yaml_serde::from_str(&std::fs::read_to_string(&unit_tests).unwrap()).unwrap();
    assert_eq!(tests["rule_files"], json!(["operon-rules.yaml"]));
    let mut cases: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for group in tests["tests"].as_array().expect("tests") {
        for case in group["alert_rule_test"]
            .as_array()
            .expect("alert_rule_test")
        {
            let alert = case["alertname"].as_str().unwrap().to_owned();
            let fires = case["exp_alerts"]
                .as_array()
                .is_some_and(|alerts| !alerts.is_empty());
            let counts = cases.entry(alert).or_default();
            if fires {
                counts.0 += 1;
            } else {
                counts.1 += 1;
            }
        }
    }
    for alert in alert_names() {
        let (firing, quiet) = cases.get(&alert).copied().unwrap_or_default();
        assert!(
            firing > 0 && quiet > 0,
            "{alert}: {firing} case(s) where it fires and {quiet} where it stays quiet in \
             deploy/servicemonitor/{UNIT_TESTS}; write at least one of each"
        );
    }
    let unknown: Vec<&String> = cases
        .keys()
        .filter(|alert| !alert_names().contains(alert))
        .collect();
    assert!(unknown.is_empty(), "tests of no alert: {unknown:?}");
}

#[test]
fn every_alert_says_how_bad_it_is_and_what_to_do() {
    for rule in rules(rule()) {
        let alert = rule["alert"].as_str().unwrap();
        assert!(alert.starts_with("Operon"), "{alert}");
        let severity = &rule["labels"]["severity"];
        assert!(
            severity == "critical" || severity == "warning",
            "{alert}: severity {severity}"
        );
        for annotation in ["summary", "description", "runbook_url"] {
            assert!(
                rule["annotations"][annotation]
                    .as_str()
                    .is_some_and(|a| !a.trim().is_empty()),
                "{alert}: no {annotation}"
            );
        }
        if let Some(duration) = rule["for"].as_str() {
            assert!(
                duration.ends_with('m') && duration[..duration.len() - 1].parse::<u32>().is_ok(),
                "{alert}: for {duration}"
            );
        }
    }
}

#[test]
fn every_alert_is_documented_in_the_deploy_readme() {
    let readme = std::fs::read_to_string(deploy().join("README.md")).unwrap();
    let section = readme
        .split_once("## Monitoring")
        .expect("deploy/README.md has a Monitoring section")
        .1;
    for alert in alert_names() {
        assert!(
            section.contains(&format!("| `{alert}` |")),
            "{alert} has no row in the alerts table of deploy/README.md (Monitoring)"
        );
    }
}

// ---- metric names -----------------------------------------------------------------------

#[test]
fn rules_and_dashboard_name_only_metrics_operon_exports() {
    let families = catalog();
    let mut used = BTreeMap::new();
    for rule in rules(rule()) {
        let expr = rule["expr"].as_str().unwrap();
        used.insert(format!("alert {}", rule["alert"]), metric_names(expr));
    }
    let dashboard = dashboard();
    for (panel, expr) in dashboard_queries(&dashboard) {
        used.insert(panel, metric_names(&expr));
    }
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        if let Some(definition) = variable["definition"].as_str() {
            used.insert(
                format!("variable {}", variable["name"]),
                metric_names(definition),
            );
        }
    }
    let mut unknown = Vec::new();
    let mut on_dashboard = BTreeSet::new();
    for (whose, names) in &used {
        assert!(
            !names.is_empty() || whose.starts_with("variable"),
            "{whose} names no operon_ metric"
        );
        for series in names {
            match family(series, &families) {
                Some(family) if whose.starts_with("panel") => {
                    on_dashboard.insert(family.to_owned());
                }
                Some(_) => {}
                None => unknown.push(format!("{whose}: {series}")),
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "metrics Operon does not export (operon::serve::metrics_catalog::catalog()): {unknown:#?}"
    );
    let missing: Vec<&String> = families.difference(&on_dashboard).collect();
    assert!(
        missing.is_empty(),
        "no panel of deploy/servicemonitor/{DASHBOARD_FILE} shows {missing:?}: add one \
         (and copy the file to deploy/helm/operon/files/monitoring/)"
    );
}

#[test]
fn metric_names_are_read_from_promql() {
    assert_eq!(
        metric_names(
            r#"histogram_quantile(0.99, sum by (le) (rate(operon_a_bucket{x="operon_b", y=~'operon_c'}[5m]))) / operon_d:sum > on (namespace) absent(operon_e)"#
        ),
        BTreeSet::from([
            "operon_a_bucket".to_owned(),
            "operon_d:sum".to_owned(),
            "operon_e".to_owned()
        ])
    );
    let families = BTreeSet::from(["operon_h_seconds".to_owned(), "operon_c_total".to_owned()]);
    assert_eq!(
        family("operon_h_seconds_bucket", &families),
        Some("operon_h_seconds")
    );
    assert_eq!(family("operon_c_total", &families), Some("operon_c_total"));
    assert_eq!(
        family("operon_c_total_count", &families),
        Some("operon_c_total")
    );
    assert_eq!(family("operon_x_count", &families), None);
}

// ---- the dashboard ----------------------------------------------------------------------

#[test]
fn dashboard_queries_are_valid_promql() {
    let dashboard = dashboard();
    let queries = dashboard_queries(&dashboard);
    assert!(queries.len() > 20, "{} queries", queries.len());
    // As recording rules, promtool parses every query.
    let rules: Vec<Value> = queries
        .iter()
        .enumerate()
        .map(|(i, (_, expr))| {
            json!({"record": format!("operon_dashboard:query_{i}"), "expr": as_prometheus_sees_it(expr)})
        })
        .collect();
    let dir = temp_dir();
    std::fs::write(
        dir.path().join("dashboard-queries.yaml"),
        json!({"groups": [{"name": "dashboard", "rules": rules}]}).to_string(),
    )
    .unwrap();
    let out = promtool(dir.path(), &["check", "rules", "dashboard-queries.yaml"]);
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    if !out.status.success() {
        let listing: Vec<String> = queries
            .iter()
            .enumerate()
            .map(|(i, (panel, expr))| format!("query_{i}: {panel}: {expr}"))
            .collect();
        panic!(
            "promtool refuses dashboard queries:\n{said}\n{}",
            listing.join("\n")
        );
    }
}

#[test]
fn dashboard_is_one_grid_on_a_chosen_prometheus() {
    let dashboard = dashboard();
    assert_eq!(dashboard["uid"], "operon");
    assert_eq!(dashboard["title"], "Operon");
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    let datasource = variables
        .iter()
        .find(|v| v["name"] == "datasource")
        .expect("a datasource variable");
    assert_eq!(datasource["type"], "datasource");
    assert_eq!(datasource["query"], "prometheus");
    let panels = panels(&dashboard);
    let ids: BTreeSet<i64> = panels.iter().map(|p| p["id"].as_i64().unwrap()).collect();
    assert_eq!(ids.len(), panels.len(), "panel ids are unique");
    let mut boxes = Vec::new();
    for panel in &panels {
        let title = &panel["title"];
        assert!(title.as_str().is_some_and(|t| !t.is_empty()), "{panel}");
        if panel["type"] != "row" {
            assert_eq!(
                panel["datasource"],
                json!({"type": "prometheus", "uid": "${datasource}"}),
                "{title}"
            );
            assert!(
                panel["description"].as_str().is_some_and(|d| !d.is_empty()),
                "{title} says what it shows"
            );
            for target in panel["targets"].as_array().expect("targets") {
                assert_eq!(target["datasource"], panel["datasource"], "{title}");
                assert!(
                    target["expr"]
                        .as_str()
                        .unwrap()
                        .contains(r#"namespace=~"$namespace""#),
                    "{title}: every query follows the namespace variable"
                );
            }
        }
        let grid = &panel["gridPos"];
        let [x, y, w, h] = ["x", "y", "w", "h"].map(|k| grid[k].as_i64().unwrap());
        assert!(w > 0 && h > 0 && x >= 0 && x + w <= 24, "{title}: {grid}");
        boxes.push((title, x, y, w, h));
    }
    for (i, a) in boxes.iter().enumerate() {
        for b in &boxes[i + 1..] {
            let apart =
                a.1 + a.3 <= b.1 || b.1 + b.3 <= a.1 || a.2 + a.4 <= b.2 || b.2 + b.4 <= a.2;
            assert!(apart, "panels {} and {} overlap", a.0, b.0);
        }
    }
}

// ---- the kustomization and the chart ------------------------------------------------------

#[test]
fn kustomization_ships_monitors_rules_and_dashboard() {
    assert_eq!(
        kinds_and_names(&MONITORING),
        BTreeSet::from([
            "ConfigMap/operon-dashboard".to_owned(),
            "PodMonitor/operon-agent".to_owned(),
            "PrometheusRule/operon".to_owned(),
            "ServiceMonitor/operon".to_owned(),
        ])
    );
    for object in MONITORING.iter() {
        assert_eq!(
            object["metadata"]["namespace"],
            "operon",
            "{}",
            name(object)
        );
    }
    let configmap = find(&MONITORING, "ConfigMap", "operon-dashboard");
    assert_eq!(configmap["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(
        configmap["data"][DASHBOARD_KEY].as_str().unwrap(),
        std::fs::read_to_string(deploy().join("servicemonitor").join(DASHBOARD_FILE)).unwrap(),
        "the ConfigMap holds the file as it is"
    );
    // Not in deploy/ itself, which applies without the Prometheus operator.
    for kind_ in ["PrometheusRule", "PodMonitor", "ServiceMonitor"] {
        assert!(
            of_kind(&KUSTOMIZATION, kind_).is_empty(),
            "{kind_} in deploy/"
        );
    }
    assert!(
        KUSTOMIZATION
            .iter()
            .all(|o| o["metadata"]["labels"].get("grafana_dashboard").is_none())
    );
}

/// The PodMonitor scrapes the agents' pods on the named port the agent container
/// listens on (9116, its health server's), and no controller pod.
fn check_pod_monitor(monitors: &[Value], objects: &[Value], name_: &str, daemonset: &str) {
    let monitor = find(monitors, "PodMonitor", name_);
    let agent = find(objects, "DaemonSet", daemonset);
    let pod = &agent["spec"]["template"];
    assert!(selects(
        &monitor["spec"]["selector"]["matchLabels"],
        &pod["metadata"]["labels"]
    ));
    for deployment in of_kind(objects, "Deployment") {
        assert!(!selects(
            &monitor["spec"]["selector"]["matchLabels"],
            &deployment["spec"]["template"]["metadata"]["labels"]
        ));
    }
    assert!(monitor["spec"].get("namespaceSelector").is_none());
    assert_eq!(
        monitor["metadata"]["namespace"],
        agent["metadata"]["namespace"]
    );
    let endpoints = monitor["spec"]["podMetricsEndpoints"].as_array().unwrap();
    assert_eq!(endpoints.len(), 1);
    assert_eq!(endpoints[0]["port"], "http-health");
    assert_eq!(endpoints[0]["path"], "/metrics");
    let ports = pod["spec"]["containers"][0]["ports"].as_array().unwrap();
    assert!(
        ports
            .iter()
            .any(|p| p["name"] == "http-health" && p["containerPort"] == 9116),
        "{ports:?}"
    );
    assert_eq!(
        endpoints[0]["relabelings"],
        json!([{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}])
    );
}

#[test]
fn pod_monitor_scrapes_the_node_agents() {
    check_pod_monitor(&MONITORING, &KUSTOMIZATION, "operon-agent", "operon-agent");
    check_pod_monitor(
        &CHART_MONITORING,
        &CHART_MONITORING,
        "operon-agent",
        "operon-agent",
    );
}

#[test]
fn chart_renders_what_the_kustomization_applies() {
    let chart = normalized(&CHART_MONITORING);
    let kustomization = normalized(&MONITORING);
    for key in kustomization.keys() {
        assert!(chart.contains_key(key), "the chart renders no {key}");
        assert_same(
            &format!("{key} (helm vs kustomize)"),
            &chart[key],
            &kustomization[key],
        );
    }
    let configmap = find(&CHART_MONITORING, "ConfigMap", "operon-dashboard");
    assert_eq!(configmap["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(
        rules_file(find(&CHART_MONITORING, "PrometheusRule", "operon")),
        rules_file(rule())
    );
}

#[test]
fn chart_copies_equal_their_sources_byte_for_byte() {
    let copies = deploy().join("helm/operon/files/monitoring");
    let sources = deploy().join("servicemonitor");
    let mut names: Vec<String> = std::fs::read_dir(&copies)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, [DASHBOARD_FILE, RULE_FILE]);
    for file in names {
        assert!(
            std::fs::read(copies.join(&file)).unwrap()
                == std::fs::read(sources.join(&file)).unwrap(),
            "deploy/helm/operon/files/monitoring/{file} differs from deploy/servicemonitor/{file}: \
             cp deploy/servicemonitor/{file} deploy/helm/operon/files/monitoring/"
        );
    }
}

#[test]
fn chart_monitoring_is_off_by_default() {
    for kind_ in ["PrometheusRule", "PodMonitor", "ServiceMonitor"] {
        assert!(of_kind(&CHART, kind_).is_empty(), "{kind_} by default");
    }
    assert!(
        CHART
            .iter()
            .all(|o| kind(o) != "ConfigMap" || !name(o).ends_with("-dashboard"))
    );
}

#[test]
fn chart_monitoring_values_render() {
    let objects = helm(&[
        "--set",
        "serviceMonitor.enabled=true",
        "--set",
        "serviceMonitor.labels.release=kps",
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "prometheusRule.labels.release=kps",
        "--set",
        "grafanaDashboard.enabled=true",
        "--set",
        "grafanaDashboard.namespace=monitoring",
        "--set",
        "grafanaDashboard.annotations.grafana_folder=Operon",
    ]);
    for (kind_, name_) in [
        ("ServiceMonitor", "operon"),
        ("PodMonitor", "operon-agent"),
        ("PrometheusRule", "operon"),
    ] {
        assert_eq!(
            find(&objects, kind_, name_)["metadata"]["labels"]["release"],
            "kps",
            "{kind_}"
        );
    }
    let configmap = find(&objects, "ConfigMap", "operon-dashboard");
    assert_eq!(configmap["metadata"]["namespace"], "monitoring");
    assert_eq!(configmap["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(
        configmap["metadata"]["annotations"],
        json!({"grafana_folder": "Operon"})
    );

    // No agents, or not asked for: no PodMonitor; the ServiceMonitor stays.
    for off in ["agent.enabled=false", "serviceMonitor.agents=false"] {
        let objects = helm(&["--set", "serviceMonitor.enabled=true", "--set", off]);
        assert!(of_kind(&objects, "PodMonitor").is_empty(), "{off}");
        assert_eq!(of_kind(&objects, "ServiceMonitor").len(), 1, "{off}");
    }
}

#[test]
fn chart_with_monitoring_passes_helm_lint_strict() {
    let mut args = vec!["--lint"];
    args.extend(MONITORING_ON);
    let out = render_chart(&args);
    assert!(
        out.status.success(),
        "helm lint --strict: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}
