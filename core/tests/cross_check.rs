//! Cross-check of the hand-written codec against the independent `kafka-protocol` crate.
//!
//! For each of the eight bodies, at every version our codec supports, in both directions:
//!
//! - **ours → theirs**: a generated value is encoded by us and decoded by `kafka-protocol`;
//!   the decoded value is projected field by field onto our type and compared with what should
//!   survive at that version. The same value, converted field by field into `kafka-protocol`'s
//!   type and encoded by it, must give the same bytes.
//! - **theirs → ours**: the value is converted into `kafka-protocol`'s type (in a third of the
//!   cases with fields we deliberately ignore added: unknown tagged fields at every level,
//!   ApiVersions v3 feature tags), encoded by `kafka-protocol`, decoded by us and compared field
//!   by field; without ignored fields our re-encoding must give the same bytes.
//!
//! Request and response headers, whole frames and record batches are checked the same way.
//! Values come from a small seeded generator, so every run checks exactly the same cases.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::str::FromStr;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::{
    self as kp, api_versions_response as kav, metadata_request as kmq, metadata_response as kmr,
    produce_request as kpq, produce_response as kps, ApiKey, BrokerId, ProducerId, TopicName,
    TransactionalId,
};
use kafka_protocol::protocol::{self as kproto, Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    self as krec, Compression, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType,
};
use kprod_core::protocol::api_versions::{ApiVersion, ApiVersionsRequest, ApiVersionsResponse};
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
use kprod_core::protocol::record_batch::{Header, Record, RecordBatch, RecordBatchBuilder};
use kprod_core::protocol::{
    decode_response, encode_request, encode_response, DecodeError, FrameDecoder, Message, Reader,
    Request, RequestHeader, ResponseHeader,
};

/// Generated values per (message, version, direction).
const CASES: usize = 64;

// ---------------------------------------------------------------------------------------------
// A small deterministic generator (SplitMix64).
// ---------------------------------------------------------------------------------------------

struct Rng(u64);

