//! Produce (key 0), v3–v12, with topic names.
//!
//! v3 is the oldest version that carries RecordBatch v2 (magic 2, the only format with producer
//! ids and sequences) and a `transactional_id`; each partition carries exactly one record batch
//! (a broker rule since v3). v3–v8 are non-flexible (i16 strings, i32 arrays, i32-length
//! records). Response fields by version: `log_append_time_ms` is present from v2 (so always
//! here), `log_start_offset` from v5 (-1 before), `record_errors` and `error_message` from v8
//! (empty/null before). v4–v6 differ from v3 only in the errors the broker may return, v7 in
//! allowing zstd. v9 is the first flexible version. v10 adds the KIP-951 leader hints: the
//! tagged `CurrentLeader` per partition and `NodeEndpoints` at the top level of the response.
//! v11 and v12 have the same layout as v10.

use bytes::{BufMut, Bytes, BytesMut};
use smallvec::SmallVec;

use super::primitives::put_tagged_field;
use super::{api_key, DecodeError, Message, Reader, Request, VersionRange, Writer};

/// Produce request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProduceRequest {
    /// Null for an idempotent producer.
    pub transactional_id: Option<String>,
    /// -1 (all in-sync replicas) for an idempotent producer.
    pub acks: i16,
    /// How long the broker may wait for the acks.
    pub timeout_ms: i32,
    /// Data per topic.
    pub topic_data: Vec<TopicProduceData>,
}

/// One topic's data.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicProduceData {
    /// Topic name.
    pub name: String,
    /// Data per partition.
    pub partition_data: Vec<PartitionProduceData>,
}

/// One partition's data.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionProduceData {
    /// Partition index.
    pub index: i32,
    /// The encoded record batch.
    pub records: Option<Bytes>,
}

impl Message for ProduceRequest {
    const API_KEY: i16 = api_key::PRODUCE;
    const VERSIONS: VersionRange = VersionRange::new(3, 12);
    const FLEXIBLE_SINCE: i16 = 9;

    fn size_hint(&self) -> usize {
        let mut n = 32 + self.transactional_id.as_ref().map_or(0, String::len);
        for t in &self.topic_data {
            n += 16 + t.name.len();
            for p in &t.partition_data {
                n += 16 + p.records.as_ref().map_or(0, Bytes::len);
            }
        }
        n
    }

    fn encode(&self, version: i16, buf: &mut BytesMut) {
        let flex = Self::is_flexible(version);
        buf.put_nullable_string(self.transactional_id.as_deref(), flex);
        buf.put_i16(self.acks);
        buf.put_i32(self.timeout_ms);
        buf.put_array_len(Some(self.topic_data.len()), flex);
        for t in &self.topic_data {
            buf.put_string(&t.name, flex);
            buf.put_array_len(Some(t.partition_data.len()), flex);
            for p in &t.partition_data {
                buf.put_i32(p.index);
                buf.put_nullable_bytes(p.records.as_deref(), flex);
                if flex {
                    buf.put_empty_tags();
                }
            }
            if flex {
                buf.put_empty_tags();
            }
        }
        if flex {
            buf.put_empty_tags();
        }
    }

    fn decode(version: i16, r: &mut Reader) -> Result<Self, DecodeError> {
        let flex = Self::is_flexible(version);
        let transactional_id = r.nullable_string(flex)?;
        let acks = r.i16()?;
        let timeout_ms = r.i32()?;
        let topic_data = r.array(flex, |r| {
            let name = r.string(flex)?;
            let partition_data = r.array(flex, |r| {
                let p = PartitionProduceData {
                    index: r.i32()?,
                    records: r.nullable_bytes(flex)?,
                };
                if flex {
                    r.skip_tagged_fields()?;
                }
                Ok(p)
            })?;
            if flex {
                r.skip_tagged_fields()?;
            }
            Ok(TopicProduceData {
                name,
                partition_data,
            })
        })?;
        if flex {
            r.skip_tagged_fields()?;
        }
        Ok(Self {
            transactional_id,
            acks,
            timeout_ms,
            topic_data,
        })
    }
}

