//! Acknowledged records lost by a real broker, and kprod saying so.
//!
//! Apache Kafka 4.4.0 (three KRaft nodes; the third keeps the controller quorum) and 2.3.1
//! (two nodes, ZooKeeper); one partition with two replicas, `min.insync.replicas=1` and
//! `unclean.leader.election.enable=true`: 100 records delivered while both replicas are in
//! sync; the follower SIGKILLed; 100 more delivered by the leader alone; the leader SIGKILLed
//! and the stale follower restarted, which Kafka then elects uncleanly. The 100 records
//! acknowledged by the leader alone are gone from the log (asserted): Kafka lost acknowledged
//! records, as that setting allows. The new leader rebuilt the producer's state from its own
//! log, so the producer's next batch, sequenced after the lost ones, is refused
//! OUT_OF_ORDER_SEQUENCE_NUMBER with a log start below the last acknowledged offset: kprod's
//! evidence of data loss (spec §B). Under `DataLossPolicy::Fatal` the producer stops with
//! `FatalError::DataLoss` and the waiting records fail, not persisted; under
//! `SignalAndContinue` (the default) it signals the loss, moves to a new identity and
//! delivers them after the log's end.
//!
//! Needs `scripts/install-kafka.sh` (and `kafka-2`) and Java 17+.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kprod_core::{DataLossPolicy, FatalError, Persistence};
use kprod_tests::e2e::runtime;
use kprod_tests::kafka::{KafkaOptions, KAFKA_2_VERSION, KAFKA_VERSION};
use kprod_tests::ledger::{read_log, Ledger};
use kprod_tests::reader::ReadRecord;
use kprod_tests::Kafka;
use kprod_tokio::{ErrorKind, FailureReason, Fatal, ProducerHandle};

const PHASE: usize = 100;
const TIMEOUT: Duration = Duration::from_secs(90);

/// What happened to the three phases of records.
struct Run {
    ledger: Ledger,
    log: Vec<ReadRecord>,
    fatal: Option<Fatal>,
    producer_ids: u64,
    epoch_bumps: u64,
}

/// The three phases with `policy` on a new cluster of Apache Kafka `version`: two nodes with
/// ZooKeeper, three with KRaft (the third keeps the controller quorum's majority when the
/// partition's two replicas are down).
fn unclean_election(topic: &str, version: &'static str, policy: DataLossPolicy) -> Run {
    let started = Instant::now();
    let nodes = if version == KAFKA_2_VERSION { 2 } else { 3 };
    let mut kafka = Kafka::start_with(
        KafkaOptions::new(nodes)
            .version(version)
            .set("unclean.leader.election.enable", "true"),
    );
    kafka.create_topic(topic, 1, 2, Some(1));
    let leader = kafka.leader(topic, 0);
    let replicas: Vec<i32> = (kafka.metadata(topic).expect("metadata").topics.iter())
        .flat_map(|t| t.partitions.iter())
        .flat_map(|p| p.replica_nodes.iter().copied())
        .collect();
    let follower = *replicas
        .iter()
        .find(|&&r| r != leader)
        .unwrap_or_else(|| panic!("no follower among {replicas:?}"));
    let rt = runtime();
    let mut cfg = kafka.fault_config(topic);
    cfg.delivery_timeout = Duration::from_secs(60);
    cfg.data_loss_policy = policy;
    let producer = rt.block_on(async { ProducerHandle::connect(cfg).expect("valid config") });
    let mut ledger = Ledger::new(topic, 1);
    let phase = |ledger: &mut Ledger| {
        rt.block_on(async {
            ledger.enqueue_n(&producer, PHASE).await;
            ledger.resolve(TIMEOUT).await;
        })
    };
    // Both replicas in sync (create_topic waited for the full ISR).
    phase(&mut ledger);
    kafka.kill(follower);
    kafka.wait_isr_below(topic, 0, 2);
    // Acknowledged by the leader alone.
    phase(&mut ledger);
    kafka.kill(leader);
    kafka.restart(follower);
    let new_leader = kafka.wait_leader_moved(topic, 0, leader);
    assert_eq!(new_leader, follower);
    phase(&mut ledger);
    // Read from the node that runs: the reader fails on a bootstrap server that is down.
    let live = kafka.node_addr(kafka.index_of(follower)).to_string();
    let log = rt
        .block_on(read_log(&live, topic, 1))
        .remove(&0)
        .unwrap_or_default();
    let m = rt.block_on(producer.metrics());
    let (producer_ids, epoch_bumps) = (m.producer_ids, m.epoch_bumps);
    let fatal = producer.fatal();
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), producer.close())
            .await
            .expect("close() finishes")
    });
    println!(
        "Kafka {version}, {policy:?}: node {leader} led, node {follower} elected uncleanly; log of {} records, \
         fatal {fatal:?}, producer ids {producer_ids}, epoch bumps {epoch_bumps}, {:.2?}",
        log.len(),
        started.elapsed()
    );
    Run {
        ledger,
        log,
        fatal,
        producer_ids,
        epoch_bumps,
    }
}

