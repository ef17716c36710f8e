//! A Kafka cluster model that follows the broker's idempotence rules (idempotence-spec §A).
//!
//! It decodes the producer's real request bytes with `kprod_core::protocol` and answers with
//! real response bytes. It is used both by the stateright model and, as a scriptable peer,
//! by the scenario tests.
//!
//! Rules (spec §A.2): R1 batch sanity, R2 exact-range duplicate check against the last five
//! batches (before the epoch and sequence checks), R3 lower epoch => INVALID_PRODUCER_EPOCH,
//! R4 sequence rules (a new epoch must start at 0; same epoch must be last+1 with wrap),
//! R5 append. The broker generation changes what happens to a producer with no state
//! (§A.3), selected by [`BrokerMode`].

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kprod_core::protocol::api_versions::{ApiVersion, ApiVersionsRequest, ApiVersionsResponse};
use kprod_core::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use kprod_core::protocol::metadata::{
    MetadataBroker, MetadataPartition, MetadataRequest, MetadataResponse, MetadataTopic,
};
use kprod_core::protocol::produce::{
    LeaderIdAndEpoch, PartitionProduceResponse, ProduceRequest, ProduceResponse,
    TopicProduceResponse,
};
use kprod_core::protocol::record_batch::RecordBatch;
use kprod_core::protocol::{
    api_key, encode_response, ErrorCode, FrameDecoder, Message, Reader, Request, RequestHeader,
};

/// Which broker generation's rules to apply (spec §A.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BrokerMode {
    /// Kafka 1.0–2.4: a producer with no state and a non-zero sequence gets UNKNOWN_PRODUCER_ID.
    /// Its DeleteRecords forgets the producer, as 1.0–2.3 do ([`Cluster::delete_records`]).
    UnknownPidError,
    /// Kafka 2.5–4.4: a producer with no state may start at any sequence.
    Lenient,
    /// Kafka 4.5+ (KAFKA-15591): as Lenient, except a partition that never held a record
    /// requires sequence 0.
    StrictNeverWritten,
    /// Tansu 0.6: DUPLICATE_SEQUENCE_NUMBER for any sequence at or below the last one, and a
    /// client-side epoch bump is refused with PRODUCER_FENCED.
    TansuLike,
    /// Kafka 0.11: only the producer's last batch is cached, and a duplicate of it is answered
    /// with success and the original's offsets (0.11.0.0 `Log.append`; the spec's §A.3 table
    /// says DUPLICATE_SEQUENCE_NUMBER, which the model answered until a review read the
    /// source); a producer with no state and a non-zero sequence gets
    /// OUT_OF_ORDER_SEQUENCE_NUMBER. With [`Advertised::KAFKA_0_11`].
    Kafka011,
}

impl BrokerMode {
    /// Every mode.
    pub const ALL: [Self; 4] = [
        Self::UnknownPidError,
        Self::Lenient,
        Self::StrictNeverWritten,
        Self::TansuLike,
    ];
}

/// The highest versions a broker advertises in ApiVersions (each from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Advertised {
    /// Produce.
    pub produce: i16,
    /// Metadata.
    pub metadata: i16,
    /// InitProducerId.
    pub init_producer_id: i16,
}

impl Advertised {
    /// What kprod speaks at most (Apache Kafka 3.7+ serves these and more).
    pub const LATEST: Self = Self {
        produce: 12,
        metadata: 12,
        init_producer_id: 5,
    };
    /// Apache Kafka 2.3: Produce 0-7, Metadata 0-8, InitProducerId 0-1. No KIP-360 (the
    /// producer must take a new producer id instead of bumping its epoch) and no KIP-951
    /// leader hints (Produce below v10); with [`BrokerMode::UnknownPidError`] this is
    /// Kafka 2.0-2.3 (and, for the versions, what Redpanda and Event Hubs serve).
    pub const KAFKA_2_3: Self = Self {
        produce: 7,
        metadata: 8,
        init_producer_id: 1,
    };
    /// Apache Kafka 0.11: Produce 0-3 (no `log_start_offset`), Metadata 0-4 (no leader
    /// epochs), InitProducerId 0. With [`BrokerMode::Kafka011`].
    pub const KAFKA_0_11: Self = Self {
        produce: 3,
        metadata: 4,
        init_producer_id: 0,
    };
}

/// The last batches of one producer on one partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProducerEntry {
    /// Current epoch.
    pub epoch: i16,
    /// The last (at most 5) batches: (first seq, last seq, first offset).
    pub batches: VecDeque<(i32, i32, i64)>,
}

