//! One scripted-broker test per row of the idempotence-spec §B.3 Produce error table (and the
//! InitProducerId table under it). Errors are injected into the broker model per partition;
//! `append: true` models the codes that leave the batch written on the leader.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use kprod_core::protocol::{api_key, ErrorCode};
use kprod_core::{DataLossPolicy, DeliveryError, FatalError, Persistence, ProducerConfig};
use kprod_model::broker::BrokerMode;
use kprod_model::sim::{Outcome, Sim};

// --- 0 NONE ---------------------------------------------------------------------------

#[test]
fn none_acknowledges_each_record_at_its_broker_offset() {
    let mut sim = sim(2, cfg());
    warm_up(&mut sim, 2);
    let ids: Vec<_> = (0..10).map(|i| sim.send(rec(i, (i % 2) as i32))).collect();
    sim.run(STEPS);
    for (k, id) in ids.iter().enumerate() {
        assert_eq!(delivered(&sim, *id), 1 + (k / 2) as i64);
    }
    check_all(&sim, 2);
    let s = &sim.cluster.stats;
    assert_eq!((s.deduplicated, s.out_of_order, s.max_epoch), (0, 0, 0));
}

// --- 46 DUPLICATE_SEQUENCE_NUMBER ------------------------------------------------------

#[test]
fn duplicate_sequence_number_is_delivered_without_an_offset() {
    let mut sim = sim(1, cfg());
    warm_up(&mut sim, 1);
    // The batch is written, but the broker answers 46 (as a 0.11 broker or Tansu would).
    inject(&mut sim, 0, ErrorCode::DuplicateSequenceNumber, true);
    let a = sim.send(rec(1, 0));
    let b = sim.send(rec(2, 0));
    sim.run(STEPS);
    assert_eq!(
        sim.outcomes[&a],
        Outcome::Delivered {
            partition: 0,
            offset: None
        }
    );
    assert_eq!(delivered(&sim, b), 2);
    assert_eq!(
        stored_values(&sim, 0),
        vec![Bytes::from("w0"), val(1), val(2)]
    );
    check_all(&sim, 1);
    assert!(bumps(&sim).is_empty());
}

// --- 45 OUT_OF_ORDER_SEQUENCE_NUMBER ---------------------------------------------------

#[test]
fn out_of_order_not_head_is_retried_without_a_bump() {
    let mut sim = sim(1, cfg());
    warm_up(&mut sim, 1);
    // a is refused retriably; b, pipelined behind it, then draws a genuine OOOSN.
    inject(&mut sim, 0, ErrorCode::NotEnoughReplicas, false);
    let a = sim.send(rec(1, 0));
    let b = sim.send(rec(2, 0));
    sim.run(STEPS);
    assert_eq!(sim.cluster.stats.out_of_order, 1);
    assert_eq!(delivered(&sim, a), 1);
    assert_eq!(delivered(&sim, b), 2);
    assert!(bumps(&sim).is_empty());
    assert_eq!(data_loss_signals(&sim), 0);
    check_all(&sim, 1);
}

#[test]
fn out_of_order_at_the_head_before_any_ack_bumps_quietly() {
    let mut sim = sim(1, cfg());
    inject(&mut sim, 0, ErrorCode::OutOfOrderSequenceNumber, false);
    let a = sim.send(rec(1, 0));
    sim.run(STEPS);
    let pid = sim.producer.identity().expect("identity").producer_id;
    assert_eq!(delivered(&sim, a), 0);
    assert_eq!(stored(&sim, 0), vec![(pid, 1, 0)]);
    assert_eq!(bumps(&sim), vec![1]);
    assert_eq!(data_loss_signals(&sim), 0);
    check_all(&sim, 1);
}

