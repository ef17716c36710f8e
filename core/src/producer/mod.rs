//! The producer façade: [`Producer`] holds the state, takes the driver's inputs and routes
//! them, and runs the drain (`poll_output`: the work loop, then outputs until `Wait` with the
//! next deadline). The rules live in the child modules:
//!
//! - `accumulator`: what `send` accepts, partition choice, batching and batch fullness
//!   (compression ratio estimate);
//! - `requests`: correlation ids, requests in flight, building Produce requests (S7);
//! - `connections`: connection states, ApiVersions, reconnect backoff, request timeouts (P8),
//!   what a lost connection means for the batches on it (P10);
//! - `auth`: SASL after ApiVersions and re-authentication (KIP-368);
//! - `metadata`: metadata refresh and leadership, flaps (P12), KIP-951 leaders;
//! - `identity`: producer id, epoch bumps, new ids, the per-partition rebase (P9, P13);
//! - `responses`: Produce answers to per-partition outcomes, the §B.3 error table, splits,
//!   the gap policy (§B.4);
//! - `outcomes`: acknowledging, retrying and failing batches with truthful persistence (P10,
//!   P11, S4), delivery timeouts, the fatal stop;
//!
//! and per-partition sequencing and retry rules (P1–P5, P7, P9, P13) in `crate::partition`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;

use crate::config::ProducerConfig;
use crate::metrics::{Counters, Observed};
use crate::types::{
    ConnId, Diagnostic, Event, FatalError, Output, ProducerIdentity, Record, RecordId, SendError,
};

mod accumulator;
mod acks;
mod ahead;
mod auth;
mod connections;
mod identity;
mod index;
mod metadata;
mod observe;
mod outcomes;
mod pool;
mod requests;
mod responses;

use accumulator::Topic;
pub use ahead::{CompressedBatch, CompressionTask};
use connections::{Backoff, Conn, ConnState, Target};
use index::{Derived, Index};
use metadata::MetadataState;
use requests::RequestKind;

/// The most partitions (all topics together) for which debug builds check the derived state
/// at every drain ([`Producer::poll_output`]).
#[cfg(debug_assertions)]
const DEBUG_CHECKS_UP_TO_PARTITIONS: usize = 256;

