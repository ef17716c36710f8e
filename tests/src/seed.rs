//! The seed scenario and its verdict, shared by `tests/tansu_e2e.rs` and the `seed-demo`
//! binary.
//!
//! The seed story: a KafkaJS producer with idempotence on sent one record every 1 ms; when
//! activity spiked and records went out in batches, it lost records and died with
//! OUT_OF_ORDER_SEQUENCE_NUMBER. [`run_seed`] replays that load with kprod: a ticker sends one
//! record every millisecond while bursts of overlapping `enqueue()`s (all outstanding at once)
//! are spread over several partitions. [`run_keyed`] sends keyed records from concurrent tasks.
//!
//! Every record's value names its run, its stream (the task that sent it) and its sequence
//! number in that stream, so [`Verdict::compute`] can compare what kprod reported for each
//! record with what the independent reader ([`crate::reader`]) found in the log: duplicates,
//! order per partition and stream, order per key, partition choice, offsets and missing records.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kprod_core::partitioner::partition_for_key;
use kprod_core::{Persistence, Record};
use kprod_tokio::{Delivery, DeliveryError, DeliveryFuture, ProducerHandle};
use tokio::sync::watch;

use crate::ledger::{Reported, Row};
use crate::reader::ReadRecord;

/// The first word of every value this module writes.
const MAGIC: &str = "kprod-seed";
/// How many problems a verdict describes one by one.
const EXAMPLES: usize = 12;

/// Which stream a record came from and its place in that stream. A stream is one task that
/// enqueues records one after the other, so within a stream "sent before" is well defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tag {
    /// The sending task.
    pub stream: u32,
    /// The record's number within its stream, from 0.
    pub seq: u64,
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stream {} #{}", self.stream, self.seq)
    }
}

/// Where a record goes.
#[derive(Debug, Clone)]
pub enum Target {
    /// An explicit partition.
    Partition(i32),
    /// A key: the Java default partitioner chooses.
    Key(Bytes),
}

/// The value of record `tag` of run `run`: `kprod-seed RUN STREAM SEQ ` padded with dots to
/// `size` bytes (longer if the header alone is longer).
pub fn encode_value(run: u64, tag: Tag, size: usize) -> Vec<u8> {
    let mut v = format!("{MAGIC} {run:016x} {} {} ", tag.stream, tag.seq).into_bytes();
    if v.len() < size {
        v.resize(size, b'.');
    }
    v
}

/// What a value read back is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {
    /// A record of this run.
    Ours(Tag),
    /// Another run's record, or something else entirely.
    Foreign,
    /// Claims to be of this run but does not parse.
    Garbled,
}

/// Decodes a value written by [`encode_value`] for run `run`.
pub fn decode_value(run: u64, value: Option<&[u8]>) -> Decoded {
    let Some(value) = value else {
        return Decoded::Foreign;
    };
    let run_word = format!("{run:016x}");
    let mut words = value.split(|&b| b == b' ');
    if words.next() != Some(MAGIC.as_bytes()) {
        return Decoded::Foreign;
    }
    if words.next() != Some(run_word.as_bytes()) {
        return Decoded::Foreign;
    }
    let mut number = || {
        words
            .next()
            .and_then(|w| std::str::from_utf8(w).ok())
            .and_then(|w| w.parse::<u64>().ok())
    };
    match (number(), number()) {
        (Some(stream), Some(seq)) if stream <= u64::from(u32::MAX) => Decoded::Ours(Tag {
            stream: stream as u32,
            seq,
        }),
        _ => Decoded::Garbled,
    }
}

/// A run id that differs between runs: wall-clock nanoseconds mixed with the process id.
pub fn fresh_run_id() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 48)
}

/// What became of a record.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The producer reported it in the log.
    Delivered(Delivery),
    /// Refused by `enqueue`, or accepted and then failed.
    Failed(DeliveryError),
    /// Its future did not resolve in time.
    Unresolved,
    /// Reported by another client (the Java reference producer, `crate::javaref`), in the
    /// client-neutral form the verdict works on.
    Reported(Reported),
}

impl Outcome {
    /// The outcome in client-neutral form; `None` if unresolved.
    pub fn reported(&self) -> Option<Reported> {
        match self {
            Self::Delivered(d) => Some(Reported::from_delivery(d)),
            Self::Failed(e) => Some(Reported::from_error(e)),
            Self::Unresolved => None,
            Self::Reported(r) => Some(r.clone()),
        }
    }
}

