//! The producer: orchestration of connections, metadata, the producer id, and partitions.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use smallvec::SmallVec;

use crate::config::{DataLossPolicy, GapPolicy, ProducerConfig};
use crate::partition::{Batch, BatchState, Partition, SendContext};
use crate::partitioner::partition_for_key;
use crate::protocol::api_versions::{ApiVersionsRequest, ApiVersionsResponse};
use crate::protocol::compression::{Compression, RatioEstimate};
use crate::protocol::init_producer_id::InitProducerIdRequest;
use crate::protocol::metadata::{MetadataRequest, MetadataRequestTopic};
use crate::protocol::produce::{
    PartitionProduceData, PartitionProduceResponse, ProduceRequest, TopicProduceData,
};
use crate::protocol::record_batch::{
    record_encoded_len, RecordBatch, RecordBatchBuilder, HEADER_LEN,
};
use crate::protocol::{
    self, api_key, decode_response, encode_request, ErrorCode, FrameDecoder, Message,
    ResponseHeader, VersionRange,
};
use crate::types::{
    ConnId, DeliveryError, Diagnostic, Event, FatalError, Output, Persistence, ProducerIdentity,
    Record, RecordId, SendError,
};

/// Bytes a Produce request spends outside its record batches, per request and per partition
/// (a generous bound: header, client id, topic name, tagged fields).
const REQUEST_OVERHEAD: usize = 128;
const PARTITION_OVERHEAD: usize = 16;
/// How often CORRUPT_MESSAGE is retried before it counts as a permanent failure.
const MAX_CORRUPT_RETRIES: u8 = 3;

#[path = "producer_auth.rs"]
mod auth;

