//! Seeded fuzzing of kprod-core, shared by the `fuzz` binary (long runs) and the `fuzz` test
//! (a short run in the default suite).
//!
//! Two halves:
//!
//! 1. **Decoders** ([`fuzz_decoders`]): every response decoder of `kprod_core::protocol`
//!    (ApiVersions v0–v3, Metadata v9–v12, InitProducerId v2–v5, Produce v9–v12), the response
//!    header, the frame decoder (with random chunking) and the record-batch decoders get valid
//!    encodings of random messages, mutations of them and random bytes. Nothing may panic.
//! 2. **The whole producer** ([`fuzz_producer`]): a real [`Producer`] is driven against the
//!    broker model ([`kprod_model::broker::Cluster`]) by [`Harness`], a driver that decodes
//!    nothing on the producer's behalf and delivers the broker's response bytes in random
//!    chunks. Each run has a random configuration and a random broker mode, and a random walk
//!    of inputs: records (valid and invalid), flushes, a close, connects that succeed or fail,
//!    disconnects, stalls, time jumps and timeouts, leader moves and injected broker errors.
//!    In a *hostile* run the response frames are also attacked (in half of the hostile runs
//!    from the first response on, in the other half once the handshake got valid responses
//!    and the producer has its id): bit flips, truncated bodies,
//!    appended bytes, random bodies behind a valid correlation id, well-formed responses of
//!    the right type with random contents (random error codes, offsets, leaders, partitions,
//!    producer ids, version ranges), garbage size prefixes, dropped, duplicated and
//!    misaddressed frames. Then the run heals: the broker answers faithfully and the clock
//!    runs until every record has resolved.
//!
//!    Properties: nothing panics; no record gets two outcomes; every record accepted gets
//!    its outcome within a bound of virtual time after the run heals; the producer then holds
//!    no record and no buffered byte, and closes. In a *faithful* run (no frame attacked) the
//!    log is also checked, per partition: no duplicate, send order, every acknowledged record
//!    at its offset (present when without one), every `NotPersisted` failure absent. Runs in
//!    which the producer sends Metadata requests without backing off are counted
//!    ([`ProducerStats::metadata_storms`]). While healing, each round of requests and responses
//!    takes 100 µs of virtual time, so that a producer that keeps the broker busy still sees
//!    its clock move.
//!
//! Known kprod-core bugs that would stop a run (a process abort cannot be caught) are
//! avoided by default and counted ([`ProducerStats::avoided`]); see [`KnownBug`]. Set
//! [`Options::avoid_known_bugs`] to `false` to hit them.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kprod_core::protocol::api_versions::{ApiVersion, ApiVersionsRequest, ApiVersionsResponse};
use kprod_core::protocol::compression::{decompress, RatioEstimate};
use kprod_core::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use kprod_core::protocol::metadata::{
    MetadataBroker, MetadataPartition, MetadataRequest, MetadataResponse, MetadataTopic,
};
use kprod_core::protocol::produce::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    ProduceRequest, ProduceResponse, TopicProduceResponse,
};
use kprod_core::protocol::record_batch::{BatchHeader, RecordBatch, RecordBatchBuilder};
use kprod_core::protocol::{
    api_key, decode_response, encode_response, ErrorCode, FrameDecoder, Message, Reader, Request,
    RequestHeader, ResponseHeader,
};
use kprod_core::{
    Compression, CompressionTask, CompressionType, ConnId, DataLossPolicy, Event, GapPolicy,
    Output, Persistence, Producer, ProducerConfig, Record, RecordId,
};
use kprod_model::broker::{split_frames, BrokerMode, Cluster, Injection};

// ---------------------------------------------------------------------------------------------
// Randomness
// ---------------------------------------------------------------------------------------------

