//! The stateright model: the real [`Producer`] against the [`Cluster`] broker model, over
//! FIFO connections with faults under bounded budgets (idempotence-spec §C).
//!
//! Each action makes exactly one real input call on the producer (or one broker or network
//! step) and then drains the producer's outputs into the links. Properties are the safety
//! invariants S1–S12 of §C.2 (`always`), liveness on quiescent states (L1, L4), and the
//! reachability targets of §C.4 (`sometimes`).
//!
//! Deliberately buggy client policies ([`Mutation`]) sit between the real producer and the
//! network and rewrite its Produce requests the way known-broken clients behaved. They exist
//! to prove the checker finds those bug classes; they are never used by the real driver.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kprod_core::mutation::Mutation as CoreMutation;
use kprod_core::protocol::produce::{ProduceRequest, ProduceResponse};
use kprod_core::protocol::record_batch::{restamp, BatchHeader, RecordBatch, RecordBatchBuilder};
use kprod_core::protocol::{
    api_key, decode_response, encode_request, ErrorCode, Message, Reader, Request, RequestHeader,
};
use kprod_core::{
    ConnId, DeliveryError, Diagnostic, Event, Output, Persistence, Producer, ProducerConfig,
    Record, RecordId, TopicName,
};
use stateright::{Model, Property};

use crate::broker::{Advertised, BrokerMode, Cluster, Injection};

/// The topic every model record goes to.
pub const TOPIC: &str = "t";

/// A deliberately buggy client policy layered over the real producer (non-vacuity tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// The real producer, untouched.
    None,
    /// KafkaJS ≤ 1.16 (D1): the sequence is read when a request is built and advanced only
    /// when its response arrives.
    KafkaJs,
    /// KAFKA-12152 (D4): only the partition that first uses a new epoch restarts at 0; the
    /// others keep counting their old sequences under the new epoch.
    Kafka12152,
    /// librdkafka < 1.9 (D10): sequences restart at 0, same epoch, after a metadata flap.
    D10ResetOnFlap,
    /// librdkafka #4953 (D12): a possibly persisted batch is re-sequenced under a new epoch.
    D12Resequence,
}

/// Kinds of broker error the model may inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Inject {
    /// NOT_ENOUGH_REPLICAS: retriable, not written.
    NotEnoughReplicas,
    /// REQUEST_TIMED_OUT after the append: retriable, written.
    TimedOutAfterAppend,
    /// INVALID_RECORD: permanent, not written.
    InvalidRecord,
    /// MESSAGE_TOO_LARGE: split, or permanent for one record.
    MessageTooLarge,
    /// UNKNOWN_SERVER_ERROR: not retriable, outcome unknown.
    UnknownServerError,
    /// UNKNOWN_SERVER_ERROR after the broker appended the batch.
    UnknownServerErrorAfterAppend,
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND: retriable, written.
    NotEnoughReplicasAfterAppend,
    /// NOT_LEADER_OR_FOLLOWER after the append, as Kafka answers an `acks=all` batch whose
    /// leadership moved while it waited for its followers (`DelayedProduce`): retriable,
    /// written (a follower holds it and becomes the leader; here the leader keeps it).
    NotLeaderAfterAppend,
    /// KAFKA_STORAGE_ERROR after the append: the leader's log directory failed while the
    /// batch waited for its followers; retriable, written (as NOT_LEADER_OR_FOLLOWER after
    /// the append, the leader keeps it here).
    StorageErrorAfterAppend,
    /// TOPIC_AUTHORIZATION_FAILED: the whole topic refused (Write revoked), not written;
    /// the producer fails what the partition holds unsent with it.
    TopicAuthorizationFailed,
}

impl Inject {
    fn injection(self) -> Injection {
        let (code, append) = match self {
            Self::NotEnoughReplicas => (ErrorCode::NotEnoughReplicas, false),
            Self::TimedOutAfterAppend => (ErrorCode::RequestTimedOut, true),
            Self::InvalidRecord => (ErrorCode::InvalidRecord, false),
            Self::MessageTooLarge => (ErrorCode::MessageTooLarge, false),
            Self::UnknownServerError => (ErrorCode::UnknownServerError, false),
            Self::UnknownServerErrorAfterAppend => (ErrorCode::UnknownServerError, true),
            Self::NotEnoughReplicasAfterAppend => (ErrorCode::NotEnoughReplicasAfterAppend, true),
            Self::NotLeaderAfterAppend => (ErrorCode::NotLeaderOrFollower, true),
            Self::StorageErrorAfterAppend => (ErrorCode::KafkaStorageError, true),
            Self::TopicAuthorizationFailed => (ErrorCode::TopicAuthorizationFailed, false),
        };
        Injection { code, append }
    }

    /// Whether a failure caused by this injection is an expected record-level failure.
    fn is_permanent(self) -> bool {
        matches!(
            self,
            Self::InvalidRecord
                | Self::MessageTooLarge
                | Self::UnknownServerError
                | Self::UnknownServerErrorAfterAppend
                | Self::TopicAuthorizationFailed
        )
    }
}

/// Fault budgets: how many of each fault a path may contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Budget {
    /// Connection drops (after the broker processed any prefix).
    pub disconnects: u8,
    /// Clock jumps past a request or delivery timeout.
    pub timeouts: u8,
    /// Failed connection attempts.
    pub connect_failures: u8,
    /// Leader moves to the other node.
    pub leader_changes: u8,
    /// Broker restarts (the dedup cache shrinks to the last batch).
    pub restarts: u8,
    /// Producer-state expiry on the broker.
    pub expiries: u8,
    /// Injected broker errors.
    pub injections: u8,
    /// Metadata flaps (the topic missing from one metadata response).
    pub flaps: u8,
    /// Producer-state expiry the client cannot see coming: the broker's
    /// `producer.id.expiration.ms` is below the client's setting, so no idle time passes. Outside
    /// the well-behaved profile (S9, L4 do not apply); the client must still tell the truth.
    pub silent_expiries: u8,
    /// DeleteRecords up to the end of a partition's log (only while nothing is outstanding).
    pub delete_records: u8,
    /// Connections whose broker side stalls: the broker reads their requests and acts on
    /// them late, even after the producer closed the connection (a zombie request: Kafka
    /// reads a request off the socket before it sees the close), and its answers never
    /// arrive.
    pub stalls: u8,
    /// Producer-state expiry of one partition after `producer.id.expiration.ms` of idleness
    /// (only while nothing is outstanding, as `expiries`), the other partitions keeping
    /// theirs: their last write was later, so their state outlives it.
    pub partition_expiries: u8,
}

/// A bounded model configuration.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelCfg {
    /// Broker generation.
    pub mode: BrokerMode,
    /// Partitions of the topic.
    pub partitions: i32,
    /// Records sent to each partition.
    pub records_per_partition: u8,
    /// `batch.size`, in records: records that queue up behind a busy partition share a batch
    /// up to this many (1: one record per batch).
    pub records_per_batch: u8,
    /// `max.in.flight.requests.per.connection`.
    pub max_in_flight: usize,
    /// Number of broker nodes (2 for leader changes).
    pub nodes: usize,
    /// Largest sequence before the wrap (small, so the wrap is explored).
    pub max_sequence: i32,
    /// Largest epoch before a new producer id.
    pub max_epoch: i16,
    /// Fault budgets.
    pub budget: Budget,
    /// Errors that may be injected.
    pub injectable: Vec<Inject>,
    /// Gap policy of the producer.
    pub gap_policy: kprod_core::GapPolicy,
    /// The client policy under test.
    pub mutation: Mutation,
    /// Bound on requests transmitted in a path (periodic Metadata refreshes aside). A path
    /// that reaches it is reported (L2 no livelock), not silently dropped.
    pub max_transmits: u16,
    /// Bound on Metadata requests in a path. Periodic refreshes never stop, so paths past this
    /// bound are cut (time passing without progress); it only matters when
    /// `metadata_max_age_ms` is short.
    pub max_refreshes: u16,
    /// `delivery.timeout.ms` (the request timeout is 100 ms).
    pub delivery_timeout_ms: u64,
    /// The broker's `producer.id.expiration.ms`, also given to the producer: an `Expire`
    /// lets this much idle time pass first.
    pub producer_id_expiration_ms: u64,
    /// A planted bug inside the real producer (kprod-core's `mutations` feature).
    pub core_mutation: CoreMutation,
    /// `metadata.max.age.ms`. Small values make periodic refreshes (and so metadata flaps)
    /// part of the explored behaviour; time advancing to such a refresh is not a fault.
    pub metadata_max_age_ms: u64,
    /// The versions the brokers advertise: [`Advertised::KAFKA_2_3`] models brokers without
    /// KIP-360 and KIP-951.
    pub broker_versions: Advertised,
    /// The producer's `bootstrap_patience` in ms: with several nodes, the next bootstrap
    /// server is tried alongside one whose ApiVersions answer has not come after this long.
    /// `None` (the default): one bootstrap server at a time. Only the configuration that
    /// checks it sets it: every other one with two nodes would also explore a second
    /// bootstrap connection each time the first waits, which multiplies its state space
    /// (the leader-learned-in-flight one from 136,205 to 924,028 unique states) without
    /// reaching anything else.
    pub bootstrap_patience_ms: Option<u64>,
    /// The brokers answer NOT_LEADER_OR_FOLLOWER with the new leader and its endpoint
    /// (KIP-951, Produce v10+), as Kafka always does: the producer may move a partition on
    /// the hint, before any metadata answer. Off by default (the pinned configurations
    /// predate it); the configuration that checks the hint path sets it.
    pub leader_hints: bool,
    /// Whether a leader change may truncate the log to its high watermark
    /// (`Action::LeaderChangeTruncating`): the new leader is an in-sync follower that did not
    /// have the batches answered with an error after the append. Off by default (the pinned
    /// configurations predate it). With it, S4 also requires a delivered record below the
    /// high watermark.
    pub truncation: bool,
    /// `linger.ms`. 0 (the default): every batch may go as soon as it holds a record. Above
    /// 0, a batch waits for a tick to its linger, or goes with a request that goes anyway
    /// (another partition's ready batch takes the open ones along).
    pub linger_ms: u64,
}

