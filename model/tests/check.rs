//! Exhaustive model checking of the real producer, one bounded configuration per test.
//!
//! Every configuration is explored to completion with BFS. Every safety property must hold,
//! the listed reachability targets must be reached (proof that the configuration explores
//! what it claims), and the number of unique states is pinned so that any change to the
//! producer or the model that alters the state space is noticed.

use kprod_core::GapPolicy;
use kprod_model::broker::BrokerMode;
use kprod_model::model::{Budget, Inject, KafkaModel, ModelCfg, Mutation};
use stateright::{Checker, Expectation, Model};

const ALL_DELIVERED: &str = "all delivered";
const DEDUP: &str = "a retry is deduplicated";
const NON_HEAD: &str = "a non-head OOOSN is resolved without a bump";
const HEAD: &str = "a head rejection leads to a rebase";
const BUMP_WHILE: &str = "a bump completes while another partition has old-epoch requests";
const WRAP: &str = "the sequence wraps";
const NEW_PID: &str = "a new producer id after epoch exhaustion";
const OLD_LEADER: &str = "a response from the old leader after a request to the new one";

/// Checks `cfg` exhaustively; returns the number of unique states.
fn check(name: &str, cfg: ModelCfg, reach: &[&str]) -> usize {
    let model: KafkaModel = cfg.into_model();
    let props = model.properties();
    let start = std::time::Instant::now();
    let checker = model.checker().threads(2).spawn_bfs().join();
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
    let n = check("2p3r-disc2", cfg, &[ALL_DELIVERED, DEDUP, HEAD]);
    assert_eq!(n, PINNED[0], "unique states changed");
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

#[test]
fn sequence_wraps() {
    let cfg = ModelCfg {
        records_per_partition: 7,
        max_sequence: 5,
        ..base(BrokerMode::StrictNeverWritten)
    };
    let n = check("wrap", cfg, &[ALL_DELIVERED, WRAP]);
    assert_eq!(n, PINNED[2], "unique states changed");
}

#[test]
fn epoch_exhaustion_takes_a_new_producer_id() {
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

#[test]
fn broker_state_loss_on_old_brokers() {
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
    let n = check("expiry+restart", cfg, &[ALL_DELIVERED, HEAD]);
    assert_eq!(n, PINNED[5], "unique states changed");
}

#[test]
fn metadata_flaps_keep_sequence_state() {
    let cfg = ModelCfg {
        records_per_partition: 2,
        metadata_max_age_ms: 2,
        max_transmits: 14,
        budget: Budget {
            flaps: 2,
            ..Budget::default()
        },
        ..base(BrokerMode::Lenient)
    };
    let n = check("flaps", cfg, &[ALL_DELIVERED]);
    assert_eq!(n, 176_306, "unique states changed");
}

#[test]
fn gap_policies_on_a_permanent_error() {
    let mut counts = Vec::new();
    for policy in [GapPolicy::CutPartition, GapPolicy::Fatal] {
        let cfg = ModelCfg {
            records_per_partition: 3,
            gap_policy: policy,
            budget: Budget {
                injections: 1,
                disconnects: 1,
                ..Budget::default()
            },
            injectable: vec![
                Inject::InvalidRecord,
                Inject::MessageTooLarge,
                Inject::UnknownServerError,
            ],
            ..base(BrokerMode::StrictNeverWritten)
        };
        counts.push(check(&format!("{policy:?}"), cfg, &[ALL_DELIVERED]));
    }
    assert_eq!(counts, [5_528, 5_243], "unique states changed");
}

/// Unique state counts, pinned.
const PINNED: [usize; 6] = [2_823_129, 1_672_983, 146, 990, 141_301, 5_263];
const PINNED_MODES: [usize; 4] = [608_134, 504_200, 504_200, 575_794];

// -----------------------------------------------------------------------------------------
// Non-vacuity: deliberately buggy client policies must be caught.

fn expect_caught(name: &str, cfg: ModelCfg, property: &'static str) {
    let model = cfg.into_model();
    let checker = model.checker().threads(2).spawn_bfs().join();
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
    expect_caught("KafkaJS <= 1.16", cfg, "S4 truthful reports");
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
    expect_caught("KAFKA-12152", cfg, "S10 broker sees no client bug");
}

#[test]
fn catches_d10_reset_on_metadata_flap() {
    let cfg = ModelCfg {
        records_per_partition: 2,
        metadata_max_age_ms: 2,
        max_transmits: 14,
        mutation: Mutation::D10ResetOnFlap,
        budget: Budget {
            flaps: 1,
            ..Budget::default()
        },
        ..base(BrokerMode::Lenient)
    };
    expect_caught("D10", cfg, "S4 truthful reports");
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
    expect_caught("D12", cfg, "S1 no duplicates");
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