/// One record sent, as the application saw it.
#[derive(Debug, Clone)]
pub struct Sent {
    /// Its identity.
    pub tag: Tag,
    /// The partition it must land on: the explicit one, or the Java partitioner's for its key.
    pub partition: i32,
    /// Its key.
    pub key: Option<Bytes>,
    /// Key plus value bytes.
    pub bytes: usize,
    /// What the producer reported.
    pub outcome: Outcome,
}

/// What the records of one run look like.
#[derive(Debug, Clone)]
pub struct Source {
    /// Topic.
    pub topic: String,
    /// The topic's partition count.
    pub partitions: i32,
    /// Run id written into every value.
    pub run: u64,
    /// Value size in bytes.
    pub record_size: usize,
}

impl Source {
    fn record(&self, tag: Tag, target: Target) -> (Record, Sent) {
        let value = encode_value(self.run, tag, self.record_size);
        let mut record = Record::new(self.topic.clone(), value);
        let (partition, key) = match target {
            Target::Partition(p) => {
                record.partition = Some(p);
                (p, None)
            }
            Target::Key(k) => {
                record.key = Some(k.clone());
                (partition_for_key(&k, self.partitions), Some(k))
            }
        };
        let bytes =
            record.value.as_ref().map_or(0, Bytes::len) + key.as_ref().map_or(0, Bytes::len);
        let sent = Sent {
            tag,
            partition,
            key,
            bytes,
            outcome: Outcome::Unresolved,
        };
        (record, sent)
    }
}

/// A record handed to the producer, waiting for its outcome.
type Pending = (Sent, Option<DeliveryFuture>);

/// Enqueues one record; a refusal becomes its outcome at once.
async fn enqueue(producer: &ProducerHandle, source: &Source, tag: Tag, target: Target) -> Pending {
    let (record, mut sent) = source.record(tag, target);
    match producer.enqueue(record).await {
        Ok(fut) => (sent, Some(fut)),
        Err(e) => {
            sent.outcome = Outcome::Failed(e);
            (sent, None)
        }
    }
}

/// Waits for every pending record until `deadline`; those still open stay `Unresolved`.
async fn resolve(pending: Vec<Pending>, deadline: tokio::time::Instant) -> Vec<Sent> {
    let mut out = Vec::with_capacity(pending.len());
    for (mut sent, fut) in pending {
        if let Some(fut) = fut {
            sent.outcome = match tokio::time::timeout_at(deadline, fut).await {
                Ok(Ok(d)) => Outcome::Delivered(d),
                Ok(Err(e)) => Outcome::Failed(e),
                Err(_) => Outcome::Unresolved,
            };
        }
        out.push(sent);
    }
    out
}

/// The seed scenario's shape.
#[derive(Debug, Clone)]
pub struct SeedPlan {
    /// What the records look like.
    pub source: Source,
    /// Records the ticker sends, one per `period`, round-robin over the partitions.
    pub ticks: u64,
    /// The ticker's period (1 ms in the seed story).
    pub period: Duration,
    /// How many bursts.
    pub bursts: u32,
    /// Records per burst, round-robin over the partitions, all enqueued before any is awaited.
    pub burst_size: u64,
    /// How long, once a stream has enqueued everything, its records may take to resolve.
    pub resolve_timeout: Duration,
}

/// The ticker's stream id in [`run_seed`].
pub const TICKER_STREAM: u32 = 0;

/// The stream id of burst `b` (from 0) in [`run_seed`]: each burst is its own task.
pub fn burst_stream(b: u32) -> u32 {
    1 + b
}

/// Figures of one burst.
#[derive(Debug, Clone)]
pub struct BurstFigures {
    /// Records in the burst.
    pub records: u64,
    /// Key plus value bytes in the burst.
    pub bytes: u64,
    /// When its first enqueue began, from the start of the run.
    pub start: Duration,
    /// From the first enqueue until the last was accepted.
    pub enqueue_time: Duration,
    /// From the first enqueue until every record of the burst resolved.
    pub duration: Duration,
    /// Ticker records enqueued before the burst started.
    pub ticks_at_start: u64,
    /// Ticker records enqueued while the burst was being enqueued and resolved.
    pub ticks_during: u64,
}