impl Rng {
    /// A generator seeded from a name, a version and a direction, so that each check has its
    /// own stable stream.
    fn for_case(name: &str, version: i16, stream: u64) -> Self {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in name.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        Self(h ^ ((version as u64) << 40) ^ (stream << 56))
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    fn bool(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }

    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize].clone()
    }

    /// 0..=max, with 0 more likely (empty arrays).
    fn count(&mut self, max: u64) -> usize {
        if self.one_in(4) {
            0
        } else {
            self.below(max + 1) as usize
        }
    }

    fn i16(&mut self) -> i16 {
        if self.one_in(3) {
            self.pick(&[0, 1, -1, i16::MIN, i16::MAX])
        } else {
            self.next_u64() as i16
        }
    }

    fn i32(&mut self) -> i32 {
        if self.one_in(3) {
            self.pick(&[0, 1, -1, i32::MIN, i32::MAX])
        } else {
            self.next_u64() as i32
        }
    }

    fn i64(&mut self) -> i64 {
        if self.one_in(3) {
            self.pick(&[0, 1, -1, i64::MIN, i64::MAX])
        } else {
            self.next_u64() as i64
        }
    }

    /// Strings with empty, ASCII, multi-byte and 4-byte UTF-8 pieces; sometimes longer than 127
    /// bytes, so that a compact length takes two varint bytes.
    fn string(&mut self) -> String {
        const PIECES: &[&str] = &[
            "",
            "a",
            "topic-0",
            "héllo",
            "日本語",
            "🦀",
            "Ωμέγα",
            "ß",
            " ",
            "\u{7f}",
            "x.y_z-9",
        ];
        if self.one_in(16) {
            let n = 30 + self.count(30);
            return "🦀é".repeat(n);
        }
        let n = self.count(3);
        (0..n).map(|_| self.pick(PIECES)).collect()
    }

    fn opt_string(&mut self) -> Option<String> {
        if self.one_in(4) {
            None
        } else {
            Some(self.string())
        }
    }

    fn bytes(&mut self, max: u64) -> Bytes {
        let n = if self.one_in(8) {
            130 + self.count(200)
        } else {
            self.count(max)
        };
        (0..n)
            .map(|_| self.next_u64() as u8)
            .collect::<Vec<u8>>()
            .into()
    }

    fn opt_bytes(&mut self, max: u64) -> Option<Bytes> {
        if self.one_in(4) {
            None
        } else {
            Some(self.bytes(max))
        }
    }

    fn uuid(&mut self) -> [u8; 16] {
        let mut u = [0u8; 16];
        if !self.one_in(4) {
            for b in &mut u {
                *b = self.next_u64() as u8;
            }
        }
        u
    }

    fn i32s(&mut self, max: u64) -> Vec<i32> {
        let n = self.count(max);
        (0..n).map(|_| self.i32()).collect()
    }

    /// Unknown tagged fields with tags from `first_free` up (the tags below are known ones).
    fn unknown_tags(&mut self, first_free: i32) -> BTreeMap<i32, Bytes> {
        let n = 1 + self.count(2);
        (0..n)
            .map(|_| {
                let tag = first_free + self.pick(&[0, 1, 2, 7, 127, 128, 300, 70_000]);
                (tag, self.bytes(12))
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Conversions between our field types and kafka-protocol's.
// ---------------------------------------------------------------------------------------------

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn opt_sb(s: &Option<String>) -> Option<StrBytes> {
    s.as_deref().map(sb)
}

fn st(s: &StrBytes) -> String {
    s.as_str().to_owned()
}

fn opt_st(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(st)
}

fn topic_name(s: &str) -> TopicName {
    TopicName(sb(s))
}

/// kafka-protocol's `Uuid` (from the `uuid` crate, not a dependency of ours), built through its
/// `FromStr` so that the type never needs to be named.
fn to_uuid<U: FromStr>(b: &[u8; 16]) -> U
where
    U::Err: Debug,
{
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    hex.parse().expect("32 hex digits are a uuid")
}

fn brokers(v: &[i32]) -> Vec<BrokerId> {
    v.iter().copied().map(BrokerId).collect()
}

fn broker_ids(v: &[BrokerId]) -> Vec<i32> {
    v.iter().map(|b| b.0).collect()
}

// ---------------------------------------------------------------------------------------------
// One of our bodies paired with kafka-protocol's.
// ---------------------------------------------------------------------------------------------

trait Pair: Message + Clone + PartialEq + Debug {
    type Kp: Encodable + Decodable + kproto::Message + Clone + PartialEq + Debug;
    const NAME: &'static str;

    /// A non-trivial value (not necessarily fully representable at `version`).
    fn generate(rng: &mut Rng, version: i16) -> Self;

    /// What of `self` survives an encoding at `version`, as kafka-protocol represents it:
    /// fields absent at that version take the value a decoder gives them.
    fn normalize(&self, _version: i16) -> Self {
        self.clone()
    }

    /// Whether both encoders must produce identical bytes for `self` at `version`.
    fn same_bytes(&self, _version: i16) -> bool {
        true
    }

    /// Field-by-field conversion into kafka-protocol's type.
    fn to_kp(&self) -> Self::Kp;

    /// Field-by-field projection of kafka-protocol's value onto ours.
    fn from_kp(k: &Self::Kp) -> Self;

    /// Asserts that every field of `k` that has no counterpart in ours holds its default.
    fn assert_unmodelled_default(k: &Self::Kp);

    /// Sets fields that our decoder must skip (unknown tagged fields and the like); returns
    /// whether anything was added at `version`.
    fn add_ignored(k: &mut Self::Kp, rng: &mut Rng, version: i16) -> bool;
}

// ----- ApiVersions ---------------------------------------------------------------------------

impl Pair for ApiVersionsRequest {
    type Kp = kp::ApiVersionsRequest;
    const NAME: &'static str = "ApiVersionsRequest";

    fn generate(rng: &mut Rng, _version: i16) -> Self {
        Self {
            client_software_name: rng.string(),
            client_software_version: rng.string(),
        }
    }

    fn normalize(&self, version: i16) -> Self {
        if version >= 3 {
            self.clone()
        } else {
            Self::default()
        }
    }

    fn to_kp(&self) -> Self::Kp {
        kp::ApiVersionsRequest::default()
            .with_client_software_name(sb(&self.client_software_name))
            .with_client_software_version(sb(&self.client_software_version))
    }

    fn from_kp(k: &Self::Kp) -> Self {
        Self {
            client_software_name: st(&k.client_software_name),
            client_software_version: st(&k.client_software_version),
        }
    }

    fn assert_unmodelled_default(k: &Self::Kp) {
        assert!(k.unknown_tagged_fields.is_empty());
    }

    fn add_ignored(k: &mut Self::Kp, rng: &mut Rng, version: i16) -> bool {
        if version < 3 {
            return false;
        }
        k.unknown_tagged_fields = rng.unknown_tags(0);
        true
    }
}

impl Pair for ApiVersionsResponse {
    type Kp = kp::ApiVersionsResponse;
    const NAME: &'static str = "ApiVersionsResponse";

    fn generate(rng: &mut Rng, _version: i16) -> Self {
        // Sometimes more than 127 entries: a compact array length of two varint bytes.
        let n = if rng.one_in(8) {
            128 + rng.count(72)
        } else {
            rng.count(6)
        };
        Self {
            error_code: rng.i16(),
            api_keys: (0..n)
                .map(|_| ApiVersion {
                    api_key: rng.i16(),
                    min_version: rng.i16(),
                    max_version: rng.i16(),
                })
                .collect(),
            throttle_time_ms: rng.i32(),
        }
    }

    fn normalize(&self, version: i16) -> Self {
        let mut m = self.clone();
        if version < 1 {
            m.throttle_time_ms = 0;
        }
        m
    }

    fn to_kp(&self) -> Self::Kp {
        kp::ApiVersionsResponse::default()
            .with_error_code(self.error_code)
            .with_api_keys(
                self.api_keys
                    .iter()
                    .map(|a| {
                        kav::ApiVersion::default()
                            .with_api_key(a.api_key)
                            .with_min_version(a.min_version)
                            .with_max_version(a.max_version)
                    })
                    .collect(),
            )
            .with_throttle_time_ms(self.throttle_time_ms)
    }

    fn from_kp(k: &Self::Kp) -> Self {
        Self {
            error_code: k.error_code,
            api_keys: k
                .api_keys
                .iter()
                .map(|a| ApiVersion {
                    api_key: a.api_key,
                    min_version: a.min_version,
                    max_version: a.max_version,
                })
                .collect(),
            throttle_time_ms: k.throttle_time_ms,
        }
    }

    fn assert_unmodelled_default(k: &Self::Kp) {
        assert!(k.supported_features.is_empty());
        assert_eq!(k.finalized_features_epoch, -1);
        assert!(k.finalized_features.is_empty());
        assert!(!k.zk_migration_ready);
        assert!(k.unknown_tagged_fields.is_empty());
        for a in &k.api_keys {
            assert!(a.unknown_tagged_fields.is_empty());
        }
    }

    fn add_ignored(k: &mut Self::Kp, rng: &mut Rng, version: i16) -> bool {
        if version < 3 {
            return false;
        }
        // The v3 tagged feature fields (tags 0-3), which we skip on decode.
        let n = 1 + rng.count(2);
        k.supported_features = (0..n)
            .map(|_| {
                kav::SupportedFeatureKey::default()
                    .with_name(sb(&rng.string()))
                    .with_min_version(rng.i16())
                    .with_max_version(rng.i16())
            })
            .collect();
        k.finalized_features_epoch = rng.below(1 << 40) as i64;
        let n = rng.count(2);
        k.finalized_features = (0..n)
            .map(|_| {
                kav::FinalizedFeatureKey::default()
                    .with_name(sb(&rng.string()))
                    .with_max_version_level(rng.i16())
                    .with_min_version_level(rng.i16())
            })
            .collect();
        k.zk_migration_ready = rng.bool();
        k.unknown_tagged_fields = rng.unknown_tags(4);
        for a in &mut k.api_keys {
            if rng.bool() {
                a.unknown_tagged_fields = rng.unknown_tags(0);
            }
        }
        true
    }
}

// ----- Metadata ------------------------------------------------------------------------------

impl Pair for MetadataRequest {
    type Kp = kp::MetadataRequest;
    const NAME: &'static str = "MetadataRequest";

    fn generate(rng: &mut Rng, _version: i16) -> Self {
        let topics = if rng.one_in(4) {
            None
        } else {
            let n = rng.count(4);
            Some(
                (0..n)
                    .map(|_| MetadataRequestTopic {
                        topic_id: rng.uuid(),
                        name: rng.opt_string(),
                    })
                    .collect(),
            )
        };
        Self {
            topics,
            allow_auto_topic_creation: rng.bool(),
            include_cluster_authorized_operations: rng.bool(),
            include_topic_authorized_operations: rng.bool(),
        }
    }

    fn normalize(&self, version: i16) -> Self {
        let mut m = self.clone();
        for t in m.topics.iter_mut().flatten() {
            if version < 10 {
                // No topic id before v10, and a non-nullable name (our encoder sends "").
                t.topic_id = [0; 16];
                t.name.get_or_insert_with(String::new);
            }
        }
        if !(8..=10).contains(&version) {
            m.include_cluster_authorized_operations = false;
        }
        if version < 8 {
            m.include_topic_authorized_operations = false;
        }
        if version < 4 {
            // Absent before v4 (the broker's own setting applies); decoded as true.
            m.allow_auto_topic_creation = true;
        }
        m
    }

    fn to_kp(&self) -> Self::Kp {
        kp::MetadataRequest::default()
            .with_topics(self.topics.as_ref().map(|ts| {
                ts.iter()
                    .map(|t| {
                        kmq::MetadataRequestTopic::default()
                            .with_topic_id(to_uuid(&t.topic_id))
                            .with_name(t.name.as_deref().map(topic_name))
                    })
                    .collect()
            }))
            .with_allow_auto_topic_creation(self.allow_auto_topic_creation)
            .with_include_cluster_authorized_operations(self.include_cluster_authorized_operations)
            .with_include_topic_authorized_operations(self.include_topic_authorized_operations)
    }

    fn from_kp(k: &Self::Kp) -> Self {
        Self {
            topics: k.topics.as_ref().map(|ts| {
                ts.iter()
                    .map(|t| MetadataRequestTopic {
                        topic_id: *t.topic_id.as_bytes(),
                        name: t.name.as_ref().map(|n| st(n)),
                    })
                    .collect()
            }),
            allow_auto_topic_creation: k.allow_auto_topic_creation,
            include_cluster_authorized_operations: k.include_cluster_authorized_operations,
            include_topic_authorized_operations: k.include_topic_authorized_operations,
        }
    }

    fn assert_unmodelled_default(k: &Self::Kp) {
        assert!(k.unknown_tagged_fields.is_empty());
        for t in k.topics.iter().flatten() {
            assert!(t.unknown_tagged_fields.is_empty());
        }
    }

    fn add_ignored(k: &mut Self::Kp, rng: &mut Rng, version: i16) -> bool {
        if !Self::is_flexible(version) {
            return false;
        }
        k.unknown_tagged_fields = rng.unknown_tags(0);
        for t in k.topics.iter_mut().flatten() {
            if rng.bool() {
                t.unknown_tagged_fields = rng.unknown_tags(0);
            }
        }
        true
    }
}

impl Pair for MetadataResponse {
    type Kp = kp::MetadataResponse;
    const NAME: &'static str = "MetadataResponse";

    fn generate(rng: &mut Rng, _version: i16) -> Self {
        let nb = rng.count(3);
        let brokers = (0..nb)
            .map(|_| MetadataBroker {
                node_id: rng.i32(),
                host: rng.string(),
                port: rng.i32(),
                rack: rng.opt_string(),
            })
            .collect();
        let cluster_id = rng.opt_string();
        let controller_id = rng.i32();
        let nt = rng.count(3);
        let topics = (0..nt)
            .map(|_| {
                let error_code = rng.i16();
                let name = rng.opt_string();
                let topic_id = rng.uuid();
                let is_internal = rng.bool();
                let np = rng.count(4);
                let partitions = (0..np)
                    .map(|_| MetadataPartition {
                        error_code: rng.i16(),
                        partition_index: rng.i32(),
                        leader_id: rng.i32(),
                        leader_epoch: rng.i32(),
                        replica_nodes: if rng.one_in(16) {
                            (0..130).collect()
                        } else {
                            rng.i32s(4)
                        },
                        isr_nodes: rng.i32s(4),
                        offline_replicas: rng.i32s(2),
                    })
                    .collect();
                MetadataTopic {
                    error_code,
                    name,
                    topic_id,
                    is_internal,
                    partitions,
                    topic_authorized_operations: rng.i32(),
                }
            })
            .collect();
        Self {
            throttle_time_ms: rng.i32(),
            brokers,
            cluster_id,
            controller_id,
            topics,
            cluster_authorized_operations: rng.i32(),
        }
    }

    fn normalize(&self, version: i16) -> Self {
        let mut m = self.clone();
        for t in &mut m.topics {
            if version < 12 {
                // Nullable only since v12; our encoder sends "" for a null name before that.
                t.name.get_or_insert_with(String::new);
            }
            if version < 10 {
                t.topic_id = [0; 16];
            }
        }
        if !(8..=10).contains(&version) {
            // Present in v8-v10 only; both decoders give i32::MIN (the JSON default).
            m.cluster_authorized_operations = i32::MIN;
        }
        if version < 3 {
            m.throttle_time_ms = 0;
        }
        if version < 2 {
            m.cluster_id = None;
        }
        for t in &mut m.topics {
            if version < 8 {
                t.topic_authorized_operations = i32::MIN;
            }
            for p in &mut t.partitions {
                if version < 7 {
                    p.leader_epoch = -1;
                }
                if version < 5 {
                    p.offline_replicas.clear();
                }
            }
        }
        m
    }

    fn to_kp(&self) -> Self::Kp {
        kp::MetadataResponse::default()
            .with_throttle_time_ms(self.throttle_time_ms)
            .with_brokers(
                self.brokers
                    .iter()
                    .map(|b| {
                        kmr::MetadataResponseBroker::default()
                            .with_node_id(BrokerId(b.node_id))
                            .with_host(sb(&b.host))
                            .with_port(b.port)
                            .with_rack(opt_sb(&b.rack))
                    })
                    .collect(),
            )
            .with_cluster_id(opt_sb(&self.cluster_id))
            .with_controller_id(BrokerId(self.controller_id))
            .with_topics(
                self.topics
                    .iter()
                    .map(|t| {
                        kmr::MetadataResponseTopic::default()
                            .with_error_code(t.error_code)
                            .with_name(t.name.as_deref().map(topic_name))
                            .with_topic_id(to_uuid(&t.topic_id))
                            .with_is_internal(t.is_internal)
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        kmr::MetadataResponsePartition::default()
                                            .with_error_code(p.error_code)
                                            .with_partition_index(p.partition_index)
                                            .with_leader_id(BrokerId(p.leader_id))
                                            .with_leader_epoch(p.leader_epoch)
                                            .with_replica_nodes(brokers(&p.replica_nodes))
                                            .with_isr_nodes(brokers(&p.isr_nodes))
                                            .with_offline_replicas(brokers(&p.offline_replicas))
                                    })
                                    .collect(),
                            )
                            .with_topic_authorized_operations(t.topic_authorized_operations)
                    })
                    .collect(),
            )
            .with_cluster_authorized_operations(self.cluster_authorized_operations)
    }

    fn from_kp(k: &Self::Kp) -> Self {
        Self {
            throttle_time_ms: k.throttle_time_ms,
            brokers: k
                .brokers
                .iter()
                .map(|b| MetadataBroker {
                    node_id: b.node_id.0,
                    host: st(&b.host),
                    port: b.port,
                    rack: opt_st(&b.rack),
                })
                .collect(),
            cluster_id: opt_st(&k.cluster_id),
            controller_id: k.controller_id.0,
            topics: k
                .topics
                .iter()
                .map(|t| MetadataTopic {
                    error_code: t.error_code,
                    name: t.name.as_ref().map(|n| st(n)),
                    topic_id: *t.topic_id.as_bytes(),
                    is_internal: t.is_internal,
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| MetadataPartition {
                            error_code: p.error_code,
                            partition_index: p.partition_index,
                            leader_id: p.leader_id.0,
                            leader_epoch: p.leader_epoch,
                            replica_nodes: broker_ids(&p.replica_nodes),
                            isr_nodes: broker_ids(&p.isr_nodes),
                            offline_replicas: broker_ids(&p.offline_replicas),
                        })
                        .collect(),
                    topic_authorized_operations: t.topic_authorized_operations,
                })
                .collect(),
            cluster_authorized_operations: k.cluster_authorized_operations,
        }
    }

    fn assert_unmodelled_default(k: &Self::Kp) {
        assert_eq!(k.error_code, 0, "top-level error code is v13+");
        assert!(k.unknown_tagged_fields.is_empty());
        for b in &k.brokers {
            assert!(b.unknown_tagged_fields.is_empty());
        }
        for t in &k.topics {
            assert!(t.unknown_tagged_fields.is_empty());
            for p in &t.partitions {
                assert!(p.unknown_tagged_fields.is_empty());
            }
        }
    }

    fn add_ignored(k: &mut Self::Kp, rng: &mut Rng, version: i16) -> bool {
        if !Self::is_flexible(version) {
            return false;
        }
        k.unknown_tagged_fields = rng.unknown_tags(0);
        for b in &mut k.brokers {
            b.unknown_tagged_fields = rng.unknown_tags(0);
        }
        for t in &mut k.topics {
            t.unknown_tagged_fields = rng.unknown_tags(0);
            for p in &mut t.partitions {
                if rng.bool() {
                    p.unknown_tagged_fields = rng.unknown_tags(0);
                }
            }
        }
        true
    }
}

