//! A Hook object run as the shadow of a live hook (`spec.shadowOf`): instead of
//! watching its own bindings it is attached to the live hook ([`operon_hooks::
//! shadow`]), whichever engine runs that one (the hooks directory's or another Hook
//! object's), gets the live hook's inputs, and has its patches and answers compared,
//! never applied. It registers no webhook. Its permissions must cover what the live
//! hook watches and intercepts, since it sees all of it.
//!
//! Its status says how the comparisons go (`status.shadow`: runs, diverged, the last
//! divergence with the object it concerned) and its `Ready` condition whether it is
//! attached (`Shadowing`) or waits for the live hook to appear (`WaitingForLiveHook`,
//! looked for again every few seconds).

use super::prepare::{Prepared, Refusal};
use super::status::{StatusWriter, set_condition};
use super::{Reporting, webhooks};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use operon_data::api::{ConditionStatus, HookDivergence, HookShadowStatus};
use operon_hooks::engine::LoadedHook;
use operon_hooks::shadow::{Comparison, Shadow};
use std::time::Duration;

/// How often a shadow whose live hook is not running looks for it again.
const LOOK_AGAIN: Duration = Duration::from_secs(5);
/// The longest a divergence's description is kept in the status.
const MAX_DIFFERENCE: usize = 1024;

/// The live hook named `live`, in the hooks directory's engine or a Hook object's.
fn find_live(reporting: &Reporting, live: &str) -> Option<LoadedHook> {
    (reporting.main_engine().into_iter())
        .chain(reporting.engines.engines().into_iter().map(|r| r.engine))
        .find_map(|engine| {
            engine
                .hooks()
                .iter()
                .find(|h| h.hook.name() == live)
                .cloned()
        })
}

/// Checks that what `live` watches and intercepts is within the shadow's permissions.
async fn check(prepared: &Prepared, live: &LoadedHook) -> Result<(), Refusal> {
    let refused = |message: String| {
        Refusal::new(
            "ShadowNotPermitted",
            format!(
                "the live hook {}: {message} (a shadow gets the live hook's inputs, so its permissions must cover them)",
                live.hook.name()
            ),
        )
    };
    for binding in &live.config.kubernetes {
        let resource = prepared
            .cluster
            .resolve(binding.api_version.as_deref(), &binding.kind)
            .await
            .map_err(|e| refused(format!("binding {:?}: {e}", binding.name)))?;
        prepared
            .permissions
            .check_watch(binding, &resource)
            .map_err(refused)?;
    }
    webhooks::plan(
        &prepared.permissions,
        prepared.cluster.as_ref(),
        &live.config.validating,
        &live.config.mutating,
        &live.config.conversions,
    )
    .await
    .map_err(|r| refused(r.message))?;
    Ok(())
}

/// Records one comparison in the status.
fn record(status: &mut operon_data::api::HookStatus, live: &str, comparison: &Comparison) {
    let shadow = status.shadow.get_or_insert_with(|| HookShadowStatus {
        live: live.to_owned(),
        ..HookShadowStatus::default()
    });
    shadow.runs += 1;
    if comparison.differences.is_empty() {
        return;
    }
    shadow.diverged += 1;
    shadow.last_divergence = Some(HookDivergence {
        time: Time(jiff::Timestamp::now()),
        binding: comparison.binding.clone(),
        object: comparison.object.clone(),
        differences: comparison
            .differences
            .iter()
            .map(|d| {
                let mut text = d.describe();
                if text.len() > MAX_DIFFERENCE {
                    text.truncate(text.floor_char_boundary(MAX_DIFFERENCE));
                    text.push('…');
                }
                text
            })
            .collect(),
    });
}

/// Runs the Hook whose `prepared` hook shadows `live` until this future is dropped
/// (the Hook changed or went): waits for the live hook, checks it against the
/// permissions, attaches, and keeps the status.
pub(super) async fn run(
    reporting: &Reporting,
    name: &str,
    live: &str,
    prepared: Prepared,
    writer: &StatusWriter,
) -> Result<(), Refusal> {
    let mut said = false;
    let found = loop {
        if let Some(found) = find_live(reporting, live) {
            break found;
        }
        if !said {
            tracing::info!(hook = %name, live = %live, "a shadow Hook waits for its live hook");
            writer.update(|status| {
                set_condition(
                    &mut status.conditions,
                    "Ready",
                    ConditionStatus::False,
                    "WaitingForLiveHook",
                    format!("no hook named {live:?} runs in this engine (yet)"),
                );
            });
            said = true;
        }
        tokio::time::sleep(LOOK_AGAIN).await;
    };
    check(&prepared, &found).await?;
    let handle = writer.handle();
    let observed = live.to_owned();
    let shadow = Shadow::new(
        prepared.loaded.hook.clone(),
        prepared.loaded.config.settings.timeout,
        reporting.metrics.clone(),
        move |comparison| handle.send_modify(|status| record(status, &observed, comparison)),
    );
    let _attachment = reporting.shadows.attach(live, shadow);
    tracing::info!(hook = %name, live = %live, "a shadow Hook runs beside its live hook");
    writer.update(|status| {
        status.shadow.get_or_insert_with(|| HookShadowStatus {
            live: live.to_owned(),
            ..HookShadowStatus::default()
        });
        set_condition(
            &mut status.conditions,
            "Ready",
            ConditionStatus::True,
            "Shadowing",
            format!("runs beside the live hook {live} on its inputs; its patches and answers are compared, never applied"),
        );
    });
    std::future::pending::<()>().await;
    Ok(())
}
