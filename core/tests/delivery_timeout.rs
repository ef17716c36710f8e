//! How long a record is given before `delivery.timeout.ms` fails it: a batch times out as a
//! whole, from its creation (Java's rule), so the time a record has left depends on the batch
//! it joined. Two ways that time used to be wrong, found by an outage probe:
//! - a record that waited for its topic's metadata opened a batch created when the metadata
//!   came, and so was given more than its delivery timeout after `send`;
//! - a record that joined a batch left open while its partition could not send (an outage, a
//!   full in-flight window) failed with the batch, moments after it was accepted.
//!
//! The real `Producer` driven by hand, with the broker answering only what each test lets it.

mod harness;

use std::time::{Duration, Instant};

use harness::{api_of, respond, Harness, TOPIC};
use kprod_core::protocol::api_key;
use kprod_core::protocol::ErrorCode;
use kprod_core::{DeliveryError, Event, Output, Persistence, Record, RecordId};

const DELIVERY: Duration = Duration::from_secs(10);
const REQUEST: Duration = Duration::from_secs(3);

fn harness(max_in_flight: usize) -> Harness {
    Harness::new(|c| {
        c.delivery_timeout = DELIVERY;
        c.request_timeout = REQUEST;
        c.max_in_flight = max_in_flight;
    })
}

fn record(i: usize) -> Record {
    Record::new(TOPIC, format!("value {i}")).with_partition(0)
}

/// A failed record: its id, when it failed, its error and persistence.
type Failure = (RecordId, Instant, DeliveryError, Persistence);

/// Each record that failed so far.
fn failed(events: &[(Instant, Event)]) -> Vec<Failure> {
    (events.iter())
        .filter_map(|(at, e)| match e {
            Event::Failed {
                id,
                error,
                persisted,
                ..
            } => Some((*id, *at, error.clone(), *persisted)),
            _ => None,
        })
        .collect()
}

/// Lets time pass to `until` in 50 ms steps, answering nothing; the events of each step are
/// kept with its time.
fn pass_time(h: &mut Harness, until: Instant, log: &mut Vec<(Instant, Event)>) {
    while h.now < until {
        h.now = (h.now + Duration::from_millis(50)).min(until);
        h.p.handle_timeout(h.now);
        h.drain();
        log.extend(h.events.drain(..).map(|e| (h.now, e)));
    }
}

/// Answers ApiVersions and Metadata (healthily) until the first Produce request, which is
/// left unanswered.
fn connect_and_send(h: &mut Harness) {
    h.drain();
    let produce = h.answer_until_produce(&[]);
    assert!(produce.is_some(), "a Produce request is written");
}

#[test]
fn a_record_that_waited_for_metadata_is_not_given_more_than_its_delivery_timeout() {
    let mut h = harness(5);
    let t0 = h.now;
    let mut log = Vec::new();
    let id = h.p.send(h.now, record(0)).expect("accepted");
    h.drain();
    // ApiVersions answered; the Metadata request held for 2.5 s (within its request timeout).
    let mut metadata = None;
    while let Some(f) = h.next_frame() {
        if api_of(&f).0 == api_key::METADATA {
            metadata = Some(f);
        } else {
            let a = respond(&f, &mut h.next_offset);
            h.feed(a);
        }
    }
    let metadata = metadata.expect("a Metadata request is written");
    pass_time(&mut h, t0 + Duration::from_millis(2500), &mut log);
    assert!(failed(&log).is_empty());
    let answer = respond(&metadata, &mut h.next_offset);
    h.feed(answer);
    let produce = h.answer_until_produce(&[]);
    assert!(produce.is_some(), "the record is sent once metadata came");
    // The broker never answers: the record fails at its delivery timeout from `send`, not
    // from when its metadata came (2.5 s later), possibly persisted (it was on the wire).
    pass_time(&mut h, t0 + DELIVERY + Duration::from_secs(3), &mut log);
    let failures = failed(&log);
    assert_eq!(failures.len(), 1, "{log:?}");
    let (fid, at, error, persisted) = &failures[0];
    assert_eq!(*fid, id);
    assert!(
        matches!(error, DeliveryError::DeliveryTimeout { .. }),
        "{error:?}"
    );
    assert_eq!(*persisted, Persistence::PossiblyPersisted);
    assert!(
        *at >= t0 + DELIVERY && *at <= t0 + DELIVERY + Duration::from_millis(50),
        "failed {:?} after send, its delivery timeout is {DELIVERY:?}",
        *at - t0
    );
}

/// One request in flight, never answered, and a second batch that cannot be sent behind it.
/// A record sent at `later` joins that batch while it is younger than half the delivery
/// timeout, and fails with it; sent any later, it opens its own batch and keeps its time.
fn a_record_sent_at(later: Duration) -> (Vec<RecordId>, Vec<Failure>, Instant) {
    let mut h = harness(1);
    let t0 = h.now;
    let mut log = Vec::new();
    let first = h.p.send(h.now, record(0)).expect("accepted");
    connect_and_send(&mut h);
    // Stuck behind the unanswered request: a batch that stays open.
    let second = h.p.send(h.now, record(1)).expect("accepted");
    h.drain();
    pass_time(&mut h, t0 + later, &mut log);
    let third = h.p.send(h.now, record(2)).expect("accepted");
    h.drain();
    pass_time(
        &mut h,
        t0 + later + DELIVERY + Duration::from_secs(1),
        &mut log,
    );
    (vec![first, second, third], failed(&log), t0)
}