#[test]
fn out_of_order_at_the_head_after_an_ack_signals_data_loss_and_continues() {
    let mut sim = sim(1, cfg());
    warm_up(&mut sim, 1);
    let pid = sim.producer.identity().expect("identity").producer_id;
    inject(&mut sim, 0, ErrorCode::OutOfOrderSequenceNumber, false);
    let a = sim.send(rec(1, 0));
    let b = sim.send(rec(2, 0));
    sim.run(STEPS);
    assert_eq!(data_loss_signals(&sim), 1);
    assert_eq!(bumps(&sim), vec![1]);
    delivered_in_order(&sim, &[a, b]);
    assert_eq!(stored(&sim, 0), vec![(pid, 0, 0), (pid, 1, 0), (pid, 1, 1)]);
    check_all(&sim, 1);
}

#[test]
fn out_of_order_at_the_head_with_the_fatal_data_loss_policy() {
    let mut sim = sim(
        1,
        ProducerConfig {
            data_loss_policy: DataLossPolicy::Fatal,
            ..cfg()
        },
    );
    warm_up(&mut sim, 1);
    let c = produce_conn(&sim, 1);
    inject(&mut sim, 0, ErrorCode::OutOfOrderSequenceNumber, false);
    let a = sim.send(rec(1, 0));
    let b = sim.send(rec(2, 0));
    assert_eq!(outstanding(&sim, c), 2);
    sim.run(STEPS);
    assert_eq!(fatal(&sim), Some(FatalError::DataLoss));
    assert_eq!(data_loss_signals(&sim), 1);
    // a was refused: definitely not written. b was in flight: unknown.
    assert_eq!(failed(&sim, a), Persistence::NotPersisted);
    assert_eq!(failed(&sim, b), Persistence::PossiblyPersisted);
    check_all(&sim, 1);
}

// --- 59 UNKNOWN_PRODUCER_ID (brokers 1.0-2.4) -------------------------------------------

fn unknown_pid_sim() -> Sim {
    let mut sim = Sim::new(cluster(BrokerMode::UnknownPidError, 1, 1), cfg());
    warm_up(&mut sim, 1);
    sim.send(rec(1, 0));
    sim.send(rec(2, 0));
    sim.run(STEPS);
    sim
}

#[test]
fn unknown_producer_id_after_delete_records_is_benign() {
    let mut sim = unknown_pid_sim();
    let pid = sim.producer.identity().expect("identity").producer_id;
    sim.cluster.delete_records(T, 0);
    sim.cluster.expire_producers();
    let a = sim.send(rec(3, 0));
    let b = sim.send(rec(4, 0));
    sim.run(STEPS);
    // log_start_offset (3) > last acknowledged offset (2): state loss, not data loss.
    assert_eq!(data_loss_signals(&sim), 0);
    assert_eq!(bumps(&sim), vec![1]);
    assert_eq!(delivered(&sim, a), 3);
    assert_eq!(delivered(&sim, b), 4);
    assert_eq!(&stored(&sim, 0)[3..], &[(pid, 1, 0), (pid, 1, 1)]);
    check_all(&sim, 1);
}

/// Idle expiry of the producer state, with the log intact. kprod takes UNKNOWN_PRODUCER_ID as
/// state loss by definition (as Java does), not as data loss: no signal, a bump, and the
/// record re-sequenced from 0. (The spec's row 59 applies the log-start test here too, which
/// would signal data loss; see the report.)
#[test]
fn unknown_producer_id_after_state_expiry_bumps_without_a_data_loss_signal() {
    let mut sim = unknown_pid_sim();
    let pid = sim.producer.identity().expect("identity").producer_id;
    sim.cluster.expire_producers();
    let a = sim.send(rec(3, 0));
    let b = sim.send(rec(4, 0));
    sim.run(STEPS);
    assert_eq!(data_loss_signals(&sim), 0);
    assert_eq!(bumps(&sim), vec![1]);
    assert_eq!(delivered(&sim, a), 3);
    assert_eq!(delivered(&sim, b), 4);
    assert_eq!(&stored(&sim, 0)[3..], &[(pid, 1, 0), (pid, 1, 1)]);
    check_all(&sim, 1);
}

// --- 47 INVALID_PRODUCER_EPOCH, 49 INVALID_PRODUCER_ID_MAPPING --------------------------

