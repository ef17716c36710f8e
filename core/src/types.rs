//! Identifiers, records and the outward vocabulary: outputs, events and errors.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::protocol::record_batch::{record_encoded_len, Header, HEADER_LEN};
use crate::protocol::ErrorCode;

/// A connection the producer asked the driver to open. Never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// A record accepted by [`crate::Producer::send`]. Ids increase in send order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordId(pub u64);

/// A producer id and epoch: the identity under which sequences are numbered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProducerIdentity {
    /// Producer id from InitProducerId.
    pub producer_id: i64,
    /// Epoch, bumped locally (KIP-360).
    pub epoch: i16,
    /// Not on the wire: 0, or one more than the `issue` of an identity with the same id and
    /// epoch that partitions were still bound to when InitProducerId handed this one out. A
    /// broker that lost its state can hand out the same id and epoch again (Tansu restarted
    /// on memory storage numbers its producer ids from 1 again); this keeps the two apart,
    /// so that those partitions move to the new one as to any new identity.
    pub issue: u32,
}

impl ProducerIdentity {
    /// No identity: what a producer with `enable.idempotence=false` puts in every batch
    /// (producer id -1, epoch -1; Kafka's `NO_PRODUCER_ID` and `NO_PRODUCER_EPOCH`).
    pub(crate) const NONE: Self = Self {
        producer_id: -1,
        epoch: -1,
        issue: 0,
    };

    /// The base sequence a batch carries on the wire: `seq` under a real producer id, -1
    /// (Kafka's `NO_SEQUENCE`) under [`Self::NONE`], where the broker checks no sequence.
    pub(crate) fn wire_sequence(self, seq: i32) -> i32 {
        if self.producer_id < 0 {
            -1
        } else {
            seq
        }
    }
}

/// A topic name, cheap to clone: a `&'static str` ([`TopicName::from_static`], no
/// allocation) or a shared `Arc<str>` (from a `String` or `&str`, one allocation, then
/// clones share it). A record carries one; an application that sends many records to a
/// topic keeps its name and clones it into each, instead of a fresh `String` per record.
/// Compares, orders and hashes as its text.
#[derive(Clone)]
pub struct TopicName(TopicRepr);

#[derive(Clone)]
enum TopicRepr {
    Static(&'static str),
    Shared(Arc<str>),
}

impl TopicName {
    /// A name that allocates nothing, here or in any clone.
    pub const fn from_static(name: &'static str) -> Self {
        Self(TopicRepr::Static(name))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            TopicRepr::Static(s) => s,
            TopicRepr::Shared(s) => s,
        }
    }

    /// The name as a shared string: this one's, if it is shared.
    pub(crate) fn to_shared(&self) -> Arc<str> {
        match &self.0 {
            TopicRepr::Static(s) => Arc::from(*s),
            TopicRepr::Shared(s) => s.clone(),
        }
    }
}

impl std::ops::Deref for TopicName {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for TopicName {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::borrow::Borrow<str> for TopicName {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Debug for TopicName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for TopicName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for TopicName {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for TopicName {}

impl std::hash::Hash for TopicName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for TopicName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TopicName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialEq<str> for TopicName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for TopicName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for TopicName {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<TopicName> for str {
    fn eq(&self, other: &TopicName) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<TopicName> for &str {
    fn eq(&self, other: &TopicName) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<TopicName> for String {
    fn eq(&self, other: &TopicName) -> bool {
        self == other.as_str()
    }
}

impl From<&str> for TopicName {
    fn from(s: &str) -> Self {
        Self(TopicRepr::Shared(s.into()))
    }
}

impl From<&String> for TopicName {
    fn from(s: &String) -> Self {
        Self::from(s.as_str())
    }
}

impl From<String> for TopicName {
    fn from(s: String) -> Self {
        Self(TopicRepr::Shared(s.into()))
    }
}

impl From<Box<str>> for TopicName {
    fn from(s: Box<str>) -> Self {
        Self(TopicRepr::Shared(s.into()))
    }
}

impl From<std::borrow::Cow<'_, str>> for TopicName {
    fn from(s: std::borrow::Cow<'_, str>) -> Self {
        Self(TopicRepr::Shared(s.into()))
    }
}

impl From<Arc<str>> for TopicName {
    fn from(s: Arc<str>) -> Self {
        Self(TopicRepr::Shared(s))
    }
}

impl From<&Arc<str>> for TopicName {
    fn from(s: &Arc<str>) -> Self {
        Self(TopicRepr::Shared(Arc::clone(s)))
    }
}

impl From<&TopicName> for TopicName {
    fn from(t: &TopicName) -> Self {
        t.clone()
    }
}

impl From<TopicName> for String {
    fn from(t: TopicName) -> Self {
        t.as_str().to_owned()
    }
}

impl From<TopicName> for Arc<str> {
    fn from(t: TopicName) -> Self {
        match t.0 {
            TopicRepr::Static(s) => s.into(),
            TopicRepr::Shared(s) => s,
        }
    }
}

/// A record to produce.
///
/// Its `Debug` shows at most the first 64 bytes of the key, the value and each header's
/// value, with their lengths: an error carrying a record handed back (`{:?}`, `unwrap`) must not print a
/// megabyte value, or all of a value that may be sensitive.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Record {
    /// Topic name: see [`TopicName`] for sending many records without a `String` each.
    pub topic: TopicName,
    /// An explicit partition, or `None` to let the partitioner choose.
    pub partition: Option<i32>,
    /// Key, nullable.
    pub key: Option<Bytes>,
    /// Value, nullable.
    pub value: Option<Bytes>,
    /// Headers.
    pub headers: Vec<Header>,
    /// Create time in milliseconds since the Unix epoch, supplied by the application
    /// (the core has no clock).
    pub timestamp: i64,
}

/// Shows the first [`SHOWN_BYTES`] bytes of a key or value, and its length when cut.
struct Shown<'a>(&'a Option<Bytes>);

/// How much of a record's key and value its `Debug` shows.
const SHOWN_BYTES: usize = 64;

impl std::fmt::Debug for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            None => f.write_str("None"),
            Some(b) if b.len() <= SHOWN_BYTES => write!(f, "Some({b:?})"),
            Some(b) => write!(
                f,
                "Some({:?}... ({} bytes))",
                b.slice(..SHOWN_BYTES),
                b.len()
            ),
        }
    }
}

/// A record's headers, each value shown as [`Shown`].
struct ShownHeaders<'a>(&'a [Header]);

