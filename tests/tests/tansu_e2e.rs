//! kprod end to end against a real Tansu 0.6.0 broker, checked by an independent reader.
//!
//! Each test starts its own broker (`scripts/install-tansu.sh`, or `KPROD_TANSU=/path/to/tansu`;
//! the harness fails with a clear message if it cannot), sends with `kprod_tokio`, waits for
//! every delivery future, closes the producer, and reads the topic back with librdkafka's
//! consumer ([`kprod_tests::reader`]), which uses no kprod code. [`Verdict`] then compares, per
//! record, what kprod reported with what the log holds.
//!
//! Run with `--nocapture` to see the figures.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kprod_tests::e2e::{
    assert_keyed, assert_seed, print_seed_figures, produce_keyed, produce_seed, KeyedPlan,
};
use kprod_tests::reader::{read_topic, ReadRecord};
use kprod_tests::seed::{fresh_run_id, SeedPlan, Source, Verdict};
use kprod_tests::Tansu;

/// How long every record may take to resolve once its stream has enqueued everything.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the reader may take.
const READ_TIMEOUT: Duration = Duration::from_secs(120);

fn read(tansu: &Tansu, topic: &str, partitions: i32) -> BTreeMap<i32, Vec<ReadRecord>> {
    read_topic(&tansu.addr().to_string(), topic, partitions, READ_TIMEOUT).unwrap_or_else(|e| {
        panic!(
            "the independent reader failed: {e}\nbroker log:\n{}",
            tansu.log_tail(20)
        )
    })
}

/// The seed story (KafkaJS lost records and died with OUT_OF_ORDER_SEQUENCE_NUMBER when it sent
/// every 1 ms while bursts went out in batches), with kprod: a ticker sends 2,000 records, one
/// per millisecond, round-robin over 3 partitions, while three bursts of 10,000 overlapping
/// `enqueue()`s each (each burst its own task, all its records outstanding before the first is
/// awaited) go round-robin over the same partitions. Every future resolves, every record is
/// acknowledged, and the log read back holds each record exactly once, at its acknowledged
/// offset, in send order per partition and stream.
fn seed_scenario(max_in_flight: u32) {
    const PARTITIONS: i32 = 3;
    let topic = format!("kprod-seed-inflight-{max_in_flight}");
    let started = Instant::now();
    let tansu = Tansu::start();
    tansu.create_topic(&topic, PARTITIONS as u32);
    let brokers = tansu.addr().to_string();
    let plan = SeedPlan {
        source: Source {
            topic: topic.clone(),
            partitions: PARTITIONS,
            run: fresh_run_id(),
            record_size: 100,
        },
        ticks: 2_000,
        period: Duration::from_millis(1),
        bursts: 3,
        burst_size: 10_000,
        resolve_timeout: RESOLVE_TIMEOUT,
    };

    let report = produce_seed(&brokers, max_in_flight, &plan);
    let produced = started.elapsed();
    let log = read(&tansu, &topic, PARTITIONS);
    let v = Verdict::compute(plan.source.run, PARTITIONS, &report.sent, &log);
    println!("seed scenario, max.in.flight.requests.per.connection={max_in_flight}:");
    print_seed_figures(&report);
    println!("{v}");
    println!(
        "elapsed: {produced:.2?} to produce (broker start included), {:.2?} in all",
        started.elapsed()
    );

    assert_seed(&plan, &report, &v);
    for p in 0..PARTITIONS {
        let q = &v.partitions[&p];
        assert_eq!(q.sent, q.read, "partition {p}: {q:?}");
    }
}

/// The seed scenario with up to five requests in flight per connection (kprod's default).
#[test]
fn seed_scenario_ticker_and_bursts() {
    seed_scenario(5);
}

/// The seed scenario with the seed story's own setting, `maxInFlightRequests: 1`.
#[test]
fn seed_scenario_ticker_and_bursts_one_in_flight() {
    seed_scenario(1);
}