#[test]
fn invalid_producer_epoch_and_id_mapping_bump_and_resend() {
    for code in [
        ErrorCode::InvalidProducerEpoch,
        ErrorCode::InvalidProducerIdMapping,
    ] {
        let mut sim = sim(1, cfg());
        warm_up(&mut sim, 1);
        let pid = sim.producer.identity().expect("identity").producer_id;
        inject(&mut sim, 0, code, false);
        let a = sim.send(rec(1, 0));
        let b = sim.send(rec(2, 0));
        sim.run(STEPS);
        // Not written: both are re-sequenced under the bumped epoch, in order.
        delivered_in_order(&sim, &[a, b]);
        assert_eq!(
            stored(&sim, 0),
            vec![(pid, 0, 0), (pid, 1, 0), (pid, 1, 1)],
            "{code}"
        );
        assert_eq!(bumps(&sim), vec![1]);
        check_all(&sim, 1);
    }
}

// --- 6 NOT_LEADER_OR_FOLLOWER, 5, 3, 100, 56, 19: retriable, not persisted ------------------

#[test]
fn retriable_not_persisted_codes_are_retried_in_order() {
    for code in [
        ErrorCode::NotLeaderOrFollower,
        ErrorCode::LeaderNotAvailable,
        ErrorCode::UnknownTopicOrPartition,
        ErrorCode::UnknownTopicId,
        ErrorCode::KafkaStorageError,
        ErrorCode::NotEnoughReplicas,
    ] {
        let mut sim = sim(1, cfg());
        warm_up(&mut sim, 1);
        let metadata_before = sim.requests[&api_key::METADATA];
        inject(&mut sim, 0, code, false);
        inject(&mut sim, 0, code, false);
        let a = sim.send(rec(1, 0));
        let b = sim.send(rec(2, 0));
        sim.run(STEPS);
        assert_eq!(delivered(&sim, a), 1, "{code}");
        assert_eq!(delivered(&sim, b), 2, "{code}");
        assert!(bumps(&sim).is_empty(), "{code}");
        let s = &sim.cluster.stats;
        assert_eq!((s.deduplicated, s.out_of_order), (0, 0), "{code}");
        let refreshed = sim.requests[&api_key::METADATA] > metadata_before;
        assert_eq!(refreshed, code != ErrorCode::NotEnoughReplicas, "{code}");
        check_all(&sim, 1);
    }
}

// --- 20 NOT_ENOUGH_REPLICAS_AFTER_APPEND, 7, and 6 or 56 after the append: written on the leader

#[test]
fn written_on_the_leader_codes_retry_into_the_dedup_cache() {
    for code in [
        ErrorCode::NotEnoughReplicasAfterAppend,
        ErrorCode::RequestTimedOut,
        ErrorCode::NotLeaderOrFollower,
        ErrorCode::KafkaStorageError,
    ] {
        let mut sim = sim(1, cfg());
        warm_up(&mut sim, 1);
        inject(&mut sim, 0, code, true);
        let a = sim.send(rec(1, 0));
        let b = sim.send(rec(2, 0));
        sim.run(STEPS);
        assert_eq!(delivered(&sim, a), 1, "{code}");
        assert_eq!(delivered(&sim, b), 2, "{code}");
        assert_eq!(sim.cluster.stats.deduplicated, 1, "{code}");
        assert_eq!(sim.cluster.partition(T, 0).log.len(), 3, "{code}");
        assert!(bumps(&sim).is_empty(), "{code}");
        check_all(&sim, 1);
    }
}

