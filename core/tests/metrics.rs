//! `Producer::metrics`: counters and gauges through sends, acknowledgements, retries and
//! failures; and the per-batch lifecycle diagnostics (`ProducerConfig::batch_diagnostics`).

mod harness;

use std::time::Duration;

use harness::{deliveries, produce_error, respond, Harness, TOPIC};
use kprod_core::protocol::ErrorCode;
use kprod_core::{DeliveryError, Diagnostic, Event, Persistence, Record};

impl Harness {
    fn send(&mut self, n: usize) {
        for i in 0..n {
            self.p
                .send(self.now, Record::new(TOPIC, format!("v{i}")))
                .unwrap();
        }
    }
}

#[test]
fn metrics_count_sends_acknowledgements_retries_and_failures() {
    let mut h = Harness::new(|c| c.buffer_memory = 4 << 20);
    let m = h.p.metrics();
    assert_eq!(
        (m.records_accepted, m.buffered_records, m.buffered_bytes),
        (0, 0, 0)
    );
    assert_eq!(m.buffer_memory, 4 << 20);
    assert!(m.partitions.is_empty(), "no topic known yet");

    h.send(3);
    let m = h.p.metrics();
    assert_eq!((m.records_accepted, m.buffered_records), (3, 3));
    assert_eq!(m.records_awaiting_metadata, 3, "no metadata yet");
    assert!(m.buffered_bytes > 0);

    // The first batch goes out: in flight, not queued.
    let f = h.answer_until_produce(&[]).expect("produce");
    let m = h.p.metrics();
    assert_eq!(m.records_awaiting_metadata, 0);
    assert_eq!((m.batches_sent, m.produce_requests_in_flight), (1, 1));
    assert_eq!(m.produce_requests, 1);
    assert!(m.requests_in_flight >= 1);
    assert_eq!(m.producer_ids, 1);
    assert_eq!(
        m.connections_opened, 2,
        "the bootstrap server and the leader"
    );
    let p0 = &m.partitions[0];
    assert_eq!((&*p0.topic, p0.partition), (TOPIC, 0));
    assert_eq!((p0.in_flight_batches, p0.queued_records), (1, 0));
    assert_eq!(p0.next_sequence, 3);
    assert_eq!(p0.last_acked_offset, None);

    // Retriable: a retry, the same batch again.
    h.feed(produce_error(&f, ErrorCode::NotEnoughReplicas));
    let m = h.p.metrics();
    assert_eq!(m.retries, 1);
    assert_eq!(m.partitions[0].queued_records, 3, "waiting for its retry");
    h.now += Duration::from_secs(1);
    h.p.handle_timeout(h.now);
    let f = h.answer_until_produce(&[]).expect("the retry");
    let a = respond(&f, &mut h.next_offset);
    h.feed(a);
    let m = h.p.metrics();
    assert_eq!((m.batches_sent, m.records_delivered), (2, 3));
    assert_eq!(
        m.produce_requests, 2,
        "the retry went in a request of its own"
    );
    assert_eq!((m.buffered_records, m.buffered_bytes), (0, 0));
    assert_eq!(m.partitions[0].last_acked_offset, Some(2));
    assert_eq!(m.produce_requests_in_flight, 0);

    // Refused for good: failed, not persisted; an epoch bump follows the gap.
    h.send(2);
    let f = h.answer_until_produce(&[]).expect("produce");
    h.feed(produce_error(&f, ErrorCode::InvalidRecord));
    let m = h.p.metrics();
    assert_eq!(m.records_accepted, 5);
    assert_eq!(
        (
            m.records_failed_not_persisted,
            m.records_failed_possibly_persisted
        ),
        (2, 0)
    );
    assert_eq!(m.epoch_bumps, 1);
    assert_eq!(m.partitions[0].last_acked_offset, Some(2), "history");
    assert_eq!(m.buffered_records, 0);
    // A lost connection: the next record needs a new one.
    h.p.handle_disconnected(h.now, h.conn.take().expect("connected"));
    h.send(1);
    h.now += Duration::from_secs(1);
    h.p.handle_timeout(h.now);
    h.drain();
    assert_eq!(h.p.metrics().connections_opened, 3, "the leader again");
    // The counters match the events.
    let delivered = deliveries(&h.events).len();
    assert_eq!(m.records_delivered, delivered as u64);
}

fn batch_events(h: &Harness) -> Vec<&Diagnostic> {
    h.events
        .iter()
        .filter_map(|e| match e {
            Event::Diagnostic(
                d @ (Diagnostic::BatchSent { .. }
                | Diagnostic::BatchAcked { .. }
                | Diagnostic::BatchFailed { .. }
                | Diagnostic::Retry { .. }),
            ) => Some(d),
            _ => None,
        })
        .collect()
}

