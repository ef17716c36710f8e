//! Faults on a 3-node Apache Kafka 4.4.0 cluster (and, for random node faults, 2.3.1 with
//! ZooKeeper) under steady load. Random node faults: one at a
//! time is SIGKILLed, stopped with SIGTERM (a controlled shutdown) or SIGSTOPped for a
//! random while, then healed, in an order and with lengths drawn from a seeded generator
//! (`KPROD_CHAOS_SEED` replays a run; the seed is printed). Records flow the whole time,
//! in bursts over six partitions, so every fault lands on batches in flight, on retries and
//! on leadership moves.
//!
//! Afterwards every node runs and every replica is in sync again, every record resolves, the
//! independent reader (librdkafka's consumer) reads the topic back, and the ledger asserts
//! per partition: no duplicate, send order kept, every acknowledged record at its offset,
//! every `NotPersisted` failure absent. With replication 3, `min.insync.replicas=2` and a
//! 120 s delivery timeout, no fault here may fail a record: every one must be delivered.
//! With two nodes down at once and a 5 s delivery timeout records fail, and the checks hold
//! whatever failed.
//!
//! Partition reassignment: every partition's replicas move three times under load (Kafka's
//! `ReassignPartitionsCommand`), then a preferred leader election; every record delivered.
//!
//! Needs `scripts/install-kafka.sh` (and `kafka-2`) and Java 17+.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kprod_core::ProducerConfig;
use kprod_tests::e2e::runtime;
use kprod_tests::fuzz::Rng;
use kprod_tests::kafka::{KafkaOptions, KAFKA_2_VERSION, KAFKA_VERSION};
use kprod_tests::ledger::{Ledger, Summary};
use kprod_tests::{seed_from_env, Kafka};
use kprod_tokio::ProducerHandle;

const PARTITIONS: i32 = 6;
/// Faults in a run.
const FAULTS: usize = 6;
/// Records per burst; a burst every millisecond at most.
const BURST: usize = 20;

#[derive(Debug, Clone, Copy)]
enum Fault {
    Kill,
    ControlledShutdown,
    Pause,
}

/// Every record delivered: faults one node at a time, each healed before the next, under a
/// delivery timeout longer than any of them.
#[test]
fn random_node_faults_under_load() {
    let summary = chaos(
        "kprod-chaos",
        KAFKA_VERSION,
        Duration::from_secs(120),
        false,
    );
    assert!(summary.all_delivered(), "{summary:?}");
    assert_eq!(summary.in_log, summary.sent, "{summary:?}");
}

/// The same on three Apache Kafka 2.3.1 nodes (ZooKeeper: a killed or paused node's
/// leaderships move once its ZooKeeper session expires, 3 s here; no KIP-360, so a needed
/// bump is a new producer id): every record delivered, once, in order.
#[test]
fn random_node_faults_under_load_on_kafka_2_3() {
    let summary = chaos(
        "kprod-chaos-k23",
        KAFKA_2_VERSION,
        Duration::from_secs(120),
        false,
    );
    assert!(summary.all_delivered(), "{summary:?}");
    assert_eq!(summary.in_log, summary.sent, "{summary:?}");
}

/// Truthful failures: two nodes may be down at once (writes refused for too few in-sync
/// replicas, the controller quorum lost), under a 5 s delivery timeout, so records fail while
/// batches are in flight. The ledger's checks hold whatever failed: no acknowledged record
/// missing or duplicated, order kept, no `NotPersisted` record in the log.
#[test]
fn overlapping_node_faults_with_short_delivery_timeout() {
    let summary = chaos(
        "kprod-chaos-overlap",
        KAFKA_VERSION,
        Duration::from_secs(5),
        true,
    );
    assert_eq!(
        summary.in_log,
        summary.delivered + summary.possibly_persisted_present,
        "{summary:?}"
    );
}

/// Partition reassignment under load, as an operator rebalancing a cluster runs it: every
/// partition's two replicas move, three times (so every leader moves and the old leader stops
/// being a replica: its in-flight batches are answered NOT_LEADER_OR_FOLLOWER, possibly after
/// the append), then a preferred leader election. Every record must be delivered, once, in
/// order.
#[test]
fn partition_reassignment_under_load() {
    let summary = under_load(
        "kprod-reassign",
        KAFKA_VERSION,
        2,
        Duration::from_secs(120),
        |kafka, _rng, topic| {
            let mut log = Vec::new();
            let mut moves = 0;
            for round in 1..=3 {
                let assignment: BTreeMap<i32, Vec<i32>> = (0..PARTITIONS)
                    .map(|p| (p, vec![(p + round) % 3 + 1, (p + round + 1) % 3 + 1]))
                    .collect();
                let before = kafka.leaders(topic);
                kafka.reassign(topic, &assignment);
                kafka.wait_topic(topic, PARTITIONS, 2);
                let after = kafka.leaders(topic);
                moves += (before.iter())
                    .filter(|(p, l)| after.get(p) != Some(l))
                    .count();
                log.push(format!("round {round}: leaders {before:?} -> {after:?}"));
            }
            assert!(moves > 0, "no leadership moved: {log:?}");
            kafka.elect_preferred_leaders();
            kafka.wait_topic(topic, PARTITIONS, 2);
            log.push(format!("preferred leaders: {:?}", kafka.leaders(topic)));
            log
        },
    );
    assert!(summary.all_delivered(), "{summary:?}");
    assert_eq!(summary.in_log, summary.sent, "{summary:?}");
}