/// A record as stored in a partition log.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoredRecord {
    /// Value bytes (tests put a record id in them).
    pub value: Option<Bytes>,
    /// Producer id.
    pub producer_id: i64,
    /// Epoch.
    pub epoch: i16,
    /// Sequence of this record.
    pub sequence: i32,
}

/// An error to return for the next Produce of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Injection {
    /// The error code to answer.
    pub code: ErrorCode,
    /// Whether the batch is appended anyway (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    pub append: bool,
}

/// One partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionLog {
    /// Leader node.
    pub leader: i32,
    /// Leader epoch.
    pub leader_epoch: i32,
    /// Every record ever appended: `log[o]` is the record at offset `o`. Records below
    /// `log_start` count as deleted (DeleteRecords, retention) but stay here so tests can
    /// still check them.
    pub log: Vec<StoredRecord>,
    /// Log start offset.
    pub log_start: i64,
    /// Idempotence state per producer id.
    pub producers: BTreeMap<i64, Box<ProducerEntry>>,
    /// Errors to answer to the next Produce requests, in order.
    pub inject: VecDeque<Injection>,
    /// With `Cluster::truncation`: the high watermark, what every in-sync replica holds
    /// (`log[..hw]`). A success answer (acks=all) moves it past its batch, and so past
    /// everything before; an error after the append does not. Otherwise 0.
    pub hw: usize,
    /// The producer state of `log[..hw]`, which a new leader that holds no more rebuilds.
    pub committed: BTreeMap<i64, Box<ProducerEntry>>,
    /// Each batch appended above the high watermark (answered with an error after the
    /// append): the log's end after it and the producer state then, in log order. A new
    /// leader may hold any prefix of them.
    pub above: Vec<(usize, BTreeMap<i64, Box<ProducerEntry>>)>,
}

impl PartitionLog {
    /// Producer-state expiry here: every producer entry is forgotten, the committed state
    /// and that after each batch above the high watermark too.
    fn forget_producers(&mut self) {
        self.producers.clear();
        self.committed.clear();
        self.above.iter_mut().for_each(|a| a.1.clear());
    }

    fn new(leader: i32) -> Self {
        Self {
            leader,
            leader_epoch: 0,
            log: Vec::new(),
            log_start: 0,
            producers: BTreeMap::new(),
            inject: VecDeque::new(),
            hw: 0,
            committed: BTreeMap::new(),
            above: Vec::new(),
        }
    }
}

/// Counters of what the broker saw, for properties and reachability checks.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct BrokerStats {
    /// Retries answered from the dedup cache.
    pub deduplicated: u32,
    /// OUT_OF_ORDER_SEQUENCE_NUMBER answers.
    pub out_of_order: u32,
    /// INVALID_PRODUCER_EPOCH answers (a client bug for an idempotent producer).
    pub invalid_epoch: u32,
    /// A new-epoch batch with a non-zero sequence (a client bug).
    pub new_epoch_nonzero_seq: u32,
    /// A same-epoch batch that overlapped a cached batch without matching it exactly.
    pub overlap: u32,
    /// A batch whose base sequence is above the largest (a client that did not wrap: past
    /// `i32::MAX` Kafka's sequence turns negative, refused INVALID_RECORD by `LogValidator`).
    pub beyond_max_sequence: u32,
    /// A batch whose epoch is above the largest (a client that bumped an exhausted epoch
    /// instead of taking a new producer id: past `i16::MAX` Kafka's epoch turns negative,
    /// below the current one, refused INVALID_PRODUCER_EPOCH).
    pub beyond_max_epoch: u32,
    /// A Produce request of the idempotent producer with `acks` other than -1: the broker
    /// model answers every request as if replicated, so it must not see one (Kafka answers
    /// `acks=1` after the leader's own append, and `acks=0` not at all).
    pub acks_not_all: u32,
    /// Highest epoch seen.
    pub max_epoch: i16,
    /// Whether a batch wrapped the sequence past its maximum.
    pub wrapped: bool,
    /// Producer ids handed out.
    pub producer_ids: u32,
}

/// The first producer id the model's brokers hand out (then counting up).
pub const FIRST_PRODUCER_ID: i64 = 1000;

