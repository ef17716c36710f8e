//! kprod end to end against Apache Kafka 4.4.0 (KRaft), on one node and on three nodes with
//! replication factor 3, checked by the independent reader (librdkafka's consumer).
//!
//! The same scenarios as `tansu_e2e.rs`; on Kafka one more check holds: every acknowledgement
//! carries its offset (Kafka answers an in-window duplicate with the original offset, where
//! Tansu answers 46 without one).
//!
//! Needs `scripts/install-kafka.sh` and Java 17+; each test starts its own cluster.
//!
//! Size knob: `KPROD_KAFKA_SCALE=N` multiplies every record count by N (default 1, the CI
//! size), e.g. `KPROD_KAFKA_SCALE=10` for 20,000 ticks + 3 × 100,000 and 1,000,000 keyed
//! records.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kprod_tests::e2e::{
    assert_keyed, assert_seed, print_seed_figures, produce_keyed, produce_seed, KeyedPlan,
};
use kprod_tests::reader::{read_topic, ReadRecord};
use kprod_tests::seed::{fresh_run_id, SeedPlan, Source, Verdict};
use kprod_tests::Kafka;

/// How long every record may take to resolve once its stream has enqueued everything.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(180);
/// How long the reader may take.
const READ_TIMEOUT: Duration = Duration::from_secs(180);

/// `KPROD_KAFKA_SCALE`, default 1.
fn scale() -> u64 {
    match std::env::var("KPROD_KAFKA_SCALE") {
        Ok(v) => v
            .parse()
            .ok()
            .filter(|&n| n >= 1)
            .unwrap_or_else(|| panic!("KPROD_KAFKA_SCALE={v:?} is not a positive integer")),
        Err(_) => 1,
    }
}

fn read(kafka: &Kafka, topic: &str, partitions: i32) -> BTreeMap<i32, Vec<ReadRecord>> {
    read_topic(&kafka.bootstrap(), topic, partitions, READ_TIMEOUT).unwrap_or_else(|e| {
        panic!(
            "the independent reader failed: {e}\nnode 1 log:\n{}",
            kafka.log_tail(0, 20)
        )
    })
}

/// The seed scenario (ticker every 1 ms, three overlapping bursts of 10,000, 3 partitions)
/// on `kafka`, topic replicated `replication` times.
fn seed_scenario(kafka: &Kafka, replication: i32, max_in_flight: u32) {
    const PARTITIONS: i32 = 3;
    let topic = format!("kprod-seed-rf{replication}-inflight-{max_in_flight}");
    let started = Instant::now();
    kafka.create_topic(&topic, PARTITIONS, replication, Some(replication.min(2)));
    let plan = SeedPlan {
        source: Source {
            topic: topic.clone(),
            partitions: PARTITIONS,
            run: fresh_run_id(),
            record_size: 100,
        },
        ticks: 2_000 * scale(),
        period: Duration::from_millis(1),
        bursts: 3,
        burst_size: 10_000 * scale(),
        resolve_timeout: RESOLVE_TIMEOUT,
    };
    let report = produce_seed(&kafka.bootstrap(), max_in_flight, &plan);
    let log = read(kafka, &topic, PARTITIONS);
    let v = Verdict::compute(plan.source.run, PARTITIONS, &report.sent, &log);
    println!(
        "seed scenario on {} Kafka node(s), replication {replication}, \
         max.in.flight.requests.per.connection={max_in_flight}:",
        kafka.len()
    );
    print_seed_figures(&report);
    println!("{v}");
    println!("elapsed: {:.2?}", started.elapsed());

    assert_seed(&plan, &report, &v);
    assert_eq!(
        v.acknowledged_without_offset, 0,
        "on Apache Kafka every acknowledgement carries its offset\n{v}"
    );
}

/// 100,000 keyed records over 6 partitions from 4 concurrent tasks (250 keys each).
fn keyed_scenario(kafka: &Kafka, replication: i32) {
    const PARTITIONS: i32 = 6;
    let topic = format!("kprod-keyed-rf{replication}");
    kafka.create_topic(&topic, PARTITIONS, replication, Some(replication.min(2)));
    let plan = KeyedPlan {
        source: Source {
            topic: topic.clone(),
            partitions: PARTITIONS,
            run: fresh_run_id(),
            record_size: 100,
        },
        streams: 4,
        per_stream: 25_000 * scale(),
        keys_per_stream: 250,
        resolve_timeout: RESOLVE_TIMEOUT,
    };
    let (sent, produce_time) = produce_keyed(&kafka.bootstrap(), &plan);
    let log = read(kafka, &topic, PARTITIONS);
    let v = Verdict::compute(plan.source.run, PARTITIONS, &sent, &log);
    println!(
        "{} keyed records on {} Kafka node(s), replication {replication}, resolved in \
         {produce_time:.2?}: {:.0} records/s",
        sent.len(),
        kafka.len(),
        sent.len() as f64 / produce_time.as_secs_f64()
    );
    println!("{v}");
    assert_keyed(&plan, &sent, &log, &v);
    assert_eq!(v.acknowledged_without_offset, 0, "{v}");
}

