//! Shared harness for kprod integration tests.
