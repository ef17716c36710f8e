//! Exhaustive model checking of the real producer, one bounded configuration per test.
//!
//! Every configuration is explored to completion with BFS. Every safety property must hold,
//! the listed reachability targets must be reached (proof that the configuration explores
//! what it claims), and the number of unique states is pinned so that any change to the
//! producer or the model that alters the state space is noticed.

use kprod_core::mutation::Mutation as Core;
use kprod_core::GapPolicy;
use kprod_model::broker::{Advertised, BrokerMode};
use kprod_model::model::{Action, Budget, Inject, KafkaModel, ModelCfg, Mutation};
use stateright::{Checker, Expectation, HasDiscoveries, Model};

const ALL_DELIVERED: &str = "all delivered";
const DEDUP: &str = "a retry is deduplicated";
const NON_HEAD: &str = "a non-head OOOSN is resolved without a bump";
const HEAD: &str = "a head rejection leads to a rebase";
const BUMP_WHILE: &str = "a bump completes while another partition has old-epoch requests";
const WRAP: &str = "the sequence wraps";
const NEW_PID: &str = "a new producer id after epoch exhaustion";
const OLD_LEADER: &str = "a response from the old leader after a request to the new one";
const KIP360: &str = "a head rejection after the log start moved leads to a rebase (KIP-360)";
const OVERTAKEN: &str = "a batch is overtaken";
const TIMEOUT_SENT: &str = "a sent record reaches its delivery timeout";
const MOVE: &str = "a partition with requests in flight moves to its new leader";
const SPLIT: &str = "a batch is split";
const TRUNCATED: &str = "a leader change truncates records written after the append";
const ZOMBIE: &str = "a zombie request is written after its connection closed";
const HINT_MOVE: &str = "a partition moves to its new leader on a KIP-951 hint";
const NO_KIP360: &str = "a new producer id instead of a bump (no KIP-360)";

const S1: &str = "S1 no duplicates";
const S3_CUT: &str = "S3 a cut keeps a prefix";
const S4: &str = "S4 truthful reports";
const O1: &str = "O1 a partition's outcomes in send order";
const S7: &str = "S7 in-flight bound";
const S8: &str = "S8 a new producer id starts at 0";
const S9: &str = "S9 no spurious fatal";
const S10: &str = "S10 broker sees no client bug";
const S11: &str = "S11 no local epoch bump without KIP-360";
const S5: &str = "S5 no sequence reuse";
const P2: &str = "P2 a retry is the same bytes";
const P7: &str = "P7 drain before a leader change";
const L2: &str = "L2 no livelock";
const L4: &str = "L4 no stuck producer";

/// Checks `cfg` exhaustively; returns the number of unique states.
///
/// Depth-first: every property here is `always` or `sometimes`, so the order of the search
/// changes nothing it finds, and the unique states are the same set as breadth-first's; but
/// the checker then holds only the current path's successors instead of a whole frontier of
/// states (the largest configuration held 12.6 GB breadth-first, under 300 MB depth-first).
/// A violation's path is then not the shortest: `cargo run -p kprod-model -- check`
/// (breadth-first) finds the shortest.
fn check(name: &str, cfg: ModelCfg, reach: &[&str]) -> usize {
    let model: KafkaModel = cfg.into_model();
    let props = model.properties();
    let start = std::time::Instant::now();
    let checker = model.checker().threads(2).spawn_dfs().join();
    assert!(checker.is_done(), "{name}: checking did not finish");
    let unique = checker.unique_state_count();
    println!(
        "{name}: {} states, {unique} unique, depth {}, {:.2?}",
        checker.state_count(),
        checker.max_depth(),
        start.elapsed()
    );
    for p in &props {
        let found = checker.discovery(p.name);
        match p.expectation {
            Expectation::Sometimes => {
                if reach.contains(&p.name) {
                    assert!(found.is_some(), "{name}: '{}' was never reached", p.name);
                }
            }
            _ => {
                if let Some(path) = found {
                    panic!("{name}: '{}' violated by {:?}", p.name, path.into_actions());
                }
            }
        }
    }
    unique
}

fn base(mode: BrokerMode) -> ModelCfg {
    ModelCfg {
        mode,
        ..ModelCfg::default()
    }
}

#[test]
fn two_partitions_three_records_two_disconnects() {
    let cfg = ModelCfg {
        partitions: 2,
        records_per_partition: 3,
        max_in_flight: 2,
        budget: Budget {
            disconnects: 2,
            ..Budget::default()
        },
        ..base(BrokerMode::Lenient)
    };
    let n = check("2p3r-disc2", cfg, &[ALL_DELIVERED, DEDUP]);
    assert_eq!(n, PINNED[0], "unique states changed");
}

/// Found by a seeded simulation (`kprod-model simulate`, 2026-12-06): a record refused
/// NOT_ENOUGH_REPLICAS on its one attempt, its retry due after its delivery timeout, fails
/// then, not persisted: true, and no spurious failure. S9 allowed only records never sent to
/// fail by their delivery timeout and called this one spurious. The path, replayed: every
/// safety property holds at every step, and the case is met (a record that was on the wire
/// fails by its delivery timeout, not persisted).
#[test]
fn a_record_refused_then_timed_out_is_no_spurious_failure() {
    let cfg = ModelCfg {
        partitions: 2,
        records_per_partition: 3,
        max_in_flight: 5,
        nodes: 2,
        budget: Budget {
            disconnects: 3,
            timeouts: 2,
            leader_changes: 2,
            restarts: 1,
            expiries: 1,
            partition_expiries: 1,
            injections: 2,
            flaps: 1,
            connect_failures: 2,
            ..Budget::default()
        },
        ..ModelCfg::default()
    };
    let model: KafkaModel = cfg.into_model();
    let path = "ConnectOk(ConnId(0)), Inject(0, NotEnoughReplicas), Send(1), \
        Inject(1, NotEnoughReplicas), Disconnect(ConnId(0)), ConnectOk(ConnId(1)), \
        LeaderChange(1), Disconnect(ConnId(1)), Tick, Send(0), ConnectOk(ConnId(2)), \
        Process(ConnId(2)), Restart, Send(0), Deliver(ConnId(2)), Disconnect(ConnId(2)), Tick, \
        LeaderChange(1), Flap, Send(0), ConnectFail(ConnId(3)), ConnectOk(ConnId(4)), Send(1), \
        Process(ConnId(4)), Deliver(ConnId(4)), Process(ConnId(4)), Process(ConnId(4)), \
        Deliver(ConnId(4)), Deliver(ConnId(4)), Send(1), Tick, Tick, Tick, Tick, \
        ConnectOk(ConnId(5)), Process(ConnId(5)), Deliver(ConnId(5)), Process(ConnId(5)), \
        Deliver(ConnId(5)), Process(ConnId(5)), Deliver(ConnId(5)), Tick, Tick, \
        Process(ConnId(5)), Deliver(ConnId(5)), Expire, ExpirePartition(0)";
    let mut s = model.init_states().pop().expect("an initial state");
    let mut met = false;
    for a in Action::parse_path(path).expect("a path") {
        let step = format!("{a:?}");
        s = model
            .next_state(&s, a)
            .unwrap_or_else(|| panic!("{step} applies"));
        for p in model.properties() {
            if !matches!(p.expectation, Expectation::Sometimes) {
                assert!((p.condition)(&model, &s), "{} after {step}", p.name);
            }
        }
        met |= s.ids.iter().any(|(id, &(p, k))| {
            s.on_wire[p as usize] > k
                && s.outcomes.get(id)
                    == Some(&kprod_model::model::Outcome::Failed(
                        kprod_core::Persistence::NotPersisted,
                    ))
        });
    }
    assert!(met, "a record sent and failed not persisted");
}

#[test]
fn disconnect_and_injected_errors_on_every_broker_mode() {
    let mut counts = Vec::new();
    for mode in BrokerMode::ALL {
        let cfg = ModelCfg {
            partitions: 2,
            records_per_partition: 2,
            max_in_flight: 2,
            budget: Budget {
                disconnects: 1,
                injections: 1,
                expiries: 1,
                ..Budget::default()
            },
            injectable: vec![
                Inject::NotEnoughReplicas,
                Inject::TimedOutAfterAppend,
                Inject::InvalidRecord,
            ],
            ..base(mode)
        };
        counts.push(check(
            &format!("{mode:?} disc1 inj1"),
            cfg,
            &[ALL_DELIVERED, DEDUP, BUMP_WHILE],
        ));
    }
    assert_eq!(counts, PINNED_MODES, "unique states changed");
}

#[test]
fn leader_change_with_requests_in_flight() {
    let cfg = ModelCfg {
        partitions: 2,
        records_per_partition: 2,
        max_in_flight: 2,
        nodes: 2,
        budget: Budget {
            leader_changes: 1,
            disconnects: 1,
            ..Budget::default()
        },
        ..base(BrokerMode::Lenient)
    };
    let n = check("leader change", cfg, &[ALL_DELIVERED, OLD_LEADER]);
    assert_eq!(n, PINNED[1], "unique states changed");
}

/// A strict broker, 1 partition × 7 records with sequences wrapping past 5.
fn wrap_cfg() -> ModelCfg {
    ModelCfg {
        records_per_partition: 7,
        max_sequence: 5,
        ..base(BrokerMode::StrictNeverWritten)
    }
}

#[test]
fn sequence_wraps() {
    let n = check("wrap", wrap_cfg(), &[ALL_DELIVERED, WRAP]);
    assert_eq!(n, PINNED[2], "unique states changed");
}

