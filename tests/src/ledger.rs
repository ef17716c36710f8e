//! What a fault scenario sent and what kprod reported, checked against the log the independent
//! reader ([`crate::reader`]) found.
//!
//! A [`Ledger`] sends records with explicit partitions and unique values
//! (`TOPIC/PARTITION/INDEX`, the index counting every record of the ledger in send order), keeps
//! each record's [`DeliveryFuture`], resolves them all within a bound, and then
//! [`Ledger::check`] asserts, per partition:
//!
//! - every record in the log is one the ledger sent, to that partition;
//! - no record is in the log twice;
//! - the log keeps send order;
//! - a record acknowledged with an offset is at that offset; one acknowledged without an
//!   offset (Tansu's DUPLICATE_SEQUENCE_NUMBER) is present;
//! - a record that failed `NotPersisted` is absent (`PossiblyPersisted` allows both).
//!
//! The checks themselves ([`audit`]) take client-neutral outcomes ([`Reported`]), so the same
//! code judges kprod's ledger and the Java reference producer's (`crate::javaref`); an
//! [`Audit`] counts what it found and gives one [`Row`] of a comparison table.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use kprod_core::{Persistence, Record};
use kprod_tokio::{Delivery, DeliveryError, DeliveryFuture, ErrorKind, ProducerHandle};

use crate::reader::{read_topic, ReadRecord};

/// One record of a ledger.
#[derive(Debug)]
pub struct Entry {
    /// Partition it was sent to.
    pub partition: i32,
    /// Its value.
    pub value: Vec<u8>,
    /// Its outcome, once resolved.
    pub outcome: Option<Result<Delivery, DeliveryError>>,
}

/// Counts of outcomes and of what the log holds, for scenario-specific assertions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Records sent.
    pub sent: usize,
    /// Acknowledged with an offset.
    pub delivered: usize,
    /// Acknowledged without an offset (DUPLICATE_SEQUENCE_NUMBER).
    pub delivered_without_offset: usize,
    /// Failed, reported not persisted.
    pub failed_not_persisted: usize,
    /// Failed, reported possibly persisted.
    pub failed_possibly_persisted: usize,
    /// Of the possibly persisted failures, how many are in the log.
    pub possibly_persisted_present: usize,
    /// Records of this ledger in the log.
    pub in_log: usize,
    /// Records found in a partition after a record sent later (only counted by
    /// [`Ledger::check_ignoring_order`]; [`Ledger::check`] fails on them).
    pub out_of_order: usize,
}

impl Summary {
    /// Every record was acknowledged.
    pub fn all_delivered(&self) -> bool {
        self.delivered + self.delivered_without_offset == self.sent
    }

    /// Records that failed.
    pub fn failed(&self) -> usize {
        self.failed_not_persisted + self.failed_possibly_persisted
    }
}

/// The value of a ledger's record `index` sent to `partition`: `TOPIC/PARTITION/INDEX`, the
/// index on at least 6 digits.
pub fn ledger_value(topic: &str, partition: i32, index: usize) -> String {
    format!("{topic}/{partition}/{index:06}")
}

/// A record's outcome as a client reported it, whichever client it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reported {
    /// Acknowledged in `partition` at `offset` (`None`: acknowledged without an offset).
    Delivered {
        /// The partition the client reported.
        partition: i32,
        /// The offset the client reported.
        offset: Option<i64>,
    },
    /// Failed.
    Failed {
        /// The error as the client described it.
        error: String,
        /// What the failure says about the log: `NotPersisted` promises the record is absent.
        /// A client that makes no such promise (the Java producer) reports
        /// `PossiblyPersisted`.
        persisted: Persistence,
        /// Refused at send time, never accepted (kprod's `enqueue`, Java's `send` throwing).
        refused: bool,
    },
}

impl Reported {
    /// kprod-tokio's outcome, client-neutral.
    pub fn from_kprod(outcome: &Result<Delivery, DeliveryError>) -> Self {
        match outcome {
            Ok(d) => Self::from_delivery(d),
            Err(e) => Self::from_error(e),
        }
    }

