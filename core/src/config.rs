//! Producer configuration, validated up front with clear errors.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::protocol::compression::Compression;
use crate::protocol::versions::MaxVersions;

/// What to do when a batch fails permanently and leaves a gap in a partition's stream
/// (idempotence-spec §B.4). A batch refused for good counts (not persisted, or possibly
/// persisted, as after UNKNOWN_SERVER_ERROR: it may be missing from the log), and so do
/// records failed for want of a producer id, and a batch refused for good after a later
/// batch of its partition was acknowledged (a broker that lost the producer's state took the
/// later one: the gap is already in the log, and `Fatal` stops, `CutPartition` cuts what is
/// buffered behind it); a delivery timeout does not (as in librdkafka's gapless guarantee).
/// Nor, without idempotence, does a refusal with an idempotence error
/// (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID and the like, which no broker sends for
/// a batch of producer id -1): such a batch fails, and the partition goes on, whatever the
/// policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GapPolicy {
    /// Fail that batch, bump the epoch and go on with the later batches (Java's behaviour).
    #[default]
    ContinueWithGap,
    /// Fail that batch and every later batch buffered for the partition that is not
    /// possibly persisted (franz-go's behaviour): the partition's log stays a prefix of what
    /// was sent. Earlier batches of the partition waiting to be retried under the spent
    /// epoch, and never written, are failed with them (not persisted).
    CutPartition,
    /// Stop the producer (librdkafka's `enable.gapless.guarantee`).
    Fatal,
}

/// What to do when the broker proves that acknowledged data was lost (a head-of-line
/// OUT_OF_ORDER_SEQUENCE_NUMBER that benign state loss does not explain).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DataLossPolicy {
    /// Report [`crate::Diagnostic::DataLoss`], bump the epoch and go on.
    #[default]
    SignalAndContinue,
    /// Stop the producer.
    Fatal,
}