/// The cluster: nodes, topics and partition logs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cluster {
    /// Rules to apply.
    pub mode: BrokerMode,
    /// Node ids with their `host:port`.
    pub nodes: Arc<BTreeMap<i32, (String, i32)>>,
    /// Partitions by (topic, index).
    pub partitions: BTreeMap<(String, i32), Box<PartitionLog>>,
    /// Largest sequence before wrapping to 0.
    pub max_sequence: i32,
    /// The largest producer epoch (Kafka's `i16::MAX`; the model's is small, so that the
    /// exhaustion is reached).
    pub max_epoch: i16,
    /// Next producer id to hand out.
    pub next_producer_id: i64,
    /// Topics that metadata pretends are missing (a metadata flap, spec D10).
    pub hidden_topics: Vec<String>,
    /// What the broker saw.
    pub stats: BrokerStats,
    /// Whether unknown topics are created on Metadata.
    pub auto_create_partitions: i32,
    /// Errors to answer to the next InitProducerId requests, in order.
    pub init_producer_id_errors: VecDeque<ErrorCode>,
    /// Whether NOT_LEADER_OR_FOLLOWER answers carry the KIP-951 `CurrentLeader` hint.
    pub leader_hints: bool,
    /// The versions advertised in ApiVersions; a request above them is not answered.
    pub advertised: Advertised,
    /// Whether the high watermark is kept, so that a leader change may truncate what lies
    /// above it (`move_leader_truncating`). Off, nothing about it is state.
    pub truncation: bool,
}

/// Parses a `host:port` node address.
fn split_addr(addr: &str) -> (String, i32) {
    match addr.rsplit_once(':') {
        Some((h, p)) => (h.to_owned(), p.parse().unwrap_or(0)),
        None => (addr.to_owned(), 0),
    }
}

impl Cluster {
    /// A cluster whose nodes listen at the given addresses (node ids 1, 2, ...).
    pub fn new(mode: BrokerMode, addrs: &[&str]) -> Self {
        Self {
            mode,
            nodes: Arc::new(
                addrs
                    .iter()
                    .enumerate()
                    .map(|(i, a)| (i as i32 + 1, split_addr(a)))
                    .collect(),
            ),
            partitions: BTreeMap::new(),
            max_sequence: i32::MAX,
            max_epoch: i16::MAX,
            next_producer_id: FIRST_PRODUCER_ID,
            hidden_topics: Vec::new(),
            stats: BrokerStats::default(),
            auto_create_partitions: 0,
            init_producer_id_errors: VecDeque::new(),
            leader_hints: false,
            advertised: Advertised::LATEST,
            truncation: false,
        }
    }

    /// The node listening at `host:port`, if any.
    pub fn node_at(&self, addr: &str) -> Option<i32> {
        self.nodes
            .iter()
            .find(|(_, (h, p))| format!("{h}:{p}") == addr)
            .map(|(n, _)| *n)
    }

    /// Creates a topic whose partitions are all led by `leader`.
    pub fn create_topic(&mut self, name: &str, partitions: i32, leader: i32) {
        for p in 0..partitions {
            self.partitions
                .insert((name.to_owned(), p), Box::new(PartitionLog::new(leader)));
        }
    }

    /// The partition `(topic, p)`.
    pub fn partition(&self, topic: &str, p: i32) -> &PartitionLog {
        &self.partitions[&(topic.to_owned(), p)]
    }

    /// The partition `(topic, p)`, mutably.
    pub fn partition_mut(&mut self, topic: &str, p: i32) -> &mut PartitionLog {
        self.partitions
            .get_mut(&(topic.to_owned(), p))
            .expect("partition exists")
    }

    /// Moves leadership of a partition to `node`. The new leader has the whole log and the
    /// producer state (a clean election of an in-sync follower).
    pub fn move_leader(&mut self, topic: &str, p: i32, node: i32) {
        let part = self.partition_mut(topic, p);
        part.leader = node;
        part.leader_epoch += 1;
    }

    /// Moves leadership of a partition to `node`, an in-sync follower that holds the log up
    /// to the high watermark and the first `held` batches above it, no more: the rest
    /// (batches answered with an error after the append, never acknowledged) is truncated,
    /// and the new leader's producer state is rebuilt from what it holds (Kafka's
    /// leader-epoch truncation). `held` is below `above.len()`.
    pub fn move_leader_truncating(&mut self, topic: &str, p: i32, node: i32, held: usize) {
        self.move_leader(topic, p, node);
        let part = self.partition_mut(topic, p);
        let (end, state) = match held.checked_sub(1) {
            None => (part.hw, part.committed.clone()),
            Some(k) => part.above[k].clone(),
        };
        part.log.truncate(end);
        part.producers = state;
        part.above.truncate(held);
    }

    /// The high watermark moves to the log's end: every replica caught up (`truncation`).
    fn commit(truncation: bool, part: &mut PartitionLog) {
        if truncation {
            part.hw = part.log.len();
            part.committed = part.producers.clone();
            part.above.clear();
        }
    }

    /// The high watermark moves to `end`, the end of a batch appended above it that a
    /// duplicate's success answer says is replicated (Kafka's `DelayedProduce` waits for the
    /// original's offsets only): what lies above stays above.
    fn commit_to(part: &mut PartitionLog, end: usize) {
        if end <= part.hw {
            return;
        }
        if let Some(k) = part.above.iter().position(|a| a.0 == end) {
            part.hw = end;
            part.committed = part.above[k].1.clone();
            part.above.drain(..=k);
        }
    }