impl Request for ProduceRequest {
    type Response = ProduceResponse;
}

impl ProduceRequest {
    /// Encodes a whole request frame, like [`super::encode_request`], as a list of chunks
    /// whose concatenation is the frame: the record batches are not copied but appear as
    /// chunks of their own, between the framing around them. Writing the chunks in order
    /// (vectored I/O) puts exactly the frame on the wire.
    pub fn encode_chunks(
        &self,
        version: i16,
        correlation_id: i32,
        client_id: Option<&str>,
    ) -> SmallVec<[Bytes; 4]> {
        let mut meta = BytesMut::new();
        self.encode_chunks_into(version, correlation_id, client_id, &mut meta)
    }

    /// [`Self::encode_chunks`], writing the framing into `arena`: its spare capacity is used
    /// and the framing split off it (frozen), so a caller that keeps the arena from request
    /// to request allocates no framing buffer in steady state (once the chunks of earlier
    /// requests are dropped, `reserve` takes their space back).
    pub fn encode_chunks_into(
        &self,
        version: i16,
        correlation_id: i32,
        client_id: Option<&str>,
        arena: &mut BytesMut,
    ) -> SmallVec<[Bytes; 4]> {
        debug_assert!(Self::VERSIONS.contains(version));
        let mut need = 64 + client_id.map_or(0, str::len);
        for t in &self.topic_data {
            need += 16 + t.name.len() + 24 * t.partition_data.len();
        }
        let mut meta = std::mem::take(arena);
        meta.clear();
        if meta.capacity() < need {
            meta.reserve(need.max(4096));
        }
        meta.put_i32(0);
        super::header::encode_request_header(
            Self::API_KEY,
            version,
            correlation_id,
            client_id,
            Self::request_header_version(version),
            &mut meta,
        );
        let flex = Self::is_flexible(version);
        meta.put_nullable_string(self.transactional_id.as_deref(), flex);
        meta.put_i16(self.acks);
        meta.put_i32(self.timeout_ms);
        meta.put_array_len(Some(self.topic_data.len()), flex);
        // (offset in `meta` after which a batch goes, the batch)
        let mut splits: SmallVec<[(usize, Bytes); 4]> = SmallVec::new();
        let mut batch_bytes = 0;
        for t in &self.topic_data {
            meta.put_string(&t.name, flex);
            meta.put_array_len(Some(t.partition_data.len()), flex);
            for p in &t.partition_data {
                meta.put_i32(p.index);
                match &p.records {
                    Some(b) => {
                        // The length prefix only: the batch itself becomes its own chunk.
                        if flex {
                            meta.put_uvarint(b.len() as u32 + 1);
                        } else {
                            meta.put_i32(b.len() as i32);
                        }
                        splits.push((meta.len(), b.clone()));
                        batch_bytes += b.len();
                    }
                    None => meta.put_nullable_bytes(None, flex),
                }
                if flex {
                    meta.put_empty_tags();
                }
            }
            if flex {
                meta.put_empty_tags();
            }
        }
        if flex {
            meta.put_empty_tags();
        }
        let size = (meta.len() + batch_bytes - 4) as i32;
        meta[..4].copy_from_slice(&size.to_be_bytes());
        // The framing leaves; the rest of the capacity stays in the arena for the next one.
        let framing = meta.split();
        *arena = meta;
        let meta = framing.freeze();
        let mut chunks = SmallVec::new();
        let mut from = 0;
        for (at, batch) in splits {
            chunks.push(meta.slice(from..at));
            chunks.push(batch);
            from = at;
        }
        // Before the flexible versions nothing follows the last batch: no empty chunk, which
        // a driver's vectored write of it alone would take for a closed connection.
        if from < meta.len() {
            chunks.push(meta.slice(from..));
        }
        chunks
    }
}