/// Producer settings. Field names follow the Java client's properties.
///
/// Durations may be as large as `Duration::MAX`: a duration above
/// [`ProducerConfig::MAX_DURATION`] (100 years) means "effectively never", and the producer
/// uses `MAX_DURATION` instead ([`crate::Producer::config`] shows the value in use), so that
/// no deadline computed from it can overflow an `Instant`. Validation never panics on one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProducerConfig {
    /// `bootstrap.servers`: `host:port` addresses used to discover the cluster.
    pub bootstrap_servers: Vec<String>,
    /// `client.id`.
    pub client_id: Option<String>,
    /// `enable.idempotence` (default `true`). `false` sends no InitProducerId and puts
    /// producer id -1, epoch -1 and base sequence -1 in every batch: the broker then cannot
    /// deduplicate, so a retry after a lost answer may write a record twice, and with
    /// `max_in_flight > 1` a retried batch may land after a later one. Every outcome stays
    /// truthful. Required for `acks` 0 and 1; allowed with `acks=all` too, as in the Java client.
    pub enable_idempotence: bool,
    /// `acks`: -1 (all, the default: written by every in-sync replica), 1 (the leader only)
    /// or 0 (no answer at all: records end as [`crate::Event::Sent`], never delivered at an
    /// offset). Idempotence requires -1; 0 and 1 need `enable_idempotence = false`.
    pub acks: i16,
    /// `max.in.flight.requests.per.connection`: 1..=5. Also the per-partition bound on
    /// unresolved batches, counted across every connection (P4).
    pub max_in_flight: usize,
    /// `linger.ms`.
    pub linger: Duration,
    /// `batch.size` in bytes: how full a batch grows before it is sent, capped at
    /// `max_request_size` (as librdkafka caps it at `message.max.bytes`).
    pub batch_size: usize,
    /// `buffer.memory` in bytes: the memory records hold until they resolve. A batch is
    /// charged its room from the moment it opens (a buffer of `batch.size`, or its first
    /// record if larger, and its id list), as Java's `BufferPool` charges `batch.size`; a
    /// record waiting for metadata its own size; every record also [`Self::record_overhead`].
    /// `send` refuses a record that would open a batch without room for it (unless nothing
    /// else is held); a record that fits within an open batch's room costs nothing more than
    /// its `record_overhead` (with none, it is always taken).
    pub buffer_memory: usize,
    /// Memory a driver holds for each accepted record outside the producer until it
    /// resolves (its completion: a channel, a callback), charged against `buffer.memory`
    /// with the record, so that `buffer.memory` bounds the driver's memory too, however
    /// small the records. 0 by default (the producer's own per-record memory is charged
    /// already); kprod-tokio sets its own. Not a Kafka property: Java leaves the futures
    /// and callbacks of its records uncharged. At most 1 MiB.
    pub record_overhead: usize,
    /// librdkafka's `queue.buffering.max.messages`: the most records held (accepted and not
    /// yet resolved); past it a record is refused [`crate::SendError::QueueFull`], as when
    /// `buffer.memory` is full (kprod-tokio's `send` then waits up to `max.block.ms`). A
    /// record reported at its delivery timeout while its batch is still in flight no longer
    /// counts (nor is charged against `buffer.memory`, once its outcome goes out), so the
    /// batches in flight can briefly hold more. `None` (the default): no count limit, as in the Java client.
    pub max_buffered_records: Option<usize>,
    /// librdkafka's `batch.num.messages`: the most records in one batch, which is sent once
    /// it holds them (as when it reaches `batch.size`). `None` (the default): as many as
    /// `batch.size` holds, as in the Java client.
    pub max_batch_records: Option<usize>,
    /// `max.request.size` in bytes: the most bytes of record batches one Produce request
    /// gathers, and the largest record: one is refused ([`crate::SendError::TooLarge`]) when a batch
    /// holding it alone would be larger (Java's rule). Such a batch goes alone in a request,
    /// which is then larger by the request's own framing (its header and topic name). A
    /// batch stops growing at it even with a larger `batch_size`.
    pub max_request_size: usize,
    /// The most batches (partitions) one Produce request carries. `None` (the default): as
    /// many full batches as `max.request.size` holds, and at least 16 (64 at the default
    /// sizes), so that many partitions' small batches do not go a thousand to a request
    /// and keep filling instead (a broker's cost is per batch as much as per byte). Each
    /// Produce request to a broker then moves at most this many partitions: with many
    /// partitions on one broker behind a slow link, a partition waits several round trips
    /// for its turn. A large value gives the Java client's rule (only `max.request.size`
    /// bounds a request). Not a Kafka property (`kprod.max.batches.per.request`).
    pub max_batches_per_request: Option<usize>,
    /// `request.timeout.ms`: a request unanswered this long closes its connection (P8).
    pub request_timeout: Duration,
    /// `socket.connection.setup.timeout.ms`: how long a `Connect` may stay unanswered. A
    /// connection the driver has not reported connected by then is closed (`Close`) and
    /// treated as a failed connect: reconnect backoff, the next bootstrap server, a metadata
    /// refresh if it was a leader's.
    pub connect_timeout: Duration,
    /// `socket.connection.setup.timeout.max.ms` (KIP-601): each connect to the same broker
    /// (or bootstrap server) that failed in a row doubles the next one's connect timeout, from
    /// `connect_timeout` up to this (spread as the backoffs are, `backoff_jitter_percent`), so
    /// that a broker whose TCP and TLS setup takes longer than `connect_timeout` (a distant or
    /// overloaded one) is still reached. 30 s by default, as in the Java client; `None`, or a
    /// value at or below `connect_timeout`, waits `connect_timeout` every time.
    pub connect_timeout_max: Option<Duration>,
    /// While the producer has no connection but bootstrap connections waiting for their
    /// first answer (ApiVersions): how long they wait before the next bootstrap server is
    /// tried alongside, so that a server that takes connections and never answers them (a
    /// hung broker, a dead proxy) does not hold a starting producer for
    /// `request.timeout.ms`. `None`: only after the request timeout, one server at a time.
    /// 1 s by default. Not a Kafka property (the Java client starts at a random bootstrap
    /// server and waits out the request timeout there). It covers the TCP (and TLS) connect
    /// too: where connects take longer than the patience (a distant cluster), the next
    /// bootstrap server is dialled alongside each time, and the spare connections close when
    /// idle (`connections.max.idle.ms`).
    pub bootstrap_patience: Option<Duration>,
    /// `delivery.timeout.ms`: the bound on a record's whole life in the producer.
    pub delivery_timeout: Duration,
    /// `retry.backoff.ms`. Above `retry_backoff_max` it is a constant backoff of this value,
    /// what the user asked for (as before Kafka 3.7; the Java client 3.7+ waits
    /// `retry.backoff.max.ms` instead, with a warning).
    pub retry_backoff: Duration,
    /// `retry.backoff.max.ms`: the most a retry's backoff doubles to (raised to
    /// `retry_backoff` when below it).
    pub retry_backoff_max: Duration,
    /// `reconnect.backoff.ms`: the wait before connecting again to a broker whose connection
    /// failed, doubling with each failure in a row up to `reconnect_backoff_max`; a value
    /// above that maximum is the wait every time.
    pub reconnect_backoff: Duration,
    /// `reconnect.backoff.max.ms`: the most `reconnect_backoff` doubles to. `None`:
    /// `retry_backoff_max`.
    pub reconnect_backoff_max: Option<Duration>,
    /// Each backoff (a batch's retry, a reconnect, a metadata or producer id request asked
    /// again, a paced epoch bump) is spread by up to this many percent either side, then held
    /// to its maximum, as the Java client spreads its backoffs by 20 % (KIP-580): producers
    /// that lost the same broker at the same moment do not all come back at the same moment.
    /// A constant backoff (`retry.backoff.ms` equal to `retry.backoff.max.ms`, or
    /// `reconnect.backoff.ms` at or above it) is not spread, as in the Java client.
    /// The core has no randomness: the spread is a hash of the producer's own clock (the
    /// nanoseconds between its creation and the moment the backoff starts), which producers
    /// on real clocks do not share (producers on one simulated clock fed the same events do). 0 turns it off (the model checker runs so, as do tests that check
    /// times to the millisecond). At most 50, so no backoff falls below half its value.
    pub backoff_jitter_percent: u8,
    /// `metadata.max.age.ms`: periodic metadata refresh.
    pub metadata_max_age: Duration,
    /// `metadata.recovery.rebootstrap.trigger.ms` (Java 4.x, KIP-1102): when no metadata
    /// answer came for this long since a connect failed or a request timed out, and no
    /// connection is ready to ask, the bootstrap servers are dialled again beside the known
    /// brokers. Without it a cluster that moved
    /// to new addresses (pods rescheduled, brokers advertising their IPs) was never found
    /// again while one of its old addresses kept a connect pending (each takes
    /// `socket.connection.setup.timeout.ms`): the bootstrap servers are otherwise dialled
    /// only when every known broker is in its reconnect backoff. 5 minutes by default, as in
    /// Java; `None` turns it off (the model checker runs so).
    pub metadata_recovery_rebootstrap_trigger: Option<Duration>,
    /// `allow.auto.create.topics`.
    pub allow_auto_topic_creation: bool,
    /// `metadata.max.idle.ms`: a topic the application has not sent to for this long, with
    /// no record of it left in the producer, is no longer named in metadata requests. The
    /// producer looks when it builds a metadata request, at least this long after its last
    /// look: a topic goes out at the first such look after a whole period without a send to
    /// it (one to two periods after the last send when `metadata.max.age.ms` is shorter; with
    /// a longer one, at a periodic refresh). Its partitions keep their sequence state; the
    /// next record for it names it again, asks for metadata at once and waits for the answer
    /// (as a new topic's first record does), which places it: a partition added meanwhile is
    /// taken, and without topic ids its old leader epochs are forgotten. Without this, a
    /// producer that once wrote to a topic would ask about it for ever, and with
    /// `allow.auto.create.topics` on a broker that creates topics on request, bring it back
    /// after it was deleted. `None`: topics are never left out (the model checker runs so).
    /// Zero is refused.
    pub metadata_max_idle: Option<Duration>,
    /// `connections.max.idle.ms`: a ready connection with no request awaiting an answer and
    /// nothing written or read on it for this long (a SASL re-authentication does not count;
    /// a broker's throttle counts until it ends; one that carried `acks=0` requests is never
    /// idle, as the core cannot tell when the driver has written them) is closed, without a
    /// reconnect backoff; the next request for its broker opens one again. The Java client's
    /// default, 9 minutes, closes a connection before the broker's own default (10 minutes)
    /// would, so that against such a broker a request is not written just as the broker
    /// closes the connection under it (a retry, and a batch left possibly persisted until it
    /// resolves); load balancers and managed
    /// services with shorter idle limits (Azure Event Hubs: 4 minutes) want it lower.
    /// `None`: connections are never closed for idleness (the model checker runs so).
    /// `Some(0)` is refused (the property's `0` and `-1` give `None`).
    pub connections_max_idle: Option<Duration>,
    /// `max.block.ms`: how long a record waits for its topic's metadata before it fails (as
    /// Java's `send` waits in `waitOnMetadata`): `UnknownTopic` with the code if the last
    /// answer gave the topic an error (it does not exist, or is refused; a topic that briefly
    /// vanishes must not fail records), else `DeliveryTimeout` (no broker reached, or no
    /// answer). A record waits at most its delivery timeout either way. kprod-tokio also
    /// bounds a send's wait for room in `buffer.memory` by it, so that a send may wait up to
    /// twice this in all (Java's `send` spends one `max.block.ms` on both waits).
    pub max_block: Duration,
    /// Gap policy (§B.4).
    pub gap_policy: GapPolicy,
    /// Data-loss policy.
    pub data_loss_policy: DataLossPolicy,
    /// Largest response frame accepted from a broker.
    pub max_frame_size: usize,
    /// Software name sent in ApiVersions v3.
    pub client_software_name: String,
    /// Software version sent in ApiVersions v3.
    pub client_software_version: String,
    /// The highest epoch to bump to before asking for a new producer id. Kafka's limit is
    /// `i16::MAX`; a smaller value lets tests and the model reach exhaustion.
    pub max_epoch: i16,
    /// The largest sequence number before wrapping to 0. Kafka's is `i32::MAX`; a smaller
    /// value lets tests and the model explore the wrap. Brokers must use the same value.
    pub max_sequence: i32,
    /// The brokers' `producer.id.expiration.ms`, or a lower bound of it. A broker forgets a
    /// producer that wrote nothing to it for this long, and a broker that has forgotten it
    /// (Kafka 2.5–4.4) accepts any sequence: if the first batch after such an idle period drew
    /// a retriable error, the broker would accept the second one at a gap and the first could
    /// never be written (KAFKA-15591 on a partition that already holds records). So a partition
    /// that idled this long sends one batch at a time until one is acknowledged. `None` means
    /// `delivery.timeout.ms` (the lower bound the broker documentation asks for), at most 1
    /// day (Kafka's default, [`Self::BROKER_PRODUCER_ID_EXPIRATION`]); property
    /// `kprod.producer.id.expiration.ms`. Idleness is
    /// counted from the creation of the last acknowledged batch, which assumes record
    /// timestamps are not older than the records (the broker counts from them).
    pub producer_id_expiration: Option<Duration>,
    /// `compression.type` (and its level: `compression.level`, or Kafka's
    /// `compression.<codec>.level`): the codec each batch's records are compressed with when
    /// the batch is sealed. A codec needs its kprod-core feature (`gzip`, `snappy`, `lz4`,
    /// `zstd`; all on in kprod-tokio's default features).
    pub compression: Compression,
    /// Per-topic overrides of `compression`.
    pub topic_compression: BTreeMap<String, Compression>,
    /// `partitioner` (librdkafka's names): the hash that places keyed records (none for
    /// `random`, which ignores keys, as Java's `partitioner.ignore.keys=true`). The Java
    /// client's murmur2 by default; librdkafka's default (`consistent_random`, CRC-32) for
    /// an application that shares topics with librdkafka-based producers (rust-rdkafka,
    /// confluent-kafka-go, -python, ...) and needs each key on the same partition.
    pub partitioner: crate::partitioner::Partitioner,
    /// `partitioner.adaptive.partitioning.enable` (true by default, as in Java): a sticky
    /// partition moving on takes the least loaded of the next partitions with a leader (the
    /// fewest batches held), so keyless records keep away from a partition whose broker is
    /// slow or unreachable (KIP-794; Java weighs every partition by its queue, kprod looks at
    /// a bounded window). `false`: simply the next partition with a leader.
    pub adaptive_partitioning: bool,
    /// SASL authentication of every connection (`security.protocol=SASL_PLAINTEXT|SASL_SSL`,
    /// `sasl.mechanism`, `sasl.username`, `sasl.password`), or `None`. Its `Debug` output
    /// never shows the password.
    pub sasl: Option<crate::sasl::SaslConfig>,
    /// Per-API maximum protocol versions (`kprod.max.produce.version`,
    /// `kprod.max.metadata.version`, `kprod.max.init.producer.id.version`): every connection
    /// negotiates the highest version both sides support, but never above these. Uncapped by
    /// default. Use it to pin a producer to what an old broker speaks, or to test old versions
    /// against a new broker; the versions each connection speaks appear in
    /// [`crate::Diagnostic::Connected`].
    pub max_versions: MaxVersions,
    /// `kprod.broker.version.max`: the Apache Kafka release (`2.3`, `3.9.1`, ...) whose
    /// maximum versions of Produce, Metadata, InitProducerId and ApiVersions cap every
    /// connection, on top of `max_versions` (the lower cap wins, per API: see
    /// [`ProducerConfig::version_caps`] and [`MaxVersions::kafka_release`]). For a cluster
    /// that must be spoken to as an older release would be (a broker behind a proxy that
    /// misreports its versions, a rolling downgrade). Unlike librdkafka's
    /// `broker.version.fallback` (used only when a broker does not answer ApiVersions), kprod
    /// still negotiates: it never speaks above what the broker advertises either. Releases
    /// before 0.11 and unknown ones are refused.
    pub broker_version_max: Option<String>,
    /// Emit [`crate::Diagnostic::BatchSent`], `BatchAcked` and `BatchFailed`: each batch's
    /// lifecycle, for tracing one batch through the producer. Off by default (a few events
    /// per batch); kprod-tokio turns it on when its `kprod_tokio::batch` log target is enabled
    /// at debug level.
    pub batch_diagnostics: bool,
    /// The driver reports how much of each connection's stream it has written
    /// ([`crate::Producer::handle_writing`]): a request's `request.timeout.ms` then runs from
    /// when the writer reached it, not from when it was queued, as the Java client's does
    /// (it hands a connection a request once the one before is written). On a link slower
    /// than the requests queued on it, a request waiting behind others timed out before it
    /// was written, and its connection was closed with the others half-sent (a review
    /// finding). Off by default: a request's time runs from its creation.
    /// kprod-tokio turns it on.
    pub write_reports: bool,
    /// A driver that drains the producer later than the deadline it was last given
    /// ([`crate::Output::Wait`]) by more than this, whatever its inputs before (a timer, a
    /// read, a send), was stalled (the process stopped or paused, a VM paused, the
    /// runtime's thread blocked by the application): the timeouts that passed meanwhile
    /// (requests', connects', delivery timeouts; not an idle connection's, which waits for
    /// no answer) wait this much longer, from that drain, so that answers that
    /// arrived during the stall, still in the sockets, are read first. A driver late again
    /// gets another grace only once the timeouts have run (one late at every wake-up still
    /// times a hung broker out). Without it a stall longer than `request.timeout.ms` closed every
    /// connection whose answer was waiting to be read (its batches retried), and one longer
    /// than `delivery.timeout.ms` failed records the broker had acknowledged, as possibly
    /// persisted (a review finding; Java's `NetworkClient` reads what arrived before it
    /// looks at timeouts, though its `Sender` expires batches before that). Off by default (a
    /// driver that hands the core its inputs in one go needs none); kprod-tokio sets it to
    /// one second unless it is set. `Some(Duration::ZERO)` is the same as `None` (and turns it
    /// off in kprod-tokio).
    pub late_wake_grace: Option<Duration>,
    /// The planted bug to run with (model checking only).
    #[cfg(feature = "mutations")]
    pub mutation: crate::mutation::Mutation,
}