impl Default for ModelCfg {
    fn default() -> Self {
        Self {
            mode: BrokerMode::Lenient,
            partitions: 1,
            records_per_partition: 2,
            records_per_batch: 1,
            max_in_flight: 2,
            nodes: 1,
            max_sequence: 7,
            max_epoch: 3,
            budget: Budget::default(),
            injectable: Vec::new(),
            gap_policy: kprod_core::GapPolicy::ContinueWithGap,
            mutation: Mutation::None,
            max_transmits: 40,
            max_refreshes: 40,
            delivery_timeout_ms: 1000,
            producer_id_expiration_ms: 1000,
            core_mutation: CoreMutation::None,
            metadata_max_age_ms: 86_400_000,
            broker_versions: Advertised::LATEST,
            bootstrap_patience_ms: None,
            leader_hints: false,
            truncation: false,
            linger_ms: 0,
        }
    }
}

impl ModelCfg {
    /// Builds the model.
    pub fn into_model(self) -> KafkaModel {
        // The Tansu-like broker answers DUPLICATE_SEQUENCE_NUMBER for a sequence at or below
        // its last (Tansu compares i32 sequences that never wrap in practice); on the model's
        // small circle of sequences "below" is the nearer half, so a batch further ahead than
        // half the circle would be taken for a duplicate, as no real broker would (a seeded
        // simulation with sequences up to 7 and five batches in flight found exactly that,
        // 2026-12-06: a record reported delivered that was never written). So the batches in
        // flight must span less than half the circle.
        let modulus = i64::from(self.max_sequence) + 1;
        let ahead = (self.max_in_flight.max(1) as i64 - 1) * self.records_per_batch.max(1) as i64;
        assert!(
            self.mode != BrokerMode::TansuLike || 2 * (ahead + 1) <= modulus,
            "the Tansu-like broker needs max_sequence + 1 >= 2 x (the records in flight ahead \
             of the next, {ahead}, + 1): max_sequence {} is too small for {} in flight",
            self.max_sequence,
            self.max_in_flight
        );
        KafkaModel {
            cfg: self,
            epoch: Instant::now(),
        }
    }
}

/// Ghost information about a request frame, read once when it is transmitted.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ghost {
    /// API key.
    pub api_key: i16,
    /// API version.
    pub version: i16,
    /// For Produce: the batches.
    pub batches: Vec<GhostBatch>,
}

/// One batch of a Produce request, as the model read it off the wire.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GhostBatch {
    /// Partition.
    pub partition: i32,
    /// Producer id.
    pub pid: i64,
    /// Epoch.
    pub epoch: i16,
    /// Base sequence.
    pub seq: i32,
    /// Record count.
    pub count: i32,
    /// The lowest record index (send order within the partition) the batch carries.
    pub first: u8,
    /// The highest record index the batch carries.
    pub last: u8,
    /// A hash of the batch's bytes (P2: a retry is the same bytes).
    pub bytes_hash: u64,
}

/// One connection.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Link {
    /// The node at the far end.
    pub node: i32,
    /// Requests not yet read by the broker.
    pub to_broker: VecDeque<(Bytes, Ghost)>,
    /// Responses not yet read by the producer.
    pub to_client: VecDeque<(Bytes, Ghost)>,
    /// When the broker side stalled (`Budget::stalls`), in milliseconds since the start:
    /// its answers from then on are lost, and its unread requests outlive the connection
    /// (`State::zombies`).
    pub stalled: Option<u64>,
}

impl Link {
    /// A new connection to `node`, nothing on it.
    fn to(node: i32) -> Box<Self> {
        Box::new(Self {
            node,
            to_broker: VecDeque::new(),
            to_client: VecDeque::new(),
            stalled: None,
        })
    }
}

/// What the application was told about a record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Delivered at an offset (or without one: DUPLICATE_SEQUENCE_NUMBER).
    Delivered(Option<i64>),
    /// Failed.
    Failed(Persistence),
}

/// State of the buggy client policy.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct MutationState {
    /// KafkaJS: next sequence per partition, advanced on responses.
    pub acked_next: BTreeMap<i32, i32>,
    /// KAFKA-12152: the first partition seen under each epoch.
    pub epoch_first: BTreeMap<i16, i32>,
    /// KAFKA-12152 / D10 / D12: per partition (epoch seen, next sequence after the last batch,
    /// shift applied to sequences).
    pub per_partition: BTreeMap<i32, (i16, i32, i32)>,
    /// D10: a flap was seen; partitions whose sequence must restart.
    pub flapped: bool,
    /// D12: transmissions seen, to recognise a retry.
    pub seen: BTreeSet<(i32, i64, i16, i32)>,
    /// D12: epoch offset applied after a re-sequencing.
    pub epoch_shift: i16,
}

/// A model state.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    /// The real producer.
    pub producer: Producer,
    /// The brokers.
    pub cluster: Cluster,
    /// Open connections.
    pub links: BTreeMap<ConnId, Box<Link>>,
    /// Connections the producer asked for that are not yet established.
    pub connecting: BTreeMap<ConnId, i32>,
    /// Virtual time since the model's start, in milliseconds.
    pub clock_ms: u64,
    /// The producer's last `Wait` deadline, in milliseconds since the start.
    pub wait_until_ms: Option<u64>,
    /// Requests of closed stalled connections that the broker still reads and acts on, each
    /// with its connection and node, in order per connection. Their answers go nowhere.
    pub zombies: Vec<(ConnId, i32, Bytes, Ghost)>,
    /// Records sent per partition.
    pub sent: Vec<u8>,
    /// Record ids: (partition, index) for each id.
    pub ids: BTreeMap<RecordId, (i32, u8)>,
    /// Outcomes reported.
    pub outcomes: BTreeMap<RecordId, Outcome>,
    /// A record got a second outcome.
    pub double_outcome: bool,
    /// A record's outcome came after the outcome of a later record of its partition.
    pub outcome_reordered: bool,
    /// A record was reported with a log append time: the model's topics keep create times,
    /// so the time can only be a duplicate's stored timestamp taken for the log's.
    pub false_append_time: bool,
    /// The producer failed.
    pub fatal: bool,
    /// The producer signalled data loss.
    pub data_loss: bool,
    /// Remaining fault budgets.
    pub budget: Budget,
    /// Requests transmitted so far.
    pub transmits: u16,
    /// Partitions that were given a permanent (record-level) error.
    pub permanent_injected: Vec<bool>,
    /// Per partition, how many records (from the first) have been on the wire.
    pub on_wire: Vec<u8>,
    /// Records that failed by delivery timeout, not persisted, and are not in the log, nor in
    /// any request still on its way to a broker (S9 allows them): never sent, or every attempt
    /// refused or lost before the broker read it. (Only never-sent ones until 2026-12-06: a
    /// seeded simulation refused a record NOT_ENOUGH_REPLICAS, its retry due after its
    /// delivery timeout, and S9 called its truthful failure spurious. A report that is true
    /// by luck, an attempt lost that the producer cannot know unwritten, is S4's to find, on
    /// the path where that attempt was written.)
    pub timed_out_not_persisted: BTreeSet<(i32, u8)>,
    /// A record that had been on the wire reached its delivery timeout (§C.4).
    pub timed_out_sent: bool,
    /// P2 ghost: the bytes of each (partition, pid, epoch, seq, count, first record) sent.
    pub wire_hashes: BTreeMap<(i32, i64, i16, i32, i32, u8), u64>,
    /// P2 ghost: a retry went out with other bytes.
    pub reencoded: bool,
    /// P7 ghost: a Produce for a partition went on one connection while another connection
    /// still had one for it outstanding.
    pub undrained_move: bool,
    /// Partitions whose leader moved while they had Produce requests outstanding.
    pub moved_with_inflight: BTreeSet<i32>,
    /// §C.4 ghost: such a partition then sent to its new leader.
    pub drained_move: bool,
    /// With leader hints: partitions whose leader moved since the producer last read a
    /// metadata answer.
    pub moved_unannounced: BTreeSet<i32>,
    /// With leader hints: such a partition sent to its new leader, which only a hint told.
    pub moved_on_hint: bool,
    /// S3 (cut policies) ghost: records a cut must keep out of the log.
    pub must_not_land: BTreeSet<(i32, u8)>,
    /// S3 (cut policies) ghost: `(p, k, sent)` for a record `k` refused possibly persisted:
    /// unless `k` is in the log, none of the records `k + 1..sent` sent by then may land.
    pub cut_unless_landed: BTreeSet<(i32, u8, u8)>,
    /// §C.4 ghost: a Produce acknowledgement overtook an earlier record not in the log.
    pub overtaken: bool,
    /// §C.4 ghost: the true head of a partition drew OUT_OF_ORDER_SEQUENCE_NUMBER or
    /// UNKNOWN_PRODUCER_ID: `Some(log start had moved past 0)`.
    pub head_rejection: Option<bool>,
    /// S10 (§C): the true head of a partition drew OUT_OF_ORDER_SEQUENCE_NUMBER in the
    /// well-behaved profile (no broker state lost or cut, no zombie, no record-level error
    /// given to that partition): a client bug (a model audit, 2026-12-07: S10 lacked it).
    pub head_out_of_order: bool,
    /// §C.4 ghost: a producer id that reached the epoch limit.
    pub exhausted_pid: Option<i64>,
    /// §C.4 ghost: a batch went out under a new producer id after the epoch limit.
    pub new_pid_after_exhaustion: bool,
    /// Metadata requests transmitted so far.
    pub refreshes: u16,
    /// S5 ghost: a transmission carried a record at a (pid, epoch, seq) already in the log
    /// with different content.
    pub seq_reuse: bool,
    /// S7 ghost: a partition had more batches on the wire than allowed.
    pub over_inflight: bool,
    /// §C.4 ghost: an epoch bump completed while another partition had old-epoch requests.
    pub bump_while_other_inflight: bool,
    /// §C.4 ghost: a response from one node arrived while a Produce request to another node
    /// was outstanding.
    pub old_leader_response_after_new_request: bool,
    /// §C.4 ghost: a zombie request (`Budget::stalls`) was written after the producer closed
    /// its connection.
    pub zombie_written: bool,
    /// §C.4 ghost: a leader change truncated records written after the append
    /// (`ModelCfg::truncation`).
    pub truncated: bool,
    /// Buggy client policy state.
    pub mutation: MutationState,
}