/// Produce response.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ProduceResponse {
    /// Results per topic.
    pub responses: Vec<TopicProduceResponse>,
    /// Throttle time.
    pub throttle_time_ms: i32,
    /// Since v10 (tag 0): endpoints of the brokers named in `current_leader` hints.
    pub node_endpoints: Vec<NodeEndpoint>,
}

impl ProduceResponse {
    /// What the broker said beyond the error code about partition `index` of `topic` (its
    /// first result): the records it named invalid and its message. `None` if the answer
    /// has no such partition.
    pub fn error_detail(
        &self,
        topic: &str,
        index: i32,
    ) -> Option<(Vec<BatchIndexAndErrorMessage>, Option<String>)> {
        (self.responses.iter())
            .filter(|t| t.name == topic)
            .flat_map(|t| &t.partition_responses)
            .find(|p| p.index == index)
            .map(|p| (p.record_errors.clone(), p.error_message.clone()))
    }
}

/// One topic's results.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicProduceResponse {
    /// Topic name.
    pub name: String,
    /// Results per partition.
    pub partition_responses: Vec<PartitionProduceResponse>,
}

/// One partition's result.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionProduceResponse {
    /// Partition index.
    pub index: i32,
    /// Error code.
    pub error_code: i16,
    /// Offset of the first record, or -1.
    pub base_offset: i64,
    /// Broker append time with LogAppendTime, else -1.
    pub log_append_time_ms: i64,
    /// The partition's log start offset, or -1.
    pub log_start_offset: i64,
    /// Records that made the batch fail.
    pub record_errors: Vec<BatchIndexAndErrorMessage>,
    /// Summary error message.
    pub error_message: Option<String>,
    /// Since v10 (tag 0): the leader the broker knows of, on NOT_LEADER_OR_FOLLOWER.
    pub current_leader: Option<LeaderIdAndEpoch>,
}

/// A record-level error.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BatchIndexAndErrorMessage {
    /// Index of the record in the batch.
    pub batch_index: i32,
    /// Message.
    pub batch_index_error_message: Option<String>,
}

/// A KIP-951 leader hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaderIdAndEpoch {
    /// Leader node id, or -1.
    pub leader_id: i32,
    /// Leader epoch, or -1.
    pub leader_epoch: i32,
}

/// A KIP-951 broker endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeEndpoint {
    /// Node id.
    pub node_id: i32,
    /// Host.
    pub host: String,
    /// Port.
    pub port: i32,
    /// Rack.
    pub rack: Option<String>,
}

impl Message for ProduceResponse {
    const API_KEY: i16 = api_key::PRODUCE;
    const VERSIONS: VersionRange = VersionRange::new(3, 12);
    const FLEXIBLE_SINCE: i16 = 9;

    // One layout for v3–v12: the flexible versions (v9+) add compact lengths and tagged
    // fields; fields absent at `version` are not written, and read as Kafka's generated code
    // defaults them (`log_start_offset` -1, no record errors, no message).
    fn encode(&self, version: i16, buf: &mut BytesMut) {
        let flex = Self::is_flexible(version);
        buf.put_array_len(Some(self.responses.len()), flex);
        for t in &self.responses {
            buf.put_string(&t.name, flex);
            buf.put_array_len(Some(t.partition_responses.len()), flex);
            for p in &t.partition_responses {
                buf.put_i32(p.index);
                buf.put_i16(p.error_code);
                buf.put_i64(p.base_offset);
                buf.put_i64(p.log_append_time_ms);
                if version >= 5 {
                    buf.put_i64(p.log_start_offset);
                }
                if version >= 8 {
                    buf.put_array_len(Some(p.record_errors.len()), flex);
                    for e in &p.record_errors {
                        buf.put_i32(e.batch_index);
                        buf.put_nullable_string(e.batch_index_error_message.as_deref(), flex);
                        if flex {
                            buf.put_empty_tags();
                        }
                    }
                    buf.put_nullable_string(p.error_message.as_deref(), flex);
                }
                if flex {
                    match p.current_leader {
                        Some(l) if version >= 10 => {
                            buf.put_uvarint(1);
                            put_tagged_field(buf, 0, |f| {
                                f.put_i32(l.leader_id);
                                f.put_i32(l.leader_epoch);
                                f.put_empty_tags();
                            });
                        }
                        _ => buf.put_empty_tags(),
                    }
                }
            }
            if flex {
                buf.put_empty_tags();
            }
        }
        buf.put_i32(self.throttle_time_ms);
        if !flex {
            return;
        }
        if version >= 10 && !self.node_endpoints.is_empty() {
            buf.put_uvarint(1);
            put_tagged_field(buf, 0, |f| {
                f.put_array_len(Some(self.node_endpoints.len()), true);
                for n in &self.node_endpoints {
                    f.put_i32(n.node_id);
                    f.put_string(&n.host, true);
                    f.put_i32(n.port);
                    f.put_nullable_string(n.rack.as_deref(), true);
                    f.put_empty_tags();
                }
            });
        } else {
            buf.put_empty_tags();
        }
    }