/// A small seeded generator (SplitMix64): reproducible on every platform.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// A duration of `from..to` milliseconds.
    pub fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.below(to - from))
    }

    /// A `usize` in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below((hi - lo + 1) as u64) as usize
    }

    /// True with probability `per_mille / 1000`.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// One element of a non-empty slice.
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }

    fn i16_any(&mut self) -> i16 {
        if self.chance(300) {
            self.pick(&[0, -1, 1, i16::MAX, i16::MIN, 35, 3])
        } else {
            self.next_u64() as i16
        }
    }

    fn i32_any(&mut self) -> i32 {
        if self.chance(300) {
            self.pick(&[0, -1, 1, 2, i32::MAX, i32::MIN, 1 << 20, 1 << 30])
        } else {
            self.next_u64() as i32
        }
    }

    fn i64_any(&mut self) -> i64 {
        if self.chance(300) {
            self.pick(&[0, -1, 1, i64::MAX, i64::MIN, i64::MAX - 1, 1 << 40])
        } else {
            self.next_u64() as i64
        }
    }

    /// Mostly small, sometimes anything.
    fn small_i32(&mut self, max: i32) -> i32 {
        if self.chance(50) {
            self.i32_any()
        } else {
            self.below(max as u64 + 1) as i32
        }
    }

    fn string(&mut self, max: usize) -> String {
        let n = self.range(0, max);
        (0..n)
            .map(|_| char::from(b'a' + self.below(26) as u8))
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Random messages
// ---------------------------------------------------------------------------------------------

/// Error codes worth answering: the ones the producer treats specially, then a few others.
const ERROR_CODES: &[i16] = &[
    0, 0, 0, 0, -1, 2, 3, 5, 6, 7, 10, 17, 18, 19, 20, 31, 35, 42, 45, 46, 47, 49, 51, 53, 56, 59,
    87, 90, 100, 15, 16, 14,
];

fn error_code(rng: &mut Rng) -> i16 {
    if rng.chance(80) {
        rng.i16_any()
    } else {
        rng.pick(ERROR_CODES)
    }
}

fn gen_api_versions(rng: &mut Rng) -> ApiVersionsResponse {
    let mut keys = Vec::new();
    let sane = rng.chance(700);
    for (key, max) in [
        (api_key::PRODUCE, 12),
        (api_key::METADATA, 12),
        (api_key::API_VERSIONS, 3),
        (api_key::INIT_PRODUCER_ID, 5),
    ] {
        if sane || !rng.chance(200) {
            let (min, max) = if sane && !rng.chance(100) {
                (0, max)
            } else {
                (rng.small_i32(12) as i16, rng.small_i32(14) as i16)
            };
            keys.push(ApiVersion {
                api_key: key,
                min_version: min,
                max_version: max,
            });
        }
    }
    for _ in 0..rng.below(4) {
        keys.push(ApiVersion {
            api_key: rng.i16_any(),
            min_version: rng.i16_any(),
            max_version: rng.i16_any(),
        });
    }
    ApiVersionsResponse {
        error_code: if rng.chance(850) { 0 } else { error_code(rng) },
        api_keys: keys,
        throttle_time_ms: rng.i32_any(),
    }
}

/// A Metadata response about `topics`, naming `nodes` (id, host, port) as brokers.
fn gen_metadata(
    rng: &mut Rng,
    version: i16,
    topics: &[String],
    nodes: &[(i32, String, i32)],
) -> MetadataResponse {
    let mut brokers: Vec<MetadataBroker> = nodes
        .iter()
        .filter(|_| !rng.chance(100))
        .map(|(id, h, p)| MetadataBroker {
            node_id: *id,
            host: h.clone(),
            port: *p,
            rack: None,
        })
        .collect();
    if rng.chance(150) {
        brokers.push(MetadataBroker {
            node_id: rng.small_i32(9),
            host: rng.string(12),
            port: rng.i32_any(),
            rack: rng.chance(500).then(|| rng.string(5)),
        });
    }
    let node_ids: Vec<i32> = nodes.iter().map(|n| n.0).collect();
    let mut ts = Vec::new();
    for name in topics {
        if rng.chance(50) {
            continue;
        }
        let count = rng.below(5) as i32;
        let mut partitions = Vec::new();
        for i in 0..count {
            let index = if rng.chance(40) { rng.small_i32(64) } else { i };
            let leader = if rng.chance(850) && !node_ids.is_empty() {
                rng.pick(&node_ids)
            } else {
                rng.small_i32(9).wrapping_sub(1)
            };
            partitions.push(MetadataPartition {
                error_code: if rng.chance(900) { 0 } else { error_code(rng) },
                partition_index: index,
                leader_id: leader,
                leader_epoch: rng.small_i32(5).wrapping_sub(1),
                replica_nodes: node_ids.clone(),
                isr_nodes: node_ids.clone(),
                offline_replicas: Vec::new(),
            });
        }
        ts.push(MetadataTopic {
            error_code: if rng.chance(850) { 0 } else { error_code(rng) },
            name: if version >= 12 && rng.chance(30) {
                None
            } else if rng.chance(30) {
                Some(rng.string(6))
            } else {
                Some(name.clone())
            },
            topic_id: [rng.below(256) as u8; 16],
            is_internal: rng.chance(20),
            partitions,
            topic_authorized_operations: rng.i32_any(),
        });
    }
    MetadataResponse {
        throttle_time_ms: rng.i32_any(),
        brokers,
        cluster_id: rng.chance(500).then(|| rng.string(8)),
        controller_id: rng.small_i32(5).wrapping_sub(1),
        topics: ts,
        cluster_authorized_operations: if version <= 10 {
            rng.i32_any()
        } else {
            i32::MIN
        },
    }
}

fn gen_init_producer_id(rng: &mut Rng) -> InitProducerIdResponse {
    InitProducerIdResponse {
        throttle_time_ms: rng.i32_any(),
        error_code: if rng.chance(700) { 0 } else { error_code(rng) },
        producer_id: if rng.chance(700) {
            rng.below(1 << 20) as i64
        } else {
            rng.i64_any()
        },
        producer_epoch: if rng.chance(700) {
            rng.below(5) as i16
        } else {
            rng.i16_any()
        },
    }
}

/// A Produce response about the partitions of `req` (when given), with random results.
fn gen_produce(rng: &mut Rng, version: i16, req: Option<&ProduceRequest>) -> ProduceResponse {
    let mut targets: Vec<(String, i32)> = match req {
        Some(r) => r
            .topic_data
            .iter()
            .flat_map(|t| t.partition_data.iter().map(|p| (t.name.clone(), p.index)))
            .collect(),
        None => (0..rng.below(3))
            .map(|_| (rng.string(4), rng.small_i32(3)))
            .collect(),
    };
    if rng.chance(50) && !targets.is_empty() {
        targets.remove(rng.below(targets.len() as u64) as usize);
    }
    if rng.chance(50) {
        targets.push((rng.string(3), rng.small_i32(4)));
    }
    let mut responses: Vec<TopicProduceResponse> = Vec::new();
    for (name, index) in targets {
        let p = PartitionProduceResponse {
            index: if rng.chance(30) {
                rng.small_i32(4)
            } else {
                index
            },
            error_code: error_code(rng),
            base_offset: if rng.chance(700) {
                rng.below(1000) as i64
            } else {
                rng.i64_any()
            },
            log_append_time_ms: rng.i64_any(),
            log_start_offset: if rng.chance(500) {
                rng.below(100) as i64 - 1
            } else {
                rng.i64_any()
            },
            record_errors: (0..rng.below(2))
                .map(|_| BatchIndexAndErrorMessage {
                    batch_index: rng.i32_any(),
                    batch_index_error_message: rng.chance(500).then(|| rng.string(6)),
                })
                .collect(),
            error_message: rng.chance(200).then(|| rng.string(10)),
            current_leader: (version >= 10 && rng.chance(200)).then(|| LeaderIdAndEpoch {
                leader_id: rng.small_i32(4).wrapping_sub(1),
                leader_epoch: rng.small_i32(10).wrapping_sub(1),
            }),
        };
        match responses.iter_mut().find(|t| t.name == name) {
            Some(t) if !rng.chance(50) => t.partition_responses.push(p),
            _ => responses.push(TopicProduceResponse {
                name,
                partition_responses: vec![p],
            }),
        }
    }
    ProduceResponse {
        responses,
        throttle_time_ms: rng.i32_any(),
        node_endpoints: if version >= 10 && rng.chance(200) {
            vec![NodeEndpoint {
                node_id: rng.small_i32(4),
                host: rng.string(9),
                port: rng.i32_any(),
                rack: None,
            }]
        } else {
            Vec::new()
        },
    }
}

fn gen_batch(rng: &mut Rng) -> Bytes {
    let mut b = RecordBatchBuilder::with_capacity(256);
    // Every codec (compiled in here through kprod-tokio's default features): valid compressed
    // batches, and their mutations for the decompressors.
    b.set_compression(
        Compression::new(rng.pick(&CompressionType::ALL)),
        RatioEstimate::default(),
    );
    for _ in 0..rng.range(1, 5) {
        let (kn, vn) = (rng.range(0, 8), rng.range(0, 40));
        let key = rng.chance(500).then(|| rng.bytes(kn));
        let value = rng.chance(900).then(|| rng.bytes(vn));
        b.push(rng.i64_any(), key.as_deref(), value.as_deref(), &[]);
    }
    b.seal(rng.i64_any(), rng.i16_any(), rng.i32_any())
}

// ---------------------------------------------------------------------------------------------
// Mutations
// ---------------------------------------------------------------------------------------------

/// A mutation of `b` (no size prefix involved), possibly splicing in `other`.
fn mutate(rng: &mut Rng, b: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = b.to_vec();
    for _ in 0..rng.range(1, 3) {
        let len = v.len();
        match rng.below(10) {
            0 if len > 0 => {
                let i = rng.below(len as u64) as usize;
                v[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len as u64) as usize;
                v[i] = rng.pick(&[0x00, 0xff, 0x7f, 0x80, 0x01]);
            }
            2 => v.truncate(rng.below(len as u64 + 1) as usize),
            3 => {
                let n = rng.range(1, 16);
                let extra = rng.bytes(n);
                v.extend_from_slice(&extra);
            }
            4 if len > 0 => {
                let at = rng.below(len as u64) as usize;
                let n = rng.range(1, (len - at).min(16));
                v.drain(at..at + n);
            }
            5 => {
                let at = rng.below(len as u64 + 1) as usize;
                let n = rng.range(1, 8);
                let ins = rng.bytes(n);
                v.splice(at..at, ins);
            }
            6 if len >= 2 => {
                let at = rng.below(len as u64 - 1) as usize;
                let x = rng.i16_any().to_be_bytes();
                v[at..at + 2].copy_from_slice(&x);
            }
            7 if len >= 4 => {
                let at = rng.below(len as u64 - 3) as usize;
                let x = rng.i32_any().to_be_bytes();
                v[at..at + 4].copy_from_slice(&x);
            }
            8 => {
                let cut = rng.below(len as u64 + 1) as usize;
                let from = rng.below(other.len() as u64 + 1) as usize;
                v.truncate(cut);
                v.extend_from_slice(&other[from..]);
            }
            _ => {
                let n = rng.range(0, 64);
                v = rng.bytes(n);
            }
        }
    }
    v
}

// ---------------------------------------------------------------------------------------------
// Part 1: decoders
// ---------------------------------------------------------------------------------------------

/// Counts from [`fuzz_decoders`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecoderStats {
    /// Buffers fed (each to one decoder, plus header and frame decoders).
    pub inputs: u64,
    /// Of those, how many the decoder accepted.
    pub accepted: u64,
    /// Unmutated valid encodings, all of which must decode.
    pub valid: u64,
}

fn body_of(frame: &Bytes) -> Bytes {
    frame.slice(4..)
}

