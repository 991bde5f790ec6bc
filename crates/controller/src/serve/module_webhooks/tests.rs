//! A module's webhooks: what its hooks declare becomes its configurations, the leader
//! answers its reviews from the module's engine, and a follower passes them to the
//! leader over TLS, never twice.

use super::*;
use crate::serve::Status;
use crate::serve::webhook::forward::{FORWARDED_BY, Forwarder, LeaderAddress, LeaderTrust};
use crate::serve::webhook::owned::{MODULE_ANNOTATION, configurations, conversion_owner};
use crate::serve::webhook::register::{ClientTarget, Registration};
use crate::serve::webhook::{WebhookKind, router, serve_tls};
use axum::body::Body;
use futures::future::BoxFuture;
use http_body_util::BodyExt as _;
use operon_cluster::local::LocalCluster;
use operon_data::model::{
    AdmissionBindingConfig, BindingType, ConversionBindingConfig, ConversionRule, Enforcement,
    HookConfig, HookInput, HookOutput, ValidatingResponse, WebhookRule,
};
use operon_hooks::engine::LoadedHook;
use operon_hooks::metrics::Metrics;
use operon_hooks::{Hook, HookError, HookRun, config};
use serde_json::{Value, json};
use tokio::sync::watch;
use tower::ServiceExt as _;

/// A module hook that denies Pods named `denied`.
struct Guard {
    name: &'static str,
    validating: Vec<&'static str>,
    converts: Option<&'static str>,
}

fn admission(name: &str) -> AdmissionBindingConfig {
    AdmissionBindingConfig {
        name: name.into(),
        rules: vec![WebhookRule {
            operations: vec!["CREATE".into()],
            api_groups: vec![String::new()],
            api_versions: vec!["v1".into()],
            resources: vec!["pods".into()],
            scope: None,
        }],
        ..AdmissionBindingConfig::default()
    }
}

impl Hook for Guard {
    fn name(&self) -> &str {
        self.name
    }
    fn configure(&self) -> BoxFuture<'_, Result<HookConfig, HookError>> {
        let config = HookConfig {
            kubernetes_validating: self.validating.iter().map(|n| admission(n)).collect(),
            kubernetes_conversion: (self.converts.iter())
                .map(|crd| ConversionBindingConfig {
                    name: format!("convert-{crd}"),
                    crd_name: (*crd).to_owned(),
                    conversions: vec![ConversionRule {
                        from_version: "example.com/v1".into(),
                        to_version: "example.com/v2".into(),
                    }],
                    group: None,
                    include_snapshots_from: vec![],
                })
                .collect(),
            ..HookConfig::default()
        };
        Box::pin(async move { Ok(config) })
    }
    fn handle(&self, input: HookInput, _timeout: Duration) -> BoxFuture<'_, (HookRun, HookInput)> {
        Box::pin(async move {
            let context = &input.binding_contexts[0];
            assert_eq!(context.type_, BindingType::Validating);
            let review: Value = serde_json::from_str(context.review.as_deref().unwrap()).unwrap();
            let denied = review["request"]["object"]["metadata"]["name"] == "denied";
            let run = HookRun {
                outcome: Ok(HookOutput {
                    validating: Some(ValidatingResponse {
                        allowed: !denied,
                        message: denied.then(|| format!("{} denies it", self.name)),
                        warnings: vec![],
                        patch: None,
                    }),
                    ..HookOutput::default()
                }),
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

async fn engine_of_hooks(hooks: Vec<Guard>) -> Arc<Engine> {
    let mut loaded = Vec::new();
    for hook in hooks {
        let hook: Arc<dyn Hook> = Arc::new(hook);
        let raw = hook.configure().await.unwrap();
        let config = config::validate(hook.name(), &raw, &config::any_kind).unwrap();
        loaded.push(LoadedHook { hook, config });
    }
    Arc::new(Engine::new(
        loaded,
        Arc::new(LocalCluster::new()),
        Arc::new(Metrics::new().unwrap()),
    ))
}

fn guard() -> Guard {
    Guard {
        name: "echo/hooks/guard.sh",
        validating: vec!["guard.echo.example.com"],
        converts: None,
    }
}

fn status(engines: EngineSet, leading: Option<bool>, forwarder: Option<Forwarder>) -> Arc<Status> {
    Arc::new(Status {
        metrics: Arc::new(Metrics::new().unwrap()),
        engine: watch::Sender::new(None),
        engines,
        leading: watch::Sender::new(leading),
        modules: None,
        module_settings: None,
        webhooks_registered: watch::Sender::new(true),
        forwarder: forwarder.map(Arc::new),
        synchronized_once: Default::default(),
        reloads: Default::default(),
    })
}

fn review(name: &str) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
           "request": {"uid": format!("uid-{name}"), "operation": "CREATE",
                       "kind": {"group": "", "version": "v1", "kind": "Pod"},
                       "object": {"metadata": {"name": name}}}})
}