impl ProducerConfig {
    /// The largest duration the producer uses (100 years): a larger one in any duration
    /// setting means "effectively never" and is replaced by this one, small enough that a
    /// deadline `now + MAX_DURATION` fits an `Instant` on every platform.
    pub const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

    /// This configuration with every duration capped at [`Self::MAX_DURATION`], and a
    /// late-wake grace of zero as none.
    pub(crate) fn with_durations_capped(mut self) -> Self {
        for d in [
            &mut self.linger,
            &mut self.request_timeout,
            &mut self.connect_timeout,
            &mut self.delivery_timeout,
            &mut self.retry_backoff,
            &mut self.retry_backoff_max,
            &mut self.reconnect_backoff,
            &mut self.metadata_max_age,
            &mut self.max_block,
        ] {
            *d = (*d).min(Self::MAX_DURATION);
        }
        for d in [
            &mut self.producer_id_expiration,
            &mut self.metadata_max_idle,
            &mut self.connections_max_idle,
            &mut self.bootstrap_patience,
            &mut self.metadata_recovery_rebootstrap_trigger,
            &mut self.connect_timeout_max,
            &mut self.reconnect_backoff_max,
        ]
        .into_iter()
        .flatten()
        {
            *d = (*d).min(Self::MAX_DURATION);
        }
        // A `retry.backoff.ms` above the maximum is a constant backoff of that value.
        self.retry_backoff_max = self.retry_backoff_max.max(self.retry_backoff);
        // A grace of zero held every timeout back to a grace that ended at the very drain
        // that started it, with no deadline given for them (a review finding).
        self.late_wake_grace = self.late_wake_grace.filter(|g| !g.is_zero());
        self
    }