/// Which broker a connection goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Target {
    Bootstrap(usize),
    Node(i32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ConnState {
    Connecting,
    Negotiating,
    /// SASL: after ApiVersions, before anything else (`producer_auth.rs`).
    Authenticating,
    /// SASL re-authentication (KIP-368): no new request is written meanwhile.
    Reauthenticating,
    Ready,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
struct Versions {
    produce: i16,
    metadata: i16,
    init_producer_id: i16,
}

/// A batch inside a Produce request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct BatchRef {
    topic: usize,
    partition: usize,
    batch: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum RequestKind {
    ApiVersions(i16),
    Metadata,
    InitProducerId,
    Produce(SmallVec<[BatchRef; 4]>),
    SaslHandshake,
    SaslAuthenticate,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct InFlight {
    correlation_id: i32,
    kind: RequestKind,
    deadline: Instant,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Conn {
    target: Target,
    addr: Arc<str>,
    state: ConnState,
    versions: Versions,
    inflight: VecDeque<InFlight>,
    decoder: FrameDecoder,
    sasl: Option<auth::SaslConn>,
}

impl Conn {
    fn produce_inflight(&self) -> usize {
        self.inflight
            .iter()
            .filter(|r| matches!(r.kind, RequestKind::Produce(_)))
            .count()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Backoff {
    until: Instant,
    failures: u32,
}

/// A record waiting for its topic's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct PendingRecord {
    id: RecordId,
    record: Record,
    size: usize,
    enqueued: Instant,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Topic {
    name: Arc<str>,
    partitions: Vec<Partition>,
    pending: VecDeque<PendingRecord>,
    sticky: i32,
    /// Metadata says the topic does not exist: the code, while it keeps saying so.
    missing: Option<ErrorCode>,
    /// The compression of this topic's batches, and Kafka's estimate of its ratio.
    compression: Compression,
    ratio: RatioEstimate,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
struct MetadataState {
    in_flight: bool,
    needed: bool,
    last_refresh: Option<Instant>,
    retry_at: Option<Instant>,
}

/// The sans-IO idempotent producer.
///
/// # Contract
///
/// The producer never performs I/O, never reads a clock and never spawns anything. A driver
/// feeds it inputs and carries out its outputs:
///
/// 1. **Mutate**: call one of
///    - the application commands [`send`](Self::send), [`flush`](Self::flush),
///      [`close`](Self::close);
///    - the driver inputs [`handle_connected`](Self::handle_connected),
///      [`handle_connect_failed`](Self::handle_connect_failed),
///      [`handle_read`](Self::handle_read), [`handle_disconnected`](Self::handle_disconnected),
///      [`handle_timeout`](Self::handle_timeout).
///
///    Every mutator takes `now`, which must never go backwards.
/// 2. **Drain**: call [`poll_output`](Self::poll_output) until it returns [`Output::Wait`],
///    carrying out each output in order: write `Transmit` bytes to their connection (one
///    request may come as several consecutive `Transmit`s, so that record batches are never
///    copied: write them in order; vectored writes gather them for free), open
///    connections for `Connect` (and report the result under the same [`ConnId`]), drop the
///    connection on `Close`, and hand `Event`s to the application.
/// 3. **Wait** for the next input, or until the `Wait` deadline, then call `handle_timeout`.
///
/// Mutating inside the drain is allowed. The driver must report every disconnect, must
/// never resend bytes on its own, and must hand every byte read to `handle_read` in order.
///
/// # Guarantees
///
/// Each record accepted by `send` gets exactly one final event: `Delivered` with its offset,
/// or `Failed` with a truthful [`Persistence`]. Records of one partition are written in send
/// order, each at most once.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Producer {
    cfg: ProducerConfig,
    now: Instant,
    out: VecDeque<Output>,
    dirty: bool,
    next_conn: u64,
    next_correlation: i32,
    next_record: u64,
    next_batch: u64,
    conns: BTreeMap<ConnId, Conn>,
    node_conns: BTreeMap<i32, ConnId>,
    brokers: BTreeMap<i32, Arc<str>>,
    bootstrap_next: usize,
    backoff: BTreeMap<Target, Backoff>,
    topics: Vec<Topic>,
    topic_index: BTreeMap<Arc<str>, usize>,
    identity: Option<ProducerIdentity>,
    pid_request: Option<ConnId>,
    pid_retry_at: Option<Instant>,
    pid_failures: u32,
    bump_refused: bool,
    metadata: MetadataState,
    buffered_bytes: usize,
    pending_records: usize,
    flush_upto: Option<RecordId>,
    closing: bool,
    closed: bool,
    fatal: Option<FatalError>,
}

/// Whether `name` is a legal Kafka topic name.
pub fn is_valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || c == b'-')
}

fn backoff_delay(base: Duration, max: Duration, failures: u32) -> Duration {
    let factor = 1u32 << failures.min(16);
    base.saturating_mul(factor).min(max)
}

impl Producer {
    /// A producer with a validated configuration. Nothing happens until the first drain.
    pub fn new(config: ProducerConfig, now: Instant) -> Result<Self, crate::ConfigError> {
        config.validate()?;
        Ok(Self {
            now,
            out: VecDeque::new(),
            dirty: true,
            next_conn: 0,
            next_correlation: 0,
            next_record: 0,
            next_batch: 0,
            conns: BTreeMap::new(),
            node_conns: BTreeMap::new(),
            brokers: BTreeMap::new(),
            bootstrap_next: 0,
            backoff: BTreeMap::new(),
            topics: Vec::new(),
            topic_index: BTreeMap::new(),
            identity: None,
            pid_request: None,
            pid_retry_at: None,
            pid_failures: 0,
            bump_refused: false,
            metadata: MetadataState::default(),
            buffered_bytes: 0,
            pending_records: 0,
            flush_upto: None,
            closing: false,
            closed: false,
            fatal: None,
            cfg: config,
        })
    }

    // ----------------------------------------------------------------------------------
    // Getters

    /// The configuration.
    pub fn config(&self) -> &ProducerConfig {
        &self.cfg
    }

    /// Records accepted and not yet resolved.
    pub fn pending_records(&self) -> usize {
        self.pending_records
    }

    /// Bytes of record data held.
    pub fn buffered_bytes(&self) -> usize {
        self.buffered_bytes
    }

    /// The producer's current identity, if it has one.
    pub fn identity(&self) -> Option<ProducerIdentity> {
        self.identity
    }

    /// The fatal error, once the producer has failed.
    pub fn fatal_error(&self) -> Option<&FatalError> {
        self.fatal.as_ref()
    }

    /// Whether `close` was called and every record has resolved.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The id the next accepted record will get.
    pub fn next_record_id(&self) -> RecordId {
        RecordId(self.next_record)
    }

    /// Connections the producer currently tracks.
    pub fn connections(&self) -> impl Iterator<Item = ConnId> + '_ {
        self.conns.keys().copied()
    }

    // ----------------------------------------------------------------------------------
    // Application commands

    /// Accepts a record, or hands it back with the reason.
    // The error hands the whole record back on purpose (rskafka's `TryPush::NoCapacity`).
    #[allow(clippy::result_large_err)]
    pub fn send(&mut self, now: Instant, record: Record) -> Result<RecordId, SendError> {
        self.advance(now);
        if self.fatal.is_some() || self.closing {
            return Err(SendError::Closed(record));
        }
        if !is_valid_topic_name(&record.topic) {
            return Err(SendError::InvalidTopic(record));
        }
        if record.partition.is_some_and(|p| p < 0) {
            return Err(SendError::InvalidPartition(record));
        }
        let size = record_encoded_len(
            0,
            0,
            record.key.as_deref(),
            record.value.as_deref(),
            &record.headers,
        ) + 10;
        let overhead = REQUEST_OVERHEAD + PARTITION_OVERHEAD + record.topic.len() + HEADER_LEN;
        if size + overhead > self.cfg.max_request_size {
            return Err(SendError::TooLarge(record));
        }
        if self.buffered_bytes + size > self.cfg.buffer_memory {
            return Err(SendError::QueueFull(record));
        }
        let ti = match self.topic_index.get(record.topic.as_str()) {
            Some(&ti) => ti,
            None => {
                let name: Arc<str> = Arc::from(record.topic.as_str());
                self.topics.push(Topic {
                    name: name.clone(),
                    partitions: Vec::new(),
                    pending: VecDeque::new(),
                    sticky: 0,
                    missing: None,
                    compression: self.cfg.compression_for(&record.topic),
                    ratio: RatioEstimate::default(),
                });
                self.topic_index.insert(name, self.topics.len() - 1);
                self.metadata.needed = true;
                self.topics.len() - 1
            }
        };
        let n = self.topics[ti].partitions.len() as i32;
        if n > 0 && record.partition.is_some_and(|p| p >= n) {
            return Err(SendError::InvalidPartition(record));
        }
        let id = RecordId(self.next_record);
        self.next_record += 1;
        self.buffered_bytes += size;
        self.pending_records += 1;
        self.dirty = true;
        if n > 0 && self.topics[ti].pending.is_empty() {
            self.append(ti, id, record, size);
        } else {
            self.topics[ti].pending.push_back(PendingRecord {
                id,
                record,
                size,
                enqueued: now,
            });
        }
        Ok(id)
    }

    /// Sends every record accepted so far without waiting for `linger.ms`.
    pub fn flush(&mut self, now: Instant) {
        self.advance(now);
        if self.next_record > 0 {
            self.flush_upto = Some(RecordId(self.next_record - 1));
        }
        self.dirty = true;
    }

    /// Stops accepting records, sends what is buffered, and closes every connection once
    /// all records have resolved ([`Self::is_closed`]).
    pub fn close(&mut self, now: Instant) {
        self.flush(now);
        self.closing = true;
    }

    // ----------------------------------------------------------------------------------
    // Driver inputs

    /// The connection asked for by `Output::Connect` is established.
    pub fn handle_connected(&mut self, now: Instant, conn: ConnId) {
        self.advance(now);
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if c.state != ConnState::Connecting {
            return;
        }
        c.state = ConnState::Negotiating;
        self.send_api_versions(conn, ApiVersionsRequest::VERSIONS.max);
    }

    /// The connection asked for by `Output::Connect` could not be established.
    pub fn handle_connect_failed(&mut self, now: Instant, conn: ConnId) {
        self.advance(now);
        self.drop_conn(conn, "connect failed");
    }

    /// The connection was closed by the peer or failed.
    pub fn handle_disconnected(&mut self, now: Instant, conn: ConnId) {
        self.advance(now);
        self.drop_conn(conn, "disconnected");
    }

    /// Bytes arrived on `conn`. Whole frames are consumed from the front of `buf`; a partial
    /// frame is left for the next call.
    pub fn handle_read(&mut self, now: Instant, conn: ConnId, buf: &mut BytesMut) {
        self.advance(now);
        loop {
            let Some(c) = self.conns.get_mut(&conn) else {
                buf.clear();
                return;
            };
            let frame = match c.decoder.decode(buf) {
                Ok(Some(f)) => f,
                Ok(None) => return,
                Err(_) => {
                    self.close_conn(conn, "bad frame size");
                    buf.clear();
                    return;
                }
            };
            if let Err(reason) = self.handle_frame(conn, frame) {
                self.close_conn(conn, reason);
                buf.clear();
                return;
            }
        }
    }

    /// A deadline from `Output::Wait` passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
    }

    // ----------------------------------------------------------------------------------
    // Drain

    /// The next thing for the driver to do. Call until it returns [`Output::Wait`].
    #[must_use]
    pub fn poll_output(&mut self) -> Output {
        if self.out.is_empty() && self.dirty {
            self.dirty = false;
            self.work();
        }
        match self.out.pop_front() {
            Some(o) => o,
            None => Output::Wait {
                until: self.next_deadline(),
            },
        }
    }

    // ----------------------------------------------------------------------------------
    // Internals: time and outputs

    fn advance(&mut self, now: Instant) {
        if now > self.now {
            self.now = now;
        }
        self.dirty = true;
    }

    fn emit(&mut self, event: Event) {
        self.out.push_back(Output::Event(event));
    }

    fn diag(&mut self, d: Diagnostic) {
        self.emit(Event::Diagnostic(d));
    }

    fn next_correlation_id(&mut self) -> i32 {
        let c = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1) & i32::MAX;
        c
    }

    fn transmit<R: protocol::Request>(
        &mut self,
        conn: ConnId,
        req: &R,
        version: i16,
        kind: RequestKind,
    ) {
        let correlation_id = self.next_correlation_id();
        let bytes = encode_request(req, version, correlation_id, self.cfg.client_id.as_deref());
        self.track_and_send(conn, correlation_id, kind, std::iter::once(bytes));
    }

    /// A Produce request goes out as chunks: its record batches are not copied (§E.3).
    fn transmit_produce(
        &mut self,
        conn: ConnId,
        req: &ProduceRequest,
        version: i16,
        kind: RequestKind,
    ) {
        let correlation_id = self.next_correlation_id();
        let chunks = req.encode_chunks(version, correlation_id, self.cfg.client_id.as_deref());
        self.track_and_send(conn, correlation_id, kind, chunks);
    }

    fn track_and_send(
        &mut self,
        conn: ConnId,
        correlation_id: i32,
        kind: RequestKind,
        chunks: impl IntoIterator<Item = Bytes>,
    ) {
        let deadline = self.now + self.cfg.request_timeout;
        if let Some(c) = self.conns.get_mut(&conn) {
            c.inflight.push_back(InFlight {
                correlation_id,
                kind,
                deadline,
            });
            for bytes in chunks {
                self.out.push_back(Output::Transmit { conn, bytes });
            }
        }
    }

    fn send_api_versions(&mut self, conn: ConnId, version: i16) {
        let req = ApiVersionsRequest {
            client_software_name: self.cfg.client_software_name.clone(),
            client_software_version: self.cfg.client_software_version.clone(),
        };
        self.transmit(conn, &req, version, RequestKind::ApiVersions(version));
    }

    // ----------------------------------------------------------------------------------
    // Connections

    fn open_conn(&mut self, target: Target, addr: Arc<str>) -> ConnId {
        let conn = ConnId(self.next_conn);
        self.next_conn += 1;
        self.conns.insert(
            conn,
            Conn {
                target,
                addr: addr.clone(),
                state: ConnState::Connecting,
                versions: Versions::default(),
                inflight: VecDeque::new(),
                decoder: FrameDecoder::new(self.cfg.max_frame_size),
                sasl: None,
            },
        );
        if let Target::Node(n) = target {
            self.node_conns.insert(n, conn);
        }
        self.out.push_back(Output::Connect { conn, addr });
        conn
    }

    /// Closes a connection on our side (request timeout, protocol error).
    fn close_conn(&mut self, conn: ConnId, reason: &'static str) {
        if self.conns.contains_key(&conn) {
            self.out.push_back(Output::Close { conn });
            self.drop_conn(conn, reason);
        }
    }

    /// Forgets a connection and resolves everything that was in flight on it: every Produce
    /// attempt on it may or may not have been written (P8).
    fn drop_conn(&mut self, conn: ConnId, reason: &'static str) {
        let Some(c) = self.conns.remove(&conn) else {
            return;
        };
        if let Target::Node(n) = c.target {
            if self.node_conns.get(&n) == Some(&conn) {
                self.node_conns.remove(&n);
            }
        }
        let failed = !matches!(c.state, ConnState::Ready | ConnState::Reauthenticating)
            || reason == "connect failed";
        if let (Target::Node(n), true) = (c.target, failed) {
            // A leader that cannot be reached may no longer lead: ask who does (the Java
            // client refreshes metadata on every failed connect).
            let leads_something = self
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter())
                .any(|p| p.leader == Some(n) && !p.batches.is_empty());
            if leads_something {
                self.metadata.needed = true;
            }
        }
        let b = self.backoff.entry(c.target).or_insert(Backoff {
            until: self.now,
            failures: 0,
        });
        if failed {
            b.failures = b.failures.saturating_add(1);
        }
        b.until = self.now
            + backoff_delay(
                self.cfg.reconnect_backoff,
                self.cfg.retry_backoff_max,
                b.failures.saturating_sub(1),
            );
        if let Target::Bootstrap(i) = c.target {
            if failed {
                self.bootstrap_next = (i + 1) % self.cfg.bootstrap_servers.len();
            }
        }
        for req in c.inflight {
            match req.kind {
                RequestKind::ApiVersions(_)
                | RequestKind::SaslHandshake
                | RequestKind::SaslAuthenticate => {}
                RequestKind::Metadata => {
                    self.metadata.in_flight = false;
                    self.metadata.needed = true;
                }
                RequestKind::InitProducerId => {
                    self.pid_request = None;
                }
                RequestKind::Produce(refs) => {
                    for r in refs {
                        self.retry_batch(r, ErrorCode::NetworkException, true);
                    }
                }
            }
        }
        for t in &mut self.topics {
            for p in &mut t.partitions {
                if p.inflight_conn == Some(conn) {
                    p.inflight_conn = None;
                }
            }
        }
        if self.fatal.is_none() {
            self.diag(Diagnostic::Disconnected { conn, reason });
        }
    }

    fn target_ready(&self, target: Target) -> bool {
        self.backoff
            .get(&target)
            .is_none_or(|b| b.until <= self.now)
    }

    /// A ready connection for a request any broker can answer, or `None` after arranging one.
    fn any_ready_conn(&mut self) -> Option<ConnId> {
        let ready = self
            .conns
            .iter()
            .filter(|(_, c)| c.state == ConnState::Ready)
            .min_by_key(|(_, c)| c.inflight.len())
            .map(|(id, _)| *id);
        if ready.is_some() {
            return ready;
        }
        if !self.conns.is_empty() {
            return None; // one is being set up
        }
        let node = self
            .brokers
            .iter()
            .find(|(n, _)| self.target_ready(Target::Node(**n)))
            .map(|(n, a)| (*n, a.clone()));
        if let Some((n, addr)) = node {
            self.open_conn(Target::Node(n), addr);
            return None;
        }
        let len = self.cfg.bootstrap_servers.len();
        for k in 0..len {
            let i = (self.bootstrap_next + k) % len;
            if self.target_ready(Target::Bootstrap(i)) {
                let addr: Arc<str> = Arc::from(self.cfg.bootstrap_servers[i].as_str());
                self.open_conn(Target::Bootstrap(i), addr);
                return None;
            }
        }
        None
    }

    // ----------------------------------------------------------------------------------
    // The work loop

    fn work(&mut self) {
        if self.fatal.is_some() {
            return;
        }
        self.expire_requests();
        self.sasl_timers();
        self.expire_deliveries();
        if self.fatal.is_some() {
            return;
        }
        self.maybe_request_producer_id();
        self.maybe_request_metadata();
        self.rebind_partitions();
        self.send_produce_requests();
        self.connect_to_leaders();
        self.maybe_finish_close();
    }

    fn expire_requests(&mut self) {
        let now = self.now;
        let expired: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.inflight.front().is_some_and(|r| r.deadline <= now))
            .map(|(id, _)| *id)
            .collect();
        for conn in expired {
            self.close_conn(conn, "request timeout");
        }
    }

    fn expire_deliveries(&mut self) {
        let now = self.now;
        let timeout = self.cfg.delivery_timeout;
        for ti in 0..self.topics.len() {
            while let Some(p) = self.topics[ti].pending.front() {
                let error = if p.enqueued + timeout <= now {
                    DeliveryError::DeliveryTimeout
                } else if let (Some(code), true) = (
                    self.topics[ti].missing,
                    p.enqueued + self.cfg.max_block <= now,
                ) {
                    DeliveryError::UnknownTopic(code)
                } else {
                    break;
                };
                let p = self.topics[ti].pending.pop_front().expect("front exists");
                self.resolve_pending(p, error);
            }
            for pi in 0..self.topics[ti].partitions.len() {
                // Batches are in creation order: stop at the first one not yet expired.
                // In-flight batches wait for their answer or their request timeout (P8).
                let mut i = 0;
                while i < self.topics[ti].partitions[pi].batches.len() {
                    let b = &self.topics[ti].partitions[pi].batches[i];
                    if b.created + timeout > now {
                        break;
                    }
                    if b.state == BatchState::InFlight {
                        i += 1;
                        continue;
                    }
                    // `fail_batch` reports it possibly persisted if an attempt went unanswered.
                    let persisted = Persistence::NotPersisted;
                    if mutated!(self.cfg, TimeoutForgetsAttempts) {
                        self.topics[ti].partitions[pi].batches[i].maybe_persisted = false;
                    }
                    self.fail_batch(ti, pi, i, DeliveryError::DeliveryTimeout, persisted);
                }
            }
        }
    }

    fn maybe_request_producer_id(&mut self) {
        if self.identity.is_some() || self.pid_request.is_some() {
            return;
        }
        if self.pid_retry_at.is_some_and(|t| t > self.now) {
            return;
        }
        let Some(conn) = self.any_ready_conn() else {
            return;
        };
        let version = self.conns[&conn].versions.init_producer_id;
        self.pid_request = Some(conn);
        self.transmit(
            conn,
            &InitProducerIdRequest::default(),
            version,
            RequestKind::InitProducerId,
        );
    }

    fn metadata_wanted(&self) -> bool {
        if self.topics.is_empty() {
            return false;
        }
        if self.metadata.needed {
            return true;
        }
        match self.metadata.last_refresh {
            None => true,
            Some(t) => t + self.cfg.metadata_max_age <= self.now,
        }
    }

    fn maybe_request_metadata(&mut self) {
        if self.metadata.in_flight || !self.metadata_wanted() {
            return;
        }
        if self.metadata.retry_at.is_some_and(|t| t > self.now) {
            return;
        }
        let Some(conn) = self.any_ready_conn() else {
            return;
        };
        let version = self.conns[&conn].versions.metadata;
        let req = MetadataRequest {
            topics: Some(
                self.topics
                    .iter()
                    .map(|t| MetadataRequestTopic {
                        topic_id: [0; 16],
                        name: Some(t.name.to_string()),
                    })
                    .collect(),
            ),
            allow_auto_topic_creation: self.cfg.allow_auto_topic_creation,
            include_cluster_authorized_operations: false,
            include_topic_authorized_operations: false,
        };
        self.metadata.in_flight = true;
        self.metadata.needed = false;
        self.transmit(conn, &req, version, RequestKind::Metadata);
    }

    /// Moves drained partitions to the producer's current identity (P9). A batch that a
    /// later one overtook cannot be re-sequenced without reordering the log, and a cut
    /// partition's spent batches belong to the cut: they fail, definitively not persisted (a
    /// drained partition has no ambiguous batch left).
    fn rebind_partitions(&mut self) {
        let identity = self.identity;
        if identity.is_none() {
            return;
        }
        for ti in 0..self.topics.len() {
            for pi in 0..self.topics[ti].partitions.len() {
                let p = &self.topics[ti].partitions[pi];
                if p.bound == identity || !p.is_drained() {
                    continue;
                }
                // Under a cut (§B.4) every spent batch belongs to the cut series, including one
                // that came back from the wire with a retriable error after the cut: it fails
                // rather than being re-sequenced after the gap.
                loop {
                    let p = &self.topics[ti].partitions[pi];
                    let cutting = p.cutting;
                    let Some(i) = p
                        .batches
                        .iter()
                        .position(|b| b.seq.is_some() && (b.overtaken || cutting))
                    else {
                        break;
                    };
                    let error = if cutting {
                        DeliveryError::PartitionCut
                    } else {
                        DeliveryError::Broker(ErrorCode::OutOfOrderSequenceNumber)
                    };
                    self.fail_batch(ti, pi, i, error, Persistence::NotPersisted);
                }
                let p = &mut self.topics[ti].partitions[pi];
                let (old, old_seq) = (p.bound, p.next_seq);
                if p.maybe_rebind(identity)
                    && mutated!(self.cfg, NewPidKeepsSequence)
                    && old.is_some_and(|o| identity.is_some_and(|n| n.producer_id != o.producer_id))
                {
                    p.next_seq = old_seq;
                }
            }
        }
    }

    fn send_produce_requests(&mut self) {
        let ready: SmallVec<[(ConnId, i32); 8]> = self
            .node_conns
            .iter()
            .filter(|(_, c)| {
                self.conns
                    .get(c)
                    .is_some_and(|c| c.state == ConnState::Ready)
            })
            .map(|(n, c)| (*c, *n))
            .collect();
        let bound = if mutated!(self.cfg, InflightOffByOne) {
            self.cfg.max_in_flight + 1
        } else {
            self.cfg.max_in_flight
        };
        for (conn, node) in ready {
            while self.conns[&conn].produce_inflight() < bound {
                if !self.send_one_produce(conn, node) {
                    break;
                }
            }
        }
    }

    /// Builds one Produce request for `conn` with at most one batch per partition led by
    /// `node`. Returns whether a request was sent.
    fn send_one_produce(&mut self, conn: ConnId, node: i32) -> bool {
        let ctx = SendContext {
            now: self.now,
            identity: self.identity,
            conn,
            max_in_flight: self.cfg.max_in_flight,
            linger: self.cfg.linger,
            batch_size: self.cfg.batch_size,
            flush_upto: if self.closing {
                Some(RecordId(u64::MAX))
            } else {
                self.flush_upto
            },
            max_sequence: self.cfg.max_sequence,
            idle_expiry: self.cfg.producer_state_expiry(),
            #[cfg(feature = "mutations")]
            mutation: self.cfg.mutation,
        };
        let mut refs: SmallVec<[BatchRef; 4]> = SmallVec::new();
        let mut topic_data: Vec<TopicProduceData> = Vec::new();
        let mut total = REQUEST_OVERHEAD;
        for (ti, t) in self.topics.iter_mut().enumerate() {
            let mut parts = Vec::new();
            for (pi, p) in t.partitions.iter_mut().enumerate() {
                if p.leader != Some(node) {
                    continue;
                }
                // Leave room: a batch that does not fit waits for the next request.
                if let Some(b) = p.batches.iter().find(|b| b.state != BatchState::InFlight) {
                    if !refs.is_empty()
                        && total + b.wire_len() + PARTITION_OVERHEAD > self.cfg.max_request_size
                    {
                        continue;
                    }
                }
                // The first unsealed batch, if it is sealed (and compressed) now, tells the
                // topic's compression ratio estimate how well it compressed.
                let unsealed = p
                    .batches
                    .iter()
                    .find_map(|b| b.builder.as_ref().map(|bb| (b.id, bb.records_len())));
                let Some(pick) = p.next_to_send(&ctx) else {
                    continue;
                };
                let b = &p.batches[pick.index];
                let wire = b.wire.clone().expect("a picked batch is sequenced");
                if !t.compression.is_none() {
                    if let Some((_, raw)) = unsealed.filter(|u| u.0 == b.id) {
                        t.ratio.observe(wire.len() - HEADER_LEN, raw);
                    }
                }
                total += wire.len() + PARTITION_OVERHEAD + t.name.len();
                refs.push(BatchRef {
                    topic: ti,
                    partition: pi,
                    batch: b.id,
                });
                parts.push(PartitionProduceData {
                    index: pi as i32,
                    records: Some(wire),
                });
            }
            if !parts.is_empty() {
                topic_data.push(TopicProduceData {
                    name: t.name.to_string(),
                    partition_data: parts,
                });
            }
        }
        if refs.is_empty() {
            return false;
        }
        let req = ProduceRequest {
            transactional_id: None,
            acks: self.cfg.acks,
            timeout_ms: self.cfg.request_timeout.as_millis().min(i32::MAX as u128) as i32,
            topic_data,
        };
        let version = self.conns[&conn].versions.produce;
        self.transmit_produce(conn, &req, version, RequestKind::Produce(refs));
        true
    }

    /// Opens connections to leaders that have something to send.
    fn connect_to_leaders(&mut self) {
        let mut wanted: Vec<i32> = Vec::new();
        let mut unknown_leader = false;
        for t in &self.topics {
            for p in &t.partitions {
                if p.batches.is_empty() {
                    continue;
                }
                match p.leader {
                    Some(n) if !self.node_conns.contains_key(&n) => wanted.push(n),
                    Some(n) if !self.brokers.contains_key(&n) => unknown_leader = true,
                    None => unknown_leader = true,
                    _ => {}
                }
            }
        }
        if unknown_leader && !self.metadata.in_flight {
            self.metadata.needed = true;
            self.maybe_request_metadata();
        }
        wanted.sort_unstable();
        wanted.dedup();
        for n in wanted {
            if !self.target_ready(Target::Node(n)) {
                continue;
            }
            if let Some(addr) = self.brokers.get(&n).cloned() {
                self.open_conn(Target::Node(n), addr);
            }
        }
    }

    fn maybe_finish_close(&mut self) {
        if self.closing && !self.closed && self.pending_records == 0 {
            self.closed = true;
            let conns: Vec<ConnId> = self.conns.keys().copied().collect();
            for c in conns {
                self.out.push_back(Output::Close { conn: c });
            }
            self.conns.clear();
            self.node_conns.clear();
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        if self.fatal.is_some() || self.closed {
            return None;
        }
        let now = self.now;
        // The earliest deadline still in the future. Deadlines that have passed are either
        // handled already or blocked behind something that is not a timer.
        let mut next: Option<Instant> = None;
        let mut consider = |d: Instant| {
            if d > now && next.is_none_or(|n| d < n) {
                next = Some(d);
            }
        };
        for c in self.conns.values() {
            if let Some(r) = c.inflight.front() {
                consider(r.deadline);
            }
            if let Some(d) = c.sasl.as_ref().and_then(auth::SaslConn::next_deadline) {
                consider(d);
            }
        }
        let timeout = self.cfg.delivery_timeout;
        for t in &self.topics {
            if let Some(p) = t.pending.front() {
                consider(p.enqueued + timeout);
                if t.missing.is_some() {
                    consider(p.enqueued + self.cfg.max_block);
                }
            }
            for p in &t.partitions {
                p.deadlines(self.cfg.linger).for_each(&mut consider);
                // Batches are in creation order; in-flight ones expire through their request.
                if let Some(b) = p.batches.iter().find(|b| b.state != BatchState::InFlight) {
                    consider(b.created + timeout);
                }
            }
        }
        if let Some(t) = self.metadata.last_refresh {
            if !self.topics.is_empty() {
                consider(t + self.cfg.metadata_max_age);
            }
        }
        self.metadata.retry_at.into_iter().for_each(&mut consider);
        self.pid_retry_at.into_iter().for_each(&mut consider);
        self.backoff.values().for_each(|b| consider(b.until));
        next
    }

    // ----------------------------------------------------------------------------------
    // Records and batches

    fn choose_partition(&mut self, ti: usize, record: &Record) -> i32 {
        let t = &mut self.topics[ti];
        let n = t.partitions.len() as i32;
        match (&record.partition, &record.key) {
            (Some(p), _) => *p,
            (None, Some(k)) => partition_for_key(k, n),
            (None, None) => t.sticky % n,
        }
    }

    /// Appends a record to its partition's open batch, opening a new batch when the open one
    /// is full. The sticky partition moves on when a new batch is opened for it (KIP-480).
    fn append(&mut self, ti: usize, id: RecordId, record: Record, size: usize) {
        let n = self.topics[ti].partitions.len() as i32;
        let part = self.choose_partition(ti, &record);
        if part >= n {
            self.buffered_bytes -= size;
            self.pending_records -= 1;
            self.emit(Event::Failed {
                id,
                error: DeliveryError::UnknownPartition,
                persisted: Persistence::NotPersisted,
            });
            return;
        }
        let batch_size = self.cfg.batch_size;
        let now = self.now;
        let next_batch = &mut self.next_batch;
        let t = &mut self.topics[ti];
        let p = &mut t.partitions[part as usize];
        let (key, value) = (record.key.as_deref(), record.value.as_deref());
        let fits = p.batches.back().is_some_and(|b| {
            b.state == BatchState::Open
                && b.builder.as_ref().is_some_and(|bb| {
                    bb.has_room_for(
                        bb.size_of(record.timestamp, key, value, &record.headers),
                        batch_size,
                    )
                })
        });
        if !fits {
            let had_open = if let Some(b) = p.batches.back_mut() {
                let open = b.state == BatchState::Open;
                if open {
                    b.state = BatchState::Ready;
                }
                open
            } else {
                false
            };
            let cap = (HEADER_LEN + size).max(batch_size.min(self.cfg.max_request_size));
            // Sized from this record, the batch's records rarely outgrow their list.
            let expected = (cap / size.max(1)).clamp(1, 1024);
            let mut batch = Batch::new(*next_batch, now, cap, expected);
            if let Some(bb) = batch.builder.as_mut() {
                bb.set_compression(t.compression, t.ratio);
            }
            p.batches.push_back(batch);
            *next_batch += 1;
            if had_open && record.key.is_none() && record.partition.is_none() && n > 0 {
                t.sticky = (t.sticky + 1) % n;
            }
        }
        let b = p.batches.back_mut().expect("just ensured");
        let builder = b.builder.as_mut().expect("open batch has a builder");
        builder.push(record.timestamp, key, value, &record.headers);
        b.records.push(id);
        b.size += size;
        if builder.is_full(batch_size) {
            b.state = BatchState::Ready;
        }
    }

    fn resolve_pending(&mut self, p: PendingRecord, error: DeliveryError) {
        self.buffered_bytes -= p.size;
        self.pending_records -= 1;
        self.emit(Event::Failed {
            id: p.id,
            error,
            persisted: Persistence::NotPersisted,
        });
    }

    /// Removes batch `i` of a partition and reports every record as failed. A sequenced batch
    /// of the bound identity leaves a gap: the partition must rebase (P9, P10).
    fn fail_batch(
        &mut self,
        ti: usize,
        pi: usize,
        i: usize,
        error: DeliveryError,
        persisted: Persistence,
    ) {
        let p = &mut self.topics[ti].partitions[pi];
        let Some(b) = p.batches.remove(i) else { return };
        // Whatever the last attempt drew, an earlier attempt with no verdict may have
        // written the batch (P10): the report must say so.
        let persisted = if b.maybe_persisted {
            Persistence::PossiblyPersisted
        } else {
            persisted
        };
        if b.is_sequenced_under(p.bound) {
            p.gap = true;
            p.needs_rebase = true;
        }
        p.update_inflight_conn();
        self.buffered_bytes -= b.size;
        self.pending_records -= b.records.len();
        for id in b.records {
            self.emit(Event::Failed {
                id,
                error: error.clone(),
                persisted,
            });
        }
        self.request_bump_for(ti, pi);
    }

    /// Removes batch `i` and reports its records delivered at `base_offset..`.
    fn ack_batch(&mut self, ti: usize, pi: usize, i: usize, base_offset: Option<i64>) {
        let topic = self.topics[ti].name.clone();
        let p = &mut self.topics[ti].partitions[pi];
        let Some(b) = p.batches.remove(i) else { return };
        if let Some((identity, base)) = b.seq {
            if Some(identity) == p.bound {
                let last_seq =
                    crate::partition::seq_add(base, b.count() - 1, self.cfg.max_sequence);
                let last_offset = base_offset.map_or(-1, |o| o + i64::from(b.count()) - 1);
                p.last_acked = Some((last_seq, last_offset));
                p.probe = false;
                p.last_write = Some(b.created);
            }
            // P11: a later acknowledgement proves nothing about earlier batches, and makes
            // them impossible to re-sequence without reordering.
            for earlier in p.batches.iter_mut().take(i) {
                if earlier.is_sequenced_under(Some(identity)) {
                    earlier.overtaken = true;
                }
            }
        }
        p.update_inflight_conn();
        self.buffered_bytes -= b.size;
        self.pending_records -= b.records.len();
        for (k, id) in b.records.into_iter().enumerate() {
            self.emit(Event::Delivered {
                id,
                topic: topic.clone(),
                partition: pi as i32,
                offset: base_offset.map(|o| o + k as i64),
            });
        }
        if mutated!(self.cfg, ImplicitAckOvertaken) {
            // librdkafka's implicit acknowledgement: the earlier batches count as delivered.
            let p = &self.topics[ti].partitions[pi];
            if let Some(k) = p
                .batches
                .iter()
                .take(i)
                .position(|e| e.overtaken && e.state != BatchState::InFlight)
            {
                self.ack_batch(ti, pi, k, None);
            }
        }
    }

    fn retry_batch(&mut self, r: BatchRef, error: ErrorCode, possibly_persisted: bool) {
        let Some(p) = self
            .topics
            .get_mut(r.topic)
            .and_then(|t| t.partitions.get_mut(r.partition))
        else {
            return;
        };
        let Some(i) = p.position(r.batch) else { return };
        let b = &mut p.batches[i];
        if b.state != BatchState::InFlight {
            return;
        }
        let delay = backoff_delay(
            self.cfg.retry_backoff,
            self.cfg.retry_backoff_max,
            b.retries,
        );
        b.retries = b.retries.saturating_add(1);
        b.maybe_persisted |= possibly_persisted;
        b.state = BatchState::Retry {
            at: self.now + delay,
        };
        p.update_inflight_conn();
        let topic = self.topics[r.topic].name.clone();
        self.diag(Diagnostic::Retry {
            topic,
            partition: r.partition as i32,
            error,
        });
    }

    /// Marks that the partition's identity is spent. If the partition is still bound to the
    /// producer's current identity, the producer bumps its epoch (locally, KIP-360), or asks
    /// for a new producer id when the epoch is exhausted or the broker refused a bump.
    fn request_bump_for(&mut self, ti: usize, pi: usize) {
        let p = &self.topics[ti].partitions[pi];
        if !p.needs_rebase || p.bound.is_none() || p.bound != self.identity {
            return;
        }
        self.bump();
    }

    fn bump(&mut self) {
        let Some(id) = self.identity else { return };
        if self.bump_refused || id.epoch >= self.cfg.max_epoch {
            self.identity = None;
        } else {
            let next = ProducerIdentity {
                producer_id: id.producer_id,
                epoch: id.epoch + 1,
            };
            self.identity = Some(next);
            self.diag(Diagnostic::EpochBumped(next));
        }
    }

    // ----------------------------------------------------------------------------------
    // Responses

    fn handle_frame(&mut self, conn: ConnId, frame: Bytes) -> Result<(), &'static str> {
        let correlation_id =
            ResponseHeader::peek_correlation_id(&frame).map_err(|_| "short response")?;
        let c = self.conns.get_mut(&conn).ok_or("unknown connection")?;
        match c.inflight.front() {
            Some(r) if r.correlation_id == correlation_id => {}
            _ => return Err("unexpected correlation id"),
        }
        let req = c.inflight.pop_front().expect("front checked");
        let versions = c.versions;
        match req.kind {
            RequestKind::ApiVersions(v) => self.on_api_versions(conn, v, frame),
            RequestKind::SaslHandshake => self.on_sasl_handshake(conn, frame),
            RequestKind::SaslAuthenticate => self.on_sasl_authenticate(conn, frame),
            RequestKind::Metadata => {
                self.metadata.in_flight = false;
                let r = decode_response::<MetadataRequest>(versions.metadata, frame);
                match r {
                    Ok((_, m)) => {
                        self.on_metadata(m);
                        Ok(())
                    }
                    Err(_) => {
                        self.metadata.needed = true;
                        Err("bad metadata response")
                    }
                }
            }
            RequestKind::InitProducerId => {
                self.pid_request = None;
                let r = decode_response::<InitProducerIdRequest>(versions.init_producer_id, frame)
                    .map_err(|_| "bad InitProducerId response")?;
                self.on_init_producer_id(r.1.error_code, r.1.producer_id, r.1.producer_epoch);
                Ok(())
            }
            RequestKind::Produce(refs) => {
                match decode_response::<ProduceRequest>(versions.produce, frame) {
                    Ok((_, resp)) => {
                        self.on_produce(refs, resp);
                        Ok(())
                    }
                    Err(_) => {
                        for r in refs {
                            self.retry_batch(r, ErrorCode::NetworkException, true);
                        }
                        Err("bad produce response")
                    }
                }
            }
        }
    }

    fn on_api_versions(
        &mut self,
        conn: ConnId,
        version: i16,
        frame: Bytes,
    ) -> Result<(), &'static str> {
        let decoded = decode_response::<ApiVersionsRequest>(version, frame.clone())
            .ok()
            .filter(|(_, r)| r.error_code == 0)
            .or_else(|| decode_response::<ApiVersionsRequest>(0, frame.clone()).ok());
        let Some((_, resp)) = decoded else {
            // KIP-511 says an unsupported version is answered at v0 with the broker's range;
            // a broker whose answer cannot be read at all but whose error code (the first
            // field after the v0 header) says UNSUPPORTED_VERSION gets asked again at v0,
            // which every broker speaks (librdkafka's mock cluster answers v3 this way).
            let code = frame.get(4..6).map(|b| i16::from_be_bytes([b[0], b[1]]));
            if code == Some(ErrorCode::UnsupportedVersion.as_i16()) && version > 0 {
                self.send_api_versions(conn, 0);
                return Ok(());
            }
            return Err("bad ApiVersions response");
        };
        let resp: ApiVersionsResponse = resp;
        let code = ErrorCode::from_i16(resp.error_code);
        if code == ErrorCode::UnsupportedVersion {
            // KIP-511: retry at the highest version both sides support.
            let theirs = resp
                .range_of(api_key::API_VERSIONS)
                .unwrap_or(VersionRange::new(0, 0));
            match ApiVersionsRequest::VERSIONS.intersect(&theirs) {
                Some(r) if r.max < version => {
                    self.send_api_versions(conn, r.max);
                    return Ok(());
                }
                _ => return Err("no common ApiVersions version"),
            }
        }
        if !code.is_ok() {
            return Err("ApiVersions error");
        }
        let pick = |key: i16, ours: VersionRange, name: &'static str| {
            resp.range_of(key)
                .and_then(|theirs| protocol::negotiate(key, ours, theirs))
                .ok_or(name)
        };
        let versions = (|| {
            Ok::<_, &'static str>(Versions {
                produce: pick(api_key::PRODUCE, ProduceRequest::VERSIONS, "Produce")?,
                metadata: pick(api_key::METADATA, MetadataRequest::VERSIONS, "Metadata")?,
                init_producer_id: pick(
                    api_key::INIT_PRODUCER_ID,
                    InitProducerIdRequest::VERSIONS,
                    "InitProducerId",
                )?,
            })
        })();
        match versions {
            Ok(v) => {
                let c = self.conns.get_mut(&conn).ok_or("unknown connection")?;
                c.versions = v;
                if self.cfg.sasl.is_some() {
                    return self.start_sasl(conn, &resp);
                }
                c.state = ConnState::Ready;
                let addr = c.addr.clone();
                let target = c.target;
                self.backoff.remove(&target);
                self.diag(Diagnostic::Connected { conn, addr });
                Ok(())
            }
            Err(api) => {
                self.fail_fatal(FatalError::UnsupportedVersions(api));
                Ok(())
            }
        }
    }

    fn on_init_producer_id(&mut self, code: i16, producer_id: i64, epoch: i16) {
        let code = ErrorCode::from_i16(code);
        match code {
            ErrorCode::None if producer_id >= 0 && epoch >= 0 => {
                let id = ProducerIdentity { producer_id, epoch };
                self.identity = Some(id);
                self.pid_failures = 0;
                self.pid_retry_at = None;
                self.diag(Diagnostic::ProducerId(id));
            }
            ErrorCode::None => self.fail_fatal(FatalError::Broker(ErrorCode::InvalidRequest)),
            c if c.is_retriable() => {
                self.pid_failures += 1;
                self.pid_retry_at = Some(
                    self.now
                        + backoff_delay(
                            self.cfg.retry_backoff,
                            self.cfg.retry_backoff_max,
                            self.pid_failures,
                        ),
                );
            }
            c => self.fail_fatal(FatalError::Broker(c)),
        }
    }

    fn on_metadata(&mut self, m: protocol::metadata::MetadataResponse) {
        self.metadata.last_refresh = Some(self.now);
        self.metadata.retry_at = None;
        for b in &m.brokers {
            let addr: Arc<str> = Arc::from(format!("{}:{}", b.host, b.port).as_str());
            self.brokers.insert(b.node_id, addr);
        }
        let mut incomplete = false;
        for t in m.topics {
            let Some(name) = t.name else { continue };
            let Some(&ti) = self.topic_index.get(name.as_str()) else {
                continue;
            };
            let code = ErrorCode::from_i16(t.error_code);
            if !code.is_ok() {
                incomplete = true;
                // P12: a flapping topic keeps its partitions and their sequence state.
                let permanent = matches!(
                    code,
                    ErrorCode::InvalidTopicException | ErrorCode::TopicAuthorizationFailed
                );
                if permanent {
                    while let Some(p) = self.topics[ti].pending.pop_front() {
                        self.resolve_pending(p, DeliveryError::UnknownTopic(code));
                    }
                }
                // An unknown topic may be a flap or still being created: its records wait up
                // to `max.block.ms` (see `expire_deliveries`).
                self.topics[ti].missing = Some(code);
                continue;
            }
            let topic = &mut self.topics[ti];
            topic.missing = None;
            // A topic's partitions are numbered 0..n and a response lists all n of them: an
            // index at or beyond the number listed is corrupt and is ignored, so a hostile
            // index cannot make the producer allocate (or overflow computing) a huge table.
            let count = t.partitions.len();
            if count > topic.partitions.len() {
                topic.partitions.resize_with(count, Partition::default);
            }
            for mp in &t.partitions {
                let Some(p) = usize::try_from(mp.partition_index)
                    .ok()
                    .filter(|i| *i < count)
                    .and_then(|i| topic.partitions.get_mut(i))
                else {
                    incomplete = true;
                    continue;
                };
                if mp.leader_epoch >= 0 && mp.leader_epoch < p.leader_epoch {
                    incomplete = true; // stale metadata (KIP-320): ask again
                    continue;
                }
                p.leader_epoch = mp.leader_epoch.max(p.leader_epoch);
                p.stale_leader = false;
                p.leader = (mp.leader_id >= 0).then_some(mp.leader_id);
                if p.leader.is_none() {
                    incomplete = true;
                }
            }
            // A partition the response left out (or left leaderless) is retried after the
            // backoff, not at once.
            if topic.partitions.iter().any(|p| p.leader.is_none()) {
                incomplete = true;
            }
            self.route_pending(ti);
        }
        if incomplete {
            self.metadata.needed = true;
            self.metadata.retry_at = Some(self.now + self.cfg.retry_backoff);
        }
    }

    fn route_pending(&mut self, ti: usize) {
        if self.topics[ti].partitions.is_empty() {
            return;
        }
        while let Some(p) = self.topics[ti].pending.pop_front() {
            self.append(ti, p.id, p.record, p.size);
        }
    }

    fn on_produce(
        &mut self,
        refs: SmallVec<[BatchRef; 4]>,
        resp: protocol::produce::ProduceResponse,
    ) {
        for r in refs {
            let name = &self.topics[r.topic].name;
            let result = resp
                .responses
                .iter()
                .filter(|t| t.name.as_str() == &**name)
                .flat_map(|t| t.partition_responses.iter())
                .find(|p| p.index == r.partition as i32)
                .cloned();
            match result {
                Some(pr) => self.on_partition_result(r, &pr),
                // A response that leaves a partition out tells us nothing about it.
                None => self.retry_batch(r, ErrorCode::NetworkException, true),
            }
        }
    }

    fn on_partition_result(&mut self, r: BatchRef, pr: &PartitionProduceResponse) {
        let (ti, pi) = (r.topic, r.partition);
        let Some(i) = self.topics[ti].partitions[pi].position(r.batch) else {
            return;
        };
        if self.topics[ti].partitions[pi].batches[i].state != BatchState::InFlight {
            return;
        }
        let code = ErrorCode::from_i16(pr.error_code);
        if code.needs_metadata_refresh() {
            self.metadata.needed = true;
            self.topics[ti].partitions[pi].stale_leader = true;
        }
        if let Some(l) = pr.current_leader {
            // KIP-951: a newer leader named in the response is as good as fresh metadata.
            let p = &mut self.topics[ti].partitions[pi];
            if l.leader_id >= 0 && l.leader_epoch > p.leader_epoch {
                p.leader = Some(l.leader_id);
                p.leader_epoch = l.leader_epoch;
                p.stale_leader = false;
            }
        }
        match code {
            ErrorCode::None => {
                let count = i64::from(self.topics[ti].partitions[pi].batches[i].count());
                if pr.base_offset < 0 || pr.base_offset.checked_add(count).is_none() {
                    // A success with an impossible offset is corrupt: its truth is unknown.
                    self.retry_batch(r, ErrorCode::CorruptMessage, true);
                } else {
                    self.ack_batch(ti, pi, i, Some(pr.base_offset));
                }
            }
            ErrorCode::DuplicateSequenceNumber => {
                let offset = mutated!(self.cfg, DuplicateAtMinusOne).then_some(-1);
                self.ack_batch(ti, pi, i, offset)
            }
            ErrorCode::OutOfOrderSequenceNumber | ErrorCode::UnknownProducerId => {
                self.on_out_of_order(ti, pi, i, code, pr.log_start_offset)
            }
            ErrorCode::InvalidProducerEpoch
            | ErrorCode::ProducerFenced
            | ErrorCode::InvalidProducerIdMapping => {
                if code == ErrorCode::ProducerFenced {
                    // Tansu refuses a client-side epoch bump: from now on take a new id.
                    self.bump_refused = true;
                    let b = &self.topics[ti].partitions[pi].batches[i];
                    if b.seq.map(|s| s.0) == self.identity {
                        self.identity = None;
                    }
                }
                self.reject_for_rebase(ti, pi, i, code);
            }
            ErrorCode::MessageTooLarge if self.topics[ti].partitions[pi].batches[i].count() > 1 => {
                self.split_batch(ti, pi, i)
            }
            c if c.is_fatal() => self.fail_fatal_on_refusal(ti, pi, i, FatalError::Broker(c)),
            c @ (ErrorCode::NotEnoughReplicasAfterAppend | ErrorCode::UnknownServerError)
                if mutated!(self.cfg, AfterAppendNotPersisted) =>
            {
                if c.is_retriable() {
                    self.retry_batch(r, c, false)
                } else {
                    self.fail_permanently(ti, pi, i, c)
                }
            }
            ErrorCode::CorruptMessage => {
                let b = &mut self.topics[ti].partitions[pi].batches[i];
                if b.corrupt_retries < MAX_CORRUPT_RETRIES {
                    b.corrupt_retries += 1;
                    self.retry_batch(r, code, false);
                } else {
                    self.fail_permanently(ti, pi, i, code);
                }
            }
            c if c.is_retriable() => self.retry_batch(r, c, c.is_possibly_persisted()),
            c if c.is_possibly_persisted() => self.fail_batch(
                ti,
                pi,
                i,
                DeliveryError::Broker(c),
                Persistence::PossiblyPersisted,
            ),
            c => self.fail_permanently(ti, pi, i, c),
        }
    }

    /// This attempt was rejected and the batch's sequence is spent: it waits for a rebase,
    /// unless it may already be in the log (then it can only fail as possibly persisted) or
    /// a later batch overtook it (then it fails, not persisted).
    fn reject_for_rebase(&mut self, ti: usize, pi: usize, i: usize, code: ErrorCode) {
        let p = &mut self.topics[ti].partitions[pi];
        p.needs_rebase = true;
        let b = &mut p.batches[i];
        if b.maybe_persisted {
            self.fail_batch(
                ti,
                pi,
                i,
                DeliveryError::Broker(code),
                Persistence::PossiblyPersisted,
            );
        } else if b.overtaken || p.cutting {
            let error = if p.cutting {
                DeliveryError::PartitionCut
            } else {
                DeliveryError::Broker(code)
            };
            self.fail_batch(ti, pi, i, error, Persistence::NotPersisted);
        } else {
            b.state = BatchState::AwaitRebase;
            p.update_inflight_conn();
            self.request_bump_for(ti, pi);
        }
    }

    /// OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID for batch `i` (§B.3).
    fn on_out_of_order(&mut self, ti: usize, pi: usize, i: usize, code: ErrorCode, log_start: i64) {
        let p = &self.topics[ti].partitions[pi];
        let identity = p.batches[i].seq.map(|s| s.0);
        let earlier = p
            .batches
            .iter()
            .take(i)
            .filter(|b| b.is_sequenced_under(identity));
        let mut waiting = false;
        let mut explained = p.gap;
        for b in earlier {
            match b.state {
                BatchState::InFlight | BatchState::Retry { .. } => waiting = true,
                BatchState::AwaitRebase => explained = true,
                _ => {}
            }
        }
        if waiting {
            // Not the head: an earlier batch is unresolved. Retry after it, no bump.
            let r = BatchRef {
                topic: ti,
                partition: pi,
                batch: p.batches[i].id,
            };
            self.retry_batch(r, code, false);
            return;
        }
        if code == ErrorCode::UnknownProducerId {
            // The broker holds no state for this producer on this partition, so no attempt
            // of this batch is in its log: an earlier attempt whose answer was lost did not
            // land (state is only lost after producer.id.expiration.ms of idleness, §A.4).
            self.topics[ti].partitions[pi].batches[i].maybe_persisted = false;
        }
        let p = &self.topics[ti].partitions[pi];
        if explained || p.batches[i].maybe_persisted || p.batches[i].overtaken {
            self.reject_for_rebase(ti, pi, i, code);
            return;
        }
        if mutated!(self.cfg, HeadRejectionRetried) {
            let r = BatchRef {
                topic: ti,
                partition: pi,
                batch: p.batches[i].id,
            };
            self.retry_batch(r, code, false);
            return;
        }
        // The true head of line was refused. Benign if the broker lost our state because the
        // log start moved past our last acknowledgement (KIP-360); otherwise acknowledged data
        // was lost.
        // UNKNOWN_PRODUCER_ID says the broker lost our state (expiry, an old broker after
        // retention): benign by definition. OUT_OF_ORDER_SEQUENCE_NUMBER is benign only if
        // the log start moved past our last acknowledgement (KIP-360).
        let benign = code == ErrorCode::UnknownProducerId
            || match p.last_acked {
                None => true,
                Some((_, offset)) => log_start > offset,
            };
        if !benign {
            let topic = self.topics[ti].name.clone();
            self.diag(Diagnostic::DataLoss {
                topic,
                partition: pi as i32,
            });
            if self.cfg.data_loss_policy == DataLossPolicy::Fatal {
                self.fail_fatal_on_refusal(ti, pi, i, FatalError::DataLoss);
                return;
            }
        }
        self.reject_for_rebase(ti, pi, i, code);
    }

    /// A permanent, record-level rejection: the batch is not in the log. The gap policy
    /// decides what else happens (§B.4).
    fn fail_permanently(&mut self, ti: usize, pi: usize, i: usize, code: ErrorCode) {
        self.fail_batch(
            ti,
            pi,
            i,
            DeliveryError::Broker(code),
            Persistence::NotPersisted,
        );
        let policy = if mutated!(self.cfg, GapPolicyIgnored) {
            GapPolicy::ContinueWithGap
        } else {
            self.cfg.gap_policy
        };
        match policy {
            GapPolicy::ContinueWithGap => {}
            GapPolicy::Fatal => self.fail_fatal(FatalError::Gap(code)),
            GapPolicy::CutPartition => {
                self.topics[ti].partitions[pi].cutting = true;
                let mut k = 0;
                while k < self.topics[ti].partitions[pi].batches.len() {
                    let b = &self.topics[ti].partitions[pi].batches[k];
                    let cut = match b.state {
                        BatchState::Open | BatchState::Ready | BatchState::AwaitRebase => true,
                        BatchState::Retry { .. } => !b.maybe_persisted,
                        BatchState::InFlight => false,
                    };
                    if cut {
                        self.fail_batch(
                            ti,
                            pi,
                            k,
                            DeliveryError::PartitionCut,
                            Persistence::NotPersisted,
                        );
                    } else {
                        k += 1;
                    }
                }
            }
        }
    }

    /// MESSAGE_TOO_LARGE for a batch of several records: the batch was rejected whole, so its
    /// sequence range is reused by two halves with contiguous sequences (KAFKA-8325). The
    /// records are re-derived from the sent bytes (decompressed if need be; the uncompressed
    /// records are not kept after the seal) and each half is compressed again.
    fn split_batch(&mut self, ti: usize, pi: usize, i: usize) {
        let max_seq = self.cfg.max_sequence;
        let (compression, ratio) = (self.topics[ti].compression, self.topics[ti].ratio);
        let p = &mut self.topics[ti].partitions[pi];
        let b = &p.batches[i];
        if b.maybe_persisted {
            // Its range may be in the log: it cannot be re-sequenced into halves (P3).
            return self.fail_permanently(ti, pi, i, ErrorCode::MessageTooLarge);
        }
        let (Some(wire), Some((identity, base))) = (b.wire.clone(), b.seq) else {
            return self.fail_permanently(ti, pi, i, ErrorCode::MessageTooLarge);
        };
        let Ok(decoded) = RecordBatch::decode_all(wire) else {
            return self.fail_permanently(ti, pi, i, ErrorCode::MessageTooLarge);
        };
        let Some(batch) = decoded.into_iter().next() else {
            return self.fail_permanently(ti, pi, i, ErrorCode::MessageTooLarge);
        };
        let half = batch.records.len() / 2;
        let old = p.batches.remove(i).expect("index valid");
        let mut pieces = Vec::new();
        let mut seq = base;
        for (k, chunk) in [&batch.records[..half], &batch.records[half..]]
            .iter()
            .enumerate()
        {
            let mut builder = RecordBatchBuilder::with_capacity(0);
            builder.set_compression(compression, ratio);
            for r in chunk.iter() {
                builder.push(
                    batch.base_timestamp + r.timestamp_delta,
                    r.key.as_deref(),
                    r.value.as_deref(),
                    &r.headers,
                );
            }
            let ids: Vec<RecordId> = if k == 0 {
                old.records[..half].to_vec()
            } else {
                old.records[half..].to_vec()
            };
            let count = ids.len() as i32;
            let size = if k == 0 {
                old.size / 2
            } else {
                old.size - old.size / 2
            };
            pieces.push(Batch {
                id: self.next_batch,
                records: ids,
                builder: None,
                wire: Some(builder.seal(identity.producer_id, identity.epoch, seq)),
                seq: Some((identity, seq)),
                size,
                created: old.created,
                state: BatchState::Retry { at: self.now },
                maybe_persisted: false,
                overtaken: old.overtaken,
                retries: old.retries,
                corrupt_retries: 0,
            });
            self.next_batch += 1;
            seq = crate::partition::seq_add(seq, count, max_seq);
        }
        for (k, piece) in pieces.into_iter().enumerate() {
            p.batches.insert(i + k, piece);
        }
        p.update_inflight_conn();
    }

    /// Stops the producer because batch `i` drew a refusal: that attempt was definitively not
    /// written, so the batch is no longer in flight and is reported not persisted (unless an
    /// earlier attempt was ambiguous).
    fn fail_fatal_on_refusal(&mut self, ti: usize, pi: usize, i: usize, err: FatalError) {
        self.topics[ti].partitions[pi].batches[i].state = BatchState::AwaitRebase;
        self.fail_fatal(err);
    }

    /// Stops the producer: every unresolved record fails with a truthful status.
    fn fail_fatal(&mut self, err: FatalError) {
        if self.fatal.is_some() {
            return;
        }
        self.fatal = Some(err.clone());
        self.emit(Event::Fatal(err.clone()));
        for ti in 0..self.topics.len() {
            while let Some(p) = self.topics[ti].pending.pop_front() {
                self.resolve_pending(p, DeliveryError::Fatal(err.clone()));
            }
            for pi in 0..self.topics[ti].partitions.len() {
                while !self.topics[ti].partitions[pi].batches.is_empty() {
                    let b = &self.topics[ti].partitions[pi].batches[0];
                    // An attempt on the wire has no answer yet; `fail_batch` covers the
                    // earlier unanswered ones.
                    let persisted = if b.state == BatchState::InFlight {
                        Persistence::PossiblyPersisted
                    } else {
                        Persistence::NotPersisted
                    };
                    self.fail_batch(ti, pi, 0, DeliveryError::Fatal(err.clone()), persisted);
                }
            }
        }
        let conns: Vec<ConnId> = self.conns.keys().copied().collect();
        for c in conns {
            self.out.push_back(Output::Close { conn: c });
        }
        self.conns.clear();
        self.node_conns.clear();
    }
}
