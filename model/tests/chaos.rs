//! Seeded random walks of the real producer against the broker model.
//!
//! *Well-behaved* walks (spec C.2 S9) use only the faults the producer must absorb without
//! losing anything: partial processing and delivery, disconnects after a processed prefix,
//! stalled and black-holed links, request timeouts, leader moves (with and without KIP-951
//! hints), metadata flaps, and retriable errors (including the written-on-the-leader ones).
//! Once the faults stop, every record must be delivered exactly once, in order, at a truthful
//! offset, with no fatal error, no data-loss signal and no client bug seen by the broker.
//!
//! *Hostile* walks add permanent errors (record-level, MESSAGE_TOO_LARGE, UNKNOWN_SERVER_ERROR,
//! INVALID_PRODUCER_EPOCH, injected OUT_OF_ORDER_SEQUENCE_NUMBER), broker restarts that shrink
//! the dedup cache, a small epoch limit (new producer ids) and a small sequence space (wraps).
//! Records may then fail, but every record must resolve, and the logs must still have no
//! duplicates, keep send order, and agree with every offset and NotPersisted report.
//!
//! `CHAOS_SEEDS=n` runs `n` seeds per test instead of the default, and `CHAOS_STEPS=n` makes
//! each walk `n` steps long instead of 400; `CHAOS_DUMP=dir` writes a failing walk's events,
//! wire batches and logs there.

mod common;

use std::time::Duration;

use common::*;
use kprod_core::protocol::ErrorCode;
use kprod_core::{
    ConnId, DeliveryError, Event, GapPolicy, Persistence, ProducerConfig, Record, RecordId,
};
use kprod_model::broker::BrokerMode;
use kprod_model::sim::{Outcome, Sim};

const PARTITIONS: i32 = 3;

#[derive(Debug, Clone, Copy)]
struct Profile {
    mode: BrokerMode,
    max_in_flight: usize,
    hostile: bool,
    gap_policy: GapPolicy,
}

fn pick<T: Copy>(rng: &mut Rng, xs: &[T]) -> Option<T> {
    if xs.is_empty() {
        None
    } else {
        Some(xs[(rng.next() % xs.len() as u64) as usize])
    }
}

const RETRIABLE: &[(ErrorCode, bool)] = &[
    (ErrorCode::NotLeaderOrFollower, false),
    (ErrorCode::NotEnoughReplicas, false),
    (ErrorCode::LeaderNotAvailable, false),
    (ErrorCode::KafkaStorageError, false),
    (ErrorCode::KafkaStorageError, true),
    (ErrorCode::NotLeaderOrFollower, true),
    (ErrorCode::RequestTimedOut, true),
    (ErrorCode::RequestTimedOut, false),
    (ErrorCode::NotEnoughReplicasAfterAppend, true),
];

const PERMANENT: &[(ErrorCode, bool)] = &[
    (ErrorCode::InvalidRecord, false),
    (ErrorCode::MessageTooLarge, false),
    (ErrorCode::UnknownServerError, false),
    (ErrorCode::UnknownServerError, true),
    (ErrorCode::InvalidProducerEpoch, false),
    (ErrorCode::OutOfOrderSequenceNumber, false),
    (ErrorCode::CorruptMessage, false),
];

