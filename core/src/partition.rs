//! Per-partition state: the accumulator (batches in send order) and the idempotence
//! bookkeeping (bound identity, next sequence, last acknowledgement, rebase flags).
//!
//! The rules here are idempotence-spec §B.1: a sequence is assigned only when a batch first
//! goes on the wire (P1), a retry resends the same bytes (P2), a partition has at most
//! `max_in_flight` sequenced, unresolved batches (P4), retries go head-first and alone (P5),
//! a partition talks to one connection at a time (P7), an epoch change is applied to a
//! partition only once it has drained (P9, KAFKA-12152), and a batch that may be in the log is
//! never re-sequenced (P3, P13).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::protocol::record_batch::{restamp, RecordBatch, RecordBatchBuilder};
use crate::protocol::ErrorCode;
use crate::types::{ConnId, ProducerIdentity, Record, RecordId};

/// Where a batch is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum BatchState {
    /// Accepting records.
    Open,
    /// Closed for appends, waiting for its first (or, after a rebase, next) transmission.
    Ready,
    /// In a Produce request whose answer is pending.
    InFlight,
    /// Sequenced; to be resent with the same bytes at `at` or later.
    Retry {
        /// Earliest resend time.
        at: Instant,
    },
    /// Definitively not in the log, but its sequence can no longer be used: it waits for the
    /// partition to move to a new producer identity and is then re-sequenced.
    AwaitRebase,
}

/// A producer batch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Batch {
    pub(crate) id: u64,
    pub(crate) records: Vec<RecordId>,
    /// Present until the batch is first sequenced.
    pub(crate) builder: Option<RecordBatchBuilder>,
    /// The bytes on the wire once sequenced. Kept across a rebase (then restamped).
    pub(crate) wire: Option<Bytes>,
    /// Identity and base sequence, once sequenced under the partition's bound identity.
    pub(crate) seq: Option<(ProducerIdentity, i32)>,
    /// Bytes charged against `buffer.memory`.
    pub(crate) size: usize,
    pub(crate) created: Instant,
    /// Records accepted before this join the batch while it is open: half the delivery
    /// timeout after its creation (`None`: beyond what an `Instant` holds, no end).
    pub(crate) joinable_until: Option<Instant>,
    pub(crate) state: BatchState,
    /// Some attempt's outcome is unknown: the batch may be in the log (P10).
    pub(crate) maybe_persisted: bool,
    /// A later batch of the same identity was acknowledged first; re-sequencing this one
    /// would reorder the log, so it can only be acknowledged or failed.
    pub(crate) overtaken: bool,
    /// Refused OUT_OF_ORDER_SEQUENCE_NUMBER by a broker that did not know the log start
    /// (-1) once already, and asked again of the leader metadata names: a second such answer
    /// is not waited out (a broker that never reports its log start, Redpanda, answers -1
    /// every time).
    pub(crate) asked_without_log_start: bool,
    /// Its records were already reported failed, possibly persisted, at their delivery
    /// timeout while the batch was in flight: it stays (uncharged) only until its request
    /// resolves, which then settles the partition's sequence state and reports nothing, and
    /// it is never sent again.
    pub(crate) reported: bool,
    pub(crate) retries: u32,
    pub(crate) corrupt_retries: u8,
    /// The room the batch was charged for against `buffer.memory` when it opened.
    pub(crate) reserve: Reserve,
    /// The last error an attempt of the batch drew (a broker's code, or a lost connection or
    /// request timeout), reported with its delivery timeout. Observability, not behaviour:
    /// ignored by `PartialEq` and `Hash`.
    pub(crate) last_error: crate::metrics::Observed<Option<ErrorCode>>,
}

/// The room a batch is charged for when it opens, as sized for its first record: bytes of
/// buffer and ids in its record list. It is charged more only as its records outgrow them
/// (the room doubling, as the buffers do). A function of the batch's records, the
/// configuration and whether `buffer.memory` was short when it opened (not of which reused
/// buffer it got), so equal batches are charged alike.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) struct Reserve {
    pub(crate) bytes: usize,
    pub(crate) ids: usize,
}