impl std::fmt::Debug for ShownHeaders<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut list = f.debug_list();
        for h in self.0 {
            list.entry(&(&h.key, Shown(&h.value)));
        }
        list.finish()
    }
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("topic", &self.topic)
            .field("partition", &self.partition)
            .field("key", &Shown(&self.key))
            .field("value", &Shown(&self.value))
            .field("headers", &ShownHeaders(&self.headers))
            .field("timestamp", &self.timestamp)
            .finish()
    }
}

impl Record {
    /// A record with a value and nothing else.
    pub fn new(topic: impl Into<TopicName>, value: impl Into<Bytes>) -> Self {
        Self {
            topic: topic.into(),
            partition: None,
            key: None,
            value: Some(value.into()),
            headers: Vec::new(),
            timestamp: 0,
        }
    }

    /// Sets the key.
    pub fn with_key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets an explicit partition.
    pub fn with_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Sets the timestamp.
    pub fn with_timestamp(mut self, timestamp: i64) -> Self {
        self.timestamp = timestamp;
        self
    }

    /// Adds a header.
    pub fn with_header(mut self, key: impl Into<String>, value: Option<Bytes>) -> Self {
        self.headers.push(Header {
            key: key.into(),
            value,
        });
        self
    }
}

/// Why `send` refused a record. Each variant hands the record back.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SendError {
    /// `buffer.memory` is used up (or `queue.buffering.max.messages` records are held);
    /// retry after some records resolve. Every record accepted
    /// before the refusal is then sent without waiting for `linger.ms` (drain
    /// [`crate::Producer::poll_output`]), so that their acknowledgements free the room.
    QueueFull(Record),
    /// The record alone is larger than `max.request.size` allows: a batch holding it alone
    /// would be larger than `max_request_size` (the producer's setting, in bytes).
    TooLarge {
        /// The record refused.
        record: Record,
        /// The producer's `max.request.size`.
        max_request_size: usize,
    },
    /// The topic name is not a valid Kafka topic name.
    InvalidTopic(Record),
    /// The explicit partition is negative or beyond the topic's known partition count (a
    /// record for a topic whose records wait for metadata is checked against the answer
    /// instead, and fails [`DeliveryError::UnknownPartition`] if still beyond it).
    InvalidPartition {
        /// The record refused.
        record: Record,
        /// The topic's partition count the partition was checked against (metadata's last
        /// answer); `None` for a negative partition, refused before any count.
        partitions: Option<usize>,
    },
    /// The timestamp is negative (the Java client refuses these too): Kafka's create time
    /// counts milliseconds since the Unix epoch, and -1 means "none" on the wire.
    InvalidTimestamp(Record),
    /// The producer is closing, closed or failed.
    Closed(Record),
}

impl SendError {
    /// The record that was refused.
    pub fn record(&self) -> &Record {
        match self {
            Self::QueueFull(r)
            | Self::TooLarge { record: r, .. }
            | Self::InvalidTopic(r)
            | Self::InvalidPartition { record: r, .. }
            | Self::InvalidTimestamp(r)
            | Self::Closed(r) => r,
        }
    }

