//! Leader changes and replication faults on a 3-node Apache Kafka 4.4.0 cluster, under load:
//! a leader SIGKILLed mid-run and restarted, a leader SIGSTOPped for longer than the request
//! timeout and resumed (a zombie leader), a controlled shutdown (SIGTERM) of a leader, and
//! `acks=all` with too few in-sync replicas (NOT_ENOUGH_REPLICAS).
//!
//! Records are paced (one every millisecond, round-robin over the partitions) so that the
//! fault lands while batches are in flight. After each scenario every node is running again,
//! the independent reader (librdkafka's consumer) reads the topic, and the ledger asserts per
//! partition: no duplicate, send order kept, every acknowledged record at its offset (and
//! every acknowledgement carries one), every `NotPersisted` failure absent, every future
//! resolved.
//!
//! Needs `scripts/install-kafka.sh` and Java 17+.

use std::time::{Duration, Instant};

use kprod_core::protocol::ErrorCode;
use kprod_core::{DeliveryError as CoreError, ProducerConfig};
use kprod_tests::e2e::runtime;
use kprod_tests::kafka::KafkaOptions;
use kprod_tests::ledger::{Ledger, Summary};
use kprod_tests::{numbered_batch, Kafka, WireClient};
use kprod_tokio::{ErrorKind, ProducerHandle};

const PARTITIONS: i32 = 3;
/// Bound on resolving every record once the cluster is whole again.
const RESOLVE: Duration = Duration::from_secs(90);
/// Records before the fault, during it, and after the healing.
const PHASE: usize = 600;

fn config(kafka: &Kafka, request_timeout: Duration, delivery_timeout: Duration) -> ProducerConfig {
    ProducerConfig {
        batch_size: 2_000,
        request_timeout,
        delivery_timeout,
        ..kafka.fault_config("kprod-leaders")
    }
}

/// Sends `n` paced records round-robin over the partitions.
async fn send_paced(ledger: &mut Ledger, producer: &ProducerHandle, n: usize) {
    for i in 0..n {
        ledger
            .enqueue(producer, (i % PARTITIONS as usize) as i32)
            .await;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Resolves every record, reads the log back and checks it; every acknowledgement must carry
/// its offset on Kafka.
fn verify(rt: &tokio::runtime::Runtime, kafka: &Kafka, ledger: &mut Ledger) -> Summary {
    rt.block_on(ledger.resolve(RESOLVE));
    let summary = rt.block_on(ledger.read_and_check(&kafka.bootstrap()));
    println!("{}: {summary:?}", ledger.topic());
    assert_eq!(
        summary.delivered_without_offset, 0,
        "on Kafka every acknowledgement carries its offset: {summary:?}"
    );
    summary
}

/// A 3-node cluster and a topic with replication 3 and `min.insync.replicas=min_insync`.
fn cluster(topic: &str, min_insync: i32) -> Kafka {
    let kafka = Kafka::start_with(KafkaOptions::new(3));
    kafka.create_topic(topic, PARTITIONS, 3, Some(min_insync));
    kafka
}

/// The fault applied to the leader of partition 0, and how it is healed.
#[derive(Debug, Clone, Copy)]
enum LeaderFault {
    /// SIGKILL; heal by restarting the node.
    Kill,
    /// SIGTERM (controlled shutdown: leaderships move first); heal by restarting it.
    ControlledShutdown,
    /// SIGSTOP until the leadership moved and the request timeout passed; heal by SIGCONT.
    Pause,
}

fn leader_fault(fault: LeaderFault) {
    let started = Instant::now();
    let topic = format!("kprod-leader-{fault:?}").to_lowercase();
    let mut kafka = cluster(&topic, 2);
    let request_timeout = Duration::from_secs(2);
    let rt = runtime();
    let producer = rt.block_on(async {
        ProducerHandle::connect(config(&kafka, request_timeout, Duration::from_secs(120)))
            .expect("valid config")
    });
    let mut ledger = Ledger::new(&topic, PARTITIONS);
    rt.block_on(send_paced(&mut ledger, &producer, PHASE));

    let leader = kafka.leader(&topic, 0);
    let asked_before = rt.block_on(producer.metrics()).metadata_requests;
    let faulted_at = Instant::now();
    match fault {
        LeaderFault::Kill => kafka.kill(leader),
        LeaderFault::ControlledShutdown => kafka.stop(leader),
        LeaderFault::Pause => kafka.pause(leader),
    }
    // Keep sending while the cluster elects a new leader.
    rt.block_on(send_paced(&mut ledger, &producer, PHASE));
    let new_leader = kafka.wait_leader_moved(&topic, 0, leader);
    let moved_after = faulted_at.elapsed();
    match fault {
        LeaderFault::Kill | LeaderFault::ControlledShutdown => kafka.restart(leader),
        LeaderFault::Pause => {
            // The fault is a pause longer than the request timeout: requests to the paused
            // leader time out at the client. (This wait is the fault's length, not a sync.)
            let left =
                (request_timeout + Duration::from_millis(500)).saturating_sub(faulted_at.elapsed());
            std::thread::sleep(left);
            kafka.resume(leader);
        }
    }
    let healed_after = faulted_at.elapsed();
    rt.block_on(send_paced(&mut ledger, &producer, PHASE));
    let summary = verify(&rt, &kafka, &mut ledger);
    let metrics = rt.block_on(producer.metrics());
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), producer.close())
            .await
            .expect("close() finishes")
    });
    println!(
        "{fault:?} of node {leader} (leader of {topic}/0): leadership moved to {new_leader} \
         after {moved_after:.2?}, healed after {healed_after:.2?}; scenario took {:.2?}",
        started.elapsed()
    );
    assert_eq!(summary.sent, 3 * PHASE);
    // The fault was felt: partition 0's new leader can only be learned from a metadata
    // answer asked for after it (the periodic refresh is minutes away).
    assert!(
        metrics.metadata_requests > asked_before,
        "no metadata request after the fault ({metrics:?})"
    );
    // With a 120 s delivery timeout and the leadership back within seconds, nothing fails.
    assert!(summary.all_delivered(), "{summary:?}");
    assert_eq!(summary.in_log, summary.sent, "{summary:?}");
}

