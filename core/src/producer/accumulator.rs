//! The record accumulator: what `send` accepts (topic name, partition, `max.request.size`,
//! `buffer.memory`), records waiting for their topic's metadata, partition choice (explicit,
//! the configured key hash, sticky per KIP-480 and KIP-794) and batching: a record joins its
//! partition's open batch while it has room under `batch.size`, measured compressed by the
//! topic's ratio estimate (which learns from each batch sealed); otherwise a new batch opens.
//! Sequences are not assigned here: a batch is sealed only at its first transmission (P1,
//! `partition.rs`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use super::pool::BatchPool;
use super::requests::{request_base, request_share};
use super::{is_valid_topic_name, Producer};
use crate::config::ProducerConfig;
use crate::partition::{Batch, BatchState, Partition, Reserve};
use crate::protocol::compression::{Compression, RatioEstimate};
use crate::protocol::primitives::varint_len;
use crate::protocol::record_batch::{
    body_len, doubled_to, record_payload_len, shared_buffer, RecordBatchBuilder, HEADER_LEN,
};
use crate::protocol::ErrorCode;
use crate::types::{DeliveryError, Record, RecordId, SendError};

/// What a record waiting for its topic's metadata is charged against `buffer.memory` beyond
/// its encoded size: its place in the topic's queue (the record's own allocations are its
/// encoded size, give or take).
const PENDING_CHARGE: usize = size_of::<PendingRecord>();

/// What an open batch is charged against `buffer.memory`: the memory it holds whatever it is
/// filled with (as Java's `BufferPool` charges `batch.size` per batch), so that a batch
/// holding one small record costs what it occupies. That is its struct, the room it was
/// reserved when it opened, and whatever its records outgrew that room by (a compressed
/// batch's raw records can pass `batch.size`, its ids the list's first size); and the
/// driver's `record_overhead` per record.
pub(super) fn batch_charge(b: &Batch, record_overhead: usize) -> usize {
    let bytes = match (&b.builder, &b.wire) {
        (Some(bb), _) => bb.size(),
        (None, Some(wire)) => wire.len(),
        (None, None) => 0,
    };
    b.reserve.charge_holding(bytes, b.records.len()) + b.records.len() * record_overhead
}

/// A batch just sealed into far less than the room it reserved (under a quarter: a partition
/// with little traffic among many, or a large `batch.size`) moves its bytes into a buffer of
/// their size, gives the big one to the pool for the next batch, and is charged from then on
/// for what it holds. Returns the charge given back. Before, every batch in flight stayed
/// charged its whole `batch.size` until its acknowledgement: 2,048 batches fill the default
/// 32 MiB, so with a thousand partitions the producer kept running out of `buffer.memory`
/// and flushing batches of one or two records (a load probe: 1.5 records per batch, 1,600
/// records/s against librdkafka's 170,000; librdkafka charges what is buffered). A batch at
/// least a quarter full keeps its charge, and its buffer unless that is more than twice the
/// charge (an idle buffer a hot partition took, a codec's output sized for the records):
/// nothing is copied on the busy path.
pub(super) fn fit_sealed(
    b: &mut Batch,
    raw: usize,
    cfg: &ProducerConfig,
    pool: &mut BatchPool,
) -> usize {
    debug_assert!(
        b.builder.is_none() && !b.reported,
        "a batch sealed just now"
    );
    let Some(wire) = b.wire.take() else {
        return 0;
    };
    // The charge is fitted when the batch holds under a quarter of the room it is charged
    // (its reserve, doubled as its `raw` records and header grew it): a function of the batch
    // and the configuration, so equal batches are charged alike.
    let len = wire.len();
    let charged = grown_room(b.reserve.bytes, HEADER_LEN + raw);
    let fit = len.saturating_mul(4) <= charged;
    // The memory: the bytes move into a buffer of their size when the one they are in is
    // more than twice what the batch is charged from now on. That is an uncompressed batch
    // fitted; a hot partition's batch that took an idle buffer up to twice `batch.size` and
    // was sealed early, by its linger or a flush (it held that buffer in flight charged as
    // its reserve, past `buffer.memory` with a large `batch.size`); and a codec's output
    // sized for the records, not for the result (zstd's bound, snappy's reserve), which
    // held a compressed batch's raw size charged as its compressed bytes (review findings).
    let (wire, capacity) = match wire.try_into_mut() {
        Ok(buf) => {
            let capacity = buf.capacity();
            (buf.freeze(), capacity)
        }
        Err(wire) => (wire, len),
    };
    let wire = b.wire.insert(wire);
    let keeps = if fit { len } else { charged };
    if capacity > keeps.saturating_mul(2) {
        let mut fitted = shared_buffer(len);
        fitted.extend_from_slice(wire);
        if let Some(big) = b.wire.replace(fitted.freeze()) {
            pool.put_wire(big, pooled_capacities(cfg));
        }
    }
    if !fit {
        return 0;
    }
    b.records.shrink_to_fit();
    b.reserve = Reserve {
        bytes: 0,
        ids: b.records.len(),
    };
    let charge = batch_charge(b, cfg.record_overhead);
    debug_assert!(charge <= b.size, "a fitted batch is charged less");
    let freed = b.size.saturating_sub(charge);
    b.size = charge;
    freed
}

/// The buffer capacities the pool keeps: from what every new batch reserves (smaller ones
/// could serve none) to twice what a batch fills and its header.
pub(super) fn pooled_capacities(cfg: &ProducerConfig) -> std::ops::RangeInclusive<usize> {
    let max = (cfg.batch_fill())
        .saturating_mul(2)
        .saturating_add(HEADER_LEN);
    first_room(cfg)..=max
}

/// The ids a record list reserved for `reserved` holds room for with `n` in it: it doubles
/// when full, as a `Vec` grows.
fn ids_room(reserved: usize, n: usize) -> usize {
    grown_room(reserved.max(1), n)
}

/// The room a buffer reserved for `reserved` has once it holds `n`: it doubles when full (as
/// a `Vec` and a `BytesMut` grow), so a batch that grew past its first room is charged the
/// buffer it holds, not only the bytes in it (up to twice as many). A buffer reserved for
/// nothing (a batch [`fit_sealed`] into one of its size) holds `n`.
fn grown_room(reserved: usize, n: usize) -> usize {
    if reserved == 0 {
        return n;
    }
    doubled_to(reserved, n)
}

/// A new batch's buffer is at most this large (Kafka's default `batch.size`) when it opens,
/// and grows as records come, doubling, up to `batch.size`, charged its buffer as it grows.
/// With a larger `batch.size` every open batch used to be charged (and to hold) the whole
/// of it: 64 partitions of 1 MiB batches filled the default 32 MiB `buffer.memory` with
/// open batches alone, and the producer flushed one-record batches for room (a load probe:
/// 11,000 records/s against librdkafka's 1.19 million; Java's `BufferPool` has the same
/// cliff). Up to 16 KiB nothing changes.
pub(super) const FIRST_ROOM: usize = 16 * 1024;

/// The smallest room a new batch reserves.
pub(super) fn first_room(cfg: &ProducerConfig) -> usize {
    cfg.batch_fill().min(FIRST_ROOM)
}