/// 100,000 keyed records over 6 partitions, from 4 concurrent tasks of 25,000 records, each
/// cycling over its own 250 keys. Besides the seed checks: every key's records are on the
/// partition the Java default partitioner chooses (`partition_for_key`, checked on the keys read
/// back), and per key the send order is kept.
#[test]
fn hundred_thousand_keyed_records_over_six_partitions() {
    const TOPIC: &str = "kprod-keyed";
    const PARTITIONS: i32 = 6;
    let started = Instant::now();
    let tansu = Tansu::start();
    tansu.create_topic(TOPIC, PARTITIONS as u32);
    let plan = KeyedPlan {
        source: Source {
            topic: TOPIC.to_owned(),
            partitions: PARTITIONS,
            run: fresh_run_id(),
            record_size: 100,
        },
        streams: 4,
        per_stream: 25_000,
        keys_per_stream: 250,
        resolve_timeout: RESOLVE_TIMEOUT,
    };
    let (sent, produce_time) = produce_keyed(&tansu.addr().to_string(), &plan);
    let read_started = Instant::now();
    let log = read(&tansu, TOPIC, PARTITIONS);
    let read_time = read_started.elapsed();
    let v = Verdict::compute(plan.source.run, PARTITIONS, &sent, &log);
    let bytes: usize = sent.iter().map(|s| s.bytes).sum();
    println!(
        "{} keyed records ({bytes} bytes) resolved in {produce_time:.2?}: {:.0} records/s, \
         {:.2} MB/s; read back in {read_time:.2?}",
        sent.len(),
        sent.len() as f64 / produce_time.as_secs_f64(),
        bytes as f64 / 1e6 / produce_time.as_secs_f64()
    );
    println!("{v}");
    println!("elapsed: {:.2?}", started.elapsed());
    assert_keyed(&plan, &sent, &log, &v);
}