/// One partition of 3 records, epochs up to 1, two injected errors (NOT_ENOUGH_REPLICAS,
/// INVALID_RECORD): the second bump exhausts the epoch.
fn epoch_exhaustion_cfg() -> ModelCfg {
    ModelCfg {
        records_per_partition: 3,
        max_epoch: 1,
        budget: Budget {
            injections: 2,
            ..Budget::default()
        },
        injectable: vec![Inject::NotEnoughReplicas, Inject::InvalidRecord],
        ..base(BrokerMode::Lenient)
    }
}

#[test]
fn epoch_exhaustion_takes_a_new_producer_id() {
    let cfg = epoch_exhaustion_cfg();
    let n = check("epoch exhaustion", cfg, &[ALL_DELIVERED, NEW_PID, NON_HEAD]);
    assert_eq!(n, PINNED[3], "unique states changed");
}

#[test]
fn request_timeouts_and_a_disconnect() {
    let cfg = ModelCfg {
        records_per_partition: 2,
        budget: Budget {
            timeouts: 2,
            disconnects: 1,
            ..Budget::default()
        },
        ..base(BrokerMode::Lenient)
    };
    let n = check("timeouts", cfg, &[ALL_DELIVERED, DEDUP]);
    assert_eq!(n, PINNED[4], "unique states changed");
}

/// Broker state lost before KIP-360 (`UnknownPidError`): a producer-state expiry, a broker
/// restart, a disconnect.
fn state_loss_cfg() -> ModelCfg {
    ModelCfg {
        records_per_partition: 3,
        budget: Budget {
            expiries: 1,
            restarts: 1,
            disconnects: 1,
            ..Budget::default()
        },
        ..base(BrokerMode::UnknownPidError)
    }
}

#[test]
fn broker_state_loss_on_old_brokers() {
    let n = check("expiry+restart", state_loss_cfg(), &[ALL_DELIVERED, HEAD]);
    assert_eq!(n, PINNED[5], "unique states changed");
}

/// The two configurations of broker state loss before KIP-360 (`UnknownPidError`: expiry
/// and restart; DeleteRecords) on brokers that advertise what such brokers do (Apache Kafka
/// 2.3: InitProducerId v1, no KIP-360), not the latest versions: the producer cannot bump
/// its epoch there (S11) and takes a new producer id, which every partition starts at
/// sequence 0 (S8). A review of the broker model found that these configurations ran only
/// with KIP-360's versions, which no broker answering UNKNOWN_PRODUCER_ID advertises, so
/// the recovery such a broker really gets was checked after one expiry alone
/// (`brokers_without_kip360_or_kip951`).
#[test]
fn broker_state_loss_on_brokers_without_kip360() {
    let restart = ModelCfg {
        broker_versions: Advertised::KAFKA_2_3,
        ..state_loss_cfg()
    };
    let delete = ModelCfg {
        broker_versions: Advertised::KAFKA_2_3,
        ..delete_records_cfg()
    };
    let counts = [
        check(
            "expiry+restart, 2.3",
            restart,
            &[ALL_DELIVERED, HEAD, NO_KIP360],
        ),
        check(
            "delete records, 2.3",
            delete,
            &[ALL_DELIVERED, HEAD, NO_KIP360],
        ),
    ];
    assert_eq!(counts, [7_134, 3_474], "unique states changed");
}

#[test]
fn metadata_flaps_keep_sequence_state() {
    let cfg = ModelCfg {
        records_per_partition: 2,
        metadata_max_age_ms: 2,
        max_refreshes: 8,
        budget: Budget {
            flaps: 2,
            ..Budget::default()
        },
        ..base(BrokerMode::Lenient)
    };
    let n = check("flaps", cfg, &[ALL_DELIVERED]);
    // 109,691 until the producer stopped asking about a missing topic after the backoff when
    // no record waits for it (110,699: it waits for `metadata.max.age.ms` instead), sent the
    // request after an incomplete answer to another ready connection (90,664), and asked
    // again as soon as a record for a topic last seen missing arrives (96,660), and until a
    // record that waited for metadata kept its acceptance time as its batch's creation
    // (`ACCEPTANCE_TIME` below; here fewer: the refreshes 2 ms apart no longer give the
    // routed batches distinct creation times).
    // 80,918 until NODE_FIRST (see `PINNED`).
    // 82,956 until the producer kept since when answers have said the topic is missing
    // (`Topic::missing_since`, 2026-12-07: the limit on what records waiting for a missing
    // topic hold applies after a quarter of `max.block.ms`): states that differ only in when
    // a flap began are told apart. It was the only change of that run to touch the model's
    // states (S10's new head-of-line check only flags a violation, and none was found).
    assert_eq!(n, 87_723, "unique states changed");
}

/// A strict broker, 1 partition × 3 records under `policy`, one error of `injectable` and
/// `disconnects` disconnects.
fn gap_policy_cfg(policy: GapPolicy, disconnects: u8, injectable: Vec<Inject>) -> ModelCfg {
    ModelCfg {
        records_per_partition: 3,
        gap_policy: policy,
        budget: Budget {
            injections: 1,
            disconnects,
            ..Budget::default()
        },
        injectable,
        ..base(BrokerMode::StrictNeverWritten)
    }
}

#[test]
fn gap_policies_on_a_permanent_error() {
    let mut counts = Vec::new();
    for policy in [GapPolicy::CutPartition, GapPolicy::Fatal] {
        let injectable = vec![
            Inject::InvalidRecord,
            Inject::MessageTooLarge,
            Inject::UnknownServerError,
        ];
        let cfg = gap_policy_cfg(policy, 1, injectable);
        counts.push(check(&format!("{policy:?}"), cfg, &[ALL_DELIVERED]));
    }
    // [6,128, 5,824] until `ACCEPTANCE_TIME`; [7,412, 7,094] until the policy applied to a
    // refusal possibly persisted too (UNKNOWN_SERVER_ERROR here; a review finding, which
    // the S3 cut property, now also checking such refusals, finds on the old code): `Fatal`
    // stops, and `CutPartition` cuts, where the later batches went on; the new ghost
    // (`cut_unless_landed`) tells more states apart.
    assert_eq!(counts, [7_265, 6_488], "unique states changed");
}

/// KAFKA-15591 after idle expiry: the broker forgets the idle producer, then the first batch
/// after the idle period draws a retriable error.
fn idle_expiry_cfg() -> ModelCfg {
    ModelCfg {
        records_per_partition: 3,
        budget: Budget {
            expiries: 1,
            injections: 1,
            connect_failures: 1,
            ..Budget::default()
        },
        injectable: vec![Inject::NotEnoughReplicas],
        ..base(BrokerMode::Lenient)
    }
}

#[test]
fn idle_expiry_then_a_retriable_error_loses_nothing() {
    let n = check("idle expiry + NER", idle_expiry_cfg(), &[ALL_DELIVERED]);
    assert_eq!(n, PINNED_NEW[0], "unique states changed");
}

/// Delivery timeouts that fire: 150 ms against a 100 ms request timeout.
fn delivery_timeout_cfg() -> ModelCfg {
    ModelCfg {
        records_per_partition: 2,
        delivery_timeout_ms: 150,
        budget: Budget {
            timeouts: 2,
            disconnects: 1,
            ..Budget::default()
        },
        ..base(BrokerMode::Lenient)
    }
}

#[test]
fn delivery_timeouts_of_sent_and_unsent_records() {
    let n = check(
        "delivery timeouts",
        delivery_timeout_cfg(),
        &[ALL_DELIVERED, TIMEOUT_SENT, DEDUP],
    );
    assert_eq!(n, PINNED_NEW[1], "unique states changed");
}

/// Two nodes, periodic metadata: the producer learns the new leader while a batch is in
/// flight to the old one, and must drain before it sends there (P7).
fn leader_learned_in_flight_cfg() -> ModelCfg {
    ModelCfg {
        records_per_partition: 3,
        nodes: 2,
        metadata_max_age_ms: 2,
        max_refreshes: 4,
        budget: Budget {
            leader_changes: 1,
            ..Budget::default()
        },
        ..base(BrokerMode::Lenient)
    }
}

#[test]
fn a_leader_change_learned_with_requests_in_flight() {
    let n = check(
        "leader learned in flight",
        leader_learned_in_flight_cfg(),
        &[ALL_DELIVERED, MOVE],
    );
    assert_eq!(n, PINNED_NEW[2], "unique states changed");
}

/// KIP-951: Kafka answers NOT_LEADER_OR_FOLLOWER (Produce v10+) with the new leader and its
/// endpoint, and the producer may move a partition on that hint before any metadata answer
/// (no periodic refresh here: the hint, or the refresh the error asks for, is how it learns).
/// P7 (drain before moving) and every safety property must hold on that path too. (A read-only
/// audit of the broker model found the hint path checked only by the random chaos runs.)
fn leader_hint_cfg() -> ModelCfg {
    ModelCfg {
        records_per_partition: 3,
        nodes: 2,
        leader_hints: true,
        budget: Budget {
            leader_changes: 1,
            disconnects: 1,
            ..Budget::default()
        },
        ..base(BrokerMode::Lenient)
    }
}

#[test]
fn a_leader_change_learned_from_a_kip_951_hint() {
    let n = check(
        "leader hint",
        leader_hint_cfg(),
        &[ALL_DELIVERED, MOVE, HINT_MOVE],
    );
    assert_eq!(n, PINNED_HINTS, "unique states changed");
}

