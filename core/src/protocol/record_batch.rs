//! RecordBatch v2 (magic 2): the on-disk and on-wire format of a producer batch.
//!
//! ```text
//! offset  field                 type   note
//!  0      baseOffset            i64    0 from a producer; the broker assigns offsets
//!  8      batchLength           i32    bytes after this field
//! 12      partitionLeaderEpoch  i32    -1 from a producer; not covered by the CRC
//! 16      magic                 i8     2
//! 17      crc                   u32    CRC-32C (Castagnoli) of bytes [21..end)
//! 21      attributes            i16    compression (bits 0-2), timestamp type (3), txn (4), control (5)
//! 23      lastOffsetDelta       i32    record count - 1
//! 27      baseTimestamp         i64
//! 35      maxTimestamp          i64
//! 43      producerId            i64
//! 51      producerEpoch         i16
//! 53      baseSequence          i32
//! 57      recordsCount          i32
//! 61      records...                   each: zigzag varint length, then the record body
//! ```
//!
//! [`RecordBatchBuilder`] appends records to one buffer as they arrive and writes the header
//! and the CRC in place when the batch is sealed, so a batch is encoded exactly once, without
//! a second copy. With compression ([`super::compression`]) the records section is compressed
//! once, at the seal, into the batch's final buffer; the header stays outside the compressed
//! part, so [`restamp`] works on compressed batches unchanged. References: apache/kafka
//! `DefaultRecordBatch.java`, `DefaultRecord.java`.

use bytes::{BufMut, Bytes, BytesMut};

use super::compression::{compress, decompress, Compression, CompressionType, RatioEstimate};
use super::primitives::{varint_len, varlong_len};
use super::{DecodeError, Reader, Writer};

/// Size of the batch header, up to and including `recordsCount`.
pub const HEADER_LEN: usize = 61;
/// Offset of the CRC field.
const CRC_OFFSET: usize = 17;
/// Offset of the first byte covered by the CRC (`attributes`).
const ATTRIBUTES_OFFSET: usize = 21;
/// Sentinel producer id of a non-idempotent batch.
pub const NO_PRODUCER_ID: i64 = -1;
/// Sentinel producer epoch of a non-idempotent batch.
pub const NO_PRODUCER_EPOCH: i16 = -1;
/// Sentinel sequence of a non-idempotent batch.
pub const NO_SEQUENCE: i32 = -1;
/// The most a compressed records section may expand to when a batch is decoded
/// ([`RecordBatch::decode`]); a builder with compression stops accepting records before its
/// uncompressed records reach it, but its first record may be larger (decode the producer's
/// own batches with [`RecordBatch::decode_own`]).
pub const MAX_DECOMPRESSED_LEN: usize = 64 << 20;

/// A record header.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Header {
    /// Header key (UTF-8, never null).
    pub key: String,
    /// Header value, nullable.
    pub value: Option<Bytes>,
}

/// A decoded record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Record {
    /// Record attributes (unused, 0).
    pub attributes: i8,
    /// Timestamp minus the batch's base timestamp.
    pub timestamp_delta: i64,
    /// Offset minus the batch's base offset.
    pub offset_delta: i32,
    /// Key, nullable.
    pub key: Option<Bytes>,
    /// Value, nullable.
    pub value: Option<Bytes>,
    /// Headers.
    pub headers: Vec<Header>,
}

/// A decoded batch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecordBatch {
    /// Offset of the first record.
    pub base_offset: i64,
    /// Leader epoch stamped by the broker (-1 from a producer).
    pub partition_leader_epoch: i32,
    /// Attributes.
    pub attributes: i16,
    /// Record count - 1.
    pub last_offset_delta: i32,
    /// Timestamp of the first record.
    pub base_timestamp: i64,
    /// Largest timestamp.
    pub max_timestamp: i64,
    /// Producer id, or -1.
    pub producer_id: i64,
    /// Producer epoch, or -1.
    pub producer_epoch: i16,
    /// Sequence of the first record, or -1.
    pub base_sequence: i32,
    /// The records.
    pub records: Vec<Record>,
}

/// The encoded size of one record body (without its own length prefix).
pub fn record_body_len(
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[Header],
) -> usize {
    body_len(
        timestamp_delta,
        offset_delta,
        record_payload_len(key, value, headers),
    )
}

/// The part of a record body that does not depend on its place in a batch: key, value and
/// headers with their lengths. [`record_body_len`] is this plus the attributes byte and the
/// two deltas, so a record measured once can be placed in any batch cheaply.
#[inline(always)]
pub fn record_payload_len(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header]) -> usize {
    fn blob(b: Option<&[u8]>) -> usize {
        match b {
            None => varint_len(-1),
            Some(b) => varint_len(b.len() as i32) + b.len(),
        }
    }
    let mut n = add(
        add(blob(key), blob(value)),
        varint_len(headers.len() as i32),
    );
    for h in headers {
        n = add(
            n,
            add(blob(Some(h.key.as_bytes())), blob(h.value.as_deref())),
        );
    }
    n
}

