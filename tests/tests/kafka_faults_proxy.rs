//! The fault-proxy scenarios of `faults_tansu.rs` (shared in `kprod_tests::faults`) against a
//! 3-node Apache Kafka 4.4.0 cluster (KRaft), then one node of Apache Kafka 2.3.1 and one of
//! 0.11.0.3 (ZooKeeper; their own protocol versions), with one fault proxy in front of each
//! node's client listener. Every node advertises its proxy's port to clients, so every connection
//! kprod opens goes through a proxy, while the brokers replicate directly and the independent
//! reader (librdkafka's consumer) reads unproxied.
//!
//! Each scenario gets its own topic (replication factor 3, min.insync.replicas 2, at least one
//! partition per node so that every node leads one) and applies its faults on the proxy in
//! front of the leader of the partition under test, or on all three. The proxies are healed,
//! and the connections of the previous scenario closed, before each scenario. On top of the
//! Tansu assertions, Kafka answers an in-window duplicate retry with NONE and the original
//! offset, so every acknowledgement must carry its offset. Every scenario: no duplicate, send
//! order kept, every acknowledged record at its offset, no `NotPersisted` record in the log,
//! every future resolved.
//!
//! The cluster (three 512 MiB JVMs) is started once and the scenarios run one after another
//! in one test; a failing scenario does not stop the others, and the test fails at the end
//! naming every failed scenario. `KPROD_FAULT_SCENARIOS=name,name` runs only those.
//!
//! Needs `scripts/install-kafka.sh` (and `kafka-2`, `kafka-0.11`) and Java 17+.

use std::time::{Duration, Instant};

use kprod_tests::e2e::runtime;
use kprod_tests::faults::{self, ProxiedKafka};
use kprod_tests::kafka::{KafkaOptions, KAFKA_0_11_VERSION, KAFKA_2_VERSION};
use kprod_tests::ledger::Summary;

/// One scenario's result.
struct Outcome {
    name: &'static str,
    took: Duration,
    result: Result<Summary, String>,
}

fn panic_message(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(p) => p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "panic without a message".to_owned()),
        Err(e) => format!("cancelled: {e}"),
    }
}

fn table(outcomes: &[Outcome]) -> String {
    let mut t = format!(
        "{:<42} {:>5} {:>6} {:>7} {:>6} {:>6} {:>7} {:>6} {:>8}  result",
        "scenario", "sent", "acked", "no-off", "fail-N", "fail-P", "P-in-log", "in-log", "time"
    );
    for o in outcomes {
        let line = match &o.result {
            Ok(s) => format!(
                "{:<42} {:>5} {:>6} {:>7} {:>6} {:>6} {:>7} {:>6} {:>7.1}s  ok",
                o.name,
                s.sent,
                s.delivered,
                s.delivered_without_offset,
                s.failed_not_persisted,
                s.failed_possibly_persisted,
                s.possibly_persisted_present,
                s.in_log,
                o.took.as_secs_f64()
            ),
            Err(e) => format!(
                "{:<42} {:>59.1}s  FAILED: {}",
                o.name,
                o.took.as_secs_f64(),
                e.lines().next().unwrap_or("")
            ),
        };
        t.push('\n');
        t.push_str(&line);
    }
    t
}

/// Every scenario of `faults_tansu.rs` on three Kafka nodes behind three proxies.
#[test]
fn fault_scenarios_on_three_kafka_nodes() {
    run_scenarios(KafkaOptions::new(3));
}

/// The same scenarios on one Apache Kafka 2.3.1 node (ZooKeeper; no KIP-360, so a needed bump
/// is a new producer id).
#[test]
fn fault_scenarios_on_kafka_2_3() {
    run_scenarios(KafkaOptions::new(1).version(KAFKA_2_VERSION));
}

/// The same scenarios on one Apache Kafka 0.11.0.3 node (ZooKeeper; Produce v3: the broker
/// deduplicates against a producer's last batch of a partition only, and kprod keeps one
/// batch of a partition in flight there).
#[test]
fn fault_scenarios_on_kafka_0_11() {
    run_scenarios(KafkaOptions::new(1).version(KAFKA_0_11_VERSION));
}

/// Runs every scenario (or those `KPROD_FAULT_SCENARIOS` names, outside CI) on one cluster
/// started as `opts` says, and fails naming every scenario that failed.
fn run_scenarios(opts: KafkaOptions) {
    let only: Option<Vec<String>> = std::env::var("KPROD_FAULT_SCENARIOS")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_owned()).collect());
    let scenarios: Vec<_> = faults::ALL
        .iter()
        .filter(|s| only.as_ref().is_none_or(|o| o.iter().any(|n| n == s.name)))
        .collect();
    assert!(
        !scenarios.is_empty(),
        "no scenario named in KPROD_FAULT_SCENARIOS"
    );
    // A selection is for local runs; under CI every scenario runs.
    assert!(
        only.is_none() || std::env::var_os("CI").is_none(),
        "KPROD_FAULT_SCENARIOS is set under CI: every scenario must run"
    );
    if only.is_some() {
        let skipped: Vec<&str> = (faults::ALL.iter())
            .filter(|s| !scenarios.iter().any(|k| k.name == s.name))
            .map(|s| s.name)
            .collect();
        eprintln!("KPROD_FAULT_SCENARIOS: skipping {skipped:?}");
    }
    let started = Instant::now();
    let (nodes, version) = (opts.brokers, opts.version);
    let outcomes = runtime().block_on(async {
        let cluster = ProxiedKafka::start_with(opts).await;
        eprintln!(
            "{nodes} Kafka {version} node(s) up in {:.1?}",
            started.elapsed()
        );
        let mut outcomes = Vec::new();
        for s in scenarios {
            let t0 = Instant::now();
            let env = cluster
                .env(&format!("kafka-{}", s.topic), s.partitions)
                .await;
            let result = tokio::spawn((s.run)(env)).await.map_err(panic_message);
            if let Err(e) = &result {
                eprintln!("scenario {} failed: {e}", s.name);
            }
            outcomes.push(Outcome {
                name: s.name,
                took: t0.elapsed(),
                result,
            });
        }
        outcomes
    });
    let t = table(&outcomes);
    println!(
        "Kafka {version}, {nodes} node(s)\n{t}\ntotal {:.1?}",
        started.elapsed()
    );
    let failed: Vec<String> = outcomes
        .iter()
        .filter_map(|o| o.result.as_ref().err().map(|e| format!("{}: {e}", o.name)))
        .collect();
    assert!(
        failed.is_empty(),
        "{} scenario(s) failed:\n{}\n\n{t}",
        failed.len(),
        failed.join("\n\n")
    );
}