/// Feeds `n` inputs to the decoders. Panics (with the input) if a decoder panics or a valid
/// encoding does not decode.
pub fn fuzz_decoders(rng: &mut Rng, n: u64) -> DecoderStats {
    let mut stats = DecoderStats::default();
    let mut previous = Bytes::new();
    while stats.inputs < n {
        let kind = rng.below(5);
        let corr = rng.i32_any();
        let (version, frame) = match kind {
            0 => {
                let v = rng.below(4) as i16;
                let r = gen_api_versions(rng);
                (v, encode_response::<ApiVersionsRequest>(&r, v, corr))
            }
            1 => {
                // Every Metadata version kprod speaks, v1..v12.
                let v = 1 + rng.below(12) as i16;
                let nodes = [(1, "b1".to_owned(), 9092), (2, "b2".to_owned(), 9093)];
                let mut r = gen_metadata(rng, v, &["t0".into(), "t1".into()], &nodes);
                if v < 12 {
                    // Null names exist from v12 on.
                    for t in &mut r.topics {
                        t.name.get_or_insert_with(|| "x".into());
                    }
                }
                (v, encode_response::<MetadataRequest>(&r, v, corr))
            }
            2 => {
                // InitProducerId v0..v5 (v0-v1 non-flexible).
                let v = rng.below(6) as i16;
                let r = gen_init_producer_id(rng);
                (v, encode_response::<InitProducerIdRequest>(&r, v, corr))
            }
            3 => {
                // Produce v3..v12 (v3-v8 non-flexible).
                let v = 3 + rng.below(10) as i16;
                let mut r = gen_produce(rng, v, None);
                if v < 10 {
                    r.node_endpoints.clear();
                    for t in &mut r.responses {
                        for p in &mut t.partition_responses {
                            p.current_leader = None;
                        }
                    }
                }
                (v, encode_response::<ProduceRequest>(&r, v, corr))
            }
            _ => (0, gen_batch(rng)),
        };
        let valid = rng.chance(100);
        let input: Bytes = if valid {
            frame.clone()
        } else if kind < 4 {
            // Mutate the body, keep a size prefix that matches (sometimes not).
            let body = mutate(rng, &frame[4..], &previous);
            let mut f = BytesMut::new();
            let size = if rng.chance(900) {
                body.len() as i32
            } else {
                rng.i32_any()
            };
            f.extend_from_slice(&size.to_be_bytes());
            f.extend_from_slice(&body);
            f.freeze()
        } else {
            Bytes::from(mutate(rng, &frame, &previous))
        };
        let what = format!("kind {kind} v{version} valid {valid}");
        let outcome = catch_unwind(AssertUnwindSafe(|| decode_one(rng, kind, version, &input)));
        match outcome {
            Ok(accepted) => {
                if valid {
                    stats.valid += 1;
                    assert!(
                        accepted,
                        "a valid encoding did not decode ({what}): {input:02x?}"
                    );
                }
                stats.accepted += u64::from(accepted);
            }
            Err(_) => panic!("decoder panicked on input ({what}): {input:02x?}"),
        }
        stats.inputs += 1;
        previous = if input.len() > 4 {
            body_of(&input)
        } else {
            input
        };
    }
    stats
}

/// Feeds one input to the decoders of its kind. Returns whether the main decoder accepted it.
fn decode_one(rng: &mut Rng, kind: u64, version: i16, input: &Bytes) -> bool {
    if kind == 4 {
        let _ = BatchHeader::peek(input);
        // A mutated batch rarely keeps its CRC, so the decompressors also get the records
        // section (and the whole input) directly, each bounded to 1 MiB of output.
        let codec = rng.pick(&CompressionType::ALL);
        let records = input.get(61..).unwrap_or_default();
        for part in [records, &input[..]] {
            if let Ok(out) = decompress(codec, part, 1 << 20) {
                assert!(out.len() <= 1 << 20, "{codec}: past the limit");
            }
        }
        return RecordBatch::decode_all(input.clone()).is_ok();
    }
    // The frame decoder, fed in random chunks.
    let d = FrameDecoder::new(1 << 20);
    let mut buf = BytesMut::new();
    let mut at = 0;
    let mut frame = None;
    while at < input.len() {
        let n = rng.range(1, input.len() - at);
        buf.extend_from_slice(&input[at..at + n]);
        at += n;
        match d.decode(&mut buf) {
            Ok(Some(f)) => {
                frame = Some(f);
                break;
            }
            Ok(None) => {}
            Err(_) => break,
        }
    }
    let body = frame.unwrap_or_else(|| {
        if input.len() >= 4 {
            body_of(input)
        } else {
            input.clone()
        }
    });
    let _ = ResponseHeader::peek_correlation_id(&body);
    let _ = ResponseHeader::decode(i16::from(version >= 3), &mut Reader::new(body.clone()));
    match kind {
        0 => {
            let ok = decode_response::<ApiVersionsRequest>(version, body.clone()).is_ok();
            let _ = decode_response::<ApiVersionsRequest>(0, body);
            ok
        }
        1 => decode_response::<MetadataRequest>(version, body).is_ok(),
        2 => decode_response::<InitProducerIdRequest>(version, body).is_ok(),
        _ => decode_response::<ProduceRequest>(version, body).is_ok(),
    }
}

// ---------------------------------------------------------------------------------------------
// Part 2: the producer
// ---------------------------------------------------------------------------------------------

/// Inputs that trigger known kprod-core bugs, avoided by default so that a long run can go on
/// (the first aborts the process). See the report of issue 6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum KnownBug {
    /// A Metadata response with a huge partition index: `on_metadata` grows the topic's
    /// partition vector to `partition_index + 1` entries (an allocation of gigabytes, then an
    /// abort), and `i32::MAX + 1` overflows (a panic in debug builds).
    HugePartitionIndex,
    /// A Produce response acknowledging a batch at a base offset whose last record's offset
    /// overflows `i64`: `ack_batch` adds without checking (a panic in debug builds, negative
    /// offsets reported in release builds).
    OffsetOverflow,
}

/// How [`fuzz_producer`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Rewrite inputs that hit a [`KnownBug`] into harmless ones, and count them.
    pub avoid_known_bugs: bool,
}

impl Default for Options {
    /// The known bugs are fixed in kprod-core (see `tests/tests/core_bugs.rs`): hit them.
    fn default() -> Self {
        Self {
            avoid_known_bugs: false,
        }
    }
}

/// Counts from [`fuzz_producer`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerStats {
    /// Inputs fed to producers (each call of a mutator: send, flush, close, a `handle_*`).
    pub inputs: u64,
    /// Runs (each a fresh producer and cluster).
    pub runs: u64,
    /// Of those, hostile runs.
    pub hostile_runs: u64,
    /// Records accepted.
    pub records: u64,
    /// Records refused by `send` (each handed back unchanged).
    pub refused: u64,
    /// Records delivered.
    pub delivered: u64,
    /// Records failed, not persisted.
    pub failed_not_persisted: u64,
    /// Records failed, possibly persisted.
    pub failed_possibly_persisted: u64,
    /// Runs whose producer stopped with a fatal error.
    pub fatal_runs: u64,
    /// Response frames attacked.
    pub attacked_frames: u64,
    /// Faithful runs whose log was checked.
    pub logs_checked: u64,
    /// Inputs rewritten to avoid a known bug.
    pub avoided: BTreeMap<String, u64>,
    /// Runs in which the producer sent more than [`METADATA_STORM`] Metadata requests within
    /// one `retry.backoff.ms` of virtual time: no backoff between refreshes (a kprod-core bug,
    /// see the report of issue 6).
    pub metadata_storms: u64,
    /// Of those, faithful runs.
    pub faithful_metadata_storms: u64,
    /// The most Metadata requests any run sent within one `retry.backoff.ms`.
    pub max_metadata_per_backoff: usize,
    /// Compressed batches handed back to producers ([`Harness::compress_ahead`]), and of
    /// those, kept for a seal (the others came too late).
    pub compressed_ahead: (u64, u64),
}

