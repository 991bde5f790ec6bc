//! The webhooks of Hook objects. What a validating or mutating binding may intercept is
//! bounded by the Hook's `spec.permissions.watch` (`plan`): a webhook sees every
//! object it intercepts, so it may only name kinds the Hook may read, and for a kind
//! granted in some namespaces only, its webhook is registered with a `namespaceSelector`
//! that keeps the API server from sending it the others. A conversion binding converts
//! every object of its CustomResourceDefinition, so its kind must be granted in every
//! namespace; a CRD has one conversion webhook, so one Hook (the first by namespace and
//! name) gets it and the others are told whose it is.
//!
//! Each Hook with such bindings gets its own configurations, kept by the registry of
//! owned webhooks (`crate::serve::webhook::owned`). Every replica serves them:
//! followers load each Hook and watch its bindings without running it.

use super::prepare::Refusal;
use crate::serve::webhook::owned::{AdmissionWebhook, OwnedWebhooks};
use operon_cluster::Cluster;
use operon_hooks::config::{AdmissionBinding, ConversionBinding};
use operon_hooks::permitted::Permissions;

/// Checks every webhook binding of a Hook against its watch permissions (resolving the
/// granted kinds through `cluster`) and says where each validating and mutating one may
/// intercept: the intersection of what its rules' kinds are granted.
pub(crate) async fn plan(
    permissions: &Permissions,
    cluster: &dyn Cluster,
    validating: &[AdmissionBinding],
    mutating: &[AdmissionBinding],
    conversions: &[ConversionBinding],
) -> Result<OwnedWebhooks, Refusal> {
    let mut planned = OwnedWebhooks::default();
    for conversion in conversions {
        let (plural, group) = conversion
            .crd_name
            .split_once('.')
            .unwrap_or((conversion.crd_name.as_str(), ""));
        let granted = permissions
            .check_intercept(cluster, &conversion.name, group, plural)
            .await
            .map_err(|m| Refusal::new("WebhookNotPermitted", m))?;
        if granted.is_some() {
            return Err(Refusal::new(
                "WebhookNotPermitted",
                format!(
                    "binding {:?} converts every object of {}, but spec.permissions.watch grants its kind in some namespaces only (a conversion webhook sees them all: grant \"*\")",
                    conversion.name, conversion.crd_name
                ),
            ));
        }
        if !planned.conversions.contains(&conversion.crd_name) {
            planned.conversions.push(conversion.crd_name.clone());
        }
    }
    for (bindings, out) in [
        (validating, &mut planned.validating),
        (mutating, &mut planned.mutating),
    ] {
        for binding in bindings {
            let mut namespaces: Option<Vec<String>> = None;
            for rule in &binding.rules {
                for group in &rule.api_groups {
                    for resource in &rule.resources {
                        let granted = permissions
                            .check_intercept(cluster, &binding.name, group, resource)
                            .await
                            .map_err(|m| Refusal::new("WebhookNotPermitted", m))?;
                        namespaces = intersect(namespaces, granted);
                    }
                }
            }
            if namespaces.as_ref().is_some_and(Vec::is_empty) {
                return Err(Refusal::new(
                    "WebhookNotPermitted",
                    format!(
                        "binding {:?} intercepts kinds that spec.permissions.watch grants in no common namespace: give them one, or split the binding",
                        binding.name
                    ),
                ));
            }
            out.push(AdmissionWebhook {
                binding: binding.clone(),
                namespaces,
            });
        }
    }
    Ok(planned)
}

fn intersect(a: Option<Vec<String>>, b: Option<Vec<String>>) -> Option<Vec<String>> {
    match (a, b) {
        (None, other) | (other, None) => other,
        (Some(a), Some(b)) => Some(a.into_iter().filter(|n| b.contains(n)).collect()),
    }
}

#[cfg(test)]
mod tests;