#[test]
fn a_record_joining_a_batch_left_open_keeps_half_its_delivery_timeout() {
    let later = DELIVERY / 2 + Duration::from_millis(500);
    let (ids, failures, t0) = a_record_sent_at(later);
    let at = |id| {
        (failures.iter())
            .find(|f| f.0 == id)
            .unwrap_or_else(|| panic!("{id:?} failed: {failures:?}"))
            .1
    };
    assert_eq!(failures.len(), 3, "{failures:?}");
    // The first two fail at their batches' delivery timeout; the third, sent 5.5 s later
    // into a partition whose open batch was by then older than half the delivery timeout,
    // opened its own batch and is given its whole delivery timeout.
    assert!(at(ids[0]) - t0 < DELIVERY + Duration::from_millis(100));
    assert!(at(ids[1]) - t0 < DELIVERY + Duration::from_millis(100));
    assert!(
        at(ids[2]) - t0 >= later + DELIVERY,
        "the third record failed {:?} after it was sent",
        at(ids[2]) - t0 - later
    );
    for f in &failures {
        assert!(
            matches!(f.2, DeliveryError::DeliveryTimeout { .. }),
            "{f:?}"
        );
    }
}

#[test]
fn a_record_joining_a_young_open_batch_shares_its_timeout() {
    // Sent before the open batch is half its delivery timeout old: it joins it (no batch of
    // its own), and so fails with it, after more than half its delivery timeout.
    let later = DELIVERY / 2 - Duration::from_millis(500);
    let (ids, failures, t0) = a_record_sent_at(later);
    assert_eq!(failures.len(), 3, "{failures:?}");
    let third = failures.iter().find(|f| f.0 == ids[2]).expect("failed");
    let second = failures.iter().find(|f| f.0 == ids[1]).expect("failed");
    assert_eq!(third.1, second.1, "one batch, one outcome time");
    assert!(third.1 - t0 - later >= DELIVERY / 2);
}

/// User-probe finding: with the broker down (every connect refused) records failed
/// "delivery.timeout.ms expired" with no cause, their batches never having been sent. A batch
/// that expires without an error of its own now says what held it back: no connection to its
/// leader (NETWORK_EXCEPTION). Not sent, so not persisted.
#[test]
fn a_batch_never_sent_for_want_of_a_connection_says_so() {
    let mut h = harness(5);
    h.p.send(h.now, record(0)).expect("accepted");
    h.answer_all();
    assert!(failed(&[]).is_empty());
    // The broker goes away: its connection drops and every connect is refused from now on.
    let conn = h.conn.take().expect("connected");
    h.p.handle_disconnected(h.now, conn);
    let t0 = h.now;
    let id = h.p.send(h.now, record(1)).expect("accepted");
    let mut log = Vec::new();
    let mut refused = 0;
    while h.now < t0 + DELIVERY + Duration::from_secs(1) {
        h.now += Duration::from_millis(50);
        h.p.handle_timeout(h.now);
        loop {
            match h.p.poll_output() {
                Output::Wait { .. } => break,
                Output::Connect { conn, .. } => {
                    refused += 1;
                    h.p.handle_connect_failed(h.now, conn);
                }
                Output::Event(e) => log.push((h.now, e)),
                _ => {}
            }
        }
    }
    assert!(refused > 1, "the producer kept trying to connect");
    let failures = failed(&log);
    assert_eq!(failures.len(), 1, "{log:?}");
    let (fid, _, error, persisted) = &failures[0];
    assert_eq!(*fid, id);
    assert_eq!(
        *error,
        DeliveryError::DeliveryTimeout {
            last_error: Some(ErrorCode::NetworkException)
        }
    );
    assert_eq!(*persisted, Persistence::NotPersisted);
}

/// From a review of long-running use: an outage's delivery timeouts fail every buffered
/// record within a drain or two, one event each, and the output queue kept room for all of
/// them for the producer's life (tens of megabytes outside `buffer.memory` after the first
/// long outage). Its room now follows a decaying peak of the drains' sizes: after quiet
/// drains it is back to a few hundred outputs.
#[test]
fn the_output_queue_gives_back_the_room_of_an_outage() {
    let mut h = Harness::new(|c| {
        c.request_timeout = Duration::from_secs(2);
        c.delivery_timeout = Duration::from_secs(5);
    });
    // No answer ever comes: every record waits for its topic's metadata.
    for i in 0..20_000 {
        h.p.send(h.now, Record::new(TOPIC, format!("r{i}")))
            .unwrap();
    }
    h.drain();
    h.now += Duration::from_secs(6);
    h.p.handle_timeout(h.now);
    h.drain();
    let failed = (h.events.iter())
        .filter(|e| matches!(e, Event::Failed { .. }))
        .count();
    assert_eq!(failed, 20_000);
    assert!(room(&h) >= 20_000, "{}", room(&h));
    for _ in 0..200 {
        h.now += Duration::from_millis(100);
        h.p.handle_timeout(h.now);
        h.drain();
    }
    assert!(room(&h) <= 1024, "room for {} outputs kept", room(&h));
}

fn room(h: &Harness) -> usize {
    h.p.output_room()
}
