//! The public API's guarantees that the compiler can check: error types are
//! `std::error::Error + Send + Sync + 'static`, the handle and its futures are `Send`; and
//! starting a producer outside a tokio runtime is an error, not a panic.

use std::error::Error;
use std::future::Future;

use kprod_tokio::{
    config_from_properties, ClientConfig, ConfigError, ConnectionError, DeliveryError,
    DeliveryFuture, FailureReason, Fatal, FatalError, ProducerConfig, ProducerHandle,
    PropertyError, Record, SendError, StartError, TcpConnector, Timeout,
};

fn is_error<E: Error + Send + Sync + 'static>() {}
fn is_send_sync<T: Send + Sync + 'static>() {}
fn is_send<F: Future + Send>(_: &F) {}

#[test]
fn every_public_error_type_is_a_send_sync_static_error() {
    is_error::<DeliveryError>();
    is_error::<ConnectionError>();
    is_error::<Fatal>();
    is_error::<StartError>();
    is_error::<Timeout>();
    is_error::<PropertyError>();
    is_error::<ConfigError>();
    is_error::<SendError>();
    is_error::<FailureReason>();
    is_error::<FatalError>();
    // They convert into the usual boxed error.
    let boxed: Box<dyn Error + Send + Sync> = Box::new(StartError::NoRuntime);
    assert!(boxed.to_string().contains("tokio runtime"));
}

#[test]
fn the_handle_and_its_futures_are_send() {
    is_send_sync::<ProducerHandle>();
    is_send_sync::<DeliveryFuture>();
    is_send_sync::<ClientConfig>();
    // Futures are checked without being run (no runtime is needed to build them).
    fn futures(h: &ProducerHandle) {
        is_send(&h.send(Record::new("t", "v")));
        is_send(&h.enqueue(Record::new("t", "v")));
        is_send(&h.enqueue_with(Record::new("t", "v"), |_| {}));
        is_send(&h.enqueue_many(vec![Record::new("t", "v")]));
        is_send(&h.flush());
        is_send(&h.close());
        is_send(&h.flush_timeout(std::time::Duration::from_secs(1)));
        is_send(&h.close_timeout(std::time::Duration::from_secs(1)));
    }
    let _ = futures;
}

fn config() -> ProducerConfig {
    config_from_properties(&[("bootstrap.servers", "127.0.0.1:9092")]).unwrap()
}

/// A plain `#[test]`: no tokio runtime anywhere.
#[test]
fn starting_outside_a_runtime_is_an_error_not_a_panic() {
    let e = ProducerHandle::connect(config()).unwrap_err();
    assert_eq!(e, StartError::NoRuntime);
    assert!(e.to_string().contains("no tokio runtime"), "{e}");
    assert!(e.to_string().contains("Runtime::block_on"), "{e}");
    let e = ProducerHandle::with_connector(config(), TcpConnector::default()).unwrap_err();
    assert_eq!(e, StartError::NoRuntime);
    let e =
        ProducerHandle::from_properties(&[("bootstrap.servers", "127.0.0.1:9092")]).unwrap_err();
    assert_eq!(e, PropertyError::NoRuntime);
    // A configuration error is still reported as such.
    let bad = ProducerConfig {
        max_in_flight: 9,
        ..config()
    };
    match ProducerHandle::connect(bad) {
        Err(StartError::Config(e)) => {
            assert_eq!(e.setting, "max.in.flight.requests.per.connection");
        }
        other => panic!("{other:?}"),
    }
    // Inside a runtime entered with a guard (no async code), it starts.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let guard = rt.enter();
    let h = ProducerHandle::connect(config()).expect("started inside the runtime");
    assert_eq!(h.fatal(), None);
    drop(guard);
}

/// Probe finding: on a runtime built without its time driver the producer started and its
/// driver task then panicked at its first timer (every record `DriverStopped`, possibly
/// persisted, `fatal()` None); without the IO driver every connect panicked in its task and
/// records timed out after `delivery.timeout.ms`. Starting on such a runtime is now an error
/// naming the driver. A connector that opens no sockets does not need the IO driver.
#[test]
fn a_runtime_without_its_time_or_io_driver_is_refused_at_start() {
    use tokio::runtime::Builder;
    let cases = [
        ("time", Builder::new_current_thread().enable_io().build()),
        ("IO", Builder::new_current_thread().enable_time().build()),
        (
            "IO",
            Builder::new_multi_thread()
                .worker_threads(1)
                .enable_time()
                .build(),
        ),
        (
            "time",
            Builder::new_multi_thread().worker_threads(1).build(),
        ),
    ];
    for (driver, rt) in cases {
        let rt = rt.unwrap();
        let _guard = rt.enter();
        let e = ProducerHandle::connect(config()).unwrap_err();
        assert_eq!(e, StartError::DriverDisabled(driver));
        assert!(e.to_string().contains("enable_all"), "{e}");
        assert!(
            e.to_string().contains(&format!("its {driver} driver")),
            "{e}"
        );
        let e = ProducerHandle::from_properties(&[("bootstrap.servers", "127.0.0.1:9092")])
            .unwrap_err();
        assert_eq!(e, PropertyError::DriverDisabled(driver));
    }
    // A connector of in-memory streams needs timers only.
    struct InMemory;
    impl kprod_tokio::Connector for InMemory {
        type Stream = tokio::io::DuplexStream;
        async fn connect(&self, _: &str) -> std::io::Result<Self::Stream> {
            Err(std::io::ErrorKind::ConnectionRefused.into())
        }
        fn needs_io_driver(&self) -> bool {
            false
        }
    }
    let rt = Builder::new_current_thread().enable_time().build().unwrap();
    let _guard = rt.enter();
    let h = ProducerHandle::with_connector(config(), InMemory).expect("timers are enough");
    assert_eq!(h.fatal(), None);
    let e = ProducerHandle::with_connector(config(), TcpConnector::default()).unwrap_err();
    assert_eq!(e, StartError::DriverDisabled("IO"));
}

/// Polls `f` to completion on this thread, with no tokio runtime in its context (the way an
/// application awaiting with another executor would).
fn block_on_plain<F: Future>(f: F) -> F::Output {
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// Probe finding: `flush_timeout` and `close_timeout` panicked ("there is no reactor
/// running") when awaited outside a tokio runtime, where every other method works. Their
/// timers are now set on the producer's runtime. A record for a broker that never answers
/// keeps both from finishing, so both time out.
#[test]
fn the_timeout_methods_work_outside_a_runtime() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    // A listener that takes connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let h = {
        let _guard = rt.enter();
        ProducerHandle::from_properties(&[("bootstrap.servers", addr.as_str())]).unwrap()
    };
    let outcome = std::thread::spawn(move || {
        let sent = block_on_plain(h.enqueue(Record::new("t", "v")));
        let flushed = block_on_plain(h.flush_timeout(std::time::Duration::from_millis(200)));
        let closed = block_on_plain(h.close_timeout(std::time::Duration::from_millis(200)));
        (sent.is_ok(), flushed, closed)
    })
    .join()
    .expect("no panic outside the runtime");
    let (sent, flushed, closed) = outcome;
    assert!(sent, "the record is accepted");
    assert!(flushed.unwrap_err().to_string().contains("flush"));
    assert!(closed.unwrap_err().to_string().contains("close"));
    drop(silent);
}
