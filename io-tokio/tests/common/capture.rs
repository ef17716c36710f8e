//! A tracing subscriber for tests that keeps every event: its level, target and fields as
//! text (`name=value ` each, values as `Debug`). Install it as the global subscriber: a
//! thread-scoped one races with other tests' threads over tracing's per-callsite interest
//! cache, so each test tells its own events apart by its own values.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

/// Every event so far, as `(level, target, fields)`.
#[derive(Clone, Default)]
pub struct Capture(pub Arc<Mutex<Vec<(tracing::Level, String, String)>>>);

impl Capture {
    /// A copy of the events so far.
    pub fn events(&self) -> Vec<(tracing::Level, String, String)> {
        self.0.lock().unwrap().clone()
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, e: &tracing::Event<'_>) {
        struct Fields(String);
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                let _ = write!(self.0, "{}={:?} ", f.name(), v);
            }
        }
        let mut fields = Fields(String::new());
        e.record(&mut fields);
        let meta = e.metadata();
        (self.0.lock().unwrap()).push((*meta.level(), meta.target().to_owned(), fields.0));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}