impl Batch {
    /// A batch with room for `capacity` bytes and about `records` records, so that filling
    /// it allocates nothing more.
    #[cfg(test)]
    pub(crate) fn new(id: u64, now: Instant, capacity: usize, records: usize) -> Self {
        Self::with_buffers(
            id,
            now,
            std::time::Duration::MAX,
            crate::protocol::record_batch::shared_buffer(capacity),
            Vec::with_capacity(records),
        )
    }

    /// A batch written into `buf`, listing its records in `records` (both emptied first):
    /// the buffers of an acknowledged batch, reused. Records join it for `joinable` after
    /// `now`.
    pub(crate) fn with_buffers(
        id: u64,
        now: Instant,
        joinable: std::time::Duration,
        buf: bytes::BytesMut,
        mut records: Vec<RecordId>,
    ) -> Self {
        records.clear();
        Self {
            id,
            records,
            builder: Some(RecordBatchBuilder::with_buffer(buf)),
            wire: None,
            seq: None,
            size: 0,
            created: now,
            joinable_until: now.checked_add(joinable),
            state: BatchState::Open,
            maybe_persisted: false,
            overtaken: false,
            asked_without_log_start: false,
            reported: false,
            retries: 0,
            corrupt_retries: 0,
            reserve: Reserve::default(),
            last_error: Default::default(),
        }
    }

    pub(crate) fn count(&self) -> i32 {
        self.records.len() as i32
    }

    /// Encoded size of the batch as it would go on the wire now (while it is open, with
    /// compression, Kafka's estimate of its compressed size).
    pub(crate) fn wire_len(&self) -> usize {
        match (&self.wire, &self.builder) {
            (Some(w), _) => w.len(),
            (None, Some(b)) => b.estimated_size(),
            (None, None) => 0,
        }
    }

    pub(crate) fn is_sequenced_under(&self, id: Option<ProducerIdentity>) -> bool {
        matches!((self.seq, id), (Some((a, _)), Some(b)) if a == b)
    }

    /// The batch's records handed back with their ids, for a batch that failed: decoded from
    /// the open batch's buffer, or from the sealed bytes (decompressed if need be). The
    /// producer keeps no other copy of a record once it is in a batch; failure is the rare
    /// path, so it pays for the decoding. `None` for every record only if the bytes do not
    /// decode, which a batch this producer built always does.
    pub(crate) fn into_failed_records(
        self,
        topic: &Arc<str>,
        partition: i32,
    ) -> impl Iterator<Item = (RecordId, Option<Box<Record>>)> + '_ {
        let decoded = match (self.builder, self.wire) {
            (Some(builder), _) => builder.into_batch().ok(),
            (None, Some(wire)) => RecordBatch::decode_own(wire).ok(),
            (None, None) => None,
        }
        .filter(|d| d.records.len() == self.records.len());
        debug_assert!(
            decoded.is_some() || self.records.is_empty(),
            "undecodable batch"
        );
        let (base, records) = decoded.map_or((0, Vec::new()), |d| (d.base_timestamp, d.records));
        let mut records = records.into_iter();
        self.records.into_iter().map(move |id| {
            let r = records.next().map(|r| {
                Box::new(Record {
                    topic: topic.into(),
                    partition: Some(partition),
                    key: r.key,
                    value: r.value,
                    headers: r.headers,
                    timestamp: base.wrapping_add(r.timestamp_delta),
                })
            });
            (id, r)
        })
    }
}