/// The sans-IO idempotent producer.
///
/// # Contract
///
/// The producer never performs I/O, never reads a clock and never spawns anything. A driver
/// feeds it inputs and carries out its outputs:
///
/// 1. **Mutate**: call one of
///    - the application commands [`send`](Self::send), [`precheck`](Self::precheck),
///      [`flush`](Self::flush), [`close`](Self::close), [`abort`](Self::abort),
///      [`want_topic`](Self::want_topic);
///    - the driver inputs [`handle_connected`](Self::handle_connected),
///      [`handle_connect_failed`](Self::handle_connect_failed),
///      [`handle_connection_refused`](Self::handle_connection_refused),
///      [`handle_read`](Self::handle_read), [`handle_disconnected`](Self::handle_disconnected),
///      [`handle_sasl_input`](Self::handle_sasl_input),
///      [`handle_timeout`](Self::handle_timeout).
///
///    Every mutator takes `now`, which should never go backwards (an earlier one is ignored:
///    the producer's clock never goes back).
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
/// Each record accepted by `send` gets exactly one final outcome: it is listed, with its
/// offset, in exactly one `Delivered` event (one per acknowledged batch), or it gets one
/// `Failed` event with a truthful [`Persistence`](crate::Persistence). Records of one partition are written in send
/// order, each at most once. With `enable.idempotence=false` the broker cannot deduplicate:
/// a retry may write a record twice and, with `max_in_flight > 1`, after a later one; with
/// `acks=0` a record ends as `Sent` (handed to the driver, never acknowledged).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Producer {
    cfg: ProducerConfig,
    now: Instant,
    /// The time the producer was made: backoffs are spread by a hash of the time since
    /// (`ProducerConfig::backoff_jitter_percent`).
    born: Instant,
    out: VecDeque<Output>,
    dirty: bool,
    next_conn: u64,
    next_correlation: i32,
    next_record: u64,
    next_batch: u64,
    conns: BTreeMap<ConnId, Box<Conn>>,
    node_conns: BTreeMap<i32, ConnId>,
    brokers: BTreeMap<i32, Arc<str>>,
    bootstrap_next: usize,
    /// A connection has finished its handshake (ApiVersions, and SASL if configured) at
    /// least once: from then on a handshake that fails for good is an error on its
    /// connection, not on the producer.
    reached: bool,
    /// The bootstrap servers whose handshake failed for good (no common version, SASL
    /// refused) before any connection completed one, and the last such error: the producer
    /// stops with it once every bootstrap server has refused or failed to connect.
    bootstrap_refused: Vec<usize>,
    refusal: Option<FatalError>,
    backoff: BTreeMap<Target, Backoff>,
    topics: Vec<Topic>,
    topic_index: BTreeMap<Arc<str>, usize>,
    /// The topic `accept` found last (`known_topic`): a hint, checked before use (topics are
    /// never removed, so it is always in range once set). Derived: ignored by `PartialEq`
    /// and `Hash`.
    last_topic: Derived<usize>,
    /// The topics holding records that wait for metadata (a non-empty `Topic::pending`), in
    /// index order: what each drain looks at for their deadlines, rather than every topic
    /// (a producer that once wrote to thousands of topics paid for all of them on every
    /// drain). Derived: kept by `push_pending`/`pop_pending`.
    awaiting: BTreeSet<usize>,
    identity: Option<ProducerIdentity>,
    pid_request: Option<ConnId>,
    pid_retry_at: Option<Instant>,
    pid_failures: u32,
    /// Producer ids given up on since a batch was last acknowledged: refused outright
    /// (UNKNOWN_PRODUCER_ID at sequence 0), or left for a new one (a bump the broker does
    /// not take, or the epoch exhausted). The backoff before asking for the next grows
    /// with it.
    refused_ids: u32,
    /// The producer id last given up on while `refused_ids` counts: a batch of it
    /// acknowledged after it was given up (its answer shared with, or following, the refusal
    /// that gave it up) shows that the broker takes this producer's ids, as one under the
    /// current id would.
    given_up: Option<i64>,
    bump_refused: bool,
    /// The identity the last local epoch bump made (KIP-360): a refusal of such an epoch's
    /// first batch at sequence 0 may say the broker does not take local bumps
    /// (`on_out_of_order`).
    bumped_locally: Option<ProducerIdentity>,
    /// With `ProducerConfig::late_wake_grace`: the deadline of the last [`Output::Wait`],
    /// and where the producer stands after a driver that came back later than it.
    waited_until: Option<Instant>,
    late_wake: LateWake,
    /// When a bump that waits for its backoff is due (`Partition::fruitless_bumps`): always
    /// of the current identity (`set_identity` clears it when the identity changes).
    bump_at: Option<Instant>,
    /// While a Produce answer's refusal of one batch is acted on: what the broker said
    /// beyond the code, for that batch's failed records. `None` at every other time.
    broker_refusal: Option<responses::Refusal>,
    /// While a Produce answer is taken in: whether its version carries the log start
    /// offset (v5+), so that -1 there means the broker does not know it.
    log_start_known: bool,
    metadata: MetadataState,
    buffered_bytes: usize,
    /// Memory the driver holds for accepted records beyond their `record_overhead`
    /// ([`Self::set_external_memory`]), counted against `buffer.memory` too.
    external_bytes: usize,
    pending_records: usize,
    flush_upto: Option<RecordId>,
    closing: bool,
    closed: bool,
    fatal: Option<FatalError>,
    /// Counters for [`Self::metrics`]: observability, not behaviour (equal in every state).
    stats: Observed<Counters>,
    /// The error the last InitProducerId answer drew (or the loss of its request with its
    /// connection), while no later one granted an id: what held back a batch that waited
    /// for an identity, reported with its delivery timeout. Observability, not behaviour.
    pid_refused: Observed<Option<crate::protocol::ErrorCode>>,
    /// From which next sequence a partition's open batch is sized against the wrap
    /// ([`crate::partition::Partition::sequences_before_wrap`]): a constant of the
    /// configuration, kept here so that the per-record check is one comparison.
    wrap_watch_from: i32,
    /// `max_batch_records`, `usize::MAX` without one (a constant of the configuration).
    record_limit: usize,
    /// Which partitions have work (`index.rs`): derived, ignored by `PartialEq` and `Hash`.
    index: Derived<Index>,
    /// Per broker node: the partition the next Produce request to it starts its walk at
    /// (Java's `drainIndex`): the first one a request left out for lack of room, so that no
    /// partition waits behind others for ever. Behaviour, so part of the state.
    drain_start: BTreeMap<i32, (usize, usize)>,
    /// Per broker node: the partition the next walk of open batches (a request taking the
    /// node's lingering batches, at most a request's worth) starts at: the first one the
    /// last such walk did not reach.
    linger_start: BTreeMap<i32, (usize, usize)>,
    /// Scratch space for the partitions one Produce request or one flush visits (no
    /// allocation each).
    scratch: Derived<Vec<(usize, usize)>>,
    /// Lists and topic names of earlier Produce requests, reused: capacity only, no state
    /// (ignored by `PartialEq` and `Hash`).
    request_pool: Derived<requests::RequestPool>,
    /// Buffers of acknowledged batches, reused: capacity only, no state
    /// (ignored by `PartialEq` and `Hash`).
    batch_pool: Derived<pool::BatchPool>,
    /// No connection is idle (`connections.max.idle.ms`) before this: a lower bound set by
    /// the last look (`expire_idle`), so that a drain does not look at every connection.
    /// `None`: look at the next drain. Derived (ignored by `PartialEq` and `Hash`).
    idle_check: Derived<Option<Instant>>,
    /// [`Self::wake_generation`]: a count for drivers, not behaviour (ignored by `PartialEq`
    /// and `Hash`).
    wakes: Derived<u64>,
    /// Debug builds check the derived state at every drain whatever the partition count
    /// ([`Self::check_every_drain`]; tests of many partitions).
    check_every_drain: Derived<bool>,
    /// The outputs taken since the last `Wait`, a peak of those counts that halves every
    /// second, and when it last halved: the output queue's room follows the peak
    /// ([`Self::trim_out`]).
    out_rounds: Derived<(usize, usize, Option<Instant>)>,
    /// Closed batches whose records a driver may compress away from the producer
    /// ([`Self::set_compress_ahead`]); `None` (the default): every batch is compressed at
    /// its seal.
    compress_ahead: Option<ahead::CompressAhead>,
    /// The SCRAM salted password last derived, reused by every later exchange with the same
    /// salt and iteration count.
    scram_salted: crate::sasl::SaltedCache,
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

/// Why `name` is not a legal Kafka topic name (`None` if it is one), for error messages: the
/// rules of [`is_valid_topic_name`], the first one broken; a character outside
/// `[a-zA-Z0-9._-]` is named (the first one).
pub(crate) fn topic_name_problem(name: &str) -> Option<String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() {
        Some("a topic name cannot be empty".to_owned())
    } else if name == "." || name == ".." {
        Some("\".\" and \"..\" are not allowed as topic names".to_owned())
    } else if let Some(c) = name.chars().find(|&c| !allowed(c)) {
        Some(format!(
            "{c:?} is not allowed (only ASCII letters, digits, '.', '_' and '-')"
        ))
    } else if name.len() > 249 {
        Some(format!(
            "{} characters, longer than the 249 allowed",
            name.len()
        ))
    } else {
        None
    }
}