    fn decode(version: i16, r: &mut Reader) -> Result<Self, DecodeError> {
        let flex = Self::is_flexible(version);
        let responses = r.array(flex, |r| {
            let name = r.string(flex)?;
            let partition_responses = r.array(flex, |r| {
                let index = r.i32()?;
                let error_code = r.i16()?;
                let base_offset = r.i64()?;
                let log_append_time_ms = r.i64()?;
                let log_start_offset = if version >= 5 { r.i64()? } else { -1 };
                let (record_errors, error_message) = if version >= 8 {
                    let errors = r.array(flex, |r| {
                        let e = BatchIndexAndErrorMessage {
                            batch_index: r.i32()?,
                            batch_index_error_message: r.nullable_string(flex)?,
                        };
                        if flex {
                            r.skip_tagged_fields()?;
                        }
                        Ok(e)
                    })?;
                    (errors, r.nullable_string(flex)?)
                } else {
                    (Vec::new(), None)
                };
                let mut current_leader = None;
                if flex {
                    r.tagged_fields(|tag, f| {
                        if tag == 0 && version >= 10 {
                            current_leader = Some(LeaderIdAndEpoch {
                                leader_id: f.i32()?,
                                leader_epoch: f.i32()?,
                            });
                            f.skip_tagged_fields()?;
                            Ok(true)
                        } else {
                            Ok(false)
                        }
                    })?;
                }
                Ok(PartitionProduceResponse {
                    index,
                    error_code,
                    base_offset,
                    log_append_time_ms,
                    log_start_offset,
                    record_errors,
                    error_message,
                    current_leader,
                })
            })?;
            if flex {
                r.skip_tagged_fields()?;
            }
            Ok(TopicProduceResponse {
                name,
                partition_responses,
            })
        })?;
        let throttle_time_ms = r.i32()?;
        let mut node_endpoints = Vec::new();
        if flex {
            r.tagged_fields(|tag, f| {
                if tag == 0 && version >= 10 {
                    node_endpoints = f.array(true, |f| {
                        let n = NodeEndpoint {
                            node_id: f.i32()?,
                            host: f.string(true)?,
                            port: f.i32()?,
                            rack: f.nullable_string(true)?,
                        };
                        f.skip_tagged_fields()?;
                        Ok(n)
                    })?;
                    Ok(true)
                } else {
                    Ok(false)
                }
            })?;
        }
        Ok(Self {
            responses,
            throttle_time_ms,
            node_endpoints,
        })
    }
}