/// Three records on two nodes, a leader change, a disconnect and one error after the append
/// (NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER or
/// KAFKA_STORAGE_ERROR with the batch in the log), or NOT_ENOUGH_REPLICAS before it: on Kafka's rules with its KIP-951
/// hints, and on the Tansu-like broker (no hints). Faults that the smaller configurations
/// take one or two at a time, together.
fn leader_change_and_errors_after_the_append_cfg(mode: BrokerMode) -> ModelCfg {
    ModelCfg {
        records_per_partition: 3,
        nodes: 2,
        leader_hints: mode != BrokerMode::TansuLike,
        budget: Budget {
            leader_changes: 1,
            disconnects: 1,
            injections: 1,
            ..Budget::default()
        },
        injectable: vec![
            Inject::NotEnoughReplicas,
            Inject::NotEnoughReplicasAfterAppend,
            Inject::TimedOutAfterAppend,
            Inject::NotLeaderAfterAppend,
            Inject::StorageErrorAfterAppend,
        ],
        ..base(mode)
    }
}

#[test]
fn leader_change_and_errors_after_the_append_on_kafka_and_tansu() {
    let mut counts = Vec::new();
    for mode in [BrokerMode::Lenient, BrokerMode::TansuLike] {
        let mut reach = vec![ALL_DELIVERED, DEDUP, MOVE];
        if mode != BrokerMode::TansuLike {
            reach.push(HINT_MOVE);
        }
        counts.push(check(
            &format!("{mode:?} leader change + after append"),
            leader_change_and_errors_after_the_append_cfg(mode),
            &reach,
        ));
    }
    assert_eq!(counts, PINNED_COMBINED, "unique states changed");
}

/// A broker whose producer-state expiry is below the client's: the state goes while the
/// client has no reason to probe, so a later batch overtakes an earlier one. Outside the
/// well-behaved profile (no S9, no L4), but every report must stay truthful.
fn silent_expiry_cfg() -> ModelCfg {
    ModelCfg {
        records_per_partition: 3,
        budget: Budget {
            silent_expiries: 1,
            injections: 1,
            ..Budget::default()
        },
        injectable: vec![Inject::NotEnoughReplicas],
        ..base(BrokerMode::Lenient)
    }
}

#[test]
fn an_unforeseeable_expiry_overtakes_a_batch_and_reports_stay_true() {
    let n = check("silent expiry", silent_expiry_cfg(), &[OVERTAKEN]);
    assert_eq!(n, PINNED_NEW[3], "unique states changed");
}

/// Two records per batch: batches form behind a busy partition, split on MESSAGE_TOO_LARGE,
/// and are retried after a disconnect.
fn multi_record_cfg() -> ModelCfg {
    ModelCfg {
        records_per_partition: 4,
        records_per_batch: 2,
        max_in_flight: 1,
        budget: Budget {
            disconnects: 1,
            injections: 1,
            ..Budget::default()
        },
        injectable: vec![Inject::MessageTooLarge, Inject::TimedOutAfterAppend],
        ..base(BrokerMode::Lenient)
    }
}

#[test]
fn multi_record_batches_split_and_retried() {
    let n = check(
        "multi-record batches",
        multi_record_cfg(),
        &[ALL_DELIVERED, SPLIT, DEDUP],
    );
    assert_eq!(n, PINNED_NEW[4], "unique states changed");
}

/// DeleteRecords: before 2.4 (KAFKA-7190) it also removed the producer's state, and the next batch draws
/// UNKNOWN_PRODUCER_ID at the head of line with the log start past the last ack (KIP-360).
fn delete_records_cfg() -> ModelCfg {
    ModelCfg {
        records_per_partition: 3,
        budget: Budget {
            delete_records: 1,
            disconnects: 1,
            ..Budget::default()
        },
        ..base(BrokerMode::UnknownPidError)
    }
}

#[test]
fn delete_records_on_an_old_broker_is_benign() {
    let n = check(
        "delete records",
        delete_records_cfg(),
        &[ALL_DELIVERED, HEAD, KIP360],
    );
    assert_eq!(n, PINNED_NEW[5], "unique states changed");
}

/// Errors that come after the broker appended the batch.
fn after_append_cfg() -> ModelCfg {
    ModelCfg {
        records_per_partition: 3,
        budget: Budget {
            injections: 2,
            ..Budget::default()
        },
        injectable: vec![
            Inject::NotEnoughReplicasAfterAppend,
            Inject::UnknownServerErrorAfterAppend,
            Inject::InvalidRecord,
        ],
        ..base(BrokerMode::Lenient)
    }
}

#[test]
fn errors_after_the_append_are_possibly_persisted() {
    let n = check("after append", after_append_cfg(), &[ALL_DELIVERED, DEDUP]);
    assert_eq!(n, PINNED_NEW[6], "unique states changed");
}

/// NOT_LEADER_OR_FOLLOWER after the append (Kafka's answer to an `acks=all` batch whose
/// leadership moved while it waited for its followers, one of which may hold it), and an
/// INVALID_RECORD that leaves a gap and forces a rebase while that batch waits to be retried.
fn not_leader_after_append_cfg() -> ModelCfg {
    ModelCfg {
        injectable: vec![Inject::NotLeaderAfterAppend, Inject::InvalidRecord],
        ..after_append_cfg()
    }
}

#[test]
fn not_leader_after_the_append_is_possibly_persisted() {
    let n = check(
        "not leader after append",
        not_leader_after_append_cfg(),
        &[ALL_DELIVERED, DEDUP],
    );
    assert_eq!(n, PINNED_NEW[9], "unique states changed");
}

/// TOPIC_AUTHORIZATION_FAILED (a seventh session of 2026-12-07): refused so twice under two
/// epochs with nothing acknowledged between, the producer fails with it what the refused
/// partition holds unsent, sequenced batches included (a gap the next epoch closes), beside NOT_LEADER_OR_FOLLOWER after the append, whose batch may be in the
/// log and keeps its place, and a disconnect. Every property holds. (948,622 unique states
/// with that failing of the unsent batches turned off: the paths it cuts short are gone.)
#[test]
fn a_topic_refused_write_fails_what_its_partition_holds_unsent() {
    let cfg = ModelCfg {
        partitions: 1,
        records_per_partition: 4,
        budget: Budget {
            injections: 3,
            disconnects: 1,
            ..Budget::default()
        },
        injectable: vec![
            Inject::NotLeaderAfterAppend,
            Inject::TopicAuthorizationFailed,
        ],
        ..base(BrokerMode::Lenient)
    };
    let n = check("topic refused", cfg, &[ALL_DELIVERED, DEDUP]);
    assert_eq!(n, 944_434, "unique states changed");
}

/// Five in flight, seven records, two retriable errors (one after the append): new batches
/// must not be sequenced behind a possibly written one.
fn five_in_flight_cfg() -> ModelCfg {
    ModelCfg {
        records_per_partition: 7,
        max_in_flight: 5,
        budget: Budget {
            injections: 2,
            ..Budget::default()
        },
        injectable: vec![Inject::TimedOutAfterAppend, Inject::NotEnoughReplicas],
        ..base(BrokerMode::Lenient)
    }
}

#[test]
fn five_in_flight_seven_records_two_retriable_errors() {
    let n = check(
        "in flight 5, 7 records",
        five_in_flight_cfg(),
        &[ALL_DELIVERED, DEDUP, NON_HEAD],
    );
    assert_eq!(n, PINNED_NEW[7], "unique states changed");
}

/// `linger.ms` 5 (every other configuration has none): two partitions of two records, up to
/// two records a batch, so a batch holding one record lingers. It goes when a tick reaches
/// its linger, when its second record fills it, or earlier with a request that goes anyway
/// (the other partition's ready batch takes it along, as Java's sender does); with a
/// disconnect and a retriable error on Kafka's rules.
fn linger_cfg() -> ModelCfg {
    ModelCfg {
        partitions: 2,
        records_per_partition: 2,
        records_per_batch: 2,
        linger_ms: 5,
        budget: Budget {
            disconnects: 1,
            injections: 1,
            ..Budget::default()
        },
        injectable: vec![Inject::NotEnoughReplicas],
        ..base(BrokerMode::Lenient)
    }
}

#[test]
fn lingering_batches_go_with_a_request_that_goes_anyway() {
    let n = check(
        "linger 5 ms, two partitions",
        linger_cfg(),
        &[ALL_DELIVERED, DEDUP],
    );
    assert_eq!(n, PINNED_LINGER, "unique states changed");
}

/// The Tansu-like broker (DUPLICATE_SEQUENCE_NUMBER, refused bumps) and the sequence wrap,
/// together with a disconnect and an error after the append.
fn tansu_wrap_cfg() -> ModelCfg {
    ModelCfg {
        records_per_partition: 7,
        max_sequence: 5,
        budget: Budget {
            disconnects: 1,
            injections: 1,
            ..Budget::default()
        },
        injectable: vec![Inject::TimedOutAfterAppend],
        ..base(BrokerMode::TansuLike)
    }
}

#[test]
fn tansu_like_broker_and_the_wrap_with_faults() {
    let n = check(
        "tansu + wrap",
        tansu_wrap_cfg(),
        &[ALL_DELIVERED, WRAP, DEDUP],
    );
    assert_eq!(n, PINNED_NEW[8], "unique states changed");
}

