//! Whole audits: a hook's validating bindings over the in-memory cluster, the reports
//! written through its local API server (server-side apply, stale ones deleted) and
//! read back; the leader's periodic audit; and the exact requests of a write, against
//! the mock API server.

use super::*;
use futures::future::BoxFuture;
use operon_cluster::kube::mock;
use operon_cluster::local::{LocalApi, LocalCluster};
use operon_data::model::{
    AdmissionBindingConfig, HookConfig, HookInput, HookOutput, MatchCondition, ObjectRef,
    PatchOperation, ValidatingResponse, WebhookRule,
};
use operon_hooks::config;
use operon_hooks::engine::LoadedHook;
use operon_hooks::metrics::Metrics;
use operon_hooks::{Hook, HookError, HookRun};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Answers by the object's `verdict` label: `deny`, `warn`, `fail` (the hook errs),
/// `slow` (it takes 3 s); allows otherwise. Keeps every review it got.
struct Policies {
    config: HookConfig,
    reviews: Mutex<Vec<Value>>,
}

impl Hook for Policies {
    fn name(&self) -> &str {
        "policies.sh"
    }
    fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
        Box::pin(async { Ok(self.config.clone()) })
    }
    fn handle(&self, input: HookInput, _: Duration) -> BoxFuture<'_, (HookRun, HookInput)> {
        Box::pin(async move {
            let context = &input.binding_contexts[0];
            let review: Value = serde_json::from_str(context.review.as_deref().unwrap()).unwrap();
            let verdict = review
                .pointer("/request/object/metadata/labels/verdict")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            self.reviews.lock().unwrap().push(review);
            let answer = |allowed: bool, message: Option<&str>, warnings: Vec<String>| {
                Ok(HookOutput {
                    validating: Some(ValidatingResponse {
                        allowed,
                        message: message.map(str::to_owned),
                        warnings,
                        patch: None,
                    }),
                    ..HookOutput::default()
                })
            };
            let outcome = match verdict.as_str() {
                "deny" => answer(false, Some("denied by policy"), vec![]),
                "warn" => answer(true, None, vec!["careful".to_owned()]),
                "fail" => Err(HookError::Run("exit code 3".into())),
                "slow" => {
                    tokio::time::sleep(Duration::from_secs(3)).await;
                    answer(true, None, vec![])
                }
                _ => answer(true, None, vec![]),
            };
            let run = HookRun {
                outcome,
                patches: vec![],
                metrics: vec![],
                logs: vec![],
                stdout: String::new(),
                stderr: String::new(),
                elapsed: Duration::from_millis(1),
            };
            (run, input)
        })
    }
}

fn binding(name: &str, resource: &str, enforcement: Option<&str>) -> AdmissionBindingConfig {
    AdmissionBindingConfig {
        name: name.into(),
        rules: vec![WebhookRule {
            operations: vec!["CREATE".into(), "UPDATE".into()],
            api_groups: vec![String::new()],
            api_versions: vec!["v1".into()],
            resources: vec![resource.into()],
            scope: None,
        }],
        enforcement: enforcement.map(str::to_owned),
        ..AdmissionBindingConfig::default()
    }
}

/// An engine of one hook with `bindings`, over `cluster`; and the hook.
fn engine(
    cluster: &Arc<LocalCluster>,
    bindings: Vec<AdmissionBindingConfig>,
) -> (Vec<AuditedEngine>, Arc<Policies>) {
    let raw = HookConfig {
        kubernetes_validating: bindings,
        ..HookConfig::default()
    };
    let hook = Arc::new(Policies {
        config: raw.clone(),
        reviews: Mutex::new(Vec::new()),
    });
    let validated = config::validate(hook.name(), &raw, &config::any_kind).unwrap();
    let engine = Engine::new(
        vec![LoadedHook {
            hook: hook.clone(),
            config: validated,
        }],
        cluster.clone(),
        Arc::new(Metrics::new().unwrap()),
    );
    let engines = vec![AuditedEngine {
        source: HOOKS_DIRECTORY.to_owned(),
        engine: Arc::new(engine),
        namespaces: BTreeMap::new(),
    }];
    (engines, hook)
}

const OBJECTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
---
apiVersion: v1
kind: Pod
metadata: {name: cache, namespace: shop, labels: {verdict: deny}}
---
apiVersion: v1
kind: Pod
metadata: {name: scratch, namespace: shop, labels: {verdict: warn}}
"#;

fn crds() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/crds/wgpolicyk8s.io.yaml"
    );
    std::fs::read_to_string(path).unwrap()
}

/// The in-memory cluster with `OBJECTS` (and the report CRDs, with `crds`), served
/// by its local API; a store writing through it.
async fn cluster(with_crds: bool) -> (Arc<LocalCluster>, LocalApi, ReportStore) {
    let cluster = Arc::new(LocalCluster::new());
    if with_crds {
        cluster.load_yaml(&crds(), "crds").unwrap();
    }
    cluster.load_yaml(OBJECTS, "objects").unwrap();
    let api = LocalApi::start(cluster.clone()).await.unwrap();
    let text = std::fs::read_to_string(api.kubeconfig()).unwrap();
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&text).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let store = ReportStore::new(kube::Client::try_from(config).unwrap());
    (cluster, api, store)
}

/// The reports in `cluster`, by the name of their object.
fn stored(cluster: &LocalCluster) -> BTreeMap<String, Value> {
    cluster
        .objects()
        .into_iter()
        .filter(|o| o["apiVersion"] == report::API_VERSION)
        .map(|o| (o["scope"]["name"].as_str().unwrap().to_owned(), o))
        .collect()
}