/// One partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub(crate) struct Partition {
    pub(crate) leader: Option<i32>,
    pub(crate) leader_epoch: i32,
    pub(crate) batches: VecDeque<Batch>,
    /// The identity this partition's sequences are numbered under; may lag the producer's.
    pub(crate) bound: Option<ProducerIdentity>,
    pub(crate) next_seq: i32,
    /// Last acknowledged (sequence, offset) under `bound`.
    pub(crate) last_acked: Option<(i32, i64)>,
    /// A batch of `bound` failed: its later sequences leave a gap.
    pub(crate) gap: bool,
    /// `bound` can no longer be used for new batches; the partition must rebase.
    pub(crate) needs_rebase: bool,
    /// The gap policy cut this partition; cleared at the rebase.
    pub(crate) cutting: bool,
    /// Outcomes (`Delivered`, `Failed`) of records whose batch resolved while an earlier
    /// batch of the partition had not: held until it does, so that a partition's outcomes
    /// go out in send order (`Producer::emit_in_order`), each with the bytes of
    /// `buffer.memory` it still holds (a failed record goes back to the application with its
    /// outcome, so its bytes stay charged until then).
    pub(crate) held: Vec<(crate::Event, usize)>,
    /// The connection holding this partition's in-flight requests.
    pub(crate) inflight_conn: Option<ConnId>,
    /// The leader refused the partition (NOT_LEADER_OR_FOLLOWER and kin): send nothing until
    /// fresh metadata says who leads it, rather than retrying against a stale leader.
    pub(crate) stale_leader: bool,
    /// The topic was deleted and created again (a new topic id) while batches of this
    /// partition were in flight: the leader hints (KIP-951) in their answers speak of the old
    /// topic and its leader epochs, and are ignored until none is in flight.
    pub(crate) old_topic_in_flight: bool,
    /// The broker may have forgotten this producer (the partition idled longer than its
    /// producer-state expiry): batches go one at a time until one is acknowledged, so that a
    /// broker accepting any sequence cannot take a later batch before an earlier one.
    pub(crate) probe: bool,
    /// When the last acknowledged batch was created: the broker's idle clock for this
    /// producer started no earlier.
    pub(crate) last_write: Option<Instant>,
    /// The identity an answer for this partition last refused INVALID_PRODUCER_ID_MAPPING,
    /// until one of its batches is acknowledged: a later epoch of the same producer id
    /// refused so too means the broker does not know the id (Event Hubs after a restart),
    /// which no bump fixes. The partition's own (a review finding: a producer-wide mark,
    /// cleared by any partition's acknowledgement, never saw a second refusal while a
    /// partition the broker still knew kept being acknowledged).
    pub(crate) id_mapping_refused: Option<ProducerIdentity>,
    /// The offset of the last record acknowledged, for metrics (history, not behaviour).
    pub(crate) last_offset: crate::metrics::Observed<Option<i64>>,
    /// Epoch bumps this partition asked for to send a refused batch again since one of its
    /// batches was last acknowledged under the producer's current identity: the second and
    /// later wait a backoff that grows with it (a broker refusing every epoch here is not
    /// sent to at the speed of the network; the other partitions' acknowledgements, which
    /// each bump lets through, do not reset it).
    pub(crate) fruitless_bumps: u32,
    /// The identity this partition last asked a paced bump of: its other batches refused
    /// under it while the bump waits ask for nothing more.
    pub(crate) bump_asked_under: Option<ProducerIdentity>,
}

/// What [`Partition::next_to_send`] chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pick {
    pub(crate) index: usize,
}

/// Inputs to the send decision that come from the producer.
pub(crate) struct SendContext {
    pub(crate) now: Instant,
    pub(crate) identity: Option<ProducerIdentity>,
    pub(crate) conn: ConnId,
    pub(crate) max_in_flight: usize,
    pub(crate) linger: std::time::Duration,
    pub(crate) batch_size: usize,
    pub(crate) flush_upto: Option<RecordId>,
    pub(crate) max_sequence: i32,
    /// How long the partition may idle before the broker may have forgotten the producer.
    pub(crate) idle_expiry: std::time::Duration,
    /// The planted bug to run with (model checking only).
    #[cfg(feature = "mutations")]
    pub(crate) mutation: crate::mutation::Mutation,
}

/// `base + count` with Kafka's wrap past `max` to 0.
pub(crate) fn seq_add(base: i32, count: i32, max: i32) -> i32 {
    let modulus = i64::from(max) + 1;
    ((i64::from(base) + i64::from(count)) % modulus) as i32
}

/// How close to the wrap a partition's next sequence must be before the open batch is sized
/// against it ([`Partition::sequences_before_wrap`]): more records than any buffer holds.
pub(crate) const WRAP_WATCH: i32 = 1 << 24;

