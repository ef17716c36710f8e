//! Helpers shared by the scripted-broker scenario tests.
#![allow(dead_code)]

use std::time::Duration;

use bytes::Bytes;
use kprod_core::protocol::produce::{PartitionProduceData, ProduceRequest, TopicProduceData};
use kprod_core::protocol::record_batch::RecordBatchBuilder;
use kprod_core::protocol::ErrorCode;
use kprod_core::protocol::{decode_response, encode_request, Message};
use kprod_core::{
    ConnId, DeliveryError, Diagnostic, Event, FatalError, Persistence, ProducerConfig, Record,
    RecordId,
};
use kprod_model::broker::{BrokerMode, Cluster, Injection};
use kprod_model::sim::{Outcome, Sim};

/// The topic every scenario writes to.
pub const T: &str = "t";

/// Enough rounds for any scenario here; `Sim::run` panics if records are still unresolved.
pub const STEPS: usize = 100_000;

/// A config that sends at once (linger 0) with short backoffs.
pub fn cfg() -> ProducerConfig {
    ProducerConfig {
        linger: Duration::ZERO,
        retry_backoff: Duration::from_millis(10),
        retry_backoff_max: Duration::from_millis(100),
        reconnect_backoff: Duration::from_millis(10),
        ..Default::default()
    }
}

/// A cluster of `nodes` nodes (ids 1..=nodes) with topic `T` of `partitions` partitions, all
/// led by node 1.
pub fn cluster(mode: BrokerMode, nodes: usize, partitions: i32) -> Cluster {
    let addrs: Vec<String> = (1..=nodes).map(|n| format!("b{n}:9092")).collect();
    let refs: Vec<&str> = addrs.iter().map(String::as_str).collect();
    let mut c = Cluster::new(mode, &refs);
    c.create_topic(T, partitions, 1);
    c
}

/// A sim of a Lenient one-node cluster with `partitions` partitions.
pub fn sim(partitions: i32, cfg: ProducerConfig) -> Sim {
    Sim::new(cluster(BrokerMode::Lenient, 1, partitions), cfg)
}

/// The record with value `v{i}` for partition `p`.
pub fn rec(i: usize, p: i32) -> Record {
    Record::new(T, format!("v{i}")).with_partition(p)
}

/// The value of record `v{i}`.
pub fn val(i: usize) -> Bytes {
    Bytes::from(format!("v{i}"))
}

/// Sends one record to each of the first `partitions` partitions (values `w{p}`) and runs
/// until they are delivered: the producer then has its id, its connections, and one
/// acknowledged batch per partition, so it pipelines.
pub fn warm_up(sim: &mut Sim, partitions: i32) {
    let ids: Vec<RecordId> = (0..partitions)
        .map(|p| sim.send(Record::new(T, format!("w{p}")).with_partition(p)))
        .collect();
    sim.run(STEPS);
    for id in ids {
        assert!(
            matches!(sim.outcomes[&id], Outcome::Delivered { .. }),
            "warm-up record {id:?}: {:?}",
            sim.outcomes[&id]
        );
    }
}

/// The open connection to `node` that carried the most recent Produce batch.
pub fn produce_conn(sim: &Sim, node: i32) -> ConnId {
    sim.transmitted
        .iter()
        .rev()
        .find(|w| w.node == node && sim.links.contains_key(&w.conn))
        .map(|w| w.conn)
        .expect("a Produce connection to the node")
}

/// Unanswered Produce requests on `conn`.
pub fn outstanding(sim: &Sim, conn: ConnId) -> usize {
    sim.links.get(&conn).map_or(0, |l| l.produce_outstanding())
}

/// Queues an error for the next Produce of partition `p`.
pub fn inject(sim: &mut Sim, p: i32, code: ErrorCode, append: bool) {
    sim.cluster
        .partition_mut(T, p)
        .inject
        .push_back(Injection { code, append });
}

/// Processes and delivers everything on every link except `skip`, until nothing moves.
pub fn pump_except(sim: &mut Sim, skip: ConnId) {
    for _ in 0..1000 {
        sim.drain();
        let conns: Vec<ConnId> = sim.links.keys().copied().filter(|c| *c != skip).collect();
        let mut moved = false;
        for c in &conns {
            moved |= sim.process(*c, usize::MAX) > 0;
        }
        for c in &conns {
            moved |= sim.deliver(*c, usize::MAX) > 0;
        }
        if !moved {
            return;
        }
    }
    panic!("no quiescence");
}

/// The offset record `id` was delivered at, if it was delivered with one.
pub fn offset(sim: &Sim, id: RecordId) -> Option<i64> {
    match sim.outcomes.get(&id) {
        Some(Outcome::Delivered { offset, .. }) => *offset,
        _ => None,
    }
}

/// Asserts record `id` was delivered and returns its offset.
pub fn delivered(sim: &Sim, id: RecordId) -> i64 {
    match sim.outcomes.get(&id) {
        Some(Outcome::Delivered {
            offset: Some(o), ..
        }) => *o,
        other => panic!("record {id:?} not delivered with an offset: {other:?}"),
    }
}

/// Asserts every record in `ids` was delivered, at strictly increasing offsets.
pub fn delivered_in_order(sim: &Sim, ids: &[RecordId]) {
    let offsets: Vec<i64> = ids.iter().map(|id| delivered(sim, *id)).collect();
    assert!(
        offsets.windows(2).all(|w| w[0] < w[1]),
        "offsets not increasing: {offsets:?}"
    );
}

