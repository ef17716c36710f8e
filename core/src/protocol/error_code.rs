//! Kafka error codes, with the classification a producer needs.
//!
//! Unknown codes round-trip through [`ErrorCode::Unknown`] instead of failing (the rustls
//! `enum_builder!` idea). The classification follows idempotence-spec §B.3.
//!
//! References: apache/kafka `clients/src/main/java/org/apache/kafka/common/protocol/Errors.java`.

/// A Kafka error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ErrorCode {
    /// UNKNOWN_SERVER_ERROR (-1).
    UnknownServerError,
    /// NONE (0).
    None,
    /// OFFSET_OUT_OF_RANGE (1).
    OffsetOutOfRange,
    /// CORRUPT_MESSAGE (2).
    CorruptMessage,
    /// UNKNOWN_TOPIC_OR_PARTITION (3).
    UnknownTopicOrPartition,
    /// INVALID_FETCH_SIZE (4).
    InvalidFetchSize,
    /// LEADER_NOT_AVAILABLE (5).
    LeaderNotAvailable,
    /// NOT_LEADER_OR_FOLLOWER (6).
    NotLeaderOrFollower,
    /// REQUEST_TIMED_OUT (7).
    RequestTimedOut,
    /// BROKER_NOT_AVAILABLE (8).
    BrokerNotAvailable,
    /// REPLICA_NOT_AVAILABLE (9).
    ReplicaNotAvailable,
    /// MESSAGE_TOO_LARGE (10).
    MessageTooLarge,
    /// NETWORK_EXCEPTION (13).
    NetworkException,
    /// COORDINATOR_LOAD_IN_PROGRESS (14).
    CoordinatorLoadInProgress,
    /// COORDINATOR_NOT_AVAILABLE (15).
    CoordinatorNotAvailable,
    /// NOT_COORDINATOR (16).
    NotCoordinator,
    /// INVALID_TOPIC_EXCEPTION (17).
    InvalidTopicException,
    /// RECORD_LIST_TOO_LARGE (18).
    RecordListTooLarge,
    /// NOT_ENOUGH_REPLICAS (19).
    NotEnoughReplicas,
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND (20).
    NotEnoughReplicasAfterAppend,
    /// INVALID_REQUIRED_ACKS (21).
    InvalidRequiredAcks,
    /// TOPIC_AUTHORIZATION_FAILED (29).
    TopicAuthorizationFailed,
    /// CLUSTER_AUTHORIZATION_FAILED (31).
    ClusterAuthorizationFailed,
    /// INVALID_TIMESTAMP (32).
    InvalidTimestamp,
    /// UNSUPPORTED_VERSION (35).
    UnsupportedVersion,
    /// NOT_CONTROLLER (41). Retriable in Kafka's `Errors`; no meaning for Produce.
    NotController,
    /// INVALID_REQUEST (42).
    InvalidRequest,
    /// UNSUPPORTED_FOR_MESSAGE_FORMAT (43).
    UnsupportedForMessageFormat,
    /// POLICY_VIOLATION (44). Redpanda refuses every Produce so, before writing, in its
    /// recovery mode and past a virtual cluster's producer limit: not persisted.
    PolicyViolation,
    /// OUT_OF_ORDER_SEQUENCE_NUMBER (45).
    OutOfOrderSequenceNumber,
    /// DUPLICATE_SEQUENCE_NUMBER (46).
    DuplicateSequenceNumber,
    /// INVALID_PRODUCER_EPOCH (47).
    InvalidProducerEpoch,
    /// INVALID_TXN_STATE (48).
    InvalidTxnState,
    /// INVALID_PRODUCER_ID_MAPPING (49).
    InvalidProducerIdMapping,
    /// CONCURRENT_TRANSACTIONS (51).
    ConcurrentTransactions,
    /// TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53).
    TransactionalIdAuthorizationFailed,
    /// KAFKA_STORAGE_ERROR (56).
    KafkaStorageError,
    /// SASL_AUTHENTICATION_FAILED (58). Not a Produce answer: what a delivery timeout
    /// reports when the connections to a partition's leader were refused authentication.
    SaslAuthenticationFailed,
    /// UNKNOWN_PRODUCER_ID (59).
    UnknownProducerId,
    /// FETCH_SESSION_ID_NOT_FOUND (70). Retriable in Kafka's `Errors`; Fetch's.
    FetchSessionIdNotFound,
    /// INVALID_FETCH_SESSION_EPOCH (71). Retriable in Kafka's `Errors`; Fetch's.
    InvalidFetchSessionEpoch,
    /// LISTENER_NOT_FOUND (72): the leader has no endpoint on the listener the producer
    /// uses (brokers mid-way through a listener change).
    ListenerNotFound,
    /// FENCED_LEADER_EPOCH (74).
    FencedLeaderEpoch,
    /// UNKNOWN_LEADER_EPOCH (75).
    UnknownLeaderEpoch,
    /// UNSUPPORTED_COMPRESSION_TYPE (76).
    UnsupportedCompressionType,
    /// OFFSET_NOT_AVAILABLE (78). Retriable in Kafka's `Errors`; no meaning for Produce.
    OffsetNotAvailable,
    /// PREFERRED_LEADER_NOT_AVAILABLE (80).
    PreferredLeaderNotAvailable,
    /// ELIGIBLE_LEADERS_NOT_AVAILABLE (83).
    EligibleLeadersNotAvailable,
    /// INVALID_RECORD (87).
    InvalidRecord,
    /// UNSTABLE_OFFSET_COMMIT (88). Retriable in Kafka's `Errors`; no meaning for Produce.
    UnstableOffsetCommit,
    /// THROTTLING_QUOTA_EXCEEDED (89).
    ThrottlingQuotaExceeded,
    /// PRODUCER_FENCED (90).
    ProducerFenced,
    /// UNKNOWN_TOPIC_ID (100).
    UnknownTopicId,
    /// INCONSISTENT_TOPIC_ID (103): the topic id sent is not the partition's (a topic
    /// deleted and created again, with requests that name topics by id).
    InconsistentTopicId,
    /// FETCH_SESSION_TOPIC_ID_ERROR (106). Retriable in Kafka's `Errors`; Fetch's.
    FetchSessionTopicIdError,
    /// TRANSACTION_ABORTABLE (120).
    TransactionAbortable,
    /// A code this crate has no name for.
    Unknown(i16),
}

