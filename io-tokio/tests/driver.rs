//! The tokio driver against an in-memory fake broker (`kprod_model::broker::Cluster`) over
//! `tokio::io::duplex` streams, in paused time.

#[path = "common/capture.rs"]
mod capture;

use std::collections::{HashMap, HashSet, VecDeque};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kprod_core::protocol::api_key;
use kprod_core::{Persistence, ProducerConfig, Record, SendError};
use kprod_model::broker::{split_frames, BrokerMode, Cluster};
use kprod_tokio::{
    config_from_properties, Connector, Delivery, DeliveryError, DeliveryFuture, ErrorKind, Fatal,
    ProducerHandle,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::time::Instant;

/// What the fake broker does with the next Produce request.
#[derive(Debug, Clone, Copy)]
enum Action {
    /// Append and answer at once.
    Answer,
    /// Append, then drop the connection without answering.
    AppendThenDrop,
    /// Append, then answer after this long.
    Delay(Duration),
    /// Append, then never read from the connection again (it stays open).
    Stall,
    /// Append and answer, then block the runtime's thread this long (a stalled process:
    /// the answer waits in the pipe, unread, while the request's deadlines pass).
    AnswerThenBlockRuntime(Duration),
}

#[derive(Default)]
struct Script {
    /// Connect attempts to refuse before accepting.
    fail_connects: usize,
    /// Connect attempts that never finish, before the others.
    hang_connects: usize,
    /// Connect attempts seen.
    connects: usize,
    /// Actions for the next Produce requests, in order; then `Answer`.
    produce: VecDeque<Action>,
    /// Delay before answering every Produce request (modelled latency).
    latency: Duration,
    /// Every connect attempt fails with [`Misconfigured`] (a configuration error).
    fatal_connects: bool,
    /// Connects failing with [`Misconfigured`] before the next one is taken.
    refused_connects: usize,
    /// `refused_connects` set to this once an `AppendThenDrop` dropped a connection.
    refuse_after_drop: usize,
    /// Append Produce requests without answering them, as Kafka does under acks=0.
    silent_produce: bool,
    /// A node that answers every Produce request this much later.
    slow_node: Option<(i32, Duration)>,
    /// Connections the client closed (end of stream seen by the broker).
    closed_by_client: usize,
    /// The broker reads at most this many bytes a second (a slow link), with this much
    /// room in each connection's pipe (64 KiB when 0).
    read_rate: Option<usize>,
    pipe: usize,
}

/// A connect error the fake connector classifies as fatal (as a rejected certificate is).
#[derive(Debug)]
struct Misconfigured;

impl std::fmt::Display for Misconfigured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the broker's certificate is not trusted")
    }
}

impl std::error::Error for Misconfigured {}

#[derive(Clone)]
struct FakeBroker {
    cluster: Arc<Mutex<Cluster>>,
    script: Arc<Mutex<Script>>,
}

impl FakeBroker {
    fn new(topic: &str, partitions: i32) -> Self {
        let mut cluster = Cluster::new(BrokerMode::Lenient, &["b1:9092"]);
        cluster.create_topic(topic, partitions, 1);
        Self {
            cluster: Arc::new(Mutex::new(cluster)),
            script: Arc::default(),
        }
    }

    /// Two nodes; `topic`'s partitions are led by node 1 except `on_node_2`.
    fn two_nodes(topic: &str, partitions: i32, on_node_2: i32) -> Self {
        let mut cluster = Cluster::new(BrokerMode::Lenient, &["b1:9092", "b2:9092"]);
        cluster.create_topic(topic, partitions, 1);
        cluster.partition_mut(topic, on_node_2).leader = 2;
        Self {
            cluster: Arc::new(Mutex::new(cluster)),
            script: Arc::default(),
        }
    }

    /// The values in a partition's log, in offset order.
    fn log(&self, topic: &str, p: i32) -> Vec<String> {
        let cluster = self.cluster.lock().unwrap();
        cluster
            .partition(topic, p)
            .log
            .iter()
            .map(|r| String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap())
            .collect()
    }

    /// Serves one connection: real request frames in, real response frames out.
    async fn serve(self, mut stream: DuplexStream, node: i32) {
        let mut buf = BytesMut::new();
        loop {
            let rate = self.script.lock().unwrap().read_rate;
            let read = match rate {
                None => stream.read_buf(&mut buf).await,
                Some(rate) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    (&mut stream)
                        .take(rate as u64 / 10)
                        .read_buf(&mut buf)
                        .await
                }
            };
            match read {
                Ok(0) => {
                    self.script.lock().unwrap().closed_by_client += 1;
                    return;
                }
                Err(_) => return,
                Ok(_) => {}
            }
            for frame in split_frames(&mut buf) {
                let produce = i16::from_be_bytes([frame[0], frame[1]]) == api_key::PRODUCE;
                let response = self.cluster.lock().unwrap().handle(node, frame);
                let Some(response) = response else { return };
                if produce {
                    let (action, latency) = {
                        let mut s = self.script.lock().unwrap();
                        (s.produce.pop_front(), s.latency)
                    };
                    tokio::time::sleep(latency).await;
                    let slow = self.script.lock().unwrap().slow_node;
                    if let Some((_, d)) = slow.filter(|(n, _)| *n == node) {
                        tokio::time::sleep(d).await;
                    }
                    match action.unwrap_or(Action::Answer) {
                        Action::Answer => {}
                        Action::AppendThenDrop => {
                            let mut s = self.script.lock().unwrap();
                            s.refused_connects += std::mem::take(&mut s.refuse_after_drop);
                            return;
                        }
                        Action::Delay(d) => tokio::time::sleep(d).await,
                        Action::Stall => std::future::pending::<()>().await,
                        Action::AnswerThenBlockRuntime(d) => {
                            if stream.write_all(&response).await.is_err() {
                                return;
                            }
                            // The fault itself, not a wait for something: the whole
                            // runtime stops, as a stopped process does.
                            std::thread::sleep(d);
                            continue;
                        }
                    }
                    if self.script.lock().unwrap().silent_produce {
                        continue;
                    }
                }
                if stream.write_all(&response).await.is_err() {
                    return;
                }
            }
        }
    }
}

impl Connector for FakeBroker {
    type Stream = DuplexStream;
    async fn connect(&self, addr: &str) -> io::Result<DuplexStream> {
        let hang = {
            let mut s = self.script.lock().unwrap();
            s.connects += 1;
            let hang = s.hang_connects > 0;
            s.hang_connects = s.hang_connects.saturating_sub(1);
            hang
        };
        if hang {
            std::future::pending::<()>().await;
        }
        {
            let mut s = self.script.lock().unwrap();
            if s.fatal_connects {
                return Err(io::Error::other(Misconfigured));
            }
            if s.refused_connects > 0 {
                s.refused_connects -= 1;
                return Err(io::Error::other(Misconfigured));
            }
            if s.fail_connects > 0 {
                s.fail_connects -= 1;
                return Err(io::ErrorKind::ConnectionRefused.into());
            }
        }
        let node = {
            let cluster = self.cluster.lock().unwrap();
            cluster
                .nodes
                .iter()
                .find(|(_, (h, p))| format!("{h}:{p}") == addr)
                .map(|(n, _)| *n)
        };
        let node = node.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let pipe = self.script.lock().unwrap().pipe;
        let (client, server) = tokio::io::duplex(if pipe == 0 { 64 * 1024 } else { pipe });
        tokio::spawn(self.clone().serve(server, node));
        Ok(client)
    }

    fn fatal_reason(&self, error: &io::Error) -> Option<String> {
        let e = error.get_ref()?.downcast_ref::<Misconfigured>()?;
        Some(e.to_string())
    }
}

fn config(extra: &[(&str, &str)]) -> ProducerConfig {
    let mut props = vec![("bootstrap.servers", "b1:9092")];
    props.extend_from_slice(extra);
    config_from_properties(&props).unwrap()
}

/// Enqueues `n` records valued "0".."n-1" to `topic` and awaits every outcome.
async fn produce_all(
    h: &ProducerHandle,
    topic: &str,
    n: usize,
) -> Vec<Result<Delivery, DeliveryError>> {
    let mut futures = Vec::with_capacity(n);
    for i in 0..n {
        futures.push(h.enqueue(Record::new(topic, i.to_string())).await.unwrap());
    }
    let mut out = Vec::with_capacity(n);
    for f in futures {
        out.push(f.await);
    }
    out
}

/// Every delivered record is in the log exactly once at its offset, per-partition offsets
/// increase in send order, nothing is duplicated, and a not-persisted record is absent.
fn check_truthful(broker: &FakeBroker, topic: &str, outcomes: &[Result<Delivery, DeliveryError>]) {
    let mut logs: HashMap<i32, Vec<String>> = HashMap::new();
    // Every value in any of the topic's partitions, for the records reported not persisted
    // (not only the partitions a delivered record named).
    let everywhere: HashSet<String> = {
        let cluster = broker.cluster.lock().unwrap();
        (cluster.partitions.iter())
            .filter(|((t, _), _)| t == topic)
            .flat_map(|(_, part)| part.log.iter())
            .filter_map(|r| r.value.as_ref())
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect()
    };
    let mut last: HashMap<i32, i64> = HashMap::new();
    let mut in_log = HashSet::new();
    for (i, o) in outcomes.iter().enumerate() {
        match o {
            Ok(d) => {
                let log = logs
                    .entry(d.partition)
                    .or_insert_with(|| broker.log(topic, d.partition));
                let offset = d.offset.expect("offset");
                assert_eq!(log[offset as usize], i.to_string(), "record {i}");
                let prev = last.insert(d.partition, offset);
                assert!(
                    prev.is_none_or(|p| p < offset),
                    "record {i}: offsets go back"
                );
                in_log.insert(i.to_string());
            }
            Err(e) => {
                assert!(
                    matches!(e.kind, ErrorKind::Failed(_) | ErrorKind::Connection(_)),
                    "{e}"
                );
                if e.persisted == Persistence::NotPersisted {
                    assert!(
                        !everywhere.contains(&i.to_string()),
                        "record {i} is in the log"
                    );
                }
            }
        }
    }
    let cluster = broker.cluster.lock().unwrap();
    let mut seen = HashSet::new();
    for ((t, _), part) in &cluster.partitions {
        if t == topic {
            for r in &part.log {
                assert!(seen.insert(r.value.clone()), "duplicate {:?}", r.value);
            }
        }
    }
}

fn all_delivered(outcomes: &[Result<Delivery, DeliveryError>]) {
    for (i, o) in outcomes.iter().enumerate() {
        assert!(o.is_ok(), "record {i}: {o:?}");
    }
}