#[test]
fn written_on_the_leader_codes_never_fail_as_not_persisted() {
    for code in [
        ErrorCode::NotEnoughReplicasAfterAppend,
        ErrorCode::RequestTimedOut,
        ErrorCode::NotLeaderOrFollower,
        ErrorCode::KafkaStorageError,
    ] {
        let mut sim = sim(
            1,
            ProducerConfig {
                request_timeout: Duration::from_secs(1),
                delivery_timeout: Duration::from_secs(2),
                ..cfg()
            },
        );
        warm_up(&mut sim, 1);
        // Written once, then every retry is refused (retriably) until the delivery timeout.
        inject(&mut sim, 0, code, true);
        for _ in 0..100 {
            inject(&mut sim, 0, ErrorCode::NotEnoughReplicas, false);
        }
        let a = sim.send(rec(1, 0));
        sim.run(STEPS);
        assert_eq!(
            failure(&sim, a),
            (
                DeliveryError::DeliveryTimeout {
                    last_error: Some(ErrorCode::NotEnoughReplicas)
                },
                Persistence::PossiblyPersisted
            ),
            "{code}"
        );
        assert_eq!(stored_values(&sim, 0), vec![Bytes::from("w0"), val(1)]);
        check_all(&sim, 1);
    }
}

// --- 10 MESSAGE_TOO_LARGE (the split is in scenarios.rs) -------------------------------------

#[test]
fn message_too_large_for_a_single_record_fails_not_persisted_and_bumps() {
    let mut sim = sim(1, cfg());
    warm_up(&mut sim, 1);
    let pid = sim.producer.identity().expect("identity").producer_id;
    inject(&mut sim, 0, ErrorCode::MessageTooLarge, false);
    let a = sim.send(rec(1, 0));
    let b = sim.send(rec(2, 0));
    sim.run(STEPS);
    assert_eq!(
        failure(&sim, a),
        (
            DeliveryError::Broker(ErrorCode::MessageTooLarge),
            Persistence::NotPersisted
        )
    );
    assert_eq!(delivered(&sim, b), 1);
    assert_eq!(stored(&sim, 0), vec![(pid, 0, 0), (pid, 1, 0)]);
    assert_eq!(bumps(&sim), vec![1]);
    check_all(&sim, 1);
}

// --- 18, 87, 32, 17, 21, 42, 43, 76, 29: permanent, not persisted ---------------------------

#[test]
fn permanent_record_errors_fail_not_persisted_and_bump() {
    for code in [
        ErrorCode::RecordListTooLarge,
        ErrorCode::InvalidRecord,
        ErrorCode::InvalidTimestamp,
        ErrorCode::InvalidTopicException,
        ErrorCode::InvalidRequiredAcks,
        ErrorCode::InvalidRequest,
        ErrorCode::UnsupportedForMessageFormat,
        ErrorCode::UnsupportedCompressionType,
        ErrorCode::TopicAuthorizationFailed,
    ] {
        let mut sim = sim(1, cfg());
        warm_up(&mut sim, 1);
        let pid = sim.producer.identity().expect("identity").producer_id;
        inject(&mut sim, 0, code, false);
        let bad = sim.send(rec(1, 0));
        let good: Vec<_> = (2..=3).map(|i| sim.send(rec(i, 0))).collect();
        sim.run(STEPS);
        assert_eq!(
            failure(&sim, bad),
            (DeliveryError::Broker(code), Persistence::NotPersisted),
            "{code}"
        );
        delivered_in_order(&sim, &good);
        // The later batches, refused behind the gap, are re-sequenced from 0 (P9).
        assert_eq!(
            stored(&sim, 0),
            vec![(pid, 0, 0), (pid, 1, 0), (pid, 1, 1)],
            "{code}"
        );
        assert_eq!(bumps(&sim), vec![1], "{code}");
        assert!(fatal(&sim).is_none(), "{code}");
        check_all(&sim, 1);
    }
}

// --- 2 CORRUPT_MESSAGE: retried a bounded number of times ------------------------------------