impl Partition {
    /// How many records the open batch (the last) may hold before its sequence range would
    /// cross the wrap past `max_sequence`, once the unsequenced batches ahead of it take
    /// theirs (asked only near the wrap: [`WRAP_WATCH`]). Kafka takes a batch
    /// whose range wraps (its last sequence below its first), but Redpanda refuses it
    /// INVALID_REQUEST and its leader steps down (`producer_state::try_emplace_request`),
    /// which failed the batch and made every batch behind it possibly persisted, once every
    /// 2^31 records of a partition (a review of Redpanda's source). So a batch is closed at
    /// the wrap, and the next one starts at 0. (A rebase moving the sequences later, rare,
    /// can still make one wrap: Kafka takes it.)
    #[cold]
    pub(crate) fn sequences_before_wrap(&self, max_sequence: i32) -> usize {
        let ahead: i64 = (self.batches.iter().rev().skip(1))
            .take_while(|b| b.seq.is_none())
            .map(|b| b.records.len() as i64)
            .sum();
        let modulus = i64::from(max_sequence) + 1;
        let base = (i64::from(self.next_seq) + ahead) % modulus;
        (modulus - base) as usize
    }

    /// The sequenced batches. They always form a prefix of `batches`: sequences are given in
    /// order to the first unsequenced batch, split pieces replace their batch in place, and a
    /// rebind clears every sequence at once. So every question about sequenced batches looks
    /// at this short prefix (at most `max_in_flight` long) and never at the whole queue.
    pub(crate) fn sequenced(&self) -> impl Iterator<Item = &Batch> {
        self.batches.iter().take_while(|b| b.seq.is_some())
    }

    pub(crate) fn inflight(&self) -> usize {
        self.sequenced()
            .filter(|b| b.state == BatchState::InFlight)
            .count()
    }

    /// Sequenced batches that are not resolved (P4 counts these).
    pub(crate) fn unresolved(&self) -> usize {
        self.sequenced().count()
    }

    pub(crate) fn position(&self, batch_id: u64) -> Option<usize> {
        self.batches.iter().position(|b| b.id == batch_id)
    }

    fn has_ambiguous_retry(&self) -> bool {
        self.sequenced()
            .any(|b| matches!(b.state, BatchState::Retry { .. }) && b.maybe_persisted)
    }

    /// Whether the partition has nothing on the wire and nothing that must be resent under
    /// its current identity, so it may move to a new one (P9).
    pub(crate) fn is_drained(&self) -> bool {
        self.inflight() == 0 && !self.has_ambiguous_retry()
    }

    /// Moves the partition to `identity` if it is drained and bound to another one. Every
    /// sequenced batch left is definitively not persisted; it is re-sequenced at its next
    /// transmission. The sequence restarts at 0 (KAFKA-12152).
    pub(crate) fn maybe_rebind(&mut self, identity: Option<ProducerIdentity>) -> bool {
        let Some(id) = identity else { return false };
        if self.bound == Some(id) || !self.is_drained() {
            return false;
        }
        self.bound = Some(id);
        self.next_seq = 0;
        self.last_acked = None;
        self.gap = false;
        self.needs_rebase = false;
        // Asked under an identity left: a broker may hand the same id and epoch out again
        // (an id and epoch given up, then issued anew), which must ask again.
        self.bump_asked_under = None;
        self.cutting = false;
        for b in self.batches.iter_mut().take_while(|b| b.seq.is_some()) {
            {
                debug_assert!(!b.maybe_persisted || b.state != BatchState::InFlight);
                b.seq = None;
                b.overtaken = false;
                b.state = BatchState::Ready;
            }
        }
        true
    }