const PATH: &str = "/module/echo/validate/guard.echo.example.com";

/// POSTs `body` to `router` at `path` with `headers`: (status, JSON or text).
async fn post(
    router: &axum::Router,
    path: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut request = http::Request::post(path).header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = router
        .clone()
        .oneshot(request.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, value)
}

fn admission_router(status: Arc<Status>) -> axum::Router {
    router(
        status,
        WebhookKind::Admission,
        Duration::from_secs(5),
        Enforcement::Deny,
    )
}

/// The leader's admission server over TLS on loopback, running module `echo`; its
/// address, the CA its certificate is signed by, and its status.
async fn leader() -> (String, String, Arc<Status>, EngineSet) {
    let engines = EngineSet::default();
    let registration = engines.register(
        operon_addons::engine_source(Some("echo")),
        engine_of_hooks(vec![guard()]).await,
    );
    let status = status(engines.clone(), Some(true), None);
    let (ca, tls) = operon_tests::pki::ca_and_server();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let (stop, stopped) = watch::channel(false);
    let router = admission_router(status.clone());
    tokio::spawn(async move {
        let _keep = (stop, registration);
        serve_tls(listener, tls, router, stopped).await;
    });
    (url, ca, status, engines)
}

fn answered(answer: &Value) -> (bool, &str) {
    (
        answer["response"]["allowed"].as_bool().unwrap(),
        answer["response"]["status"]["message"]
            .as_str()
            .unwrap_or(""),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_answers_a_modules_review_and_a_follower_passes_it_on() {
    let (url, ca, leader_status, _engines) = leader().await;
    // The leader itself, through its router.
    let leader_router = admission_router(leader_status.clone());
    let (code, answer) = post(&leader_router, PATH, &review("denied"), &[]).await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answered(&answer), (false, "echo/hooks/guard.sh denies it"));
    let (code, answer) = post(&leader_router, PATH, &review("fine"), &[]).await;
    assert_eq!((code, answered(&answer).0), (200, true));

    // A follower that knows where the leader is.
    let (address, located) = watch::channel(Some(LeaderAddress {
        url: url.clone(),
        server_name: None,
    }));
    let (_ca, trust) = watch::channel(ca.clone().into_bytes());
    let follower = status(
        EngineSet::default(),
        Some(false),
        Some(Forwarder::new(
            located,
            LeaderTrust::Live(trust),
            "replica-b".into(),
        )),
    );
    let follower_router = admission_router(follower.clone());
    let (code, answer) = post(&follower_router, PATH, &review("denied"), &[]).await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answered(&answer), (false, "echo/hooks/guard.sh denies it"));
    assert_eq!(answer["response"]["uid"], "uid-denied");
    // The leader ran the hook: its metrics count both its own and the forwarded review.
    let counted = leader_status
        .metrics
        .webhook_requests_total
        .with_label_values(&[
            "validating",
            "echo/hooks/guard.sh/guard.echo.example.com",
            "denied",
        ])
        .get();
    assert_eq!(counted, 2);

    // A review another replica forwarded is never forwarded again.
    let (code, answer) = post(
        &follower_router,
        PATH,
        &review("denied"),
        &[(FORWARDED_BY, "replica-c")],
    )
    .await;
    assert_eq!(code, 503, "{answer}");
    assert!(
        answer.as_str().unwrap().contains("does not lead either"),
        "{answer}"
    );

    // No leader advertised: 503, so the webhook's failure policy applies.
    address.send_replace(None);
    let (code, answer) = post(&follower_router, PATH, &review("denied"), &[]).await;
    assert_eq!(code, 503);
    assert!(answer.as_str().unwrap().contains("no leader"), "{answer}");

    // A leader whose certificate the CA does not sign is not trusted.
    let (other_ca, _) = operon_tests::pki::ca_and_server();
    let (_other, distrust) = watch::channel(other_ca.into_bytes());
    let (_address, located) = watch::channel(Some(LeaderAddress {
        url,
        server_name: None,
    }));
    let wary = status(
        EngineSet::default(),
        Some(false),
        Some(Forwarder::new(
            located,
            LeaderTrust::Live(distrust),
            "replica-d".into(),
        )),
    );
    let (code, answer) = post(&admission_router(wary), PATH, &review("fine"), &[]).await;
    assert_eq!(code, 503);
    assert!(answer.as_str().unwrap().contains("TLS"), "{answer}");
}