impl ErrorCode {
    /// Every named code, for exhaustive tests.
    pub const ALL: &'static [Self] = &[
        Self::UnknownServerError,
        Self::None,
        Self::OffsetOutOfRange,
        Self::CorruptMessage,
        Self::UnknownTopicOrPartition,
        Self::InvalidFetchSize,
        Self::LeaderNotAvailable,
        Self::NotLeaderOrFollower,
        Self::RequestTimedOut,
        Self::BrokerNotAvailable,
        Self::ReplicaNotAvailable,
        Self::MessageTooLarge,
        Self::NetworkException,
        Self::CoordinatorLoadInProgress,
        Self::CoordinatorNotAvailable,
        Self::NotCoordinator,
        Self::InvalidTopicException,
        Self::RecordListTooLarge,
        Self::NotEnoughReplicas,
        Self::NotEnoughReplicasAfterAppend,
        Self::InvalidRequiredAcks,
        Self::TopicAuthorizationFailed,
        Self::ClusterAuthorizationFailed,
        Self::InvalidTimestamp,
        Self::UnsupportedVersion,
        Self::NotController,
        Self::InvalidRequest,
        Self::UnsupportedForMessageFormat,
        Self::PolicyViolation,
        Self::OutOfOrderSequenceNumber,
        Self::DuplicateSequenceNumber,
        Self::InvalidProducerEpoch,
        Self::InvalidTxnState,
        Self::InvalidProducerIdMapping,
        Self::ConcurrentTransactions,
        Self::TransactionalIdAuthorizationFailed,
        Self::KafkaStorageError,
        Self::SaslAuthenticationFailed,
        Self::UnknownProducerId,
        Self::FetchSessionIdNotFound,
        Self::InvalidFetchSessionEpoch,
        Self::ListenerNotFound,
        Self::FencedLeaderEpoch,
        Self::UnknownLeaderEpoch,
        Self::UnsupportedCompressionType,
        Self::OffsetNotAvailable,
        Self::PreferredLeaderNotAvailable,
        Self::EligibleLeadersNotAvailable,
        Self::InvalidRecord,
        Self::UnstableOffsetCommit,
        Self::ThrottlingQuotaExceeded,
        Self::ProducerFenced,
        Self::UnknownTopicId,
        Self::InconsistentTopicId,
        Self::FetchSessionTopicIdError,
        Self::TransactionAbortable,
    ];

    /// The code for a wire value.
    pub fn from_i16(code: i16) -> Self {
        match code {
            -1 => Self::UnknownServerError,
            0 => Self::None,
            1 => Self::OffsetOutOfRange,
            2 => Self::CorruptMessage,
            3 => Self::UnknownTopicOrPartition,
            4 => Self::InvalidFetchSize,
            5 => Self::LeaderNotAvailable,
            6 => Self::NotLeaderOrFollower,
            7 => Self::RequestTimedOut,
            8 => Self::BrokerNotAvailable,
            9 => Self::ReplicaNotAvailable,
            10 => Self::MessageTooLarge,
            13 => Self::NetworkException,
            14 => Self::CoordinatorLoadInProgress,
            15 => Self::CoordinatorNotAvailable,
            16 => Self::NotCoordinator,
            17 => Self::InvalidTopicException,
            18 => Self::RecordListTooLarge,
            19 => Self::NotEnoughReplicas,
            20 => Self::NotEnoughReplicasAfterAppend,
            21 => Self::InvalidRequiredAcks,
            29 => Self::TopicAuthorizationFailed,
            31 => Self::ClusterAuthorizationFailed,
            32 => Self::InvalidTimestamp,
            35 => Self::UnsupportedVersion,
            42 => Self::InvalidRequest,
            43 => Self::UnsupportedForMessageFormat,
            44 => Self::PolicyViolation,
            45 => Self::OutOfOrderSequenceNumber,
            46 => Self::DuplicateSequenceNumber,
            47 => Self::InvalidProducerEpoch,
            48 => Self::InvalidTxnState,
            49 => Self::InvalidProducerIdMapping,
            51 => Self::ConcurrentTransactions,
            53 => Self::TransactionalIdAuthorizationFailed,
            56 => Self::KafkaStorageError,
            58 => Self::SaslAuthenticationFailed,
            59 => Self::UnknownProducerId,
            74 => Self::FencedLeaderEpoch,
            75 => Self::UnknownLeaderEpoch,
            76 => Self::UnsupportedCompressionType,
            87 => Self::InvalidRecord,
            89 => Self::ThrottlingQuotaExceeded,
            90 => Self::ProducerFenced,
            100 => Self::UnknownTopicId,
            120 => Self::TransactionAbortable,
            41 => Self::NotController,
            70 => Self::FetchSessionIdNotFound,
            71 => Self::InvalidFetchSessionEpoch,
            106 => Self::FetchSessionTopicIdError,
            72 => Self::ListenerNotFound,
            78 => Self::OffsetNotAvailable,
            80 => Self::PreferredLeaderNotAvailable,
            83 => Self::EligibleLeadersNotAvailable,
            88 => Self::UnstableOffsetCommit,
            103 => Self::InconsistentTopicId,
            other => Self::Unknown(other),
        }
    }

    /// The wire value.
    pub fn as_i16(self) -> i16 {
        match self {
            Self::UnknownServerError => -1,
            Self::None => 0,
            Self::OffsetOutOfRange => 1,
            Self::CorruptMessage => 2,
            Self::UnknownTopicOrPartition => 3,
            Self::InvalidFetchSize => 4,
            Self::LeaderNotAvailable => 5,
            Self::NotLeaderOrFollower => 6,
            Self::RequestTimedOut => 7,
            Self::BrokerNotAvailable => 8,
            Self::ReplicaNotAvailable => 9,
            Self::MessageTooLarge => 10,
            Self::NetworkException => 13,
            Self::CoordinatorLoadInProgress => 14,
            Self::CoordinatorNotAvailable => 15,
            Self::NotCoordinator => 16,
            Self::InvalidTopicException => 17,
            Self::RecordListTooLarge => 18,
            Self::NotEnoughReplicas => 19,
            Self::NotEnoughReplicasAfterAppend => 20,
            Self::InvalidRequiredAcks => 21,
            Self::TopicAuthorizationFailed => 29,
            Self::ClusterAuthorizationFailed => 31,
            Self::InvalidTimestamp => 32,
            Self::UnsupportedVersion => 35,
            Self::InvalidRequest => 42,
            Self::UnsupportedForMessageFormat => 43,
            Self::PolicyViolation => 44,
            Self::OutOfOrderSequenceNumber => 45,
            Self::DuplicateSequenceNumber => 46,
            Self::InvalidProducerEpoch => 47,
            Self::InvalidTxnState => 48,
            Self::InvalidProducerIdMapping => 49,
            Self::ConcurrentTransactions => 51,
            Self::TransactionalIdAuthorizationFailed => 53,
            Self::KafkaStorageError => 56,
            Self::SaslAuthenticationFailed => 58,
            Self::UnknownProducerId => 59,
            Self::FencedLeaderEpoch => 74,
            Self::UnknownLeaderEpoch => 75,
            Self::UnsupportedCompressionType => 76,
            Self::InvalidRecord => 87,
            Self::ThrottlingQuotaExceeded => 89,
            Self::ProducerFenced => 90,
            Self::UnknownTopicId => 100,
            Self::TransactionAbortable => 120,
            Self::NotController => 41,
            Self::FetchSessionIdNotFound => 70,
            Self::InvalidFetchSessionEpoch => 71,
            Self::FetchSessionTopicIdError => 106,
            Self::ListenerNotFound => 72,
            Self::OffsetNotAvailable => 78,
            Self::PreferredLeaderNotAvailable => 80,
            Self::EligibleLeadersNotAvailable => 83,
            Self::UnstableOffsetCommit => 88,
            Self::InconsistentTopicId => 103,
            Self::Unknown(c) => c,
        }
    }

    /// Kafka's name for the code.
    pub fn name(self) -> &'static str {
        match self {
            Self::UnknownServerError => "UNKNOWN_SERVER_ERROR",
            Self::None => "NONE",
            Self::OffsetOutOfRange => "OFFSET_OUT_OF_RANGE",
            Self::CorruptMessage => "CORRUPT_MESSAGE",
            Self::UnknownTopicOrPartition => "UNKNOWN_TOPIC_OR_PARTITION",
            Self::InvalidFetchSize => "INVALID_FETCH_SIZE",
            Self::LeaderNotAvailable => "LEADER_NOT_AVAILABLE",
            Self::NotLeaderOrFollower => "NOT_LEADER_OR_FOLLOWER",
            Self::RequestTimedOut => "REQUEST_TIMED_OUT",
            Self::BrokerNotAvailable => "BROKER_NOT_AVAILABLE",
            Self::ReplicaNotAvailable => "REPLICA_NOT_AVAILABLE",
            Self::MessageTooLarge => "MESSAGE_TOO_LARGE",
            Self::NetworkException => "NETWORK_EXCEPTION",
            Self::CoordinatorLoadInProgress => "COORDINATOR_LOAD_IN_PROGRESS",
            Self::CoordinatorNotAvailable => "COORDINATOR_NOT_AVAILABLE",
            Self::NotCoordinator => "NOT_COORDINATOR",
            Self::InvalidTopicException => "INVALID_TOPIC_EXCEPTION",
            Self::RecordListTooLarge => "RECORD_LIST_TOO_LARGE",
            Self::NotEnoughReplicas => "NOT_ENOUGH_REPLICAS",
            Self::NotEnoughReplicasAfterAppend => "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
            Self::InvalidRequiredAcks => "INVALID_REQUIRED_ACKS",
            Self::TopicAuthorizationFailed => "TOPIC_AUTHORIZATION_FAILED",
            Self::ClusterAuthorizationFailed => "CLUSTER_AUTHORIZATION_FAILED",
            Self::InvalidTimestamp => "INVALID_TIMESTAMP",
            Self::UnsupportedVersion => "UNSUPPORTED_VERSION",
            Self::InvalidRequest => "INVALID_REQUEST",
            Self::UnsupportedForMessageFormat => "UNSUPPORTED_FOR_MESSAGE_FORMAT",
            Self::PolicyViolation => "POLICY_VIOLATION",
            Self::OutOfOrderSequenceNumber => "OUT_OF_ORDER_SEQUENCE_NUMBER",
            Self::DuplicateSequenceNumber => "DUPLICATE_SEQUENCE_NUMBER",
            Self::InvalidProducerEpoch => "INVALID_PRODUCER_EPOCH",
            Self::InvalidTxnState => "INVALID_TXN_STATE",
            Self::InvalidProducerIdMapping => "INVALID_PRODUCER_ID_MAPPING",
            Self::ConcurrentTransactions => "CONCURRENT_TRANSACTIONS",
            Self::TransactionalIdAuthorizationFailed => "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
            Self::KafkaStorageError => "KAFKA_STORAGE_ERROR",
            Self::SaslAuthenticationFailed => "SASL_AUTHENTICATION_FAILED",
            Self::UnknownProducerId => "UNKNOWN_PRODUCER_ID",
            Self::FencedLeaderEpoch => "FENCED_LEADER_EPOCH",
            Self::UnknownLeaderEpoch => "UNKNOWN_LEADER_EPOCH",
            Self::UnsupportedCompressionType => "UNSUPPORTED_COMPRESSION_TYPE",
            Self::InvalidRecord => "INVALID_RECORD",
            Self::ThrottlingQuotaExceeded => "THROTTLING_QUOTA_EXCEEDED",
            Self::ProducerFenced => "PRODUCER_FENCED",
            Self::UnknownTopicId => "UNKNOWN_TOPIC_ID",
            Self::TransactionAbortable => "TRANSACTION_ABORTABLE",
            Self::NotController => "NOT_CONTROLLER",
            Self::FetchSessionIdNotFound => "FETCH_SESSION_ID_NOT_FOUND",
            Self::InvalidFetchSessionEpoch => "INVALID_FETCH_SESSION_EPOCH",
            Self::FetchSessionTopicIdError => "FETCH_SESSION_TOPIC_ID_ERROR",
            Self::ListenerNotFound => "LISTENER_NOT_FOUND",
            Self::OffsetNotAvailable => "OFFSET_NOT_AVAILABLE",
            Self::PreferredLeaderNotAvailable => "PREFERRED_LEADER_NOT_AVAILABLE",
            Self::EligibleLeadersNotAvailable => "ELIGIBLE_LEADERS_NOT_AVAILABLE",
            Self::UnstableOffsetCommit => "UNSTABLE_OFFSET_COMMIT",
            Self::InconsistentTopicId => "INCONSISTENT_TOPIC_ID",
            Self::Unknown(_) => "UNKNOWN",
        }
    }

    /// Whether this is the success code.
    pub fn is_ok(self) -> bool {
        self == Self::None
    }

    /// Whether this code refuses the whole topic, whatever the records: the principal may
    /// not use it (TOPIC_AUTHORIZATION_FAILED) or it may not be used at all
    /// (INVALID_TOPIC_EXCEPTION: an internal topic, a name the broker refuses). In a
    /// metadata answer it fails the records waiting for the topic; in a Produce answer
    /// repeated under a new epoch, what the partition holds unsent.
    pub fn refuses_the_topic(self) -> bool {
        matches!(
            self,
            Self::TopicAuthorizationFailed | Self::InvalidTopicException
        )
    }

    /// Whether a Produce that drew this code may simply be retried with the same bytes.
    pub fn is_retriable(self) -> bool {
        matches!(
            self,
            Self::CorruptMessage
                | Self::UnknownTopicOrPartition
                | Self::LeaderNotAvailable
                | Self::NotLeaderOrFollower
                | Self::RequestTimedOut
                | Self::BrokerNotAvailable
                | Self::ReplicaNotAvailable
                | Self::NetworkException
                | Self::NotEnoughReplicas
                | Self::NotEnoughReplicasAfterAppend
                | Self::KafkaStorageError
                | Self::FencedLeaderEpoch
                | Self::UnknownLeaderEpoch
                | Self::ThrottlingQuotaExceeded
                | Self::UnknownTopicId
                // Azure Event Hubs denies a request past the namespace's throughput units
                // with it (a throttle), Redpanda any produce in recovery mode: both before
                // writing. Retried until `delivery.timeout.ms`, not failed at once (a review
                // of Kafka-compatible brokers).
                | Self::PolicyViolation
        ) || self.is_retriable_without_meaning()
    }

    /// Codes Kafka's `Errors` marks retriable that no Apache Kafka broker answers a Produce
    /// with today (the coordinators', the fetch sessions', the controller's): a
    /// Kafka-compatible broker or a later version may. A batch that draws one is retried
    /// with its sequence, as possibly written (such a code says nothing of the attempt; the
    /// broker deduplicates it if it was written), as the Java client retries it; before,
    /// the unnamed ones failed possibly persisted with a gap (and stopped a producer under
    /// `GapPolicy::Fatal`; a review finding), and the coordinators' were retried as unwritten.
    fn is_retriable_without_meaning(self) -> bool {
        matches!(
            self,
            Self::CoordinatorLoadInProgress
                | Self::CoordinatorNotAvailable
                | Self::NotCoordinator
                | Self::FetchSessionIdNotFound
                | Self::InvalidFetchSessionEpoch
                | Self::FetchSessionTopicIdError
                | Self::NotController
                | Self::ListenerNotFound
                | Self::OffsetNotAvailable
                | Self::PreferredLeaderNotAvailable
                | Self::EligibleLeadersNotAvailable
                | Self::UnstableOffsetCommit
                | Self::InconsistentTopicId
        )
    }

    /// Whether the client should refresh metadata before retrying.
    pub fn needs_metadata_refresh(self) -> bool {
        matches!(
            self,
            Self::UnknownTopicOrPartition
                | Self::LeaderNotAvailable
                | Self::NotLeaderOrFollower
                | Self::BrokerNotAvailable
                | Self::ReplicaNotAvailable
                | Self::KafkaStorageError
                | Self::FencedLeaderEpoch
                | Self::UnknownLeaderEpoch
                | Self::UnknownTopicId
                | Self::ListenerNotFound
                | Self::PreferredLeaderNotAvailable
                | Self::EligibleLeadersNotAvailable
                | Self::InconsistentTopicId
        )
    }

    /// Whether the attempt that drew this code from Produce may have been written to the log
    /// (§B.3 "Persisted?"). `None` (success) and `DUPLICATE_SEQUENCE_NUMBER` mean it *was*
    /// written; [`Self::is_definitely_persisted`] says so. A code Produce never answers
    /// (OFFSET_OUT_OF_RANGE and INVALID_FETCH_SIZE are Fetch's, SASL_AUTHENTICATION_FAILED
    /// is SASL's) says as little about the
    /// attempt as a code without a name, so it counts as one: before, such an answer failed
    /// its batch as not persisted. So do the retriable codes Produce has no use for today
    /// (NOT_CONTROLLER, INCONSISTENT_TOPIC_ID and the like): their retry keeps its sequence.
    pub fn is_possibly_persisted(self) -> bool {
        matches!(
            self,
            Self::RequestTimedOut
                | Self::NotEnoughReplicasAfterAppend
                | Self::UnknownServerError
                | Self::NetworkException
                | Self::OffsetOutOfRange
                | Self::InvalidFetchSize
                | Self::SaslAuthenticationFailed
        ) || matches!(self, Self::Unknown(_))
            || self.is_retriable_without_meaning()
    }

    /// Whether, under `acks=all`, this code may come after the leader appended the batch,
    /// while it waited for its followers (Kafka's `DelayedProduce`): leadership moved away
    /// (NOT_LEADER_OR_FOLLOWER) or the leader's log directory failed (KAFKA_STORAGE_ERROR).
    /// A follower may already hold the batch, and it may be the new leader, so the batch may
    /// be in the log. (§B.3 of the design spec says "no" for these: that holds only for the
    /// refusal before the append, which the client cannot tell apart.) Not
    /// UNKNOWN_TOPIC_OR_PARTITION: after the append it means the topic was deleted, and its
    /// logs with it. (Under `acks=1` the producer also takes KAFKA_STORAGE_ERROR as possibly
    /// after the append: a log flushed every `log.flush.interval.messages` fails its flush
    /// after appending.)
    pub fn may_follow_append(self) -> bool {
        matches!(self, Self::NotLeaderOrFollower | Self::KafkaStorageError)
    }

    /// Whether this code from Produce means the batch is in the log.
    pub fn is_definitely_persisted(self) -> bool {
        matches!(self, Self::None | Self::DuplicateSequenceNumber)
    }

    /// Whether this code is fatal for an idempotent (non-transactional) producer.
    pub fn is_fatal(self) -> bool {
        matches!(
            self,
            Self::ClusterAuthorizationFailed
                | Self::UnsupportedVersion
                | Self::InvalidTxnState
                | Self::ConcurrentTransactions
                | Self::TransactionalIdAuthorizationFailed
                | Self::TransactionAbortable
        )
    }
}

