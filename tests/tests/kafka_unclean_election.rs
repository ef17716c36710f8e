//! Acknowledged records lost by a real broker, and kprod saying so.
//!
//! Apache Kafka 4.4.0 (three KRaft nodes, all controllers: with one of the partition's two
//! replicas down the quorum keeps its majority, and the restarted follower restores it) and
//! 2.3.1 (two nodes, ZooKeeper); one partition with two replicas, `min.insync.replicas=1` and
//! `unclean.leader.election.enable=true`: 100 records delivered while both replicas are in
//! sync; the follower SIGKILLed; 100 more delivered by the leader alone; the leader SIGKILLed
//! and the stale follower restarted, which Kafka then elects uncleanly. The 100 records
//! acknowledged by the leader alone are gone from the log (asserted): Kafka lost acknowledged
//! records, as that setting allows. The new leader rebuilt the producer's state from its own
//! log, so the producer's next batch, sequenced after the lost ones, is refused
//! OUT_OF_ORDER_SEQUENCE_NUMBER with a log start below the last acknowledged offset: kprod's
//! evidence of data loss (spec §B). Under `DataLossPolicy::Fatal` the producer stops with
//! `FatalError::DataLoss` and the waiting records fail and are absent from the log; under
//! `SignalAndContinue` (the default) it signals the loss, moves to a new identity and
//! delivers them after the log's end. The Java producer (on 4.4.0 and 2.3.1), librdkafka and
//! franz-go (on 4.4.0) go through the same election, for comparison (what each tells the
//! application is asserted).
//!
//! Needs `scripts/install-kafka.sh` (and `kafka-2`), `scripts/install-java-ref.sh`,
//! `scripts/install-franz-bench.sh` and Java 17+.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kprod_core::{DataLossPolicy, FatalError, Persistence};
use kprod_tests::e2e::{close, runtime};
use kprod_tests::franz::Phases;
use kprod_tests::javaref::{Flags, JavaLedger, JavaRecord, LedgerPlan, Status};
use kprod_tests::kafka::{KafkaOptions, KAFKA_2_VERSION, KAFKA_VERSION};
use kprod_tests::ledger::{ledger_value, read_log, Ledger};
use kprod_tests::reader::{read_topic, ReadRecord};
use kprod_tests::Kafka;
use kprod_tokio::{ErrorKind, FailureReason, Fatal, ProducerHandle};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::ClientConfig;

const PHASE: usize = 100;
const TIMEOUT: Duration = Duration::from_secs(90);

/// What happened to the three phases of records.
struct Run {
    ledger: Ledger,
    log: Vec<ReadRecord>,
    fatal: Option<Fatal>,
    producer_ids: u64,
    epoch_bumps: u64,
    data_loss_signals: u64,
}

/// A cluster of Apache Kafka `version` with unclean leader election enabled, and `topic`:
/// one partition, two replicas, `min.insync.replicas=1`. Two nodes with ZooKeeper; three
/// with KRaft, every one a controller, so that the quorum keeps its majority while one of
/// the partition's replicas is down (with both down it has none until the follower is back,
/// and the election follows its restart).
struct Cluster {
    kafka: Kafka,
    topic: String,
    leader: i32,
    follower: i32,
}