/// `metadata.max.idle.ms` once every topic is idle: the periodic refresh then names no topic
/// (an empty list, which Metadata v1+ reads as "none"). Tansu answers those requests (only one
/// metadata request is in flight at a time, so the count can grow only with answers) on the
/// same connection, and a record for the topic afterwards names it again and is delivered
/// right after the earlier one.
#[test]
fn a_producer_whose_every_topic_is_idle_keeps_refreshing_and_sends_again() {
    use kprod_core::ProducerConfig;
    use kprod_tokio::{ProducerHandle, Record};

    const TOPIC: &str = "kprod-all-idle";
    let tansu = Tansu::start();
    tansu.create_topic(TOPIC, 1);
    let rt = kprod_tests::e2e::runtime();
    let config = ProducerConfig {
        bootstrap_servers: vec![tansu.addr().to_string()],
        metadata_max_age: Duration::from_millis(200),
        metadata_max_idle: Some(Duration::from_secs(1)),
        ..ProducerConfig::default()
    };
    let producer = rt.block_on(async { ProducerHandle::connect(config).expect("valid config") });
    let deadline = Instant::now() + Duration::from_secs(60);
    rt.block_on(async {
        let first = (producer.send(Record::new(TOPIC, "first")).await).expect("delivered");
        assert_eq!(first.offset, Some(0));
        // Polled, not slept on: the topic goes idle one to two seconds after the send.
        while producer.metrics().await.idle_topics == 0 {
            assert!(Instant::now() < deadline, "the topic never went idle");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let m = producer.metrics().await;
        while producer.metrics().await.metadata_requests < m.metadata_requests + 5 {
            assert!(
                Instant::now() < deadline,
                "requests naming no topic went unanswered: {:?}",
                producer.metrics().await
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            producer.metrics().await.connections_opened,
            m.connections_opened,
            "no connection was lost to them"
        );
        let second = (producer.send(Record::new(TOPIC, "second")).await).expect("delivered");
        assert_eq!(second.offset, Some(1));
        assert_eq!(producer.metrics().await.idle_topics, 0);
        producer.close().await;
    });
    let log = read(&tansu, TOPIC, 1);
    let values: Vec<&[u8]> = log[&0]
        .iter()
        .map(|r| r.value.as_deref().unwrap_or(&[]))
        .collect();
    assert_eq!(values, [&b"first"[..], &b"second"[..]]);
}

/// Tansu restarted without its state (SIGKILL, memory storage) forgets the producer id and
/// answers UNKNOWN_PRODUCER_ID to every epoch of it, sequence 0 included. kprod takes a new
/// producer id and goes on: records sent after the restart are delivered, with at most one
/// epoch bump on the way. Before, it bumped its epoch locally at each refusal, unthrottled,
/// until the epoch ran out (about 32,767 bumps and 15–30 s with nothing delivered).
#[test]
fn a_tansu_restarted_without_its_state_gets_a_new_producer_id_and_the_records() {
    const TOPIC: &str = "kprod-restarted";
    let mut tansu = Tansu::start();
    tansu.create_topic(TOPIC, 2);
    let brokers = tansu.addr().to_string();
    let rt = kprod_tests::e2e::runtime();
    let producer = rt.block_on(async {
        kprod_tokio::ProducerHandle::from_properties(&[
            ("bootstrap.servers", brokers.as_str()),
            ("linger.ms", "0"),
            ("request.timeout.ms", "2000"),
            ("delivery.timeout.ms", "60000"),
        ])
        .unwrap()
    });
    let send = |v: String, p: i32| {
        let producer = &producer;
        rt.block_on(async move {
            producer
                .send(kprod_tokio::Record::new(TOPIC, v).with_partition(p))
                .await
        })
    };
    for p in 0..2 {
        let d = send(format!("before-{p}"), p).expect("delivered before the restart");
        assert_eq!(d.offset, Some(0));
    }
    tansu.restart();
    tansu.create_topic(TOPIC, 2);
    let started = Instant::now();
    for i in 0..3 {
        for p in 0..2 {
            let d = send(format!("after-{i}-{p}"), p).unwrap_or_else(|e| {
                panic!(
                    "not delivered after the restart: {e}\nbroker log:\n{}",
                    tansu.log_tail(20)
                )
            });
            assert_eq!(d.offset, Some(i), "partition {p}");
        }
    }
    let m = rt.block_on(producer.metrics());
    rt.block_on(producer.close());
    println!(
        "after the restart: 6 records in {:?}; {} producer ids, {} epoch bumps, {} batches sent",
        started.elapsed(),
        m.producer_ids,
        m.epoch_bumps,
        m.batches_sent
    );
    assert_eq!(m.producer_ids, 2, "a new producer id after the restart");
    assert!(m.epoch_bumps <= 2, "{} epoch bumps", m.epoch_bumps);
    assert!(
        m.batches_sent <= 16,
        "{} batches sent for 8 records",
        m.batches_sent
    );
    // What the restarted broker holds, read without kprod: exactly the records sent after it,
    // in order.
    let log = read(&tansu, TOPIC, 2);
    for p in 0..2 {
        let values: Vec<String> = (log.get(&p).map(Vec::as_slice).unwrap_or_default().iter())
            .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
            .collect();
        let want: Vec<String> = (0..3).map(|i| format!("after-{i}-{p}")).collect();
        assert_eq!(values, want, "partition {p}");
    }
}

/// A first bootstrap server that takes connections and never answers them (a listener that
/// never reads: the kernel completes the handshake) does not hold the producer for
/// `request.timeout.ms` (30 s here): after `bootstrap_patience` (1 s) the next bootstrap server,
/// Tansu, is tried alongside, and the record is delivered while the first connection's
/// ApiVersions request is still unanswered (still in flight when the delivery is reported).
#[test]
fn a_bootstrap_server_that_never_answers_is_passed_over() {
    const TOPIC: &str = "kprod-hung-bootstrap";
    let tansu = Tansu::start();
    tansu.create_topic(TOPIC, 1);
    let hung = std::net::TcpListener::bind("127.0.0.1:0").expect("a local listener");
    let brokers = format!("{},{}", hung.local_addr().unwrap(), tansu.addr());
    let rt = kprod_tests::e2e::runtime();
    let started = Instant::now();
    let (delivery, m) = rt.block_on(async {
        let producer = kprod_tokio::ProducerHandle::from_properties(&[
            ("bootstrap.servers", brokers.as_str()),
            ("linger.ms", "0"),
            ("request.timeout.ms", "30000"),
        ])
        .unwrap();
        let d = producer
            .send(kprod_tokio::Record::new(TOPIC, "through the second").with_partition(0))
            .await;
        let m = producer.metrics().await;
        producer.close().await;
        (d, m)
    });
    let took = started.elapsed();
    let d = delivery
        .unwrap_or_else(|e| panic!("not delivered: {e}\nbroker log:\n{}", tansu.log_tail(20)));
    println!(
        "delivered at offset {:?} after {took:?}; {} connections opened, {} requests in flight",
        d.offset, m.connections_opened, m.requests_in_flight
    );
    assert_eq!(d.offset, Some(0));
    // Far below the 30 s request timeout the hung server's request would take (the bootstrap
    // patience is 1 s; the bound leaves room for a slow machine).
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(
        m.requests_in_flight >= 1,
        "the hung server's ApiVersions should still be unanswered, not timed out: {m:?}"
    );
    assert!(m.connections_opened >= 2, "{m:?}");
    drop(hung);
}

/// `partition_count` (Java's `partitionsFor`) against a real broker: the count of a topic
/// the producer never sent to, the last partition taken by a record, and a topic that does
/// not exist (automatic creation off) reported as such after `max.block.ms`.
#[test]
fn partition_count_tells_a_topics_partitions() {
    use kprod_core::protocol::ErrorCode;
    use kprod_core::ProducerConfig;
    use kprod_tokio::{PartitionCountError, ProducerHandle, Record};

    const TOPIC: &str = "kprod-partition-count";
    let tansu = Tansu::start();
    tansu.create_topic(TOPIC, 5);
    let rt = kprod_tests::e2e::runtime();
    let config = ProducerConfig {
        bootstrap_servers: vec![tansu.addr().to_string()],
        allow_auto_topic_creation: false,
        max_block: Duration::from_secs(1),
        ..ProducerConfig::default()
    };
    rt.block_on(async {
        let producer = ProducerHandle::connect(config).expect("valid config");
        assert_eq!(producer.partition_count(TOPIC).await, Ok(5));
        let last = Record::new(TOPIC, "last").with_partition(4);
        let d = producer.send(last).await.expect("delivered");
        assert_eq!((d.partition, d.offset), (4, Some(0)));
        let e = producer.partition_count("kprod-no-such-topic").await;
        assert!(
            matches!(
                e,
                Err(PartitionCountError::Timeout {
                    last_error: Some(ErrorCode::UnknownTopicOrPartition),
                    ..
                })
            ),
            "{e:?}"
        );
        producer.close().await;
    });
    let log = read(&tansu, TOPIC, 5);
    assert_eq!(log[&4].len(), 1);
}

/// `connections.max.idle.ms` on the producer (300 ms here): idle between bursts for longer,
/// it closes its connections and opens them again for the next burst (`connections_opened`
/// grows each time); Tansu sees ordinary disconnects and reconnects, and every record of
/// every burst is in the log once, in order.
#[test]
fn connections_the_producer_closes_when_idle_are_opened_again() {
    use kprod_core::ProducerConfig;
    use kprod_tests::ledger::bursts_with_idle_gaps;
    use kprod_tokio::ProducerHandle;

    const PARTITIONS: i32 = 3;
    let tansu = Tansu::start();
    let topic = "kprod-idle-closed-by-client";
    tansu.create_topic(topic, PARTITIONS as u32);
    let rt = kprod_tests::e2e::runtime();
    let config = ProducerConfig {
        bootstrap_servers: vec![tansu.addr().to_string()],
        connections_max_idle: Some(Duration::from_millis(300)),
        ..ProducerConfig::default()
    };
    let producer = rt.block_on(async { ProducerHandle::connect(config).expect("valid config") });
    let brokers = tansu.addr().to_string();
    let idle = Duration::from_millis(1_500);
    let opened = bursts_with_idle_gaps(&rt, &producer, &brokers, topic, PARTITIONS, idle);
    assert!(
        opened.windows(2).all(|w| w[1] > w[0]),
        "connections opened after each burst: {opened:?}"
    );
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), producer.close())
            .await
            .expect("close() finishes")
    });
}

