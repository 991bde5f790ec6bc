//! jq filters (jaq), compiled once and cached.
