//! Graceful shutdown: produce until asked to stop (Ctrl-C, or after `COUNT` records), then
//! flush with a deadline, account for every record, and close.
//!
//! ```sh
//! cargo run -p kprod-tokio --example graceful_shutdown -- localhost:9092 events 500
//! ```
//!
//! Every record accepted by the producer gets exactly one outcome, and dropping its future
//! does not cancel it, so a shutdown only has to wait: `flush_timeout` bounds the wait, and
//! if it passes, `abort` fails whatever is still unresolved at once, each record saying
//! whether it may be in the log (which the program prints). Exits with status 1 if a record
//! failed or the deadline passed.

use std::time::Duration;

use kprod_tokio::{DeliveryFuture, ProducerHandle, Record};
use tokio::task::JoinSet;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let bootstrap = args.next().unwrap_or_else(|| "localhost:9092".to_owned());
    let topic = args.next().unwrap_or_else(|| "kprod-events".to_owned());
    let count: u64 = match args.next() {
        Some(n) => n.parse()?,
        None => u64::MAX,
    };

    let producer = ProducerHandle::from_properties(&[
        ("bootstrap.servers", bootstrap.as_str()),
        ("request.timeout.ms", "10000"),
        ("delivery.timeout.ms", "30000"),
    ])?;

    // Outcomes are collected by a task each, so the producing loop never waits for them.
    let mut outcomes: JoinSet<Result<(), String>> = JoinSet::new();
    let watch = |outcomes: &mut JoinSet<_>, n: u64, delivery: DeliveryFuture| {
        outcomes.spawn(async move {
            delivery
                .await
                .map(drop)
                .map_err(|e| format!("record {n}: {e}"))
        });
    };

    let mut sent = 0;
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    while sent < count {
        tokio::select! {
            _ = &mut ctrl_c => {
                println!("shutdown requested");
                break;
            }
            _ = tick.tick() => {
                let record = Record::new(topic.as_str(), format!("event {sent}"));
                watch(&mut outcomes, sent, producer.enqueue(record).await?);
                sent += 1;
            }
        }
    }

    // Stop producing; send what is buffered now without waiting for linger.ms, and wait at
    // most 10 s for every record to resolve. Past that, stop at once: every record still
    // unresolved fails now (not persisted, or possibly persisted if an attempt of it went
    // unanswered), rather than at its delivery timeout.
    let flushed = producer.flush_timeout(Duration::from_secs(10)).await;
    if flushed.is_err() {
        producer.abort().await;
    }
    let mut failures = 0;
    while let Some(outcome) = outcomes.join_next().await {
        if let Err(e) = outcome? {
            eprintln!("{e}");
            failures += 1;
        }
    }
    producer.close().await;
    println!(
        "sent {sent}, delivered {}, failed {failures}",
        sent - failures
    );
    flushed?;
    if failures > 0 {
        return Err(format!("{failures} records failed").into());
    }
    Ok(())
}
