//! Old protocol versions against real brokers (issue 14): kprod forced (by
//! `ProducerConfig::max_versions`) to every Produce version Apache Kafka 4.4.0 still serves, and
//! to every Metadata and InitProducerId version, then Apache Kafka 3.9.1, 2.4.1, 2.3.1 and
//! 0.11.0.3 (the last three with ZooKeeper) and librdkafka's mock cluster with their own maximum
//! versions, and a leader killed at old versions on 4.4.0 and at 2.3.1's own.
//!
//! Every run is checked twice: a connector that reads the request headers on the wire asserts
//! that exactly the expected (api key, version) pairs were sent, and the independent reader
//! (librdkafka's consumer) asserts the log: every record acknowledged, present once, in order,
//! at its offset.
//!
//! Needs `scripts/install-kafka.sh` and `scripts/install-kafka.sh kafka-3` (`kafka-2.4`,
//! `kafka-2`, `kafka-0.11`), and Java 17+; each
//! test starts its own cluster and fails if it cannot.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use kprod_core::protocol::{api_key, MaxVersions};
use kprod_core::ProducerConfig;
use kprod_tests::e2e::{assert_complete, close, runtime};
use kprod_tests::kafka::{
    KafkaOptions, KAFKA_0_11_VERSION, KAFKA_2_4_VERSION, KAFKA_2_VERSION, KAFKA_3_VERSION,
};
use kprod_tests::ledger::Ledger;
use kprod_tests::reader::read_topic;
use kprod_tests::seed::{fresh_run_id, run_seed, SeedPlan, Source, Verdict};
use kprod_tests::Kafka;
use kprod_tokio::{Connector, ProducerHandle, TcpConnector};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

const PARTITIONS: i32 = 3;
const TIMEOUT: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------------------------
// A connector that records the (api key, version) of every request written.
// ---------------------------------------------------------------------------------------------

type Seen = Arc<Mutex<BTreeSet<(i16, i16)>>>;

#[derive(Clone, Default)]
struct Sniffer {
    seen: Seen,
}

impl Sniffer {
    /// The (api key, version) pairs of Produce, Metadata and InitProducerId requests.
    fn data_apis(&self) -> BTreeSet<(i16, i16)> {
        let keys = [
            api_key::PRODUCE,
            api_key::METADATA,
            api_key::INIT_PRODUCER_ID,
        ];
        self.seen
            .lock()
            .unwrap()
            .iter()
            .copied()
            .filter(|(k, _)| keys.contains(k))
            .collect()
    }
}

impl Connector for Sniffer {
    type Stream = Sniffed;
    async fn connect(&self, addr: &str) -> io::Result<Sniffed> {
        Ok(Sniffed {
            inner: TcpConnector::default().connect(addr).await?,
            seen: self.seen.clone(),
            pending: Vec::new(),
            skip: 0,
        })
    }
}

/// A TCP stream whose written bytes are parsed as request frames.
struct Sniffed {
    inner: TcpStream,
    seen: Seen,
    /// Bytes of the current frame's beginning (size prefix and the first header fields).
    pending: Vec<u8>,
    /// Bytes of the current frame still to skip once its header was read.
    skip: usize,
}

impl Sniffed {
    fn observe(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (8 - self.pending.len()).min(bytes.len());
            self.pending.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.pending.len() == 8 {
                let p = &self.pending;
                let size = i32::from_be_bytes([p[0], p[1], p[2], p[3]]);
                let key = i16::from_be_bytes([p[4], p[5]]);
                let version = i16::from_be_bytes([p[6], p[7]]);
                self.seen.lock().unwrap().insert((key, version));
                self.skip = usize::try_from(size).expect("a sane frame size") - 4;
                self.pending.clear();
            }
        }
    }
}

