//! kprod end to end against Apache Kafka 4.4.0 (KRaft), on one node and on three nodes with
//! replication factor 3, checked by the independent reader (librdkafka's consumer).
//!
//! The same scenarios as `tansu_e2e.rs`; on Kafka one more check holds: every acknowledgement
//! carries its offset (Kafka answers an in-window duplicate with the original offset, where
//! Tansu answers 46 without one).
//!
//! Needs `scripts/install-kafka.sh` and Java 17+; each test starts its own cluster.
//!
//! Size knob: `KPROD_KAFKA_SCALE=N` multiplies every record count by N (default 1, the CI
//! size), e.g. `KPROD_KAFKA_SCALE=10` for 20,000 ticks + 3 × 100,000 and 1,000,000 keyed
//! records.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kprod_tests::e2e::{
    assert_keyed, assert_seed, print_seed_figures, produce_keyed, produce_seed, KeyedPlan,
};
use kprod_tests::reader::{read_topic, ReadRecord};
use kprod_tests::seed::{fresh_run_id, SeedPlan, Source, Verdict};
use kprod_tests::Kafka;

/// How long every record may take to resolve once its stream has enqueued everything.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(180);
/// How long the reader may take.
const READ_TIMEOUT: Duration = Duration::from_secs(180);

/// `KPROD_KAFKA_SCALE`, default 1.
fn scale() -> u64 {
    match std::env::var("KPROD_KAFKA_SCALE") {
        Ok(v) => v
            .parse()
            .ok()
            .filter(|&n| n >= 1)
            .unwrap_or_else(|| panic!("KPROD_KAFKA_SCALE={v:?} is not a positive integer")),
        Err(_) => 1,
    }
}

fn read(kafka: &Kafka, topic: &str, partitions: i32) -> BTreeMap<i32, Vec<ReadRecord>> {
    read_topic(&kafka.bootstrap(), topic, partitions, READ_TIMEOUT).unwrap_or_else(|e| {
        panic!(
            "the independent reader failed: {e}\nnode 1 log:\n{}",
            kafka.log_tail(0, 20)
        )
    })
}

/// The seed scenario (ticker every 1 ms, three overlapping bursts of 10,000, 3 partitions)
/// on `kafka`, topic replicated `replication` times.
fn seed_scenario(kafka: &Kafka, replication: i32, max_in_flight: u32) {
    const PARTITIONS: i32 = 3;
    let topic = format!("kprod-seed-rf{replication}-inflight-{max_in_flight}");
    let started = Instant::now();
    kafka.create_topic(&topic, PARTITIONS, replication, Some(replication.min(2)));
    let plan = SeedPlan {
        source: Source {
            topic: topic.clone(),
            partitions: PARTITIONS,
            run: fresh_run_id(),
            record_size: 100,
        },
        ticks: 2_000 * scale(),
        period: Duration::from_millis(1),
        bursts: 3,
        burst_size: 10_000 * scale(),
        resolve_timeout: RESOLVE_TIMEOUT,
    };
    let report = produce_seed(&kafka.bootstrap(), max_in_flight, &plan);
    let log = read(kafka, &topic, PARTITIONS);
    let v = Verdict::compute(plan.source.run, PARTITIONS, &report.sent, &log);
    println!(
        "seed scenario on {} Kafka node(s), replication {replication}, \
         max.in.flight.requests.per.connection={max_in_flight}:",
        kafka.len()
    );
    print_seed_figures(&report);
    println!("{v}");
    println!("elapsed: {:.2?}", started.elapsed());

    assert_seed(&plan, &report, &v);
    assert_eq!(
        v.acknowledged_without_offset, 0,
        "on Apache Kafka every acknowledgement carries its offset\n{v}"
    );
}

/// 100,000 keyed records over 6 partitions from 4 concurrent tasks (250 keys each).
fn keyed_scenario(kafka: &Kafka, replication: i32) {
    const PARTITIONS: i32 = 6;
    let topic = format!("kprod-keyed-rf{replication}");
    kafka.create_topic(&topic, PARTITIONS, replication, Some(replication.min(2)));
    let plan = KeyedPlan {
        source: Source {
            topic: topic.clone(),
            partitions: PARTITIONS,
            run: fresh_run_id(),
            record_size: 100,
        },
        streams: 4,
        per_stream: 25_000 * scale(),
        keys_per_stream: 250,
        resolve_timeout: RESOLVE_TIMEOUT,
    };
    let (sent, produce_time) = produce_keyed(&kafka.bootstrap(), &plan);
    let log = read(kafka, &topic, PARTITIONS);
    let v = Verdict::compute(plan.source.run, PARTITIONS, &sent, &log);
    println!(
        "{} keyed records on {} Kafka node(s), replication {replication}, resolved in \
         {produce_time:.2?}: {:.0} records/s",
        sent.len(),
        kafka.len(),
        sent.len() as f64 / produce_time.as_secs_f64()
    );
    println!("{v}");
    assert_keyed(&plan, &sent, &log, &v);
    assert_eq!(v.acknowledged_without_offset, 0, "{v}");
}

/// One node: the seed scenario at 5 and at 1 request in flight.
#[test]
fn seed_scenario_on_one_kafka_node() {
    let kafka = Kafka::start(1);
    seed_scenario(&kafka, 1, 5);
    seed_scenario(&kafka, 1, 1);
}

/// Three nodes, replication factor 3, `min.insync.replicas=2`: the seed scenario at 5 and at
/// 1 request in flight, the partitions' leaders spread over the nodes.
#[test]
fn seed_scenario_on_three_kafka_nodes() {
    let kafka = Kafka::start(3);
    seed_scenario(&kafka, 3, 5);
    seed_scenario(&kafka, 3, 1);
}

/// One node: 100,000 keyed records over 6 partitions.
#[test]
fn hundred_thousand_keyed_records_on_one_kafka_node() {
    let kafka = Kafka::start(1);
    keyed_scenario(&kafka, 1);
}

/// Three nodes, replication factor 3: 100,000 keyed records over 6 partitions.
#[test]
fn hundred_thousand_keyed_records_on_three_kafka_nodes() {
    let kafka = Kafka::start(3);
    keyed_scenario(&kafka, 3);
}