#[test]
fn corrupt_message_is_retried_then_fails_not_persisted() {
    // Three corruptions: the fourth attempt goes through.
    let mut sim = sim(1, cfg());
    warm_up(&mut sim, 1);
    for _ in 0..3 {
        inject(&mut sim, 0, ErrorCode::CorruptMessage, false);
    }
    let a = sim.send(rec(1, 0));
    sim.run(STEPS);
    assert_eq!(delivered(&sim, a), 1);
    assert!(bumps(&sim).is_empty());
    check_all(&sim, 1);
    // Four for b (the fifth goes to c, pipelined behind it): b fails as INVALID_RECORD would.
    for _ in 0..5 {
        inject(&mut sim, 0, ErrorCode::CorruptMessage, false);
    }
    let b = sim.send(rec(2, 0));
    let c = sim.send(rec(3, 0));
    sim.run(STEPS);
    assert_eq!(
        failure(&sim, b),
        (
            DeliveryError::Broker(ErrorCode::CorruptMessage),
            Persistence::NotPersisted
        )
    );
    assert_eq!(delivered(&sim, c), 2);
    assert_eq!(bumps(&sim), vec![1]);
    check_all(&sim, 1);
}

// --- -1 UNKNOWN_SERVER_ERROR: see scenarios.rs; an unnamed code is treated the same ----------

#[test]
fn an_unknown_error_code_is_possibly_persisted() {
    let mut sim = sim(1, cfg());
    warm_up(&mut sim, 1);
    inject(&mut sim, 0, ErrorCode::Unknown(9999), true);
    let a = sim.send(rec(1, 0));
    sim.run(STEPS);
    assert_eq!(failed(&sim, a), Persistence::PossiblyPersisted);
    assert_eq!(stored_values(&sim, 0), vec![Bytes::from("w0"), val(1)]);
    check_all(&sim, 1);
}

// --- 31, 35 and the transactional codes: fatal -----------------------------------------------

#[test]
fn fatal_produce_codes_stop_the_producer() {
    for code in [
        ErrorCode::ClusterAuthorizationFailed,
        ErrorCode::UnsupportedVersion,
        ErrorCode::InvalidTxnState,
        ErrorCode::ConcurrentTransactions,
        ErrorCode::TransactionalIdAuthorizationFailed,
        ErrorCode::TransactionAbortable,
    ] {
        let mut sim = sim(1, cfg());
        warm_up(&mut sim, 1);
        inject(&mut sim, 0, code, false);
        let a = sim.send(rec(1, 0));
        let b = sim.send(rec(2, 0));
        sim.run(STEPS);
        assert_eq!(fatal(&sim), Some(FatalError::Broker(code)));
        // a was refused; b was in flight when the producer stopped.
        assert_eq!(failed(&sim, a), Persistence::NotPersisted, "{code}");
        assert_eq!(failed(&sim, b), Persistence::PossiblyPersisted, "{code}");
        assert!(sim.producer.send(sim.now, rec(3, 0)).is_err());
        assert!(sim.links.is_empty(), "{code}: connections left open");
        check_all(&sim, 1);
    }
}

// --- 90 PRODUCER_FENCED: kprod treats it as a refused epoch bump (Tansu) ---------------------

#[test]
fn producer_fenced_takes_a_new_producer_id() {
    let mut sim = sim(1, cfg());
    warm_up(&mut sim, 1);
    let pid = sim.producer.identity().expect("identity").producer_id;
    inject(&mut sim, 0, ErrorCode::ProducerFenced, false);
    let a = sim.send(rec(1, 0));
    sim.run(STEPS);
    assert_eq!(delivered(&sim, a), 1);
    assert_eq!(sim.cluster.stats.producer_ids, 2);
    assert_eq!(stored(&sim, 0), vec![(pid, 0, 0), (pid + 1, 0, 0)]);
    check_all(&sim, 1);
}

// --- InitProducerId errors --------------------------------------------------------------------

#[test]
fn init_producer_id_retriable_errors_are_retried() {
    let mut sim = sim(1, cfg());
    sim.cluster.init_producer_id_errors.extend([
        ErrorCode::CoordinatorLoadInProgress,
        ErrorCode::NotCoordinator,
        ErrorCode::CoordinatorNotAvailable,
    ]);
    let a = sim.send(rec(1, 0));
    sim.run(STEPS);
    assert_eq!(delivered(&sim, a), 0);
    assert_eq!(sim.requests[&api_key::INIT_PRODUCER_ID], 4);
    assert_eq!(sim.cluster.stats.producer_ids, 1);
    check_all(&sim, 1);
}