/// What [`run_seed`] did.
#[derive(Debug, Clone)]
pub struct SeedReport {
    /// Every record: the ticker's, then each burst's.
    pub sent: Vec<Sent>,
    /// From the ticker's first send to its last.
    pub ticker_time: Duration,
    /// One entry per burst.
    pub bursts: Vec<BurstFigures>,
    /// From start until every record resolved.
    pub elapsed: Duration,
}

impl SeedReport {
    /// Records per second over the burst phase: the time during which at least one burst was
    /// being enqueued or had records unresolved.
    pub fn burst_records_per_sec(&self) -> f64 {
        let n: u64 = self.bursts.iter().map(|b| b.records).sum();
        n as f64 / self.burst_secs()
    }

    /// Megabytes (10^6 bytes, key plus value) per second over the burst phase.
    pub fn burst_mb_per_sec(&self) -> f64 {
        let bytes: u64 = self.bursts.iter().map(|b| b.bytes).sum();
        bytes as f64 / 1e6 / self.burst_secs()
    }

    /// The length of the union of the bursts' intervals, in seconds.
    pub fn burst_secs(&self) -> f64 {
        let mut spans: Vec<(Duration, Duration)> = self
            .bursts
            .iter()
            .map(|b| (b.start, b.start + b.duration))
            .collect();
        spans.sort();
        let mut total = Duration::ZERO;
        let mut covered_to = Duration::ZERO;
        for (from, to) in spans {
            let from = from.max(covered_to);
            if to > from {
                total += to - from;
                covered_to = to;
            }
        }
        total.as_secs_f64().max(1e-9)
    }
}

/// Runs the seed scenario on `producer`.
///
/// The ticker sends `plan.ticks` records, one per `plan.period` (a tokio interval), to
/// partitions `0, 1, 2, ...` in turn; it enqueues in line, so its records have a defined order,
/// and awaits their outcomes after its last send. Burst `b` is a task of its own that starts
/// once the ticker has sent `(b + 1) * ticks / (bursts + 1)` records, enqueues
/// `plan.burst_size` records round-robin over the partitions (all outstanding before the
/// first is awaited), then awaits them all. Returns once every record resolved or timed out.
pub async fn run_seed(producer: &ProducerHandle, plan: &SeedPlan) -> SeedReport {
    let started = Instant::now();
    let (tick_tx, tick_rx) = watch::channel(0u64);

    let ticker = {
        let producer = producer.clone();
        let plan = plan.clone();
        tokio::spawn(async move {
            let partitions = plan.source.partitions.max(1) as u64;
            let mut interval = tokio::time::interval(plan.period);
            // Behind (a loaded machine), the ticker keeps its period instead of catching up
            // in a rush: the bursts, which start at fractions of its ticks, must overlap it.
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut pending = Vec::with_capacity(plan.ticks as usize);
            let first = Instant::now();
            for seq in 0..plan.ticks {
                interval.tick().await;
                let tag = Tag {
                    stream: TICKER_STREAM,
                    seq,
                };
                let target = Target::Partition((seq % partitions) as i32);
                pending.push(enqueue(&producer, &plan.source, tag, target).await);
                tick_tx.send_replace(seq + 1);
            }
            let ticker_time = first.elapsed();
            drop(tick_tx);
            let deadline = tokio::time::Instant::now() + plan.resolve_timeout;
            (resolve(pending, deadline).await, ticker_time)
        })
    };

    let bursts: Vec<_> = (0..plan.bursts)
        .map(|b| {
            let producer = producer.clone();
            let plan = plan.clone();
            let mut tick_rx = tick_rx.clone();
            tokio::spawn(async move {
                let partitions = plan.source.partitions.max(1) as u64;
                let trigger = (u64::from(b) + 1) * plan.ticks / (u64::from(plan.bursts) + 1);
                // An error means the ticker already finished: start at once.
                let _ = tick_rx.wait_for(|&t| t >= trigger).await;
                let ticks_at_start = *tick_rx.borrow();
                let t0 = Instant::now();
                let mut pending = Vec::with_capacity(plan.burst_size as usize);
                for seq in 0..plan.burst_size {
                    let tag = Tag {
                        stream: burst_stream(b),
                        seq,
                    };
                    let target = Target::Partition((seq % partitions) as i32);
                    pending.push(enqueue(&producer, &plan.source, tag, target).await);
                }
                let enqueue_time = t0.elapsed();
                let bytes = pending.iter().map(|(s, _)| s.bytes as u64).sum();
                let deadline = tokio::time::Instant::now() + plan.resolve_timeout;
                let sent = resolve(pending, deadline).await;
                let figures = BurstFigures {
                    records: plan.burst_size,
                    bytes,
                    start: t0 - started,
                    enqueue_time,
                    duration: t0.elapsed(),
                    ticks_at_start,
                    ticks_during: *tick_rx.borrow() - ticks_at_start,
                };
                (sent, figures)
            })
        })
        .collect();
    drop(tick_rx);

    let (mut sent, ticker_time) = ticker.await.expect("the ticker task panicked");
    let mut figures = Vec::with_capacity(bursts.len());
    for burst in bursts {
        let (burst_sent, f) = burst.await.expect("a burst task panicked");
        sent.extend(burst_sent);
        figures.push(f);
    }
    SeedReport {
        sent,
        ticker_time,
        bursts: figures,
        elapsed: started.elapsed(),
    }
}

