//! kprod against franz-go's fake cluster (kfake, 3 brokers), a third broker that validates
//! idempotent sequences as Kafka does: leaders move every few milliseconds while records flow,
//! and Produce requests are refused (nothing written), refused after the append (written),
//! dropped with their connection (nothing written), have their answers lost (written, then the
//! connection closed) or are held past the request timeout and then written, in an order
//! drawn from a seeded generator (`KPROD_KFAKE_SEED` replays the choices; the seed is
//! printed).
//!
//! But for the UNKNOWN_PRODUCER_ID tests, no fault here loses broker state, so a correct
//! producer needs no new epoch (the OUT_OF_ORDER_SEQUENCE_NUMBER answers it meets are for
//! batches behind a refused one, retried after it): the producer keeps its one producer id and
//! epoch throughout, every record is delivered with its offset (a retry of a written batch is
//! answered as a duplicate at the original offset), and the independent reader (librdkafka's
//! consumer) finds each record once, in send order, at its offset.
//!
//! Needs `scripts/install-franz-bench.sh` (Go, from the Go module proxy).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kprod_core::ProducerConfig;
use kprod_tests::e2e::runtime;
use kprod_tests::fuzz::Rng;
use kprod_tests::kfake::{FaultStats, Kfake};
use kprod_tests::ledger::{Ledger, Summary};
use kprod_tests::seed_from_env;
use kprod_tokio::ProducerHandle;

/// Records per burst; a burst every millisecond at most.
const BURST: usize = 20;
/// Produce requests the cluster reads between two faults, at least.
const FAULT_GAP: u64 = 3;

/// The producer's settings for these runs: short timeouts and backoffs, so that faults are
/// recovered from quickly, and a delivery timeout no fault here may reach.
fn config(kfake: &Kfake, client_id: &str) -> ProducerConfig {
    ProducerConfig {
        bootstrap_servers: kfake.bootstrap().split(',').map(str::to_owned).collect(),
        client_id: Some(client_id.into()),
        linger: Duration::from_millis(2),
        batch_size: 4_000,
        request_timeout: Duration::from_secs(2),
        retry_backoff: Duration::from_millis(5),
        retry_backoff_max: Duration::from_millis(100),
        reconnect_backoff: Duration::from_millis(5),
        delivery_timeout: Duration::from_secs(120),
        allow_auto_topic_creation: false,
        ..ProducerConfig::default()
    }
}

/// What a run met.
struct Run {
    seed: u64,
    stats: FaultStats,
    summary: Summary,
    /// Failed records by `"{kind:?} {persisted:?}"`.
    failures: BTreeMap<String, usize>,
    producer_ids: u64,
    epoch_bumps: u64,
}

impl Run {
    /// Every record delivered with its offset and in the log (the ledger's checks, run for
    /// every test, already found each once, in send order, at its offset).
    fn assert_all_delivered(&self) {
        let s = &self.summary;
        assert!(
            s.all_delivered() && s.in_log == s.sent,
            "seed {}: {s:?}, failures {:?}",
            self.seed,
            self.failures
        );
    }

    /// No fault lost broker state: one producer id, one epoch (the OUT_OF_ORDER_SEQUENCE_NUMBER
    /// answers met were for batches behind a refused one).
    fn assert_one_identity(&self) {
        assert_eq!(
            (self.producer_ids, self.epoch_bumps),
            (1, 0),
            "seed {}: a new producer id or epoch without any broker state lost ({:?})",
            self.seed,
            self.stats
        );
    }

    /// Every kind of fault met requests, and some lost answers were of written batches:
    /// their retries, and those of the batches refused after the append, are the duplicates
    /// kfake answers at the original offsets.
    fn assert_every_fault_met(&self) {
        let stats = self.stats;
        assert!(stats.failed > 0, "{stats:?}");
        assert!(stats.after > 0, "{stats:?}");
        assert!(stats.dropped > 0, "{stats:?}");
        assert!(stats.lost_written > 0, "{stats:?}");
    }
}