// ----- InitProducerId ------------------------------------------------------------------------

impl Pair for InitProducerIdRequest {
    type Kp = kp::InitProducerIdRequest;
    const NAME: &'static str = "InitProducerIdRequest";

    fn generate(rng: &mut Rng, _version: i16) -> Self {
        if rng.one_in(4) {
            return Self::default();
        }
        Self {
            transactional_id: rng.opt_string(),
            transaction_timeout_ms: rng.i32(),
            producer_id: rng.i64(),
            producer_epoch: rng.i16(),
        }
    }

    fn normalize(&self, version: i16) -> Self {
        let mut m = self.clone();
        if version < 3 {
            m.producer_id = -1;
            m.producer_epoch = -1;
        }
        m
    }

    fn to_kp(&self) -> Self::Kp {
        kp::InitProducerIdRequest::default()
            .with_transactional_id(
                self.transactional_id
                    .as_deref()
                    .map(|s| TransactionalId(sb(s))),
            )
            .with_transaction_timeout_ms(self.transaction_timeout_ms)
            .with_producer_id(ProducerId(self.producer_id))
            .with_producer_epoch(self.producer_epoch)
    }

    fn from_kp(k: &Self::Kp) -> Self {
        Self {
            transactional_id: k.transactional_id.as_ref().map(|t| st(t)),
            transaction_timeout_ms: k.transaction_timeout_ms,
            producer_id: k.producer_id.0,
            producer_epoch: k.producer_epoch,
        }
    }

    fn assert_unmodelled_default(k: &Self::Kp) {
        assert!(!k.enable_2_pc);
        assert!(!k.keep_prepared_txn);
        assert!(k.unknown_tagged_fields.is_empty());
    }

    fn add_ignored(k: &mut Self::Kp, rng: &mut Rng, version: i16) -> bool {
        if !Self::is_flexible(version) {
            return false;
        }
        k.unknown_tagged_fields = rng.unknown_tags(0);
        true
    }
}

impl Pair for InitProducerIdResponse {
    type Kp = kp::InitProducerIdResponse;
    const NAME: &'static str = "InitProducerIdResponse";

    fn generate(rng: &mut Rng, _version: i16) -> Self {
        Self {
            throttle_time_ms: rng.i32(),
            error_code: rng.i16(),
            producer_id: rng.i64(),
            producer_epoch: rng.i16(),
        }
    }

    fn to_kp(&self) -> Self::Kp {
        kp::InitProducerIdResponse::default()
            .with_throttle_time_ms(self.throttle_time_ms)
            .with_error_code(self.error_code)
            .with_producer_id(ProducerId(self.producer_id))
            .with_producer_epoch(self.producer_epoch)
    }

    fn from_kp(k: &Self::Kp) -> Self {
        Self {
            throttle_time_ms: k.throttle_time_ms,
            error_code: k.error_code,
            producer_id: k.producer_id.0,
            producer_epoch: k.producer_epoch,
        }
    }

    fn assert_unmodelled_default(k: &Self::Kp) {
        assert_eq!(k.ongoing_txn_producer_id.0, -1);
        assert_eq!(k.ongoing_txn_producer_epoch, -1);
        assert!(k.unknown_tagged_fields.is_empty());
    }

    fn add_ignored(k: &mut Self::Kp, rng: &mut Rng, version: i16) -> bool {
        if !Self::is_flexible(version) {
            return false;
        }
        k.unknown_tagged_fields = rng.unknown_tags(0);
        true
    }
}

// ----- Produce -------------------------------------------------------------------------------

/// A record as a producer hands it over.
#[derive(Debug, Clone)]
struct GenRecord {
    timestamp: i64,
    key: Option<Bytes>,
    value: Option<Bytes>,
    headers: Vec<Header>,
}

/// `n` records. Header keys are unique within a record, because kafka-protocol keeps headers
/// in a map. With `monotonic`, timestamps never decrease (the first one is the smallest).
fn gen_records(rng: &mut Rng, n: usize, monotonic: bool) -> Vec<GenRecord> {
    let mut ts = rng.pick(&[0, 1_700_000_000_000, 1 << 50]);
    (0..n)
        .map(|_| {
            let step: i64 = match rng.below(8) {
                0 => 0,
                1 => 1 << 33, // a delta that needs a five-byte varlong
                _ => rng.below(100_000) as i64,
            };
            ts = if monotonic || rng.bool() {
                ts + step
            } else {
                ts - step
            };
            let nh = rng.count(3);
            let headers = (0..nh)
                .map(|i| Header {
                    key: format!("{}#{i}", rng.string()),
                    value: rng.opt_bytes(8),
                })
                .collect();
            GenRecord {
                timestamp: ts,
                key: rng.opt_bytes(10),
                value: rng.opt_bytes(40),
                headers,
            }
        })
        .collect()
}