    /// The record that was refused, by value.
    pub fn into_record(self) -> Record {
        match self {
            Self::QueueFull(r)
            | Self::TooLarge { record: r, .. }
            | Self::InvalidTopic(r)
            | Self::InvalidPartition { record: r, .. }
            | Self::InvalidTimestamp(r)
            | Self::Closed(r) => r,
        }
    }
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::QueueFull(_) => write!(
                f,
                "buffer.memory is full (or queue.buffering.max.messages records are held)"
            ),
            Self::TooLarge {
                record: r,
                max_request_size,
            } => {
                // As the producer counts it (`Producer::send`): the record as the first of a
                // batch of its own, with the batch header and a margin of 10 bytes.
                let encoded = record_encoded_len(
                    0,
                    0,
                    r.key.as_deref(),
                    r.value.as_deref(),
                    &r.headers,
                );
                write!(
                    f,
                    "record of {encoded} bytes is too large: a batch of its own counts {} \
                     bytes, above max.request.size={max_request_size}",
                    encoded + 10 + HEADER_LEN
                )
            }
            Self::InvalidTopic(r) => {
                write!(f, "invalid topic name {:?}", r.topic)?;
                match crate::producer::topic_name_problem(&r.topic) {
                    Some(why) => write!(f, ": {why}"),
                    None => Ok(()),
                }
            }
            Self::InvalidPartition {
                record: r,
                partitions,
            } => match (r.partition, partitions) {
                (Some(p), _) if p < 0 => write!(
                    f,
                    "invalid partition {p} for topic {:?}: a partition must be ≥ 0",
                    r.topic
                ),
                (Some(p), Some(n)) => write!(
                    f,
                    "invalid partition {p} for topic {:?}: the topic has {n} partition{} \
                     (numbered from 0)",
                    r.topic,
                    if *n == 1 { "" } else { "s" }
                ),
                (Some(p), None) => write!(
                    f,
                    "invalid partition {p} for topic {:?}: the topic has fewer partitions \
                     (numbered from 0)",
                    r.topic
                ),
                (None, _) => write!(f, "invalid partition (none) for topic {:?}", r.topic),
            },
            Self::InvalidTimestamp(r) => write!(
                f,
                "invalid timestamp {}: a create time is milliseconds since the Unix epoch, never negative",
                r.timestamp
            ),
            Self::Closed(_) => write!(
                f,
                "producer is closing or closed (or has failed: see its fatal error)"
            ),
        }
    }
}

impl std::error::Error for SendError {}

/// Whether a failed record may be in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Persistence {
    /// The record is not in the log and never will be.
    NotPersisted,
    /// The record may be in the log: an attempt's outcome was never learned.
    PossiblyPersisted,
}

/// How [`DeliveryError::DeliveryTimeout`] reads.
const TIMED_OUT: &str = "timed out (delivery.timeout.ms, or max.block.ms waiting for metadata)";

/// Why a record failed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeliveryError {
    /// The broker rejected the batch with this code.
    Broker(ErrorCode),
    /// `delivery.timeout.ms` passed, or, for a record still waiting for its topic's metadata,
    /// `max.block.ms` (as Java's `send` gives up waiting for metadata).
    DeliveryTimeout {
        /// What held the record back: the last error an attempt of its batch drew (a
        /// broker's code such as NOT_ENOUGH_REPLICAS, or NETWORK_EXCEPTION and
        /// REQUEST_TIMED_OUT for a lost connection and a request timeout on this side), or,
        /// for a record that waited for metadata or in a batch no attempt of which was
        /// answered, the code metadata gave for its missing topic (deleted meanwhile). A
        /// record that waited for metadata while no broker was reached at all (every
        /// connection failed, or none got past its ApiVersions exchange: a wrong or dead
        /// bootstrap server) gets NETWORK_EXCEPTION. A batch never sent gets what held it
        /// back: LEADER_NOT_AVAILABLE when its partition had no leader, NETWORK_EXCEPTION
        /// when no connection to its leader was ready. In both cases a handshake refused for
        /// good (by the leader, or before any broker was reached) says so instead:
        /// SASL_AUTHENTICATION_FAILED, or UNSUPPORTED_VERSION. `None` when its topic is not known to
        /// be missing and: its batch was never sent though a connection to its leader was
        /// ready (it waited its turn behind a full pipeline), or its batch's only attempt was
        /// still unanswered at the deadline (those records fail possibly persisted), or it
        /// waited for metadata while a connection was past its handshake.
        last_error: Option<ErrorCode>,
    },
    /// The topic does not exist (or is not authorized) according to metadata.
    UnknownTopic(ErrorCode),
    /// The explicit partition does not exist: the topic has `count` partitions (the
    /// record's partition was beyond them when metadata came, or the topic was created again
    /// with fewer).
    UnknownPartition {
        /// The topic's partitions then.
        count: usize,
    },
    /// Another batch of the partition failed and the gap policy cut the partition.
    PartitionCut,
    /// The producer failed.
    Fatal(FatalError),
}