/// One node: the seed scenario at 5 and at 1 request in flight.
#[test]
fn seed_scenario_on_one_kafka_node() {
    let kafka = Kafka::start(1);
    seed_scenario(&kafka, 1, 5);
    seed_scenario(&kafka, 1, 1);
}

/// Three nodes, replication factor 3, `min.insync.replicas=2`: the seed scenario at 5 and at
/// 1 request in flight, the partitions' leaders spread over the nodes.
#[test]
fn seed_scenario_on_three_kafka_nodes() {
    let kafka = Kafka::start(3);
    seed_scenario(&kafka, 3, 5);
    seed_scenario(&kafka, 3, 1);
}

/// One node: 100,000 keyed records over 6 partitions.
#[test]
fn hundred_thousand_keyed_records_on_one_kafka_node() {
    let kafka = Kafka::start(1);
    keyed_scenario(&kafka, 1);
}

/// Three nodes, replication factor 3: 100,000 keyed records over 6 partitions.
#[test]
fn hundred_thousand_keyed_records_on_three_kafka_nodes() {
    let kafka = Kafka::start(3);
    keyed_scenario(&kafka, 3);
}

/// [`kprod_tests::e2e::produce_all`] against `kafka`, each record resolved within
/// `RESOLVE_TIMEOUT`.
fn produce_all(
    kafka: &Kafka,
    props: &[(&str, &str)],
    records: impl IntoIterator<Item = kprod_tokio::Record>,
) -> (
    Vec<Result<kprod_tokio::Delivery, kprod_tokio::DeliveryError>>,
    kprod_tokio::Metrics,
) {
    let bootstrap = kafka.bootstrap();
    let mut all = vec![("bootstrap.servers", bootstrap.as_str())];
    all.extend_from_slice(props);
    kprod_tests::e2e::produce_all(&all, records, RESOLVE_TIMEOUT)
}

/// The index a test wrote at the front of a record's value (`r{i:06}...`).
fn index_of(value: &[u8]) -> usize {
    std::str::from_utf8(&value[1..7])
        .expect("utf-8")
        .parse()
        .expect("index")
}

/// Reads `topic` back and checks each partition's log is exactly the acknowledged records
/// (`acked`: (partition, offset) -> index), at their offsets, in send order; `index` reads a
/// record's index from its value. Returns each partition's indices in log order.
fn assert_log_is_acked(
    kafka: &Kafka,
    topic: &str,
    partitions: i32,
    acked: &BTreeMap<(i32, i64), usize>,
    index: impl Fn(&[u8]) -> usize,
) -> BTreeMap<i32, Vec<usize>> {
    let log = read(kafka, topic, partitions);
    let mut indices = BTreeMap::new();
    for p in 0..partitions {
        let found: Vec<(i64, usize)> = log.get(&p).map_or(Vec::new(), |rs| {
            rs.iter()
                .map(|r| (r.offset, index(r.value.as_deref().expect("a value"))))
                .collect()
        });
        let expected: Vec<(i64, usize)> = (acked.iter())
            .filter(|((q, _), _)| *q == p)
            .map(|(&(_, o), &i)| (o, i))
            .collect();
        assert_eq!(
            found, expected,
            "partition {p}: the log is exactly the acknowledged records, at their offsets"
        );
        assert!(
            found.windows(2).all(|w| w[0].1 < w[1].1),
            "partition {p}: in send order"
        );
        indices.insert(p, found.into_iter().map(|(_, i)| i).collect());
    }
    indices
}

