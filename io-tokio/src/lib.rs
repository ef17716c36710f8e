//! Thin tokio adapter for kprod-core (work in progress).