    /// Chooses the batch to put in a request to `ctx.conn` now, if any, and sequences it.
    pub(crate) fn next_to_send(&mut self, ctx: &SendContext) -> Option<Pick> {
        if self.inflight_conn.is_some_and(|c| c != ctx.conn)
            && !mutated!(ctx, NoDrainBeforeLeaderChange)
        {
            return None; // P7: drain the old connection first.
        }
        if self.stale_leader {
            return None;
        }
        // P5: retries of the bound identity go head-first and alone. Once that identity is
        // spent (`needs_rebase`), only a batch that may be in the log still needs it: one that
        // every attempt proved unwritten can only draw OUT_OF_ORDER_SEQUENCE_NUMBER behind
        // the gap (or, as the first batch of an epoch the broker never saw, a new-epoch
        // batch at a non-zero sequence), so it waits to be re-sequenced at the rebase.
        if let Some(i) = self.head_retry() {
            return self.resend_head_retry(i, ctx);
        }
        let identity = ctx.identity?;
        if !self.may_sequence_new_batch(identity, ctx) {
            return None;
        }
        self.sequence_next_batch(identity, ctx)
    }

    /// The head retry `i` goes out again, alone, once its backoff has passed (P2, P5).
    fn resend_head_retry(&mut self, i: usize, ctx: &SendContext) -> Option<Pick> {
        let BatchState::Retry { at } = self.batches[i].state else {
            return None;
        };
        if self.inflight() > 0 || at > ctx.now {
            return None;
        }
        if mutated!(ctx, RetryReencoded) {
            self.reencode_reversed(i);
        }
        self.batches[i].state = BatchState::InFlight;
        self.inflight_conn = Some(ctx.conn);
        Some(Pick { index: i })
    }

    /// Whether a new batch may be sequenced under `identity` now: the partition is bound to
    /// it (P9), the in-flight window has room (P4), a probe after idle expiry or a fresh
    /// identity goes alone (D7, KAFKA-15591), and nothing is sequenced behind a batch that may
    /// be in the log (P5, P10). Starts a probe when the partition idled past the expiry.
    fn may_sequence_new_batch(&mut self, identity: ProducerIdentity, ctx: &SendContext) -> bool {
        // Without idempotence nothing rebases a cut partition: nothing new is sequenced until
        // the batches sent before the cut are resolved (with it, `needs_rebase` holds it).
        let cut_without_idempotence = self.cutting && identity == ProducerIdentity::NONE;
        if self.needs_rebase || cut_without_idempotence || self.bound != Some(identity) {
            return false;
        }
        let inflight = self.inflight();
        let bound = if mutated!(ctx, InflightOffByOne) {
            ctx.max_in_flight + 1
        } else {
            ctx.max_in_flight
        };
        if inflight >= bound || self.unresolved() >= bound {
            return false;
        }
        // A partition that idled longer than the broker keeps producer state may have been
        // forgotten; a broker that forgot us (2.5–4.4) takes any sequence. The fresh window
        // starts with a probe: one batch alone until it is acknowledged (KAFKA-15591 after
        // idle expiry, on a partition that already holds records).
        if self.unresolved() == 0
            && !mutated!(ctx, NoIdleProbe)
            && self
                .last_write
                .is_some_and(|t| ctx.now.saturating_duration_since(t) >= ctx.idle_expiry)
        {
            self.probe = true;
        }
        // Until one batch of this identity is acknowledged, send one at a time, so a broker
        // that has no state for us cannot accept a later batch before an earlier one (D7).
        if (self.last_acked.is_none() || self.probe) && inflight > 0 {
            return false;
        }
        // A batch that may already be in the log is resolved only when a retry of it is
        // deduplicated, so it must stay in the broker's five-batch dedup window (A.5): every
        // batch written after it pushes it out. Nothing new is sequenced behind it, even while
        // its retry is in flight (P5, P10); the batches already behind it are at most
        // `max_in_flight - 1`.
        if self
            .sequenced()
            .any(|b| b.maybe_persisted && b.is_sequenced_under(self.bound))
            && !mutated!(ctx, SequenceBehindPossiblyWritten)
        {
            return false;
        }
        true
    }

