//! Handling failures: a failed record is either *not persisted* (it is not in the log and
//! never will be, so sending it again cannot duplicate it) or *possibly persisted* (an attempt
//! may have been written; sending it again may write it twice).
//!
//! ```sh
//! cargo run -p kprod-tokio --example possibly_persisted -- localhost:9092 payments
//! ```
//!
//! Each record carries a unique `id` header, so that a possibly persisted record can be
//! reconciled downstream (consumers drop an id they have seen) instead of being lost or
//! blindly duplicated. Run it against a broker that is down to see the failure path: with
//! `delivery.timeout.ms=3000` each record fails not persisted and is retried once.

use kprod_tokio::{Bytes, ErrorKind, FailureReason, Persistence, ProducerHandle, Record};

/// What the application does with a record that did not make it.
enum Next {
    /// Not in the log: safe to send again.
    Resend(Record),
    /// Maybe in the log: keep its id for reconciliation, do not blindly resend.
    Reconcile(String),
    /// A bug or bad input in the record itself: resending will not help.
    Drop(String),
}

/// Takes the failure apart: the error hands the record back (`into_record`), so the
/// application keeps no copy of what it sent.
fn classify(error: kprod_tokio::DeliveryError) -> Next {
    let shown = error.to_string();
    let (kind, persisted) = (error.kind.clone(), error.persisted);
    let Some(record) = error.into_record() else {
        // Only when the producer's task died with the record.
        return Next::Drop(format!("record lost with the producer: {shown}"));
    };
    let id = String::from_utf8_lossy(
        record
            .headers
            .iter()
            .find(|h| h.key == "id")
            .and_then(|h| h.value.as_deref())
            .unwrap_or_default(),
    )
    .into_owned();
    match (&kind, persisted) {
        // Refused before the producer accepted it: an invalid topic, too large, closed.
        (ErrorKind::Refused(_), _) => Next::Drop(format!("{id}: {shown}")),
        (ErrorKind::Failed(FailureReason::Broker(code)), Persistence::NotPersisted)
            if !code.is_retriable() =>
        {
            Next::Drop(format!("{id}: {shown}"))
        }
        (_, Persistence::NotPersisted) => Next::Resend(record),
        (_, Persistence::PossiblyPersisted) => Next::Reconcile(id),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let bootstrap = args.next().unwrap_or_else(|| "localhost:9092".to_owned());
    let topic = args.next().unwrap_or_else(|| "kprod-payments".to_owned());

    let producer = ProducerHandle::from_properties(&[
        ("bootstrap.servers", bootstrap.as_str()),
        ("request.timeout.ms", "1000"),
        ("delivery.timeout.ms", "3000"),
        ("linger.ms", "0"),
    ])?;

    let mut to_reconcile = Vec::new();
    for i in 0..3 {
        let id = format!("payment-{i}");
        let record = Record::new(topic.as_str(), format!("{{\"amount\": {}}}", 10 * i))
            .with_key(format!("account-{}", i % 2))
            .with_header("id", Some(Bytes::from(id.clone())));
        let mut attempt = record;
        for round in 1..=2 {
            match producer.send(attempt).await {
                Ok(d) => {
                    println!(
                        "{id}: delivered at {}-{} {:?}",
                        d.topic, d.partition, d.offset
                    );
                    break;
                }
                Err(e) => match (e.to_string(), classify(e)) {
                    (e, Next::Resend(r)) if round < 2 => {
                        println!("{id}: not persisted ({e}), sending it again");
                        attempt = r;
                    }
                    (e, Next::Resend(_)) => {
                        println!(
                            "{id}: not persisted again ({e}), giving up: it is not in the log"
                        );
                        break;
                    }
                    (e, Next::Reconcile(id)) => {
                        println!("{id}: possibly persisted ({e}), left to reconciliation");
                        to_reconcile.push(id);
                        break;
                    }
                    (_, Next::Drop(why)) => {
                        println!("dropped: {why}");
                        break;
                    }
                },
            }
        }
    }
    producer.close().await;
    // A producer that failed as a whole says why once, for every record.
    if let Some(fatal) = producer.fatal() {
        println!("the producer failed: {fatal}");
    }
    println!("ids to reconcile: {to_reconcile:?}");
    Ok(())
}