/// Sends `per_stream` keyed records from each of `streams` concurrent tasks. Stream `s` uses
/// the keys `key-s-0 .. key-s-(keys_per_stream - 1)` in turn, so no two streams share a key and
/// per-key order is defined. Each task enqueues everything, then awaits its outcomes.
pub async fn run_keyed(
    producer: &ProducerHandle,
    source: &Source,
    streams: u32,
    per_stream: u64,
    keys_per_stream: u64,
    resolve_timeout: Duration,
) -> Vec<Sent> {
    let tasks: Vec<_> = (0..streams)
        .map(|stream| {
            let producer = producer.clone();
            let source = source.clone();
            tokio::spawn(async move {
                let mut pending = Vec::with_capacity(per_stream as usize);
                for seq in 0..per_stream {
                    let key = format!("key-{stream}-{}", seq % keys_per_stream.max(1));
                    let tag = Tag { stream, seq };
                    let target = Target::Key(Bytes::from(key));
                    pending.push(enqueue(&producer, &source, tag, target).await);
                }
                let deadline = tokio::time::Instant::now() + resolve_timeout;
                resolve(pending, deadline).await
            })
        })
        .collect();
    let mut sent = Vec::new();
    for t in tasks {
        sent.extend(t.await.expect("a sending task panicked"));
    }
    sent
}

/// Figures for one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionFigures {
    /// Records sent to it.
    pub sent: usize,
    /// Of those, acknowledged.
    pub acknowledged: usize,
    /// Records of this run read from it, copies included.
    pub read: usize,
    /// Extra copies read from it.
    pub duplicates: usize,
    /// Records read out of their stream's order.
    pub out_of_order: usize,
    /// Acknowledged records not read anywhere.
    pub missing_acknowledged: usize,
}

/// What the log holds compared with what the producer reported.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// Records the application tried to send.
    pub sent: usize,
    /// Reported delivered.
    pub acknowledged: usize,
    /// Of those, without an offset (Tansu's DUPLICATE_SEQUENCE_NUMBER answer to a resend).
    pub acknowledged_without_offset: usize,
    /// Refused by `enqueue` (never accepted).
    pub refused: usize,
    /// Accepted, then failed as not persisted.
    pub failed_not_persisted: usize,
    /// Accepted, then failed as possibly persisted.
    pub failed_possibly_persisted: usize,
    /// Of those, found in the log (allowed).
    pub failed_possibly_persisted_present: usize,
    /// Futures that never resolved.
    pub unresolved: usize,
    /// Distinct records of this run in the log.
    pub present: usize,
    /// Records of this run read, copies included.
    pub read: usize,
    /// Records in the log from elsewhere (another run, another writer): ignored.
    pub foreign: usize,
    /// Values of this run that do not parse, or whose key or value differs from what was sent.
    pub corrupt: usize,
    /// Records of this run in the log that were never sent.
    pub unexpected: usize,
    /// Extra copies of a record.
    pub duplicates: usize,
    /// Records behind a later record of their stream in their partition.
    pub out_of_order: usize,
    /// Records behind a later record with the same key.
    pub out_of_order_per_key: usize,
    /// Records read on a partition other than the one they were sent to (explicit partition
    /// or the Java partitioner's choice for the key).
    pub wrong_partition: usize,
    /// Keyed records whose partition is not `partition_for_key(key, partitions)`.
    pub key_partition_mismatch: usize,
    /// Acknowledged with a partition other than the intended one.
    pub acknowledged_wrong_partition: usize,
    /// Acknowledged at an offset that holds another record, or nothing.
    pub offset_mismatch: usize,
    /// Acknowledged but not in the log.
    pub missing_acknowledged: usize,
    /// Refused or failed as not persisted, yet in the log.
    pub present_but_not_persisted: usize,
    /// Sent but not in the log, whatever the outcome.
    pub missing: usize,
    /// Per partition.
    pub partitions: BTreeMap<i32, PartitionFigures>,
    /// The first problems found, described.
    pub examples: Vec<String>,
}