/// One partition's result in a Produce response as [`ProduceResponseReader`] reads it in
/// place: every field the producer acts on. (The record errors and error message of v8+ are
/// checked here, and read only for a refusal, by [`ProduceResponseReader::decode_whole`].)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartitionResult {
    /// Partition index.
    pub index: i32,
    /// Error code.
    pub error_code: i16,
    /// Offset of the first record, or -1.
    pub base_offset: i64,
    /// Broker append time with LogAppendTime, else -1.
    pub log_append_time_ms: i64,
    /// The partition's log start offset, or -1 (always before v5).
    pub log_start_offset: i64,
    /// Since v10 (tag 0): the leader the broker knows of, on NOT_LEADER_OR_FOLLOWER.
    pub current_leader: Option<LeaderIdAndEpoch>,
}

/// A Produce response (v3–v12) read in place, without building [`ProduceResponse`]: no
/// allocation. [`Self::new`] walks the whole body once and checks everything
/// [`ProduceResponse::decode`] checks (every length against the bytes present, UTF-8 of every
/// string, tagged-field order and sizes), so a truncated or hostile answer is an error before
/// anything is acted on; the partition results are then walked again as often as needed.
#[derive(Debug, Clone)]
pub struct ProduceResponseReader {
    version: i16,
    body: Bytes,
    throttle_time_ms: i32,
}

impl ProduceResponseReader {
    /// Checks the response body `body` of `version`.
    pub fn new(version: i16, body: Bytes) -> Result<Self, DecodeError> {
        ProduceResponse::check_version(version)?;
        let throttle_time_ms = walk_response(version, &mut Reader::new(body.clone()), |_, _| true)?;
        Ok(Self {
            version,
            body,
            throttle_time_ms,
        })
    }

    /// Checks a whole response frame (without its size prefix): the response header, then
    /// the body as [`Self::new`]. Bytes after the body are ignored, as by
    /// [`super::decode_response`].
    pub fn from_frame(version: i16, frame: Bytes) -> Result<Self, DecodeError> {
        ProduceResponse::check_version(version)?;
        let mut r = Reader::new(frame);
        let header_version = ProduceRequest::response_header_version(version);
        super::ResponseHeader::decode(header_version, &mut r)?;
        let body = r.take(r.remaining())?;
        Self::new(version, body)
    }

    /// The version the response is read as.
    pub fn version(&self) -> i16 {
        self.version
    }

    /// The throttle time.
    pub fn throttle_time_ms(&self) -> i32 {
        self.throttle_time_ms
    }

    /// Calls `f` with each partition result and the name of its topic (UTF-8, a slice of the
    /// response), in the order
    /// of the response, until `f` returns `false`.
    pub fn for_each(&self, mut f: impl FnMut(&Bytes, &PartitionResult) -> bool) {
        // `new` walked the same bytes without error, so this walk cannot fail.
        let walked = walk_response(self.version, &mut Reader::new(self.body.clone()), &mut f);
        debug_assert!(walked.is_ok(), "a checked response walks again");
    }

    /// The whole answer, decoded into owned structs ([`ProduceResponse`]): for a refusal's
    /// rare path ([`ProduceResponse::error_detail`]). `None` before v8, which has no record
    /// errors or messages to read.
    pub fn decode_whole(&self) -> Option<ProduceResponse> {
        if self.version < 8 {
            return None;
        }
        ProduceResponse::decode(self.version, &mut Reader::new(self.body.clone())).ok()
    }

    /// The first result for partition `index` of `topic`.
    pub fn find(&self, topic: &str, index: i32) -> Option<PartitionResult> {
        let mut found = None;
        self.for_each(|t, p| {
            if p.index == index && t[..] == *topic.as_bytes() {
                found = Some(*p);
            }
            found.is_none()
        });
        found
    }
}