impl std::fmt::Display for DeliveryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Broker(c) => write!(f, "broker error {c}{}", broker_hint(*c)),
            Self::DeliveryTimeout {
                last_error: Some(c),
            } => write!(f, "{TIMED_OUT} (last error: {c}{})", broker_hint(*c)),
            Self::DeliveryTimeout { last_error: None } => write!(f, "{TIMED_OUT}"),
            Self::UnknownTopic(c) => write!(f, "topic unavailable: {c}{}", broker_hint(*c)),
            Self::UnknownPartition { count } => {
                write!(f, "partition does not exist (the topic has {count})")
            }
            Self::PartitionCut => write!(f, "partition cut after an earlier failure"),
            Self::Fatal(e) => write!(f, "producer failed: {e}"),
        }
    }
}

impl std::error::Error for DeliveryError {}

/// What to check, for the refusals a setting or a grant fixes (a review of what users read:
/// the bare code named neither).
fn broker_hint(c: ErrorCode) -> &'static str {
    match c {
        ErrorCode::ClusterAuthorizationFailed => {
            " (an idempotent producer needs WRITE on the topic, Kafka 2.8+, or \
             IDEMPOTENT_WRITE on the cluster; or set enable.idempotence=false)"
        }
        ErrorCode::TopicAuthorizationFailed => " (the principal needs WRITE on the topic)",
        ErrorCode::MessageTooLarge => {
            " (a record larger than the topic's max.message.bytes or the broker's \
             message.max.bytes)"
        }
        ErrorCode::InvalidTimestamp => {
            " (a timestamp outside the topic's message.timestamp.*.ms of the broker's clock)"
        }
        // From a review of the application's own mistakes: a misspelt topic, an internal
        // topic, a keyless record on a compacted topic, a batch over `segment.bytes`.
        ErrorCode::UnknownTopicOrPartition => {
            " (no such topic, or one this principal may not see: check the name; it may \
             have been deleted, and a first use creates it only with the broker's \
             auto.create.topics.enable and this producer's allow.auto.create.topics)"
        }
        ErrorCode::InvalidTopicException => {
            " (an internal topic such as __consumer_offsets, or a name the broker refuses)"
        }
        ErrorCode::InvalidRecord => {
            " (a record the topic refuses, the broker's message may say why: a compacted \
             topic, for one, needs a key on every record)"
        }
        ErrorCode::CorruptMessage => {
            " (refused again after retries: a damaged batch, or, on Kafka before 2.4, a \
             record without a key on a compacted topic)"
        }
        ErrorCode::RecordListTooLarge => {
            " (a record whose batch is larger than the topic's segment.bytes)"
        }
        // From a review of Kafka-compatible brokers: each refuses before writing.
        ErrorCode::PolicyViolation => {
            " (Azure Event Hubs: ingress past the namespace's throughput units; Redpanda: \
             the cluster is in recovery mode or past a producer limit)"
        }
        ErrorCode::UnsupportedForMessageFormat => {
            " (a compression codec the broker refuses: Azure Event Hubs takes gzip only)"
        }
        _ => "",
    }
}

/// Why the producer stopped for good.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FatalError {
    /// A broker answered an error that no retry can fix.
    Broker(ErrorCode),
    /// No bootstrap server speaks a version of a required API that kprod speaks (before any
    /// connection completed its handshake; later, [`Diagnostic::HandshakeFailed`]).
    UnsupportedVersions(&'static str),
    /// A batch failed and the gap policy is [`crate::GapPolicy::Fatal`].
    Gap(ErrorCode),
    /// Acknowledged data was lost and the data-loss policy is fatal.
    DataLoss,
    /// SASL authentication failed (bad credentials, a mechanism the broker does not enable,
    /// a token the driver could not supply) on every bootstrap server before any connection
    /// completed its handshake (later, [`Diagnostic::HandshakeFailed`]).
    Authentication {
        /// The mechanism (`sasl.mechanism`).
        mechanism: &'static str,
        /// Why, in the broker's words where it gave any. Never holds a secret.
        reason: String,
    },
    /// The driver's transport refused the connection to every bootstrap server, before any
    /// connection completed its handshake, for a reason no retry fixes: a TLS certificate
    /// rejected by either side ([`crate::Producer::handle_connection_refused`]; later,
    /// [`Diagnostic::HandshakeFailed`]).
    Refused {
        /// The address of the last connection refused (`host:port`).
        addr: String,
        /// Why, in the driver's words, naming the setting to check.
        reason: String,
    },
    /// The driver stopped the producer ([`crate::Producer::abort`]) on an error only it
    /// sees that no retry can fix, or at the application's request.
    Aborted {
        /// Why, in the driver's words.
        reason: String,
    },
}