/// The room reserved for a new batch whose first record takes `size` bytes: a buffer of
/// `batch.size` up to [`FIRST_ROOM`] (or the record, if larger), and an id list sized for
/// records like it (up to
/// 256 ids, 2 KiB: a list grows past that only in a batch that fills with more records).
pub(super) fn reserve_for(cfg: &ProducerConfig, size: usize) -> Reserve {
    let bytes = (HEADER_LEN + size).max(first_room(cfg));
    Reserve {
        bytes,
        ids: (bytes / size.max(1)).clamp(1, 256),
    }
}

/// The room reserved for a new batch whose first record takes `size` bytes when
/// `buffer.memory` is more than a quarter charged ([`Producer::new_batch_reserve`]): the first
/// room halved while the record and the batch header still fit, four ids. The batch grows from
/// there as records come, doubling (back to the first room, then on up to `batch.size`),
/// charged its buffer as it grows. With every open batch reserving [`first_room`] whatever
/// it held, 10,000 partitions with a record each wanted 160 MiB: a producer with many
/// partitions took 1,882 records (188 KB of values) into the default 32 MiB and refused
/// the rest, during a broker outage or whenever its batches stayed open (Java's
/// `BufferPool` has the same limit, 2,048 batches; librdkafka charges what is buffered).
fn tight_reserve(cfg: &ProducerConfig, size: usize) -> Reserve {
    let need = HEADER_LEN + size;
    let mut bytes = first_room(cfg).max(need);
    while bytes / 2 >= need {
        bytes /= 2;
    }
    // Four ids: the least a `Vec` of them grows to.
    Reserve { bytes, ids: 4 }
}

/// The bytes a record of `payload` ([`record_payload_len`]) adds to a batch as its first
/// record (both deltas 0), length prefix included.
pub(super) fn encoded_len(payload: usize) -> usize {
    let body = body_len(0, 0, payload);
    varint_len(body as i32) + body
}

impl Reserve {
    /// What a batch with this room is charged while it holds `bytes` and `records`.
    fn charge_holding(&self, bytes: usize, records: usize) -> usize {
        size_of::<Batch>()
            + grown_room(self.bytes, bytes)
            + ids_room(self.ids, records) * size_of::<RecordId>()
    }

    /// What a new batch with this room is charged.
    pub(super) fn charge(&self) -> usize {
        self.charge_holding(0, 0)
    }
}

/// Where a record goes: see [`Producer::place`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Placement {
    part: i32,
    /// Its body length in the partition's open batch, if it fits there.
    body: Option<usize>,
    /// What appending it adds to `buffered_bytes`: what it grows the open batch's charge by,
    /// or a new batch's room.
    charge: usize,
    /// The room a new batch for it reserves (unused when it fits the open batch).
    reserve: Reserve,
    /// When the record was accepted (by `send`, even if it then waited for metadata): its
    /// delivery timeout runs from then, so a batch it opens is created then.
    since: Instant,
    /// The partition the sticky partition moves to before the record goes there (the sticky
    /// partition's open batch had no room for it).
    sticky_to: Option<i32>,
}

/// Partition `p`'s open batch, its builder, and the body length of a record of `payload`
/// ([`record_payload_len`]) in it, if it has room for the record (Kafka's `hasRoomFor`) and
/// a record accepted at `since` may still join it (`Batch::joinable_until`).
#[inline(always)]
fn open_room(
    p: &Partition,
    timestamp: i64,
    payload: usize,
    batch_size: usize,
    since: Instant,
) -> Option<(&Batch, &RecordBatchBuilder, usize)> {
    let b = (p.batches.back()).filter(|b| {
        b.state == BatchState::Open && b.joinable_until.is_none_or(|until| since < until)
    })?;
    let bb = b.builder.as_ref()?;
    let len = bb.body_len_with(timestamp, payload);
    bb.has_room_for(varint_len(len as i32) + len, batch_size)
        .then_some((b, bb, len))
}

/// Whether `record` goes to a partition that fills its batches: a keyless record under a
/// sticky partitioner (which moves on only as batches fill), or a partition whose newest
/// batch has no room for a record of `size` (open or closed full, by size or by
/// `batch.num.messages`) or left at least half full. A batch flushed with room, or none at
/// all, says the partition is quiet.
fn fills_batches(
    cfg: &ProducerConfig,
    record: &Record,
    partition: Option<&Partition>,
    size: usize,
) -> bool {
    if record.partition.is_none() && cfg.partitioner.is_sticky(record.key.as_deref()) {
        return true;
    }
    let Some(b) = partition.and_then(|p| p.batches.back()) else {
        return false;
    };
    match (&b.builder, &b.wire) {
        (Some(bb), _) => {
            !bb.has_room_for(size, cfg.batch_fill())
                || cfg
                    .max_batch_records
                    .is_some_and(|max| b.records.len() >= max)
        }
        (None, Some(wire)) => wire.len().saturating_mul(2) >= cfg.batch_fill(),
        (None, None) => false,
    }
}

/// A record's [`record_payload_len`].
#[inline(always)]
fn payload_of(r: &Record) -> usize {
    record_payload_len(r.key.as_deref(), r.value.as_deref(), &r.headers)
}

/// A record waiting for its topic's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct PendingRecord {
    pub(super) id: RecordId,
    pub(super) record: Record,
    pub(super) size: usize,
    pub(super) enqueued: Instant,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Topic {
    pub(super) name: Arc<str>,
    pub(super) partitions: Vec<Partition>,
    /// How many partitions the topic has now: `partitions.len()`, unless the topic was
    /// created again (a new topic id) with fewer, whose old partitions beyond the count stay
    /// in `partitions` (an answer about them may still arrive) but take no record.
    pub(super) count: usize,
    pub(super) pending: VecDeque<PendingRecord>,
    /// The sum of `pending`'s charges.
    pub(super) pending_bytes: usize,
    pub(super) sticky: i32,
    /// Bytes of keyless records appended to the sticky partition since it was chosen: it
    /// moves on once they reach `batch.size` even when batches leave before they fill
    /// (`linger.ms` 0, low traffic), as Java's built-in partitioner does (KIP-794).
    pub(super) sticky_bytes: usize,
    /// Metadata says the topic does not exist: the code, while it keeps saying so.
    pub(super) missing: Option<ErrorCode>,
    /// Since when answers have kept saying the topic is missing (any code).
    pub(super) missing_since: Option<Instant>,
    /// An answer to a batch's first attempt carried a log append time: the topic keeps
    /// `message.timestamp.type=LogAppendTime` ([`Producer::log_append_time_of`]).
    pub(super) stamps_appends: bool,
    /// The compression of this topic's batches, and Kafka's estimate of its ratio.
    pub(super) compression: Compression,
    pub(super) ratio: RatioEstimate,
    /// The topic's id from metadata (v10+), all zeros while unknown: a new id means the topic
    /// was deleted and created again under its name.
    pub(super) id: [u8; 16],
    /// The ids of earlier topics of this name: an answer naming one comes from a broker
    /// that has not yet learned of the new topic, and is stale.
    pub(super) retired: Vec<[u8; 16]>,
    /// Since when every answer about the topic has named one of `retired` (none its current
    /// id): the order in which ids were learned may be wrong (topic ids carry no order, and a
    /// lagging broker's answer may be the newer one to arrive), so a retired id that every
    /// answer keeps naming for `retry.backoff.max.ms` is taken back.
    pub(super) retired_named: Option<Instant>,
    /// Without topic ids: an answer said the topic is gone (UNKNOWN_TOPIC_OR_PARTITION), and
    /// no answer since confirmed its partitions' leader epochs; lower ones may be a topic
    /// created again (epochs from 0) and are believed once answers keep reporting them, from
    /// `lower_epochs_since`, for `retry.backoff.max.ms`.
    pub(super) gone_without_id: bool,
    pub(super) lower_epochs_since: Option<Instant>,
    /// Since when every answer has listed fewer partitions than `count` under the topic's
    /// id (or without ids): Kafka never takes partitions away, so that is a broker that has
    /// not yet learned of partitions added, unless answers keep saying it for
    /// `retry.backoff.max.ms` (then an earlier answer that listed more was wrong).
    pub(super) fewer_since: Option<Instant>,
    /// Since when the partitions beyond `count` have belonged to a deleted topic (the topic
    /// was created again, a new id, with fewer): once answers have kept naming the new id for
    /// `retry.backoff.max.ms`, their batches fail (topic ids carry no order, so one answer
    /// from a broker that lags could name the old topic's id as if new). `None`: they wait for
    /// a leader or their delivery timeout (answers kept listing fewer under the same id).
    pub(super) beyond_gone_since: Option<Instant>,
    /// A record was sent to the topic (or it held records) since the last idle sweep.
    pub(super) used: bool,
    /// Left out of metadata requests: unused for a whole `metadata.max.idle.ms` period.
    pub(super) idle: bool,
    /// Back from idleness by [`Producer::want_topic`] (no record brought it back): what was
    /// known of it then is not used until an answer describes it again, so its records wait
    /// for that answer as a record that brings a topic back does.
    pub(super) stale: bool,
}

