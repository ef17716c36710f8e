//! Shared by the benches: a producer driven to the ready state by a minimal in-process
//! responder, and a way to push N records through the encode path. The core's hand-driven
//! tests share it too (`core/tests/harness`), so not every item is used by every bench.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kprod_core::protocol::api_versions::{ApiVersion, ApiVersionsRequest, ApiVersionsResponse};
use kprod_core::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use kprod_core::protocol::metadata::{
    MetadataBroker, MetadataPartition, MetadataRequest, MetadataResponse, MetadataTopic,
};
use kprod_core::protocol::produce::{
    PartitionProduceResponse, ProduceRequest, ProduceResponse, TopicProduceResponse,
};
use kprod_core::protocol::sasl::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kprod_core::protocol::{api_key, encode_response, Message, Reader, Request, RequestHeader};
pub use kprod_core::Record;
use kprod_core::{ConnId, Output, Producer, ProducerConfig};

pub const TOPIC: &str = "bench";

/// The header version a request of api `key` at `version` carries.
pub fn header_version(key: i16, version: i16) -> i16 {
    match key {
        api_key::API_VERSIONS => ApiVersionsRequest::request_header_version(version),
        api_key::SASL_HANDSHAKE => SaslHandshakeRequest::request_header_version(version),
        api_key::SASL_AUTHENTICATE => SaslAuthenticateRequest::request_header_version(version),
        api_key::PRODUCE => ProduceRequest::request_header_version(version),
        api_key::METADATA => MetadataRequest::request_header_version(version),
        api_key::INIT_PRODUCER_ID => InitProducerIdRequest::request_header_version(version),
        _ => 2,
    }
}

/// A request frame (size prefix included): its api key, version, header and body.
pub fn parse_request(frame: &[u8]) -> (i16, i16, RequestHeader, Bytes) {
    let body = Bytes::copy_from_slice(&frame[4..]);
    let mut r = Reader::new(body.clone());
    let key = r.i16().unwrap();
    let version = r.i16().unwrap();
    let mut r = Reader::new(body);
    let h = RequestHeader::decode(header_version(key, version), &mut r).unwrap();
    let rest = Bytes::copy_from_slice(r.peek_rest());
    (key, version, h, rest)
}

/// The responder's ApiVersions answer (Produce v12, Metadata v12, ApiVersions v3,
/// InitProducerId v5) with `extra` apis, each (key, max version).
pub fn api_versions_answer(version: i16, corr: i32, extra: &[(i16, i16)]) -> Bytes {
    let base = [
        (api_key::PRODUCE, 12),
        (api_key::METADATA, 12),
        (api_key::API_VERSIONS, 3),
        (api_key::INIT_PRODUCER_ID, 5),
    ];
    let api_keys = (base.iter().chain(extra))
        .map(|&(api_key, max_version)| ApiVersion {
            api_key,
            min_version: 0,
            max_version,
        })
        .collect();
    let resp = ApiVersionsResponse {
        error_code: 0,
        api_keys,
        throttle_time_ms: 0,
    };
    encode_response::<ApiVersionsRequest>(&resp, version, corr)
}

/// A Metadata answer naming brokers `nodes` (node 1 is `bench:9092`, node n > 1
/// `benchn:9092`, controller 1) and [`TOPIC`] with `partitions`.
pub fn metadata_answer(
    version: i16,
    corr: i32,
    nodes: &[i32],
    partitions: Vec<MetadataPartition>,
) -> Bytes {
    let broker = |node_id: i32| MetadataBroker {
        node_id,
        host: match node_id {
            1 => "bench".into(),
            n => format!("bench{n}"),
        },
        port: 9092,
        rack: None,
    };
    let resp = MetadataResponse {
        throttle_time_ms: 0,
        brokers: nodes.iter().map(|&n| broker(n)).collect(),
        cluster_id: None,
        controller_id: 1,
        topics: vec![MetadataTopic {
            error_code: 0,
            name: Some(TOPIC.into()),
            topic_id: [0; 16],
            is_internal: false,
            partitions,
            topic_authorized_operations: i32::MIN,
        }],
        cluster_authorized_operations: i32::MIN,
    };
    encode_response::<MetadataRequest>(&resp, version, corr)
}

/// One partition's Produce answer: `error_code` and `base_offset`, nothing else.
pub fn partition_answer(index: i32, error_code: i16, base_offset: i64) -> PartitionProduceResponse {
    PartitionProduceResponse {
        index,
        error_code,
        base_offset,
        log_append_time_ms: -1,
        log_start_offset: 0,
        record_errors: vec![],
        error_message: None,
        current_leader: None,
    }
}

