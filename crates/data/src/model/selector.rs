//! Label, field and namespace selectors, and the kinds of watch events.

use serde::Serialize;

/// The kinds of Kubernetes watch events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub enum WatchEvent {
    /// The object was created (or seen for the first time).
    Added,
    /// The object changed.
    Modified,
    /// The object was deleted.
    Deleted,
}

impl WatchEvent {
    /// The name Kubernetes and shell-operator give the event.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "Added",
            Self::Modified => "Modified",
            Self::Deleted => "Deleted",
        }
    }
}

/// Operators of a label selector requirement (Kubernetes `matchExpressions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum LabelOperator {
    /// The label's value is one of `values`.
    In,
    /// The label is absent or its value is none of `values`.
    NotIn,
    /// The label is present, whatever its value.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct LabelRequirement {
    /// The label key.
    pub key: String,
    /// How the label is compared.
    pub operator: LabelOperator,
    /// The values compared with; empty for `Exists` and `DoesNotExist`.
    pub values: Vec<String>,
}

/// A Kubernetes label selector: every entry must match.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
pub struct LabelSelector {
    /// Labels that must be present with exactly these values.
    pub match_labels: Vec<(String, String)>,
    /// Further requirements.
    pub match_expressions: Vec<LabelRequirement>,
}

/// Operators of a field selector requirement. shell-operator accepts `=`, `==` and
/// `Equals` for `Equals`, `!=` and `NotEquals` for `NotEquals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum FieldOperator {
    /// The field equals the value.
    Equals,
    /// The field differs from the value.
    NotEquals,
}

/// One requirement of a field selector, e.g. `metadata.name = kube-dns`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct FieldRequirement {
    /// The field path, e.g. `metadata.name` or `status.phase`.
    pub field: String,
    /// How the field is compared.
    pub operator: FieldOperator,
    /// The value compared with.
    pub value: String,
}

/// Which namespaces a binding watches.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
pub struct NamespaceSelector {
    /// Watch only these namespaces; `None` means every namespace.
    pub name_selector: Option<Vec<String>>,
    /// Watch only namespaces whose labels match.
    pub label_selector: Option<LabelSelector>,
}
