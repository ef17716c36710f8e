//! kprod (through kprod-tokio) against a real Tansu broker, through the fault proxy
//! (`kprod_tests::proxy`): lost responses of processed requests, delays, blackholes,
//! truncated and corrupted responses, refused connections, faults during the handshake,
//! delivery timeouts and `close()` during faults.
//!
//! Tansu advertises the proxy's address in Metadata, so every connection kprod opens goes
//! through the proxy. After each scenario the proxy is healed and the independent reader
//! (librdkafka's consumer) reads every partition; [`Ledger::check`] then asserts per
//! partition: no record duplicated, send order kept, every acknowledged record at its
//! reported offset (present at all when the offset is `None`, Tansu's
//! DUPLICATE_SEQUENCE_NUMBER answer to a retry of a written batch), every `NotPersisted`
//! failure absent; and every future resolved within a bound.
//!
//! Needs the Tansu binary (`scripts/install-tansu.sh`, or `KPROD_TANSU=/path/to/tansu`).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kprod_core::protocol::api_key;
use kprod_core::{DeliveryError as CoreError, ProducerConfig};
use kprod_tests::ledger::{Ledger, Summary};
use kprod_tests::proxy::{Fault, Proxy, Refusal, Rule};
use kprod_tests::Tansu;
use kprod_tokio::{Connector, ErrorKind, ProducerHandle, TcpConnector};
use tokio::net::TcpStream;

/// Bound on resolving every record of a scenario.
const RESOLVE: Duration = Duration::from_secs(30);
/// Bound on waiting for a fault to happen.
const WAIT: Duration = Duration::from_secs(10);

/// Byte offsets in a response frame after its size prefix (flexible response header v1:
/// correlation id, then an empty tagged-field section).
const CORRELATION_ID: usize = 0;
/// Produce v9+ response body: the first byte is the compact length of the topic array.
const PRODUCE_TOPICS_LEN: usize = 5;
/// Metadata v9+ response body: throttle_time_ms (4 bytes), then the broker array's length.
const METADATA_BROKERS_LEN: usize = 9;

struct Env {
    proxy: Proxy,
    // Keeps the broker alive for the scenario.
    _tansu: Tansu,
    topic: String,
    partitions: i32,
}

impl Env {
    /// A proxy, a Tansu broker advertising the proxy's address, and a topic.
    async fn start(topic: &str, partitions: i32) -> Self {
        let proxy = Proxy::bind().await.expect("bind proxy");
        let port = proxy.port();
        let tansu = tokio::task::block_in_place(|| {
            let t = Tansu::start_advertising(port);
            t.create_topic(topic, partitions as u32);
            t
        });
        proxy.set_upstream(tansu.addr());
        Self {
            proxy,
            _tansu: tansu,
            topic: topic.to_owned(),
            partitions,
        }
    }

    fn config(&self) -> ProducerConfig {
        ProducerConfig {
            bootstrap_servers: vec![self.proxy.bootstrap()],
            linger: Duration::from_millis(2),
            batch_size: 300,
            request_timeout: Duration::from_millis(800),
            delivery_timeout: Duration::from_secs(25),
            retry_backoff: Duration::from_millis(10),
            retry_backoff_max: Duration::from_millis(100),
            reconnect_backoff: Duration::from_millis(10),
            allow_auto_topic_creation: false,
            ..Default::default()
        }
    }

    fn ledger(&self) -> Ledger {
        Ledger::new(&self.topic, self.partitions)
    }

    /// Heals the proxy and checks the log with the independent reader.
    async fn check(&self, ledger: &Ledger) -> Summary {
        self.proxy.heal().await;
        let s = ledger.read_and_check(&self.proxy.bootstrap()).await;
        eprintln!(
            "{}: {s:?}; faults {:?}",
            self.topic,
            self.proxy.stats().faults
        );
        s
    }
}

fn producer(cfg: ProducerConfig) -> ProducerHandle {
    ProducerHandle::connect(cfg).expect("valid config")
}

/// A TCP connector that counts connect attempts and failures.
#[derive(Clone, Default)]
struct Counting {
    attempts: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
}