/// CLUSTER_AUTHORIZATION_FAILED on InitProducerId is not fatal (a deviation from §B.3, as
/// the Java client since KAFKA-13668): ACLs may be granted later. The records waiting for an
/// identity fail with it, not persisted and handed back; the producer asks again after the
/// backoff and, once answered, delivers the next records.
#[test]
fn init_producer_id_authorization_failures_fail_the_waiting_records_and_are_retried() {
    let mut sim = sim(1, cfg());
    sim.cluster
        .init_producer_id_errors
        .extend([ErrorCode::ClusterAuthorizationFailed; 2]);
    let a = sim.send(rec(1, 0));
    let b = sim.send(rec(2, 0));
    sim.run(STEPS);
    assert_eq!(fatal(&sim), None);
    assert_eq!(failed(&sim, a), Persistence::NotPersisted);
    assert_eq!(failed(&sim, b), Persistence::NotPersisted);
    let c = sim.send(rec(3, 0));
    sim.run(STEPS);
    assert_eq!(delivered(&sim, c), 0);
    assert_eq!(sim.requests[&api_key::INIT_PRODUCER_ID], 3);
    assert_eq!(sim.cluster.stats.producer_ids, 1);
    assert_eq!(stored_values(&sim, 0), vec![val(3)]);
    check_all(&sim, 1);
}

#[test]
fn init_producer_id_fatal_errors_stop_the_producer() {
    for code in [ErrorCode::UnsupportedVersion, ErrorCode::InvalidRequest] {
        let mut sim = sim(1, cfg());
        sim.cluster.init_producer_id_errors.push_back(code);
        let a = sim.send(rec(1, 0));
        sim.run(STEPS);
        assert_eq!(fatal(&sim), Some(FatalError::Broker(code)));
        assert_eq!(failed(&sim, a), Persistence::NotPersisted, "{code}");
        assert!(sim.transmitted.is_empty());
    }
}

// --- Permanent answers to a retry whose earlier attempt may have been written ----------------

#[test]
fn permanent_error_after_an_ambiguous_attempt_is_possibly_persisted() {
    let mut sim = sim(1, cfg());
    warm_up(&mut sim, 1);
    let c = produce_conn(&sim, 1);
    let a = sim.send(rec(1, 0));
    // Written, but the answer is lost; the retry is then refused.
    sim.disconnect(c, 1);
    inject(&mut sim, 0, ErrorCode::InvalidRecord, false);
    sim.run(STEPS);
    assert_eq!(failed(&sim, a), Persistence::PossiblyPersisted);
    assert_eq!(stored_values(&sim, 0), vec![Bytes::from("w0"), val(1)]);
    check_all(&sim, 1);
}

#[test]
fn message_too_large_after_an_ambiguous_attempt_is_not_split() {
    let mut sim = sim(
        1,
        ProducerConfig {
            linger: Duration::from_millis(20),
            ..cfg()
        },
    );
    warm_up(&mut sim, 1);
    let ids: Vec<_> = (1..=4).map(|i| sim.send(rec(i, 0))).collect();
    sim.advance(Duration::from_millis(20));
    let c = produce_conn(&sim, 1);
    assert_eq!(sim.transmitted.last().map(|w| w.count), Some(4));
    // Written, but the answer is lost; the retry draws MESSAGE_TOO_LARGE. Splitting it
    // would re-send written records under sequences the broker cannot match.
    sim.disconnect(c, 1);
    inject(&mut sim, 0, ErrorCode::MessageTooLarge, false);
    sim.run(STEPS);
    for id in &ids {
        assert_eq!(failed(&sim, *id), Persistence::PossiblyPersisted);
    }
    assert_eq!(sim.cluster.partition(T, 0).log.len(), 5);
    check_all(&sim, 1);
}
