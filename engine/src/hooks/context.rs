//! Binding contexts in shell-operator v1 JSON shapes, and snapshots.
