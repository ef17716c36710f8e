//! The Java reference producer (Apache Kafka's kafka-clients 4.4.0, `tests/java`) against
//! Apache Kafka 4.4.0 on one node, judged by the same checks as kprod and verified by the
//! independent reader (librdkafka's consumer). Where kprod and librdkafka run too, they run
//! on the same broker in the same test, and one comparison table is printed.
//!
//! Needs `scripts/install-kafka.sh`, `scripts/install-java-ref.sh` and Java 17+; each test
//! starts its own broker. The tests of this file run one at a time (a broker and a producer
//! JVM each already fill this 2-core machine).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use kprod_core::Persistence;
use kprod_tests::e2e::{close, connect, print_seed_figures, runtime};
use kprod_tests::javaref::{self, Flags, LedgerPlan, ThroughputPlan};
use kprod_tests::ledger::{audit, ledger_value, Checked, Ledger, Reported, Row};
use kprod_tests::reader::{read_topic, ReadRecord};
use kprod_tests::seed::{fresh_run_id, run_seed, SeedPlan, Source, Verdict};
use kprod_tests::Kafka;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};

/// How long a record may take to resolve once its stream has sent everything.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(180);
/// How long the reader may take.
const READ_TIMEOUT: Duration = Duration::from_secs(180);
/// How long a whole Java run may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a marker may take to appear.
const MARKER_TIMEOUT: Duration = Duration::from_secs(120);

/// One test at a time; fails at once, before a broker starts, if the Java reference
/// producer is not built for the current sources.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    javaref::install_dir();
    guard
}

fn read(kafka: &Kafka, topic: &str, partitions: i32) -> BTreeMap<i32, Vec<ReadRecord>> {
    read_topic(&kafka.bootstrap(), topic, partitions, READ_TIMEOUT).unwrap_or_else(|e| {
        panic!(
            "the independent reader failed: {e}\nbroker log:\n{}",
            kafka.log_tail(0, 20)
        )
    })
}

/// Asserts what the reference producer must show: nothing duplicated, reordered, missing or
/// misplaced, every record resolved.
fn assert_reference_clean(row: &Row, details: &str) {
    assert!(
        row.is_clean(),
        "the Java reference producer shows a violation:\n{}\n{details}",
        Row::table(std::slice::from_ref(row))
    );
}

/// The seed scenario (a record every 1 ms, three overlapping bursts of 10,000 over 3
/// partitions) with the Java producer, then with kprod, on the same broker.
#[test]
fn java_seed_scenario_on_one_kafka_node() {
    const PARTITIONS: i32 = 3;
    let _serial = serial();
    let kafka = Kafka::start(1);
    let brokers = kafka.bootstrap();
    let plan = |topic: &str| SeedPlan {
        source: Source {
            topic: topic.to_owned(),
            partitions: PARTITIONS,
            run: fresh_run_id(),
            record_size: 100,
        },
        ticks: 2_000,
        period: Duration::from_millis(1),
        bursts: 3,
        burst_size: 10_000,
        resolve_timeout: RESOLVE_TIMEOUT,
    };

    let java_plan = plan("java-seed");
    kafka.create_topic(&java_plan.source.topic, PARTITIONS, 1, None);
    let java = javaref::run_seed(&brokers, &java_plan, &Flags::default(), RUN_TIMEOUT);
    let java_log = read(&kafka, &java_plan.source.topic, PARTITIONS);
    let jv = Verdict::compute(
        java_plan.source.run,
        PARTITIONS,
        &java.report.sent,
        &java_log,
    );

    let kprod_plan = plan("kprod-seed");
    kafka.create_topic(&kprod_plan.source.topic, PARTITIONS, 1, None);
    let report = runtime().block_on(async {
        let producer = connect(&brokers, 5);
        let report = run_seed(&producer, &kprod_plan).await;
        close(producer).await;
        report
    });
    let kprod_log = read(&kafka, &kprod_plan.source.topic, PARTITIONS);
    let kv = Verdict::compute(kprod_plan.source.run, PARTITIONS, &report.sent, &kprod_log);

    println!("Java producer (kafka-clients {}):", kafka_version());
    print_seed_figures(&java.report);
    println!("{jv}");
    println!("kprod:");
    print_seed_figures(&report);
    println!("{kv}");
    let rows = [jv.row("java"), kv.row("kprod")];
    println!("seed scenario, 1 Kafka node:\n{}", Row::table(&rows));

    let expected = java_plan.ticks + u64::from(java_plan.bursts) * java_plan.burst_size;
    assert_eq!(java.report.sent.len() as u64, expected);
    for (i, b) in java.report.bursts.iter().enumerate() {
        assert!(
            b.ticks_at_start < java_plan.ticks && b.ticks_during > 0,
            "Java burst {i} did not overlap the ticker: {b:?}"
        );
    }
    assert_reference_clean(&rows[0], &jv.to_string());
    assert!(
        jv.is_complete(),
        "on a healthy broker every Java record is acknowledged, once, in order\n{jv}"
    );
    assert!(kv.is_complete(), "kprod on the same broker:\n{kv}");
}