/// How many partitions with a leader a moving sticky partition weighs (the next ones after
/// it): [`Topic::next_sticky_from`].
pub(super) const STICKY_CANDIDATES: usize = 8;

impl Topic {
    /// A topic just named: no partitions known yet, no sticky partition chosen, in use.
    fn new(name: Arc<str>, compression: Compression) -> Self {
        Topic {
            name,
            partitions: Vec::new(),
            count: 0,
            pending: VecDeque::new(),
            pending_bytes: 0,
            sticky: -1,
            sticky_bytes: 0,
            missing: None,
            missing_since: None,
            stamps_appends: false,
            compression,
            ratio: RatioEstimate::default(),
            id: [0; 16],
            retired: Vec::new(),
            retired_named: None,
            gone_without_id: false,
            lower_epochs_since: None,
            fewer_since: None,
            beyond_gone_since: None,
            used: true,
            idle: false,
            stale: false,
        }
    }

    /// The partition count, while what is known of the topic may be used: it has
    /// partitions, and it is neither idle nor back from idleness without a fresh answer.
    pub(super) fn usable_count(&self) -> Option<usize> {
        (self.count > 0 && !self.idle && !self.stale).then_some(self.count)
    }

    /// Moves the sticky partition on to the next partition with a known leader (any next
    /// one if none has one): records without a key or partition are not placed where
    /// nothing can send them while another partition could (as Java and librdkafka choose
    /// among available partitions).
    pub(super) fn move_sticky(&mut self, adaptive: bool) {
        self.sticky_bytes = 0;
        if self.count > 0 && self.sticky >= 0 {
            self.sticky = self.next_sticky_from(self.sticky, adaptive);
        }
    }

    /// The partition a sticky partition at `from` moves to: with `adaptive`
    /// ([`crate::ProducerConfig::adaptive_partitioning`]), of the next
    /// [`STICKY_CANDIDATES`] partitions with a leader, the one holding the fewest batches
    /// (queued, in flight or waiting to be retried), the nearest on a tie; the next one if
    /// none has a leader. Keyless records so keep away from a partition whose broker is slow
    /// or unreachable (black-holed, killed and not yet replaced), where its batches pile up,
    /// instead of giving it its turn of every round (Java's adaptive partitioning, KIP-794,
    /// weighs every partition by its queue; kprod looks at a bounded window so that a move
    /// costs the same at 10,000 partitions; a review finding). With even loads it is the next
    /// partition with a leader, as without `adaptive`.
    pub(super) fn next_sticky_from(&self, from: i32, adaptive: bool) -> i32 {
        let n = self.count;
        if n == 0 {
            return from;
        }
        let from = from.rem_euclid(n as i32) as usize;
        let leads = |i: usize| self.partitions.get(i).filter(|p| p.leader.is_some());
        // Never `from` itself while another has a leader: staying would leave the record
        // that did not fit opening a batch there, and the move after it a batch of one
        // behind (a review finding).
        let next = (1..n)
            .map(|k| (from + k) % n)
            .filter_map(|i| leads(i).map(|p| (p.batches.len(), i)))
            .take(if adaptive { STICKY_CANDIDATES } else { 1 })
            .min_by_key(|&(held, _)| held)
            .map(|(_, i)| i)
            .or_else(|| leads(from).map(|_| from))
            .unwrap_or((from + 1) % n);
        next as i32
    }

    /// The first sticky partition (the topic's first keyless record): spread, so that every
    /// producer does not begin at partition 0 (a review finding: short-lived producers
    /// sending less than a batch each all wrote to it, and producers started together moved
    /// round in lockstep; Java and librdkafka pick at random). No randomness in the core:
    /// `salt` is a hash of the name and the time since the producer was made. A partition
    /// with a leader if there is one.
    fn first_sticky(&self, salt: u64) -> i32 {
        let n = self.count.max(1);
        let at = (salt % n as u64) as i32;
        let leads = |i: i32| {
            self.partitions
                .get(i as usize)
                .is_some_and(|p| p.leader.is_some())
        };
        if leads(at) || !(0..n as i32).any(leads) {
            at
        } else {
            self.next_sticky_from(at, false)
        }
    }

    /// After a metadata answer: a sticky partition left without a leader gives way to one
    /// with a leader.
    pub(super) fn sticky_to_a_leader(&mut self, adaptive: bool) {
        let n = self.count;
        if n == 0 {
            return;
        }
        if self.sticky < 0 {
            return; // not chosen yet: the first keyless record chooses one with a leader
        }
        let at = self.sticky.rem_euclid(n as i32) as usize;
        let leaderless = self.partitions.get(at).is_none_or(|p| p.leader.is_none());
        if leaderless && self.partitions[..n].iter().any(|p| p.leader.is_some()) {
            self.move_sticky(adaptive);
        }
    }

    /// Whether a record of this topic is still in the producer: waiting for metadata or in a
    /// partition's batches (queued, in flight or awaiting a retry).
    pub(super) fn holds_records(&self) -> bool {
        !self.pending.is_empty() || self.partitions.iter().any(|p| !p.batches.is_empty())
    }

    /// Whether a metadata answer has described the topic (listed its partitions): until
    /// then a request for it alone may be partial. Partitions are never taken away, so this
    /// stays true once it is.
    pub(super) fn described(&self) -> bool {
        !self.partitions.is_empty()
    }
}

/// The id and uncompressed record bytes of partition `p`'s first unsealed batch: if the
/// batch picked for a request is this one, it was sealed (and compressed) just now.
pub(super) fn first_unsealed(p: &Partition) -> Option<(u64, usize, bool)> {
    p.batches.iter().find_map(|b| {
        (b.builder.as_ref()).map(|bb| (b.id, bb.records_len(), bb.is_precompressed()))
    })
}