/// A model action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    /// The application sends the next record of a partition.
    Send(i32),
    /// A pending connection succeeds.
    ConnectOk(ConnId),
    /// A pending connection fails.
    ConnectFail(ConnId),
    /// The broker reads and answers the head request of a connection.
    Process(ConnId),
    /// The producer reads the head response of a connection.
    Deliver(ConnId),
    /// The connection breaks; unread requests and undelivered responses are lost.
    Disconnect(ConnId),
    /// Time passes to the producer's next deadline.
    Tick,
    /// The partition's leadership moves to the other node.
    LeaderChange(i32),
    /// The partition's leadership moves to the other node, which holds the log up to its high
    /// watermark and this many batches above it: the rest is truncated
    /// (`ModelCfg::truncation`).
    LeaderChangeTruncating(i32, u8),
    /// A broker restart shrinks the dedup caches.
    Restart,
    /// The broker forgets every producer's state.
    Expire,
    /// The next Produce of a partition draws this error.
    Inject(i32, Inject),
    /// The next metadata response omits the topic.
    Flap,
    /// The broker forgets every producer's state, with no idle time first (a broker whose
    /// expiry is below the client's setting).
    SilentExpire,
    /// DeleteRecords up to the end of a partition's log.
    DeleteRecords(i32),
    /// The broker forgets every producer's state on one partition after the producer idled
    /// `producer.id.expiration.ms` (the other partitions keep theirs).
    ExpirePartition(i32),
    /// The broker side of a connection stalls: its answers are lost from now on, and its
    /// requests are acted on late, even after the connection closed.
    Stall(ConnId),
    /// The broker reads the next request of a closed stalled connection.
    ProcessZombie(ConnId),
}

impl Action {
    /// Parses a path as a checker prints it (`[Send(0), Inject(1, InvalidRecord)]`, the
    /// brackets optional): its actions split at the top-level commas, each as
    /// [`Self::parse`] reads it; the text of the first action it cannot read as the error.
    pub fn parse_path(path: &str) -> Result<Vec<Self>, String> {
        let path = path.trim().trim_start_matches('[').trim_end_matches(']');
        let (mut parts, mut cur, mut depth) = (Vec::new(), String::new(), 0);
        for ch in path.chars() {
            match ch {
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(std::mem::take(&mut cur));
                    continue;
                }
                _ => {}
            }
            cur.push(ch);
        }
        parts.push(cur);
        (parts.iter())
            .filter(|p| !p.trim().is_empty())
            .map(|p| Self::parse(p).ok_or_else(|| p.trim().to_owned()))
            .collect()
    }

    /// Parses an action as its `Debug` form prints it (`Process(ConnId(2))`,
    /// `Inject(1, InvalidRecord)`), so that a counterexample path can be replayed.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let (name, arg) = match s.split_once('(') {
            Some((n, rest)) => (n, rest.strip_suffix(')').unwrap_or(rest)),
            None => (s, ""),
        };
        let num = |x: &str| -> Option<u64> {
            x.trim()
                .trim_start_matches("ConnId(")
                .trim_end_matches(')')
                .parse()
                .ok()
        };
        let conn = |x: &str| num(x).map(ConnId);
        Some(match name {
            "Send" => Self::Send(num(arg)? as i32),
            "ConnectOk" => Self::ConnectOk(conn(arg)?),
            "ConnectFail" => Self::ConnectFail(conn(arg)?),
            "Process" => Self::Process(conn(arg)?),
            "Deliver" => Self::Deliver(conn(arg)?),
            "Disconnect" => Self::Disconnect(conn(arg)?),
            "Tick" => Self::Tick,
            "LeaderChange" => Self::LeaderChange(num(arg)? as i32),
            "LeaderChangeTruncating" => {
                let (p, held) = arg.split_once(',')?;
                Self::LeaderChangeTruncating(num(p)? as i32, num(held)? as u8)
            }
            "Restart" => Self::Restart,
            "Expire" => Self::Expire,
            "Flap" => Self::Flap,
            "SilentExpire" => Self::SilentExpire,
            "DeleteRecords" => Self::DeleteRecords(num(arg)? as i32),
            "ExpirePartition" => Self::ExpirePartition(num(arg)? as i32),
            "Stall" => Self::Stall(conn(arg)?),
            "ProcessZombie" => Self::ProcessZombie(conn(arg)?),
            "Inject" => {
                let (p, k) = arg.split_once(',')?;
                let k = match k.trim() {
                    "NotEnoughReplicas" => Inject::NotEnoughReplicas,
                    "TimedOutAfterAppend" => Inject::TimedOutAfterAppend,
                    "InvalidRecord" => Inject::InvalidRecord,
                    "MessageTooLarge" => Inject::MessageTooLarge,
                    "UnknownServerError" => Inject::UnknownServerError,
                    "UnknownServerErrorAfterAppend" => Inject::UnknownServerErrorAfterAppend,
                    "NotEnoughReplicasAfterAppend" => Inject::NotEnoughReplicasAfterAppend,
                    "NotLeaderAfterAppend" => Inject::NotLeaderAfterAppend,
                    "StorageErrorAfterAppend" => Inject::StorageErrorAfterAppend,
                    "TopicAuthorizationFailed" => Inject::TopicAuthorizationFailed,
                    _ => return None,
                };
                Self::Inject(num(p)? as i32, k)
            }
            _ => return None,
        })
    }
}

/// The model.
#[derive(Debug, Clone)]
pub struct KafkaModel {
    /// Configuration.
    pub cfg: ModelCfg,
    epoch: Instant,
}

const BACKOFF_MS: u64 = 1;
/// The producer's `request.timeout.ms` in the model.
const REQUEST_TIMEOUT_MS: u64 = 100;

/// The value of record `k` of partition `p`.
pub fn value_of(p: i32, k: u8) -> Bytes {
    Bytes::from(format!("{p}:{k}"))
}

fn parse_value(v: &[u8]) -> Option<(i32, u8)> {
    let s = std::str::from_utf8(v).ok()?;
    let (p, k) = s.split_once(':')?;
    Some((p.parse().ok()?, k.parse().ok()?))
}

impl KafkaModel {
    fn now(&self, s: &State) -> Instant {
        self.epoch + Duration::from_millis(s.clock_ms)
    }

    fn producer_config(&self) -> ProducerConfig {
        ProducerConfig {
            bootstrap_servers: (1..=self.cfg.nodes).map(|n| format!("b{n}:9092")).collect(),
            max_in_flight: self.cfg.max_in_flight,
            linger: Duration::from_millis(self.cfg.linger_ms),
            batch_size: self.batch_size(),
            request_timeout: Duration::from_millis(REQUEST_TIMEOUT_MS),
            delivery_timeout: Duration::from_millis(self.cfg.delivery_timeout_ms),
            producer_id_expiration: Some(Duration::from_millis(self.cfg.producer_id_expiration_ms)),
            mutation: self.cfg.core_mutation,
            retry_backoff: Duration::from_millis(BACKOFF_MS),
            retry_backoff_max: Duration::from_millis(BACKOFF_MS),
            reconnect_backoff: Duration::from_millis(BACKOFF_MS),
            // No spread: the checked properties hold for backoffs of any length, and
            // deadlines hashed from the clock would only multiply the states (core/tests
            // check the spread itself).
            backoff_jitter_percent: 0,
            metadata_max_age: Duration::from_millis(self.cfg.metadata_max_age_ms),
            max_block: Duration::from_secs(3600),
            allow_auto_topic_creation: false,
            // The model's topics are always in use; leaving idle ones out of metadata
            // requests changes nothing the checked properties see.
            metadata_max_idle: None,
            // The bootstrap servers are the model's brokers; dialling them again after five
            // minutes without metadata adds a timer and nothing the properties see.
            metadata_recovery_rebootstrap_trigger: None,
            // Connections in the model carry traffic or are lost; closing idle ones would
            // add states much like a disconnect's (without its reconnect backoff), with
            // nothing in flight to lose (core/tests covers the idle close itself).
            connections_max_idle: None,
            // The model's connects are answered or refused; a connect timeout grown after
            // failures is checked in core/tests.
            connect_timeout_max: None,
            bootstrap_patience: self.cfg.bootstrap_patience_ms.map(Duration::from_millis),
            gap_policy: self.cfg.gap_policy,
            max_epoch: self.cfg.max_epoch,
            max_sequence: self.cfg.max_sequence,
            ..ProducerConfig::default()
        }
    }