impl Connector for Counting {
    type Stream = TcpStream;
    async fn connect(&self, addr: &str) -> io::Result<TcpStream> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        let r = TcpConnector.connect(addr).await;
        if r.is_err() {
            self.failures.fetch_add(1, Ordering::SeqCst);
        }
        r
    }
}

/// Waits until `cond` holds, checking every 5 ms, for at most `timeout`.
async fn wait_until(what: &str, timeout: Duration, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn faults(proxy: &Proxy, api: i16, pred: impl Fn(&Fault) -> bool) -> usize {
    proxy.stats().faults_where(|k, f| k == api && pred(f))
}

/// Sends waves of `n` records, each wave flushed and resolved before the next, until `done`
/// holds (at most 40 waves).
async fn waves_until(l: &mut Ledger, p: &ProducerHandle, n: usize, done: impl Fn() -> bool) {
    for _ in 0..40 {
        if done() {
            return;
        }
        l.enqueue_n(p, n).await;
        p.flush().await;
        l.resolve(RESOLVE).await;
    }
    assert!(
        done(),
        "the planned faults did not all happen in 40 waves: {:?}",
        l.outcomes()
    );
}

// ---------------------------------------------------------------------------------------------
// Responses of processed requests lost
// ---------------------------------------------------------------------------------------------

/// max.in.flight 1: three Produce responses are lost after Tansu wrote the batch. Each retry
/// resends the same bytes, Tansu answers 46, and the records are acknowledged without an
/// offset: present once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_after_processed_produce_in_flight_1() {
    let env = Env::start("cut-inflight-1", 3).await;
    env.proxy.add_rule(
        Rule::on(api_key::PRODUCE, Fault::Cut)
            .skip(2)
            .times(3)
            .every(3),
    );
    let p = producer(ProducerConfig {
        max_in_flight: 1,
        ..env.config()
    });
    let mut l = env.ledger();
    let cuts = || faults(&env.proxy, api_key::PRODUCE, |f| *f == Fault::Cut);
    waves_until(&mut l, &p, 30, || cuts() >= 3).await;
    p.close().await;
    assert_eq!(cuts(), 3);
    let s = env.check(&l).await;
    assert!(s.all_delivered(), "{s:?}");
    assert!(
        s.delivered_without_offset > 0,
        "a retry of a written batch is answered 46: {s:?}"
    );
    assert_eq!(s.in_log, s.sent);
}

/// max.in.flight 5: a response is lost while four more requests are pipelined behind it
/// (some processed, some perhaps not). Every batch in flight is retried in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_after_processed_produce_in_flight_5() {
    let env = Env::start("cut-inflight-5", 4).await;
    env.proxy
        .add_rule(Rule::on(api_key::PRODUCE, Fault::Cut).skip(1));
    let p = producer(env.config());
    let mut l = env.ledger();
    l.enqueue_n(&p, 400).await;
    l.resolve(RESOLVE).await;
    p.close().await;
    assert_eq!(
        faults(&env.proxy, api_key::PRODUCE, |f| *f == Fault::Cut),
        1
    );
    let s = env.check(&l).await;
    assert!(s.all_delivered(), "{s:?}");
    assert!(s.delivered_without_offset > 0, "{s:?}");
    assert_eq!(s.in_log, 400);
}

/// Every other Produce response is lost, eight times, with five requests in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_cuts() {
    let env = Env::start("repeated-cuts", 3).await;
    env.proxy.add_rule(
        Rule::on(api_key::PRODUCE, Fault::Cut)
            .skip(1)
            .every(1)
            .times(8),
    );
    let p = producer(env.config());
    let mut l = env.ledger();
    let cuts = || faults(&env.proxy, api_key::PRODUCE, |f| *f == Fault::Cut);
    waves_until(&mut l, &p, 120, || cuts() >= 8).await;
    p.close().await;
    assert_eq!(cuts(), 8);
    assert!(
        env.proxy.stats().accepted >= 9,
        "a new connection after each cut"
    );
    let s = env.check(&l).await;
    assert!(s.all_delivered(), "{s:?}");
    assert_eq!(s.in_log, s.sent);
}