fn walk(seed: u64, profile: Profile) -> Reached {
    let Profile {
        mode,
        max_in_flight,
        hostile,
        gap_policy,
    } = profile;
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut c = cluster(mode, 2, PARTITIONS);
    c.leader_hints = rng.one_in(2);
    let linger = Duration::from_millis([0, 0, 5, 50][(rng.next() % 4) as usize]);
    let mut cfg = ProducerConfig {
        max_in_flight,
        linger,
        request_timeout: Duration::from_secs(1),
        delivery_timeout: Duration::from_secs(600),
        gap_policy,
        ..cfg()
    };
    if hostile {
        // Wraps and new producer ids within a walk. Batches of at most two records keep the
        // broker's five cached batches plus five in flight (20 sequences) inside the
        // 32-sequence space; beyond that, sequences of two laps would be confused.
        c.max_sequence = 31;
        cfg.max_epoch = 2;
        cfg.batch_size = 85;
    }
    let mut sim = Sim::new(c, cfg);
    let mut by_partition: Vec<Vec<RecordId>> = vec![Vec::new(); PARTITIONS as usize];
    // For each record: its partition and how many events existed when it was sent.
    let mut sent_at: std::collections::BTreeMap<RecordId, (i32, usize)> = Default::default();
    let mut next = 0;
    let mut trace = Vec::new();
    let steps = std::env::var("CHAOS_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    for _ in 0..steps {
        let links: Vec<ConnId> = sim.links.keys().copied().collect();
        let r = rng.next() % 100;
        let n = 1 + (rng.next() % 3) as usize;
        match r {
            0..=29 if sim.producer.fatal_error().is_some() => {
                let refused = sim.producer.send(sim.now, Record::new(T, "late"));
                assert!(refused.is_err(), "a failed producer accepted a record");
            }
            0..=29 => {
                let p = (rng.next() % PARTITIONS as u64) as i32;
                let events = sim.events.len();
                let id = sim.send(Record::new(T, format!("c{next}")).with_partition(p));
                sent_at.insert(id, (p, events));
                next += 1;
                by_partition[p as usize].push(id);
                trace.push(format!("send p{p}"));
            }
            30..=49 => {
                if let Some(c) = pick(&mut rng, &links) {
                    sim.process(c, n);
                    trace.push(format!("process {c:?} {n}"));
                }
            }
            50..=69 => {
                if let Some(c) = pick(&mut rng, &links) {
                    sim.deliver(c, n);
                    trace.push(format!("deliver {c:?} {n}"));
                }
            }
            70..=72 => {
                if let Some(c) = pick(&mut rng, &links) {
                    let k = (rng.next() % 4) as usize;
                    sim.disconnect(c, k);
                    trace.push(format!("disconnect {c:?} after {k}"));
                }
            }
            73..=75 => {
                let p = (rng.next() % PARTITIONS as u64) as i32;
                let to = if sim.cluster.partition(T, p).leader == 1 {
                    2
                } else {
                    1
                };
                sim.cluster.move_leader(T, p, to);
                trace.push(format!("move p{p} to {to}"));
            }
            76..=80 => {
                let p = (rng.next() % PARTITIONS as u64) as i32;
                let table = if hostile && rng.one_in(2) {
                    PERMANENT
                } else {
                    RETRIABLE
                };
                let (code, append) = pick(&mut rng, table).expect("non-empty");
                inject(&mut sim, p, code, append);
                trace.push(format!("inject p{p} {code} append={append}"));
            }
            81..=82 => {
                if let Some(c) = pick(&mut rng, &links) {
                    let l = sim.links.get_mut(&c).expect("link");
                    if rng.one_in(2) {
                        l.stalled = true;
                        trace.push(format!("stall {c:?}"));
                    } else {
                        l.blackhole = true;
                        trace.push(format!("blackhole {c:?}"));
                    }
                }
            }
            83..=88 => {
                let ms = 1 + rng.next() % 300;
                sim.advance(Duration::from_millis(ms));
                trace.push(format!("advance {ms}ms"));
            }
            89..=90 => {
                sim.advance(Duration::from_millis(1100));
                trace.push("advance past request.timeout".to_owned());
            }
            91 => {
                if sim.cluster.hidden_topics.is_empty() {
                    sim.cluster.hidden_topics.push(T.to_owned());
                    trace.push("hide topic".to_owned());
                } else {
                    sim.cluster.hidden_topics.clear();
                    trace.push("unhide topic".to_owned());
                }
            }
            92 if hostile => {
                sim.cluster.restart_shrinks_cache();
                trace.push("restart (cache shrinks)".to_owned());
            }
            93 if hostile => {
                sim.cluster
                    .init_producer_id_errors
                    .push_back(ErrorCode::CoordinatorLoadInProgress);
                trace.push("InitProducerId: COORDINATOR_LOAD_IN_PROGRESS".to_owned());
            }
            94 => {
                let node = 1 + (rng.next() % 2) as i32;
                if !sim.refuse.remove(&node) {
                    sim.refuse.insert(node);
                }
                trace.push(format!("toggle refusing node {node}"));
            }
            _ => {
                sim.step();
                trace.push("step".to_owned());
            }
        }
    }
    // The faults stop (injected errors left over are still answered, once each).
    sim.cluster.hidden_topics.clear();
    sim.refuse.clear();
    for l in sim.links.values_mut() {
        l.stalled = false;
    }
    let ctx = format!("seed {seed} {profile:?}");
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        sim.run(STEPS);
        check_all(&sim, PARTITIONS);
        // S11/P13: a partition never goes back to an older identity once it used a newer one.
        for p in 0..PARTITIONS {
            let ids: Vec<(i64, i16)> = sim
                .transmitted
                .iter()
                .filter(|w| w.partition == p)
                .map(|w| (w.producer_id, w.epoch))
                .collect();
            assert!(
                ids.windows(2).all(|w| w[0] <= w[1]),
                "p{p} went back to an older identity: {ids:?}"
            );
        }
        if hostile {
            assert!(
                sim.transmitted.iter().all(|w| w.count <= 2),
                "batches too large for the sequence space"
            );
        }
        for ids in &by_partition {
            let with_offsets: Vec<RecordId> = ids
                .iter()
                .copied()
                .filter(|id| offset(&sim, *id).is_some())
                .collect();
            delivered_in_order(&sim, &with_offsets);
        }
        if hostile && gap_policy == GapPolicy::CutPartition {
            // S3 under the cut: once a record is refused for good, no record of its partition
            // sent after it (and before the refusal was reported) is written.
            for (e, event) in sim.events.iter().enumerate() {
                let Event::Failed {
                    id,
                    error: DeliveryError::Broker(_),
                    persisted: Persistence::NotPersisted,
                    ..
                } = event
                else {
                    continue;
                };
                let (p, _) = sent_at[id];
                for (later, &(q, at)) in sent_at.range(*id..) {
                    if q == p && later > id && at <= e {
                        assert!(
                            !matches!(sim.outcomes[later], Outcome::Delivered { .. }),
                            "{later:?} delivered after {id:?} was refused under the cut"
                        );
                    }
                }
            }
        }
        if hostile {
            return;
        }
        assert!(fatal(&sim).is_none(), "fatal: {:?}", fatal(&sim));
        assert_eq!(data_loss_signals(&sim), 0, "data-loss signal");
        for (id, _) in &sim.sent {
            // Tansu acknowledges a deduplicated retry without an offset.
            let ok = match sim.outcomes.get(id) {
                Some(Outcome::Delivered { offset, .. }) => {
                    offset.is_some() || mode == BrokerMode::TansuLike
                }
                _ => false,
            };
            assert!(ok, "record {id:?}: {:?}", sim.outcomes.get(id));
        }
        let logged: usize = (0..PARTITIONS)
            .map(|p| sim.cluster.partition(T, p).log.len())
            .sum();
        assert_eq!(logged, next);
        let s = &sim.cluster.stats;
        assert_eq!(s.max_epoch, 0, "an epoch bump without a permanent error");
        // The broker may hand out more ids when an answer is lost, but the producer takes one.
        assert_eq!(
            producer_ids(&sim).len(),
            1,
            "a new producer id without a reason"
        );
        sim.producer.close(sim.now);
        sim.drain();
        assert!(sim.producer.is_closed() && sim.links.is_empty());
    }));
    if let Err(e) = result {
        eprintln!("{ctx}\ntrace:\n  {}", trace.join("\n  "));
        if let Ok(dir) = std::env::var("CHAOS_DUMP") {
            let dump = format!(
                "{ctx}\n{:#?}\n{:#?}\n{:#?}\n{:#?}",
                sim.events, sim.transmitted, sim.cluster.partitions, sim.cluster.stats
            );
            std::fs::write(format!("{dir}/chaos-{seed}.txt"), dump).expect("dump");
        }
        std::panic::resume_unwind(e);
    }
    let s = &sim.cluster.stats;
    let has = |pred: &dyn Fn(&Event) -> bool| sim.events.iter().any(pred);
    Reached {
        deduplicated: s.deduplicated > 0,
        request_timeout: disconnects(&sim, "request timeout") > 0,
        moved: sim.transmitted.iter().any(|w| w.node == 2),
        wrapped: s.wrapped,
        new_producer_id: s.producer_ids > 1,
        // A MESSAGE_TOO_LARGE split: the first piece reuses the refused batch's base.
        split: sim.transmitted.windows(2).any(|w| {
            w[0].partition == w[1].partition
                && w[0].base_sequence == w[1].base_sequence
                && (w[0].producer_id, w[0].epoch) == (w[1].producer_id, w[1].epoch)
                && w[1].count < w[0].count
        }),
        cut: has(&|e| {
            matches!(
                e,
                Event::Failed {
                    error: DeliveryError::PartitionCut,
                    ..
                }
            )
        }),
        possibly_persisted: has(&|e| {
            matches!(
                e,
                Event::Failed {
                    persisted: Persistence::PossiblyPersisted,
                    ..
                }
            )
        }),
    }
}