/// Lengths added: on targets whose `usize` headers sharing one large `Bytes` can pass (32
/// bits: 5,000 headers of one 1 MiB static), where a wrapped sum passed the size checks (a
/// review finding), held to `i32::MAX`, which every size check refuses and the small
/// additions after it (a length prefix, a batch header) cannot wrap; plain where the sum
/// would need more headers than memory holds (the encode path counts each instruction:
/// saturating there cost 0.7 % at 100 B).
#[inline(always)]
fn add(a: usize, b: usize) -> usize {
    if cfg!(target_pointer_width = "64") {
        a + b
    } else {
        a.saturating_add(b).min(i32::MAX as usize)
    }
}

/// A record body's length from its [`record_payload_len`] and its deltas.
#[inline(always)]
pub fn body_len(timestamp_delta: i64, offset_delta: i32, payload: usize) -> usize {
    add(
        1 + varlong_len(timestamp_delta) + varint_len(offset_delta),
        payload,
    )
}

/// Size that one record adds to a batch, length prefix included.
pub fn record_encoded_len(
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[Header],
) -> usize {
    let body = record_body_len(timestamp_delta, offset_delta, key, value, headers);
    varint_len(body as i32) + body
}

#[inline(always)]
fn put_blob(buf: &mut BytesMut, b: Option<&[u8]>) {
    match b {
        None => buf.put_varint(-1),
        Some(b) => {
            buf.put_varint(b.len() as i32);
            buf.put_slice(b);
        }
    }
}

/// Makes room for `additional` more bytes in `buf` by doubling its capacity as often as
/// needed (a `BytesMut` alone grows to the larger of twice its capacity and what is asked,
/// so one large record would put it off the ladder): a batch's buffer then holds exactly
/// its first room times a power of two, which is what the producer charges for it.
fn grow_doubling(buf: &mut BytesMut, additional: usize) {
    let need = buf.len().saturating_add(additional);
    if need <= buf.capacity() {
        return;
    }
    let cap = doubled_to(buf.capacity().max(1), need);
    buf.reserve(cap - buf.len());
}

/// `room` (more than 0) doubled until it holds `n`: the capacity a buffer or list of `room`
/// grows to by doubling as it fills to `n`.
pub(crate) fn doubled_to(mut room: usize, n: usize) -> usize {
    debug_assert!(room > 0, "a room of nothing never grows");
    while room < n {
        room = room.saturating_mul(2);
    }
    room
}

/// An empty buffer with room for `capacity` bytes, already in the shared representation of
/// `bytes`: the sealed batch it becomes is then cloned (the chunk on the wire and the copy kept
/// for retries) without allocating, and turns back into this buffer with
/// [`Bytes::try_into_mut`] once the clones are gone. (A plain `BytesMut::with_capacity` is
/// promoted, with an allocation, at its first clone, and demoted again by `try_into_mut`.)
pub fn shared_buffer(capacity: usize) -> BytesMut {
    let mut buf = BytesMut::with_capacity(capacity);
    drop(buf.split());
    buf
}

/// Builds one batch in a single buffer: records are appended as they arrive, and the header
/// and CRC are written by [`Self::seal`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecordBatchBuilder {
    buf: BytesMut,
    count: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    compression: Compression,
    ratio: RatioEstimate,
    /// The records compressed ahead of the seal, outside the producer ([`CompressionJob`]).
    /// Used by [`Self::seal`] only while it still matches the batch's records. Boxed: every
    /// batch is charged its size against `buffer.memory`, and few hold one.
    precompressed: Option<Box<Precompressed>>,
}

/// A [`CompressionJob`]'s result: a header's room then the compressed records, with the
/// count and the uncompressed size of the records it was made from (what
/// [`RecordBatchBuilder::set_precompressed`] and the seal check it against).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Precompressed {
    count: i32,
    raw_len: usize,
    out: BytesMut,
}

impl Precompressed {
    /// The size of the compressed records.
    pub fn compressed_len(&self) -> usize {
        self.out.len().saturating_sub(HEADER_LEN)
    }

    /// The uncompressed size of the records it was made from.
    pub fn raw_len(&self) -> usize {
        self.raw_len
    }

    /// Whether it was made from a batch of `count` records and `raw_len` bytes.
    fn matches(&self, count: i32, raw_len: usize) -> bool {
        self.count == count && self.raw_len == raw_len
    }
}

/// The records of a closed batch to compress away from the producer (so that whoever holds
/// the producer, the application's threads accepting records through a lock, need not wait
/// for the codec): [`RecordBatchBuilder::compression_job`] copies them out, [`Self::run`]
/// compresses them as the seal would, and [`RecordBatchBuilder::set_precompressed`] gives
/// the result back. Pure computation: no I/O, no clock.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CompressionJob {
    count: i32,
    compression: Compression,
    ratio: RatioEstimate,
    records: Bytes,
}

