//! The local, in-memory cluster.