    /// A kprod-tokio delivery, client-neutral.
    pub fn from_delivery(d: &Delivery) -> Self {
        Self::Delivered {
            partition: d.partition,
            offset: d.offset,
        }
    }

    /// A kprod-tokio failure, client-neutral.
    pub fn from_error(e: &DeliveryError) -> Self {
        Self::Failed {
            error: e.to_string(),
            persisted: e.persisted,
            refused: matches!(e.kind, ErrorKind::Refused(_)),
        }
    }
}

/// One record as [`audit`] checks it.
#[derive(Debug, Clone)]
pub struct Checked<'a> {
    /// The partition it was sent to.
    pub partition: i32,
    /// Its value, unique among the records checked together.
    pub value: &'a [u8],
    /// Its outcome; `None` if it never resolved.
    pub outcome: Option<Reported>,
}

/// One client's line in a comparison table: what it reported and what the log shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Row {
    /// The client's name.
    pub client: String,
    /// Records sent.
    pub sent: usize,
    /// Reported delivered.
    pub acknowledged: usize,
    /// Reported failed (refused included).
    pub failed: usize,
    /// No outcome within the bound.
    pub unresolved: usize,
    /// Extra copies in the log.
    pub duplicates: usize,
    /// Records found behind a record sent after them (per stream; per key too in the seed
    /// verdict).
    pub out_of_order: usize,
    /// Acknowledged records absent from the log.
    pub missing: usize,
    /// Acknowledged at an offset that does not hold the record (a missing one counts too).
    pub wrong_offsets: usize,
    /// Any other violation: foreign or corrupt records, wrong partitions, a record that
    /// failed as not persisted found in the log.
    pub other: usize,
}

impl Row {
    /// The table's header, aligned with [`Row`]'s `Display`.
    pub fn header() -> String {
        format!(
            "{:<10} {:>8} {:>8} {:>6} {:>10} {:>10} {:>12} {:>7} {:>13} {:>5}",
            "client",
            "sent",
            "acked",
            "failed",
            "unresolved",
            "duplicates",
            "out of order",
            "missing",
            "wrong offsets",
            "other"
        )
    }

    /// No duplicate, reorder, missing acknowledged record, wrong offset, other violation or
    /// unresolved record (failures reported as such are allowed).
    pub fn is_clean(&self) -> bool {
        self.unresolved == 0
            && self.duplicates == 0
            && self.out_of_order == 0
            && self.missing == 0
            && self.wrong_offsets == 0
            && self.other == 0
    }

    /// The header and one line per row.
    pub fn table(rows: &[Row]) -> String {
        let mut t = Self::header();
        for r in rows {
            let _ = write!(t, "\n{r}");
        }
        t
    }
}

impl std::fmt::Display for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:<10} {:>8} {:>8} {:>6} {:>10} {:>10} {:>12} {:>7} {:>13} {:>5}",
            self.client,
            self.sent,
            self.acknowledged,
            self.failed,
            self.unresolved,
            self.duplicates,
            self.out_of_order,
            self.missing,
            self.wrong_offsets,
            self.other
        )
    }
}

/// What [`audit`] found.
#[derive(Debug, Clone, Default)]
pub struct Audit {
    /// Outcome counts and what the log holds.
    pub summary: Summary,
    /// Records without an outcome.
    pub unresolved: usize,
    /// Extra copies in the log.
    pub duplicates: usize,
    /// Acknowledged records absent from the log.
    pub missing_acknowledged: usize,
    /// Acknowledged at an offset that does not hold the record.
    pub wrong_offsets: usize,
    /// Foreign records, wrong partitions, not-persisted failures in the log.
    pub other: usize,
    /// Every problem but order, described.
    pub problems: Vec<String>,
    /// Send-order violations, described (counted in `summary.out_of_order`).
    pub order_problems: Vec<String>,
}

