//! Failed records come back (`DeliveryError::record`), against a real Tansu 0.6.0 broker:
//! records that cannot be delivered because the broker is gone (delivery timeout, some of
//! them in batches the producer had sealed) or because their topic does not exist (they
//! never leave the producer) are handed back equal to what was sent. The producer's metrics
//! count them.

use std::collections::BTreeMap;
use std::time::Duration;

use kprod_tests::e2e::runtime;
use kprod_tests::Tansu;
use kprod_tokio::{
    config_from_properties, Bytes, ErrorKind, FailureReason, Persistence, ProducerHandle, Record,
};

/// Record `i` of `topic`: keyed or not, with headers and an explicit timestamp; `partition`
/// explicit when given.
fn record(topic: &str, i: usize, partition: Option<i32>) -> Record {
    let mut r = Record::new(topic, format!("value-{i}-{}", "x".repeat(i % 50)))
        .with_timestamp(1_700_000_000_000 + i as i64)
        .with_header("id", Some(Bytes::from(format!("id-{i}"))))
        .with_header("null", None);
    if !i.is_multiple_of(3) {
        r = r.with_key(format!("key-{}", i % 7));
    }
    if let Some(p) = partition {
        r = r.with_partition(p);
    }
    r
}

/// The broker dies after the producer has delivered a record: every record sent afterwards
/// fails at `delivery.timeout.ms` and comes back as sent (with explicit partitions, exactly;
/// without, with the partition it was assigned). Compressed, so sealed batches are
/// decompressed to hand their records back.
#[test]
fn records_that_time_out_against_a_dead_broker_come_back_as_sent() {
    const TOPIC: &str = "kprod-failed-records";
    const N: usize = 400;
    let tansu = Tansu::start();
    tansu.create_topic(TOPIC, 2);
    let brokers = tansu.addr().to_string();
    runtime().block_on(async {
        let config = config_from_properties(&[
            ("bootstrap.servers", brokers.as_str()),
            ("linger.ms", "0"),
            ("request.timeout.ms", "1000"),
            ("delivery.timeout.ms", "4000"),
            ("compression.type", "lz4"),
            ("batch.size", "2000"),
        ])
        .unwrap();
        let producer = ProducerHandle::connect(config).unwrap();
        let first = producer
            .send(record(TOPIC, 0, Some(0)))
            .await
            .expect("delivered while the broker runs");
        assert_eq!(first.offset, Some(0));
        drop(tansu); // killed: nothing answers any more

        let mut futures = Vec::new();
        let mut sent = Vec::new();
        for i in 1..N {
            let partition = i.is_multiple_of(2).then_some((i % 4 / 2) as i32);
            let r = record(TOPIC, i, partition);
            futures.push(producer.enqueue(r.clone()).await.expect("accepted"));
            sent.push(r);
        }
        let mut persisted = BTreeMap::new();
        for (f, sent) in futures.into_iter().zip(sent) {
            let e = f.await.expect_err("nothing can be delivered");
            assert!(
                matches!(
                    e.kind,
                    ErrorKind::Failed(FailureReason::DeliveryTimeout { .. })
                ),
                "{e}"
            );
            *persisted.entry(format!("{:?}", e.persisted)).or_insert(0) += 1;
            let back = e.into_record().expect("the record is handed back");
            match sent.partition {
                Some(_) => assert_eq!(back, sent),
                None => {
                    let p = back.partition.expect("assigned a partition");
                    assert!((0..2).contains(&p), "{p}");
                    assert_eq!(
                        Record {
                            partition: None,
                            ..back
                        },
                        sent
                    );
                }
            }
        }
        println!("{} records failed and came back: {persisted:?}", N - 1);
        let m = producer.metrics().await;
        assert_eq!((m.records_accepted, m.records_delivered), (N as u64, 1));
        assert_eq!(
            m.records_failed_not_persisted + m.records_failed_possibly_persisted,
            N as u64 - 1
        );
        assert_eq!(
            m.records_failed_possibly_persisted,
            *persisted.get("PossiblyPersisted").unwrap_or(&0)
        );
        assert_eq!((m.buffered_records, m.buffered_bytes), (0, 0));
        let p0 = m.partitions.iter().find(|p| p.partition == 0).unwrap();
        assert_eq!(p0.last_acked_offset, Some(0));
        tokio::time::timeout(Duration::from_secs(10), producer.close())
            .await
            .expect("close() finishes within 10 s");
    });
}

/// A topic that does not exist (auto-creation off): its records never leave the producer,
/// fail once `max.block.ms` passes, and come back exactly as sent.
#[test]
fn records_for_a_missing_topic_come_back_as_sent() {
    let tansu = Tansu::start();
    let brokers = tansu.addr().to_string();
    runtime().block_on(async {
        let config = config_from_properties(&[
            ("bootstrap.servers", brokers.as_str()),
            ("allow.auto.create.topics", "false"),
            ("max.block.ms", "1000"),
        ])
        .unwrap();
        let producer = ProducerHandle::connect(config).unwrap();
        let mut futures = Vec::new();
        for i in 0..20 {
            let r = record("kprod-no-such-topic", i, i.is_multiple_of(2).then_some(0));
            futures.push((producer.enqueue(r.clone()).await.expect("accepted"), r));
        }
        for (f, sent) in futures {
            let e = f.await.expect_err("the topic does not exist");
            assert!(
                matches!(e.kind, ErrorKind::Failed(FailureReason::UnknownTopic(_))),
                "{e}"
            );
            assert_eq!(e.persisted, Persistence::NotPersisted);
            assert_eq!(e.record(), Some(&sent));
        }
        let m = producer.metrics().await;
        assert_eq!(
            (m.records_accepted, m.records_failed_not_persisted),
            (20, 20)
        );
        assert_eq!(m.batches_sent, 0, "nothing went on the wire");
        producer.close().await;
    });
}