/// `enqueue_with`: 20,000 records over 4 partitions, each with a callback instead of a
/// future. Every callback is called exactly once, with an offset; each partition's callbacks
/// come in send order; and the independent reader finds every record once, at the offset its
/// callback reported, in send order.
#[test]
fn records_sent_with_callbacks_are_each_reported_once_at_their_offset() {
    use std::sync::{Arc, Mutex};

    use kprod_tokio::{Delivery, DeliveryError, Record, TopicName};

    const TOPIC: &str = "kprod-callbacks";
    const PARTITIONS: i32 = 4;
    const N: usize = 20_000;
    let tansu = Tansu::start();
    tansu.create_topic(TOPIC, PARTITIONS as u32);
    let rt = kprod_tests::e2e::runtime();
    type Calls = Arc<Mutex<Vec<(usize, Result<Delivery, DeliveryError>)>>>;
    let calls = Calls::default();
    rt.block_on(async {
        let producer = kprod_tests::e2e::connect(&tansu.addr().to_string(), 5);
        let topic = TopicName::from_static(TOPIC);
        for i in 0..N {
            let record =
                Record::new(topic.clone(), format!("cb-{i}")).with_partition(i as i32 % PARTITIONS);
            let c = calls.clone();
            producer
                .enqueue_with(record, move |r| c.lock().unwrap().push((i, r)))
                .await
                .unwrap_or_else(|e| panic!("record {i} refused: {e}"));
        }
        tokio::time::timeout(RESOLVE_TIMEOUT, producer.close())
            .await
            .expect("close() finishes");
    });
    let calls = std::mem::take(&mut *calls.lock().unwrap());
    assert_eq!(calls.len(), N, "one callback per record");
    let mut offsets: Vec<Option<(i32, i64)>> = vec![None; N];
    let mut last_in_partition = BTreeMap::new();
    for (i, r) in calls {
        let d = r.unwrap_or_else(|e| panic!("record {i}: {e}"));
        let offset = d.offset.expect("acks=all gives an offset");
        assert!(
            offsets[i].replace((d.partition, offset)).is_none(),
            "record {i} twice"
        );
        if let Some(prev) = last_in_partition.insert(d.partition, i) {
            assert!(
                prev < i,
                "partition {}: callback of {i} after {prev}",
                d.partition
            );
        }
    }
    let log = read(&tansu, TOPIC, PARTITIONS);
    let total: usize = log.values().map(Vec::len).sum();
    assert_eq!(total, N, "every record once in the log");
    let at: BTreeMap<(i32, i64), Option<Vec<u8>>> = log
        .iter()
        .flat_map(|(&p, records)| {
            records
                .iter()
                .map(move |r| ((p, r.offset), r.value.clone()))
        })
        .collect();
    for (i, o) in offsets.into_iter().enumerate() {
        let (p, offset) = o.expect("reported");
        assert_eq!(p, i as i32 % PARTITIONS, "record {i}'s partition");
        let value = at
            .get(&(p, offset))
            .unwrap_or_else(|| panic!("record {i}: no record at {p}/{offset}"));
        assert_eq!(
            value.as_deref(),
            Some(format!("cb-{i}").as_bytes()),
            "record {i}"
        );
    }
}