/// One node whose `message.max.bytes` is 4,000: batches of 300 B records (up to
/// `batch.size` 16 KiB) are refused MESSAGE_TOO_LARGE and split until they fit, while the
/// later batches of the partition, already in flight, are refused out of order and sent
/// again; every 400th record is 6,000 B, too large on its own, and fails MESSAGE_TOO_LARGE,
/// not persisted, handed back, its gap closed by an epoch bump. The reader finds every other
/// record exactly once, in send order, at the offset it was acknowledged with, and none of
/// the oversized ones.
#[test]
fn message_too_large_splits_batches_and_fails_only_the_oversized_records() {
    use kprod_tokio::{ErrorCode, ErrorKind, FailureReason, Persistence, Record};

    const PARTITIONS: i32 = 3;
    const RECORDS: usize = 2_400;
    let kafka =
        Kafka::start_with(kprod_tests::KafkaOptions::new(1).set("message.max.bytes", 4_000));
    let topic = "kprod-message-too-large";
    kafka.create_topic(topic, PARTITIONS, 1, None);
    let value = |i: usize| {
        let size = if i % 400 == 399 { 6_000 } else { 300 };
        let mut v = format!("r{i:06}-").into_bytes();
        v.resize(size, b'x');
        v
    };
    let (outcomes, metrics) = produce_all(
        &kafka,
        &[
            ("linger.ms", "20"),
            ("batch.size", "16384"),
            ("max.in.flight.requests.per.connection", "5"),
        ],
        (0..RECORDS).map(|i| Record::new(topic, value(i)).with_partition(i as i32 % PARTITIONS)),
    );
    println!(
        "{} batches sent, {} retries, {} epoch bumps",
        metrics.batches_sent, metrics.retries, metrics.epoch_bumps
    );
    // Six oversized records, each a gap closed by its own bump (Kafka accepts KIP-360's).
    assert!(
        metrics.epoch_bumps >= (RECORDS / 400) as u64,
        "an epoch bump per oversized record: {metrics:?}"
    );
    // Whole batches (about 50 records) were refused and split: far more batches than the
    // ~50 that `batch.size` alone would make.
    assert!(
        metrics.batches_sent >= 300,
        "batches were split to fit 4,000 B: {} sent",
        metrics.batches_sent
    );
    let mut acked = BTreeMap::new();
    for (i, outcome) in outcomes.into_iter().enumerate() {
        match outcome {
            Ok(d) if i % 400 != 399 => {
                assert_eq!(d.partition, i as i32 % PARTITIONS, "record {i}");
                let offset = d.offset.unwrap_or_else(|| panic!("record {i}: no offset"));
                acked.insert((d.partition, offset), i);
            }
            Ok(d) => panic!("record {i} of 6,000 B was delivered: {d:?}"),
            Err(e) if i % 400 == 399 => {
                assert_eq!(
                    e.kind,
                    ErrorKind::Failed(FailureReason::Broker(ErrorCode::MessageTooLarge)),
                    "record {i}"
                );
                assert_eq!(e.persisted, Persistence::NotPersisted, "record {i}");
                let back = e.record().expect("the record is handed back");
                assert_eq!(back.value.as_deref(), Some(&value(i)[..]), "record {i}");
            }
            Err(e) => panic!("record {i} of 300 B failed: {e:?}"),
        }
    }
    assert_eq!(acked.len(), RECORDS - RECORDS / 400);
    let found = assert_log_is_acked(&kafka, topic, PARTITIONS, &acked, index_of);
    for p in 0..PARTITIONS {
        let sent: Vec<usize> = (0..RECORDS)
            .filter(|&i| i as i32 % PARTITIONS == p && i % 400 != 399)
            .collect();
        assert_eq!(
            found[&p], sent,
            "partition {p}: the log is every sent record once, in order"
        );
    }
}