// ---------------------------------------------------------------------------------------------
// Delays and blackholes
// ---------------------------------------------------------------------------------------------

/// Latency below request.timeout: nothing is retried, every record gets its offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_below_request_timeout() {
    let env = Env::start("delay-below", 2).await;
    env.proxy
        .add_rule(Rule::any(Fault::Delay(Duration::from_millis(150))).forever());
    let p = producer(env.config());
    let mut l = env.ledger();
    let start = Instant::now();
    l.enqueue_n(&p, 100).await;
    l.resolve(RESOLVE).await;
    p.close().await;
    assert!(
        start.elapsed() >= Duration::from_millis(150 * 4),
        "handshake and produce delayed"
    );
    assert_eq!(
        env.proxy.stats().accepted,
        2,
        "no reconnect: bootstrap and node"
    );
    let s = env.check(&l).await;
    assert_eq!(s.delivered, 100, "every record with its offset: {s:?}");
}

/// Produce responses delayed beyond request.timeout (twice): kprod closes the connection,
/// the late response is never read, and the retry of the written batch is answered 46.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_beyond_request_timeout() {
    let env = Env::start("delay-beyond", 2).await;
    let cfg = env.config();
    env.proxy.add_rule(
        Rule::on(
            api_key::PRODUCE,
            Fault::Delay(cfg.request_timeout + Duration::from_millis(700)),
        )
        .times(2),
    );
    let p = producer(cfg.clone());
    let mut l = env.ledger();
    let start = Instant::now();
    l.enqueue_n(&p, 40).await;
    l.resolve(RESOLVE).await;
    let took = start.elapsed();
    p.close().await;
    assert!(
        took >= cfg.request_timeout,
        "resolved after a request timeout: {took:?}"
    );
    assert!(
        env.proxy.stats().accepted >= 3,
        "reconnected after the timeout"
    );
    let s = env.check(&l).await;
    assert!(s.all_delivered(), "{s:?}");
    assert!(s.delivered_without_offset > 0, "{s:?}");
}

/// A connection that forwards requests but never answers: kprod's request timeout closes it
/// and the retries go out on a new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackhole_forces_request_timeout() {
    let env = Env::start("blackhole", 2).await;
    let cfg = env.config();
    env.proxy
        .add_rule(Rule::on(api_key::PRODUCE, Fault::Blackhole).skip(1));
    let p = producer(cfg.clone());
    let mut l = env.ledger();
    let start = Instant::now();
    l.enqueue_n(&p, 60).await;
    l.resolve(RESOLVE).await;
    let took = start.elapsed();
    p.close().await;
    assert_eq!(
        faults(&env.proxy, api_key::PRODUCE, |f| *f == Fault::Blackhole),
        1
    );
    assert!(took >= cfg.request_timeout, "{took:?}");
    let s = env.check(&l).await;
    assert!(s.all_delivered(), "{s:?}");
    assert!(s.delivered_without_offset > 0, "{s:?}");
}