/// Random node faults on the cluster while records flow; with `overlap`, two nodes at once
/// some of the time.
fn chaos(
    topic: &'static str,
    version: &'static str,
    delivery_timeout: Duration,
    overlap: bool,
) -> Summary {
    under_load(topic, version, 3, delivery_timeout, |kafka, rng, topic| {
        node_faults(kafka, rng, topic, overlap)
    })
}

/// A new 3-node cluster of Apache Kafka `version` and a topic (replication `replication`,
/// `min.insync.replicas=2`): runs
/// `faults` while records flow, then resolves every record and checks the log; returns the
/// counts.
fn under_load(
    topic: &'static str,
    version: &'static str,
    replication: i32,
    delivery_timeout: Duration,
    faults: impl FnOnce(&mut Kafka, &mut Rng, &str) -> Vec<String>,
) -> Summary {
    let seed = seed_from_env("KPROD_CHAOS_SEED");
    let mut rng = Rng::new(seed);
    let mut kafka = Kafka::start_with(KafkaOptions::new(3).version(version));
    kafka.create_topic(topic, PARTITIONS, replication, Some(2));

    let rt = runtime();
    let config = ProducerConfig {
        batch_size: 4_000,
        delivery_timeout,
        ..kafka.fault_config("kprod-chaos")
    };
    let producer = rt.block_on(async { ProducerHandle::connect(config).expect("valid config") });

    let stop = Arc::new(AtomicBool::new(false));
    let sender = rt.spawn({
        let (stop, producer) = (stop.clone(), producer.clone());
        async move {
            let mut ledger = Ledger::new(topic, PARTITIONS);
            let mut k = 0usize;
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..BURST {
                    ledger
                        .enqueue(&producer, (k % PARTITIONS as usize) as i32)
                        .await;
                    k += 1;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            ledger
        }
    });

    let log = faults(&mut kafka, &mut rng, topic);
    // Some load on the healed cluster, then stop sending.
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let mut ledger = rt.block_on(sender).expect("the sender task");
    for line in &log {
        println!("{line}");
    }

    rt.block_on(ledger.resolve(Duration::from_secs(150)));
    let summary = rt.block_on(ledger.read_and_check(&kafka.bootstrap()));
    let m = rt.block_on(producer.metrics());
    println!("seed {seed}: {summary:?}");
    println!(
        "batches sent {}, retries {}, epoch bumps {}, producer ids {}",
        m.batches_sent, m.retries, m.epoch_bumps, m.producer_ids
    );
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), producer.close())
            .await
            .expect("close() finishes")
    });
    assert!(summary.sent > 10_000, "too little load: {summary:?}");
    assert_eq!(summary.delivered_without_offset, 0, "{summary:?}");
    summary
}

/// `FAULTS` faults, each on a random node (with `overlap`, sometimes on a second one too) for
/// a random while, each healed, with every replica back in sync, before the next one.
fn node_faults(kafka: &mut Kafka, rng: &mut Rng, topic: &str, overlap: bool) -> Vec<String> {
    let started = Instant::now();
    let mut log = Vec::new();
    for _ in 0..FAULTS {
        // Normal running between faults (the load's length, not a synchronisation).
        std::thread::sleep(rng.millis(500, 2_000));
        let node = rng.below(3) as i32 + 1;
        let fault = match rng.below(3) {
            0 => Fault::Kill,
            1 => Fault::ControlledShutdown,
            _ => Fault::Pause,
        };
        let down = rng.millis(300, 4_000);
        let at = started.elapsed();
        let mut faulted = vec![(node, fault)];
        // A second node too: in the first fault, then half of the time.
        if overlap && (log.is_empty() || rng.below(2) == 0) {
            let other = (node + rng.below(2) as i32) % 3 + 1;
            faulted.push((other, [Fault::Kill, Fault::Pause][rng.below(2) as usize]));
        }
        for &(node, fault) in &faulted {
            match fault {
                Fault::Kill => kafka.kill(node),
                Fault::ControlledShutdown => kafka.stop(node),
                Fault::Pause => kafka.pause(node),
            }
        }
        // The fault's length, under load.
        std::thread::sleep(down);
        // Paused nodes resume first: a restart waits until every running node (a paused one
        // included) lists the restarted one.
        faulted.sort_by_key(|(_, f)| !matches!(f, Fault::Pause));
        for &(node, fault) in &faulted {
            match fault {
                Fault::Kill | Fault::ControlledShutdown => kafka.restart(node),
                Fault::Pause => kafka.resume(node),
            }
        }
        // Every replica back in sync before the next fault, so that no fault here can make
        // Kafka itself lose an acknowledged record.
        kafka.wait_topic(topic, PARTITIONS, 3);
        log.push(format!(
            "{at:.1?}: {faulted:?} (node, fault) for {down:?}, whole again at {:.1?}",
            started.elapsed()
        ));
    }
    log
}