impl Cluster {
    fn start(topic: &str, version: &'static str) -> Self {
        let nodes = if version == KAFKA_2_VERSION { 2 } else { 3 };
        let kafka = Kafka::start_with(
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
        Self {
            kafka,
            topic: topic.to_owned(),
            leader,
            follower,
        }
    }

    /// The follower SIGKILLed, and out of the ISR: the leader acknowledges alone. The roles
    /// are read again first: both replicas are in sync, so a leadership that moved since the
    /// start (a session expired on a loaded machine) changes nothing but which node is which.
    fn lose_follower(&mut self) {
        let leader = self.in_sync_leader();
        if leader != self.leader {
            println!(
                "{}: leadership moved from {} to {leader} before the faults",
                self.topic, self.leader
            );
            assert_eq!(
                leader, self.follower,
                "{}: led by a node that is not a replica",
                self.topic
            );
            std::mem::swap(&mut self.leader, &mut self.follower);
        }
        self.kafka.kill(self.follower);
        self.kafka.wait_isr_below(&self.topic, 0, 2);
    }

    /// The partition's leader once it has one and both replicas are in its ISR (a node that
    /// does not answer a probe is asked again), within 60 s.
    fn in_sync_leader(&self) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let state = self.kafka.leader_and_isr(&self.topic, 0);
            if let Some((leader, 2)) = state {
                if leader >= 0 {
                    return leader;
                }
            }
            assert!(
                Instant::now() < deadline,
                "{}: no leader with both replicas in sync within 60 s: {state:?}",
                self.topic
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The leader SIGKILLed, the stale follower restarted and elected uncleanly.
    fn elect_stale_follower(&mut self) {
        self.kafka.kill(self.leader);
        self.kafka.restart(self.follower);
        let new_leader = self.kafka.wait_leader_moved(&self.topic, 0, self.leader);
        assert_eq!(new_leader, self.follower);
    }

    /// The client address of node `id` (the reader fails on a bootstrap server that is
    /// down, so it reads from a running one).
    fn addr(&self, id: i32) -> String {
        self.kafka.node_addr(self.kafka.index_of(id)).to_string()
    }
}

/// The three phases with `policy` on a new [`Cluster`] of Apache Kafka `version`.
fn unclean_election(topic: &str, version: &'static str, policy: DataLossPolicy) -> Run {
    let started = Instant::now();
    let mut cluster = Cluster::start(topic, version);
    let kafka = &cluster.kafka;
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
    cluster.lose_follower();
    let (leader, follower) = (cluster.leader, cluster.follower);
    // Acknowledged by the leader alone.
    phase(&mut ledger);
    cluster.elect_stale_follower();
    phase(&mut ledger);
    let log = rt
        .block_on(read_log(&cluster.addr(follower), topic, 1))
        .remove(&0)
        .unwrap_or_default();
    let m = rt.block_on(producer.metrics());
    let (producer_ids, epoch_bumps, data_loss_signals) =
        (m.producer_ids, m.epoch_bumps, m.data_loss_signals);
    let fatal = producer.fatal();
    rt.block_on(close(producer));
    println!(
        "Kafka {version}, {policy:?}: node {leader} led, node {follower} elected uncleanly; log of {} records, \
         fatal {fatal:?}, producer ids {producer_ids}, epoch bumps {epoch_bumps}, data-loss \
         signals {data_loss_signals}, {:.2?}",
        log.len(),
        started.elapsed()
    );
    Run {
        ledger,
        log,
        fatal,
        producer_ids,
        epoch_bumps,
        data_loss_signals,
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

/// Under `DataLossPolicy::Fatal`: the producer stops with `FatalError::DataLoss` (counted
/// once), the last phase's records fail with it and are absent from the log (the refused
/// first batch `NotPersisted`; a batch in flight behind it, if any, `PossiblyPersisted`).
fn fatal_policy_stops_the_producer(version: &'static str) {
    let run = unclean_election("kprod-unclean-fatal", version, DataLossPolicy::Fatal);
    check_loss(&run);
    assert!(
        matches!(run.fatal, Some(Fatal::Producer(FatalError::DataLoss))),
        "{:?}",
        run.fatal
    );
    assert_eq!(run.data_loss_signals, 1, "the loss counted once");
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
                // The refused batch was not written; a batch in flight behind it fails
                // possibly persisted when the producer stops, and was refused too.
                if i == 0 {
                    assert_eq!(err.persisted, Persistence::NotPersisted, "record {i}");
                }
                assert!(
                    !at.contains_key(&e.value),
                    "record {i} failed ({:?}) is in the log",
                    err.persisted
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
    assert_eq!(run.data_loss_signals, 1, "the loss reported once");
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

/// librdkafka (the `rdkafka` crate's, idempotent, acks=all) in the same unclean election on
/// Kafka 4.4.0, each record awaited before the next (so each phase is acknowledged, and in
/// the log, before the next fault). Asserted: the broker lost the second phase here too;
/// librdkafka takes the refusal of the last phase's first batch for a bug of its own
/// ("sequence desynchronization") and stops with a fatal OUT_OF_ORDER_SEQUENCE_NUMBER, so
/// no record of the last phase is delivered, and none is in the log. It does tell the
/// application, unlike the Java producer, but by stopping; it cannot go on.
#[test]
fn librdkafka_in_the_same_unclean_election_on_kafka_4_4() {
    let topic = "rdkafka-unclean";
    let mut cluster = Cluster::start(topic, KAFKA_VERSION);
    let rt = runtime();
    let rd: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", cluster.kafka.bootstrap())
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "0")
        .set("request.timeout.ms", "2000")
        .set("message.timeout.ms", "60000")
        .set("retry.backoff.ms", "20")
        .create()
        .expect("librdkafka producer");
    // Each record's outcome: its offset, or librdkafka's error.
    let (second, last) = three_phases(&mut cluster, |k| {
        rt.block_on(async {
            let mut out = Vec::new();
            for i in k * PHASE..(k + 1) * PHASE {
                let v = ledger_value(topic, 0, i);
                let r = FutureRecord::<(), _>::to(topic).partition(0).payload(&v);
                out.push(match rd.send(r, Duration::from_secs(60)).await {
                    Ok(d) => Ok(d.offset),
                    Err((e, _)) => Err(e),
                });
            }
            out
        })
    });
    let fatal = rd.client().fatal_error();
    let Judged {
        log,
        lost,
        last_phase,
    } = judge(&cluster, "librdkafka", &named(&second), &named(&last));
    println!(
        "librdkafka {}, unclean election on Kafka 4.4.0: second phase {lost} of {PHASE} \
         delivered and lost; last phase {last_phase:?}; fatal error {fatal:?}",
        rdkafka::util::get_rdkafka_version().1
    );
    assert_eq!(
        lost, PHASE,
        "the broker lost the records the leader acknowledged alone"
    );
    assert_eq!(
        fatal.as_ref().map(|(code, _)| *code),
        Some(RDKafkaErrorCode::OutOfOrderSequenceNumber),
        "librdkafka's fatal error"
    );
    // The first record of the last phase draws the broker's refusal; every later one the
    // fatal state.
    let codes: Vec<Option<RDKafkaErrorCode>> = (last.iter())
        .map(|r| r.as_ref().err().and_then(KafkaError::rdkafka_error_code))
        .collect();
    assert_eq!(
        codes[0],
        Some(RDKafkaErrorCode::OutOfOrderSequenceNumber),
        "the last phase's first record: {:?}",
        last[0]
    );
    assert!(
        codes[1..]
            .iter()
            .all(|c| *c == Some(RDKafkaErrorCode::Fatal)),
        "the last phase's later records: {last_phase:?}"
    );
    assert_eq!(log.len(), PHASE, "the log holds the first phase only");
}

/// franz-go (the `franz-bench phases` client, idempotent, acks=all, with a data-loss hook set)
/// in the same unclean election on Kafka 4.4.0, each phase awaited before the next fault.
/// Asserted: the broker lost the second phase here too; every outcome franz-go gives for the
/// last phase is truthful (delivered at an offset holding the record, or failed and absent);
/// franz-go calls its data-loss hook and delivers the whole last phase (as kprod's default
/// policy does).
#[test]
fn franz_go_in_the_same_unclean_election_on_kafka_4_4() {
    franz_go_in_the_same_unclean_election(true);
}

/// The same without the hook, which is opt-in (franz-go's default): the whole last phase is
/// delivered with no error for any record, as the Java producer does, so the application
/// hears of the loss only in franz-go's log.
#[test]
fn franz_go_without_its_data_loss_hook_in_the_same_unclean_election_on_kafka_4_4() {
    franz_go_in_the_same_unclean_election(false);
}

fn franz_go_in_the_same_unclean_election(hook: bool) {
    let topic = "franz-unclean";
    let mut cluster = Cluster::start(topic, KAFKA_VERSION);
    let mut franz = Phases::start(&cluster.kafka.bootstrap(), topic, PHASE, hook);
    let (second, last) = three_phases(&mut cluster, |k| franz.phase(k, TIMEOUT));
    let data_loss = franz.finish();
    let Judged {
        lost, last_phase, ..
    } = judge(&cluster, "franz-go", &second, &last);
    println!(
        "franz-go {}, unclean election on Kafka 4.4.0: second phase {lost} of {PHASE} \
         delivered and lost; last phase {last_phase:?}; data-loss hook set {hook}, called \
         {data_loss} times",
        kprod_tests::franz::version()
    );
    assert_eq!(
        lost, PHASE,
        "the broker lost the records the leader acknowledged alone"
    );
    // franz-go takes the refusal for data loss (its log start is below the last
    // acknowledged offset), calls the hook if set, and goes on under a new identity.
    if hook {
        assert!(data_loss >= 1, "franz-go's data-loss hook was not called");
    } else {
        assert_eq!(data_loss, 0, "no hook, so no DATALOSS line");
    }
    assert_eq!(
        last_phase,
        BTreeMap::from([("delivered".to_owned(), PHASE)]),
        "what franz-go reported for the last phase"
    );
}

/// Runs the three phases with a client whose `phase(k)` sends phase `k`'s records (the
/// ledger's values, partition 0) and returns what it reported for each, in order: both
/// replicas in sync, then the follower lost, then the stale follower elected. Each phase is
/// in the log before the next fault. Returns the second and the last phase's outcomes.
fn three_phases<E: std::fmt::Debug>(
    cluster: &mut Cluster,
    mut phase: impl FnMut(usize) -> Outcomes<E>,
) -> (Outcomes<E>, Outcomes<E>) {
    let topic = cluster.topic.clone();
    let first = phase(0);
    assert!(first.iter().all(Result::is_ok), "first phase: {first:?}");
    wait_log_len(&cluster.addr(cluster.leader), &topic, PHASE);
    cluster.lose_follower();
    let second = phase(1);
    assert!(second.iter().all(Result::is_ok), "second phase: {second:?}");
    wait_log_len(&cluster.addr(cluster.leader), &topic, 2 * PHASE);
    cluster.elect_stale_follower();
    let last = phase(2);
    (second, last)
}

/// What a client reported for each record of a phase, in order: its offset, or its error.
type Outcomes<E> = Vec<Result<i64, E>>;

/// Each outcome with its error as text.
fn named<E: std::fmt::Display>(outcomes: &[Result<i64, E>]) -> Outcomes<String> {
    (outcomes.iter())
        .map(|r| r.as_ref().copied().map_err(ToString::to_string))
        .collect()
}

/// The log after the election, as the independent reader finds it on the new leader, and
/// what a client's reports come to against it.
struct Judged {
    log: Vec<ReadRecord>,
    /// Records of the second phase reported delivered and absent from the log.
    lost: usize,
    /// The last phase's outcomes tallied: "delivered", or the error as reported.
    last_phase: BTreeMap<String, usize>,
}

/// Reads the log and checks `who`'s reports for the second and the last phase against it
/// (each an offset, or the error as the tally names it): every delivery of the last phase at
/// an offset holding the record, every failure absent.
fn judge(
    cluster: &Cluster,
    who: &str,
    second: &[Result<i64, String>],
    last: &[Result<i64, String>],
) -> Judged {
    let topic = &cluster.topic;
    let log = read_topic(
        &cluster.addr(cluster.follower),
        topic,
        1,
        Duration::from_secs(30),
    )
    .unwrap_or_else(|e| panic!("the independent reader failed: {e}"))
    .remove(&0)
    .unwrap_or_default();
    let at = positions(&log);
    let value = |i: usize| ledger_value(topic, 0, i).into_bytes();
    let lost = (second.iter().enumerate())
        .filter(|&(j, r)| r.is_ok() && !at.contains_key(&value(PHASE + j)))
        .count();
    let mut last_phase: BTreeMap<String, usize> = BTreeMap::new();
    for (j, r) in last.iter().enumerate() {
        let i = 2 * PHASE + j;
        let found = at.get(&value(i)).cloned().unwrap_or_default();
        match r {
            Ok(offset) => {
                assert_eq!(found, vec![*offset], "{who} record {i}");
                *last_phase.entry("delivered".into()).or_default() += 1;
            }
            Err(e) => {
                assert!(
                    found.is_empty(),
                    "{who} record {i} failed ({e}) is in the log"
                );
                *last_phase.entry(e.clone()).or_default() += 1;
            }
        }
    }
    Judged {
        log,
        lost,
        last_phase,
    }
}

/// Polls the independent reader at `addr` until `topic` holds `n` records (the high
/// watermark reached them: every replica in the ISR has them), within 60 s.
fn wait_log_len(addr: &str, topic: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let read = read_topic(addr, topic, 1, left.max(Duration::from_secs(1)))
            .map(|log| log.get(&0).map_or(0, Vec::len));
        if matches!(read, Ok(have) if have >= n) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{topic} does not hold {n} records after 60 s: the last read gave {read:?}"
        );
        // Between two reads (each starts a consumer), not a synchronisation.
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The Java producer (kafka-clients 4.4.0, idempotent, acks=all) in the same unclean
/// election on Kafka 4.4.0, paused between the phases after a `flush()` (each phase's
/// records acknowledged, and in the log, before the next fault). Asserted: the broker lost
/// the second phase here too, every outcome Java gives for the last phase is truthful
/// (delivered at an offset holding the record, or failed and absent), and, as the README
/// says, Java delivers the whole last phase with no error in any callback.
#[test]
fn java_producer_in_the_same_unclean_election_on_kafka_4_4() {
    java_producer_in_the_same_unclean_election(KAFKA_VERSION);
}

/// The same on Kafka 2.3.1, a broker without KIP-360.
#[test]
fn java_producer_in_the_same_unclean_election_on_kafka_2_3() {
    java_producer_in_the_same_unclean_election(KAFKA_2_VERSION);
}

fn java_producer_in_the_same_unclean_election(version: &'static str) {
    let topic = "java-unclean";
    let mut cluster = Cluster::start(topic, version);
    let mut plan = LedgerPlan::new(topic, 1, 3 * PHASE);
    plan.pause_at = vec![PHASE as u64, 2 * PHASE as u64];
    plan.flush_before_pause = true;
    plan.producer = Flags {
        request_timeout_ms: Some(2_000),
        delivery_timeout_ms: Some(60_000),
        retry_backoff_ms: Some(20),
        ..Flags::default()
    };
    let marker = Duration::from_secs(120);
    let mut run = plan.spawn(&cluster.kafka.bootstrap());
    run.wait_paused(PHASE as u64, marker);
    wait_log_len(&cluster.addr(cluster.leader), topic, PHASE);
    cluster.lose_follower();
    run.resume();
    run.wait_paused(2 * PHASE as u64, marker);
    wait_log_len(&cluster.addr(cluster.leader), topic, 2 * PHASE);
    cluster.elect_stale_follower();
    run.resume();
    let java = JavaLedger::from_run(&plan, run.finish(Duration::from_secs(300)));
    for i in 2 * PHASE..3 * PHASE {
        assert!(
            java.records[i].status != Status::Unresolved,
            "Java record {i} unresolved"
        );
    }
    // An offset (−1 for none, which no record in the log has), or the exception's class; a
    // record unresolved (of the second phase) as not delivered.
    let outcome = |r: &JavaRecord| match r.status {
        Status::Delivered => Ok(r.offset.unwrap_or(-1)),
        Status::Failed => Err(r.error.split(':').next().unwrap_or_default().to_owned()),
        Status::Unresolved => Err("unresolved".to_owned()),
    };
    let reported = |phase: usize| -> Outcomes<String> {
        (java.records[phase * PHASE..(phase + 1) * PHASE].iter())
            .map(outcome)
            .collect()
    };
    let Judged {
        lost, last_phase, ..
    } = judge(&cluster, "Java", &reported(1), &reported(2));
    println!(
        "Java producer, unclean election on Kafka {version}: second phase {lost} of {PHASE} \
         delivered and lost; last phase {last_phase:?}"
    );
    let second: Vec<Status> = (PHASE..2 * PHASE).map(|i| java.records[i].status).collect();
    assert_eq!(
        lost, PHASE,
        "the broker lost the records the leader acknowledged alone: {second:?}"
    );
    assert_eq!(
        last_phase,
        BTreeMap::from([("delivered".to_owned(), PHASE)]),
        "what Java reported for the last phase"
    );
}