impl AsyncRead for Sniffed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Sniffed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.observe(&buf[..n]);
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(mut n)) = r {
            for b in bufs {
                let k = n.min(b.len());
                self.observe(&b[..k]);
                n -= k;
                if n == 0 {
                    break;
                }
            }
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

// ---------------------------------------------------------------------------------------------
// Runs.
// ---------------------------------------------------------------------------------------------

fn caps(produce: i16, metadata: i16, init_producer_id: i16) -> MaxVersions {
    MaxVersions {
        produce: Some(produce),
        metadata: Some(metadata),
        init_producer_id: Some(init_producer_id),
        api_versions: None,
    }
}

fn config(bootstrap: &str, max_versions: MaxVersions) -> ProducerConfig {
    ProducerConfig {
        bootstrap_servers: bootstrap.split(',').map(str::to_owned).collect(),
        client_id: Some("kprod-versions".into()),
        request_timeout: Duration::from_secs(5),
        retry_backoff: Duration::from_millis(20),
        reconnect_backoff: Duration::from_millis(20),
        allow_auto_topic_creation: false,
        max_versions,
        ..ProducerConfig::default()
    }
}

/// The expected pairs for Produce `p`, Metadata `m`, InitProducerId `i`.
fn expected(p: i16, m: i16, i: i16) -> BTreeSet<(i16, i16)> {
    [
        (api_key::PRODUCE, p),
        (api_key::METADATA, m),
        (api_key::INIT_PRODUCER_ID, i),
    ]
    .into()
}

/// A seed-like run (a ticker every millisecond and two overlapping bursts of 2,000 records
/// over 3 partitions) on a fresh topic, under `max_versions`; asserts the versions on the
/// wire and the log read back by the independent reader.
fn seed_like(kafka: &Kafka, label: &str, max_versions: MaxVersions, want: BTreeSet<(i16, i16)>) {
    let started = Instant::now();
    let topic = format!("kprod-versions-{label}");
    kafka.create_topic(&topic, PARTITIONS, kafka.len().min(3) as i32, None);
    let plan = SeedPlan {
        source: Source {
            topic: topic.clone(),
            partitions: PARTITIONS,
            run: fresh_run_id(),
            record_size: 100,
        },
        ticks: 300,
        period: Duration::from_millis(1),
        bursts: 2,
        burst_size: 2_000,
        resolve_timeout: TIMEOUT,
    };
    let sniffer = Sniffer::default();
    let cfg = config(&kafka.bootstrap(), max_versions);
    let report = runtime().block_on(async {
        let producer = ProducerHandle::with_connector(cfg, sniffer.clone()).expect("valid config");
        let report = run_seed(&producer, &plan).await;
        close(producer).await;
        report
    });
    let log = read_topic(&kafka.bootstrap(), &topic, PARTITIONS, TIMEOUT)
        .unwrap_or_else(|e| panic!("the independent reader failed: {e}"));
    let v = Verdict::compute(plan.source.run, PARTITIONS, &report.sent, &log);
    let seen = sniffer.data_apis();
    println!(
        "Kafka {} {label}: versions on the wire {seen:?}, {} records, {:.2?}",
        kafka.version(),
        v.sent,
        started.elapsed()
    );
    assert_eq!(seen, want, "{label}: versions on the wire");
    assert_eq!(v.sent, 4_300);
    assert_complete(&v);
    assert_eq!(v.acknowledged_without_offset, 0, "{v}");
}

/// Metadata and InitProducerId versions paired with Produce `p`, so that the ten Produce
/// versions also cover Metadata v1..v12 and InitProducerId v0..v5.
fn pairing(p: i16) -> (i16, i16) {
    let metadata = match p {
        3 => 1,
        4 => 2,
        5 => 3,
        6 => 4,
        7 => 5,
        8 => 6,
        9 => 7,
        10 => 8,
        11 => 10,
        _ => 12,
    };
    (metadata, (p - 3) % 6)
}

/// Kafka 4.4 serves Produce v3..v13 (v0..v2 were removed by KIP-896), Metadata v0..v13 and
/// InitProducerId v0..v5: kprod at every Produce version it has from v3 to v12, with every
/// Metadata version from v1 and every InitProducerId version, one seed-like run each; the
/// uncapped producer speaks Produce v12, Metadata v12, InitProducerId v5.
#[test]
fn kafka_4_4_at_every_version() {
    let kafka = Kafka::start(1);
    seed_like(&kafka, "uncapped", MaxVersions::NONE, expected(12, 12, 5));
    let mut metadata_seen = BTreeSet::new();
    let mut pid_seen = BTreeSet::new();
    for p in 3..=12 {
        let (m, i) = pairing(p);
        metadata_seen.insert(m);
        pid_seen.insert(i);
        seed_like(
            &kafka,
            &format!("p{p}-m{m}-i{i}"),
            caps(p, m, i),
            expected(p, m, i),
        );
    }
    // Metadata v9 and v11 are not in the pairing: two more runs.
    for (m, i) in [(9, 2), (11, 3)] {
        metadata_seen.insert(m);
        seed_like(
            &kafka,
            &format!("p9-m{m}-i{i}"),
            caps(9, m, i),
            expected(9, m, i),
        );
    }
    assert_eq!(metadata_seen, (1..=12).collect());
    assert_eq!(pid_seen, (0..=5).collect());
}

/// A leader killed and restarted mid-run on 3 nodes (replication 3, `min.insync.replicas=2`)
/// while kprod speaks old versions: Produce v3 (no leader hints, no log start offset),
/// Metadata v1, InitProducerId v0 (no KIP-360: a new producer id instead of an epoch bump),
/// then Produce v7 / Metadata v5 / InitProducerId v1 (what Redpanda and Event Hubs serve).
#[test]
fn kafka_4_4_leader_change_at_old_versions() {
    let mut kafka = Kafka::start_with(KafkaOptions::new(3));
    for (p, m, i) in [(3, 1, 0), (7, 5, 1)] {
        leader_change(
            &mut kafka,
            &format!("p{p}"),
            caps(p, m, i),
            expected(p, m, i),
        );
    }
}

/// On 3 nodes (replication 3, `min.insync.replicas=2`): 600 paced records, the leader of
/// partition 0 SIGKILLed, 600 more while its leaderships move, the node restarted, 600 more;
/// asserts the versions on the wire, every record delivered once, in order, at its offset,
/// and no local epoch bump where the broker has no KIP-360 (InitProducerId below v3).
fn leader_change(
    kafka: &mut Kafka,
    label: &str,
    max_versions: MaxVersions,
    want: BTreeSet<(i16, i16)>,
) {
    let started = Instant::now();
    let topic = format!("kprod-versions-leader-{label}");
    kafka.create_topic(&topic, PARTITIONS, 3, Some(2));
    let rt = runtime();
    let sniffer = Sniffer::default();
    let producer = rt.block_on(async {
        ProducerHandle::with_connector(config(&kafka.bootstrap(), max_versions), sniffer.clone())
            .expect("valid config")
    });
    let mut ledger = Ledger::new(&topic, PARTITIONS);
    let paced = |ledger: &mut Ledger, n: usize| {
        rt.block_on(async {
            for k in 0..n {
                ledger
                    .enqueue(&producer, (k % PARTITIONS as usize) as i32)
                    .await;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    paced(&mut ledger, 600);
    let leader = kafka.leader(&topic, 0);
    let asked_before = rt.block_on(producer.metrics()).metadata_requests;
    kafka.kill(leader);
    paced(&mut ledger, 600);
    let new_leader = kafka.wait_leader_moved(&topic, 0, leader);
    kafka.restart(leader);
    paced(&mut ledger, 600);
    rt.block_on(ledger.resolve(TIMEOUT));
    let summary = rt.block_on(ledger.read_and_check(&kafka.bootstrap()));
    let metrics = rt.block_on(producer.metrics());
    rt.block_on(close(producer));
    let seen = sniffer.data_apis();
    println!(
        "Kafka {} {label}: versions on the wire {seen:?}, node {leader} killed, leader \
         {new_leader}, {summary:?}, {:.2?}",
        kafka.version(),
        started.elapsed()
    );
    assert_eq!(seen, want, "{label}: versions on the wire");
    // The kill was felt: partition 0's new leader can only be learned from a metadata answer
    // asked for after it (the periodic refresh is minutes away).
    assert!(
        metrics.metadata_requests > asked_before,
        "{label}: no metadata request after the leader was killed ({metrics:?})"
    );
    assert_eq!(summary.sent, 1_800);
    assert!(summary.all_delivered(), "{summary:?}");
    assert_eq!(summary.in_log, summary.sent, "{summary:?}");
    assert_eq!(summary.delivered_without_offset, 0, "{summary:?}");
    // Without KIP-360 (InitProducerId below v3) a bump is a new producer id, never a local
    // epoch bump.
    let init = want
        .iter()
        .find(|(k, _)| *k == api_key::INIT_PRODUCER_ID)
        .map_or(i16::MAX, |&(_, v)| v);
    if init < 3 {
        assert_eq!(metrics.epoch_bumps, 0, "{metrics:?}");
    }
}

/// Apache Kafka 3.9.1 (KRaft) negotiates its own versions (Produce v11, Metadata v12,
/// InitProducerId v5) and still serves the old ones: Produce v3 with InitProducerId v0.
#[test]
fn kafka_3_9_own_versions_and_old_ones() {
    let kafka = Kafka::start_with(KafkaOptions::new(1).version(KAFKA_3_VERSION));
    assert_eq!(kafka.version(), "3.9.1");
    seed_like(
        &kafka,
        "k39-uncapped",
        MaxVersions::NONE,
        expected(11, 12, 5),
    );
    seed_like(&kafka, "k39-p3-m1-i0", caps(3, 1, 0), expected(3, 1, 0));
    seed_like(&kafka, "k39-p8-m9-i2", caps(8, 9, 2), expected(8, 9, 2));
}

/// Apache Kafka 2.3.1, with ZooKeeper, negotiates its own versions: Produce v7, Metadata v8,
/// InitProducerId v1 (no KIP-360, so any bump is a new producer id); then forced down to
/// Produce v3, Metadata v1, InitProducerId v0.
#[test]
fn kafka_2_3_own_versions_and_old_ones() {
    let kafka = Kafka::start_with(KafkaOptions::new(1).version(KAFKA_2_VERSION));
    assert_eq!(kafka.version(), "2.3.1");
    seed_like(&kafka, "k23-uncapped", MaxVersions::NONE, expected(7, 8, 1));
    seed_like(&kafka, "k23-p3-m1-i0", caps(3, 1, 0), expected(3, 1, 0));
}

/// Apache Kafka 2.4.1, with ZooKeeper, negotiates its own versions: Produce v8, Metadata v9,
/// InitProducerId v2 (still no KIP-360).
#[test]
fn kafka_2_4_own_versions() {
    let kafka = Kafka::start_with(KafkaOptions::new(1).version(KAFKA_2_4_VERSION));
    assert_eq!(kafka.version(), "2.4.1");
    seed_like(&kafka, "k24-uncapped", MaxVersions::NONE, expected(8, 9, 2));
}

/// A leader SIGKILLed and restarted on three Apache Kafka 2.3.1 nodes (ZooKeeper's session
/// expiry and the ZooKeeper controller move the leaderships), at the broker's own versions.
#[test]
fn kafka_2_3_leader_change_on_three_nodes() {
    let mut kafka = Kafka::start_with(KafkaOptions::new(3).version(KAFKA_2_VERSION));
    leader_change(&mut kafka, "k23", MaxVersions::NONE, expected(7, 8, 1));
}

/// Apache Kafka 0.11.0.3, the first release with idempotence, with ZooKeeper: Produce v3
/// (deduplication against the last batch only, so one batch of a partition in flight at a
/// time), Metadata v4, InitProducerId v0.
#[test]
fn kafka_0_11_own_versions() {
    let kafka = Kafka::start_with(KafkaOptions::new(1).version(KAFKA_0_11_VERSION));
    assert_eq!(kafka.version(), "0.11.0.3");
    seed_like(
        &kafka,
        "k011-uncapped",
        MaxVersions::NONE,
        expected(3, 4, 0),
    );
}

/// A leader SIGKILLed and restarted on three Apache Kafka 0.11.0.3 nodes: Produce v3, whose
/// broker deduplicates against the last batch only, across a leadership move.
#[test]
fn kafka_0_11_leader_change_on_three_nodes() {
    let mut kafka = Kafka::start_with(KafkaOptions::new(3).version(KAFKA_0_11_VERSION));
    leader_change(&mut kafka, "k011", MaxVersions::NONE, expected(3, 4, 0));
}

/// A node SIGKILLed and started again at once, with ZooKeeper: its old session's
/// registration is still there (until that session expires), and the broker refuses to
/// start on it (2.3: NodeExists; 0.11: "already registered") and exits. The harness must see
/// that exit and start the node again until it registers; the producer then delivers what it
/// was given before the kill, while the node was away, and after.
fn restarted_right_after_sigkill(version: &'static str, label: &str) {
    // A 9 s session (ZooKeeper's tick of 500 ms allows up to 10 s), longer than a broker
    // takes to start here, so that the first start after the kill surely finds the old
    // registration.
    let mut kafka = Kafka::start_with(
        KafkaOptions::new(1)
            .version(version)
            .set("zookeeper.session.timeout.ms", "9000"),
    );
    let topic = format!("kprod-versions-restart-{label}");
    kafka.create_topic(&topic, PARTITIONS, 1, None);
    let rt = runtime();
    let producer = rt.block_on(async {
        ProducerHandle::connect(config(&kafka.bootstrap(), MaxVersions::NONE))
            .expect("valid config")
    });
    let mut ledger = Ledger::new(&topic, PARTITIONS);
    rt.block_on(ledger.enqueue_n(&producer, 300));
    rt.block_on(ledger.resolve(TIMEOUT));
    kafka.kill(1);
    rt.block_on(ledger.enqueue_n(&producer, 300));
    let restarted = Instant::now();
    kafka.restart(1);
    let back_after = restarted.elapsed();
    rt.block_on(ledger.enqueue_n(&producer, 300));
    rt.block_on(ledger.resolve(TIMEOUT));
    let summary = rt.block_on(ledger.read_and_check(&kafka.bootstrap()));
    rt.block_on(close(producer));
    let log = std::fs::read_to_string(kafka.dir().join("node-1").join("kafka.log"))
        .expect("node 1's log");
    let refused = log.matches("NodeExists").count() + log.matches("already registered").count();
    println!(
        "Kafka {} {label}: back {back_after:.2?} after the restart began, log lines of a \
         refused start: {refused}, {summary:?}",
        kafka.version()
    );
    assert!(
        refused >= 1,
        "the restart never met the old registration, so the test did not test it"
    );
    assert_eq!(summary.sent, 900);
    assert!(summary.all_delivered(), "{summary:?}");
    assert_eq!(summary.in_log, summary.sent, "{summary:?}");
    assert_eq!(summary.delivered_without_offset, 0, "{summary:?}");
}

#[test]
fn kafka_2_3_node_restarted_right_after_sigkill() {
    restarted_right_after_sigkill(KAFKA_2_VERSION, "k23");
}

#[test]
fn kafka_0_11_node_restarted_right_after_sigkill() {
    restarted_right_after_sigkill(KAFKA_0_11_VERSION, "k011");
}

/// The pairing above covers every Metadata and InitProducerId version (checked without a
/// broker so that a change to it is caught at once).
#[test]
fn the_pairing_covers_every_version() {
    let mut m: BTreeMap<i16, usize> = BTreeMap::new();
    let mut i: BTreeMap<i16, usize> = BTreeMap::new();
    for p in 3..=12 {
        let (a, b) = pairing(p);
        *m.entry(a).or_default() += 1;
        *i.entry(b).or_default() += 1;
    }
    m.insert(9, 1);
    m.insert(11, 1);
    assert_eq!(
        m.keys().copied().collect::<Vec<_>>(),
        (1..=12).collect::<Vec<_>>()
    );
    assert_eq!(
        i.keys().copied().collect::<Vec<_>>(),
        (0..=5).collect::<Vec<_>>()
    );
}

/// librdkafka's mock cluster (librdkafka 2.12.1, three brokers) with its own maximum
/// versions (Produce v10, Metadata v12, InitProducerId v4, from its ApiVersions v2 answer):
/// kprod speaks exactly those; then forced down to Produce v3, Metadata v1, InitProducerId v0.
/// The mock checks no sequences, so the check is every record acknowledged at increasing
/// offsets per partition.
#[test]
fn librdkafka_mock_cluster_at_its_own_versions() {
    use kprod_core::protocol::api_versions::ApiVersionsRequest;
    use rdkafka::mocking::MockCluster;
    use rdkafka::producer::DefaultProducerContext;

    let mock: MockCluster<'static, DefaultProducerContext> =
        MockCluster::new(3).expect("mock cluster");
    let topic = "kprod-versions-mock";
    mock.create_topic(topic, PARTITIONS, 3)
        .expect("create topic");
    let bootstrap = mock.bootstrap_servers();
    let first: std::net::SocketAddr = bootstrap.split(',').next().unwrap().parse().unwrap();
    let hello = ApiVersionsRequest::default();
    let theirs = kprod_tests::WireClient::connect(first)
        .expect("connect to the mock")
        .call(&hello, 2)
        .expect("ApiVersions v2");
    let own = kprod_core::protocol::negotiate_versions(&theirs, 2, &MaxVersions::NONE)
        .expect("the mock serves idempotence");
    println!("librdkafka mock: ApiVersions v2 answer gives {own}");
    assert_eq!(
        (own.produce, own.metadata, own.init_producer_id),
        (10, 12, 4),
        "librdkafka 2.12.1's mock maxima"
    );
    for (label, max_versions, want) in [
        (
            "own",
            MaxVersions::NONE,
            expected(own.produce, own.metadata, own.init_producer_id),
        ),
        ("p3-m1-i0", caps(3, 1, 0), expected(3, 1, 0)),
    ] {
        let sniffer = Sniffer::default();
        let cfg = config(&bootstrap, max_versions);
        let offsets = runtime().block_on(async {
            let producer =
                ProducerHandle::with_connector(cfg, sniffer.clone()).expect("valid config");
            let mut futures = Vec::new();
            for k in 0..900 {
                let mut r = kprod_core::Record::new(topic, format!("{label}-{k}"));
                r.partition = Some(k % PARTITIONS);
                futures.push(producer.enqueue(r).await.expect("enqueued"));
            }
            let mut offsets: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
            for f in futures {
                let d = tokio::time::timeout(TIMEOUT, f)
                    .await
                    .expect("resolved in time")
                    .expect("delivered");
                offsets
                    .entry(d.partition)
                    .or_default()
                    .push(d.offset.expect("an offset"));
            }
            close(producer).await;
            offsets
        });
        println!(
            "librdkafka mock {label}: versions on the wire {:?}",
            sniffer.data_apis()
        );
        assert_eq!(sniffer.data_apis(), want, "{label}");
        for (p, o) in &offsets {
            assert_eq!(o.len(), 300, "partition {p}");
            assert!(
                o.windows(2).all(|w| w[0] < w[1]),
                "{label}: offsets of {p} increase"
            );
        }
    }
}