fn results(report: &Value) -> Vec<(String, String)> {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rule"].as_str().unwrap().to_owned(),
                r["result"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn fast() -> AuditSettings {
    AuditSettings {
        rate: 1000.0,
        ..AuditSettings::default()
    }
}

fn pair(rule: &str, result: &str) -> (String, String) {
    (rule.to_owned(), result.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_older_than_the_hook_are_reported_and_stale_results_go() {
    let (cluster, _api, store) = cluster(true).await;
    assert!(store.installed().await.unwrap());
    let bindings = vec![
        binding("pods.example.com", "pods", None),
        binding("dry.example.com", "pods", Some("DryRun")),
    ];
    let (engines, hook) = engine(&cluster, bindings.clone());
    let first = audit_and_report(cluster.as_ref(), &engines, &fast(), &store)
        .await
        .unwrap();
    assert_eq!(first.audit.reviews, 6);
    assert!(first.audit.complete() && first.audit.skipped.is_empty());
    assert_eq!((first.synced.written, first.synced.deleted), (3, 0));
    let reports = stored(&cluster);
    assert_eq!(
        reports.keys().collect::<Vec<_>>(),
        ["cache", "scratch", "web"]
    );
    let cache = &reports["cache"];
    assert_eq!(cache["kind"], "PolicyReport");
    assert_eq!(cache["metadata"]["namespace"], "shop");
    assert_eq!(
        results(cache),
        // A denial fails under Deny and warns under DryRun.
        [
            pair("dry.example.com", "warn"),
            pair("pods.example.com", "fail")
        ]
    );
    assert_eq!(
        cache["summary"],
        json!({"pass": 0, "fail": 1, "warn": 1, "error": 0, "skip": 0})
    );
    assert_eq!(
        results(&reports["scratch"]),
        [
            pair("dry.example.com", "warn"),
            pair("pods.example.com", "warn")
        ]
    );
    assert_eq!(reports["web"]["summary"]["pass"], 2);
    let managed = &cache["metadata"]["managedFields"][0];
    assert_eq!(
        (&managed["manager"], &managed["operation"]),
        (&json!("operon"), &json!("Apply"))
    );
    // The hook got the audit's synthetic review.
    let review = hook.reviews.lock().unwrap()[0].clone();
    assert_eq!(review["request"]["operation"], "CREATE");
    assert_eq!(review["request"]["dryRun"], true);
    assert_eq!(
        review["request"]["userInfo"]["username"],
        synthetic::AUDIT_USER
    );

    // Nothing changed: nothing is written, and each result keeps when it was found.
    let second = audit_and_report(cluster.as_ref(), &engines, &fast(), &store)
        .await
        .unwrap();
    assert_eq!((second.synced.written, second.synced.unchanged), (0, 3));
    assert_eq!(stored(&cluster), reports);

    // A deleted object's report goes.
    cluster
        .apply(&PatchOperation::Delete(ObjectRef {
            api_version: Some("v1".into()),
            kind: "Pod".into(),
            namespace: Some("shop".into()),
            name: "cache".into(),
        }))
        .await
        .unwrap();
    let third = audit_and_report(cluster.as_ref(), &engines, &fast(), &store)
        .await
        .unwrap();
    assert_eq!((third.synced.deleted, third.synced.unchanged), (1, 2));
    assert_eq!(
        stored(&cluster).keys().collect::<Vec<_>>(),
        ["scratch", "web"]
    );

    // A binding that is gone takes its results along.
    let (engines, _) = engine(&cluster, bindings[1..].to_vec());
    let fourth = audit_and_report(cluster.as_ref(), &engines, &fast(), &store)
        .await
        .unwrap();
    assert_eq!(fourth.synced.written, 2);
    let reports = stored(&cluster);
    assert_eq!(results(&reports["web"]), [pair("dry.example.com", "pass")]);
    assert_eq!(reports["web"]["summary"]["pass"], 1);

    // No binding reviews pods any more: their reports go; the Namespace's comes.
    let (engines, _) = engine(
        &cluster,
        vec![binding("ns.example.com", "namespaces", None)],
    );
    let fifth = audit_and_report(cluster.as_ref(), &engines, &fast(), &store)
        .await
        .unwrap();
    assert_eq!((fifth.synced.written, fifth.synced.deleted), (1, 2));
    let reports = stored(&cluster);
    assert_eq!(reports.keys().collect::<Vec<_>>(), ["shop"]);
    assert_eq!(reports["shop"]["kind"], "ClusterPolicyReport");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_timeouts_and_match_conditions_are_reported() {
    let cluster = Arc::new(LocalCluster::new());
    cluster.load_yaml(OBJECTS, "objects").unwrap();
    cluster
        .load_yaml(
            r#"
apiVersion: v1
kind: Pod
metadata: {name: broken, namespace: shop, labels: {verdict: fail}}
---
apiVersion: v1
kind: Pod
metadata: {name: sluggish, namespace: shop, labels: {verdict: slow}}
"#,
            "more",
        )
        .unwrap();
    let mut conditional = binding("conditional.example.com", "pods", None);
    conditional.match_conditions = vec![MatchCondition {
        name: "not-system".into(),
        expression: "!request.namespace.startsWith('kube-')".into(),
    }];
    let mut update_only = binding("updates.example.com", "pods", None);
    update_only.rules[0].operations = vec!["UPDATE".into()];
    let (engines, hook) = engine(
        &cluster,
        vec![
            binding("pods.example.com", "pods", None),
            conditional,
            update_only,
        ],
    );
    let before = metrics::count("policies.sh", "pods.example.com", Verdict::Error);
    let settings = AuditSettings {
        timeout: Duration::from_millis(300),
        ..fast()
    };
    let audit = audit(cluster.as_ref(), &engines, &settings).await;
    assert_eq!(audit.reviews, 5, "the conditional binding reviews nothing");
    assert_eq!(hook.reviews.lock().unwrap().len(), 5);
    let verdict = |binding: &str, pod: &str| {
        let found = (audit.findings.iter())
            .find(|f| f.binding == binding && f.subject.name == pod)
            .unwrap();
        (found.judged.verdict, found.judged.message.clone())
    };
    assert_eq!(
        verdict("pods.example.com", "broken"),
        (
            Verdict::Error,
            "hook policies.sh failed: exit code 3".to_owned()
        )
    );
    assert_eq!(
        verdict("pods.example.com", "sluggish"),
        (
            Verdict::Error,
            "hook policies.sh did not answer within 0.3s".to_owned()
        )
    );
    let (skip, message) = verdict("conditional.example.com", "web");
    assert_eq!(skip, Verdict::Skip);
    assert!(message.contains("matchConditions"), "{message}");
    assert_eq!(audit.count(Verdict::Skip), 5);
    assert_eq!(
        audit
            .skipped
            .iter()
            .map(|s| (s.binding.as_str(), s.reason.to_string()))
            .collect::<Vec<_>>(),
        [
            (
                "conditional.example.com",
                NotAudited::MatchConditions.to_string()
            ),
            (
                "updates.example.com",
                "rules[0]: its operations [\"UPDATE\"] do not include CREATE, the operation an audit reviews".to_owned()
            ),
        ]
    );
    assert_eq!(
        metrics::count("policies.sh", "pods.example.com", Verdict::Error) - before,
        2
    );
    let reports = report::reports(&audit.findings);
    let broken = reports
        .iter()
        .find(|r| r.scope.name.as_deref() == Some("broken"))
        .unwrap();
    assert_eq!(
        (broken.summary.error, broken.summary.skip),
        (1, 1),
        "an error and a skip"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_keep_to_the_rate() {
    let cluster = Arc::new(LocalCluster::new());
    cluster.load_yaml(OBJECTS, "objects").unwrap();
    let (engines, _) = engine(&cluster, vec![binding("pods.example.com", "pods", None)]);
    let settings = AuditSettings {
        rate: 10.0,
        ..AuditSettings::default()
    };
    let audit = audit(cluster.as_ref(), &engines, &settings).await;
    assert_eq!(audit.reviews, 3);
    // The first goes at once, each next 100 ms later.
    assert!(
        audit.elapsed >= Duration::from_millis(190),
        "{:?}",
        audit.elapsed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incomplete_audit_keeps_the_reports_it_did_not_see() {
    let (cluster, _api, store) = cluster(true).await;
    let (engines, _) = engine(&cluster, vec![binding("pods.example.com", "pods", None)]);
    audit_and_report(cluster.as_ref(), &engines, &fast(), &store)
        .await
        .unwrap();
    let kept = store.sync(&[], false).await.unwrap();
    assert_eq!((kept.written, kept.deleted), (0, 0));
    assert_eq!(stored(&cluster).len(), 3);
    let cleared = store.sync(&[], true).await.unwrap();
    assert_eq!(cleared.deleted, 3);
    assert!(stored(&cluster).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_audits_once_the_crds_are_installed() {
    let (cluster, _api, store) = cluster(false).await;
    assert!(!store.installed().await.unwrap());
    let (engines, hook) = engine(&cluster, vec![binding("pods.example.com", "pods", None)]);
    let periodic = PeriodicAudit {
        store,
        interval: Duration::from_millis(50),
        settings: fast(),
    };
    let running = crate::controllers::AbortOnDrop::spawn(run_periodically(
        periodic,
        cluster.clone(),
        move || engines.clone(),
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        hook.reviews.lock().unwrap().is_empty(),
        "nothing reviewed without the CRDs"
    );
    // Installed later, without a restart.
    cluster.load_yaml(&crds(), "crds").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while stored(&cluster).len() < 3 {
        assert!(
            Instant::now() < deadline,
            "no reports: {:?}",
            stored(&cluster).keys()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(running);
}

/// A report as the API server lists it back.
fn listed(report: &report::Report) -> Value {
    let mut value = report.to_value();
    value["metadata"]["uid"] = json!(format!("uid-of-{}", report.name()));
    value["metadata"]["resourceVersion"] = json!("5");
    value
}

#[tokio::test]
async fn writes_are_applies_by_operon_and_stale_reports_deletions_of_what_was_read() {
    let (client, mut api) = mock::pair();
    let store = ReportStore::new(client);
    let finding = |name: &str, uid: &str| Finding {
        subject: Subject {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: Some("shop".into()),
            name: name.into(),
            uid: Some(uid.into()),
            resource_version: Some("1".into()),
        },
        source: HOOKS_DIRECTORY.into(),
        hook: "policies.sh".into(),
        binding: "pods.example.com".into(),
        enforcement: Enforcement::Deny,
        judged: Judged {
            verdict: Verdict::Pass,
            answer: Answer::Allowed,
            message: String::new(),
            warnings: vec![],
        },
        at: jiff::Timestamp::from_second(1_800_000_000).unwrap(),
    };
    let reports = report::reports(&[finding("same", "u-same"), finding("new", "u-new")]);
    // Found an hour earlier: the same result keeps its time.
    let mut same = listed(&reports[1]);
    same["results"][0]["timestamp"]["seconds"] = json!(1_799_996_400);
    let gone = report::reports(&[finding("gone", "u-gone")]);
    let sync = tokio::spawn(async move { store.sync(&reports, true).await });

    let call = api.next().await;
    assert_eq!(call.method, "GET");
    assert_eq!(
        call.uri,
        "/apis/wgpolicyk8s.io/v1alpha2/policyreports?&labelSelector=app.kubernetes.io%2Fmanaged-by%3Doperon&limit=500"
    );
    call.answer(
        200,
        json!({"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReportList",
               "metadata": {"continue": "page-2"}, "items": [same]}),
    );
    let call = api.next().await;
    assert_eq!(
        call.uri,
        "/apis/wgpolicyk8s.io/v1alpha2/policyreports?&labelSelector=app.kubernetes.io%2Fmanaged-by%3Doperon&limit=500&continue=page-2"
    );
    call.answer(
        200,
        json!({"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReportList",
               "metadata": {}, "items": [listed(&gone[0])]}),
    );
    let call = api.next().await;
    assert_eq!(
        call.uri,
        "/apis/wgpolicyk8s.io/v1alpha2/clusterpolicyreports?&labelSelector=app.kubernetes.io%2Fmanaged-by%3Doperon&limit=500"
    );
    call.answer(
        200,
        json!({"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "ClusterPolicyReportList",
               "metadata": {}, "items": []}),
    );
    // Only the new report is written.
    let call = api.next().await;
    assert_eq!(call.method, "PATCH");
    assert_eq!(
        call.uri,
        "/apis/wgpolicyk8s.io/v1alpha2/namespaces/shop/policyreports/operon-u-new?&force=true&fieldManager=operon"
    );
    assert_eq!(
        call.content_type.as_deref(),
        Some("application/apply-patch+yaml")
    );
    let body = call.json();
    assert_eq!(body["metadata"]["name"], "operon-u-new");
    assert_eq!(body["scope"]["name"], "new");
    call.answer(200, body);
    let call = api.next().await;
    assert_eq!(call.method, "DELETE");
    assert_eq!(
        call.uri,
        "/apis/wgpolicyk8s.io/v1alpha2/namespaces/shop/policyreports/operon-u-gone?"
    );
    assert_eq!(
        call.json()["preconditions"],
        json!({"uid": "uid-of-operon-u-gone"})
    );
    call.fail(404, "NotFound", "gone already");
    let synced = sync.await.unwrap().unwrap();
    assert_eq!(
        (
            synced.written,
            synced.unchanged,
            synced.deleted,
            synced.failed.len()
        ),
        (1, 1, 0, 0)
    );
    api.quiet().await;
}

/// What of `value` the CRD schema `schema` would refuse or prune: unknown fields,
/// wrong types, values outside an enum, missing required fields.
fn misfits(value: &Value, schema: &Value, path: &str) -> Vec<String> {
    let kind = schema["type"].as_str().unwrap_or("");
    let mut found = Vec::new();
    match value {
        Value::Object(map) if kind == "object" => {
            // The API server's own: its schema is `type: object` and nothing more.
            if path == "/metadata" {
                return found;
            }
            for (key, field) in map {
                let at = format!("{path}/{key}");
                match (
                    schema["properties"].get(key),
                    schema.get("additionalProperties"),
                ) {
                    (Some(inner), _) | (None, Some(inner)) => {
                        found.extend(misfits(field, inner, &at))
                    }
                    (None, None) => found.push(format!("{at}: not in the schema (pruned)")),
                }
            }
            for required in schema["required"].as_array().into_iter().flatten() {
                if !map.contains_key(required.as_str().unwrap()) {
                    found.push(format!("{path}: {required} is required"));
                }
            }
        }
        Value::Array(items) if kind == "array" => {
            for (i, item) in items.iter().enumerate() {
                found.extend(misfits(item, &schema["items"], &format!("{path}/{i}")));
            }
        }
        Value::String(text) if kind == "string" => {
            if let Some(allowed) = schema["enum"].as_array()
                && !allowed.contains(&json!(text))
            {
                found.push(format!("{path}: {text:?} is not one of {allowed:?}"));
            }
        }
        Value::Number(n) if kind == "integer" && (n.is_i64() || n.is_u64()) => {}
        Value::Bool(_) if kind == "boolean" => {}
        other => found.push(format!("{path}: {other} is not of type {kind:?}")),
    }
    found
}

#[test]
fn reports_fit_the_shipped_crds() {
    let crds: Vec<Value> = serde_saphyr::from_multiple(&crds()).unwrap();
    let schema = |kind: &str| {
        let crd = crds
            .iter()
            .find(|c| c["spec"]["names"]["kind"] == kind)
            .unwrap();
        assert_eq!(crd["spec"]["group"], "wgpolicyk8s.io");
        let version = &crd["spec"]["versions"][0];
        assert_eq!(version["name"], "v1alpha2");
        version["schema"]["openAPIV3Schema"].clone()
    };
    let subject = |namespace: Option<&str>, kind: &str| Subject {
        api_version: "v1".into(),
        kind: kind.into(),
        namespace: namespace.map(str::to_owned),
        name: "x".into(),
        uid: Some("u".into()),
        resource_version: Some("1".into()),
    };
    let mut findings = Vec::new();
    for (subject, verdict) in [
        (subject(Some("shop"), "Pod"), Verdict::Fail),
        (subject(None, "Namespace"), Verdict::Skip),
    ] {
        findings.push(Finding {
            subject,
            source: HOOKS_DIRECTORY.into(),
            hook: "h".into(),
            binding: "b".into(),
            enforcement: Enforcement::Warn,
            judged: Judged {
                verdict,
                answer: Answer::Denied,
                message: "m".into(),
                warnings: vec!["w".into()],
            },
            at: jiff::Timestamp::now(),
        });
    }
    let reports = report::reports(&findings);
    assert_eq!(reports.len(), 2);
    for report in reports {
        let value = report.to_value();
        assert_eq!(
            misfits(&value, &schema(report.kind), ""),
            Vec::<String>::new(),
            "{value:#}"
        );
    }
    // The check itself refuses what the schema does not hold.
    let bad = json!({"summary": {"pass": "one"}, "results": [{"result": "maybe"}], "extra": 1});
    assert_eq!(misfits(&bad, &schema("PolicyReport"), "").len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_kept_to_namespaces_reviews_only_their_objects() {
    let (cluster, _api, _store) = cluster(false).await;
    cluster
        .load_yaml(
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: stray, namespace: other}\n",
            "other",
        )
        .unwrap();
    let (mut engines, _hook) = engine(
        &cluster,
        vec![
            binding("pods.example.com", "pods", None),
            binding("namespaces.example.com", "namespaces", None),
        ],
    );
    // As a Hook object's permissions keep its webhooks.
    engines[0].namespaces = BTreeMap::from([
        ("pods.example.com".to_owned(), vec!["shop".to_owned()]),
        (
            "namespaces.example.com".to_owned(),
            vec!["other".to_owned()],
        ),
    ]);
    let audit = audit(cluster.as_ref(), &engines, &fast()).await;
    let seen: Vec<(String, String)> = audit
        .findings
        .iter()
        .map(|f| {
            let place = f.subject.namespace.clone().unwrap_or_default();
            (f.binding.clone(), format!("{place}/{}", f.subject.name))
        })
        .collect();
    assert_eq!(
        seen,
        [
            pair("pods.example.com", "shop/cache"),
            pair("pods.example.com", "shop/scratch"),
            pair("pods.example.com", "shop/web"),
            pair("namespaces.example.com", "/other"),
        ]
    );
    assert_eq!(audit.reviews, 4);

    // Without the limit, the other namespace's Pod and both Namespaces are reviewed.
    engines[0].namespaces.clear();
    let audit = super::audit(cluster.as_ref(), &engines, &fast()).await;
    assert_eq!(audit.reviews, 6);
}
