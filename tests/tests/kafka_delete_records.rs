//! Records deleted under a running producer (DeleteRecords up to the high watermark, as
//! `kafka-delete-records.sh` and Kafka Streams' purge of its repartition topics do), on real
//! Apache Kafka brokers of three generations, and 2.4.1, of the first release line with the
//! fix below.
//!
//! Before 2.4, a broker forgets a producer once the log start passes its last batch
//! (KAFKA-7190): the producer's next batch, sequenced after the deleted ones, meets no state.
//! Kafka 2.3.1 then answers UNKNOWN_PRODUCER_ID with a log start right after the last
//! acknowledged record, which kprod takes as benign state loss: without KIP-360 on that
//! broker, the partition moves to a new producer id and starts its sequences over, and no
//! record is lost or failed. Kafka 0.11.0.3 has no UNKNOWN_PRODUCER_ID (nor a log start in
//! Produce v3 answers): it refuses such a batch OUT_OF_ORDER_SEQUENCE_NUMBER. Kafka 4.4.0
//! keeps the producer's state, so nothing happens there: the control.
//!
//! Each test: one node, 3 partitions; seven rounds of 300 records, paced (a millisecond
//! every third record). The sender does not pause: the records are deleted after each of the
//! first six rounds while the next round's batches are lingering or in flight. The
//! independent reader then checks the log against every outcome: every record still above
//! the log start once, in order, at its reported offset, no `NotPersisted` record in the
//! log. 0.11.0.3's answer is also its answer after real loss, so kprod signals data loss
//! there (README, "Known limits and choices").
//!
//! Needs `scripts/install-kafka.sh` (`kafka-2.4`, `kafka-2`, `kafka-0.11`) and Java 17+.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kprod_core::{DataLossPolicy, FatalError, Metrics};
use kprod_tests::e2e::{close, runtime};
use kprod_tests::kafka::{
    KafkaOptions, KAFKA_0_11_VERSION, KAFKA_2_4_VERSION, KAFKA_2_VERSION, KAFKA_VERSION,
};
use kprod_tests::ledger::{Ledger, Summary};
use kprod_tests::Kafka;
use kprod_tokio::{Fatal, ProducerHandle};

const PARTITIONS: i32 = 3;
const ROUNDS: usize = 7;
const PER_ROUND: usize = 300;
const TIMEOUT: Duration = Duration::from_secs(120);