impl CompressionJob {
    /// Compresses the records exactly as [`RecordBatchBuilder::seal`] would have (the same
    /// codec, level and output buffer): a header's room then the compressed records, or
    /// `None` should the codec fail (the seal then sends the batch uncompressed, as it does
    /// when its own compression fails).
    pub fn run(&self) -> Option<Precompressed> {
        let out = compress_records(self.compression, self.ratio, &self.records)?;
        Some(Precompressed {
            count: self.count,
            raw_len: self.records.len(),
            out,
        })
    }

    /// The uncompressed size of the records to compress.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether there is nothing to compress.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

/// A header's room then `records` compressed with `compression`, in a buffer sized by the
/// topic's ratio estimate; `None` if the codec fails.
fn compress_records(
    compression: Compression,
    ratio: RatioEstimate,
    records: &[u8],
) -> Option<BytesMut> {
    let n = records.len();
    let mut out = BytesMut::with_capacity(HEADER_LEN + ratio.estimate(n).min(n) + 64);
    out.put_bytes(0, HEADER_LEN);
    compress(compression, records, &mut out).ok()?;
    Some(out)
}

impl RecordBatchBuilder {
    /// An empty batch with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        Self::with_buffer(shared_buffer(capacity.max(HEADER_LEN)))
    }

    /// An empty batch written into `buf` (cleared first): a buffer of an earlier batch,
    /// taken back from its sealed bytes with [`Bytes::try_into_mut`], so that a producer in
    /// steady state allocates no batch buffers.
    pub fn with_buffer(mut buf: BytesMut) -> Self {
        buf.clear();
        buf.put_bytes(0, HEADER_LEN);
        Self {
            buf,
            count: 0,
            base_timestamp: 0,
            max_timestamp: 0,
            compression: Compression::NONE,
            ratio: RatioEstimate::default(),
            precompressed: None,
        }
    }

    /// Compresses this batch with `compression` when it is sealed, and measures its fullness
    /// with the topic's compression `ratio` estimate (Kafka's `estimatedBytesWritten`).
    pub fn set_compression(&mut self, compression: Compression, ratio: RatioEstimate) {
        self.compression = compression;
        self.ratio = ratio;
    }

    /// The records so far, copied out to be compressed away from the producer; `None`
    /// without compression or records, or once they are compressed already.
    pub fn compression_job(&self) -> Option<CompressionJob> {
        if self.compression.is_none() || self.count == 0 || self.precompressed.is_some() {
            return None;
        }
        Some(CompressionJob {
            count: self.count,
            compression: self.compression,
            ratio: self.ratio,
            records: Bytes::copy_from_slice(&self.buf[HEADER_LEN..]),
        })
    }

    /// Takes the records compressed by a [`CompressionJob`] of this batch ([`CompressionJob::run`]'s
    /// answer) for the seal. Refused (`false`, nothing kept) unless the batch still holds as
    /// many records, and as many bytes of them, as the job copied out (a batch only grows
    /// while open, so that is the same records), compresses them, and has no result yet: a
    /// record appended since makes the seal compress them itself.
    pub fn set_precompressed(&mut self, done: Precompressed) -> bool {
        let fits = done.matches(self.count, self.records_len())
            && !self.compression.is_none()
            && done.out.len() >= HEADER_LEN
            && self.precompressed.is_none();
        if fits {
            self.precompressed = Some(Box::new(done));
        }
        fits
    }

    /// Whether the records were compressed ahead of the seal ([`Self::set_precompressed`]).
    pub fn is_precompressed(&self) -> bool {
        (self.precompressed.as_ref()).is_some_and(|p| p.matches(self.count, self.records_len()))
    }

    /// The compression applied at the seal.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// The uncompressed size of the records so far (without the header).
    pub fn records_len(&self) -> usize {
        self.buf.len() - HEADER_LEN
    }

    /// The size the batch is expected to have on the wire, as Kafka measures it against
    /// `batch.size`: exact without compression, else the header plus the uncompressed
    /// records times the topic's ratio estimate and a 5 % margin.
    #[inline(always)]
    pub fn estimated_size(&self) -> usize {
        if self.compression.is_none() {
            self.buf.len()
        } else {
            HEADER_LEN.saturating_add(self.ratio.estimate(self.records_len()))
        }
    }

    /// Whether a record adding `record_len` uncompressed bytes still fits under `limit`
    /// (Kafka's `hasRoomFor`: the new record counts uncompressed). An empty batch always has
    /// room. A compressed batch also stops before its records reach
    /// [`MAX_DECOMPRESSED_LEN`].
    #[inline(always)]
    pub fn has_room_for(&self, record_len: usize, limit: usize) -> bool {
        if self.count == 0 {
            return true;
        }
        if !self.compression.is_none()
            && self.records_len().saturating_add(record_len) > MAX_DECOMPRESSED_LEN
        {
            return false;
        }
        self.estimated_size().saturating_add(record_len) <= limit
    }