/// Batch fullness under compression: a batch sealed just now (`unsealed` held its id, raw
/// size and whether it was compressed ahead, before the pick) tells the topic's compression
/// ratio estimate how well it compressed (Kafka's estimate, used to decide when a compressed
/// batch is full). One compressed ahead told it already, when its compressed records came
/// back ([`Producer::take_compressed`]).
pub(super) fn observe_compression(
    compression: Compression,
    ratio: &mut RatioEstimate,
    unsealed: Option<(u64, usize, bool)>,
    picked: u64,
    wire: &Bytes,
) {
    if !compression.is_none() {
        if let Some((_, raw, _)) = unsealed.filter(|u| u.0 == picked && !u.2) {
            ratio.observe(wire.len() - HEADER_LEN, raw);
        }
    }
}

/// Why a record is refused whatever room the buffer has ([`Producer::refusal`]).
enum Refusal {
    InvalidTopic,
    InvalidPartition(Option<usize>),
    InvalidTimestamp,
    TooLarge(usize),
}

impl Refusal {
    /// The error, the record handed back in it.
    fn with(self, record: Record) -> SendError {
        match self {
            Self::InvalidTopic => SendError::InvalidTopic(record),
            Self::InvalidPartition(partitions) => {
                SendError::InvalidPartition { record, partitions }
            }
            Self::InvalidTimestamp => SendError::InvalidTimestamp(record),
            Self::TooLarge(max_request_size) => SendError::TooLarge {
                record,
                max_request_size,
            },
        }
    }
}

impl Producer {
    /// The checks of [`Self::send`] that do not depend on the room in `buffer.memory` (after,
    /// as `send`, [`SendError::Closed`] once the producer closed or failed): a valid topic name, a partition that is not negative and
    /// not beyond the topic's known count, a timestamp that is not negative, a record that
    /// fits `max.request.size`. `Ok` hands the record back, to be sent; `Err` is the error
    /// `send` would give, the record in it. A driver that queues records while the buffer
    /// is full refuses a bad one at once with it, instead of letting it wait for room it
    /// does not need (and then report it `QueueFull`). A partition beyond the count asks
    /// for fresh metadata, as `send` does.
    #[allow(clippy::result_large_err)]
    pub fn precheck(&mut self, now: Instant, record: Record) -> Result<Record, SendError> {
        self.advance(now);
        // As `send`: a closed or failed producer says so first.
        if self.fatal.is_some() || self.closing {
            return Err(SendError::Closed(record));
        }
        let known = self.known_topic(&record.topic);
        let size = encoded_len(payload_of(&record)) + 10;
        match self.refusal(&record, known, size) {
            Err(refusal) => Err(refusal.with(record)),
            Ok(_) => Ok(record),
        }
    }

    /// Why `record` (of encoded `size`, its topic at `known` if registered) is refused
    /// whatever the buffer's room, if it is; else its topic's index if its records can be
    /// placed now (described, nothing waiting for metadata before it). (Inlined: `accept`'s
    /// per-record path.)
    #[inline(always)]
    fn refusal(
        &mut self,
        record: &Record,
        known: Option<usize>,
        size: usize,
    ) -> Result<Option<usize>, Refusal> {
        if known.is_none() && !is_valid_topic_name(&record.topic) {
            return Err(Refusal::InvalidTopic);
        }
        if record.partition.is_some_and(|p| p < 0) {
            return Err(Refusal::InvalidPartition(None));
        }
        if record.timestamp < 0 {
            return Err(Refusal::InvalidTimestamp);
        }
        // Java's rule: the record's batch, holding it alone, within `max.request.size`. Such
        // a batch goes alone in a request, larger by the request's own framing, which must
        // still fit a frame's length field.
        if size + HEADER_LEN > self.cfg.max_request_size
            || request_base(&self.cfg) + request_share(size + HEADER_LEN, &record.topic)
                > i32::MAX as usize
        {
            return Err(Refusal::TooLarge(self.cfg.max_request_size));
        }
        // A record that waits for metadata (a topic back from idleness, or one whose records
        // already wait) has its partition checked once the answer arrives: an explicit
        // partition beyond the count then fails, and one the topic gained meanwhile is taken.
        // Checked before the room in the buffer, so that a full buffer does not report a
        // wrong partition as `QueueFull` (a review finding: an application retrying on it
        // retried, flushing every lingering batch each time, until memory freed).
        let Some(ti) = known else {
            return Ok(None);
        };
        let t = &self.topics[ti];
        let n = t.count as i32;
        let placeable = t.usable_count().is_some() && t.pending.is_empty();
        if placeable && n > 0 && record.partition.is_some_and(|p| p >= n) {
            // Refused at once rather than held (Java blocks `send` up to `max.block.ms`), so
            // that a wrong partition never holds up the topic's other records; but the topic
            // may just have grown, so metadata is asked for (at most once per backoff) and a
            // new partition is taken once the answer names it.
            let last = self.metadata.last_refresh;
            if last.is_none_or(|t| t + self.cfg.retry_backoff <= self.now) {
                self.need_metadata(Some(ti));
                self.wakes.0 += 1;
            }
            return Err(Refusal::InvalidPartition(Some(self.topics[ti].count)));
        }
        Ok(placeable.then_some(ti))
    }