impl Audit {
    /// No problem at all (`order`: send-order violations count as problems).
    pub fn is_clean(&self, order: bool) -> bool {
        self.problems.is_empty() && (!order || self.order_problems.is_empty())
    }

    /// This audit as a comparison-table row for `client`.
    pub fn row(&self, client: &str) -> Row {
        let s = &self.summary;
        Row {
            client: client.to_owned(),
            sent: s.sent,
            acknowledged: s.delivered + s.delivered_without_offset,
            failed: s.failed(),
            unresolved: self.unresolved,
            duplicates: self.duplicates,
            out_of_order: s.out_of_order,
            missing: self.missing_acknowledged,
            wrong_offsets: self.wrong_offsets,
            other: self.other,
        }
    }

    /// Panics with every problem found (send-order ones too if `order`), if any.
    pub fn assert_clean(&self, topic: &str, order: bool) {
        if self.is_clean(order) {
            return;
        }
        let mut all: Vec<&String> = self.problems.iter().collect();
        if order {
            all.extend(&self.order_problems);
        }
        let mut msg = format!(
            "{} problem(s) in topic {topic} (outcomes {:?}):\n",
            all.len(),
            self.summary
        );
        for p in all.iter().take(30) {
            let _ = writeln!(msg, "  {p}");
        }
        panic!("{msg}");
    }
}

impl Summary {
    /// Counts one more record with this outcome.
    fn count(&mut self, outcome: Option<&Reported>) {
        self.sent += 1;
        match outcome {
            Some(Reported::Delivered {
                offset: Some(_), ..
            }) => self.delivered += 1,
            Some(Reported::Delivered { offset: None, .. }) => self.delivered_without_offset += 1,
            Some(Reported::Failed {
                persisted: Persistence::NotPersisted,
                ..
            }) => self.failed_not_persisted += 1,
            Some(Reported::Failed { .. }) => self.failed_possibly_persisted += 1,
            None => {}
        }
    }
}