#[test]
fn leader_killed_mid_run_and_restarted() {
    leader_fault(LeaderFault::Kill);
}

#[test]
fn leader_paused_longer_than_the_request_timeout() {
    leader_fault(LeaderFault::Pause);
}

#[test]
fn leader_controlled_shutdown_mid_run() {
    leader_fault(LeaderFault::ControlledShutdown);
}

/// `acks=all`, replication 3, `min.insync.replicas=3`, one follower of partition 0 killed:
/// once the ISR shrinks, Produce to partition 0 draws NOT_ENOUGH_REPLICAS (19, nothing
/// appended: retried, and if it runs out of time failed NotPersisted) or, for a batch
/// appended before the shrink was noticed, NOT_ENOUGH_REPLICAS_AFTER_APPEND (20: retried,
/// never failed as NotPersisted). Phase 1: a short delivery timeout, so records fail while the
/// follower is down, every failure truthful. Phase 2: the follower comes back within the
/// delivery timeout, and every record is delivered exactly once.
#[test]
fn not_enough_replicas_with_a_follower_down() {
    let topic = "kprod-min-isr-fail";
    let recover = "kprod-min-isr-recover";
    let mut kafka = cluster(topic, 3);
    kafka.create_topic(recover, PARTITIONS, 3, Some(3));
    let rt = runtime();
    let leader = kafka.leader(topic, 0);
    let follower = (1..=3).find(|&n| n != leader).expect("a follower");
    kafka.kill(follower);
    kafka.wait_isr_below(topic, 0, 3);
    kafka.wait_isr_below(recover, 0, 3);
    // What the producer meets: the leader refuses an acks=all Produce with 19.
    let probe = not_enough_replicas_probe(&kafka, topic, leader);
    assert_eq!(
        probe,
        ErrorCode::NotEnoughReplicas,
        "raw-wire probe of {topic}/0"
    );

    // Phase 1: 5 s delivery timeout, the follower stays down: partition 0's records fail.
    let short = rt.block_on(async {
        ProducerHandle::connect(config(
            &kafka,
            Duration::from_secs(2),
            Duration::from_secs(5),
        ))
        .expect("valid config")
    });
    let mut failing = Ledger::new(topic, PARTITIONS);
    rt.block_on(async {
        for _ in 0..50 {
            failing.enqueue(&short, 0).await;
        }
        failing.resolve(Duration::from_secs(30)).await;
    });
    let outcomes = failing.outcomes();
    println!("follower down, 5 s delivery timeout: {outcomes:?}");
    assert_eq!(outcomes.failed(), 50, "{outcomes:?}");
    // kprod reports the delivery timeout with the last broker error that held the batch
    // back (a batch still queued behind five in flight has none); all were refused before
    // append, so all are NotPersisted (and the log check below confirms they are absent).
    assert_eq!(outcomes.failed_not_persisted, 50, "{outcomes:?}");
    let errors = failing.errors();
    let nenr = ErrorKind::Failed(CoreError::DeliveryTimeout {
        last_error: Some(ErrorCode::NotEnoughReplicas),
    });
    let unsent = ErrorKind::Failed(CoreError::DeliveryTimeout { last_error: None });
    assert!(
        errors.iter().all(|e| **e == nenr || **e == unsent),
        "{errors:?}"
    );
    assert!(errors.contains(&&nenr), "{errors:?}");
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), short.close())
            .await
            .expect("close() finishes")
    });

    // Phase 2: a 120 s delivery timeout; the follower returns while records are retried.
    let producer = rt.block_on(async {
        ProducerHandle::connect(config(
            &kafka,
            Duration::from_secs(2),
            Duration::from_secs(120),
        ))
        .expect("valid config")
    });
    let mut ledger = Ledger::new(recover, PARTITIONS);
    rt.block_on(send_paced(&mut ledger, &producer, PHASE));
    kafka.restart(follower);
    rt.block_on(send_paced(&mut ledger, &producer, PHASE));
    let summary = verify(&rt, &kafka, &mut ledger);
    assert!(summary.all_delivered(), "{summary:?}");
    // Phase 1's failures, checked against the log now that the follower is back:
    // NotPersisted ones are absent.
    let phase1 = rt.block_on(failing.read_and_check(&kafka.bootstrap()));
    println!("phase 1 against the log: {phase1:?}");
    assert_eq!(phase1.failed(), 50);
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), producer.close())
            .await
            .expect("close() finishes")
    });
}

/// One idempotent acks=all Produce of one record to `topic`/0 on its leader, on the raw wire.
fn not_enough_replicas_probe(kafka: &Kafka, topic: &str, leader: i32) -> ErrorCode {
    let mut c = WireClient::connect(kafka.node_addr(kafka.index_of(leader))).expect("connect");
    let r = c.init_producer_id(4, -1, -1);
    assert_eq!(r.error_code, 0, "{r:?}");
    let p = c.produce(
        topic,
        9,
        0,
        numbered_batch(r.producer_id, r.producer_epoch, 0, 1),
    );
    ErrorCode::from_i16(p.error_code)
}