/// A bootstrap server slow to answer its ApiVersions has the next one tried alongside
/// (`bootstrap_patience`, here the model's backoff, so that time reaches it freely): two
/// bootstrap connections set up at once, either answering first, with a disconnect and a
/// leader change. Every property holds; the same configuration without the patience (every
/// other configuration runs so) explores strictly fewer states, so the second connection is
/// reached.
#[test]
fn a_second_bootstrap_server_tried_while_the_first_waits() {
    let cfg = |patience| ModelCfg {
        records_per_partition: 2,
        nodes: 2,
        bootstrap_patience_ms: patience,
        budget: Budget {
            disconnects: 1,
            leader_changes: 1,
            ..Budget::default()
        },
        ..base(BrokerMode::Lenient)
    };
    let with = check("bootstrap patience", cfg(Some(10)), &[ALL_DELIVERED]);
    let without = check("bootstrap patience off", cfg(None), &[ALL_DELIVERED]);
    assert!(
        with > without,
        "{with} states with the patience, {without} without"
    );
    assert_eq!([with, without], PINNED_PATIENCE, "unique states changed");
}

// ACCEPTANCE_TIME. Every count but seven (`PINNED` [2] and [3], `PINNED_NEW` [2], [3], [6],
// [7] and [9]) changed when a record that waited for its topic's metadata opened a batch
// created when the record was accepted, instead of when the metadata came (its delivery
// timeout counts from its `send`: before, it could be given up to twice its delivery
// timeout). Records sent at different times before the first Metadata answer now open
// batches with different creation times, so different delivery deadlines and timer
// interleavings: mostly more states (`two_partitions_three_records_two_disconnects`
// 4,200,219 → 5,339,427, the most; the flap configuration fewer). The old count of each is
// beside it. Reverting only that line (in `route_pending`) gave the old counts back in the
// eight configurations tried. The other half of that change (a record does not join an open
// batch created half its delivery timeout or more before) changes no count: the model's
// batches never stay open that long.
/// Unique state counts, pinned (before `ACCEPTANCE_TIME`: 4,200,219, 3,947,067, 146, 1,034,
/// 371,509, 5,766). [4] was 172,703 (and `PINNED_NEW[1]` 111,953) until a request
/// timeout on a leader's connection asked for metadata (a hung leader still completes TCP
/// connects, so waiting for the reconnect to fail cost a second request timeout): 368,691 and
/// 234,758 with that alone, the metadata request interleaving with the reconnect and the
/// retry; remembering the hung node (`MetadataState::hung`, cleared by its next answer) makes
/// the rest. Only the two configurations with request timeouts changed.
///
/// [1] was 3,955,287 until a retry to a partition whose leader moved (a new node or leader
/// epoch, from a KIP-951 hint or a metadata answer) stopped waiting out its backoff
/// (2026-12-05, the Java client's `hasLeaderChangedForTheOngoingRetry`): the paths where the
/// retry waited for its timer after the move are gone. Five more counts fell for the same
/// reason (`PINNED_PATIENCE`, `PINNED_HINTS`, `PINNED_COMBINED`, `PINNED_TRUNCATION`,
/// `PINNED_NEW` [2]); reverting only that change gives the old counts. No property changed.
///
/// [0] 5,377,045, [1] 3,271,667 and [4] 485,725 until a Metadata request lost with its
/// connection (a disconnect, a request timeout) was asked again after the backoff instead of
/// at once on the next ready connection (2026-12-06, Java's `Metadata.failedUpdate`; a
/// review finding: a fault resetting whichever connection carried it reset every one in
/// turn): the paths where it went again at the same instant are gone. Ten configurations fell
/// for that reason (also `PINNED_MODES` [3], `PINNED_PATIENCE`, `PINNED_HINTS`,
/// `PINNED_COMBINED`, `PINNED_ZOMBIE`, `PINNED_KAFKA_0_11`, `PINNED_NEW` [1] and
/// `brokers_without_kip360_or_kip951`); reverting only that change gives the old counts. No
/// property changed.
///
/// NODE_FIRST (2026-12-06): Metadata and InitProducerId requests go to an idle node
/// connection first, then an idle bootstrap one, then the least busy (a node's first); before,
/// the idle bootstrap connection won every tie (a review finding: one reaching a paused leader
/// took a refresh and held it for `request.timeout.ms` while another node's connection was
/// idle). The requests now travel on other connections in other interleavings: counts moved
/// both ways. Before: `PINNED` [0] 5,293,819, [1] 2,787,949, [4] 415,072; `PINNED_MODES` [3]
/// 872,703; `PINNED_PATIENCE` 162,098 / 9,396; `PINNED_HINTS` 45,158; `PINNED_COMBINED`
/// 1,390,440 / 795,918; `PINNED_TRUNCATION` 287,511; `PINNED_ZOMBIE` 1,053,245 / 301,993;
/// `PINNED_KAFKA_0_11` 17,392; `PINNED_NEW` [1] 204,748, [2] 120,554, [9] 1,754; the flap
/// configuration 80,918; `brokers_without_kip360_or_kip951` 821,382. (A first version that put
/// every node connection, busy or not, before any bootstrap one gave fewer in all fifteen;
/// it made a refresh on one node wait behind every Produce request there.) No property
/// changed and every planted bug is still caught. The scripted leader-change scenarios put
/// their metadata on a second node's idle connection.
///
/// [4] 433,309 until the review of those changes (2026-12-06): a batch refused by (or lost
/// with) a node that no longer leads its partition skips its backoff too, not only the one
/// whose answer brought the news; the skip needs a known, higher leader epoch; and a need for
/// fresh metadata after a lost request waits the backoff after it. Four more counts fell
/// (`PINNED_HINTS`, `PINNED_COMBINED`, `PINNED_TRUNCATION`, `PINNED_NEW` [1]). No property
/// changed.
///
/// Duplicate times: seven configurations' counts grew when the broker model began answering an
/// acknowledged duplicate with the stored batch's largest timestamp (Kafka's
/// `setLogAppendTime(duplicate.timestamp)`), on the model's CreateTime topic: such an answer
/// is no longer the same bytes as a first append's, so states holding one in flight are told
/// apart. No property changed; S4 now also checks that no record is reported with a log
/// append time. Before: `PINNED` [0] 5,339,427, [1] 3,952,495, [4] 482,878;
/// `PINNED_MODES` 973,266 / 777,924 / 777,924; `PINNED_COMBINED` [0] 2,047,686;
/// `PINNED_NEW` [1] 218,278, [4] 17,883; `brokers_without_kip360_or_kip951` 839,544.
/// Configurations without a success for a duplicate (Tansu's 46) are unchanged.
///
/// 2026-12-07 (reviews of multi-broker faults and of outcome truthfulness), three changes,
/// each reverted alone to attribute its counts. (1) A bootstrap server that lost a Metadata or
/// InitProducerId request it took (its connection reset or timed out with it in flight) is
/// passed over: the next connect goes to the next bootstrap server, not to the same one
/// again. `PINNED` [1] 2,648,741; `PINNED_PATIENCE` 148,302 / 8,794; `PINNED_HINTS` 43,202
/// (after (2)); `PINNED_COMBINED` 1,135,642 / 731,398 (after (2)). (2) After a stale
/// metadata answer (a leader epoch below one known), the next request any broker can answer
/// goes to a node at another address (a connection opened to it if need be) until an answer
/// that is not stale; before, it went to the other ready connection, possibly to the same
/// lagging broker: `PINNED_HINTS` 44,354; `PINNED_COMBINED` [0] 1,174,881;
/// `PINNED_TRUNCATION` 158,507. (3) UNKNOWN_PRODUCER_ID on the retry of a batch whose first
/// attempt was lost no longer counts as proof that attempt was refused when the partition
/// idled past the expiry: such a batch fails possibly persisted instead of going again
/// under a new identity (fewer states), and L4 allows that outcome after an expiry:
/// `PINNED_MODES` [0] 983,358; `brokers_without_kip360_or_kip951` 822,338. Every other
/// property holds, and every planted bug is still caught.
///
/// DIAL_PACE (2026-12-07, a later session; a review of wasted work): a bootstrap server at the
/// address of a known node in its reconnect backoff is not dialled (each target keeps its own
/// backoff, so a dead broker listed both ways was dialled twice as often as the backoff
/// allows). In the model every bootstrap address is a node's, so after a disconnect the
/// Metadata request it asks for no longer goes at once to a new bootstrap connection to the
/// same broker: those paths are gone. Five configurations fell: `PINNED` [0] 5,299,271 and
/// [4] 415,218, `PINNED_ZOMBIE` 1,051,343 / 301,616, `PINNED_NEW` [1] 204,721,
/// `PINNED_KAFKA_0_11` 17,421. It was the only change of that run to touch the model's
/// states (the other, a record waiting for metadata at most `max.block.ms`, does not apply:
/// the model's `max.block.ms` is an hour). Every property holds, and every planted bug is
/// still caught.
///
/// PACED_IDS (2026-12-07, a sixth session; a review of a cluster under operations): a bump
/// that takes a new producer id (the epoch exhausted, or a broker without KIP-360) is paced
/// as a local bump is: a partition's second bump in a row with none of its batches
/// acknowledged waits for the backoff (`bump_at`). Where every bump took a new id, a
/// partition refused every batch beside a healthy one took one per refusal. The waiting bump
/// and its time are state in more paths: `PINNED` [3] 1,034 -> 1,043 (the epoch runs out at
/// 2), `brokers_without_kip360_or_kip951` 818,930 -> 831,293 (every bump a new id). Reverting
/// only that change gives the old counts. Every property holds, and every planted bug is
/// still caught.
///
/// ONE_WAIT (2026-12-07, a seventh session): such a paced bump, when it takes a new producer
/// id, asks for it at once; it also waited the new-id backoff (`pid_retry_at`) on top of its
/// own, two backoffs per id. The states that waited for that second timer are gone:
/// `brokers_without_kip360_or_kip951` 831,293 -> 820,502; no other count changed (`PINNED`
/// [3], where the epoch runs out, takes one paced new id at most). Every property holds,
/// and every planted bug is still caught.
const PINNED: [usize; 6] = [5_195_459, 2_663_479, 146, 1_043, 241_258, 6_596];
/// The first three of `PINNED_MODES` were 859,998 / 685,968 / 685,968, and four of
/// `PINNED_NEW` ([4] 16,169, [6] 1,484, [7] 119,176, [9] 1,564), until the broker model
/// answered a duplicate with an injected error after the append, as Kafka's `DelayedProduce`
/// does (it waits for the original's offsets to be replicated); before, the injection was
/// dropped and the duplicate answered success. Reverting only that broker change gives the old
/// counts. The Tansu-like broker answers a duplicate 46 at once: unchanged. Before
/// `ACCEPTANCE_TIME`: 867,058, 692,038, 692,038, 779,462. The Tansu-like count was 872,770
/// until PRODUCER_FENCED gave its identity up as a refused bump does (2026-12-05: the refusal
/// count and the id given up are state now, and a new id after a second refusal with nothing
/// acknowledged waits for the backoff); reverting only that gives the old count.
/// The UnknownPidError count was 975,934 until a local epoch bump to send a refused batch again
/// that follows another with nothing acknowledged since waited for the backoff
/// (2026-12-05: a broker refusing every epoch was sent to at the speed of the network); the
/// count of such bumps, the waiting bump and its time are state now: 976,141 with one count
/// for the producer, 977,642 with one per partition (a review finding: the other
/// partitions' acknowledgements reset the producer's), 978,898 with the identity each
/// partition last asked a bump of. No property changed.
/// UnknownPidError 978,898 and TansuLike 874,129 until the bump after a gap (a batch failed
/// for good) was paced as well (2026-12-05: a partition refusing every batch for good bumped
/// the epoch once per round trip): 984,530 and 874,647 with that alone; the identity a
/// partition asked a bump under, forgotten when it moves to a new one (an id and epoch handed
/// out again asked nothing), makes UnknownPidError 983,358. No property changed. TansuLike
/// 874,647 until a Metadata request lost with its connection waited its backoff (see `PINNED`),
/// then 872,703 until idle node connections went first (NODE_FIRST), then 872,615 until the
/// Tansu-like broker stopped expiring producer state (Tansu 0.6 has no expiry, a model audit
/// of 2026-12-06; this configuration's `expiries: 1` no longer applies to it: 382,082). Its
/// other Tansu rules of that audit (per-producer epoch, sequence 0 without state, ids it
/// handed out, InitProducerId refusals) changed no count here or in any other Tansu-like
/// configuration: kprod never meets them there. No property changed.
/// (2026-12-07: UnknownPidError was 980,202 for two commits while the producer remembered
/// whether the cluster had acknowledged a locally bumped epoch; the rule that used that
/// memory now asks the batch again instead, and the count is back.)
const PINNED_MODES: [usize; 4] = [979_344, 780_446, 780_446, 382_082];
/// `a_second_bootstrap_server_tried_while_the_first_waits`: with the patience, without
/// (95,846 and 12,370 before `ACCEPTANCE_TIME`; 197,427 and 12,441 until a retry to a moved
/// leader skipped its backoff, see `PINNED`; then 173,478 and 11,075 until a Metadata request
/// lost with its connection waited its backoff; see `PINNED` for 2026-12-07).
const PINNED_PATIENCE: [usize; 2] = [148_274, 8_774];
/// `a_leader_change_learned_from_a_kip_951_hint` (96,015 before `ACCEPTANCE_TIME`; 99,498
/// until a later answer repeating the hint the partition already follows left it sendable,
/// instead of waiting for a metadata answer: more interleavings of the move, 2026-12-05;
/// 112,459 until a retry to a moved leader skipped its backoff, see `PINNED`; then 66,321 until
/// a Metadata request lost with its connection waited its backoff; 51,606 until the review of
/// those changes, see `PINNED`; see `PINNED` for 2026-12-07).
const PINNED_HINTS: usize = 42_904;
/// `leader_change_and_errors_after_the_append_on_kafka_and_tansu`: Kafka's rules, Tansu's.
/// 2,053,939 and 1,061,549 until a partition's last acknowledged offset became the highest
/// acknowledged (2026-12-05): an overtaken batch acknowledged after a later one no longer
/// moves it back, and a duplicate (no offset) no longer sets it to -1, so states that
/// differed only in it are one now. No property changed. Kafka's 2,047,796 until a later
/// answer repeating the KIP-951 hint the partition already follows left it sendable (the
/// move may now come before the metadata answer; 2026-12-05, late). 3,118,946 and 1,060,036
/// until a retry to a moved leader skipped its backoff (see `PINNED`); then 1,942,662 and
/// 892,159 until a Metadata request lost with its connection waited its backoff; 1,643,118 and
/// 798,132 until the review of those changes (see `PINNED`). Kafka's 1,174,662 until a
/// partition refused by its leader (NOT_LEADER_OR_FOLLOWER, without topic ids, which the
/// model's broker does not send) started the clock after which answers reporting a lower
/// leader epoch are believed, as an answer saying the topic was gone already did
/// (2026-12-07: a topic created again that no answer reports gone): here a metadata answer
/// computed before a leader change reaches the producer after the new leader's refusal,
/// and the states that differ only in that clock are new. Every property holds. See
/// `PINNED` for 2026-12-07.
const PINNED_COMBINED: [usize; 2] = [1_122_718, 721_117];
/// `lingering_batches_go_with_a_request_that_goes_anyway` (951,159 with the open batches
/// left out of requests that go anyway: the configuration reaches the rule).
const PINNED_LINGER: usize = 901_357;
/// `a_leader_change_truncates_what_was_written_after_the_append`.
/// 216,128 while a new leader held exactly the high watermark and a duplicate's success
/// committed the whole log (the review of that day: Kafka's new leader may hold part of what
/// lies above, and a duplicate commits its original only). 218,521 until a later answer
/// repeating the KIP-951 hint the partition already follows left it sendable (2026-12-05,
/// late). 521,613 until a retry to a moved leader skipped its backoff (see `PINNED`); 341,150
/// until the review of that change; see `PINNED` for 2026-12-07.
const PINNED_TRUNCATION: usize = 155_977;
/// `zombie_requests_written_after_the_close`: Kafka's rules with a refusal, Tansu's without.
/// [1,186,642, 354,475] while a stall made every tick free, with no time limit, and a
/// zombie's duplicate or OUT_OF_ORDER answer still counted (the review of that day).
/// [1,203,974, 339,708] until a Metadata request lost with its connection waited its backoff
/// (see `PINNED`).
/// See `PINNED` for DIAL_PACE.
const PINNED_ZOMBIE: [usize; 2] = [652_434, 192_891];
/// The configurations added for issue 15, in file order.
const PINNED_NEW: [usize; 10] = [
    // [1] was 236,273 until a batch in flight had its records reported at its delivery
    // timeout: they no longer wait for the answer or the request timeout, so the paths that
    // kept them unresolved past it (and resolved them by a later answer) are gone.
    // [2] was 147,937 until NOT_LEADER_OR_FOLLOWER under acks=all left its batch possibly
    // persisted (nothing new is sequenced behind it until a retry is answered).
    // Before `ACCEPTANCE_TIME`: 3,886, 170,965, 136,205, 398, 16,233, 2,609, 1,523, 120,194,
    // 84,174, 1,757.
    // [6] 1,523, [7] 120,194, [8] 101,766 and [9] 1,757 until the last acknowledged offset
    // became the highest acknowledged (see `PINNED_COMBINED`).
    // [1] 219,884, [6] 1,517 and [9] 1,747 until the bump after a gap was paced (see
    // `PINNED_MODES`): 220,102, 1,543 and 1,754 with that alone; forgetting the identity a
    // bump was asked under on a move to a new one makes [1] 220,020.
    // [2] 136,205 until a retry to a moved leader skipped its backoff (see `PINNED`).
    // [1] 220,020 until a Metadata request lost with its connection waited its backoff;
    // 208,007 until the review of those changes (see `PINNED`); 204,721 until DIAL_PACE
    // (see `PINNED`).
    4_403, 155_638, 110_138, 398, 17_929, 3_055, 1_543, 115_251, 98_041, 1_730,
];