    /// Whether the batch has reached `limit` (Kafka's `isFull`).
    pub fn is_full(&self, limit: usize) -> bool {
        self.estimated_size() >= limit
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether no record was added.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The batch size so far, header included.
    pub fn size(&self) -> usize {
        self.buf.len()
    }

    /// The size `push` would add for this record.
    pub fn size_of(
        &self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
    ) -> usize {
        record_encoded_len(self.delta_of(timestamp), self.count, key, value, headers)
    }

    /// The timestamp delta `push` would write for a record stamped `timestamp`.
    fn delta_of(&self, timestamp: i64) -> i64 {
        let base = if self.count == 0 {
            timestamp
        } else {
            self.base_timestamp
        };
        timestamp.wrapping_sub(base)
    }

    /// The body length (without its own length prefix) `push` would write for this record:
    /// [`Self::size_of`] is this plus the prefix.
    pub fn body_len_of(
        &self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
    ) -> usize {
        record_body_len(self.delta_of(timestamp), self.count, key, value, headers)
    }

    /// [`Self::body_len_of`] for a record whose [`record_payload_len`] is known.
    #[inline(always)]
    pub fn body_len_with(&self, timestamp: i64, payload: usize) -> usize {
        body_len(self.delta_of(timestamp), self.count, payload)
    }

    /// Appends one record.
    pub fn push(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
    ) {
        let body = self.body_len_of(timestamp, key, value, headers);
        self.push_measured(timestamp, key, value, headers, body);
    }

    /// [`Self::push`] for a record whose body length was just measured with
    /// [`Self::body_len_of`] on this builder as it is now (so it is not measured twice).
    #[inline(always)]
    pub fn push_measured(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
        body: usize,
    ) {
        debug_assert_eq!(body, self.body_len_of(timestamp, key, value, headers));
        if self.count == 0 {
            self.base_timestamp = timestamp;
            self.max_timestamp = timestamp;
        }
        self.max_timestamp = self.max_timestamp.max(timestamp);
        let delta = timestamp.wrapping_sub(self.base_timestamp);
        let buf = &mut self.buf;
        grow_doubling(buf, varint_len(body as i32) + body);
        buf.put_varint(body as i32);
        buf.put_i8(0);
        buf.put_varlong(delta);
        buf.put_varint(self.count);
        put_blob(buf, key);
        put_blob(buf, value);
        buf.put_varint(headers.len() as i32);
        for h in headers {
            put_blob(buf, Some(h.key.as_bytes()));
            put_blob(buf, h.value.as_deref());
        }
        self.count += 1;
    }

    /// The records appended so far, decoded back, as an unsealed batch (no producer id,
    /// epoch or sequence; timestamps as [`RecordBatch::timestamp_of`] gives them). Takes the
    /// builder, so nothing is copied; for records that fail before their batch is sealed.
    pub fn into_batch(self) -> Result<RecordBatch, DecodeError> {
        let count = self.count;
        let mut r = Reader::new(self.buf.freeze().slice(HEADER_LEN..));
        let records = decode_records(&mut r, count)?;
        Ok(RecordBatch {
            base_offset: 0,
            partition_leader_epoch: -1,
            attributes: 0,
            last_offset_delta: count - 1,
            base_timestamp: self.base_timestamp,
            max_timestamp: self.max_timestamp,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            records,
        })
    }

    /// Writes the header for `(producer_id, producer_epoch, base_sequence)`, compresses the
    /// records if asked to, computes the CRC, and returns the finished batch. Should
    /// compression fail (it does not for valid levels), the batch goes out uncompressed.
    pub fn seal(self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Bytes {
        let Self {
            mut buf,
            count,
            base_timestamp,
            max_timestamp,
            compression,
            ratio,
            precompressed,
        } = self;
        let mut codec = CompressionType::None;
        if !compression.is_none() {
            // Compressed ahead (the same bytes this would write), unless records came since.
            let raw_len = buf.len() - HEADER_LEN;
            let ahead = (precompressed.filter(|p| p.matches(count, raw_len))).map(|p| p.out);
            // Records the codec does not make smaller (random or already compressed bytes,
            // which every codec's framing grows) go out as they are, as librdkafka sends
            // them: a batch never grows past its records' own size, so the size checks made
            // on the records hold for the batch (a record just under `i32::MAX` went out
            // with a wrapped length; a review finding).
            if let Some(out) = (ahead
                .or_else(|| compress_records(compression, ratio, &buf[HEADER_LEN..])))
            .filter(|out| out.len() < buf.len())
            {
                buf = out;
                codec = compression.codec;
            }
        }
        let batch_length = (buf.len() - 12) as i32;
        let mut h = &mut buf[..HEADER_LEN];
        h.put_i64(0);
        h.put_i32(batch_length);
        h.put_i32(-1);
        h.put_i8(2);
        h.put_u32(0);
        h.put_i16(codec.id());
        h.put_i32(count - 1);
        h.put_i64(base_timestamp);
        h.put_i64(max_timestamp);
        h.put_i64(producer_id);
        h.put_i16(producer_epoch);
        h.put_i32(base_sequence);
        h.put_i32(count);
        let crc = crc32c::crc32c(&buf[ATTRIBUTES_OFFSET..]);
        buf[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        buf.freeze()
    }
}

/// Returns a copy of a sealed batch re-stamped with a new producer id, epoch and base
/// sequence, with the CRC recomputed. Used only for a batch that is definitively not
/// persisted and must be re-sequenced (P3).
///
/// # Panics
///
/// If `batch` is shorter than a record batch's header (61 bytes): it must be a batch this
/// crate sealed.
pub fn restamp(batch: &[u8], producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Bytes {
    let mut buf = BytesMut::from(batch);
    let mut h = &mut buf[43..57];
    h.put_i64(producer_id);
    h.put_i16(producer_epoch);
    h.put_i32(base_sequence);
    let crc = crc32c::crc32c(&buf[ATTRIBUTES_OFFSET..]);
    buf[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    buf.freeze()
}

/// The fields of a batch header needed to track it, read without decoding records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchHeader {
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// Base sequence.
    pub base_sequence: i32,
    /// Number of records.
    pub records_count: i32,
    /// Record count - 1.
    pub last_offset_delta: i32,
}

impl BatchHeader {
    /// Reads the header fields of a batch (no CRC check).
    pub fn peek(batch: &[u8]) -> Result<Self, DecodeError> {
        if batch.len() < HEADER_LEN {
            return Err(DecodeError::Truncated);
        }
        let i64_at = |o: usize| i64::from_be_bytes(batch[o..o + 8].try_into().unwrap_or([0; 8]));
        let i32_at = |o: usize| i32::from_be_bytes(batch[o..o + 4].try_into().unwrap_or([0; 4]));
        Ok(Self {
            producer_id: i64_at(43),
            producer_epoch: i16::from_be_bytes([batch[51], batch[52]]),
            base_sequence: i32_at(53),
            records_count: i32_at(57),
            last_offset_delta: i32_at(23),
        })
    }
}

impl RecordBatch {
    /// Number of records.
    pub fn record_count(&self) -> usize {
        self.records.len()
    }

    /// Encodes the batch, computing its length and CRC. Record deltas are taken as stored. The
    /// records are compressed with the codec in `attributes` (at its default level); when that
    /// codec is not compiled in they are written uncompressed and the codec bits cleared.
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(256);
        buf.put_i64(self.base_offset);
        buf.put_i32(0);
        buf.put_i32(self.partition_leader_epoch);
        buf.put_i8(2);
        buf.put_u32(0);
        buf.put_i16(self.attributes);
        buf.put_i32(self.last_offset_delta);
        buf.put_i64(self.base_timestamp);
        buf.put_i64(self.max_timestamp);
        buf.put_i64(self.producer_id);
        buf.put_i16(self.producer_epoch);
        buf.put_i32(self.base_sequence);
        buf.put_i32(self.records.len() as i32);
        let codec = CompressionType::from_attributes(self.attributes).unwrap_or_default();
        if codec == CompressionType::None {
            self.encode_records(&mut buf);
        } else {
            let mut plain = BytesMut::with_capacity(256);
            self.encode_records(&mut plain);
            if compress(Compression::new(codec), &plain, &mut buf).is_err() {
                buf.put_slice(&plain);
                let plain_attributes = self.attributes & !0x07;
                buf[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2]
                    .copy_from_slice(&plain_attributes.to_be_bytes());
            }
        }
        let batch_length = (buf.len() - 12) as i32;
        buf[8..12].copy_from_slice(&batch_length.to_be_bytes());
        let crc = crc32c::crc32c(&buf[ATTRIBUTES_OFFSET..]);
        buf[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        buf.freeze()
    }

    fn encode_records(&self, buf: &mut BytesMut) {
        for r in &self.records {
            let body = record_body_len(
                r.timestamp_delta,
                r.offset_delta,
                r.key.as_deref(),
                r.value.as_deref(),
                &r.headers,
            );
            buf.put_varint(body as i32);
            buf.put_i8(r.attributes);
            buf.put_varlong(r.timestamp_delta);
            buf.put_varint(r.offset_delta);
            put_blob(buf, r.key.as_deref());
            put_blob(buf, r.value.as_deref());
            buf.put_varint(r.headers.len() as i32);
            for h in &r.headers {
                put_blob(buf, Some(h.key.as_bytes()));
                put_blob(buf, h.value.as_deref());
            }
        }
    }

    /// Decodes one batch and verifies its CRC. A compressed records section is decompressed
    /// (up to [`MAX_DECOMPRESSED_LEN`]) when its codec is compiled in, and refused otherwise.
    pub fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Self::decode_with_limit(r, MAX_DECOMPRESSED_LEN)
    }

    /// [`Self::decode`] with a compressed records section allowed to expand to `limit` bytes.
    pub fn decode_with_limit(r: &mut Reader, limit: usize) -> Result<Self, DecodeError> {
        let base_offset = r.i64()?;
        let batch_length = r.i32()?;
        if batch_length < (HEADER_LEN - 12) as i32 {
            return Err(DecodeError::InvalidLength(batch_length.into()));
        }
        let body = r.take(batch_length as usize)?;
        let mut b = Reader::new(body.clone());
        let partition_leader_epoch = b.i32()?;
        let magic = b.i8()?;
        if magic != 2 {
            return Err(DecodeError::UnsupportedMagic(magic));
        }
        let stored = b.u32()?;
        let computed = crc32c::crc32c(b.peek_rest());
        if stored != computed {
            return Err(DecodeError::CrcMismatch { stored, computed });
        }
        let attributes = b.i16()?;
        let codec = CompressionType::from_attributes(attributes)
            .ok_or(DecodeError::Invalid("unknown compression codec"))?;
        let last_offset_delta = b.i32()?;
        let base_timestamp = b.i64()?;
        let max_timestamp = b.i64()?;
        let producer_id = b.i64()?;
        let producer_epoch = b.i16()?;
        let base_sequence = b.i32()?;
        let count = b.i32()?;
        if count < 0 {
            return Err(DecodeError::InvalidLength(count.into()));
        }
        if codec != CompressionType::None {
            let records = decompress(codec, b.peek_rest(), limit)?;
            b = Reader::new(Bytes::from(records));
        }
        let records = decode_records(&mut b, count)?;
        Ok(Self {
            base_offset,
            partition_leader_epoch,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            records,
        })
    }

    /// Decodes every batch in a records blob (as found in a Produce or Fetch).
    pub fn decode_all(blob: Bytes) -> Result<Vec<Self>, DecodeError> {
        let mut r = Reader::new(blob);
        let mut out = Vec::new();
        while r.remaining() > 0 {
            out.push(Self::decode(&mut r)?);
        }
        Ok(out)
    }

    /// One batch this producer built and sealed (its `wire` bytes), decoded back, for the
    /// records of a failed batch or the halves of a split one. Its compressed records
    /// section may expand past [`MAX_DECOMPRESSED_LEN`]: the cap guards against a peer's
    /// input, and a batch opened by one record can hold a larger one (bounded by
    /// `max.request.size` when it was accepted).
    pub fn decode_own(blob: Bytes) -> Result<Self, DecodeError> {
        Self::decode_with_limit(&mut Reader::new(blob), usize::MAX)
    }

    /// The absolute create timestamp of record `r` of this batch.
    pub fn timestamp_of(&self, r: &Record) -> i64 {
        self.base_timestamp.wrapping_add(r.timestamp_delta)
    }
}

/// Decodes `count` records, the whole of `b` (an uncompressed records section).
fn decode_records(b: &mut Reader, count: i32) -> Result<Vec<Record>, DecodeError> {
    // Each record takes at least 7 bytes; reject counts that cannot fit before allocating.
    if count as usize > b.remaining() / 7 {
        return Err(DecodeError::Truncated);
    }
    let mut records = Vec::with_capacity((count as usize).min(b.remaining() / size_of::<Record>()));
    for _ in 0..count {
        let len = b.varint()?;
        if len < 0 {
            return Err(DecodeError::InvalidLength(len.into()));
        }
        let mut rec = Reader::new(b.take(len as usize)?);
        let attributes = rec.i8()?;
        let timestamp_delta = rec.varlong()?;
        let offset_delta = rec.varint()?;
        let key = varint_blob(&mut rec)?;
        let value = varint_blob(&mut rec)?;
        let n = rec.varint()?;
        if n < 0 || n as usize > rec.remaining() / 2 {
            return Err(DecodeError::InvalidLength(n.into()));
        }
        let mut headers =
            Vec::with_capacity((n as usize).min(rec.remaining() / size_of::<Header>()));
        for _ in 0..n {
            let key = varint_blob(&mut rec)?.ok_or(DecodeError::UnexpectedNull)?;
            let key = String::from_utf8(key.to_vec()).map_err(|_| DecodeError::InvalidUtf8)?;
            let value = varint_blob(&mut rec)?;
            headers.push(Header { key, value });
        }
        rec.expect_end()?;
        records.push(Record {
            attributes,
            timestamp_delta,
            offset_delta,
            key,
            value,
            headers,
        });
    }
    b.expect_end()?;
    Ok(records)
}

fn varint_blob(r: &mut Reader) -> Result<Option<Bytes>, DecodeError> {
    let len = r.varint()?;
    match len {
        -1 => Ok(None),
        n if n < -1 => Err(DecodeError::InvalidLength(n.into())),
        n => r.take(n as usize).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Review finding: `BytesMut` grows to the larger of twice its capacity and what is
    /// asked, so a record more than doubling a small buffer put it off the doubling ladder
    /// the producer charges (capacity 18,736 for a charge of 16,384 after one 110 B record
    /// and 1,000 B ones). Growth now stays on it whatever the record sizes.
    #[test]
    fn a_buffer_grows_by_doubling_its_first_room() {
        for (first, sizes) in [
            (256, vec![110, 1000, 1000, 1000, 5000, 20_000, 3]),
            (16 * 1024, vec![100; 400]),
            (1, vec![7, 70, 700]),
        ] {
            let mut buf = shared_buffer(first);
            for n in sizes {
                grow_doubling(&mut buf, n);
                buf.put_bytes(0, n);
                let mut ladder = first;
                while ladder < buf.len() {
                    ladder *= 2;
                }
                assert_eq!(buf.capacity(), ladder, "holding {} from {first}", buf.len());
            }
        }
    }

    #[test]
    fn crc32c_check_value() {
        // The standard check value of CRC-32C (Castagnoli) over "123456789".
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn builder_and_struct_encoders_agree_and_decode_back() {
        let headers = vec![Header {
            key: "h".into(),
            value: Some(Bytes::from_static(b"v")),
        }];
        let mut b = RecordBatchBuilder::with_capacity(0);
        b.push(1_000, Some(b"k1"), Some(b"v1"), &[]);
        b.push(1_005, None, None, &headers);
        b.push(999, Some(b""), Some(b"v3"), &[]);
        let sealed = b.seal(42, 3, 7);
        let decoded = RecordBatch::decode_all(sealed.clone()).unwrap();
        assert_eq!(decoded.len(), 1);
        let d = &decoded[0];
        assert_eq!(
            (d.producer_id, d.producer_epoch, d.base_sequence),
            (42, 3, 7)
        );
        assert_eq!(
            (d.base_timestamp, d.max_timestamp, d.last_offset_delta),
            (1_000, 1_005, 2)
        );
        assert_eq!(d.records[1].headers, headers);
        assert_eq!(d.records[1].value, None);
        assert_eq!(d.records[2].timestamp_delta, -1);
        assert_eq!(d.records[2].key.as_deref(), Some(&b""[..]));
        assert_eq!(
            d.encode(),
            sealed,
            "the struct encoder reproduces the builder's bytes"
        );
        let h = BatchHeader::peek(&sealed).unwrap();
        assert_eq!(
            (h.base_sequence, h.records_count, h.last_offset_delta),
            (7, 3, 2)
        );
    }

    #[test]
    fn an_unsealed_builder_decodes_back_to_its_records() {
        let headers = vec![Header {
            key: "h".into(),
            value: None,
        }];
        let mut b = RecordBatchBuilder::with_capacity(0);
        b.push(1_000, Some(b"k"), Some(b"v1"), &headers);
        b.push(990, None, None, &[]);
        let d = b.into_batch().unwrap();
        assert_eq!(d.records.len(), 2);
        assert_eq!(d.timestamp_of(&d.records[0]), 1_000);
        assert_eq!(d.timestamp_of(&d.records[1]), 990);
        assert_eq!(d.records[0].key.as_deref(), Some(&b"k"[..]));
        assert_eq!(d.records[0].value.as_deref(), Some(&b"v1"[..]));
        assert_eq!(d.records[0].headers, headers);
        assert_eq!(
            (d.records[1].key.clone(), d.records[1].value.clone()),
            (None, None)
        );
        assert!(RecordBatchBuilder::with_capacity(0)
            .into_batch()
            .unwrap()
            .records
            .is_empty());
    }

    #[test]
    fn restamp_changes_only_the_identity_and_crc() {
        let mut b = RecordBatchBuilder::with_capacity(0);
        b.push(5, None, Some(b"x"), &[]);
        let sealed = b.seal(1, 0, 10);
        let again = restamp(&sealed, 2, 1, 0);
        let d = &RecordBatch::decode_all(again).unwrap()[0];
        assert_eq!(
            (d.producer_id, d.producer_epoch, d.base_sequence),
            (2, 1, 0)
        );
    }

    /// A batch of every available codec: sealed compressed, decoded back intact, and re-stamped
    /// without touching the compressed bytes.
    #[test]
    fn compressed_batches_seal_decode_and_restamp() {
        let headers = vec![Header {
            key: "trace".into(),
            value: Some(Bytes::from_static(b"abc")),
        }];
        for codec in CompressionType::ALL {
            if !codec.is_available() {
                continue;
            }
            let mut b = RecordBatchBuilder::with_capacity(0);
            b.set_compression(Compression::new(codec), RatioEstimate::default());
            for i in 0..200i64 {
                let value = format!("value {i} {}", "x".repeat(50));
                b.push(1_000 + i, Some(b"key"), Some(value.as_bytes()), &headers);
            }
            let raw = b.records_len();
            let sealed = b.seal(42, 3, 7);
            let attributes = i16::from_be_bytes([sealed[21], sealed[22]]);
            assert_eq!(attributes, codec.id(), "{codec}");
            if codec != CompressionType::None {
                assert!(sealed.len() - HEADER_LEN < raw / 4, "{codec} compresses");
            }
            let d = &RecordBatch::decode_all(sealed.clone()).unwrap()[0];
            assert_eq!(d.records.len(), 200);
            assert_eq!(
                d.records[199].value.as_deref(),
                Some(format!("value 199 {}", "x".repeat(50)).as_bytes())
            );
            assert_eq!(d.records[5].headers, headers);
            assert_eq!(d.records[5].timestamp_delta, 5);
            assert_eq!((d.base_timestamp, d.max_timestamp), (1_000, 1_199));
            // The struct encoder compresses with the codec in the attributes too.
            let again = d.encode();
            assert_eq!(RecordBatch::decode_all(again).unwrap()[0], *d, "{codec}");
            // A rebase rewrites the identity and the CRC only.
            let stamped = restamp(&sealed, 9, 0, 0);
            assert_eq!(stamped[HEADER_LEN..], sealed[HEADER_LEN..], "{codec}");
            assert_eq!(stamped[..17], sealed[..17]);
            assert_eq!(stamped[21..43], sealed[21..43]);
            let s = &RecordBatch::decode_all(stamped).unwrap()[0];
            assert_eq!(
                (s.producer_id, s.producer_epoch, s.base_sequence),
                (9, 0, 0)
            );
            assert_eq!(s.records, d.records);
        }
    }

    /// Records no codec makes smaller go out uncompressed (a review finding): every codec's
    /// framing grows random bytes, and a batch grown past its records' own size could pass
    /// the size checks made on the records and not fit the wire's lengths.
    #[test]
    fn records_a_codec_would_grow_go_out_uncompressed() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let noise: Vec<u8> = (0..64 * 1024)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        for codec in CompressionType::ALL {
            if !codec.is_available() || codec == CompressionType::None {
                continue;
            }
            let mut b = RecordBatchBuilder::with_capacity(0);
            b.set_compression(Compression::new(codec), RatioEstimate::default());
            b.push(5, Some(b"k"), Some(&noise), &[]);
            let raw = b.records_len();
            let sealed = b.seal(42, 3, 7);
            assert_eq!(sealed.len(), HEADER_LEN + raw, "{codec}");
            let attributes = i16::from_be_bytes([sealed[21], sealed[22]]);
            assert_eq!(attributes, CompressionType::None.id(), "{codec}");
            let d = &RecordBatch::decode_all(sealed.clone()).unwrap()[0];
            assert_eq!(d.records[0].value.as_deref(), Some(&noise[..]), "{codec}");
        }
    }

    #[test]
    fn batch_size_is_measured_as_kafka_does() {
        let mut plain = RecordBatchBuilder::with_capacity(0);
        plain.push(0, None, Some(&[7; 100]), &[]);
        assert_eq!(
            plain.estimated_size(),
            plain.size(),
            "exact without compression"
        );
        let mut b = RecordBatchBuilder::with_capacity(0);
        b.set_compression(
            Compression::new(CompressionType::Gzip),
            RatioEstimate::from_permille(500),
        );
        assert!(
            b.has_room_for(1 << 30, 10),
            "an empty batch takes any record"
        );
        b.push(0, None, Some(&[7; 1000]), &[]);
        let raw = b.records_len();
        // header + raw × 0.5 × 1.05
        assert_eq!(b.estimated_size(), HEADER_LEN + raw * 500 * 105 / 100_000);
        // The new record counts uncompressed.
        assert!(b.has_room_for(100, b.estimated_size() + 100));
        assert!(!b.has_room_for(101, b.estimated_size() + 100));
        assert!(b.is_full(b.estimated_size()));
        assert!(!b.is_full(b.estimated_size() + 1));
        // A compressed batch never grows past what decode accepts.
        assert!(!b.has_room_for(MAX_DECOMPRESSED_LEN, usize::MAX));
    }

    #[test]
    fn an_unknown_codec_is_refused() {
        let mut b = RecordBatchBuilder::with_capacity(0);
        b.push(5, None, Some(b"hello"), &[]);
        let mut bytes = b.seal(1, 0, 0).to_vec();
        bytes[22] |= 0x05;
        let crc = crc32c::crc32c(&bytes[ATTRIBUTES_OFFSET..]);
        bytes[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(
            RecordBatch::decode_all(Bytes::from(bytes)),
            Err(DecodeError::Invalid("unknown compression codec"))
        );
    }

    #[test]
    fn a_flipped_bit_fails_the_crc() {
        let mut b = RecordBatchBuilder::with_capacity(0);
        b.push(5, None, Some(b"hello"), &[]);
        let mut bytes = b.seal(1, 0, 0).to_vec();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x01;
        assert!(matches!(
            RecordBatch::decode_all(Bytes::from(bytes)),
            Err(DecodeError::CrcMismatch { .. })
        ));
    }
}