    /// Seals (first transmission, P1) or restamps (after a rebase) the first unsequenced
    /// batch if it is ready to go: full, followed by another, lingered long enough, or
    /// flushed; it takes the next sequence numbers, wrapping past the maximum.
    fn sequence_next_batch(
        &mut self,
        identity: ProducerIdentity,
        ctx: &SendContext,
    ) -> Option<Pick> {
        let i = self.unresolved();
        let b = self.batches.get(i)?;
        debug_assert!(matches!(b.state, BatchState::Open | BatchState::Ready));
        if b.records.is_empty() {
            return None;
        }
        let ready = b.state == BatchState::Ready
            || i + 1 < self.batches.len()
            || b.wire_len() >= ctx.batch_size
            || ctx.now >= b.created + ctx.linger
            || ctx.flush_upto.is_some_and(|f| b.records[0] <= f);
        if !ready {
            return None;
        }
        let base = self.next_seq;
        let b = &mut self.batches[i];
        // Without idempotence the sequence is bookkeeping only: the wire says -1.
        let wire_seq = identity.wire_sequence(base);
        let wire = match (b.builder.take(), &b.wire) {
            (Some(builder), _) => builder.seal(identity.producer_id, identity.epoch, wire_seq),
            (None, Some(old)) => restamp(old, identity.producer_id, identity.epoch, wire_seq),
            (None, None) => return None,
        };
        b.wire = Some(wire);
        b.seq = Some((identity, base));
        b.state = BatchState::InFlight;
        let max_sequence = if mutated!(ctx, EarlyWrap) {
            ctx.max_sequence - 1
        } else {
            // (`LateWrap`: one past the largest.)
            (ctx.max_sequence).saturating_add(i32::from(mutated!(ctx, LateWrap)))
        };
        self.next_seq = seq_add(base, b.count(), max_sequence);
        self.inflight_conn = Some(ctx.conn);
        Some(Pick { index: i })
    }

    /// Planted bug `RetryReencoded`: the retry's records are encoded again, in reverse order.
    fn reencode_reversed(&mut self, i: usize) {
        let Some(wire) = self.batches[i].wire.clone() else {
            return;
        };
        let Some(b) = RecordBatch::decode_all(wire)
            .ok()
            .and_then(|v| v.into_iter().next())
        else {
            return;
        };
        let mut builder = RecordBatchBuilder::with_capacity(0);
        for r in b.records.iter().rev() {
            builder.push(
                b.base_timestamp + r.timestamp_delta,
                r.key.as_deref(),
                r.value.as_deref(),
                &r.headers,
            );
        }
        self.batches[i].wire = Some(builder.seal(b.producer_id, b.producer_epoch, b.base_sequence));
    }

    /// The partition's leader moved (a new node or leader epoch) while batches wait to be
    /// retried: they go to the new leader without waiting out their backoff, which was for
    /// the old one (KIP-951; the Java client's `hasLeaderChangedForTheOngoingRetry`). Only the
    /// wait changes: the order and the one-at-a-time head retry stay (P2, P5).
    pub(crate) fn skip_retry_backoff(&mut self, now: Instant) {
        for b in &mut self.batches {
            if let BatchState::Retry { at } = &mut b.state {
                *at = (*at).min(now);
            }
        }
    }

    /// The retry that goes next, if any (P5): the first retry of the bound identity. Once that
    /// identity is spent, only a batch that may be in the log still needs it.
    fn head_retry(&self) -> Option<usize> {
        self.sequenced().position(|b| {
            matches!(b.state, BatchState::Retry { .. })
                && b.is_sequenced_under(self.bound)
                && (b.maybe_persisted || !self.needs_rebase)
        })
    }

    /// Its first batch whose records are not yet reported failed at their delivery timeout
    /// (the batches before it are in flight, waiting for their answers).
    pub(crate) fn first_unreported(&self) -> Option<&Batch> {
        self.batches.iter().find(|b| !b.reported)
    }

    /// The linger and retry-backoff expiries that can make this partition send: the head
    /// retry's backoff (the retries behind it wait for it, P5) and the open batch's linger.
    pub(crate) fn deadlines(&self, linger: std::time::Duration) -> impl Iterator<Item = Instant> {
        let retry = self.head_retry().and_then(|i| match self.batches[i].state {
            BatchState::Retry { at } => Some(at),
            _ => None,
        });
        let open = self
            .batches
            .back()
            .filter(|b| b.state == BatchState::Open)
            .map(|b| b.created + linger);
        retry.into_iter().chain(open)
    }

