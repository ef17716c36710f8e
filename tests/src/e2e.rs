//! What the end-to-end tests share, whatever the broker: the application's runtime, an
//! idempotent kprod-tokio producer, and the full check of a [`Verdict`].

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kprod_core::partitioner::partition_for_key;
use kprod_tokio::{config_from_properties, ProducerHandle};

use crate::reader::ReadRecord;
use crate::seed::{
    run_keyed, run_seed, SeedPlan, SeedReport, Sent, Source, Verdict, TICKER_STREAM,
};

/// How long `close()` may take once every record resolved.
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(30);

/// The runtime the application runs on: two workers, as many as this machine has cores.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("build a tokio runtime")
}

/// An idempotent producer with default settings (linger 5 ms, batch 16 KiB) and
/// `max_in_flight` requests per connection.
pub fn connect(brokers: &str, max_in_flight: u32) -> ProducerHandle {
    let max_in_flight = max_in_flight.to_string();
    let config = config_from_properties(&[
        ("bootstrap.servers", brokers),
        ("client.id", "kprod-e2e"),
        ("enable.idempotence", "true"),
        ("acks", "all"),
        ("max.in.flight.requests.per.connection", &max_in_flight),
    ])
    .expect("valid producer properties");
    ProducerHandle::connect(config).expect("valid producer config")
}

/// A producer with `props` (which name `bootstrap.servers`) sends every record of `records`,
/// enqueued in order; returns each record's outcome, by index, each resolved within
/// `resolve_within`, and the metrics once all have resolved. The producer is closed.
pub fn produce_all(
    props: &[(&str, &str)],
    records: impl IntoIterator<Item = kprod_tokio::Record>,
    resolve_within: Duration,
) -> (
    Vec<Result<kprod_tokio::Delivery, kprod_tokio::DeliveryError>>,
    kprod_tokio::Metrics,
) {
    runtime().block_on(async {
        let producer = ProducerHandle::from_properties(props).expect("valid properties");
        let mut futures = Vec::new();
        for record in records {
            futures.push(producer.enqueue(record).await.expect("accepted"));
        }
        let mut out = Vec::with_capacity(futures.len());
        for f in futures {
            out.push(
                tokio::time::timeout(resolve_within, f)
                    .await
                    .expect("every record resolves in time"),
            );
        }
        let metrics = producer.metrics().await;
        close(producer).await;
        (out, metrics)
    })
}

pub async fn close(producer: ProducerHandle) {
    tokio::time::timeout(CLOSE_TIMEOUT, producer.close())
        .await
        .unwrap_or_else(|_| panic!("close() did not finish within {CLOSE_TIMEOUT:?}"));
}

/// Every check of the verdict for a run where nothing may fail, one assertion each so a failure names what broke.
pub fn assert_complete(v: &Verdict) {
    assert_eq!(v.unresolved, 0, "every future resolves\n{v}");
    assert_eq!(
        v.failed(),
        0,
        "no record fails against a healthy broker\n{v}"
    );
    assert_eq!(v.acknowledged, v.sent, "every record is acknowledged\n{v}");
    assert_eq!(v.duplicates, 0, "no duplicates\n{v}");
    assert_eq!(
        v.out_of_order, 0,
        "send order kept per partition and stream\n{v}"
    );
    assert_eq!(v.out_of_order_per_key, 0, "order kept per key\n{v}");
    assert_eq!(
        v.missing_acknowledged, 0,
        "every acknowledged record is present\n{v}"
    );
    assert_eq!(
        v.offset_mismatch, 0,
        "acknowledged offsets hold the record\n{v}"
    );
    assert_eq!(v.missing, 0, "nothing is missing\n{v}");
    assert_eq!(v.wrong_partition, 0, "records are on their partition\n{v}");
    assert_eq!(
        v.acknowledged_wrong_partition, 0,
        "acknowledged on their partition\n{v}"
    );
    assert_eq!(
        v.key_partition_mismatch, 0,
        "keys follow the Java partitioner\n{v}"
    );
    assert_eq!(v.corrupt, 0, "keys and values read back as sent\n{v}");
    assert_eq!(v.unexpected, 0, "nothing that was not sent\n{v}");
    assert_eq!(v.foreign, 0, "the topic holds only this run's records\n{v}");
    assert_eq!(v.present, v.sent, "every record present once\n{v}");
    assert!(v.is_complete(), "{v}");
}