impl Verdict {
    /// Compares the records sent in run `run` with the log read back from a topic with
    /// `partitions` partitions.
    pub fn compute(
        run: u64,
        partitions: i32,
        sent: &[Sent],
        log: &BTreeMap<i32, Vec<ReadRecord>>,
    ) -> Self {
        let mut v = Self {
            sent: sent.len(),
            ..Self::default()
        };
        let by_tag: HashMap<Tag, &Sent> = sent.iter().map(|s| (s.tag, s)).collect();
        for s in sent {
            v.partitions.entry(s.partition).or_default().sent += 1;
        }
        // Where each record of this run sits: (partition, offset) -> tag, and tag -> first place.
        let mut at: HashMap<(i32, i64), Tag> = HashMap::new();
        let mut first: HashMap<Tag, (i32, i64)> = HashMap::new();
        let mut last_in_stream: HashMap<(i32, u32), u64> = HashMap::new();
        let mut last_for_key: HashMap<(Bytes, u32), u64> = HashMap::new();
        for (&p, records) in log {
            for r in records {
                let tag = match decode_value(run, r.value.as_deref()) {
                    Decoded::Foreign => {
                        v.foreign += 1;
                        continue;
                    }
                    Decoded::Garbled => {
                        v.corrupt += 1;
                        v.example(format!("partition {p} offset {}: garbled value", r.offset));
                        continue;
                    }
                    Decoded::Ours(tag) => tag,
                };
                v.read += 1;
                v.partitions.entry(p).or_default().read += 1;
                at.insert((p, r.offset), tag);
                if let Some(&(fp, fo)) = first.get(&tag) {
                    v.duplicates += 1;
                    v.partitions.entry(p).or_default().duplicates += 1;
                    v.example(format!(
                        "{tag} duplicated: partition {fp} offset {fo} and partition {p} offset {}",
                        r.offset
                    ));
                    continue;
                }
                first.insert(tag, (p, r.offset));
                let Some(s) = by_tag.get(&tag) else {
                    v.unexpected += 1;
                    v.example(format!(
                        "{tag} at partition {p} offset {} was never sent",
                        r.offset
                    ));
                    continue;
                };
                let value_len = s.bytes - s.key.as_ref().map_or(0, Bytes::len);
                let value = encode_value(run, tag, value_len);
                if r.value.as_deref() != Some(&value[..]) || r.key.as_deref() != s.key.as_deref() {
                    v.corrupt += 1;
                    v.example(format!(
                        "{tag} at partition {p} offset {}: key or value differs",
                        r.offset
                    ));
                }
                if s.partition != p {
                    v.wrong_partition += 1;
                    v.example(format!(
                        "{tag} sent to partition {} but read on {p}",
                        s.partition
                    ));
                }
                if let Some(key) = &r.key {
                    let want = partition_for_key(key, partitions);
                    if want != p {
                        v.key_partition_mismatch += 1;
                        v.example(format!(
                            "{tag}: key {:?} is on partition {p}, the Java partitioner says {want}",
                            String::from_utf8_lossy(key)
                        ));
                    }
                    let last = last_for_key.entry((Bytes::from(key.clone()), tag.stream));
                    match last {
                        std::collections::hash_map::Entry::Occupied(mut e) => {
                            if tag.seq < *e.get() {
                                v.out_of_order_per_key += 1;
                                v.example(format!(
                                    "{tag} (key {:?}) read after #{}",
                                    String::from_utf8_lossy(key),
                                    e.get()
                                ));
                            } else {
                                e.insert(tag.seq);
                            }
                        }
                        std::collections::hash_map::Entry::Vacant(e) => {
                            e.insert(tag.seq);
                        }
                    }
                }
                let last = last_in_stream.entry((p, tag.stream)).or_insert(tag.seq);
                if tag.seq < *last {
                    v.out_of_order += 1;
                    v.partitions.entry(p).or_default().out_of_order += 1;
                    v.example(format!(
                        "{tag} at partition {p} offset {} comes after #{}",
                        r.offset, *last
                    ));
                } else {
                    *last = tag.seq;
                }
            }
        }
        v.present = first.len();

        for s in sent {
            let present = first.contains_key(&s.tag);
            if !present {
                v.missing += 1;
            }
            match s.outcome.reported() {
                Some(Reported::Delivered { partition, offset }) => {
                    v.acknowledged += 1;
                    v.partitions.entry(s.partition).or_default().acknowledged += 1;
                    if partition != s.partition {
                        v.acknowledged_wrong_partition += 1;
                        v.example(format!(
                            "{} acknowledged on partition {partition}, sent to {}",
                            s.tag, s.partition
                        ));
                    }
                    if !present {
                        v.missing_acknowledged += 1;
                        v.partitions
                            .entry(s.partition)
                            .or_default()
                            .missing_acknowledged += 1;
                        v.example(format!(
                            "{} acknowledged at partition {partition} offset {offset:?} but not in the log",
                            s.tag
                        ));
                    }
                    match offset {
                        None => v.acknowledged_without_offset += 1,
                        Some(o) => {
                            let found = at.get(&(partition, o));
                            if found != Some(&s.tag) {
                                v.offset_mismatch += 1;
                                v.example(format!(
                                    "{} acknowledged at partition {partition} offset {o}, which holds {}",
                                    s.tag,
                                    found.map_or_else(
                                        || "nothing of this run".to_owned(),
                                        Tag::to_string
                                    )
                                ));
                            }
                        }
                    }
                }
                Some(Reported::Failed {
                    error,
                    persisted,
                    refused,
                }) => {
                    if refused {
                        v.refused += 1;
                    } else if persisted == Persistence::NotPersisted {
                        v.failed_not_persisted += 1;
                    } else {
                        v.failed_possibly_persisted += 1;
                        if present {
                            v.failed_possibly_persisted_present += 1;
                        }
                    }
                    if present && (refused || persisted == Persistence::NotPersisted) {
                        v.present_but_not_persisted += 1;
                        v.example(format!(
                            "{} failed as not persisted ({error}) but is in the log",
                            s.tag
                        ));
                    }
                    if v.refused + v.failed_not_persisted + v.failed_possibly_persisted <= 3 {
                        v.example(format!("{} failed: {error}", s.tag));
                    }
                }
                None => {
                    v.unresolved += 1;
                    v.example(format!("{}: its future never resolved", s.tag));
                }
            }
        }
        v
    }

