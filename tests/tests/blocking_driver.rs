//! The runtime-free driver (`core/examples/blocking.rs`: std sockets in non-blocking mode and
//! a poll loop, no tokio) against a real Tansu broker, checked by the independent reader.
//!
//! The example is compiled into this test as a module, so the test runs the very code of the
//! example; its `main` is unused here. The test starts its own broker (it fails, not skips,
//! if Tansu cannot start: `scripts/install-tansu.sh`), runs the seed scenario (a ticker of
//! 2,000 records one per millisecond and three bursts of 10,000 records, over 3 partitions),
//! then compares every record's delivery event with the log read back by librdkafka's
//! consumer: each record delivered exactly once, in send order, at its reported offset.

#[path = "../../core/examples/blocking.rs"]
#[allow(dead_code)]
mod blocking;

use std::time::{Duration, Instant};

use kprod_core::DeliveryError;
use kprod_tests::e2e::assert_complete;
use kprod_tests::ledger::Reported;
use kprod_tests::reader::read_topic;
use kprod_tests::seed::{
    burst_stream, encode_value, fresh_run_id, Outcome, Sent, Tag, Verdict, TICKER_STREAM,
};
use kprod_tests::Tansu;

const RESOLVE_TIMEOUT: Duration = Duration::from_secs(120);
const READ_TIMEOUT: Duration = Duration::from_secs(120);
const RECORD_SIZE: usize = 100;

/// The driver's outcome of one record, in the verdict's client-neutral form.
fn outcome(o: Option<Result<blocking::Outcome, String>>) -> Outcome {
    match o {
        None => Outcome::Unresolved,
        Some(Ok(blocking::Outcome::Delivered { partition, offset })) => {
            Outcome::Reported(Reported::Delivered { partition, offset })
        }
        Some(Ok(blocking::Outcome::Failed { error, persisted })) => {
            Outcome::Reported(Reported::Failed {
                error: DeliveryError::to_string(&error),
                persisted,
                refused: false,
            })
        }
        Some(Err(error)) => Outcome::Reported(Reported::Failed {
            error,
            persisted: kprod_core::Persistence::NotPersisted,
            refused: true,
        }),
    }
}

#[test]
fn blocking_driver_seed_scenario_on_tansu() {
    const TOPIC: &str = "kprod-blocking-seed";
    let started = Instant::now();
    let tansu = Tansu::start();
    tansu.create_topic(TOPIC, blocking::PARTITIONS as u32);
    let run = fresh_run_id();
    let plan = blocking::Plan {
        topic: TOPIC.to_owned(),
        ticks: 2_000,
        period: Duration::from_millis(1),
        bursts: 3,
        burst_size: 10_000,
    };
    // The example numbers its streams as the seed scenario does.
    assert_eq!(TICKER_STREAM, 0);
    assert_eq!(burst_stream(0), 1);
    let reports = blocking::run(&tansu.addr().to_string(), &plan, RESOLVE_TIMEOUT, |s, q| {
        encode_value(run, Tag { stream: s, seq: q }, RECORD_SIZE)
    });
    let produced = started.elapsed();
    let (line, ok) = blocking::verdict(&reports);
    println!("{line}");

    let sent: Vec<Sent> = reports
        .into_iter()
        .map(|r| Sent {
            tag: Tag {
                stream: r.stream,
                seq: r.seq,
            },
            partition: r.partition,
            key: None,
            bytes: r.value_len,
            outcome: outcome(r.outcome),
        })
        .collect();
    assert_eq!(
        sent.len() as u64,
        plan.ticks + u64::from(plan.bursts) * plan.burst_size
    );
    let log = read_topic(
        &tansu.addr().to_string(),
        TOPIC,
        blocking::PARTITIONS,
        READ_TIMEOUT,
    )
    .unwrap_or_else(|e| panic!("the independent reader failed: {e}\n{}", tansu.log_tail(20)));
    let v = Verdict::compute(run, blocking::PARTITIONS, &sent, &log);
    println!("{v}");
    println!(
        "elapsed: {produced:.2?} to produce (broker start included), {:.2?} in all",
        started.elapsed()
    );
    assert_complete(&v);
    assert!(ok, "the example's own verdict: {line}");
    assert_eq!(
        v.acknowledged_without_offset, 0,
        "every delivery has its offset"
    );
}