/// Metadata requests within one `retry.backoff.ms` above which a run counts as a storm.
/// kprod refreshes at once for a reason (a new topic, a leader error), without a minimum
/// interval between refreshes (the Java client keeps `retry.backoff.ms` between any two), so
/// a few within one backoff are normal; a storm sends one per round trip.
pub const METADATA_STORM: usize = 10;

/// One request the broker read, whose response is on its way.
#[derive(Debug, Clone)]
pub struct Req {
    /// API key.
    pub api_key: i16,
    /// Version.
    pub version: i16,
    /// Correlation id.
    pub correlation_id: i32,
    /// The request frame, without its size prefix.
    pub frame: Bytes,
}

#[derive(Debug)]
struct Link {
    node: i32,
    to_broker: BytesMut,
    to_client: VecDeque<(Req, Bytes)>,
    /// The rest of the response frame being delivered.
    head: Bytes,
    /// Bytes read and not yet consumed by the producer.
    rbuf: BytesMut,
    /// The broker processes requests but its responses are lost.
    blackhole: bool,
}

/// A record's final outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Delivered to this partition, at this offset.
    Delivered(i32, Option<i64>),
    /// Failed.
    Failed(Persistence),
}

/// Drives a real [`Producer`] against the broker model, byte by byte.
#[derive(Debug)]
pub struct Harness {
    /// The producer.
    pub producer: Producer,
    /// The broker model.
    pub cluster: Cluster,
    /// Virtual time.
    pub now: Instant,
    links: BTreeMap<ConnId, Link>,
    connecting: Vec<(ConnId, Arc<str>)>,
    /// Nodes whose connects fail.
    pub refuse: BTreeSet<i32>,
    /// Final outcome per record.
    pub outcomes: BTreeMap<RecordId, Outcome>,
    /// Records accepted, in order.
    pub sent: Vec<(RecordId, Record)>,
    /// Inputs fed.
    pub inputs: u64,
    /// Records refused by `send`.
    pub refused: u64,
    /// Whether response frames are attacked.
    pub hostile: bool,
    /// Whether they are attacked before the producer has its producer id (otherwise the
    /// handshake gets valid responses first).
    pub attack_handshake: bool,
    /// Print every input and output to stderr (`KPROD_FUZZ_TRACE=1`), to study a
    /// reproduction.
    pub trace: bool,
    start: Instant,
    /// Response frames attacked.
    pub attacked: u64,
    /// Known bugs avoided, and how often.
    pub avoided: BTreeMap<KnownBug, u64>,
    /// Metadata requests the broker answered within the last `retry.backoff.ms`.
    metadata_window: VecDeque<Instant>,
    /// The most Metadata requests answered within one `retry.backoff.ms` of virtual time.
    pub max_metadata_per_backoff: usize,
    /// Compression tasks taken from the producer and not yet handed back
    /// (`Producer::set_compress_ahead`): handed back late, out of order, or never.
    compressing: Vec<CompressionTask>,
    /// Compressed batches handed back, and of those, kept for a seal.
    pub compressed_ahead: (u64, u64),
    options: Options,
    rng: Rng,
}

impl Harness {
    /// A producer with `cfg` (its bootstrap list is replaced) against `cluster`.
    pub fn new(cluster: Cluster, mut cfg: ProducerConfig, rng: Rng, options: Options) -> Self {
        let now = Instant::now();
        cfg.bootstrap_servers = cluster
            .nodes
            .values()
            .map(|(h, p)| format!("{h}:{p}"))
            .collect();
        cfg.max_sequence = cluster.max_sequence;
        Self {
            producer: Producer::new(cfg, now).expect("valid config"),
            cluster,
            now,
            links: BTreeMap::new(),
            connecting: Vec::new(),
            refuse: BTreeSet::new(),
            outcomes: BTreeMap::new(),
            sent: Vec::new(),
            inputs: 0,
            refused: 0,
            hostile: false,
            attack_handshake: true,
            trace: std::env::var_os("KPROD_FUZZ_TRACE").is_some(),
            start: now,
            attacked: 0,
            avoided: BTreeMap::new(),
            metadata_window: VecDeque::new(),
            max_metadata_per_backoff: 0,
            compressing: Vec::new(),
            compressed_ahead: (0, 0),
            options,
            rng,
        }
    }

    /// Compression ahead of the seal, as a driver would do it between two drains, but with
    /// the fuzzer's timing: takes the tasks listed (or not), and hands some of those it
    /// holds back, in any order, however late (after their batch was sealed, split, failed
    /// or given up); the rest it keeps for later, or for ever.
    pub fn compress_ahead(&mut self, rng: &mut Rng) {
        if rng.chance(600) {
            while let Some(t) = self.producer.poll_compression() {
                self.compressing.push(t);
            }
        }
        for _ in 0..rng.below(self.compressing.len() as u64 + 1) {
            let i = rng.below(self.compressing.len() as u64) as usize;
            let t = self.compressing.swap_remove(i);
            self.compressed_ahead.0 += 1;
            if self.producer.take_compressed(t.run()) {
                self.compressed_ahead.1 += 1;
            }
        }
        self.drain();
    }

    /// Carries out outputs until the producer waits. Returns the deadline it waits for.
    pub fn drain(&mut self) -> Option<Instant> {
        for _ in 0..1_000_000 {
            let o = self.producer.poll_output();
            if self.trace && !matches!(o, Output::Wait { .. } | Output::Transmit { .. }) {
                self.log(&format!("  <- {o:?}"));
            }
            match o {
                Output::Wait { until } => return until,
                Output::Connect { conn, addr } => self.connecting.push((conn, addr)),
                Output::Transmit { conn, bytes } => {
                    if let Some(l) = self.links.get_mut(&conn) {
                        l.to_broker.extend_from_slice(&bytes);
                    }
                }
                Output::Close { conn, .. } => {
                    self.links.remove(&conn);
                    self.connecting.retain(|(c, _)| *c != conn);
                }
                Output::Event(e) => self.record_event(e),
                Output::SaslInput { .. } => unreachable!("the fuzzer configures no SASL"),
            }
        }
        panic!("the producer's outputs did not end after 1,000,000 polls");
    }

    fn log(&self, what: &str) {
        eprintln!(
            "{:>10.3} ms {what}",
            (self.now - self.start).as_secs_f64() * 1000.0
        );
    }

    fn record_event(&mut self, e: Event) {
        match e {
            Event::Delivered(d) => {
                assert!(!d.ids.is_empty(), "a Delivered event without records");
                for (id, offset) in d.records() {
                    self.record_outcome(id, Outcome::Delivered(d.partition, offset));
                }
            }
            Event::Failed { id, persisted, .. } => {
                self.record_outcome(id, Outcome::Failed(persisted))
            }
            _ => {}
        }
    }

    fn record_outcome(&mut self, id: RecordId, o: Outcome) {
        assert!(
            self.producer.next_record_id() > id,
            "an outcome for record {id:?}, which was never accepted"
        );
        if let Some(prev) = self.outcomes.insert(id, o) {
            panic!("record {id:?} got a second outcome {o:?} after {prev:?}");
        }
    }

    /// Sends a record; a refused one must come back unchanged.
    pub fn send(&mut self, record: Record) -> Option<RecordId> {
        self.inputs += 1;
        if self.trace {
            self.log(&format!("send {} {:?}", record.topic, record.partition));
        }
        match self.producer.send(self.now, record.clone()) {
            Ok(id) => {
                self.sent.push((id, record));
                self.drain();
                Some(id)
            }
            Err(e) => {
                self.refused += 1;
                assert_eq!(e.into_record(), record, "a refused record is handed back");
                self.drain();
                None
            }
        }
    }

    /// Whether every accepted record has an outcome.
    pub fn all_resolved(&self) -> bool {
        self.outcomes.len() == self.sent.len()
    }