    /// `batch.size` in bytes for `records_per_batch` model records (all the same size).
    fn batch_size(&self) -> usize {
        if self.cfg.records_per_batch <= 1 {
            return 1;
        }
        let mut b = RecordBatchBuilder::with_capacity(0);
        for k in 0..self.cfg.records_per_batch {
            b.push(0, None, Some(&value_of(0, k)[..]), &[]);
        }
        b.size()
    }

    fn node_of(addr: &str) -> Option<i32> {
        addr.strip_prefix('b')?.split(':').next()?.parse().ok()
    }

    /// Carries out every output of the producer until it waits.
    fn drain(&self, s: &mut State) {
        let mut partial: BTreeMap<ConnId, BytesMut> = BTreeMap::new();
        loop {
            match s.producer.poll_output() {
                Output::Wait { until } => {
                    debug_assert!(
                        partial.values().all(|b| b.is_empty()),
                        "a request left unfinished"
                    );
                    s.wait_until_ms =
                        until.map(|t| t.saturating_duration_since(self.epoch).as_millis() as u64);
                    return;
                }
                Output::Connect { conn, addr } => {
                    let node = Self::node_of(&addr).unwrap_or(0);
                    if s.budget.connect_failures > 0 {
                        s.connecting.insert(conn, node);
                    } else {
                        s.links.insert(conn, Link::to(node));
                        let now = self.now(s);
                        s.producer.handle_connected(now, conn);
                    }
                }
                Output::Transmit { conn, bytes } => {
                    // A request may come in several chunks; it is whole once its size prefix
                    // is satisfied, and it is always whole by the end of the drain.
                    let buf = partial.entry(conn).or_default();
                    buf.extend_from_slice(&bytes);
                    for frame in crate::broker::split_frames(buf) {
                        let (frame, ghost) = self.inspect_request(s, frame);
                        if ghost.api_key == api_key::METADATA {
                            s.refreshes = s.refreshes.saturating_add(1);
                        } else {
                            s.transmits = s.transmits.saturating_add(1);
                        }
                        self.observe_produce(s, conn, &ghost);
                        if let Some(l) = s.links.get_mut(&conn) {
                            l.to_broker.push_back((frame, ghost));
                        }
                        self.check_inflight(s);
                    }
                }
                Output::Close { conn, .. } => {
                    Self::close_link(s, conn);
                    s.connecting.remove(&conn);
                }
                Output::Event(e) => self.on_event(s, e),
                Output::SaslInput { .. } => unreachable!("the model configures no SASL"),
            }
        }
    }

    /// Ghost checks on a Produce request as it goes on the wire: P2 (same bytes for the same
    /// batch), P7 (no other connection has the partition's requests), which records have been
    /// on the wire, and the producer ids used.
    fn observe_produce(&self, s: &mut State, conn: ConnId, ghost: &Ghost) {
        for b in &ghost.batches {
            let p = b.partition;
            let key = (p, b.pid, b.epoch, b.seq, b.count, b.first);
            if *s.wire_hashes.entry(key).or_insert(b.bytes_hash) != b.bytes_hash {
                s.reencoded = true;
            }
            let elsewhere = s.links.iter().any(|(c, l)| {
                *c != conn
                    && l.to_broker
                        .iter()
                        .chain(l.to_client.iter())
                        .flat_map(|(_, g)| g.batches.iter())
                        .any(|x| x.partition == p)
            });
            if elsewhere {
                s.undrained_move = true;
            }
            let node = s.links.get(&conn).map(|l| l.node);
            let to_leader = node == Some(s.cluster.partition(TOPIC, p).leader);
            if s.moved_with_inflight.contains(&p) && to_leader {
                s.drained_move = true;
            }
            if s.moved_unannounced.contains(&p) && to_leader {
                s.moved_on_hint = true;
            }
            if let Some(w) = s.on_wire.get_mut(p as usize) {
                *w = (*w).max(b.last + 1);
            }
            if b.epoch >= self.cfg.max_epoch {
                s.exhausted_pid = Some(b.pid);
            }
            if s.exhausted_pid.is_some_and(|x| x < b.pid) {
                s.new_pid_after_exhaustion = true;
            }
        }
    }

    fn on_event(&self, s: &mut State, e: Event) {
        let (id, o) = match e {
            Event::Delivered(d) => {
                if d.log_append_time.is_some() {
                    s.false_append_time = true;
                }
                for (id, offset) in d.records() {
                    self.resolve(s, id, Outcome::Delivered(offset));
                }
                return;
            }
            Event::Failed {
                id,
                persisted,
                error,
                ..
            } => {
                if let Some(&(p, k)) = s.ids.get(&id) {
                    let unsent = s.on_wire.get(p as usize).is_none_or(|w| k >= *w);
                    if let DeliveryError::DeliveryTimeout { .. } = error {
                        let carries = |g: &Ghost| {
                            (g.batches.iter())
                                .any(|b| b.partition == p && (b.first..=b.last).contains(&k))
                        };
                        let on_its_way =
                            (s.links.values()).any(|l| l.to_broker.iter().any(|(_, g)| carries(g)));
                        let in_log = Self::log_values(s, p).contains(&(p, k));
                        if persisted == Persistence::NotPersisted
                            && (unsent || (!on_its_way && !in_log))
                        {
                            s.timed_out_not_persisted.insert((p, k));
                        }
                        s.timed_out_sent |= !unsent;
                    }
                    // A cut (§B.4): a record refused for good takes every later record already
                    // sent with it.
                    let refused = matches!(
                        error,
                        DeliveryError::Broker(_)
                            | DeliveryError::PartitionCut
                            | DeliveryError::Fatal(_)
                    );
                    let cuts = self.cfg.gap_policy != kprod_core::GapPolicy::ContinueWithGap;
                    if refused && cuts {
                        let sent = s.sent[p as usize];
                        if persisted == Persistence::NotPersisted {
                            s.must_not_land.extend((k + 1..sent).map(|j| (p, j)));
                        } else if k + 1 < sent {
                            // Refused possibly persisted: in the log, or a cut like the above.
                            s.cut_unless_landed.insert((p, k, sent));
                        }
                    }
                }
                (id, Outcome::Failed(persisted))
            }
            // The model's producers are idempotent with acks=all (ModelCfg sets neither):
            // `Sent` is acks=0's outcome.
            Event::Sent(_) => unreachable!("the model runs acks=all"),
            Event::Fatal(_) => {
                s.fatal = true;
                return;
            }
            Event::Diagnostic(Diagnostic::DataLoss { .. }) => {
                s.data_loss = true;
                return;
            }
            Event::Diagnostic(_) => return,
        };
        self.resolve(s, id, o);
    }

    /// Records a record's outcome.
    fn resolve(&self, s: &mut State, id: RecordId, o: Outcome) {
        if s.outcomes.insert(id, o).is_some() {
            s.double_outcome = true;
        }
        // A partition's outcomes go out in send order (what the Java client documents for
        // its callbacks).
        if let Some(&(p, k)) = s.ids.get(&id) {
            let later_resolved = (s.ids.iter())
                .any(|(other, &(q, j))| q == p && j > k && s.outcomes.contains_key(other));
            s.outcome_reordered |= later_resolved;
        }
        // A resolved batch is never sent again: forget its bytes, so that the P2 ghost holds
        // only the batches still open (and does not tell apart states by their history).
        if let Some(&(p, k)) = s.ids.get(&id) {
            s.wire_hashes.retain(|key, _| !(key.0 == p && key.5 == k));
        }
    }

    /// Reads a request's ghost information and applies the buggy client policy, if any.
    fn inspect_request(&self, s: &mut State, frame: Bytes) -> (Bytes, Ghost) {
        let mut ghost = Ghost {
            api_key: -1,
            version: -1,
            batches: Vec::new(),
        };
        let mut r = Reader::new(frame.clone());
        let (Ok(key), Ok(version)) = (r.i16(), r.i16()) else {
            return (frame, ghost);
        };
        ghost.api_key = key;
        ghost.version = version;
        if key != api_key::PRODUCE {
            return (frame, ghost);
        }
        let mut r = Reader::new(frame.clone());
        let Ok(header) =
            RequestHeader::decode(ProduceRequest::request_header_version(version), &mut r)
        else {
            return (frame, ghost);
        };
        let Ok(mut req) =
            ProduceRequest::decode_exact(version, Bytes::copy_from_slice(r.peek_rest()))
        else {
            return (frame, ghost);
        };
        let mut rewritten = false;
        for t in &mut req.topic_data {
            for p in &mut t.partition_data {
                let Some(batch) = p.records.clone() else {
                    continue;
                };
                let Ok(h) = BatchHeader::peek(&batch) else {
                    continue;
                };
                let (pid, epoch, seq) = self.mutate(s, p.index, &h);
                let batch =
                    if (pid, epoch, seq) != (h.producer_id, h.producer_epoch, h.base_sequence) {
                        rewritten = true;
                        restamp(&batch, pid, epoch, seq)
                    } else {
                        batch
                    };
                let indexes: Vec<u8> = RecordBatch::decode_all(batch.clone())
                    .ok()
                    .into_iter()
                    .flatten()
                    .flat_map(|b| b.records.into_iter())
                    .filter_map(|r| r.value.as_deref().and_then(parse_value))
                    .map(|(_, k)| k)
                    .collect();
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                std::hash::Hash::hash(&batch[..], &mut hasher);
                ghost.batches.push(GhostBatch {
                    partition: p.index,
                    pid,
                    epoch,
                    seq,
                    count: h.records_count,
                    first: indexes.iter().copied().min().unwrap_or(0),
                    last: indexes.iter().copied().max().unwrap_or(0),
                    bytes_hash: std::hash::Hasher::finish(&hasher),
                });
                p.records = Some(batch);
            }
        }
        if !rewritten {
            return (frame, ghost);
        }
        let bytes = encode_request(
            &req,
            version,
            header.correlation_id,
            header.client_id.as_deref(),
        );
        (bytes.slice(4..), ghost)
    }