/// Why a connection whose next frame has an impossible size is closed: what the bytes
/// look like when they are not Kafka's at all, so that a wrong `security.protocol` or port
/// says so (a TLS listener answers a plaintext request with an alert record, 0x15 0x03; an
/// HTTP server with its status line).
fn bad_frame_size(buf: &[u8]) -> &'static str {
    not_kafka(buf).unwrap_or(match buf {
        // A plausible size above the cap (under 512 MiB): an answer the broker meant (a
        // Metadata answer for a very large cluster, records' errors for a large batch), which
        // the setting refuses (a review finding: "bad frame size" named neither). A larger
        // one begins as text does (SSH, SMTP, a proxy's error page): not Kafka's.
        [0x00..=0x1f, ..] => {
            "bad frame size: an answer larger than receive.message.max.bytes (max_frame_size)"
        }
        _ => "bad frame size",
    })
}

/// Why bytes that begin an answer are not Kafka's, when they look like a TLS record (an
/// alert or a handshake, TLS 1.0 to 1.3) or an HTTP status line.
fn not_kafka(buf: &[u8]) -> Option<&'static str> {
    match buf {
        [0x15 | 0x16, 0x03, 0x00..=0x04, ..] => Some(
            "bad frame size: the broker speaks TLS here (is security.protocol SSL or SASL_SSL?)",
        ),
        [b'H', b'T', b'T', b'P', ..] => {
            Some("bad frame size: an HTTP server, not a Kafka listener")
        }
        _ => None,
    }
}

/// `t` earlier by `by`; at worst (before what an `Instant` holds) `floor` (a time far enough
/// back to be past a limit now), else `t` itself.
fn earlier_by(t: Instant, by: Duration, floor: Option<Instant>) -> Instant {
    t.checked_sub(by).or(floor).unwrap_or(t)
}

pub(super) fn backoff_delay(base: Duration, max: Duration, failures: u32) -> Duration {
    let factor = 1u32 << failures.min(16);
    base.saturating_mul(factor).min(max)
}

/// Where the producer stands after a driver that came back late
/// (`ProducerConfig::late_wake_grace`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum LateWake {
    /// No stall seen since the timeouts last ran.
    Prompt,
    /// A drain came later than the last `Wait` deadline by more than the grace: timeouts
    /// wait until then.
    Grace(Instant),
}

/// What a backoff is for, so that two started at the same moment are spread apart
/// ([`Producer::backoff`]).
#[derive(Debug, Clone, Copy)]
enum BackoffFor {
    /// A batch's retry (its topic's and partition's indexes): the batches of one partition
    /// refused together are due together, as the head's resend goes first anyway.
    Retry(usize, usize),
    /// A reconnect to a node (its id) or a bootstrap server (its index).
    Node(i32),
    Bootstrap(usize),
    /// A connect's timeout, grown after failures (`connect_timeout_max`).
    Connect(Target),
    Metadata,
    ProducerId,
    Bump,
}

/// SplitMix64's finaliser: a well-mixed 64-bit hash of `x`.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// `d` scaled by `per_100k` / 100,000, saturating.
fn scale(d: Duration, per_100k: u64) -> Duration {
    let nanos = d.as_nanos().saturating_mul(u128::from(per_100k)) / 100_000;
    let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
    // Below a billion: fits.
    let sub = (nanos % 1_000_000_000) as u32;
    Duration::new(secs, sub)
}

impl Producer {
    /// The backoff after `failures` failures in a row, from `base` doubling up to `max`,
    /// spread by up to `backoff.jitter.percent` either side and held to `max` (as the Java
    /// client's `ExponentialBackoff`; a constant one, `base` at or above `max`, is not spread). The spread is a hash of the nanoseconds since the
    /// producer was made, of what the backoff is for and of `failures`: deterministic for
    /// the same inputs (no randomness in the core), different between producers.
    fn backoff(&self, base: Duration, max: Duration, failures: u32, what: BackoffFor) -> Duration {
        let d = backoff_delay(base, max, failures);
        let j = u64::from(self.cfg.backoff_jitter_percent);
        // A constant backoff (the base at or above the maximum) is not spread, as in the
        // Java client: the user asked for that wait every time.
        if j == 0 || d.is_zero() || base >= max {
            return d;
        }
        let elapsed = self.now.saturating_duration_since(self.born);
        let salt = match what {
            BackoffFor::Retry(t, p) => ((t as u64) << 32) ^ p as u64,
            BackoffFor::Node(n) => (1 << 40) ^ u64::from(n as u32),
            BackoffFor::Bootstrap(i) => (2 << 40) ^ i as u64,
            BackoffFor::Metadata => 3 << 40,
            BackoffFor::ProducerId => 4 << 40,
            BackoffFor::Bump => 5 << 40,
            BackoffFor::Connect(Target::Node(n)) => (6 << 40) ^ u64::from(n as u32),
            BackoffFor::Connect(Target::Bootstrap(i)) => (7 << 40) ^ i as u64,
        };
        let h = mix(mix(elapsed.as_nanos() as u64 ^ mix(salt)) ^ u64::from(failures));
        // A factor from (100 - j) % to (100 + j) %, in steps of 0.001 %.
        let spread = h % (2 * j * 1000 + 1);
        scale(d, 100_000 - j * 1000 + spread).min(max)
    }
}