fn kafka_version() -> &'static str {
    kprod_tests::kafka::KAFKA_VERSION
}

/// librdkafka (the `rdkafka` crate's `FutureProducer`) sends the ledger's records:
/// idempotent, acks=all, the same linger; its outcomes in client-neutral form.
fn rdkafka_ledger(brokers: &str, topic: &str, partitions: i32, n: usize) -> Vec<Option<Reported>> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("max.in.flight.requests.per.connection", "5")
        .set("message.timeout.ms", "120000")
        .create()
        .expect("an rdkafka producer");
    runtime().block_on(async {
        let mut futures = Vec::with_capacity(n);
        for i in 0..n {
            let p = (i as i32) % partitions;
            let value = ledger_value(topic, p, i);
            let key = format!("k{i}");
            let record = FutureRecord::to(topic)
                .partition(p)
                .key(&key)
                .payload(&value);
            futures.push(producer.send_result(record).map_err(|(e, _)| e));
        }
        let mut out = Vec::with_capacity(n);
        for f in futures {
            out.push(match f {
                Err(e) => Some(Reported::Failed {
                    error: e.to_string(),
                    persisted: Persistence::NotPersisted,
                    refused: true,
                }),
                Ok(f) => match tokio::time::timeout(RESOLVE_TIMEOUT, f).await {
                    Ok(Ok(Ok(d))) => Some(Reported::Delivered {
                        partition: d.partition,
                        offset: Some(d.offset),
                    }),
                    Ok(Ok(Err((e, _)))) => Some(Reported::Failed {
                        error: e.to_string(),
                        persisted: Persistence::PossiblyPersisted,
                        refused: false,
                    }),
                    // Canceled, or no report in time: unresolved.
                    Ok(Err(_)) | Err(_) => None,
                },
            });
        }
        out
    })
}

/// The ledger (20,000 records round robin over 3 partitions) with the Java producer, kprod
/// and librdkafka on the same broker, each checked by the ledger checks; the Java run also
/// exercises the marker protocol (`SENT k` every 5,000, a pause at 10,000).
#[test]
fn java_ledger_next_to_kprod_and_librdkafka_on_one_kafka_node() {
    const PARTITIONS: i32 = 3;
    const RECORDS: usize = 20_000;
    let _serial = serial();
    let kafka = Kafka::start(1);
    let brokers = kafka.bootstrap();

    let mut plan = LedgerPlan::new("java-ledger", PARTITIONS, RECORDS);
    plan.mark_every = Some(5_000);
    plan.pause_at = vec![10_000];
    kafka.create_topic(&plan.topic, PARTITIONS, 1, None);
    let mut run = plan.spawn(&brokers);
    assert_eq!(run.wait_sent(5_000, MARKER_TIMEOUT), 5_000);
    run.wait_paused(10_000, MARKER_TIMEOUT);
    run.resume();
    let java = javaref::JavaLedger::from_run(&plan, run.finish(RUN_TIMEOUT));
    assert!(
        java.finished.stdout.iter().any(|l| l == "SENT 20000"),
        "{:?}",
        java.finished.stdout
    );
    let java_audit = java.audit(&read(&kafka, &plan.topic, PARTITIONS));

    let kprod_topic = "kprod-ledger";
    kafka.create_topic(kprod_topic, PARTITIONS, 1, None);
    let mut ledger = Ledger::new(kprod_topic, PARTITIONS);
    runtime().block_on(async {
        let producer = connect(&brokers, 5);
        ledger.enqueue_n(&producer, RECORDS).await;
        ledger.resolve(RESOLVE_TIMEOUT).await;
        close(producer).await;
    });
    let kprod_audit = ledger.audit(&read(&kafka, kprod_topic, PARTITIONS));

    let rd_topic = "rdkafka-ledger";
    kafka.create_topic(rd_topic, PARTITIONS, 1, None);
    let rd = rdkafka_ledger(&brokers, rd_topic, PARTITIONS, RECORDS);
    let rd_values: Vec<String> = (0..RECORDS)
        .map(|i| ledger_value(rd_topic, (i as i32) % PARTITIONS, i))
        .collect();
    let rd_checked: Vec<Checked<'_>> = rd
        .iter()
        .zip(&rd_values)
        .enumerate()
        .map(|(i, (o, v))| Checked {
            partition: (i as i32) % PARTITIONS,
            value: v.as_bytes(),
            outcome: o.clone(),
        })
        .collect();
    let rd_audit = audit(rd_topic, &rd_checked, &read(&kafka, rd_topic, PARTITIONS));

    let rows = [
        java_audit.row("java"),
        kprod_audit.row("kprod"),
        rd_audit.row("librdkafka"),
    ];
    println!(
        "ledger, {RECORDS} records over {PARTITIONS} partitions, 1 Kafka node:\n{}",
        Row::table(&rows)
    );
    for (name, a) in [
        ("java", &java_audit),
        ("kprod", &kprod_audit),
        ("librdkafka", &rd_audit),
    ] {
        for p in a.problems.iter().chain(&a.order_problems).take(10) {
            println!("  {name}: {p}");
        }
    }

    assert_reference_clean(&rows[0], &format!("{:?}", java_audit.problems));
    assert_eq!(
        rows[0].acknowledged, RECORDS,
        "every Java record acknowledged on a healthy broker"
    );
    assert_eq!(java_audit.summary.in_log, RECORDS);
    assert!(
        kprod_audit.is_clean(true) && rows[1].acknowledged == RECORDS,
        "kprod on the same broker: {:?}",
        kprod_audit.problems
    );
    assert!(
        rd_audit.is_clean(true) && rows[2].acknowledged == RECORDS,
        "librdkafka on the same broker: {:?}",
        rd_audit.problems
    );
}