/// Kafka 0.11 (Produce v3, Metadata v4, InitProducerId v0), which caches a producer's last
/// batch only and answers its duplicate with success and the original's offsets: one partition, three
/// records, a window of two in the configuration, two disconnects. kprod sends such a broker
/// one batch of a partition at a time (since 2026-12-05), so a retry whose answer was lost is
/// always the cached batch.
fn kafka_0_11_cfg() -> ModelCfg {
    ModelCfg {
        records_per_partition: 3,
        max_in_flight: 2,
        budget: Budget {
            disconnects: 2,
            ..Budget::default()
        },
        broker_versions: Advertised::KAFKA_0_11,
        ..base(BrokerMode::Kafka011)
    }
}

#[test]
fn a_kafka_0_11_broker_with_disconnects() {
    let n = check(
        "kafka 0.11 disc2",
        kafka_0_11_cfg(),
        &[ALL_DELIVERED, DEDUP],
    );
    assert_eq!(n, PINNED_KAFKA_0_11, "unique states changed");
}

/// `a_kafka_0_11_broker_with_disconnects` (added 2026-12-05 with the broker mode): 17,821
/// while the model answered the duplicate DUPLICATE_SEQUENCE_NUMBER; 17,916 once it answers
/// success with the original's offsets, as 0.11.0.0's `Log.append` does (a review of the
/// model against Kafka's source): 17,485.
/// 17,485 until a Metadata request lost with its connection waited its backoff (see `PINNED`);
/// 17,421 until DIAL_PACE (see `PINNED`).
const PINNED_KAFKA_0_11: usize = 16_835;