impl std::fmt::Display for FatalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Broker(c) => write!(f, "broker error {c}{}", broker_hint(*c)),
            // What to change, for the APIs a broker can lack (a review of Kafka-compatible
            // brokers: "no supported version of InitProducerId" left the user guessing).
            Self::UnsupportedVersions("InitProducerId") => f.write_str(
                "no supported version of InitProducerId, which an idempotent producer needs: \
                 the broker has idempotence turned off (Redpanda's enable_idempotence), or \
                 is a proxy or service without it (set enable.idempotence=false to produce \
                 without it), or kprod.max.init.producer.id.version or kprod.broker.version.max \
                 caps it below the broker's range",
            ),
            Self::UnsupportedVersions("Produce") => f.write_str(
                "no supported version of Produce: the broker predates Kafka 0.11 (record \
                 batches v2), which kprod needs, or kprod.max.produce.version or \
                 kprod.broker.version.max caps it below the broker's range",
            ),
            Self::UnsupportedVersions(api) => write!(
                f,
                "no supported version of {api} (or a kprod.max.*.version or \
                 kprod.broker.version.max setting caps it below the broker's range)"
            ),
            Self::Gap(c) => write!(f, "a batch failed with {c} under the fatal gap policy"),
            Self::DataLoss => write!(f, "the broker lost acknowledged records"),
            Self::Authentication { mechanism, reason } => write!(
                f,
                "SASL {mechanism} authentication failed: {reason} \
                 (check sasl.mechanism, sasl.username and sasl.password)"
            ),
            Self::Refused { addr, reason } => {
                write!(f, "the connection to {addr} was refused: {reason}")
            }
            Self::Aborted { reason } => write!(f, "stopped by the driver: {reason}"),
        }
    }
}

impl std::error::Error for FatalError {}

/// Something worth logging; never needs an answer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Diagnostic {
    /// A connection finished its ApiVersions handshake (and SASL, if configured).
    Connected {
        /// Connection.
        conn: ConnId,
        /// Address.
        addr: Arc<str>,
        /// The versions this connection speaks: the highest both sides support, under
        /// [`crate::ProducerConfig::version_caps`] (`max_versions` lowered by
        /// `broker_version_max`).
        versions: crate::protocol::NegotiatedVersions,
    },
    /// A connection authenticated with SASL (after ApiVersions, before any other request),
    /// or re-authenticated (KIP-368).
    Authenticated {
        /// Connection.
        conn: ConnId,
        /// The mechanism.
        mechanism: &'static str,
        /// Whether this was a re-authentication of an authenticated connection.
        reauthentication: bool,
        /// The session lifetime the broker announced (0: none); the producer re-authenticates
        /// before it ends.
        session_lifetime_ms: i64,
    },
    /// A connection's handshake failed in a way no retry of that connection fixes: no common
    /// version of an API kprod needs, or SASL refused (bad credentials, a mechanism the
    /// listener does not enable, a token the driver could not supply, a re-authentication
    /// refused). Once a connection of the producer has completed its handshake, this is an
    /// error on that connection only: it is closed (a [`Diagnostic::Disconnected`] follows)
    /// and its broker tried again after the reconnect backoff, as the Java client does.
    /// Before that it is the configuration speaking: once every bootstrap server has refused
    /// or failed to connect, the producer stops with this error ([`Event::Fatal`]) instead.
    HandshakeFailed {
        /// Connection.
        conn: ConnId,
        /// Address.
        addr: Arc<str>,
        /// Why, as [`Event::Fatal`] would carry it.
        error: FatalError,
    },
    /// A connection was lost or closed.
    Disconnected {
        /// Connection.
        conn: ConnId,
        /// The address it was opened to.
        addr: Arc<str>,
        /// The broker node it reached, if known (`None`: a bootstrap server's connection).
        node: Option<i32>,
        /// Why.
        reason: &'static str,
    },
    /// A batch will be retried.
    Retry {
        /// Topic.
        topic: Arc<str>,
        /// Partition.
        partition: i32,
        /// The batch (as in [`Diagnostic::BatchSent`]).
        batch: u64,
        /// The error that caused it.
        error: ErrorCode,
    },
    /// A batch went on the wire in a Produce request: its first transmission (when it is
    /// sealed: sequenced and, if configured, compressed) or a retry. Only with
    /// [`crate::ProducerConfig::batch_diagnostics`], like `BatchAcked` and `BatchFailed`.
    BatchSent {
        /// Topic.
        topic: Arc<str>,
        /// Partition.
        partition: i32,
        /// The batch: an id unique within this producer, the same in every event about it.
        /// Halves of a split batch get new ids.
        batch: u64,
        /// The producer id and epoch it is sequenced under (`None` without idempotence).
        identity: Option<ProducerIdentity>,
        /// Its first record's sequence number (-1 without idempotence, as on the wire).
        base_sequence: i32,
        /// Records in it.
        records: usize,
        /// Its size on the wire (compressed, if it is).
        bytes: usize,
        /// The connection the request goes to.
        conn: ConnId,
        /// 1 for the first transmission, then one more for each retry.
        attempt: u32,
    },
    /// A batch was acknowledged (its records then get one [`Event::Delivered`]).
    BatchAcked {
        /// Topic.
        topic: Arc<str>,
        /// Partition.
        partition: i32,
        /// The batch.
        batch: u64,
        /// Its first record's offset, `None` for a duplicate the broker confirmed without one
        /// or a success at offset -1 (offset unknown).
        base_offset: Option<i64>,
        /// Records in it.
        records: usize,
    },
    /// A batch failed (each record then gets `Failed`).
    BatchFailed {
        /// Topic.
        topic: Arc<str>,
        /// Partition.
        partition: i32,
        /// The batch.
        batch: u64,
        /// Records in it.
        records: usize,
        /// Why.
        error: DeliveryError,
        /// Whether its records may be in the log.
        persisted: Persistence,
    },
    /// The epoch was bumped locally.
    EpochBumped(ProducerIdentity),
    /// A new producer id was obtained.
    ProducerId(ProducerIdentity),
    /// The broker proved acknowledged records of this partition were lost.
    DataLoss {
        /// Topic.
        topic: Arc<str>,
        /// Partition.
        partition: i32,
    },
}

