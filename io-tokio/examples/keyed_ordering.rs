//! Keyed sends: every record of a key goes to the same partition (the Java client's murmur2
//! hash, so Java and kprod producers agree), and the idempotent producer keeps them in send
//! order there, even with several requests in flight and retries.
//!
//! ```sh
//! cargo run -p kprod-tokio --example keyed_ordering -- localhost:9092 orders
//! ```
//!
//! Sends 20 events for each of 5 customers, all in flight together, then checks that each
//! customer's events landed on one partition at increasing offsets. Exits with status 1 if
//! not (or if a record fails).

use std::collections::BTreeMap;

use kprod_tokio::{Delivery, ProducerHandle, Record};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let bootstrap = args.next().unwrap_or_else(|| "localhost:9092".to_owned());
    let topic = args.next().unwrap_or_else(|| "kprod-orders".to_owned());

    let producer = ProducerHandle::from_properties(&[
        ("bootstrap.servers", bootstrap.as_str()),
        ("max.in.flight.requests.per.connection", "5"),
    ])?;

    // Enqueue everything first: ordering must hold with many records in flight.
    let mut pending = Vec::new();
    for event in 0..20 {
        for customer in 0..5 {
            let key = format!("customer-{customer}");
            let record =
                Record::new(topic.as_str(), format!("event {event}")).with_key(key.clone());
            pending.push((key, producer.enqueue(record).await?));
        }
    }
    let mut by_key: BTreeMap<String, Vec<Delivery>> = BTreeMap::new();
    for (key, outcome) in pending {
        by_key.entry(key).or_default().push(outcome.await?);
    }
    producer.close().await;

    for (key, deliveries) in &by_key {
        let partition = deliveries[0].partition;
        let offsets: Vec<i64> = deliveries.iter().filter_map(|d| d.offset).collect();
        let one_partition = deliveries.iter().all(|d| d.partition == partition);
        let in_order = offsets.windows(2).all(|w| w[0] < w[1]);
        println!(
            "{key}: partition {partition}, offsets {}..={}",
            offsets.first().unwrap_or(&-1),
            offsets.last().unwrap_or(&-1)
        );
        if !one_partition || !in_order {
            return Err(format!("{key}: events out of order: {deliveries:?}").into());
        }
    }
    println!("every key on one partition, in send order");
    Ok(())
}