/// Runs `records` records over `partitions` partitions of a new 3-broker cluster while
/// `fault` runs again and again until every record has its outcome (the producer configured by
/// `tweak` from [`config`]), then resolves and checks everything. Returns what it met.
fn under_faults(
    topic: &str,
    partitions: i32,
    records: usize,
    tweak: impl FnOnce(ProducerConfig) -> ProducerConfig,
    mut fault: impl FnMut(&mut Kfake, &mut Rng) -> String,
) -> Run {
    let seed = seed_from_env("KPROD_KFAKE_SEED");
    // The choices of faults from one generator, the pauses between them from another, so
    // that a seed replays the choices whatever the timing.
    let mut rng = Rng::new(seed);
    let mut pace = Rng::new(!seed);
    let mut kfake = Kfake::start(3, &[(topic, partitions)]);
    let rt = runtime();
    let config = tweak(config(&kfake, topic));
    let producer = rt.block_on(async { ProducerHandle::connect(config).expect("valid config") });

    let done = Arc::new(AtomicBool::new(false));
    let sender = rt.spawn({
        let (done, producer, topic) = (done.clone(), producer.clone(), topic.to_owned());
        async move {
            let mut ledger = Ledger::new(&topic, partitions);
            let mut k = 0usize;
            while k < records {
                for _ in 0..BURST.min(records - k) {
                    ledger
                        .enqueue(&producer, (k % partitions as usize) as i32)
                        .await;
                    k += 1;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            // Faults go on until every record has its outcome.
            producer.flush().await;
            done.store(true, Ordering::Relaxed);
            ledger
        }
    });

    let mut faults = Vec::new();
    let mut mark = 0;
    // Every record has an outcome within the delivery timeout (120 s): a run still going
    // after 240 s is a failure, not a wait for ever.
    let deadline = std::time::Instant::now() + Duration::from_secs(240);
    while !done.load(Ordering::Relaxed) && !sender.is_finished() {
        assert!(
            std::time::Instant::now() < deadline,
            "seed {seed}: records still without an outcome after 240 s ({:?})",
            kfake.stats()
        );
        // At most one fault per FAULT_GAP Produce requests: where requests are scarce (one
        // partition, one in flight, a producer in its backoffs) faults every few milliseconds
        // would meet every request, and no producer could make progress.
        let produce = kfake.stats().produce;
        if produce >= mark + FAULT_GAP {
            faults.push(fault(&mut kfake, &mut rng));
            mark = produce;
        }
        // The pace of the faults (load shaping, not a synchronisation).
        std::thread::sleep(Duration::from_millis(2 + pace.below(10)));
    }
    let mut ledger = rt.block_on(sender).expect("the sender task");
    kfake.clear_faults();
    let stats = kfake.stats();
    println!("seed {seed}: {} faults issued, {stats:?}", faults.len());

    rt.block_on(ledger.resolve(Duration::from_secs(150)));
    let summary = rt.block_on(ledger.read_and_check(&kfake.bootstrap()));
    let m = rt.block_on(producer.metrics());
    println!("seed {seed}: {summary:?}");
    let mut failures = BTreeMap::<String, usize>::new();
    for e in ledger.entries() {
        if let Some(Err(e)) = &e.outcome {
            *failures
                .entry(format!("{:?} {:?}", e.kind, e.persisted))
                .or_default() += 1;
        }
    }
    println!("seed {seed}: failures {failures:?}");
    println!(
        "batches sent {}, retries {}, epoch bumps {}, producer ids {}, connections opened {}",
        m.batches_sent, m.retries, m.epoch_bumps, m.producer_ids, m.connections_opened
    );
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), producer.close())
            .await
            .expect("close() finishes")
    });

    assert_eq!(summary.sent, records, "{summary:?}");
    assert_eq!(
        summary.delivered_without_offset, 0,
        "seed {seed}: {summary:?}"
    );
    assert!(
        m.retries > 0,
        "seed {seed}: no batch was retried ({stats:?})"
    );
    Run {
        seed,
        stats,
        summary,
        failures,
        producer_ids: m.producer_ids,
        epoch_bumps: m.epoch_bumps,
    }
}