    /// The rules of [`Producer::send`] once the producer takes records: a valid topic name and
    /// partition, a record that fits a request (`max.request.size`) and the buffer
    /// (`buffer.memory`). An accepted record goes straight into its partition's batch, or
    /// waits for its topic's metadata (and behind the records already waiting).
    // The error hands the whole record back on purpose (rskafka's `TryPush::NoCapacity`).
    #[allow(clippy::result_large_err)]
    pub(super) fn accept(&mut self, now: Instant, record: Record) -> Result<RecordId, SendError> {
        // A registered topic's name was checked when it was registered.
        let known = self.known_topic(&record.topic);
        // Measured once: `append` places the record in a batch from this.
        let payload = payload_of(&record);
        let size = encoded_len(payload) + 10;
        let placeable = match self.refusal(&record, known, size) {
            Ok(placeable) => placeable,
            Err(refusal) => return Err(refusal.with(record)),
        };
        // The records waiting for topics the cluster has said for a while do not exist (or
        // refuses) hold at most a quarter of `buffer.memory` ([`Self::said_missing`]): past
        // that, the oldest waiting for this record's topic fail now (in send order, as they
        // would at `max.block.ms`), or, if the topic's own cannot make the room, they and
        // this record do. Else they filled the buffer for `max.block.ms` and held up every
        // other topic's records behind them (a review finding: an application writing to a
        // misspelt or deleted topic stalled all its topics; the Java client takes no memory
        // for a record waiting for its topic, its `send` blocking the caller instead).
        // Whatever is needed is granted while nothing is held so. Nothing fails for a record
        // that is then refused anyway (the count limit, or a buffer full of other records).
        if let (None, Some(ti)) = (placeable, known) {
            if let Some(code) = self.said_missing(ti) {
                let need = size + PENDING_CHARGE + self.cfg.record_overhead;
                let budget = self.cfg.buffer_memory / 4;
                let over = |held: usize| held > 0 && held.saturating_add(need) > budget;
                let held = self.held_for_missing_topics();
                let (mut evict, mut freed) = (0, 0);
                for p in &self.topics[ti].pending {
                    if !over(held - freed) {
                        break;
                    }
                    evict += 1;
                    freed += p.size;
                }
                let fail_now = over(held - freed);
                let taken = fail_now
                    || !self.records_full(self.pending_records - evict)
                        && !self.memory_full(self.buffered_bytes - freed, need);
                if taken {
                    for _ in 0..evict {
                        let p = self.pop_pending(ti).expect("counted above");
                        self.resolve_pending(p, DeliveryError::UnknownTopic(code));
                        self.wakes.0 += 1;
                    }
                }
                if fail_now {
                    // Asked about again (the backoff paces it), as for a record that waits:
                    // a topic created meanwhile stops failing at the next answer.
                    self.need_metadata(Some(ti));
                    return Ok(self.fail_at_once(ti, record, DeliveryError::UnknownTopic(code)));
                }
            }
        }
        // librdkafka's count limit (`queue.buffering.max.messages`), refused as a full
        // `buffer.memory` is (below).
        if self.records_full(self.pending_records) {
            self.flush_for_memory();
            return Err(SendError::QueueFull(record));
        }
        // Room in `buffer.memory`: a record that fits within its partition's open batch's
        // room is covered by that batch's charge (else it needs what it grows the charge by);
        // one that opens a batch needs the batch's whole room (as Java allocates `batch.size`
        // from its pool); one that waits for metadata needs its own size. Whatever is needed
        // is granted when nothing else is held, so that a small `buffer.memory` still moves.
        // Each record also needs the driver's `record_overhead`.
        // A topic left idle (`metadata.max.idle.ms`) is not placed by what was known when it
        // went idle: its record waits for the fresh answer its return asks for (below), as a
        // new topic's does.
        let placed = placeable.map(|ti| self.place(ti, &record, payload, now));
        let need = placed.map_or(size + PENDING_CHARGE + self.cfg.record_overhead, |p| {
            p.charge
        });
        if self.memory_full(self.buffered_bytes, need) {
            self.flush_for_memory();
            return Err(SendError::QueueFull(record));
        }
        let ti = match known {
            Some(ti) => ti,
            None => self.topic_index_for(&record.topic, || record.topic.to_shared()),
        };
        // Back from idleness, its records wait for the fresh answer (`placed` is None above).
        self.mark_used(ti);
        let id = RecordId(self.next_record);
        self.next_record += 1;
        self.stats.0.records_accepted += 1;
        self.pending_records += 1;
        self.dirty = true;
        if let Some(placed) = placed {
            self.append(ti, id, record, 0, payload, placed);
        } else {
            // Only the first record waiting for the topic brings a deadline (its delivery
            // timeout or `max.block.ms`; a later one's come after it), and only a request
            // for metadata not yet wanted gives the drain work: a driver woken for every
            // record waiting behind others did a drain each for nothing (a review of wasted
            // work: up to a wake-up per record while a cluster is unreachable).
            let mut wake = self.topics[ti].pending.is_empty();
            self.buffered_bytes += need;
            // A topic last seen missing is not asked about while nothing waits for it: this
            // record waits, so ask (the backoff still paces the requests).
            if self.topics[ti].missing.is_some() {
                wake |= !self.metadata.needed;
                self.need_metadata(Some(ti));
            }
            if wake {
                self.wakes.0 += 1;
            }
            self.push_pending(
                ti,
                PendingRecord {
                    id,
                    record,
                    size: need,
                    enqueued: now,
                },
            );
        }
        Ok(id)
    }

    /// Whether `records` held reach librdkafka's count limit (`queue.buffering.max.messages`).
    fn records_full(&self, records: usize) -> bool {
        (self.cfg.max_buffered_records).is_some_and(|max| records >= max)
    }

    /// Whether `buffer.memory`, `held` of it charged, has no room for `need` more (whatever
    /// is needed is granted when nothing is held).
    fn memory_full(&self, held: usize, need: usize) -> bool {
        need > 0
            && held > 0
            && held
                .saturating_add(self.external_bytes)
                .saturating_add(need)
                > self.cfg.buffer_memory
    }

    /// What the last metadata answer said of topic `ti` if it said that the topic does not
    /// exist, or that this producer may not use it (not a topic being created, which
    /// answers LEADER_NOT_AVAILABLE while the cluster makes it), and answers have said it is
    /// missing for a quarter of `max.block.ms` (15 s by default): a topic an operator creates
    /// moments after the application starts, or one a lagging broker does not know yet,
    /// fails none of its records (a review of the day's changes: a backlog sent before the
    /// topic appeared lost its oldest records).
    fn said_missing(&self, ti: usize) -> Option<ErrorCode> {
        let t = &self.topics[ti];
        let grace = self.cfg.max_block / 4;
        let long = (t.missing_since)
            .is_some_and(|since| since.checked_add(grace).is_some_and(|t| t <= self.now));
        t.missing.filter(|code| {
            long && (*code == ErrorCode::UnknownTopicOrPartition || code.refuses_the_topic())
        })
    }

    /// What the records waiting for topics said missing ([`Self::said_missing`]) hold of
    /// `buffer.memory`.
    fn held_for_missing_topics(&self) -> usize {
        (self.awaiting.iter())
            .filter(|&&ti| self.said_missing(ti).is_some())
            .map(|&ti| self.topics[ti].pending_bytes)
            .sum()
    }

    /// Accepts `record` for topic `ti` and fails it at once with `error`, not persisted,
    /// charging nothing.
    fn fail_at_once(&mut self, ti: usize, record: Record, error: DeliveryError) -> RecordId {
        self.mark_used(ti);
        let id = RecordId(self.next_record);
        self.next_record += 1;
        self.stats.0.records_accepted += 1;
        self.wakes.0 += 1;
        self.emit_not_persisted(id, record, error);
        id
    }

    /// Topic `ti` is in use (a record, or the application asking about it) for this
    /// `metadata.max.idle.ms` period. One left idle is named in metadata requests again and
    /// asked about now. Without topic ids (before Metadata v10) its leader epochs are
    /// forgotten too: a topic deleted and created again meanwhile starts them over, and the
    /// old ones would make every answer look stale. (With ids, a new id resets them, and the
    /// old ones still guard against a lagging broker.)
    #[inline(always)]
    fn mark_used(&mut self, ti: usize) {
        let topic = &mut self.topics[ti];
        if topic.used {
            return;
        }
        topic.used = true;
        if std::mem::take(&mut topic.idle) {
            if topic.id == [0; 16] {
                for p in &mut topic.partitions {
                    p.leader_epoch = -1;
                }
            }
            self.want_fresh_metadata();
            self.wakes.0 += 1;
        }
    }

    /// [`Producer::want_topic`] once the producer takes work.
    pub(super) fn want_topic_inner(&mut self, topic: &str) -> bool {
        let ti = match self.topic_index.get(topic).copied() {
            Some(ti) => ti,
            None if is_valid_topic_name(topic) => self.topic_index_for(topic, || topic.into()),
            None => return false,
        };
        let idle = self.topics[ti].idle;
        self.mark_used(ti);
        let t = &mut self.topics[ti];
        t.stale |= idle;
        // Said missing, and asked again only while a record waits for it: asked again, no
        // sooner than the backoff after the last answer.
        if t.missing.is_some() && !self.metadata.in_flight && !self.metadata.needed {
            self.need_metadata(Some(ti));
            let next = self
                .metadata
                .last_refresh
                .map(|t| t + self.cfg.retry_backoff);
            if next.is_some_and(|n| n > self.now) {
                self.metadata.retry_at = next;
            }
            self.wakes.0 += 1;
        }
        true
    }