    /// A broker restart: the dedup cache of each producer shrinks to its last batch (§A.1).
    pub fn restart_shrinks_cache(&mut self) {
        for part in self.partitions.values_mut() {
            let above = part.above.iter_mut().flat_map(|a| a.1.values_mut());
            for e in (part.producers.values_mut())
                .chain(part.committed.values_mut())
                .chain(above)
            {
                while e.batches.len() > 1 {
                    e.batches.pop_front();
                }
            }
        }
    }

    /// DeleteRecords up to the end of the log: the log start moves past every record. Since
    /// 2.4 the producer state is kept (KAFKA-7190, shipped in 2.4.0; the spec's §A.4 says 2.5);
    /// before (`UnknownPidError`, 1.0–2.3) a producer whose last batch fell below the log start
    /// was forgotten. The records stay in
    /// `log` for checking.
    pub fn delete_records(&mut self, topic: &str, p: i32) {
        let mode = self.mode;
        let truncation = self.truncation;
        let part = self.partition_mut(topic, p);
        part.log_start = part.log.len() as i64;
        if mode == BrokerMode::UnknownPidError {
            part.producers.clear();
        }
        Self::commit(truncation, part);
    }

    /// Producer-state expiry: every producer entry is forgotten (§A.4).
    pub fn expire_producers(&mut self) {
        for part in self.partitions.values_mut() {
            part.forget_producers();
        }
    }

    /// Producer-state expiry of one partition: its producer entries are forgotten while the
    /// other partitions keep theirs (Kafka expires each partition's state on its own, from
    /// the time of that partition's last write by the producer, §A.4).
    pub fn expire_partition(&mut self, topic: &str, p: i32) {
        self.partition_mut(topic, p).forget_producers();
    }

    /// Answers one request frame (without its size prefix) received by `node`. Returns the
    /// whole response frame, or `None` for a request the model cannot parse (the real broker
    /// would close the connection).
    pub fn handle(&mut self, node: i32, frame: Bytes) -> Option<Bytes> {
        let mut r = Reader::new(frame.clone());
        let api_key = r.i16().ok()?;
        let version = r.i16().ok()?;
        let header_version = match api_key {
            api_key::API_VERSIONS => ApiVersionsRequest::request_header_version(version),
            api_key::METADATA => MetadataRequest::request_header_version(version),
            api_key::INIT_PRODUCER_ID => InitProducerIdRequest::request_header_version(version),
            api_key::PRODUCE => ProduceRequest::request_header_version(version),
            _ => return None,
        };
        let mut r = Reader::new(frame);
        let header = RequestHeader::decode(header_version, &mut r).ok()?;
        let corr = header.correlation_id;
        let a = self.advertised;
        let above = match api_key {
            api_key::METADATA => version > a.metadata,
            api_key::INIT_PRODUCER_ID => version > a.init_producer_id,
            api_key::PRODUCE => version > a.produce,
            _ => false,
        };
        if above {
            return None;
        }
        let body = Bytes::copy_from_slice(r.peek_rest());
        match api_key {
            api_key::API_VERSIONS => {
                if !ApiVersionsRequest::VERSIONS.contains(version) {
                    let resp = ApiVersionsResponse {
                        error_code: ErrorCode::UnsupportedVersion.as_i16(),
                        api_keys: vec![ApiVersion {
                            api_key: api_key::API_VERSIONS,
                            min_version: 0,
                            max_version: 3,
                        }],
                        throttle_time_ms: 0,
                    };
                    return Some(encode_response::<ApiVersionsRequest>(&resp, 0, corr));
                }
                ApiVersionsRequest::decode_exact(version, body).ok()?;
                let k = |api_key, min_version, max_version| ApiVersion {
                    api_key,
                    min_version,
                    max_version,
                };
                let resp = ApiVersionsResponse {
                    error_code: 0,
                    api_keys: vec![
                        k(api_key::PRODUCE, 0, a.produce),
                        k(api_key::METADATA, 0, a.metadata),
                        k(api_key::API_VERSIONS, 0, 3),
                        k(api_key::INIT_PRODUCER_ID, 0, a.init_producer_id),
                    ],
                    throttle_time_ms: 0,
                };
                Some(encode_response::<ApiVersionsRequest>(&resp, version, corr))
            }
            api_key::METADATA => {
                let req = MetadataRequest::decode_exact(version, body).ok()?;
                let resp = self.metadata(&req);
                Some(encode_response::<MetadataRequest>(&resp, version, corr))
            }
            api_key::INIT_PRODUCER_ID => {
                let req = InitProducerIdRequest::decode_exact(version, body).ok()?;
                // Tansu 0.6 grants an idempotent producer only a fresh id, asked for with
                // producer id and epoch -1 (v3 and later): an older version, or a request to
                // bump a given id, is answered -1 (UNKNOWN_SERVER_ERROR) with id -1
                // (dynostore.rs `init_producer`, v0.6.0).
                let tansu_refuses = self.mode == BrokerMode::TansuLike
                    && (version < 3 || req.producer_id != -1 || req.producer_epoch != -1);
                let refusal = if tansu_refuses {
                    Some(ErrorCode::UnknownServerError)
                } else {
                    self.init_producer_id_errors.pop_front()
                };
                if let Some(code) = refusal {
                    let resp = InitProducerIdResponse {
                        throttle_time_ms: 0,
                        error_code: code.as_i16(),
                        producer_id: -1,
                        producer_epoch: -1,
                    };
                    return Some(encode_response::<InitProducerIdRequest>(
                        &resp, version, corr,
                    ));
                }
                let id = self.next_producer_id;
                self.next_producer_id += 1;
                self.stats.producer_ids += 1;
                let resp = InitProducerIdResponse {
                    throttle_time_ms: 0,
                    error_code: 0,
                    producer_id: id,
                    producer_epoch: 0,
                };
                Some(encode_response::<InitProducerIdRequest>(
                    &resp, version, corr,
                ))
            }
            api_key::PRODUCE => {
                let req = ProduceRequest::decode_exact(version, body).ok()?;
                let resp = self.produce(node, &req);
                Some(encode_response::<ProduceRequest>(&resp, version, corr))
            }
            _ => None,
        }
    }