/// Leaders move every few milliseconds while keyed records flow over six partitions: batches
/// in flight to a node that stopped leading are refused NOT_LEADER_OR_FOLLOWER (kfake writes
/// nothing there) and retried at the new leader under the same sequences.
#[test]
fn leaders_move_every_few_milliseconds() {
    let run = under_faults(
        "kfake-leaders",
        6,
        40_000,
        |c| c,
        |kfake, _rng| {
            kfake.shuffle_leaders();
            "shuffle".into()
        },
    );
    run.assert_all_delivered();
    run.assert_one_identity();
}

/// One fault drawn from `rng`: a leader shuffle; a refusal (NOT_LEADER_OR_FOLLOWER,
/// NOT_ENOUGH_REPLICAS, UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR: nothing written); a
/// refusal after the append (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND: written);
/// each of those two for a whole request or for one partition of it; a connection dropped
/// before the request is read; or an answer lost after the request was processed.
fn mixed_fault(topic: &str, partitions: i32) -> impl FnMut(&mut Kfake, &mut Rng) -> String {
    let topic = topic.to_owned();
    move |kfake, rng| {
        let partition = rng.below(partitions as u64 + 1) as i32;
        // One partition of a request, or (partition == partitions) all of it.
        let only = (partition < partitions).then_some((topic.as_str(), partition));
        match rng.below(7) {
            0 => {
                kfake.shuffle_leaders();
                "shuffle".into()
            }
            1 | 2 => {
                let code = [6, 19, 3, 56][rng.below(4) as usize];
                kfake.fail_produce(code, 1 + rng.below(3) as u32, only);
                format!("fail {code} {only:?}")
            }
            3 => {
                let code = [7, 20][rng.below(2) as usize];
                kfake.fail_produce_after_append(code, 1 + rng.below(2) as u32, only);
                format!("after {code} {only:?}")
            }
            4 => {
                kfake.drop_produce(1);
                "drop".into()
            }
            _ => {
                kfake.lose_produce_answers(1);
                "lose".into()
            }
        }
    }
}

/// Six partitions, five requests in flight per connection: leader moves, refusals before and
/// after the append (of whole requests and of single partitions), dropped connections and
/// lost answers, in a seeded order.
#[test]
fn refusals_dropped_connections_and_lost_answers() {
    let run = under_faults(
        "kfake-faults",
        6,
        40_000,
        |c| c,
        mixed_fault("kfake-faults", 6),
    );
    run.assert_all_delivered();
    run.assert_one_identity();
    run.assert_every_fault_met();
}

/// The same faults over 48 partitions with no linger, so requests carry many partitions'
/// batches and a single-partition fault leaves the rest of its request written.
#[test]
fn faults_on_single_partitions_of_many_partition_requests() {
    let run = under_faults(
        "kfake-many",
        48,
        40_000,
        |c| ProducerConfig {
            linger: Duration::ZERO,
            ..c
        },
        mixed_fault("kfake-many", 48),
    );
    run.assert_all_delivered();
    run.assert_one_identity();
    run.assert_every_fault_met();
}

/// The same faults with one request in flight per connection
/// (`max.in.flight.requests.per.connection=1`).
#[test]
fn faults_with_one_request_in_flight() {
    let run = under_faults(
        "kfake-one",
        6,
        20_000,
        |c| ProducerConfig {
            max_in_flight: 1,
            ..c
        },
        mixed_fault("kfake-one", 6),
    );
    run.assert_all_delivered();
    run.assert_one_identity();
    run.assert_every_fault_met();
}