/// delivery.timeout.ms expires while Produce responses are blackholed (max.in.flight 1): the
/// batch that went out fails PossiblyPersisted (and Tansu did write it), the batches that
/// never went out fail NotPersisted (and are absent). After healing, the same producer
/// delivers new records to the same partition (after a fresh producer id: Tansu refuses the
/// local epoch bump).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivery_timeout_while_blackholed() {
    let env = Env::start("delivery-timeout", 1).await;
    let cfg = ProducerConfig {
        max_in_flight: 1,
        request_timeout: Duration::from_millis(400),
        delivery_timeout: Duration::from_millis(1500),
        batch_size: 200,
        ..env.config()
    };
    env.proxy.add_rule(
        Rule::on(api_key::PRODUCE, Fault::Blackhole)
            .skip(1)
            .forever(),
    );
    let p = producer(cfg);
    let mut l = env.ledger();
    l.enqueue_n(&p, 3).await;
    p.flush().await; // the first request goes through
    l.enqueue_n(&p, 40).await;
    l.resolve(RESOLVE).await;
    let before = l.outcomes();
    assert_eq!(before.delivered, 3, "{before:?}");
    assert!(before.failed_possibly_persisted > 0, "{before:?}");
    assert!(before.failed_not_persisted > 0, "{before:?}");
    for k in l.errors() {
        assert!(
            matches!(k, ErrorKind::Failed(CoreError::DeliveryTimeout)),
            "{k:?}"
        );
    }
    env.proxy.heal().await;
    l.enqueue_n(&p, 20).await;
    l.resolve(RESOLVE).await;
    p.close().await;
    let s = env.check(&l).await;
    assert_eq!(s.delivered + s.delivered_without_offset, 23, "{s:?}");
    assert!(
        s.possibly_persisted_present > 0,
        "blackholed requests were written: {s:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Truncated and corrupted responses
// ---------------------------------------------------------------------------------------------

/// Produce responses cut in the middle of a frame (10 bytes, then 4 bytes: inside the size
/// prefix), then the connection closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_produce_response() {
    let env = Env::start("truncated", 2).await;
    env.proxy
        .add_rule(Rule::on(api_key::PRODUCE, Fault::Truncate(10)).skip(1));
    env.proxy
        .add_rule(Rule::on(api_key::PRODUCE, Fault::Truncate(2)).skip(2));
    let p = producer(env.config());
    let mut l = env.ledger();
    let hits = || {
        faults(&env.proxy, api_key::PRODUCE, |f| {
            matches!(f, Fault::Truncate(_))
        })
    };
    waves_until(&mut l, &p, 40, || hits() >= 2).await;
    p.close().await;
    assert_eq!(hits(), 2);
    let s = env.check(&l).await;
    assert!(s.all_delivered(), "{s:?}");
    assert!(s.delivered_without_offset > 0, "{s:?}");
}

/// Well-framed but truncated Produce responses (the size prefix matches the shortened body):
/// the decode fails, kprod closes the connection and retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_frame_produce_response() {
    let env = Env::start("short-frame", 2).await;
    env.proxy.add_rule(
        Rule::on(api_key::PRODUCE, Fault::ShortFrame(3))
            .skip(1)
            .times(2)
            .every(2),
    );
    let p = producer(env.config());
    let mut l = env.ledger();
    let hits = || {
        faults(&env.proxy, api_key::PRODUCE, |f| {
            matches!(f, Fault::ShortFrame(_))
        })
    };
    waves_until(&mut l, &p, 40, || hits() >= 2).await;
    p.close().await;
    assert_eq!(hits(), 2);
    let s = env.check(&l).await;
    assert!(s.all_delivered(), "{s:?}");
    assert!(s.delivered_without_offset > 0, "{s:?}");
}

/// Bit flips in Produce responses that a parser can detect: one in the correlation id, one
/// in the topic array's length (1 topic becomes 65). Each is refused, the connection closed,
/// the batches retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bit_flip_in_produce_response() {
    let env = Env::start("flip-produce", 2).await;
    env.proxy.add_rule(
        Rule::on(
            api_key::PRODUCE,
            Fault::Flip {
                offset: CORRELATION_ID + 3,
                mask: 0x01,
            },
        )
        .skip(1),
    );
    env.proxy.add_rule(
        Rule::on(
            api_key::PRODUCE,
            Fault::Flip {
                offset: PRODUCE_TOPICS_LEN,
                mask: 0x40,
            },
        )
        .skip(2),
    );
    let p = producer(env.config());
    let mut l = env.ledger();
    let hits = || {
        faults(&env.proxy, api_key::PRODUCE, |f| {
            matches!(f, Fault::Flip { .. })
        })
    };
    waves_until(&mut l, &p, 40, || hits() >= 2).await;
    p.close().await;
    assert_eq!(hits(), 2);
    assert!(
        env.proxy.stats().accepted >= 4,
        "both corrupt responses closed the connection"
    );
    let s = env.check(&l).await;
    assert!(s.all_delivered(), "{s:?}");
    assert!(s.delivered_without_offset > 0, "{s:?}");
}