    fn metadata(&mut self, req: &MetadataRequest) -> MetadataResponse {
        let names: Vec<String> = match &req.topics {
            Some(ts) => ts.iter().filter_map(|t| t.name.clone()).collect(),
            None => {
                let mut v: Vec<String> = self.partitions.keys().map(|(t, _)| t.clone()).collect();
                v.dedup();
                v
            }
        };
        let mut topics = Vec::new();
        for name in names {
            let exists = self.partitions.keys().any(|(t, _)| *t == name);
            if !exists && req.allow_auto_topic_creation && self.auto_create_partitions > 0 {
                let n = self.auto_create_partitions;
                let leader = *self.nodes.keys().next().unwrap_or(&1);
                self.create_topic(&name, n, leader);
            }
            let hidden = self.hidden_topics.contains(&name);
            let parts: Vec<MetadataPartition> = self
                .partitions
                .iter()
                .filter(|((t, _), _)| *t == name)
                .map(|((_, i), p)| MetadataPartition {
                    error_code: 0,
                    partition_index: *i,
                    leader_id: p.leader,
                    leader_epoch: p.leader_epoch,
                    replica_nodes: self.nodes.keys().copied().collect(),
                    isr_nodes: self.nodes.keys().copied().collect(),
                    offline_replicas: vec![],
                })
                .collect();
            let error_code = if parts.is_empty() || hidden {
                ErrorCode::UnknownTopicOrPartition.as_i16()
            } else {
                0
            };
            topics.push(MetadataTopic {
                error_code,
                name: Some(name),
                topic_id: [0; 16],
                is_internal: false,
                partitions: if hidden { vec![] } else { parts },
                topic_authorized_operations: i32::MIN,
            });
        }
        MetadataResponse {
            throttle_time_ms: 0,
            brokers: self
                .nodes
                .iter()
                .map(|(id, (h, p))| MetadataBroker {
                    node_id: *id,
                    host: h.clone(),
                    port: *p,
                    rack: None,
                })
                .collect(),
            cluster_id: Some("kprod-model".into()),
            controller_id: 1,
            topics,
            cluster_authorized_operations: i32::MIN,
        }
    }

    fn produce(&mut self, node: i32, req: &ProduceRequest) -> ProduceResponse {
        if req.acks != -1 {
            self.stats.acks_not_all += 1;
        }
        let mut responses = Vec::new();
        for t in &req.topic_data {
            let mut parts = Vec::new();
            for p in &t.partition_data {
                let Answer {
                    code,
                    base_offset,
                    log_append_time,
                    log_start,
                } = self.produce_partition(node, &t.name, p.index, p.records.clone());
                let current_leader = if code == ErrorCode::NotLeaderOrFollower && self.leader_hints
                {
                    self.partitions
                        .get(&(t.name.clone(), p.index))
                        .map(|part| LeaderIdAndEpoch {
                            leader_id: part.leader,
                            leader_epoch: part.leader_epoch,
                        })
                } else {
                    None
                };
                parts.push(PartitionProduceResponse {
                    index: p.index,
                    error_code: code.as_i16(),
                    base_offset,
                    log_append_time_ms: log_append_time,
                    log_start_offset: log_start,
                    record_errors: vec![],
                    error_message: None,
                    current_leader,
                });
            }
            responses.push(TopicProduceResponse {
                name: t.name.clone(),
                partition_responses: parts,
            });
        }
        ProduceResponse {
            responses,
            throttle_time_ms: 0,
            node_endpoints: vec![],
        }
    }

