//! Counts kprod-tokio's log events (info and above) by message, for the bench binaries'
//! summaries (`seed-demo`, `outage-probe`); for "batch retry" and "disconnected" the
//! error or reason is part of the name.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// The counts, shared with the subscriber.
pub type Counts = Arc<Mutex<BTreeMap<String, u64>>>;

struct Counter(Counts);

#[derive(Default)]
struct Fields {
    message: String,
    detail: Option<String>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "error" | "reason" => self.detail = Some(format!("{value:?}")),
            _ => {}
        }
    }
}

impl Subscriber for Counter {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        *m.level() <= Level::INFO && m.target().starts_with("kprod")
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut f = Fields::default();
        event.record(&mut f);
        let name = match f.detail {
            Some(d) => format!("{} ({d})", f.message),
            None => f.message,
        };
        *self.0.lock().unwrap().entry(name).or_default() += 1;
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// Installs the counter as the global subscriber.
pub fn install() -> Counts {
    let counts = Counts::default();
    // Fails only if a subscriber is already set; then nothing is counted.
    let _ = tracing::subscriber::set_global_default(Counter(counts.clone()));
    counts
}
