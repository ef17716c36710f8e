//! Seeded randomized robustness test for the hand-written Kafka codec.
//!
//! Every decoder is fed valid encodings (built with our own encoders at every supported
//! version), mutations of them (truncation, bit flips, byte replacement, mangled i16/i32/varint
//! length fields, insertions, deletions, splices) and purely random buffers. Properties:
//!
//! - nothing panics (a panic fails the test);
//! - a valid encoding decodes, and re-encoding it gives back the very same bytes;
//! - whatever decodes successfully re-encodes to bytes that decode to the same value;
//! - nothing allocates a huge buffer: at most `64 * N + 4096` bytes in one block for an
//!   `N`-byte input (see "Measuring allocations" below);
//! - out-of-range versions are refused with `UnsupportedVersion`.
//!
//! Reproduce a run with `KPROD_FUZZ_SEED=<seed>`; scale the number of cases with
//! `KPROD_FUZZ_SCALE=<factor>` (default 1, which runs well over 100,000 cases).
//!
//! # Measuring allocations
//!
//! A counting `#[global_allocator]` needs `unsafe impl GlobalAlloc`, and the workspace sets
//! `unsafe_code = "forbid"`, which cargo passes as `-F unsafe-code`: a `#![allow(unsafe_code)]`
//! in this file is then a hard error (E0453), so the lint cannot be relaxed for this test
//! alone. Allocations are measured soundly without it, in three ways:
//!
//! 1. every successfully decoded value is walked and its largest heap block (a `Vec`'s
//!    capacity times its element size, a `String`'s capacity) is checked against the bound;
//! 2. the `FrameDecoder`'s buffer belongs to the caller, so its capacity is checked after
//!    every call, on the error paths as well;
//! 3. failed decodes free what they allocated, so the error paths are measured at scale
//!    instead, by the separate `alloc_probe` test: hostile 4 MiB inputs whose length fields
//!    claim as many elements as there are bytes are decoded in a fresh child process, which reports
//!    how far its peak virtual size (`VmPeak` in `/proc/self/status`) rose during the decode.
//!    Blocks this large are above the allocator's `mmap` threshold (glibc: 128 KiB, at most
//!    32 MiB), so each raises the virtual size in full, and the rise bounds the largest block
//!    from above. The child runs with a single malloc arena, so that a new thread arena's
//!    64 MiB reservation adds no noise. Linux only.

use std::fmt::Debug;
use std::mem::size_of;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use kprod_core::protocol::api_versions::{ApiVersion, ApiVersionsRequest, ApiVersionsResponse};
use kprod_core::protocol::frame::DEFAULT_MAX_FRAME_SIZE;
use kprod_core::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use kprod_core::protocol::metadata::{
    MetadataBroker, MetadataPartition, MetadataRequest, MetadataRequestTopic, MetadataResponse,
    MetadataTopic,
};
use kprod_core::protocol::produce::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceData,
    PartitionProduceResponse, ProduceRequest, ProduceResponse, TopicProduceData,
    TopicProduceResponse,
};
use kprod_core::protocol::record_batch::{
    BatchHeader, Header, Record, RecordBatch, RecordBatchBuilder,
};
use kprod_core::protocol::{
    decode_response, encode_request, encode_response, DecodeError, FrameDecoder, Message, Reader,
    Request, RequestHeader, ResponseHeader, Writer,
};

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

const DEFAULT_SEED: u64 = 0x6b70_726f_645f_7231;

/// The allocation bound for an `n`-byte input.
fn alloc_bound(n: usize) -> usize {
    64 * n + 4096
}

fn seed() -> u64 {
    match std::env::var("KPROD_FUZZ_SEED") {
        Ok(s) => {
            let s = s.trim();
            let parsed = match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => s.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("KPROD_FUZZ_SEED={s} is not a u64"))
        }
        Err(_) => DEFAULT_SEED,
    }
}