    fn example(&mut self, what: String) {
        if self.examples.len() < EXAMPLES {
            self.examples.push(what);
        }
    }

    /// This verdict as a comparison-table row for `client`.
    pub fn row(&self, client: &str) -> Row {
        Row {
            client: client.to_owned(),
            sent: self.sent,
            acknowledged: self.acknowledged,
            failed: self.failed(),
            unresolved: self.unresolved,
            duplicates: self.duplicates,
            out_of_order: self.out_of_order + self.out_of_order_per_key,
            missing: self.missing_acknowledged,
            wrong_offsets: self.offset_mismatch,
            other: self.corrupt
                + self.unexpected
                + self.wrong_partition
                + self.key_partition_mismatch
                + self.acknowledged_wrong_partition
                + self.present_but_not_persisted,
        }
    }

    /// Records that failed in any way.
    pub fn failed(&self) -> usize {
        self.refused + self.failed_not_persisted + self.failed_possibly_persisted
    }

    /// No duplicate, no reorder (per stream or per key), no acknowledged record missing or
    /// misplaced, no failed-as-not-persisted record in the log, no corrupt or unexpected record,
    /// and every future resolved. Failures reported truthfully are allowed.
    pub fn is_correct(&self) -> bool {
        self.duplicates == 0
            && self.out_of_order == 0
            && self.out_of_order_per_key == 0
            && self.missing_acknowledged == 0
            && self.offset_mismatch == 0
            && self.wrong_partition == 0
            && self.key_partition_mismatch == 0
            && self.acknowledged_wrong_partition == 0
            && self.present_but_not_persisted == 0
            && self.corrupt == 0
            && self.unexpected == 0
            && self.unresolved == 0
    }