    /// Kafka's default `producer.id.expiration.ms` (1 day; brokers before 3.0 keep producer
    /// state longer, `transactional.id.expiration.ms`, 7 days).
    pub const BROKER_PRODUCER_ID_EXPIRATION: Duration = Duration::from_secs(24 * 60 * 60);

    /// How long a partition may idle before the broker may have forgotten this producer:
    /// `producer_id_expiration`, else the lesser of `delivery.timeout.ms` and the brokers'
    /// default expiry (a delivery timeout of "forever", 24.8 days, must not make a partition
    /// idle for days pipeline as if the broker still knew it).
    pub fn producer_state_expiry(&self) -> Duration {
        (self.producer_id_expiration).unwrap_or(
            self.delivery_timeout
                .min(Self::BROKER_PRODUCER_ID_EXPIRATION),
        )
    }

    /// The most the reconnect backoff doubles to: `reconnect_backoff_max`, else
    /// `retry_backoff_max`.
    pub(crate) fn reconnect_backoff_cap(&self) -> Duration {
        self.reconnect_backoff_max.unwrap_or(self.retry_backoff_max)
    }

    /// The version caps every connection negotiates under: `max_versions`, lowered per API
    /// by the release in `broker_version_max` (uncapped if it does not validate).
    pub fn version_caps(&self) -> MaxVersions {
        match self
            .broker_version_max
            .as_deref()
            .map(MaxVersions::kafka_release)
        {
            Some(Ok(release)) => self.max_versions.min(release),
            _ => self.max_versions,
        }
    }