    pub(crate) fn update_inflight_conn(&mut self) {
        if self.inflight() == 0 {
            self.inflight_conn = None;
            self.old_topic_in_flight = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_wraps_past_the_maximum_to_zero() {
        assert_eq!(seq_add(0, 5, i32::MAX), 5);
        assert_eq!(seq_add(i32::MAX - 1, 1, i32::MAX), i32::MAX);
        assert_eq!(seq_add(i32::MAX, 1, i32::MAX), 0);
        assert_eq!(seq_add(i32::MAX - 1, 3, i32::MAX), 1);
        assert_eq!(seq_add(6, 3, 7), 1);
    }

    /// A send decision for connection 1 at `now`, as the producer would make it by default.
    fn ctx(now: Instant, identity: Option<ProducerIdentity>) -> SendContext {
        SendContext {
            now,
            identity,
            conn: ConnId(1),
            max_in_flight: 5,
            linger: std::time::Duration::ZERO,
            batch_size: 16 * 1024,
            flush_upto: None,
            max_sequence: i32::MAX,
            idle_expiry: std::time::Duration::from_secs(120),
            #[cfg(feature = "mutations")]
            mutation: crate::mutation::Mutation::None,
        }
    }

    fn ready_batch(id: u64, now: Instant, records: &[u64]) -> Batch {
        let mut b = Batch::new(id, now, 1024, 8);
        for r in records {
            b.builder
                .as_mut()
                .expect("unsequenced")
                .push(0, None, Some(b"x"), &[]);
            b.records.push(RecordId(*r));
        }
        b.state = BatchState::Ready;
        b
    }

    /// Regression: a possibly-written batch whose retry was in flight let new batches be
    /// sequenced behind it; once five of them were written the broker's dedup cache no
    /// longer held it, and its next retry drew OUT_OF_ORDER_SEQUENCE_NUMBER.
    #[test]
    fn nothing_new_is_sequenced_behind_a_possibly_written_batch() {
        let id = ProducerIdentity {
            producer_id: 7,
            epoch: 0,
            issue: 1,
        };
        let now = Instant::now();
        let mut p = Partition {
            bound: Some(id),
            next_seq: 16,
            last_acked: Some((20, 5)),
            ..Default::default()
        };
        let mut retried = ready_batch(1, now, &[1]);
        retried.builder = None;
        retried.seq = Some((id, 15));
        retried.state = BatchState::InFlight;
        retried.maybe_persisted = true;
        retried.overtaken = true;
        p.batches.push_back(retried);
        p.batches.push_back(ready_batch(2, now, &[2]));
        p.inflight_conn = Some(ConnId(1));
        let ctx = ctx(now, Some(id));
        assert_eq!(p.next_to_send(&ctx), None);
        // Once its retry is deduplicated (here: no longer possibly written), the next goes.
        p.batches[0].maybe_persisted = false;
        assert_eq!(p.next_to_send(&ctx), Some(Pick { index: 1 }));
    }

    /// Regression: once the bound identity is spent, a retry that every attempt proved
    /// unwritten was still retransmitted under it, behind the gap.
    #[test]
    fn only_a_possibly_written_retry_uses_a_spent_identity() {
        let id = ProducerIdentity {
            producer_id: 7,
            epoch: 1,
            issue: 1,
        };
        let now = Instant::now();
        let mut p = Partition {
            bound: Some(id),
            next_seq: 3,
            last_acked: Some((0, 5)),
            gap: true,
            needs_rebase: true,
            ..Default::default()
        };
        let mut refused = ready_batch(1, now, &[1]);
        refused.builder = None;
        refused.wire = Some(Bytes::from_static(b"sealed"));
        refused.seq = Some((id, 2));
        refused.state = BatchState::Retry { at: now };
        p.batches.push_back(refused);
        let ctx = ctx(now, None); // waiting for a new producer id
        assert_eq!(p.next_to_send(&ctx), None);
        assert!(p.is_drained(), "it waits for the rebase, not for a resend");
        // A batch that may be in the log must still be resolved under the old identity.
        p.batches[0].maybe_persisted = true;
        assert_eq!(p.next_to_send(&ctx), Some(Pick { index: 0 }));
    }

    /// The producer cannot reach Kafka's real maximum end to end (2^31 records), so this
    /// sequences batches directly at `i32::MAX - 1` and reads the sequences off the wire.
    #[test]
    fn batches_sequenced_at_i32_max_wrap_to_zero_on_the_wire() {
        use crate::protocol::record_batch::BatchHeader;
        let id = ProducerIdentity {
            producer_id: 7,
            epoch: 3,
            issue: 1,
        };
        let now = Instant::now();
        let mut p = Partition {
            bound: Some(id),
            next_seq: i32::MAX - 1,
            last_acked: Some((i32::MAX - 2, 41)),
            ..Default::default()
        };
        p.batches.push_back(ready_batch(1, now, &[1, 2, 3]));
        p.batches.push_back(ready_batch(2, now, &[4]));
        let ctx = ctx(now, Some(id));
        let header = |p: &Partition, i: usize| {
            BatchHeader::peek(p.batches[i].wire.as_deref().expect("sealed")).expect("header")
        };
        let first = p.next_to_send(&ctx).expect("first batch sent");
        let h = header(&p, first.index);
        assert_eq!(
            (
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                h.records_count
            ),
            (7, 3, i32::MAX - 1, 3)
        );
        // MAX - 1, MAX, 0: the next batch starts at 1.
        assert_eq!(p.next_seq, 1);
        let second = p.next_to_send(&ctx).expect("second batch sent");
        assert_eq!(header(&p, second.index).base_sequence, 1);
        assert_eq!(p.next_seq, 2);
        assert_eq!(p.batches[0].seq, Some((id, i32::MAX - 1)));
        assert_eq!(p.batches[1].seq, Some((id, 1)));
    }

    fn sequenced(
        id: ProducerIdentity,
        bid: u64,
        seq: i32,
        state: BatchState,
        now: Instant,
    ) -> Batch {
        let mut b = ready_batch(bid, now, &[bid]);
        b.builder = None;
        b.wire = Some(Bytes::from_static(b"batch"));
        b.seq = Some((id, seq));
        b.state = state;
        b
    }

    /// Model counterexample (a stuck partition): the retry behind the head was due before the
    /// head, and the earliest deadline, already past, hid the head's own deadline.
    #[test]
    fn the_head_retrys_backoff_is_the_deadline() {
        let id = ProducerIdentity {
            producer_id: 7,
            epoch: 0,
            issue: 1,
        };
        let now = Instant::now();
        let later = now + std::time::Duration::from_millis(5);
        let mut p = Partition {
            bound: Some(id),
            next_seq: 2,
            last_acked: Some((-1, -1)),
            ..Default::default()
        };
        p.batches
            .push_back(sequenced(id, 1, 0, BatchState::Retry { at: later }, now));
        p.batches
            .push_back(sequenced(id, 2, 1, BatchState::Retry { at: now }, now));
        let ds: Vec<Instant> = p.deadlines(std::time::Duration::ZERO).collect();
        assert_eq!(ds, vec![later], "the head's backoff, not the one behind it");
    }

    /// Model counterexample (a retry loop against a stale leader): after NOT_LEADER the
    /// partition sends nothing until fresh metadata names its leader.
    #[test]
    fn a_stale_leader_gets_nothing_until_metadata_arrives() {
        let id = ProducerIdentity {
            producer_id: 7,
            epoch: 0,
            issue: 1,
        };
        let now = Instant::now();
        let mut p = Partition {
            bound: Some(id),
            next_seq: 1,
            last_acked: Some((-1, -1)),
            stale_leader: true,
            ..Default::default()
        };
        p.batches
            .push_back(sequenced(id, 1, 0, BatchState::Retry { at: now }, now));
        let ctx = SendContext {
            batch_size: 1,
            ..ctx(now, Some(id))
        };
        assert_eq!(p.next_to_send(&ctx), None);
        p.stale_leader = false;
        assert_eq!(p.next_to_send(&ctx), Some(Pick { index: 0 }));
    }
}