/// The mix of faults on one partition with, now and then, a request refused
/// UNKNOWN_PRODUCER_ID (nothing written), as a broker answers once it lost the producer's
/// state. kprod takes a new epoch. A batch refused so whose earlier attempt may have been
/// written (its answer lost, or refused after the append) fails `PossiblyPersisted`: sent again
/// under the new epoch it would be a second copy if the first is in the log. Every other
/// record must be delivered once, in order.
///
/// One partition, because kfake keeps a producer's epoch per producer id rather than per
/// partition as Kafka does: over several partitions, batches of the old epoch still in flight
/// to the others are refused INVALID_PRODUCER_EPOCH once one partition moved to the new epoch
/// (kprod then fails the possibly written ones `PossiblyPersisted`, truthfully, where Kafka
/// would have taken or deduplicated them).
#[test]
fn unknown_producer_id_mid_run_moves_to_a_new_epoch() {
    let mut mixed = mixed_fault("kfake-pid", 1);
    let run = under_faults(
        "kfake-pid",
        1,
        20_000,
        |c| c,
        move |kfake, rng| {
            if rng.below(8) == 0 {
                kfake.fail_produce(59, 1, None);
                "fail 59".into()
            } else {
                mixed(kfake, rng)
            }
        },
    );
    assert!(
        run.producer_ids + run.epoch_bumps > 1,
        "seed {}: no new identity ({:?})",
        run.seed,
        run.stats
    );
    let allowed = "Failed(Broker(UnknownProducerId)) PossiblyPersisted";
    assert!(
        run.failures.keys().all(|k| k == allowed),
        "seed {}: failures other than {allowed}: {:?}",
        run.seed,
        run.failures
    );
    let s = &run.summary;
    assert_eq!(s.delivered + s.failed_possibly_persisted, s.sent, "{s:?}");
    run.assert_every_fault_met();
}

/// One UNKNOWN_PRODUCER_ID, with nothing else wrong: kprod bumps its epoch locally (KIP-360;
/// kfake takes the new epoch at sequence 0), keeps its producer id, and every record is
/// delivered once, in order, at its offset.
#[test]
fn one_unknown_producer_id_costs_one_epoch_and_no_record() {
    let topic = "kfake-one-pid";
    let mut kfake = Kfake::start(3, &[(topic, 1)]);
    let rt = runtime();
    let producer = rt
        .block_on(async { ProducerHandle::connect(config(&kfake, topic)).expect("valid config") });
    let mut ledger = Ledger::new(topic, 1);
    rt.block_on(async {
        for _ in 0..500 {
            ledger.enqueue(&producer, 0).await;
        }
        producer.flush().await;
    });
    kfake.fail_produce(59, 1, None);
    rt.block_on(async {
        for _ in 0..2_000 {
            ledger.enqueue(&producer, 0).await;
        }
    });
    rt.block_on(ledger.resolve(Duration::from_secs(60)));
    let summary = rt.block_on(ledger.read_and_check(&kfake.bootstrap()));
    let m = rt.block_on(producer.metrics());
    let stats = kfake.stats();
    assert_eq!(stats.failed, 1, "{stats:?}");
    assert!(
        summary.all_delivered() && summary.in_log == 2_500,
        "{summary:?}"
    );
    assert_eq!(
        (m.producer_ids, m.epoch_bumps),
        (1, 1),
        "{summary:?} {stats:?}"
    );
}

/// The mix of faults over 12 partitions (batches of at most 1,000 bytes, for many requests)
/// with, one fault in eight, a request held 1.5–3 s and then processed and answered: around
/// the producer's 2 s request timeout, so that kprod mostly gives the connection up and sends
/// the batch again, and the held request reaches the broker after the retry (a duplicate) or
/// before it (written, the retry then the duplicate). Every record must be delivered once, in
/// order, with its one producer id and epoch.
#[test]
fn requests_held_around_the_request_timeout_then_processed() {
    let mut mixed = mixed_fault("kfake-held", 12);
    let run = under_faults(
        "kfake-held",
        12,
        40_000,
        |c| ProducerConfig {
            batch_size: 1_000,
            ..c
        },
        move |kfake, rng| {
            if rng.below(8) == 0 {
                let ms = 1_500 + rng.below(1_500);
                kfake.hold_produce(ms, 1);
                format!("hold {ms}")
            } else {
                mixed(kfake, rng)
            }
        },
    );
    // Holds stall the flow, so fewer faults of each other kind meet requests here: those
    // that write are asserted, as the held ones. (How many held requests the broker took or
    // found a duplicate of, `held_taken`, is printed, not asserted: by the time one is
    // processed its partition may have moved to another leader, or its retry's batch left
    // the broker's last five, and the answer is a refusal the producer never reads.)
    let stats = run.stats;
    assert!(
        stats.held > 0 && stats.lost_written + stats.after > 0,
        "{stats:?}"
    );
    run.assert_all_delivered();
    run.assert_one_identity();
}