/// Answers one request frame (size prefix included) the way a healthy broker would.
pub fn respond(frame: &[u8], next_offset: &mut i64) -> Bytes {
    let (key, version, h, rest) = parse_request(frame);
    let corr = h.correlation_id;
    match key {
        api_key::API_VERSIONS => api_versions_answer(version, corr, &[]),
        api_key::INIT_PRODUCER_ID => encode_response::<InitProducerIdRequest>(
            &InitProducerIdResponse {
                throttle_time_ms: 0,
                error_code: 0,
                producer_id: 7,
                producer_epoch: 0,
            },
            version,
            corr,
        ),
        api_key::METADATA => {
            let partition = MetadataPartition {
                error_code: 0,
                partition_index: 0,
                leader_id: 1,
                leader_epoch: 0,
                replica_nodes: vec![1],
                isr_nodes: vec![1],
                offline_replicas: vec![],
            };
            metadata_answer(version, corr, &[1], vec![partition])
        }
        api_key::PRODUCE => {
            let req = ProduceRequest::decode_exact(version, rest).unwrap();
            let mut responses = Vec::new();
            for t in &req.topic_data {
                let mut parts = Vec::new();
                for p in &t.partition_data {
                    let records = p.records.as_ref().unwrap();
                    let count = i32::from_be_bytes(records[57..61].try_into().unwrap());
                    parts.push(partition_answer(p.index, 0, *next_offset));
                    *next_offset += i64::from(count);
                }
                responses.push(TopicProduceResponse {
                    name: t.name.clone(),
                    partition_responses: parts,
                });
            }
            let resp = ProduceResponse {
                responses,
                throttle_time_ms: 0,
                node_endpoints: vec![],
            };
            encode_response::<ProduceRequest>(&resp, version, corr)
        }
        _ => panic!("unexpected api {key}"),
    }
}

/// A producer with its connection established and a producer id, ready to produce.
pub struct Rig {
    pub producer: Producer,
    pub now: Instant,
    pub conn: Option<ConnId>,
    pub next_offset: i64,
    pub chunks: Vec<Bytes>,
    pub partial: BytesMut,
    /// Where the broker's answers are received, as a driver's read buffer (`kprod-tokio`
    /// reads into one buffer and hands the producer chunks split off it).
    pub read: BytesMut,
    /// Record batches acknowledged so far.
    pub batches_acked: usize,
}

impl Rig {
    pub fn new(batch_size: usize) -> Self {
        let now = Instant::now();
        let cfg = ProducerConfig {
            bootstrap_servers: vec!["bench:9092".into()],
            batch_size,
            linger: Duration::from_secs(60),
            max_request_size: 8 << 20,
            buffer_memory: 256 << 20,
            ..ProducerConfig::default()
        };
        let mut rig = Self {
            producer: Producer::new(cfg, now).unwrap(),
            now,
            conn: None,
            next_offset: 0,
            chunks: Vec::new(),
            partial: BytesMut::new(),
            read: BytesMut::new(),
            batches_acked: 0,
        };
        // One record drives the bootstrap: connect, handshake, metadata, producer id.
        rig.producer
            .send(now, Record::new(topic(), "warm").with_partition(0))
            .unwrap();
        for _ in 0..20 {
            rig.drain_collect();
            rig.answer_pending();
        }
        rig
    }

    /// Drains outputs, keeping transmitted chunks; returns bytes transmitted.
    pub fn drain_collect(&mut self) -> usize {
        let mut n = 0;
        loop {
            match self.producer.poll_output() {
                Output::Wait { .. } => return n,
                Output::Connect { conn, .. } => {
                    self.conn = Some(conn);
                    self.producer.handle_connected(self.now, conn);
                }
                Output::Transmit { bytes, .. } => {
                    // Kept as chunks, as a vectored write would take them; whole frames are
                    // assembled outside the timed region.
                    n += bytes.len();
                    self.chunks.push(bytes);
                }
                Output::Close { .. } | Output::Event(_) | Output::SaslInput { .. } => {}
            }
        }
    }