    fn produce_partition(
        &mut self,
        node: i32,
        topic: &str,
        index: i32,
        records: Option<Bytes>,
    ) -> Answer {
        let mode = self.mode;
        let max_seq = self.max_sequence;
        let truncation = self.truncation;
        let Some(part) = self.partitions.get_mut(&(topic.to_owned(), index)) else {
            return Answer::refused(ErrorCode::UnknownTopicOrPartition, -1);
        };
        let log_start = part.log_start;
        if part.leader != node {
            return Answer::refused(ErrorCode::NotLeaderOrFollower, -1);
        }
        let injected = part.inject.pop_front();
        if let Some(inj) = injected {
            if !inj.append {
                return Answer::refused(inj.code, log_start);
            }
        }
        // R0/R1: exactly one valid batch.
        let Some(blob) = records else {
            return Answer::refused(ErrorCode::InvalidRecord, log_start);
        };
        let batch = match RecordBatch::decode_all(blob) {
            Ok(mut v) if v.len() == 1 => v.remove(0),
            Ok(_) => return Answer::refused(ErrorCode::InvalidRecord, log_start),
            Err(kprod_core::protocol::DecodeError::CrcMismatch { .. }) => {
                return Answer::refused(ErrorCode::CorruptMessage, log_start)
            }
            Err(_) => return Answer::refused(ErrorCode::InvalidRecord, log_start),
        };
        let count = batch.records.len() as i32;
        if count == 0 || batch.last_offset_delta + 1 != count {
            return Answer::refused(ErrorCode::InvalidRecord, log_start);
        }
        let pid = batch.producer_id;
        let epoch = batch.producer_epoch;
        let first = batch.base_sequence;
        if pid >= 0 && first < 0 {
            return Answer::refused(ErrorCode::InvalidRecord, log_start);
        }
        // With the small sequence spaces the model explores the wrap in, a client that does
        // not wrap sends a sequence above the largest; at Kafka's `i32::MAX` it would have
        // turned negative, refused above. (A model audit finding, 2026-12-06: it was taken
        // as the next sequence and stored wrapped.)
        if pid >= 0 && first > max_seq {
            self.stats.beyond_max_sequence += 1;
            return Answer::refused(ErrorCode::InvalidRecord, log_start);
        }
        if pid >= 0 && epoch > self.max_epoch {
            self.stats.beyond_max_epoch += 1;
            return Answer::refused(ErrorCode::InvalidProducerEpoch, log_start);
        }
        let modulus = i64::from(max_seq) + 1;
        if pid < 0 {
            // No producer id (idempotence off): Kafka checks no sequence and keeps no state
            // for it, so every batch is appended as it comes, a resend included.
            let base_offset = append_records(&mut part.log, &batch, modulus);
            if injected.is_none() {
                Self::commit(truncation, part);
            }
            return answer(injected, base_offset, NO_TIMESTAMP, log_start);
        }
        // Tansu 0.6 keeps its idempotence state per producer id, not per partition: an id it
        // did not hand out is UNKNOWN_PRODUCER_ID, and an epoch other than the id's (always
        // 0: it bumps none) is PRODUCER_FENCED, before any sequence is looked at, on a
        // partition it holds no state for too (dynostore.rs, v0.6.0; a model audit finding,
        // 2026-12-06: the model took a bumped epoch on a partition without state).
        if mode == BrokerMode::TansuLike {
            if !(FIRST_PRODUCER_ID..self.next_producer_id).contains(&pid) {
                return Answer::refused(ErrorCode::UnknownProducerId, log_start);
            }
            if epoch != 0 {
                self.stats.max_epoch = self.stats.max_epoch.max(epoch);
                return Answer::refused(ErrorCode::ProducerFenced, log_start);
            }
        }
        let last = ((i64::from(first) + i64::from(count) - 1) % modulus) as i32;
        if i64::from(first) + i64::from(count) - 1 > i64::from(max_seq) {
            self.stats.wrapped = true;
        }
        self.stats.max_epoch = self.stats.max_epoch.max(epoch);
        let entry = part.producers.get(&pid).cloned();
        // The batch that continues the producer's sequence. It is never a duplicate: only a
        // batch at or below the last sequence can repeat a cached one. (With Kafka's modulus
        // the cache can never reach around the ring; with the small moduli used to explore
        // the wrap it could, and an old lap's batch would swallow new data.)
        let continues = entry.as_ref().is_some_and(|e| {
            let last_seq = e.batches.back().map_or(-1, |b| b.1);
            (last_seq == max_seq && first == 0) || i64::from(first) == i64::from(last_seq) + 1
        });
        // R2: exact duplicate of a cached batch, same epoch.
        if let Some(e) = entry.as_ref().filter(|_| !continues) {
            if e.epoch == epoch {
                if let Some(&(_, _, off)) = e.batches.iter().find(|b| b.0 == first && b.1 == last) {
                    self.stats.deduplicated += 1;
                    // Kafka answers a duplicate with the original's offsets, and with the stored
                    // batch's largest timestamp as the log append time
                    // (`setLogAppendTime(duplicate.timestamp)`), on a CreateTime topic too: a
                    // client must not take it for the log's time. Every record the model sends
                    // has timestamp 0. Under acks=all Kafka still waits for the original's
                    // offsets to be replicated (`DelayedProduce`): an error after the append (a
                    // timeout, a leader move) can come back for a duplicate too. Tansu's 46
                    // carries neither.
                    // A success for it says the original is replicated (and everything
                    // before it); what lies after may still be above the high watermark.
                    if truncation && injected.is_none() {
                        Self::commit_to(part, off as usize + count as usize);
                    }
                    // Kafka 0.11 answers its last batch's duplicate with success and the
                    // original's offsets too (`Log.append` returns the duplicate's
                    // `firstOffset`/`lastOffset`/`timestamp`, 0.11.0.0 Log.scala:643-648); 1.0.0
                    // and 1.0.1 answered DUPLICATE_SEQUENCE_NUMBER for a batch older than the
                    // cache (`isDuplicate`), which this model does not: it answers such a
                    // batch OUT_OF_ORDER_SEQUENCE_NUMBER, as 1.0.2 and later do (the producer's
                    // answer to 46 is checked in the Tansu-like mode).
                    return if mode == BrokerMode::TansuLike {
                        Answer::refused(ErrorCode::DuplicateSequenceNumber, log_start)
                    } else {
                        answer(injected, off, 0, log_start)
                    };
                }
                // Overlap without exact match: a client bug worth counting.
                if e.batches
                    .iter()
                    .any(|b| ranges_overlap(b.0, b.1, first, last))
                {
                    self.stats.overlap += 1;
                }
            }
        }
        // R3: epoch.
        if let Some(e) = &entry {
            if epoch < e.epoch {
                self.stats.invalid_epoch += 1;
                return Answer::refused(ErrorCode::InvalidProducerEpoch, log_start);
            }
        }
        // R4: sequence.
        match &entry {
            Some(e) if e.epoch != epoch => {
                if mode == BrokerMode::TansuLike {
                    return Answer::refused(ErrorCode::ProducerFenced, log_start);
                }
                if first != 0 {
                    self.stats.new_epoch_nonzero_seq += 1;
                    self.stats.out_of_order += 1;
                    return Answer::refused(ErrorCode::OutOfOrderSequenceNumber, log_start);
                }
            }
            Some(e) => {
                let last_seq = e.batches.back().map_or(-1, |b| b.1);
                let wraps = last_seq == max_seq && first == 0;
                let ok = wraps || i64::from(first) == i64::from(last_seq) + 1;
                if wraps {
                    self.stats.wrapped = true;
                }
                if !ok {
                    if mode == BrokerMode::TansuLike && seq_at_or_below(first, last_seq, max_seq) {
                        self.stats.deduplicated += 1;
                        return Answer::refused(ErrorCode::DuplicateSequenceNumber, log_start);
                    }
                    self.stats.out_of_order += 1;
                    return Answer::refused(ErrorCode::OutOfOrderSequenceNumber, log_start);
                }
            }
            None => {
                if first != 0 {
                    let never_written = part.log.is_empty() && part.log_start == 0;
                    match mode {
                        BrokerMode::UnknownPidError => {
                            return Answer::refused(ErrorCode::UnknownProducerId, log_start)
                        }
                        BrokerMode::Kafka011 => {
                            self.stats.out_of_order += 1;
                            return Answer::refused(ErrorCode::OutOfOrderSequenceNumber, log_start);
                        }
                        // Tansu expects sequence 0 wherever it holds no state for the id,
                        // written to before or not.
                        BrokerMode::StrictNeverWritten if never_written => {
                            self.stats.out_of_order += 1;
                            return Answer::refused(ErrorCode::OutOfOrderSequenceNumber, log_start);
                        }
                        BrokerMode::TansuLike => {
                            self.stats.out_of_order += 1;
                            return Answer::refused(ErrorCode::OutOfOrderSequenceNumber, log_start);
                        }
                        _ => {}
                    }
                }
            }
        }
        // R5: append.
        let base_offset = append_records(&mut part.log, &batch, modulus);
        let e = part.producers.entry(pid).or_insert_with(|| {
            Box::new(ProducerEntry {
                epoch,
                batches: VecDeque::new(),
            })
        });
        if e.epoch != epoch {
            e.epoch = epoch;
            e.batches.clear();
        }
        e.batches.push_back((first, last, base_offset));
        let cached = if mode == BrokerMode::Kafka011 { 1 } else { 5 };
        while e.batches.len() > cached {
            e.batches.pop_front();
        }
        if injected.is_none() {
            Self::commit(truncation, part);
        } else if truncation {
            let state = part.producers.clone();
            part.above.push((part.log.len(), state));
        }
        answer(injected, base_offset, NO_TIMESTAMP, log_start)
    }
}

