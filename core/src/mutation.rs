//! Planted bugs for the model checker's non-vacuity tests (cargo feature `mutations`, off by
//! default, never a default feature).
//!
//! Each variant re-introduces one realistic bug class inside a core decision; the model suite
//! (`model/tests/check.rs`) selects it through [`crate::ProducerConfig::mutation`] and must
//! catch it with a named property. [`Mutation::None`] is the real producer.

/// A planted bug, selected at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mutation {
    /// The real producer.
    #[default]
    None,
    /// KAFKA-15591 after idle expiry: no one-batch probe after the partition idled longer than
    /// the broker's producer-state expiry, so a retriable error on the first batch lets the
    /// broker accept the second at a gap.
    NoIdleProbe,
    /// A transmitted batch that reaches its delivery timeout is reported not persisted.
    TimeoutForgetsAttempts,
    /// P7 dropped: batches go to a new leader while the old connection still has some.
    NoDrainBeforeLeaderChange,
    /// P11 dropped (librdkafka's implicit ack): a later acknowledgement acknowledges the
    /// overtaken earlier batches too.
    ImplicitAckOvertaken,
    /// P2 dropped: a retry is re-encoded, its records in reverse order.
    RetryReencoded,
    /// A head-of-line OUT_OF_ORDER / UNKNOWN_PRODUCER_ID is retried as it is, forever.
    HeadRejectionRetried,
    /// A partition moving to a new producer id keeps counting its old sequences.
    NewPidKeepsSequence,
    /// The gap policies `CutPartition` and `Fatal` behave like `ContinueWithGap`.
    GapPolicyIgnored,
    /// Errors that can come after the append taken as not persisted: UNKNOWN_SERVER_ERROR,
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND, and under acks=all NOT_LEADER_OR_FOLLOWER and
    /// KAFKA_STORAGE_ERROR.
    AfterAppendNotPersisted,
    /// New batches are sequenced behind a batch that may already be in the log.
    SequenceBehindPossiblyWritten,
    /// The per-partition in-flight bound is off by one.
    InflightOffByOne,
    /// DUPLICATE_SEQUENCE_NUMBER acknowledged at offset -1 instead of without an offset.
    DuplicateAtMinusOne,
    /// The time in a retry's answer taken for the log append time on any topic: Kafka
    /// answers a duplicate with the stored batch's largest timestamp, CreateTime topics too
    /// (the Java client takes any time in an answer for the log's).
    DuplicateTimeTrusted,
    /// Sequences wrap one early (at `max_sequence` instead of past it).
    EarlyWrap,
    /// Sequences wrap one late (past `max_sequence + 1`: the next after the largest is sent).
    LateWrap,
    /// A partition's outcomes go out as the producer learns them: a later batch answered
    /// while an earlier one is retried is reported first.
    OutcomesAsLearned,
    /// A broker without KIP-360 (InitProducerId below v3, Apache Kafka before 2.5) gets a
    /// local epoch bump, as a new broker would, instead of a new producer id.
    LocalBumpWithoutKip360,
    /// A broker speaking Produce v3 at most (Kafka 0.11, which caches a producer's last batch
    /// only) gets the configured in-flight window instead of one batch at a time.
    FullWindowOnKafka011,
    /// An error after the append (NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT and
    /// NOT_LEADER_OR_FOLLOWER with an offset) taken for a delivery at that offset, since
    /// the leader wrote the batch: a new leader without it truncates it.
    AfterAppendDelivered,
    /// An OUT_OF_ORDER_SEQUENCE_NUMBER behind an earlier unresolved batch (not the head of
    /// line) judged as a head-of-line refusal: with no log start past the last
    /// acknowledgement, a spurious data-loss signal (D15, KAFKA-5793; librdkafka#4438).
    NonHeadTreatedAsHead,
    /// UNKNOWN_PRODUCER_ID at the head of line judged by the log start alone, as OUT_OF_ORDER
    /// is: a broker that forgot an idle producer (its expiry) taken for one that lost
    /// acknowledged records (D14: KafkaJS #485, aiokafka #510, sarama #1737 fail on it).
    UnknownPidAsDataLoss,
    /// An exhausted epoch bumped once more (past `max_epoch`) instead of a new producer id
    /// being taken: past `i16::MAX` Kafka's epoch turns negative and is refused.
    EpochPastMax,
}