    /// Finishes the oldest pending connect: established unless its node refuses (or `fail`).
    pub fn finish_connect(&mut self, fail: bool) -> bool {
        if self.connecting.is_empty() {
            return false;
        }
        let (conn, addr) = self.connecting.remove(0);
        self.inputs += 1;
        if self.trace {
            self.log(&format!("connect {conn:?} {addr} fail={fail}"));
        }
        match self.cluster.node_at(&addr) {
            Some(node) if !fail && !self.refuse.contains(&node) => {
                self.links.insert(
                    conn,
                    Link {
                        node,
                        to_broker: BytesMut::new(),
                        to_client: VecDeque::new(),
                        head: Bytes::new(),
                        rbuf: BytesMut::new(),
                        blackhole: false,
                    },
                );
                self.producer.handle_connected(self.now, conn);
            }
            _ => self.producer.handle_connect_failed(self.now, conn),
        }
        self.drain();
        true
    }

    /// The broker reads and answers every whole request waiting on `conn`.
    pub fn process(&mut self, conn: ConnId) -> bool {
        let Some(l) = self.links.get_mut(&conn) else {
            return false;
        };
        let node = l.node;
        let blackhole = l.blackhole;
        let frames = split_frames(&mut l.to_broker);
        let moved = !frames.is_empty();
        for frame in frames {
            let header = (frame.len() >= 8).then(|| {
                (
                    i16::from_be_bytes([frame[0], frame[1]]),
                    i16::from_be_bytes([frame[2], frame[3]]),
                    i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]),
                )
            });
            if header.is_some_and(|(k, _, _)| k == api_key::METADATA) {
                let now = self.now;
                let backoff = self.producer.config().retry_backoff;
                self.metadata_window.push_back(now);
                while self
                    .metadata_window
                    .front()
                    .is_some_and(|t| *t + backoff <= now)
                {
                    self.metadata_window.pop_front();
                }
                self.max_metadata_per_backoff = self
                    .max_metadata_per_backoff
                    .max(self.metadata_window.len());
            }
            if self.trace {
                self.log(&format!("broker {node} reads {header:?} on {conn:?}"));
            }
            let resp = self.cluster.handle(node, frame.clone());
            match (header, resp) {
                (Some((api_key, version, correlation_id)), Some(resp)) => {
                    if !blackhole {
                        if let Some(l) = self.links.get_mut(&conn) {
                            let req = Req {
                                api_key,
                                version,
                                correlation_id,
                                frame,
                            };
                            l.to_client.push_back((req, resp));
                        }
                    }
                }
                _ => {
                    // The broker cannot parse it: it closes the connection.
                    self.disconnect(conn);
                    return true;
                }
            }
        }
        moved
    }

    /// Delivers the next chunk of response bytes on `conn` (of `max` bytes at most; the whole
    /// rest of the current frame when `None`).
    pub fn deliver(&mut self, conn: ConnId, max: Option<usize>) -> bool {
        let Some(l) = self.links.get_mut(&conn) else {
            return false;
        };
        if l.head.is_empty() {
            let Some((req, frame)) = l.to_client.pop_front() else {
                return false;
            };
            let attack_now =
                self.hostile && (self.attack_handshake || self.producer.identity().is_some());
            let frame = if attack_now && self.rng.chance(250) {
                self.attacked += 1;
                attack(&mut self.rng, &self.cluster, &req, &frame)
            } else {
                frame
            };
            let frame = self.avoid(&req, frame);
            let l = self.links.get_mut(&conn).expect("still there");
            l.head = frame;
            if l.head.is_empty() {
                return true; // dropped
            }
        }
        let l = self.links.get_mut(&conn).expect("still there");
        let n = match max {
            Some(m) => m.clamp(1, l.head.len()),
            None => l.head.len(),
        };
        let chunk = l.head.split_to(n);
        if self.trace {
            eprintln!("{:>13} deliver {n} B on {conn:?}", "");
        }
        l.rbuf.extend_from_slice(&chunk);
        let mut buf = std::mem::take(&mut l.rbuf);
        self.inputs += 1;
        self.producer.handle_read(self.now, conn, &mut buf);
        if let Some(l) = self.links.get_mut(&conn) {
            l.rbuf = buf;
        }
        self.drain();
        true
    }

    /// Rewrites a response frame that would hit a known bug (see [`KnownBug`]).
    fn avoid(&mut self, req: &Req, frame: Bytes) -> Bytes {
        if !self.options.avoid_known_bugs || frame.len() < 4 {
            return frame;
        }
        let body = frame.slice(4..);
        let bug = match req.api_key {
            api_key::METADATA => decode_response::<MetadataRequest>(req.version, body)
                .ok()
                .filter(|(_, m)| {
                    m.topics
                        .iter()
                        .flat_map(|t| &t.partitions)
                        .any(|p| p.partition_index >= 1 << 16)
                })
                .map(|_| KnownBug::HugePartitionIndex),
            api_key::PRODUCE => decode_response::<ProduceRequest>(req.version, body)
                .ok()
                .filter(|(_, r)| {
                    r.responses
                        .iter()
                        .flat_map(|t| &t.partition_responses)
                        .any(|p| p.base_offset > i64::MAX - (1 << 24))
                })
                .map(|_| KnownBug::OffsetOverflow),
            _ => None,
        };
        match bug {
            Some(b) => {
                *self.avoided.entry(b).or_insert(0) += 1;
                Bytes::new() // the frame is lost instead
            }
            None => frame,
        }
    }

    /// The peer (or the network) closes `conn`.
    pub fn disconnect(&mut self, conn: ConnId) {
        if self.links.remove(&conn).is_some() {
            if self.trace {
                self.log(&format!("disconnect {conn:?}"));
            }
            self.inputs += 1;
            self.producer.handle_disconnected(self.now, conn);
            self.drain();
        }
    }

    /// Moves the clock by `d` and tells the producer.
    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        self.inputs += 1;
        self.producer.handle_timeout(self.now);
        self.drain();
    }

    /// Jumps the clock to the producer's next deadline (100 ms if it has none).
    pub fn jump(&mut self) {
        let next = self.drain();
        self.now = match next {
            Some(t) => t.max(self.now),
            None => self.now + Duration::from_millis(100),
        };
        self.inputs += 1;
        self.producer.handle_timeout(self.now);
        self.drain();
    }

    /// A summary of the connections and the producer, for failure messages.
    pub fn describe(&self) -> String {
        let links: Vec<String> = self
            .links
            .iter()
            .map(|(c, l)| {
                format!(
                    "{}->node {} (to broker {} B {:02x?}, {} responses queued, head {} B, unread {} B)",
                    c.0,
                    l.node,
                    l.to_broker.len(),
                    &l.to_broker[..l.to_broker.len().min(80)],
                    l.to_client.len(),
                    l.head.len(),
                    l.rbuf.len()
                )
            })
            .collect();
        format!(
            "links [{}]; connecting {:?}; producer conns {:?}; identity {:?}; fatal {:?}; \
             pending {}; closed {}",
            links.join(", "),
            self.connecting,
            self.producer.connections().collect::<Vec<_>>(),
            self.producer.identity(),
            self.producer.fatal_error(),
            self.producer.pending_records(),
            self.producer.is_closed()
        )
    }

    /// Open links.
    pub fn conns(&self) -> Vec<ConnId> {
        self.links.keys().copied().collect()
    }

    /// Sets whether the broker's responses on `conn` are lost.
    pub fn set_blackhole(&mut self, conn: ConnId, on: bool) {
        if let Some(l) = self.links.get_mut(&conn) {
            l.blackhole = on;
        }
    }

    /// One faithful round: connects succeed (unless refused), every request is answered and
    /// every response delivered whole. Returns whether anything moved.
    pub fn settle_round(&mut self) -> bool {
        let moved = self.connect_and_process();
        self.deliver_all() || moved
    }

    /// Connects succeed (unless refused) and the broker answers every request waiting.
    pub fn connect_and_process(&mut self) -> bool {
        let mut moved = false;
        while self.finish_connect(false) {
            moved = true;
        }
        for c in self.conns() {
            moved |= self.process(c);
        }
        moved
    }

    /// Delivers every queued response whole.
    pub fn deliver_all(&mut self) -> bool {
        let mut moved = false;
        for c in self.conns() {
            while self.deliver(c, None) {
                moved = true;
            }
        }
        moved
    }

    /// Replaces each queued response frame (not yet partly delivered) by `f(request, frame)`.
    pub fn rewrite_responses(&mut self, mut f: impl FnMut(&Req, Bytes) -> Bytes) {
        for l in self.links.values_mut() {
            for (req, frame) in l.to_client.iter_mut() {
                *frame = f(req, std::mem::take(frame));
            }
        }
    }

    /// Checks every partition's log against the outcomes (faithful runs only).
    pub fn check_logs(&self) {
        let mut by_value: BTreeMap<&[u8], (usize, RecordId, &Record)> = BTreeMap::new();
        for (i, (id, r)) in self.sent.iter().enumerate() {
            if let Some(v) = &r.value {
                by_value.insert(v, (i, *id, r));
            }
        }
        let mut found: BTreeMap<RecordId, Vec<(i32, i64)>> = BTreeMap::new();
        for ((topic, p), part) in &self.cluster.partitions {
            let mut last = None;
            for (offset, rec) in part.log.iter().enumerate() {
                let Some(&(i, id, r)) = rec.value.as_deref().and_then(|v| by_value.get(v)) else {
                    panic!("{topic}-{p} offset {offset}: a record nobody sent");
                };
                assert_eq!(&r.topic, topic, "record {id:?} in the wrong topic");
                if let Some(l) = last {
                    assert!(
                        i > l,
                        "{topic}-{p}: record #{i} after #{l} (order or duplicate)"
                    );
                }
                last = Some(i);
                found.entry(id).or_default().push((*p, offset as i64));
            }
        }
        for (id, r) in &self.sent {
            let places = found.get(id).map(Vec::as_slice).unwrap_or(&[]);
            assert!(places.len() <= 1, "record {id:?} duplicated at {places:?}");
            match self.outcomes.get(id) {
                Some(Outcome::Delivered(p, Some(o))) => assert_eq!(
                    places,
                    &[(*p, *o)],
                    "record {id:?} ({:?}) acknowledged at {p}/{o}",
                    r.topic
                ),
                Some(Outcome::Delivered(p, None)) => assert!(
                    places.iter().any(|(q, _)| q == p),
                    "record {id:?} acknowledged without offset but absent"
                ),
                Some(Outcome::Failed(Persistence::NotPersisted)) => assert!(
                    places.is_empty(),
                    "record {id:?} failed NotPersisted but is at {places:?}"
                ),
                Some(Outcome::Failed(Persistence::PossiblyPersisted)) => {}
                None => panic!("record {id:?} has no outcome"),
            }
        }
    }
}