    /// The compression of `topic`'s batches: its override, else `compression`.
    pub fn compression_for(&self, topic: &str) -> Compression {
        self.topic_compression
            .get(topic)
            .copied()
            .unwrap_or(self.compression)
    }
}

impl Default for ProducerConfig {
    fn default() -> Self {
        Self {
            bootstrap_servers: Vec::new(),
            client_id: Some("kprod".to_owned()),
            enable_idempotence: true,
            acks: -1,
            max_in_flight: 5,
            linger: Duration::from_millis(5),
            batch_size: 16 * 1024,
            buffer_memory: 32 * 1024 * 1024,
            record_overhead: 0,
            max_buffered_records: None,
            max_batch_records: None,
            max_request_size: 1024 * 1024,
            max_batches_per_request: None,
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            connect_timeout_max: Some(Duration::from_secs(30)),
            bootstrap_patience: Some(Duration::from_secs(1)),
            delivery_timeout: Duration::from_secs(120),
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_secs(1),
            reconnect_backoff: Duration::from_millis(50),
            reconnect_backoff_max: None,
            backoff_jitter_percent: 20,
            metadata_max_age: Duration::from_secs(300),
            metadata_recovery_rebootstrap_trigger: Some(Duration::from_secs(300)),
            allow_auto_topic_creation: true,
            metadata_max_idle: Some(Duration::from_secs(300)),
            connections_max_idle: Some(Duration::from_secs(540)),
            max_block: Duration::from_secs(60),
            gap_policy: GapPolicy::default(),
            data_loss_policy: DataLossPolicy::default(),
            max_frame_size: crate::protocol::frame::DEFAULT_MAX_FRAME_SIZE,
            client_software_name: "kprod".to_owned(),
            client_software_version: env!("CARGO_PKG_VERSION").to_owned(),
            max_epoch: i16::MAX,
            max_sequence: i32::MAX,
            producer_id_expiration: None,
            compression: Compression::NONE,
            partitioner: crate::partitioner::Partitioner::Murmur2Random,
            adaptive_partitioning: true,
            topic_compression: BTreeMap::new(),
            sasl: None,
            max_versions: MaxVersions::NONE,
            broker_version_max: None,
            batch_diagnostics: false,
            write_reports: false,
            late_wake_grace: None,
            #[cfg(feature = "mutations")]
            mutation: crate::mutation::Mutation::None,
        }
    }
}

/// A configuration that cannot work, with the setting at fault.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ConfigError {
    /// The Kafka property name of the setting.
    pub setting: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid {}: {}", self.setting, self.reason)
    }
}

impl std::error::Error for ConfigError {}

fn err(setting: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        setting,
        reason: reason.into(),
    }
}

/// `d` in milliseconds, as the properties give durations: whole milliseconds as an integer,
/// a fraction only when there is one (`1.5`).
fn millis(d: Duration) -> String {
    let ms = d.as_millis();
    let sub_ms = d.subsec_nanos() % 1_000_000;
    if sub_ms == 0 {
        ms.to_string()
    } else {
        let fraction = format!("{sub_ms:06}");
        format!("{ms}.{}", fraction.trim_end_matches('0'))
    }
}

/// Whether `s` is a valid ApiVersions v3 software name or version (KIP-511).
fn is_software_token(s: &str) -> bool {
    let b = s.as_bytes();
    let ok_end = |c: &u8| c.is_ascii_alphanumeric();
    !b.is_empty()
        && b.first().is_some_and(ok_end)
        && b.last().is_some_and(ok_end)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'.')
}

impl ProducerConfig {
    /// How full a batch grows before it is sent: `batch.size`, but never past
    /// `max.request.size` (librdkafka caps its batches so; before, a batch filled to
    /// `batch.size` whatever `max.request.size` said, and went alone in a request larger
    /// than it: 16,393 B under a 5,000 B `max.request.size`, found by a review probe).
    pub(crate) fn batch_fill(&self) -> usize {
        self.batch_size.min(self.max_request_size)
    }

    /// The most batches (partitions) one Produce request carries: as many full batches as
    /// `max.request.size` holds, and at least 16. A request of full batches is unchanged;
    /// small batches of many partitions no longer go a thousand to a request: the
    /// partitions left out keep filling their batches until a later request (which starts
    /// with them). Against Tansu with 1,000 partitions (records spread evenly) every request
    /// held one batch of each of ~150–1,000 partitions of 20–45 records and the broker's cost
    /// per batch set the pace: 114,261 records/s, 8.5 µs of broker CPU per record; with at
    /// most 64 per request 227,017 (4.3 µs), with 16 332,504, in one run (in another, 64:
    /// 144,990 against librdkafka's 170,689, 0.85×, where it was 0.61×). Kafka 4.4 with the
    /// same 1,000 partitions, already written to: the same with or without (0.8–1.1 million
    /// records/s).
    pub(crate) fn max_batches_per_request(&self) -> usize {
        if let Some(most) = self.max_batches_per_request {
            return most;
        }
        (self.max_request_size / self.batch_fill().max(1)).max(16)
    }

