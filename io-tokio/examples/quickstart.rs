//! Quick start: one producer, one record awaited, then a hundred in flight at once.
//!
//! ```sh
//! cargo run -p kprod-tokio --example quickstart -- localhost:9092 quickstart-topic
//! ```
//!
//! Arguments: the bootstrap servers (default `localhost:9092`) and the topic (default
//! `kprod-quickstart`; the broker must have it or create topics automatically). Exits with
//! status 0 once every record is acknowledged, 1 on the first failure.

use kprod_tokio::{ProducerHandle, Record};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let bootstrap = args.next().unwrap_or_else(|| "localhost:9092".to_owned());
    let topic = args.next().unwrap_or_else(|| "kprod-quickstart".to_owned());

    // Kafka's own property names; idempotence and acks=all are kprod's defaults.
    let producer = ProducerHandle::from_properties(&[
        ("bootstrap.servers", bootstrap.as_str()),
        ("client.id", "kprod-quickstart"),
        ("linger.ms", "5"),
    ])?;

    // Send one record and wait for the broker's acknowledgement.
    let first = producer
        .send(Record::new(topic.as_str(), "hello from kprod"))
        .await?;
    println!(
        "delivered to {}-{} at offset {:?}",
        first.topic, first.partition, first.offset
    );

    // Many records in flight at once: `enqueue` returns as soon as the producer holds the
    // record (waiting only while buffer.memory is full), with a future of its outcome.
    let mut outcomes = Vec::new();
    for i in 0..100 {
        let record = Record::new(topic.as_str(), format!("record {i}"));
        outcomes.push(producer.enqueue(record).await?);
    }
    let mut delivered = 0;
    for outcome in outcomes {
        outcome.await?;
        delivered += 1;
    }
    println!("{delivered} more records delivered");

    // Delivers anything still buffered, then stops the producer's task.
    producer.close().await;
    Ok(())
}