/// Bit flips in Metadata responses (the broker array's length, then the correlation id) at
/// start: kprod drops each and asks again; the records wait and are then delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bit_flip_in_metadata_response() {
    let env = Env::start("flip-metadata", 2).await;
    env.proxy.add_rule(Rule::on(
        api_key::METADATA,
        Fault::Flip {
            offset: METADATA_BROKERS_LEN,
            mask: 0x40,
        },
    ));
    env.proxy.add_rule(Rule::on(
        api_key::METADATA,
        Fault::Flip {
            offset: CORRELATION_ID + 2,
            mask: 0x80,
        },
    ));
    let p = producer(env.config());
    let mut l = env.ledger();
    l.enqueue_n(&p, 60).await;
    l.resolve(RESOLVE).await;
    p.close().await;
    let st = env.proxy.stats();
    assert_eq!(st.faults_where(|k, _| k == api_key::METADATA), 2);
    assert!(st.requests(api_key::METADATA) >= 3, "{st:?}");
    let s = env.check(&l).await;
    assert_eq!(
        s.delivered, 60,
        "nothing was sent before good metadata: {s:?}"
    );
}

/// Garbage size prefixes on Produce responses: above the maximum frame size, negative, and
/// large but allowed (kprod then waits for bytes that never come, until request.timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_size_prefix() {
    let env = Env::start("garbage-size", 2).await;
    for (skip, size) in [(1, i32::MAX), (2, -7), (3, 1_000_000)] {
        env.proxy
            .add_rule(Rule::on(api_key::PRODUCE, Fault::Size(size)).skip(skip));
    }
    let p = producer(env.config());
    let mut l = env.ledger();
    let hits = || {
        faults(&env.proxy, api_key::PRODUCE, |f| {
            matches!(f, Fault::Size(_))
        })
    };
    waves_until(&mut l, &p, 40, || hits() >= 3).await;
    p.close().await;
    assert_eq!(hits(), 3);
    let s = env.check(&l).await;
    assert!(s.all_delivered(), "{s:?}");
    assert!(s.delivered_without_offset > 0, "{s:?}");
}

// ---------------------------------------------------------------------------------------------
// Refused connections and the handshake
// ---------------------------------------------------------------------------------------------

/// The port refuses connections (ECONNREFUSED) when the producer starts; the records wait,
/// kprod keeps trying with backoff, and once the port accepts, everything is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_at_start_then_recovery() {
    let env = Env::start("refused-start", 2).await;
    env.proxy.refuse(Refusal::Closed);
    let counting = Counting::default();
    let p = ProducerHandle::with_connector(env.config(), counting.clone()).expect("config");
    let mut l = env.ledger();
    l.enqueue_n(&p, 50).await;
    wait_until("three refused connects", WAIT, || {
        counting.failures.load(Ordering::SeqCst) >= 3
    })
    .await;
    assert_eq!(env.proxy.stats().requests(api_key::PRODUCE), 0);
    env.proxy.accept().await;
    l.resolve(RESOLVE).await;
    p.close().await;
    let s = env.check(&l).await;
    assert_eq!(s.delivered, 50, "{s:?}");
}

/// Mid-run, every connection is cut and new ones are reset on accept; kprod retries with
/// backoff and delivers everything once connections are accepted again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_during_run() {
    let env = Env::start("refused-run", 3).await;
    let p = producer(env.config());
    let mut l = env.ledger();
    l.enqueue_n(&p, 60).await;
    l.resolve(RESOLVE).await;
    env.proxy.refuse(Refusal::Reset);
    assert!(env.proxy.cut_all() >= 1);
    l.enqueue_n(&p, 60).await;
    env.proxy
        .wait_for("three reset connects", WAIT, |s| s.reset_on_accept >= 3)
        .await;
    env.proxy.accept().await;
    l.resolve(RESOLVE).await;
    p.close().await;
    let s = env.check(&l).await;
    assert!(s.all_delivered(), "{s:?}");
    assert_eq!(s.in_log, 120);
}