pub fn print_seed_figures(report: &SeedReport) {
    println!(
        "ticker: {} records in {:.2?}; total produce time {:.2?}",
        report
            .sent
            .iter()
            .filter(|s| s.tag.stream == TICKER_STREAM)
            .count(),
        report.ticker_time,
        report.elapsed
    );
    for (i, b) in report.bursts.iter().enumerate() {
        println!(
            "burst {i}: {} records, {} bytes, enqueued in {:.2?}, resolved in {:.2?}, \
             started at tick {}, {} ticker sends during it",
            b.records, b.bytes, b.enqueue_time, b.duration, b.ticks_at_start, b.ticks_during
        );
    }
    println!(
        "bursts: {:.0} records/s, {:.2} MB/s",
        report.burst_records_per_sec(),
        report.burst_mb_per_sec()
    );
}

/// Runs the seed plan on a fresh producer with `max_in_flight` requests per connection, then
/// closes the producer.
pub fn produce_seed(brokers: &str, max_in_flight: u32, plan: &SeedPlan) -> SeedReport {
    runtime().block_on(async {
        let producer = connect(brokers, max_in_flight);
        let report = run_seed(&producer, plan).await;
        close(producer).await;
        report
    })
}

/// The checks of a seed run on a healthy broker, whatever the broker: every record sent,
/// every burst overlapped the ticker (the scenario is the overlap), the verdict complete.
pub fn assert_seed(plan: &SeedPlan, report: &SeedReport, v: &Verdict) {
    assert_eq!(
        report.sent.len() as u64,
        plan.ticks + u64::from(plan.bursts) * plan.burst_size
    );
    for (i, b) in report.bursts.iter().enumerate() {
        assert!(
            b.ticks_at_start < plan.ticks && b.ticks_during > 0,
            "burst {i} did not overlap the ticker: {b:?}"
        );
    }
    assert_complete(v);
}

/// Keyed records from concurrent tasks, each cycling over its own keys.
#[derive(Debug, Clone)]
pub struct KeyedPlan {
    /// What the records look like.
    pub source: Source,
    /// Concurrent tasks.
    pub streams: u32,
    /// Records per task.
    pub per_stream: u64,
    /// Distinct keys per task.
    pub keys_per_stream: u64,
    /// How long every record may take to resolve once its task has enqueued everything.
    pub resolve_timeout: Duration,
}

/// Runs the keyed plan on a fresh producer (5 requests in flight); returns what was sent and
/// how long it took to resolve, then closes the producer.
pub fn produce_keyed(brokers: &str, plan: &KeyedPlan) -> (Vec<Sent>, Duration) {
    runtime().block_on(async {
        let producer = connect(brokers, 5);
        let t0 = Instant::now();
        let sent = run_keyed(
            &producer,
            &plan.source,
            plan.streams,
            plan.per_stream,
            plan.keys_per_stream,
            plan.resolve_timeout,
        )
        .await;
        let produce_time = t0.elapsed();
        close(producer).await;
        (sent, produce_time)
    })
}

/// The checks of a keyed run on a healthy broker: every record sent and the verdict complete;
/// spelled out on the log itself, each key sits on one partition, the Java partitioner's, every
/// key was read back, and every partition got records (the keys really were spread).
pub fn assert_keyed(
    plan: &KeyedPlan,
    sent: &[Sent],
    log: &BTreeMap<i32, Vec<ReadRecord>>,
    v: &Verdict,
) {
    let partitions = plan.source.partitions;
    assert_eq!(sent.len() as u64, u64::from(plan.streams) * plan.per_stream);
    assert_complete(v);
    let mut key_partition: BTreeMap<Vec<u8>, i32> = BTreeMap::new();
    for (&p, records) in log {
        for r in records {
            let key = r.key.clone().expect("every record has a key");
            assert_eq!(partition_for_key(&key, partitions), p, "key {key:?}");
            assert_eq!(*key_partition.entry(key).or_insert(p), p);
        }
    }
    assert_eq!(
        key_partition.len() as u64,
        u64::from(plan.streams) * plan.keys_per_stream
    );
    for p in 0..partitions {
        assert!(
            v.partitions.get(&p).is_some_and(|q| q.read > 0),
            "partition {p} is empty\n{v}"
        );
    }
}
