//! A tracing subscriber for tests that keeps every event: its level, target and fields as
//! text (`name=value ` each, values as `Debug`). Install it as the global subscriber: a
//! thread-scoped one races with other tests' threads over tracing's per-callsite interest
//! cache, so each test tells its own events apart by its own values.

// Each test binary uses a part of it.
#![allow(dead_code)]

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

    /// The subscriber that keeps every event here.
    pub fn subscriber(&self) -> OnEvent<impl Fn(tracing::Level, &str, String) + Send + Sync> {
        let events = Arc::clone(&self.0);
        OnEvent(move |level, target: &str, fields| {
            events
                .lock()
                .unwrap()
                .push((level, target.to_owned(), fields));
        })
    }
}

/// A subscriber that calls its function with each event's level, target and fields as
/// text (`name=value ` each, values as `Debug`; the message is the field `message`), on the
/// thread that logs it.
pub struct OnEvent<F>(pub F);

impl<F: Fn(tracing::Level, &str, String) + Send + Sync + 'static> tracing::Subscriber
    for OnEvent<F>
{
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
        (self.0)(*meta.level(), meta.target(), fields.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}