impl Diagnostic {
    /// The [`Diagnostic::Disconnected`] reason of a connection closed for idleness
    /// (`connections.max.idle.ms`): routine, where the other reasons are worth a look.
    pub const IDLE_CLOSE: &'static str = "idle";
    /// The [`Diagnostic::Disconnected`] reason of a connection whose connect failed
    /// ([`crate::Producer::handle_connect_failed`]): the driver has the address and the
    /// error to say more.
    pub const CONNECT_FAILED: &'static str = "connect failed";
}

/// The records of one batch, acknowledged together ([`Event::Delivered`]): in the log of
/// `topic`'s `partition`, in the order they were sent, the `k`-th at `base_offset + k`.
///
/// ```
/// use kprod_core::{Delivered, RecordId};
/// let d = Delivered {
///     topic: "orders".into(),
///     partition: 2,
///     base_offset: Some(40),
///     log_append_time: None,
///     ids: vec![RecordId(7), RecordId(9)],
/// };
/// let offsets: Vec<_> = d.records().collect();
/// assert_eq!(offsets, [(RecordId(7), Some(40)), (RecordId(9), Some(41))]);
/// assert_eq!(d.offset_of(RecordId(9)), Some(Some(41)));
/// assert_eq!(d.offset_of(RecordId(8)), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Delivered {
    /// Topic.
    pub topic: Arc<str>,
    /// Partition.
    pub partition: i32,
    /// The first record's offset; `None` when the broker confirmed a duplicate without one
    /// (DUPLICATE_SEQUENCE_NUMBER), or answered success at offset -1 (what brokers that find
    /// a retry already written without knowing where say; Java reports the offset unknown).
    pub base_offset: Option<i64>,
    /// The time the broker wrote the batch (ms since the Unix epoch) when the topic keeps
    /// `message.timestamp.type=LogAppendTime`: then it is every record's timestamp in the
    /// log, in place of the one it was sent with. `None` when the topic keeps the records'
    /// own (create) timestamps, and when it is not known: the broker did not say (a
    /// duplicate confirmed without one), or the answer was to a retry of a possibly written
    /// attempt (one that may be a duplicate's) before an answer that could not be a
    /// duplicate's showed the topic stamps appends: Kafka answers a retry it finds already
    /// written with the stored batch's largest timestamp, also on a CreateTime topic.
    pub log_append_time: Option<i64>,
    /// The records, in the order they were sent (and written). Never empty.
    pub ids: Vec<RecordId>,
}

impl Delivered {
    /// Each record with its offset, in order.
    pub fn records(&self) -> impl ExactSizeIterator<Item = (RecordId, Option<i64>)> + '_ {
        let base = self.base_offset;
        (self.ids.iter().enumerate()).map(move |(k, &id)| (id, base.map(|o| o + k as i64)))
    }

    /// The offset of `id`, if it is one of these records (`Some(None)` for a duplicate
    /// confirmed without offsets, or a success at offset -1).
    pub fn offset_of(&self, id: RecordId) -> Option<Option<i64>> {
        let k = self.ids.iter().position(|&i| i == id)?;
        Some(self.base_offset.map(|o| o + k as i64))
    }
}

/// The records of one batch handed to the driver under `acks=0` ([`Event::Sent`]): in
/// `topic`'s `partition`, in the order they were sent; nothing is known about the log.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sent {
    /// Topic.
    pub topic: Arc<str>,
    /// Partition.
    pub partition: i32,
    /// The records, in the order they were sent. Never empty.
    pub ids: Vec<RecordId>,
}