/// One node whose topics are compacted (`log.cleanup.policy=compact`), which refuses a
/// record without a key with INVALID_RECORD (87) and the whole batch with it: every 100th
/// record has no key. Each record resolves once and truthfully: delivered (then in the log
/// once, in send order, at its offset) or failed INVALID_RECORD, not persisted, handed back
/// (then absent from the log). Every keyless record fails, named by the broker as the
/// invalid one (`DeliveryError::broker_detail`), its batch's other records marked refused for
/// it; the records in other batches are delivered, the partition going on after each refused
/// batch (an epoch bump closes the gap).
#[test]
fn compacted_topic_refuses_keyless_records_and_nothing_else_is_lost() {
    use kprod_tokio::{ErrorCode, ErrorKind, FailureReason, Persistence, Record};

    const PARTITIONS: i32 = 3;
    const RECORDS: usize = 3_000;
    let keyless = |i: usize| i % 100 == 50;
    let kafka =
        Kafka::start_with(kprod_tests::KafkaOptions::new(1).set("log.cleanup.policy", "compact"));
    let topic = "kprod-compacted";
    kafka.create_topic(topic, PARTITIONS, 1, None);
    let records = (0..RECORDS).map(|i| {
        let record = Record::new(topic, format!("r{i:06}")).with_partition(i as i32 % PARTITIONS);
        if keyless(i) {
            record
        } else {
            record.with_key(format!("k{i:06}"))
        }
    });
    let (outcomes, metrics) = produce_all(
        &kafka,
        &[("linger.ms", "5"), ("batch.size", "1024")],
        records,
    );
    let mut acked = BTreeMap::new();
    let mut failed = 0;
    for (i, outcome) in outcomes.into_iter().enumerate() {
        match outcome {
            Ok(d) => {
                assert!(!keyless(i), "keyless record {i} was delivered: {d:?}");
                let offset = d.offset.unwrap_or_else(|| panic!("record {i}: no offset"));
                acked.insert((d.partition, offset), i);
            }
            Err(e) => {
                assert_eq!(
                    e.kind,
                    ErrorKind::Failed(FailureReason::Broker(ErrorCode::InvalidRecord)),
                    "record {i}"
                );
                assert_eq!(e.persisted, Persistence::NotPersisted, "record {i}");
                let back = e.record().expect("the record is handed back");
                assert_eq!(back.value.as_deref(), Some(format!("r{i:06}").as_bytes()));
                // Kafka names the keyless record in its answer (KIP-467): the others were
                // refused only for being in its batch.
                let detail = e.broker_detail().expect("the broker's words");
                assert_eq!(
                    detail.is_named_invalid(),
                    keyless(i),
                    "record {i}: {detail}"
                );
                if keyless(i) {
                    let why = detail.record_message.as_deref().unwrap_or_default();
                    assert!(why.contains("without key"), "record {i}: {detail}");
                }
                failed += 1;
            }
        }
    }
    println!(
        "{} delivered, {failed} failed, {} epoch bumps",
        acked.len(),
        metrics.epoch_bumps
    );
    assert!(failed >= RECORDS / 100, "every keyless record fails");
    // A batch of 1 KiB holds a few dozen of these records, so most have no keyless one.
    assert!(acked.len() >= RECORDS / 2, "{} delivered", acked.len());
    assert_log_is_acked(&kafka, topic, PARTITIONS, &acked, index_of);
}

/// A producer for the tests that delete a topic and create it again: the test, not the
/// producer's metadata requests, creates it again, and records outlive the gap.
fn producer_for_a_recreated_topic(
    rt: &tokio::runtime::Runtime,
    kafka: &Kafka,
) -> kprod_tokio::ProducerHandle {
    rt.block_on(async {
        kprod_tokio::ProducerHandle::from_properties(&[
            ("bootstrap.servers", kafka.bootstrap().as_str()),
            ("linger.ms", "5"),
            ("allow.auto.create.topics", "false"),
            ("delivery.timeout.ms", "20000"),
            ("request.timeout.ms", "10000"),
        ])
        .expect("valid properties")
    })
}

