//! What the end-to-end tests share, whatever the broker: the application's runtime, an
//! idempotent kprod-tokio producer, and the full check of a [`Verdict`].

use std::time::Duration;

use kprod_tokio::{config_from_properties, ProducerHandle};

use crate::seed::{SeedReport, Verdict, TICKER_STREAM};

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