/// Checks the log of `topic` against the records sent to it and their outcomes (see the
/// module docs), whichever client sent them. Counts every problem instead of panicking.
pub fn audit(topic: &str, records: &[Checked<'_>], log: &BTreeMap<i32, Vec<ReadRecord>>) -> Audit {
    let mut a = Audit::default();
    for r in records {
        a.summary.count(r.outcome.as_ref());
    }
    let by_value: BTreeMap<&[u8], usize> = records
        .iter()
        .enumerate()
        .map(|(i, e)| (e.value, i))
        .collect();
    // Where each record is: (partition, offset), possibly several times.
    let mut found: BTreeMap<usize, Vec<(i32, i64)>> = BTreeMap::new();
    for (&p, read) in log {
        let mut last: Option<usize> = None;
        for r in read {
            let Some(&i) = r.value.as_deref().and_then(|v| by_value.get(v)) else {
                a.other += 1;
                a.problems.push(format!(
                    "partition {p} offset {}: foreign record {:?} (topic {topic})",
                    r.offset,
                    r.value.as_deref().map(String::from_utf8_lossy)
                ));
                continue;
            };
            if records[i].partition != p {
                a.other += 1;
                a.problems.push(format!(
                    "record {i} sent to partition {} found in partition {p}",
                    records[i].partition
                ));
            }
            if let Some(l) = last {
                if i < l {
                    a.summary.out_of_order += 1;
                    a.order_problems.push(format!(
                        "partition {p} offset {}: record {i} after record {l}",
                        r.offset
                    ));
                }
            }
            last = Some(last.map_or(i, |l| l.max(i)));
            found.entry(i).or_default().push((p, r.offset));
        }
    }
    for (i, places) in &found {
        if places.len() > 1 {
            a.duplicates += places.len() - 1;
            a.problems
                .push(format!("record {i} duplicated at {places:?}"));
        }
    }
    a.summary.in_log = found.len();
    for (i, e) in records.iter().enumerate() {
        let places = found.get(&i).map(Vec::as_slice).unwrap_or(&[]);
        match &e.outcome {
            None => {
                a.unresolved += 1;
                a.problems.push(format!("record {i} has no outcome"));
            }
            Some(Reported::Delivered { partition, offset }) => {
                if *partition != e.partition {
                    a.other += 1;
                    a.problems.push(format!(
                        "record {i} sent to {} reported in partition {partition}",
                        e.partition
                    ));
                }
                if places.is_empty() {
                    a.missing_acknowledged += 1;
                }
                match offset {
                    Some(o) if !places.contains(&(e.partition, *o)) => {
                        a.wrong_offsets += 1;
                        a.problems.push(format!(
                            "record {i} acknowledged at offset {o} but found at {places:?}"
                        ));
                    }
                    None if places.is_empty() => {
                        a.problems
                            .push(format!("record {i} acknowledged (no offset) but absent"));
                    }
                    _ => {}
                }
            }
            Some(Reported::Failed {
                error, persisted, ..
            }) => match persisted {
                Persistence::NotPersisted if !places.is_empty() => {
                    a.other += 1;
                    a.problems.push(format!(
                        "record {i} failed NotPersisted ({error}) but is in the log at {places:?}"
                    ));
                }
                Persistence::PossiblyPersisted if !places.is_empty() => {
                    a.summary.possibly_persisted_present += 1;
                }
                _ => {}
            },
        }
    }
    a
}

/// Records sent to one topic, their futures and outcomes.
#[derive(Debug)]
pub struct Ledger {
    topic: String,
    partitions: i32,
    entries: Vec<Entry>,
    futures: Vec<(usize, DeliveryFuture)>,
}

impl Ledger {
    /// An empty ledger for `topic` with `partitions` partitions.
    pub fn new(topic: &str, partitions: i32) -> Self {
        Self {
            topic: topic.to_owned(),
            partitions,
            entries: Vec::new(),
            futures: Vec::new(),
        }
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The records, in send order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The record the next [`Self::enqueue`] to `partition` would send.
    pub fn next_record(&self, partition: i32) -> Record {
        let value = ledger_value(&self.topic, partition, self.entries.len());
        Record::new(self.topic.clone(), value.into_bytes())
            .with_partition(partition)
            .with_key(format!("k{}", self.entries.len()).into_bytes())
    }

    /// Enqueues the next record for `partition` and keeps its future.
    ///
    /// # Panics
    /// If the producer refuses it.
    pub async fn enqueue(&mut self, producer: &ProducerHandle, partition: i32) -> usize {
        let record = self.next_record(partition);
        let value = record.value.clone().expect("value").to_vec();
        let fut = producer
            .enqueue(record)
            .await
            .unwrap_or_else(|e| panic!("record for partition {partition} refused: {e}"));
        let i = self.entries.len();
        self.entries.push(Entry {
            partition,
            value,
            outcome: None,
        });
        self.futures.push((i, fut));
        i
    }

    /// Enqueues `n` records, round robin over the partitions.
    pub async fn enqueue_n(&mut self, producer: &ProducerHandle, n: usize) {
        for k in 0..n {
            self.enqueue(producer, (k as i32) % self.partitions).await;
        }
    }

    /// Awaits every outstanding future, all within `timeout`.
    ///
    /// # Panics
    /// If a record has not resolved by then.
    pub async fn resolve(&mut self, timeout: Duration) {
        self.resolve_partitions(timeout, |_| true).await;
    }

    /// Awaits the outstanding futures of the partitions `which` selects, all within `timeout`.
    ///
    /// # Panics
    /// If one of those records has not resolved by then.
    pub async fn resolve_partitions(&mut self, timeout: Duration, which: impl Fn(i32) -> bool) {
        let deadline = tokio::time::Instant::now() + timeout;
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.futures)
            .into_iter()
            .partition(|(i, _)| which(self.entries[*i].partition));
        self.futures = later;
        for (i, fut) in now {
            match tokio::time::timeout_at(deadline, fut).await {
                Ok(outcome) => self.entries[i].outcome = Some(outcome),
                Err(_) => panic!(
                    "record {i} ({}) did not resolve within {timeout:?}",
                    String::from_utf8_lossy(&self.entries[i].value)
                ),
            }
        }
    }

    /// Counts the outcomes (without the log).
    pub fn outcomes(&self) -> Summary {
        self.outcomes_of(|_| true)
    }

    /// Counts the outcomes of the records of the partitions `which` selects.
    pub fn outcomes_of(&self, which: impl Fn(i32) -> bool) -> Summary {
        let mut s = Summary::default();
        for e in self.entries.iter().filter(|e| which(e.partition)) {
            s.count(e.outcome.as_ref().map(Reported::from_kprod).as_ref());
        }
        s
    }

    /// Checks that every failed record was handed back (`DeliveryError::record`) equal to
    /// what was sent: topic, partition, key, value. Returns how many failed.
    ///
    /// # Panics
    /// If a failure holds no record or a different one.
    pub fn assert_failed_records_returned(&self) -> usize {
        let mut failed = 0;
        for (i, e) in self.entries.iter().enumerate() {
            let Some(Err(err)) = &e.outcome else { continue };
            failed += 1;
            let r = err
                .record()
                .unwrap_or_else(|| panic!("record {i} failed ({err}) without its record"));
            assert_eq!(r.topic, self.topic, "record {i}");
            assert_eq!(r.partition, Some(e.partition), "record {i}");
            assert_eq!(
                r.key.as_deref(),
                Some(format!("k{i}").as_bytes()),
                "record {i}"
            );
            assert_eq!(r.value.as_deref(), Some(&e.value[..]), "record {i}");
        }
        failed
    }

    /// The failures' kinds, for assertions on why records failed.
    pub fn errors(&self) -> Vec<&ErrorKind> {
        self.entries
            .iter()
            .filter_map(|e| match &e.outcome {
                Some(Err(err)) => Some(&err.kind),
                _ => None,
            })
            .collect()
    }

    /// Reads the topic from `brokers` with the independent reader (on a blocking thread) and
    /// checks it against the outcomes.
    ///
    /// # Panics
    /// If the read fails or a check fails.
    pub async fn read_and_check(&self, brokers: &str) -> Summary {
        let log = read_log(brokers, &self.topic, self.partitions).await;
        self.check(&log)
    }

    /// Checks the log against what was sent and reported (see the module docs).
    ///
    /// # Panics
    /// With every problem found, if any; also if a record has no outcome.
    pub fn check(&self, log: &BTreeMap<i32, Vec<ReadRecord>>) -> Summary {
        self.check_inner(log, true)
    }

    /// As [`Self::check`], except that send order is not required, only counted in
    /// [`Summary::out_of_order`]: for a broker that does not validate sequences, where a
    /// retried batch lands after the later batches that were pipelined behind it.
    ///
    /// # Panics
    /// With every other problem found.
    pub fn check_ignoring_order(&self, log: &BTreeMap<i32, Vec<ReadRecord>>) -> Summary {
        self.check_inner(log, false)
    }

    fn check_inner(&self, log: &BTreeMap<i32, Vec<ReadRecord>>, order: bool) -> Summary {
        let a = self.audit(log);
        a.assert_clean(&self.topic, order);
        a.summary
    }

    /// As [`Self::read_and_check`], for a topic whose records the test deleted
    /// (DeleteRecords) up to `log_start` (partition → the log start after the last
    /// deletion): a record delivered at an offset below its partition's log start is left
    /// out of the check against the log (its absence is the deletion's, and whether it was
    /// there before cannot be told now); those records' offsets must still be distinct and
    /// increase in send order per partition. Every other check holds as is (a copy of a
    /// left-out record above the log start is a foreign record).
    ///
    /// # Panics
    /// If the read fails or a check fails.
    pub async fn read_and_check_from(
        &self,
        brokers: &str,
        log_start: &BTreeMap<i32, i64>,
    ) -> Summary {
        let log = read_log(brokers, &self.topic, self.partitions).await;
        let deleted_at = |e: &Entry| match &e.outcome {
            Some(Ok(d)) => d
                .offset
                .filter(|o| (0..log_start.get(&e.partition).copied().unwrap_or(0)).contains(o)),
            _ => None,
        };
        let mut last: BTreeMap<i32, i64> = BTreeMap::new();
        for (i, e) in self.entries.iter().enumerate() {
            if let Some(o) = deleted_at(e) {
                let before = last.insert(e.partition, o);
                assert!(
                    before.is_none_or(|b| b < o),
                    "{}: record {i} acknowledged at {}/{o}, not after the partition's \
                     previous acknowledgement {before:?}",
                    self.topic,
                    e.partition
                );
            }
        }
        let records: Vec<Checked<'_>> = (self.entries.iter())
            .filter(|e| deleted_at(e).is_none())
            .map(|e| Checked {
                partition: e.partition,
                value: &e.value,
                outcome: e.outcome.as_ref().map(Reported::from_kprod),
            })
            .collect();
        let a = audit(&self.topic, &records, &log);
        a.assert_clean(&self.topic, true);
        a.summary
    }

    /// Checks the log against what was sent and reported, counting every problem instead of
    /// panicking (for a comparison table: [`Audit::row`]).
    pub fn audit(&self, log: &BTreeMap<i32, Vec<ReadRecord>>) -> Audit {
        let records: Vec<Checked<'_>> = self
            .entries
            .iter()
            .map(|e| Checked {
                partition: e.partition,
                value: &e.value,
                outcome: e.outcome.as_ref().map(Reported::from_kprod),
            })
            .collect();
        audit(&self.topic, &records, log)
    }
}

/// Reads every partition of `topic` from `brokers` on a blocking thread, within 30 s.
///
/// # Panics
/// If the reader fails.
pub async fn read_log(
    brokers: &str,
    topic: &str,
    partitions: i32,
) -> BTreeMap<i32, Vec<ReadRecord>> {
    let (brokers, topic) = (brokers.to_owned(), topic.to_owned());
    tokio::task::spawn_blocking(move || {
        read_topic(&brokers, &topic, partitions, Duration::from_secs(30))
    })
    .await
    .expect("reader thread")
    .unwrap_or_else(|e| panic!("independent reader failed: {e}"))
}

/// Three bursts of 300 records through `producer`, each resolved (within 30 s), with
/// `idle` of nothing sent after each: the idle period is the condition under test (a
/// producer's or a broker's `connections.max.idle.ms` shorter than it), so it is slept, not
/// waited on. Returns `Metrics::connections_opened` after each burst, then checks the log
/// with the independent reader: every record delivered, once, in order.
pub fn bursts_with_idle_gaps(
    rt: &tokio::runtime::Runtime,
    producer: &ProducerHandle,
    brokers: &str,
    topic: &str,
    partitions: i32,
    idle: Duration,
) -> Vec<u64> {
    let (bursts, per_burst) = (3, 300);
    let mut ledger = Ledger::new(topic, partitions);
    let mut opened = Vec::new();
    for _ in 0..bursts {
        rt.block_on(async {
            ledger.enqueue_n(producer, per_burst).await;
            ledger.resolve(Duration::from_secs(30)).await;
            opened.push(producer.metrics().await.connections_opened);
        });
        std::thread::sleep(idle);
    }
    let summary = rt.block_on(ledger.read_and_check(brokers));
    assert_eq!(summary.sent, bursts * per_burst);
    assert!(summary.all_delivered(), "{summary:?}");
    assert_eq!(summary.in_log, summary.sent, "{summary:?}");
    opened
}

#[cfg(test)]
mod tests {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::Arc;

    use kprod_core::DeliveryError as CoreError;

    use super::*;

    /// A ledger of four records on partition 0 with these outcomes.
    fn ledger(outcomes: Vec<Result<Option<i64>, Persistence>>) -> Ledger {
        let mut l = Ledger::new("t", 1);
        for (i, o) in outcomes.into_iter().enumerate() {
            l.entries.push(Entry {
                partition: 0,
                value: format!("t/0/{i:06}").into_bytes(),
                outcome: Some(match o {
                    Ok(offset) => Ok(Delivery {
                        topic: Arc::from("t"),
                        partition: 0,
                        offset,
                        timestamp: 0,
                        timestamp_type: kprod_tokio::TimestampType::CreateTime,
                        acknowledgement: kprod_tokio::Acknowledgement::InSyncReplicas,
                    }),
                    Err(persisted) => Err(DeliveryError::new(
                        ErrorKind::Failed(CoreError::DeliveryTimeout { last_error: None }),
                        persisted,
                    )),
                }),
            });
        }
        l
    }

    /// A log of partition 0 holding the ledger's records `order`, at offsets from 0.
    fn log(order: &[usize]) -> BTreeMap<i32, Vec<ReadRecord>> {
        let records = order
            .iter()
            .enumerate()
            .map(|(o, i)| ReadRecord {
                offset: o as i64,
                key: None,
                value: Some(format!("t/0/{i:06}").into_bytes()),
            })
            .collect();
        BTreeMap::from([(0, records)])
    }

    fn problem(l: &Ledger, log: &BTreeMap<i32, Vec<ReadRecord>>) -> String {
        let e = catch_unwind(AssertUnwindSafe(|| l.check(log))).expect_err("a problem");
        e.downcast_ref::<String>().cloned().unwrap_or_default()
    }

    #[test]
    fn a_truthful_log_passes() {
        let l = ledger(vec![
            Ok(Some(0)),
            Ok(None),
            Err(Persistence::PossiblyPersisted),
            Err(Persistence::NotPersisted),
        ]);
        let s = l.check(&log(&[0, 1, 2]));
        assert_eq!(
            (s.delivered, s.delivered_without_offset, s.in_log),
            (1, 1, 3)
        );
        assert_eq!(s.possibly_persisted_present, 1);
        assert_eq!(s.failed_not_persisted, 1);
    }

    #[test]
    fn each_kind_of_problem_is_found() {
        let ok = |n: usize| ledger((0..n).map(|i| Ok(Some(i as i64))).collect());
        assert!(problem(&ok(3), &log(&[0, 1, 1, 2])).contains("duplicated"));
        assert!(problem(&ok(3), &log(&[0, 2, 1])).contains("after record"));
        assert!(problem(&ok(3), &log(&[0, 1])).contains("acknowledged at offset 2"));
        let l = ledger(vec![Ok(None)]);
        assert!(problem(&l, &log(&[])).contains("absent"));
        let l = ledger(vec![Ok(Some(0)), Err(Persistence::NotPersisted)]);
        assert!(problem(&l, &log(&[0, 1])).contains("failed NotPersisted"));
        let mut foreign = log(&[0]);
        foreign.get_mut(&0).expect("p0").push(ReadRecord {
            offset: 1,
            key: None,
            value: Some(b"other".to_vec()),
        });
        assert!(problem(&ok(1), &foreign).contains("foreign"));
        let mut unresolved = ok(1);
        unresolved.entries[0].outcome = None;
        assert!(problem(&unresolved, &log(&[0])).contains("no outcome"));
        // Out of order is only counted when order is not checked.
        let swapped = ledger(vec![Ok(Some(0)), Ok(Some(2)), Ok(Some(1))]);
        assert!(problem(&swapped, &log(&[0, 2, 1])).contains("after record"));
        let s = swapped.check_ignoring_order(&log(&[0, 2, 1]));
        assert_eq!(s.out_of_order, 1);
    }
}