/// What the broker said about a refused batch beyond its error code (Produce v8+, KIP-467),
/// for one of its records. A broker that refuses a batch for some of its records (a keyless
/// record on a compacted topic, INVALID_RECORD; an out-of-range timestamp, INVALID_TIMESTAMP)
/// names them by their index in the batch: the others were refused only for being in that
/// batch, and may be sent again as they are.
///
/// ```
/// use kprod_core::BrokerDetail;
/// let named = BrokerDetail {
///     message: Some("One or more records have been rejected".into()),
///     named: Some(true),
///     record_message: Some("Compacted topic cannot accept message without key".into()),
/// };
/// assert!(named.is_named_invalid());
/// assert!(!BrokerDetail { named: Some(false), ..named.clone() }.is_named_invalid());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BrokerDetail {
    /// The broker's message for the partition (`error_message`), if it gave one.
    pub message: Option<Arc<str>>,
    /// `Some(true)`: the broker named this record as invalid (`record_errors`);
    /// `Some(false)`: it named other records of the batch, not this one; `None`: it named
    /// none.
    pub named: Option<bool>,
    /// The broker's message for this record, when it named it and gave one.
    pub record_message: Option<Arc<str>>,
}

impl BrokerDetail {
    /// Whether the broker named this record as one that made it refuse the batch.
    pub fn is_named_invalid(&self) -> bool {
        self.named == Some(true)
    }
}

impl std::fmt::Display for BrokerDetail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut sep = "";
        if let Some(m) = &self.message {
            write!(f, "{m}")?;
            sep = "; ";
        }
        match self.named {
            Some(true) => {
                write!(f, "{sep}this record was named invalid")?;
                if let Some(m) = &self.record_message {
                    write!(f, ": {m}")?;
                }
            }
            Some(false) => write!(f, "{sep}refused for other records of its batch")?,
            None => {}
        }
        Ok(())
    }
}

/// An outcome or notice for the application.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Event {
    /// The records of one batch are in the log, at consecutive offsets: with `acks=all`,
    /// written by every in-sync replica; with `acks=1` (idempotence off), by the leader only,
    /// and lost if the leader fails before a follower copies it. One event per batch, not
    /// per record: [`Delivered::records`] lists each record with its offset.
    Delivered(Delivered),
    /// `acks=0` only: the Produce request holding these records (one batch) was handed to
    /// the driver (its `Transmit`s come before this event). Kafka never answers an `acks=0`
    /// request, so nothing is known about the log: not an offset, not even that the broker
    /// wrote the records (a broker that refuses them closes the connection, and they are
    /// gone). Final for each record; it is never a [`Event::Delivered`]. One event per batch,
    /// as for `Delivered`.
    Sent(Sent),
    /// The record failed, with a truthful persistence status, and the record itself handed
    /// back so the application can re-route, resend or persist it.
    Failed {
        /// The record.
        id: RecordId,
        /// Why.
        error: DeliveryError,
        /// Whether it may be in the log.
        persisted: Persistence,
        /// The record: topic, key, value, headers and timestamp as sent. `partition` is the
        /// partition it was assigned to once it had one (`Some` even if the partitioner chose
        /// it; set it to `None` before sending it again to let the partitioner choose anew),
        /// else the partition the application named, if any.
        ///
        /// Always `Some` in practice. A record still waiting for metadata or in an open batch
        /// is at hand; a record in a sealed batch is decoded back from the batch's bytes
        /// (decompressed if need be: failure is the rare path, so the producer keeps no
        /// second copy of the records it sends). `None` would mean that kprod could not
        /// decode a batch it built itself, a bug (debug builds assert it never happens).
        record: Option<Box<Record>>,
        /// What the broker said beyond its error code when it refused the record's batch
        /// (Produce v8+): its message, and which records it named as invalid. `None` when
        /// it said nothing more, and for failures of other kinds.
        detail: Option<Box<BrokerDetail>>,
    },
    /// The producer stopped for good; every pending record also gets a `Failed` (and a
    /// record whose outcome was held behind an earlier record of its partition, the
    /// `Delivered` or `Failed` decided before: they follow this event).
    Fatal(FatalError),
    /// A notice for logs.
    Diagnostic(Diagnostic),
}