/// An attacked version of `frame`, the response to `req` (empty: the frame is lost).
fn attack(rng: &mut Rng, cluster: &Cluster, req: &Req, frame: &Bytes) -> Bytes {
    let corr = req.correlation_id;
    let with_size = |body: &[u8]| {
        let mut f = BytesMut::with_capacity(body.len() + 4);
        f.extend_from_slice(&(body.len() as i32).to_be_bytes());
        f.extend_from_slice(body);
        f.freeze()
    };
    let header_len = 4 + usize::from(response_header_is_flexible(req));
    match rng.below(11) {
        // Bit flips anywhere after the size prefix.
        0 => {
            let mut b = frame[4..].to_vec();
            for _ in 0..rng.range(1, 3) {
                if !b.is_empty() {
                    let i = rng.below(b.len() as u64) as usize;
                    b[i] ^= 1 << rng.below(8);
                }
            }
            with_size(&b)
        }
        // Bit flips after the header: the right response, garbled.
        1 => {
            let mut b = frame[4..].to_vec();
            if b.len() > header_len {
                for _ in 0..rng.range(1, 4) {
                    let i = header_len + rng.below((b.len() - header_len) as u64) as usize;
                    b[i] ^= 1 << rng.below(8);
                }
            }
            with_size(&b)
        }
        // A truncated body with a matching size prefix.
        2 => {
            let keep = rng.below(frame.len() as u64 - 4) as usize;
            with_size(&frame[4..4 + keep])
        }
        // Bytes appended, with a matching size prefix.
        3 => {
            let mut b = frame[4..].to_vec();
            let n = rng.range(1, 8);
            b.extend(rng.bytes(n));
            with_size(&b)
        }
        // A random body behind the right correlation id.
        4 => {
            let mut b = corr.to_be_bytes().to_vec();
            let n = rng.range(0, 80);
            b.extend(rng.bytes(n));
            with_size(&b)
        }
        // General mutations of the body.
        5 => with_size(&mutate(rng, &frame[4..], &[])),
        // A garbage size prefix.
        6 => {
            let mut b = frame.to_vec();
            let size: i32 =
                rng.pick(&[-1, i32::MIN, i32::MAX, 0, 3, 1 << 24, (b.len() as i32) + 3]);
            b[..4].copy_from_slice(&size.to_be_bytes());
            Bytes::from(b)
        }
        // Lost.
        7 => Bytes::new(),
        // Twice.
        8 => {
            let mut b = frame.to_vec();
            b.extend_from_slice(frame);
            Bytes::from(b)
        }
        // Another correlation id.
        9 => {
            let mut b = frame.to_vec();
            let other = corr.wrapping_add(rng.pick(&[1, -1, 1 << 16]));
            b[4..8].copy_from_slice(&other.to_be_bytes());
            Bytes::from(b)
        }
        // A well-formed response of the right type, with random contents.
        _ => random_response(rng, cluster, req),
    }
}

fn response_header_is_flexible(req: &Req) -> bool {
    match req.api_key {
        api_key::API_VERSIONS => false,
        api_key::METADATA => MetadataRequest::is_flexible(req.version),
        api_key::INIT_PRODUCER_ID => InitProducerIdRequest::is_flexible(req.version),
        _ => ProduceRequest::is_flexible(req.version),
    }
}

/// A well-formed response to `req` with random contents.
fn random_response(rng: &mut Rng, cluster: &Cluster, req: &Req) -> Bytes {
    let (v, corr) = (req.version, req.correlation_id);
    let body = |req: &Req, header_version: i16| {
        let mut r = Reader::new(req.frame.clone());
        RequestHeader::decode(header_version, &mut r)
            .ok()
            .map(|_| Bytes::copy_from_slice(r.peek_rest()))
    };
    match req.api_key {
        api_key::API_VERSIONS => {
            let v = if ApiVersionsRequest::VERSIONS.contains(v) {
                v
            } else {
                0
            };
            encode_response::<ApiVersionsRequest>(&gen_api_versions(rng), v, corr)
        }
        api_key::METADATA => {
            let topics: Vec<String> = body(req, MetadataRequest::request_header_version(v))
                .and_then(|b| MetadataRequest::decode_exact(v, b).ok())
                .and_then(|m| m.topics)
                .map(|ts| ts.into_iter().filter_map(|t| t.name).collect())
                .unwrap_or_default();
            let nodes: Vec<(i32, String, i32)> = cluster
                .nodes
                .iter()
                .map(|(id, (h, p))| (*id, h.clone(), *p))
                .collect();
            let mut m = gen_metadata(rng, v, &topics, &nodes);
            if v < 12 {
                for t in &mut m.topics {
                    t.name.get_or_insert_with(|| "x".into());
                }
            }
            encode_response::<MetadataRequest>(&m, v, corr)
        }
        api_key::INIT_PRODUCER_ID => {
            encode_response::<InitProducerIdRequest>(&gen_init_producer_id(rng), v, corr)
        }
        _ => {
            let produce = body(req, ProduceRequest::request_header_version(v))
                .and_then(|b| ProduceRequest::decode_exact(v, b).ok());
            let r = gen_produce(rng, v, produce.as_ref());
            encode_response::<ProduceRequest>(&r, v, corr)
        }
    }
}