    /// Checks every setting and returns the first problem found.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.bootstrap_servers.is_empty() {
            return Err(err(
                "bootstrap.servers",
                "at least one host:port is required",
            ));
        }
        for s in &self.bootstrap_servers {
            if let Some(problem) = address_problem(s) {
                return Err(err(
                    "bootstrap.servers",
                    format!("{s:?} is not host:port: {problem}"),
                ));
            }
        }
        if self.metadata_max_idle == Some(Duration::ZERO) {
            return Err(err(
                "metadata.max.idle.ms",
                "0 would leave a topic out of metadata requests as soon as it holds no record \
                 (the Java client's minimum is 5000 ms; None keeps every topic)"
                    .to_owned(),
            ));
        }
        if self.connections_max_idle == Some(Duration::ZERO) {
            return Err(err(
                "connections.max.idle.ms",
                "0 would close every connection as soon as its last answer arrives (None never \
                 closes an idle connection)"
                    .to_owned(),
            ));
        }
        if !(-1..=1).contains(&self.acks) {
            return Err(err(
                "acks",
                format!("{} is not all (-1), 1 or 0", self.acks),
            ));
        }
        if self.enable_idempotence && self.acks != -1 {
            return Err(err(
                "acks",
                format!(
                    "acks={} needs enable.idempotence=false: idempotence requires acks=all \
                     (-1), since a record acknowledged by the leader alone can be lost and \
                     its sequence with it",
                    self.acks
                ),
            ));
        }
        if !(1..=5).contains(&self.max_in_flight) {
            let n = self.max_in_flight;
            let reason = if n == 0 {
                "0 would never send a request: at least 1 must be allowed in flight".to_owned()
            } else if self.enable_idempotence {
                format!("{n} is outside 1..=5, the range idempotence allows")
            } else {
                format!(
                    "{n} is above 5, kprod's most with or without idempotence (it also bounds a \
                     partition's unresolved batches; the Java client takes more when \
                     enable.idempotence=false)"
                )
            };
            return Err(err("max.in.flight.requests.per.connection", reason));
        }
        // Kafka's sizes are 32-bit on the wire (and in the Java client's config): a larger
        // value could not be encoded, and would overflow the batch accounting.
        const SIZE_MAX: usize = i32::MAX as usize;
        if self.batch_size == 0 || self.batch_size > SIZE_MAX {
            return Err(err("batch.size", "must be in 1..=2147483647"));
        }
        if !(1024..=SIZE_MAX).contains(&self.max_request_size) {
            return Err(err(
                "max.request.size",
                "must be in 1024..=2147483647 bytes",
            ));
        }
        if self.buffer_memory == 0 {
            return Err(err(
                "buffer.memory",
                "must be at least 1 byte (a record larger than it is taken when nothing else \
                 is held)",
            ));
        }
        if self.max_buffered_records == Some(0) {
            return Err(err("queue.buffering.max.messages", "must be at least 1"));
        }
        if self.max_batches_per_request == Some(0) {
            return Err(err("kprod.max.batches.per.request", "must be at least 1"));
        }
        if self.max_batch_records == Some(0) {
            return Err(err("batch.num.messages", "must be at least 1"));
        }
        if self.record_overhead > 1 << 20 {
            return Err(err("record_overhead", "must be at most 1 MiB"));
        }
        if self.connect_timeout.is_zero() {
            return Err(err(
                "socket.connection.setup.timeout.ms",
                "must be positive",
            ));
        }
        if self.request_timeout.is_zero() {
            return Err(err("request.timeout.ms", "must be positive"));
        }
        // Saturating: huge durations mean "never" and must not overflow here; a delivery
        // timeout of "never" outlasts any linger and request timeout.
        // The sum is held to 2^31 - 1 ms, as the Java client holds it (its
        // `delivery.timeout.ms` is an int): else no value both clients take would do.
        let never = Self::MAX_DURATION;
        let int_max = Duration::from_millis(i32::MAX as u64);
        if self.delivery_timeout.min(never)
            < (self.linger.saturating_add(self.request_timeout))
                .min(never)
                .min(int_max)
        {
            return Err(err(
                "delivery.timeout.ms",
                format!(
                    "delivery.timeout.ms={} is below linger.ms + request.timeout.ms = {} + {}: \
                     it must be at least their sum",
                    millis(self.delivery_timeout),
                    millis(self.linger),
                    millis(self.request_timeout),
                ),
            ));
        }
        if self.backoff_jitter_percent > 50 {
            return Err(err(
                "kprod.backoff.jitter.percent",
                format!(
                    "{} %: at most 50, so that no backoff falls below half its value",
                    self.backoff_jitter_percent
                ),
            ));
        }
        if self.max_frame_size < self.max_request_size.min(1 << 20) {
            // librdkafka's name for it; the Java client has none.
            return Err(err(
                "receive.message.max.bytes",
                "is too small for a Produce response (at least max.request.size, up to 1 MiB)",
            ));
        }
        if self.max_epoch < 1 {
            return Err(err("max.epoch", "must be at least 1"));
        }
        if self.max_sequence < 1 {
            return Err(err("max.sequence", "must be at least 1"));
        }
        self.compression
            .check()
            .map_err(|reason| err("compression.type", reason))?;
        for (topic, c) in &self.topic_compression {
            c.check()
                .map_err(|reason| err("compression.type", format!("topic {topic:?}: {reason}")))?;
        }
        if let Some(sasl) = &self.sasl {
            sasl.validate()?;
        }
        self.max_versions
            .check()
            .map_err(|(setting, reason)| err(setting, reason))?;
        if let Some(release) = &self.broker_version_max {
            MaxVersions::kafka_release(release)
                .map_err(|reason| err("kprod.broker.version.max", reason))?;
        }
        if let Some(id) = &self.client_id {
            if id.len() > i16::MAX as usize {
                return Err(err("client.id", "too long"));
            }
        }
        if !is_software_token(&self.client_software_name) {
            return Err(err(
                "client.software.name",
                "must match [a-zA-Z0-9](?:[a-zA-Z0-9-.]*[a-zA-Z0-9])?",
            ));
        }
        if !is_software_token(&self.client_software_version) {
            return Err(err(
                "client.software.version",
                "must match [a-zA-Z0-9](?:[a-zA-Z0-9-.]*[a-zA-Z0-9])?",
            ));
        }
        Ok(())
    }
}