/// The Java ledger with the broker killed (SIGKILL) after 3,000 of 6,000 records and started
/// again: every record must end up once, in order, at its acknowledged offset, or failed.
#[test]
fn java_ledger_survives_a_broker_kill_and_restart() {
    const PARTITIONS: i32 = 3;
    const RECORDS: usize = 6_000;
    const FAULT_AT: u64 = 3_000;
    let _serial = serial();
    let mut kafka = Kafka::start(1);
    let brokers = kafka.bootstrap();
    let mut plan = LedgerPlan::new("java-ledger-restart", PARTITIONS, RECORDS);
    plan.pause_at = vec![FAULT_AT];
    // Paced, so that records are in flight when the broker dies.
    plan.rate = Some(2_000);
    kafka.create_topic(&plan.topic, PARTITIONS, 1, None);
    let node = kafka.leader(&plan.topic, 0);

    let mut run = plan.spawn(&brokers);
    run.wait_paused(FAULT_AT, MARKER_TIMEOUT);
    kafka.kill(node);
    run.resume();
    kafka.restart(node);
    let java = javaref::JavaLedger::from_run(&plan, run.finish(RUN_TIMEOUT));
    let audit = java.audit(&read(&kafka, &plan.topic, PARTITIONS));
    let row = audit.row("java");
    println!(
        "Java ledger, broker killed after {FAULT_AT} of {RECORDS} sends and restarted:\n{}",
        Row::table(std::slice::from_ref(&row))
    );
    println!("outcomes: {:?}", audit.summary);
    for p in audit.problems.iter().chain(&audit.order_problems).take(20) {
        println!("  {p}");
    }
    let errors: BTreeMap<&str, usize> =
        java.records
            .iter()
            .filter(|r| !r.error.is_empty())
            .fold(BTreeMap::new(), |mut m, r| {
                *m.entry(r.error.split(':').next().unwrap_or_default())
                    .or_default() += 1;
                m
            });
    println!("Java errors by class: {errors:?}");

    assert_eq!(row.sent, RECORDS);
    assert_reference_clean(&row, &format!("{:?}", audit.problems));
    assert!(
        row.acknowledged > FAULT_AT as usize / 2,
        "records sent before the kill were acknowledged: {row:?}"
    );
}

/// The e2e bench's measurement with the Java producer: 200,000 records of 100 bytes over 4
/// partitions, linger.ms 5, batch.size 16384; three rounds in one JVM.
#[test]
fn java_throughput_on_one_kafka_node() {
    let _serial = serial();
    let kafka = Kafka::start(1);
    let plan = ThroughputPlan {
        topic: "java-throughput".into(),
        records: 200_000,
        size: 100,
        partitions: 4,
        rounds: 3,
        producer: Flags {
            linger_ms: Some(5),
            batch_size: Some(16_384),
            ..Flags::default()
        },
    };
    kafka.create_topic(&plan.topic, plan.partitions, 1, None);
    let rounds = javaref::run_throughput(&kafka.bootstrap(), &plan, RUN_TIMEOUT);
    println!(
        "Java producer, {} x {} B over {} partitions, 1 Kafka node:",
        plan.records, plan.size, plan.partitions
    );
    println!(
        "{:>5} {:>12} {:>10} {:>12} {:>9} {:>9} {:>9}",
        "round", "records/s", "cpu s", "cpu us/rec", "p50 ms", "p99 ms", "max ms"
    );
    for r in &rounds {
        println!(
            "{:>5} {:>12.0} {:>10.3} {:>12.2} {:>9.1} {:>9.1} {:>9.1}",
            r.round,
            r.records_per_sec,
            r.cpu_seconds,
            r.cpu_us_per_record,
            r.p50_ms,
            r.p99_ms,
            r.max_ms
        );
    }
    // Every record was acknowledged (the log holds the warm-up record too).
    let log = read(&kafka, &plan.topic, plan.partitions);
    let in_log: usize = log.values().map(Vec::len).sum();
    assert_eq!(in_log as u64, 1 + plan.records * u64::from(plan.rounds));
    for r in &rounds {
        assert_eq!((r.records, r.failed), (plan.records, 0), "{r:?}");
        assert!(r.records_per_sec > 0.0 && r.p50_ms <= r.max_ms, "{r:?}");
    }
}