// -----------------------------------------------------------------------------------------
// Non-vacuity: deliberately buggy client policies must be caught.

fn expect_caught(name: &str, cfg: ModelCfg, property: &'static str) {
    let model = cfg.into_model();
    let checker = model
        .checker()
        .threads(2)
        .finish_when(HasDiscoveries::AnyOf([property].into()))
        .spawn_bfs()
        .join();
    let path = checker.discovery(property).unwrap_or_else(|| {
        panic!("{name}: the checker did not catch the bug ('{property}' holds)")
    });
    println!("{name}: '{property}' violated by:");
    for a in path.into_actions() {
        println!("    {a:?}");
    }
}

#[test]
fn catches_the_kafkajs_sequence_bug() {
    let cfg = ModelCfg {
        records_per_partition: 3,
        mutation: Mutation::KafkaJs,
        ..base(BrokerMode::Lenient)
    };
    expect_caught("KafkaJS <= 1.16", cfg, S4);
}

/// Six batches in flight (the bound off by one) and the first one's answer lost after the
/// append: its retry is no longer among the five batches Kafka caches, so the broker answers
/// the partition's true head of line OUT_OF_ORDER_SEQUENCE_NUMBER, which S10 flags in the
/// well-behaved profile since 2026-12-07 (§C's S10; before, only S7 caught this bug).
#[test]
fn catches_a_head_of_line_out_of_order_answer() {
    expect_caught(
        "in-flight off by one, seen by the broker",
        planted(five_in_flight_cfg(), Core::InflightOffByOne),
        S10,
    );
}

#[test]
fn catches_kafka_12152() {
    let cfg = ModelCfg {
        partitions: 2,
        records_per_partition: 2,
        mutation: Mutation::Kafka12152,
        budget: Budget {
            injections: 1,
            ..Budget::default()
        },
        injectable: vec![Inject::InvalidRecord],
        ..base(BrokerMode::Lenient)
    };
    expect_caught("KAFKA-12152", cfg, S10);
}

#[test]
fn catches_d10_reset_on_metadata_flap() {
    let cfg = ModelCfg {
        records_per_partition: 2,
        metadata_max_age_ms: 2,
        max_refreshes: 8,
        mutation: Mutation::D10ResetOnFlap,
        budget: Budget {
            flaps: 1,
            ..Budget::default()
        },
        ..base(BrokerMode::Lenient)
    };
    expect_caught("D10", cfg, S4);
}

#[test]
fn catches_d12_resequenced_possibly_persisted_batch() {
    let cfg = ModelCfg {
        records_per_partition: 2,
        mutation: Mutation::D12Resequence,
        budget: Budget {
            disconnects: 1,
            ..Budget::default()
        },
        ..base(BrokerMode::Lenient)
    };
    expect_caught("D12", cfg, S1);
}

/// One partition's producer state expires after the producer idled
/// `producer.id.expiration.ms` while the other's is kept: Kafka expires each partition on its
/// own, from the producer's last write there, so a partition written to later keeps its state.
/// The records sent after it go to both partitions in any interleaving.
fn partition_expiry_cfg(mode: BrokerMode, records_per_partition: u8) -> ModelCfg {
    ModelCfg {
        partitions: 2,
        records_per_partition,
        max_in_flight: 2,
        budget: Budget {
            partition_expiries: 1,
            injections: 1,
            ..Budget::default()
        },
        injectable: vec![Inject::NotEnoughReplicas],
        ..base(mode)
    }
}

#[test]
fn one_partition_expires_while_the_other_keeps_its_state() {
    let mut counts = Vec::new();
    for mode in [
        BrokerMode::UnknownPidError,
        BrokerMode::Lenient,
        BrokerMode::StrictNeverWritten,
    ] {
        let name = format!("partition expiry {mode:?}");
        counts.push(check(
            &name,
            partition_expiry_cfg(mode, 3),
            &[ALL_DELIVERED],
        ));
    }
    assert_eq!(counts, [210_534, 162_666, 162_666], "unique states changed");
}

/// The expired partition draws UNKNOWN_PRODUCER_ID on a broker before KIP-360's leniency
/// (Kafka before 2.5) and the producer bumps its epoch: the partition that kept its state
/// must restart its sequence too (checked by S10 on the broker's side).
#[test]
fn catches_kafka_12152_after_one_partition_expired() {
    let cfg = ModelCfg {
        mutation: Mutation::Kafka12152,
        ..partition_expiry_cfg(BrokerMode::UnknownPidError, 2)
    };
    expect_caught("KAFKA-12152 after a partition expiry", cfg, S10);
}

/// A planted core bug (kprod-core's `mutations` feature) in `cfg`.
fn planted(cfg: ModelCfg, bug: Core) -> ModelCfg {
    ModelCfg {
        core_mutation: bug,
        ..cfg
    }
}

#[test]
fn catches_kafka_15591_after_idle_expiry() {
    let cfg = planted(idle_expiry_cfg(), Core::NoIdleProbe);
    expect_caught("no idle probe", cfg, S9);
}

#[test]
fn catches_a_timed_out_sent_batch_reported_not_persisted() {
    let cfg = planted(delivery_timeout_cfg(), Core::TimeoutForgetsAttempts);
    expect_caught("timeout forgets attempts", cfg, S9);
}

#[test]
fn catches_no_drain_before_a_leader_change() {
    let cfg = planted(
        leader_learned_in_flight_cfg(),
        Core::NoDrainBeforeLeaderChange,
    );
    expect_caught("no drain (P7)", cfg, P7);
}

#[test]
fn catches_no_drain_before_a_move_on_a_leader_hint() {
    let cfg = planted(leader_hint_cfg(), Core::NoDrainBeforeLeaderChange);
    expect_caught("no drain on a hint (P7)", cfg, P7);
}

#[test]
fn catches_an_implicit_ack_of_an_overtaken_batch() {
    let cfg = planted(silent_expiry_cfg(), Core::ImplicitAckOvertaken);
    expect_caught("implicit ack (P11)", cfg, S4);
}

#[test]
fn catches_a_retry_with_other_bytes() {
    let cfg = planted(multi_record_cfg(), Core::RetryReencoded);
    expect_caught("re-encoded retry (P2)", cfg, P2);
}

#[test]
fn catches_a_head_rejection_retried_forever() {
    let cfg = ModelCfg {
        max_transmits: 16,
        ..planted(delete_records_cfg(), Core::HeadRejectionRetried)
    };
    expect_caught("head rejection retried", cfg, L2);
}

/// D15 (KAFKA-5793), librdkafka#4438: an OUT_OF_ORDER behind an earlier unresolved batch
/// taken for a head-of-line refusal signals data loss that did not happen.
#[test]
fn catches_a_non_head_refusal_taken_for_the_head() {
    let cfg = planted(five_in_flight_cfg(), Core::NonHeadTreatedAsHead);
    expect_caught("non-head refusal judged as the head", cfg, S9);
}

/// D14 (KafkaJS #485, aiokafka #510, sarama #1737): UNKNOWN_PRODUCER_ID after an idle
/// producer's state expired taken for data loss.
#[test]
fn catches_an_unknown_producer_id_taken_for_data_loss() {
    let cfg = ModelCfg {
        records_per_partition: 3,
        budget: Budget {
            expiries: 1,
            ..Budget::default()
        },
        ..planted(
            base(BrokerMode::UnknownPidError),
            Core::UnknownPidAsDataLoss,
        )
    };
    expect_caught("UNKNOWN_PRODUCER_ID judged by the log start", cfg, S9);
}

#[test]
fn catches_a_new_producer_id_that_keeps_the_sequence() {
    let cfg = ModelCfg {
        records_per_partition: 3,
        max_epoch: 1,
        budget: Budget {
            injections: 2,
            ..Budget::default()
        },
        injectable: vec![Inject::NotEnoughReplicas, Inject::InvalidRecord],
        ..base(BrokerMode::Lenient)
    };
    expect_caught(
        "new pid keeps sequence",
        planted(cfg, Core::NewPidKeepsSequence),
        S8,
    );
}

#[test]
fn catches_gap_policies_that_do_not_cut() {
    for policy in [GapPolicy::CutPartition, GapPolicy::Fatal] {
        let cfg = gap_policy_cfg(policy, 0, vec![Inject::InvalidRecord]);
        expect_caught(
            &format!("{policy:?} ignored"),
            planted(cfg, Core::GapPolicyIgnored),
            S3_CUT,
        );
    }
}