    /// The (pid, epoch, seq) the buggy policy would put on this batch.
    fn mutate(&self, s: &mut State, p: i32, h: &BatchHeader) -> (i64, i16, i32) {
        let (pid, epoch, seq) = (h.producer_id, h.producer_epoch, h.base_sequence);
        let modulus = i64::from(self.cfg.max_sequence) + 1;
        let wrap = |x: i64| (x.rem_euclid(modulus)) as i32;
        let m = &mut s.mutation;
        match self.cfg.mutation {
            Mutation::None => (pid, epoch, seq),
            Mutation::KafkaJs => {
                let next = *m.acked_next.get(&p).unwrap_or(&0);
                (pid, epoch, next)
            }
            Mutation::Kafka12152 => {
                let first = *m.epoch_first.entry(epoch).or_insert(p);
                let entry = m.per_partition.entry(p).or_insert((epoch, 0, 0));
                if entry.0 != epoch {
                    // A new epoch for this partition: the buggy client keeps counting unless
                    // this partition triggered the bump.
                    let shift = if first == p { 0 } else { entry.1 };
                    *entry = (epoch, entry.1, shift);
                }
                let out = wrap(i64::from(seq) + i64::from(entry.2));
                entry.1 = wrap(i64::from(out) + i64::from(h.records_count));
                (pid, epoch, out)
            }
            Mutation::D10ResetOnFlap => {
                let entry = m.per_partition.entry(p).or_insert((epoch, 0, 0));
                if m.flapped {
                    entry.2 = seq; // restart at 0 from here on, same epoch
                    m.flapped = false;
                }
                (pid, epoch, wrap(i64::from(seq) - i64::from(entry.2)))
            }
            Mutation::D12Resequence => {
                let key = (p, pid, epoch, seq);
                let entry = m.per_partition.entry(p).or_insert((epoch, 0, 0));
                if !m.seen.insert(key) && m.epoch_shift == 0 {
                    // A retry of a batch whose first attempt may be in the log: the buggy
                    // client moves it to a new epoch and restarts its sequence at 0.
                    m.epoch_shift = 1;
                    entry.2 = seq;
                }
                let e = epoch + m.epoch_shift;
                let out = if m.epoch_shift > 0 {
                    wrap(i64::from(seq) - i64::from(entry.2))
                } else {
                    seq
                };
                (pid, e, out)
            }
        }
    }

    fn check_inflight(&self, s: &mut State) {
        let mut per: BTreeMap<i32, usize> = BTreeMap::new();
        for l in s.links.values() {
            for (_, g) in l.to_broker.iter().chain(l.to_client.iter()) {
                for b in &g.batches {
                    *per.entry(b.partition).or_default() += 1;
                }
            }
        }
        if per.values().any(|n| *n > self.cfg.max_in_flight) {
            s.over_inflight = true;
        }
    }

    /// Removes a connection. A stalled one leaves its unread requests to the broker.
    fn close_link(s: &mut State, conn: ConnId) {
        if let Some(l) = s.links.remove(&conn) {
            if l.stalled.is_some() {
                let node = l.node;
                (s.zombies).extend(l.to_broker.into_iter().map(|(f, g)| (conn, node, f, g)));
            }
        }
    }

    /// The broker reads the next request of the closed stalled connection `conn` and acts
    /// on it; the answer goes nowhere. The producer gave this request up when it closed the
    /// connection, so what the broker counts about it (a duplicate, an OUT_OF_ORDER, an old
    /// epoch, an overlap) says nothing about the producer: its counters are left as they
    /// were, but for the highest epoch and the producer ids handed out.
    fn process_zombie(&self, s: &mut State, conn: ConnId) -> Option<()> {
        let at = s.zombies.iter().position(|z| z.0 == conn)?;
        let (_, node, frame, ghost) = s.zombies.remove(at);
        if ghost.api_key == api_key::PRODUCE {
            self.check_seq_reuse(s, &frame, &ghost);
        }
        let kept = s.cluster.stats.clone();
        let logged =
            |s: &State| -> usize { s.cluster.partitions.values().map(|p| p.log.len()).sum() };
        let before = logged(s);
        let _ = s.cluster.handle(node, frame);
        if logged(s) > before {
            s.zombie_written = true;
        }
        // Only what the producer did counts: a zombie's answer (a duplicate, an
        // OUT_OF_ORDER, an old epoch) tells nothing about it. The highest epoch and the ids
        // handed out are the producer's own.
        let (max_epoch, producer_ids) = (s.cluster.stats.max_epoch, s.cluster.stats.producer_ids);
        s.cluster.stats = crate::broker::BrokerStats {
            max_epoch,
            producer_ids,
            ..kept
        };
        if ghost.api_key == api_key::METADATA {
            s.cluster.hidden_topics.clear();
        }
        Some(())
    }

    fn process(&self, s: &mut State, conn: ConnId) {
        let Some(l) = s.links.get_mut(&conn) else {
            return;
        };
        let Some((frame, ghost)) = l.to_broker.pop_front() else {
            return;
        };
        let (node, stalled) = (l.node, l.stalled.is_some());
        // S5 ghost: does any record of this request reuse an appended (pid, epoch, seq)?
        if ghost.api_key == api_key::PRODUCE {
            self.check_seq_reuse(s, &frame, &ghost);
            self.check_bump_while_inflight(s, &ghost);
        }
        let resp = s.cluster.handle(node, frame);
        if ghost.api_key == api_key::METADATA {
            s.cluster.hidden_topics.clear(); // a flap lasts one response
        }
        if let (Some(resp), Some(l), false) = (resp, s.links.get_mut(&conn), stalled) {
            l.to_client.push_back((resp.slice(4..), ghost));
        }
    }

    fn check_seq_reuse(&self, s: &mut State, frame: &Bytes, ghost: &Ghost) {
        let mut r = Reader::new(frame.clone());
        let Ok(_) = RequestHeader::decode(
            ProduceRequest::request_header_version(ghost.version),
            &mut r,
        ) else {
            return;
        };
        let Ok(req) =
            ProduceRequest::decode_exact(ghost.version, Bytes::copy_from_slice(r.peek_rest()))
        else {
            return;
        };
        let modulus = i64::from(self.cfg.max_sequence) + 1;
        for t in &req.topic_data {
            for p in &t.partition_data {
                let Some(blob) = p.records.clone() else {
                    continue;
                };
                let Ok(batches) = RecordBatch::decode_all(blob) else {
                    continue;
                };
                let Some(part) = s.cluster.partitions.get(&(t.name.clone(), p.index)) else {
                    continue;
                };
                for b in batches {
                    // Sequences wrap, so only the last `modulus - 1` records of this
                    // (pid, epoch) hold sequences that may not be reused.
                    let same: Vec<_> = part
                        .log
                        .iter()
                        .filter(|x| x.producer_id == b.producer_id && x.epoch == b.producer_epoch)
                        .collect();
                    let recent = &same[same.len().saturating_sub(modulus as usize - 1)..];
                    for (k, rec) in b.records.iter().enumerate() {
                        let seq = ((i64::from(b.base_sequence) + k as i64) % modulus) as i32;
                        if recent
                            .iter()
                            .any(|x| x.sequence == seq && x.value != rec.value)
                        {
                            s.seq_reuse = true;
                        }
                    }
                }
            }
        }
    }

    fn check_bump_while_inflight(&self, s: &mut State, ghost: &Ghost) {
        for gb in &ghost.batches {
            let (p, epoch) = (gb.partition, gb.epoch);
            if epoch == 0 {
                continue;
            }
            let older_elsewhere = s.links.iter().any(|(_, l)| {
                l.to_broker
                    .iter()
                    .chain(l.to_client.iter())
                    .flat_map(|(_, g)| g.batches.iter())
                    .any(|b| b.partition != p && b.epoch < epoch)
            });
            if older_elsewhere {
                s.bump_while_other_inflight = true;
            }
        }
    }

    fn deliver(&self, s: &mut State, conn: ConnId) {
        let Some(l) = s.links.get_mut(&conn) else {
            return;
        };
        let Some((frame, ghost)) = l.to_client.pop_front() else {
            return;
        };
        let node = l.node;
        if ghost.api_key == api_key::PRODUCE {
            let other_outstanding = s.links.values().any(|l| {
                l.node != node
                    && l.to_broker
                        .iter()
                        .chain(l.to_client.iter())
                        .any(|(_, g)| g.api_key == api_key::PRODUCE)
            });
            if other_outstanding {
                s.old_leader_response_after_new_request = true;
            }
            self.observe_response_for_mutation(s, &frame, &ghost);
            self.observe_produce_response(s, &frame, &ghost);
        }
        if ghost.api_key == api_key::METADATA {
            s.moved_unannounced.clear();
        }
        if ghost.api_key == api_key::METADATA && self.cfg.mutation == Mutation::D10ResetOnFlap {
            if let Ok((_, m)) = decode_response::<kprod_core::protocol::metadata::MetadataRequest>(
                ghost.version,
                frame.clone(),
            ) {
                if m.topics.iter().any(|t| t.error_code != 0) {
                    s.mutation.flapped = true;
                }
            }
        }
        let now = self.now(s);
        let mut buf = BytesMut::from(&frame_with_prefix(&frame)[..]);
        s.producer.handle_read(now, conn, &mut buf);
    }