    /// The whole request frames transmitted so far.
    pub fn take_frames(&mut self) -> Vec<Bytes> {
        // The chunk list keeps its capacity: the drains push into it while they are metered.
        let mut chunks = std::mem::take(&mut self.chunks);
        for c in chunks.drain(..) {
            self.partial.extend_from_slice(&c);
        }
        self.chunks = chunks;
        let mut frames = Vec::new();
        while self.partial.len() >= 4 {
            let size = i32::from_be_bytes(self.partial[..4].try_into().unwrap());
            let len = 4 + size as usize;
            if self.partial.len() < len {
                break;
            }
            frames.push(self.partial.split_to(len).freeze());
        }
        frames
    }

    /// Answers every pending request and feeds the answers back.
    pub fn answer_pending(&mut self) {
        let conn = self.conn.expect("connected");
        for frame in self.take_frames() {
            let resp = respond(&frame, &mut self.next_offset);
            let mut buf = self.received(&resp);
            self.producer.handle_read(self.now, conn, &mut buf);
            self.drain_collect();
        }
    }

    /// `answer` as the producer gets it from a driver: a chunk split off the read buffer.
    pub fn received(&mut self, answer: &[u8]) -> BytesMut {
        self.read.extend_from_slice(answer);
        self.read.split()
    }

    /// The measured path, in steady state: records are handed to the producer a window at a
    /// time (as an application keeps a producer fed), each window's Produce requests are
    /// drained and the acknowledgements fed back, until every record is delivered. Only the
    /// producer's own calls are timed; assembling frames and building the broker's answers
    /// is not. Returns the time spent in the producer and the request bytes it produced.
    pub fn run(&mut self, records: Vec<Record>, window: usize) -> (Duration, usize) {
        let (spent, bytes, _) = self.run_metered(records, window, || 0);
        (spent, bytes)
    }

    /// [`Self::run`], also summing `meter()` deltas over the producer's own calls (the
    /// allocation bench passes an allocation counter).
    pub fn run_metered(
        &mut self,
        records: Vec<Record>,
        window: usize,
        meter: impl Fn() -> usize,
    ) -> (Duration, usize, usize) {
        let conn = self.conn.expect("connected");
        let mut spent = Duration::ZERO;
        let mut metered = 0;
        let mut bytes = 0;
        let mut records = records.into_iter().peekable();
        while records.peek().is_some() || self.producer.pending_records() > 0 {
            let (t, m) = (Instant::now(), meter());
            for r in records.by_ref().take(window) {
                self.producer.send(self.now, r).unwrap();
            }
            self.producer.flush(self.now);
            bytes += self.drain_collect();
            spent += t.elapsed();
            metered += meter() - m;
            let frames = self.take_frames();
            assert!(
                !frames.is_empty() || records.peek().is_none(),
                "producer stalled"
            );
            let answers: Vec<Bytes> = frames
                .iter()
                .map(|f| respond(f, &mut self.next_offset))
                .collect();
            self.batches_acked += frames.len();
            let mut bufs: Vec<BytesMut> = answers.iter().map(|a| self.received(a)).collect();
            let (t, m) = (Instant::now(), meter());
            for buf in &mut bufs {
                self.producer.handle_read(self.now, conn, buf);
                bytes += self.drain_collect();
            }
            spent += t.elapsed();
            metered += meter() - m;
        }
        (spent, bytes, metered)
    }
}

/// The one shared name every record is given, cloned, as an application sending many records
/// to a topic would.
pub fn topic() -> kprod_core::TopicName {
    static TOPIC_NAME: std::sync::OnceLock<kprod_core::TopicName> = std::sync::OnceLock::new();
    TOPIC_NAME
        .get_or_init(|| kprod_core::TopicName::from(TOPIC))
        .clone()
}

/// `n` records with `value_size`-byte values for partition 0.
pub fn records(n: usize, value_size: usize) -> Vec<Record> {
    let value = Bytes::from(vec![0x5a; value_size]);
    let topic = topic();
    (0..n)
        .map(|i| Record {
            topic: topic.clone(),
            partition: Some(0),
            key: None,
            value: Some(value.clone()),
            headers: Vec::new(),
            timestamp: 1_700_000_000_000 + i as i64,
        })
        .collect()
}

/// The physical floor: take the same owned records, copy every value once into a buffer and
/// CRC-32C it. Like the producer, it receives the records by value and drops them.
pub fn floor(records: Vec<Record>, buf: &mut BytesMut) -> u32 {
    buf.clear();
    for r in records {
        if let Some(v) = &r.value {
            buf.extend_from_slice(v);
        }
    }
    crc32c::crc32c(buf)
}