/// Waits (up to 30 s) until `producer` has seen a record refused: sent while its topic is
/// gone (UNKNOWN_TOPIC_OR_PARTITION), it waits for metadata to name a leader again.
fn wait_for_a_refusal(rt: &tokio::runtime::Runtime, producer: &kprod_tokio::ProducerHandle) {
    rt.block_on(async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while producer.metrics().await.retries == 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no record refused while the topic was gone"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

/// A topic deleted and created again under its name while the producer runs. The first
/// topic's leader epochs had grown (the node was restarted, so every partition went
/// leaderless and back); the new topic's partitions start again at epoch 0 under a new id. Before,
/// the producer took every answer about the new topic for stale metadata (KIP-320) and its
/// records waited for a leader until they timed out; now the new id resets the epochs and the
/// partitions start over under a new producer epoch. Records sent while the topic is gone are
/// refused and wait; the reader finds exactly those, in order, at their offsets.
#[test]
fn a_topic_deleted_and_created_again_is_produced_to_at_once() {
    use kprod_tokio::{DeliveryFuture, Record};

    const PARTITIONS: i32 = 3;
    const RECORDS: usize = 300;
    let mut kafka = Kafka::start(1);
    let topic = "kprod-recreated";
    kafka.create_topic(topic, PARTITIONS, 1, None);
    // A restart makes every partition leaderless and then led again: the epochs grow. The
    // producer starts after it, so its first metadata answer carries them.
    kafka.stop(1);
    kafka.restart(1);
    kafka.wait_topic(topic, PARTITIONS, 1);
    let epochs: Vec<i32> = (kafka.metadata(topic).expect("metadata").topics[0].partitions)
        .iter()
        .map(|p| p.leader_epoch)
        .collect();
    assert!(
        epochs.iter().all(|&e| e > 0),
        "leader epochs grew: {epochs:?}"
    );
    let rt = kprod_tests::e2e::runtime();
    let producer = producer_for_a_recreated_topic(&rt, &kafka);
    let enqueue = |label: &str| -> Vec<DeliveryFuture> {
        rt.block_on(async {
            let mut futures = Vec::new();
            for i in 0..RECORDS {
                let r = Record::new(topic, format!("{label}-{i:04}"))
                    .with_partition(i as i32 % PARTITIONS);
                futures.push(producer.enqueue(r).await.expect("accepted"));
            }
            futures
        })
    };
    let resolve = |label: &str, futures: Vec<DeliveryFuture>| -> Vec<(i32, i64)> {
        rt.block_on(async {
            let mut at = Vec::new();
            for (i, f) in futures.into_iter().enumerate() {
                let d = tokio::time::timeout(RESOLVE_TIMEOUT, f)
                    .await
                    .expect("resolved")
                    .unwrap_or_else(|e| panic!("{label} record {i} failed: {e:?}"));
                at.push((d.partition, d.offset.expect("an offset")));
            }
            at
        })
    };
    let first = enqueue("first");
    resolve("first", first);
    kafka.delete_topic(topic);
    // Records sent while the topic is gone are refused (UNKNOWN_TOPIC_OR_PARTITION) and wait
    // for metadata to name a leader again: wait until the producer has seen a refusal.
    let second = enqueue("second");
    wait_for_a_refusal(&rt, &producer);
    kafka.create_topic(topic, PARTITIONS, 1, None);
    let second = resolve("second", second);
    rt.block_on(kprod_tests::e2e::close(producer));
    // Only the new topic's records: a value of the first topic ("first-...") has no index.
    let acked: BTreeMap<(i32, i64), usize> = second
        .into_iter()
        .enumerate()
        .map(|(i, at)| (at, i))
        .collect();
    let index = |v: &[u8]| -> usize {
        let v = std::str::from_utf8(v).expect("utf-8");
        (v.strip_prefix("second-").and_then(|i| i.parse().ok()))
            .unwrap_or_else(|| panic!("{v:?} is not a record of the new topic"))
    };
    let found = assert_log_is_acked(&kafka, topic, PARTITIONS, &acked, index);
    for p in 0..PARTITIONS {
        let sent: Vec<usize> = (0..RECORDS)
            .filter(|i| *i as i32 % PARTITIONS == p)
            .collect();
        assert_eq!(
            found[&p], sent,
            "partition {p}: only the new topic's records, in order"
        );
    }
}

/// A topic deleted and created again with fewer partitions (4, then 1: what auto-creation
/// with Kafka's default `num.partitions` gives). Records keyed before the deletion went to all
/// four partitions. Records sent while the topic is gone are placed by the old count; once
/// the new topic (a new id) is known, those placed in a partition that is gone fail
/// `UnknownPartition`, not persisted, and the others are delivered. Records sent after that
/// all go to partition 0. Before, the producer kept the count of 4 for its life: every
/// record keyed to partitions 1 to 3 was retried until its delivery timeout.
#[test]
fn a_topic_created_again_with_fewer_partitions_gets_every_new_record() {
    use kprod_core::DeliveryError as CoreError;
    use kprod_tokio::{DeliveryFuture, ErrorKind, Record};

    const RECORDS: usize = 200;
    let kafka = Kafka::start(1);
    let topic = "kprod-shrunk";
    kafka.create_topic(topic, 4, 1, None);
    let rt = kprod_tests::e2e::runtime();
    let producer = producer_for_a_recreated_topic(&rt, &kafka);
    let enqueue = |label: &str| -> Vec<DeliveryFuture> {
        rt.block_on(async {
            let mut futures = Vec::new();
            for i in 0..RECORDS {
                let r = Record::new(topic, format!("{label}-{i:04}")).with_key(format!("k{i}"));
                futures.push(producer.enqueue(r).await.expect("accepted"));
            }
            futures
        })
    };
    type Outcome = Result<(i32, i64), ErrorKind>;
    let resolve = |futures: Vec<DeliveryFuture>| -> Vec<Outcome> {
        rt.block_on(async {
            let mut out = Vec::new();
            for f in futures {
                let d = tokio::time::timeout(RESOLVE_TIMEOUT, f)
                    .await
                    .expect("resolved");
                out.push(match d {
                    Ok(d) => Ok((d.partition, d.offset.expect("an offset"))),
                    Err(e) => {
                        assert_eq!(e.persisted, kprod_core::Persistence::NotPersisted, "{e}");
                        Err(e.kind)
                    }
                });
            }
            out
        })
    };
    let first = resolve(enqueue("first"));
    let spread: std::collections::BTreeSet<i32> = first
        .iter()
        .map(|o| o.as_ref().expect("delivered").0)
        .collect();
    assert_eq!(spread.len(), 4, "keys spread over the four partitions");
    kafka.delete_topic(topic);
    let second = enqueue("second");
    wait_for_a_refusal(&rt, &producer);
    kafka.create_topic(topic, 1, 1, None);
    let second = resolve(second);
    let gone = ErrorKind::Failed(CoreError::UnknownPartition { count: 1 });
    for (i, o) in second.iter().enumerate() {
        match o {
            Ok((p, _)) => assert_eq!(*p, 0, "second record {i}"),
            Err(kind) => assert_eq!(*kind, gone, "second record {i}"),
        }
    }
    assert!(
        second.iter().any(|o| o.is_err()),
        "some were placed in gone partitions"
    );
    let third = resolve(enqueue("third"));
    rt.block_on(kprod_tests::e2e::close(producer));
    for (i, o) in third.iter().enumerate() {
        assert_eq!(o.as_ref().map(|d| d.0), Ok(0), "third record {i}");
    }
    // The log holds the second records delivered and every third one, in order, at their
    // offsets, and nothing else.
    let mut acked = BTreeMap::new();
    let mut expected = Vec::new();
    for (k, outcomes) in [&second, &third].into_iter().enumerate() {
        for (i, o) in outcomes.iter().enumerate() {
            if let Ok(at) = o {
                acked.insert(*at, k * RECORDS + i);
                expected.push(k * RECORDS + i);
            }
        }
    }
    let index = |v: &[u8]| -> usize {
        let v = std::str::from_utf8(v).expect("utf-8");
        let (label, i) = v.split_once('-').expect("label-index");
        let i: usize = i.parse().expect("index");
        match label {
            "second" => i,
            "third" => RECORDS + i,
            _ => panic!("{v:?} is not a record of the new topic"),
        }
    };
    let found = assert_log_is_acked(&kafka, topic, 1, &acked, index);
    assert_eq!(found[&0], expected, "partition 0: in order, each once");
}

/// A client over its produce quota (100 kB/s for 2 MB): Kafka answers each Produce at once
/// with `throttle_time_ms` and mutes the connection for that long (KIP-219), often longer
/// than the 1 s `request.timeout.ms` here. The producer counts each throttled answer, sends
/// nothing more on the connection until the whole throttle has passed, and counts the
/// request timeouts of the requests in flight behind a throttled answer from its end (as the
/// Java client does); nothing times out or is retried, and the reader finds every record
/// once, in order, at its offset. (Probe finding: with the throttle capped at the request
/// timeout and in-flight deadlines left alone, a 2 s request timeout under a 50 kB/s quota
/// cost 60 retries, 5 reconnects and 200 records possibly persisted of 2,500.)
#[test]
fn a_throttled_producer_waits_out_the_quota_without_timeouts() {
    use kprod_tokio::Record;

    const PARTITIONS: i32 = 2;
    const RECORDS: usize = 2_000;
    let kafka = Kafka::start(1);
    let topic = "kprod-throttled";
    kafka.create_topic(topic, PARTITIONS, 1, None);
    kafka.set_producer_quota("kprod-throttled", 100_000);
    let value = |i: usize| {
        let mut v = format!("r{i:06}-").into_bytes();
        v.resize(1_000, b'q');
        v
    };
    let (outcomes, metrics) = produce_all(
        &kafka,
        &[
            ("client.id", "kprod-throttled"),
            ("linger.ms", "5"),
            ("request.timeout.ms", "1000"),
        ],
        (0..RECORDS).map(|i| Record::new(topic, value(i)).with_partition(i as i32 % PARTITIONS)),
    );
    let mut acked = BTreeMap::new();
    for (i, outcome) in outcomes.into_iter().enumerate() {
        let d = outcome.unwrap_or_else(|e| panic!("record {i} failed: {e:?}"));
        acked.insert((d.partition, d.offset.expect("an offset")), i);
    }
    println!(
        "{} batches, {} throttled answers, {} retries",
        metrics.batches_sent, metrics.produce_throttled, metrics.retries
    );
    assert!(
        metrics.produce_throttled > 0,
        "the broker throttled the producer"
    );
    assert_eq!(metrics.retries, 0, "no request timed out or was retried");
    let found = assert_log_is_acked(&kafka, topic, PARTITIONS, &acked, index_of);
    for p in 0..PARTITIONS {
        assert_eq!(
            found[&p].len(),
            RECORDS / PARTITIONS as usize,
            "partition {p}"
        );
    }
}

/// A topic that keeps `message.timestamp.type=LogAppendTime`: the broker stamps each batch
/// with the time it wrote it, in place of the records' own timestamps (an hour old here), and
/// says so in its answer. Each delivery reports the broker's time (`TimestampType::
/// LogAppendTime`), the one the independent reader finds at that offset; on a CreateTime
/// topic beside it each delivery reports the record's own timestamp, also as read back.
/// (Probe finding: every delivery on a LogAppendTime topic reported the create time.)
#[test]
fn deliveries_report_the_timestamp_the_log_keeps() {
    use kprod_tokio::{Record, TimestampType};

    const RECORDS: usize = 400;
    let kafka = Kafka::start(1);
    let appended = "kprod-log-append-time";
    let created = "kprod-create-time";
    kafka.create_topic_with(
        appended,
        2,
        1,
        &[("message.timestamp.type", "LogAppendTime")],
    );
    kafka.create_topic(created, 2, 1, None);
    let wall = || {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        now.expect("after 1970").as_millis() as i64
    };
    let sent_at = wall() - 3_600_000;
    let started = wall();
    let (outcomes, _) = produce_all(
        &kafka,
        &[("linger.ms", "5"), ("batch.size", "4096")],
        (0..RECORDS).map(|i| {
            let topic = if i % 2 == 0 { appended } else { created };
            Record::new(topic, format!("r{i:06}"))
                .with_partition((i / 2 % 2) as i32)
                .with_timestamp(sent_at + i as i64)
        }),
    );
    let ended = wall();
    let mut reported = BTreeMap::new();
    for (i, outcome) in outcomes.into_iter().enumerate() {
        let d = outcome.unwrap_or_else(|e| panic!("record {i} failed: {e:?}"));
        if i % 2 == 0 {
            assert_eq!(d.timestamp_type, TimestampType::LogAppendTime, "record {i}");
            assert!(
                (started..=ended).contains(&d.timestamp),
                "record {i}: {} not within the run {started}..={ended}",
                d.timestamp
            );
        } else {
            assert_eq!(d.timestamp_type, TimestampType::CreateTime, "record {i}");
            assert_eq!(d.timestamp, sent_at + i as i64, "record {i}");
        }
        let offset = d.offset.expect("an offset");
        reported.insert((d.topic.to_string(), d.partition, offset), d.timestamp);
    }
    let mut read = BTreeMap::new();
    for topic in [appended, created] {
        let log = kprod_tests::reader::read_topic_full(&kafka.bootstrap(), topic, 2, READ_TIMEOUT)
            .unwrap_or_else(|e| panic!("the independent reader failed: {e}"));
        for r in log {
            let ts = r.timestamp.expect("a timestamp");
            read.insert((topic.to_owned(), r.partition, r.offset), ts);
        }
    }
    assert_eq!(
        reported, read,
        "each delivery's timestamp is the one the log keeps"
    );
}

/// The broker closes connections idle for `connections.max.idle.ms` (10 minutes by default,
/// 1 s here), the producer's included; the producer, idle longer than that between bursts,
/// connects again (`Metrics::connections_opened` grows with each burst) and goes on: every
/// record of every burst delivered once, in order. (A raw connection idle as long is checked
/// to be closed by the broker too.) Then the same with the producer's own idle limit below
/// the broker's: the producer closes first.
#[test]
fn idle_connections_closed_by_the_broker_or_the_producer_are_opened_again() {
    use std::io::Read;

    use kprod_core::ProducerConfig;
    use kprod_tests::kafka::KafkaOptions;
    use kprod_tests::ledger::bursts_with_idle_gaps;
    use kprod_tokio::ProducerHandle;

    const PARTITIONS: i32 = 2;
    let kafka = Kafka::start_with(KafkaOptions::new(1).set("connections.max.idle.ms", 1_000));
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let mut probe = std::net::TcpStream::connect(kafka.client_addr(0)).expect("raw connection");
    // The broker's limit (1 s), then the producer's (300 ms) under it.
    for (topic, producer_idle, gap) in [
        ("kprod-idle-closed", None, Duration::from_millis(2_500)),
        (
            "kprod-idle-closed-by-client",
            Some(Duration::from_millis(300)),
            Duration::from_millis(1_500),
        ),
    ] {
        kafka.create_topic(topic, PARTITIONS, 1, None);
        let config = ProducerConfig {
            bootstrap_servers: vec![kafka.bootstrap()],
            connections_max_idle: producer_idle,
            ..ProducerConfig::default()
        };
        let producer =
            rt.block_on(async { ProducerHandle::connect(config).expect("valid config") });
        let brokers = kafka.bootstrap();
        let opened = bursts_with_idle_gaps(&rt, &producer, &brokers, topic, PARTITIONS, gap);
        // Every burst after an idle period needed a new connection.
        assert!(
            opened.windows(2).all(|w| w[1] > w[0]),
            "{topic}: connections opened after each burst: {opened:?}"
        );
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(30), producer.close())
                .await
                .expect("close() finishes")
        });
    }
    probe
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    let closed = match probe.read(&mut [0u8; 1]) {
        Ok(n) => n == 0,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    };
    assert!(closed, "the broker closed the idle raw connection");
}