    /// §C's well-behaved profile so far: no fault that loses or cuts the broker's producer
    /// state (a restart, an expiry, DeleteRecords, a truncating leader change) and no zombie
    /// request.
    fn well_behaved(&self, s: &State) -> bool {
        let (b, c) = (&s.budget, &self.cfg.budget);
        !self.cfg.truncation
            && b.restarts == c.restarts
            && b.expiries == c.expiries
            && b.partition_expiries == c.partition_expiries
            && b.silent_expiries == c.silent_expiries
            && b.delete_records == c.delete_records
            && b.stalls == c.stalls
    }

    /// §C.4 ghosts from a Produce answer: an acknowledgement that overtook an earlier record
    /// missing from the log, and a rejection of a partition's true head of line.
    fn observe_produce_response(&self, s: &mut State, frame: &Bytes, ghost: &Ghost) {
        let Ok((_, resp)) = decode_response::<ProduceRequest>(ghost.version, frame.clone()) else {
            return;
        };
        let resp: ProduceResponse = resp;
        for pr in resp
            .responses
            .iter()
            .flat_map(|t| t.partition_responses.iter())
        {
            let Some(b) = ghost.batches.iter().find(|b| b.partition == pr.index) else {
                continue;
            };
            let p = pr.index;
            let log = Self::log_values(s, p);
            let earlier_unresolved = |s: &State| {
                s.ids
                    .iter()
                    .filter(|(_, (q, k))| *q == p && *k < b.first)
                    .any(|(id, (_, k))| !s.outcomes.contains_key(id) && !log.contains(&(p, *k)))
            };
            match ErrorCode::from_i16(pr.error_code) {
                ErrorCode::None if earlier_unresolved(s) => s.overtaken = true,
                code @ (ErrorCode::OutOfOrderSequenceNumber | ErrorCode::UnknownProducerId) => {
                    let head = s
                        .ids
                        .iter()
                        .filter(|(_, (q, k))| *q == p && *k < b.first)
                        .all(|(id, _)| s.outcomes.contains_key(id));
                    if head {
                        let moved = s.cluster.partition(TOPIC, p).log_start > 0;
                        s.head_rejection = Some(moved || s.head_rejection == Some(true));
                        if code == ErrorCode::OutOfOrderSequenceNumber
                            && self.well_behaved(s)
                            && !s.permanent_injected[p as usize]
                        {
                            s.head_out_of_order = true;
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn observe_response_for_mutation(&self, s: &mut State, frame: &Bytes, ghost: &Ghost) {
        if self.cfg.mutation != Mutation::KafkaJs {
            return;
        }
        let Ok((_, resp)) = decode_response::<ProduceRequest>(ghost.version, frame.clone()) else {
            return;
        };
        let resp: ProduceResponse = resp;
        for t in &resp.responses {
            for pr in &t.partition_responses {
                let ok = matches!(
                    ErrorCode::from_i16(pr.error_code),
                    ErrorCode::None | ErrorCode::DuplicateSequenceNumber
                );
                if !ok {
                    continue;
                }
                let count = ghost
                    .batches
                    .iter()
                    .find(|b| b.partition == pr.index)
                    .map_or(0, |b| b.count);
                let modulus = i64::from(self.cfg.max_sequence) + 1;
                let next = s.mutation.acked_next.entry(pr.index).or_insert(0);
                *next = ((i64::from(*next) + i64::from(count)) % modulus) as i32;
            }
        }
    }

    /// Time advancing by at most a retry backoff (or to a periodic metadata refresh, when the
    /// configuration makes those short) is not a fault.
    fn free_tick(&self, s: &State) -> bool {
        let free = BACKOFF_MS.max(self.cfg.metadata_max_age_ms.min(BACKOFF_MS * 10));
        // A stalled connection's answers never come: the request timeout of what it held
        // when it stalled is the way out, part of the fault the stall's budget paid for.
        // (Later than that, time passes only as for any other fault: a producer that never
        // gives the connection up is then quiescent, and L1 or L4 sees it.)
        let stall_ends = (s.links.values())
            .filter_map(|l| l.stalled)
            .map(|at| at + REQUEST_TIMEOUT_MS)
            .max();
        s.wait_until_ms
            .is_some_and(|t| t <= s.clock_ms + free || stall_ends.is_some_and(|end| t <= end))
    }

    /// Nothing can happen without a fault: no frames on any link, no pending connects, no
    /// backoff about to expire, and every record sent.
    pub fn is_quiescent(&self, s: &State) -> bool {
        s.links
            .values()
            .all(|l| l.to_broker.is_empty() && l.to_client.is_empty())
            && s.connecting.is_empty()
            && !self.free_tick(s)
            && s.sent.iter().all(|n| *n == self.cfg.records_per_partition)
    }

    /// Whether every record sent has an outcome.
    pub fn all_resolved(s: &State) -> bool {
        s.ids.keys().all(|id| s.outcomes.contains_key(id))
    }

    fn log_values(s: &State, p: i32) -> Vec<(i32, u8)> {
        s.cluster
            .partitions
            .get(&(TOPIC.to_owned(), p))
            .map(|part| {
                part.log
                    .iter()
                    .filter_map(|r| r.value.as_deref().and_then(parse_value))
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn frame_with_prefix(frame: &Bytes) -> Vec<u8> {
    let mut v = Vec::with_capacity(frame.len() + 4);
    v.extend_from_slice(&(frame.len() as i32).to_be_bytes());
    v.extend_from_slice(frame);
    v
}

impl Model for KafkaModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let addrs: Vec<String> = (1..=self.cfg.nodes).map(|n| format!("b{n}:9092")).collect();
        let refs: Vec<&str> = addrs.iter().map(String::as_str).collect();
        let mut cluster = Cluster::new(self.cfg.mode, &refs);
        cluster.max_sequence = self.cfg.max_sequence;
        cluster.max_epoch = self.cfg.max_epoch;
        cluster.advertised = self.cfg.broker_versions;
        cluster.leader_hints = self.cfg.leader_hints;
        cluster.truncation = self.cfg.truncation;
        cluster.create_topic(TOPIC, self.cfg.partitions, 1);
        let producer =
            Producer::new(self.producer_config(), self.epoch).expect("valid model config");
        let mut s = State {
            producer,
            cluster,
            links: BTreeMap::new(),
            connecting: BTreeMap::new(),
            clock_ms: 0,
            wait_until_ms: None,
            zombies: Vec::new(),
            sent: vec![0; self.cfg.partitions as usize],
            ids: BTreeMap::new(),
            outcomes: BTreeMap::new(),
            double_outcome: false,
            outcome_reordered: false,
            false_append_time: false,
            fatal: false,
            data_loss: false,
            budget: self.cfg.budget,
            transmits: 0,
            permanent_injected: vec![false; self.cfg.partitions as usize],
            on_wire: vec![0; self.cfg.partitions as usize],
            timed_out_not_persisted: BTreeSet::new(),
            timed_out_sent: false,
            wire_hashes: BTreeMap::new(),
            reencoded: false,
            undrained_move: false,
            moved_with_inflight: BTreeSet::new(),
            drained_move: false,
            moved_unannounced: BTreeSet::new(),
            moved_on_hint: false,
            must_not_land: BTreeSet::new(),
            cut_unless_landed: BTreeSet::new(),
            overtaken: false,
            head_rejection: None,
            head_out_of_order: false,
            exhausted_pid: None,
            new_pid_after_exhaustion: false,
            refreshes: 0,
            seq_reuse: false,
            over_inflight: false,
            bump_while_other_inflight: false,
            old_leader_response_after_new_request: false,
            zombie_written: false,
            truncated: false,
            mutation: MutationState::default(),
        };
        self.drain(&mut s);
        vec![s]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        // A path that reaches the transmit bound ends there, and L2 reports it.
        if s.transmits >= self.cfg.max_transmits {
            return;
        }
        for p in 0..self.cfg.partitions {
            if s.sent[p as usize] < self.cfg.records_per_partition {
                actions.push(Action::Send(p));
            }
        }
        for c in s.connecting.keys() {
            actions.push(Action::ConnectOk(*c));
            if s.budget.connect_failures > 0 {
                actions.push(Action::ConnectFail(*c));
            }
        }
        for (c, l) in &s.links {
            if !l.to_broker.is_empty() {
                actions.push(Action::Process(*c));
            }
            if !l.to_client.is_empty() {
                actions.push(Action::Deliver(*c));
            }
            if s.budget.disconnects > 0 {
                actions.push(Action::Disconnect(*c));
            }
            // A stall matters only to requests the broker has not read yet.
            if s.budget.stalls > 0 && l.stalled.is_none() && !l.to_broker.is_empty() {
                actions.push(Action::Stall(*c));
            }
        }
        let mut zombie_conns: Vec<ConnId> = s.zombies.iter().map(|z| z.0).collect();
        zombie_conns.sort();
        zombie_conns.dedup();
        actions.extend(zombie_conns.into_iter().map(Action::ProcessZombie));
        if s.wait_until_ms.is_some() && (self.free_tick(s) || s.budget.timeouts > 0) {
            actions.push(Action::Tick);
        }
        if s.budget.leader_changes > 0 && self.cfg.nodes > 1 {
            for p in 0..self.cfg.partitions {
                actions.push(Action::LeaderChange(p));
                let part = s.cluster.partition(TOPIC, p);
                if self.cfg.truncation {
                    for held in 0..part.above.len() {
                        actions.push(Action::LeaderChangeTruncating(p, held as u8));
                    }
                }
            }
        }
        if s.budget.restarts > 0 {
            actions.push(Action::Restart);
        }
        // Producer state expires only after `producer.id.expiration.ms` of idleness, which the
        // broker documentation asks to be at least `delivery.timeout.ms`: so only when no
        // record is outstanding. (Expiry under an outstanding batch makes its retry look new
        // to the broker; no client can deduplicate that, spec §A.4.)
        // Tansu 0.6 never expires a producer's state and does not implement DeleteRecords.
        if (s.budget.expiries > 0
            || s.budget.silent_expiries > 0
            || s.budget.delete_records > 0
            || s.budget.partition_expiries > 0)
            && self.cfg.mode != BrokerMode::TansuLike
            && Self::all_resolved(s)
            && s.zombies.is_empty()
            && s.links
                .values()
                .all(|l| l.to_broker.is_empty() && l.to_client.is_empty())
        {
            if s.budget.expiries > 0 {
                actions.push(Action::Expire);
            }
            if s.budget.silent_expiries > 0 {
                actions.push(Action::SilentExpire);
            }
            if s.budget.delete_records > 0 {
                for p in 0..self.cfg.partitions {
                    actions.push(Action::DeleteRecords(p));
                }
            }
            // One partition's state only: Kafka expires each partition's on its own, from the
            // time of the producer's last write there (the batch's largest timestamp), so a
            // partition written to later keeps its state past the other's expiry.
            if s.budget.partition_expiries > 0 {
                for p in 0..self.cfg.partitions {
                    actions.push(Action::ExpirePartition(p));
                }
            }
        }
        if s.budget.injections > 0 {
            for p in 0..self.cfg.partitions {
                for k in &self.cfg.injectable {
                    actions.push(Action::Inject(p, *k));
                }
            }
        }
        if s.budget.flaps > 0 {
            actions.push(Action::Flap);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Send(p) => {
                let k = s.sent[p as usize];
                s.sent[p as usize] += 1;
                let record = Record {
                    topic: TopicName::from_static(TOPIC),
                    partition: Some(p),
                    key: None,
                    value: Some(value_of(p, k)),
                    headers: Vec::new(),
                    timestamp: 0,
                };
                let now = self.now(&s);
                let id = s.producer.send(now, record).ok()?;
                s.ids.insert(id, (p, k));
            }
            Action::ConnectOk(c) => {
                let node = s.connecting.remove(&c)?;
                s.links.insert(c, Link::to(node));
                let now = self.now(&s);
                s.producer.handle_connected(now, c);
            }
            Action::ConnectFail(c) => {
                s.connecting.remove(&c)?;
                s.budget.connect_failures -= 1;
                let now = self.now(&s);
                s.producer.handle_connect_failed(now, c);
            }
            Action::Process(c) => self.process(&mut s, c),
            Action::Deliver(c) => self.deliver(&mut s, c),
            Action::Disconnect(c) => {
                s.links.get(&c)?;
                Self::close_link(&mut s, c);
                s.budget.disconnects -= 1;
                let now = self.now(&s);
                s.producer.handle_disconnected(now, c);
            }
            Action::Tick => {
                let until = s.wait_until_ms?;
                if !self.free_tick(&s) {
                    s.budget.timeouts = s.budget.timeouts.checked_sub(1)?;
                }
                s.clock_ms = until.max(s.clock_ms);
                let now = self.now(&s);
                s.producer.handle_timeout(now);
            }
            Action::LeaderChange(p) | Action::LeaderChangeTruncating(p, _) => {
                s.budget.leader_changes -= 1;
                let outstanding = s.links.values().any(|l| {
                    l.to_broker
                        .iter()
                        .chain(l.to_client.iter())
                        .flat_map(|(_, g)| g.batches.iter())
                        .any(|b| b.partition == p)
                });
                if outstanding {
                    s.moved_with_inflight.insert(p);
                }
                let part = s.cluster.partition(TOPIC, p);
                let next = if part.leader == 1 { 2 } else { 1 };
                if let Action::LeaderChangeTruncating(_, held) = action {
                    let before = part.log.len();
                    s.cluster
                        .move_leader_truncating(TOPIC, p, next, usize::from(held));
                    s.truncated |= s.cluster.partition(TOPIC, p).log.len() < before;
                } else {
                    s.cluster.move_leader(TOPIC, p, next);
                }
                if self.cfg.leader_hints {
                    s.moved_unannounced.insert(p);
                }
            }
            Action::Restart => {
                s.budget.restarts -= 1;
                s.cluster.restart_shrinks_cache();
            }
            Action::Expire => {
                // The broker forgets a producer only after it idled this long.
                s.budget.expiries -= 1;
                s.clock_ms += self.cfg.producer_id_expiration_ms;
                s.cluster.expire_producers();
                let now = self.now(&s);
                s.producer.handle_timeout(now);
            }
            Action::SilentExpire => {
                s.budget.silent_expiries -= 1;
                s.cluster.expire_producers();
            }
            Action::ExpirePartition(p) => {
                // The producer idled this long; only partition `p`'s state is forgotten.
                s.budget.partition_expiries -= 1;
                s.clock_ms += self.cfg.producer_id_expiration_ms;
                s.cluster.expire_partition(TOPIC, p);
                let now = self.now(&s);
                s.producer.handle_timeout(now);
            }
            Action::DeleteRecords(p) => {
                s.budget.delete_records -= 1;
                s.cluster.delete_records(TOPIC, p);
            }
            Action::Inject(p, k) => {
                s.budget.injections -= 1;
                if k.is_permanent() {
                    s.permanent_injected[p as usize] = true;
                }
                s.cluster
                    .partition_mut(TOPIC, p)
                    .inject
                    .push_back(k.injection());
            }
            Action::Flap => {
                s.budget.flaps -= 1;
                s.cluster.hidden_topics.push(TOPIC.to_owned());
            }
            Action::Stall(c) => {
                s.links.get_mut(&c)?.stalled = Some(s.clock_ms);
                s.budget.stalls -= 1;
            }
            Action::ProcessZombie(c) => self.process_zombie(&mut s, c)?,
        }
        self.drain(&mut s);
        Some(s)
    }

    fn within_boundary(&self, s: &State) -> bool {
        s.refreshes <= self.cfg.max_refreshes
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("S1 no duplicates", |m: &KafkaModel, s: &State| {
                (0..m.cfg.partitions).all(|p| {
                    let v = KafkaModel::log_values(s, p);
                    let set: BTreeSet<_> = v.iter().collect();
                    set.len() == v.len()
                })
            }),
            Property::always("S2 send order", |m: &KafkaModel, s: &State| {
                (0..m.cfg.partitions).all(|p| {
                    let v = KafkaModel::log_values(s, p);
                    v.iter().all(|(q, _)| *q == p) && v.windows(2).all(|w| w[0].1 < w[1].1)
                })
            }),
            Property::always("S3 no silent gaps", |m: &KafkaModel, s: &State| {
                (0..m.cfg.partitions).all(|p| {
                    let v = KafkaModel::log_values(s, p);
                    let Some(max) = v.iter().map(|x| x.1).max() else {
                        return true;
                    };
                    s.ids.iter().all(|(id, (q, k))| {
                        *q != p
                            || *k >= max
                            || v.contains(&(p, *k))
                            || !matches!(s.outcomes.get(id), Some(Outcome::Delivered(_)))
                    })
                })
            }),
            Property::always("O1 a partition's outcomes in send order", |_, s: &State| {
                !s.outcome_reordered
            }),
            Property::always("S4 truthful reports", |m: &KafkaModel, s: &State| {
                !s.double_outcome
                    && !s.false_append_time
                    && s.ids.iter().all(|(id, (p, k))| {
                        let part = s.cluster.partition(TOPIC, *p);
                        let log = &part.log;
                        // A delivery (acks=all) is of a record every in-sync replica holds:
                        // with truncation, below the high watermark (spec C.2's committed
                        // prefix), not only somewhere in the leader's log, where a leader
                        // change may still truncate it (a model review: only that truncation
                        // showed such a report false, and only on the paths that made it).
                        let committed = if m.cfg.truncation {
                            &log[..part.hw.min(log.len())]
                        } else {
                            &log[..]
                        };
                        let here = |r: &crate::broker::StoredRecord| {
                            r.value.as_deref().and_then(parse_value) == Some((*p, *k))
                        };
                        match s.outcomes.get(id) {
                            Some(Outcome::Delivered(Some(o))) => usize::try_from(*o)
                                .ok()
                                .and_then(|o| committed.get(o))
                                .is_some_and(here),
                            Some(Outcome::Delivered(None)) => committed.iter().any(here),
                            Some(Outcome::Failed(Persistence::NotPersisted)) => {
                                !log.iter().any(here)
                            }
                            _ => true,
                        }
                    })
            }),
            Property::always("S5 no sequence reuse", |_, s: &State| !s.seq_reuse),
            Property::always("S7 in-flight bound", |_, s: &State| !s.over_inflight),
            Property::always("S9 no spurious fatal", |m: &KafkaModel, s: &State| {
                // Outside the well-behaved profile (state lost under the client's feet) S9
                // does not apply.
                if s.budget.silent_expiries < m.cfg.budget.silent_expiries {
                    return true;
                }
                // Record-level errors the broker was told to give may fail records of that
                // partition, and stop the producer under the fatal gap policy; a record that
                // is nowhere (not sent, or its attempts refused or lost) may fail by its
                // delivery timeout; nothing else may.
                let given = s.permanent_injected.iter().any(|g| *g);
                let fatal_allowed = given && m.cfg.gap_policy == kprod_core::GapPolicy::Fatal;
                let spurious = s.ids.iter().any(|(id, (p, k))| {
                    let allowed = s.permanent_injected[*p as usize]
                        || (fatal_allowed && s.fatal)
                        || s.timed_out_not_persisted.contains(&(*p, *k));
                    s.outcomes.get(id) == Some(&Outcome::Failed(Persistence::NotPersisted))
                        && !allowed
                });
                (!s.fatal || fatal_allowed) && !s.data_loss && !spurious
            }),
            Property::always("S3 a cut keeps a prefix", |_, s: &State| {
                // Under `CutPartition` and `Fatal` (§B.4), a record refused for good takes every
                // later record already sent with it: none of them reaches the log.
                let kept_out = |p: i32, k: u8| {
                    !KafkaModel::log_values(s, p).contains(&(p, k))
                        && s.ids.iter().all(|(id, x)| {
                            *x != (p, k)
                                || !matches!(s.outcomes.get(id), Some(Outcome::Delivered(_)))
                        })
                };
                s.must_not_land.iter().all(|&(p, k)| kept_out(p, k))
                    && s.cut_unless_landed.iter().all(|&(p, k, sent)| {
                        KafkaModel::log_values(s, p).contains(&(p, k))
                            || (k + 1..sent).all(|j| kept_out(p, j))
                    })
            }),
            Property::always("S8 a new producer id starts at 0", |_, s: &State| {
                s.cluster.partitions.values().all(|part| {
                    let mut seen = BTreeSet::new();
                    part.log
                        .iter()
                        .all(|r| !seen.insert(r.producer_id) || r.sequence == 0)
                })
            }),
            Property::always(
                "S11 no local epoch bump without KIP-360",
                |m: &KafkaModel, s: &State| {
                    m.cfg.broker_versions.init_producer_id >= 3 || s.cluster.stats.max_epoch == 0
                },
            ),
            Property::always("P2 a retry is the same bytes", |_, s: &State| !s.reencoded),
            Property::always("P7 drain before a leader change", |_, s: &State| {
                !s.undrained_move
            }),
            Property::always("L2 no livelock", |m: &KafkaModel, s: &State| {
                // Every fault is bounded, so a correct producer finishes within a bounded
                // number of requests; a path that reaches the bound is a retry loop.
                s.transmits < m.cfg.max_transmits
            }),
            Property::always("S10 broker sees no client bug", |_, s: &State| {
                let st = &s.cluster.stats;
                st.invalid_epoch == 0
                    && st.new_epoch_nonzero_seq == 0
                    && st.overlap == 0
                    && st.beyond_max_sequence == 0
                    && st.beyond_max_epoch == 0
                    && !s.head_out_of_order
                    && st.acks_not_all == 0
            }),
            Property::always(
                "S11 S12 epochs and sequences in the log",
                |m: &KafkaModel, s: &State| {
                    // A broker that lost our state under our feet accepts a gap: only the
                    // well-behaved profile keeps each log's sequences contiguous.
                    let gaps_possible = s.budget.silent_expiries < m.cfg.budget.silent_expiries;
                    let modulus = i64::from(m.cfg.max_sequence) + 1;
                    s.cluster.partitions.values().all(|part| {
                        let mut last: BTreeMap<i64, (i16, i32)> = BTreeMap::new();
                        part.log.iter().all(|r| {
                            let ok = match last.get(&r.producer_id) {
                                None => true,
                                Some((e, q)) if *e == r.epoch => {
                                    gaps_possible
                                        || i64::from(r.sequence) == (i64::from(*q) + 1) % modulus
                                }
                                Some((e, _)) => r.epoch > *e && r.sequence == 0,
                            };
                            last.insert(r.producer_id, (r.epoch, r.sequence));
                            ok
                        })
                    })
                },
            ),
            Property::always(
                "L1 quiescent means resolved",
                |m: &KafkaModel, s: &State| !m.is_quiescent(s) || KafkaModel::all_resolved(s),
            ),
            Property::always("L4 no stuck producer", |m: &KafkaModel, s: &State| {
                // Without permanent errors, timeouts or a broker restart (whose shrunken dedup
                // cache can leave a retried batch only "possibly persisted"), a quiescent
                // producer has delivered everything.
                // After a producer-state expiry, a batch whose first attempt was lost and
                // whose retry drew UNKNOWN_PRODUCER_ID may have been written before the
                // broker lost the state (Kafka dates it by the records' own timestamps,
                // which may be old; a broker restarted without its state): it
                // fails possibly persisted, never delivered (a review finding, 2026-12-07;
                // before, idling past the expiry was taken as proof it was refused).
                // (Only brokers that answer UNKNOWN_PRODUCER_ID for a forgotten producer,
                // before 2.5: later ones take its batch as new.)
                let expired = m.cfg.mode == BrokerMode::UnknownPidError
                    && (s.budget.expiries < m.cfg.budget.expiries
                        || s.budget.partition_expiries < m.cfg.budget.partition_expiries);
                let delivered_or_possibly = || {
                    s.outcomes.values().all(|o| {
                        matches!(
                            o,
                            Outcome::Delivered(_) | Outcome::Failed(Persistence::PossiblyPersisted)
                        )
                    })
                };
                s.permanent_injected.iter().any(|g| *g)
                    || (expired && delivered_or_possibly())
                    || s.budget.timeouts < m.cfg.budget.timeouts
                    || s.budget.restarts < m.cfg.budget.restarts
                    || s.budget.silent_expiries < m.cfg.budget.silent_expiries
                    || !m.is_quiescent(s)
                    || s.outcomes
                        .values()
                        .all(|o| matches!(o, Outcome::Delivered(_)))
            }),
            Property::sometimes("all delivered", |m: &KafkaModel, s: &State| {
                s.ids.len() == m.cfg.partitions as usize * m.cfg.records_per_partition as usize
                    && s.outcomes
                        .values()
                        .all(|o| matches!(o, Outcome::Delivered(_)))
            }),
            Property::sometimes("a retry is deduplicated", |_, s: &State| {
                s.cluster.stats.deduplicated > 0
            }),
            Property::sometimes(
                "a non-head OOOSN is resolved without a bump",
                |m: &KafkaModel, s: &State| {
                    s.cluster.stats.out_of_order > 0
                        && s.cluster.stats.max_epoch == 0
                        && s.cluster.stats.producer_ids == 1
                        && m.is_quiescent(s)
                        && s.outcomes
                            .values()
                            .all(|o| matches!(o, Outcome::Delivered(_)))
                },
            ),
            Property::sometimes(
                "a head rejection leads to a rebase",
                |m: &KafkaModel, s: &State| {
                    s.head_rejection.is_some()
                        && (s.cluster.stats.max_epoch > 0 || s.cluster.stats.producer_ids > 1)
                        && m.is_quiescent(s)
                        && s.outcomes
                            .values()
                            .all(|o| matches!(o, Outcome::Delivered(_)))
                },
            ),
            Property::sometimes(
                "a head rejection after the log start moved leads to a rebase (KIP-360)",
                |m: &KafkaModel, s: &State| {
                    s.head_rejection == Some(true)
                        && m.is_quiescent(s)
                        && s.outcomes
                            .values()
                            .all(|o| matches!(o, Outcome::Delivered(_)))
                },
            ),
            Property::sometimes("a batch is overtaken", |_, s: &State| s.overtaken),
            Property::sometimes(
                "a sent record reaches its delivery timeout",
                |_, s: &State| s.timed_out_sent,
            ),
            Property::sometimes(
                "a partition with requests in flight moves to its new leader",
                |_, s: &State| s.drained_move,
            ),
            Property::sometimes(
                "a partition moves to its new leader on a KIP-951 hint",
                |_, s: &State| s.moved_on_hint,
            ),
            Property::sometimes("a batch is split", |_, s: &State| {
                // Two pieces under one (pid, epoch, base sequence), with different counts.
                s.wire_hashes.keys().any(|a| {
                    s.wire_hashes
                        .keys()
                        .any(|b| (a.0, a.1, a.2, a.3) == (b.0, b.1, b.2, b.3) && a.4 != b.4)
                })
            }),
            Property::sometimes(
                "a bump completes while another partition has old-epoch requests",
                |_, s: &State| s.bump_while_other_inflight,
            ),
            Property::sometimes("the sequence wraps", |_, s: &State| s.cluster.stats.wrapped),
            Property::sometimes(
                "a new producer id instead of a bump (no KIP-360)",
                |m: &KafkaModel, s: &State| {
                    m.cfg.broker_versions.init_producer_id < 3 && s.cluster.stats.producer_ids >= 2
                },
            ),
            Property::sometimes(
                "a new producer id after epoch exhaustion",
                |_, s: &State| s.new_pid_after_exhaustion,
            ),
            Property::sometimes(
                "a response from the old leader after a request to the new one",
                |_, s: &State| s.old_leader_response_after_new_request,
            ),
            Property::sometimes(
                "a leader change truncates records written after the append",
                |_, s: &State| s.truncated,
            ),
            Property::sometimes(
                "a zombie request is written after its connection closed",
                |_, s: &State| s.zombie_written,
            ),
        ]
    }
}

impl KafkaModel {
    /// Replays a list of actions from the initial state; `None` if one does not apply.
    pub fn replay(&self, actions: &[Action]) -> Option<State> {
        let mut s = self.init_states().pop()?;
        for a in actions {
            let mut enabled = Vec::new();
            self.actions(&s, &mut enabled);
            if !enabled.contains(a) {
                return None;
            }
            s = self.next_state(&s, a.clone())?;
        }
        Some(s)
    }
}