    /// Correct, and moreover every record was acknowledged and is in the log.
    pub fn is_complete(&self) -> bool {
        self.is_correct()
            && self.failed() == 0
            && self.missing == 0
            && self.acknowledged == self.sent
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  records sent                   {:>9}", self.sent)?;
        writeln!(
            f,
            "  acknowledged                   {:>9}  ({} without offset: duplicate resends)",
            self.acknowledged, self.acknowledged_without_offset
        )?;
        writeln!(
            f,
            "  failed                         {:>9}  (refused {}, not persisted {}, possibly persisted {} of which {} in the log)",
            self.failed(),
            self.refused,
            self.failed_not_persisted,
            self.failed_possibly_persisted,
            self.failed_possibly_persisted_present
        )?;
        writeln!(f, "  unresolved futures             {:>9}", self.unresolved)?;
        writeln!(
            f,
            "  present in the log             {:>9}  ({} read; {} records of other runs ignored)",
            self.present, self.read, self.foreign
        )?;
        writeln!(f, "  duplicated                     {:>9}", self.duplicates)?;
        writeln!(
            f,
            "  out of order                   {:>9}  (per key: {})",
            self.out_of_order, self.out_of_order_per_key
        )?;
        writeln!(
            f,
            "  missing                        {:>9}  (acknowledged: {})",
            self.missing, self.missing_acknowledged
        )?;
        writeln!(
            f,
            "  wrong partition                {:>9}  (acknowledged elsewhere {}, key rule {})",
            self.wrong_partition, self.acknowledged_wrong_partition, self.key_partition_mismatch
        )?;
        writeln!(
            f,
            "  offset mismatches              {:>9}",
            self.offset_mismatch
        )?;
        writeln!(
            f,
            "  not persisted yet present      {:>9}",
            self.present_but_not_persisted
        )?;
        writeln!(
            f,
            "  corrupt / never sent           {:>9} / {}",
            self.corrupt, self.unexpected
        )?;
        writeln!(
            f,
            "  partition      sent     acked      read   dup   ooo  missing-acked"
        )?;
        for (p, q) in &self.partitions {
            writeln!(
                f,
                "  {p:>9} {:>9} {:>9} {:>9} {:>5} {:>5} {:>14}",
                q.sent,
                q.acknowledged,
                q.read,
                q.duplicates,
                q.out_of_order,
                q.missing_acknowledged
            )?;
        }
        for e in &self.examples {
            writeln!(f, "  ! {e}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use kprod_tokio::ErrorKind;

    use super::*;

    #[test]
    fn values_round_trip() {
        let tag = Tag {
            stream: 3,
            seq: 1_234_567,
        };
        let v = encode_value(42, tag, 100);
        assert_eq!(v.len(), 100);
        assert_eq!(decode_value(42, Some(&v)), Decoded::Ours(tag));
        assert_eq!(decode_value(43, Some(&v)), Decoded::Foreign);
        assert_eq!(decode_value(42, Some(b"hello")), Decoded::Foreign);
        assert_eq!(decode_value(42, None), Decoded::Foreign);
        let garbled = format!("{MAGIC} {:016x} x", 42u64);
        assert_eq!(decode_value(42, Some(garbled.as_bytes())), Decoded::Garbled);
        // A short size still holds the whole header.
        assert_eq!(
            decode_value(42, Some(&encode_value(42, tag, 0))),
            Decoded::Ours(tag)
        );
    }

    fn sent(stream: u32, seq: u64, partition: i32, offset: Option<i64>) -> Sent {
        Sent {
            tag: Tag { stream, seq },
            partition,
            key: None,
            bytes: 10,
            outcome: Outcome::Delivered(Delivery {
                topic: "t".into(),
                partition,
                offset,
                timestamp: 0,
                timestamp_type: kprod_tokio::TimestampType::CreateTime,
                acknowledgement: kprod_tokio::Acknowledgement::InSyncReplicas,
            }),
        }
    }

    fn read(offset: i64, stream: u32, seq: u64) -> ReadRecord {
        ReadRecord {
            offset,
            key: None,
            value: Some(encode_value(7, Tag { stream, seq }, 10)),
        }
    }

    #[test]
    fn verdict_finds_each_kind_of_problem() {
        let sent = vec![
            sent(0, 0, 0, Some(0)),
            sent(0, 1, 0, Some(1)),
            sent(0, 2, 0, None),
            sent(0, 3, 0, Some(9)),
        ];
        let clean: BTreeMap<i32, Vec<ReadRecord>> = [(
            0,
            vec![read(0, 0, 0), read(1, 0, 1), read(2, 0, 2), read(9, 0, 3)],
        )]
        .into();
        let v = Verdict::compute(7, 1, &sent, &clean);
        assert!(v.is_complete(), "{v}");
        assert_eq!(v.acknowledged_without_offset, 1);

        // #1 and #0 swapped, #2 twice, #3 missing.
        let bad: BTreeMap<i32, Vec<ReadRecord>> = [(
            0,
            vec![read(0, 0, 1), read(1, 0, 0), read(2, 0, 2), read(3, 0, 2)],
        )]
        .into();
        let v = Verdict::compute(7, 1, &sent, &bad);
        assert!(!v.is_correct());
        assert_eq!(v.out_of_order, 1, "{v}");
        assert_eq!(v.duplicates, 1, "{v}");
        assert_eq!(v.missing_acknowledged, 1, "{v}");
        assert_eq!(v.offset_mismatch, 3, "{v}");
    }

    #[test]
    fn verdict_checks_partitions_keys_and_failures() {
        let source = Source {
            topic: "t".into(),
            partitions: 4,
            run: 7,
            record_size: 10,
        };
        let key = Bytes::from_static(b"k");
        let home = partition_for_key(&key, 4);
        let elsewhere = (home + 1) % 4;
        let (_, mut a) = source.record(Tag { stream: 0, seq: 0 }, Target::Key(key.clone()));
        let (_, mut b) = source.record(Tag { stream: 0, seq: 1 }, Target::Key(key.clone()));
        let (_, mut c) = source.record(Tag { stream: 0, seq: 2 }, Target::Partition(0));
        let (_, d) = source.record(Tag { stream: 0, seq: 3 }, Target::Partition(0));
        let delivered = |p, o| {
            Outcome::Delivered(Delivery {
                topic: "t".into(),
                partition: p,
                offset: Some(o),
                timestamp: 0,
                timestamp_type: kprod_tokio::TimestampType::CreateTime,
                acknowledgement: kprod_tokio::Acknowledgement::InSyncReplicas,
            })
        };
        a.outcome = delivered(home, 0);
        b.outcome = delivered(home, 1);
        c.outcome = Outcome::Failed(DeliveryError::new(
            ErrorKind::DriverStopped,
            Persistence::NotPersisted,
        ));
        let rec = |offset, seq, key: Option<&Bytes>| ReadRecord {
            offset,
            key: key.map(|k| k.to_vec()),
            value: Some(encode_value(7, Tag { stream: 0, seq }, 10)),
        };
        // Per key #1 before #0, both on the wrong partition; the failed #2 is in the log; #3
        // never resolved.
        let log: BTreeMap<i32, Vec<ReadRecord>> = [
            (
                elsewhere,
                vec![rec(0, 1, Some(&key)), rec(1, 0, Some(&key))],
            ),
            (0, vec![rec(0, 2, None)]),
        ]
        .into();
        let v = Verdict::compute(7, 4, &[a, b, c, d], &log);
        assert_eq!(v.wrong_partition, 2, "{v}");
        assert_eq!(v.key_partition_mismatch, 2, "{v}");
        assert_eq!(v.out_of_order_per_key, 1, "{v}");
        assert_eq!(v.out_of_order, 1, "{v}");
        assert_eq!(v.present_but_not_persisted, 1, "{v}");
        assert_eq!(v.unresolved, 1, "{v}");
        assert_eq!(v.missing, 1, "{v}");
        assert_eq!(v.missing_acknowledged, 0, "{v}");
        assert!(!v.is_correct());
    }
}