/// The policies' cut of a refusal possibly persisted (UNKNOWN_SERVER_ERROR, not written by
/// the strict broker here): ignored, the batch behind it is delivered past the gap.
#[test]
fn catches_gap_policies_that_do_not_cut_after_a_refusal_possibly_persisted() {
    for policy in [GapPolicy::CutPartition, GapPolicy::Fatal] {
        let cfg = gap_policy_cfg(policy, 1, vec![Inject::UnknownServerError]);
        expect_caught(
            &format!("{policy:?} ignored after UNKNOWN_SERVER_ERROR"),
            planted(cfg, Core::GapPolicyIgnored),
            S3_CUT,
        );
    }
}

/// Every injectable error parses back from its `Debug` (a counterexample containing one must
/// be replayable: `StorageErrorAfterAppend` was missing).
#[test]
fn every_injected_error_parses_back() {
    use kprod_model::model::Action as A;
    for k in [
        Inject::NotEnoughReplicas,
        Inject::TimedOutAfterAppend,
        Inject::InvalidRecord,
        Inject::MessageTooLarge,
        Inject::UnknownServerError,
        Inject::UnknownServerErrorAfterAppend,
        Inject::NotEnoughReplicasAfterAppend,
        Inject::NotLeaderAfterAppend,
        Inject::StorageErrorAfterAppend,
        Inject::TopicAuthorizationFailed,
    ] {
        let action = A::Inject(1, k);
        assert_eq!(A::parse(&format!("{action:?}")), Some(action));
    }
}

#[test]
fn catches_outcomes_out_of_send_order() {
    let cfg = planted(after_append_cfg(), Core::OutcomesAsLearned);
    expect_caught("outcomes as learned", cfg, O1);
}

#[test]
fn catches_errors_after_the_append_taken_as_not_persisted() {
    let cfg = planted(after_append_cfg(), Core::AfterAppendNotPersisted);
    expect_caught("after append not persisted", cfg, S4);
}

/// Before: NOT_LEADER_OR_FOLLOWER was taken as not written, so the batch was sequenced
/// again under the new epoch after the rebase, and written twice.
#[test]
fn catches_not_leader_after_the_append_taken_as_not_persisted() {
    let cfg = planted(not_leader_after_append_cfg(), Core::AfterAppendNotPersisted);
    expect_caught("not leader after append not persisted", cfg, S1);
}

#[test]
fn catches_batches_sequenced_behind_a_possibly_written_one() {
    let cfg = planted(five_in_flight_cfg(), Core::SequenceBehindPossiblyWritten);
    expect_caught("sequenced behind possibly written", cfg, L4);
}

#[test]
fn catches_an_in_flight_bound_off_by_one() {
    expect_caught(
        "in-flight off by one (tansu + wrap)",
        planted(tansu_wrap_cfg(), Core::InflightOffByOne),
        S7,
    );
    expect_caught(
        "in-flight off by one (in flight 5)",
        planted(five_in_flight_cfg(), Core::InflightOffByOne),
        S7,
    );
}

#[test]
fn catches_a_duplicate_acknowledged_at_offset_minus_one() {
    expect_caught(
        "46 at offset -1",
        planted(tansu_wrap_cfg(), Core::DuplicateAtMinusOne),
        S4,
    );
}

/// Kafka answers an acknowledged duplicate with the stored batch's largest timestamp as its
/// log append time, on a CreateTime topic too; taken for the log's time, a retried record is
/// reported with a time the log does not keep.
#[test]
fn catches_a_duplicate_time_taken_for_the_logs() {
    let cfg = ModelCfg {
        partitions: 1,
        records_per_partition: 2,
        budget: Budget {
            disconnects: 1,
            ..Budget::default()
        },
        ..base(BrokerMode::Lenient)
    };
    expect_caught(
        "duplicate time trusted",
        planted(cfg, Core::DuplicateTimeTrusted),
        S4,
    );
}

#[test]
fn catches_an_early_wrap() {
    expect_caught(
        "early wrap (tansu + wrap)",
        planted(tansu_wrap_cfg(), Core::EarlyWrap),
        S5,
    );
    expect_caught(
        "early wrap (wrap)",
        planted(wrap_cfg(), Core::EarlyWrap),
        S5,
    );
}

/// The other side of the wrap (a model audit finding, 2026-12-06): a producer that sends the
/// sequence after the largest instead of 0 was taken by the broker model as the next
/// sequence. Kafka's sequence would turn negative there, refused INVALID_RECORD: the broker
/// now refuses it and counts it a client bug.
#[test]
fn catches_a_late_wrap() {
    expect_caught("late wrap (wrap)", planted(wrap_cfg(), Core::LateWrap), S10);
}

/// The configured window of two on Kafka 0.11: two batches' answers lost, the retry of the
/// first is no longer the cached batch and draws OUT_OF_ORDER_SEQUENCE_NUMBER, and a written
/// batch fails possibly persisted although no fault but disconnects happened.
#[test]
fn catches_a_full_window_on_kafka_0_11() {
    expect_caught(
        "full window on 0.11",
        planted(kafka_0_11_cfg(), Core::FullWindowOnKafka011),
        L4,
    );
}

/// An exhausted epoch bumped once more instead of a new producer id: the broker model, which
/// refuses an epoch above the largest (Kafka's would turn negative), counts it a client bug
/// (a model audit, 2026-12-07: the broker model had no epoch limit, so this passed).
#[test]
fn catches_an_epoch_bumped_past_its_largest() {
    expect_caught(
        "epoch past its largest",
        planted(epoch_exhaustion_cfg(), Core::EpochPastMax),
        S10,
    );
}

#[test]
fn catches_a_local_epoch_bump_without_kip360() {
    let cfg = ModelCfg {
        records_per_partition: 2,
        budget: Budget {
            injections: 1,
            ..Budget::default()
        },
        injectable: vec![Inject::InvalidRecord],
        broker_versions: Advertised::KAFKA_2_3,
        ..base(BrokerMode::UnknownPidError)
    };
    expect_caught(
        "local bump without KIP-360",
        planted(cfg, Core::LocalBumpWithoutKip360),
        S11,
    );
}

// -----------------------------------------------------------------------------------------
// Regressions: each counterexample the checker found during development, replayed step by
// step against the current producer. Every safety property must hold on every state of the
// path (and the path must still apply, or the regression has gone stale).

fn replay_holds(name: &str, cfg: ModelCfg, path: &[&str]) {
    use kprod_model::model::Action as A;
    let model = cfg.into_model();
    let props = model.properties();
    let mut s = model.init_states().pop().expect("initial state");
    for (step, raw) in path.iter().enumerate() {
        let action = A::parse(raw).unwrap_or_else(|| panic!("{name}: cannot parse {raw}"));
        let mut enabled = Vec::new();
        model.actions(&s, &mut enabled);
        assert!(
            enabled.contains(&action),
            "{name}: step {step} {action:?} no longer applies (enabled: {enabled:?})"
        );
        s = model.next_state(&s, action).expect("action applies");
        for p in props
            .iter()
            .filter(|p| p.expectation == Expectation::Always)
        {
            assert!(
                (p.condition)(&model, &s),
                "{name}: '{}' fails at step {step}",
                p.name
            );
        }
    }
}

#[test]
fn regression_fail_after_an_ambiguous_attempt_reports_possibly_persisted() {
    // Found as an S4 violation: a batch written by the broker, its answer lost to a
    // disconnect, then refused on retry, was reported not persisted.
    let cfg = ModelCfg {
        partitions: 2,
        records_per_partition: 2,
        budget: Budget {
            disconnects: 1,
            injections: 1,
            ..Budget::default()
        },
        injectable: vec![
            Inject::NotEnoughReplicas,
            Inject::TimedOutAfterAppend,
            Inject::InvalidRecord,
        ],
        ..base(BrokerMode::Lenient)
    };
    let path = [
        "Send(1)",
        "Process(ConnId(0))",
        "Deliver(ConnId(0))",
        "Process(ConnId(0))",
        "Process(ConnId(0))",
        "Deliver(ConnId(0))",
        "Deliver(ConnId(0))",
        "Process(ConnId(1))",
        "Deliver(ConnId(1))",
        "Process(ConnId(1))",
        "Disconnect(ConnId(1))",
        "Tick",
        "Process(ConnId(2))",
        "Deliver(ConnId(2))",
        "Inject(1, InvalidRecord)",
        "Process(ConnId(2))",
        "Deliver(ConnId(2))",
    ];
    replay_holds("ambiguous then refused", cfg, &path);
}

#[test]
fn regression_idle_expiry_on_an_old_broker_is_not_data_loss() {
    // Found as an L4/S9 violation: UNKNOWN_PRODUCER_ID after the broker forgot an idle
    // producer was treated as data loss.
    let cfg = ModelCfg {
        records_per_partition: 3,
        budget: Budget {
            expiries: 1,
            restarts: 1,
            disconnects: 1,
            ..Budget::default()
        },
        ..base(BrokerMode::UnknownPidError)
    };
    let path = [
        "Send(0)",
        "Process(ConnId(0))",
        "Deliver(ConnId(0))",
        "Process(ConnId(0))",
        "Process(ConnId(0))",
        "Deliver(ConnId(0))",
        "Deliver(ConnId(0))",
        "Process(ConnId(1))",
        "Deliver(ConnId(1))",
        "Process(ConnId(1))",
        "Deliver(ConnId(1))",
        "Expire",
        "Send(0)",
        "Send(0)",
        "Process(ConnId(1))",
        "Deliver(ConnId(1))",
        "Disconnect(ConnId(1))",
        "Tick",
        "Process(ConnId(2))",
        "Deliver(ConnId(2))",
        "Process(ConnId(2))",
        "Deliver(ConnId(2))",
        "Process(ConnId(2))",
        "Deliver(ConnId(2))",
    ];
    replay_holds("idle expiry", cfg, &path);
}