/// Appends `batch`'s records to `log`, returning the first one's offset. A batch with no
/// producer id stores sequence -1; otherwise record `k` has its base sequence plus `k` on the
/// ring of `modulus`.
fn append_records(log: &mut Vec<StoredRecord>, batch: &RecordBatch, modulus: i64) -> i64 {
    let base_offset = log.len() as i64;
    for (k, r) in batch.records.iter().enumerate() {
        log.push(StoredRecord {
            value: r.value.clone(),
            producer_id: batch.producer_id,
            epoch: batch.producer_epoch,
            sequence: if batch.producer_id < 0 {
                -1
            } else {
                ((i64::from(batch.base_sequence) + k as i64) % modulus) as i32
            },
        });
    }
    base_offset
}

/// No log append time (Kafka's `RecordBatch.NO_TIMESTAMP`): the topic keeps create times.
const NO_TIMESTAMP: i64 = -1;

/// A partition's answer to a Produce request.
struct Answer {
    code: ErrorCode,
    base_offset: i64,
    log_append_time: i64,
    log_start: i64,
}

impl Answer {
    /// A batch not appended: no offset, no time.
    fn refused(code: ErrorCode, log_start: i64) -> Self {
        Self {
            code,
            base_offset: -1,
            log_append_time: NO_TIMESTAMP,
            log_start,
        }
    }
}