/// The handshake breaks: an ApiVersions response is lost twice (after Tansu answered), an
/// InitProducerId request is dropped before Tansu sees it, and an InitProducerId response is
/// lost after Tansu handed out a producer id. kprod reconnects and asks again each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_during_handshake() {
    let env = Env::start("cut-handshake", 2).await;
    env.proxy
        .add_rule(Rule::on(api_key::API_VERSIONS, Fault::Cut).times(2));
    env.proxy
        .add_rule(Rule::on(api_key::INIT_PRODUCER_ID, Fault::Cut));
    env.proxy
        .add_rule(Rule::on(api_key::INIT_PRODUCER_ID, Fault::Reset));
    let p = producer(env.config());
    let mut l = env.ledger();
    l.enqueue_n(&p, 60).await;
    l.resolve(RESOLVE).await;
    p.close().await;
    let st = env.proxy.stats();
    assert_eq!(st.faults_where(|k, _| k == api_key::API_VERSIONS), 2);
    assert_eq!(st.faults_where(|k, _| k == api_key::INIT_PRODUCER_ID), 2);
    assert!(st.requests(api_key::INIT_PRODUCER_ID) >= 2, "{st:?}");
    let s = env.check(&l).await;
    assert_eq!(s.delivered, 60, "{s:?}");
}

// ---------------------------------------------------------------------------------------------
// close() during faults
// ---------------------------------------------------------------------------------------------

/// close() while every Produce response is blackholed: close() returns within the delivery
/// timeout plus one request timeout, and every record has a truthful outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_while_blackholed() {
    let env = Env::start("close-blackhole", 2).await;
    let cfg = ProducerConfig {
        max_in_flight: 1,
        request_timeout: Duration::from_millis(400),
        delivery_timeout: Duration::from_millis(1200),
        ..env.config()
    };
    env.proxy
        .add_rule(Rule::on(api_key::PRODUCE, Fault::Blackhole).forever());
    let p = producer(cfg.clone());
    let mut l = env.ledger();
    l.enqueue_n(&p, 80).await;
    env.proxy
        .wait_for("a blackholed Produce", WAIT, |s| {
            s.faults_where(|k, _| k == api_key::PRODUCE) >= 1
        })
        .await;
    let start = Instant::now();
    tokio::time::timeout(RESOLVE, p.close())
        .await
        .expect("close() returned");
    let took = start.elapsed();
    assert!(
        took <= cfg.delivery_timeout + 2 * cfg.request_timeout + Duration::from_secs(2),
        "{took:?}"
    );
    l.resolve(Duration::from_secs(1)).await;
    let s = env.check(&l).await;
    assert_eq!(s.delivered + s.delivered_without_offset, 0, "{s:?}");
    assert!(s.failed_possibly_persisted > 0, "{s:?}");
    assert!(s.failed_not_persisted > 0, "{s:?}");
    // The send after close is refused, the record handed back.
    let r = l.next_record(0);
    match p.enqueue(r.clone()).await {
        Err(e) => match e.kind {
            ErrorKind::Refused(se) => assert_eq!(se.into_record().value, r.value),
            other => panic!("{other:?}"),
        },
        Ok(_) => panic!("accepted after close"),
    }
}

/// close() right after the records were handed over, while Produce responses are being lost:
/// close() waits for the retries, and every record is delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_during_cuts() {
    let env = Env::start("close-cuts", 3).await;
    env.proxy
        .add_rule(Rule::on(api_key::PRODUCE, Fault::Cut).every(1).times(4));
    let p = producer(ProducerConfig {
        batch_size: 100,
        ..env.config()
    });
    let mut l = env.ledger();
    l.enqueue_n(&p, 300).await;
    tokio::time::timeout(RESOLVE, p.close())
        .await
        .expect("close() returned");
    l.resolve(Duration::from_secs(1)).await;
    assert_eq!(
        faults(&env.proxy, api_key::PRODUCE, |f| *f == Fault::Cut),
        4
    );
    let s = env.check(&l).await;
    assert!(s.all_delivered(), "{s:?}");
    assert_eq!(s.in_log, 300);
}