    /// `buffer.memory` is full and a record waits for room: what is buffered goes out now
    /// rather than after `linger.ms` (as Java's accumulator sends every batch while its pool
    /// has waiters), so that acknowledgements free the room. Without this a sender refused
    /// for memory waited a whole `linger.ms` per refusal, and a `flush` or `close` queued
    /// behind it as long. Only records accepted before the refusal are sent early: later
    /// batches linger as usual unless memory runs out again.
    fn flush_for_memory(&mut self) {
        let last = self.next_record.checked_sub(1).map(RecordId);
        if last.is_some() && self.flush_upto < last {
            self.flush_accepted();
            self.wakes.0 += 1;
        }
    }

    /// The index of topic `name` if it is registered. Records mostly come in runs of one
    /// topic: the last one found is compared first (one string comparison instead of a walk
    /// down `topic_index`).
    fn known_topic(&mut self, name: &str) -> Option<usize> {
        let last = self.last_topic.0;
        // Clones of the name the producer registered the topic with point where its copy
        // does: equal without comparing the text.
        if (self.topics.get(last)).is_some_and(|t| std::ptr::eq(&*t.name, name) || *t.name == *name)
        {
            return Some(last);
        }
        let ti = self.topic_index.get(name).copied()?;
        self.last_topic.0 = ti;
        Some(ti)
    }

    /// The index of topic `name`, registering it (and asking for metadata) on first use
    /// with the copy `shared` gives (the first record's own, if shared).
    fn topic_index_for(&mut self, name: &str, shared: impl FnOnce() -> Arc<str>) -> usize {
        match self.topic_index.get(name) {
            Some(&ti) => ti,
            None => {
                let shared = shared();
                debug_assert_eq!(*shared, *name);
                let compression = self.cfg.compression_for(name);
                self.topics.push(Topic::new(shared.clone(), compression));
                self.topic_index.insert(shared, self.topics.len() - 1);
                self.want_metadata_for_new_topic();
                self.wakes.0 += 1;
                self.topics.len() - 1
            }
        }
    }

    /// Where `record` (of `payload`, [`record_payload_len`]) goes in topic `ti`, which has
    /// partitions: its partition, its body length in that partition's open batch if it
    /// fits there, and what appending it would charge (a partition out of range has no open
    /// batch: `append` fails the record, charging nothing).
    ///
    /// A record accepted at `since` does not join an open batch created half its
    /// `delivery.timeout.ms` or more before (`Batch::joinable_until`): the batch times out
    /// as a whole, from its creation (Java's rule), so a batch left open while its partition
    /// cannot send (an outage, a full in-flight window) would otherwise fail records accepted
    /// moments before. Each record keeps at least half its delivery timeout.
    #[inline(always)]
    fn place(&self, ti: usize, record: &Record, payload: usize, since: Instant) -> Placement {
        let mut part = self.choose_partition(ti, record);
        let t = &self.topics[ti];
        let mut partition = t.partitions.get(part as usize);
        let fill = self.cfg.batch_fill();
        let mut open = partition.and_then(|p| open_room(p, record.timestamp, payload, fill, since));
        // A keyless record that does not fit the sticky partition's open batch moves the
        // sticky partition on first and goes there (KIP-480's abort on a new batch), instead
        // of opening a batch of its own on the partition it leaves: every full batch was
        // followed by a one-record batch there, about twice the batches (a review finding).
        let mut sticky_to = None;
        if open.is_none()
            && record.partition.is_none()
            && self.cfg.partitioner.is_sticky(record.key.as_deref())
            && partition.is_some_and(|p| {
                p.batches
                    .back()
                    .is_some_and(|b| b.state == BatchState::Open)
            })
        {
            let next = t.next_sticky_from(part, self.cfg.adaptive_partitioning);
            if next != part {
                sticky_to = Some(next);
                part = next;
                partition = t.partitions.get(part as usize);
                open = partition.and_then(|p| open_room(p, record.timestamp, payload, fill, since));
            }
        }
        match open {
            // Into the open batch: only what it grows the batch's charge by, nothing while
            // the batch stays within its room.
            Some((b, bb, body)) => {
                let (r, bytes, n) = (b.reserve, bb.size(), b.records.len());
                let len = varint_len(body as i32) + body;
                let grown = if bytes + len <= r.bytes && n < r.ids {
                    0
                } else {
                    r.charge_holding(bytes + len, n + 1) - r.charge_holding(bytes, n)
                };
                let charge = grown + self.cfg.record_overhead;
                Placement {
                    part,
                    body: Some(body),
                    charge,
                    reserve: r,
                    since,
                    sticky_to,
                }
            }
            None => {
                let reserve = self.new_batch_reserve(record, partition, encoded_len(payload));
                Placement {
                    part,
                    body: None,
                    charge: reserve.charge() + self.cfg.record_overhead,
                    reserve,
                    since,
                    sticky_to,
                }
            }
        }
    }

    /// The room a new batch for `record`, whose first record takes `size` bytes, reserves in
    /// `partition`: [`reserve_for`] while that leaves `buffer.memory` at most a quarter
    /// charged (or nothing is held), or when the partition fills its batches
    /// ([`fills_batches`]: a busy partition keeps opening them whole, without regrowing
    /// them); else only the record's ([`tight_reserve`]), so that under memory pressure the
    /// open batches of partitions with little traffic are charged (and hold) about what they
    /// are filled with, and many partitions can each hold a few records.
    fn new_batch_reserve(
        &self,
        record: &Record,
        partition: Option<&Partition>,
        size: usize,
    ) -> Reserve {
        let room = reserve_for(&self.cfg, size);
        let held = self.buffered_bytes;
        // With a driver's per-record overhead, a room is reserved whole only if `buffer.memory`
        // also holds the overhead of the records that would fill it: granted when nothing
        // was held, a room that alone filled it (`buffer.memory` no larger than `batch.size`)
        // left no room for the next record's overhead, and kprod-tokio sent one record a
        // round trip (a review finding). Without an overhead, records within the room need
        // nothing, and the whole room fills (see `a_small_buffer_memory_still_fills_batches`).
        let overhead = (self.cfg.record_overhead).saturating_mul(room.ids);
        let fits = self.cfg.record_overhead == 0
            || room.charge().saturating_add(overhead) <= self.cfg.buffer_memory;
        if fits
            && (held == 0
                || held + room.charge() <= self.cfg.buffer_memory / 4
                || fills_batches(&self.cfg, record, partition, size))
        {
            room
        } else {
            tight_reserve(&self.cfg, size)
        }
    }

    /// Topic `ti`'s sticky partition, chosen now if no keyless record chose it yet (chosen
    /// lazily, so that producers given only explicit partitions, the model's, hold no
    /// time-derived value).
    fn sticky_of(&self, ti: usize) -> i32 {
        let t = &self.topics[ti];
        if t.sticky >= 0 {
            return t.sticky;
        }
        let elapsed = self.now.saturating_duration_since(self.born).as_nanos() as u64;
        let named = u64::from(crate::partitioner::fnv1a(t.name.as_bytes()));
        t.first_sticky(super::mix(elapsed ^ named))
    }