#[tokio::test]
async fn a_module_not_running_or_a_binding_it_lacks_is_refused() {
    let engines = EngineSet::default();
    let leading = admission_router(status(engines.clone(), Some(true), None));
    let (code, answer) = post(&leading, PATH, &review("fine"), &[]).await;
    assert_eq!(code, 503, "{answer}");
    assert!(
        answer
            .as_str()
            .unwrap()
            .contains("module echo cannot answer"),
        "{answer}"
    );
    let _running = engines.register(
        operon_addons::engine_source(Some("echo")),
        engine_of_hooks(vec![guard()]).await,
    );
    let (code, answer) = post(
        &leading,
        "/module/echo/validate/other.example.com",
        &review("fine"),
        &[],
    )
    .await;
    assert_eq!(code, 404);
    assert_eq!(
        answer,
        "no hook of echo has a validating binding \"other.example.com\""
    );
    let (code, _) = post(
        &leading,
        "/module/echo/mutate/guard.echo.example.com",
        &review("fine"),
        &[],
    )
    .await;
    assert_eq!(code, 404, "a validating binding is no mutating one");
    // A follower with no way to the leader refuses at once.
    let follower = admission_router(status(EngineSet::default(), Some(false), None));
    let (code, answer) = post(&follower, PATH, &review("fine"), &[]).await;
    assert_eq!(code, 503);
    assert!(
        answer.as_str().unwrap().contains("no way to reach it"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_modules_hooks_become_its_configurations_without_what_cannot_be_served() {
    let engine = engine_of_hooks(vec![
        Guard {
            name: "echo/hooks/a.sh",
            validating: vec!["a.echo.example.com", "shared.echo.example.com"],
            converts: Some("widgets.example.com"),
        },
        Guard {
            name: "echo/hooks/b.sh",
            validating: vec!["shared.echo.example.com"],
            converts: Some("gadgets.example.com"),
        },
    ])
    .await;
    let main = engine_of_hooks(vec![Guard {
        name: "hooks/converter.sh",
        validating: vec![],
        converts: Some("gadgets.example.com"),
    }])
    .await;
    let owner = owner(Some("echo"));
    let all = Served {
        admission: true,
        conversion: true,
    };
    let planned = webhooks_of(&owner, &engine, Some(&main), all);
    let names: Vec<&str> = planned.names();
    // The second binding of one name would make the configuration invalid.
    assert_eq!(names, ["a.echo.example.com", "shared.echo.example.com"]);
    // gadgets is the hooks directory's to convert.
    assert_eq!(planned.conversions, ["widgets.example.com"]);
    let none = webhooks_of(
        &owner,
        &engine,
        None,
        Served {
            admission: false,
            conversion: false,
        },
    );
    assert!(none.is_empty());

    let registration = Registration {
        validating_configuration: "operon-webhooks".into(),
        mutating_configuration: "operon-webhooks".into(),
        admission: ClientTarget::Service {
            namespace: "operon".into(),
            name: "operon-webhooks".into(),
            port: 443,
        },
        conversion: ClientTarget::Url("https://conversion.example".into()),
        admission_ca: b"CA".to_vec(),
        conversion_ca: b"CA".to_vec(),
        own_resources: false,
    };
    let (validating, mutating) = configurations(&owner, &planned, &registration);
    let validating = validating.unwrap();
    assert!(mutating.is_none());
    assert_eq!(validating["metadata"]["name"], "operon-module.echo");
    assert_eq!(
        validating["metadata"]["labels"]["operon.dev/webhooks-of"],
        "Module"
    );
    assert_eq!(
        validating["metadata"]["annotations"][MODULE_ANNOTATION],
        "echo"
    );
    assert_eq!(
        validating["webhooks"][1]["clientConfig"]["service"]["path"],
        "/module/echo/validate/shared.echo.example.com"
    );
    assert_eq!(
        conversion_owner("https://conversion.example/module/echo/convert/widgets.example.com"),
        Some(owner.clone())
    );
    assert_eq!(
        conversion_owner("/hook-object/team/guard/convert/widgets.example.com"),
        Some(Owner::Hook("team".into(), "guard".into()))
    );
    assert_eq!(conversion_owner("/convert/widgets.example.com"), None);
    assert_eq!(
        super::owner(None).configuration_name(),
        "operon-module.global"
    );
}

#[tokio::test(start_paused = true)]
async fn the_registry_follows_the_modules_engines_and_syncs_after_the_convergence() {
    let engines = EngineSet::default();
    let registry = WebhookRegistry::default();
    let converged = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (_main, main) = watch::channel(None);
    let following = crate::controllers::AbortOnDrop::spawn(follow(
        engines.clone(),
        registry.clone(),
        main,
        Served {
            admission: true,
            conversion: true,
        },
        {
            let converged = converged.clone();
            move || converged.load(std::sync::atomic::Ordering::SeqCst)
        },
    ));
    let echo = engines.register(
        operon_addons::engine_source(Some("echo")),
        engine_of_hooks(vec![guard()]).await,
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    let limits = registry.namespace_limits(&owner(Some("echo")));
    assert_eq!(limits, Some(Default::default()), "echo is served");
    assert!(!registry.is_synced("Module"), "not before the convergence");
    converged.store(true, std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(registry.is_synced("Module"));
    drop(echo);
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(registry.namespace_limits(&owner(Some("echo"))), None);
    drop(following);
}