/// Runs the rounds on one node of Apache Kafka `version`; returns the outcomes of every
/// record (the log's check, which leaves out records deleted, passed) and the producer's
/// metrics; the failures' error kinds are printed.
fn deleted_under_load(version: &'static str, policy: DataLossPolicy) -> (Summary, Metrics) {
    let started = Instant::now();
    let kafka = Kafka::start_with(KafkaOptions::new(1).version(version));
    let topic = "kprod-delete-records";
    kafka.create_topic(topic, PARTITIONS, 1, None);
    let rt = runtime();
    let mut cfg = kafka.fault_config("kprod-delete-records");
    cfg.delivery_timeout = Duration::from_secs(60);
    cfg.data_loss_policy = policy;
    let producer = rt.block_on(async { ProducerHandle::connect(cfg).expect("valid config") });
    // The sender goes on without a pause while the records are deleted: it says when each
    // round is enqueued, and the deletion after it meets that round's last batches lingering
    // or in flight and the next round's first ones.
    // The last round waits until every deletion is done, so that its records are all above
    // the final log start and the log's check has them to check.
    let (rounds_tx, rounds_rx) = std::sync::mpsc::channel::<usize>();
    let (deleted_tx, mut deleted_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let sender = {
        let producer = producer.clone();
        rt.spawn(async move {
            let mut ledger = Ledger::new(topic, PARTITIONS);
            for round in 0..ROUNDS {
                if round + 1 == ROUNDS {
                    for _ in 0..ROUNDS - 1 {
                        deleted_rx.recv().await.expect("the deletions");
                    }
                }
                for k in 0..PER_ROUND {
                    ledger
                        .enqueue(&producer, (k % PARTITIONS as usize) as i32)
                        .await;
                    if k % 3 == 2 {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
                let _ = rounds_tx.send(round);
            }
            ledger
        })
    };
    let mut log_start = BTreeMap::new();
    let mut deletions = 0;
    while let Ok(round) = rounds_rx.recv() {
        if round + 1 < ROUNDS {
            log_start = kafka.delete_records(topic, PARTITIONS);
            deletions += 1;
            let _ = deleted_tx.send(());
        }
    }
    let mut ledger = rt.block_on(sender).expect("the sender task");
    assert_eq!(deletions, ROUNDS - 1);
    rt.block_on(ledger.resolve(TIMEOUT));
    let summary = rt.block_on(ledger.read_and_check_from(&kafka.bootstrap(), &log_start));
    let metrics = rt.block_on(producer.metrics());
    rt.block_on(close(producer));
    let outcomes = ledger.outcomes();
    let errors: Vec<String> = ledger.errors().iter().map(|e| format!("{e:?}")).collect();
    println!(
        "Kafka {version}: log start {log_start:?}, outcomes {outcomes:?}, checked above the log \
         start {summary:?}, producer ids {}, epoch bumps {}, \
         retries {}, errors {:?}, {:.2?}",
        metrics.producer_ids,
        metrics.epoch_bumps,
        metrics.retries,
        errors.iter().collect::<std::collections::BTreeSet<_>>(),
        started.elapsed()
    );
    assert_eq!(ledger.entries().len(), ROUNDS * PER_ROUND);
    assert_eq!(outcomes.sent, ROUNDS * PER_ROUND);
    assert!(
        log_start.values().all(|&o| o > 0),
        "every partition's records were deleted: {log_start:?}"
    );
    // At least the last round, sent after the last deletion, is in the log and checked.
    assert!(summary.sent >= PER_ROUND, "{summary:?}");
    assert_eq!(summary.in_log, summary.sent, "{summary:?}");
    (outcomes, metrics)
}

/// The control: Kafka 4.4.0 keeps the producer's state past the log start: one producer id,
/// every record delivered, and no data-loss signal (the policy is fatal: one would stop the
/// producer).
#[test]
fn records_deleted_under_load_on_kafka_4_4() {
    kept_past_the_log_start(KAFKA_VERSION);
}

/// Kafka 2.4.1, of the first release line with KAFKA-7190's fix (and still without KIP-360), keeps
/// the producer's state past the log start, as 4.4.0 does: one producer id, every record
/// delivered, and no data-loss signal (the policy is fatal).
#[test]
fn records_deleted_under_load_on_kafka_2_4() {
    kept_past_the_log_start(KAFKA_2_4_VERSION);
}

/// The rounds under `DataLossPolicy::Fatal` on a broker that keeps the producer's state past
/// the log start: every record delivered, one producer id, no data-loss signal.
fn kept_past_the_log_start(version: &'static str) {
    let (outcomes, metrics) = deleted_under_load(version, DataLossPolicy::Fatal);
    assert!(outcomes.all_delivered(), "{outcomes:?}");
    assert_eq!(metrics.producer_ids, 1, "{metrics:?}");
    assert_eq!(metrics.data_loss_signals, 0, "{metrics:?}");
}

/// Kafka 2.3.1 forgets the producer at each deletion (KAFKA-7190) and answers its next
/// batches UNKNOWN_PRODUCER_ID with the new log start, right after the last acknowledged
/// record: kprod moves to a new producer id (no KIP-360 there, so no epoch bump), sends the
/// refused batches again from sequence 0 and delivers every record, with no data-loss
/// signal (the policy is fatal).
#[test]
fn records_deleted_under_load_on_kafka_2_3() {
    let (outcomes, metrics) = deleted_under_load(KAFKA_2_VERSION, DataLossPolicy::Fatal);
    assert!(outcomes.all_delivered(), "{outcomes:?}");
    assert_eq!(metrics.epoch_bumps, 0, "{metrics:?}");
    assert_eq!(metrics.data_loss_signals, 0, "{metrics:?}");
    assert!(
        metrics.producer_ids > 1,
        "the broker forgot the producer, a new id was taken: {metrics:?}"
    );
}

/// Kafka 0.11.0.3 forgets the producer too and refuses its next batches
/// OUT_OF_ORDER_SEQUENCE_NUMBER, without a log start (Produce v3): what a broker that lost
/// acknowledged records answers too, so kprod signals data loss (with the default policy,
/// `SignalAndContinue`), moves to a new producer id and delivers every record: the refused
/// batches were not written, so sending them again under the new id duplicates nothing.
#[test]
fn records_deleted_under_load_on_kafka_0_11() {
    let (outcomes, metrics) =
        deleted_under_load(KAFKA_0_11_VERSION, DataLossPolicy::SignalAndContinue);
    assert!(outcomes.all_delivered(), "{outcomes:?}");
    assert!(metrics.data_loss_signals > 0, "{metrics:?}");
    assert_eq!(metrics.epoch_bumps, 0, "{metrics:?}");
    assert!(
        metrics.producer_ids > 1,
        "the broker forgot the producer, a new id was taken: {metrics:?}"
    );
}

/// On Kafka 0.11.0.3 under `DataLossPolicy::Fatal`: 100 records delivered, deleted, then 100
/// more: the first batch after the deletion is refused OUT_OF_ORDER_SEQUENCE_NUMBER without a
/// log start, which kprod cannot tell from real loss, so the producer stops with
/// `FatalError::DataLoss` and the 100 fail, not persisted (the README's known limit).
#[test]
fn records_deleted_on_kafka_0_11_under_a_fatal_policy_stop_the_producer() {
    let kafka = Kafka::start_with(KafkaOptions::new(1).version(KAFKA_0_11_VERSION));
    let topic = "kprod-delete-records-fatal";
    kafka.create_topic(topic, 1, 1, None);
    let rt = runtime();
    let mut cfg = kafka.fault_config(topic);
    cfg.data_loss_policy = DataLossPolicy::Fatal;
    let producer = rt.block_on(async { ProducerHandle::connect(cfg).expect("valid config") });
    let mut ledger = Ledger::new(topic, 1);
    rt.block_on(async {
        ledger.enqueue_n(&producer, 100).await;
        ledger.resolve(TIMEOUT).await;
    });
    assert!(ledger.outcomes().all_delivered());
    let log_start = kafka.delete_records(topic, 1);
    assert_eq!(log_start.get(&0), Some(&100));
    rt.block_on(async {
        ledger.enqueue_n(&producer, 100).await;
        ledger.resolve(TIMEOUT).await;
    });
    let fatal = producer.fatal();
    let summary = rt.block_on(ledger.read_and_check_from(&kafka.bootstrap(), &log_start));
    rt.block_on(close(producer));
    println!("Kafka 0.11.0.3, records deleted, Fatal policy: {fatal:?}, {summary:?}");
    assert!(
        matches!(fatal, Some(Fatal::Producer(FatalError::DataLoss))),
        "{fatal:?}"
    );
    assert_eq!(
        (summary.sent, summary.failed_not_persisted, summary.in_log),
        (100, 100, 0),
        "{summary:?}"
    );
}