/// A batch as a producer seals it.
fn sealed_batch(rng: &mut Rng) -> Bytes {
    let n = 1 + rng.count(4);
    let records = gen_records(rng, n, false);
    let mut b = RecordBatchBuilder::with_capacity(rng.count(512));
    for r in &records {
        b.push(
            r.timestamp,
            r.key.as_deref(),
            r.value.as_deref(),
            &r.headers,
        );
    }
    b.seal(rng.i64(), rng.i16(), rng.i32())
}

impl Pair for ProduceRequest {
    type Kp = kp::ProduceRequest;
    const NAME: &'static str = "ProduceRequest";

    fn generate(rng: &mut Rng, _version: i16) -> Self {
        let nt = rng.count(3);
        let topic_data = (0..nt)
            .map(|_| {
                let name = rng.string();
                let np = rng.count(3);
                let partition_data = (0..np)
                    .map(|_| PartitionProduceData {
                        index: rng.i32(),
                        records: match rng.below(4) {
                            0 => None,
                            1 => Some(rng.bytes(40)),
                            _ => Some(sealed_batch(rng)),
                        },
                    })
                    .collect();
                TopicProduceData {
                    name,
                    partition_data,
                }
            })
            .collect();
        Self {
            transactional_id: rng.opt_string(),
            acks: if rng.bool() {
                rng.pick(&[-1, 0, 1])
            } else {
                rng.i16()
            },
            timeout_ms: rng.i32(),
            topic_data,
        }
    }

