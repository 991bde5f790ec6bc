//! The webhooks of addon-operator modules: the validating, mutating and conversion
//! bindings of a module's hooks (or of the global hooks) are the cluster's webhooks
//! while the module runs. addon-operator serves none of them (its module hooks take
//! only `onStartup`, `schedule`, `kubernetes` and the Helm lifecycle); Operon serves
//! them as the hooks directory's, under `/module/MODULE/` of its webhook servers, each
//! module with its own configurations (`operon-module.MODULE`,
//! [`crate::serve::webhook::owned`]).
//!
//! The leader follows the engines the operator starts and stops (one per enabled module
//! with bindings, [`operon_addons::engine_source`]) and wants registered what each one's
//! hooks declare. A module's configurations outlive a restart of the leader or a change
//! of leader: those of modules that are gone are removed only after the operator's
//! startup convergence, when every enabled module runs again. Only the leader runs
//! modules, so a follower passes a module's reviews to it
//! ([`crate::serve::webhook::forward`]).

use crate::serve::webhook::owned::{AdmissionWebhook, OwnedWebhooks, Owner, WebhookRegistry};
use operon_hooks::engine::Engine;
use operon_hooks::engine_set::EngineSet;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// What this process can serve of a module's webhooks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Served {
    /// It has an admission server.
    pub(crate) admission: bool,
    /// It has a conversion server.
    pub(crate) conversion: bool,
}

/// The owner a module's engine registers as: the module, or `global`.
pub(crate) fn owner(module: Option<&str>) -> Owner {
    Owner::Module(
        module
            .unwrap_or(crate::serve::webhook::owned::GLOBAL)
            .to_owned(),
    )
}

/// The engine of `module` (`global` for the global hooks) in `engines`, when it runs.
pub(crate) fn engine_of(engines: &EngineSet, module: &str) -> Option<Arc<Engine>> {
    let source = if module == crate::serve::webhook::owned::GLOBAL {
        operon_addons::engine_source(None)
    } else {
        operon_addons::engine_source(Some(module))
    };
    (engines.engines().into_iter())
        .find(|r| r.source == source)
        .map(|r| r.engine)
}

/// The webhooks the hooks of `engine` declare, as `served` allows: each admission
/// binding once by name (a configuration's webhooks have distinct names), each CRD once;
/// `main` is the hooks directory's engine, whose conversions stay its own. What cannot
/// be served is logged with the module's name.
pub(crate) fn webhooks_of(
    owner: &Owner,
    engine: &Engine,
    main: Option<&Engine>,
    served: Served,
) -> OwnedWebhooks {
    let mut planned = OwnedWebhooks::default();
    let mut names = BTreeSet::new();
    for loaded in engine.hooks() {
        let hook = loaded.hook.name();
        let config = &loaded.config;
        for (bindings, out) in [
            (&config.validating, &mut planned.validating),
            (&config.mutating, &mut planned.mutating),
        ] {
            for binding in bindings {
                if !served.admission {
                    tracing::warn!(%owner, hook, binding = %binding.name,
                        "an admission binding is not served: this engine has no admission server (--validating-webhook-server-cert and --validating-webhook-server-key, --webhook-cert-dir or --webhook-self-signed)");
                    continue;
                }
                if !names.insert(binding.name.clone()) {
                    tracing::warn!(%owner, hook, binding = %binding.name,
                        "an admission binding is not served: another hook of the same module has a webhook of that name");
                    continue;
                }
                out.push(AdmissionWebhook {
                    binding: binding.clone(),
                    namespaces: None,
                });
            }
        }
        for conversion in &config.conversions {
            let crd = &conversion.crd_name;
            if !served.conversion {
                tracing::warn!(%owner, hook, crd = %crd,
                    "a conversion binding is not served: this engine has no conversion server (--conversion-webhook-server-cert and --conversion-webhook-server-key, --webhook-cert-dir or --webhook-self-signed)");
                continue;
            }
            if let Some(other) = main.and_then(|main| main.converter_of(crd)) {
                tracing::warn!(%owner, hook, crd = %crd, hooks_directory_hook = %other,
                    "a conversion binding is not served: a CustomResourceDefinition has one conversion webhook, and the hooks directory's hook converts it");
                continue;
            }
            if !planned.conversions.contains(crd) {
                planned.conversions.push(crd.clone());
            }
        }
    }
    planned
}

/// Keeps `registry` wanting the webhooks of the modules whose engines are in
/// `engines`, until dropped (the leader runs it beside the operator); modules not
/// running any more are forgotten once `converged` says the operator's startup
/// convergence is done. `main` is the hooks directory's engine.
pub(crate) async fn follow(
    engines: EngineSet,
    registry: WebhookRegistry,
    main: tokio::sync::watch::Receiver<Option<Arc<Engine>>>,
    served: Served,
    converged: impl Fn() -> bool,
) {
    let mut changes = engines.changes();
    let mut wanted: BTreeMap<Owner, Arc<Engine>> = BTreeMap::new();
    // Until the convergence, the configurations of modules a previous leader
    // registered stay: the registry deletes none of a kind not synced.
    let mut synced = false;
    loop {
        let running: BTreeMap<Owner, Arc<Engine>> = (engines.engines().into_iter())
            .filter_map(|r| {
                let module = operon_addons::owner_of_source(&r.source)?;
                Some((owner(module), r.engine))
            })
            .collect();
        let main_engine = main.borrow().clone();
        for (owner, engine) in &running {
            if wanted.get(owner).is_some_and(|e| Arc::ptr_eq(e, engine)) {
                continue;
            }
            let webhooks = webhooks_of(owner, engine, main_engine.as_deref(), served);
            registry.serving(owner, webhooks);
        }
        for owner in wanted.keys() {
            if !running.contains_key(owner) {
                registry.forget(owner);
            }
        }
        wanted = running;
        if !synced && converged() {
            synced = true;
            registry.synced("Module");
        }
        // Engines come and go at once; the convergence is looked at every second
        // until it is done.
        let tick = async {
            if synced {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return },
            () = tick => {}
        }
    }
}

#[cfg(test)]
mod tests;