impl Producer {
    /// A producer with a validated configuration. Nothing happens until the first drain.
    pub fn new(config: ProducerConfig, now: Instant) -> Result<Self, crate::ConfigError> {
        config.validate()?;
        Ok(Self {
            now,
            born: now,
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
            reached: false,
            bootstrap_refused: Vec::new(),
            refusal: None,
            backoff: BTreeMap::new(),
            topics: Vec::new(),
            topic_index: BTreeMap::new(),
            last_topic: Derived(0),
            awaiting: BTreeSet::new(),
            // Without idempotence there is no InitProducerId: batches carry no identity.
            identity: (!config.enable_idempotence).then_some(ProducerIdentity::NONE),
            pid_request: None,
            pid_retry_at: None,
            pid_failures: 0,
            refused_ids: 0,
            given_up: None,
            broker_refusal: None,
            log_start_known: false,
            bump_refused: false,
            bumped_locally: None,
            waited_until: None,
            late_wake: LateWake::Prompt,
            bump_at: None,
            metadata: MetadataState::default(),
            buffered_bytes: 0,
            external_bytes: 0,
            pending_records: 0,
            flush_upto: None,
            closing: false,
            closed: false,
            fatal: None,
            stats: Observed::default(),
            pid_refused: Observed::default(),
            record_limit: config.max_batch_records.unwrap_or(usize::MAX),
            wrap_watch_from: config
                .max_sequence
                .saturating_sub(crate::partition::WRAP_WATCH),
            index: Derived(Index::new()),
            drain_start: BTreeMap::new(),
            linger_start: BTreeMap::new(),
            scratch: Derived(Vec::new()),
            idle_check: Derived(None),
            request_pool: Derived(requests::RequestPool::default()),
            batch_pool: Derived(pool::BatchPool::default()),
            wakes: Derived(0),
            check_every_drain: Derived(false),
            out_rounds: Derived((0, 0, None)),
            compress_ahead: None,
            scram_salted: Default::default(),
            cfg: config.with_durations_capped(),
        })
    }

    /// The configuration in use: as given, with durations capped at
    /// [`ProducerConfig::MAX_DURATION`].
    pub fn config(&self) -> &ProducerConfig {
        &self.cfg
    }

    /// Records accepted and not yet resolved.
    pub fn pending_records(&self) -> usize {
        self.pending_records
    }

    /// Bytes charged against `buffer.memory`: the room of every batch held, the size of every
    /// record waiting for metadata, every held record's `record_overhead` (see
    /// [`ProducerConfig::buffer_memory`]), and the batches of failed records whose outcome
    /// waits for an earlier record of their partition.
    pub fn buffered_bytes(&self) -> usize {
        self.buffered_bytes
    }

    /// The producer's current identity, if it has one (never with idempotence off).
    pub fn identity(&self) -> Option<ProducerIdentity> {
        self.identity.filter(|id| *id != ProducerIdentity::NONE)
    }

    /// The fatal error, once the producer has failed.
    pub fn fatal_error(&self) -> Option<&FatalError> {
        self.fatal.as_ref()
    }

    /// Whether `close` was called and every record has resolved: after the close finished,
    /// or after a fatal error that came while closing (which resolves every record and closes
    /// every connection). A driver that waited for this alone after a close waited for ever
    /// when the producer failed meanwhile (a review finding). A fatal error without a close
    /// is not a close: a driver stops on [`Producer::fatal_error`] too.
    pub fn is_closed(&self) -> bool {
        self.closed || (self.closing && self.fatal.is_some())
    }

    /// Whether `close` was called (records may still be resolving).
    pub fn is_closing(&self) -> bool {
        self.closing || self.closed
    }

    /// Memory the driver holds for the records it accepted beyond what each record's
    /// [`ProducerConfig::record_overhead`] charges (memory it shares between records and
    /// cannot free while any of them is unresolved, say): counted against `buffer.memory`
    /// with what the producer holds, so that a record that would pass the limit is refused
    /// `QueueFull` as any is (and what is buffered goes out at once). Set it before each
    /// [`Self::send`] whenever it changed; 0 by default.
    pub fn set_external_memory(&mut self, bytes: usize) {
        self.external_bytes = bytes;
    }

    /// The id the next accepted record will get.
    pub fn next_record_id(&self) -> RecordId {
        RecordId(self.next_record)
    }

    /// A number that changes whenever an input outside the drain ([`Self::send`],
    /// [`Self::precheck`], [`Self::want_topic`]) may have given the drain something to do
    /// before the deadline of the last [`Output::Wait`]: an accepted record opened a new batch
    /// (a new linger deadline), filled one (sendable now), is the first to wait for its
    /// topic's metadata (a new topic, a deadline) or asked for metadata, or failed at once
    /// (an event); a refused record or a wanted topic asked for metadata. A record that
    /// joined an open batch which still has room leaves it unchanged, and so does one that
    /// waits for metadata behind another: until the deadline the driver already waits for,
    /// the drain would do nothing more than before.
    ///
    /// For a driver that calls `send` outside its drain loop (from the application's thread,
    /// say): compare it before and after `send` and run the drain only if it changed. Reading
    /// it changes nothing; it is not part of the producer's state (`PartialEq`, `Hash`).
    pub fn wake_generation(&self) -> u64 {
        self.wakes.0
    }