/// Polls (real time, at most 30 s) until every record accepted for `topic`/`partition` is in
/// a Produce request awaiting its answer (none left to send) and the fake broker has received
/// a Produce request (it takes one `script.produce` action per request).
async fn until_written(
    h: &ProducerHandle,
    broker: &FakeBroker,
    scripted: usize,
    topic: &str,
    partition: i32,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let received = scripted - broker.script.lock().unwrap().produce.len();
        let m = h.metrics().await;
        let queued = (m.partitions.iter())
            .find(|p| &*p.topic == topic && p.partition == partition)
            .map(|p| p.queued_records);
        if received > 0 && queued == Some(0) && m.records_awaiting_metadata == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "after 30 s, {topic}/{partition} still has records to send ({queued:?} queued, \
             {} awaiting metadata) or the broker received no Produce request ({received})",
            m.records_awaiting_metadata
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_overlapping_enqueues_are_delivered_in_order() {
    let broker = FakeBroker::new("t", 3);
    let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
    let outcomes = produce_all(&h, "t", 10_000).await;
    all_delivered(&outcomes);
    check_truthful(&broker, "t", &outcomes);
    let total: usize = (0..3).map(|p| broker.log("t", p).len()).sum();
    assert_eq!(total, 10_000);
    let used: HashSet<i32> = outcomes
        .iter()
        .map(|o| o.as_ref().unwrap().partition)
        .collect();
    assert!(used.len() > 1, "the sticky partitioner moves on: {used:?}");
    h.close().await;
    let err = h.send(Record::new("t", "late")).await.unwrap_err();
    assert!(
        matches!(err.kind, ErrorKind::Refused(ref e) if matches!(**e, SendError::Closed(ref r) if r.topic == "t")),
        "{err}"
    );
    assert_eq!(err.persisted, Persistence::NotPersisted);
}

#[tokio::test(start_paused = true)]
async fn connect_failures_are_retried_until_one_succeeds() {
    let broker = FakeBroker::new("t", 1);
    broker.script.lock().unwrap().fail_connects = 3;
    let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
    let outcomes = produce_all(&h, "t", 100).await;
    all_delivered(&outcomes);
    check_truthful(&broker, "t", &outcomes);
    assert!(broker.script.lock().unwrap().connects >= 4);
    assert_eq!(broker.log("t", 0).len(), 100);
    h.close().await;
}

#[tokio::test(start_paused = true)]
async fn a_connect_that_never_finishes_times_out_and_is_retried() {
    let broker = FakeBroker::new("t", 1);
    broker.script.lock().unwrap().hang_connects = 1;
    // The core times the connect out (the driver has no timer of its own).
    let cfg = config(&[("socket.connection.setup.timeout.ms", "3000")]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    let start = Instant::now();
    let outcomes = produce_all(&h, "t", 10).await;
    all_delivered(&outcomes);
    assert!(
        start.elapsed() >= Duration::from_secs(3) && start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    assert!(broker.script.lock().unwrap().connects >= 2);
    h.close().await;
}

/// `connections.max.idle.ms`: the driver closes the sockets the core gives up for idleness
/// (the broker sees each end), and the next records reconnect.
#[tokio::test(start_paused = true)]
async fn idle_connections_are_closed_and_opened_again_for_the_next_records() {
    let broker = FakeBroker::new("t", 1);
    let cfg = config(&[
        ("connections.max.idle.ms", "1000"),
        ("metadata.max.age.ms", "3600000"),
    ]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    all_delivered(&produce_all(&h, "t", 10).await);
    let opened = broker.script.lock().unwrap().connects;
    assert!(opened >= 1);
    assert_eq!(broker.script.lock().unwrap().closed_by_client, 0);
    // Virtual time: the runtime moves the clock once every task waits.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        broker.script.lock().unwrap().closed_by_client,
        opened,
        "every connection closed once idle"
    );
    let outcomes = produce_all(&h, "t", 10).await;
    all_delivered(&outcomes);
    let once: Vec<String> = (0..10).map(|i| i.to_string()).collect();
    assert_eq!(broker.log("t", 0), [once.clone(), once].concat());
    assert_eq!(
        broker.script.lock().unwrap().connects,
        opened + 1,
        "the leader again"
    );
    h.close().await;
}

#[tokio::test(start_paused = true)]
async fn disconnect_mid_request_is_retried_and_deduplicated() {
    let broker = FakeBroker::new("t", 2);
    broker.script.lock().unwrap().produce = VecDeque::from([Action::AppendThenDrop]);
    let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
    let outcomes = produce_all(&h, "t", 1_000).await;
    all_delivered(&outcomes);
    check_truthful(&broker, "t", &outcomes);
    let total: usize = (0..2).map(|p| broker.log("t", p).len()).sum();
    assert_eq!(total, 1_000, "every record exactly once");
    assert!(broker.cluster.lock().unwrap().stats.deduplicated >= 1);
    h.close().await;
}

#[tokio::test(start_paused = true)]
async fn slow_broker_times_out_reconnects_and_resolves_truthfully() {
    let broker = FakeBroker::new("t", 1);
    let request_timeout = Duration::from_secs(2);
    broker.script.lock().unwrap().produce = VecDeque::from([
        Action::Delay(request_timeout * 5),
        Action::Delay(request_timeout * 5),
    ]);
    let cfg = config(&[
        ("request.timeout.ms", "2000"),
        ("delivery.timeout.ms", "60000"),
    ]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    let start = Instant::now();
    let outcomes = produce_all(&h, "t", 500).await;
    assert!(start.elapsed() >= request_timeout, "the request timed out");
    check_truthful(&broker, "t", &outcomes);
    all_delivered(&outcomes);
    assert!(broker.script.lock().unwrap().connects >= 3, "reconnected");
    assert!(
        broker.cluster.lock().unwrap().stats.deduplicated >= 1,
        "retries were deduplicated"
    );
    assert_eq!(broker.log("t", 0).len(), 500);
    h.close().await;
}

/// A producer with about 2 KiB of `buffer.memory` (batches of 512 B, requests of at most
/// 1 KiB) and this `max.block.ms`, against a broker of topic "t" with `partitions`
/// partitions that takes 10 ms per Produce (`actions` first), so that senders outrun the
/// broker and wait for memory.
fn small_buffer(
    partitions: i32,
    max_block: &str,
    actions: &[Action],
) -> (FakeBroker, ProducerHandle) {
    let broker = FakeBroker::new("t", partitions);
    let cfg = config(&[
        ("buffer.memory", "2048"),
        ("max.request.size", "1024"),
        ("batch.size", "512"),
        ("max.block.ms", max_block),
    ]);
    let mut script = broker.script.lock().unwrap();
    script.latency = Duration::from_millis(10);
    script.produce = actions.iter().copied().collect();
    drop(script);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    (broker, h)
}

/// [`small_buffer`] of one partition against a broker that takes 60 s per Produce, filled:
/// the futures of the records it took before a send found it full (given up after 1 ms).
async fn full_buffer_of_a_slow_broker() -> (FakeBroker, ProducerHandle, Vec<DeliveryFuture>) {
    let (broker, h) = small_buffer(1, "60000", &[]);
    broker.script.lock().unwrap().latency = Duration::from_secs(60);
    let mut accepted = Vec::new();
    loop {
        let r = Record::new("t", "y".repeat(100)).with_partition(0);
        match tokio::time::timeout(Duration::from_millis(1), h.enqueue(r)).await {
            Ok(f) => accepted.push(f.expect("accepted")),
            Err(_) => break,
        }
    }
    (broker, h, accepted)
}

#[tokio::test(start_paused = true)]
async fn full_buffer_makes_senders_wait_and_drops_nothing() {
    // About 2 KiB of buffer for ~2 x 120 KiB of records: enqueue must wait many times.
    let (broker, h) = small_buffer(2, "60000", &[]);
    let value = "x".repeat(100);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for p in 0..2 {
        let (h, value) = (h.clone(), value.clone());
        tasks.push(tokio::spawn(async move {
            let mut futures = Vec::new();
            for i in 0..1_000 {
                let r = Record::new("t", format!("{p}-{i}-{value}")).with_partition(p);
                futures.push(
                    h.enqueue(r)
                        .await
                        .expect("never refused for lack of memory"),
                );
            }
            // Without backpressure every enqueue would return at once (virtual time 0).
            assert!(
                start.elapsed() >= Duration::from_millis(500),
                "{:?}",
                start.elapsed()
            );
            let mut offsets = Vec::new();
            for f in futures {
                offsets.push(f.await.unwrap().offset.unwrap());
            }
            offsets
        }));
    }
    for (p, task) in tasks.into_iter().enumerate() {
        let offsets = task.await.unwrap();
        assert_eq!(offsets, (0..1_000).collect::<Vec<i64>>());
        let log = broker.log("t", p as i32);
        let expected: Vec<String> = (0..1_000).map(|i| format!("{p}-{i}-{value}")).collect();
        assert_eq!(log, expected, "partition {p}: all records, once, in order");
    }
    h.close().await;
}

/// librdkafka's `queue.buffering.max.messages`: at most that many records are held; the
/// senders past it wait (as for `buffer.memory`) and nothing is lost or reordered.
#[tokio::test(start_paused = true)]
async fn a_record_count_limit_makes_senders_wait_and_drops_nothing() {
    let broker = FakeBroker::new("t", 1);
    broker.script.lock().unwrap().latency = Duration::from_millis(10);
    let cfg = config(&[("queue.buffering.max.messages", "5"), ("linger.ms", "0")]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    let start = Instant::now();
    let mut futures = Vec::new();
    for i in 0..100 {
        let r = Record::new("t", i.to_string());
        futures.push(h.enqueue(r).await.expect("never refused for the count"));
        let held = h.metrics().await.buffered_records;
        assert!(held <= 5, "{held} records held");
    }
    for (i, f) in futures.into_iter().enumerate() {
        assert_eq!(f.await.unwrap().offset, Some(i as i64));
    }
    let expected: Vec<String> = (0..100).map(|i| i.to_string()).collect();
    assert_eq!(broker.log("t", 0), expected);
    // 100 records, at most 5 per 10 ms round trip.
    assert!(
        start.elapsed() >= Duration::from_millis(190),
        "{:?}",
        start.elapsed()
    );
    h.close().await;
}

/// Review finding: a send refused at the record-count limit waited until the bytes held
/// fell below what they were at the refusal. Records that waited for metadata then took
/// their batches' room, so the bytes held grew: with six of the seven records acknowledged,
/// the eighth waited for the seventh's slow answer (10 s here) though only one record was
/// held. Now fewer records held frees the wait too.
#[tokio::test(start_paused = true)]
async fn a_send_waiting_for_the_record_count_goes_once_records_resolve() {
    let broker = FakeBroker::two_nodes("t", 7, 6);
    broker.script.lock().unwrap().slow_node = Some((2, Duration::from_secs(10)));
    let cfg = config(&[("queue.buffering.max.messages", "7"), ("linger.ms", "0")]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    let start = Instant::now();
    let mut futures = Vec::new();
    for p in 0..7 {
        let r = Record::new("t", format!("r{p}")).with_partition(p);
        futures.push(h.enqueue(r).await.expect("accepted at once"));
    }
    assert_eq!(start.elapsed(), Duration::ZERO);
    // The eighth waits for the count, then goes once the six fast records resolve.
    let eighth = h.enqueue(Record::new("t", "r7").with_partition(0)).await;
    let waited = start.elapsed();
    assert!(eighth.is_ok(), "{eighth:?}");
    assert!(waited < Duration::from_secs(1), "waited {waited:?}");
    for f in futures {
        f.await.unwrap();
    }
    assert_eq!(eighth.unwrap().await.unwrap().offset, Some(1));
    h.close().await;
}

/// A value that counts its drops, to see when the producer lets go of a record.
struct Counted(Arc<std::sync::atomic::AtomicUsize>, Vec<u8>);

impl AsRef<[u8]> for Counted {
    fn as_ref(&self) -> &[u8] {
        &self.1
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// An application that retries sends under a timeout while the buffer stays full (a broker
/// that takes 60 s per Produce): each abandoned send leaves its command, record included,
/// queued for memory. Before, all 2,000 stayed queued until memory freed; now they are
/// dropped whenever the queue doubles, so at most a few dozen are held at a time.
#[tokio::test(start_paused = true)]
async fn abandoned_sends_waiting_for_memory_do_not_pile_up() {
    let (_broker, h, accepted) = full_buffer_of_a_slow_broker().await;
    let dropped = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    const ATTEMPTS: usize = 2_000;
    for _ in 0..ATTEMPTS {
        let value = Bytes::from_owner(Counted(dropped.clone(), vec![b'z'; 100]));
        let r = Record::new("t", value).with_partition(0);
        let attempt = tokio::time::timeout(Duration::from_millis(1), h.enqueue(r)).await;
        assert!(attempt.is_err(), "the buffer stays full");
    }
    // Let the driver take every command sent.
    tokio::task::yield_now().await;
    let held = ATTEMPTS - dropped.load(std::sync::atomic::Ordering::SeqCst);
    assert!(held <= 128, "{held} abandoned records still held");
    drop(accepted);
    h.close().await;
}

/// Review finding (2026-12-05): a close queued behind sends whose callers gave up was left
/// alone at the front once the purge dropped them, waiting for memory to fall below the level
/// of their refusal; with nothing queued any more, records sent after `close` began went
/// straight into the core (which was not closing) and kept memory up. Now the purge lets what
/// is left go at once: the close is applied, and later records are refused.
#[tokio::test(start_paused = true)]
async fn a_close_behind_abandoned_sends_goes_ahead_when_they_are_purged() {
    let (_broker, h, accepted) = full_buffer_of_a_slow_broker().await;
    // With the one that found the buffer full, 63 sends wait and are given up; the close
    // is the 64th command queued, which purges them.
    for _ in 0..62 {
        let r = Record::new("t", "z".repeat(100)).with_partition(0);
        let attempt = tokio::time::timeout(Duration::from_millis(1), h.enqueue(r)).await;
        assert!(attempt.is_err(), "the buffer stays full");
    }
    let closing = tokio::spawn({
        let h = h.clone();
        async move { h.close().await }
    });
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let late = Record::new("t", "late").with_partition(0);
    let late = tokio::time::timeout(Duration::from_millis(1), h.enqueue(late)).await;
    assert!(
        matches!(late, Ok(Err(_))),
        "a record sent after close began is refused: {late:?}"
    );
    drop(accepted);
    closing.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn flush_sends_without_waiting_for_linger() {
    let broker = FakeBroker::new("t", 1);
    let cfg = config(&[("linger.ms", "60000"), ("delivery.timeout.ms", "120000")]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    let start = Instant::now();
    let mut futures = Vec::new();
    for i in 0..50 {
        futures.push(h.enqueue(Record::new("t", i.to_string())).await.unwrap());
    }
    h.flush().await;
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "flush did not wait for linger"
    );
    assert_eq!(
        broker.log("t", 0).len(),
        50,
        "flush resolved after every record"
    );
    for f in futures {
        f.await.unwrap();
    }
    h.close().await;
}

/// On the real clock (the driver's timer thread reads it; in paused time only tokio's sleep
/// counts): a lone record's batch lingers its whole `linger.ms`, never less, however early the
/// timers wake the driver; and with nothing else going on, it is delivered.
#[tokio::test]
async fn a_lone_record_lingers_its_whole_linger_on_the_real_clock() {
    let broker = FakeBroker::new("t", 1);
    let cfg = config(&[("linger.ms", "40")]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    // Metadata and the connection first, so that the records below wait only for linger.
    h.send(Record::new("t", "warm-up")).await.unwrap();
    for i in 0..10 {
        let start = std::time::Instant::now();
        let d = h.send(Record::new("t", i.to_string())).await.unwrap();
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(40),
            "record {i} acknowledged {took:?} after its send, before linger.ms (40 ms)"
        );
        assert_eq!(d.offset, Some(i + 1), "record {i} at its offset");
    }
    assert_eq!(broker.log("t", 0).len(), 11, "every record once in the log");
    h.close().await;
}

/// Review finding: with `buffer.memory` held by lingering batches (8 partitions, 1 KiB
/// batches, 4 KiB of memory, `linger.ms` 10 s), every wave of senders waiting for memory sat
/// through a whole linger (16 records took 160 s), and a `flush` or `close` queued behind them
/// as long. Now a refusal for memory sends what is buffered (as Java does while its pool has
/// waiters): nothing waits for linger.
#[tokio::test(start_paused = true)]
async fn senders_waiting_for_memory_do_not_wait_for_linger() {
    const LINGER: Duration = Duration::from_secs(10);
    let broker = FakeBroker::new("t", 8);
    let cfg = config(&[
        ("buffer.memory", "4096"),
        ("max.request.size", "4096"),
        ("batch.size", "1024"),
        ("linger.ms", "10000"),
        ("delivery.timeout.ms", "60000"),
    ]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    h.send(Record::new("t", "warm").with_partition(0))
        .await
        .unwrap();
    let start = Instant::now();
    let mut futures = Vec::new();
    for i in 0..16 {
        let r = Record::new("t", format!("r{i}")).with_partition(i % 8);
        futures.push(h.enqueue(r).await.unwrap());
    }
    assert!(
        start.elapsed() < LINGER,
        "16 enqueues into a full buffer took {:?}",
        start.elapsed()
    );
    // Three senders wait for memory behind a lingering batch; a flush behind them.
    let start = Instant::now();
    let a = h.enqueue(Record::new("t", "a").with_partition(1)).await;
    let mut waiting = Vec::new();
    for p in 2..5 {
        let h = h.clone();
        waiting.push(tokio::spawn(async move {
            h.send(Record::new("t", "w").with_partition(p)).await
        }));
        tokio::task::yield_now().await;
    }
    h.flush().await;
    assert!(
        start.elapsed() < LINGER,
        "flush behind senders waiting for memory took {:?}",
        start.elapsed()
    );
    for w in waiting {
        w.await.unwrap().unwrap();
    }
    a.unwrap().await.unwrap();
    for f in futures {
        f.await.unwrap();
    }
    let start = Instant::now();
    for p in 5..8 {
        let h = h.clone();
        tokio::spawn(async move { h.send(Record::new("t", "w").with_partition(p)).await });
        tokio::task::yield_now().await;
    }
    h.close().await;
    assert!(
        start.elapsed() < LINGER,
        "close behind senders waiting for memory took {:?}",
        start.elapsed()
    );
    let logged: usize = (0..8).map(|p| broker.log("t", p).len()).sum();
    assert_eq!(logged, 1 + 16 + 1 + 3 + 3, "every record once");
}

#[tokio::test(start_paused = true)]
async fn close_delivers_everything_buffered() {
    let broker = FakeBroker::new("t", 1);
    let cfg = config(&[("linger.ms", "60000"), ("delivery.timeout.ms", "120000")]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    let mut futures = Vec::new();
    for i in 0..20 {
        futures.push(h.enqueue(Record::new("t", i.to_string())).await.unwrap());
    }
    h.close().await;
    assert_eq!(broker.log("t", 0).len(), 20);
    for f in futures {
        f.await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn dropping_every_handle_still_delivers() {
    let broker = FakeBroker::new("t", 1);
    let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
    let mut futures = Vec::new();
    for i in 0..20 {
        futures.push(h.enqueue(Record::new("t", i.to_string())).await.unwrap());
    }
    drop(h);
    for f in futures {
        f.await.unwrap();
    }
    assert_eq!(broker.log("t", 0).len(), 20);
}

#[tokio::test(start_paused = true)]
async fn timestamps_and_refusals() {
    let broker = FakeBroker::new("t", 1);
    let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
    let d = h
        .send(Record::new("t", "a").with_timestamp(1234))
        .await
        .unwrap();
    assert_eq!((d.timestamp, d.partition, d.offset), (1234, 0, Some(0)));
    assert_eq!(&*d.topic, "t");
    let d = h.send(Record::new("t", "b")).await.unwrap();
    assert!(
        d.timestamp > 1_600_000_000_000,
        "wall clock: {}",
        d.timestamp
    );
    let err = h.send(Record::new("bad topic!", "c")).await.unwrap_err();
    assert!(
        matches!(err.kind, ErrorKind::Refused(ref e) if matches!(**e, SendError::InvalidTopic(_))),
        "{err}"
    );
    let big = Record::new("t", vec![0u8; 2 << 20]);
    let err = h.send(big).await.unwrap_err();
    assert!(
        matches!(err.kind, ErrorKind::Refused(ref e) if matches!(**e, SendError::TooLarge { .. })),
        "{err}"
    );
    h.close().await;
}

/// The outcome of every record, without panicking on a failure to enqueue.
async fn enqueue_all(
    h: &ProducerHandle,
    topic: &str,
    n: usize,
) -> Vec<Result<Delivery, DeliveryError>> {
    let mut futures = Vec::with_capacity(n);
    for i in 0..n {
        futures.push(h.enqueue(Record::new(topic, i.to_string())).await);
    }
    let mut out = Vec::with_capacity(n);
    for f in futures {
        out.push(match f {
            Ok(f) => f.await,
            Err(e) => Err(e),
        });
    }
    out
}

#[tokio::test(start_paused = true)]
async fn a_fatal_connect_error_fails_every_record_at_once_and_is_not_retried() {
    let broker = FakeBroker::new("t", 1);
    broker.script.lock().unwrap().fatal_connects = true;
    let cfg = config(&[("delivery.timeout.ms", "120000")]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    let start = Instant::now();
    let outcomes = enqueue_all(&h, "t", 50).await;
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "failed at once, not at the delivery timeout: {:?}",
        start.elapsed()
    );
    let first = outcomes[0].clone().unwrap_err();
    let ErrorKind::Connection(conn) = &first.kind else {
        panic!("{first:?}")
    };
    assert_eq!(&*conn.addr, "b1:9092");
    assert!(conn.reason.contains("not trusted"), "{first}");
    assert!(
        first.to_string().contains("retrying cannot fix this"),
        "{first}"
    );
    for (i, o) in outcomes.iter().enumerate() {
        let e = o.as_ref().unwrap_err();
        assert_eq!((&e.kind, e.persisted), (&first.kind, first.persisted));
        // Handed back as sent (with the timestamp `enqueue` gave it).
        let r = e.record().expect("the record is handed back");
        assert_eq!(r.value.as_deref(), Some(i.to_string().as_bytes()));
        assert_eq!((&*r.topic, r.key.as_ref()), ("t", None));
        assert!(r.timestamp > 0);
    }
    assert_eq!(
        first.persisted,
        Persistence::NotPersisted,
        "nothing was sent"
    );
    assert_eq!(broker.script.lock().unwrap().connects, 1, "not retried");
    let later = h.send(Record::new("t", "later")).await.unwrap_err();
    assert_eq!(
        (&later.kind, later.persisted),
        (&first.kind, first.persisted),
        "later records fail with the same error"
    );
    assert_eq!(
        later.into_record().and_then(|r| r.value),
        Some(Bytes::from("later"))
    );
    h.flush().await;
    h.close().await;
    assert_eq!(broker.log("t", 0).len(), 0);
}

/// Review finding (2026-12-05): a certificate rejected after the producer had reached the
/// cluster (one broker restarted with a certificate from another CA, a leader moved to a
/// host its certificate does not name) failed the whole producer for good: every pending
/// record, those in flight to healthy brokers included, and every later one. It is that
/// connection's failure now, as a refused SASL handshake is (and as in the Java client):
/// the broker is tried again after the reconnect backoff, and once its certificate is
/// accepted the records are delivered, each once.
#[tokio::test(start_paused = true)]
async fn a_certificate_rejected_after_the_cluster_was_reached_fails_only_that_connection() {
    let broker = FakeBroker::new("t", 1);
    {
        let mut s = broker.script.lock().unwrap();
        s.produce = VecDeque::from([Action::AppendThenDrop]);
        s.refuse_after_drop = 3;
    }
    let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
    let outcomes = enqueue_all(&h, "t", 200).await;
    check_truthful(&broker, "t", &outcomes);
    for (i, o) in outcomes.iter().enumerate() {
        assert!(o.is_ok(), "record {i}: {o:?}");
    }
    assert_eq!(broker.log("t", 0).len(), 200, "each record once");
    let (refused, connects) = {
        let s = broker.script.lock().unwrap();
        (s.refused_connects, s.connects)
    };
    assert_eq!(refused, 0, "the three refused connects were made");
    assert!(connects >= 5, "reconnected past the refusals: {connects}");
    assert!(h.fatal().is_none(), "{:?}", h.fatal());
    h.close().await;
}

/// The handle's API around cancellation, deadlines and fatal errors (issues 13 and 14).
mod handle_api {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use kprod_tokio::{ErrorCode, FailureReason, Fatal, FatalError, Timeout};

    use super::*;

    /// Every record of `topic` partition 0, as a count per value.
    fn counts(broker: &FakeBroker, topic: &str) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for v in broker.log(topic, 0) {
            *counts.entry(v).or_insert(0) += 1;
        }
        counts
    }

    /// `partition_count` (Java's `partitionsFor`): known topics at once; a topic that does
    /// not exist yet is asked about again until it appears; one that never does times out at
    /// `max.block.ms` saying so; an invalid name, a closed or an aborted producer are errors.
    #[tokio::test(start_paused = true)]
    async fn partition_count_waits_for_the_topic_up_to_max_block() {
        use kprod_tokio::PartitionCountError;
        let broker = FakeBroker::new("t", 3);
        let cfg = config(&[("max.block.ms", "2000"), ("retry.backoff.ms", "100")]);
        let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
        assert_eq!(h.partition_count("t").await, Ok(3));
        // Created 500 ms after the call: counted within a backoff of it.
        let start = Instant::now();
        let ask = tokio::spawn({
            let h = h.clone();
            async move { h.partition_count("later").await }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        broker.cluster.lock().unwrap().create_topic("later", 4, 1);
        assert_eq!(ask.await.unwrap(), Ok(4));
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(500) && took <= Duration::from_millis(700),
            "{took:?}"
        );
        // Never created.
        let start = Instant::now();
        let e = h.partition_count("never").await.unwrap_err();
        assert_eq!(
            e,
            PartitionCountError::Timeout {
                topic: "never".into(),
                after: Duration::from_secs(2),
                last_error: Some(ErrorCode::UnknownTopicOrPartition),
            }
        );
        assert!(e.to_string().contains("not present in metadata"), "{e}");
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        assert_eq!(
            h.partition_count("bad topic!").await,
            Err(PartitionCountError::InvalidTopic("bad topic!".into()))
        );
        // Records still go to a topic first asked about.
        let d = h
            .send(Record::new("later", "v").with_partition(3))
            .await
            .unwrap();
        assert_eq!((d.partition, d.offset), (3, Some(0)));
        h.close().await;
        assert_eq!(
            h.partition_count("other").await,
            Err(PartitionCountError::Closed)
        );
        assert_eq!(
            h.partition_count("t").await,
            Err(PartitionCountError::Closed)
        );
        // An aborted producer: its fatal error.
        let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
        h.abort().await;
        assert!(
            matches!(
                h.partition_count("t").await,
                Err(PartitionCountError::Fatal(_))
            ),
            "aborted"
        );
    }

    /// `abort` (Java's `close(Duration.ZERO)`): a batch written but never answered fails
    /// possibly persisted, the records queued behind it not persisted, a record waiting for
    /// memory is refused, each with its record; all at once, and later records are refused.
    #[tokio::test(start_paused = true)]
    async fn abort_fails_every_pending_record_at_once_and_truthfully() {
        let broker = FakeBroker::new("t", 1);
        broker.script.lock().unwrap().produce = VecDeque::from([Action::Stall]);
        let cfg = config(&[
            ("max.in.flight.requests.per.connection", "1"),
            ("buffer.memory", "8192"),
            ("max.request.size", "1024"),
            ("batch.size", "512"),
        ]);
        let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
        let first = h.enqueue(Record::new("t", "written")).await.unwrap();
        let flushed = h.flush_timeout(Duration::from_secs(1)).await;
        assert!(flushed.is_err(), "never answered");
        assert_eq!(broker.log("t", 0), ["written"], "appended");
        // Records behind it until one waits for memory.
        let value = "x".repeat(100);
        let mut queued = Vec::new();
        let waiting = loop {
            let r = Record::new("t", format!("{}-{value}", queued.len()));
            let h2 = h.clone();
            let mut enqueue = Box::pin(async move { h2.enqueue(r).await });
            // Virtual time: the stalled batch holds its memory for good.
            match tokio::time::timeout(Duration::from_millis(100), &mut enqueue).await {
                Ok(f) => queued.push(f.unwrap()),
                Err(_) => break tokio::spawn(enqueue),
            }
            assert!(queued.len() < 100, "the buffer never filled");
        };
        assert!(queued.len() >= 2, "{} queued", queued.len());
        let start = Instant::now();
        h.abort().await;
        assert_eq!(start.elapsed(), Duration::ZERO, "at once");
        let aborted = FatalError::Aborted {
            reason: kprod_tokio::ABORTED.to_owned(),
        };
        assert_eq!(h.fatal(), Some(Fatal::Producer(aborted.clone())));
        let is_aborted = |e: &DeliveryError| matches!(&e.kind, ErrorKind::Failed(FailureReason::Fatal(f)) if *f == aborted);
        let e = first.await.unwrap_err();
        assert!(is_aborted(&e), "{e}");
        assert_eq!(e.persisted, Persistence::PossiblyPersisted);
        assert_eq!(e.record().unwrap().value.as_deref(), Some(&b"written"[..]));
        // The message names where the record was going, as Kafka names a partition.
        assert!(
            e.to_string()
                .starts_with("delivery failed (PossiblyPersisted) to t-0: "),
            "{e}"
        );
        for (i, f) in queued.into_iter().enumerate() {
            let e = f.await.unwrap_err();
            assert!(is_aborted(&e), "{i}: {e}");
            assert_eq!(e.persisted, Persistence::NotPersisted, "{i}");
            assert!(e.record().is_some(), "{i}: handed back");
        }
        let e = waiting.await.unwrap().unwrap_err();
        assert!(is_aborted(&e), "the record waiting for memory: {e}");
        assert_eq!(e.persisted, Persistence::NotPersisted);
        assert!(e.record().is_some());
        let e = h.send(Record::new("t", "late")).await.unwrap_err();
        assert!(is_aborted(&e), "{e}");
        assert_eq!(e.persisted, Persistence::NotPersisted);
        assert_eq!(broker.log("t", 0), ["written"]);
        h.close().await;
        h.abort().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_delivery_future_or_send_still_delivers_the_record_once() {
        let broker = FakeBroker::new("t", 1);
        // Produce answers take 50 ms: a send given 1 ms is dropped after its record was
        // accepted and before it was acknowledged.
        broker.script.lock().unwrap().latency = Duration::from_millis(50);
        let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
        let kept = h.enqueue(Record::new("t", "kept")).await.unwrap();
        let dropped = h.enqueue(Record::new("t", "dropped future")).await.unwrap();
        drop(dropped);
        let cut = tokio::time::timeout(
            Duration::from_millis(1),
            h.send(Record::new("t", "dropped send")),
        )
        .await;
        assert!(cut.is_err(), "the send was cut short: {cut:?}");
        let last = h.enqueue(Record::new("t", "last")).await.unwrap();
        h.flush().await;
        assert_eq!(
            broker.log("t", 0),
            ["kept", "dropped future", "dropped send", "last"],
            "every record exactly once, in order, once flush returned"
        );
        assert_eq!(kept.await.unwrap().offset, Some(0));
        assert_eq!(last.await.unwrap().offset, Some(3));
        h.close().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_send_dropped_before_acceptance_is_never_sent() {
        let broker = FakeBroker::new("t", 1);
        // Room for one of these records at a time: the second waits for the first.
        let cfg = config(&[("buffer.memory", "1024"), ("max.request.size", "1024")]);
        let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
        h.send(Record::new("t", big("first"))).await.unwrap();
        // Accepted at once (there is room): it holds the buffer until acknowledged.
        let held = h.enqueue(Record::new("t", big("held"))).await.unwrap();
        {
            // The buffer is full: one poll queues the record for the driver task, where it
            // waits for memory; then the future is dropped.
            let mut send = pin!(h.send(Record::new("t", big("cancelled"))));
            let mut cx = Context::from_waker(Waker::noop());
            assert!(send.as_mut().poll(&mut cx).is_pending());
        }
        let d = h.send(Record::new("t", big("after"))).await.unwrap();
        assert_eq!(held.await.unwrap().offset, Some(1));
        h.flush().await;
        assert_eq!(d.offset, Some(2));
        assert_eq!(
            broker.log("t", 0),
            [big("first"), big("held"), big("after")]
        );
        assert!(!counts(&broker, "t").contains_key(&big("cancelled")));
        h.close().await;
    }

    /// From a review of API misuse: a send that waits for memory and whose caller gives up
    /// (its future dropped) holds nothing back: a later record that fits is accepted at
    /// once. Before, the abandoned send stayed at the front of the queue of sends waiting
    /// for memory, and every later send (even one that fit) waited behind it until memory
    /// was freed or the abandoned one's `max.block.ms` passed.
    #[tokio::test(start_paused = true)]
    async fn an_abandoned_send_does_not_hold_back_a_later_one_that_fits() {
        let (broker, h, held) = room_for_a_small_record().await;
        // A record too large for the room left waits for memory; its caller gives up.
        let gave_up = tokio::time::timeout(
            Duration::from_millis(100),
            h.send(Record::new("t", "c".repeat(3500))),
        )
        .await;
        assert!(gave_up.is_err(), "{gave_up:?}");
        let start = Instant::now();
        let small = h.enqueue(Record::new("t", "small")).await.unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO, "accepted at once");
        assert_eq!(held.await.unwrap().offset, Some(0));
        assert_eq!(small.await.unwrap().offset, Some(1));
        assert!(!counts(&broker, "t").contains_key(&"c".repeat(3500)));
        h.close().await;
    }

    /// A send waiting behind a first one whose caller gives up is served at once, with no
    /// other event to wake the producer's task (a review finding: it slept with room free
    /// until the first one's `max.block.ms`, then was refused `QueueFull` with it).
    #[tokio::test(start_paused = true)]
    async fn a_waiter_behind_a_send_given_up_is_served_at_once() {
        let (_broker, h, held) = room_for_a_small_record().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let cx = &mut Context::from_waker(Waker::noop());
        // Too large for the room left: waits. The small one waits behind it.
        let mut large = Box::pin(h.send(Record::new("t", "c".repeat(3500))));
        let mut small = Box::pin(h.enqueue(Record::new("t", "small")));
        assert!(large.as_mut().poll(cx).is_pending());
        assert!(small.as_mut().poll(cx).is_pending());
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(
            small.as_mut().poll(cx).is_pending(),
            "waits behind the large one"
        );
        drop(large);
        let start = Instant::now();
        let small = small.await.unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO, "accepted at once");
        assert_eq!(held.await.unwrap().offset, Some(0));
        assert_eq!(small.await.unwrap().offset, Some(1));
        h.close().await;
    }

    /// An `enqueue` that is not ready has accepted nothing (a review finding): it spent the
    /// task's cooperative budget after taking the record, so past the budget every enqueue
    /// in one poll of a task accepted its record and returned `Pending`, and `now_or_never`
    /// lost the outcome of a record that was then delivered.
    #[tokio::test(start_paused = true)]
    async fn an_enqueue_that_is_not_ready_has_accepted_nothing() {
        let broker = FakeBroker::new("t", 1);
        let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
        let cx = &mut Context::from_waker(Waker::noop());
        let mut ready = Vec::new();
        let mut not_ready = Vec::new();
        for i in 0..300 {
            let value = format!("r{i}");
            let mut f = std::pin::pin!(h.enqueue(Record::new("t", value.clone())));
            match f.as_mut().poll(cx) {
                Poll::Ready(r) => ready.push((value, r.unwrap())),
                Poll::Pending => not_ready.push(value),
            }
        }
        assert!(!not_ready.is_empty(), "the task's budget ran out");
        h.flush().await;
        let counts = counts(&broker, "t");
        for (value, delivery) in ready {
            assert!(delivery.await.is_ok());
            assert_eq!(counts.get(&value), Some(&1), "{value}");
        }
        for value in not_ready {
            assert!(!counts.contains_key(&value), "{value} was sent");
        }
        h.close().await;
    }

    /// A producer with a 4 KiB `buffer.memory`, 1 KiB batches and `max.block.ms` of 2 s, a
    /// batch of a [`big`] record ("held") accepted at once and acknowledged 10 s later: room
    /// for a small record, not for one of 3,500 bytes.
    async fn room_for_a_small_record() -> (FakeBroker, ProducerHandle, DeliveryFuture) {
        let broker = FakeBroker::new("t", 1);
        broker.script.lock().unwrap().latency = Duration::from_secs(10);
        let cfg = config(&[
            ("buffer.memory", "4096"),
            ("batch.size", "1024"),
            ("max.request.size", "4096"),
            ("max.block.ms", "2000"),
        ]);
        let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
        let held = h.enqueue(Record::new("t", big("held"))).await.unwrap();
        (broker, h, held)
    }

    /// A 600-byte value named `name`: one fills a 1 KiB `buffer.memory`.
    fn big(name: &str) -> String {
        format!("{name}-{}", "x".repeat(600))
    }

    /// A producer with a 1 KiB `buffer.memory` and `max.block.ms` of 2 s, its buffer held by
    /// a [`big`] record ("held") accepted at once, which the broker acknowledges 10 s later.
    async fn buffer_held_for_10_s() -> (FakeBroker, ProducerHandle, DeliveryFuture) {
        let broker = FakeBroker::new("t", 1);
        broker.script.lock().unwrap().latency = Duration::from_secs(10);
        let cfg = config(&[
            ("buffer.memory", "1024"),
            ("max.request.size", "1024"),
            ("max.block.ms", "2000"),
        ]);
        let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
        let held = h.enqueue(Record::new("t", big("held"))).await.unwrap();
        (broker, h, held)
    }

    /// A record refused whatever the room (too large, a bad topic name, a partition beyond
    /// the count) is refused at once while other sends wait for `buffer.memory`, with its own
    /// error. Before, it went behind them and, the memory staying full, was refused
    /// `QueueFull` at `max.block.ms` (a review finding).
    #[tokio::test(start_paused = true)]
    async fn a_bad_record_is_refused_at_once_while_sends_wait_for_memory() {
        let (_broker, h, held) = buffer_held_for_10_s().await;
        assert_eq!(h.partition_count("t").await.unwrap(), 1);
        // One send waits for memory (polled once, so that it is queued for the driver).
        let mut waiting = Box::pin(h.send(Record::new("t", big("waiting"))));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        let start = Instant::now();
        let too_large = h
            .send(Record::new("t", "y".repeat(2000)))
            .await
            .unwrap_err();
        let bad_topic = h.send(Record::new("bad topic!", "v")).await.unwrap_err();
        let beyond = (h.send(Record::new("t", "v").with_partition(7)).await).unwrap_err();
        assert_eq!(start.elapsed(), Duration::ZERO, "refused at once");
        let refusal = |e: &DeliveryError| match &e.kind {
            ErrorKind::Refused(r) => format!("{r:?}"),
            other => panic!("not refused: {other:?}"),
        };
        assert!(refusal(&too_large).starts_with("TooLarge"), "{too_large}");
        assert!(
            refusal(&bad_topic).starts_with("InvalidTopic"),
            "{bad_topic}"
        );
        assert!(refusal(&beyond).starts_with("InvalidPartition"), "{beyond}");
        assert_eq!(
            too_large.record().unwrap().value.as_deref(),
            Some("y".repeat(2000).as_bytes())
        );
        // The waiting send is still refused `QueueFull` at its own `max.block.ms`.
        let e = waiting.await.unwrap_err();
        assert!(refusal(&e).starts_with("QueueFull"), "{e}");
        assert_eq!(held.await.unwrap().offset, Some(0));
        h.close().await;
    }

    /// Review leftover (a sixth session of 2026-12-07): a record enqueued while a `close()`
    /// waited behind sends queued for memory went behind them and was accepted (and
    /// delivered, the close waiting for it). It is refused `Closed` at once now, as after a
    /// close that found no send waiting; the send that was already waiting keeps its place.
    #[tokio::test(start_paused = true)]
    async fn a_record_enqueued_while_a_close_waits_behind_sends_is_refused() {
        let (_broker, h, held) = buffer_held_for_10_s().await;
        assert_eq!(h.partition_count("t").await.unwrap(), 1);
        let mut cx = Context::from_waker(Waker::noop());
        let mut waiting = Box::pin(h.send(Record::new("t", big("waiting"))));
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        let mut close = Box::pin(h.close());
        assert!(close.as_mut().poll(&mut cx).is_pending());
        let start = Instant::now();
        let late = h.send(Record::new("t", "late")).await.unwrap_err();
        let many = h
            .enqueue_many([Record::new("t", "m1"), Record::new("t", "m2")])
            .await;
        assert_eq!(start.elapsed(), Duration::ZERO, "refused at once");
        let closed = |e: &DeliveryError| matches!(&e.kind, ErrorKind::Refused(r) if matches!(**r, SendError::Closed(_)));
        assert!(closed(&late), "{late}");
        assert_eq!(late.record().unwrap().value.as_deref(), Some(&b"late"[..]));
        assert_eq!(many.len(), 2);
        assert!(many.iter().all(|r| r.as_ref().is_err_and(closed)));
        // The send that waited before the close is still answered (refused `QueueFull` at
        // its `max.block.ms`, the memory held 10 s), and the close waits for the held record.
        let e = waiting.await.unwrap_err();
        assert!(matches!(&e.kind, ErrorKind::Refused(r) if matches!(**r, SendError::QueueFull(_))));
        close.await;
        assert_eq!(held.await.unwrap().offset, Some(0));
    }

    /// A send waiting for `buffer.memory` waits at most `max.block.ms` from the call, as the
    /// Java client's `send` blocks: then it is refused `QueueFull`, not persisted, with its
    /// record handed back (each record of an `enqueue_many` too), and the producer goes on.
    /// Before, it waited until records resolved, up to `delivery.timeout.ms` (2 minutes by
    /// default) behind a broker that does not answer.
    #[tokio::test(start_paused = true)]
    async fn a_send_waits_for_memory_at_most_max_block_ms() {
        let (broker, h, held) = buffer_held_for_10_s().await;
        let start = Instant::now();
        let e = h.send(Record::new("t", big("blocked"))).await.unwrap_err();
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(2),
            "refused after max.block.ms"
        );
        assert!(
            matches!(&e.kind, ErrorKind::Refused(r) if matches!(**r, SendError::QueueFull(_))),
            "{e}"
        );
        assert_eq!(e.persisted, Persistence::NotPersisted);
        assert_eq!(
            e.record().unwrap().value.as_deref(),
            Some(big("blocked").as_bytes())
        );
        let many = h
            .enqueue_many([Record::new("t", big("m1")), Record::new("t", big("m2"))])
            .await;
        assert_eq!(start.elapsed(), Duration::from_secs(4));
        for (r, name) in many.into_iter().zip(["m1", "m2"]) {
            let e = r.unwrap_err();
            assert_eq!(e.persisted, Persistence::NotPersisted);
            assert_eq!(
                e.record().unwrap().value.as_deref(),
                Some(big(name).as_bytes())
            );
        }
        assert_eq!(held.await.unwrap().offset, Some(0));
        // Room again: the next record is accepted and delivered.
        let after = h.send(Record::new("t", big("after"))).await.unwrap();
        assert_eq!(after.offset, Some(1));
        assert_eq!(broker.log("t", 0), [big("held"), big("after")]);
        h.close().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_record_that_fits_waits_behind_a_record_waiting_for_memory() {
        let broker = FakeBroker::new("t", 1);
        let cfg = config(&[("buffer.memory", "1024"), ("max.request.size", "1024")]);
        let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
        let held = h.enqueue(Record::new("t", big("held"))).await.unwrap();
        let mut cx = Context::from_waker(Waker::noop());
        // Too big for what is left: it waits for `held` to be acknowledged.
        let mut waiting = pin!(h.enqueue(Record::new("t", big("waiting"))));
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        // Small enough for what is left, but it must not overtake the waiting record.
        let mut small = pin!(h.enqueue(Record::new("t", "small")));
        assert!(small.as_mut().poll(&mut cx).is_pending());
        let small = small.await.unwrap();
        let waiting = waiting.await.unwrap();
        assert_eq!(held.await.unwrap().offset, Some(0));
        assert_eq!(waiting.await.unwrap().offset, Some(1));
        assert_eq!(small.await.unwrap().offset, Some(2));
        assert_eq!(
            broker.log("t", 0),
            [big("held"), big("waiting"), "small".to_owned()]
        );
        h.close().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_loop_of_enqueues_yields_to_other_tasks() {
        // One thread: another task runs only if the enqueues yield now and then, although
        // each record is accepted at once.
        let broker = FakeBroker::new("t", 1);
        let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
        let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = ran.clone();
        tokio::spawn(async move { flag.store(true, std::sync::atomic::Ordering::SeqCst) });
        let mut futures = Vec::new();
        let mut seen_at = None;
        for i in 0..1_000 {
            futures.push(h.enqueue(Record::new("t", i.to_string())).await.unwrap());
            if ran.load(std::sync::atomic::Ordering::SeqCst) {
                seen_at = Some(i);
                break;
            }
        }
        assert!(
            seen_at.is_some(),
            "the other task never ran during 1,000 enqueues"
        );
        for f in futures {
            f.await.unwrap();
        }
        h.close().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_send_dropped_after_its_first_poll_with_room_is_delivered() {
        let broker = FakeBroker::new("t", 1);
        let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
        h.send(Record::new("t", "first")).await.unwrap();
        {
            // With room in the buffer the record is accepted at the first poll, on this
            // task: dropping the send afterwards only leaves its outcome unobserved.
            let mut send = pin!(h.send(Record::new("t", "dropped")));
            let mut cx = Context::from_waker(Waker::noop());
            assert!(send.as_mut().poll(&mut cx).is_pending());
        }
        let d = h.send(Record::new("t", "after")).await.unwrap();
        h.flush().await;
        assert_eq!(d.offset, Some(2));
        assert_eq!(broker.log("t", 0), ["first", "dropped", "after"]);
        h.close().await;
    }

    #[tokio::test(start_paused = true)]
    async fn flush_and_close_take_a_deadline_and_cancel_nothing() {
        let broker = FakeBroker::new("t", 1);
        broker.script.lock().unwrap().produce =
            VecDeque::from([Action::Delay(Duration::from_secs(5))]);
        let cfg = config(&[
            ("request.timeout.ms", "30000"),
            ("delivery.timeout.ms", "60000"),
        ]);
        let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
        let slow = h.enqueue(Record::new("t", "slow")).await.unwrap();
        let start = Instant::now();
        let e = h.flush_timeout(Duration::from_secs(1)).await.unwrap_err();
        assert_eq!(
            e,
            Timeout {
                operation: "flush",
                after: Duration::from_secs(1)
            }
        );
        assert!(
            e.to_string().contains("flush did not finish within 1s"),
            "{e}"
        );
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        let e = h.close_timeout(Duration::from_secs(1)).await.unwrap_err();
        assert_eq!(e.operation, "close");
        // Nothing was cancelled: the record is acknowledged once the broker answers, and the
        // producer is closed to new records.
        assert_eq!(slow.await.unwrap().offset, Some(0));
        assert!(start.elapsed() >= Duration::from_secs(5));
        let late = h.send(Record::new("t", "late")).await.unwrap_err();
        assert!(matches!(late.kind, ErrorKind::Refused(_)), "{late}");
        h.close_timeout(Duration::from_secs(1)).await.unwrap();
        h.flush_timeout(Duration::from_secs(1)).await.unwrap();
        assert_eq!(broker.log("t", 0), ["slow"]);
    }

    /// CLUSTER_AUTHORIZATION_FAILED on InitProducerId (ACLs not granted yet) fails the
    /// waiting records, not persisted and handed back, without stopping the producer: once
    /// the broker gives a producer id, records are delivered.
    #[tokio::test(start_paused = true)]
    async fn a_producer_id_refused_for_authorization_is_asked_again() {
        let broker = FakeBroker::new("t", 1);
        broker
            .cluster
            .lock()
            .unwrap()
            .init_producer_id_errors
            .extend([ErrorCode::ClusterAuthorizationFailed; 3]);
        let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
        let refused = |i: usize, e: &DeliveryError| {
            assert_eq!(
                e.kind,
                ErrorKind::Failed(FailureReason::Broker(ErrorCode::ClusterAuthorizationFailed)),
                "record {i}: {e}"
            );
            assert_eq!(e.persisted, Persistence::NotPersisted, "record {i}");
            let r = e.record().expect("handed back");
            assert_eq!(r.value.as_deref(), Some(i.to_string().as_bytes()));
        };
        let outcomes = enqueue_all(&h, "t", 20).await;
        let e = outcomes[0]
            .as_ref()
            .expect_err("refused at the first answer");
        refused(0, e);
        // Records sent one at a time until the refusals are spent: each fails with the
        // refusal or is delivered, and the producer is never stopped.
        let mut failed = 0;
        let mut i = 20;
        let delivered = loop {
            assert!(i < 40, "nothing delivered after the refusals");
            match h.send(Record::new("t", i.to_string())).await {
                Ok(d) => break (i, d),
                Err(e) => refused(i, &e),
            }
            failed += 1;
            i += 1;
        };
        assert_eq!(h.fatal(), None);
        assert!(failed <= 3, "{failed} refused one at a time");
        assert_eq!(delivered.1.offset, Some(0));
        assert_eq!(broker.log("t", 0), [delivered.0.to_string()]);
        let spent = broker
            .cluster
            .lock()
            .unwrap()
            .init_producer_id_errors
            .is_empty();
        assert!(spent, "every refusal given");
        h.close_timeout(Duration::from_secs(1)).await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_fatal_core_error_is_returned_by_every_later_call_and_by_fatal() {
        let broker = FakeBroker::new("t", 1);
        broker
            .cluster
            .lock()
            .unwrap()
            .init_producer_id_errors
            .push_back(ErrorCode::UnsupportedVersion);
        let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
        assert_eq!(h.fatal(), None);
        let outcomes = enqueue_all(&h, "t", 20).await;
        let expected = Fatal::Producer(FatalError::Broker(ErrorCode::UnsupportedVersion));
        assert_eq!(h.fatal(), Some(expected.clone()));
        assert_eq!(
            expected.to_string(),
            "the producer failed: broker error UNSUPPORTED_VERSION (35)"
        );
        for (i, o) in outcomes.iter().enumerate() {
            let e = o.as_ref().unwrap_err();
            assert!(
                matches!(
                    e.kind,
                    ErrorKind::Failed(FailureReason::Fatal(FatalError::Broker(
                        ErrorCode::UnsupportedVersion
                    )))
                ),
                "record {i}: {e}"
            );
            assert_eq!(e.persisted, Persistence::NotPersisted, "record {i}");
        }
        // A later record is refused with the same cause, not a bare "closed".
        let later = h.send(Record::new("t", "later")).await.unwrap_err();
        let first = outcomes[0].clone().unwrap_err();
        assert_eq!(
            (&later.kind, later.persisted),
            (&first.kind, first.persisted)
        );
        for (i, o) in outcomes.iter().enumerate() {
            let r = o.as_ref().unwrap_err().record().expect("handed back");
            assert_eq!(r.value.as_deref(), Some(i.to_string().as_bytes()));
        }
        assert_eq!(
            later.record().unwrap().value.as_deref(),
            Some(&b"later"[..])
        );
        h.flush_timeout(Duration::from_secs(1)).await.unwrap();
        h.close_timeout(Duration::from_secs(1)).await.unwrap();
        assert_eq!(h.fatal(), Some(expected), "still there after close");
        // Once the driver has stopped, too.
        let after_close = h.send(Record::new("t", "after close")).await.unwrap_err();
        assert_eq!(
            (&after_close.kind, after_close.persisted),
            (&later.kind, later.persisted)
        );
        assert_eq!(
            after_close.into_record().unwrap().value.as_deref(),
            Some(&b"after close"[..])
        );
        assert!(broker.log("t", 0).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_fatal_connection_error_is_visible_through_fatal() {
        let broker = FakeBroker::new("t", 1);
        broker.script.lock().unwrap().fatal_connects = true;
        let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
        let e = h.send(Record::new("t", "x")).await.unwrap_err();
        let Some(Fatal::Connection(c)) = h.fatal() else {
            panic!("{:?}", h.fatal())
        };
        assert_eq!(e.kind, ErrorKind::Connection(c.clone()));
        assert!(h.fatal().unwrap().to_string().contains("not trusted"));
        h.close().await;
    }
}

/// Metrics (`ProducerHandle::metrics`) and per-batch tracing (`kprod_tokio::batch`).
mod observability {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn metrics_count_what_happened_and_survive_the_driver() {
        let broker = FakeBroker::new("t", 1);
        broker.script.lock().unwrap().produce = VecDeque::from([Action::AppendThenDrop]);
        let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
        let before = h.metrics().await;
        assert_eq!((before.records_accepted, before.batches_sent), (0, 0));
        assert_eq!(before.buffer_memory, 32 * 1024 * 1024);
        let outcomes = produce_all(&h, "t", 300).await;
        all_delivered(&outcomes);
        let m = h.metrics().await;
        assert_eq!((m.records_accepted, m.records_delivered), (300, 300));
        assert_eq!(
            (
                m.records_failed_not_persisted,
                m.records_failed_possibly_persisted
            ),
            (0, 0)
        );
        assert!(m.retries >= 1, "the dropped request was retried: {m:?}");
        assert!(m.batches_sent > m.retries, "{m:?}");
        assert_eq!(m.producer_ids, 1);
        assert_eq!((m.buffered_records, m.buffered_bytes), (0, 0));
        assert_eq!(m.partitions.len(), 1);
        let p = &m.partitions[0];
        assert_eq!(p.last_acked_offset, Some(299));
        assert_eq!((p.queued_records, p.in_flight_batches), (0, 0));
        assert_eq!(p.next_sequence, 300);
        h.close().await;
        // Once the driver has stopped: its last snapshot.
        let after = h.metrics().await;
        assert_eq!(after.records_delivered, 300);
        assert_eq!(after.partitions[0].last_acked_offset, Some(299));
    }

    /// With `kprod_tokio::batch` enabled at debug, one batch can be followed by its id: sent
    /// (attempt 1), retried after the connection dropped, sent again (attempt 2),
    /// acknowledged at its offset. The subscriber is the global one (a thread-scoped one races
    /// with the other tests' threads over tracing's per-callsite interest cache), so the
    /// events are told apart by this test's own topic.
    #[tokio::test(start_paused = true)]
    async fn one_batch_can_be_followed_through_its_lifecycle() {
        let capture = capture::Capture::default();
        tracing::subscriber::set_global_default(capture.subscriber()).expect("the only global one");
        let broker = FakeBroker::new("traced", 1);
        broker.script.lock().unwrap().produce = VecDeque::from([Action::AppendThenDrop]);
        let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
        all_delivered(&produce_all(&h, "traced", 1).await);
        h.close().await;
        let events = capture.events();
        let batch: Vec<&String> = events
            .iter()
            .filter(|(_, t, f)| t == "kprod_tokio::batch" && f.contains("topic=traced "))
            .map(|(_, _, f)| f)
            .collect();
        let id = batch
            .first()
            .and_then(|f| f.split(' ').find(|kv| kv.starts_with("batch=")))
            .expect("a batch event")
            .to_owned();
        let lifecycle: Vec<&String> = batch
            .iter()
            .copied()
            .filter(|f| f.split(' ').any(|kv| kv == id))
            .collect();
        let has = |f: &String, parts: &[&str]| parts.iter().all(|p| f.contains(p));
        assert_eq!(lifecycle.len(), 4, "{batch:#?}");
        assert!(
            has(
                lifecycle[0],
                &[
                    "message=batch sent",
                    "topic=t",
                    "partition=0",
                    "base_sequence=0"
                ]
            ),
            "{lifecycle:#?}"
        );
        assert!(has(lifecycle[0], &["records=1", "attempt=1", "conn="]));
        assert!(has(lifecycle[1], &["message=batch retry", "error="]));
        assert!(has(lifecycle[2], &["message=batch sent", "attempt=2"]));
        assert!(has(
            lifecycle[3],
            &["message=batch acknowledged", "base_offset=0", "records=1"]
        ));
    }
}

/// `enqueue_many`: one hand-off for many records, through a buffer far smaller than them (the
/// rest wait in order), with a refused record in the middle answered in its place; every
/// accepted record is delivered once, in order.
#[tokio::test(start_paused = true)]
async fn enqueue_many_waits_for_memory_keeps_order_and_refuses_in_place() {
    let (broker, h) = small_buffer(1, "60000", &[]);
    let value = "x".repeat(100);
    let mut records: Vec<Record> = (0..500)
        .map(|i| Record::new("t", format!("{i}-{value}")).with_partition(0))
        .collect();
    records[250] = Record::new("bad topic!", "refused");
    let results = h.enqueue_many(records).await;
    assert_eq!(results.len(), 500);
    let mut offsets = Vec::new();
    for (i, r) in results.into_iter().enumerate() {
        if i == 250 {
            let Err(err) = r else {
                panic!("an invalid topic is refused")
            };
            assert!(
                matches!(err.kind, ErrorKind::Refused(ref e) if matches!(**e, SendError::InvalidTopic(_))),
                "{err}"
            );
            continue;
        }
        offsets.push(r.expect("accepted").await.unwrap().offset.unwrap());
    }
    assert_eq!(offsets, (0..499).collect::<Vec<i64>>());
    let expected: Vec<String> = (0..500)
        .filter(|i| *i != 250)
        .map(|i| format!("{i}-{value}"))
        .collect();
    assert_eq!(broker.log("t", 0), expected, "all records, once, in order");
    let sent = h
        .send_many([Record::new("t", "a"), Record::new("t", "b")])
        .await;
    assert_eq!(
        sent.iter()
            .map(|d| d.as_ref().unwrap().offset)
            .collect::<Vec<_>>(),
        vec![Some(499), Some(500)]
    );
    assert!(h.enqueue_many(Vec::new()).await.is_empty());
    h.close().await;
    let late = h.enqueue_many([Record::new("t", "late")]).await;
    let Some(Err(err)) = late.into_iter().next() else {
        panic!("refused once closed")
    };
    assert!(
        matches!(err.kind, ErrorKind::Refused(ref e) if matches!(**e, SendError::Closed(_))),
        "{err}"
    );
    assert_eq!(err.persisted, Persistence::NotPersisted);
}

/// `enqueue_many` takes a long list in pieces of 1,024 records and lets go of the lock between
/// them: another sender (here a task on the same current-thread runtime, which runs only when
/// the call yields) gets its record in after the first piece. Before, the whole list was
/// taken under one hold (200,000 records: tens of milliseconds in which no acknowledgement,
/// timer or other sender moved; a review finding).
#[tokio::test(start_paused = true)]
async fn enqueue_many_lets_go_of_the_lock_between_pieces() {
    let broker = FakeBroker::new("t", 1);
    let h =
        ProducerHandle::with_connector(config(&[("linger.ms", "100")]), broker.clone()).unwrap();
    let other = tokio::spawn({
        let h = h.clone();
        async move { h.send(Record::new("t", "other").with_partition(0)).await }
    });
    let records: Vec<Record> = (0..3000)
        .map(|i| Record::new("t", format!("{i}")).with_partition(0))
        .collect();
    let results = h.enqueue_many(records).await;
    let mut offsets = Vec::new();
    for r in results {
        offsets.push(r.expect("accepted").await.unwrap().offset.unwrap());
    }
    let other = other.await.unwrap().unwrap();
    assert_eq!(
        other.offset,
        Some(1024),
        "accepted between the first two pieces"
    );
    let expected: Vec<i64> = (0..1024).chain(1025..3001).collect();
    assert_eq!(offsets, expected, "the list's own order kept");
    h.close().await;
}

/// The producer's task takes an `enqueue_many` that waited for memory in pieces of 1,024
/// records too, letting go of the lock (and draining: with `linger.ms=0` the open batch goes)
/// between them. Before, once memory freed it took the whole list under one hold (the diff
/// review of 2026-12-06): here one batch of 3,000 records instead of three.
#[tokio::test(start_paused = true)]
async fn enqueue_many_waiting_for_memory_is_taken_in_pieces_too() {
    let broker = FakeBroker::new("t", 1);
    broker.script.lock().unwrap().latency = Duration::from_secs(1);
    let cfg = config(&[
        ("buffer.memory", "2097152"),
        ("max.request.size", "2097152"),
        ("batch.size", "1048576"),
        ("linger.ms", "0"),
    ]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    // Accepted at once (nothing else held): it holds the buffer until acknowledged, 1 s later.
    let held = h
        .enqueue(Record::new("t", "x".repeat(2_000_000)).with_partition(0))
        .await
        .unwrap();
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    // A send that must wait for room, then a list behind it.
    let mut waiting = Box::pin(h.send(Record::new("t", "w").with_partition(0)));
    assert!(std::future::Future::poll(waiting.as_mut(), &mut cx).is_pending());
    let records: Vec<Record> = (0..3000)
        .map(|i| Record::new("t", format!("{i}")).with_partition(0))
        .collect();
    let mut many = Box::pin(h.enqueue_many(records));
    assert!(std::future::Future::poll(many.as_mut(), &mut cx).is_pending());
    assert_eq!(held.await.unwrap().offset, Some(0));
    assert_eq!(waiting.await.unwrap().offset, Some(1));
    let mut offsets = Vec::new();
    for r in many.await {
        offsets.push(r.expect("accepted").await.unwrap().offset.unwrap());
    }
    assert_eq!(offsets, (2..3002).collect::<Vec<i64>>());
    // The held record's batch, the waiting send's (drained once it is taken), and one batch
    // per piece of the list (1,024, 1,024, 952).
    assert_eq!(h.metrics().await.batches_sent, 5);
    h.close().await;
}

/// Load probe: `enqueue_many` bounded the whole call by `max.block.ms` (measured from the
/// call), so a call of more records than `buffer.memory` holds had its tail refused
/// `QueueFull` while memory freed steadily: 16 callers of 3,125 records each, 4 MiB of
/// memory, `max.block.ms=500`: 82 % of the records refused, none with per-record
/// `enqueue`. Now the wait starts again whenever one of its records is taken, as for a
/// loop of `enqueue`; a call whose records stop being taken is still refused at
/// `max.block.ms`.
#[tokio::test(start_paused = true)]
async fn enqueue_many_waits_max_block_per_record_taken_not_for_the_whole_call() {
    let value = "x".repeat(100);
    let records =
        |n: usize| (0..n).map(|i| Record::new("t", format!("{i}-{value}")).with_partition(0));
    let (broker, h) = small_buffer(1, "200", &[]);
    let start = Instant::now();
    let results = h.enqueue_many(records(500)).await;
    let took = start.elapsed();
    assert!(
        took > Duration::from_millis(400),
        "the call outlasted max.block.ms (200 ms): {took:?}"
    );
    let mut offsets = Vec::new();
    for r in results {
        offsets.push(r.expect("accepted").await.unwrap().offset.unwrap());
    }
    assert_eq!(offsets, (0..500).collect::<Vec<i64>>());
    assert_eq!(broker.log("t", 0).len(), 500);
    h.close().await;

    // Nothing is taken any more (the first request is never answered): the rest are refused
    // max.block.ms after the call, their records handed back.
    let (_broker, h) = small_buffer(1, "200", &[Action::Stall]);
    let start = Instant::now();
    let results = h.enqueue_many(records(500)).await;
    let took = start.elapsed();
    assert!(
        (Duration::from_millis(200)..Duration::from_millis(300)).contains(&took),
        "refused at max.block.ms: {took:?}"
    );
    let refused: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        !refused.is_empty() && refused.len() < 500,
        "{} refused",
        refused.len()
    );
    for err in refused {
        assert!(
            matches!(err.kind, ErrorKind::Refused(ref e) if matches!(**e, SendError::QueueFull(_))),
            "{err}"
        );
        assert_eq!(err.persisted, Persistence::NotPersisted);
    }
    h.abort().await;

    // Two requests answered, then none: the records those freed were taken after the call,
    // and the rest are refused max.block.ms after the last of them, not after the call.
    let (_broker, h) = small_buffer(1, "200", &[Action::Answer, Action::Answer, Action::Stall]);
    let start = Instant::now();
    let results = h.enqueue_many(records(500)).await;
    let took = start.elapsed();
    assert!(
        (Duration::from_millis(205)..Duration::from_millis(300)).contains(&took),
        "refused max.block.ms after the last record taken: {took:?}"
    );
    let accepted = results.iter().take_while(|r| r.is_ok()).count();
    assert!(
        results[accepted..].iter().all(Result::is_err),
        "the records accepted are a prefix ({accepted})"
    );
    h.abort().await;
}

/// Review finding: a flush called while an `enqueue_many` waited for memory kept the call
/// at the front with its first wait, so 404 of 500 records were refused `QueueFull` at
/// `max.block.ms` though memory freed every 10 ms. The call now waits per record taken
/// there too, the flush still comes after it (and covers its records), and a send made
/// after the flush waits behind both, on its own `max.block.ms`.
#[tokio::test(start_paused = true)]
async fn enqueue_many_with_a_flush_behind_it_waits_per_record_taken() {
    let (broker, h) = small_buffer(1, "200", &[]);
    let value = "x".repeat(100);
    let records = (0..500).map(move |i| Record::new("t", format!("{i}-{value}")).with_partition(0));
    let call = {
        let h = h.clone();
        tokio::spawn(async move { h.enqueue_many(records).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let flush = {
        let h = h.clone();
        tokio::spawn(async move { h.flush().await })
    };
    // Behind the flush (the two tasks above handed their commands over first).
    tokio::time::sleep(Duration::from_millis(1)).await;
    let after = h.enqueue(Record::new("t", "after").with_partition(0)).await;
    flush.await.unwrap();
    assert_eq!(
        broker.log("t", 0).len(),
        500,
        "the flush covered the call's records"
    );
    let results = call.await.unwrap();
    assert!(results.iter().all(Result::is_ok), "none refused");
    // It waited behind the call's records longer than its own max.block.ms.
    let Err(err) = after else {
        panic!("a send behind the call and the flush waits at most max.block.ms")
    };
    assert!(
        matches!(err.kind, ErrorKind::Refused(ref e) if matches!(**e, SendError::QueueFull(_))),
        "{err}"
    );
    h.close().await;
    assert_eq!(broker.log("t", 0).len(), 500);
}

/// Load probe: while memory was full, the `enqueue_many` calls waiting were served one at a
/// time, each until its last record was taken: the memory freed went to one partition's
/// records, and each request carried about one batch (16 callers, one key each: a third
/// less throughput than the same records sent one by one). Now a call that had some records
/// taken goes behind the others waiting: the calls take turns and finish together.
#[tokio::test(start_paused = true)]
async fn enqueue_many_calls_waiting_for_memory_take_turns() {
    let (_broker, h) = small_buffer(2, "60000", &[]);
    let value = "x".repeat(100);
    let start = Instant::now();
    let call = |p: i32| {
        let h = h.clone();
        let value = value.clone();
        tokio::spawn(async move {
            let records =
                (0..300).map(move |i| Record::new("t", format!("{i}-{value}")).with_partition(p));
            let results = h.enqueue_many(records).await;
            let took = start.elapsed();
            let mut offsets = Vec::new();
            for r in results {
                offsets.push(r.expect("accepted").await.unwrap().offset.unwrap());
            }
            assert_eq!(offsets, (0..300).collect::<Vec<i64>>(), "in call order");
            took
        })
    };
    let (a, b) = (call(0), call(1));
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    let (first, last) = (a.min(b), a.max(b));
    assert!(
        first * 4 >= last * 3,
        "the calls took turns: one done after {first:?}, the other after {last:?}"
    );
    h.close().await;
}

/// An acks=0 producer (64 KiB `buffer.memory`, 16 KiB batches) whose broker stops reading
/// after the first Produce of its first connection (later connections are served).
fn acks_zero_first_connection_stalls(request_timeout_ms: &str) -> (FakeBroker, ProducerHandle) {
    let broker = FakeBroker::new("t", 1);
    broker.script.lock().unwrap().produce = VecDeque::from([Action::Stall]);
    let cfg = config(&[
        ("acks", "0"),
        ("retries", "0"),
        ("buffer.memory", "65536"),
        ("max.request.size", "65536"),
        ("batch.size", "16384"),
        ("request.timeout.ms", request_timeout_ms),
    ]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    (broker, h)
}

/// acks=0: a record leaves `buffer.memory` once its request is handed to the writer, so a
/// broker that stops reading must not let the writer's queue grow without bound: past
/// `buffer.memory` unwritten bytes the driver takes no new command and the sends wait.
#[tokio::test(start_paused = true)]
async fn acks_zero_sends_wait_while_the_writer_is_backed_up() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    const RECORDS: usize = 10_000;
    // Longer than the 30 s watched here: the stalled connection is not given up yet (see
    // `acks_zero_a_broker_that_stops_reading_loses_its_connection`).
    let (broker, h) = acks_zero_first_connection_stalls("60000");
    let accepted = Arc::new(AtomicUsize::new(0));
    let sender = {
        let (h, accepted) = (h.clone(), accepted.clone());
        tokio::spawn(async move {
            let value = "x".repeat(1_000);
            for _ in 0..RECORDS {
                let r = Record::new("t", value.clone()).with_partition(0);
                // The delivery future is dropped: the record is still sent (or reported).
                drop(h.enqueue(r).await.expect("accepted"));
                accepted.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    // Virtual time: 30 s pass only once every task waits.
    let finished = tokio::time::timeout(Duration::from_secs(30), sender).await;
    let n = accepted.load(Ordering::SeqCst);
    println!("acks=0, broker not reading: {n} of {RECORDS} records accepted");
    assert!(
        finished.is_err(),
        "all {RECORDS} records of 1 kB were accepted while the broker read nothing"
    );
    // What may be accepted: the command queue, buffer.memory of batches, buffer.memory of
    // unwritten requests, the 64 KiB in the (in-memory) socket, and one batch of slack each.
    let bound = 1_024 + 3 * 66 + 2 * 17;
    assert!(n <= bound, "{n} records accepted (at most {bound})");
    assert!(n > 100, "the first requests went out: {n} accepted");
    let stored: usize = broker.log("t", 0).len();
    assert!(stored > 0, "the broker appended the first request");
}

/// acks=0: nothing answers a request, so a broker that stops reading is noticed only by the
/// writes: one that makes no progress for `request.timeout.ms` fails the connection, the
/// core connects again, and the sends that waited for the writer go on (before, they waited
/// forever).
#[tokio::test(start_paused = true)]
async fn acks_zero_a_broker_that_stops_reading_loses_its_connection() {
    const RECORDS: usize = 5_000;
    let (broker, h) = acks_zero_first_connection_stalls("2000");
    let sender = {
        let h = h.clone();
        tokio::spawn(async move {
            let value = "x".repeat(1_000);
            for _ in 0..RECORDS {
                let r = Record::new("t", value.clone()).with_partition(0);
                drop(h.enqueue(r).await.expect("accepted"));
            }
        })
    };
    // Virtual time: the stall is given up after 2 s without progress.
    tokio::time::timeout(Duration::from_secs(60), sender)
        .await
        .expect("every record accepted once the stalled connection was replaced")
        .unwrap();
    h.close().await;
    let connects = broker.script.lock().unwrap().connects;
    assert!(
        connects >= 2,
        "the stalled connection was replaced: {connects} connects"
    );
    // What the stalled connection held is lost (acks=0 promises nothing); what came after
    // reached the log.
    let stored = broker.log("t", 0).len();
    assert!(
        stored > RECORDS / 2,
        "{stored} of {RECORDS} records in the log after the reconnect"
    );
}

/// An acks=0 producer (2 s `request.timeout.ms`) that handed one record over to each of two
/// nodes, each of which took that first Produce request and then never reads (nor closes)
/// again.
async fn acks_zero_two_brokers_that_keep_their_side_open() -> (FakeBroker, ProducerHandle) {
    let broker = FakeBroker::two_nodes("t", 2, 1);
    broker.script.lock().unwrap().produce = VecDeque::from([Action::Stall, Action::Stall]);
    let cfg = config(&[
        ("acks", "0"),
        ("retries", "0"),
        ("linger.ms", "0"),
        ("request.timeout.ms", "2000"),
    ]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    for p in 0..2 {
        let r = Record::new("t", format!("r{p}")).with_partition(p);
        h.send(r).await.expect("handed over");
    }
    (broker, h)
}

/// acks=0: a connection closed in good order reads until the broker closes its side (Tansu
/// answers acks=0 requests; unread answers make the close a reset that drops what the broker
/// had not read), bounded by `request.timeout.ms`. Fault probe (a paused leader): the close
/// waited for each such connection one after another, each with its own bound, so two
/// connections to brokers that never close cost two bounds. Now one deadline covers all.
#[tokio::test(start_paused = true)]
async fn acks_zero_close_waits_one_bound_for_all_brokers_that_keep_their_side_open() {
    let (broker, h) = acks_zero_two_brokers_that_keep_their_side_open().await;
    assert_eq!(broker.log("t", 0), ["r0"]);
    assert_eq!(broker.log("t", 1), ["r1"]);
    let start = Instant::now();
    h.close().await;
    let took = start.elapsed();
    // It waited for the brokers' end (they never closed) until the one bound, not twice.
    assert!(
        (Duration::from_secs(2)..Duration::from_secs(3)).contains(&took),
        "close took {took:?} with a 2 s request timeout"
    );
}

/// Review finding (2026-12-07): while a closed driver waited for its writers to finish
/// (acks=0, brokers that keep their side open: up to `request.timeout.ms`), `metrics()`,
/// `partition_count()` and `flush()` waited for the whole wait, answered only once the
/// driver stopped. They are answered at once now; a second `close()` still returns with the
/// first.
#[tokio::test(start_paused = true)]
async fn calls_made_while_a_close_waits_for_its_writers_are_answered_at_once() {
    let (_broker, h) = acks_zero_two_brokers_that_keep_their_side_open().await;
    let start = Instant::now();
    assert!(
        h.close_timeout(Duration::from_millis(200)).await.is_err(),
        "the writers wait for the brokers' end"
    );
    let quick = Duration::from_millis(50);
    let m = tokio::time::timeout(quick, h.metrics())
        .await
        .expect("metrics answered while the close waits");
    assert_eq!(m.records_sent_unacknowledged, 2, "{m:?}");
    let count = tokio::time::timeout(quick, h.partition_count("t"))
        .await
        .expect("partition_count answered while the close waits");
    assert!(count.is_err(), "{count:?}");
    tokio::time::timeout(quick, h.flush())
        .await
        .expect("flush answered while the close waits");
    h.close().await;
    let took = start.elapsed();
    assert!(
        (Duration::from_secs(2)..Duration::from_secs(3)).contains(&took),
        "the second close returned with the first, at the bound: {took:?}"
    );
}

/// Review finding: `close_timeout` then `abort` (Java's `close(timeout)`) while a closed
/// driver waited for a writer stuck on a broker that stopped reading (acks=0): `abort`
/// waited out that writer's bound (`request.timeout.ms`, 60 s here) and `fatal()` stayed
/// empty. Now the abort stops the wait at once.
#[tokio::test(start_paused = true)]
async fn abort_after_a_timed_out_close_does_not_wait_for_a_stuck_writer() {
    let (_broker, h) = acks_zero_first_connection_stalls("60000");
    let value = "x".repeat(1_000);
    for _ in 0..100 {
        let r = Record::new("t", value.clone()).with_partition(0);
        drop(h.enqueue(r).await.expect("accepted"));
    }
    assert!(
        h.close_timeout(Duration::from_secs(1)).await.is_err(),
        "the writer is stuck"
    );
    let start = Instant::now();
    h.abort().await;
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    assert!(
        matches!(
            h.fatal(),
            Some(Fatal::Producer(kprod_tokio::FatalError::Aborted { .. }))
        ),
        "{:?}",
        h.fatal()
    );
}

/// A runtime of its own with one worker thread, for a producer dropped with it.
fn one_worker_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// A current-thread runtime of its own (its tasks run only while it is blocked on).
fn current_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Review finding (2026-12-07, time that jumps): a driver woken late (the process stopped,
/// the runtime's thread blocked) timed its requests out before reading the answers that had
/// arrived meanwhile: the connection closed, the batch retried, and past the delivery
/// timeout the record failed possibly persisted although the broker had acknowledged it.
/// Here the runtime stops 2.5 s with the answer in the pipe, past both the 1 s request
/// timeout and the 1 s delivery timeout: the record is delivered, on the same connection,
/// with no retry.
#[test]
fn a_stalled_runtime_reads_the_answers_that_came_before_timing_out() {
    let rt = current_thread_runtime();
    let broker = FakeBroker::new("t", 1);
    rt.block_on(async {
        let cfg = config(&[
            ("request.timeout.ms", "1000"),
            ("delivery.timeout.ms", "1005"),
        ]);
        let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
        let warm = h.send(Record::new("t", "warm").with_partition(0)).await;
        assert!(warm.is_ok(), "{warm:?}");
        let before = h.metrics().await;
        broker.script.lock().unwrap().produce =
            VecDeque::from(vec![Action::AnswerThenBlockRuntime(Duration::from_millis(
                2500,
            ))]);
        let sent = h.send(Record::new("t", "a").with_partition(0)).await;
        assert!(sent.is_ok(), "{sent:?}");
        let after = h.metrics().await;
        assert_eq!(after.retries, before.retries, "{after:?}");
        assert_eq!(
            after.connections_opened, before.connections_opened,
            "{after:?}"
        );
        h.close().await;
    });
    assert_eq!(broker.log("t", 0), vec!["warm", "a"]);
}

/// Review finding (2026-12-07, a starved driver): a driver woken late refused the sends
/// waiting for memory past `max.block.ms` before it used the memory the acknowledgements it
/// read freed (and, woken by that timer, before it took the answers its readers had read).
/// Here the runtime stops 1.5 s with the acknowledgement that frees the room in the pipe,
/// past the waiting send's 1 s `max.block.ms`: it is accepted and delivered.
#[test]
fn a_stalled_runtime_gives_freed_memory_to_a_waiting_send_before_refusing_it() {
    let rt = current_thread_runtime();
    let broker = FakeBroker::new("t", 1);
    rt.block_on(async {
        let cfg = config(&[
            ("buffer.memory", "4096"),
            ("max.request.size", "4096"),
            ("batch.size", "4096"),
            ("max.block.ms", "1000"),
        ]);
        let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
        let warm = h.send(Record::new("t", "warm").with_partition(0)).await;
        assert!(warm.is_ok(), "{warm:?}");
        broker.script.lock().unwrap().produce =
            VecDeque::from(vec![Action::AnswerThenBlockRuntime(Duration::from_millis(
                1500,
            ))]);
        let first = h
            .enqueue(Record::new("t", vec![b'1'; 3000]).with_partition(0))
            .await
            .unwrap();
        let h2 = h.clone();
        let second = tokio::spawn(async move {
            h2.send(Record::new("t", vec![b'2'; 3000]).with_partition(0))
                .await
        });
        assert!(first.await.is_ok());
        let second = second.await.unwrap();
        assert!(second.is_ok(), "{second:?}");
        h.close().await;
    });
    assert_eq!(broker.log("t", 0).len(), 3);
}

/// Review finding: when the producer's runtime shut down, records still waiting for memory
/// (never accepted) were reported `DriverStopped`, possibly persisted, without their record,
/// and `metrics()` answered with zeros. Now they are refused `DriverStopped`, not persisted,
/// with the record handed back (as after a close, which said `Closed` until the next review
/// found that misleading), and the metrics are the last ones.
#[test]
fn a_runtime_shut_down_refuses_the_records_waiting_for_memory_and_keeps_the_metrics() {
    let rt_a = one_worker_runtime();
    let rt_b = current_thread_runtime();
    let broker = FakeBroker::new("t", 1);
    broker.script.lock().unwrap().produce = VecDeque::from(vec![Action::Stall; 64]);
    let h = rt_a.block_on(async {
        let cfg = config(&[
            ("buffer.memory", "4096"),
            ("max.request.size", "4096"),
            ("batch.size", "1024"),
        ]);
        let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
        let warm = Record::new("t", vec![b'w'; 600]).with_partition(0);
        drop(h.enqueue(warm).await.unwrap());
        h
    });
    let records = (0..20).map(|i| Record::new("t", vec![b'0' + i; 600]).with_partition(0));
    let mut many = Box::pin(h.enqueue_many(records.collect::<Vec<_>>()));
    let accepted = rt_b.block_on(async {
        // One poll hands the records that do not fit to the driver; the metrics request
        // queued behind them is answered once the driver has taken them (and deferred them).
        tokio::select! {
            biased;
            _ = &mut many => panic!("20 records of 600 B do not fit 4 KiB"),
            () = std::future::ready(()) => {}
        }
        h.metrics().await.records_accepted
    });
    assert!(accepted >= 1, "the warm record at least");
    drop(rt_a);
    let results = rt_b.block_on(many);
    let refused: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(!refused.is_empty(), "some records waited for memory");
    for e in refused {
        assert!(matches!(e.kind, ErrorKind::DriverStopped), "{e}");
        assert_eq!(e.persisted, Persistence::NotPersisted, "never accepted");
        assert_eq!(
            e.record().map(|r| r.value.as_ref().unwrap().len()),
            Some(600)
        );
    }
    let m = rt_b.block_on(h.metrics());
    assert_eq!(m.records_accepted, accepted, "the last metrics, not zeros");
}

/// Review finding: records accepted but never sent when the producer's runtime shut down (a
/// `#[tokio::main]` ending with records lingering) were reported `DriverStopped`, possibly
/// persisted, without their record: lost with no way to send them again. Now the core tells
/// which were never sent: not persisted, each handed back; the one in flight stays possibly
/// persisted (with its record).
#[test]
fn a_runtime_shut_down_hands_back_the_records_never_sent() {
    let rt_a = one_worker_runtime();
    let rt_b = current_thread_runtime();
    let broker = FakeBroker::new("t", 2);
    broker.script.lock().unwrap().produce = VecDeque::from(vec![Action::Stall; 64]);
    let (h, in_flight, lingering) = rt_a.block_on(async {
        let h = ProducerHandle::with_connector(config(&[("linger.ms", "60000")]), broker.clone())
            .unwrap();
        // Written and never answered (the broker stalls): possibly persisted.
        let in_flight = h
            .enqueue(Record::new("t", "sent").with_partition(0))
            .await
            .unwrap();
        // The flush sends it at once (the linger is a minute); it never ends.
        h.flush_timeout(Duration::from_millis(200))
            .await
            .unwrap_err();
        until_written(&h, &broker, 64, "t", 0).await;
        // Lingering for a minute: never written.
        let mut lingering = Vec::new();
        for i in 0..10 {
            let r = Record::new("t", format!("kept {i}")).with_partition(1);
            lingering.push(h.enqueue(r).await.unwrap());
        }
        (h, in_flight, lingering)
    });
    drop(rt_a);
    let e = rt_b.block_on(in_flight).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::DriverStopped), "{e}");
    // The message says what was known and what to do (a review: it said only that the task
    // stopped).
    let text = e.to_string();
    assert!(
        text.contains("PossiblyPersisted") && text.contains("await close()"),
        "{text}"
    );
    assert_eq!(
        e.persisted,
        Persistence::PossiblyPersisted,
        "written, unanswered"
    );
    assert_eq!(
        e.record().and_then(|r| r.value.clone()),
        Some("sent".into())
    );
    for (i, f) in lingering.into_iter().enumerate() {
        let e = rt_b.block_on(f).unwrap_err();
        assert!(
            matches!(e.kind, ErrorKind::DriverStopped),
            "record {i}: {e}"
        );
        assert_eq!(
            e.persisted,
            Persistence::NotPersisted,
            "record {i}: never sent"
        );
        let value = e.record().and_then(|r| r.value.clone());
        assert_eq!(
            value,
            Some(format!("kept {i}").into()),
            "record {i} handed back"
        );
        assert_eq!(e.record().and_then(|r| r.partition), Some(1));
    }
    // Later records are refused as stopped, not as closed by the application (a review
    // finding), and handed back; `fatal` says why.
    assert!(
        matches!(h.fatal(), Some(Fatal::DriverStopped)),
        "{:?}",
        h.fatal()
    );
    let e = rt_b
        .block_on(h.enqueue(Record::new("t", "late")))
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::DriverStopped), "{e}");
    assert_eq!(e.persisted, Persistence::NotPersisted);
    assert_eq!(
        e.record().and_then(|r| r.value.clone()),
        Some("late".into())
    );
    drop(h);
}

/// Review finding: records failed by `abort()` whose driver was dropped with its runtime
/// before it drained them were reported `DriverStopped`, not the abort that failed them.
#[test]
fn records_aborted_before_a_runtime_shut_down_keep_the_abort_as_their_cause() {
    let rt = current_thread_runtime();
    let other = current_thread_runtime();
    let broker = FakeBroker::new("t", 1);
    let (h, futures) = rt.block_on(async {
        let h = ProducerHandle::with_connector(config(&[("linger.ms", "60000")]), broker.clone())
            .unwrap();
        let mut futures = Vec::new();
        for i in 0..5 {
            let r = Record::new("t", format!("r{i}")).with_partition(0);
            futures.push(h.enqueue(r).await.unwrap());
        }
        // The abort's first step (the core fails every record) runs; the driver, which
        // would report them, never runs again on this runtime.
        {
            let mut abort = Box::pin(h.abort());
            tokio::select! {
                biased;
                () = &mut abort => panic!("the driver cannot have ended: it did not run"),
                () = std::future::ready(()) => {}
            }
        }
        (h, futures)
    });
    drop(rt);
    for (i, f) in futures.into_iter().enumerate() {
        let e = other.block_on(f).unwrap_err();
        assert!(
            !matches!(e.kind, ErrorKind::DriverStopped),
            "record {i}: the abort's own error, not {e}"
        );
        assert_eq!(e.persisted, Persistence::NotPersisted, "record {i}");
        assert_eq!(
            e.record().and_then(|r| r.value.clone()),
            Some(format!("r{i}").into())
        );
    }
    drop(h);
}

/// Review finding: under acks=0 a batch leaves `buffer.memory` as soon as it is handed over,
/// so the refusal that sends what is buffered frees the memory at once; the driver then
/// stopped retrying the records waiting for it (no answer and no linger timer was left to wake
/// it), and 100 waiting senders took 4,790 s of virtual time (330 s, a linger per wave,
/// before refusals sent what is buffered). Now the driver retries while the drain frees memory.
#[tokio::test(start_paused = true)]
async fn acks_zero_senders_waiting_for_memory_do_not_stall() {
    const LINGER: Duration = Duration::from_secs(10);
    let broker = FakeBroker::new("t", 8);
    broker.script.lock().unwrap().silent_produce = true;
    let cfg = config(&[
        ("acks", "0"),
        ("retries", "0"),
        ("buffer.memory", "4096"),
        ("max.request.size", "4096"),
        ("batch.size", "1024"),
        ("linger.ms", "10000"),
    ]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    h.send(Record::new("t", "warm").with_partition(0))
        .await
        .unwrap();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..100 {
        let h = h.clone();
        tasks.push(tokio::spawn(async move {
            let r = Record::new("t", vec![b'a' + (i % 26) as u8; 100]).with_partition(i % 8);
            // In an `Option`: a task's output that is itself a future would be awaited.
            Some(h.enqueue(r).await.unwrap())
        }));
    }
    let mut futures = Vec::new();
    for t in tasks {
        futures.extend(t.await.unwrap());
    }
    // Accepted without waiting for linger (the last records accepted then linger, as usual).
    assert!(
        start.elapsed() < LINGER,
        "100 acks=0 enqueues waiting for memory took {:?}",
        start.elapsed()
    );
    h.close().await;
    for f in futures {
        assert!(!f.await.unwrap().is_acknowledged(), "acks=0");
    }
    let logged: usize = (0..8).map(|p| broker.log("t", p).len()).sum();
    assert_eq!(logged, 101, "every record once");
}

/// Review finding: a driver that dies while it applies a deferred `enqueue_many` (here a
/// record value whose owner panics when the producer drops it) leaves the call unanswered;
/// the call must then report its records possibly persisted, since the driver may have
/// accepted and written some of them in earlier rounds (a first fix had reported them all
/// not persisted, records in the log among them).
#[tokio::test(start_paused = true)]
async fn enqueue_many_answered_by_a_dead_driver_claims_nothing_it_cannot_know() {
    struct Bomb(Vec<u8>);
    impl AsRef<[u8]> for Bomb {
        fn as_ref(&self) -> &[u8] {
            &self.0
        }
    }
    impl Drop for Bomb {
        fn drop(&mut self) {
            panic!("a record value that panics when dropped");
        }
    }
    let broker = FakeBroker::new("t", 1);
    broker.script.lock().unwrap().latency = Duration::from_millis(10);
    let cfg = config(&[
        ("buffer.memory", "4096"),
        ("max.request.size", "4096"),
        ("batch.size", "1024"),
    ]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    h.send(Record::new("t", "warm").with_partition(0))
        .await
        .unwrap();
    let mut records: Vec<Record> = (0..12)
        .map(|i| Record::new("t", vec![b'a' + i as u8; 600]).with_partition(0))
        .collect();
    let mut bomb = Record::new("t", "x").with_partition(0);
    bomb.value = Some(Bytes::from_owner(Bomb(vec![b'z'; 600])));
    records.push(bomb);
    let n = records.len();
    let results = h.enqueue_many(records).await;
    let logged = broker.log("t", 0).len() - 1;
    assert!(logged > 0, "some of the call's records were written");
    let failed = results.iter().filter(|r| r.is_err()).count();
    assert_eq!(
        (results.len(), failed),
        (n, n),
        "the dead driver answered none of the call's records"
    );
    for (i, r) in results.iter().enumerate() {
        if let Err(e) = r {
            assert_eq!(
                e.persisted,
                Persistence::PossiblyPersisted,
                "record {i} ({logged} in the log): {e}"
            );
        }
    }
}

/// Review finding: the driver's per-record memory (then each pending record's outcome
/// channel, about 140 B) was not charged against `buffer.memory`, so 1 MiB of it held about
/// 36,500 records of 8 bytes (and the process 10 MiB). Now it is charged with each record:
/// its place among the pending records and its outcome's slot with its share of the slab
/// (about 70 B since outcomes share slabs), beside the record's encoded bytes and id in its
/// batch: at least 80 B in all for a record of 8 bytes (10,240 records fit, 2026-12-05).
#[tokio::test(start_paused = true)]
async fn tiny_records_are_bounded_by_buffer_memory_with_the_drivers_own_memory() {
    const MEMORY: usize = 1 << 20;
    let broker = FakeBroker::new("t", 1);
    let cfg = config(&[("buffer.memory", "1048576"), ("linger.ms", "60000")]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    // Delivered: the metadata is known, and the records below go into batches (records
    // waiting for metadata are charged their whole struct).
    h.flush().await;
    drop(h.enqueue(Record::new("t", "warm").with_partition(0)).await);
    h.flush().await;
    // From now on the broker answers nothing: no charge is released.
    broker.script.lock().unwrap().produce = VecDeque::from(vec![Action::Stall; 64]);
    let tiny = (0..100_000).map(|i| Record::new("t", format!("{i:08}")).with_partition(0));
    let mut many = Box::pin(h.enqueue_many(tiny.collect::<Vec<_>>()));
    tokio::select! {
        biased;
        _ = &mut many => panic!("100,000 records fit 1 MiB"),
        () = std::future::ready(()) => {}
    }
    let m = h.metrics().await;
    assert!(m.buffered_bytes <= MEMORY, "{} B", m.buffered_bytes);
    assert!(
        m.buffered_records * 80 <= MEMORY,
        "{} records of 8 bytes held by 1 MiB",
        m.buffered_records
    );
    assert!(m.buffered_records > 1000, "{} records", m.buffered_records);
}

/// Outcomes share slabs of 16 slots, kept while any of their records is unresolved: one
/// partition that cannot deliver among 32 keeps a slab for each of its records (the other
/// 15 records of each resolved), far more memory than its records are charged. That memory
/// counts against `buffer.memory` too: the records waiting on the slow node stop at a few
/// thousand (without it, 6,250: every 32nd of the 200,000 sent), and the rest of the call
/// is refused `QueueFull` at `max.block.ms`, as for a full buffer.
#[tokio::test(start_paused = true)]
async fn slabs_kept_for_a_stuck_partition_count_against_buffer_memory() {
    const MEMORY: usize = 1 << 20;
    let broker = FakeBroker::two_nodes("t", 32, 7);
    let cfg = config(&[
        ("buffer.memory", "1048576"),
        ("max.block.ms", "1000"),
        ("delivery.timeout.ms", "7200000"),
        ("request.timeout.ms", "3600000"),
    ]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    drop(
        h.send(Record::new("t", "warm").with_partition(7))
            .await
            .unwrap(),
    );
    // Node 2 leads partition 7 and now answers an hour late.
    broker.script.lock().unwrap().slow_node = Some((2, Duration::from_secs(3600)));
    let tiny = (0..200_000).map(|i| Record::new("t", format!("{i:08}")).with_partition(i % 32));
    let results = h.enqueue_many(tiny.collect::<Vec<_>>()).await;
    let refused = (results.iter())
        .filter(|r| matches!(r, Err(e) if e.to_string().contains("buffer")))
        .count();
    let accepted = results.iter().filter(|r| r.is_ok()).count();
    let m = h.metrics().await;
    eprintln!(
        "{accepted} accepted, {refused} refused; {} records ({} B) wait on the slow node",
        m.buffered_records, m.buffered_bytes
    );
    assert!(refused > 0, "{accepted} accepted, none refused");
    assert_eq!(
        accepted + refused,
        200_000,
        "every record accepted or refused as full"
    );
    assert!(m.buffered_bytes <= MEMORY, "{} B", m.buffered_bytes);
    assert!(
        (1_000..=4_000).contains(&m.buffered_records),
        "{} records wait on the slow node ({accepted} accepted)",
        m.buffered_records
    );
}

/// Review findings: under `acks=0` the core counts handing a request to the driver as the
/// connection's last traffic, while the driver may still hold its bytes. An idle close then
/// dropped the queued writes (records already reported `Sent`: 80 of 300 reached the log in
/// the first review's probe); flushed instead, they reached the log after records sent later
/// on a new connection (the second review's probe: `a014, a015, b000, ...`), and their bytes
/// left the `buffer.memory` bound on unwritten writes. A connection that carried `acks=0`
/// requests is now never closed for idleness: every record reaches the log once, in order.
/// A reader paused for 3 s, an idle limit of 1 s, 300 records, then 10 more at 1.5 s.
async fn acks_zero_paused_reader(idle: &str) -> Vec<String> {
    let broker = FakeBroker::new("t", 1);
    {
        let mut s = broker.script.lock().unwrap();
        s.silent_produce = true;
        s.produce = VecDeque::from([Action::Delay(Duration::from_secs(3))]);
    }
    let cfg = config(&[
        ("acks", "0"),
        ("retries", "0"),
        ("batch.size", "16384"),
        ("request.timeout.ms", "60000"),
        ("connections.max.idle.ms", idle),
        ("metadata.max.age.ms", "3600000"),
    ]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    // Enqueues every value to partition 0, then awaits every outcome (each Sent).
    async fn send_all(h: &ProducerHandle, values: impl Iterator<Item = String>) {
        let mut futures = Vec::new();
        for v in values {
            futures.push(
                h.enqueue(Record::new("t", v).with_partition(0))
                    .await
                    .unwrap(),
            );
        }
        for f in futures {
            assert!(f.await.is_ok());
        }
    }
    let pad = "x".repeat(1_000);
    send_all(&h, (0..300).map(|i| format!("a{i:03}{pad}"))).await;
    // Virtual time: the runtime moves the clock once every task waits.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    send_all(&h, (0..10).map(|i| format!("b{i:03}"))).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    h.close().await;
    (broker.log("t", 0).iter())
        .map(|v| v[..4].to_owned())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn acks_zero_connections_that_carried_records_are_not_closed_for_idleness() {
    let expected: Vec<String> = (0..300)
        .map(|i| format!("a{i:03}"))
        .chain((0..10).map(|i| format!("b{i:03}")))
        .collect();
    assert_eq!(acks_zero_paused_reader("-1").await, expected);
    assert_eq!(
        acks_zero_paused_reader("1000").await,
        expected,
        "every record once, in send order, with an idle limit shorter than the pause"
    );
}

/// A partition added to topic `topic` of the fake cluster (empty, like partition 0's).
fn add_partition(broker: &FakeBroker, topic: &str, p: i32) {
    let mut c = broker.cluster.lock().unwrap();
    let mut log = c.partition(topic, 0).clone();
    log.log.clear();
    log.producers.clear();
    log.inject.clear();
    c.partitions.insert((topic.to_owned(), p), Box::new(log));
}

/// A record for a partition beyond the known count is refused at once, and the refusal asks
/// for fresh metadata so that a partition just added is taken next time. Before (a review
/// probe), the handle's direct path asked the core but did not wake the driver: an
/// application retrying once a second was refused until the periodic refresh, 5 minutes later
/// (`enqueue_many` woke it).
#[tokio::test(start_paused = true)]
async fn a_record_refused_for_a_partition_beyond_the_count_refreshes_metadata() {
    let broker = FakeBroker::new("t", 1);
    let cfg = config(&[("linger.ms", "0"), ("retry.backoff.ms", "100")]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    h.send(Record::new("t", "a")).await.unwrap();
    add_partition(&broker, "t", 1);
    // Past retry.backoff.ms since the last metadata answer, so the refusal asks for one.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let e = (h.enqueue(Record::new("t", "b").with_partition(1)).await)
        .expect_err("partition 1 is not known yet");
    assert!(
        matches!(&e.kind, ErrorKind::Refused(s) if matches!(**s, SendError::InvalidPartition { .. })),
        "{e}"
    );
    // Far more than retry.backoff.ms, far less than metadata.max.age.ms (5 minutes).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let r = h.enqueue(Record::new("t", "c").with_partition(1)).await;
    let d = r.unwrap_or_else(|e| panic!("still refused 2 s later: {e}"));
    assert_eq!(d.await.unwrap().partition, 1);
    h.close().await;
}

/// acks=0 with a broker that stops reading: while the writers are backed up, sends wait as
/// they do for memory, refused `QueueFull` with the record back at `max.block.ms`, and
/// `metrics()` and `partition_count()` answer. Before (a review probe), the driver took no
/// command at all until the stalled connection was given up at `request.timeout.ms` (60 s
/// here): `metrics()` took 55 s.
#[tokio::test(start_paused = true)]
async fn acks_zero_a_write_backlog_holds_sends_only_up_to_max_block() {
    let broker = FakeBroker::new("t", 1);
    broker.script.lock().unwrap().produce = VecDeque::from([Action::Stall]);
    let cfg = config(&[
        ("acks", "0"),
        ("retries", "0"),
        ("buffer.memory", "65536"),
        ("max.request.size", "65536"),
        ("batch.size", "16384"),
        ("request.timeout.ms", "60000"),
        ("max.block.ms", "1000"),
    ]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    let filler = {
        let h = h.clone();
        tokio::spawn(async move {
            loop {
                let r = Record::new("t", "x".repeat(1_000)).with_partition(0);
                if h.enqueue(r).await.is_err() {
                    return;
                }
            }
        })
    };
    // The filler is refused once the backlog has held it for max.block.ms.
    tokio::time::timeout(Duration::from_secs(5), filler)
        .await
        .expect("a send waiting behind the backlog is refused at max.block.ms")
        .unwrap();
    let m = tokio::time::timeout(Duration::from_secs(1), h.metrics())
        .await
        .expect("metrics() answers while the writers are backed up");
    assert!(m.records_accepted > 0);
    let r = Record::new("t", "y").with_partition(0);
    let e = tokio::time::timeout(Duration::from_secs(3), h.enqueue(r))
        .await
        .expect("a send is answered within max.block.ms")
        .expect_err("the writers are still backed up");
    assert!(
        matches!(&e.kind, ErrorKind::Refused(s) if matches!(**s, SendError::QueueFull(_))),
        "{e}"
    );
    assert_eq!(
        e.record().map(|r| r.value.as_deref()),
        Some(Some(&b"y"[..]))
    );
    let pc = tokio::time::timeout(Duration::from_secs(3), h.partition_count("t"))
        .await
        .expect("partition_count answers while the writers are backed up");
    assert_eq!(pc.unwrap(), 1);
    // A flush queued behind a waiting send, and a send behind the flush: once the first send
    // is refused the flush goes ahead, and the send behind it is refused at its own
    // max.block.ms (before the review's fix, the send waited for the stalled connection,
    // 59 s).
    let start = Instant::now();
    let send = |v: &'static str| {
        let h = h.clone();
        tokio::spawn(async move {
            let r = h.enqueue(Record::new("t", v).with_partition(0)).await;
            (r.is_ok(), start.elapsed())
        })
    };
    let s1 = send("s1");
    tokio::time::sleep(Duration::from_millis(10)).await;
    let flush = {
        let h = h.clone();
        tokio::spawn(async move {
            h.flush().await;
            start.elapsed()
        })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    let s2 = send("s2");
    let (ok1, t1) = (tokio::time::timeout(Duration::from_secs(3), s1).await)
        .expect("the first send answered within 3 s")
        .unwrap();
    let (ok2, t2) = (tokio::time::timeout(Duration::from_secs(3), s2).await)
        .expect("the send behind the flush answered within 3 s")
        .unwrap();
    // The flush itself waits for the writers to write what they hold (since 2026-12-07, as
    // the Java client's acks=0 flush does): until the stalled connection is given up at
    // `request.timeout.ms`.
    let tf = (tokio::time::timeout(Duration::from_secs(70), flush).await)
        .expect("the flush returned once the stalled connection was given up")
        .unwrap();
    assert!(
        tf > Duration::from_secs(3),
        "flushed with bytes unwritten: {tf:?}"
    );
    assert!(
        !ok1 && !ok2,
        "both sends refused while the writers stay backed up"
    );
    assert!(
        t1 >= Duration::from_secs(1) && t2 >= Duration::from_secs(1),
        "{t1:?} {t2:?}"
    );
    println!(
        "backlog: first send refused after {t1:?}, flush after {tf:?}, send behind it after {t2:?}"
    );
}

/// `ProducerHandle::enqueue_with`: an outcome callback instead of a future per record.
mod callbacks {
    use super::*;

    type Calls = Arc<Mutex<Vec<(usize, Result<Delivery, DeliveryError>)>>>;

    /// Enqueues `n` records valued "0".."n-1" to `topic`, each with a callback recording
    /// `(i, outcome)` in call order.
    async fn enqueue_with_all(h: &ProducerHandle, topic: &str, n: usize) -> Calls {
        let calls = Calls::default();
        for i in 0..n {
            let c = calls.clone();
            h.enqueue_with(Record::new(topic, i.to_string()), move |r| {
                c.lock().unwrap().push((i, r));
            })
            .await
            .unwrap();
        }
        calls
    }

    /// Every record's callback is called once, with the outcome its future would have
    /// given (here through a dropped connection: retried and deduplicated), each partition's
    /// in send order, and the log holds every record once at its reported offset.
    #[tokio::test(start_paused = true)]
    async fn every_record_calls_back_once_in_send_order_per_partition() {
        let broker = FakeBroker::new("t", 2);
        broker.script.lock().unwrap().produce = VecDeque::from([Action::AppendThenDrop]);
        let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
        let calls = enqueue_with_all(&h, "t", 1_000).await;
        h.close().await;
        let calls = std::mem::take(&mut *calls.lock().unwrap());
        assert_eq!(calls.len(), 1_000, "one call per record");
        let mut last: HashMap<i32, usize> = HashMap::new();
        let mut outcomes: Vec<Option<Result<Delivery, DeliveryError>>> =
            (0..1_000).map(|_| None).collect();
        for (i, r) in calls {
            let d = r.as_ref().unwrap_or_else(|e| panic!("record {i}: {e}"));
            if let Some(prev) = last.insert(d.partition, i) {
                assert!(prev < i, "partition {}: {i} after {prev}", d.partition);
            }
            assert!(outcomes[i].replace(r).is_none(), "record {i} called twice");
        }
        let outcomes: Vec<_> = outcomes.into_iter().map(Option::unwrap).collect();
        check_truthful(&broker, "t", &outcomes);
        let total: usize = (0..2).map(|p| broker.log("t", p).len()).sum();
        assert_eq!(total, 1_000, "every record exactly once");
        assert!(broker.cluster.lock().unwrap().stats.deduplicated >= 1);
    }

    /// The delivery a callback gets carries the record's own timestamp, or the wall clock's
    /// for a record without one, as the future's does.
    #[tokio::test(start_paused = true)]
    async fn the_callback_gets_the_records_timestamp() {
        let broker = FakeBroker::new("t", 1);
        let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
        let calls = Calls::default();
        for (i, r) in [
            Record::new("t", "a").with_timestamp(1234),
            Record::new("t", "b"),
        ]
        .into_iter()
        .enumerate()
        {
            let c = calls.clone();
            h.enqueue_with(r, move |r| c.lock().unwrap().push((i, r)))
                .await
                .unwrap();
        }
        h.flush().await;
        let calls = std::mem::take(&mut *calls.lock().unwrap());
        let stamps: Vec<_> = calls
            .iter()
            .map(|(i, r)| (*i, r.as_ref().unwrap().timestamp))
            .collect();
        assert_eq!(stamps.len(), 2, "{stamps:?}");
        assert_eq!(stamps[0], (0, 1234));
        assert!(stamps[1].1 > 1_600_000_000_000, "wall clock: {stamps:?}");
        h.close().await;
    }

    /// A record refused when it is enqueued comes back in the error and its callback is
    /// never called: one outcome, not two.
    #[tokio::test(start_paused = true)]
    async fn a_refused_record_never_calls_back() {
        let broker = FakeBroker::new("t", 1);
        let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
        let calls = Calls::default();
        let refused = [
            Record::new("bad topic!", "x"),
            Record::new("t", vec![0u8; 2 << 20]),
            Record::new("t", "y").with_partition(-1),
        ];
        for r in refused {
            let c = calls.clone();
            let err = h
                .enqueue_with(r, move |r| c.lock().unwrap().push((0, r)))
                .await
                .unwrap_err();
            assert!(matches!(err.kind, ErrorKind::Refused(_)), "{err}");
            assert_eq!(err.persisted, Persistence::NotPersisted);
            assert!(err.record().is_some(), "the record is handed back");
        }
        h.close().await;
        let c = calls.clone();
        let err = h
            .enqueue_with(Record::new("t", "late"), move |r| {
                c.lock().unwrap().push((0, r))
            })
            .await
            .unwrap_err();
        assert!(
            matches!(err.kind, ErrorKind::Refused(ref e) if matches!(**e, SendError::Closed(_))),
            "{err}"
        );
        assert!(calls.lock().unwrap().is_empty(), "no callback called");
    }

    /// A callback that panics costs no other record its outcome, and the producer goes on.
    #[tokio::test(start_paused = true)]
    async fn a_panicking_callback_harms_no_other_record() {
        let broker = FakeBroker::new("t", 1);
        let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
        let calls = Calls::default();
        for i in 0..100 {
            let c = calls.clone();
            h.enqueue_with(Record::new("t", i.to_string()), move |r| {
                assert_ne!(i, 5, "the application's callback panics");
                c.lock().unwrap().push((i, r));
            })
            .await
            .unwrap();
        }
        let d = h.send(Record::new("t", "after")).await.unwrap();
        assert_eq!(d.offset, Some(100));
        h.close().await;
        let calls = calls.lock().unwrap();
        let ids: Vec<usize> = calls.iter().map(|(i, _)| *i).collect();
        let expected: Vec<usize> = (0..100).filter(|&i| i != 5).collect();
        assert_eq!(ids, expected);
        assert!(calls.iter().all(|(_, r)| r.is_ok()));
        assert_eq!(broker.log("t", 0).len(), 101);
    }

    /// A callback may use the producer: it runs outside the producer's lock (here it
    /// enqueues a follow-up record from inside the callback, polling once).
    #[tokio::test(start_paused = true)]
    async fn a_callback_can_enqueue_from_inside() {
        let broker = FakeBroker::new("t", 1);
        let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
        let follow_ups = Arc::new(Mutex::new(Vec::new()));
        let (h2, f2) = (h.clone(), follow_ups.clone());
        h.enqueue_with(Record::new("t", "first"), move |r| {
            assert!(r.is_ok());
            let mut fut = std::pin::pin!(h2.enqueue(Record::new("t", "second")));
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            let polled = std::future::Future::poll(fut.as_mut(), &mut cx);
            f2.lock().unwrap().push(polled.is_ready());
        })
        .await
        .unwrap();
        h.flush().await;
        h.flush().await;
        h.close().await;
        assert_eq!(*follow_ups.lock().unwrap(), vec![true]);
        assert_eq!(broker.log("t", 0), vec!["first", "second"]);
    }

    /// Records accepted when the producer's runtime shuts down: each callback is still
    /// called once, saying the producer stopped (possibly persisted: the records were
    /// written and never answered).
    #[test]
    fn a_runtime_shut_down_calls_every_pending_callback_with_stopped() {
        let rt = one_worker_runtime();
        let broker = FakeBroker::new("t", 1);
        broker.script.lock().unwrap().produce = VecDeque::from(vec![Action::Stall; 64]);
        let calls = Calls::default();
        let h = rt.block_on(async {
            let h = ProducerHandle::with_connector(config(&[]), broker.clone()).unwrap();
            for i in 0..10 {
                let c = calls.clone();
                h.enqueue_with(Record::new("t", i.to_string()), move |r| {
                    c.lock().unwrap().push((i, r));
                })
                .await
                .unwrap();
            }
            h.flush_timeout(Duration::from_millis(200))
                .await
                .unwrap_err();
            until_written(&h, &broker, 64, "t", 0).await;
            h
        });
        assert!(calls.lock().unwrap().is_empty(), "the broker never answers");
        drop(rt);
        let calls = std::mem::take(&mut *calls.lock().unwrap());
        let mut ids: Vec<usize> = calls.iter().map(|(i, _)| *i).collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..10).collect::<Vec<_>>(), "each called once");
        for (i, r) in calls {
            let e = r.unwrap_err();
            assert!(
                matches!(e.kind, ErrorKind::DriverStopped),
                "record {i}: {e}"
            );
            assert_eq!(e.persisted, Persistence::PossiblyPersisted);
        }
        drop(h);
    }
}

/// Review finding (2026-12-06): acks=all, a request still being written to a broker that
/// stopped reading when its records reached their delivery timeout. With every record
/// resolved the close closed that connection "in good order", and the driver waited for the
/// stuck writer up to `request.timeout.ms` (5 s here) before `close()` returned. The core
/// now closes a connection whose answers are still awaited at once.
#[tokio::test(start_paused = true)]
async fn a_close_does_not_wait_for_a_writer_stuck_under_records_already_timed_out() {
    let broker = FakeBroker::new("t", 1);
    {
        let mut s = broker.script.lock().unwrap();
        // The first connect hangs until the connect timeout (8 s), so the requests go out
        // late, close to the records' delivery timeout (10 s).
        s.hang_connects = 1;
        // The first Produce request (a partition's first batch goes alone) is answered; the
        // next is read, then the broker reads nothing more: the third (larger than the
        // 64 KiB pipe) is stuck in the writer.
        s.produce = VecDeque::from([Action::Answer, Action::Stall]);
    }
    let cfg = config(&[
        ("socket.connection.setup.timeout.ms", "8000"),
        ("request.timeout.ms", "5000"),
        ("delivery.timeout.ms", "10000"),
        ("linger.ms", "0"),
        ("max.in.flight.requests.per.connection", "5"),
    ]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    let start = Instant::now();
    let mut futures = Vec::new();
    for value in ["a", "b", "c"] {
        let r = Record::new("t", value.repeat(200_000)).with_partition(0);
        futures.push(h.enqueue(r).await.expect("accepted"));
    }
    let mut outcomes = Vec::new();
    for f in futures {
        outcomes.push(f.await.map(|_| ()).map_err(|e| (e.kind, e.persisted)));
    }
    let resolved = start.elapsed();
    let first = |v: &String| v[..1].to_owned();
    assert_eq!(
        broker.log("t", 0).iter().map(first).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert!(outcomes[0].is_ok(), "{:?}", outcomes[0]);
    for o in &outcomes[1..] {
        let e = o
            .as_ref()
            .expect_err("no answer before the delivery timeout");
        assert_eq!(e.1, Persistence::PossiblyPersisted, "{:?}", e.0);
    }
    assert!(resolved >= Duration::from_secs(10), "{resolved:?}");
    h.close().await;
    let closed = start.elapsed() - resolved;
    assert!(
        closed < Duration::from_secs(1),
        "close took {closed:?} after every record was resolved"
    );
}

/// Review finding (2026-12-06): a current-thread runtime dropped while its thread unwinds
/// from the application's own panic (`#[tokio::main(flavor = "current_thread")]` whose body
/// panics) drops the driver on that unwinding thread, and the driver took that for a panic
/// of its own that may have left the core half-way: lingering records, never written, were
/// reported possibly persisted without their records. Only a poisoned core lock counts now.
#[test]
fn a_runtime_dropped_while_its_thread_unwinds_hands_back_the_records_never_sent() {
    let rt_b = current_thread_runtime();
    let broker = FakeBroker::new("t", 1);
    let mut kept = None;
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let rt = current_thread_runtime();
        rt.block_on(async {
            let h =
                ProducerHandle::with_connector(config(&[("linger.ms", "60000")]), broker.clone())
                    .unwrap();
            let f = h
                .enqueue(Record::new("t", "kept").with_partition(0))
                .await
                .unwrap();
            kept = Some((h, f));
            panic!("the application's own task fails");
        })
    }));
    assert!(unwound.is_err());
    let (h, f) = kept.expect("enqueued");
    let e = rt_b.block_on(f).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::DriverStopped), "{e}");
    assert_eq!(e.persisted, Persistence::NotPersisted, "never sent");
    assert_eq!(
        e.record().and_then(|r| r.value.clone()),
        Some("kept".into()),
        "handed back"
    );
    drop(h);
}

/// A [`FakeBroker`] whose `fatal_reason` panics: application code the driver runs.
#[derive(Clone)]
struct PanickingClassifier(FakeBroker);

impl Connector for PanickingClassifier {
    type Stream = DuplexStream;
    async fn connect(&self, addr: &str) -> io::Result<DuplexStream> {
        self.0.connect(addr).await
    }
    fn fatal_reason(&self, _: &io::Error) -> Option<String> {
        panic!("the application's classifier fails");
    }
}

/// Review finding (2026-12-06): a custom connector's `fatal_reason` panicking on a failed
/// connect ended the driver task: every record failed `DriverStopped`. The panic is now
/// taken for an ordinary, retried failure.
#[tokio::test(start_paused = true)]
async fn a_panicking_fatal_reason_is_an_ordinary_connection_failure() {
    let broker = FakeBroker::new("t", 1);
    broker.script.lock().unwrap().fail_connects = 2;
    let h =
        ProducerHandle::with_connector(config(&[]), PanickingClassifier(broker.clone())).unwrap();
    let outcomes = produce_all(&h, "t", 10).await;
    all_delivered(&outcomes);
    assert_eq!(broker.log("t", 0).len(), 10);
    h.close().await;
}

/// A stream whose next write panics once `armed` is set (then it disarms): a custom
/// connector's stream with a bug.
struct Fuse {
    inner: DuplexStream,
    armed: Arc<std::sync::atomic::AtomicBool>,
}

impl tokio::io::AsyncRead for Fuse {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Fuse {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        if self.armed.swap(false, std::sync::atomic::Ordering::SeqCst) {
            panic!("the stream's write has a bug");
        }
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

struct FusedBroker(FakeBroker, Arc<std::sync::atomic::AtomicBool>);

impl Connector for FusedBroker {
    type Stream = Fuse;
    async fn connect(&self, addr: &str) -> io::Result<Fuse> {
        Ok(Fuse {
            inner: self.0.connect(addr).await?,
            armed: Arc::clone(&self.1),
        })
    }
}

/// From a review of the I/O path: a connection's writer that panics (a bug in a custom
/// connector's stream) fails its connection at once, as a write error does, and the record
/// goes again on a new one. Before, the task ended silently and the connection stayed open
/// and dead: the record waited for `request.timeout.ms` (30 s), and under acks=0 every later
/// record was reported sent while nothing reached the broker.
#[tokio::test(start_paused = true)]
async fn a_writer_that_panics_fails_its_connection() {
    let broker = FakeBroker::new("t", 1);
    let fuse = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let h =
        ProducerHandle::with_connector(config(&[]), FusedBroker(broker.clone(), Arc::clone(&fuse)))
            .unwrap();
    h.send(Record::new("t", "a")).await.unwrap();
    fuse.store(true, std::sync::atomic::Ordering::SeqCst);
    let start = Instant::now();
    let d = h.send(Record::new("t", "b")).await.unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "b waited {:?}",
        start.elapsed()
    );
    assert_eq!(d.offset, Some(1));
    assert_eq!(broker.log("t", 0), ["a", "b"]);
    h.close().await;
}

/// acks=0, the first connection stalled (60 s `request.timeout.ms`): 100 records of 1 kB
/// resolved (handed to the writer), most of them still unwritten.
async fn acks_zero_100_kb_held_by_a_stalled_writer() -> ProducerHandle {
    let (_broker, h) = acks_zero_first_connection_stalls("60000");
    let value = "x".repeat(1_000);
    let mut sent = Vec::new();
    for _ in 0..100 {
        let r = Record::new("t", value.clone()).with_partition(0);
        sent.push(h.enqueue(r).await.expect("accepted"));
    }
    for d in sent {
        d.await.expect("each handed to the writer");
    }
    h
}

/// From a review of the non-default modes: under acks=0 a record resolves (`Unacknowledged`)
/// once its request is handed to the connection's writer, and a flush resolved then too,
/// with the bytes still in the driver: a `flush()` followed by an abort or a process exit
/// lost records reported sent. A flush now also waits for the writers to write what they
/// hold, as the Java client's does. Here the broker stops reading: the flush waits (until
/// the connection's writes fail at `request.timeout.ms`, 60 s here).
#[tokio::test(start_paused = true)]
async fn acks_zero_flush_waits_for_the_writers() {
    let h = acks_zero_100_kb_held_by_a_stalled_writer().await;
    let flushed = h.flush_timeout(Duration::from_secs(5)).await;
    assert!(
        flushed.is_err(),
        "flushed with 100 kB unwritten: {flushed:?}"
    );
    h.abort().await;
}

/// From a review of the acks=0 flush: a flush waits for the bytes of the records before it,
/// not for every writer to be empty at once. Under steady acks=0 traffic the writers always
/// hold something, and the first version of the flush never returned while it lasted.
/// (Real time: the sender never lets a paused clock move.)
#[tokio::test]
async fn acks_zero_flush_returns_under_steady_traffic() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let broker = FakeBroker::new("t", 1);
    let cfg = config(&[("acks", "0"), ("retries", "0"), ("linger.ms", "0")]);
    let h = ProducerHandle::with_connector(cfg, broker.clone()).unwrap();
    h.send(Record::new("t", "first")).await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let (h, stop) = (h.clone(), stop.clone());
        tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                drop(h.enqueue(Record::new("t", "x".repeat(2_000))).await);
                n += 1;
                if n % 8 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            n
        })
    };
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    let flushed = h.flush_timeout(Duration::from_secs(10)).await;
    stop.store(true, Ordering::SeqCst);
    let n = sender.await.unwrap();
    assert!(
        flushed.is_ok(),
        "no flush under steady traffic ({n} records sent)"
    );
    assert!(n > 100, "steady traffic: {n} records");
    h.close().await;
}

/// From a review of the producer's lifecycle: under acks=0 a close hands each connection's
/// writer what it holds to finish, and takes the connection out of the driver's table; a
/// flush waiting for those bytes took that for written and returned while they still sat in
/// the writer (a `flush()` then an `abort()` lost records the flush had vouched for). It now
/// waits for the finishing writer too.
#[tokio::test(start_paused = true)]
async fn acks_zero_flush_waits_for_a_writer_finishing_at_close() {
    let h = acks_zero_100_kb_held_by_a_stalled_writer().await;
    let flush = {
        let h = h.clone();
        tokio::spawn(async move { h.flush().await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!flush.is_finished(), "flushed with 100 kB unwritten");
    let closed = h.close_timeout(Duration::from_millis(100)).await;
    assert!(closed.is_err(), "the stalled writer holds the close");
    tokio::task::yield_now().await;
    assert!(
        !flush.is_finished(),
        "the flush returned while the closing writer still held its bytes"
    );
    h.abort().await;
}

/// A producer (5 s request timeout, no linger) whose broker, once a first record went at full
/// speed, reads at 20 KB/s through a 4 KiB pipe (the socket buffers' room is written at once,
/// and counts as written), answering no Produce request if `silent`; and the connects so far.
async fn on_a_slow_link(silent: bool) -> (FakeBroker, ProducerHandle, usize) {
    let broker = FakeBroker::new("t", 4);
    broker.script.lock().unwrap().pipe = 4 * 1024;
    let h = ProducerHandle::with_connector(
        config(&[
            ("request.timeout.ms", "5000"),
            ("delivery.timeout.ms", "600000"),
            ("linger.ms", "0"),
        ]),
        broker.clone(),
    )
    .unwrap();
    let warm = h
        .enqueue(Record::new("t", "warm").with_partition(0))
        .await
        .unwrap();
    warm.await.unwrap();
    let connects = {
        let mut s = broker.script.lock().unwrap();
        s.read_rate = Some(20_000);
        s.silent_produce = silent;
        s.connects
    };
    (broker, h, connects)
}

/// The value of record `i` of [`forty_large_records`]: 10 KB.
fn large_value(i: usize) -> String {
    format!("{i:02}{}", "v".repeat(10_000))
}

/// 40 records of 10 KB over 4 partitions, round robin: their futures.
async fn forty_large_records(h: &ProducerHandle) -> Vec<DeliveryFuture> {
    let mut futures = Vec::new();
    for i in 0..40 {
        let r = Record::new("t", large_value(i)).with_partition((i % 4) as i32);
        futures.push(h.enqueue(r).await.unwrap());
    }
    futures
}

/// Review finding: a request's timeout ran from its creation, so on a link slower than what
/// was queued on it (here 20 KB/s, five requests of about 40 KB each, a 5 s request timeout)
/// the later requests timed out before they were written, and each time the connection closed
/// with the others half-sent. The writers now report how far they got, and a request's time
/// runs from when the writer reached it, as the Java client's does.
#[tokio::test(start_paused = true)]
async fn a_slow_link_does_not_time_out_requests_still_queued() {
    let (broker, h, connects) = on_a_slow_link(false).await;
    let futures = forty_large_records(&h).await;
    let start = Instant::now();
    for (i, f) in futures.into_iter().enumerate() {
        let d = f.await.unwrap_or_else(|e| panic!("record {i}: {e}"));
        assert_eq!(d.partition, (i % 4) as i32);
    }
    // 400 KB at 20 KB/s: 20 s, the link's pace, not a request timeout's.
    let took = start.elapsed();
    assert!(took >= Duration::from_secs(19), "{took:?}");
    let s = broker.script.lock().unwrap();
    assert_eq!(
        (s.connects, s.closed_by_client),
        (connects, 0),
        "no connection closed for a request timeout"
    );
    drop(s);
    for p in 0..4 {
        let log = broker.log("t", p);
        let expected: Vec<_> = (0..40)
            .filter(|i| i % 4 == p as usize)
            .map(large_value)
            .collect();
        let skip = usize::from(p == 0);
        assert_eq!(
            log[skip..],
            expected[..],
            "partition {p}, once each, in order"
        );
    }
}

/// The other side of `a_slow_link_does_not_time_out_requests_still_queued`, on the same link
/// (where the writer reports, or the later requests time out): a broker that reads on at the
/// link's pace but answers nothing still has its connection closed one request timeout after
/// the writer reached the first request (the reports extend only the requests after the
/// last write's start; with every report from byte 0, 9 s).
#[tokio::test(start_paused = true)]
async fn reports_of_a_slow_link_do_not_hide_an_unanswered_request() {
    let (broker, h, connects) = on_a_slow_link(true).await;
    let start = Instant::now();
    let _pending = forty_large_records(&h).await;
    // Virtual time: each step runs once every task waits.
    while broker.script.lock().unwrap().connects == connects {
        assert!(start.elapsed() < Duration::from_secs(30), "never given up");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let after = start.elapsed();
    assert!(
        (Duration::from_secs(5)..Duration::from_millis(5_500)).contains(&after),
        "the connection was replaced {after:?} after the first request was written"
    );
    h.abort().await;
}

/// Review finding: a runtime dropped under the producer relabelled every failure it drained
/// `DriverStopped`, also one the core had decided before (a batch refused INVALID_RECORD,
/// held behind an earlier batch of its partition that waits to be retried): the application
/// read a record the broker refuses for good as one to send again. It keeps its reason now;
/// the record waiting for its retry is the one that fails `DriverStopped`.
#[test]
fn a_runtime_shut_down_keeps_a_failure_decided_before() {
    use kprod_core::protocol::ErrorCode;
    use kprod_model::broker::Injection;
    let rt_a = one_worker_runtime();
    let rt_b = current_thread_runtime();
    let broker = FakeBroker::new("t", 1);
    let (h, a, b) = rt_a.block_on(async {
        let h = ProducerHandle::with_connector(
            config(&[
                ("linger.ms", "0"),
                ("retry.backoff.ms", "60000"),
                ("retry.backoff.max.ms", "60000"),
            ]),
            broker.clone(),
        )
        .unwrap();
        // Acknowledged first, so that the partition pipelines.
        let warm = h.enqueue(Record::new("t", "warm").with_partition(0)).await;
        warm.unwrap().await.unwrap();
        {
            let mut c = broker.cluster.lock().unwrap();
            let inject = &mut c.partition_mut("t", 0).inject;
            // `a` is written and answered NOT_ENOUGH_REPLICAS_AFTER_APPEND (retried with its
            // sequence after the backoff), `b` is refused INVALID_RECORD.
            for (code, append) in [
                (ErrorCode::NotEnoughReplicasAfterAppend, true),
                (ErrorCode::InvalidRecord, false),
            ] {
                inject.push_back(Injection { code, append });
            }
            // The first answer comes late, so that the second batch goes behind it.
            broker.script.lock().unwrap().produce =
                VecDeque::from([Action::Delay(Duration::from_millis(300))]);
        }
        let a = h.enqueue(Record::new("t", "a").with_partition(0)).await;
        until_written(&h, &broker, 1, "t", 0).await;
        let b = h.enqueue(Record::new("t", "b").with_partition(0)).await;
        // Both answered: `a` waits a minute for its retry, `b`'s refusal is held behind it.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let m = h.metrics().await;
            if m.batches_sent >= 3 && m.produce_requests_in_flight == 0 {
                break;
            }
            assert!(Instant::now() < deadline, "never answered: {m:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        (h, a.unwrap(), b.unwrap())
    });
    drop(rt_a);
    let e = rt_b.block_on(b).unwrap_err();
    assert_eq!(
        (e.kind, e.persisted),
        (
            ErrorKind::Failed(kprod_core::DeliveryError::Broker(ErrorCode::InvalidRecord)),
            Persistence::NotPersisted
        ),
        "the broker's refusal, not DriverStopped"
    );
    let e = rt_b.block_on(a).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::DriverStopped), "{e}");
    assert_eq!(
        e.persisted,
        Persistence::PossiblyPersisted,
        "written, its retry unanswered"
    );
    drop(h);
}