#[test]
fn regression_a_metadata_flap_does_not_fail_records() {
    // Found as an S9 violation: a topic missing from one metadata answer failed its records.
    let cfg = ModelCfg {
        records_per_partition: 3,
        budget: Budget {
            flaps: 2,
            ..Budget::default()
        },
        ..base(BrokerMode::Lenient)
    };
    let path = [
        "Send(0)",
        "Process(ConnId(0))",
        "Deliver(ConnId(0))",
        "Process(ConnId(0))",
        "Deliver(ConnId(0))",
        "Flap",
        "Process(ConnId(0))",
        "Deliver(ConnId(0))",
    ];
    replay_holds("flap", cfg, &path);
}

/// Brokers without KIP-360 and KIP-951 (Apache Kafka 2.0-2.3: Produce v7, Metadata v8,
/// InitProducerId v1, UNKNOWN_PRODUCER_ID for a producer without state): the producer never
/// bumps its epoch locally (S11) but takes a new producer id, which every partition starts at
/// sequence 0 (S8) once drained, across a disconnect, a producer-state expiry and a permanent
/// batch error.
#[test]
fn brokers_without_kip360_or_kip951() {
    let cfg = ModelCfg {
        partitions: 2,
        records_per_partition: 2,
        max_in_flight: 2,
        budget: Budget {
            disconnects: 1,
            injections: 1,
            expiries: 1,
            ..Budget::default()
        },
        injectable: vec![Inject::NotEnoughReplicas, Inject::InvalidRecord],
        broker_versions: Advertised::KAFKA_2_3,
        ..base(BrokerMode::UnknownPidError)
    };
    let n = check("no KIP-360/951", cfg, &[ALL_DELIVERED, DEDUP, NO_KIP360]);
    // 736,396 until a new producer id whose predecessor had nothing acknowledged waited for
    // the backoff (on these brokers every bump is a new id: a second one in a row, after a
    // refusal and an expiry, now waits for time to pass); 747,358 until a batch acknowledged
    // under the producer id last given up reset that backoff too (the producer remembers that
    // id until then, which tells apart states that differed only in ids spent earlier);
    // 755,715 until `ACCEPTANCE_TIME`; 840,220 until a Metadata request lost with its
    // connection waited its backoff (see `PINNED`).
    // 821,382 until NODE_FIRST (see `PINNED`); 822,338 until 2026-12-07 (see `PINNED`);
    // 818,930 until PACED_IDS (see `PINNED`); 831,293 until ONE_WAIT (see `PINNED`).
    assert_eq!(n, 820_502, "unique states changed");
}

/// One partition, three records, two in flight, a stall and a request timeout, and one of
/// `injectable` if any.
fn stalled_cfg(mode: BrokerMode, injectable: &[Inject]) -> ModelCfg {
    ModelCfg {
        partitions: 1,
        records_per_partition: 3,
        max_in_flight: 2,
        budget: Budget {
            stalls: 1,
            timeouts: 1,
            injections: u8::from(!injectable.is_empty()),
            ..Budget::default()
        },
        injectable: injectable.to_vec(),
        ..base(mode)
    }
}

/// Zombie requests (from the model review: none were modelled). A connection's broker side
/// stalls: its answers are lost, and the requests it has not read yet are read and acted on
/// late, even after the producer closed the connection (Kafka reads a request off the socket
/// before it notices the close). The producer gives the connection up at its request
/// timeout and retries elsewhere; the zombie may land before, between or after the retries,
/// and after a new epoch. Under Kafka's rules, with a record refused for good once
/// (a gap, so a bump) while the zombie waits: every property holds. On the Tansu-like broker
/// without that refusal, too (with it, see the test after this one).
#[test]
fn zombie_requests_written_after_the_close() {
    let kafka = stalled_cfg(BrokerMode::Lenient, &[Inject::InvalidRecord]);
    let tansu = stalled_cfg(BrokerMode::TansuLike, &[]);
    let counts = [
        check("Lenient zombie, a refusal", kafka, &[ALL_DELIVERED, ZOMBIE]),
        check("TansuLike zombie", tansu, &[ALL_DELIVERED, ZOMBIE]),
    ];
    assert_eq!(counts, PINNED_ZOMBIE, "unique states changed");
}

/// The limit of the test above. A broker that fences a given-up producer id by its epoch
/// (Kafka since 2.5: the bump keeps the id, and an older epoch is refused) drops a zombie of
/// the identity given up. One that takes a new producer id instead (Tansu refuses the bump;
/// Kafka before 2.5; the epoch exhausted) cannot: a zombie of the old id still fits that id's
/// sequence and lands, after records written under the new id. The checker finds exactly
/// this: the record was reported possibly persisted (S4 holds), but the log is out of send
/// order (S2). No client can prevent it without the broker's fencing; the README says so
/// under "Known limits and choices".
#[test]
fn a_zombie_of_a_given_up_producer_id_lands_after_the_new_ids_records_on_tansu() {
    let cfg = stalled_cfg(BrokerMode::TansuLike, &[Inject::InvalidRecord]);
    let model: KafkaModel = cfg.into_model();
    let props = model.properties();
    let checker = model.checker().threads(2).spawn_dfs().join();
    let violated: Vec<&str> = (props.iter())
        .filter(|p| matches!(p.expectation, Expectation::Always))
        .filter(|p| checker.discovery(p.name).is_some())
        .map(|p| p.name)
        .collect();
    assert_eq!(
        violated,
        ["S2 send order"],
        "only the order, never the truth"
    );
    let path = checker.discovery("S2 send order").unwrap().into_actions();
    assert!(
        path.iter().any(|a| matches!(a, Action::ProcessZombie(_))),
        "a zombie landed: {path:?}"
    );
}

/// Truncation on a leader change (from the model review: the new leader always had the whole
/// log). Kafka's new leader is an in-sync follower that holds the log up to the high
/// watermark; a batch answered with an error after the append (NOT_ENOUGH_REPLICAS_AFTER_APPEND,
/// REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER) may be above it, and the old leader truncates it
/// when it follows the new one. The producer retries such a batch as possibly written: the new
/// leader, whose producer state is rebuilt from what it holds, takes it as new. Every property
/// holds, every record is delivered on some path, and the truncation is reached.
fn truncation_cfg(truncation: bool) -> ModelCfg {
    ModelCfg {
        records_per_partition: 3,
        nodes: 2,
        max_in_flight: 2,
        leader_hints: true,
        truncation,
        budget: Budget {
            leader_changes: 1,
            injections: 2,
            ..Budget::default()
        },
        injectable: vec![
            Inject::NotEnoughReplicasAfterAppend,
            Inject::TimedOutAfterAppend,
            Inject::NotLeaderAfterAppend,
        ],
        ..base(BrokerMode::Lenient)
    }
}

#[test]
fn a_leader_change_truncates_what_was_written_after_the_append() {
    let n = check(
        "truncation",
        truncation_cfg(true),
        &[ALL_DELIVERED, DEDUP, TRUNCATED, MOVE],
    );
    assert_eq!(n, PINNED_TRUNCATION, "unique states changed");
}

/// An error after the append taken for a delivery (the leader wrote the batch): only a
/// leader change that truncates it shows the report false. Without truncation the same
/// planted bug goes unseen: the checker needs the faithful broker to catch it.
#[test]
fn catches_an_error_after_the_append_taken_for_a_delivery_only_with_truncation() {
    expect_caught(
        "after append delivered (truncation)",
        planted(truncation_cfg(true), Core::AfterAppendDelivered),
        S4,
    );
    let model = planted(truncation_cfg(false), Core::AfterAppendDelivered).into_model();
    let checker = model.checker().threads(2).spawn_dfs().join();
    assert!(
        checker.discovery(S4).is_none(),
        "without truncation the report is true: the batch stays in the log"
    );
}

/// With truncation, a delivery must be of a record below the high watermark (spec C.2's
/// committed prefix): the planted bug is caught with no leader change at all, where before
/// only a truncating leader change on the same path showed the report false (a model
/// review).
#[test]
fn catches_a_delivery_above_the_high_watermark_without_a_leader_change() {
    let mut cfg = truncation_cfg(true);
    cfg.budget.leader_changes = 0;
    expect_caught(
        "after append delivered (no leader change)",
        planted(cfg, Core::AfterAppendDelivered),
        S4,
    );
}

/// The Tansu-like broker takes a sequence at or below its last for a duplicate, "below"
/// meaning the nearer half of the model's small circle of sequences: with sequences up to 7
/// and five batches in flight, the fifth (four ahead) looked four behind, and a seeded
/// simulation saw it answered DUPLICATE_SEQUENCE_NUMBER, reported delivered and never
/// written: a model artefact no broker with 2^31 sequences shows. Such a configuration is
/// refused when the model is made.
#[test]
#[should_panic(expected = "the Tansu-like broker needs")]
fn a_tansu_like_broker_refuses_a_circle_of_sequences_too_small_for_the_window() {
    let cfg = ModelCfg {
        max_in_flight: 5,
        max_sequence: 7,
        ..base(BrokerMode::TansuLike)
    };
    let _ = cfg.into_model();
}
