//! The driver logs its diagnostics once it has let go of the lock that every `enqueue` takes:
//! a slow log writer (a subscriber writing to a file, or to a pipe nobody reads) holds up
//! the driver alone, not the application's threads (a review finding: they were logged
//! while the driver held the lock).
//!
//! Its own test binary: the probe is the process's global subscriber (a thread-scoped one
//! races with other tests over tracing's per-callsite interest cache).

#[path = "common/capture.rs"]
mod capture;

use std::future::Future;
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use capture::OnEvent;
use kprod_core::Record;
use kprod_tokio::ProducerHandle;

/// The producer under test, and the runtime it runs on.
static HANDLE: OnceLock<(ProducerHandle, tokio::runtime::Handle)> = OnceLock::new();
/// For each "connect failed" and "disconnected" event: whether another thread could hand a
/// record over while the event was being logged.
static FREE: Mutex<Vec<bool>> = Mutex::new(Vec::new());
/// Told after each entry of `FREE`.
static PROBED: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Called with each event on the thread that logs it.
fn probe(_: tracing::Level, _: &str, fields: String) {
    // The driver's own "connect failed" and the core's diagnostic that follows it.
    if !fields.starts_with("message=connect failed ")
        && !fields.starts_with("message=disconnected ")
    {
        return;
    }
    let Some((h, rt)) = HANDLE.get() else { return };
    // Another thread hands a record over (its first poll takes the core's lock) while this
    // event is being logged: it gets through at once unless the lock is held.
    let (h, rt) = (h.clone(), rt.clone());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _in_runtime = rt.enter();
        let mut send = std::pin::pin!(h.enqueue(Record::new("t", "x")));
        let ready = matches!(
            send.as_mut().poll(&mut Context::from_waker(Waker::noop())),
            Poll::Ready(_)
        );
        let _ = tx.send(ready);
    });
    // Bounded: with the lock held here, the other thread waits for this event to end.
    let free = rx.recv_timeout(Duration::from_secs(10)).is_ok();
    FREE.lock().unwrap().push(free);
    PROBED.notify_one();
}

#[tokio::test]
async fn diagnostics_are_logged_outside_the_lock_that_enqueue_takes() {
    tracing::subscriber::set_global_default(OnEvent(probe)).expect("the only subscriber");
    // Nothing listens there: the connection fails, and the core says so (a diagnostic).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let bootstrap = format!("127.0.0.1:{port}");
    let h = ProducerHandle::from_properties(&[
        ("bootstrap.servers", bootstrap.as_str()),
        ("reconnect.backoff.ms", "10"),
    ])
    .expect("a valid configuration");
    let _ = HANDLE.set((h.clone(), tokio::runtime::Handle::current()));
    let first = h.enqueue(Record::new("t", "first")).await;
    assert!(first.is_ok(), "accepted (it waits for metadata)");
    // The driver logs each failed connect ("connect failed"), and the core's diagnostic
    // that follows it ("disconnected").
    for _ in 0..2 {
        tokio::time::timeout(Duration::from_secs(60), PROBED.notified())
            .await
            .expect("a connection failure logged within a minute");
    }
    let free = FREE.lock().unwrap().clone();
    assert!(
        free.iter().all(|f| *f),
        "an enqueue waited while a diagnostic was logged: {free:?}"
    );
    h.abort().await;
}