/// Walks a Produce response body of `version` (v3–v12, classic or flexible), checking every
/// field, and calls `f` with each partition's topic name and result until it returns
/// `false`. Returns the throttle time (0 if `f` stopped the walk).
fn walk_response(
    version: i16,
    r: &mut Reader,
    mut f: impl FnMut(&Bytes, &PartitionResult) -> bool,
) -> Result<i32, DecodeError> {
    let flex = ProduceResponse::is_flexible(version);
    for _ in 0..r.array_len(flex)? {
        let name = r
            .nullable_str_bytes(flex)?
            .ok_or(DecodeError::UnexpectedNull)?;
        for _ in 0..r.array_len(flex)? {
            let index = r.i32()?;
            let error_code = r.i16()?;
            let base_offset = r.i64()?;
            let log_append_time_ms = r.i64()?;
            let log_start_offset = if version >= 5 { r.i64()? } else { -1 };
            if version >= 8 {
                // record_errors, then error_message: checked (read on a refusal by `decode_whole`).
                for _ in 0..r.array_len(flex)? {
                    r.i32()?;
                    r.nullable_str_bytes(flex)?;
                    if flex {
                        r.skip_tagged_fields()?;
                    }
                }
                r.nullable_str_bytes(flex)?;
            }
            let mut current_leader = None;
            if flex {
                r.tagged_fields(|tag, t| {
                    if tag == 0 && version >= 10 {
                        current_leader = Some(LeaderIdAndEpoch {
                            leader_id: t.i32()?,
                            leader_epoch: t.i32()?,
                        });
                        t.skip_tagged_fields()?;
                        Ok(true)
                    } else {
                        Ok(false)
                    }
                })?;
            }
            let result = PartitionResult {
                index,
                error_code,
                base_offset,
                log_append_time_ms,
                log_start_offset,
                current_leader,
            };
            if !f(&name, &result) {
                return Ok(0);
            }
        }
        if flex {
            r.skip_tagged_fields()?;
        }
    }
    let throttle_time_ms = r.i32()?;
    if flex {
        r.tagged_fields(|tag, t| {
            if tag == 0 && version >= 10 {
                // node_endpoints: checked, not kept.
                for _ in 0..t.array_len(true)? {
                    t.i32()?;
                    t.nullable_str_bytes(true)?
                        .ok_or(DecodeError::UnexpectedNull)?;
                    t.i32()?;
                    t.nullable_str_bytes(true)?;
                    t.skip_tagged_fields()?;
                }
                Ok(true)
            } else {
                Ok(false)
            }
        })?;
    }
    Ok(throttle_time_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_encoding_concatenates_to_the_plain_frame() {
        let batch = |n: u8| Some(Bytes::from(vec![n; 70 + usize::from(n)]));
        let req = ProduceRequest {
            transactional_id: None,
            acks: -1,
            timeout_ms: 30_000,
            topic_data: vec![
                TopicProduceData {
                    name: "a".into(),
                    partition_data: vec![
                        PartitionProduceData {
                            index: 0,
                            records: batch(1),
                        },
                        PartitionProduceData {
                            index: 3,
                            records: None,
                        },
                        PartitionProduceData {
                            index: 5,
                            records: batch(2),
                        },
                    ],
                },
                TopicProduceData {
                    name: "bb".into(),
                    partition_data: vec![PartitionProduceData {
                        index: 1,
                        records: batch(3),
                    }],
                },
            ],
        };
        for v in 3..=12 {
            let plain = super::super::encode_request(&req, v, 77, Some("kprod"));
            let chunks = req.encode_chunks(v, 77, Some("kprod"));
            // Three batches and their framing; before the flexible versions (9) nothing follows
            // the last batch, and no chunk is empty.
            let framing = if v >= 9 { 4 } else { 3 };
            assert_eq!(chunks.len(), 3 + framing, "version {v}");
            assert!(chunks.iter().all(|c| !c.is_empty()), "version {v}");
            let joined: Vec<u8> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
            assert_eq!(joined, plain.to_vec(), "version {v}");
        }
    }

    fn sample_response() -> ProduceResponse {
        let part = |index: i32, error_code: i16| PartitionProduceResponse {
            index,
            error_code,
            base_offset: 1000 + i64::from(index),
            log_append_time_ms: -1,
            log_start_offset: 7,
            record_errors: vec![BatchIndexAndErrorMessage {
                batch_index: 2,
                batch_index_error_message: Some("bad record".into()),
            }],
            error_message: Some("an error".into()),
            current_leader: (error_code == 6).then_some(LeaderIdAndEpoch {
                leader_id: 3,
                leader_epoch: 9,
            }),
        };
        ProduceResponse {
            responses: vec![
                TopicProduceResponse {
                    name: "a".into(),
                    partition_responses: vec![part(0, 0), part(4, 6)],
                },
                TopicProduceResponse {
                    name: "bb".into(),
                    partition_responses: vec![part(1, 0), part(1, 47)],
                },
            ],
            throttle_time_ms: 12,
            node_endpoints: vec![NodeEndpoint {
                node_id: 3,
                host: "h".into(),
                port: 9092,
                rack: None,
            }],
        }
    }

    /// What the reader yields, from the owned decoding of the same bytes.
    fn results_of(resp: &ProduceResponse) -> Vec<(Vec<u8>, PartitionResult)> {
        resp.responses
            .iter()
            .flat_map(|t| {
                t.partition_responses.iter().map(|p| {
                    let r = PartitionResult {
                        index: p.index,
                        error_code: p.error_code,
                        base_offset: p.base_offset,
                        log_append_time_ms: p.log_append_time_ms,
                        log_start_offset: p.log_start_offset,
                        current_leader: p.current_leader,
                    };
                    (t.name.as_bytes().to_vec(), r)
                })
            })
            .collect()
    }

    fn read_all(r: &ProduceResponseReader) -> Vec<(Vec<u8>, PartitionResult)> {
        let mut out = Vec::new();
        r.for_each(|t, p| {
            out.push((t.to_vec(), *p));
            true
        });
        out
    }

    /// The in-place reader and the owned decoder agree on every version: the same results,
    /// and the same verdict on every truncation and on every single-byte corruption.
    #[test]
    fn the_reader_agrees_with_the_owned_decoder() {
        let resp = sample_response();
        for v in 3..=12 {
            let mut buf = BytesMut::new();
            resp.encode(v, &mut buf);
            let bytes = buf.freeze();
            let owned = ProduceResponse::decode(v, &mut Reader::new(bytes.clone())).unwrap();
            let reader = ProduceResponseReader::new(v, bytes.clone()).unwrap();
            assert_eq!(read_all(&reader), results_of(&owned), "version {v}");
            assert_eq!(reader.throttle_time_ms(), 12);
            let leader = reader.find("a", 4).unwrap().current_leader;
            assert_eq!(leader.is_some(), v >= 10, "version {v}");
            assert_eq!(
                reader.find("bb", 1).unwrap().error_code,
                0,
                "first entry wins"
            );
            assert_eq!(reader.find("a", 1), None);
            assert_eq!(reader.find("b", 1), None);
            for n in 0..bytes.len() {
                let cut = bytes.slice(..n);
                assert_eq!(
                    ProduceResponseReader::new(v, cut.clone()).err(),
                    ProduceResponse::decode(v, &mut Reader::new(cut)).err(),
                    "version {v}, cut at {n}"
                );
            }
            for at in 0..bytes.len() {
                for x in [0x01u8, 0x80, 0xff] {
                    let mut b = bytes.to_vec();
                    b[at] ^= x;
                    let b = Bytes::from(b);
                    let owned = ProduceResponse::decode(v, &mut Reader::new(b.clone()));
                    let read = ProduceResponseReader::new(v, b);
                    match (owned, read) {
                        (Ok(o), Ok(r)) => assert_eq!(read_all(&r), results_of(&o)),
                        (o, r) => assert_eq!(o.err(), r.err(), "version {v}, byte {at} ^ {x}"),
                    }
                }
            }
        }
        assert!(ProduceResponseReader::new(2, Bytes::new()).is_err());
        assert!(ProduceResponseReader::new(13, Bytes::new()).is_err());
    }
}