/// The persistence status record `id` failed with.
pub fn failed(sim: &Sim, id: RecordId) -> Persistence {
    match sim.outcomes.get(&id) {
        Some(Outcome::Failed(p)) => *p,
        other => panic!("record {id:?} did not fail: {other:?}"),
    }
}

/// The error record `id` failed with.
pub fn failure(sim: &Sim, id: RecordId) -> (DeliveryError, Persistence) {
    sim.events
        .iter()
        .find_map(|e| match e {
            Event::Failed {
                id: i,
                error,
                persisted,
                ..
            } if *i == id => Some((error.clone(), *persisted)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("record {id:?} did not fail"))
}

/// `(producer id, epoch, sequence)` of every record stored in partition `p`, in log order.
pub fn stored(sim: &Sim, p: i32) -> Vec<(i64, i16, i32)> {
    sim.cluster
        .partition(T, p)
        .log
        .iter()
        .map(|r| (r.producer_id, r.epoch, r.sequence))
        .collect()
}

/// Values stored in partition `p`, in log order.
pub fn stored_values(sim: &Sim, p: i32) -> Vec<Bytes> {
    sim.cluster
        .partition(T, p)
        .log
        .iter()
        .filter_map(|r| r.value.clone())
        .collect()
}

/// Asserts the broker never saw a client bug (spec C.2 S10).
pub fn assert_clean(sim: &Sim) {
    let s = &sim.cluster.stats;
    assert_eq!(s.invalid_epoch, 0, "INVALID_PRODUCER_EPOCH answered: {s:?}");
    assert_eq!(s.overlap, 0, "overlapping non-identical batch: {s:?}");
    assert_eq!(s.new_epoch_nonzero_seq, 0, "new epoch at seq != 0: {s:?}");
}

/// Asserts every record sent was delivered.
pub fn all_delivered(sim: &Sim) {
    assert!(sim.all_resolved(), "unresolved records");
    for (id, _) in &sim.sent {
        assert!(
            matches!(
                sim.outcomes[id],
                Outcome::Delivered {
                    offset: Some(_),
                    ..
                }
            ),
            "record {id:?}: {:?}",
            sim.outcomes[id]
        );
    }
}

/// `check_partition` for every partition of `T`, plus `assert_clean`.
pub fn check_all(sim: &Sim, partitions: i32) {
    for p in 0..partitions {
        sim.check_partition(T, p);
    }
    assert_clean(sim);
}

/// Epochs the producer bumped to, in order.
pub fn bumps(sim: &Sim) -> Vec<i16> {
    sim.events
        .iter()
        .filter_map(|e| match e {
            Event::Diagnostic(Diagnostic::EpochBumped(id)) => Some(id.epoch),
            _ => None,
        })
        .collect()
}

/// Producer ids obtained, in order.
pub fn producer_ids(sim: &Sim) -> Vec<i64> {
    sim.events
        .iter()
        .filter_map(|e| match e {
            Event::Diagnostic(Diagnostic::ProducerId(id)) => Some(id.producer_id),
            _ => None,
        })
        .collect()
}

/// Data-loss signals raised.
pub fn data_loss_signals(sim: &Sim) -> usize {
    sim.events
        .iter()
        .filter(|e| matches!(e, Event::Diagnostic(Diagnostic::DataLoss { .. })))
        .count()
}

/// The fatal error, if the producer reported one.
pub fn fatal(sim: &Sim) -> Option<FatalError> {
    sim.events.iter().find_map(|e| match e {
        Event::Fatal(f) => Some(f.clone()),
        _ => None,
    })
}

/// Disconnect diagnostics with this reason.
pub fn disconnects(sim: &Sim, reason: &str) -> usize {
    sim.events
        .iter()
        .filter(|e| {
            matches!(e, Event::Diagnostic(Diagnostic::Disconnected { reason: r, .. }) if *r == reason)
        })
        .count()
}

/// A small deterministic pseudo-random generator (xorshift).
pub struct Rng(pub u64);

impl Rng {
    /// The next value.
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `1/n`.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

/// Hands the broker a Produce of `n` records for partition 0 of `T` under `(pid, epoch)` at
/// `base`, bypassing the producer, and returns the error code and base offset it answers.
pub fn produce_raw(c: &mut Cluster, pid: i64, epoch: i16, base: i32, n: usize) -> (ErrorCode, i64) {
    let version = ProduceRequest::VERSIONS.max;
    let mut b = RecordBatchBuilder::with_capacity(256);
    for k in 0..n {
        b.push(0, None, Some(format!("s{base}-{k}").as_bytes()), &[]);
    }
    let req = ProduceRequest {
        transactional_id: None,
        acks: -1,
        timeout_ms: 1000,
        topic_data: vec![TopicProduceData {
            name: T.to_owned(),
            partition_data: vec![PartitionProduceData {
                index: 0,
                records: Some(b.seal(pid, epoch, base)),
            }],
        }],
    };
    let frame = encode_request(&req, version, 1, None).slice(4..);
    let node = c.partition(T, 0).leader;
    let resp = c.handle(node, frame).expect("answered").slice(4..);
    let (_, r) = decode_response::<ProduceRequest>(version, resp).expect("decodes");
    let p = &r.responses[0].partition_responses[0];
    (ErrorCode::from_i16(p.error_code), p.base_offset)
}
