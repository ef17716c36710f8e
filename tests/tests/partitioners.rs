//! kprod's `partitioner` settings place keyed records on the partitions librdkafka's
//! partitioners of the same names choose: the same keys sent by librdkafka (through the
//! `rdkafka` crate) and by kprod (with `partitioner` set) to librdkafka's mock cluster land
//! on the same partitions, for two partition counts. Without it, an application that moves
//! from rust-rdkafka (whose default is `consistent_random`, CRC-32) to kprod (Java's murmur2
//! by default) would put each key on another partition: its order across the move, and
//! co-partitioning with other librdkafka producers, would break.

use std::time::Duration;

use kprod_core::{Partitioner, ProducerConfig};
use kprod_tokio::{ProducerHandle, Record};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{DefaultProducerContext, FutureProducer, FutureRecord};
use rdkafka::ClientConfig;

/// Keys of every length from 0 to 40 bytes, of varied bytes.
fn keys() -> Vec<Vec<u8>> {
    (0..200u32)
        .map(|i| {
            let len = (i % 41) as usize;
            (0..len)
                .map(|j| (i.wrapping_mul(31).wrapping_add(j as u32 * 7919) >> (j % 3)) as u8)
                .collect()
        })
        .collect()
}

#[test]
fn every_partitioner_places_keys_as_librdkafka_does() {
    let rt = kprod_tests::e2e::runtime();
    let mock: MockCluster<'static, DefaultProducerContext> =
        MockCluster::new(1).expect("librdkafka's mock cluster");
    let counts = [("kprod-partitioners-7", 7), ("kprod-partitioners-12", 12)];
    for (topic, n) in counts {
        mock.create_topic(topic, n, 1).expect("create topic");
    }
    let keys = keys();
    let mut compared = 0;
    for (partitioner, name) in Partitioner::ALL {
        let rd: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", mock.bootstrap_servers())
            .set("partitioner", name)
            .set("linger.ms", "0")
            .create()
            .expect("librdkafka producer");
        let config = ProducerConfig {
            bootstrap_servers: vec![mock.bootstrap_servers()],
            partitioner,
            linger: Duration::ZERO,
            ..ProducerConfig::default()
        };
        rt.block_on(async {
            let kprod = ProducerHandle::connect(config).expect("valid config");
            for (topic, n) in counts {
                for key in &keys {
                    let sticky = partitioner.is_sticky(Some(key));
                    let rd_record = FutureRecord::to(topic).key(key).payload("v");
                    let theirs = (rd.send(rd_record, Duration::from_secs(10)).await)
                        .unwrap_or_else(|(e, _)| panic!("librdkafka {name}: {e}"))
                        .partition;
                    let ours = (kprod
                        .send(Record::new(topic, "v").with_key(key.clone()))
                        .await)
                        .unwrap_or_else(|e| panic!("kprod {name}: {e}"))
                        .partition;
                    assert!((0..n).contains(&ours));
                    if !sticky {
                        assert_eq!(
                            ours, theirs,
                            "{name}, {n} partitions, key {key:?}: kprod {ours}, librdkafka {theirs}"
                        );
                        assert_eq!(partitioner.partition_for(Some(key), n), Some(ours));
                        compared += 1;
                    }
                }
            }
            kprod.close().await;
        });
    }
    // Every key under five hashing partitioners (random hashes none), and under
    // consistent_random every key but the empty one, for both counts.
    let per_count = keys.len() * 5 + (keys.len() - keys.iter().filter(|k| k.is_empty()).count());
    assert_eq!(compared, 2 * per_count);
}