/// One batch's life: sent (attempt 1), retried, sent again (attempt 2), acknowledged; another
/// sent and failed. All under the batch's id.
#[test]
fn batch_diagnostics_follow_one_batch() {
    let mut h = Harness::new(|c| c.batch_diagnostics = true);
    h.send(2);
    let f = h.answer_until_produce(&[]).expect("produce");
    h.feed(produce_error(&f, ErrorCode::NotEnoughReplicas));
    h.now += Duration::from_secs(1);
    h.p.handle_timeout(h.now);
    let f = h.answer_until_produce(&[]).expect("the retry");
    let a = respond(&f, &mut h.next_offset);
    h.feed(a);
    h.send(1);
    let f = h.answer_until_produce(&[]).expect("produce");
    h.feed(produce_error(&f, ErrorCode::InvalidRecord));
    let events = batch_events(&h);
    let Diagnostic::BatchSent {
        batch: id,
        base_sequence: 0,
        records: 2,
        attempt: 1,
        identity: Some(_),
        ..
    } = events[0]
    else {
        panic!("{events:#?}")
    };
    assert!(matches!(events[1],
        Diagnostic::Retry { batch, error: ErrorCode::NotEnoughReplicas, .. } if batch == id));
    assert!(matches!(events[2],
        Diagnostic::BatchSent { batch, attempt: 2, base_sequence: 0, .. } if batch == id));
    assert!(matches!(events[3],
        Diagnostic::BatchAcked { batch, base_offset: Some(0), records: 2, .. } if batch == id));
    let Diagnostic::BatchSent {
        batch: other,
        base_sequence: 2,
        attempt: 1,
        ..
    } = events[4]
    else {
        panic!("{events:#?}")
    };
    assert_ne!(*other, *id);
    assert!(matches!(events[5],
        Diagnostic::BatchFailed {
            batch,
            records: 1,
            error: DeliveryError::Broker(ErrorCode::InvalidRecord),
            persisted: Persistence::NotPersisted,
            ..
        } if batch == other));
    assert_eq!(events.len(), 6, "{events:#?}");

    // Off by default: only the retries (always reported) appear.
    let mut h = Harness::new(|_| {});
    h.send(1);
    let f = h.answer_until_produce(&[]).expect("produce");
    let a = respond(&f, &mut h.next_offset);
    h.feed(a);
    assert_eq!(h.p.metrics().records_delivered, 1);
    assert!(batch_events(&h).is_empty());
}

/// From a review of the non-default modes: without idempotence the wire carries no sequence,
/// and the diagnostics and metrics say so (-1, no identity). Before, they showed the batch's
/// internal count (0, 1, 2...), which no broker log would ever match.
#[test]
fn without_idempotence_batches_show_no_sequence() {
    let mut h = Harness::new(|c| {
        c.batch_diagnostics = true;
        c.enable_idempotence = false;
        c.acks = 1;
    });
    for _ in 0..3 {
        h.send(1);
        h.answer_all();
    }
    let sent: Vec<(i32, bool)> = (batch_events(&h).into_iter())
        .filter_map(|d| match d {
            Diagnostic::BatchSent {
                base_sequence,
                identity,
                ..
            } => Some((*base_sequence, identity.is_some())),
            _ => None,
        })
        .collect();
    assert_eq!(sent, [(-1, false); 3]);
    let m = h.p.metrics();
    assert!(m.partitions.iter().all(|p| p.next_sequence == -1), "{m:?}");
}

/// Batch bytes, Produce answers and their latency, and broker throttles (2026-12-07, a
/// sixth session: what an operator asks of a producer first, Java's `batch-size-avg`,
/// `request-latency-avg`/`-max` and `produce-throttle-time`).
#[test]
fn metrics_count_batch_bytes_answer_latency_and_throttles() {
    let mut h = Harness::new(|_| {});
    h.p.send(h.now, Record::new(TOPIC, "x").with_partition(0))
        .unwrap();
    h.answer_all();
    let before = h.p.metrics();
    assert_eq!(before.produce_answers, 1);
    assert!(before.batch_bytes_sent > 0);

    h.p.send(h.now, Record::new(TOPIC, vec![7u8; 1000]).with_partition(0))
        .unwrap();
    let f = h.answer_until_produce(&[]).expect("a request");
    let wire: usize = (harness::produce_of(&f).topic_data.iter())
        .flat_map(|t| &t.partition_data)
        .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
        .sum();
    h.now += Duration::from_millis(250);
    let answer = harness::produce_rewrite(&f, &mut h.next_offset, |r| r.throttle_time_ms = 40);
    h.feed(answer);
    let m = h.p.metrics();
    assert_eq!(m.produce_answers, 2);
    assert_eq!(m.batch_bytes_sent - before.batch_bytes_sent, wire as u64);
    assert_eq!(
        m.produce_latency_total - before.produce_latency_total,
        Duration::from_millis(250)
    );
    assert_eq!(m.produce_latency_max, Duration::from_millis(250));
    assert_eq!(m.throttle_time_total, Duration::from_millis(40));
    assert_eq!(m.produce_throttled, 1);
}