/// What the driver must do next. Drain with [`crate::Producer::poll_output`] until `Wait`.
///
/// Its `Debug` shows a `Transmit`'s length, not its bytes: a SASL frame carries the password
/// (PLAIN) or the token (OAUTHBEARER), and a producer's `Debug` shows the outputs not yet
/// drained.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Output {
    /// Write these bytes to the connection, after every byte of earlier `Transmit`s to it.
    /// A request frame may span several consecutive `Transmit`s (its record batches travel
    /// as chunks of their own, uncopied); only the concatenation is a stream of frames.
    Transmit {
        /// Connection.
        conn: ConnId,
        /// Part of the connection's byte stream.
        bytes: Bytes,
    },
    /// Open a TCP connection and report it with `handle_connected` or `handle_connect_failed`.
    /// Unanswered after [`crate::ProducerConfig::connect_timeout`], it gets a `Close`.
    Connect {
        /// The id to report it under.
        conn: ConnId,
        /// `host:port`.
        addr: Arc<str>,
    },
    /// Close the connection. Do not report `handle_disconnected` for it (it is ignored).
    Close {
        /// Connection.
        conn: ConnId,
        /// The core is done with the connection in good order (the producer closed with no
        /// Produce answer awaited on it, or it was idle for `connections.max.idle.ms`): write what
        /// earlier `Transmit`s handed over before closing it, as under `acks=0` those
        /// requests' records are already reported `Sent` (an idle connection has nothing
        /// left to write: one that carried `acks=0` requests is never idle; the flag there
        /// is a safeguard; a connection to a broker that left the cluster or moved, under
        /// `acks=0` with no Produce answer awaited, is closed so too). `false`: drop it at
        /// once (it failed: a request timeout, a protocol error; its broker left the cluster
        /// or moved with a Produce answer awaited; the producer closed while a
        /// Produce answer was awaited, its records already reported at their delivery
        /// timeout; or the producer failed or was aborted, [`Event::Fatal`]: under `acks=0`
        /// requests already reported `Sent` may then never be written).
        flush: bool,
    },
    /// An event for the application.
    Event(Event),
    /// The SASL exchange on `conn` needs something only the driver has: a SCRAM nonce or an
    /// OAUTHBEARER token. Answer with [`crate::Producer::handle_sasl_input`] (during the drain
    /// is fine). Only emitted when [`crate::ProducerConfig::sasl`] is set.
    SaslInput {
        /// Connection.
        conn: ConnId,
        /// What is needed.
        need: crate::sasl::SaslNeed,
    },
    /// Nothing more to do until new input, or until `until` passes: then call
    /// `handle_timeout`. Ends the drain.
    Wait {
        /// Deadline, if any.
        until: Option<Instant>,
    },
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Transmit { conn, bytes } => (f.debug_struct("Transmit"))
                .field("conn", conn)
                .field("bytes", &format_args!("<{} bytes>", bytes.len()))
                .finish(),
            Self::Connect { conn, addr } => (f.debug_struct("Connect"))
                .field("conn", conn)
                .field("addr", addr)
                .finish(),
            Self::Close { conn, flush } => (f.debug_struct("Close"))
                .field("conn", conn)
                .field("flush", flush)
                .finish(),
            Self::Event(e) => f.debug_tuple("Event").field(e).finish(),
            Self::SaslInput { conn, need } => (f.debug_struct("SaslInput"))
                .field("conn", conn)
                .field("need", need)
                .finish(),
            Self::Wait { until } => f.debug_struct("Wait").field("until", until).finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{DeliveryError, FatalError};
    use crate::protocol::ErrorCode;

    /// A refusal that a grant or a setting fixes says which.
    #[test]
    fn a_refusal_a_setting_fixes_says_which() {
        let auth = DeliveryError::Broker(ErrorCode::ClusterAuthorizationFailed).to_string();
        assert!(auth.contains("IDEMPOTENT_WRITE"), "{auth}");
        let fatal = FatalError::Broker(ErrorCode::ClusterAuthorizationFailed).to_string();
        assert!(fatal.contains("enable.idempotence=false"), "{fatal}");
        let large = DeliveryError::Broker(ErrorCode::MessageTooLarge).to_string();
        assert!(large.contains("max.message.bytes"), "{large}");
        let other = DeliveryError::Broker(ErrorCode::NotEnoughReplicas).to_string();
        assert!(other.ends_with("(19)"), "{other}");
    }

    /// The application's own mistakes (a misspelt topic, an internal topic, a keyless record
    /// on a compacted topic, a batch over `segment.bytes`) say what to check: a review
    /// found them bare codes.
    #[test]
    fn the_applications_own_mistakes_say_what_to_check() {
        let missing = DeliveryError::UnknownTopic(ErrorCode::UnknownTopicOrPartition).to_string();
        assert!(missing.contains("check the name"), "{missing}");
        let internal = DeliveryError::Broker(ErrorCode::InvalidTopicException).to_string();
        assert!(internal.contains("__consumer_offsets"), "{internal}");
        for c in [ErrorCode::InvalidRecord, ErrorCode::CorruptMessage] {
            let keyless = DeliveryError::Broker(c).to_string();
            assert!(
                keyless.contains("without a key") || keyless.contains("needs a key"),
                "{keyless}"
            );
        }
        let segment = DeliveryError::Broker(ErrorCode::RecordListTooLarge).to_string();
        assert!(segment.contains("segment.bytes"), "{segment}");
    }

    /// A broker without InitProducerId (idempotence turned off, a proxy) names the setting
    /// that produces without it; one without record batches v2 says what it is.
    #[test]
    fn an_unsupported_api_says_what_to_change() {
        let pid = FatalError::UnsupportedVersions("InitProducerId").to_string();
        assert!(pid.contains("enable.idempotence=false"), "{pid}");
        let produce = FatalError::UnsupportedVersions("Produce").to_string();
        assert!(produce.contains("0.11"), "{produce}");
        let other = FatalError::UnsupportedVersions("Metadata").to_string();
        assert!(
            other.starts_with("no supported version of Metadata"),
            "{other}"
        );
    }
}
