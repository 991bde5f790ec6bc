//! The Kubernetes API conventions Operon follows, each written once: status conditions
//! and when their transition time moves ([`conditions`]), the syntax of names, label
//! keys and values, annotation keys and apiVersions ([`names`]), and the field manager
//! Operon applies as ([`FIELD_MANAGER`]).
//!
//! The rules are apimachinery's (`meta.SetStatusCondition`,
//! `k8s.io/apimachinery/pkg/util/validation`), so that what Operon accepts is what the
//! API server accepts: a check that is stricter refuses objects users can store, and one
//! that is looser lets an object fail later, when it is used. Each rule's edge cases are
//! tested beside it.

pub mod conditions;
pub mod names;

/// The field manager of everything Operon writes (server-side apply, creates and
/// updates): one name, so that Operon's own writes never conflict with each other and
/// `managedFields` says which fields are Operon's.
pub const FIELD_MANAGER: &str = "operon";