/// `metadata.max.idle.ms` on a broker that creates topics on request
/// (`auto.create.topics.enable=true`, Kafka's default): a topic the producer no longer sends
/// to is deleted, and stays deleted while the producer keeps refreshing its metadata (every
/// 200 ms here). Before, every refresh named every topic the producer had ever used, with
/// `allow.auto.create.topics` on, and the broker created the deleted topic again at the
/// next one. A later record for the topic names it again: the broker creates it, and the
/// record is delivered.
#[test]
fn a_deleted_topic_the_producer_no_longer_uses_is_not_created_again() {
    use kprod_core::ProducerConfig;
    use kprod_tests::kafka::KafkaOptions;
    use kprod_tokio::{ProducerHandle, Record};

    let kafka = Kafka::start_with(KafkaOptions::new(1).set("auto.create.topics.enable", "true"));
    let (idle, busy) = ("kprod-idle-deleted", "kprod-idle-busy");
    kafka.create_topic(idle, 1, 1, None);
    kafka.create_topic(busy, 1, 1, None);
    // A Metadata answer is required: a cluster that did not answer must not read as "the
    // topic does not exist".
    let exists = |topic: &str| {
        let m = (kafka.metadata(topic)).expect("a Metadata answer from the cluster");
        (m.topics.iter()).any(|t| t.name.as_deref() == Some(topic) && t.error_code == 0)
    };
    let rt = kprod_tests::e2e::runtime();
    let config = ProducerConfig {
        bootstrap_servers: vec![kafka.bootstrap()],
        metadata_max_age: Duration::from_millis(200),
        metadata_max_idle: Some(Duration::from_secs(1)),
        allow_auto_topic_creation: true,
        ..ProducerConfig::default()
    };
    let producer = rt.block_on(async { ProducerHandle::connect(config).expect("valid config") });
    let deadline = Instant::now() + Duration::from_secs(60);
    rt.block_on(async {
        (producer.send(Record::new(idle, "before")).await).expect("delivered to the topic");
        // Only `busy` is sent to from now on, until the producer counts `idle` as idle.
        while producer.metrics().await.idle_topics == 0 {
            assert!(Instant::now() < deadline, "the topic never went idle");
            (producer.send(Record::new(busy, "x")).await).expect("delivered");
        }
    });
    kafka.delete_topic(idle);
    let asked = rt.block_on(producer.metrics()).metadata_requests;
    rt.block_on(async {
        // At least ten more metadata refreshes (two seconds) while `busy` is in use.
        while producer.metrics().await.metadata_requests < asked + 10 {
            assert!(Instant::now() < deadline, "the producer stopped refreshing");
            (producer.send(Record::new(busy, "y")).await).expect("delivered");
        }
    });
    assert!(
        !exists(idle),
        "the deleted topic was created again by the producer's metadata requests"
    );
    // Used again: named again, created by the broker, and the record delivered.
    let again = rt.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(30),
            producer.send(Record::new(idle, "after")),
        )
        .await
    });
    let delivery = again
        .expect("delivered within 30 s")
        .expect("delivered to the topic created again");
    assert_eq!(
        delivery.offset,
        Some(0),
        "the first record of the new topic"
    );
    assert!(exists(idle));
    assert_eq!(rt.block_on(producer.metrics()).idle_topics, 0);
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), producer.close())
            .await
            .expect("close() finishes")
    });
}