/// Virtual time a round of requests and responses takes while healing.
const ROUND_TRIP: Duration = Duration::from_micros(100);

/// The topics every run uses: (name, partitions, leader).
const TOPICS: &[(&str, i32, i32)] = &[("t0", 3, 1), ("t1", 2, 2)];

fn random_config(rng: &mut Rng) -> ProducerConfig {
    let request_timeout = Duration::from_millis(rng.range(200, 1500) as u64);
    let linger = Duration::from_millis(rng.range(0, 20) as u64);
    let max_request_size = rng.pick(&[1 << 20, 2048, 64 << 10]);
    ProducerConfig {
        bootstrap_servers: vec!["x:1".into()],
        max_in_flight: rng.range(1, 5),
        linger,
        batch_size: rng.range(64, 2048),
        buffer_memory: rng
            .pick(&[1 << 20, 64 << 10, 32 << 20])
            .max(max_request_size),
        max_request_size,
        request_timeout,
        delivery_timeout: linger
            + request_timeout
            + Duration::from_millis(rng.range(0, 6000) as u64),
        retry_backoff: Duration::from_millis(rng.range(1, 50) as u64),
        retry_backoff_max: Duration::from_millis(rng.range(50, 500) as u64),
        reconnect_backoff: Duration::from_millis(rng.range(1, 50) as u64),
        metadata_max_age: Duration::from_millis(rng.range(500, 10_000) as u64),
        allow_auto_topic_creation: rng.chance(500),
        max_block: Duration::from_millis(rng.range(50, 3000) as u64),
        gap_policy: rng.pick(&[
            GapPolicy::ContinueWithGap,
            GapPolicy::CutPartition,
            GapPolicy::Fatal,
        ]),
        data_loss_policy: rng.pick(&[DataLossPolicy::SignalAndContinue, DataLossPolicy::Fatal]),
        max_epoch: rng.pick(&[i16::MAX, 2, 5]),
        // Drawn from a side stream so that the other draws of a seed stay what they were.
        compression: Compression::new(
            Rng::new(rng.clone().next_u64() ^ 0xc0de).pick(&CompressionType::ALL),
        ),
        // A driver's per-record memory charged against `buffer.memory` (kprod-tokio's), in a
        // third of the runs; a side stream too.
        record_overhead: Rng::new(rng.clone().next_u64() ^ 0x0ead).pick(&[0, 0, 137]),
        // A driver reporting its writers' progress (kprod-tokio's), in half the runs; a side
        // stream too.
        write_reports: Rng::new(rng.clone().next_u64() ^ 0x3717).chance(500),
        // A driver reading what came during a stall before its timeouts (kprod-tokio's, at
        // one second), in half the runs, with a grace the time steps often pass; a side
        // stream too.
        late_wake_grace: {
            let mut side = Rng::new(rng.clone().next_u64() ^ 0x1a7e);
            side.chance(500)
                .then(|| Duration::from_millis(side.pick(&[50, 300, 1000])))
        },
        ..Default::default()
    }
}

fn random_cluster(rng: &mut Rng) -> Cluster {
    let nodes = rng.range(2, 3);
    let addrs: Vec<String> = (0..nodes)
        .map(|i| format!("b{}:{}", i + 1, 9092 + i))
        .collect();
    let refs: Vec<&str> = addrs.iter().map(String::as_str).collect();
    let mut c = Cluster::new(rng.pick(&BrokerMode::ALL), &refs);
    for (name, partitions, leader) in TOPICS {
        c.create_topic(name, *partitions, *leader);
    }
    c.leader_hints = rng.chance(500);
    if rng.chance(200) {
        // A small sequence ring, to reach the wrap. It must stay more than twice as large as
        // the sequences one partition can have in flight (5 batches of at most 2048 bytes,
        // so a few hundred records), or a resend and the next lap look alike to the broker.
        c.max_sequence = 4095;
    }
    c
}

fn random_record(rng: &mut Rng, run: u64, n: usize) -> Record {
    let topic = match rng.below(40) {
        0 => "missing-topic".to_owned(),
        1 => "bad topic".to_owned(),
        2 => String::new(),
        k => TOPICS[(k % 2) as usize].0.to_owned(),
    };
    let size = if rng.chance(20) {
        rng.range(2000, 70_000)
    } else {
        rng.range(0, 200)
    };
    let mut value = format!("r{run}-{n}-").into_bytes();
    value.resize(value.len() + size, b'.');
    let mut r = Record::new(topic, value).with_timestamp(1_700_000_000_000 + n as i64);
    if rng.chance(300) {
        let n = rng.range(0, 10);
        r = r.with_key(rng.bytes(n));
    }
    if rng.chance(200) {
        r = r.with_partition(rng.small_i32(3).wrapping_sub(i32::from(rng.chance(100))));
    }
    r
}