/// What is wrong with a bootstrap server's `host:port` (`None` if nothing): a host name, an
/// IPv4 address or an IPv6 address (bracketed, or bare as the part before the last colon),
/// and a port from 1 to 65535. Whatever else would only fail to connect, record after record,
/// until `delivery.timeout.ms`.
fn address_problem(s: &str) -> Option<&'static str> {
    if s.contains(',') {
        return Some("one address per entry (split a comma-separated list)");
    }
    if s.contains("://") {
        return Some(
            "a listener's protocol prefix (PLAINTEXT://, SSL://, ...) is not part of the \
             address (the properties parser strips it, as the Java client does)",
        );
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Some("no port");
    };
    match port.parse::<u16>() {
        Ok(0) => return Some("port 0"),
        Ok(_) => {}
        Err(_) => return Some("the port is not a number from 1 to 65535"),
    }
    let bare = match host.strip_prefix('[') {
        Some(inner) => match inner.strip_suffix(']') {
            Some(inner) if inner.contains(':') => inner,
            _ => return Some("a bracketed host must be an IPv6 address"),
        },
        None => host,
    };
    if bare.is_empty() {
        return Some("no host");
    }
    // A host with a colon is an IPv6 address (a zone after `%` allowed): else the port was
    // left out of one (`::1`, `2001:db8::10`), and the last group was taken for the port
    // (a review finding: accepted, and never connected).
    if bare.contains(':')
        && (bare.split('%').next()).is_none_or(|a| a.parse::<std::net::Ipv6Addr>().is_err())
    {
        return Some(
            "a host with ':' must be an IPv6 address (port missing? write [address]:port, as \
             [::1]:9092)",
        );
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '%');
    if !bare.chars().all(allowed) {
        return Some("the host has a character no host name or address has");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> ProducerConfig {
        ProducerConfig {
            bootstrap_servers: vec!["127.0.0.1:9092".into()],
            ..Default::default()
        }
    }

    #[test]
    fn defaults_with_a_bootstrap_are_valid() {
        base().validate().unwrap();
    }

    #[test]
    fn acks_zero_and_one_need_idempotence_off_and_acks_all_takes_either() {
        for acks in [0, 1] {
            let on = ProducerConfig { acks, ..base() };
            let e = on.validate().unwrap_err();
            assert_eq!(e.setting, "acks");
            assert!(e.to_string().contains("enable.idempotence=false"), "{e}");
            ProducerConfig {
                acks,
                enable_idempotence: false,
                ..base()
            }
            .validate()
            .unwrap();
        }
        ProducerConfig {
            enable_idempotence: false,
            ..base()
        }
        .validate()
        .unwrap();
    }

    #[test]
    fn a_broker_release_lowers_the_caps_per_api() {
        let cfg = ProducerConfig {
            broker_version_max: Some("2.3".into()),
            max_versions: MaxVersions {
                produce: Some(5),
                ..MaxVersions::NONE
            },
            ..base()
        };
        cfg.validate().unwrap();
        assert_eq!(
            cfg.version_caps(),
            MaxVersions {
                produce: Some(5),
                metadata: Some(8),
                init_producer_id: Some(1),
                api_versions: Some(2),
            }
        );
        assert_eq!(base().version_caps(), MaxVersions::NONE);
    }

    /// Probe finding: `PLAINTEXT://host:port`, a host with a space or a `;` were taken, and
    /// every record then waited for its delivery timeout with nothing said.
    #[test]
    fn a_bootstrap_server_is_a_host_and_a_port() {
        let check = |s: &str| {
            ProducerConfig {
                bootstrap_servers: vec![s.into()],
                ..base()
            }
            .validate()
        };
        for good in [
            "localhost:9092",
            "broker-1.kafka_svc.example.com:9092",
            "127.0.0.1:1",
            "[::1]:9092",
            "::1:9092",
            "[fe80::1%eth0]:65535",
        ] {
            assert!(check(good).is_ok(), "{good}: {:?}", check(good));
        }
        for (bad, why) in [
            ("PLAINTEXT://127.0.0.1:9092", "protocol prefix"),
            ("127.0.0.1 :9092", "character"),
            ("a;b:9092", "character"),
            ("a:9092,b:9092", "one address per entry"),
            ("host/path:9092", "character"),
            ("127.0.0.1", "no port"),
            ("127.0.0.1:", "port is not a number"),
            ("127.0.0.1:65536", "port is not a number"),
            ("127.0.0.1:0", "port 0"),
            (":9092", "no host"),
            ("[]:9092", "bracketed"),
            ("[localhost]:9092", "bracketed"),
            ("::1", "port missing"),
            ("2001:db8::10", "port missing"),
            ("[2001:db8:]:9092", "port missing"),
        ] {
            let e = check(bad).expect_err(bad);
            assert_eq!(e.setting, "bootstrap.servers");
            assert!(e.reason.contains(why), "{bad}: {}", e.reason);
            assert!(
                e.reason.contains(bad),
                "{bad}: names the address: {}",
                e.reason
            );
        }
    }

    /// Review finding (2026-12-05, again): configurations the Java client takes were
    /// refused: `max.request.size` above `buffer.memory` (a record larger than the buffer is
    /// taken when nothing else is held), `retry.backoff.ms` above `retry.backoff.max.ms`
    /// (pre-3.7 tuning: a constant backoff of `retry.backoff.ms`), and a request timeout of
    /// 2^31 - 1 ms with a delivery timeout of the same (Java holds their sum to that).
    #[test]
    fn settings_the_java_client_takes_are_taken() {
        ProducerConfig {
            max_request_size: 100_000_000,
            ..base()
        }
        .validate()
        .unwrap();
        let slow = ProducerConfig {
            retry_backoff: Duration::from_secs(2),
            ..base()
        };
        slow.validate().unwrap();
        let capped = slow.with_durations_capped();
        assert_eq!(capped.retry_backoff_max, Duration::from_secs(2));
        let int_max = Duration::from_millis(i32::MAX as u64);
        ProducerConfig {
            request_timeout: int_max,
            delivery_timeout: int_max,
            ..base()
        }
        .validate()
        .unwrap();
        let e = ProducerConfig {
            buffer_memory: 0,
            ..base()
        }
        .validate()
        .unwrap_err();
        assert_eq!(e.setting, "buffer.memory");
    }

    /// A delivery timeout of "forever" (2^31 - 1 ms, 24.8 days) must not stretch the idle
    /// time after which a partition sends one batch alone past the brokers' default
    /// producer id expiry (1 day), or a partition idle for days pipelines as if the broker
    /// still knew the producer (KAFKA-15591).
    #[test]
    fn the_idle_expiry_is_at_most_the_brokers_default() {
        let forever = ProducerConfig {
            delivery_timeout: Duration::from_millis(i32::MAX as u64),
            ..base()
        };
        assert_eq!(
            forever.producer_state_expiry(),
            Duration::from_secs(24 * 60 * 60)
        );
        assert_eq!(base().producer_state_expiry(), base().delivery_timeout);
        let set = ProducerConfig {
            producer_id_expiration: Some(Duration::from_secs(7 * 24 * 3600)),
            ..forever
        };
        assert_eq!(
            set.producer_state_expiry(),
            Duration::from_secs(7 * 24 * 3600)
        );
    }

    /// Review finding: the message gave the rule but not the values that broke it.
    #[test]
    fn the_delivery_timeout_rule_names_the_values() {
        let e = ProducerConfig {
            delivery_timeout: Duration::from_secs(1),
            ..base()
        }
        .validate()
        .unwrap_err();
        assert_eq!(e.setting, "delivery.timeout.ms");
        assert_eq!(
            e.to_string(),
            "invalid delivery.timeout.ms: delivery.timeout.ms=1000 is below linger.ms + \
             request.timeout.ms = 5 + 30000: it must be at least their sum"
        );
        // A fraction of a millisecond (a struct user's value) is shown, not rounded away.
        let e = ProducerConfig {
            delivery_timeout: Duration::from_micros(30_004_500),
            ..base()
        }
        .validate()
        .unwrap_err();
        assert!(
            e.reason.starts_with(
                "delivery.timeout.ms=30004.5 is below linger.ms + request.timeout.ms = 5 + 30000"
            ),
            "{e}"
        );
        // The sum itself is enough.
        ProducerConfig {
            delivery_timeout: Duration::from_millis(30_005),
            ..base()
        }
        .validate()
        .unwrap();
        assert_eq!(millis(Duration::from_nanos(1_000_001)), "1.000001");
        assert_eq!(millis(Duration::from_micros(2_250)), "2.25");
    }

    /// Review finding: without idempotence, a `max.in.flight` above 5 was refused for a
    /// reason that did not apply ("the range idempotence allows").
    #[test]
    fn max_in_flight_gives_the_reason_that_applies() {
        let reason = |max_in_flight, enable_idempotence| {
            let e = ProducerConfig {
                max_in_flight,
                enable_idempotence,
                ..base()
            }
            .validate()
            .unwrap_err();
            assert_eq!(e.setting, "max.in.flight.requests.per.connection");
            e.reason
        };
        for idempotence in [true, false] {
            let r = reason(0, idempotence);
            assert!(r.contains("at least 1"), "{r}");
            assert!(!r.contains("idempotence"), "{r}");
        }
        let r = reason(6, true);
        assert_eq!(r, "6 is outside 1..=5, the range idempotence allows");
        let r = reason(6, false);
        assert!(r.starts_with("6 is above 5, kprod's most"), "{r}");
        assert!(!r.contains("idempotence allows"), "{r}");
        ProducerConfig {
            max_in_flight: 5,
            enable_idempotence: false,
            ..base()
        }
        .validate()
        .unwrap();
    }

    #[test]
    fn each_bad_setting_is_named() {
        let cases: Vec<(ProducerConfig, &str)> = vec![
            (ProducerConfig::default(), "bootstrap.servers"),
            (
                ProducerConfig {
                    bootstrap_servers: vec!["nohost".into()],
                    ..base()
                },
                "bootstrap.servers",
            ),
            (ProducerConfig { acks: 1, ..base() }, "acks"),
            (ProducerConfig { acks: 0, ..base() }, "acks"),
            (
                ProducerConfig {
                    acks: 2,
                    enable_idempotence: false,
                    ..base()
                },
                "acks",
            ),
            (
                ProducerConfig {
                    max_in_flight: 0,
                    ..base()
                },
                "max.in.flight.requests.per.connection",
            ),
            (
                ProducerConfig {
                    max_in_flight: 6,
                    ..base()
                },
                "max.in.flight.requests.per.connection",
            ),
            (
                ProducerConfig {
                    batch_size: 0,
                    ..base()
                },
                "batch.size",
            ),
            (
                ProducerConfig {
                    buffer_memory: 0,
                    ..base()
                },
                "buffer.memory",
            ),
            (
                ProducerConfig {
                    delivery_timeout: Duration::from_secs(1),
                    ..base()
                },
                "delivery.timeout.ms",
            ),
            (
                ProducerConfig {
                    client_software_version: "1.0-".into(),
                    ..base()
                },
                "client.software.version",
            ),
            (
                ProducerConfig {
                    max_versions: MaxVersions {
                        produce: Some(2),
                        ..MaxVersions::NONE
                    },
                    ..base()
                },
                "kprod.max.produce.version",
            ),
            (
                ProducerConfig {
                    broker_version_max: Some("0.10.2".into()),
                    ..base()
                },
                "kprod.broker.version.max",
            ),
            (
                ProducerConfig {
                    broker_version_max: Some("5.0".into()),
                    ..base()
                },
                "kprod.broker.version.max",
            ),
            (
                ProducerConfig {
                    max_versions: MaxVersions {
                        init_producer_id: Some(6),
                        ..MaxVersions::NONE
                    },
                    ..base()
                },
                "kprod.max.init.producer.id.version",
            ),
        ];
        for (cfg, setting) in cases {
            assert_eq!(cfg.validate().unwrap_err().setting, setting, "{cfg:?}");
        }
    }
}
