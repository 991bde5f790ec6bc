//! Binding contexts: what caused a hook run and the objects it concerns.

use super::selector::WatchEvent;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What caused a hook run (shell-operator's binding context `type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BindingType {
    /// The `onStartup` binding.
    OnStartup,
    /// A `schedule` binding fired.
    Schedule,
    /// The initial list of a kubernetes binding.
    Synchronization,
    /// A watch event of a kubernetes binding.
    Event,
    /// A grouped binding fired: only `snapshots` is meaningful.
    Group,
    /// An admission review for a validating binding.
    Validating,
    /// An admission review for a mutating binding.
    Mutating,
    /// A conversion review for a conversion binding.
    Conversion,
}

impl BindingType {
    /// shell-operator's spelling (`Synchronization`, `Event`, `Schedule`...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OnStartup => "onStartup",
            Self::Schedule => "Schedule",
            Self::Synchronization => "Synchronization",
            Self::Event => "Event",
            Self::Group => "Group",
            Self::Validating => "Validating",
            Self::Mutating => "Mutating",
            Self::Conversion => "Conversion",
        }
    }
}

/// An object with the result of the binding's jq filter.
///
/// The texts are shared, not owned: a binding's snapshot and every context that shows
/// the object (a Synchronization run's list, the `snapshots` of each run that includes
/// them, the run history) hold the same text, so a binding of 50,000 objects is not
/// copied whole for each run that is queued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectAndFilter {
    /// The full object as JSON text; `None` when the binding drops full objects.
    pub object: Option<Arc<str>>,
    /// The filter result as JSON text; `None` when the binding has no filter. A filter
    /// that yields nothing gives `null`.
    pub filter_result: Option<Arc<str>>,
}

/// The snapshot of one kubernetes binding, sorted by namespace then name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The kubernetes binding the snapshot belongs to.
    pub binding: String,
    /// The objects it currently matches.
    pub objects: Vec<ObjectAndFilter>,
}

/// One binding context, in shell-operator's v1 shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindingContext {
    /// The binding that fired; for `Group` contexts too (the group is in `group`).
    pub binding: String,
    /// What happened.
    pub type_: BindingType,
    /// The group of the binding, when it has one.
    pub group: Option<String>,
    /// For `Event`: which watch event.
    pub watch_event: Option<WatchEvent>,
    /// For `Event`: the object and its filter result.
    pub object: Option<ObjectAndFilter>,
    /// For `Synchronization`: every matching object.
    pub objects: Vec<ObjectAndFilter>,
    /// Snapshots of the bindings named in `includeSnapshotsFrom` (or of the group).
    pub snapshots: Vec<Snapshot>,
    /// For `Validating`, `Mutating` and `Conversion`: the AdmissionReview or ConversionReview as
    /// JSON text.
    pub review: Option<String>,
}