/// One run: a random walk of `steps` inputs (hostile or not), then healing until every record
/// has resolved. Returns the harness for inspection.
pub fn producer_run(seed: u64, run: u64, steps: usize, hostile: bool, options: Options) -> Harness {
    let mut rng = Rng::new(seed ^ run.wrapping_mul(0x2545_f491_4f6c_dd1d));
    let cfg = random_config(&mut rng);
    let cluster = random_cluster(&mut rng);
    let node_ids: Vec<i32> = cluster.nodes.keys().copied().collect();
    let mut h = Harness::new(cluster, cfg, Rng::new(rng.next_u64()), options);
    h.hostile = hostile;
    h.attack_handshake = rng.chance(500);
    let ahead = rng.chance(500);
    h.producer.set_compress_ahead(ahead);
    let mut n = 0;
    let mut closed = false;
    h.drain();
    for _ in 0..steps {
        match rng.below(20) {
            0..=4 => {
                if !closed || rng.chance(100) {
                    let r = random_record(&mut rng, run, n);
                    n += 1;
                    h.send(r);
                }
            }
            5 => {
                h.inputs += 1;
                h.producer.flush(h.now);
                h.drain();
            }
            6 => {
                h.finish_connect(rng.chance(200));
            }
            7 | 8 => {
                let conns = h.conns();
                if !conns.is_empty() {
                    let c = rng.pick(&conns);
                    h.process(c);
                }
            }
            9..=11 => {
                let conns = h.conns();
                if !conns.is_empty() {
                    let c = rng.pick(&conns);
                    let max = rng.pick(&[1, 3, 7, 64, 100_000]);
                    h.deliver(c, Some(max));
                }
            }
            12 => {
                let conns = h.conns();
                if !conns.is_empty() && rng.chance(300) {
                    let c = rng.pick(&conns);
                    h.disconnect(c);
                }
            }
            13 => {
                let ms = rng.pick(&[1, 5, 20, 100, 400, 1500]);
                h.advance(Duration::from_millis(ms));
                // Now and then a report of a writer busy since some byte of a connection's
                // stream (`Producer::handle_writing`); drawn from a side stream, so that the
                // other draws of a seed stay what they were.
                let mut side = Rng::new(rng.clone().next_u64() ^ 0x3717);
                let conns = h.conns();
                if !conns.is_empty() && side.chance(300) {
                    let c = side.pick(&conns);
                    h.inputs += 1;
                    h.producer.handle_writing(h.now, c, side.below(1 << 16));
                    h.drain();
                }
            }
            14 => h.jump(),
            15 => {
                // Broker-side trouble.
                let (topic, partitions, _) = TOPICS[rng.below(2) as usize];
                let p = rng.below(partitions as u64) as i32;
                match rng.below(4) {
                    0 => {
                        let node = rng.pick(&node_ids);
                        h.cluster.move_leader(topic, p, node);
                    }
                    1 => {
                        let code = rng.pick(&[
                            ErrorCode::NotLeaderOrFollower,
                            ErrorCode::NotEnoughReplicas,
                            ErrorCode::RequestTimedOut,
                            ErrorCode::NotEnoughReplicasAfterAppend,
                            ErrorCode::CorruptMessage,
                            ErrorCode::MessageTooLarge,
                            ErrorCode::InvalidRecord,
                            ErrorCode::UnknownServerError,
                            ErrorCode::KafkaStorageError,
                        ]);
                        let append = matches!(
                            code,
                            ErrorCode::RequestTimedOut | ErrorCode::NotEnoughReplicasAfterAppend
                        );
                        h.cluster
                            .partition_mut(topic, p)
                            .inject
                            .push_back(Injection { code, append });
                    }
                    2 => {
                        let node = rng.pick(&node_ids);
                        if !h.refuse.insert(node) {
                            h.refuse.remove(&node);
                        }
                    }
                    _ => {
                        let conns = h.conns();
                        if !conns.is_empty() {
                            let c = rng.pick(&conns);
                            h.set_blackhole(c, rng.chance(500));
                        }
                    }
                }
            }
            16 if rng.chance(100) => {
                h.inputs += 1;
                h.producer.close(h.now);
                closed = true;
                h.drain();
            }
            _ => {
                if ahead {
                    h.compress_ahead(&mut rng);
                }
                h.settle_round();
            }
        }
    }
    // Heal: faithful answers, no refusals, no blackholes; run until everything resolved.
    h.hostile = false;
    h.refuse.clear();
    for c in h.conns() {
        h.set_blackhole(c, false);
    }
    let cfg = h.producer.config().clone();
    let bound = h.now + 4 * (cfg.delivery_timeout + cfg.request_timeout) + cfg.max_block;
    let mut rounds = 0;
    while !h.all_resolved() {
        rounds += 1;
        assert!(
            h.now <= bound && rounds < 100_000,
            "liveness: {} of {} records resolved {:?} after healing ({rounds} rounds): {}",
            h.outcomes.len(),
            h.sent.len(),
            h.now - (bound - 4 * (cfg.delivery_timeout + cfg.request_timeout) - cfg.max_block),
            h.describe(),
        );
        // A round trip takes time: a producer that keeps the broker busy still sees its
        // clock move.
        if h.settle_round() {
            h.advance(ROUND_TRIP);
        } else {
            h.jump();
        }
    }
    h.inputs += 1;
    h.producer.close(h.now);
    for _ in 0..100 {
        if h.producer.is_closed() || h.producer.fatal_error().is_some() {
            break;
        }
        if !h.settle_round() {
            h.jump();
        }
    }
    assert!(
        h.producer.is_closed() || h.producer.fatal_error().is_some(),
        "the producer did not close with every record resolved"
    );
    assert_eq!(h.producer.pending_records(), 0);
    assert_eq!(h.producer.buffered_bytes(), 0);
    h
}

/// Runs producers until `n` inputs were fed. Panics with a reproduction line on the first
/// failure.
pub fn fuzz_producer(seed: u64, n: u64, options: Options) -> ProducerStats {
    let mut stats = ProducerStats::default();
    let mut run = 0;
    while stats.inputs < n {
        let mut rng = Rng::new(seed ^ 0x5eed ^ run);
        let hostile = rng.chance(500);
        let steps = rng.range(20, 400);
        let result = catch_unwind(AssertUnwindSafe(|| {
            producer_run(seed, run, steps, hostile, options)
        }));
        let h = match result {
            Ok(h) => h,
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                panic!(
                    "producer run failed: {msg}\nreproduce: producer_run(seed {seed:#x}, run {run}, \
                     steps {steps}, hostile {hostile}, {options:?})"
                );
            }
        };
        if !hostile {
            let checked = catch_unwind(AssertUnwindSafe(|| h.check_logs()));
            if let Err(e) = checked {
                let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
                panic!(
                    "log check failed: {msg}\nreproduce: producer_run(seed {seed:#x}, run {run}, \
                     steps {steps}, hostile false, {options:?})"
                );
            }
            stats.logs_checked += 1;
        }
        stats.runs += 1;
        stats.hostile_runs += u64::from(hostile);
        stats.inputs += h.inputs;
        stats.records += h.sent.len() as u64;
        stats.refused += h.refused;
        stats.attacked_frames += h.attacked;
        stats.fatal_runs += u64::from(h.producer.fatal_error().is_some());
        stats.compressed_ahead.0 += h.compressed_ahead.0;
        stats.compressed_ahead.1 += h.compressed_ahead.1;
        for o in h.outcomes.values() {
            match o {
                Outcome::Delivered(..) => stats.delivered += 1,
                Outcome::Failed(Persistence::NotPersisted) => stats.failed_not_persisted += 1,
                Outcome::Failed(Persistence::PossiblyPersisted) => {
                    stats.failed_possibly_persisted += 1;
                }
            }
        }
        if h.max_metadata_per_backoff > METADATA_STORM {
            stats.metadata_storms += 1;
            stats.faithful_metadata_storms += u64::from(!hostile);
        }
        stats.max_metadata_per_backoff = stats
            .max_metadata_per_backoff
            .max(h.max_metadata_per_backoff);
        for (bug, k) in &h.avoided {
            *stats.avoided.entry(format!("{bug:?}")).or_insert(0) += k;
        }
        run += 1;
    }
    stats
}

/// The whole fuzz run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Seed.
    pub seed: u64,
    /// Decoder half.
    pub decoders: DecoderStats,
    /// Producer half.
    pub producer: ProducerStats,
}

impl Report {
    /// Inputs fed in total.
    pub fn inputs(&self) -> u64 {
        self.decoders.inputs + self.producer.inputs
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = &self.decoders;
        let p = &self.producer;
        let mut s = String::new();
        let _ = writeln!(s, "seed {:#x}: {} inputs", self.seed, self.inputs());
        let _ = writeln!(
            s,
            "  decoders: {} inputs ({} accepted, {} valid encodings all decoded)",
            d.inputs, d.accepted, d.valid
        );
        let _ = writeln!(
            s,
            "  producer: {} inputs over {} runs ({} hostile, {} logs checked), {} records \
             accepted, {} refused and handed back",
            p.inputs, p.runs, p.hostile_runs, p.logs_checked, p.records, p.refused
        );
        let _ = writeln!(
            s,
            "            outcomes: {} delivered, {} failed not persisted, {} failed possibly \
             persisted; {} fatal runs; {} response frames attacked",
            p.delivered,
            p.failed_not_persisted,
            p.failed_possibly_persisted,
            p.fatal_runs,
            p.attacked_frames
        );
        let _ = writeln!(
            s,
            "  metadata storms (>{METADATA_STORM} Metadata requests within retry.backoff.ms): {} \
             runs ({} faithful); most within retry.backoff.ms: {}",
            p.metadata_storms, p.faithful_metadata_storms, p.max_metadata_per_backoff
        );
        let _ = writeln!(
            s,
            "  compressed ahead of the seal: {} batches handed back, {} kept",
            p.compressed_ahead.0, p.compressed_ahead.1
        );
        let _ = write!(s, "  known bugs avoided: {:?}", p.avoided);
        f.write_str(&s)
    }
}

/// Feeds `inputs` inputs in total, half to the decoders and half to producers.
pub fn run(seed: u64, inputs: u64, options: Options) -> Report {
    let mut rng = Rng::new(seed);
    let decoders = fuzz_decoders(&mut rng, inputs / 2);
    let producer = fuzz_producer(seed, inputs - inputs / 2, options);
    Report {
        seed,
        decoders,
        producer,
    }
}