    pub(super) fn choose_partition(&self, ti: usize, record: &Record) -> i32 {
        let t = &self.topics[ti];
        let n = t.count as i32;
        match (&record.partition, &record.key) {
            (Some(p), _) => *p,
            (None, key) => (self.cfg.partitioner)
                .partition_for(key.as_deref(), n)
                .unwrap_or_else(|| self.sticky_of(ti) % n),
        }
    }

    /// Appends a record to its partition's open batch, opening a new batch when the open one
    /// is full. The sticky partition moves on when a new batch is opened for it after its
    /// open batch filled (KIP-480), or after `batch.size` bytes in batches that left unfilled
    /// (KIP-794), to a partition with a leader.
    /// `charged` is what the record was charged against `buffer.memory` while it waited for
    /// metadata (0 if it did not): released, as the batch's charge replaces it.
    /// `payload` is the record's [`record_payload_len`].
    pub(super) fn append(
        &mut self,
        ti: usize,
        id: RecordId,
        record: Record,
        charged: usize,
        payload: usize,
        placed: Placement,
    ) {
        let n = self.topics[ti].count as i32;
        let part = placed.part;
        if part >= n {
            self.wakes.0 += 1;
            self.buffered_bytes -= charged;
            self.pending_records -= 1;
            let error = DeliveryError::UnknownPartition { count: n as usize };
            self.emit_not_persisted(id, record, error);
            return;
        }
        if let Some(to) = placed.sticky_to {
            // The sticky partition's open batch, which had no room for the record, is done.
            let from = self.sticky_of(ti).rem_euclid(n.max(1));
            let t = &mut self.topics[ti];
            t.sticky = to;
            t.sticky_bytes = 0;
            let closed = (t.partitions.get_mut(from as usize))
                .and_then(|p| p.batches.back_mut())
                .filter(|b| b.state == BatchState::Open)
                .map(|b| {
                    b.state = BatchState::Ready;
                    b.id
                });
            if let Some(id) = closed {
                self.wakes.0 += 1;
                self.sync(ti, from as usize);
                self.compress_later(ti, from as usize, id);
            }
        }
        let keyless =
            record.partition.is_none() && self.cfg.partitioner.is_sticky(record.key.as_deref());
        if keyless && self.topics[ti].sticky < 0 {
            // The first keyless record: the sticky partition is the one it was placed on.
            self.topics[ti].sticky = part;
        }
        let batch_size = self.cfg.batch_size;
        let since = placed.since;
        let next_batch = &mut self.next_batch;
        let t = &mut self.topics[ti];
        let p = &mut t.partitions[part as usize];
        let (key, value) = (record.key.as_deref(), record.value.as_deref());
        // The record's body length in the open batch, measured once for the room check and
        // the append.
        let body = placed.body;
        let fits = body.is_some();
        if keyless {
            t.sticky_bytes += payload;
        }
        let mut move_sticky = false;
        let mut closed = None;
        if !fits {
            // A partition that fills its batches may take an idle buffer larger than its
            // reserve (a batch that starts small and grows, `batch.size` above the first
            // room): it grows into it, its charge with it. Any other takes one of about its
            // reserve only: a quiet partition's batch would hold a large buffer charged as a
            // small one, and `buffer.memory` would not bound the heap (a review finding).
            let hot = fills_batches(&self.cfg, &record, Some(&*p), encoded_len(payload));
            let had_open = if let Some(b) = p.batches.back_mut() {
                let open = b.state == BatchState::Open;
                if open {
                    b.state = BatchState::Ready;
                    closed = Some(b.id);
                }
                open
            } else {
                false
            };
            let reserve = placed.reserve;
            // An acknowledged batch's buffer if one is idle (no allocation); the record list
            // is new (the last one left with its batch's `Delivered` event). A tight room
            // takes none (they are all larger than it, and it would hold more than charged).
            let most = if hot {
                usize::MAX
            } else {
                reserve.bytes.saturating_add(reserve.bytes / 4)
            };
            let buf = (reserve.bytes >= first_room(&self.cfg))
                .then(|| self.batch_pool.0.buffer(reserve.bytes, most))
                .flatten();
            let buf = buf.unwrap_or_else(|| shared_buffer(reserve.bytes));
            let list = Vec::with_capacity(reserve.ids);
            // A record that waited for metadata opens a batch as old as itself: its delivery
            // timeout counts from its acceptance.
            let joinable = self.cfg.delivery_timeout / 2;
            let mut batch = Batch::with_buffers(*next_batch, since, joinable, buf, list);
            batch.reserve = reserve;
            if let Some(bb) = batch.builder.as_mut() {
                bb.set_compression(t.compression, t.ratio);
            }
            p.batches.push_back(batch);
            *next_batch += 1;
            // The sticky partition moves on when its open batch filled, or once it took
            // `batch.size` bytes in batches that left before filling.
            move_sticky = keyless && (had_open || t.sticky_bytes >= batch_size);
        }
        // The records the batch may hold: `batch.num.messages` (`max_batch_records`), and near
        // the wrap the sequence numbers left before it (idempotence only: without it the wire
        // carries no sequence).
        let mut most_records = self.record_limit;
        if p.next_seq >= self.wrap_watch_from && self.cfg.enable_idempotence {
            most_records = most_records.min(p.sequences_before_wrap(self.cfg.max_sequence));
        }
        let b = p.batches.back_mut().expect("just ensured");
        // No record is older than its batch (so its delivery timeout is not stretched):
        // records go into batches in the order they were accepted (those waiting for
        // metadata are routed in order, and any record accepted meanwhile waits behind
        // them), and a batch is created when its first record was accepted.
        debug_assert!(since >= b.created, "a record older than its batch");
        let builder = b.builder.as_mut().expect("open batch has a builder");
        let body = match body {
            Some(body) => body,
            None => builder.body_len_with(record.timestamp, payload),
        };
        builder.push_measured(record.timestamp, key, value, &record.headers, body);
        b.records.push(id);
        let full = builder.is_full(self.cfg.batch_fill()) || b.records.len() >= most_records;
        // A new batch is charged its room; a record adds only what it outgrew it by.
        b.size += placed.charge;
        debug_assert_eq!(
            b.size,
            batch_charge(b, self.cfg.record_overhead),
            "the charge `place` foresaw"
        );
        self.buffered_bytes = self.buffered_bytes + placed.charge - charged;
        if full {
            b.state = BatchState::Ready;
        }
        let full = full.then_some(b.id);
        if move_sticky {
            self.topics[ti].move_sticky(self.cfg.adaptive_partitioning);
        }
        // Only a new batch or a full one changes what the index holds for the partition.
        if full.is_some() || !fits {
            self.wakes.0 += 1;
            self.sync(ti, part as usize);
            if self.compress_ahead.is_some() {
                for id in closed.into_iter().chain(full) {
                    self.compress_later(ti, part as usize, id);
                }
            }
        }
    }

    /// Batch `id` of partition `(ti, pi)` was just closed for records: with compression
    /// ahead on ([`Producer::set_compress_ahead`]) and a codec for its topic, it is one for
    /// [`Producer::poll_compression`].
    fn compress_later(&mut self, ti: usize, pi: usize, id: u64) {
        if let Some(ahead) = self.compress_ahead.as_mut() {
            if !self.topics[ti].compression.is_none() {
                ahead.push((ti, pi, id));
            }
        }
    }