/// The answer to an appended batch (or an acknowledged duplicate): success at `base_offset`
/// with `log_append_time`, or the error an injection asked for after the append. Kafka's
/// errors after the append come from `DelayedProduce`, which sets the error on the
/// partition's answer and keeps the base offset and time the append gave it: the answer
/// carries them all, and a client that reads the offset before the code would take the batch
/// as delivered. UNKNOWN_SERVER_ERROR comes from an exception, whose answer has neither.
fn answer(
    injected: Option<Injection>,
    base_offset: i64,
    log_append_time: i64,
    log_start: i64,
) -> Answer {
    match injected {
        Some(inj) if inj.code == ErrorCode::UnknownServerError => {
            Answer::refused(inj.code, log_start)
        }
        Some(inj) => Answer {
            code: inj.code,
            base_offset,
            log_append_time,
            log_start,
        },
        None => Answer {
            code: ErrorCode::None,
            base_offset,
            log_append_time,
            log_start,
        },
    }
}

/// Whether `first` is at or behind `last` on the sequence ring: within the half of the ring
/// behind it. Tansu compares plain integers, which is the same thing for Kafka's modulus;
/// with the small moduli used to explore the wrap, a plain comparison would take the next
/// lap's sequences for old ones and acknowledge batches it never wrote.
fn seq_at_or_below(first: i32, last: i32, max_seq: i32) -> bool {
    let modulus = i64::from(max_seq) + 1;
    (i64::from(last) - i64::from(first)).rem_euclid(modulus) < modulus / 2
}

fn ranges_overlap(a0: i32, a1: i32, b0: i32, b1: i32) -> bool {
    // Sequence ranges live on a circle (they wrap past the maximum to 0): two ranges
    // overlap when either one contains the other's first sequence.
    let contains = |lo: i32, hi: i32, x: i32| {
        if lo <= hi {
            lo <= x && x <= hi
        } else {
            x >= lo || x <= hi
        }
    };
    contains(a0, a1, b0) || contains(b0, b1, a0)
}

/// Splits whole request frames off a connection's byte stream.
pub fn split_frames(buf: &mut BytesMut) -> Vec<Bytes> {
    let d = FrameDecoder::default();
    let mut out = Vec::new();
    while let Ok(Some(f)) = d.decode(buf) {
        out.push(f);
    }
    out
}