    fn to_kp(&self) -> Self::Kp {
        kp::ProduceRequest::default()
            .with_transactional_id(
                self.transactional_id
                    .as_deref()
                    .map(|s| TransactionalId(sb(s))),
            )
            .with_acks(self.acks)
            .with_timeout_ms(self.timeout_ms)
            .with_topic_data(
                self.topic_data
                    .iter()
                    .map(|t| {
                        kpq::TopicProduceData::default()
                            .with_name(topic_name(&t.name))
                            .with_partition_data(
                                t.partition_data
                                    .iter()
                                    .map(|p| {
                                        kpq::PartitionProduceData::default()
                                            .with_index(p.index)
                                            .with_records(p.records.clone())
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
    }

    fn from_kp(k: &Self::Kp) -> Self {
        Self {
            transactional_id: k.transactional_id.as_ref().map(|t| st(t)),
            acks: k.acks,
            timeout_ms: k.timeout_ms,
            topic_data: k
                .topic_data
                .iter()
                .map(|t| TopicProduceData {
                    name: st(&t.name),
                    partition_data: t
                        .partition_data
                        .iter()
                        .map(|p| PartitionProduceData {
                            index: p.index,
                            records: p.records.clone(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    fn assert_unmodelled_default(k: &Self::Kp) {
        assert!(k.unknown_tagged_fields.is_empty());
        for t in &k.topic_data {
            assert_eq!(t.topic_id.as_bytes(), &[0; 16], "topic ids are v13+");
            assert!(t.unknown_tagged_fields.is_empty());
            for p in &t.partition_data {
                assert!(p.unknown_tagged_fields.is_empty());
            }
        }
    }

    fn add_ignored(k: &mut Self::Kp, rng: &mut Rng, version: i16) -> bool {
        if !Self::is_flexible(version) {
            return false;
        }
        k.unknown_tagged_fields = rng.unknown_tags(0);
        for t in &mut k.topic_data {
            t.unknown_tagged_fields = rng.unknown_tags(0);
            for p in &mut t.partition_data {
                p.unknown_tagged_fields = rng.unknown_tags(0);
            }
        }
        true
    }
}

impl Pair for ProduceResponse {
    type Kp = kp::ProduceResponse;
    const NAME: &'static str = "ProduceResponse";

    fn generate(rng: &mut Rng, _version: i16) -> Self {
        let nt = rng.count(3);
        let responses = (0..nt)
            .map(|_| {
                let name = rng.string();
                let np = rng.count(3);
                let partition_responses = (0..np)
                    .map(|_| {
                        let index = rng.i32();
                        let error_code = rng.i16();
                        let base_offset = rng.i64();
                        let log_append_time_ms = rng.i64();
                        let log_start_offset = rng.i64();
                        let ne = rng.count(3);
                        let record_errors = (0..ne)
                            .map(|_| BatchIndexAndErrorMessage {
                                batch_index: rng.i32(),
                                batch_index_error_message: rng.opt_string(),
                            })
                            .collect();
                        PartitionProduceResponse {
                            index,
                            error_code,
                            base_offset,
                            log_append_time_ms,
                            log_start_offset,
                            record_errors,
                            error_message: rng.opt_string(),
                            current_leader: match rng.below(4) {
                                0 => None,
                                // Equal to kafka-protocol's "absent" default: see same_bytes.
                                1 => Some(LeaderIdAndEpoch {
                                    leader_id: -1,
                                    leader_epoch: -1,
                                }),
                                _ => Some(LeaderIdAndEpoch {
                                    leader_id: rng.i32(),
                                    leader_epoch: rng.i32(),
                                }),
                            },
                        }
                    })
                    .collect();
                TopicProduceResponse {
                    name,
                    partition_responses,
                }
            })
            .collect();
        let ne = rng.count(3);
        let node_endpoints = (0..ne)
            .map(|_| NodeEndpoint {
                node_id: rng.i32(),
                host: rng.string(),
                port: rng.i32(),
                rack: rng.opt_string(),
            })
            .collect();
        Self {
            responses,
            throttle_time_ms: rng.i32(),
            node_endpoints,
        }
    }

    fn normalize(&self, version: i16) -> Self {
        let mut m = self.clone();
        for p in m
            .responses
            .iter_mut()
            .flat_map(|t| &mut t.partition_responses)
        {
            // Tagged since v10; kafka-protocol represents "absent" as leader -1, epoch -1.
            if version < 10 || p.current_leader.is_some_and(is_no_leader) {
                p.current_leader = None;
            }
        }
        if version < 10 {
            m.node_endpoints.clear();
        }
        for p in m
            .responses
            .iter_mut()
            .flat_map(|t| &mut t.partition_responses)
        {
            if version < 5 {
                p.log_start_offset = -1;
            }
            if version < 8 {
                p.record_errors.clear();
                p.error_message = None;
            }
        }
        m
    }

    fn same_bytes(&self, version: i16) -> bool {
        // We send an explicit (-1, -1) hint as a tagged field; kafka-protocol cannot tell it from
        // an absent hint and omits it.
        version < 10
            || !self
                .responses
                .iter()
                .flat_map(|t| &t.partition_responses)
                .any(|p| p.current_leader.is_some_and(is_no_leader))
    }

    fn to_kp(&self) -> Self::Kp {
        kp::ProduceResponse::default()
            .with_responses(
                self.responses
                    .iter()
                    .map(|t| {
                        kps::TopicProduceResponse::default()
                            .with_name(topic_name(&t.name))
                            .with_partition_responses(
                                t.partition_responses.iter().map(partition_to_kp).collect(),
                            )
                    })
                    .collect(),
            )
            .with_throttle_time_ms(self.throttle_time_ms)
            .with_node_endpoints(
                self.node_endpoints
                    .iter()
                    .map(|n| {
                        kps::NodeEndpoint::default()
                            .with_node_id(BrokerId(n.node_id))
                            .with_host(sb(&n.host))
                            .with_port(n.port)
                            .with_rack(opt_sb(&n.rack))
                    })
                    .collect(),
            )
    }

    fn from_kp(k: &Self::Kp) -> Self {
        Self {
            responses: k
                .responses
                .iter()
                .map(|t| TopicProduceResponse {
                    name: st(&t.name),
                    partition_responses: t
                        .partition_responses
                        .iter()
                        .map(|p| PartitionProduceResponse {
                            index: p.index,
                            error_code: p.error_code,
                            base_offset: p.base_offset,
                            log_append_time_ms: p.log_append_time_ms,
                            log_start_offset: p.log_start_offset,
                            record_errors: p
                                .record_errors
                                .iter()
                                .map(|e| BatchIndexAndErrorMessage {
                                    batch_index: e.batch_index,
                                    batch_index_error_message: opt_st(&e.batch_index_error_message),
                                })
                                .collect(),
                            error_message: opt_st(&p.error_message),
                            current_leader: Some(LeaderIdAndEpoch {
                                leader_id: p.current_leader.leader_id.0,
                                leader_epoch: p.current_leader.leader_epoch,
                            })
                            .filter(|l| !is_no_leader(*l)),
                        })
                        .collect(),
                })
                .collect(),
            throttle_time_ms: k.throttle_time_ms,
            node_endpoints: k
                .node_endpoints
                .iter()
                .map(|n| NodeEndpoint {
                    node_id: n.node_id.0,
                    host: st(&n.host),
                    port: n.port,
                    rack: opt_st(&n.rack),
                })
                .collect(),
        }
    }

    fn assert_unmodelled_default(k: &Self::Kp) {
        assert!(k.unknown_tagged_fields.is_empty());
        for n in &k.node_endpoints {
            assert!(n.unknown_tagged_fields.is_empty());
        }
        for t in &k.responses {
            assert_eq!(t.topic_id.as_bytes(), &[0; 16], "topic ids are v13+");
            assert!(t.unknown_tagged_fields.is_empty());
            for p in &t.partition_responses {
                assert!(p.unknown_tagged_fields.is_empty());
                assert!(p.current_leader.unknown_tagged_fields.is_empty());
                for e in &p.record_errors {
                    assert!(e.unknown_tagged_fields.is_empty());
                }
            }
        }
    }

    fn add_ignored(k: &mut Self::Kp, rng: &mut Rng, version: i16) -> bool {
        if !Self::is_flexible(version) {
            return false;
        }
        // Tag 0 is NodeEndpoints at the top level and CurrentLeader per partition.
        k.unknown_tagged_fields = rng.unknown_tags(1);
        for n in &mut k.node_endpoints {
            n.unknown_tagged_fields = rng.unknown_tags(0);
        }
        for t in &mut k.responses {
            t.unknown_tagged_fields = rng.unknown_tags(0);
            for p in &mut t.partition_responses {
                p.unknown_tagged_fields = rng.unknown_tags(1);
                // Only inside a hint that is sent anyway: unknown tags would make kafka-protocol
                // send a (-1, -1) hint that we would then decode as Some.
                if p.current_leader != kps::LeaderIdAndEpoch::default() {
                    p.current_leader.unknown_tagged_fields = rng.unknown_tags(0);
                }
                for e in &mut p.record_errors {
                    e.unknown_tagged_fields = rng.unknown_tags(0);
                }
            }
        }
        true
    }
}

fn is_no_leader(l: LeaderIdAndEpoch) -> bool {
    l.leader_id == -1 && l.leader_epoch == -1
}

fn partition_to_kp(p: &PartitionProduceResponse) -> kps::PartitionProduceResponse {
    kps::PartitionProduceResponse::default()
        .with_index(p.index)
        .with_error_code(p.error_code)
        .with_base_offset(p.base_offset)
        .with_log_append_time_ms(p.log_append_time_ms)
        .with_log_start_offset(p.log_start_offset)
        .with_record_errors(
            p.record_errors
                .iter()
                .map(|e| {
                    kps::BatchIndexAndErrorMessage::default()
                        .with_batch_index(e.batch_index)
                        .with_batch_index_error_message(opt_sb(&e.batch_index_error_message))
                })
                .collect(),
        )
        .with_error_message(opt_sb(&p.error_message))
        .with_current_leader(match p.current_leader {
            None => kps::LeaderIdAndEpoch::default(),
            Some(l) => kps::LeaderIdAndEpoch::default()
                .with_leader_id(BrokerId(l.leader_id))
                .with_leader_epoch(l.leader_epoch),
        })
}

// ---------------------------------------------------------------------------------------------
// Drivers.
// ---------------------------------------------------------------------------------------------

fn versions<M: Message>() -> impl Iterator<Item = i16> {
    M::VERSIONS.min..=M::VERSIONS.max
}

fn ours_encoded<M: Message>(m: &M, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    m.encode(version, &mut buf);
    buf.freeze()
}

fn kp_encoded<K: Encodable>(k: &K, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    k.encode(&mut buf, version)
        .unwrap_or_else(|e| panic!("kafka-protocol cannot encode v{version}: {e:#}"));
    assert_eq!(
        buf.len(),
        k.compute_size(version).unwrap(),
        "kafka-protocol's own size check"
    );
    buf.freeze()
}

/// Ours → theirs at every version; returns the number of versions checked.
fn ours_to_theirs<M: Pair>() -> usize {
    let theirs = <M::Kp as kproto::Message>::VERSIONS;
    let mut checked = 0;
    for version in versions::<M>() {
        assert!(
            theirs.min <= version && version <= theirs.max,
            "{} v{version} unknown to kafka-protocol",
            M::NAME
        );
        let mut rng = Rng::for_case(M::NAME, version, 1);
        for case in 0..CASES {
            let ours = M::generate(&mut rng, version);
            let expected = ours.normalize(version);
            let bytes = ours_encoded(&ours, version);

            let mut rest = bytes.clone();
            let decoded = M::Kp::decode(&mut rest, version).unwrap_or_else(|e| {
                panic!(
                    "{} v{version} case {case}: kafka-protocol cannot decode our bytes: {e:#}\n{ours:?}",
                    M::NAME
                )
            });
            assert!(
                rest.is_empty(),
                "{} v{version} case {case}: kafka-protocol left {} bytes",
                M::NAME,
                rest.len()
            );
            M::assert_unmodelled_default(&decoded);
            assert_eq!(
                M::from_kp(&decoded),
                expected,
                "{} v{version} case {case}: fields differ",
                M::NAME
            );

            if ours.same_bytes(version) {
                assert_eq!(
                    kp_encoded(&M::to_kp(&expected), version),
                    bytes,
                    "{} v{version} case {case}: bytes differ",
                    M::NAME
                );
            }
        }
        checked += 1;
    }
    checked
}

/// Theirs → ours at every version; returns the number of versions checked.
fn theirs_to_ours<M: Pair>() -> usize {
    let mut checked = 0;
    for version in versions::<M>() {
        let mut rng = Rng::for_case(M::NAME, version, 2);
        let mut with_ignored = 0;
        for case in 0..CASES {
            let expected = M::generate(&mut rng, version).normalize(version);
            let mut theirs = M::to_kp(&expected);
            assert_eq!(
                M::from_kp(&theirs),
                expected,
                "{} v{version} case {case}: the test's conversions are not inverse",
                M::NAME
            );
            let ignored = case % 3 == 2 && M::add_ignored(&mut theirs, &mut rng, version);
            with_ignored += usize::from(ignored);
            let bytes = kp_encoded(&theirs, version);

            let decoded = M::decode_exact(version, bytes.clone()).unwrap_or_else(|e| {
                panic!(
                    "{} v{version} case {case}: we cannot decode kafka-protocol's bytes: {e}\n{theirs:?}",
                    M::NAME
                )
            });
            assert_eq!(
                decoded,
                expected,
                "{} v{version} case {case}: fields differ",
                M::NAME
            );
            if !ignored {
                assert_eq!(
                    ours_encoded(&decoded, version),
                    bytes,
                    "{} v{version} case {case}: bytes differ",
                    M::NAME
                );
            }
        }
        if M::is_flexible(version) {
            assert!(
                with_ignored > 0,
                "{} v{version}: no ignored fields",
                M::NAME
            );
        }
        checked += 1;
    }
    checked
}

fn both_directions<M: Pair>() {
    let n = usize::try_from(M::VERSIONS.max - M::VERSIONS.min + 1).unwrap();
    assert_eq!(ours_to_theirs::<M>(), n);
    assert_eq!(theirs_to_ours::<M>(), n);
}

#[test]
fn api_versions_request_at_every_version() {
    assert_eq!(
        versions::<ApiVersionsRequest>().collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    both_directions::<ApiVersionsRequest>();
}

#[test]
fn api_versions_response_at_every_version() {
    assert_eq!(
        versions::<ApiVersionsResponse>().collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    both_directions::<ApiVersionsResponse>();
}

#[test]
fn metadata_request_at_every_version() {
    assert_eq!(
        versions::<MetadataRequest>().collect::<Vec<_>>(),
        (1..=12).collect::<Vec<_>>()
    );
    both_directions::<MetadataRequest>();
}

#[test]
fn metadata_response_at_every_version() {
    assert_eq!(
        versions::<MetadataResponse>().collect::<Vec<_>>(),
        (1..=12).collect::<Vec<_>>()
    );
    both_directions::<MetadataResponse>();
}

#[test]
fn init_producer_id_request_at_every_version() {
    assert_eq!(
        versions::<InitProducerIdRequest>().collect::<Vec<_>>(),
        [0, 1, 2, 3, 4, 5]
    );
    both_directions::<InitProducerIdRequest>();
}

#[test]
fn init_producer_id_response_at_every_version() {
    assert_eq!(
        versions::<InitProducerIdResponse>().collect::<Vec<_>>(),
        [0, 1, 2, 3, 4, 5]
    );
    both_directions::<InitProducerIdResponse>();
}

#[test]
fn produce_request_at_every_version() {
    assert_eq!(
        versions::<ProduceRequest>().collect::<Vec<_>>(),
        (3..=12).collect::<Vec<_>>()
    );
    both_directions::<ProduceRequest>();
}

#[test]
fn produce_response_at_every_version() {
    assert_eq!(
        versions::<ProduceResponse>().collect::<Vec<_>>(),
        (3..=12).collect::<Vec<_>>()
    );
    both_directions::<ProduceResponse>();
}

/// The generators do reach the cases the brief calls out, so the checks above cover them.
#[test]
fn generated_values_cover_the_interesting_cases() {
    let mut rng = Rng::for_case("coverage", 0, 0);
    let (mut null_name, mut explicit_none_leader, mut leader, mut endpoints) = (0, 0, 0, 0);
    let (mut record_errors, mut error_message, mut null_topics, mut cluster_ops) = (0, 0, 0, 0);
    let (mut non_ascii, mut long_array) = (0, 0);
    for _ in 0..CASES {
        let m = MetadataResponse::generate(&mut rng, 12);
        null_name += m.topics.iter().filter(|t| t.name.is_none()).count();
        cluster_ops += usize::from(m.normalize(10).cluster_authorized_operations != i32::MIN);
        non_ascii += m.brokers.iter().filter(|b| !b.host.is_ascii()).count();
        long_array += usize::from(ApiVersionsResponse::generate(&mut rng, 3).api_keys.len() > 127);
        let r = MetadataRequest::generate(&mut rng, 12);
        null_topics += usize::from(r.topics.is_none());
        let p = ProduceResponse::generate(&mut rng, 12);
        endpoints += usize::from(!p.node_endpoints.is_empty());
        for q in p.responses.iter().flat_map(|t| &t.partition_responses) {
            explicit_none_leader += usize::from(q.current_leader.is_some_and(is_no_leader));
            leader += usize::from(q.current_leader.is_some_and(|l| !is_no_leader(l)));
            record_errors += usize::from(!q.record_errors.is_empty());
            error_message += usize::from(q.error_message.is_some());
        }
    }
    for (what, n) in [
        ("Metadata v12 null topic name", null_name),
        ("Metadata v9/v10 cluster authorized operations", cluster_ops),
        ("non-ASCII host", non_ascii),
        ("an array of more than 127 elements", long_array),
        ("Metadata request for all topics", null_topics),
        ("Produce node_endpoints", endpoints),
        ("Produce current_leader", leader),
        ("Produce current_leader (-1, -1)", explicit_none_leader),
        ("Produce record_errors", record_errors),
        ("Produce error_message", error_message),
    ] {
        assert!(n > 0, "no generated case has {what}");
    }
}

// ---------------------------------------------------------------------------------------------
// Headers.
// ---------------------------------------------------------------------------------------------

#[test]
fn request_headers_v1_and_v2_both_directions() {
    for version in 1..=2 {
        let mut rng = Rng::for_case("RequestHeader", version, 1);
        for case in 0..CASES {
            let ours = RequestHeader {
                api_key: if rng.bool() {
                    rng.pick(&[0, 3, 18, 22])
                } else {
                    rng.i16()
                },
                api_version: rng.i16(),
                correlation_id: rng.i32(),
                client_id: rng.opt_string(),
            };
            let mut buf = BytesMut::new();
            ours.encode(version, &mut buf);
            let bytes = buf.freeze();

            // Ours → theirs.
            let mut rest = bytes.clone();
            let theirs = kp::RequestHeader::decode(&mut rest, version).unwrap();
            assert!(rest.is_empty(), "v{version} case {case}");
            assert_eq!(
                theirs.request_api_key, ours.api_key,
                "v{version} case {case}"
            );
            assert_eq!(theirs.request_api_version, ours.api_version);
            assert_eq!(theirs.correlation_id, ours.correlation_id);
            assert_eq!(opt_st(&theirs.client_id), ours.client_id);
            assert!(theirs.unknown_tagged_fields.is_empty());

            // Theirs → ours, with unknown tags in a third of the v2 cases.
            let mut theirs = kp::RequestHeader::default()
                .with_request_api_key(ours.api_key)
                .with_request_api_version(ours.api_version)
                .with_correlation_id(ours.correlation_id)
                .with_client_id(opt_sb(&ours.client_id));
            let kbytes = kp_encoded(&theirs, version);
            assert_eq!(kbytes, bytes, "v{version} case {case}: bytes differ");
            if version >= 2 && case % 3 == 2 {
                theirs.unknown_tagged_fields = rng.unknown_tags(0);
            }
            let kbytes = kp_encoded(&theirs, version);
            let mut r = Reader::new(kbytes);
            let decoded = RequestHeader::decode(version, &mut r).unwrap();
            r.expect_end().unwrap();
            assert_eq!(decoded, ours, "v{version} case {case}");
        }
    }
}

#[test]
fn response_headers_v0_and_v1_both_directions() {
    for version in 0..=1 {
        let mut rng = Rng::for_case("ResponseHeader", version, 1);
        for case in 0..CASES {
            let ours = ResponseHeader {
                correlation_id: rng.i32(),
            };
            let mut buf = BytesMut::new();
            ours.encode(version, &mut buf);
            let bytes = buf.freeze();

            let mut rest = bytes.clone();
            let theirs = kp::ResponseHeader::decode(&mut rest, version).unwrap();
            assert!(rest.is_empty());
            assert_eq!(theirs.correlation_id, ours.correlation_id);
            assert!(theirs.unknown_tagged_fields.is_empty());

            let mut theirs = kp::ResponseHeader::default().with_correlation_id(ours.correlation_id);
            assert_eq!(
                kp_encoded(&theirs, version),
                bytes,
                "v{version} case {case}"
            );
            if version >= 1 && case % 3 == 2 {
                theirs.unknown_tagged_fields = rng.unknown_tags(0);
            }
            let kbytes = kp_encoded(&theirs, version);
            assert_eq!(
                ResponseHeader::peek_correlation_id(&kbytes),
                Ok(ours.correlation_id)
            );
            let mut r = Reader::new(kbytes);
            assert_eq!(ResponseHeader::decode(version, &mut r), Ok(ours));
            r.expect_end().unwrap();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Whole frames.
// ---------------------------------------------------------------------------------------------

/// Sets the size prefix of a frame whose first four bytes were reserved for it.
fn fix_size(buf: &mut BytesMut) {
    let size = i32::try_from(buf.len() - 4).unwrap();
    buf[..4].copy_from_slice(&size.to_be_bytes());
}

/// Takes the size prefix off a frame and checks it.
fn unframe(frame: &Bytes) -> Bytes {
    let mut buf = frame.clone();
    let size = buf.get_i32();
    assert_eq!(
        usize::try_from(size).unwrap(),
        buf.remaining(),
        "size prefix"
    );
    buf
}

/// Request and response frames of one API at every version, in both directions.
fn frames<R>(key: ApiKey) -> usize
where
    R: Request + Pair,
    R::Response: Pair,
{
    assert_eq!(key as i16, R::API_KEY);
    let mut checked = 0;
    for version in versions::<R>() {
        assert_eq!(
            R::request_header_version(version),
            key.request_header_version(version),
            "{} v{version}: request header version",
            R::NAME
        );
        assert_eq!(
            R::response_header_version(version),
            key.response_header_version(version),
            "{} v{version}: response header version",
            R::NAME
        );
        let mut rng = Rng::for_case(R::NAME, version, 3);
        for case in 0..CASES / 4 {
            let ctx = format!("{} v{version} frame case {case}", R::NAME);
            let request = R::generate(&mut rng, version);
            let expected = request.normalize(version);
            let correlation_id = rng.i32();
            let client_id = rng.opt_string();

            // Our request frame, read by kafka-protocol (which picks the header version itself).
            let frame = encode_request(&request, version, correlation_id, client_id.as_deref());
            let mut buf = unframe(&frame);
            let header = kproto::decode_request_header_from_buffer(&mut buf).unwrap();
            assert_eq!(header.request_api_key, R::API_KEY, "{ctx}");
            assert_eq!(header.request_api_version, version, "{ctx}");
            assert_eq!(header.correlation_id, correlation_id, "{ctx}");
            assert_eq!(opt_st(&header.client_id), client_id, "{ctx}");
            assert!(header.unknown_tagged_fields.is_empty(), "{ctx}");
            let body = R::Kp::decode(&mut buf, version).unwrap();
            assert!(buf.is_empty(), "{ctx}: trailing bytes");
            R::assert_unmodelled_default(&body);
            assert_eq!(R::from_kp(&body), expected, "{ctx}");

            // kafka-protocol's request frame, read by our frame decoder and header decoder.
            let mut kbuf = BytesMut::new();
            kbuf.put_i32(0);
            let kheader = kp::RequestHeader::default()
                .with_request_api_key(R::API_KEY)
                .with_request_api_version(version)
                .with_correlation_id(correlation_id)
                .with_client_id(opt_sb(&client_id));
            kproto::encode_request_header_into_buffer(&mut kbuf, &kheader).unwrap();
            R::to_kp(&expected).encode(&mut kbuf, version).unwrap();
            fix_size(&mut kbuf);
            assert_eq!(kbuf, frame, "{ctx}: request frame bytes differ");
            let f = FrameDecoder::default().decode(&mut kbuf).unwrap().unwrap();
            assert!(kbuf.is_empty(), "{ctx}");
            let mut r = Reader::new(f);
            let h = RequestHeader::decode(R::request_header_version(version), &mut r).unwrap();
            assert_eq!(
                h,
                RequestHeader {
                    api_key: R::API_KEY,
                    api_version: version,
                    correlation_id,
                    client_id: client_id.clone(),
                },
                "{ctx}"
            );
            assert_eq!(R::decode(version, &mut r).unwrap(), expected, "{ctx}");
            r.expect_end().unwrap();

            // Our response frame, read by kafka-protocol.
            let response = R::Response::generate(&mut rng, version);
            let expected = response.normalize(version);
            let frame = encode_response::<R>(&response, version, correlation_id);
            let mut buf = unframe(&frame);
            let header =
                kp::ResponseHeader::decode(&mut buf, key.response_header_version(version)).unwrap();
            assert_eq!(header.correlation_id, correlation_id, "{ctx}");
            let body = <R::Response as Pair>::Kp::decode(&mut buf, version).unwrap();
            assert!(buf.is_empty(), "{ctx}: trailing bytes");
            <R::Response as Pair>::assert_unmodelled_default(&body);
            assert_eq!(<R::Response as Pair>::from_kp(&body), expected, "{ctx}");

            // kafka-protocol's response frame, read by our frame decoder and `decode_response`.
            let mut kbuf = BytesMut::new();
            kbuf.put_i32(0);
            kp::ResponseHeader::default()
                .with_correlation_id(correlation_id)
                .encode(&mut kbuf, key.response_header_version(version))
                .unwrap();
            <R::Response as Pair>::to_kp(&expected)
                .encode(&mut kbuf, version)
                .unwrap();
            fix_size(&mut kbuf);
            if response.same_bytes(version) {
                assert_eq!(kbuf, frame, "{ctx}: response frame bytes differ");
            }
            let f = FrameDecoder::default().decode(&mut kbuf).unwrap().unwrap();
            let (h, body) = decode_response::<R>(version, f).unwrap();
            assert_eq!(h.correlation_id, correlation_id, "{ctx}");
            assert_eq!(body, expected, "{ctx}");
        }
        checked += 1;
    }
    checked
}

#[test]
fn whole_frames_of_every_api_at_every_version() {
    assert_eq!(frames::<ApiVersionsRequest>(ApiKey::ApiVersions), 4);
    assert_eq!(frames::<MetadataRequest>(ApiKey::Metadata), 12);
    assert_eq!(frames::<InitProducerIdRequest>(ApiKey::InitProducerId), 6);
    assert_eq!(frames::<ProduceRequest>(ApiKey::Produce), 10);
}

// ---------------------------------------------------------------------------------------------
// Record batches.
// ---------------------------------------------------------------------------------------------

/// Decodes every batch of a blob with kafka-protocol, with a decompressor that accepts only
/// uncompressed batches, and pairs each with its header information.
fn kp_decode_batches(blob: &Bytes) -> Vec<(krec::BatchDecodeInfo, krec::RecordSet)> {
    let infos = RecordBatchDecoder::decode_batch_info(&mut blob.clone()).unwrap();
    let mut buf = blob.clone();
    let mut sets = Vec::new();
    while buf.has_remaining() {
        let set = RecordBatchDecoder::decode_with_custom_compression(
            &mut buf,
            Some(
                |records: &mut Bytes, compression: Compression| match compression {
                    Compression::None => Ok(records.clone()),
                    other => unreachable!("a {other:?}-compressed batch is never produced here"),
                },
            ),
        )
        .unwrap_or_else(|e| panic!("kafka-protocol cannot decode the batch: {e:#}"));
        sets.push(set);
    }
    assert_eq!(infos.len(), sets.len());
    infos.into_iter().zip(sets).collect()
}

/// Compares one of our batches with kafka-protocol's decoding of it, field by field.
fn assert_same_batch(ours: &RecordBatch, info: &krec::BatchDecodeInfo, set: &krec::RecordSet) {
    let transactional = ours.attributes & 0x10 != 0;
    let control = ours.attributes & 0x20 != 0;
    let timestamp_type = if ours.attributes & 0x08 != 0 {
        TimestampType::LogAppend
    } else {
        TimestampType::Creation
    };
    assert_eq!(set.version, 2);
    assert_eq!(set.compression, Compression::None);
    assert_eq!(info.version, 2);
    assert_eq!(info.compression, Compression::None);
    assert_eq!(info.record_count as usize, ours.records.len());
    assert_eq!(info.min_offset, ours.base_offset);
    assert_eq!(info.min_timestamp, ours.base_timestamp);
    assert_eq!(info.base_sequence, ours.base_sequence);
    assert_eq!(info.partition_leader_epoch, ours.partition_leader_epoch);
    assert_eq!(info.producer_id, ours.producer_id);
    assert_eq!(info.producer_epoch, ours.producer_epoch);
    assert_eq!(info.transactional, transactional);
    assert_eq!(info.control, control);
    assert_eq!(info.timestamp_type, timestamp_type);
    assert_eq!(set.records.len(), ours.records.len());
    for (i, (o, t)) in ours.records.iter().zip(&set.records).enumerate() {
        let ctx = format!("record {i}");
        assert_eq!(
            t.offset,
            ours.base_offset + i64::from(o.offset_delta),
            "{ctx}"
        );
        assert_eq!(
            t.sequence,
            ours.base_sequence.wrapping_add(o.offset_delta),
            "{ctx}"
        );
        assert_eq!(
            t.timestamp,
            ours.base_timestamp + o.timestamp_delta,
            "{ctx}"
        );
        assert_eq!(t.key, o.key, "{ctx}");
        assert_eq!(t.value, o.value, "{ctx}");
        let headers: Vec<Header> = t
            .headers
            .iter()
            .map(|(k, v)| Header {
                key: st(k),
                value: v.clone(),
            })
            .collect();
        assert_eq!(headers, o.headers, "{ctx}");
        assert_eq!(t.producer_id, ours.producer_id, "{ctx}");
        assert_eq!(t.producer_epoch, ours.producer_epoch, "{ctx}");
        assert_eq!(
            t.partition_leader_epoch, ours.partition_leader_epoch,
            "{ctx}"
        );
        assert_eq!(t.transactional, transactional, "{ctx}");
        assert_eq!(t.control, control, "{ctx}");
        assert!(!t.delete_horizon, "{ctx}");
        assert_eq!(t.timestamp_type, timestamp_type, "{ctx}");
    }
}

/// The batch the builder should produce for these records, built by hand.
fn expected_batch(
    records: &[GenRecord],
    producer_id: i64,
    epoch: i16,
    sequence: i32,
) -> RecordBatch {
    let base = records[0].timestamp;
    RecordBatch {
        base_offset: 0,
        partition_leader_epoch: -1,
        attributes: 0,
        last_offset_delta: records.len() as i32 - 1,
        base_timestamp: base,
        max_timestamp: records.iter().map(|r| r.timestamp).max().unwrap(),
        producer_id,
        producer_epoch: epoch,
        base_sequence: sequence,
        records: records
            .iter()
            .enumerate()
            .map(|(i, r)| Record {
                attributes: 0,
                timestamp_delta: r.timestamp - base,
                offset_delta: i as i32,
                key: r.key.clone(),
                value: r.value.clone(),
                headers: r.headers.clone(),
            })
            .collect(),
    }
}

fn build(records: &[GenRecord], producer_id: i64, epoch: i16, sequence: i32) -> Bytes {
    let mut b = RecordBatchBuilder::with_capacity(0);
    for r in records {
        let (key, value) = (r.key.as_deref(), r.value.as_deref());
        let predicted = b.size_of(r.timestamp, key, value, &r.headers);
        let before = b.size();
        b.push(r.timestamp, key, value, &r.headers);
        assert_eq!(b.size() - before, predicted, "size_of predicts push");
    }
    let size = b.size();
    let sealed = b.seal(producer_id, epoch, sequence);
    assert_eq!(sealed.len(), size);
    sealed
}

#[test]
fn our_record_batches_decode_in_kafka_protocol() {
    let mut rng = Rng::for_case("RecordBatch", 2, 1);
    for case in 0..2 * CASES {
        // Sometimes 150 records: offset deltas above 63 take two varint bytes.
        let n = if case % 16 == 15 {
            150
        } else {
            1 + rng.count(9)
        };
        let records = gen_records(&mut rng, n, false);
        let (producer_id, epoch, sequence) = (rng.i64(), rng.i16(), rng.i32());

        // The producer's path: the builder.
        let sealed = build(&records, producer_id, epoch, sequence);
        let expected = expected_batch(&records, producer_id, epoch, sequence);
        let decoded = kp_decode_batches(&sealed);
        assert_eq!(decoded.len(), 1, "case {case}");
        assert_same_batch(&expected, &decoded[0].0, &decoded[0].1);
        assert_eq!(
            RecordBatch::decode_all(sealed.clone()),
            Ok(vec![expected.clone()])
        );
        assert_eq!(expected.encode(), sealed, "case {case}: encoders disagree");

        // The struct encoder, with the fields a broker sets.
        let mut stored = expected.clone();
        stored.base_offset = rng.below(1 << 40) as i64;
        stored.partition_leader_epoch = rng.i32();
        stored.attributes = rng.pick(&[0, 0x08, 0x10, 0x18]);
        let encoded = stored.encode();
        let decoded = kp_decode_batches(&encoded);
        assert_same_batch(&stored, &decoded[0].0, &decoded[0].1);

        // Both in one blob, as in a Produce partition's records.
        let blob: Bytes = [sealed, encoded].concat().into();
        let decoded = kp_decode_batches(&blob);
        assert_eq!(decoded.len(), 2, "case {case}");
        assert_same_batch(&expected, &decoded[0].0, &decoded[0].1);
        assert_same_batch(&stored, &decoded[1].0, &decoded[1].1);
    }
}

fn kp_encode_batches(records: &[krec::Record]) -> Bytes {
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

struct KpBatch {
    base_offset: i64,
    partition_leader_epoch: i32,
    transactional: bool,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
}

fn kp_records(b: &KpBatch, records: &[GenRecord]) -> Vec<krec::Record> {
    records
        .iter()
        .enumerate()
        .map(|(i, r)| krec::Record {
            transactional: b.transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: b.partition_leader_epoch,
            producer_id: b.producer_id,
            producer_epoch: b.producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: b.base_offset + i as i64,
            sequence: b.base_sequence.wrapping_add(i as i32),
            timestamp: r.timestamp,
            key: r.key.clone(),
            value: r.value.clone(),
            headers: r
                .headers
                .iter()
                .map(|h| (sb(&h.key), h.value.clone()))
                .collect::<IndexMap<_, _>>(),
        })
        .collect()
}

/// Compares our decoding of a kafka-protocol batch with what was handed to kafka-protocol.
fn assert_decoded_as(d: &RecordBatch, b: &KpBatch, records: &[GenRecord], ctx: &str) {
    // kafka-protocol takes the smallest timestamp as the base, not the first one.
    let min = records.iter().map(|r| r.timestamp).min().unwrap();
    let max = records.iter().map(|r| r.timestamp).max().unwrap();
    assert_eq!(d.base_offset, b.base_offset, "{ctx}");
    assert_eq!(d.partition_leader_epoch, b.partition_leader_epoch, "{ctx}");
    assert_eq!(
        d.attributes,
        if b.transactional { 0x10 } else { 0 },
        "{ctx}"
    );
    assert_eq!(d.last_offset_delta, records.len() as i32 - 1, "{ctx}");
    assert_eq!(d.base_timestamp, min, "{ctx}");
    assert_eq!(d.max_timestamp, max, "{ctx}");
    assert_eq!(d.producer_id, b.producer_id, "{ctx}");
    assert_eq!(d.producer_epoch, b.producer_epoch, "{ctx}");
    assert_eq!(d.base_sequence, b.base_sequence, "{ctx}");
    assert_eq!(d.records.len(), records.len(), "{ctx}");
    for (i, (o, r)) in d.records.iter().zip(records).enumerate() {
        assert_eq!(o.attributes, 0, "{ctx} record {i}");
        assert_eq!(o.timestamp_delta, r.timestamp - min, "{ctx} record {i}");
        assert_eq!(o.offset_delta, i as i32, "{ctx} record {i}");
        assert_eq!(o.key, r.key, "{ctx} record {i}");
        assert_eq!(o.value, r.value, "{ctx} record {i}");
        assert_eq!(o.headers, r.headers, "{ctx} record {i}");
    }
}

#[test]
fn kafka_protocol_record_batches_decode_in_ours() {
    let mut rng = Rng::for_case("RecordBatch", 2, 2);
    for case in 0..2 * CASES {
        let ctx = format!("case {case}");
        // Half are shaped like a producer's batch: offsets from 0, no leader epoch, timestamps
        // in order. Those must be byte-identical to what our builder seals.
        let producer_like = case % 2 == 0;
        let n = if case % 16 == 14 {
            150
        } else {
            1 + rng.count(9)
        };
        let records = gen_records(&mut rng, n, producer_like);
        let batch = KpBatch {
            base_offset: if producer_like {
                0
            } else {
                rng.below(1 << 40) as i64
            },
            partition_leader_epoch: if producer_like { -1 } else { rng.i32() },
            transactional: !producer_like && rng.bool(),
            producer_id: rng.i64(),
            producer_epoch: rng.i16(),
            base_sequence: rng.i32(),
        };
        let bytes = kp_encode_batches(&kp_records(&batch, &records));
        let decoded = RecordBatch::decode_all(bytes.clone())
            .unwrap_or_else(|e| panic!("{ctx}: we cannot decode kafka-protocol's batch: {e}"));
        assert_eq!(decoded.len(), 1, "{ctx}");
        assert_decoded_as(&decoded[0], &batch, &records, &ctx);
        assert_eq!(
            decoded[0].encode(),
            bytes,
            "{ctx}: struct encoder bytes differ"
        );
        if producer_like {
            assert_eq!(
                build(
                    &records,
                    batch.producer_id,
                    batch.producer_epoch,
                    batch.base_sequence
                ),
                bytes,
                "{ctx}: builder bytes differ"
            );
        }
    }
}

#[test]
fn a_kafka_protocol_blob_of_several_batches_decodes_in_ours() {
    let mut rng = Rng::for_case("RecordBatch", 2, 3);
    // kafka-protocol starts a new batch whenever the producer changes.
    let batches: Vec<(KpBatch, Vec<GenRecord>)> = (0..3i64)
        .map(|i| {
            let n = 1 + rng.count(4);
            let batch = KpBatch {
                base_offset: 100 * i,
                partition_leader_epoch: 7,
                transactional: false,
                producer_id: 1000 + i,
                producer_epoch: i as i16,
                base_sequence: 5 * i as i32,
            };
            (batch, gen_records(&mut rng, n, true))
        })
        .collect();
    let records: Vec<krec::Record> = batches.iter().flat_map(|(b, r)| kp_records(b, r)).collect();
    let blob = kp_encode_batches(&records);
    let decoded = RecordBatch::decode_all(blob).unwrap();
    assert_eq!(decoded.len(), 3);
    for (i, (d, (b, r))) in decoded.iter().zip(&batches).enumerate() {
        assert_decoded_as(d, b, r, &format!("batch {i}"));
    }
}

#[test]
fn a_flipped_byte_in_a_kafka_protocol_batch_fails_our_crc_check() {
    let mut rng = Rng::for_case("RecordBatch", 2, 4);
    let records = gen_records(&mut rng, 3, true);
    let batch = KpBatch {
        base_offset: 0,
        partition_leader_epoch: -1,
        transactional: false,
        producer_id: 42,
        producer_epoch: 1,
        base_sequence: 9,
    };
    let bytes = kp_encode_batches(&kp_records(&batch, &records));
    assert!(RecordBatch::decode_all(bytes.clone()).is_ok());

    // The CRC covers everything from the attributes (offset 21) to the end; a change to the CRC
    // itself (17..21) is caught as well.
    for pos in 17..bytes.len() {
        for mask in [0x01u8, 0x80, 0xff] {
            let mut flipped = bytes.to_vec();
            flipped[pos] ^= mask;
            match RecordBatch::decode_all(Bytes::from(flipped.clone())) {
                Err(DecodeError::CrcMismatch { stored, computed }) => {
                    assert_ne!(stored, computed);
                }
                other => panic!("byte {pos} ^ {mask:#04x}: expected a CRC mismatch, got {other:?}"),
            }
            // kafka-protocol agrees that the batch is corrupt.
            assert!(RecordBatchDecoder::decode(&mut Bytes::from(flipped)).is_err());
        }
    }

    // The partition leader epoch (12..16) is deliberately outside the CRC: a broker stamps it
    // without recomputing the checksum.
    let mut stamped = bytes.to_vec();
    stamped[12..16].copy_from_slice(&5i32.to_be_bytes());
    let decoded = RecordBatch::decode_all(Bytes::from(stamped)).unwrap();
    assert_eq!(decoded[0].partition_leader_epoch, 5);
}