impl From<i16> for ErrorCode {
    fn from(code: i16) -> Self {
        Self::from_i16(code)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.as_i16())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_code_round_trips_and_unknown_codes_survive() {
        for &c in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_i16(c.as_i16()), c);
            assert_ne!(c.name(), "UNKNOWN");
        }
        assert_eq!(ErrorCode::from_i16(9999), ErrorCode::Unknown(9999));
        assert_eq!(ErrorCode::Unknown(9999).as_i16(), 9999);
        assert_eq!(
            ErrorCode::from_i16(45).to_string(),
            "OUT_OF_ORDER_SEQUENCE_NUMBER (45)"
        );
    }

    #[test]
    fn classification_follows_the_spec_table() {
        use ErrorCode as E;
        // Written-on-the-leader codes must never be reported as not persisted.
        assert!(E::RequestTimedOut.is_possibly_persisted() && E::RequestTimedOut.is_retriable());
        assert!(E::NotEnoughReplicasAfterAppend.is_possibly_persisted());
        assert!(
            !E::NotEnoughReplicas.is_possibly_persisted() && E::NotEnoughReplicas.is_retriable()
        );
        assert!(E::NotLeaderOrFollower.needs_metadata_refresh());
        assert!(
            E::UnknownServerError.is_possibly_persisted() && !E::UnknownServerError.is_retriable()
        );
        assert!(E::DuplicateSequenceNumber.is_definitely_persisted());
        assert!(!E::OutOfOrderSequenceNumber.is_retriable());
        assert!(E::ClusterAuthorizationFailed.is_fatal());
        assert!(E::CorruptMessage.is_retriable());
        assert!(!E::MessageTooLarge.is_retriable() && !E::MessageTooLarge.is_possibly_persisted());
        // Redpanda's refusal before any write (recovery mode, a producer limit) and Azure
        // Event Hubs' throttle (a request denied past its throughput units): retried, not
        // written.
        assert!(
            E::PolicyViolation.is_retriable()
                && !E::PolicyViolation.is_possibly_persisted()
                && !E::PolicyViolation.is_fatal()
        );
        // Codes with no meaning for Produce are as unknown as unnamed ones.
        for c in [
            E::OffsetOutOfRange,
            E::InvalidFetchSize,
            E::SaslAuthenticationFailed,
            E::Unknown(9999),
        ] {
            assert!(
                c.is_possibly_persisted() && !c.is_retriable() && !c.is_fatal(),
                "{c}"
            );
        }
        // Retriable in Kafka's `Errors` but meaningless for Produce today: retried with
        // their sequence, as possibly written.
        for code in [14, 15, 16, 41, 70, 71, 72, 78, 80, 83, 88, 103, 106] {
            let c = E::from_i16(code);
            assert!(!matches!(c, E::Unknown(_)), "{code} has a name");
            assert!(
                c.is_possibly_persisted() && c.is_retriable() && !c.is_fatal(),
                "{c}"
            );
        }
    }
}