    /// Connections the producer currently tracks.
    pub fn connections(&self) -> impl Iterator<Item = ConnId> + '_ {
        self.conns.keys().copied()
    }

    /// Accepts a record, or hands it back with the reason.
    // The error hands the whole record back on purpose (rskafka's `TryPush::NoCapacity`).
    #[allow(clippy::result_large_err)]
    pub fn send(&mut self, now: Instant, record: Record) -> Result<RecordId, SendError> {
        self.advance(now);
        if self.fatal.is_some() || self.closing {
            return Err(SendError::Closed(record));
        }
        // The producer's clock, not the caller's `now`: a `now` earlier than the last one
        // (a contract violation, but a caller's mistake) must not make a record older than
        // the batch it joins.
        self.accept(self.now, record)
    }

    /// How many partitions `topic` has, from the last metadata answer that described it;
    /// `None` while none has (never asked about, or an answer awaited), while the last answer
    /// said it does not exist ([`Self::topic_error`]), or while the topic is idle
    /// (`metadata.max.idle.ms`) or back from idleness and not described again. Java's
    /// `partitionsFor`, without the wait: [`Self::want_topic`] asks.
    pub fn partition_count(&self, topic: &str) -> Option<usize> {
        let t = &self.topics[*self.topic_index.get(topic)?];
        t.usable_count().filter(|_| t.missing.is_none())
    }

    /// What the last metadata answer said of `topic` when it did not describe it
    /// (UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED, INVALID_TOPIC_EXCEPTION),
    /// while answers keep saying it.
    pub fn topic_error(&self, topic: &str) -> Option<crate::protocol::ErrorCode> {
        self.topics[*self.topic_index.get(topic)?].missing
    }

    /// Asks for `topic`'s metadata unless the producer knows it, as the first record to it
    /// would (and marks it in use for `metadata.max.idle.ms`); a topic said missing is asked
    /// about again, no sooner than `retry.backoff.ms` after the last answer. `false` if the
    /// name is not a valid topic name or the producer takes no more work (closed or failed).
    pub fn want_topic(&mut self, now: Instant, topic: &str) -> bool {
        self.advance(now);
        if self.fatal.is_some() || self.closing {
            return false;
        }
        self.want_topic_inner(topic)
    }

    /// Sends every record accepted so far without waiting for `linger.ms`.
    pub fn flush(&mut self, now: Instant) {
        self.advance(now);
        self.flush_accepted();
    }

    /// Makes every record accepted so far sendable now, without waiting for `linger.ms`
    /// ([`Self::flush`], and a refusal for `buffer.memory`).
    fn flush_accepted(&mut self) {
        if self.next_record > 0 {
            self.flush_upto = Some(RecordId(self.next_record - 1));
        }
        self.dirty = true;
        self.mark_all_sendable();
    }

    /// Stops accepting records, sends what is buffered, and closes every connection once
    /// all records have resolved ([`Self::is_closed`]).
    pub fn close(&mut self, now: Instant) {
        self.flush(now);
        self.closing = true;
    }

    /// Stops the producer for good on the driver's decision: an error only the driver sees
    /// and no retry can fix (a TLS certificate rejected by either side, say). As after any
    /// fatal error, [`Event::Fatal`] ([`FatalError::Aborted`]) comes first, then every
    /// unresolved record fails with a truthful persistence (possibly persisted only if an
    /// attempt of it went unanswered) and its record handed back, every connection gets a
    /// `Close`, and later records are refused. Does nothing once the producer has failed.
    pub fn abort(&mut self, now: Instant, reason: impl Into<String>) {
        self.advance(now);
        self.fail_fatal(FatalError::Aborted {
            reason: reason.into(),
        });
    }

    /// The connection asked for by `Output::Connect` is established.
    pub fn handle_connected(&mut self, now: Instant, conn: ConnId) {
        self.advance(now);
        self.on_connected(conn);
    }

    /// The connection asked for by `Output::Connect` could not be established.
    pub fn handle_connect_failed(&mut self, now: Instant, conn: ConnId) {
        self.advance(now);
        self.drop_conn(conn, connections::CONNECT_FAILED);
    }

    /// The driver's transport refused `conn` for a reason that no retry of it fixes: a TLS
    /// certificate rejected by either side (the broker's chain leads to no trusted CA, has
    /// expired, names another host; the broker refuses the client's certificate), in the
    /// driver's words (`reason`, naming the setting to check). As a refused SASL handshake:
    /// once a connection has completed its handshake, only this connection fails (closed, its
    /// broker tried again after the reconnect backoff, [`Diagnostic::HandshakeFailed`]), so
    /// that one broker's certificate does not stop a producer the rest of the cluster serves;
    /// before that it is the configuration speaking, and once every bootstrap server has
    /// refused so or failed to connect, the producer stops with [`FatalError::Refused`]. The
    /// driver may call it whether `conn` is still connecting or already connected.
    pub fn handle_connection_refused(&mut self, now: Instant, conn: ConnId, reason: String) {
        self.advance(now);
        let Some(addr) = self.conns.get(&conn).map(|c| c.addr.to_string()) else {
            return;
        };
        self.handshake_failed(conn, FatalError::Refused { addr, reason });
    }

    /// The connection was closed by the peer or failed.
    pub fn handle_disconnected(&mut self, now: Instant, conn: ConnId) {
        self.advance(now);
        self.drop_conn(conn, connections::DISCONNECTED);
    }

    /// Bytes arrived on `conn`. Whole frames are consumed from the front of `buf`; a partial
    /// frame is left for the next call.
    pub fn handle_read(&mut self, now: Instant, conn: ConnId, buf: &mut BytesMut) {
        self.advance(now);
        // A SASL re-authentication (KIP-368) is not the application's traffic: an idle
        // connection re-authenticated on its timer still goes at `connections.max.idle.ms`.
        if let Some(c) = self.conns.get_mut(&conn) {
            if c.state != ConnState::Reauthenticating {
                c.touch(self.now);
            }
        }
        loop {
            let Some(c) = self.conns.get_mut(&conn) else {
                buf.clear();
                return;
            };
            let target = c.target;
            // The first answer on a connection is ApiVersions', a few hundred bytes: one that
            // begins as TLS or HTTP does is not Kafka's even where `max_frame_size` (above
            // 336 MiB) would take those bytes for a legal size and wait for the rest until
            // the request timeout.
            if c.state == ConnState::Negotiating {
                if let Some(reason) = not_kafka(buf) {
                    self.close_conn(conn, reason);
                    buf.clear();
                    return;
                }
            }
            let frame = match c.decoder.decode(buf) {
                Ok(Some(f)) => f,
                Ok(None) => return,
                Err(_) => {
                    // Answers come in request order: one too large to read, with Metadata
                    // the oldest request (an answer above `max_frame_size` for a topic with
                    // thousands of partitions), is an unusable metadata answer, asked again
                    // after the backoff. Before, the next ready connection was asked at
                    // once, met the same fate with its Produce requests in flight, and every
                    // connection was closed in turn for as long as it lasted (a review
                    // finding).
                    let metadata = (c.inflight.front())
                        .is_some_and(|r| matches!(r.kind, RequestKind::Metadata));
                    if metadata {
                        self.on_unusable_metadata(conn);
                    }
                    self.close_conn(conn, bad_frame_size(buf));
                    buf.clear();
                    return;
                }
            };
            // A suspected node that answers is not hung.
            if matches!(target, Target::Node(n) if self.metadata.hung == Some(n)) {
                self.metadata.hung = None;
            }
            if let Err(reason) = self.handle_frame(conn, frame) {
                self.close_conn(conn, reason);
                buf.clear();
                return;
            }
        }
    }

    /// The driver's writer for connection `conn` has been writing without a break since it
    /// stood at byte `since` of the connection's stream (every byte of its `Transmit`s, in
    /// order, counted from 0), and still was a moment ago. A request whose bytes begin after
    /// `since` was reached by the writer in that stretch or still waits behind others: its
    /// `request.timeout.ms` runs from `now` at the earliest (or from the end of a broker's
    /// throttle). The Java client's timeout runs from when it hands the connection a
    /// request, which it does once the one before is written. Before, on a link slower than
    /// what was queued on it (five requests of 1 MiB on a link below 175 KB/s), a request
    /// timed out before it was even written, and its connection closed with the others
    /// half-sent (a review finding).
    ///
    /// Only with [`ProducerConfig::write_reports`] on; ignored otherwise. A report only
    /// extends deadlines, of the requests after `since`: the nearer `since` is to where the
    /// writer stands, the nearer each extended request's time is to Java's. kprod-tokio
    /// names where its last write began (a write's bytes are taken by the socket when it
    /// returns) once its writer has been busy a second without a break, then every second,
    /// and when it runs out of work after that. A request being written when nothing more
    /// goes out (a broker that stopped reading) is found hung as soon as before.
    pub fn handle_writing(&mut self, now: Instant, conn: ConnId, since: u64) {
        self.advance(now);
        if !self.cfg.write_reports {
            return;
        }
        let now = self.now;
        let timeout = self.cfg.request_timeout;
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let Some(deadline) = c.after_throttle(now).checked_add(timeout) else {
            return;
        };
        for r in c.inflight.iter_mut().filter(|r| r.start > since) {
            r.deadline = r.deadline.max(deadline);
        }
    }

    /// A deadline from `Output::Wait` passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
    }

    /// The wall clock moved `by` more than the producer's clock: the machine was suspended
    /// (Linux's `CLOCK_MONOTONIC` and macOS's uptime clock, which `Instant` reads, stand still
    /// while it sleeps) or the wall clock was stepped. A broker measures this producer's
    /// idleness by its wall clock against the last batch's `maxTimestamp`, and may have
    /// forgotten it meanwhile; each partition's idle time counts `by`, so one idle past the
    /// producer-state expiry that way starts its next window with a probe (one batch alone
    /// until it is acknowledged, D7), as after an idle period the producer saw; one with a
    /// batch in flight across the suspend sends nothing new behind it until one is
    /// acknowledged. Before, after a two-day suspend the producer saw seconds,
    /// and pipelined batches into a broker that takes any sequence from a producer it does
    /// not know (a review finding). Each connection's idle time counts `by` as well, so one
    /// idle past `connections.max.idle.ms` that way is closed before anything goes on it (the
    /// broker has likely closed its end), and each SASL session's re-authentication comes `by`
    /// sooner (at the next drain if its time has passed). A driver whose clock counts a
    /// suspend need not call it.
    pub fn handle_wall_clock_jump(&mut self, now: Instant, by: Duration) {
        self.advance(now);
        let expiry = self.cfg.producer_state_expiry();
        let mut moved = false;
        for p in self.topics.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
            if let Some(t) = p.last_write {
                p.last_write = Some(earlier_by(t, by, self.now.checked_sub(expiry)));
                // Batches in flight across the suspend: the next ones wait for an
                // acknowledgement, as a probe's do (a review of the change).
                if p.unresolved() > 0
                    && p.last_write
                        .is_some_and(|w| self.now.saturating_duration_since(w) >= expiry)
                {
                    p.probe = true;
                }
                moved = true;
            }
        }
        if moved {
            self.sync_all();
        }
        // Each connection's idle time counts `by` too: a broker closes one idle past its
        // `connections.max.idle.ms` by its own clock, and the first request after a long
        // suspend went onto a socket the broker had closed (a reset, the batch retried as
        // possibly written) or, behind a NAT that forgot it, hung for `request.timeout.ms`
        // (a review finding). Closed now by `expire_idle` before anything is sent.
        if let Some(limit) = self.cfg.connections_max_idle {
            for c in self.conns.values_mut() {
                if let Some(t) = c.last_active {
                    c.last_active = Some(earlier_by(t, by, self.now.checked_sub(limit)));
                }
            }
            self.idle_check.0 = None;
        }
        // A SASL session ends by the broker's clock too (`connections.max.reauth.ms`, a
        // token's expiry): one that ended during the suspend is re-authenticated at this
        // drain, before a request on it makes the broker close the connection (a review
        // finding). Never within a second of the last exchange's start, which the broker
        // refuses if its clock did not move (a wall clock stepped, not a suspend).
        let now = self.now;
        for s in self.conns.values_mut().filter_map(|c| c.sasl.as_mut()) {
            s.move_reauthentication_earlier(by, now);
        }
    }

    /// In debug builds, check the derived state at every drain however many partitions
    /// there are (by default only up to 256): for tests of many partitions. Does nothing in
    /// release builds.
    #[doc(hidden)]
    pub fn check_every_drain(&mut self) {
        self.check_every_drain.0 = true;
    }

    /// The next thing for the driver to do. Call until it returns [`Output::Wait`].
    ///
    /// In debug builds it also checks the producer's derived state (its index, its memory
    /// accounting) each time it returns `Wait`, while the producer has at most 256
    /// partitions in all.
    #[must_use]
    pub fn poll_output(&mut self) -> Output {
        if self.out.is_empty() && self.dirty {
            self.dirty = false;
            self.work();
        }
        match self.out.pop_front() {
            Some(o) => {
                self.out_rounds.0 .0 += 1;
                o
            }
            None => {
                self.trim_out();
                // Debug builds check the derived state at every drain (every state of the
                // model, every unit test), a walk over every partition and batch; past a few
                // hundred partitions that walk, under the adapter's lock, is what a debug
                // build of an application under load would spend its time on (a review
                // estimate: tens of milliseconds per drain at 10,000 partitions), so it
                // stops there, unless a test asks for it (`check_every_drain`).
                #[cfg(debug_assertions)]
                if self.check_every_drain.0
                    || self
                        .topics
                        .iter()
                        .map(|t| t.partitions.len())
                        .sum::<usize>()
                        <= DEBUG_CHECKS_UP_TO_PARTITIONS
                {
                    self.check_index();
                    self.check_accounting();
                }
                let until = self.next_deadline();
                if self.cfg.late_wake_grace.is_some() {
                    self.waited_until = until;
                }
                Output::Wait { until }
            }
        }
    }

    /// Gives back the room a burst of outputs left in the queue: an outage's delivery
    /// timeouts fail every buffered record in a few drains, one event each, and the queue
    /// kept room for all of them (tens of megabytes outside `buffer.memory`) for the
    /// producer's life (a review finding). The room follows a peak of the drains' counts
    /// that halves every second, so a steady load keeps the room it uses, however its drains
    /// alternate between large and empty ones (a decay per drain shrank it between two large
    /// ones: a review of the first version).
    fn trim_out(&mut self) {
        /// Room always kept.
        const KEEP: usize = 256;
        let now = self.now;
        let (taken, peak, since) = &mut self.out_rounds.0;
        let halvings = since.map_or(0, |t| now.saturating_duration_since(t).as_secs());
        if halvings > 0 || since.is_none() {
            *since = Some(now);
        }
        *peak = (*peak >> halvings.min(63)).max(std::mem::take(taken));
        let keep = (*peak).max(KEEP);
        if self.out.capacity() > 4 * keep {
            self.out.shrink_to(keep);
        }
    }

    /// The room of the output queue (tests of [`Self::trim_out`]).
    #[doc(hidden)]
    pub fn output_room(&self) -> usize {
        self.out.capacity()
    }

    fn advance(&mut self, now: Instant) {
        if now > self.now {
            self.now = now;
        }
        self.dirty = true;
    }

    /// Whether timeouts wait, after a stalled driver, for what arrived meanwhile to be read
    /// (`ProducerConfig::late_wake_grace`). A drain later than the last `Wait` deadline by
    /// more than the grace, whatever the inputs before it (a timer, a read, a send), starts
    /// the grace then: looked for once per drain, not per input (a check in `send` cost 20
    /// instructions a record), and never on an application thread's call while the driver
    /// is still held up (the grace ran out before the driver was back: a review finding). A
    /// driver late again gets another grace only once the timeouts have run: one always late
    /// (a runtime blocked over and over) still times a hung broker out, at every other
    /// wake-up at worst (a review finding).
    fn in_stall_grace(&mut self) -> bool {
        if self.grace_holds() {
            return true;
        }
        if let LateWake::Grace(_) = self.late_wake {
            // Over: the timeouts run now, and only then may another stall be seen.
            self.late_wake = LateWake::Prompt;
            return false;
        }
        // (A grace of zero is none: `with_durations_capped`.)
        let (Some(grace), Some(until)) = (self.cfg.late_wake_grace, self.waited_until) else {
            return false;
        };
        if until.checked_add(grace).is_none_or(|late| self.now <= late) {
            return false;
        }
        let Some(end) = self.now.checked_add(grace) else {
            return false;
        };
        self.late_wake = LateWake::Grace(end);
        true
    }

    /// Whether a stall's grace is running (`in_stall_grace`), timeouts held back.
    pub(super) fn grace_holds(&self) -> bool {
        matches!(self.late_wake, LateWake::Grace(end) if end > self.now)
    }

    fn emit(&mut self, event: Event) {
        self.stats.0.count(&event);
        self.out.push_back(Output::Event(event));
    }

    fn diag(&mut self, d: Diagnostic) {
        self.emit(Event::Diagnostic(d));
    }

    fn work(&mut self) {
        // Closed: every record resolved and every connection closed; nothing more is asked
        // of any broker (a review finding: a producer closed without an id or a metadata
        // answer asked for them again at the next call, a connection nothing would close).
        if self.fatal.is_some() || self.closed {
            return;
        }
        // After a stall, answers that arrived during it are read before any timeout.
        let timeouts = !self.in_stall_grace();
        if timeouts {
            self.expire_connects();
            self.expire_requests();
        }
        // Before the re-authentication timers, which would re-authenticate a connection
        // about to close for idleness. (A batch ready for a connection whose idle deadline
        // passed in the same drain goes out on a new one, as in the Java client.) Also
        // within a stall's grace: an idle connection waits for no answer, and one idle past
        // the limit may be closed at the broker's end.
        self.expire_idle();
        self.sasl_timers();
        if timeouts {
            self.expire_deliveries();
        }
        if self.fatal.is_some() {
            return;
        }
        // Before the producer id request: a bump may give the identity up (the broker
        // refused a bump meanwhile), and the new id is then asked for in this drain.
        if self.bump_at.is_some_and(|t| t <= self.now) {
            self.bump_at = None;
            self.paced_bump();
        }
        self.maybe_request_producer_id();
        self.maybe_request_metadata();
        self.rebind_partitions();
        self.send_produce_requests();
        self.connect_to_leaders();
        self.maybe_finish_close();
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
        if let LateWake::Grace(t) = self.late_wake {
            consider(t);
        }
        if let Some(t) = self.bootstrap_patience_ends() {
            consider(t);
        }
        for c in self.conns.values() {
            if let Some(r) = c.inflight.front() {
                consider(r.deadline);
            }
            c.connect_deadline.into_iter().for_each(&mut consider);
            c.throttled_until.into_iter().for_each(&mut consider);
            if let Some(d) = c.sasl.as_ref().and_then(auth::SaslConn::next_deadline) {
                consider(d);
            }
        }
        let timeout = self.cfg.delivery_timeout;
        for t in self.awaiting.iter().map(|&ti| &self.topics[ti]) {
            if let Some(p) = t.pending.front() {
                consider(p.enqueued + timeout.min(self.cfg.max_block));
            }
        }
        // Every partition's linger and retry-backoff expiries, and the delivery timeout of
        // its first batch whose records are not yet reported (batches are in creation
        // order): kept sorted by the index.
        self.index
            .0
            .next_timer(now)
            .into_iter()
            .for_each(&mut consider);
        if let Some(t) = self.metadata.full_refresh {
            if !self.topics.is_empty() {
                consider(t + self.refresh_period());
            }
        }
        // The next look for idle connections (a lower bound: at worst one look finds none,
        // once per `connections.max.idle.ms`), while there are connections to look at. It is
        // derived state: were idle closing on in the model, equal producers could ask to be
        // woken at different times (their closes would still come at the same times).
        if self.cfg.connections_max_idle.is_some() && !self.conns.is_empty() {
            self.idle_check.0.into_iter().for_each(&mut consider);
        }
        self.metadata.retry_at.into_iter().for_each(&mut consider);
        // Not one already past: a bootstrap server in its backoff is waited for by that.
        if let Some(t) = self.rebootstrap_at().filter(|t| *t > now) {
            consider(t);
        }
        self.pid_retry_at.into_iter().for_each(&mut consider);
        self.bump_at.into_iter().for_each(&mut consider);
        self.backoff.values().for_each(|b| consider(b.until));
        next
    }

    fn maybe_finish_close(&mut self) {
        if self.closing && !self.closed && self.pending_records == 0 {
            self.closed = true;
            // Every record has its outcome; what batches are left are in flight with their
            // records reported at their delivery timeout. Their answers will not be read:
            // they go, so that nothing is left to send or connect for.
            for ti in 0..self.topics.len() {
                for pi in 0..self.topics[ti].partitions.len() {
                    let p = &mut self.topics[ti].partitions[pi];
                    if !p.batches.is_empty() {
                        debug_assert!(p.batches.iter().all(|b| b.reported));
                        p.batches.clear();
                        p.update_inflight_conn();
                        self.sync(ti, pi);
                    }
                }
            }
            // In good order (the driver lets its writer finish) only where no Produce answer
            // is awaited: such a request belongs to records already reported at their
            // delivery timeout, and a writer stuck on a broker that stopped reading would
            // hold the close for its own bound (a review finding). `acks=0` requests await no
            // answer (they are never in flight here), so their bytes are still handed over,
            // even beside a Metadata request in flight.
            let conns: Vec<(ConnId, bool)> = (self.conns.iter())
                .map(|(&c, conn)| (c, conn.produce_inflight() == 0))
                .collect();
            for (conn, flush) in conns {
                self.out.push_back(Output::Close { conn, flush });
            }
            self.conns.clear();
            self.node_conns.clear();
        }
    }
}

#[cfg(test)]
mod topic_name_tests {
    use super::{is_valid_topic_name, topic_name_problem};

    /// The reason given and the rule applied agree: a reason exactly for the names refused.
    #[test]
    fn a_problem_is_found_exactly_for_invalid_names() {
        let names = [
            String::new(),
            ".".into(),
            "..".into(),
            "...".into(),
            ".a".into(),
            "a b".into(),
            "ä".into(),
            "a\0".into(),
            "ok-name_1.x".into(),
            "t".repeat(249),
            "t".repeat(250),
            format!("{}é", "t".repeat(247)),
            format!("{}é", "t".repeat(248)),
        ];
        for name in &names {
            assert_eq!(
                is_valid_topic_name(name),
                topic_name_problem(name).is_none(),
                "{name:?}: {:?}",
                topic_name_problem(name)
            );
        }
    }
}