    /// Debug builds, after every drain (so in every unit test and every model state): what
    /// `buffer.memory` holds is exactly the charges of the records waiting for metadata and
    /// of the batches, and the topics listed as awaiting metadata are those holding such
    /// records.
    #[cfg(debug_assertions)]
    pub(super) fn check_accounting(&self) {
        let held: usize = (self.topics.iter())
            .map(|t| {
                t.pending.iter().map(|p| p.size).sum::<usize>()
                    + (t.partitions.iter())
                        .flat_map(|p| p.batches.iter())
                        .map(|b| b.size)
                        .sum::<usize>()
                    + (t.partitions.iter())
                        .flat_map(|p| p.held.iter())
                        .map(|(_, charge)| charge)
                        .sum::<usize>()
            })
            .sum();
        assert_eq!(self.buffered_bytes, held, "buffer.memory accounting");
        for t in &self.topics {
            let pending: usize = t.pending.iter().map(|p| p.size).sum();
            assert_eq!(t.pending_bytes, pending, "records waiting for metadata");
        }
        let awaiting = (self.topics.iter().enumerate())
            .filter(|(_, t)| !t.pending.is_empty())
            .map(|(ti, _)| ti);
        assert!(
            awaiting.eq(self.awaiting.iter().copied()),
            "topics awaiting metadata"
        );
    }

    /// A record waits for its topic's metadata.
    fn push_pending(&mut self, ti: usize, p: PendingRecord) {
        self.topics[ti].pending_bytes += p.size;
        self.topics[ti].pending.push_back(p);
        self.awaiting.insert(ti);
    }

    /// The first record waiting for the metadata of topic `ti`, taken out.
    pub(super) fn pop_pending(&mut self, ti: usize) -> Option<PendingRecord> {
        let t = &mut self.topics[ti];
        let pending = &mut t.pending;
        let p = pending.pop_front();
        if let Some(p) = &p {
            t.pending_bytes -= p.size;
        }
        if pending.is_empty() {
            self.awaiting.remove(&ti);
            // Room for a burst sent before the topic's metadata came (a million records at
            // start-up) is given back once they are placed (a review finding).
            if pending.capacity() > 64 {
                pending.shrink_to_fit();
            }
        }
        p
    }

    pub(super) fn route_pending(&mut self, ti: usize) {
        if self.topics[ti].count == 0 {
            return;
        }
        while let Some(p) = self.pop_pending(ti) {
            let payload = payload_of(&p.record);
            let placed = self.place(ti, &p.record, payload, p.enqueued);
            self.append(ti, p.id, p.record, p.size, payload, placed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A topic of `held.len()` partitions, each led by node 1 and holding `held[i]` batches.
    fn topic(held: &[usize]) -> Topic {
        let now = Instant::now();
        let partitions = (held.iter())
            .map(|&n| {
                let mut p = Partition {
                    leader: Some(1),
                    ..Partition::default()
                };
                p.batches = (0..n).map(|i| Batch::new(i as u64, now, 64, 1)).collect();
                p
            })
            .collect::<Vec<_>>();
        Topic {
            count: partitions.len(),
            partitions,
            sticky: 0,
            ..Topic::new("t".into(), Compression::NONE)
        }
    }

    /// A batch sealed early in a buffer far larger than the room it was charged (a hot
    /// partition's batch takes any idle buffer up to twice `batch.size`) moves into one of
    /// its size, and the large one goes back to the pool (a review finding: it was measured
    /// against its charged room only, and held in flight charged as a small batch). Its
    /// charge does not depend on the buffer it got.
    #[test]
    fn a_batch_sealed_early_in_a_large_buffer_moves_out_of_it() {
        let cfg = ProducerConfig {
            batch_size: 1 << 20,
            ..ProducerConfig::default()
        };
        let mut b = Batch::new(0, Instant::now(), 64, 1);
        b.builder = None;
        b.reserve = reserve_for(&cfg, 100);
        let raw = 10_000;
        let mut big = bytes::BytesMut::with_capacity(2 << 20);
        big.resize(HEADER_LEN + raw, 0);
        b.wire = Some(big.freeze());
        b.size = b.reserve.charge();
        let mut pool = BatchPool::default();
        let freed = fit_sealed(&mut b, raw, &cfg, &mut pool);
        let wire = b.wire.take().unwrap();
        assert_eq!(wire.len(), HEADER_LEN + raw);
        let held = wire.try_into_mut().unwrap().capacity();
        assert!(held < 2 * (HEADER_LEN + raw), "still holds {held} B");
        assert_eq!(
            freed, 0,
            "charged as its room, which it fills past a quarter"
        );
        assert_eq!(b.size, b.reserve.charge());

        // A compressed batch of 500 bytes in its codec's buffer sized for 10,000 raw bytes
        // (zstd's bound): fitted, and moved out of it.
        let mut b = Batch::new(1, Instant::now(), 64, 1);
        b.builder = None;
        b.reserve = reserve_for(&cfg, 100);
        let mut out = bytes::BytesMut::with_capacity(HEADER_LEN + raw + 64);
        out.resize(HEADER_LEN + 500, 0);
        out[22] = 4;
        b.wire = Some(out.freeze());
        b.size = b.reserve.charge();
        assert!(
            fit_sealed(&mut b, raw, &cfg, &mut pool) > 0,
            "charged what it holds"
        );
        let held = b.wire.take().unwrap().try_into_mut().unwrap().capacity();
        assert!(held < 2 * (HEADER_LEN + 500), "still holds {held} B");
        assert!(
            pool.buffer(1 << 20, usize::MAX).is_some(),
            "the large buffer is back in the pool"
        );
    }

    /// The least loaded of the next partitions with a leader, the nearest on a tie; never the
    /// partition it moves from while another has a leader (a review finding: with eight
    /// partitions or fewer it could stay, and a keyless record that did not fit opened a
    /// batch there, left behind with one record when the sticky partition moved after it).
    #[test]
    fn a_moving_sticky_partition_takes_the_least_loaded_other() {
        assert_eq!(topic(&[0, 3, 1, 2]).next_sticky_from(0, true), 2);
        assert_eq!(
            topic(&[0, 2, 2, 2]).next_sticky_from(0, true),
            1,
            "nearest on a tie"
        );
        assert_eq!(topic(&[1, 2, 2]).next_sticky_from(0, true), 1, "not itself");
        assert_eq!(topic(&[1, 2, 2]).next_sticky_from(0, false), 1);
        assert_eq!(
            topic(&[0, 3, 1, 2]).next_sticky_from(0, false),
            1,
            "plain next"
        );
        // Only the next eight are weighed: the ninth, idle, is not seen from 0.
        let t = topic(&[5, 4, 4, 4, 4, 4, 4, 4, 4, 0]);
        assert_eq!(t.next_sticky_from(0, true), 1);
        assert_eq!(t.next_sticky_from(1, true), 9);
        // Alone with a leader: it stays.
        let mut t = topic(&[1, 0, 0]);
        t.partitions[1].leader = None;
        t.partitions[2].leader = None;
        assert_eq!(t.next_sticky_from(0, true), 0);
        assert_eq!(t.next_sticky_from(1, true), 0);
    }
}