/// What a walk reached, so a test can check its walks explore what they are meant to.
#[derive(Debug, Default, Clone, Copy)]
struct Reached {
    deduplicated: bool,
    request_timeout: bool,
    moved: bool,
    wrapped: bool,
    new_producer_id: bool,
    split: bool,
    cut: bool,
    possibly_persisted: bool,
}

impl Reached {
    fn or(self, o: Self) -> Self {
        Self {
            deduplicated: self.deduplicated || o.deduplicated,
            request_timeout: self.request_timeout || o.request_timeout,
            moved: self.moved || o.moved,
            wrapped: self.wrapped || o.wrapped,
            new_producer_id: self.new_producer_id || o.new_producer_id,
            split: self.split || o.split,
            cut: self.cut || o.cut,
            possibly_persisted: self.possibly_persisted || o.possibly_persisted,
        }
    }
}

/// Seeds per test: 200, or `CHAOS_SEEDS` for a longer search.
fn seeds(base: u64) -> std::ops::Range<u64> {
    let n = std::env::var("CHAOS_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    base..base + n
}

fn well_behaved(mode: BrokerMode, max_in_flight: usize) -> Profile {
    Profile {
        mode,
        max_in_flight,
        hostile: false,
        gap_policy: GapPolicy::ContinueWithGap,
    }
}

fn hostile(mode: BrokerMode, gap_policy: GapPolicy) -> Profile {
    Profile {
        mode,
        max_in_flight: 5,
        hostile: true,
        gap_policy,
    }
}

fn well_behaved_walks(base: u64, mode: BrokerMode, max_in_flight: &[usize]) {
    let mut reached = Reached::default();
    for seed in seeds(base) {
        for &m in max_in_flight {
            reached = reached.or(walk(seed, well_behaved(mode, m)));
        }
    }
    assert!(
        reached.deduplicated && reached.request_timeout && reached.moved,
        "{mode:?}: the walks missed a fault: {reached:?}"
    );
}

fn hostile_walks(base: u64, gap_policy: GapPolicy) {
    let mut reached = Reached::default();
    for seed in seeds(base) {
        let mode = BrokerMode::ALL[(seed % 4) as usize];
        reached = reached.or(walk(seed, hostile(mode, gap_policy)));
    }
    assert!(
        reached.wrapped
            && reached.new_producer_id
            && reached.split
            && reached.possibly_persisted
            && (reached.cut || gap_policy != GapPolicy::CutPartition),
        "{gap_policy:?}: the walks missed a path: {reached:?}"
    );
}

#[test]
fn well_behaved_faults_lenient() {
    well_behaved_walks(0, BrokerMode::Lenient, &[5, 1]);
}

#[test]
fn well_behaved_faults_strict_never_written() {
    well_behaved_walks(1_000_000, BrokerMode::StrictNeverWritten, &[5]);
}

#[test]
fn well_behaved_faults_unknown_pid_error() {
    well_behaved_walks(2_000_000, BrokerMode::UnknownPidError, &[5]);
}

#[test]
fn well_behaved_faults_tansu_like() {
    well_behaved_walks(3_000_000, BrokerMode::TansuLike, &[5]);
}

#[test]
fn hostile_faults_continue_with_gap() {
    hostile_walks(4_000_000, GapPolicy::ContinueWithGap);
}

#[test]
fn hostile_faults_cut_partition() {
    hostile_walks(5_000_000, GapPolicy::CutPartition);
}

#[test]
fn hostile_faults_fatal_gap() {
    hostile_walks(6_000_000, GapPolicy::Fatal);
}