fn scale(n: usize) -> usize {
    let factor = std::env::var("KPROD_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .unwrap_or(1.0);
    ((n as f64) * factor).ceil().max(1.0) as usize
}

// ---------------------------------------------------------------------------------------------
// PRNG: splitmix64 to seed, xorshift64* to run
// ---------------------------------------------------------------------------------------------

struct Rng(u64);

impl Rng {
    /// A generator for one stream, derived from the run's seed and a stream name.
    fn for_stream(name: &str) -> Self {
        let mut s = seed();
        for b in name.bytes() {
            s = s.rotate_left(5) ^ u64::from(b);
            s = s.wrapping_mul(0x1000_0000_01b3);
        }
        let mut z = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        Self(z | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `num / den`.
    fn chance(&mut self, num: u64, den: u64) -> bool {
        self.next() % den < num
    }

    fn i16(&mut self) -> i16 {
        self.next() as i16
    }

    fn i32(&mut self) -> i32 {
        self.next() as i32
    }

    fn i64(&mut self) -> i64 {
        self.next() as i64
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// A length biased towards small values.
    fn small_len(&mut self, max: usize) -> usize {
        if self.chance(3, 4) {
            self.below(max.min(16) + 1)
        } else {
            self.below(max + 1)
        }
    }

    fn string(&mut self) -> String {
        const CHARS: &[char] = &[
            'a', 'k', 'z', 'A', 'Q', '0', '9', '-', '.', '_', 'é', '€', '𝄞',
        ];
        let n = self.small_len(24);
        (0..n).map(|_| CHARS[self.below(CHARS.len())]).collect()
    }

    fn opt_string(&mut self) -> Option<String> {
        self.chance(3, 4).then(|| self.string())
    }

    fn opt_bytes(&mut self, max: usize) -> Option<Vec<u8>> {
        self.chance(4, 5).then(|| {
            let n = self.small_len(max);
            self.bytes(n)
        })
    }

    fn uuid(&mut self) -> [u8; 16] {
        let mut u = [0u8; 16];
        if self.chance(1, 2) {
            u.copy_from_slice(&self.bytes(16));
        }
        u
    }

    fn i32s(&mut self, max: usize) -> Vec<i32> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.i32()).collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Valid messages
// ---------------------------------------------------------------------------------------------

fn gen_api_versions_request(r: &mut Rng, _v: i16) -> ApiVersionsRequest {
    ApiVersionsRequest {
        client_software_name: r.string(),
        client_software_version: r.string(),
    }
}

fn gen_api_versions_response(r: &mut Rng, _v: i16) -> ApiVersionsResponse {
    let n = r.small_len(40);
    ApiVersionsResponse {
        error_code: if r.chance(3, 4) { 0 } else { r.i16() },
        api_keys: (0..n)
            .map(|_| ApiVersion {
                api_key: r.i16(),
                min_version: r.i16(),
                max_version: r.i16(),
            })
            .collect(),
        throttle_time_ms: r.i32(),
    }
}

fn gen_metadata_request(r: &mut Rng, _v: i16) -> MetadataRequest {
    MetadataRequest {
        topics: r.chance(4, 5).then(|| {
            (0..r.below(5))
                .map(|_| MetadataRequestTopic {
                    topic_id: r.uuid(),
                    name: r.opt_string(),
                })
                .collect()
        }),
        allow_auto_topic_creation: r.chance(1, 2),
        include_cluster_authorized_operations: r.chance(1, 2),
        include_topic_authorized_operations: r.chance(1, 2),
    }
}

fn gen_metadata_response(r: &mut Rng, _v: i16) -> MetadataResponse {
    MetadataResponse {
        throttle_time_ms: r.i32(),
        brokers: (0..r.below(4))
            .map(|_| MetadataBroker {
                node_id: r.i32(),
                host: r.string(),
                port: r.i32(),
                rack: r.opt_string(),
            })
            .collect(),
        cluster_id: r.opt_string(),
        controller_id: r.i32(),
        topics: (0..r.below(4))
            .map(|_| MetadataTopic {
                error_code: r.i16(),
                name: r.opt_string(),
                topic_id: r.uuid(),
                is_internal: r.chance(1, 2),
                partitions: (0..r.below(5))
                    .map(|_| MetadataPartition {
                        error_code: r.i16(),
                        partition_index: r.i32(),
                        leader_id: r.i32(),
                        leader_epoch: r.i32(),
                        replica_nodes: r.i32s(4),
                        isr_nodes: r.i32s(4),
                        offline_replicas: r.i32s(2),
                    })
                    .collect(),
                topic_authorized_operations: r.i32(),
            })
            .collect(),
        cluster_authorized_operations: r.i32(),
    }
}

fn gen_init_producer_id_request(r: &mut Rng, _v: i16) -> InitProducerIdRequest {
    InitProducerIdRequest {
        transactional_id: r.opt_string(),
        transaction_timeout_ms: r.i32(),
        producer_id: r.i64(),
        producer_epoch: r.i16(),
    }
}

fn gen_init_producer_id_response(r: &mut Rng, _v: i16) -> InitProducerIdResponse {
    InitProducerIdResponse {
        throttle_time_ms: r.i32(),
        error_code: r.i16(),
        producer_id: r.i64(),
        producer_epoch: r.i16(),
    }
}

fn gen_headers(r: &mut Rng) -> Vec<Header> {
    (0..r.below(3))
        .map(|_| Header {
            key: r.string(),
            value: r.opt_bytes(12).map(Bytes::from),
        })
        .collect()
}

/// A sealed batch built with `RecordBatchBuilder`.
fn gen_sealed_batch(r: &mut Rng) -> Bytes {
    let mut b = RecordBatchBuilder::with_capacity(r.below(256));
    let base = r.i64() >> 16;
    for _ in 0..r.below(6) {
        let ts = base + (r.i32() >> 8) as i64;
        let key = r.opt_bytes(16);
        let value = r.opt_bytes(48);
        let headers = gen_headers(r);
        b.push(ts, key.as_deref(), value.as_deref(), &headers);
    }
    b.seal(r.i64() >> 1, r.i16(), r.i32())
}

/// A batch built with `RecordBatch::encode` (arbitrary header fields and record deltas).
fn gen_struct_batch(r: &mut Rng) -> Bytes {
    let records: Vec<Record> = (0..r.below(5))
        .map(|_| Record {
            attributes: r.next() as i8,
            timestamp_delta: r.i64() >> r.below(64),
            offset_delta: r.i32() >> r.below(32),
            key: r.opt_bytes(16).map(Bytes::from),
            value: r.opt_bytes(48).map(Bytes::from),
            headers: gen_headers(r),
        })
        .collect();
    RecordBatch {
        base_offset: r.i64(),
        partition_leader_epoch: r.i32(),
        // No compression bits: compressed batches are refused by design.
        attributes: r.i16() & !0x07,
        last_offset_delta: r.i32(),
        base_timestamp: r.i64(),
        max_timestamp: r.i64(),
        producer_id: r.i64(),
        producer_epoch: r.i16(),
        base_sequence: r.i32(),
        records,
    }
    .encode()
}

/// One to three batches, back to back, as in a Produce or a Fetch.
fn gen_batches(r: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..1 + r.below(3) {
        let b = if r.chance(1, 2) {
            gen_sealed_batch(r)
        } else {
            gen_struct_batch(r)
        };
        out.extend_from_slice(&b);
    }
    out
}

fn gen_produce_request(r: &mut Rng, _v: i16) -> ProduceRequest {
    ProduceRequest {
        transactional_id: if r.chance(3, 4) { None } else { r.opt_string() },
        acks: r.i16(),
        timeout_ms: r.i32(),
        topic_data: (0..r.below(3))
            .map(|_| TopicProduceData {
                name: r.string(),
                partition_data: (0..r.below(3))
                    .map(|_| PartitionProduceData {
                        index: r.i32(),
                        records: r.chance(4, 5).then(|| gen_sealed_batch(r)),
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn gen_produce_response(r: &mut Rng, _v: i16) -> ProduceResponse {
    ProduceResponse {
        responses: (0..r.below(3))
            .map(|_| TopicProduceResponse {
                name: r.string(),
                partition_responses: (0..r.below(4))
                    .map(|_| PartitionProduceResponse {
                        index: r.i32(),
                        error_code: r.i16(),
                        base_offset: r.i64(),
                        log_append_time_ms: r.i64(),
                        log_start_offset: r.i64(),
                        record_errors: (0..r.below(3))
                            .map(|_| BatchIndexAndErrorMessage {
                                batch_index: r.i32(),
                                batch_index_error_message: r.opt_string(),
                            })
                            .collect(),
                        error_message: r.opt_string(),
                        current_leader: r.chance(1, 2).then(|| LeaderIdAndEpoch {
                            leader_id: r.i32(),
                            leader_epoch: r.i32(),
                        }),
                    })
                    .collect(),
            })
            .collect(),
        throttle_time_ms: r.i32(),
        node_endpoints: (0..r.below(3))
            .map(|_| NodeEndpoint {
                node_id: r.i32(),
                host: r.string(),
                port: r.i32(),
                rack: r.opt_string(),
            })
            .collect(),
    }
}

fn gen_request_header(r: &mut Rng) -> RequestHeader {
    RequestHeader {
        api_key: r.i16(),
        api_version: r.i16(),
        correlation_id: r.i32(),
        client_id: r.opt_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Mutations
// ---------------------------------------------------------------------------------------------

fn interesting_i16(r: &mut Rng, rem: usize) -> i16 {
    let rem = rem.min(i16::MAX as usize) as i16;
    match r.below(10) {
        0 => -1,
        1 => -2,
        2 => 0,
        3 => i16::MAX,
        4 => i16::MIN,
        5 => rem,
        6 => rem.saturating_add(1),
        7 => rem.saturating_sub(1),
        8 => 1,
        _ => r.i16(),
    }
}

fn interesting_i32(r: &mut Rng, rem: usize) -> i32 {
    let rem = rem.min(i32::MAX as usize) as i32;
    match r.below(12) {
        0 => -1,
        1 => -2,
        2 => 0,
        3 => i32::MAX,
        4 => i32::MIN,
        5 => rem,
        6 => rem.saturating_add(1),
        7 => rem.saturating_sub(1),
        8 => 1,
        9 => 0x7fff_fff0,
        10 => rem / 7,
        _ => r.i32(),
    }
}

fn interesting_uvarint(r: &mut Rng, rem: usize) -> u32 {
    let rem = rem.min(u32::MAX as usize - 2) as u32;
    match r.below(12) {
        0 => 0,
        1 => 1,
        2 => 2,
        3 => rem,
        4 => rem + 1,
        5 => rem + 2,
        6 => 0x7f,
        7 => 0x80,
        8 => u32::MAX,
        9 => i32::MAX as u32,
        10 => 0x3fff,
        _ => r.next() as u32,
    }
}

fn uvarint_bytes(v: u32) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_uvarint(v);
    b.to_vec()
}

/// Writes `new` over `v` at `p` (growing `v` if needed), or inserts it.
fn splice_at(r: &mut Rng, v: &mut Vec<u8>, p: usize, new: &[u8]) {
    if r.chance(1, 2) {
        v.splice(p..p, new.iter().copied());
    } else {
        let end = (p + new.len()).min(v.len());
        v.splice(p..end, new.iter().copied());
    }
}

/// One random mutation of `v`.
fn mutate_once(r: &mut Rng, v: &mut Vec<u8>) {
    let len = v.len();
    match r.below(11) {
        // Truncate.
        0 => v.truncate(r.below(len + 1)),
        // Flip bits.
        1 if len > 0 => {
            for _ in 0..1 + r.below(4) {
                let p = r.below(len);
                v[p] ^= 1 << r.below(8);
            }
        }
        // Replace bytes.
        2 if len > 0 => {
            for _ in 0..1 + r.below(4) {
                let p = r.below(len);
                v[p] = match r.below(6) {
                    0 => 0x00,
                    1 => 0xff,
                    2 => 0x7f,
                    3 => 0x80,
                    4 => 0x01,
                    _ => r.next() as u8,
                };
            }
        }
        // Mangle a classic i16 length.
        3 if len >= 2 => {
            let p = r.below(len - 1);
            let x = interesting_i16(r, len - p - 2);
            v[p..p + 2].copy_from_slice(&x.to_be_bytes());
        }
        // Mangle a classic i32 length / count.
        4 if len >= 4 => {
            let p = r.below(len - 3);
            let x = interesting_i32(r, len - p - 4);
            v[p..p + 4].copy_from_slice(&x.to_be_bytes());
        }
        // Mangle a compact (uvarint) length / count.
        5 => {
            let p = r.below(len + 1);
            let x = interesting_uvarint(r, len - p);
            splice_at(r, v, p, &uvarint_bytes(x));
        }
        // Overlong or unterminated varints.
        6 => {
            let p = r.below(len + 1);
            let junk: &[u8] = match r.below(4) {
                0 => &[0xff, 0xff, 0xff, 0xff, 0x1f],
                1 => &[0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
                2 => &[0xff; 11],
                _ => &[0x80],
            };
            splice_at(r, v, p, junk);
        }
        // Insert random bytes.
        7 => {
            let p = r.below(len + 1);
            let n = 1 + r.below(8);
            let bytes = r.bytes(n);
            v.splice(p..p, bytes);
        }
        // Delete a range.
        8 if len > 0 => {
            let p = r.below(len);
            let n = 1 + r.below((len - p).min(16));
            v.drain(p..p + n);
        }
        // Duplicate a chunk (repeated elements, trailing data).
        9 if len > 0 => {
            let p = r.below(len);
            let n = 1 + r.below((len - p).min(32));
            let chunk = v[p..p + n].to_vec();
            let q = r.below(len + 1);
            v.splice(q..q, chunk);
        }
        // Append random trailing bytes.
        _ => {
            let n = 1 + r.below(8);
            v.extend(r.bytes(n));
        }
    }
}

/// Recomputes the CRC of every batch in a records blob whose length field still frames it,
/// so that mutations reach the record parsing behind the CRC check.
fn fix_batch_crcs(v: &mut [u8]) {
    let mut p = 0;
    while v.len() >= p + 21 {
        let len = i32::from_be_bytes([v[p + 8], v[p + 9], v[p + 10], v[p + 11]]);
        if len < 49 {
            return;
        }
        let end = p + 12 + len as usize;
        if end > v.len() {
            return;
        }
        let crc = crc32c::crc32c(&v[p + 21..end]);
        v[p + 17..p + 21].copy_from_slice(&crc.to_be_bytes());
        p = end;
    }
}

// ---------------------------------------------------------------------------------------------
// Heap footprint of decoded values
// ---------------------------------------------------------------------------------------------

/// The largest heap block owned by a decoded value.
trait Footprint {
    fn max_block(&self) -> usize;
}

macro_rules! no_heap {
    ($($t:ty),*) => { $(impl Footprint for $t { fn max_block(&self) -> usize { 0 } })* };
}

// `Bytes` fields are zero-copy slices of the input: they own no block of their own.
no_heap!(
    i8,
    i16,
    i32,
    i64,
    bool,
    [u8; 16],
    Bytes,
    ApiVersion,
    LeaderIdAndEpoch,
    ResponseHeader
);

impl Footprint for String {
    fn max_block(&self) -> usize {
        self.capacity()
    }
}

impl<T: Footprint> Footprint for Option<T> {
    fn max_block(&self) -> usize {
        self.as_ref().map_or(0, T::max_block)
    }
}

impl<T: Footprint> Footprint for Vec<T> {
    fn max_block(&self) -> usize {
        self.iter()
            .map(T::max_block)
            .fold(self.capacity() * size_of::<T>(), usize::max)
    }
}

macro_rules! footprint {
    ($($t:ty { $($f:ident),* })*) => {
        $(impl Footprint for $t {
            fn max_block(&self) -> usize { 0 $(.max(self.$f.max_block()))* }
        })*
    };
}

footprint! {
    ApiVersionsRequest { client_software_name, client_software_version }
    ApiVersionsResponse { error_code, api_keys, throttle_time_ms }
    MetadataRequest { topics }
    MetadataRequestTopic { name }
    MetadataResponse { brokers, cluster_id, topics }
    MetadataBroker { host, rack }
    MetadataTopic { name, partitions }
    MetadataPartition { replica_nodes, isr_nodes, offline_replicas }
    InitProducerIdRequest { transactional_id }
    InitProducerIdResponse { error_code }
    ProduceRequest { transactional_id, topic_data }
    TopicProduceData { name, partition_data }
    PartitionProduceData { records }
    ProduceResponse { responses, node_endpoints }
    TopicProduceResponse { name, partition_responses }
    PartitionProduceResponse { record_errors, error_message, current_leader }
    BatchIndexAndErrorMessage { batch_index_error_message }
    NodeEndpoint { host, rack }
    RequestHeader { client_id }
    RecordBatch { records }
    Record { key, value, headers }
    Header { key, value }
}

// ---------------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------------

/// Statistics of one decoder target.
#[derive(Default)]
struct Stats {
    name: String,
    cases: usize,
    decoded: usize,
    /// Largest heap block of a decoded value, and the input length it came from.
    max_block: usize,
    max_block_input: usize,
    /// Largest ratio block / input length seen (per mille), for the report.
    max_ratio_permille: usize,
}

impl Stats {
    fn record_ok(&mut self, input_len: usize, block: usize) {
        assert!(
            block <= alloc_bound(input_len),
            "{}: a {input_len}-byte input decoded into a {block}-byte heap block",
            self.name
        );
        self.decoded += 1;
        if block > self.max_block {
            self.max_block = block;
            self.max_block_input = input_len;
        }
        let ratio = block * 1000 / input_len.max(1);
        self.max_ratio_permille = self.max_ratio_permille.max(ratio);
    }
}

/// Outcome of decoding one input.
enum Outcome {
    /// Decoded; the largest heap block of the value.
    Ok(usize),
    /// Refused with an error.
    Err(DecodeError),
}

const CORPUS: usize = 48;

/// Runs `cases` inputs through `decode`: valid encodings from `corpus`, mutations of them, and
/// random buffers. `decode` gets the input and whether it is a pristine valid encoding.
fn drive(
    name: &str,
    rng: &mut Rng,
    corpus: &[Vec<u8>],
    cases: usize,
    fixup: Option<fn(&mut [u8])>,
    mut decode: impl FnMut(Bytes, bool) -> Outcome,
) -> Stats {
    let mut stats = Stats {
        name: name.to_owned(),
        ..Stats::default()
    };
    for _ in 0..cases {
        let kind = rng.below(16);
        let (input, pristine) = if kind == 0 {
            (corpus[rng.below(corpus.len())].clone(), true)
        } else if kind <= 2 {
            let n = rng.small_len(256);
            (rng.bytes(n), false)
        } else {
            let mut v = corpus[rng.below(corpus.len())].clone();
            for _ in 0..1 + rng.below(3) {
                mutate_once(rng, &mut v);
            }
            if let Some(f) = fixup {
                if rng.chance(1, 2) {
                    f(&mut v);
                }
            }
            (v, false)
        };
        let len = input.len();
        stats.cases += 1;
        match decode(Bytes::from(input), pristine) {
            Outcome::Ok(block) => stats.record_ok(len, block),
            Outcome::Err(e) => assert!(!pristine, "{name}: a valid encoding failed: {e:?}"),
        }
    }
    stats
}

fn report(test: &str, stats: &[Stats], started: Instant) -> usize {
    let total: usize = stats.iter().map(|s| s.cases).sum();
    println!("{test}: seed {:#x}", seed());
    for s in stats {
        println!(
            "  {:<44} {:>7} cases, {:>6} decoded, largest block {:>6} B (input {:>5} B), max block/input {:>3}.{:03}",
            s.name,
            s.cases,
            s.decoded,
            s.max_block,
            s.max_block_input,
            s.max_ratio_permille / 1000,
            s.max_ratio_permille % 1000,
        );
    }
    println!("{test}: {total} cases in {:.2?}", started.elapsed());
    total
}

fn encode_body<M: Message>(m: &M, version: i16) -> BytesMut {
    let mut b = BytesMut::new();
    m.encode(version, &mut b);
    b
}

/// Versions that every decoder must refuse.
fn bad_versions<M: Message>() -> [i16; 5] {
    [
        M::VERSIONS.min - 1,
        M::VERSIONS.max + 1,
        -1,
        i16::MIN,
        i16::MAX,
    ]
}

/// `Message::decode_exact` at `version`.
fn body_target<M>(
    rng: &mut Rng,
    name: &str,
    version: i16,
    gen: fn(&mut Rng, i16) -> M,
    cases: usize,
) -> Stats
where
    M: Message + PartialEq + Debug + Footprint,
{
    let corpus: Vec<Vec<u8>> = (0..CORPUS)
        .map(|_| encode_body(&gen(rng, version), version).to_vec())
        .collect();
    let name = format!("{name} v{version} decode_exact");
    let mut stats = drive(
        &name,
        rng,
        &corpus,
        cases,
        None,
        |input, pristine| match M::decode_exact(version, input.clone()) {
            Ok(m) => {
                let again = encode_body(&m, version);
                if pristine {
                    assert_eq!(
                        &again[..],
                        &input[..],
                        "{name}: re-encoding is not canonical"
                    );
                }
                let m2 = M::decode_exact(version, again.freeze())
                    .unwrap_or_else(|e| panic!("{name}: re-encoded value fails: {e:?}"));
                assert_eq!(m2, m, "{name}: re-encoded value differs");
                Outcome::Ok(m.max_block())
            }
            Err(e) => Outcome::Err(e),
        },
    );
    for bad in bad_versions::<M>() {
        let input = Bytes::from(corpus[rng.below(corpus.len())].clone());
        assert!(matches!(
            M::decode_exact(bad, input),
            Err(DecodeError::UnsupportedVersion { .. })
        ));
        stats.cases += 1;
    }
    stats
}

/// `decode_response::<R>` at `version`, on the frame body (response header + body).
fn response_target<R>(
    rng: &mut Rng,
    name: &str,
    version: i16,
    gen: fn(&mut Rng, i16) -> R::Response,
    cases: usize,
) -> Stats
where
    R: Request,
    R::Response: PartialEq + Debug + Footprint,
{
    let corpus: Vec<Vec<u8>> = (0..CORPUS)
        .map(|_| encode_response::<R>(&gen(rng, version), version, rng.i32())[4..].to_vec())
        .collect();
    let name = format!("{name} v{version} decode_response");
    let mut stats = drive(
        &name,
        rng,
        &corpus,
        cases,
        None,
        |input, pristine| match decode_response::<R>(version, input.clone()) {
            Ok((h, m)) => {
                let again = encode_response::<R>(&m, version, h.correlation_id).slice(4..);
                if pristine {
                    assert_eq!(
                        &again[..],
                        &input[..],
                        "{name}: re-encoding is not canonical"
                    );
                }
                let (h2, m2) = decode_response::<R>(version, again)
                    .unwrap_or_else(|e| panic!("{name}: re-encoded value fails: {e:?}"));
                assert_eq!((h2, &m2), (h, &m), "{name}: re-encoded value differs");
                Outcome::Ok(m.max_block())
            }
            Err(e) => Outcome::Err(e),
        },
    );
    for bad in bad_versions::<R::Response>() {
        let input = Bytes::from(corpus[rng.below(corpus.len())].clone());
        assert!(matches!(
            decode_response::<R>(bad, input),
            Err(DecodeError::UnsupportedVersion { .. })
        ));
        stats.cases += 1;
    }
    stats
}

/// How a broker decodes a request frame (size prefix removed): api key and version first,
/// then the header version they imply, the header, and the body.
fn decode_request_frame<R: Request>(frame: Bytes) -> Result<(i16, RequestHeader, R), DecodeError> {
    let key = i16::from_be_bytes([
        *frame.first().ok_or(DecodeError::Truncated)?,
        *frame.get(1).ok_or(DecodeError::Truncated)?,
    ]);
    let version = i16::from_be_bytes([
        *frame.get(2).ok_or(DecodeError::Truncated)?,
        *frame.get(3).ok_or(DecodeError::Truncated)?,
    ]);
    if key != R::API_KEY {
        return Err(DecodeError::Invalid("another api key"));
    }
    R::check_version(version)?;
    let mut r = Reader::new(frame);
    let header = RequestHeader::decode(R::request_header_version(version), &mut r)?;
    let body = R::decode(version, &mut r)?;
    r.expect_end()?;
    Ok((version, header, body))
}

/// A broker's view: whole request frames (header + body) at `version`.
fn request_frame_target<R>(
    rng: &mut Rng,
    name: &str,
    version: i16,
    gen: fn(&mut Rng, i16) -> R,
    cases: usize,
) -> Stats
where
    R: Request + PartialEq + Debug + Footprint,
{
    let corpus: Vec<Vec<u8>> = (0..CORPUS)
        .map(|_| {
            let client = rng.opt_string();
            encode_request(&gen(rng, version), version, rng.i32(), client.as_deref())[4..].to_vec()
        })
        .collect();
    let name = format!("{name} v{version} request frame");
    drive(
        &name,
        rng,
        &corpus,
        cases,
        None,
        |input, pristine| match decode_request_frame::<R>(input.clone()) {
            Ok((v, h, m)) => {
                assert_eq!(h.api_version, v);
                let again =
                    encode_request(&m, v, h.correlation_id, h.client_id.as_deref()).slice(4..);
                if pristine {
                    assert_eq!(
                        &again[..],
                        &input[..],
                        "{name}: re-encoding is not canonical"
                    );
                }
                let (v2, h2, m2) = decode_request_frame::<R>(again)
                    .unwrap_or_else(|e| panic!("{name}: re-encoded value fails: {e:?}"));
                assert_eq!(
                    (v2, &h2, &m2),
                    (v, &h, &m),
                    "{name}: re-encoded value differs"
                );
                Outcome::Ok(m.max_block().max(h.max_block()))
            }
            Err(e) => Outcome::Err(e),
        },
    )
}

fn versions<M: Message>() -> std::ops::RangeInclusive<i16> {
    M::VERSIONS.min..=M::VERSIONS.max
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[test]
fn response_bodies_survive_hostile_input() {
    let started = Instant::now();
    let mut rng = Rng::for_stream("response bodies");
    let n = scale(5_000);
    let mut stats = Vec::new();
    for v in versions::<ApiVersionsResponse>() {
        stats.push(body_target(
            &mut rng,
            "ApiVersionsResponse",
            v,
            gen_api_versions_response,
            n,
        ));
    }
    for v in versions::<MetadataResponse>() {
        stats.push(body_target(
            &mut rng,
            "MetadataResponse",
            v,
            gen_metadata_response,
            n,
        ));
    }
    for v in versions::<InitProducerIdResponse>() {
        stats.push(body_target(
            &mut rng,
            "InitProducerIdResponse",
            v,
            gen_init_producer_id_response,
            n,
        ));
    }
    for v in versions::<ProduceResponse>() {
        stats.push(body_target(
            &mut rng,
            "ProduceResponse",
            v,
            gen_produce_response,
            n,
        ));
    }
    report("response_bodies_survive_hostile_input", &stats, started);
}

#[test]
fn response_frames_survive_hostile_input() {
    let started = Instant::now();
    let mut rng = Rng::for_stream("response frames");
    let n = scale(4_000);
    let mut stats = Vec::new();
    for v in versions::<ApiVersionsResponse>() {
        stats.push(response_target::<ApiVersionsRequest>(
            &mut rng,
            "ApiVersionsResponse",
            v,
            gen_api_versions_response,
            n,
        ));
    }
    for v in versions::<MetadataResponse>() {
        stats.push(response_target::<MetadataRequest>(
            &mut rng,
            "MetadataResponse",
            v,
            gen_metadata_response,
            n,
        ));
    }
    for v in versions::<InitProducerIdResponse>() {
        stats.push(response_target::<InitProducerIdRequest>(
            &mut rng,
            "InitProducerIdResponse",
            v,
            gen_init_producer_id_response,
            n,
        ));
    }
    for v in versions::<ProduceResponse>() {
        stats.push(response_target::<ProduceRequest>(
            &mut rng,
            "ProduceResponse",
            v,
            gen_produce_response,
            n,
        ));
    }
    report("response_frames_survive_hostile_input", &stats, started);
}

#[test]
fn requests_survive_hostile_input() {
    let started = Instant::now();
    let mut rng = Rng::for_stream("requests");
    let n_body = scale(3_000);
    let n_frame = scale(2_000);
    let mut stats = Vec::new();
    for v in versions::<ApiVersionsRequest>() {
        stats.push(body_target(
            &mut rng,
            "ApiVersionsRequest",
            v,
            gen_api_versions_request,
            n_body,
        ));
        stats.push(request_frame_target(
            &mut rng,
            "ApiVersionsRequest",
            v,
            gen_api_versions_request,
            n_frame,
        ));
    }
    for v in versions::<MetadataRequest>() {
        stats.push(body_target(
            &mut rng,
            "MetadataRequest",
            v,
            gen_metadata_request,
            n_body,
        ));
        stats.push(request_frame_target(
            &mut rng,
            "MetadataRequest",
            v,
            gen_metadata_request,
            n_frame,
        ));
    }
    for v in versions::<InitProducerIdRequest>() {
        stats.push(body_target(
            &mut rng,
            "InitProducerIdRequest",
            v,
            gen_init_producer_id_request,
            n_body,
        ));
        stats.push(request_frame_target(
            &mut rng,
            "InitProducerIdRequest",
            v,
            gen_init_producer_id_request,
            n_frame,
        ));
    }
    for v in versions::<ProduceRequest>() {
        stats.push(body_target(
            &mut rng,
            "ProduceRequest",
            v,
            gen_produce_request,
            n_body,
        ));
        stats.push(request_frame_target(
            &mut rng,
            "ProduceRequest",
            v,
            gen_produce_request,
            n_frame,
        ));
    }
    report("requests_survive_hostile_input", &stats, started);
}

#[test]
fn headers_survive_hostile_input() {
    let started = Instant::now();
    let mut rng = Rng::for_stream("headers");
    let n = scale(6_000);
    let mut stats = Vec::new();
    for hv in [1i16, 2] {
        let corpus: Vec<Vec<u8>> = (0..CORPUS)
            .map(|_| {
                let mut b = BytesMut::new();
                gen_request_header(&mut rng).encode(hv, &mut b);
                let tail = rng.below(8);
                b.extend_from_slice(&rng.bytes(tail));
                b.to_vec()
            })
            .collect();
        let name = format!("RequestHeader v{hv}");
        stats.push(drive(&name, &mut rng, &corpus, n, None, |input, _| {
            let mut r = Reader::new(input.clone());
            match RequestHeader::decode(hv, &mut r) {
                Ok(h) => {
                    assert!(r.remaining() <= input.len());
                    let mut b = BytesMut::new();
                    h.encode(hv, &mut b);
                    let h2 = RequestHeader::decode(hv, &mut Reader::new(b.freeze()))
                        .unwrap_or_else(|e| panic!("{name}: re-encoded header fails: {e:?}"));
                    assert_eq!(h2, h);
                    Outcome::Ok(h.max_block())
                }
                Err(e) => Outcome::Err(e),
            }
        }));
    }
    for hv in [0i16, 1] {
        let corpus: Vec<Vec<u8>> = (0..CORPUS)
            .map(|_| {
                let mut b = BytesMut::new();
                ResponseHeader {
                    correlation_id: rng.i32(),
                }
                .encode(hv, &mut b);
                let tail = rng.below(8);
                b.extend_from_slice(&rng.bytes(tail));
                b.to_vec()
            })
            .collect();
        let name = format!("ResponseHeader v{hv}");
        stats.push(drive(&name, &mut rng, &corpus, n, None, |input, _| {
            let peeked = ResponseHeader::peek_correlation_id(&input);
            let mut r = Reader::new(input.clone());
            match ResponseHeader::decode(hv, &mut r) {
                Ok(h) => {
                    assert_eq!(peeked, Ok(h.correlation_id));
                    assert!(r.remaining() <= input.len());
                    Outcome::Ok(0)
                }
                Err(e) => Outcome::Err(e),
            }
        }));
    }
    report("headers_survive_hostile_input", &stats, started);
}

#[test]
fn record_batches_survive_hostile_input() {
    let started = Instant::now();
    let mut rng = Rng::for_stream("record batches");
    let n = scale(50_000);
    let corpus: Vec<Vec<u8>> = (0..CORPUS).map(|_| gen_batches(&mut rng)).collect();
    let name = "RecordBatch::decode_all";
    let stats = drive(
        name,
        &mut rng,
        &corpus,
        n,
        Some(fix_batch_crcs),
        |input, pristine| {
            // The header peek must never panic either.
            let peek = BatchHeader::peek(&input);
            match RecordBatch::decode_all(input.clone()) {
                Ok(batches) => {
                    if let (Some(first), Ok(h)) = (batches.first(), peek) {
                        assert_eq!(
                            (h.producer_id, h.producer_epoch, h.base_sequence),
                            (first.producer_id, first.producer_epoch, first.base_sequence)
                        );
                        assert_eq!(h.records_count as usize, first.records.len());
                    }
                    let mut again = Vec::new();
                    for b in &batches {
                        again.extend_from_slice(&b.encode());
                    }
                    if pristine {
                        assert_eq!(
                            &again[..],
                            &input[..],
                            "{name}: re-encoding is not canonical"
                        );
                    }
                    let batches2 = RecordBatch::decode_all(Bytes::from(again))
                        .unwrap_or_else(|e| panic!("{name}: re-encoded batches fail: {e:?}"));
                    assert_eq!(batches2, batches, "{name}: re-encoded batches differ");
                    Outcome::Ok(batches.max_block())
                }
                Err(e) => Outcome::Err(e),
            }
        },
    );
    assert!(
        stats.decoded > stats.cases / 10,
        "the CRC fix-up lets mutated batches through: {} of {}",
        stats.decoded,
        stats.cases
    );
    report("record_batches_survive_hostile_input", &[stats], started);
}

/// A hostile frame size prefix: negative, just above the maximum, or far above it.
fn hostile_size(r: &mut Rng, max: usize) -> i32 {
    let max = max as i32;
    match r.below(6) {
        0 => -1,
        1 => i32::MIN,
        2 => -(1 + r.below(1 << 20) as i32),
        3 => max + 1,
        4 => i32::MAX,
        _ => max + 1 + (r.next() as i32 & 0x3fff_ffff) % (i32::MAX - max),
    }
}

#[test]
fn frame_decoder_survives_hostile_streams() {
    const MAX: usize = 1 << 20;
    let started = Instant::now();
    let mut rng = Rng::for_stream("frames");
    let streams = scale(20_000);
    let d = FrameDecoder::new(MAX);
    let (mut calls, mut frames, mut rejected, mut max_cap) = (0usize, 0usize, 0usize, 0usize);
    for _ in 0..streams {
        // Valid frames, then maybe a hostile prefix or a frame whose size is valid but which
        // never completes; random chunking.
        let mut stream = Vec::new();
        let mut expected = Vec::new();
        for _ in 0..rng.below(6) {
            let n = rng.small_len(300);
            let payload = rng.bytes(n);
            stream.extend_from_slice(&(n as i32).to_be_bytes());
            stream.extend_from_slice(&payload);
            expected.push(payload);
        }
        let mut bad = None;
        let mut pending = 0;
        match rng.below(4) {
            0 => {
                let size = hostile_size(&mut rng, MAX);
                bad = Some(size);
                stream.extend_from_slice(&size.to_be_bytes());
                let n = rng.below(16);
                stream.extend(rng.bytes(n));
            }
            1 => {
                pending = if rng.chance(1, 4) {
                    MAX
                } else {
                    1 + rng.below(MAX)
                };
                stream.extend_from_slice(&(pending as i32).to_be_bytes());
                let n = rng.below(16).min(pending.saturating_sub(1));
                stream.extend(rng.bytes(n));
            }
            _ => {}
        }
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        let mut fed = 0;
        let mut err = None;
        'feed: while fed < stream.len() {
            let chunk = if rng.chance(1, 3) {
                1 + rng.below(4)
            } else {
                1 + rng.below(128)
            };
            let end = (fed + chunk).min(stream.len());
            buf.extend_from_slice(&stream[fed..end]);
            fed = end;
            loop {
                calls += 1;
                let result = d.decode(&mut buf);
                // The caller's buffer only ever grows to hold bytes that arrived or a frame
                // whose size was accepted.
                let bound = 2 * (fed + 4 + pending) + (128 << 10);
                assert!(
                    buf.capacity() <= bound,
                    "buffer capacity {} after {fed} bytes (pending frame {pending})",
                    buf.capacity()
                );
                max_cap = max_cap.max(buf.capacity());
                match result {
                    Ok(Some(f)) => got.push(f),
                    Ok(None) => break,
                    Err(e) => {
                        err = Some(e);
                        break 'feed;
                    }
                }
            }
        }
        frames += got.len();
        assert_eq!(got, expected, "frames reassembled from chunks");
        match bad {
            Some(size) => {
                assert_eq!(err, Some(DecodeError::FrameSize(size)));
                rejected += 1;
            }
            None => assert_eq!(err, None),
        }
    }

    // With the default (100 MiB) limit: the largest accepted size reserves its frame, by
    // design; one above is refused without any reservation.
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&(DEFAULT_MAX_FRAME_SIZE as i32 + 1).to_be_bytes());
    assert_eq!(
        FrameDecoder::default().decode(&mut buf),
        Err(DecodeError::FrameSize(DEFAULT_MAX_FRAME_SIZE as i32 + 1))
    );
    assert!(buf.capacity() < 4096);
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&(DEFAULT_MAX_FRAME_SIZE as i32).to_be_bytes());
    assert_eq!(FrameDecoder::default().decode(&mut buf), Ok(None));
    assert!(buf.capacity() <= 2 * (DEFAULT_MAX_FRAME_SIZE + 4));

    println!("frame_decoder_survives_hostile_streams: seed {:#x}", seed());
    println!(
        "  FrameDecoder: {streams} streams, {calls} decode calls, {frames} frames, {rejected} hostile prefixes rejected, largest buffer capacity {max_cap} B"
    );
    println!(
        "frame_decoder_survives_hostile_streams: {streams} cases in {:.2?}",
        started.elapsed()
    );
}