/// Where each value sits in the log.
fn positions(log: &[ReadRecord]) -> BTreeMap<Vec<u8>, Vec<i64>> {
    let mut at: BTreeMap<Vec<u8>, Vec<i64>> = BTreeMap::new();
    for r in log {
        at.entry(r.value.clone().unwrap_or_default())
            .or_default()
            .push(r.offset);
    }
    at
}

/// The first two phases: all delivered; the first still in the log once at its offset, the
/// second gone (the broker lost it).
fn check_loss(run: &Run) {
    let at = positions(&run.log);
    for (i, e) in run.ledger.entries()[..2 * PHASE].iter().enumerate() {
        let d = match &e.outcome {
            Some(Ok(d)) => d,
            other => panic!("record {i} of the first two phases: {other:?}"),
        };
        let found = at.get(&e.value).cloned().unwrap_or_default();
        if i < PHASE {
            assert_eq!(found, vec![d.offset.expect("an offset")], "record {i}");
        } else {
            assert!(
                found.is_empty(),
                "record {i}, acknowledged by the old leader alone, survived the unclean \
                 election at {found:?}: the scenario did not lose data"
            );
        }
    }
}

#[test]
fn unclean_election_on_kafka_4_4_under_a_fatal_data_loss_policy_stops_the_producer() {
    fatal_policy_stops_the_producer(KAFKA_VERSION);
}

#[test]
fn unclean_election_on_kafka_4_4_with_the_default_policy_goes_on() {
    default_policy_goes_on(KAFKA_VERSION);
}

#[test]
fn unclean_election_on_kafka_2_3_under_a_fatal_data_loss_policy_stops_the_producer() {
    fatal_policy_stops_the_producer(KAFKA_2_VERSION);
}

#[test]
fn unclean_election_on_kafka_2_3_with_the_default_policy_goes_on() {
    default_policy_goes_on(KAFKA_2_VERSION);
}

/// Under `DataLossPolicy::Fatal`: the producer stops with `FatalError::DataLoss`, the last
/// phase's records fail with it, not persisted, and are absent from the log.
fn fatal_policy_stops_the_producer(version: &'static str) {
    let run = unclean_election("kprod-unclean-fatal", version, DataLossPolicy::Fatal);
    check_loss(&run);
    assert!(
        matches!(run.fatal, Some(Fatal::Producer(FatalError::DataLoss))),
        "{:?}",
        run.fatal
    );
    let at = positions(&run.log);
    for (i, e) in run.ledger.entries()[2 * PHASE..].iter().enumerate() {
        match &e.outcome {
            Some(Err(err)) => {
                assert!(
                    matches!(
                        err.kind,
                        ErrorKind::Failed(FailureReason::Fatal(FatalError::DataLoss))
                    ),
                    "record {i} of the last phase: {err:?}"
                );
                assert_eq!(err.persisted, Persistence::NotPersisted, "record {i}");
                assert!(
                    !at.contains_key(&e.value),
                    "record {i} failed NotPersisted is in the log"
                );
            }
            other => panic!("record {i} of the last phase: {other:?}"),
        }
    }
    assert_eq!(run.log.len(), PHASE, "the log holds the first phase only");
}

/// Under the default policy: the producer goes on under a new identity (an epoch bump, or a
/// new producer id without KIP-360) and delivers the last phase after the log's end, once,
/// in order, at its offsets.
fn default_policy_goes_on(version: &'static str) {
    let run = unclean_election(
        "kprod-unclean-continue",
        version,
        DataLossPolicy::SignalAndContinue,
    );
    check_loss(&run);
    assert!(run.fatal.is_none(), "{:?}", run.fatal);
    // A new identity after the loss: a new producer id where the broker has no KIP-360
    // (2.3.1), an epoch bump where it has (4.4.0).
    let kip360 = version != KAFKA_2_VERSION;
    assert_eq!(
        (run.producer_ids, run.epoch_bumps),
        if kip360 { (1, 1) } else { (2, 0) },
        "(producer ids, epoch bumps) after the loss"
    );
    let at = positions(&run.log);
    let mut last = -1;
    for (i, e) in run.ledger.entries()[2 * PHASE..].iter().enumerate() {
        let d = match &e.outcome {
            Some(Ok(d)) => d,
            other => panic!("record {i} of the last phase: {other:?}"),
        };
        let offset = d.offset.expect("an offset");
        assert_eq!(at.get(&e.value), Some(&vec![offset]), "record {i}");
        assert!(offset > last, "record {i} out of order");
        last = offset;
    }
    assert_eq!(run.log.len(), 2 * PHASE, "the first and the last phase");
}
